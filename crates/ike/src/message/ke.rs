//! Key Exchange (RFC 7296 3.4) and Nonce (3.9) payloads.
//!
//! ```text
//! KE:    | Key Exchange Method Num (2) | RESERVED (2) | Key Exchange Data ... |
//! Nonce: | Nonce Data (16..=256 bytes) ... |
//! ```

use super::error::Problem;
use super::payload::{be16, need, put16, PayloadBody, TooLong};

mod field {
    pub const GROUP: usize = 0;
    pub const DATA: usize = 4;
}

/// Smallest Nonce Data RFC 7296 3.9 allows.
pub const NONCE_MIN: usize = 16;
/// Largest Nonce Data RFC 7296 3.9 allows.
pub const NONCE_MAX: usize = 256;

/// A KE payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyExchange {
    /// Key exchange method (D-H group) number, as in the KE transform IDs.
    pub group: u16,
    /// The public value.
    pub data: Vec<u8>,
}

impl PayloadBody for KeyExchange {
    fn parse_body(body: &[u8]) -> Result<Self, Problem> {
        need(body, field::DATA)?;
        Ok(KeyExchange {
            group: be16(body, field::GROUP),
            data: body[field::DATA..].to_vec(),
        })
    }
    fn emit_body(&self, out: &mut Vec<u8>) -> Result<(), TooLong> {
        put16(out, self.group);
        put16(out, 0);
        out.extend_from_slice(&self.data);
        Ok(())
    }
}

/// A Nonce payload (Ni or Nr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nonce(pub Vec<u8>);

impl PayloadBody for Nonce {
    fn parse_body(body: &[u8]) -> Result<Self, Problem> {
        if !(NONCE_MIN..=NONCE_MAX).contains(&body.len()) {
            return Err(Problem::NonceLength { len: body.len() });
        }
        Ok(Nonce(body.to_vec()))
    }
    fn emit_body(&self, out: &mut Vec<u8>) -> Result<(), TooLong> {
        out.extend_from_slice(&self.0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ke_fields_and_reserved_bytes() {
        let ke = KeyExchange::parse_body(&[0, 31, 0xff, 0xff, 9, 8]).unwrap();
        assert_eq!(
            ke,
            KeyExchange {
                group: 31,
                data: vec![9, 8]
            }
        );
        let mut out = Vec::new();
        ke.emit_body(&mut out).unwrap();
        assert_eq!(out, [0, 31, 0, 0, 9, 8]);
        assert_eq!(
            KeyExchange::parse_body(&[0, 31, 0]),
            Err(Problem::BodyTooShort { len: 3, min: 4 })
        );
    }

    #[test]
    fn nonce_length_is_16_to_256() {
        assert_eq!(
            Nonce::parse_body(&[0; 15]),
            Err(Problem::NonceLength { len: 15 })
        );
        assert!(Nonce::parse_body(&[0; 16]).is_ok());
        assert!(Nonce::parse_body(&[0; 256]).is_ok());
        assert_eq!(
            Nonce::parse_body(&[0; 257]),
            Err(Problem::NonceLength { len: 257 })
        );
    }
}
