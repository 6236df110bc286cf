//! Key material that wipes itself and never prints.

use std::fmt;

use zeroize::Zeroizing;

/// Secret bytes (keys, SKEYSEED, g^ir, PSKs): zeroized on drop, and
/// `Debug` prints only the length, so a `{:?}` of any struct holding one
/// cannot log key material.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretBytes(Zeroizing<Vec<u8>>);

impl SecretBytes {
    /// Takes ownership of `bytes`.
    pub fn new(bytes: Vec<u8>) -> Self {
        SecretBytes(Zeroizing::new(bytes))
    }

    /// Copies `bytes`.
    pub fn from_slice(bytes: &[u8]) -> Self {
        Self::new(bytes.to_vec())
    }

    /// The bytes, for the next derivation step or for installing an SA.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when empty (an AEAD suite's integrity key).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for SecretBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretBytes({} bytes, redacted)", self.0.len())
    }
}
