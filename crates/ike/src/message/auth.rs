//! Authentication payload (RFC 7296 3.8).
//!
//! ```text
//! | Auth Method   |                RESERVED (3)                   |
//! |                      Authentication Data ...                  |
//! ```
//!
//! For RFC 7427 Digital Signature (method 14) the data starts with a
//! one-byte length and an AlgorithmIdentifier; the crypto module reads it.

use super::error::Problem;
use super::payload::{need, PayloadBody, TooLong};
use super::types::AuthMethod;

mod field {
    pub const METHOD: usize = 0;
    pub const DATA: usize = 4;
}

/// An AUTH payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authentication {
    /// Auth Method.
    pub method: AuthMethod,
    /// Authentication Data.
    pub data: Vec<u8>,
}

impl PayloadBody for Authentication {
    fn parse_body(body: &[u8]) -> Result<Self, Problem> {
        need(body, field::DATA)?;
        Ok(Authentication {
            method: AuthMethod(body[field::METHOD]),
            data: body[field::DATA..].to_vec(),
        })
    }
    fn emit_body(&self, out: &mut Vec<u8>) -> Result<(), TooLong> {
        out.extend_from_slice(&[self.method.0, 0, 0, 0]);
        out.extend_from_slice(&self.data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_reserved_and_data() {
        let a = Authentication::parse_body(&[2, 9, 9, 9, 0xaa, 0xbb]).unwrap();
        assert_eq!(a.method, AuthMethod::SHARED_KEY_MIC);
        assert_eq!(a.data, [0xaa, 0xbb]);
        let mut out = Vec::new();
        a.emit_body(&mut out).unwrap();
        assert_eq!(out, [2, 0, 0, 0, 0xaa, 0xbb]);
        assert_eq!(
            Authentication::parse_body(&[14, 0, 0]),
            Err(Problem::BodyTooShort { len: 3, min: 4 })
        );
    }
}
