//! Identification payloads IDi and IDr (RFC 7296 3.5).
//!
//! ```text
//! |   ID Type     |                 RESERVED (3)                  |
//! |                   Identification Data ...                     |
//! ```
//!
//! AUTH is computed over the body as received (RFC 7296 2.15), so the engine
//! takes it from [`super::RawPayload::body`], not from a re-emission.

use super::error::Problem;
use super::payload::{need, PayloadBody, TooLong};
use super::types::IdType;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

mod field {
    pub const ID_TYPE: usize = 0;
    pub const DATA: usize = 4;
}

/// An IDi or IDr payload. FQDN and RFC822 data are kept as bytes (the RFC
/// does not promise UTF-8); IPv4/IPv6 data is checked to be 4/16 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identification {
    /// ID Type.
    pub id_type: IdType,
    /// Identification Data.
    pub data: Vec<u8>,
}

impl Identification {
    /// An ID_IPV4_ADDR or ID_IPV6_ADDR identity.
    pub fn ip(addr: IpAddr) -> Self {
        match addr {
            IpAddr::V4(a) => Identification {
                id_type: IdType::IPV4_ADDR,
                data: a.octets().to_vec(),
            },
            IpAddr::V6(a) => Identification {
                id_type: IdType::IPV6_ADDR,
                data: a.octets().to_vec(),
            },
        }
    }

    /// An ID_FQDN identity.
    pub fn fqdn(name: &str) -> Self {
        Identification {
            id_type: IdType::FQDN,
            data: name.as_bytes().to_vec(),
        }
    }

    /// An ID_RFC822_ADDR identity.
    pub fn email(addr: &str) -> Self {
        Identification {
            id_type: IdType::RFC822_ADDR,
            data: addr.as_bytes().to_vec(),
        }
    }

    /// The address of an IPv4/IPv6 identity.
    pub fn as_ip(&self) -> Option<IpAddr> {
        match self.id_type {
            IdType::IPV4_ADDR => <[u8; 4]>::try_from(&self.data[..])
                .ok()
                .map(|a| IpAddr::V4(Ipv4Addr::from(a))),
            IdType::IPV6_ADDR => <[u8; 16]>::try_from(&self.data[..])
                .ok()
                .map(|a| IpAddr::V6(Ipv6Addr::from(a))),
            _ => None,
        }
    }

    /// The text of an FQDN or RFC822 identity, when it is UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        match self.id_type {
            IdType::FQDN | IdType::RFC822_ADDR => core::str::from_utf8(&self.data).ok(),
            _ => None,
        }
    }
}

impl PayloadBody for Identification {
    fn parse_body(body: &[u8]) -> Result<Self, Problem> {
        need(body, field::DATA)?;
        let id_type = IdType(body[field::ID_TYPE]);
        let data = &body[field::DATA..];
        let want = match id_type {
            IdType::IPV4_ADDR => Some(4),
            IdType::IPV6_ADDR => Some(16),
            _ => None,
        };
        if want.is_some_and(|w| w != data.len()) {
            return Err(Problem::AddressLength { len: data.len() });
        }
        Ok(Identification {
            id_type,
            data: data.to_vec(),
        })
    }
    fn emit_body(&self, out: &mut Vec<u8>) -> Result<(), TooLong> {
        out.extend_from_slice(&[self.id_type.0, 0, 0, 0]);
        out.extend_from_slice(&self.data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emit(id: &Identification) -> Vec<u8> {
        let mut out = Vec::new();
        id.emit_body(&mut out).unwrap();
        out
    }

    #[test]
    fn each_id_type_round_trips() {
        let ids = [
            Identification::ip("192.0.2.1".parse().unwrap()),
            Identification::ip("2001:db8::1".parse().unwrap()),
            Identification::fqdn("gw.example.org"),
            Identification::email("ops@example.org"),
            Identification {
                id_type: IdType::DER_ASN1_DN,
                data: vec![0x30, 0x00],
            },
            Identification {
                id_type: IdType::KEY_ID,
                data: vec![1, 2, 3],
            },
        ];
        for id in ids {
            assert_eq!(Identification::parse_body(&emit(&id)).unwrap(), id);
        }
    }

    #[test]
    fn wire_layout_and_accessors() {
        let id = Identification::ip("192.0.2.1".parse().unwrap());
        assert_eq!(emit(&id), [1, 0, 0, 0, 192, 0, 2, 1]);
        assert_eq!(id.as_ip(), Some("192.0.2.1".parse().unwrap()));
        assert_eq!(Identification::fqdn("a.b").as_str(), Some("a.b"));
    }

    #[test]
    fn address_identities_must_have_address_length() {
        assert_eq!(
            Identification::parse_body(&[1, 0, 0, 0, 192, 0, 2]),
            Err(Problem::AddressLength { len: 3 })
        );
        assert_eq!(
            Identification::parse_body(&[5, 0, 0, 0, 1, 2, 3, 4]),
            Err(Problem::AddressLength { len: 4 })
        );
        assert_eq!(
            Identification::parse_body(&[2, 0, 0]),
            Err(Problem::BodyTooShort { len: 3, min: 4 })
        );
    }
}
