//! GHASH with PCLMULQDQ, computed as POLYVAL (RFC 8452 appendix A):
//! GHASH(H, X_1..X_n) = ByteReverse(POLYVAL(mulX_POLYVAL(ByteReverse(H)),
//! ByteReverse(X_1), .., ByteReverse(X_n))). In POLYVAL's bit order a
//! field element is a plain little-endian 128-bit polynomial, so carry-less
//! products need no bit reflection, and POLYVAL's multiplication
//! a*b*x^-128 is a Montgomery product: two more CLMULs reduce it.
//!
//! Aggregated reduction: with P_i = H^i x^-128(i-1) (the i-th power in that
//! Montgomery form), Horner's rule over a group of k blocks becomes
//! (S + X_1)*P_k + X_2*P_(k-1) + .. + X_k*P_1 (times x^-128), so the k
//! unreduced 256-bit products are summed and reduced once.

use core::arch::x86_64::*;

use zeroize::Zeroize;

/// Blocks per group, i.e. precomputed powers of H.
pub(super) const POWERS: usize = 8;

/// x^128 = x^127 + x^126 + x^121 + 1 mod POLYVAL's polynomial; the high
/// lane is what the Montgomery reduction multiplies by.
const POLY: u128 = 0xc200_0000_0000_0000_0000_0000_0000_0001;

/// The powers of the hash key.
pub(super) struct HPowers {
    /// `h[i]` = P_(i+1).
    h: [__m128i; POWERS],
    /// Low lane: high lane ^ low lane of `h[i]` (Karatsuba's middle term).
    folded: [__m128i; POWERS],
}

impl Drop for HPowers {
    fn drop(&mut self) {
        self.h.zeroize();
        self.folded.zeroize();
    }
}

/// Both lanes of `x` xored into the low lane.
#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
fn fold(x: __m128i) -> __m128i {
    _mm_xor_si128(x, _mm_shuffle_epi32::<0x4e>(x))
}

/// An unreduced sum of 256-bit products, Karatsuba form.
#[derive(Clone, Copy)]
struct Wide {
    lo: __m128i,
    mid: __m128i,
    hi: __m128i,
}

#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
fn product(x: __m128i, h: __m128i, h_folded: __m128i) -> Wide {
    Wide {
        lo: _mm_clmulepi64_si128::<0x00>(x, h),
        mid: _mm_clmulepi64_si128::<0x00>(fold(x), h_folded),
        hi: _mm_clmulepi64_si128::<0x11>(x, h),
    }
}

#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
fn add(a: Wide, b: Wide) -> Wide {
    Wide {
        lo: _mm_xor_si128(a.lo, b.lo),
        mid: _mm_xor_si128(a.mid, b.mid),
        hi: _mm_xor_si128(a.hi, b.hi),
    }
}

/// Montgomery reduction: the 256-bit `w` times x^-128, mod POLYVAL's
/// polynomial (the GFMUL reduction of Gueron-Langley-Lindell's AES-GCM-SIV
/// code: two folds by the polynomial's high lane).
#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
fn reduce(w: Wide) -> __m128i {
    reduce_schoolbook(w.lo, _mm_xor_si128(w.mid, _mm_xor_si128(w.lo, w.hi)), w.hi)
}

/// [`reduce`] of a product given as its low, middle (both cross terms
/// xored: schoolbook, not Karatsuba's) and high 128-bit parts.
#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
pub(super) fn reduce_schoolbook(lo: __m128i, mid: __m128i, hi: __m128i) -> __m128i {
    let lo = _mm_xor_si128(lo, _mm_slli_si128::<8>(mid));
    let hi = _mm_xor_si128(hi, _mm_srli_si128::<8>(mid));
    let poly = _mm_set_epi64x((POLY >> 64) as i64, POLY as i64);
    let t = _mm_clmulepi64_si128::<0x10>(lo, poly);
    let lo = _mm_xor_si128(_mm_shuffle_epi32::<0x4e>(lo), t);
    let t = _mm_clmulepi64_si128::<0x10>(lo, poly);
    let lo = _mm_xor_si128(_mm_shuffle_epi32::<0x4e>(lo), t);
    _mm_xor_si128(hi, lo)
}

/// POLYVAL's product a*b*x^-128.
#[target_feature(enable = "aes,pclmulqdq,avx")]
fn mul(a: __m128i, b: __m128i) -> __m128i {
    reduce(product(a, b, fold(b)))
}

impl HPowers {
    /// P_1..P_8, ascending.
    pub(super) fn ascending(&self) -> &[__m128i; POWERS] {
        &self.h
    }

    /// P_9 (the wide path's longest group has nine blocks).
    #[target_feature(enable = "aes,pclmulqdq,avx")]
    pub(super) fn ninth(&self) -> __m128i {
        mul(self.h[POWERS - 1], self.h[0])
    }

    /// From H = AES_K(0^128), in GCM's byte order.
    #[target_feature(enable = "aes,pclmulqdq,avx")]
    pub(super) fn new(h_block: &[u8; 16]) -> Self {
        // ByteReverse, read little endian, is the big-endian value.
        let mut v = u128::from_be_bytes(*h_block);
        // mulX_POLYVAL, without a branch on the secret top bit.
        let carry = v >> 127;
        let mut p1 = (v << 1) ^ (POLY & 0u128.wrapping_sub(carry));
        let h1 = _mm_set_epi64x((p1 >> 64) as i64, p1 as i64);
        v.zeroize();
        p1.zeroize();
        let mut h = [h1; POWERS];
        for i in 1..POWERS {
            h[i] = mul(h[i - 1], h1);
        }
        let mut folded = h;
        for f in folded.iter_mut() {
            *f = fold(*f);
        }
        Self { h, folded }
    }
}

/// A running GHASH whose total number of blocks is known up front, so the
/// blocks are grouped by eight with one reduction per group.
pub(super) struct Ghash<'k> {
    powers: &'k HPowers,
    /// The reduced value after the last complete group.
    acc: __m128i,
    /// Products of the current group so far.
    sum: Wide,
    /// Blocks still to come in the current group; 0 between groups.
    in_group: usize,
    /// Blocks still to come in total.
    left: usize,
}

impl<'k> Ghash<'k> {
    #[target_feature(enable = "aes,pclmulqdq,avx")]
    #[inline]
    pub(super) fn new(powers: &'k HPowers, blocks: usize) -> Self {
        let zero = _mm_setzero_si128();
        Self {
            powers,
            acc: zero,
            sum: Wide {
                lo: zero,
                mid: zero,
                hi: zero,
            },
            in_group: 0,
            left: blocks,
        }
    }

    /// Absorbs one block, already byte-reversed into POLYVAL order. Absorbing
    /// more blocks than announced in `new` starts another group (still a
    /// correct hash of what came, which the caller never needs).
    #[target_feature(enable = "aes,pclmulqdq,avx")]
    #[inline]
    pub(super) fn absorb(&mut self, x: __m128i) {
        let p = self.powers;
        let mut x = x;
        if self.in_group == 0 {
            self.in_group = self.left.clamp(1, POWERS);
            x = _mm_xor_si128(x, self.acc);
            let i = (self.in_group - 1) % POWERS;
            self.sum = product(x, p.h[i], p.folded[i]);
        } else {
            let i = (self.in_group - 1) % POWERS;
            self.sum = add(self.sum, product(x, p.h[i], p.folded[i]));
        }
        self.in_group -= 1;
        self.left = self.left.saturating_sub(1);
        if self.in_group == 0 {
            self.acc = reduce(self.sum);
        }
    }

    /// The hash in POLYVAL order (byte-reverse it for GHASH's).
    pub(super) fn value(&self) -> __m128i {
        self.acc
    }
}
