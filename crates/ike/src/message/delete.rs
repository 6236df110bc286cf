//! Delete payload (RFC 7296 3.11).
//!
//! ```text
//! | Protocol ID   |   SPI Size    |          Num of SPIs          |
//! |               Security Parameter Index(es) (SPI) ...          |
//! ```
//!
//! Deleting the IKE SA: protocol IKE, SPI size 0, no SPIs. Deleting
//! CHILD_SAs: protocol AH or ESP, SPI size 4, the inbound SPIs of the sender.
//! Anything else is malformed.

use super::error::Problem;
use super::payload::{be16, need, put16, PayloadBody, TooLong};
use super::types::ProtocolId;

mod field {
    pub const PROTOCOL: usize = 0;
    pub const SPI_SIZE: usize = 1;
    pub const NUM_SPIS: usize = 2;
    pub const SPIS: usize = 4;
}

/// A Delete payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delete {
    /// Delete the IKE SA this message belongs to.
    Ike,
    /// Delete CHILD_SAs of `protocol` (AH or ESP) by SPI.
    Child {
        /// AH or ESP.
        protocol: ProtocolId,
        /// The SPIs.
        spis: Vec<u32>,
    },
}

impl PayloadBody for Delete {
    fn parse_body(body: &[u8]) -> Result<Self, Problem> {
        need(body, field::SPIS)?;
        let protocol = ProtocolId(body[field::PROTOCOL]);
        let spi_size = body[field::SPI_SIZE];
        let num = usize::from(be16(body, field::NUM_SPIS));
        let want_size = match protocol {
            ProtocolId::IKE => 0,
            ProtocolId::AH | ProtocolId::ESP => 4,
            other => return Err(Problem::ProtocolId { value: other.0 }),
        };
        if spi_size != want_size {
            return Err(Problem::SpiSize { size: spi_size });
        }
        let spis = &body[field::SPIS..];
        let expected = num * usize::from(spi_size);
        if spis.len() != expected || (protocol == ProtocolId::IKE && num != 0) {
            return Err(Problem::BodyLength {
                len: body.len(),
                expected: field::SPIS + expected,
            });
        }
        if protocol == ProtocolId::IKE {
            return Ok(Delete::Ike);
        }
        Ok(Delete::Child {
            protocol,
            spis: spis
                .chunks_exact(4)
                .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        })
    }
    fn emit_body(&self, out: &mut Vec<u8>) -> Result<(), TooLong> {
        match self {
            Delete::Ike => out.extend_from_slice(&[ProtocolId::IKE.0, 0, 0, 0]),
            Delete::Child { protocol, spis } => {
                out.extend_from_slice(&[protocol.0, 4]);
                put16(out, u16::try_from(spis.len()).map_err(|_| TooLong)?);
                for spi in spis {
                    out.extend_from_slice(&spi.to_be_bytes());
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emit(d: &Delete) -> Vec<u8> {
        let mut out = Vec::new();
        d.emit_body(&mut out).unwrap();
        out
    }

    #[test]
    fn ike_and_child_deletes_round_trip() {
        assert_eq!(emit(&Delete::Ike), [1, 0, 0, 0]);
        assert_eq!(Delete::parse_body(&[1, 0, 0, 0]), Ok(Delete::Ike));
        let d = Delete::Child {
            protocol: ProtocolId::ESP,
            spis: vec![0xc0ffee01, 2],
        };
        assert_eq!(emit(&d), [3, 4, 0, 2, 0xc0, 0xff, 0xee, 1, 0, 0, 0, 2]);
        assert_eq!(Delete::parse_body(&emit(&d)), Ok(d));
    }

    #[test]
    fn sizes_and_counts_must_agree() {
        assert_eq!(
            Delete::parse_body(&[3, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(Problem::SpiSize { size: 8 })
        );
        assert_eq!(
            Delete::parse_body(&[1, 4, 0, 0]),
            Err(Problem::SpiSize { size: 4 })
        );
        assert_eq!(
            Delete::parse_body(&[3, 4, 0, 2, 0, 0, 0, 1]),
            Err(Problem::BodyLength {
                len: 8,
                expected: 12
            })
        );
        assert_eq!(
            Delete::parse_body(&[1, 0, 0, 1]),
            Err(Problem::BodyLength {
                len: 4,
                expected: 4
            })
        );
        assert_eq!(
            Delete::parse_body(&[7, 4, 0, 0]),
            Err(Problem::ProtocolId { value: 7 })
        );
    }
}
