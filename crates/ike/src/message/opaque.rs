//! Payloads whose body the codec does not interpret: Vendor ID (RFC 7296
//! 3.12) and EAP (3.16, recognized but not supported by the engine).

use super::error::Problem;
use super::payload::{PayloadBody, TooLong};

/// An uninterpreted body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Opaque(pub Vec<u8>);

impl PayloadBody for Opaque {
    fn parse_body(body: &[u8]) -> Result<Self, Problem> {
        Ok(Opaque(body.to_vec()))
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
    fn body_round_trips_unchanged() {
        let v = Opaque::parse_body(b"strongSwan").unwrap();
        let mut out = Vec::new();
        v.emit_body(&mut out).unwrap();
        assert_eq!(out, b"strongSwan");
    }
}
