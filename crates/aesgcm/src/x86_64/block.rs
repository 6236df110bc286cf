//! Moving 16-byte blocks between byte slices and registers without raw
//! pointers: the halves go through `u64::from_le_bytes`/`to_le_bytes`, which
//! the compiler turns into single vector loads and stores.

use core::arch::x86_64::*;

/// The block in memory order (lane 0 = bytes 0..8, little endian).
#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
pub(super) fn load(b: &[u8; 16]) -> __m128i {
    let (lo, hi) = halves(b);
    _mm_set_epi64x(hi as i64, lo as i64)
}

/// The 16 bytes of `v` in memory order.
#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
pub(super) fn store(out: &mut [u8; 16], v: __m128i) {
    let lo = _mm_cvtsi128_si64(v) as u64;
    let hi = _mm_extract_epi64::<1>(v) as u64;
    let (a, b) = out.split_at_mut(8);
    a.copy_from_slice(&lo.to_le_bytes());
    b.copy_from_slice(&hi.to_le_bytes());
}

/// Lanes of `v` as two little-endian u64s (bytes 0..8, bytes 8..16).
#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
pub(super) fn lanes(v: __m128i) -> (u64, u64) {
    (
        _mm_cvtsi128_si64(v) as u64,
        _mm_extract_epi64::<1>(v) as u64,
    )
}

/// The two little-endian halves of a full block.
#[inline]
pub(super) fn halves(b: &[u8; 16]) -> (u64, u64) {
    let (lo, hi) = b.split_at(8);
    (
        u64::from_le_bytes(lo.try_into().expect("8 bytes")),
        u64::from_le_bytes(hi.try_into().expect("8 bytes")),
    )
}

/// The little-endian halves of a block of `b.len() < 16` bytes followed by
/// zeros: GCM pads its last partial block with zeros.
#[inline]
pub(super) fn partial_halves(b: &[u8]) -> (u64, u64) {
    debug_assert!(b.len() < 16);
    if b.len() > 8 {
        let (lo, hi) = b.split_at(8);
        (read_le(lo), read_le(hi))
    } else {
        (read_le(b), 0)
    }
}

/// Writes the first `out.len() < 16` bytes of the block whose halves are
/// `lo`, `hi`.
#[inline]
pub(super) fn store_partial(out: &mut [u8], lo: u64, hi: u64) {
    debug_assert!(out.len() < 16);
    if out.len() > 8 {
        let (a, b) = out.split_at_mut(8);
        a.copy_from_slice(&lo.to_le_bytes());
        write_le(b, hi);
    } else {
        write_le(out, lo);
    }
}

/// `v` with every byte at index `n` (< 8) or above cleared.
#[inline]
fn keep_bytes(v: u64, n: usize) -> u64 {
    if n >= 8 {
        v
    } else {
        v & ((1u64 << (8 * n)) - 1)
    }
}

/// Zeroes the bytes from `n` (< 16) on of the block whose halves are given.
#[inline]
pub(super) fn truncate(lo: u64, hi: u64, n: usize) -> (u64, u64) {
    if n > 8 {
        (lo, keep_bytes(hi, n - 8))
    } else {
        (keep_bytes(lo, n), 0)
    }
}

/// Little-endian value of up to 8 bytes, in 4/2/1-byte pieces (a
/// variable-length copy into a buffer would call memcpy).
#[inline]
fn read_le(b: &[u8]) -> u64 {
    debug_assert!(b.len() <= 8);
    let mut v = 0u64;
    let mut at = 0;
    let mut rest = b;
    if let Some((four, tail)) = rest.split_first_chunk::<4>() {
        if rest.len() == 8 {
            return u64::from_le_bytes(rest.try_into().expect("8 bytes"));
        }
        v |= u64::from(u32::from_le_bytes(*four));
        at = 32;
        rest = tail;
    }
    if let Some((two, tail)) = rest.split_first_chunk::<2>() {
        v |= u64::from(u16::from_le_bytes(*two)) << at;
        at += 16;
        rest = tail;
    }
    if let Some(&one) = rest.first() {
        v |= u64::from(one) << at;
    }
    v
}

/// Writes the low `out.len() <= 8` bytes of `v`, little endian, in
/// 4/2/1-byte pieces like [`read_le`].
#[inline]
fn write_le(out: &mut [u8], v: u64) {
    debug_assert!(out.len() <= 8);
    let bytes = v.to_le_bytes();
    if let Ok(all) = <&mut [u8; 8]>::try_from(&mut *out) {
        *all = bytes;
        return;
    }
    let n = out.len();
    let mut at = 0;
    if n - at >= 4 {
        out[at..at + 4].copy_from_slice(&bytes[at..at + 4]);
        at += 4;
    }
    if n - at >= 2 {
        out[at..at + 2].copy_from_slice(&bytes[at..at + 2]);
        at += 2;
    }
    if n > at {
        out[at] = bytes[at];
    }
}
