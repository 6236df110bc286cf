//! AES-GCM (NIST SP 800-38D) with a 96-bit nonce and a 128-bit tag, built
//! for short packets: AES-NI for the counter blocks and PCLMULQDQ for GHASH,
//! in one pass over the data with precomputed powers of H so that up to
//! eight GHASH blocks share one reduction.
//!
//! Why it exists: for 64..512-byte ESP payloads ring's AES-GCM spends much
//! of its time outside the cipher (its fused AVX path starts at larger
//! inputs); see docs/crypto.md for the measurement and the threshold the
//! ESP engine uses to choose between the two.
//!
//! Unsafe surface: the arithmetic lives in `#[target_feature]` functions, in
//! which the `core::arch` intrinsics are safe to call, and which read and
//! write memory only through slices and arrays. The only `unsafe` blocks
//! are the calls into those functions, made from methods of a key that can
//! only exist after the CPU features were detected at run time.
//!
//! On targets other than x86_64, [`is_supported`] is false and
//! [`AesGcm::new`] returns `None`.

#![deny(unsafe_op_in_unsafe_fn)]
// The unsafe boundary (see the root Cargo.toml): no `unsafe` anywhere in
// this crate except the x86_64 module below. `deny` and not `forbid`,
// because a `forbid` cannot be lifted by the module's `allow`.
#![deny(unsafe_code)]

// The one module that may use `unsafe`: its `Key` calls the
// `#[target_feature]` functions once the CPU features were detected.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86_64;

use std::sync::atomic::{AtomicBool, Ordering};

/// Bytes of the authentication tag.
pub const TAG_LEN: usize = 16;
/// Bytes of the nonce.
pub const NONCE_LEN: usize = 12;
/// The most plaintext one nonce may encrypt: 2^32 - 2 blocks
/// (NIST SP 800-38D §5.2.1.1), so the 32-bit block counter never wraps.
pub const MAX_LEN: u64 = ((1u64 << 32) - 2) * 16;

/// The tag did not verify (or the input was longer than [`MAX_LEN`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenError;

impl core::fmt::Display for OpenError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("AES-GCM authentication failed")
    }
}

impl std::error::Error for OpenError {}

/// Whether this CPU has the instructions [`AesGcm`] needs (AES-NI,
/// PCLMULQDQ, AVX for the three-operand VEX encoding, and the SSSE3/SSE4.1
/// shuffles and extracts it implies).
pub fn is_supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        x86_64::CpuFeatures::detect().is_some()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The AES-GCM nonce of ESP (RFC 4106 §4): the 4-byte salt, then the
/// 8-byte IV (big endian), written as bytes 0..8 and 8..12.
///
/// Why this and not `salt || iv` copied piece by piece: the nonce is
/// built on the caller's stack just before each seal or open, and the
/// cipher reads it at once; a load that spans two stores cannot be
/// forwarded from the store buffer and waits until both reach the cache.
/// The salt-then-IV stores (0..4, 4..12) cost this crate's 64-byte seal
/// 18 ns that way (its 8-byte load of bytes 0..8 spanned them), and slowed
/// intel-ipsec-mb (which reads all 12 bytes at once) and ring too
/// (docs/crypto.md, "A freshly built nonce"; `benches/short.rs` measures
/// it). This crate reads bytes 0..8 and 8..12, each inside one of these
/// stores.
#[inline]
pub fn esp_nonce(salt: [u8; 4], iv: u64) -> [u8; NONCE_LEN] {
    let head = (u64::from(u32::from_be_bytes(salt)) << 32) | (iv >> 32);
    let mut nonce = [0u8; NONCE_LEN];
    nonce[..8].copy_from_slice(&head.to_be_bytes());
    nonce[8..].copy_from_slice(&(iv as u32).to_be_bytes());
    nonce
}

/// Set when the 512-bit code is turned off ([`allow_512_bit`]).
static NO_512_BIT: AtomicBool = AtomicBool::new(false);

/// Lets keys made from now on use the 512-bit short path where the CPU has
/// it (`true`, the default), or keeps them on the 128-bit path as on a CPU
/// without AVX-512 (`false`). Keys already made keep what they had. For a
/// gateway whose operator caps the vector width (espgw's `[dataplane]
/// max_simd_bitwidth`, as DPDK's `--force-max-simd-bitwidth`: some CPUs
/// lower their clock for 512-bit code), and to measure the code an
/// AVX2-only CPU runs on one that has AVX-512.
pub fn allow_512_bit(allowed: bool) {
    NO_512_BIT.store(!allowed, Ordering::Relaxed);
}

/// Whether [`allow_512_bit`] allows the 512-bit path (the CPU aside).
pub fn is_512_bit_allowed() -> bool {
    !NO_512_BIT.load(Ordering::Relaxed)
}

/// Whether the CPU has what the 512-bit short path needs (AVX-512 F, BW
/// and VL, VAES, VPCLMULQDQ), whatever [`allow_512_bit`] says.
pub fn cpu_has_512_bit() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        x86_64::WideFeatures::cpu_has_them()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether keys made now run the 512-bit short `seal`, `seal_two` and
/// `open` (AVX-512 F, BW and VL, VAES, VPCLMULQDQ): inputs of 49 to 112
/// bytes with AAD up to 16. False when the CPU lacks them or
/// [`allow_512_bit`] turned them off.
pub fn has_wide_open() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        x86_64::WideFeatures::detect().is_some()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// An AES-128-GCM or AES-256-GCM key, expanded once. The round keys and
/// the powers of H are zeroized on drop.
pub struct AesGcm {
    #[cfg(target_arch = "x86_64")]
    key: x86_64::Key,
    #[cfg(not(target_arch = "x86_64"))]
    never: core::convert::Infallible,
}

impl AesGcm {
    /// Expands a 16-byte (AES-128) or 32-byte (AES-256) key. `None` for any
    /// other length or when the CPU lacks the instructions
    /// ([`is_supported`]).
    pub fn new(key: &[u8]) -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            x86_64::Key::new(key).map(|key| Self { key })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = key;
            None
        }
    }

    /// The same key with the 512-bit short `open` turned off, so that the
    /// 128-bit path is what runs (for tests and measurements on CPUs that
    /// would take the 512-bit one).
    #[doc(hidden)]
    pub fn narrow(self) -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            Self {
                key: self.key.narrow(),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self
        }
    }

    /// Whether `seal`, `seal_two` and `open` of inputs of 49 to 112 bytes
    /// (AAD up to 16) run the 512-bit path (AVX-512, VAES, VPCLMULQDQ) with this key.
    #[doc(hidden)]
    pub fn uses_wide_path(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self.key.uses_wide_path()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Bytes of the AES key (16 or 32).
    pub fn key_len(&self) -> usize {
        #[cfg(target_arch = "x86_64")]
        {
            self.key.key_len()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            match self.never {}
        }
    }

    /// Encrypts `buf` in place and returns the tag over `aad` and the
    /// ciphertext.
    ///
    /// # Panics
    /// If `buf` is longer than [`MAX_LEN`] (64 GiB), which GCM cannot
    /// encrypt under one nonce.
    pub fn seal(&self, nonce: &[u8; NONCE_LEN], aad: &[u8], buf: &mut [u8]) -> [u8; TAG_LEN] {
        assert!(
            buf.len() as u64 <= MAX_LEN,
            "AES-GCM input over 2^36-32 bytes"
        );
        #[cfg(target_arch = "x86_64")]
        {
            self.key.seal(nonce, aad, buf)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (nonce, aad, buf);
            match self.never {}
        }
    }

    /// Seals two packets, each `(nonce, aad, buf)`, as two [`AesGcm::seal`]
    /// calls would, and returns their tags. When both inputs are at most 80
    /// bytes (a 64-byte IP packet's ESP payload region is 68) their AES
    /// blocks go through one interleaved pass; otherwise this is two
    /// seals. The ESP engine seals its bursts in such pairs
    /// (`EspCipher::seal_two`, docs/crypto.md).
    ///
    /// # Panics
    /// As [`AesGcm::seal`], if an input is longer than [`MAX_LEN`].
    pub fn seal_two(
        &self,
        a: (&[u8; NONCE_LEN], &[u8], &mut [u8]),
        b: (&[u8; NONCE_LEN], &[u8], &mut [u8]),
    ) -> [[u8; TAG_LEN]; 2] {
        assert!(
            a.2.len() as u64 <= MAX_LEN && b.2.len() as u64 <= MAX_LEN,
            "AES-GCM input over 2^36-32 bytes"
        );
        #[cfg(target_arch = "x86_64")]
        {
            self.key.seal_two(a, b)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (a, b);
            match self.never {}
        }
    }

    /// Verifies `tag` over `aad` and the ciphertext in `buf` (in constant
    /// time), and only then decrypts `buf` in place. On error `buf` is left
    /// as it was (ciphertext).
    pub fn open(
        &self,
        nonce: &[u8; NONCE_LEN],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), OpenError> {
        if buf.len() as u64 > MAX_LEN {
            return Err(OpenError);
        }
        #[cfg(target_arch = "x86_64")]
        {
            self.key.open(nonce, aad, buf, tag)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (nonce, aad, buf, tag);
            match self.never {}
        }
    }
}

impl core::fmt::Debug for AesGcm {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AesGcm")
            .field("key_bits", &(self.key_len() * 8))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod nonce_tests {
    use super::esp_nonce;

    /// `esp_nonce` is RFC 4106's salt || IV (big endian), whatever stores
    /// it writes them with.
    #[test]
    fn esp_nonce_is_the_salt_then_the_big_endian_iv() {
        for salt in [[0u8; 4], [0xde, 0xad, 0xbe, 0xef], [0xff; 4]] {
            for iv in [
                0,
                1,
                0xffff_ffff,
                1 << 32,
                0x0102_0304_0506_0708,
                0x8000_0000_0000_0001,
                u64::MAX,
            ] {
                let mut want = [0u8; 12];
                want[..4].copy_from_slice(&salt);
                want[4..].copy_from_slice(&iv.to_be_bytes());
                assert_eq!(esp_nonce(salt, iv), want, "salt {salt:02x?} iv {iv:#x}");
            }
        }
    }
}
