//! Cipher backends behind one small trait, chosen by measurement
//! (see docs/crypto.md).
//!
//! INTERFACE (the ESP engine relies on exactly this; keep it):
//!
//! * [`EspCipher::seal`] and [`EspCipher::open`] get the whole ESP packet,
//!   from the SPI to the end of the ICV:
//!   `SPI(4) | SEQ(4) | IV(iv_len) | payload+padding+padlen+nexthdr | ICV(icv_len)`.
//!   The payload region is already padded to [`crate::Suite::block_align`].
//! * `seq` is the full 64-bit sequence number; `esn` says whether the high 32
//!   bits take part in the AAD (AEAD: SPI || seq-hi || seq-lo, RFC 4106 §5 /
//!   RFC 7634 §3) or are appended to the HMAC input (RFC 4303 §2.2.1).
//! * `seal` writes the IV (AEAD: the 64-bit sequence number, big endian, so a
//!   nonce is never reused under a key; CBC: unpredictable), encrypts the
//!   payload region in place and writes the ICV.
//! * `open` verifies the ICV in constant time *before* decrypting the payload
//!   region in place; on failure it returns [`IcvMismatch`] and the plaintext
//!   must not be trusted.
//! * Keys are zeroized on drop and never printed by `Debug`.

use crate::Suite;

pub mod aead;
#[cfg(feature = "awslc")]
pub mod awslc;
pub mod cbc_hmac;
pub mod fast_gcm;
pub mod integrity;
mod layout;
pub mod ring_aead;
#[cfg(feature = "rustcrypto-aead")]
pub mod rustcrypto_aead;
pub mod rustcrypto_cbc;

pub use layout::{aead_aad, split_esp, EspParts};

/// The ICV did not verify: drop the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IcvMismatch;

/// Keying material of the wrong length for the suite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    pub suite: Suite,
    pub what: &'static str,
    pub expected: usize,
    pub got: usize,
}

impl core::fmt::Display for KeyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} for {} must be {} bytes, got {}",
            self.what, self.suite, self.expected, self.got
        )
    }
}

impl std::error::Error for KeyError {}

/// One direction's cipher state of an SA (keys expanded once).
pub trait EspCipher: Send + Sync {
    /// The suite this cipher implements.
    fn suite(&self) -> Suite;
    /// See the module documentation. `esp.len()` is at least
    /// 8 + iv_len + icv_len and the payload region is block aligned.
    fn seal(&self, esp: &mut [u8], seq: u64, esn: bool);
    /// See the module documentation.
    fn open(&self, esp: &mut [u8], seq: u64, esn: bool) -> Result<(), IcvMismatch>;
}

/// Builds the fastest sound backend for `suite` from config keying material.
/// `key` includes the 4-byte salt for AEAD suites; `auth_key` is empty for them.
///
/// The choice per suite is the measured winner of `benches/aead.rs`
/// (docs/crypto.md has the numbers):
/// * AES-GCM: [`fast_gcm::FastGcm`] (`espgw-aesgcm` for short payloads,
///   ring for long ones).
/// * ChaCha20-Poly1305: ring ([`aead::EspAead`] over [`ring_aead::RingAead`]).
/// * AES-CBC + HMAC: RustCrypto AES-CBC with a random per-SA IV key
///   ([`cbc_hmac::CbcHmac`]) and HMAC from [`integrity`].
pub fn new_cipher(
    suite: Suite,
    key: &[u8],
    auth_key: &[u8],
) -> Result<Box<dyn EspCipher>, KeyError> {
    check_key_lengths(suite, key, auth_key)?;
    Ok(match suite {
        Suite::Aes128Gcm16 | Suite::Aes256Gcm16 => {
            Box::new(aead::EspAead::<fast_gcm::FastGcm>::new(suite, key)?)
        }
        Suite::Chacha20Poly1305 => Box::new(aead::EspAead::<ring_aead::RingAead>::new(suite, key)?),
        Suite::Aes128Sha256 => Box::new(cbc_hmac::CbcHmac::<
            rustcrypto_cbc::Aes128Cbc,
            integrity::RustCryptoHmacSha256,
        >::new(suite, key, auth_key)?),
        Suite::Aes256Sha256 => Box::new(cbc_hmac::CbcHmac::<
            rustcrypto_cbc::Aes256Cbc,
            integrity::RustCryptoHmacSha256,
        >::new(suite, key, auth_key)?),
        Suite::Aes128Sha1 => Box::new(cbc_hmac::CbcHmac::<
            rustcrypto_cbc::Aes128Cbc,
            integrity::RustCryptoHmacSha1,
        >::new(suite, key, auth_key)?),
    })
}

/// Rejects keying material whose length does not match `suite`.
pub fn check_key_lengths(suite: Suite, key: &[u8], auth_key: &[u8]) -> Result<(), KeyError> {
    if key.len() != suite.key_len() {
        return Err(KeyError {
            suite,
            what: "key",
            expected: suite.key_len(),
            got: key.len(),
        });
    }
    if auth_key.len() != suite.auth_key_len() {
        return Err(KeyError {
            suite,
            what: "auth_key",
            expected: suite.auth_key_len(),
            got: auth_key.len(),
        });
    }
    Ok(())
}
