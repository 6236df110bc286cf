//! ICMP for IPv4 (RFC 792): echo, destination unreachable (with the RFC 1191
//! next-hop MTU) and time exceeded.

use crate::checksum;
use crate::{Error, Result};

/// Length of the ICMP header (type, code, checksum, 4 type-specific bytes).
pub const HEADER_LEN: usize = 8;

/// ICMPv4 message types used here.
pub mod msg_type {
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 0;
    /// Destination unreachable.
    pub const DST_UNREACHABLE: u8 = 3;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 8;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 11;
}

/// Destination unreachable code "fragmentation needed and DF set".
pub const CODE_FRAG_NEEDED: u8 = 4;
/// Time exceeded code "TTL exceeded in transit".
pub const CODE_TTL_EXCEEDED: u8 = 0;

/// True for the ICMP types that report errors (an error is never sent
/// about one of these, RFC 1812 4.3.2.7).
pub fn is_error_type(t: u8) -> bool {
    matches!(t, 3 | 4 | 5 | 11 | 12)
}

/// A view of an ICMPv4 message; the buffer is exactly the message (the IPv4
/// payload). [`Icmpv4Packet::new_checked`] guarantees the 8-byte header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Wraps `buffer` after checking the header is present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Icmpv4Packet { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    fn word(&self, at: usize) -> u16 {
        u16::from_be_bytes([self.b()[at], self.b()[at + 1]])
    }
    /// Message type.
    pub fn msg_type(&self) -> u8 {
        self.b()[0]
    }
    /// Code.
    pub fn code(&self) -> u8 {
        self.b()[1]
    }
    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        self.word(2)
    }
    /// Identifier (echo messages).
    pub fn echo_ident(&self) -> u16 {
        self.word(4)
    }
    /// Sequence number (echo messages).
    pub fn echo_seq(&self) -> u16 {
        self.word(6)
    }
    /// Next-hop MTU (destination unreachable code 4, RFC 1191).
    pub fn next_hop_mtu(&self) -> u16 {
        self.word(6)
    }
    /// Bytes after the 8-byte header: echo data, or the quoted datagram.
    pub fn data(&self) -> &[u8] {
        &self.b()[HEADER_LEN..]
    }
    /// True when the checksum over the whole message verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::sum(self.b()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Recomputes the checksum over the whole message.
    pub fn fill_checksum(&mut self) {
        self.buffer.as_mut()[2..4].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(self.b());
        self.buffer.as_mut()[2..4].copy_from_slice(&c.to_be_bytes());
    }
    /// Changes the type, patching the checksum incrementally (RFC 1624).
    pub fn set_msg_type(&mut self, t: u8) {
        let old = u16::from_be_bytes([self.msg_type(), self.code()]);
        let new = u16::from_be_bytes([t, self.code()]);
        let c = checksum::update16(self.checksum(), old, new);
        let b = self.buffer.as_mut();
        b[0] = t;
        b[2..4].copy_from_slice(&c.to_be_bytes());
    }
}

/// The ICMPv4 messages the gateway reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv4Repr<'a> {
    /// Echo request.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Echo data.
        data: &'a [u8],
    },
    /// Echo reply.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Echo data.
        data: &'a [u8],
    },
    /// Destination unreachable; `next_hop_mtu` is meaningful for code 4.
    DstUnreachable {
        /// Code (4 = fragmentation needed).
        code: u8,
        /// Next-hop MTU (RFC 1191), 0 for other codes.
        next_hop_mtu: u16,
        /// The quoted original datagram.
        data: &'a [u8],
    },
    /// Time exceeded.
    TimeExceeded {
        /// Code (0 = TTL exceeded in transit).
        code: u8,
        /// The quoted original datagram.
        data: &'a [u8],
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Reads a checked message; verifies the checksum.
    pub fn parse(packet: &Icmpv4Packet<&'a [u8]>) -> Result<Self> {
        if !packet.verify_checksum() {
            return Err(Error::Checksum);
        }
        let data = &packet.buffer[HEADER_LEN..];
        let (ident, seq_no) = (packet.echo_ident(), packet.echo_seq());
        Ok(match (packet.msg_type(), packet.code()) {
            (msg_type::ECHO_REQUEST, 0) => Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            },
            (msg_type::ECHO_REPLY, 0) => Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            },
            (msg_type::DST_UNREACHABLE, code) => Icmpv4Repr::DstUnreachable {
                code,
                next_hop_mtu: if code == CODE_FRAG_NEEDED {
                    packet.next_hop_mtu()
                } else {
                    0
                },
                data,
            },
            (msg_type::TIME_EXCEEDED, code) => Icmpv4Repr::TimeExceeded { code, data },
            _ => return Err(Error::Unsupported),
        })
    }

    fn parts(&self) -> (u8, u8, [u8; 4], &'a [u8]) {
        let echo = |ident: u16, seq: u16| {
            let (i, s) = (ident.to_be_bytes(), seq.to_be_bytes());
            [i[0], i[1], s[0], s[1]]
        };
        match *self {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => (msg_type::ECHO_REQUEST, 0, echo(ident, seq_no), data),
            Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => (msg_type::ECHO_REPLY, 0, echo(ident, seq_no), data),
            Icmpv4Repr::DstUnreachable {
                code,
                next_hop_mtu,
                data,
            } => (msg_type::DST_UNREACHABLE, code, echo(0, next_hop_mtu), data),
            Icmpv4Repr::TimeExceeded { code, data } => {
                (msg_type::TIME_EXCEEDED, code, [0; 4], data)
            }
        }
    }

    /// Length of the message this repr emits.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.parts().3.len()
    }

    /// Writes the message, checksum filled, at the start of `out`; returns
    /// its length.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize> {
        let (t, code, rest, data) = self.parts();
        let len = HEADER_LEN + data.len();
        let m = out.get_mut(..len).ok_or(Error::NoRoom)?;
        m[0] = t;
        m[1] = code;
        m[2..4].copy_from_slice(&[0, 0]);
        m[4..8].copy_from_slice(&rest);
        m[HEADER_LEN..].copy_from_slice(data);
        let c = checksum::checksum(m);
        m[2..4].copy_from_slice(&c.to_be_bytes());
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::hex;
    use crate::Ipv4Packet;

    // scapy: IP(...)/ICMP(type=8, id=0x4242, seq=7)/b"espgw-ping" (tools/gen_vectors.py eth_ipv4_icmp_echo, IPv4 part)
    const ECHO: &str =
        "45000026123440004001a49fc0000201c0000202080089dd4242000765737067772d70696e67";
    // scapy: IP(src="192.0.2.254", dst="192.0.2.1", ttl=64, id=0)/ICMP(type=3, code=4, nexthopmtu=1400)/inner4[:28]
    // (ipv4_icmp_frag_needed)
    const FRAG_NEEDED: &str = "45000038000000004001f5c5c00002fec000020103040216000005784500003a0001400040114e76c0000201c6336407045708ae0026e842";
    // scapy: same with ICMP(type=11, code=0) (ipv4_icmp_time_exceeded)
    const TIME_EXCEEDED: &str = "45000038000000004001f5c5c00002fec00002010b00ff91000000004500003a0001400040114e76c0000201c6336407045708ae0026e842";

    fn round_trip(vector: &str) -> (Vec<u8>, Icmpv4Repr<'static>) {
        let bytes: &'static [u8] = hex(vector).leak();
        let ip = Ipv4Packet::new_checked(bytes).unwrap();
        let payload: &'static [u8] = &bytes[ip.header_len()..usize::from(ip.total_len())];
        let icmp = Icmpv4Packet::new_checked(payload).unwrap();
        let repr = Icmpv4Repr::parse(&icmp).unwrap();
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut out).unwrap();
        assert_eq!(out, ip.payload(), "emit reproduces scapy's message");
        (out, repr)
    }

    #[test]
    fn echo_request_from_scapy() {
        let (_, repr) = round_trip(ECHO);
        assert_eq!(
            repr,
            Icmpv4Repr::EchoRequest {
                ident: 0x4242,
                seq_no: 7,
                data: b"espgw-ping"
            }
        );
    }

    #[test]
    fn frag_needed_from_scapy() {
        let (_, repr) = round_trip(FRAG_NEEDED);
        match repr {
            Icmpv4Repr::DstUnreachable {
                code: 4,
                next_hop_mtu: 1400,
                data,
            } => assert_eq!(data.len(), 28),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn time_exceeded_from_scapy() {
        let (_, repr) = round_trip(TIME_EXCEEDED);
        assert!(matches!(repr, Icmpv4Repr::TimeExceeded { code: 0, .. }));
    }

    #[test]
    fn bad_checksum_and_short_rejected() {
        let mut m = hex(ECHO)[20..].to_vec();
        for len in 0..HEADER_LEN {
            assert!(Icmpv4Packet::new_checked(&m[..len]).is_err());
        }
        m[9] ^= 0x10;
        assert_eq!(
            Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&m[..]).unwrap()),
            Err(Error::Checksum)
        );
    }

    #[test]
    fn type_change_patches_checksum() {
        let mut m = hex(ECHO)[20..].to_vec();
        let mut p = Icmpv4Packet::new_checked(&mut m[..]).unwrap();
        p.set_msg_type(msg_type::ECHO_REPLY);
        assert!(p.verify_checksum());
    }
}
