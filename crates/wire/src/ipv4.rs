//! IPv4 headers (RFC 791), options included.

use crate::checksum;
use crate::{Error, Result};
use core::net::Ipv4Addr;

/// Length of an IPv4 header without options.
pub const MIN_HEADER_LEN: usize = 20;

/// A view of an IPv4 packet. [`Ipv4Packet::new_checked`] guarantees version
/// 4, `20 <= header_len <= total_len <= buffer length`; bytes after
/// `total_len` (Ethernet padding) are ignored by [`Ipv4Packet::payload`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps `buffer` after validating the version and the length fields.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if b[0] >> 4 != 4 {
            return Err(Error::Malformed);
        }
        let header_len = usize::from(b[0] & 0x0f) * 4;
        let total_len = usize::from(u16::from_be_bytes([b[2], b[3]]));
        if header_len < MIN_HEADER_LEN || total_len < header_len {
            return Err(Error::Malformed);
        }
        if b.len() < total_len {
            return Err(Error::Truncated);
        }
        Ok(Ipv4Packet { buffer })
    }

    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Header length in bytes (IHL * 4), 20 to 60.
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[0] & 0x0f) * 4
    }
    /// DSCP and ECN (the old TOS byte).
    pub fn dscp_ecn(&self) -> u8 {
        self.b()[1]
    }
    /// Total length field: header plus payload.
    pub fn total_len(&self) -> u16 {
        u16::from_be_bytes([self.b()[2], self.b()[3]])
    }
    /// Identification.
    pub fn ident(&self) -> u16 {
        u16::from_be_bytes([self.b()[4], self.b()[5]])
    }
    /// Don't Fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.b()[6] & 0x40 != 0
    }
    /// More Fragments flag.
    pub fn more_frags(&self) -> bool {
        self.b()[6] & 0x20 != 0
    }
    /// Fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (u16::from_be_bytes([self.b()[6], self.b()[7]]) & 0x1fff) * 8
    }
    /// True for any fragment (MF set or non-zero offset).
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }
    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.b()[8]
    }
    /// Protocol of the payload (see [`crate::ip_protocol`]).
    pub fn protocol(&self) -> u8 {
        self.b()[9]
    }
    /// Header checksum field.
    pub fn header_checksum(&self) -> u16 {
        u16::from_be_bytes([self.b()[10], self.b()[11]])
    }
    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.b()[12], self.b()[13], self.b()[14], self.b()[15])
    }
    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.b()[16], self.b()[17], self.b()[18], self.b()[19])
    }
    /// The options bytes (empty when IHL is 5).
    pub fn options(&self) -> &[u8] {
        &self.header()[MIN_HEADER_LEN..]
    }
    /// The whole header, options included.
    pub fn header(&self) -> &[u8] {
        // new_checked saw header_len <= buffer length, and no setter changes IHL.
        &self.b()[..self.header_len()]
    }
    /// The packet: header plus payload, without link-layer padding.
    pub fn packet(&self) -> &[u8] {
        &self.b()[..self.payload_range().1]
    }
    /// Start and end of the payload. Clamped to the buffer so that a bad
    /// `set_total_len` cannot make an accessor panic.
    fn payload_range(&self) -> (usize, usize) {
        let end = usize::from(self.total_len()).min(self.b().len());
        (self.header_len().min(end), end)
    }
    /// The payload, up to `total_len` (link-layer padding excluded).
    pub fn payload(&self) -> &[u8] {
        let (start, end) = self.payload_range();
        &self.b()[start..end]
    }
    /// True when the header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::sum(self.header()) == 0xffff
    }
}

impl<'a> Ipv4Packet<&'a [u8]> {
    /// The payload (up to `total_len`), borrowed for as long as the
    /// underlying bytes.
    pub fn into_payload(self) -> &'a [u8] {
        let (start, end) = self.payload_range();
        &self.buffer[start..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Sets the DSCP/ECN byte (checksum not updated).
    pub fn set_dscp_ecn(&mut self, v: u8) {
        self.bm()[1] = v;
    }
    /// Sets the total length (checksum not updated).
    pub fn set_total_len(&mut self, v: u16) {
        self.bm()[2..4].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the identification (checksum not updated).
    pub fn set_ident(&mut self, v: u16) {
        self.bm()[4..6].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the DF and MF flags and the fragment offset in bytes (rounded
    /// down to 8-byte units); checksum not updated.
    pub fn set_frag(&mut self, dont_frag: bool, more_frags: bool, offset: u16) {
        let v = u16::from(dont_frag) << 14 | u16::from(more_frags) << 13 | (offset / 8);
        self.bm()[6..8].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the TTL (checksum not updated).
    pub fn set_ttl(&mut self, v: u8) {
        self.bm()[8] = v;
    }
    /// Sets the source address (checksum not updated).
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.bm()[12..16].copy_from_slice(&a.octets());
    }
    /// Sets the destination address (checksum not updated).
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.bm()[16..20].copy_from_slice(&a.octets());
    }
    /// Recomputes the header checksum over the whole header.
    pub fn fill_checksum(&mut self) {
        let hl = self.header_len();
        self.bm()[10..12].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&self.b()[..hl]);
        self.bm()[10..12].copy_from_slice(&c.to_be_bytes());
    }
    /// Decrements the TTL and patches the checksum incrementally (RFC 1624).
    /// Returns the new TTL, or `None` (packet unchanged) when the TTL is 0 or
    /// 1: a router must then drop it and may send Time Exceeded (RFC 1812 5.3.1).
    pub fn decrement_ttl(&mut self) -> Option<u8> {
        let ttl = self.ttl();
        if ttl <= 1 {
            return None;
        }
        let proto = u16::from(self.protocol());
        let old = u16::from(ttl) << 8 | proto;
        let new = u16::from(ttl - 1) << 8 | proto;
        let c = checksum::update16(self.header_checksum(), old, new);
        self.bm()[8] = ttl - 1;
        self.bm()[10..12].copy_from_slice(&c.to_be_bytes());
        Some(ttl - 1)
    }
    /// The payload (up to `total_len`), writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (start, end) = self.payload_range();
        &mut self.bm()[start..end]
    }
}

/// The fields of an IPv4 header the gateway sets when it builds one. Emitted
/// headers have no options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Payload protocol.
    pub protocol: u8,
    /// Payload length in bytes (total length minus header).
    pub payload_len: u16,
    /// Time to live.
    pub ttl: u8,
    /// DSCP/ECN byte.
    pub dscp_ecn: u8,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment flag.
    pub dont_frag: bool,
}

impl Ipv4Repr {
    /// Reads a checked packet; rejects a bad checksum and fragments (the
    /// gateway never reassembles, and a repr cannot describe one).
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> Result<Self> {
        if !packet.verify_checksum() {
            return Err(Error::Checksum);
        }
        if packet.is_fragment() {
            return Err(Error::Unsupported);
        }
        Ok(Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: packet.total_len() - packet.header_len() as u16,
            ttl: packet.ttl(),
            dscp_ecn: packet.dscp_ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
        })
    }

    /// Header length this repr emits (always 20).
    pub fn header_len(&self) -> usize {
        MIN_HEADER_LEN
    }

    /// Writes the 20-byte header, checksum filled, at the start of `out`;
    /// returns its length. Fails if the total length would overflow u16.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize> {
        let total = self
            .payload_len
            .checked_add(MIN_HEADER_LEN as u16)
            .ok_or(Error::Malformed)?;
        let h = out.get_mut(..MIN_HEADER_LEN).ok_or(Error::NoRoom)?;
        h[0] = 0x45;
        h[1] = self.dscp_ecn;
        h[2..4].copy_from_slice(&total.to_be_bytes());
        h[4..6].copy_from_slice(&self.ident.to_be_bytes());
        h[6..8].copy_from_slice(&(if self.dont_frag { 0x4000u16 } else { 0 }).to_be_bytes());
        h[8] = self.ttl;
        h[9] = self.protocol;
        h[10..12].copy_from_slice(&[0, 0]);
        h[12..16].copy_from_slice(&self.src_addr.octets());
        h[16..20].copy_from_slice(&self.dst_addr.octets());
        let c = checksum::checksum(h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        Ok(MIN_HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ip_protocol;
    use crate::testutil::{assert_prefixes_rejected, hex};

    // scapy: IP(src="192.0.2.1", dst="192.0.2.2", id=0x1234, ttl=64, flags="DF")/ICMP(type=8, id=0x4242, seq=7)/b"espgw-ping"
    // (tools/gen_vectors.py eth_ipv4_icmp_echo without its 14-byte Ethernet header)
    const ICMP_ECHO: &str =
        "45000026123440004001a49fc0000201c0000202080089dd4242000765737067772d70696e67";
    // scapy: IP(src="198.51.100.1", dst="203.0.113.9", id=0xbeef, ttl=5, flags="MF", frag=100,
    //           options=[IPOption_RR(routers=["0.0.0.0"]*3)])/UDP(sport=53, dport=40000)/b"abcdefgh" (ipv4_options_udp)
    const WITH_OPTIONS: &str = "49000034beef206405116118c6336401cb007109070f040000000000000000000000000000359c4000106b846162636465666768";

    #[test]
    fn parses_scapy_packet() {
        let bytes = hex(ICMP_ECHO);
        let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.header_checksum(), 0xa49f);
        let r = Ipv4Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Ipv4Repr {
                src_addr: Ipv4Addr::new(192, 0, 2, 1),
                dst_addr: Ipv4Addr::new(192, 0, 2, 2),
                protocol: ip_protocol::ICMP,
                payload_len: 18,
                ttl: 64,
                dscp_ecn: 0,
                ident: 0x1234,
                dont_frag: true,
            }
        );
        // Emit reproduces scapy's header byte for byte, checksum included.
        let mut out = [0u8; 20];
        r.emit(&mut out).unwrap();
        assert_eq!(&out[..], &bytes[..20]);
    }

    #[test]
    fn parses_options_and_fragment_fields() {
        let bytes = hex(WITH_OPTIONS);
        let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.header_len(), 36);
        assert_eq!(p.options().len(), 16);
        assert_eq!(p.options()[0], 7); // record route
        assert!(p.more_frags() && !p.dont_frag());
        assert_eq!(p.frag_offset(), 800);
        assert!(p.verify_checksum());
        assert_eq!(p.payload().len(), 16);
        assert_eq!(&p.payload()[..2], &53u16.to_be_bytes());
        assert_eq!(Ipv4Repr::parse(&p), Err(Error::Unsupported));
    }

    #[test]
    fn ignores_link_padding_and_rejects_truncation() {
        let mut bytes = hex(ICMP_ECHO);
        assert_prefixes_rejected(&bytes, |b| Ipv4Packet::new_checked(b).map(|_| ()));
        assert_prefixes_rejected(&hex(WITH_OPTIONS), |b| {
            Ipv4Packet::new_checked(b).map(|_| ())
        });
        bytes.extend_from_slice(&[0; 8]);
        let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.payload().len(), 18);
    }

    #[test]
    fn rejects_bad_fields() {
        let good = hex(ICMP_ECHO);
        let mut b = good.clone();
        b[0] = 0x65;
        assert_eq!(Ipv4Packet::new_checked(&b[..]), Err(Error::Malformed));
        b = good.clone();
        b[0] = 0x44;
        assert_eq!(Ipv4Packet::new_checked(&b[..]), Err(Error::Malformed));
        b = good.clone();
        b[3] = 10; // total length below header length
        assert_eq!(Ipv4Packet::new_checked(&b[..]), Err(Error::Malformed));
        b = good;
        b[11] ^= 1;
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p), Err(Error::Checksum));
    }

    #[test]
    fn ttl_decrement_keeps_checksum_valid() {
        let mut bytes = hex(WITH_OPTIONS);
        let mut p = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
        for expected in (1..5).rev() {
            assert_eq!(p.decrement_ttl(), Some(expected));
            assert!(p.verify_checksum());
        }
        assert_eq!(p.decrement_ttl(), None);
        assert_eq!(p.ttl(), 1);
        // Same result as a full recomputation.
        let c = p.header_checksum();
        p.fill_checksum();
        assert_eq!(p.header_checksum(), c);
    }
}
