//! Cipher backends behind one small trait, chosen by measurement
//! (see docs/crypto.md) in one place: [`provider`], which also lets tests
//! force each backend.
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
mod hmac_md;
pub mod integrity;
pub mod ipsec_mb_aead;
mod layout;
pub mod provider;
pub mod ring_aead;
#[cfg(feature = "rustcrypto-aead")]
pub mod rustcrypto_aead;
pub mod rustcrypto_cbc;

pub use layout::{aead_aad, split_esp, EspParts};
pub use provider::{new_cipher_with, Backend, BackendError, Implementation};

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
    /// Seals two packets, each `(esp, seq)`, exactly as two
    /// [`EspCipher::seal`] calls would. The engine hands a burst's packets
    /// over in pairs so that a backend that interleaves two short packets
    /// in one pass (`SplitGcm`, docs/crypto.md) can; the default is two
    /// seals.
    fn seal_two(&self, a: (&mut [u8], u64), b: (&mut [u8], u64), esn: bool) {
        self.seal(a.0, a.1, esn);
        self.seal(b.0, b.1, esn);
    }
    /// See the module documentation.
    fn open(&self, esp: &mut [u8], seq: u64, esn: bool) -> Result<(), IcvMismatch>;
    /// The code that seals and opens a packet whose payload region (between
    /// IV and ICV) is `payload_len` bytes: the same routing `seal` and
    /// `open` take, so tests can tell that a forced backend was not
    /// replaced. `None` for ciphers outside this module (the engine's test
    /// cipher).
    fn implementation(&self, payload_len: usize) -> Option<Implementation> {
        let _ = payload_len;
        None
    }
}

/// Builds the fastest sound backend for `suite` from config keying material.
/// `key` includes the 4-byte salt for AEAD suites; `auth_key` is empty for them.
///
/// The backend is [`provider::choose`]'s (the one table, with the reasons
/// in docs/crypto.md):
/// * AES-GCM: [`fast_gcm::FastGcm`] (`espgw-aesgcm` for short payloads,
///   ring for long ones) where the CPU has AES-NI, PCLMULQDQ and AVX; ring
///   otherwise.
/// * AES-GCM on a CPU with AVX-512, VAES and VPCLMULQDQ:
///   [`fast_gcm::FastGcmIpsecMb`] (`espgw-aesgcm` for short payloads,
///   intel-ipsec-mb for long ones).
/// * ChaCha20-Poly1305: intel-ipsec-mb ([`ipsec_mb_aead::IpsecMbAead`]) on
///   such a CPU, ring ([`ring_aead::RingAead`]) elsewhere.
/// * AES-CBC + HMAC: RustCrypto AES-CBC with a random per-SA IV key
///   ([`cbc_hmac::CbcHmac`]) and HMAC from [`integrity`].
pub fn new_cipher(
    suite: Suite,
    key: &[u8],
    auth_key: &[u8],
) -> Result<Box<dyn EspCipher>, KeyError> {
    check_key_lengths(suite, key, auth_key)?;
    let backend = provider::choose(suite, provider::Cpu::detected());
    match provider::new_cipher_with(backend, suite, key, auth_key) {
        Ok(cipher) => Ok(cipher),
        Err(provider::BackendError::Key(e)) => Err(e),
        // `choose` picks only a backend that serves the suite and runs on
        // this CPU, for every suite on either CPU (provider's tests).
        Err(other) => unreachable!("provider::choose broke its promise: {other}"),
    }
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
