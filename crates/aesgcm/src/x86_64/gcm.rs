//! GCM (NIST SP 800-38D) over the AES and GHASH pieces, for a 96-bit
//! nonce: J0 = nonce || 1, the data is encrypted with counters 2, 3, ..,
//! and the tag is GHASH(AAD, ciphertext, lengths) xor AES_K(J0).
//!
//! Short inputs are the point: the first AES group is J0 plus the first
//! eight counter blocks (128 bytes), so a packet of up to 128 bytes costs
//! one interleaved AES pass (four or six blocks instead of nine when it has
//! at most 48 or 80 bytes), and its GHASH one or two reductions. Later
//! groups are eight blocks, or two or four for a short tail.

use core::arch::x86_64::*;

use zeroize::Zeroize;

use super::aes::{self, RoundKeys};
use super::block;
use super::ghash::{Ghash, HPowers};
use crate::{OpenError, NONCE_LEN, TAG_LEN};

/// Data bytes covered by the first AES group (J0 plus 8 counter blocks).
const FIRST_BYTES: usize = 8 * 16;
/// Data bytes per later AES group.
const GROUP_BYTES: usize = 8 * 16;
/// Inputs up to this many bytes take a four-block first group.
const SMALL_BYTES: usize = 3 * 16;
/// Inputs up to this many bytes take a six-block first group (a 64-byte
/// IP packet's ESP payload region is 68 bytes: five blocks plus J0).
const MEDIUM_BYTES: usize = 5 * 16;

pub(super) struct KeyMaterial {
    pub(super) rk: RoundKeys,
    pub(super) aes256: bool,
    powers: HPowers,
    /// The powers again, descending, for the 512-bit short open.
    pub(super) desc: super::wide::DescPowers,
}

impl Drop for KeyMaterial {
    fn drop(&mut self) {
        self.rk.zeroize();
    }
}

impl KeyMaterial {
    /// `None` unless `key` has 16 or 32 bytes.
    #[target_feature(enable = "aes,pclmulqdq,avx")]
    pub(super) fn new(key: &[u8]) -> Option<Self> {
        let (rk, aes256) = if let Ok(k) = <&[u8; 32]>::try_from(key) {
            (aes::expand_256(k), true)
        } else {
            (aes::expand_128(<&[u8; 16]>::try_from(key).ok()?), false)
        };
        let zero = [_mm_setzero_si128()];
        let h = if aes256 {
            aes::encrypt::<14, 1>(&rk, zero)
        } else {
            aes::encrypt::<10, 1>(&rk, zero)
        };
        let mut h_block = [0u8; 16];
        block::store(&mut h_block, h[0]);
        let powers = HPowers::new(&h_block);
        h_block.zeroize();
        let desc = super::wide::DescPowers::new(powers.ascending(), powers.ninth());
        Some(Self {
            rk,
            aes256,
            powers,
            desc,
        })
    }

    pub(super) fn key_len(&self) -> usize {
        if self.aes256 {
            32
        } else {
            16
        }
    }
}

/// Byte reversal: GCM's byte order <-> POLYVAL's (and the counter's).
#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
pub(super) fn reverse(v: __m128i) -> __m128i {
    let idx = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    _mm_shuffle_epi8(v, idx)
}

/// A block given by its little-endian halves, in POLYVAL order.
#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
fn polyval_order(lo: u64, hi: u64) -> __m128i {
    _mm_set_epi64x(lo.swap_bytes() as i64, hi.swap_bytes() as i64)
}

/// J0 byte-reversed, so its 32-bit counter is lane 0 of 32 and adding to it
/// with `_mm_add_epi32` is GCM's inc32 (mod 2^32).
#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
pub(super) fn counter_base(nonce: &[u8; NONCE_LEN]) -> __m128i {
    // Bytes 0..8, then 8..12: the two stores `esp_nonce` writes, so a nonce
    // built just before the call is forwarded from the store buffer (a
    // load spanning two stores waits until both reach the cache: 18 ns on
    // a 64-byte seal with ESP's salt-then-IV stores; docs/crypto.md, "A
    // freshly built nonce").
    let (head, tail) = nonce.split_at(8);
    let head = u64::from_be_bytes(head.try_into().expect("8 bytes"));
    let tail = u32::from_be_bytes(tail.try_into().expect("4 bytes"));
    _mm_set_epi64x(head as i64, ((u64::from(tail) << 32) | 1) as i64)
}

/// Counter blocks J0+start .. J0+start+W-1, in GCM byte order.
#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
fn counters<const W: usize>(base: __m128i, start: u32) -> [__m128i; W] {
    let mut out = [base; W];
    for (j, c) in out.iter_mut().enumerate() {
        let n = start.wrapping_add(j as u32);
        *c = reverse(_mm_add_epi32(base, _mm_set_epi32(0, 0, 0, n as i32)));
    }
    out
}

/// GHASH's last block: the bit lengths of AAD and ciphertext.
#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
fn length_block(aad_len: usize, ct_len: usize) -> __m128i {
    let bits = |n: usize| (n as u64).wrapping_mul(8) as i64;
    _mm_set_epi64x(bits(aad_len), bits(ct_len))
}

// The loops below are macros rather than functions: rustc refuses
// `#[inline(always)]` on `#[target_feature]` functions, and LLVM leaves
// these out of line, which puts the GHASH state and the keystream in memory
// between calls, which cost a large share of a 64-byte packet's time
// (docs/crypto.md, "Unsafe surface", has the measurement).

/// Absorbs the bytes `$data` into the `Ghash` `$g` in 16-byte blocks, the
/// last zero-padded.
macro_rules! hash_bytes {
    ($g:expr, $data:expr) => {{
        let data: &[u8] = $data;
        let mut blocks = data.chunks_exact(16);
        for b in &mut blocks {
            $g.absorb(reverse(block::load(b.try_into().expect("16 bytes"))));
        }
        let tail = blocks.remainder();
        if !tail.is_empty() {
            let (lo, hi) = block::partial_halves(tail);
            $g.absorb(polyval_order(lo, hi));
        }
    }};
}

/// Encrypts `$chunk` (at most `$ks.len()` blocks) with the keystream `$ks`
/// and absorbs the ciphertext into `$g`.
macro_rules! encrypt_and_hash {
    ($g:expr, $chunk:expr, $ks:expr) => {{
        let chunk: &mut [u8] = $chunk;
        let ks: &[__m128i] = $ks;
        for (b, k) in chunk.chunks_mut(16).zip(ks) {
            if let Ok(full) = <&mut [u8; 16]>::try_from(&mut *b) {
                let ct = _mm_xor_si128(block::load(full), *k);
                block::store(full, ct);
                $g.absorb(reverse(ct));
            } else {
                let (lo, hi) = block::partial_halves(b);
                let (k_lo, k_hi) = block::lanes(*k);
                let (lo, hi) = block::truncate(lo ^ k_lo, hi ^ k_hi, b.len());
                block::store_partial(b, lo, hi);
                $g.absorb(polyval_order(lo, hi));
            }
        }
    }};
}

/// Xors the keystream `$ks` into `$chunk` (at most `$ks.len()` blocks).
macro_rules! xor_keystream {
    ($chunk:expr, $ks:expr) => {{
        let chunk: &mut [u8] = $chunk;
        let ks: &[__m128i] = $ks;
        for (b, k) in chunk.chunks_mut(16).zip(ks) {
            if let Ok(full) = <&mut [u8; 16]>::try_from(&mut *b) {
                block::store(full, _mm_xor_si128(block::load(full), *k));
            } else {
                let (lo, hi) = block::partial_halves(b);
                let (k_lo, k_hi) = block::lanes(*k);
                block::store_partial(b, lo ^ k_lo, hi ^ k_hi);
            }
        }
    }};
}

/// The tag: GHASH (POLYVAL order `s`) in GCM byte order, xor AES_K(J0).
#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
pub(super) fn tag(s: __m128i, ek_j0: __m128i) -> [u8; TAG_LEN] {
    let mut out = [0u8; TAG_LEN];
    block::store(&mut out, _mm_xor_si128(reverse(s), ek_j0));
    out
}

/// Constant-time tag check: the difference is folded into one u64 without
/// branches (a byte-slice `ct_eq` costs more than a 64-byte packet's whole
/// GHASH), then compared with 0 once, the word hidden from the optimizer:
/// no early exit to leak where the tags differ, and only the verdict
/// (public: the packet is dropped or not) decides the branch. subtle's `ct_eq` of the word did the
/// same through an out-of-line call on every packet.
#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
pub(super) fn tags_match(computed: __m128i, expected: &[u8; TAG_LEN]) -> bool {
    let (lo, hi) = block::lanes(computed);
    let (want_lo, want_hi) = block::halves(expected);
    let diff = (lo ^ want_lo) | (hi ^ want_hi);
    // Opaque to the optimizer: `(a ^ b) | (c ^ d) == 0` may otherwise be
    // rewritten as `a == b && c == d`, a branch on the first half alone
    // (an early exit that would tell a forger whether 8 tag bytes matched).
    core::hint::black_box(diff) == 0
}

fn ghash_blocks(aad: &[u8], ct_len: usize) -> usize {
    aad.len().div_ceil(16) + ct_len.div_ceil(16) + 1
}

/// J0 and the keystream of the first `FIRST_BYTES` (fewer blocks for a
/// short `$len`; the unused lanes are zero), for `$r` rounds: nine blocks
/// fit the sixteen XMM registers with a round key to spare.
macro_rules! first_group {
    ($r:expr, $rk:expr, $base:expr, $len:expr) => {{
        let z = _mm_setzero_si128();
        if $len <= SMALL_BYTES {
            let ks = aes::encrypt::<$r, 4>($rk, counters::<4>($base, 0));
            [ks[0], ks[1], ks[2], ks[3], z, z, z, z, z]
        } else if $len <= MEDIUM_BYTES {
            let ks = aes::encrypt::<$r, 6>($rk, counters::<6>($base, 0));
            [ks[0], ks[1], ks[2], ks[3], ks[4], ks[5], z, z, z]
        } else {
            aes::encrypt::<$r, 9>($rk, counters::<9>($base, 0))
        }
    }};
}

/// Keystream for a later chunk of `$len <= GROUP_BYTES` bytes from counter
/// offset `$next`: two or four blocks for a short tail (a 128-byte packet's
/// ESP payload ends 4 bytes past the first group), else eight.
macro_rules! group {
    ($r:expr, $rk:expr, $base:expr, $next:expr, $len:expr) => {{
        let z = _mm_setzero_si128();
        if $len <= 2 * 16 {
            let ks = aes::encrypt::<$r, 2>($rk, counters::<2>($base, $next));
            [ks[0], ks[1], z, z, z, z, z, z]
        } else if $len <= 4 * 16 {
            let ks = aes::encrypt::<$r, 4>($rk, counters::<4>($base, $next));
            [ks[0], ks[1], ks[2], ks[3], z, z, z, z]
        } else {
            aes::encrypt::<$r, 8>($rk, counters::<8>($base, $next))
        }
    }};
}

#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
fn seal_rounds<const R: usize>(
    k: &KeyMaterial,
    nonce: &[u8; NONCE_LEN],
    aad: &[u8],
    buf: &mut [u8],
) -> [u8; TAG_LEN] {
    let len = buf.len();
    let mut g = Ghash::new(&k.powers, ghash_blocks(aad, len));
    hash_bytes!(g, aad);
    let base = counter_base(nonce);
    let (first, rest) = buf.split_at_mut(len.min(FIRST_BYTES));
    let ks = first_group!(R, &k.rk, base, first.len());
    encrypt_and_hash!(g, first, &ks[1..]);
    let mut next = 9u32;
    for chunk in rest.chunks_mut(GROUP_BYTES) {
        let more = group!(R, &k.rk, base, next, chunk.len());
        encrypt_and_hash!(g, chunk, &more);
        next = next.wrapping_add(8);
    }
    g.absorb(length_block(aad.len(), len));
    tag(g.value(), ks[0])
}

#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
fn open_rounds<const R: usize>(
    k: &KeyMaterial,
    nonce: &[u8; NONCE_LEN],
    aad: &[u8],
    buf: &mut [u8],
    expected: &[u8; TAG_LEN],
) -> Result<(), OpenError> {
    let len = buf.len();
    let base = counter_base(nonce);
    // Independent of the hash below, so the two overlap in the pipeline.
    let ks = first_group!(R, &k.rk, base, len.min(FIRST_BYTES));
    let mut g = Ghash::new(&k.powers, ghash_blocks(aad, len));
    hash_bytes!(g, aad);
    hash_bytes!(g, buf);
    g.absorb(length_block(aad.len(), len));
    let computed = _mm_xor_si128(reverse(g.value()), ks[0]);
    if !tags_match(computed, expected) {
        return Err(OpenError);
    }
    let (first, rest) = buf.split_at_mut(len.min(FIRST_BYTES));
    xor_keystream!(first, &ks[1..]);
    let mut next = 9u32;
    for chunk in rest.chunks_mut(GROUP_BYTES) {
        let more = group!(R, &k.rk, base, next, chunk.len());
        xor_keystream!(chunk, &more);
        next = next.wrapping_add(8);
    }
    Ok(())
}

/// Inputs up to this many bytes can be sealed two at a time by
/// [`seal_two`]: each takes a six-block first group (J0 and five counter
/// blocks), and the twelve blocks of the pair go through AES together.
pub(super) const TWO_MAX_BYTES: usize = MEDIUM_BYTES;

/// One packet of a [`seal_two`] pair.
pub(super) type Packet<'a> = (&'a [u8; NONCE_LEN], &'a [u8], &'a mut [u8]);

#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
fn seal_two_rounds<const R: usize>(
    k: &KeyMaterial,
    a: Packet<'_>,
    b: Packet<'_>,
) -> [[u8; TAG_LEN]; 2] {
    // Longer inputs would leave their tail unencrypted: never let one in.
    assert!(a.2.len() <= TWO_MAX_BYTES && b.2.len() <= TWO_MAX_BYTES);
    let (ca, cb) = (
        counters::<6>(counter_base(a.0), 0),
        counters::<6>(counter_base(b.0), 0),
    );
    // One AES pass over both packets' blocks: twelve independent AESENCs
    // per round, where one packet alone has six and waits on their latency.
    let ks = aes::encrypt::<R, 12>(
        &k.rk,
        [
            ca[0], ca[1], ca[2], ca[3], ca[4], ca[5], cb[0], cb[1], cb[2], cb[3], cb[4], cb[5],
        ],
    );
    let mut ga = Ghash::new(&k.powers, ghash_blocks(a.1, a.2.len()));
    let mut gb = Ghash::new(&k.powers, ghash_blocks(b.1, b.2.len()));
    hash_bytes!(ga, a.1);
    hash_bytes!(gb, b.1);
    encrypt_and_hash!(ga, a.2, &ks[1..6]);
    encrypt_and_hash!(gb, b.2, &ks[7..12]);
    ga.absorb(length_block(a.1.len(), a.2.len()));
    gb.absorb(length_block(b.1.len(), b.2.len()));
    [tag(ga.value(), ks[0]), tag(gb.value(), ks[6])]
}

/// Seals two packets of at most [`TWO_MAX_BYTES`] each (the caller checks)
/// in one interleaved pass; the same result as two [`seal`] calls.
#[target_feature(enable = "aes,pclmulqdq,avx")]
pub(super) fn seal_two(k: &KeyMaterial, a: Packet<'_>, b: Packet<'_>) -> [[u8; TAG_LEN]; 2] {
    by_key_size!(k.aes256, seal_two_rounds(k, a, b))
}

/// Encrypts `buf` in place; returns the tag.
#[target_feature(enable = "aes,pclmulqdq,avx")]
pub(super) fn seal(
    k: &KeyMaterial,
    nonce: &[u8; NONCE_LEN],
    aad: &[u8],
    buf: &mut [u8],
) -> [u8; TAG_LEN] {
    by_key_size!(k.aes256, seal_rounds(k, nonce, aad, buf))
}

/// Checks the tag, then decrypts `buf` in place; `buf` is untouched on
/// error.
#[target_feature(enable = "aes,pclmulqdq,avx")]
pub(super) fn open(
    k: &KeyMaterial,
    nonce: &[u8; NONCE_LEN],
    aad: &[u8],
    buf: &mut [u8],
    tag: &[u8; TAG_LEN],
) -> Result<(), OpenError> {
    by_key_size!(k.aes256, open_rounds(k, nonce, aad, buf, tag))
}
