//! Configuration payload (RFC 7296 3.15): parsed far enough to be checked
//! and ignored politely (espgw assigns no addresses).
//!
//! ```text
//! |   CFG Type    |                    RESERVED (3)               |
//! |R|         Attribute Type      |            Length             |
//! |                             Value ...                         |
//! ```

use super::error::{Problem, SubstructureProblem};
use super::payload::{be16, need, put16, PayloadBody, TooLong};
use super::types::ConfigType;

mod field {
    pub const CFG_TYPE: usize = 0;
    pub const ATTRIBUTES: usize = 4;
}

const ATTRIBUTE_HEADER_LEN: usize = 4;

/// One configuration attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigAttribute {
    /// Attribute Type (15 bits; the R bit is reserved).
    pub attribute_type: u16,
    /// Value (empty in a CFG_REQUEST for "any").
    pub value: Vec<u8>,
}

/// A CP payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// CFG Type.
    pub cfg_type: ConfigType,
    /// The attributes.
    pub attributes: Vec<ConfigAttribute>,
}

impl PayloadBody for Config {
    fn parse_body(body: &[u8]) -> Result<Self, Problem> {
        need(body, field::ATTRIBUTES)?;
        let mut rest = &body[field::ATTRIBUTES..];
        let mut attributes = Vec::new();
        while !rest.is_empty() {
            if rest.len() < ATTRIBUTE_HEADER_LEN {
                return Err(Problem::ConfigAttribute(SubstructureProblem::Truncated {
                    available: rest.len(),
                }));
            }
            let length = be16(rest, 2);
            let end = ATTRIBUTE_HEADER_LEN + usize::from(length);
            if end > rest.len() {
                return Err(Problem::ConfigAttribute(SubstructureProblem::Length {
                    length,
                    available: rest.len(),
                }));
            }
            attributes.push(ConfigAttribute {
                attribute_type: be16(rest, 0) & 0x7fff,
                value: rest[ATTRIBUTE_HEADER_LEN..end].to_vec(),
            });
            rest = &rest[end..];
        }
        Ok(Config {
            cfg_type: ConfigType(body[field::CFG_TYPE]),
            attributes,
        })
    }
    fn emit_body(&self, out: &mut Vec<u8>) -> Result<(), TooLong> {
        out.extend_from_slice(&[self.cfg_type.0, 0, 0, 0]);
        for a in &self.attributes {
            if a.attribute_type > 0x7fff {
                return Err(TooLong);
            }
            put16(out, a.attribute_type);
            put16(out, u16::try_from(a.value.len()).map_err(|_| TooLong)?);
            out.extend_from_slice(&a.value);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_for_an_internal_address_round_trips() {
        // CFG_REQUEST, INTERNAL_IP4_ADDRESS (1) empty, INTERNAL_IP4_DNS (3) empty.
        let body = [1, 0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0];
        let c = Config::parse_body(&body).unwrap();
        assert_eq!(c.cfg_type, ConfigType::REQUEST);
        assert_eq!(c.attributes.len(), 2);
        let mut out = Vec::new();
        c.emit_body(&mut out).unwrap();
        assert_eq!(out, body);
    }

    #[test]
    fn attribute_lengths_are_checked() {
        assert_eq!(
            Config::parse_body(&[2, 0, 0, 0, 0, 1, 0, 4, 10, 0]),
            Err(Problem::ConfigAttribute(SubstructureProblem::Length {
                length: 4,
                available: 6
            }))
        );
        assert_eq!(
            Config::parse_body(&[2, 0, 0, 0, 0, 1]),
            Err(Problem::ConfigAttribute(SubstructureProblem::Truncated {
                available: 2
            }))
        );
    }
}
