//! AES-128/AES-256 key expansion and the encryption of a fixed number of
//! blocks at once, interleaved so the AES unit's pipeline stays full.

use core::arch::x86_64::*;

/// Round keys of AES-256 (15); AES-128 uses the first 11.
pub(super) type RoundKeys = [__m128i; 15];

/// One step of the AES-128 schedule (FIPS 197 §5.2): `assist` is
/// AESKEYGENASSIST of the previous round key.
#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
fn expand_step(prev: __m128i, assist: __m128i) -> __m128i {
    let mut k = prev;
    k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
    k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
    k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
    _mm_xor_si128(k, assist)
}

macro_rules! step128 {
    ($prev:expr, $rcon:literal) => {
        expand_step(
            $prev,
            _mm_shuffle_epi32::<0xff>(_mm_aeskeygenassist_si128::<$rcon>($prev)),
        )
    };
}

#[target_feature(enable = "aes,pclmulqdq,avx")]
pub(super) fn expand_128(key: &[u8; 16]) -> RoundKeys {
    let mut rk = [_mm_setzero_si128(); 15];
    rk[0] = super::block::load(key);
    rk[1] = step128!(rk[0], 0x01);
    rk[2] = step128!(rk[1], 0x02);
    rk[3] = step128!(rk[2], 0x04);
    rk[4] = step128!(rk[3], 0x08);
    rk[5] = step128!(rk[4], 0x10);
    rk[6] = step128!(rk[5], 0x20);
    rk[7] = step128!(rk[6], 0x40);
    rk[8] = step128!(rk[7], 0x80);
    rk[9] = step128!(rk[8], 0x1b);
    rk[10] = step128!(rk[9], 0x36);
    rk
}

/// AES-256: even round keys take RotWord+SubWord+Rcon of the previous odd
/// one (AESKEYGENASSIST word 3), odd ones SubWord only (word 2, rcon 0).
macro_rules! step256 {
    ($rk:ident, $i:literal, $rcon:literal) => {
        $rk[$i] = expand_step(
            $rk[$i - 2],
            _mm_shuffle_epi32::<0xff>(_mm_aeskeygenassist_si128::<$rcon>($rk[$i - 1])),
        );
        if $i < 14 {
            $rk[$i + 1] = expand_step(
                $rk[$i - 1],
                _mm_shuffle_epi32::<0xaa>(_mm_aeskeygenassist_si128::<0>($rk[$i])),
            );
        }
    };
}

#[target_feature(enable = "aes,pclmulqdq,avx")]
pub(super) fn expand_256(key: &[u8; 32]) -> RoundKeys {
    let mut rk = [_mm_setzero_si128(); 15];
    let (lo, hi) = key.split_at(16);
    rk[0] = super::block::load(lo.try_into().expect("16 bytes"));
    rk[1] = super::block::load(hi.try_into().expect("16 bytes"));
    step256!(rk, 2, 0x01);
    step256!(rk, 4, 0x02);
    step256!(rk, 6, 0x04);
    step256!(rk, 8, 0x08);
    step256!(rk, 10, 0x10);
    step256!(rk, 12, 0x20);
    step256!(rk, 14, 0x40);
    rk
}

/// Encrypts `W` independent blocks with `ROUNDS` rounds (10 or 14). Each
/// round is applied to all blocks before the next, so the `W` AESENCs of a
/// round are independent and issue back to back.
#[target_feature(enable = "aes,pclmulqdq,avx")]
#[inline]
pub(super) fn encrypt<const ROUNDS: usize, const W: usize>(
    rk: &RoundKeys,
    mut blocks: [__m128i; W],
) -> [__m128i; W] {
    for b in blocks.iter_mut() {
        *b = _mm_xor_si128(*b, rk[0]);
    }
    for k in &rk[1..ROUNDS] {
        for b in blocks.iter_mut() {
            *b = _mm_aesenc_si128(*b, *k);
        }
    }
    for b in blocks.iter_mut() {
        *b = _mm_aesenclast_si128(*b, rk[ROUNDS]);
    }
    blocks
}
