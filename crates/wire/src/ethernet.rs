//! Ethernet II frames with at most one 802.1Q VLAN tag.

use crate::{Error, Result};

/// A 48-bit MAC address.
pub type MacAddr = [u8; 6];

/// The broadcast MAC address.
pub const BROADCAST_MAC: MacAddr = [0xff; 6];

/// EtherType values this gateway handles.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// 802.1Q VLAN tag (the tag protocol identifier).
    pub const VLAN: u16 = 0x8100;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
}

/// Length of an untagged Ethernet II header.
pub const HEADER_LEN: usize = 14;
/// Length of the 802.1Q tag inserted after the source address.
pub const VLAN_TAG_LEN: usize = 4;

/// A view of an Ethernet II frame. Once built by [`EthernetFrame::new_checked`]
/// the whole header (tag included) is present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buffer` after checking that the header (and the VLAN tag when
    /// the frame has one) is there.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let len = buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let frame = EthernetFrame { buffer };
        if frame.header_len() > len {
            return Err(Error::Truncated);
        }
        Ok(frame)
    }

    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn outer_ethertype(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[12], b[13]])
    }

    /// Destination MAC address.
    pub fn dst_addr(&self) -> MacAddr {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[0..6]);
        a
    }

    /// Source MAC address.
    pub fn src_addr(&self) -> MacAddr {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[6..12]);
        a
    }

    /// True when the frame carries an 802.1Q tag.
    pub fn has_vlan(&self) -> bool {
        self.outer_ethertype() == ethertype::VLAN
    }

    /// The 802.1Q tag control information (PCP, DEI, VID), if tagged.
    pub fn vlan_tci(&self) -> Option<u16> {
        let b = self.buffer.as_ref();
        self.has_vlan().then(|| u16::from_be_bytes([b[14], b[15]]))
    }

    /// The 12-bit VLAN ID, if tagged.
    pub fn vlan_id(&self) -> Option<u16> {
        self.vlan_tci().map(|tci| tci & 0x0fff)
    }

    /// The EtherType of the payload (after the VLAN tag, if any).
    pub fn ethertype(&self) -> u16 {
        let b = self.buffer.as_ref();
        if self.has_vlan() {
            u16::from_be_bytes([b[16], b[17]])
        } else {
            self.outer_ethertype()
        }
    }

    /// Header length: 14, or 18 with a VLAN tag.
    pub fn header_len(&self) -> usize {
        if self.has_vlan() {
            HEADER_LEN + VLAN_TAG_LEN
        } else {
            HEADER_LEN
        }
    }

    /// The payload (may include Ethernet padding after the L3 packet).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<'a> EthernetFrame<&'a [u8]> {
    /// The payload, borrowed for as long as the underlying bytes (so views
    /// can be chained and returned from a function).
    pub fn into_payload(self) -> &'a [u8] {
        let start = self.header_len();
        &self.buffer[start..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC address.
    pub fn set_dst_addr(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[0..6].copy_from_slice(&addr);
    }

    /// Sets the source MAC address.
    pub fn set_src_addr(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[6..12].copy_from_slice(&addr);
    }

    /// Swaps source and destination and puts `our_mac` as the source: the L2
    /// half of answering a frame in place.
    pub fn turn_around(&mut self, our_mac: MacAddr) {
        let src = self.src_addr();
        self.set_dst_addr(src);
        self.set_src_addr(our_mac);
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }
}

/// The parsed contents of an Ethernet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetRepr {
    /// Source MAC.
    pub src_addr: MacAddr,
    /// Destination MAC.
    pub dst_addr: MacAddr,
    /// 802.1Q tag control information, when tagged.
    pub vlan_tci: Option<u16>,
    /// EtherType of the payload.
    pub ethertype: u16,
}

impl EthernetRepr {
    /// Reads the header of a checked frame.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Self {
        EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            vlan_tci: frame.vlan_tci(),
            ethertype: frame.ethertype(),
        }
    }

    /// Header length this repr emits.
    pub fn header_len(&self) -> usize {
        HEADER_LEN
            + if self.vlan_tci.is_some() {
                VLAN_TAG_LEN
            } else {
                0
            }
    }

    /// Writes the header at the start of `out`; returns its length.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize> {
        let len = self.header_len();
        let out = out.get_mut(..len).ok_or(Error::NoRoom)?;
        out[0..6].copy_from_slice(&self.dst_addr);
        out[6..12].copy_from_slice(&self.src_addr);
        if let Some(tci) = self.vlan_tci {
            out[12..14].copy_from_slice(&ethertype::VLAN.to_be_bytes());
            out[14..16].copy_from_slice(&tci.to_be_bytes());
        }
        out[len - 2..len].copy_from_slice(&self.ethertype.to_be_bytes());
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::hex;

    // scapy: Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")/IP(...)/ICMP(...) (tools/gen_vectors.py eth_ipv4_icmp_echo)
    const UNTAGGED: &str = "020000000002020000000001080045000026123440004001a49fc0000201c0000202080089dd4242000765737067772d70696e67";
    // scapy: Ether(...)/Dot1Q(vlan=100, prio=3)/IP(...)/UDP(...) (eth_vlan_ipv4_udp)
    const TAGGED: &str = "0200000000020200000000018100606408004500002100010000111195c90a0000010a00000204d2162e000d8cff68656c6c6f";

    #[test]
    fn parses_untagged_frame() {
        let bytes = hex(UNTAGGED);
        let f = EthernetFrame::new_checked(&bytes[..]).unwrap();
        assert_eq!(f.dst_addr(), [2, 0, 0, 0, 0, 2]);
        assert_eq!(f.src_addr(), [2, 0, 0, 0, 0, 1]);
        assert_eq!(f.ethertype(), ethertype::IPV4);
        assert_eq!(f.vlan_id(), None);
        assert_eq!(f.payload()[0], 0x45);
    }

    #[test]
    fn parses_vlan_tag() {
        let bytes = hex(TAGGED);
        let f = EthernetFrame::new_checked(&bytes[..]).unwrap();
        assert_eq!(f.vlan_id(), Some(100));
        assert_eq!(f.vlan_tci().map(|t| t >> 13), Some(3));
        assert_eq!(f.ethertype(), ethertype::IPV4);
        assert_eq!(f.header_len(), 18);
        assert_eq!(f.payload()[0], 0x45);
    }

    #[test]
    fn emit_parse_round_trip() {
        for s in [UNTAGGED, TAGGED] {
            let bytes = hex(s);
            let f = EthernetFrame::new_checked(&bytes[..]).unwrap();
            let repr = EthernetRepr::parse(&f);
            let mut out = [0u8; 18];
            let n = repr.emit(&mut out).unwrap();
            assert_eq!(&out[..n], &bytes[..n]);
            assert_eq!(repr.emit(&mut out[..n - 1]), Err(Error::NoRoom));
        }
    }

    #[test]
    fn short_headers_rejected() {
        for s in [UNTAGGED, TAGGED] {
            let bytes = hex(s);
            let hl = EthernetFrame::new_checked(&bytes[..]).unwrap().header_len();
            for len in 0..hl {
                assert!(EthernetFrame::new_checked(&bytes[..len]).is_err());
            }
        }
    }

    #[test]
    fn turn_around_swaps_addresses() {
        let mut bytes = hex(UNTAGGED);
        let mut f = EthernetFrame::new_checked(&mut bytes[..]).unwrap();
        f.turn_around([2, 0, 0, 0, 0, 9]);
        assert_eq!(f.dst_addr(), [2, 0, 0, 0, 0, 1]);
        assert_eq!(f.src_addr(), [2, 0, 0, 0, 0, 9]);
    }
}
