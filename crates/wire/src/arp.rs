//! ARP for Ethernet/IPv4 (RFC 826).

use crate::ethernet::{ethertype, MacAddr};
use crate::{Error, Result};
use core::net::Ipv4Addr;

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = 28;

/// ARP operation codes.
pub mod operation {
    /// Request.
    pub const REQUEST: u16 = 1;
    /// Reply.
    pub const REPLY: u16 = 2;
}

/// A view of an Ethernet/IPv4 ARP packet. [`ArpPacket::new_checked`] accepts
/// only hardware type 1, protocol 0x0800 and address lengths 6 and 4, so
/// every field sits at a fixed offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps `buffer` after checking its length and the address types.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < PACKET_LEN {
            return Err(Error::Truncated);
        }
        if b[0..6] != [0, 1, 0x08, 0x00, 6, 4] {
            return Err(Error::Unsupported);
        }
        Ok(ArpPacket { buffer })
    }

    fn field<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut out = [0; N];
        out.copy_from_slice(&self.buffer.as_ref()[at..at + N]);
        out
    }

    /// Operation (1 request, 2 reply).
    pub fn operation(&self) -> u16 {
        u16::from_be_bytes(self.field(6))
    }
    /// Sender hardware address.
    pub fn sender_mac(&self) -> MacAddr {
        self.field(8)
    }
    /// Sender protocol address.
    pub fn sender_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.field::<4>(14))
    }
    /// Target hardware address.
    pub fn target_mac(&self) -> MacAddr {
        self.field(18)
    }
    /// Target protocol address.
    pub fn target_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.field::<4>(24))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Turns a request for `our_ip` into the reply from `our_mac`, in place.
    /// The caller rewrites the Ethernet header (see
    /// [`crate::EthernetFrame::turn_around`]).
    pub fn turn_into_reply(&mut self, our_ip: Ipv4Addr, our_mac: MacAddr) -> Result<()> {
        if self.operation() != operation::REQUEST {
            return Err(Error::Unsupported);
        }
        if self.target_ip() != our_ip {
            return Err(Error::Suppressed);
        }
        ArpRepr {
            operation: operation::REPLY,
            sender_mac: our_mac,
            sender_ip: our_ip,
            target_mac: self.sender_mac(),
            target_ip: self.sender_ip(),
        }
        .emit(self.buffer.as_mut())
        .map(|_| ())
    }
}

/// The contents of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpRepr {
    /// Operation (see [`operation`]).
    pub operation: u16,
    /// Sender hardware address.
    pub sender_mac: MacAddr,
    /// Sender protocol address.
    pub sender_ip: Ipv4Addr,
    /// Target hardware address (zero in a request).
    pub target_mac: MacAddr,
    /// Target protocol address.
    pub target_ip: Ipv4Addr,
}

impl ArpRepr {
    /// Reads a checked packet; rejects operations other than request/reply.
    pub fn parse<T: AsRef<[u8]>>(packet: &ArpPacket<T>) -> Result<Self> {
        let op = packet.operation();
        if op != operation::REQUEST && op != operation::REPLY {
            return Err(Error::Unsupported);
        }
        Ok(ArpRepr {
            operation: op,
            sender_mac: packet.sender_mac(),
            sender_ip: packet.sender_ip(),
            target_mac: packet.target_mac(),
            target_ip: packet.target_ip(),
        })
    }

    /// A request from us asking who has `target_ip`.
    pub fn request(our_mac: MacAddr, our_ip: Ipv4Addr, target_ip: Ipv4Addr) -> Self {
        ArpRepr {
            operation: operation::REQUEST,
            sender_mac: our_mac,
            sender_ip: our_ip,
            target_mac: [0; 6],
            target_ip,
        }
    }

    /// Writes the 28-byte packet at the start of `out`; returns its length.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize> {
        let out = out.get_mut(..PACKET_LEN).ok_or(Error::NoRoom)?;
        out[0..2].copy_from_slice(&1u16.to_be_bytes());
        out[2..4].copy_from_slice(&ethertype::IPV4.to_be_bytes());
        out[4] = 6;
        out[5] = 4;
        out[6..8].copy_from_slice(&self.operation.to_be_bytes());
        out[8..14].copy_from_slice(&self.sender_mac);
        out[14..18].copy_from_slice(&self.sender_ip.octets());
        out[18..24].copy_from_slice(&self.target_mac);
        out[24..28].copy_from_slice(&self.target_ip.octets());
        Ok(PACKET_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_prefixes_rejected, hex};

    // scapy: ARP(op=1, hwsrc="02:00:00:00:00:01", psrc="192.0.2.1", pdst="192.0.2.2") (tools/gen_vectors.py arp_request)
    const REQUEST: &str = "0001080006040001020000000001c0000201000000000000c0000202";
    // scapy: ARP(op=2, hwsrc="02:..:02", psrc="192.0.2.2", hwdst="02:..:01", pdst="192.0.2.1") (arp_reply)
    const REPLY: &str = "0001080006040002020000000002c0000202020000000001c0000201";
    const MAC1: MacAddr = [2, 0, 0, 0, 0, 1];
    const MAC2: MacAddr = [2, 0, 0, 0, 0, 2];
    const IP1: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    const IP2: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);

    #[test]
    fn parses_scapy_request() {
        let bytes = hex(REQUEST);
        let p = ArpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            ArpRepr::parse(&p).unwrap(),
            ArpRepr::request(MAC1, IP1, IP2)
        );
    }

    #[test]
    fn emit_matches_scapy() {
        let mut out = [0u8; 28];
        ArpRepr::request(MAC1, IP1, IP2).emit(&mut out).unwrap();
        assert_eq!(out.to_vec(), hex(REQUEST));
    }

    #[test]
    fn request_turns_into_scapy_reply() {
        let mut bytes = hex(REQUEST);
        let mut p = ArpPacket::new_checked(&mut bytes[..]).unwrap();
        assert_eq!(p.turn_into_reply(IP1, MAC2), Err(Error::Suppressed));
        p.turn_into_reply(IP2, MAC2).unwrap();
        assert_eq!(bytes, hex(REPLY));
    }

    #[test]
    fn truncations_and_other_types_rejected() {
        assert_prefixes_rejected(&hex(REQUEST), |b| ArpPacket::new_checked(b).map(|_| ()));
        let mut bytes = hex(REQUEST);
        bytes[1] = 6; // IEEE 802 hardware type
        assert_eq!(ArpPacket::new_checked(&bytes[..]), Err(Error::Unsupported));
    }
}
