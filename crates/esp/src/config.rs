//! The SA configuration the control plane builds (from TOML or the control
//! socket) and hands to [`crate::OutboundSa::new`] / [`crate::InboundSa::new`].
//!
//! The same shape serves both directions: `local` is always this gateway and
//! `remote` the peer, so an outbound SA sends `local -> remote` and an inbound
//! SA receives `remote -> local`.

use core::fmt;
use std::net::IpAddr;

use zeroize::{Zeroize, Zeroizing};

use crate::crypto::KeyError;
use crate::replay::MAX_REPLAY_WINDOW;
use crate::Suite;

/// Key material (an SA's key or auth key): zeroized on drop; `Debug` and
/// `Display` print `<redacted N bytes>`. The one secret type of the
/// workspace: the config parses keys into it and hands it to the engine.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretBytes(Vec<u8>);

impl SecretBytes {
    /// Takes ownership of `bytes` (no copy is left behind).
    pub fn new(bytes: Vec<u8>) -> Self {
        SecretBytes(bytes)
    }
    /// The key bytes, for handing to the cipher.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// True when there are no bytes (the `auth_key` of AEAD suites).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Parses hex keying material: optional `0x` prefix, optional `:`
    /// separators between bytes, optional whitespace. Errors name a
    /// position, never the text, so a typo'd key is not echoed.
    pub fn from_hex(text: &str) -> Result<SecretBytes, String> {
        let body = text
            .strip_prefix("0x")
            .or_else(|| text.strip_prefix("0X"))
            .unwrap_or(text);
        // Owned by a SecretBytes from the start, with room for every byte
        // (no reallocation leaves a copy), so an error path zeroizes too.
        let mut key = SecretBytes(Vec::with_capacity(body.len() / 2));
        let mut high: Option<u8> = None;
        for (i, c) in body.chars().enumerate() {
            if c == ':' || c.is_whitespace() {
                if high.is_some() {
                    return Err(format!("separator splits a byte at character {}", i + 1));
                }
                continue;
            }
            let nibble = c
                .to_digit(16)
                .ok_or_else(|| format!("not a hex digit at character {}", i + 1))?
                as u8;
            match high.take() {
                None => high = Some(nibble),
                Some(h) => key.0.push(h << 4 | nibble),
            }
        }
        if high.is_some() {
            return Err("odd number of hex digits".into());
        }
        if key.is_empty() {
            return Err("empty key".into());
        }
        Ok(key)
    }

    /// Lowercase hex, for tools that must be handed the key (Wireshark).
    pub fn to_hex(&self) -> Zeroizing<String> {
        let mut s = Zeroizing::new(String::with_capacity(self.0.len() * 2));
        for b in &self.0 {
            s.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
            s.push(char::from_digit(u32::from(b & 0xf), 16).unwrap_or('0'));
        }
        s
    }
}

impl From<Vec<u8>> for SecretBytes {
    fn from(bytes: Vec<u8>) -> Self {
        SecretBytes(bytes)
    }
}

impl From<&[u8]> for SecretBytes {
    fn from(bytes: &[u8]) -> Self {
        SecretBytes(bytes.to_vec())
    }
}

impl Drop for SecretBytes {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl fmt::Debug for SecretBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<redacted {} bytes>", self.0.len())
    }
}

impl fmt::Display for SecretBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// How ESP travels on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encap {
    /// ESP directly over IP (protocol 50).
    #[default]
    None,
    /// ESP in UDP for NAT traversal (RFC 3948). Outbound packets go from
    /// `local_port` to `remote_port`; inbound packets must be addressed to
    /// `local_port` (any source port: a NAT may rewrite it).
    Udp { local_port: u16, remote_port: u16 },
}

impl Encap {
    /// The IANA NAT-T port.
    pub const NAT_T_PORT: u16 = 4500;

    /// UDP encapsulation on port 4500 at both ends.
    pub fn udp_4500() -> Self {
        Encap::Udp {
            local_port: Self::NAT_T_PORT,
            remote_port: Self::NAT_T_PORT,
        }
    }
}

/// A soft (notify the control plane) and hard (stop the SA) limit; `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limit {
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

impl Limit {
    /// Both limits set.
    pub fn new(soft: u64, hard: u64) -> Self {
        Limit {
            soft: Some(soft),
            hard: Some(hard),
        }
    }
}

/// SA lifetimes (RFC 4301 §4.4.2.1). Packets and bytes count what the SA
/// transformed (bytes: inner IP packet lengths); seconds run from the `now`
/// given when the SA was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lifetimes {
    pub packets: Limit,
    pub bytes: Limit,
    pub seconds: Limit,
}

/// One direction of one ESP SA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaConfig {
    pub suite: Suite,
    pub spi: u32,
    /// Cipher key; for AEAD suites followed by the 4-byte salt.
    pub key: SecretBytes,
    /// Integrity key; empty for AEAD suites.
    pub auth_key: SecretBytes,
    /// Extended (64-bit) sequence numbers, RFC 4303 §2.2.1.
    pub esn: bool,
    /// Anti-replay window in packets; 0 turns anti-replay off. At most
    /// [`MAX_REPLAY_WINDOW`]. Ignored by outbound SAs.
    pub replay_window: u32,
    pub encap: Encap,
    /// This gateway's outer address.
    pub local: IpAddr,
    /// The peer's outer address.
    pub remote: IpAddr,
    pub lifetimes: Lifetimes,
}

/// Why an [`SaConfig`] cannot make an SA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// SPIs 0..=255 are reserved (RFC 4303 §2.1).
    ReservedSpi(u32),
    /// `local` and `remote` are not the same IP version.
    MixedAddressFamilies,
    ReplayWindowTooLarge {
        got: u32,
        max: u32,
    },
    /// A soft limit above its hard limit.
    SoftAboveHard {
        what: &'static str,
    },
    /// A hard limit of zero would make an SA that can never carry a packet.
    ZeroHardLimit {
        what: &'static str,
    },
    Key(KeyError),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ReservedSpi(spi) => {
                write!(f, "spi {spi:#x} is reserved (must be at least 256)")
            }
            ConfigError::MixedAddressFamilies => {
                f.write_str("local and remote outer addresses must both be IPv4 or both IPv6")
            }
            ConfigError::ReplayWindowTooLarge { got, max } => {
                write!(f, "replay_window {got} is above the maximum {max}")
            }
            ConfigError::SoftAboveHard { what } => {
                write!(f, "soft {what} lifetime is above the hard one")
            }
            ConfigError::ZeroHardLimit { what } => write!(f, "hard {what} lifetime is 0"),
            ConfigError::Key(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ConfigError {}

impl From<KeyError> for ConfigError {
    fn from(e: KeyError) -> Self {
        ConfigError::Key(e)
    }
}

impl SaConfig {
    /// Checks everything but the key lengths (the cipher checks those).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.spi < 256 {
            return Err(ConfigError::ReservedSpi(self.spi));
        }
        if self.local.is_ipv4() != self.remote.is_ipv4() {
            return Err(ConfigError::MixedAddressFamilies);
        }
        if self.replay_window > MAX_REPLAY_WINDOW {
            return Err(ConfigError::ReplayWindowTooLarge {
                got: self.replay_window,
                max: MAX_REPLAY_WINDOW,
            });
        }
        let l = &self.lifetimes;
        for (what, limit) in [
            ("packets", l.packets),
            ("bytes", l.bytes),
            ("seconds", l.seconds),
        ] {
            if limit.hard == Some(0) {
                return Err(ConfigError::ZeroHardLimit { what });
            }
            if let (Some(soft), Some(hard)) = (limit.soft, limit.hard) {
                if soft > hard {
                    return Err(ConfigError::SoftAboveHard { what });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn config() -> SaConfig {
        SaConfig {
            suite: Suite::Aes128Gcm16,
            spi: 0x1000,
            key: vec![0x42; 20].into(),
            auth_key: SecretBytes::default(),
            esn: false,
            replay_window: 64,
            encap: Encap::None,
            local: Ipv4Addr::new(192, 0, 2, 1).into(),
            remote: Ipv4Addr::new(192, 0, 2, 2).into(),
            lifetimes: Lifetimes::default(),
        }
    }

    #[test]
    fn debug_redacts_keys() {
        let text = format!("{:?}", config());
        assert!(text.contains("<redacted 20 bytes>"), "{text}");
        assert!(!text.contains("66"), "key byte 0x42 leaked: {text}");
    }

    #[test]
    fn hex_forms_parse_to_the_same_bytes() {
        let want = [0x01u8, 0xab, 0xcd, 0xef];
        for text in [
            "01abcdef",
            "0x01ABCDEF",
            "01:ab:cd:ef",
            "0x01:ab:cd:ef",
            "01ab cdef",
        ] {
            assert_eq!(
                SecretBytes::from_hex(text).unwrap().expose(),
                want,
                "{text}"
            );
        }
        assert_eq!(
            SecretBytes::from_hex("01abcdef").unwrap().to_hex().as_str(),
            "01abcdef"
        );
    }

    #[test]
    fn bad_hex_is_refused_without_echoing_it() {
        for text in ["0x", "abc", "zz11", "a:b", "12:3"] {
            let err = SecretBytes::from_hex(text).unwrap_err();
            assert!(!err.contains(text), "{err}");
        }
    }

    #[test]
    fn debug_and_display_redact() {
        let key = SecretBytes::from_hex("00112233445566778899aabbccddeeff").unwrap();
        assert_eq!(format!("{key:?}"), "<redacted 16 bytes>");
        assert_eq!(format!("{key}"), "<redacted 16 bytes>");
    }

    #[test]
    fn validate_rejects_bad_configs() {
        assert_eq!(config().validate(), Ok(()));
        let mut c = config();
        c.spi = 255;
        assert_eq!(c.validate(), Err(ConfigError::ReservedSpi(255)));
        let mut c = config();
        c.remote = "2001:db8::1".parse().unwrap();
        assert_eq!(c.validate(), Err(ConfigError::MixedAddressFamilies));
        let mut c = config();
        c.replay_window = MAX_REPLAY_WINDOW + 1;
        assert!(matches!(
            c.validate(),
            Err(ConfigError::ReplayWindowTooLarge { .. })
        ));
        let mut c = config();
        c.lifetimes.bytes = Limit::new(10, 5);
        assert_eq!(
            c.validate(),
            Err(ConfigError::SoftAboveHard { what: "bytes" })
        );
        let mut c = config();
        c.lifetimes.seconds.hard = Some(0);
        assert_eq!(
            c.validate(),
            Err(ConfigError::ZeroHardLimit { what: "seconds" })
        );
    }
}
