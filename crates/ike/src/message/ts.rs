//! Traffic Selector payloads TSi and TSr (RFC 7296 3.13).
//!
//! ```text
//! | Number of TSs |                 RESERVED (3)                  |
//! |                       <Traffic Selectors>                     |
//!
//! one selector:
//! |   TS Type     |IP Protocol ID |       Selector Length         |
//! |           Start Port          |           End Port            |
//! |                         Starting Address                      |
//! |                         Ending Address                        |
//! ```
//!
//! Types 7 (IPv4, 16 bytes) and 8 (IPv6, 40 bytes) are parsed; other types
//! (e.g. RFC 9478 security labels) are kept opaque so the engine can answer
//! TS_UNACCEPTABLE rather than INVALID_SYNTAX.

use super::error::{Problem, SubstructureProblem};
use super::payload::{be16, need, patch_len16, put16, PayloadBody, TooLong};
use super::types::TsType;
use core::net::{Ipv4Addr, Ipv6Addr};

mod field {
    pub const COUNT: usize = 0;
    pub const SELECTORS: usize = 4;
    // Within a selector.
    pub const TS_TYPE: usize = 0;
    pub const IP_PROTOCOL: usize = 1;
    pub const LENGTH: usize = 2;
    pub const START_PORT: usize = 4;
    pub const END_PORT: usize = 6;
    pub const ADDRESSES: usize = 8;
}

/// The fixed part of every selector: type, protocol, length.
const SELECTOR_HEADER_LEN: usize = 4;
/// An IPv4 address range selector's length.
pub const IPV4_SELECTOR_LEN: usize = 16;
/// An IPv6 address range selector's length.
pub const IPV6_SELECTOR_LEN: usize = 40;

/// One traffic selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrafficSelector {
    /// TS_IPV4_ADDR_RANGE.
    Ipv4 {
        /// IP protocol (0: any).
        ip_protocol: u8,
        /// First port (inclusive).
        start_port: u16,
        /// Last port (inclusive; 65535 with start 0: any).
        end_port: u16,
        /// First address.
        start: Ipv4Addr,
        /// Last address.
        end: Ipv4Addr,
    },
    /// TS_IPV6_ADDR_RANGE.
    Ipv6 {
        /// IP protocol (0: any).
        ip_protocol: u8,
        /// First port (inclusive).
        start_port: u16,
        /// Last port (inclusive).
        end_port: u16,
        /// First address.
        start: Ipv6Addr,
        /// Last address.
        end: Ipv6Addr,
    },
    /// Another TS type, kept as received.
    Other {
        /// TS Type.
        ts_type: TsType,
        /// The second byte (IP protocol for the address types, reserved
        /// for others).
        second_byte: u8,
        /// The bytes after the Selector Length field.
        data: Vec<u8>,
    },
}

/// A TSi or TSr payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrafficSelectors(pub Vec<TrafficSelector>);

fn ts_err(p: SubstructureProblem) -> Problem {
    Problem::TrafficSelector(p)
}

fn parse_selector(b: &[u8]) -> Result<(TrafficSelector, usize), Problem> {
    if b.len() < SELECTOR_HEADER_LEN {
        return Err(ts_err(SubstructureProblem::Truncated {
            available: b.len(),
        }));
    }
    let length = be16(b, field::LENGTH);
    let len = usize::from(length);
    if len < SELECTOR_HEADER_LEN || len > b.len() {
        return Err(ts_err(SubstructureProblem::Length {
            length,
            available: b.len(),
        }));
    }
    let s = &b[..len];
    let ts_type = TsType(s[field::TS_TYPE]);
    let ip_protocol = s[field::IP_PROTOCOL];
    let a = field::ADDRESSES;
    let ts = match ts_type {
        TsType::IPV4_ADDR_RANGE | TsType::IPV6_ADDR_RANGE => {
            let want = if ts_type == TsType::IPV4_ADDR_RANGE {
                IPV4_SELECTOR_LEN
            } else {
                IPV6_SELECTOR_LEN
            };
            if len != want {
                return Err(ts_err(SubstructureProblem::Inconsistent { length }));
            }
            let start_port = be16(s, field::START_PORT);
            let end_port = be16(s, field::END_PORT);
            if ts_type == TsType::IPV4_ADDR_RANGE {
                let addr = |i: usize| Ipv4Addr::new(s[i], s[i + 1], s[i + 2], s[i + 3]);
                TrafficSelector::Ipv4 {
                    ip_protocol,
                    start_port,
                    end_port,
                    start: addr(a),
                    end: addr(a + 4),
                }
            } else {
                let addr = |i: usize| {
                    let mut o = [0u8; 16];
                    o.copy_from_slice(&s[i..i + 16]);
                    Ipv6Addr::from(o)
                };
                TrafficSelector::Ipv6 {
                    ip_protocol,
                    start_port,
                    end_port,
                    start: addr(a),
                    end: addr(a + 16),
                }
            }
        }
        _ => TrafficSelector::Other {
            ts_type,
            second_byte: ip_protocol,
            data: s[SELECTOR_HEADER_LEN..].to_vec(),
        },
    };
    Ok((ts, len))
}

impl PayloadBody for TrafficSelectors {
    fn parse_body(body: &[u8]) -> Result<Self, Problem> {
        need(body, field::SELECTORS)?;
        let count = usize::from(body[field::COUNT]);
        let mut rest = &body[field::SELECTORS..];
        let mut out = Vec::with_capacity(count);
        while !rest.is_empty() {
            if out.len() == count {
                // Bytes remain after the announced number of selectors.
                return Err(ts_err(SubstructureProblem::Count {
                    field: count,
                    found: count + 1,
                }));
            }
            let (ts, len) = parse_selector(rest)?;
            out.push(ts);
            rest = &rest[len..];
        }
        if out.len() != count {
            return Err(ts_err(SubstructureProblem::Count {
                field: count,
                found: out.len(),
            }));
        }
        Ok(TrafficSelectors(out))
    }

    fn emit_body(&self, out: &mut Vec<u8>) -> Result<(), TooLong> {
        out.push(u8::try_from(self.0.len()).map_err(|_| TooLong)?);
        out.extend_from_slice(&[0, 0, 0]);
        for ts in &self.0 {
            let start = out.len();
            match ts {
                TrafficSelector::Ipv4 {
                    ip_protocol,
                    start_port,
                    end_port,
                    start: a,
                    end: z,
                } => {
                    out.extend_from_slice(&[TsType::IPV4_ADDR_RANGE.0, *ip_protocol, 0, 0]);
                    put16(out, *start_port);
                    put16(out, *end_port);
                    out.extend_from_slice(&a.octets());
                    out.extend_from_slice(&z.octets());
                }
                TrafficSelector::Ipv6 {
                    ip_protocol,
                    start_port,
                    end_port,
                    start: a,
                    end: z,
                } => {
                    out.extend_from_slice(&[TsType::IPV6_ADDR_RANGE.0, *ip_protocol, 0, 0]);
                    put16(out, *start_port);
                    put16(out, *end_port);
                    out.extend_from_slice(&a.octets());
                    out.extend_from_slice(&z.octets());
                }
                TrafficSelector::Other {
                    ts_type,
                    second_byte,
                    data,
                } => {
                    out.extend_from_slice(&[ts_type.0, *second_byte, 0, 0]);
                    out.extend_from_slice(data);
                }
            }
            patch_len16(out, start, field::LENGTH)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emit(t: &TrafficSelectors) -> Vec<u8> {
        let mut out = Vec::new();
        t.emit_body(&mut out).unwrap();
        out
    }

    fn v4_any() -> TrafficSelector {
        TrafficSelector::Ipv4 {
            ip_protocol: 0,
            start_port: 0,
            end_port: 65535,
            start: Ipv4Addr::new(10, 1, 0, 0),
            end: Ipv4Addr::new(10, 1, 255, 255),
        }
    }

    #[test]
    fn ipv4_selector_wire_layout() {
        let t = TrafficSelectors(vec![v4_any()]);
        assert_eq!(
            emit(&t),
            [1, 0, 0, 0, 7, 0, 0, 16, 0, 0, 0xff, 0xff, 10, 1, 0, 0, 10, 1, 255, 255]
        );
        assert_eq!(TrafficSelectors::parse_body(&emit(&t)), Ok(t));
    }

    #[test]
    fn ipv6_and_unknown_types_round_trip() {
        let t = TrafficSelectors(vec![
            TrafficSelector::Ipv6 {
                ip_protocol: 17,
                start_port: 500,
                end_port: 4500,
                start: "2001:db8::".parse().unwrap(),
                end: "2001:db8::ffff".parse().unwrap(),
            },
            TrafficSelector::Other {
                ts_type: TsType(10),
                second_byte: 0,
                data: vec![1, 2, 3],
            },
            v4_any(),
        ]);
        let bytes = emit(&t);
        assert_eq!(bytes.len(), 4 + 40 + 7 + 16);
        assert_eq!(TrafficSelectors::parse_body(&bytes), Ok(t));
    }

    #[test]
    fn count_and_lengths_must_match() {
        let mut bytes = emit(&TrafficSelectors(vec![v4_any(), v4_any()]));
        bytes[0] = 1;
        assert_eq!(
            TrafficSelectors::parse_body(&bytes),
            Err(ts_err(SubstructureProblem::Count { field: 1, found: 2 }))
        );
        bytes[0] = 3;
        assert_eq!(
            TrafficSelectors::parse_body(&bytes),
            Err(ts_err(SubstructureProblem::Count { field: 3, found: 2 }))
        );
        let mut bad_len = emit(&TrafficSelectors(vec![v4_any()]));
        bad_len[7] = 20;
        assert_eq!(
            TrafficSelectors::parse_body(&bad_len),
            Err(ts_err(SubstructureProblem::Length {
                length: 20,
                available: 16
            }))
        );
        let mut wrong_for_type = emit(&TrafficSelectors(vec![v4_any()]));
        wrong_for_type[4] = 8; // claims IPv6 in 16 bytes
        assert_eq!(
            TrafficSelectors::parse_body(&wrong_for_type),
            Err(ts_err(SubstructureProblem::Inconsistent { length: 16 }))
        );
        assert_eq!(
            TrafficSelectors::parse_body(&[1, 0, 0, 0, 7, 0]),
            Err(ts_err(SubstructureProblem::Truncated { available: 2 }))
        );
    }
}
