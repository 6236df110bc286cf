//! ICMPv6 (RFC 4443) and Neighbor Discovery (RFC 4861): echo, packet too
//! big, time exceeded, neighbor solicitation and advertisement.

use crate::ethernet::MacAddr;
use crate::{checksum, ip_protocol};
use crate::{Error, Result};
use core::net::Ipv6Addr;

/// Length of the ICMPv6 header (type, code, checksum, 4 type-specific bytes).
pub const HEADER_LEN: usize = 8;
/// Length of an NS/NA message before its options.
pub const ND_HEADER_LEN: usize = 24;
/// Length of a link-layer address option for Ethernet.
pub const LLADDR_OPT_LEN: usize = 8;
/// The IPv6 minimum MTU: an ICMPv6 error never makes a packet longer.
pub const MIN_MTU: usize = 1280;

/// ICMPv6 message types used here.
pub mod msg_type {
    /// Destination unreachable.
    pub const DST_UNREACHABLE: u8 = 1;
    /// Packet too big.
    pub const PACKET_TOO_BIG: u8 = 2;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 3;
    /// Parameter problem.
    pub const PARAM_PROBLEM: u8 = 4;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 129;
    /// Neighbor solicitation.
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    /// Neighbor advertisement.
    pub const NEIGHBOR_ADVERT: u8 = 136;
    /// Redirect.
    pub const REDIRECT: u8 = 137;
}

/// ND option types for link-layer addresses.
pub mod nd_option {
    /// Source link-layer address.
    pub const SOURCE_LLADDR: u8 = 1;
    /// Target link-layer address.
    pub const TARGET_LLADDR: u8 = 2;
}

const NA_FLAG_ROUTER: u8 = 0x80;
const NA_FLAG_SOLICITED: u8 = 0x40;
const NA_FLAG_OVERRIDE: u8 = 0x20;

/// A view of an ICMPv6 message; the buffer is exactly the message.
/// [`Icmpv6Packet::new_checked`] guarantees the 8-byte header, and 24 bytes
/// for neighbor solicitations and advertisements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn is_nd(t: u8) -> bool {
    t == msg_type::NEIGHBOR_SOLICIT || t == msg_type::NEIGHBOR_ADVERT
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Wraps `buffer` after checking the header (and the ND target) is there.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN || (is_nd(b[0]) && b.len() < ND_HEADER_LEN) {
            return Err(Error::Truncated);
        }
        Ok(Icmpv6Packet { buffer })
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
    /// MTU (packet too big).
    pub fn mtu(&self) -> u32 {
        u32::from_be_bytes([self.b()[4], self.b()[5], self.b()[6], self.b()[7]])
    }
    /// The R/S/O flag byte of a neighbor advertisement.
    pub fn na_flags(&self) -> u8 {
        self.b()[4]
    }
    /// Target address of an NS or NA; `None` for other types.
    pub fn target_addr(&self) -> Option<Ipv6Addr> {
        if !is_nd(self.msg_type()) {
            return None;
        }
        let bytes: [u8; 16] = self.b().get(8..24)?.try_into().ok()?;
        Some(Ipv6Addr::from(bytes))
    }
    /// Bytes after the 8-byte header: echo data, quoted packet, or ND body.
    pub fn data(&self) -> &[u8] {
        &self.b()[HEADER_LEN..]
    }
    /// True when the checksum verifies over the pseudo-header of `src`/`dst`.
    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        let len = self.b().len() as u32;
        let ph = checksum::pseudo_header_v6(src, dst, ip_protocol::ICMPV6, len);
        checksum::add(ph, checksum::sum(self.b())) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Computes and writes the checksum over the pseudo-header of `src`/`dst`.
    pub fn fill_checksum(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.buffer.as_mut()[2..4].copy_from_slice(&[0, 0]);
        let len = self.b().len() as u32;
        let ph = checksum::pseudo_header_v6(src, dst, ip_protocol::ICMPV6, len);
        let c = checksum::finish(checksum::add(ph, checksum::sum(self.b())));
        self.buffer.as_mut()[2..4].copy_from_slice(&c.to_be_bytes());
    }
    /// Changes the type, patching the checksum incrementally (RFC 1624).
    /// Only for types whose length rules match (e.g. echo request -> reply).
    pub fn set_msg_type(&mut self, t: u8) {
        let old = u16::from_be_bytes([self.msg_type(), self.code()]);
        let new = u16::from_be_bytes([t, self.code()]);
        let c = checksum::update16(self.checksum(), old, new);
        let b = self.buffer.as_mut();
        b[0] = t;
        b[2..4].copy_from_slice(&c.to_be_bytes());
    }
}

/// Finds the link-layer address option `kind` among ND options; rejects a
/// zero-length or overrunning option (RFC 4861 4.6).
fn find_lladdr(mut options: &[u8], kind: u8) -> Result<Option<MacAddr>> {
    let mut found = None;
    while !options.is_empty() {
        if options.len() < 2 {
            return Err(Error::Malformed);
        }
        let len = usize::from(options[1]) * 8;
        if len == 0 || len > options.len() {
            return Err(Error::Malformed);
        }
        if options[0] == kind && len == LLADDR_OPT_LEN && found.is_none() {
            let mut mac = [0u8; 6];
            mac.copy_from_slice(&options[2..8]);
            found = Some(mac);
        }
        options = &options[len..];
    }
    Ok(found)
}

fn emit_lladdr(kind: u8, mac: MacAddr, out: &mut [u8]) {
    out[0] = kind;
    out[1] = 1;
    out[2..8].copy_from_slice(&mac);
}

/// The ICMPv6 messages the gateway reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Repr<'a> {
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
    /// Packet too big.
    PacketTooBig {
        /// MTU of the next hop.
        mtu: u32,
        /// As much of the original packet as fits in 1280 bytes.
        data: &'a [u8],
    },
    /// Time exceeded.
    TimeExceeded {
        /// Code (0 = hop limit exceeded in transit).
        code: u8,
        /// As much of the original packet as fits in 1280 bytes.
        data: &'a [u8],
    },
    /// Neighbor solicitation.
    NeighborSolicit {
        /// The address being resolved.
        target_addr: Ipv6Addr,
        /// The solicitor's MAC (absent when its source is unspecified).
        source_lladdr: Option<MacAddr>,
    },
    /// Neighbor advertisement.
    NeighborAdvert {
        /// R flag: sender is a router.
        router: bool,
        /// S flag: answer to a solicitation.
        solicited: bool,
        /// O flag: override a cached entry.
        override_: bool,
        /// The address advertised.
        target_addr: Ipv6Addr,
        /// Its MAC.
        target_lladdr: Option<MacAddr>,
    },
}

impl<'a> Icmpv6Repr<'a> {
    /// Reads a checked message sent from `src` to `dst`; verifies the
    /// checksum and, for ND, the code and the options (RFC 4861 7.1).
    /// The hop-limit-255 rule is the IP layer's: see
    /// [`crate::reply::neighbor_advert_reply`].
    pub fn parse(packet: &Icmpv6Packet<&'a [u8]>, src: Ipv6Addr, dst: Ipv6Addr) -> Result<Self> {
        if !packet.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        let b: &'a [u8] = packet.buffer;
        let data = &b[HEADER_LEN..];
        let (ident, seq_no) = (packet.echo_ident(), packet.echo_seq());
        let target = packet.target_addr();
        Ok(match (packet.msg_type(), packet.code(), target) {
            (msg_type::ECHO_REQUEST, 0, _) => Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            },
            (msg_type::ECHO_REPLY, 0, _) => Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            },
            (msg_type::PACKET_TOO_BIG, 0, _) => Icmpv6Repr::PacketTooBig {
                mtu: packet.mtu(),
                data,
            },
            (msg_type::TIME_EXCEEDED, code, _) => Icmpv6Repr::TimeExceeded { code, data },
            (msg_type::NEIGHBOR_SOLICIT, 0, Some(target_addr)) => Icmpv6Repr::NeighborSolicit {
                target_addr,
                source_lladdr: find_lladdr(&b[ND_HEADER_LEN..], nd_option::SOURCE_LLADDR)?,
            },
            (msg_type::NEIGHBOR_ADVERT, 0, Some(target_addr)) => {
                let flags = packet.na_flags();
                Icmpv6Repr::NeighborAdvert {
                    router: flags & NA_FLAG_ROUTER != 0,
                    solicited: flags & NA_FLAG_SOLICITED != 0,
                    override_: flags & NA_FLAG_OVERRIDE != 0,
                    target_addr,
                    target_lladdr: find_lladdr(&b[ND_HEADER_LEN..], nd_option::TARGET_LLADDR)?,
                }
            }
            (msg_type::NEIGHBOR_SOLICIT | msg_type::NEIGHBOR_ADVERT, _, _) => {
                return Err(Error::Malformed)
            }
            _ => return Err(Error::Unsupported),
        })
    }

    /// Length of the message this repr emits.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv6Repr::EchoRequest { data, .. }
            | Icmpv6Repr::EchoReply { data, .. }
            | Icmpv6Repr::PacketTooBig { data, .. }
            | Icmpv6Repr::TimeExceeded { data, .. } => HEADER_LEN + data.len(),
            Icmpv6Repr::NeighborSolicit {
                source_lladdr: ll, ..
            }
            | Icmpv6Repr::NeighborAdvert {
                target_lladdr: ll, ..
            } => ND_HEADER_LEN + if ll.is_some() { LLADDR_OPT_LEN } else { 0 },
        }
    }

    /// Writes the message sent from `src` to `dst`, checksum filled, at the
    /// start of `out`; returns its length.
    pub fn emit(&self, src: Ipv6Addr, dst: Ipv6Addr, out: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        let m = out.get_mut(..len).ok_or(Error::NoRoom)?;
        m[1..8].fill(0);
        match *self {
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }
            | Icmpv6Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                m[0] = if matches!(self, Icmpv6Repr::EchoRequest { .. }) {
                    msg_type::ECHO_REQUEST
                } else {
                    msg_type::ECHO_REPLY
                };
                m[4..6].copy_from_slice(&ident.to_be_bytes());
                m[6..8].copy_from_slice(&seq_no.to_be_bytes());
                m[HEADER_LEN..].copy_from_slice(data);
            }
            Icmpv6Repr::PacketTooBig { mtu, data } => {
                m[0] = msg_type::PACKET_TOO_BIG;
                m[4..8].copy_from_slice(&mtu.to_be_bytes());
                m[HEADER_LEN..].copy_from_slice(data);
            }
            Icmpv6Repr::TimeExceeded { code, data } => {
                m[0] = msg_type::TIME_EXCEEDED;
                m[1] = code;
                m[HEADER_LEN..].copy_from_slice(data);
            }
            Icmpv6Repr::NeighborSolicit {
                target_addr,
                source_lladdr,
            } => {
                m[0] = msg_type::NEIGHBOR_SOLICIT;
                m[8..24].copy_from_slice(&target_addr.octets());
                if let Some(mac) = source_lladdr {
                    emit_lladdr(nd_option::SOURCE_LLADDR, mac, &mut m[24..]);
                }
            }
            Icmpv6Repr::NeighborAdvert {
                router,
                solicited,
                override_,
                target_addr,
                target_lladdr,
            } => {
                m[0] = msg_type::NEIGHBOR_ADVERT;
                m[4] = if router { NA_FLAG_ROUTER } else { 0 }
                    | if solicited { NA_FLAG_SOLICITED } else { 0 }
                    | if override_ { NA_FLAG_OVERRIDE } else { 0 };
                m[8..24].copy_from_slice(&target_addr.octets());
                if let Some(mac) = target_lladdr {
                    emit_lladdr(nd_option::TARGET_LLADDR, mac, &mut m[24..]);
                }
            }
        }
        Icmpv6Packet { buffer: &mut *m }.fill_checksum(src, dst);
        Ok(len)
    }
}

/// The solicited-node multicast address of `addr` (RFC 4291 2.7.1), where
/// neighbor solicitations for it are sent.
pub fn solicited_node_multicast(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// The Ethernet multicast MAC for an IPv6 multicast address (RFC 2464 7):
/// 33:33 followed by the address's last 32 bits.
pub fn multicast_mac(addr: Ipv6Addr) -> MacAddr {
    let o = addr.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::hex;
    use crate::Ipv6Packet;

    // scapy: IPv6(src="fe80::1", dst="fe80::2", hlim=64)/ICMPv6EchoRequest(id=0x77, seq=3, data=b"ping6")
    // (tools/gen_vectors.py ipv6_icmpv6_echo)
    const ECHO: &str = "60000000000d3a40fe800000000000000000000000000001fe80000000000000000000000000000280006d680077000370696e6736";
    // scapy: IPv6(src="fe80::1", dst="ff02::1:ff00:2", hlim=255)/ICMPv6ND_NS(tgt="fe80::2")/ICMPv6NDOptSrcLLAddr(lladdr="02:00:00:00:00:01") (ipv6_ns)
    pub(crate) const NS: &str = "6000000000203afffe800000000000000000000000000001ff0200000000000000000001ff00000287007a9700000000fe8000000000000000000000000000020101020000000001";
    // scapy: IPv6(src="fe80::2", dst="fe80::1", hlim=255)/ICMPv6ND_NA(tgt="fe80::2", R=0, S=1, O=1)/ICMPv6NDOptDstLLAddr(lladdr="02:00:00:00:00:02") (ipv6_na)
    pub(crate) const NA: &str = "6000000000203afffe800000000000000000000000000002fe8000000000000000000000000000018800181a60000000fe8000000000000000000000000000020201020000000002";
    // scapy: IPv6(src="2001:db8::fe", dst="2001:db8::1", hlim=64)/ICMPv6PacketTooBig(mtu=1400)/inner6 (ipv6_icmpv6_ptb)
    const PTB: &str = "60000000004c3a4020010db80000000000000000000000fe20010db800000000000000000000000102002a610000057860000000001c114020010db800000000000000000000000120010db800000000000000000000000200010002001cef897878787878787878787878787878787878787878";
    // scapy: same with ICMPv6TimeExceeded(code=0) (ipv6_icmpv6_time_exceeded)
    const TIME_EXCEEDED: &str = "60000000004c3a4020010db80000000000000000000000fe20010db800000000000000000000000103002ed90000000060000000001c114020010db800000000000000000000000120010db800000000000000000000000200010002001cef897878787878787878787878787878787878787878";

    /// Parses the ICMPv6 part of a scapy packet, re-emits it and checks the
    /// bytes (checksum included) are scapy's.
    fn round_trip(vector: &str) -> Icmpv6Repr<'static> {
        let bytes: &'static [u8] = hex(vector).leak();
        let ip = Ipv6Packet::new_checked(bytes).unwrap();
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let payload: &'static [u8] = &bytes[40..40 + usize::from(ip.payload_len())];
        let icmp = Icmpv6Packet::new_checked(payload).unwrap();
        let repr = Icmpv6Repr::parse(&icmp, src, dst).unwrap();
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(src, dst, &mut out).unwrap();
        assert_eq!(out, ip.payload());
        assert!(
            Icmpv6Repr::parse(&icmp, dst, src).is_ok(),
            "pseudo-header sum is symmetric"
        );
        assert_eq!(
            Icmpv6Repr::parse(&icmp, src, "::1".parse().unwrap()),
            Err(Error::Checksum)
        );
        repr
    }

    fn ip(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn echo_from_scapy() {
        assert_eq!(
            round_trip(ECHO),
            Icmpv6Repr::EchoRequest {
                ident: 0x77,
                seq_no: 3,
                data: b"ping6"
            }
        );
    }

    #[test]
    fn neighbor_solicit_from_scapy() {
        assert_eq!(
            round_trip(NS),
            Icmpv6Repr::NeighborSolicit {
                target_addr: ip("fe80::2"),
                source_lladdr: Some([2, 0, 0, 0, 0, 1])
            }
        );
    }

    #[test]
    fn neighbor_advert_from_scapy() {
        assert_eq!(
            round_trip(NA),
            Icmpv6Repr::NeighborAdvert {
                router: false,
                solicited: true,
                override_: true,
                target_addr: ip("fe80::2"),
                target_lladdr: Some([2, 0, 0, 0, 0, 2]),
            }
        );
    }

    #[test]
    fn errors_from_scapy() {
        assert!(
            matches!(round_trip(PTB), Icmpv6Repr::PacketTooBig { mtu: 1400, data } if data.len() == 68)
        );
        assert!(
            matches!(round_trip(TIME_EXCEEDED), Icmpv6Repr::TimeExceeded { code: 0, data } if data.len() == 68)
        );
    }

    #[test]
    fn short_nd_and_bad_options_rejected() {
        let bytes = hex(NS);
        let icmp = &bytes[40..];
        for len in 0..ND_HEADER_LEN {
            assert!(Icmpv6Packet::new_checked(&icmp[..len]).is_err());
        }
        let mut zero_len_opt = icmp.to_vec();
        zero_len_opt[25] = 0;
        let mut p = Icmpv6Packet::new_checked(&mut zero_len_opt[..]).unwrap();
        p.fill_checksum(ip("fe80::1"), ip("ff02::1:ff00:2"));
        let p = Icmpv6Packet::new_checked(&zero_len_opt[..]).unwrap();
        assert_eq!(
            Icmpv6Repr::parse(&p, ip("fe80::1"), ip("ff02::1:ff00:2")),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn multicast_helpers() {
        assert_eq!(
            solicited_node_multicast(ip("fe80::2")),
            ip("ff02::1:ff00:2")
        );
        assert_eq!(
            solicited_node_multicast(ip("2001:db8::abcd:1234:5678")),
            ip("ff02::1:ff34:5678")
        );
        assert_eq!(
            multicast_mac(ip("ff02::1:ff00:2")),
            [0x33, 0x33, 0xff, 0, 0, 2]
        );
    }
}
