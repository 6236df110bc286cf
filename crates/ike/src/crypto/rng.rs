//! The random source, injectable so that tests of the engine are
//! deterministic: nonces, SPIs, IVs and key exchange private values all
//! come from one [`RandomSource`] the caller hands in.

use super::error::CryptoError;

/// A source of random bytes. Production uses [`SystemRandom`]; tests use a
/// seeded generator so every exchange is reproducible.
pub trait RandomSource {
    /// Fills `dest` with random bytes.
    fn fill(&mut self, dest: &mut [u8]) -> Result<(), CryptoError>;
}

/// The operating system's CSPRNG (through ring, which uses getrandom).
#[derive(Debug)]
pub struct SystemRandom(ring::rand::SystemRandom);

impl SystemRandom {
    /// A new handle.
    pub fn new() -> Self {
        SystemRandom(ring::rand::SystemRandom::new())
    }
}

impl Default for SystemRandom {
    fn default() -> Self {
        Self::new()
    }
}

impl RandomSource for SystemRandom {
    fn fill(&mut self, dest: &mut [u8]) -> Result<(), CryptoError> {
        ring::rand::SecureRandom::fill(&self.0, dest).map_err(|_| CryptoError::Random)
    }
}
