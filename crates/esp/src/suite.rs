//! The cipher suites espgw speaks, named as strongSwan/libreswan proposals name them.

use core::fmt;
use core::str::FromStr;

/// An ESP transform: encryption plus integrity (or a combined-mode AEAD).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Suite {
    /// AES-128-GCM with a 16-byte ICV (RFC 4106).
    Aes128Gcm16,
    /// AES-256-GCM with a 16-byte ICV (RFC 4106).
    Aes256Gcm16,
    /// ChaCha20-Poly1305 (RFC 7634).
    Chacha20Poly1305,
    /// AES-128-CBC (RFC 3602) with HMAC-SHA-256-128 (RFC 4868).
    Aes128Sha256,
    /// AES-256-CBC (RFC 3602) with HMAC-SHA-256-128 (RFC 4868).
    Aes256Sha256,
    /// AES-128-CBC (RFC 3602) with HMAC-SHA1-96 (RFC 2404), for legacy peers.
    Aes128Sha1,
}

impl Suite {
    /// Every suite, in a stable order.
    pub const ALL: [Suite; 6] = [
        Suite::Aes128Gcm16,
        Suite::Aes256Gcm16,
        Suite::Chacha20Poly1305,
        Suite::Aes128Sha256,
        Suite::Aes256Sha256,
        Suite::Aes128Sha1,
    ];

    /// The proposal name used in config files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Aes128Gcm16 => "aes128gcm16",
            Suite::Aes256Gcm16 => "aes256gcm16",
            Suite::Chacha20Poly1305 => "chacha20poly1305",
            Suite::Aes128Sha256 => "aes128-sha256",
            Suite::Aes256Sha256 => "aes256-sha256",
            Suite::Aes128Sha1 => "aes128-sha1",
        }
    }

    /// True for combined-mode (AEAD) suites.
    pub fn is_aead(self) -> bool {
        matches!(
            self,
            Suite::Aes128Gcm16 | Suite::Aes256Gcm16 | Suite::Chacha20Poly1305
        )
    }

    /// Length of the `key` keying material in bytes. For AEAD suites this is
    /// the cipher key followed by the 4-byte salt (RFC 4106 §8.1, RFC 7634 §4).
    pub fn key_len(self) -> usize {
        match self {
            Suite::Aes128Gcm16 => 16 + 4,
            Suite::Aes256Gcm16 => 32 + 4,
            Suite::Chacha20Poly1305 => 32 + 4,
            Suite::Aes128Sha256 | Suite::Aes128Sha1 => 16,
            Suite::Aes256Sha256 => 32,
        }
    }

    /// Length of the separate integrity key (`auth_key`); 0 for AEAD suites.
    pub fn auth_key_len(self) -> usize {
        match self {
            Suite::Aes128Sha256 | Suite::Aes256Sha256 => 32,
            Suite::Aes128Sha1 => 20,
            _ => 0,
        }
    }

    /// Bytes of IV carried in each packet.
    pub fn iv_len(self) -> usize {
        if self.is_aead() {
            8
        } else {
            16
        }
    }

    /// Bytes of ICV carried in each packet.
    pub fn icv_len(self) -> usize {
        match self {
            Suite::Aes128Sha1 => 12,
            _ => 16,
        }
    }

    /// The payload || padding || pad length || next header must be a multiple of this.
    pub fn block_align(self) -> usize {
        if self.is_aead() {
            4
        } else {
            16
        }
    }
}

impl fmt::Display for Suite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The name is not one of [`Suite::ALL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownSuite(pub String);

impl fmt::Display for UnknownSuite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown ESP suite {:?}, expected one of ", self.0)?;
        for (i, s) in Suite::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(s.name())?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownSuite {}

impl FromStr for Suite {
    type Err = UnknownSuite;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Suite::ALL
            .iter()
            .copied()
            .find(|suite| suite.name() == s)
            .ok_or_else(|| UnknownSuite(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in Suite::ALL {
            assert_eq!(s.name().parse::<Suite>(), Ok(s));
        }
        assert!("aes128gcm8".parse::<Suite>().is_err());
    }
}
