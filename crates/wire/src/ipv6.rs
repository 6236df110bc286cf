//! IPv6 fixed header (RFC 8200) and the extension-header walk.

use crate::ip_protocol;
use crate::{Error, Result};
use core::net::Ipv6Addr;

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = 40;

/// Most extension headers [`upper_layer`] follows before giving up. Each
/// header moves the offset forward by at least 8 bytes, so the walk always
/// ends; this bound keeps its cost small on a hostile chain.
pub const MAX_EXTENSION_HEADERS: usize = 16;

/// A view of an IPv6 packet. [`Ipv6Packet::new_checked`] guarantees version
/// 6 and `40 + payload_len <= buffer length`; bytes after that (Ethernet
/// padding) are ignored by [`Ipv6Packet::payload`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps `buffer` after validating the version and the payload length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if b[0] >> 4 != 6 {
            return Err(Error::Malformed);
        }
        let payload_len = usize::from(u16::from_be_bytes([b[4], b[5]]));
        if b.len() < HEADER_LEN + payload_len {
            return Err(Error::Truncated);
        }
        Ok(Ipv6Packet { buffer })
    }

    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Traffic class.
    pub fn traffic_class(&self) -> u8 {
        (u16::from_be_bytes([self.b()[0], self.b()[1]]) >> 4) as u8
    }
    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        u32::from_be_bytes([0, self.b()[1] & 0x0f, self.b()[2], self.b()[3]])
    }
    /// Payload length (extension headers included).
    pub fn payload_len(&self) -> u16 {
        u16::from_be_bytes([self.b()[4], self.b()[5]])
    }
    /// Next header of the fixed header.
    pub fn next_header(&self) -> u8 {
        self.b()[6]
    }
    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.b()[7]
    }
    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.b()[8..24]);
        Ipv6Addr::from(a)
    }
    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.b()[24..40]);
        Ipv6Addr::from(a)
    }
    /// The packet: fixed header plus `payload_len` bytes.
    pub fn packet(&self) -> &[u8] {
        &self.b()[..self.packet_len()]
    }
    /// Fixed header plus `payload_len`, clamped to the buffer so that a bad
    /// `set_payload_len` cannot make an accessor panic.
    fn packet_len(&self) -> usize {
        (HEADER_LEN + usize::from(self.payload_len())).min(self.b().len())
    }
    /// The payload after the fixed header (extension headers included).
    pub fn payload(&self) -> &[u8] {
        &self.packet()[HEADER_LEN..]
    }
    /// Walks the extension headers; see [`upper_layer`].
    pub fn upper_layer(&self) -> Result<(u8, usize)> {
        upper_layer(self.packet())
    }
}

impl<'a> Ipv6Packet<&'a [u8]> {
    /// The payload after the fixed header, borrowed for as long as the
    /// underlying bytes.
    pub fn into_payload(self) -> &'a [u8] {
        let end = self.packet_len();
        &self.buffer[HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[7] = v;
    }
    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[8..24].copy_from_slice(&a.octets());
    }
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[24..40].copy_from_slice(&a.octets());
    }
    /// Sets the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        self.buffer.as_mut()[4..6].copy_from_slice(&v.to_be_bytes());
    }
    /// Decrements the hop limit. Returns the new value, or `None` (packet
    /// unchanged) when it is 0 or 1 and the packet must not be forwarded.
    pub fn decrement_hop_limit(&mut self) -> Option<u8> {
        let h = self.hop_limit();
        if h <= 1 {
            return None;
        }
        self.set_hop_limit(h - 1);
        Some(h - 1)
    }
    /// The payload after the fixed header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.packet_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// Walks the extension-header chain of the IPv6 packet `packet` (fixed header
/// first, trimmed to its payload length) and returns `(next_header, offset)`:
/// the protocol that follows the last extension header and the offset of its
/// first byte from the start of `packet`.
///
/// Follows Hop-by-Hop (0), Routing (43), Destination Options (60), Fragment
/// (44, fixed 8 bytes) and AH (51, length in 4-byte units plus 2, RFC 4302).
/// Stops at ESP (50), No Next Header (59) and anything else (upper layer).
/// A Fragment header with a non-zero offset stops the walk with
/// `(44, offset of that fragment header)`: what follows is the middle of a
/// payload, not a header. Hop-by-Hop anywhere but first is
/// [`Error::Malformed`] (RFC 8200 4.3), as is a chain longer than
/// [`MAX_EXTENSION_HEADERS`]; a header running past the end is
/// [`Error::Truncated`].
pub fn upper_layer(packet: &[u8]) -> Result<(u8, usize)> {
    if packet.len() < HEADER_LEN {
        return Err(Error::Truncated);
    }
    let mut next = packet[6];
    let mut offset = HEADER_LEN;
    for index in 0..=MAX_EXTENSION_HEADERS {
        let len = match next {
            ip_protocol::HOPOPTS if index != 0 => return Err(Error::Malformed),
            ip_protocol::HOPOPTS | ip_protocol::ROUTING | ip_protocol::DSTOPTS => {
                let l = packet.get(offset + 1).ok_or(Error::Truncated)?;
                (usize::from(*l) + 1) * 8
            }
            ip_protocol::AH => {
                let l = packet.get(offset + 1).ok_or(Error::Truncated)?;
                (usize::from(*l) + 2) * 4
            }
            ip_protocol::FRAGMENT => {
                let frag = packet.get(offset..offset + 8).ok_or(Error::Truncated)?;
                if u16::from_be_bytes([frag[2], frag[3]]) & 0xfff8 != 0 {
                    return Ok((ip_protocol::FRAGMENT, offset));
                }
                8
            }
            _ => return Ok((next, offset)),
        };
        if index == MAX_EXTENSION_HEADERS {
            break;
        }
        if offset + len > packet.len() {
            return Err(Error::Truncated);
        }
        next = packet[offset];
        offset += len;
    }
    Err(Error::Malformed)
}

/// The fields of an IPv6 fixed header the gateway sets when it builds one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next header.
    pub next_header: u8,
    /// Payload length.
    pub payload_len: u16,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (low 20 bits used).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Reads the fixed header of a checked packet.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Self {
        Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: packet.payload_len(),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        }
    }

    /// Header length this repr emits (40).
    pub fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the 40-byte header at the start of `out`; returns its length.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize> {
        let h = out.get_mut(..HEADER_LEN).ok_or(Error::NoRoom)?;
        let first = 6u32 << 28 | u32::from(self.traffic_class) << 20 | (self.flow_label & 0xf_ffff);
        h[0..4].copy_from_slice(&first.to_be_bytes());
        h[4..6].copy_from_slice(&self.payload_len.to_be_bytes());
        h[6] = self.next_header;
        h[7] = self.hop_limit;
        h[8..24].copy_from_slice(&self.src_addr.octets());
        h[24..40].copy_from_slice(&self.dst_addr.octets());
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_prefixes_rejected, hex};

    // scapy: IPv6(src="2001:db8::1", dst="2001:db8::2", hlim=64, fl=0x12345, tc=0xb8)/UDP(sport=4500, dport=4500)/b"\0\0\0\0ike"
    // (tools/gen_vectors.py ipv6_udp)
    const UDP6: &str = "6b812345000f114020010db800000000000000000000000120010db800000000000000000000000211941194000fb2c700000000696b65";
    // scapy: IPv6()/IPv6ExtHdrHopByHop()/IPv6ExtHdrDestOpt(PadN 10)/IPv6ExtHdrRouting(1 address)/
    //        IPv6ExtHdrFragment(offset=0, m=1)/AH(nh=50, payloadlen=4, spi=0x100, icv=12 bytes)/ESP(spi=0xdeadbeef, seq=9) (ipv6_ext_chain_esp)
    const EXT_CHAIN: &str = "600000000068004020010db800000000000000000000000120010db80000000000000000000000023c000104000000002b01010a0000000000000000000001002c0200010000000020010db80000000000000000000000993300000100000007320400000000010000000001111111111111111111111111deadbeef0000000999999999999999999999999999999999";
    // scapy: IPv6()/IPv6ExtHdrFragment(offset=10, m=0, nh=17)/Raw(16 bytes) (ipv6_frag_nonfirst)
    const FRAG_NONFIRST: &str = "6000000000182c4020010db800000000000000000000000120010db8000000000000000000000002110000500000000755555555555555555555555555555555";

    #[test]
    fn parses_scapy_header() {
        let bytes = hex(UDP6);
        let p = Ipv6Packet::new_checked(&bytes[..]).unwrap();
        let r = Ipv6Repr::parse(&p);
        assert_eq!(r.traffic_class, 0xb8);
        assert_eq!(r.flow_label, 0x12345);
        assert_eq!(r.payload_len, 15);
        assert_eq!(r.next_header, ip_protocol::UDP);
        assert_eq!(r.hop_limit, 64);
        assert_eq!(r.src_addr, "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(r.dst_addr, "2001:db8::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.upper_layer(), Ok((ip_protocol::UDP, 40)));
        let mut out = [0u8; 40];
        r.emit(&mut out).unwrap();
        assert_eq!(&out[..], &bytes[..40]);
    }

    #[test]
    fn walks_scapy_extension_chain_to_esp() {
        let bytes = hex(EXT_CHAIN);
        let p = Ipv6Packet::new_checked(&bytes[..]).unwrap();
        // 40 + HBH 8 + DestOpt 16 + Routing 24 + Fragment 8 + AH 24 = 120.
        assert_eq!(p.upper_layer(), Ok((ip_protocol::ESP, 120)));
        assert_eq!(&bytes[120..124], &[0xde, 0xad, 0xbe, 0xef]);
        // scapy leaves AH's next header at 0 unless told: that is Hop-by-Hop
        // after the first header, which the walk must refuse.
        let mut bad = bytes.clone();
        bad[96] = 0;
        assert_eq!(upper_layer(&bad), Err(Error::Malformed));
    }

    #[test]
    fn stops_at_non_first_fragment() {
        let bytes = hex(FRAG_NONFIRST);
        assert_eq!(upper_layer(&bytes), Ok((ip_protocol::FRAGMENT, 40)));
    }

    #[test]
    fn truncations_rejected() {
        for s in [UDP6, EXT_CHAIN, FRAG_NONFIRST] {
            assert_prefixes_rejected(&hex(s), |b| Ipv6Packet::new_checked(b).map(|_| ()));
        }
        // A walk over a chain cut inside its headers fails rather than
        // pointing past the end.
        let bytes = hex(EXT_CHAIN);
        for len in 40..120 {
            assert!(upper_layer(&bytes[..len]).is_err(), "cut at {len}");
        }
    }

    #[test]
    fn hostile_chains_are_bounded() {
        // 40 destination-options headers each pointing at the next.
        let mut p = vec![0u8; 40 + 40 * 8];
        p[0] = 0x60;
        p[6] = ip_protocol::DSTOPTS;
        for i in 0..40 {
            p[40 + i * 8] = ip_protocol::DSTOPTS;
        }
        assert_eq!(upper_layer(&p), Err(Error::Malformed));
        // Hop-by-hop after the first position.
        let mut q = vec![0u8; 56];
        q[0] = 0x60;
        q[6] = ip_protocol::DSTOPTS;
        q[40] = ip_protocol::HOPOPTS;
        assert_eq!(upper_layer(&q), Err(Error::Malformed));
    }

    #[test]
    fn hop_limit_decrement() {
        let mut bytes = hex(UDP6);
        let mut p = Ipv6Packet::new_checked(&mut bytes[..]).unwrap();
        assert_eq!(p.decrement_hop_limit(), Some(63));
        p.set_hop_limit(1);
        assert_eq!(p.decrement_hop_limit(), None);
    }
}
