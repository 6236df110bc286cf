//! Errors of the cryptographic layer.

use std::fmt;

/// A cryptographic operation that could not be done. None carries key
/// material; the engine maps them to notifications or counted drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CryptoError {
    /// prf+ was asked for more than 255 blocks (RFC 7296 section 2.13).
    PrfPlusTooLong {
        /// Bytes requested.
        requested: usize,
    },
    /// A key of the wrong length for its algorithm.
    KeyLength {
        /// Bytes expected.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// A KE payload's public value of the wrong length for its group.
    PublicValueLength {
        /// Bytes expected.
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// A public value that is not a valid group element (not on the curve,
    /// 0, 1 or p-1 for MODP), or an all-zero X25519 result.
    InvalidPublicValue,
    /// A private value the group cannot use (zero, too long, or an ECP
    /// scalar not below the group order).
    InvalidPrivateValue,
    /// The random source failed.
    Random,
    /// The SK payload is too short for IV, one block and ICV, or its
    /// ciphertext is not a whole number of blocks.
    SkMalformed,
    /// The SK payload's integrity check or AEAD tag did not verify.
    IntegrityCheckFailed,
    /// The decrypted Pad Length points before the start of the plaintext.
    BadPadding,
    /// An AEAD cipher given an integrity algorithm, or a CBC cipher given
    /// none.
    SuiteMismatch,
    /// The primitive refused the operation (should not happen with valid
    /// keys; reported rather than panicking).
    Internal,
}

impl fmt::Display for CryptoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CryptoError::PrfPlusTooLong { requested } => {
                write!(
                    f,
                    "prf+ cannot produce {requested} bytes (255 blocks at most)"
                )
            }
            CryptoError::KeyLength { expected, got } => {
                write!(f, "key of {got} bytes (expected {expected})")
            }
            CryptoError::PublicValueLength { expected, got } => {
                write!(
                    f,
                    "key exchange public value of {got} bytes (expected {expected})"
                )
            }
            CryptoError::InvalidPublicValue => write!(f, "invalid key exchange public value"),
            CryptoError::InvalidPrivateValue => write!(f, "invalid key exchange private value"),
            CryptoError::Random => write!(f, "random number source failed"),
            CryptoError::SkMalformed => write!(f, "malformed encrypted (SK) payload"),
            CryptoError::IntegrityCheckFailed => {
                write!(f, "encrypted (SK) payload failed its integrity check")
            }
            CryptoError::BadPadding => write!(f, "encrypted (SK) payload has a bad pad length"),
            CryptoError::SuiteMismatch => {
                write!(
                    f,
                    "AEAD ciphers take no integrity algorithm; CBC ciphers need one"
                )
            }
            CryptoError::Internal => write!(f, "cryptographic primitive failed"),
        }
    }
}

impl std::error::Error for CryptoError {}
