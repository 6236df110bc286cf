//! Key material: bytes that are zeroized on drop and never printed.

use core::fmt;
use zeroize::Zeroizing;

/// Secret bytes (an SA's key or auth key). `Debug` and `Display` print
/// `<redacted N bytes>`; the bytes are zeroized when dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretBytes(Zeroizing<Vec<u8>>);

impl SecretBytes {
    pub fn new(bytes: Vec<u8>) -> SecretBytes {
        SecretBytes(Zeroizing::new(bytes))
    }

    /// The key bytes, for handing to a cipher. Don't log them.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

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
        let mut bytes = Zeroizing::new(Vec::with_capacity(body.len() / 2));
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
                Some(h) => bytes.push(h << 4 | nibble),
            }
        }
        if high.is_some() {
            return Err("odd number of hex digits".into());
        }
        if bytes.is_empty() {
            return Err("empty key".into());
        }
        Ok(SecretBytes(bytes))
    }

    /// Lowercase hex, for tools that must be handed the key (Wireshark).
    pub fn to_hex(&self) -> Zeroizing<String> {
        let mut s = Zeroizing::new(String::with_capacity(self.0.len() * 2));
        for b in self.0.iter() {
            s.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
            s.push(char::from_digit(u32::from(b & 0xf), 16).unwrap_or('0'));
        }
        s
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
