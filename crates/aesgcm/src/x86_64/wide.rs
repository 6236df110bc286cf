//! `open` and `seal` of a short input (49 to 112 bytes, AAD at most 16: a
//! 64-byte IP packet's ESP payload region is 68) on 512-bit registers, for
//! CPUs with AVX-512 (F, BW, VL), VAES and VPCLMULQDQ: J0 and the seven
//! counter blocks go through AES as two ZMM registers (22 AESENCs for
//! AES-128 where the XMM path issues 66 for a 68-byte input), the GHASH
//! products as three ZMM multiplies (data blocks 1-4, blocks 5-7, AAD and
//! the lengths: 12 carry-less multiplies where the XMM path does 21 for
//! 68 bytes), and the data is read and written with byte masks instead
//! of block by block. Same result as `gcm::open` (checked
//! against it for every length and against ring, the known answers and
//! Wycheproof: tests/differential_ring.rs and the crate's tests).
//!
//! GHASH as in `ghash.rs` (POLYVAL order, Montgomery powers P_i): the
//! k + 2 blocks (AAD, k <= 7 data blocks, lengths) form one group, block i
//! of it multiplied by P_(k+3-i) (up to P_9), one reduction. Products are schoolbook (lo, hi
//! and both cross terms), summed lane-wise, folded to 128 bits, reduced.

use core::arch::x86_64::*;

use zeroize::Zeroize;

use super::aes::RoundKeys;
use super::gcm::KeyMaterial;
use super::{gcm, ghash};
use crate::{OpenError, NONCE_LEN, TAG_LEN};

/// Inputs this path takes: longer than 48 bytes (below, the 128-bit path's
/// four-block pass is faster: benches/short.rs with this limit set to 1
/// measured this path's open at 0.75-0.79x of it at 16 bytes, 0.90-0.94x
/// at 48, 1.13-1.25x at 64; bench/results/...-s10-wide-min1-short.txt),
/// at most 112 (seven blocks: J0 and their counters fill two ZMM
/// registers).
pub(super) const MIN_BYTES: usize = 49;
/// Longest input (and AAD) this path takes.
pub(super) const MAX_BYTES: usize = 112;
pub(super) const MAX_AAD: usize = 16;

/// The hash key's powers in descending order with zero padding, so that
/// four consecutive ones load as one ZMM: `desc[t]` = P_(9-t) for t < 9,
/// zero beyond.
pub(super) struct DescPowers {
    desc: [__m128i; 16],
}

impl Drop for DescPowers {
    fn drop(&mut self) {
        self.desc.zeroize();
    }
}

impl DescPowers {
    /// From the ascending powers P_1..P_8 and P_9.
    #[target_feature(enable = "aes,pclmulqdq,avx")]
    pub(super) fn new(ascending: &[__m128i; 8], ninth: __m128i) -> Self {
        let mut desc = [_mm_setzero_si128(); 16];
        desc[0] = ninth;
        for (t, d) in desc.iter_mut().skip(1).take(8).enumerate() {
            *d = ascending[7 - t];
        }
        Self { desc }
    }
}

/// Byte reversal within each 128-bit lane.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,aes,pclmulqdq,avx")]
#[inline]
fn reverse_lanes(v: __m512i) -> __m512i {
    let idx = _mm512_broadcast_i32x4(_mm_set_epi8(
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    ));
    _mm512_shuffle_epi8(v, idx)
}

/// Byte mask of the first `n` (<= 64) bytes.
#[inline]
fn mask64(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// Xor of the four 128-bit lanes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,aes,pclmulqdq,avx")]
#[inline]
fn fold_lanes(v: __m512i) -> __m128i {
    let y = _mm256_xor_si256(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v));
    _mm_xor_si128(_mm256_castsi256_si128(y), _mm256_extracti128_si256::<1>(y))
}

/// J0 and the counter blocks J0+1 .. J0+7 through AES: `a` = E(J0), ks1,
/// ks2, ks3; `b` = ks4 .. ks7.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,aes,pclmulqdq,avx")]
#[inline]
fn keystream<const R: usize>(rk: &RoundKeys, nonce: &[u8; NONCE_LEN]) -> (__m512i, __m512i) {
    // As `gcm::counters`: the 32-bit counter in lane order, added to,
    // reversed into GCM byte order.
    let base = _mm512_broadcast_i32x4(gcm::counter_base(nonce));
    let c0 = reverse_lanes(_mm512_add_epi32(
        base,
        _mm512_set_epi32(0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0),
    ));
    let c1 = reverse_lanes(_mm512_add_epi32(
        base,
        _mm512_set_epi32(0, 0, 0, 7, 0, 0, 0, 6, 0, 0, 0, 5, 0, 0, 0, 4),
    ));
    let key = _mm512_broadcast_i32x4(rk[0]);
    let (mut a, mut b) = (_mm512_xor_si512(c0, key), _mm512_xor_si512(c1, key));
    for r in &rk[1..R] {
        let key = _mm512_broadcast_i32x4(*r);
        a = _mm512_aesenc_epi128(a, key);
        b = _mm512_aesenc_epi128(b, key);
    }
    let key = _mm512_broadcast_i32x4(rk[R]);
    (
        _mm512_aesenclast_epi128(a, key),
        _mm512_aesenclast_epi128(b, key),
    )
}

/// An input of at most 128 bytes as two ZMM registers: its first (up to)
/// 64 bytes and the rest, each under a byte mask (zero beyond the end when
/// loaded, nothing beyond it written when stored).
struct Masked {
    first: usize,
    lo: u64,
    hi: u64,
}

impl Masked {
    fn of(len: usize) -> Self {
        let first = len.min(64);
        Masked {
            first,
            lo: mask64(first),
            hi: mask64(len - first),
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,aes,pclmulqdq,avx")]
    #[inline]
    fn load(&self, buf: &[u8]) -> (__m512i, __m512i) {
        debug_assert!(self.first <= buf.len());
        // SAFETY: a masked load touches only the bytes its mask selects
        // (AVX-512 suppresses faults on the others): `Masked::of(buf.len())`
        // selects bytes inside `buf` only.
        unsafe {
            (
                _mm512_maskz_loadu_epi8(self.lo, buf.as_ptr() as *const i8),
                _mm512_maskz_loadu_epi8(self.hi, buf.as_ptr().add(self.first) as *const i8),
            )
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,aes,pclmulqdq,avx")]
    #[inline]
    fn store(&self, buf: &mut [u8], lo: __m512i, hi: __m512i) {
        debug_assert!(self.first <= buf.len());
        // SAFETY: a masked store writes only the bytes its mask selects,
        // inside `buf` as in `load`.
        unsafe {
            _mm512_mask_storeu_epi8(buf.as_mut_ptr() as *mut i8, self.lo, lo);
            _mm512_mask_storeu_epi8(buf.as_mut_ptr().add(self.first) as *mut i8, self.hi, hi);
        }
    }
}

/// GHASH (POLYVAL order) of `aad` and the `len`-byte ciphertext whose
/// blocks 1-4 are `c` and blocks 5-7 are `c_hi`, both zero beyond `len`:
/// AAD x P_(k+2), block j x P_(k+2-j), lengths x P_1, for k = ceil(len /
/// 16).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,aes,pclmulqdq,avx")]
#[inline]
fn ghash(powers: &DescPowers, aad: &[u8], c: __m512i, c_hi: __m512i, len: usize) -> __m128i {
    let k = len.div_ceil(16);
    // SAFETY: a masked load touches only the bytes its mask selects
    // (AVX-512 suppresses faults on the others), all inside `aad`.
    let ad = unsafe { _mm_maskz_loadu_epi8(mask64(aad.len()) as u16, aad.as_ptr() as *const i8) };
    let bits = |n: usize| (n as u64).wrapping_mul(8) as i64;
    let lengths = _mm_set_epi64x(bits(aad.len()), bits(len));
    let p = &powers.desc;
    // Block j's power P_(k+2-j) is desc[7-k+j]: blocks 1-4 from desc[8-k],
    // 5-8 from desc[12-k] (block 8 is zero; 12 - k + 3 <= 15 for any k).
    // SAFETY: both loads read four entries of the 16 of `desc`.
    let (h1, h2) = unsafe {
        (
            _mm512_loadu_si512(p.as_ptr().add(8 - k) as *const _),
            _mm512_loadu_si512(p.as_ptr().add(12 - k) as *const _),
        )
    };
    let x1 = reverse_lanes(c);
    let x2 = reverse_lanes(c_hi);
    // AAD reversed in lane 0, the lengths (already in POLYVAL order) in
    // lane 1, zero beyond; their powers P_(k+2) = desc[7-k] and P_1.
    let rest = _mm512_inserti32x4::<1>(_mm512_zextsi128_si512(ad), lengths);
    let x3 = _mm512_mask_blend_epi64(0b0000_1100, reverse_lanes(rest), rest);
    let h3 = _mm512_inserti32x4::<1>(_mm512_zextsi128_si512(p[7 - k]), p[8]);
    let mul = |x: __m512i, h: __m512i| {
        (
            _mm512_clmulepi64_epi128::<0x00>(x, h),
            _mm512_xor_si512(
                _mm512_clmulepi64_epi128::<0x01>(x, h),
                _mm512_clmulepi64_epi128::<0x10>(x, h),
            ),
            _mm512_clmulepi64_epi128::<0x11>(x, h),
        )
    };
    let (l1, m1, u1) = mul(x1, h1);
    let (l2, m2, u2) = mul(x2, h2);
    let (l3, m3, u3) = mul(x3, h3);
    let xor3 = |a, b, c| _mm512_ternarylogic_epi64::<0x96>(a, b, c);
    ghash::reduce_schoolbook(
        fold_lanes(xor3(l1, l2, l3)),
        fold_lanes(xor3(m1, m2, m3)),
        fold_lanes(xor3(u1, u2, u3)),
    )
}

/// The keystream of data blocks 1-4 (`a`'s lanes 1-3 and `b`'s lane 0)
/// and of blocks 5-7 (`b`'s lanes 1-3, zero beside).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,aes,pclmulqdq,avx")]
#[inline]
fn data_keystream(a: __m512i, b: __m512i) -> (__m512i, __m512i) {
    (
        _mm512_alignr_epi64::<2>(b, a),
        _mm512_alignr_epi64::<2>(_mm512_setzero_si512(), b),
    )
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,aes,pclmulqdq,avx")]
#[inline]
fn open_rounds<const R: usize>(
    k: &KeyMaterial,
    nonce: &[u8; NONCE_LEN],
    aad: &[u8],
    buf: &mut [u8],
    expected: &[u8; TAG_LEN],
) -> Result<(), OpenError> {
    let len = buf.len();
    // Never past the blocks this path computes.
    assert!(len <= MAX_BYTES && aad.len() <= MAX_AAD);
    let (a, b) = keystream::<R>(&k.rk, nonce);
    let masked = Masked::of(len);
    let (d, d_hi) = masked.load(buf);
    let s = ghash(&k.desc, aad, d, d_hi, len);
    let computed = _mm_xor_si128(gcm::reverse(s), _mm512_castsi512_si128(a));
    if !gcm::tags_match(computed, expected) {
        return Err(OpenError);
    }
    let (ks, ks_hi) = data_keystream(a, b);
    masked.store(buf, _mm512_xor_si512(d, ks), _mm512_xor_si512(d_hi, ks_hi));
    Ok(())
}

/// Encrypts `buf` in place with the keystream `(a, b)` of its nonce
/// ([`keystream`]), returns the tag.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,aes,pclmulqdq,avx")]
#[inline]
fn seal_with(
    powers: &DescPowers,
    (a, b): (__m512i, __m512i),
    aad: &[u8],
    buf: &mut [u8],
) -> [u8; TAG_LEN] {
    let len = buf.len();
    // Never past the blocks this path computes.
    assert!(len <= MAX_BYTES && aad.len() <= MAX_AAD);
    let masked = Masked::of(len);
    let (ks, ks_hi) = data_keystream(a, b);
    let (d, d_hi) = masked.load(buf);
    // The ciphertext, zero beyond the end (the keystream is not).
    let c = _mm512_maskz_mov_epi8(masked.lo, _mm512_xor_si512(d, ks));
    let c_hi = _mm512_maskz_mov_epi8(masked.hi, _mm512_xor_si512(d_hi, ks_hi));
    masked.store(buf, c, c_hi);
    gcm::tag(ghash(powers, aad, c, c_hi, len), _mm512_castsi512_si128(a))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,aes,pclmulqdq,avx")]
#[inline]
fn seal_rounds<const R: usize>(
    k: &KeyMaterial,
    nonce: &[u8; NONCE_LEN],
    aad: &[u8],
    buf: &mut [u8],
) -> [u8; TAG_LEN] {
    seal_with(&k.desc, keystream::<R>(&k.rk, nonce), aad, buf)
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,aes,pclmulqdq,avx")]
#[inline]
fn seal_two_rounds<const R: usize>(
    k: &KeyMaterial,
    a: super::gcm::Packet<'_>,
    b: super::gcm::Packet<'_>,
) -> [[u8; TAG_LEN]; 2] {
    // Two independent chains, one after the other: the out-of-order
    // core overlaps them. (Both keystreams in one pass of four ZMM
    // AESENC chains measured slower: docs/crypto.md.)
    [
        seal_rounds::<R>(k, a.0, a.1, a.2),
        seal_rounds::<R>(k, b.0, b.1, b.2),
    ]
}

/// Seals two packets (each at most [`MAX_BYTES`], AAD at most
/// [`MAX_AAD`]) as two `gcm::seal` calls would.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,aes,pclmulqdq,avx")]
pub(super) fn seal_two(
    k: &KeyMaterial,
    a: super::gcm::Packet<'_>,
    b: super::gcm::Packet<'_>,
) -> [[u8; TAG_LEN]; 2] {
    by_key_size!(k.aes256, seal_two_rounds(k, a, b))
}

/// Encrypts `buf` (at most [`MAX_BYTES`], AAD at most [`MAX_AAD`]) in
/// place and returns the tag, as `gcm::seal` does.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,aes,pclmulqdq,avx")]
pub(super) fn seal(
    k: &KeyMaterial,
    nonce: &[u8; NONCE_LEN],
    aad: &[u8],
    buf: &mut [u8],
) -> [u8; TAG_LEN] {
    by_key_size!(k.aes256, seal_rounds(k, nonce, aad, buf))
}

/// Checks the tag, then decrypts `buf` (at most [`MAX_BYTES`], AAD at most
/// [`MAX_AAD`]) in place; `buf` is untouched on error.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,vaes,vpclmulqdq,aes,pclmulqdq,avx")]
pub(super) fn open(
    k: &KeyMaterial,
    nonce: &[u8; NONCE_LEN],
    aad: &[u8],
    buf: &mut [u8],
    tag: &[u8; TAG_LEN],
) -> Result<(), OpenError> {
    by_key_size!(k.aes256, open_rounds(k, nonce, aad, buf, tag))
}
