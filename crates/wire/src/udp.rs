//! UDP (RFC 768) with checksums over the IPv4 and IPv6 pseudo-headers.

use crate::{checksum, ip_protocol};
use crate::{Error, Result};
use core::net::{Ipv4Addr, Ipv6Addr};

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

/// A view of a UDP datagram. [`UdpPacket::new_checked`] guarantees
/// `8 <= length field <= buffer length`; [`UdpPacket::payload`] ends where
/// the length field says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps `buffer` after validating the length field.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = usize::from(u16::from_be_bytes([b[4], b[5]]));
        if len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len > b.len() {
            return Err(Error::Truncated);
        }
        Ok(UdpPacket { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Source port.
    pub fn src_port(&self) -> u16 {
        u16::from_be_bytes([self.b()[0], self.b()[1]])
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        u16::from_be_bytes([self.b()[2], self.b()[3]])
    }
    /// Length field: header plus payload.
    pub fn len(&self) -> u16 {
        u16::from_be_bytes([self.b()[4], self.b()[5]])
    }
    /// Always false: a checked datagram holds at least its header. (Present
    /// because clippy asks for it next to `len`.)
    pub fn is_empty(&self) -> bool {
        false
    }
    /// Checksum field (0 means "none" over IPv4).
    pub fn checksum(&self) -> u16 {
        u16::from_be_bytes([self.b()[6], self.b()[7]])
    }
    /// The datagram: header plus payload, as long as the length field says.
    pub fn datagram(&self) -> &[u8] {
        &self.b()[..usize::from(self.len())]
    }
    /// The payload.
    pub fn payload(&self) -> &[u8] {
        &self.datagram()[HEADER_LEN..]
    }
    /// True when the checksum verifies over the IPv4 pseudo-header, or is 0
    /// (no checksum, allowed over IPv4).
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let ph = checksum::pseudo_header_v4(src, dst, ip_protocol::UDP, self.len());
        checksum::add(ph, checksum::sum(self.datagram())) == 0xffff
    }
    /// True when the checksum verifies over the IPv6 pseudo-header (a zero
    /// checksum is invalid over IPv6, RFC 8200 8.1).
    pub fn verify_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        if self.checksum() == 0 {
            return false;
        }
        let ph = checksum::pseudo_header_v6(src, dst, ip_protocol::UDP, u32::from(self.len()));
        checksum::add(ph, checksum::sum(self.datagram())) == 0xffff
    }
}

impl<'a> UdpPacket<&'a [u8]> {
    /// The payload, borrowed for as long as the underlying bytes.
    pub fn into_payload(self) -> &'a [u8] {
        let end = usize::from(self.len());
        &self.buffer[HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port (checksum not updated).
    pub fn set_src_port(&mut self, v: u16) {
        self.buffer.as_mut()[0..2].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the destination port (checksum not updated).
    pub fn set_dst_port(&mut self, v: u16) {
        self.buffer.as_mut()[2..4].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the checksum field directly (0 disables it over IPv4).
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[6..8].copy_from_slice(&v.to_be_bytes());
    }
    fn fill_with(&mut self, pseudo: u16) {
        self.set_checksum(0);
        let c = checksum::finish(checksum::add(pseudo, checksum::sum(self.datagram())));
        // A computed 0 is sent as 0xffff, since 0 means "no checksum".
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }
    /// Computes and writes the checksum over the IPv4 pseudo-header.
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let len = self.len();
        self.fill_with(checksum::pseudo_header_v4(src, dst, ip_protocol::UDP, len));
    }
    /// Computes and writes the checksum over the IPv6 pseudo-header.
    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        let len = u32::from(self.len());
        self.fill_with(checksum::pseudo_header_v6(src, dst, ip_protocol::UDP, len));
    }
    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// A UDP header's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length in bytes.
    pub payload_len: u16,
}

impl UdpRepr {
    /// Reads a checked datagram (checksum not verified here: it needs the IP
    /// addresses, see `verify_checksum_v4`/`_v6`).
    pub fn parse<T: AsRef<[u8]>>(packet: &UdpPacket<T>) -> Self {
        UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: packet.len() - HEADER_LEN as u16,
        }
    }

    /// Writes the 8-byte header with a zero checksum at the start of `out`
    /// (fill it once the payload is in place); returns its length.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize> {
        let len = self
            .payload_len
            .checked_add(HEADER_LEN as u16)
            .ok_or(Error::Malformed)?;
        let h = out.get_mut(..HEADER_LEN).ok_or(Error::NoRoom)?;
        h[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        h[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        h[4..6].copy_from_slice(&len.to_be_bytes());
        h[6..8].copy_from_slice(&[0, 0]);
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_prefixes_rejected, hex};
    use crate::{Ipv4Packet, Ipv6Packet};

    // scapy: IP(src="10.0.0.1", dst="10.0.0.2", ttl=17)/UDP(sport=1234, dport=5678)/b"hello"
    // (tools/gen_vectors.py eth_vlan_ipv4_udp without its 18-byte Ethernet+VLAN header)
    const UDP4: &str = "4500002100010000111195c90a0000010a00000204d2162e000d8cff68656c6c6f";
    // scapy: IPv6(src="2001:db8::1", dst="2001:db8::2", ...)/UDP(sport=4500, dport=4500)/b"\0\0\0\0ike" (ipv6_udp)
    const UDP6: &str = "6b812345000f114020010db800000000000000000000000120010db800000000000000000000000211941194000fb2c700000000696b65";

    #[test]
    fn ipv4_checksum_matches_scapy() {
        let mut bytes = hex(UDP4);
        let ip = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!(
            UdpRepr::parse(&udp),
            UdpRepr {
                src_port: 1234,
                dst_port: 5678,
                payload_len: 5
            }
        );
        assert_eq!(udp.payload(), b"hello");
        assert_eq!(udp.checksum(), 0x8cff);
        assert!(udp.verify_checksum_v4(src, dst));
        // Emit a header and fill the checksum: scapy's bytes again.
        let seg = &mut bytes[20..];
        UdpRepr::parse(&UdpPacket::new_checked(&*seg).unwrap())
            .emit(seg)
            .unwrap();
        let mut udp = UdpPacket::new_checked(seg).unwrap();
        udp.fill_checksum_v4(src, dst);
        assert_eq!(bytes, hex(UDP4));
    }

    #[test]
    fn ipv6_checksum_matches_scapy() {
        let mut bytes = hex(UDP6);
        let ip = Ipv6Packet::new_checked(&bytes[..]).unwrap();
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        assert!(udp.verify_checksum_v6(src, dst));
        assert!(!udp.verify_checksum_v6(dst, "::1".parse().unwrap()));
        let mut udp = UdpPacket::new_checked(&mut bytes[40..]).unwrap();
        udp.set_checksum(0);
        assert!(!udp.verify_checksum_v6(src, dst));
        udp.fill_checksum_v6(src, dst);
        assert_eq!(bytes, hex(UDP6));
    }

    #[test]
    fn truncations_rejected() {
        assert_prefixes_rejected(&hex(UDP4)[20..], |b| UdpPacket::new_checked(b).map(|_| ()));
        let mut bad = hex(UDP4)[20..].to_vec();
        bad[5] = 7;
        assert_eq!(UdpPacket::new_checked(&bad[..]), Err(Error::Malformed));
    }
}
