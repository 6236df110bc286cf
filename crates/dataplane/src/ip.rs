//! The summary of an IPv4/IPv6 header the pipeline decides on, read once
//! per packet, and the in-place TTL / hop-limit decrement.

use std::net::{IpAddr, Ipv4Addr};

use espgw_wire::{ip_protocol, ipv6, Ipv6Packet, PacketBuf};

use crate::reason::DropReason;
use espgw_control::tables::FlowKey;

/// What the pipeline needs to know about an IP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpMeta {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// Upper-layer protocol (after IPv6 extension headers).
    pub proto: u8,
    /// TTL or hop limit.
    pub ttl: u8,
    /// IPv4 DF flag (IPv6 never fragments on the way: always true).
    pub dont_frag: bool,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    /// Offset of the upper-layer header from the start of the packet.
    pub l4_offset: usize,
    pub v6: bool,
}

fn ports(proto: u8, l4: &[u8]) -> (Option<u16>, Option<u16>) {
    let has_ports = matches!(proto, ip_protocol::TCP | ip_protocol::UDP | 132);
    match l4.get(..4) {
        Some(p) if has_ports => (
            Some(u16::from_be_bytes([p[0], p[1]])),
            Some(u16::from_be_bytes([p[2], p[3]])),
        ),
        _ => (None, None),
    }
}

impl IpMeta {
    /// The SPD flow of a packet leaving the protected side (its source is
    /// the protected host).
    #[inline]
    pub fn outbound_flow(&self) -> FlowKey {
        FlowKey {
            src: self.src,
            dst: self.dst,
            proto: self.proto,
            // No ports (not TCP/UDP/SCTP, or a non-first fragment): looked
            // up as 0, so a rule's port range matches only if it holds 0.
            sport: self.sport.unwrap_or(0),
            dport: self.dport.unwrap_or(0),
        }
    }

    /// The SPD flow of a packet arriving from the far side (its
    /// destination is the protected host): the same flow, mirrored
    /// (selectors are written for outbound traffic).
    #[inline]
    pub fn inbound_flow(&self) -> FlowKey {
        self.outbound_flow().reversed()
    }
}

/// The IPv4 fast path's header summary: [`IpMeta`] with the addresses as
/// integers and the ports packed, 16 bytes. `IpAddr` is a 17-byte enum
/// whose every compare and hash branches on the family; the IPv4 paths of
/// the classifier and of the decrypted packet's forwarding compare and
/// hash plain words instead, and build an [`IpMeta`] ([`V4Meta::meta`])
/// only where they leave for the general path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V4Meta {
    pub src: u32,
    pub dst: u32,
    /// Source port (0 without ports: see `has_ports`).
    pub sport: u16,
    /// Destination port (0 without ports).
    pub dport: u16,
    pub proto: u8,
    pub ttl: u8,
    /// The header's length in bytes (20..=60), the offset of the upper layer.
    pub hl: u8,
    /// Bit 0: DF set; bit 1: the ports were read (TCP/UDP/SCTP, first
    /// fragment, four bytes there).
    pub flags: u8,
}

impl V4Meta {
    const DF: u8 = 1;
    const PORTS: u8 = 2;

    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.flags & Self::DF != 0
    }

    #[inline]
    pub fn has_ports(&self) -> bool {
        self.flags & Self::PORTS != 0
    }

    #[inline]
    pub fn src_addr(&self) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(self.src))
    }

    #[inline]
    pub fn dst_addr(&self) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(self.dst))
    }

    /// The same summary for the general path.
    #[inline]
    pub fn meta(&self) -> IpMeta {
        let ports = self.has_ports();
        IpMeta {
            src: self.src_addr(),
            dst: self.dst_addr(),
            proto: self.proto,
            ttl: self.ttl,
            dont_frag: self.dont_frag(),
            sport: ports.then_some(self.sport),
            dport: ports.then_some(self.dport),
            l4_offset: usize::from(self.hl),
            v6: false,
        }
    }
}

/// Parses the IPv4 packet at the start of `pkt`, verifies the header
/// checksum and trims link-layer padding after its total length.
///
/// Reads the header in place (every packet comes through here, twice for
/// decrypted ones): the checks are those of `Ipv4Packet::new_checked` and
/// `verify_checksum`, which the tests hold it to.
#[inline]
pub fn parse_v4<B: PacketBuf>(pkt: &mut B) -> Result<IpMeta, DropReason> {
    parse_v4_fast(pkt).map(|v| v.meta())
}

/// [`parse_v4`] for the IPv4 fast path: the same checks and trim, the
/// summary as a [`V4Meta`]. Always inlined: as a call, its register saves
/// and the result's trip through memory were a fifth of it.
#[inline(always)]
pub fn parse_v4_fast<B: PacketBuf>(pkt: &mut B) -> Result<V4Meta, DropReason> {
    let d = pkt.data();
    let Some(h) = d.first_chunk::<20>() else {
        return Err(DropReason::Malformed);
    };
    if h[0] >> 4 != 4 {
        return Err(DropReason::Malformed);
    }
    let hl = usize::from(h[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    if hl < 20 || total < hl || d.len() < total {
        return Err(DropReason::Malformed);
    }
    if !header_checksum_ok(h, &d[20..hl]) {
        return Err(DropReason::BadChecksum);
    }
    let flags_frag = u16::from_be_bytes([h[6], h[7]]);
    let proto = h[9];
    let mut flags = if flags_frag & 0x4000 != 0 {
        V4Meta::DF
    } else {
        0
    };
    let (mut sport, mut dport) = (0, 0);
    // What `ports` reads, without its pair of options: the first
    // fragment of TCP/UDP/SCTP with four bytes after the header.
    let has_ports = matches!(proto, ip_protocol::TCP | ip_protocol::UDP | 132);
    if flags_frag & 0x1fff == 0 && has_ports {
        if let Some(p) = d[hl..total].first_chunk::<4>() {
            sport = u16::from_be_bytes([p[0], p[1]]);
            dport = u16::from_be_bytes([p[2], p[3]]);
            flags |= V4Meta::PORTS;
        }
    }
    let meta = V4Meta {
        src: u32::from_be_bytes([h[12], h[13], h[14], h[15]]),
        dst: u32::from_be_bytes([h[16], h[17], h[18], h[19]]),
        sport,
        dport,
        proto,
        ttl: h[8],
        hl: hl as u8,
        flags,
    };
    let extra = d.len() - total;
    if extra != 0 {
        pkt.trim(extra).map_err(|_| DropReason::Malformed)?;
    }
    Ok(meta)
}

/// Multicast, broadcast or unspecified (IPv4): never forwarded. (Without
/// branches: 255.255.255.255 and 0.0.0.0 are the two whose successor,
/// wrapping, is below 2.)
#[inline]
pub fn is_group_v4(ip: u32) -> bool {
    (ip >> 28 == 0xe) | (ip.wrapping_add(1) < 2)
}

/// RFC 1071 check of an IPv4 header: the fixed 20 bytes as five 32-bit
/// words (no loop for the common header without options), then any options
/// (out of line: rare, and their loop kept registers busy in every parse).
///
/// The ones' complement sum of the 16-bit words is their plain sum folded
/// with end-around carries, which keeps it modulo 0xffff (2^16 = 1 there,
/// so a 32-bit word counts as its two halves); folding a non-zero sum never
/// gives 0. So the folded sum is 0xffff, the valid header, exactly when the
/// plain sum is a non-zero multiple of 0xffff: one remainder by a constant
/// instead of four folds.
#[inline]
fn header_checksum_ok(fixed: &[u8; 20], options: &[u8]) -> bool {
    let word = |i: usize| {
        u64::from(u32::from_be_bytes([
            fixed[i],
            fixed[i + 1],
            fixed[i + 2],
            fixed[i + 3],
        ]))
    };
    let mut sum = word(0) + word(4) + word(8) + word(12) + word(16);
    if !options.is_empty() {
        sum += options_sum(options);
    }
    sum != 0 && sum % 0xffff == 0
}

/// The ones' complement sum of an IPv4 header's options.
#[cold]
#[inline(never)]
fn options_sum(options: &[u8]) -> u64 {
    u64::from(espgw_wire::checksum::sum(options))
}

/// The IPv6 fast path's header summary, as [`V4Meta`] is IPv4's: the
/// addresses as `u128`, for a packet whose fixed header is followed
/// straight by TCP or UDP (the common case; anything else goes through
/// [`parse_v6`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V6Meta {
    pub src: u128,
    pub dst: u128,
    pub sport: u16,
    pub dport: u16,
    /// TCP or UDP.
    pub proto: u8,
    pub hop_limit: u8,
}

impl V6Meta {
    #[inline]
    pub fn src_addr(&self) -> IpAddr {
        IpAddr::V6(self.src.into())
    }

    #[inline]
    pub fn dst_addr(&self) -> IpAddr {
        IpAddr::V6(self.dst.into())
    }

    /// The [`IpMeta`] `parse_v6` gives for the same packet.
    pub fn meta(&self) -> IpMeta {
        IpMeta {
            src: self.src_addr(),
            dst: self.dst_addr(),
            proto: self.proto,
            ttl: self.hop_limit,
            dont_frag: true,
            sport: Some(self.sport),
            dport: Some(self.dport),
            l4_offset: 40,
            v6: true,
        }
    }
}

/// [`parse_v6`] for the IPv6 fast path: when the packet is TCP or UDP
/// straight after the fixed header, with the four bytes of ports within
/// its payload length, its [`V6Meta`] (and the link padding trimmed, as
/// `parse_v6` does); `None` and the packet untouched for anything else,
/// which `parse_v6` then parses or refuses. Always inlined, as
/// [`parse_v4_fast`].
#[inline(always)]
pub fn parse_v6_fast<B: PacketBuf>(pkt: &mut B) -> Option<V6Meta> {
    let d = pkt.data();
    let h = d.first_chunk::<44>()?;
    let total = 40 + usize::from(u16::from_be_bytes([h[4], h[5]]));
    let proto = h[6];
    if h[0] >> 4 != 6
        || total > d.len()
        || total < 44
        || !matches!(proto, ip_protocol::TCP | ip_protocol::UDP)
    {
        return None;
    }
    let word =
        |at: usize| u128::from_be_bytes(h[at..at + 16].try_into().expect("16 bytes of the header"));
    let meta = V6Meta {
        src: word(8),
        dst: word(24),
        sport: u16::from_be_bytes([h[40], h[41]]),
        dport: u16::from_be_bytes([h[42], h[43]]),
        proto,
        hop_limit: h[7],
    };
    let extra = d.len() - total;
    if extra != 0 {
        pkt.trim(extra).ok()?;
    }
    Some(meta)
}

/// Multicast or unspecified (IPv6, as [`is_group_v4`]): never forwarded.
#[inline]
pub fn is_group_v6(ip: u128) -> bool {
    (ip >> 120 == 0xff) | (ip == 0)
}

/// Parses the IPv6 packet at the start of `pkt` (walking extension
/// headers) and trims link-layer padding after its payload length.
pub fn parse_v6<B: PacketBuf>(pkt: &mut B) -> Result<IpMeta, DropReason> {
    let ip = Ipv6Packet::new_checked(pkt.data()).map_err(|_| DropReason::Malformed)?;
    let packet = ip.packet();
    let (proto, l4_offset) = ipv6::upper_layer(packet).map_err(|_| DropReason::Malformed)?;
    let (sport, dport) = ports(proto, packet.get(l4_offset..).unwrap_or(&[]));
    let meta = IpMeta {
        src: ip.src_addr().into(),
        dst: ip.dst_addr().into(),
        proto,
        ttl: ip.hop_limit(),
        dont_frag: true,
        sport,
        dport,
        l4_offset,
        v6: true,
    };
    let extra = pkt.len() - packet.len();
    pkt.trim(extra).map_err(|_| DropReason::Malformed)?;
    Ok(meta)
}

/// Parses the IPv4 or IPv6 packet at the start of `pkt` (by its version
/// nibble; anything but 6 is taken for IPv4 and refused there if it is not).
#[inline]
pub fn parse_ip<B: PacketBuf>(pkt: &mut B) -> Result<IpMeta, DropReason> {
    if pkt.data().first().is_some_and(|b| b >> 4 == 6) {
        parse_v6(pkt)
    } else {
        parse_v4(pkt)
    }
}

/// Decrements the TTL / hop limit of the packet at the start of `pkt`
/// (checksum patched for IPv4). The caller checked that it is above 1.
/// Always inlined: a handful of instructions, and `#[inline]` alone left it
/// a call from the classifier's per-packet path.
#[inline(always)]
pub fn decrement_ttl<B: PacketBuf>(pkt: &mut B, v6: bool) {
    let d = pkt.data_mut();
    if v6 {
        if let Some(hop_limit) = d.get_mut(7) {
            *hop_limit = hop_limit.saturating_sub(1);
        }
        return;
    }
    if d.len() < 20 || d[8] == 0 {
        return;
    }
    d[8] -= 1;
    // The TTL is the high byte of header word 4: lowering it by one raises
    // the ones' complement checksum by 0x0100, with the end-around carry
    // (RFC 1141; what Linux's ip_decrease_ttl does), cheaper than a general
    // RFC 1624 update through the header view (docs/benchmarks.md, "Where
    // the cycles go").
    let sum = u32::from(u16::from_be_bytes([d[10], d[11]])) + 0x0100;
    let check = (sum + (sum >> 16)) as u16;
    d[10..12].copy_from_slice(&check.to_be_bytes());
}

/// Test data for the property tests of the IPv6 fast reads (here and in
/// worker/classify.rs): random `bytes` with, when they hold a fixed
/// header, version `version`, next header `nh` and a payload length field
/// of `payload`, where `1000 + n` means what the bytes hold less `n` bytes
/// of link padding. Returns the packet and the payload length written.
#[cfg(test)]
pub(crate) fn shaped_v6(bytes: &[u8], version: u8, nh: u8, payload: usize) -> (Vec<u8>, usize) {
    let mut p = bytes.to_vec();
    let payload = if payload >= 1000 {
        p.len().saturating_sub(40 + payload - 1000)
    } else {
        payload
    };
    if p.len() >= 40 {
        p[0] = version << 4 | (p[0] & 0x0f);
        p[4..6].copy_from_slice(&(payload as u16).to_be_bytes());
        p[6] = nh;
    }
    (p, payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use espgw_wire::VecBuf;

    use espgw_wire::{Ipv4Packet, Ipv4Repr, UdpRepr};

    /// IPv4/UDP 10.1.0.10:1234 -> 10.2.0.10:53, TTL 5, DF, payload "hi".
    fn udp4() -> Vec<u8> {
        let mut p = vec![0u8; 30];
        Ipv4Repr {
            src_addr: [10, 1, 0, 10].into(),
            dst_addr: [10, 2, 0, 10].into(),
            protocol: ip_protocol::UDP,
            payload_len: 10,
            ttl: 5,
            dscp_ecn: 0,
            ident: 1,
            dont_frag: true,
        }
        .emit(&mut p)
        .unwrap();
        UdpRepr {
            src_port: 1234,
            dst_port: 53,
            payload_len: 2,
        }
        .emit(&mut p[20..])
        .unwrap();
        p[28..].copy_from_slice(b"hi");
        p
    }

    #[test]
    fn reads_ports_and_trims_padding() {
        let mut bytes = udp4();
        bytes.extend_from_slice(&[0; 10]);
        let mut pkt = VecBuf::from_packet(&bytes);
        let m = parse_v4(&mut pkt).unwrap();
        assert_eq!(
            (m.sport, m.dport, m.proto, m.ttl),
            (Some(1234), Some(53), 17, 5)
        );
        assert!(m.dont_frag);
        assert_eq!(pkt.len(), 30);
        decrement_ttl(&mut pkt, false);
        let ip = Ipv4Packet::new_checked(pkt.data()).unwrap();
        assert_eq!(ip.ttl(), 4);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn bad_checksum_is_counted_as_such() {
        let mut bytes = udp4();
        bytes[10] ^= 0xff;
        assert_eq!(
            parse_v4(&mut VecBuf::from_packet(&bytes)),
            Err(DropReason::BadChecksum)
        );
        assert_eq!(
            parse_v4(&mut VecBuf::from_packet(&bytes[..15])),
            Err(DropReason::Malformed)
        );
    }

    /// After the decrement the header checksum still verifies, for any
    /// header (options, any TTL above 1, any other field values).
    #[test]
    fn ttl_decrement_keeps_the_checksum_valid() {
        use proptest::prelude::*;
        proptest!(|(mut header in proptest::collection::vec(any::<u8>(), 20..=60), ttl in 2u8..=255)| {
            let hl = header.len() / 4 * 4;
            header.truncate(hl);
            header[0] = 0x40 | (hl / 4) as u8;
            header[2..4].copy_from_slice(&(hl as u16).to_be_bytes());
            header[8] = ttl;
            header[10..12].copy_from_slice(&[0, 0]);
            let sum = espgw_wire::checksum::sum(&header);
            header[10..12].copy_from_slice(&(!sum).to_be_bytes());
            let mut pkt = VecBuf::from_packet(&header);
            decrement_ttl(&mut pkt, false);
            let ip = Ipv4Packet::new_checked(pkt.data()).unwrap();
            prop_assert_eq!(ip.ttl(), ttl - 1);
            prop_assert!(ip.verify_checksum());
        });
    }

    /// The remainder test of the header checksum says what the folded
    /// RFC 1071 sum does (`checksum::sum(header) == 0xffff`), for any
    /// header bytes, with and without options, and for headers whose
    /// checksum field was set to make them valid (both encodings of zero).
    #[test]
    fn header_checksum_ok_agrees_with_the_folded_sum() {
        use proptest::prelude::*;
        let check = |header: &[u8]| {
            let fixed: &[u8; 20] = header.first_chunk().unwrap();
            header_checksum_ok(fixed, &header[20..])
                == (espgw_wire::checksum::sum(header) == 0xffff)
        };
        assert!(check(&[0; 20]));
        assert!(check(&[0xff; 24]));
        proptest!(|(mut header in proptest::collection::vec(any::<u8>(), 20..=60), fix in 0u8..3)| {
            let hl = header.len() / 4 * 4;
            header.truncate(hl);
            if fix > 0 {
                header[10..12].copy_from_slice(&[0, 0]);
                let sum = espgw_wire::checksum::sum(&header);
                // fix 2: a field of 0 written as 0xffff and the other way
                // round, the same value in ones' complement.
                let field = match (fix, !sum) {
                    (2, 0) => 0xffff,
                    (2, 0xffff) => 0,
                    (_, f) => f,
                };
                header[10..12].copy_from_slice(&field.to_be_bytes());
            }
            prop_assert!(check(&header));
        });
    }

    /// The IPv4 fast path's group test is `is_group` of the address
    /// (multicast, broadcast or unspecified), for every kind of address.
    #[test]
    fn is_group_v4_agrees_with_the_address_methods() {
        use proptest::prelude::*;
        let edges = [
            0u32,
            1,
            0xdfff_ffff,
            0xe000_0000,
            0xefff_ffff,
            0xf000_0000,
            u32::MAX - 1,
            u32::MAX,
        ];
        let check = |ip: u32| {
            let a = Ipv4Addr::from(ip);
            is_group_v4(ip) == (a.is_multicast() || a.is_broadcast() || a.is_unspecified())
        };
        assert!(edges.into_iter().all(check));
        proptest!(|(ip in any::<u32>())| prop_assert!(check(ip)));
    }

    /// The IPv6 fast path's parse agrees with `parse_v6`: whenever it
    /// gives a `V6Meta`, `parse_v6` gives its `IpMeta` and trims the packet
    /// to the same length; for every packet `parse_v6` takes as TCP or UDP
    /// right after the fixed header with its ports, it gives one; when it
    /// gives none it leaves the packet as it was. Random headers with the
    /// version, next header (extension headers among them) and payload
    /// length drawn around their edges, link padding, short packets.
    #[test]
    fn parse_v6_fast_agrees_with_parse_v6() {
        use proptest::prelude::*;
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        static FOUND: AtomicUsize = AtomicUsize::new(0);
        let packets = (
            any::<[u8; 80]>(),
            prop_oneof![0usize..80, 44usize..80],
            prop::sample::select(vec![6u8, 6, 6, 4, 7]),
            prop::sample::select(vec![6u8, 17, 17, 6, 58, 0, 43, 44, 60, 50]),
            prop_oneof![0usize..48, (0usize..4).prop_map(|pad| 1000 + pad)],
        );
        let config = ProptestConfig::with_cases(2048);
        proptest!(config, |((bytes, len, version, nh, payload) in packets)| {
            let (p, _) = shaped_v6(&bytes[..len], version, nh, payload);
            let mut fast_buf = VecBuf::from_packet(&p);
            let fast = parse_v6_fast(&mut fast_buf);
            let mut general_buf = VecBuf::from_packet(&p);
            let general = parse_v6(&mut general_buf);
            match (fast, &general) {
                (Some(v), Ok(m)) => {
                    prop_assert_eq!(&v.meta(), m);
                    prop_assert_eq!(fast_buf.data(), general_buf.data());
                    FOUND.fetch_add(1, Relaxed);
                }
                (Some(v), Err(r)) => prop_assert!(false, "fast took {:?}, general {:?}", v, r),
                (None, Ok(m)) => {
                    let covered = matches!(m.proto, 6 | 17) && m.l4_offset == 40 && m.sport.is_some();
                    prop_assert!(!covered, "left {:?} to the general path", m);
                    prop_assert_eq!(fast_buf.data(), &p[..], "untouched");
                }
                (None, Err(_)) => prop_assert_eq!(fast_buf.data(), &p[..], "untouched"),
            }
        });
        assert!(FOUND.load(Relaxed) > 20);
    }

    /// The IPv6 fast path's group test is `is_group` of the address.
    #[test]
    fn is_group_v6_agrees_with_the_address_methods() {
        use proptest::prelude::*;
        use std::net::Ipv6Addr;
        let check = |ip: u128| {
            let a = Ipv6Addr::from(ip);
            is_group_v6(ip) == (a.is_multicast() || a.is_unspecified())
        };
        let edges = [
            0u128,
            1,
            0xfeff << 112,
            0xff00 << 112,
            u128::MAX,
            u128::MAX >> 8,
        ];
        assert!(edges.into_iter().all(check));
        proptest!(|(ip in any::<u128>())| prop_assert!(check(ip)));
    }

    /// What the fast path reads of a `V4Meta` is what the general path
    /// reads of its `IpMeta`: addresses, ports (0 without), DF, offset.
    #[test]
    fn v4_meta_fields_are_the_ip_meta_fields() {
        for mut bytes in [
            udp4(),
            {
                let mut p = udp4();
                p[6] = 0x20; // MF, offset 0: still the first fragment, ports read
                p
            },
            {
                let mut p = udp4();
                p[7] = 1; // a later fragment: no ports
                p
            },
        ] {
            bytes[10..12].copy_from_slice(&[0, 0]);
            let sum = espgw_wire::checksum::sum(&bytes[..20]);
            bytes[10..12].copy_from_slice(&(!sum).to_be_bytes());
            let v = parse_v4_fast(&mut VecBuf::from_packet(&bytes)).unwrap();
            let m = parse_v4(&mut VecBuf::from_packet(&bytes)).unwrap();
            assert_eq!(v.meta(), m);
            assert_eq!((v.src_addr(), v.dst_addr()), (m.src, m.dst));
            assert_eq!(
                (v.sport, v.dport),
                (m.sport.unwrap_or(0), m.dport.unwrap_or(0))
            );
            assert_eq!(v.has_ports(), m.sport.is_some());
            assert_eq!(v.dont_frag(), m.dont_frag);
            assert_eq!(usize::from(v.hl), m.l4_offset);
        }
    }

    /// The in-place parser against the header view it replaced
    /// (`Ipv4Packet::new_checked` + `verify_checksum`): same verdict, same
    /// fields, same trimmed length, for valid headers (with options,
    /// fragments, padding) and random bytes.
    #[test]
    fn parse_v4_agrees_with_the_header_view() {
        use proptest::prelude::*;
        fn reference(bytes: &[u8]) -> Result<(IpMeta, usize), DropReason> {
            let ip = Ipv4Packet::new_checked(bytes).map_err(|_| DropReason::Malformed)?;
            if !ip.verify_checksum() {
                return Err(DropReason::BadChecksum);
            }
            let first = ip.frag_offset() == 0;
            let (sport, dport) = if first {
                ports(ip.protocol(), ip.payload())
            } else {
                (None, None)
            };
            Ok((
                IpMeta {
                    src: ip.src_addr().into(),
                    dst: ip.dst_addr().into(),
                    proto: ip.protocol(),
                    ttl: ip.ttl(),
                    dont_frag: ip.dont_frag(),
                    sport,
                    dport,
                    l4_offset: ip.header_len(),
                    v6: false,
                },
                usize::from(ip.total_len()),
            ))
        }
        let valid = (
            0usize..=10,
            0usize..40,
            0usize..8,
            any::<[u8; 20]>(),
            proptest::collection::vec(any::<u8>(), 90),
            any::<bool>(),
        )
            .prop_map(|(opt_words, payload, pad, fields, rest, fix_sum)| {
                let hl = 20 + 4 * opt_words;
                let total = hl + payload;
                let mut p = fields.to_vec();
                p.extend_from_slice(&rest[..4 * opt_words + payload + pad]);
                p[0] = 0x40 | (hl / 4) as u8;
                p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
                p[9] = [6u8, 17, 1, 50][usize::from(p[9]) % 4];
                let flags_frag = [0x0000u16, 0x4000, 0x2000, 0x1000, 0x0001, 0x1fff, 0x8000]
                    [usize::from(p[6]) % 7];
                p[6..8].copy_from_slice(&flags_frag.to_be_bytes());
                if fix_sum {
                    p[10..12].copy_from_slice(&[0, 0]);
                    let sum = espgw_wire::checksum::sum(&p[..hl]);
                    p[10..12].copy_from_slice(&(!sum).to_be_bytes());
                }
                p
            });
        let random = proptest::collection::vec(any::<u8>(), 0..80);
        proptest!(|(bytes in prop_oneof![valid, random])| {
            let mut pkt = VecBuf::from_packet(&bytes);
            let got = parse_v4(&mut pkt).map(|m| (m, pkt.len()));
            prop_assert_eq!(got, reference(&bytes));
        });
    }
}
