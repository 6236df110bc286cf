//! Notify payload (RFC 7296 3.10).
//!
//! ```text
//! |  Protocol ID  |   SPI Size    |      Notify Message Type      |
//! |                Security Parameter Index (SPI) ...             |
//! |                       Notification Data ...                   |
//! ```
//!
//! Error types (below 16384) and status types are told apart by
//! [`NotifyType::is_error`]; the data of each type is the engine's business.

use super::error::Problem;
use super::payload::{be16, need, put16, PayloadBody, TooLong};
use super::types::{NotifyType, ProtocolId};

mod field {
    pub const PROTOCOL: usize = 0;
    pub const SPI_SIZE: usize = 1;
    pub const TYPE: usize = 2;
    pub const SPI: usize = 4;
}

/// A Notify payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notify {
    /// Protocol ID: 0 (or IKE) for notifications about the IKE SA, AH/ESP
    /// for a CHILD_SA (with its SPI).
    pub protocol: ProtocolId,
    /// SPI (empty for the IKE SA).
    pub spi: Vec<u8>,
    /// Notify Message Type.
    pub notify_type: NotifyType,
    /// Notification Data.
    pub data: Vec<u8>,
}

impl Notify {
    /// A notification about the IKE SA (protocol 0, no SPI).
    pub fn ike(notify_type: NotifyType, data: Vec<u8>) -> Self {
        Notify {
            protocol: ProtocolId::NONE,
            spi: Vec::new(),
            notify_type,
            data,
        }
    }
}

impl Notify {
    /// A notification about a CHILD_SA (REKEY_SA, a CHILD_SA error): its
    /// protocol (AH or ESP) and 4-byte SPI.
    pub fn child(protocol: ProtocolId, spi: u32, notify_type: NotifyType, data: Vec<u8>) -> Self {
        Notify {
            protocol,
            spi: spi.to_be_bytes().to_vec(),
            notify_type,
            data,
        }
    }

    /// The 4-byte SPI of a CHILD_SA notification.
    pub fn child_spi(&self) -> Option<u32> {
        <[u8; 4]>::try_from(&self.spi[..])
            .ok()
            .map(u32::from_be_bytes)
    }

    /// INVALID_KE_PAYLOAD naming the group the responder wants (RFC 7296
    /// 1.3: two bytes of data).
    pub fn invalid_ke_payload(group: u16) -> Self {
        Notify::ike(NotifyType::INVALID_KE_PAYLOAD, group.to_be_bytes().to_vec())
    }

    /// The group an INVALID_KE_PAYLOAD asks for; None for other types or
    /// data that is not two bytes.
    pub fn requested_group(&self) -> Option<u16> {
        (self.notify_type == NotifyType::INVALID_KE_PAYLOAD)
            .then(|| <[u8; 2]>::try_from(&self.data[..]).ok())
            .flatten()
            .map(u16::from_be_bytes)
    }

    /// SIGNATURE_HASH_ALGORITHMS with these RFC 7427 hash identifiers.
    pub fn signature_hash_algorithms(hashes: &[u16]) -> Self {
        Notify::ike(
            NotifyType::SIGNATURE_HASH_ALGORITHMS,
            hashes.iter().flat_map(|h| h.to_be_bytes()).collect(),
        )
    }

    /// The hash identifiers of a SIGNATURE_HASH_ALGORITHMS notification;
    /// None for other types or an odd data length.
    pub fn hash_algorithms(&self) -> Option<Vec<u16>> {
        if self.notify_type != NotifyType::SIGNATURE_HASH_ALGORITHMS
            || !self.data.len().is_multiple_of(2)
        {
            return None;
        }
        Some(
            self.data
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect(),
        )
    }
}

impl PayloadBody for Notify {
    fn parse_body(body: &[u8]) -> Result<Self, Problem> {
        need(body, field::SPI)?;
        let spi_size = usize::from(body[field::SPI_SIZE]);
        need(body, field::SPI + spi_size)?;
        Ok(Notify {
            protocol: ProtocolId(body[field::PROTOCOL]),
            notify_type: NotifyType(be16(body, field::TYPE)),
            spi: body[field::SPI..field::SPI + spi_size].to_vec(),
            data: body[field::SPI + spi_size..].to_vec(),
        })
    }
    fn emit_body(&self, out: &mut Vec<u8>) -> Result<(), TooLong> {
        out.push(self.protocol.0);
        out.push(u8::try_from(self.spi.len()).map_err(|_| TooLong)?);
        put16(out, self.notify_type.0);
        out.extend_from_slice(&self.spi);
        out.extend_from_slice(&self.data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ike_sa_status_notify_layout() {
        // NAT_DETECTION_SOURCE_IP with a 20-byte hash.
        let mut body = vec![0, 0, 0x40, 0x04];
        body.extend([0xab; 20]);
        let n = Notify::parse_body(&body).unwrap();
        assert_eq!(
            n,
            Notify::ike(NotifyType::NAT_DETECTION_SOURCE_IP, vec![0xab; 20])
        );
        assert!(!n.notify_type.is_error());
        let mut out = Vec::new();
        n.emit_body(&mut out).unwrap();
        assert_eq!(out, body);
    }

    #[test]
    fn child_sa_notify_carries_its_spi() {
        // REKEY_SA for ESP SPI 0x01020304.
        let body = [3, 4, 0x40, 0x09, 1, 2, 3, 4];
        let n = Notify::parse_body(&body).unwrap();
        assert_eq!(n.protocol, ProtocolId::ESP);
        assert_eq!(n.notify_type, NotifyType::REKEY_SA);
        assert_eq!(n.spi, [1, 2, 3, 4]);
        assert!(n.data.is_empty());
    }

    #[test]
    fn typed_data_helpers() {
        let n = Notify::invalid_ke_payload(31);
        assert_eq!(n.data, [0, 31]);
        assert_eq!(n.requested_group(), Some(31));
        assert_eq!(
            Notify::ike(NotifyType::COOKIE, vec![0, 31]).requested_group(),
            None
        );
        assert_eq!(
            Notify::ike(NotifyType::INVALID_KE_PAYLOAD, vec![0]).requested_group(),
            None
        );
        let h = Notify::signature_hash_algorithms(&[2, 3, 4]);
        assert_eq!(h.data, [0, 2, 0, 3, 0, 4]);
        assert_eq!(h.hash_algorithms(), Some(vec![2, 3, 4]));
        let odd = Notify::ike(NotifyType::SIGNATURE_HASH_ALGORITHMS, vec![0, 2, 0]);
        assert_eq!(odd.hash_algorithms(), None);
        let r = Notify::child(ProtocolId::ESP, 0xc0ffee00, NotifyType::REKEY_SA, vec![]);
        assert_eq!(r.spi, [0xc0, 0xff, 0xee, 0]);
        assert_eq!(r.child_spi(), Some(0xc0ffee00));
        assert_eq!(Notify::ike(NotifyType::REKEY_SA, vec![]).child_spi(), None);
    }

    #[test]
    fn spi_size_past_the_body_is_an_error() {
        assert_eq!(
            Notify::parse_body(&[3, 4, 0, 14, 1, 2, 3]),
            Err(Problem::BodyTooShort { len: 7, min: 8 })
        );
        assert_eq!(
            Notify::parse_body(&[0, 0, 0]),
            Err(Problem::BodyTooShort { len: 3, min: 4 })
        );
    }
}
