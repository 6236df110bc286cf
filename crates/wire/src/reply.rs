//! Builders for the packets the gateway answers with, written into a
//! caller's buffer or in place: no allocation on the data path.
//!
//! Every function takes an L3 packet (IPv4 or IPv6, starting at the IP
//! header) except [`arp_reply_in_place`], which takes the whole Ethernet
//! frame. They check the rules on when an answer is allowed and return
//! [`Error::Suppressed`] when it is not.

use crate::ethernet::{ethertype, EthernetFrame, MacAddr};
use crate::icmpv4::{self, Icmpv4Packet, Icmpv4Repr};
use crate::icmpv6::{self, Icmpv6Packet, Icmpv6Repr};
use crate::ipv4::{self, Ipv4Packet, Ipv4Repr};
use crate::ipv6::{self, Ipv6Packet, Ipv6Repr};
use crate::{ip_protocol, ArpPacket, Error, Result};
use core::net::{Ipv4Addr, Ipv6Addr};

/// TTL / hop limit of the ICMP messages the gateway originates.
pub const REPLY_TTL: u8 = 64;
/// Largest IPv4 ICMP error the gateway sends (RFC 1812 4.3.2.3).
pub const ICMPV4_ERROR_MAX_LEN: usize = 576;

fn bad_v4_source(a: Ipv4Addr) -> bool {
    a.is_unspecified() || a.is_broadcast() || a.is_multicast() || a.is_loopback()
}

/// Writes an ICMPv4 error about `orig` (RFC 1812 4.3.2.3 and 4.3.2.7):
/// checks that an error is allowed, then quotes as much of the original as
/// fits in `out` and in 576 bytes, and at least its header plus 8 bytes (RFC 792).
fn emit_icmpv4_error(
    orig: &[u8],
    msg_type: u8,
    code: u8,
    mtu: u16,
    src: Ipv4Addr,
    out: &mut [u8],
) -> Result<usize> {
    let orig = Ipv4Packet::new_checked(orig)?;
    if !orig.verify_checksum() {
        return Err(Error::Checksum);
    }
    if orig.frag_offset() != 0 || bad_v4_source(orig.src_addr()) {
        return Err(Error::Suppressed);
    }
    let dst = orig.dst_addr();
    if dst.is_broadcast() || dst.is_multicast() {
        return Err(Error::Suppressed);
    }
    if orig.protocol() == ip_protocol::ICMP {
        // An unreadable ICMP header might be an error: stay quiet.
        let t = *orig.payload().first().ok_or(Error::Suppressed)?;
        if icmpv4::is_error_type(t) {
            return Err(Error::Suppressed);
        }
    }
    let whole = &orig.into_inner()[..usize::from(orig.total_len())];
    let overhead = ipv4::MIN_HEADER_LEN + icmpv4::HEADER_LEN;
    let room = out.len().min(ICMPV4_ERROR_MAX_LEN).saturating_sub(overhead);
    let minimum = whole.len().min(orig.header_len() + 8);
    if room < minimum {
        return Err(Error::NoRoom);
    }
    let quote = &whole[..whole.len().min(room)];
    let icmp = match msg_type {
        icmpv4::msg_type::DST_UNREACHABLE => Icmpv4Repr::DstUnreachable {
            code,
            next_hop_mtu: mtu,
            data: quote,
        },
        _ => Icmpv4Repr::TimeExceeded { code, data: quote },
    };
    let ip = Ipv4Repr {
        src_addr: src,
        dst_addr: orig.src_addr(),
        protocol: ip_protocol::ICMP,
        payload_len: icmp.buffer_len() as u16,
        ttl: REPLY_TTL,
        dscp_ecn: 0,
        ident: 0,
        dont_frag: false,
    };
    let h = ip.emit(out)?;
    Ok(h + icmp.emit(&mut out[h..])?)
}

/// Writes into `out` the IPv4 packet "destination unreachable,
/// fragmentation needed" (type 3 code 4) with next-hop `mtu` (RFC 1191),
/// from `src` back to the sender of `orig_ip_packet`. Quotes as much of the
/// original as fits in `out` and 576 bytes, at least its header + 8 bytes.
/// Returns the length written.
pub fn emit_icmpv4_frag_needed(
    orig_ip_packet: &[u8],
    mtu: u16,
    src: Ipv4Addr,
    out: &mut [u8],
) -> Result<usize> {
    emit_icmpv4_error(
        orig_ip_packet,
        icmpv4::msg_type::DST_UNREACHABLE,
        icmpv4::CODE_FRAG_NEEDED,
        mtu,
        src,
        out,
    )
}

/// Writes into `out` the IPv4 packet "time exceeded, TTL exceeded in
/// transit" about `orig_ip_packet` (as received, before any TTL change).
/// Same quoting and suppression rules as [`emit_icmpv4_frag_needed`].
pub fn emit_icmpv4_time_exceeded(
    orig_ip_packet: &[u8],
    src: Ipv4Addr,
    out: &mut [u8],
) -> Result<usize> {
    emit_icmpv4_error(
        orig_ip_packet,
        icmpv4::msg_type::TIME_EXCEEDED,
        icmpv4::CODE_TTL_EXCEEDED,
        0,
        src,
        out,
    )
}

/// The ICMPv6 errors the gateway originates.
#[derive(Clone, Copy)]
enum V6Error {
    PacketTooBig(u32),
    TimeExceeded,
}

/// Writes an ICMPv6 error about `orig` (RFC 4443 2.4): as much of the
/// original as fits in `out` and in 1280 bytes, at least its fixed header.
fn emit_icmpv6_error(orig: &[u8], kind: V6Error, src: Ipv6Addr, out: &mut [u8]) -> Result<usize> {
    let orig = Ipv6Packet::new_checked(orig)?;
    let orig_src = orig.src_addr();
    if orig_src.is_unspecified() || orig_src.is_multicast() {
        return Err(Error::Suppressed);
    }
    // Packet Too Big is the one error sent about multicast (RFC 4443 2.4 e.3).
    if orig.dst_addr().is_multicast() && !matches!(kind, V6Error::PacketTooBig(_)) {
        return Err(Error::Suppressed);
    }
    // Never answer an ICMPv6 error or redirect; if the chain cannot be read
    // we cannot tell, so stay quiet.
    let (next, offset) = orig.upper_layer().map_err(|_| Error::Suppressed)?;
    if next == ip_protocol::ICMPV6 {
        let t = *orig.packet().get(offset).ok_or(Error::Suppressed)?;
        if t < 128 || t == icmpv6::msg_type::REDIRECT {
            return Err(Error::Suppressed);
        }
    }
    let whole = orig.packet();
    let overhead = ipv6::HEADER_LEN + icmpv6::HEADER_LEN;
    let room = out.len().min(icmpv6::MIN_MTU).saturating_sub(overhead);
    if room < ipv6::HEADER_LEN {
        return Err(Error::NoRoom);
    }
    let data = &whole[..whole.len().min(room)];
    let icmp = match kind {
        V6Error::PacketTooBig(mtu) => Icmpv6Repr::PacketTooBig { mtu, data },
        V6Error::TimeExceeded => Icmpv6Repr::TimeExceeded { code: 0, data },
    };
    let ip = Ipv6Repr {
        src_addr: src,
        dst_addr: orig_src,
        next_header: ip_protocol::ICMPV6,
        payload_len: icmp.buffer_len() as u16,
        hop_limit: REPLY_TTL,
        traffic_class: 0,
        flow_label: 0,
    };
    let h = ip.emit(out)?;
    Ok(h + icmp.emit(src, orig_src, &mut out[h..])?)
}

/// Writes into `out` the ICMPv6 Packet Too Big with `mtu` about
/// `orig_ip_packet`, from `src` back to its sender, quoting as much of the
/// original as fits in 1280 bytes (and in `out`). Returns the length written.
pub fn emit_icmpv6_packet_too_big(
    orig_ip_packet: &[u8],
    mtu: u32,
    src: Ipv6Addr,
    out: &mut [u8],
) -> Result<usize> {
    emit_icmpv6_error(orig_ip_packet, V6Error::PacketTooBig(mtu), src, out)
}

/// Writes into `out` the ICMPv6 Time Exceeded (hop limit exceeded in
/// transit) about `orig_ip_packet`. Same rules as
/// [`emit_icmpv6_packet_too_big`], except that none is sent about a packet
/// to a multicast address.
pub fn emit_icmpv6_time_exceeded(
    orig_ip_packet: &[u8],
    src: Ipv6Addr,
    out: &mut [u8],
) -> Result<usize> {
    emit_icmpv6_error(orig_ip_packet, V6Error::TimeExceeded, src, out)
}

/// Turns the IPv4 ICMP echo request `ip_packet` into its echo reply in
/// place: swaps the addresses, sets the TTL to [`REPLY_TTL`], changes the
/// type and patches both checksums. Returns the reply's length (the
/// original total length). The caller checks the destination is ours.
pub fn icmpv4_echo_reply_in_place(ip_packet: &mut [u8]) -> Result<usize> {
    let mut ip = Ipv4Packet::new_checked(ip_packet)?;
    if !ip.verify_checksum() {
        return Err(Error::Checksum);
    }
    if ip.protocol() != ip_protocol::ICMP || ip.is_fragment() {
        return Err(Error::Unsupported);
    }
    if bad_v4_source(ip.src_addr()) {
        return Err(Error::Suppressed);
    }
    {
        let icmp = Icmpv4Packet::new_checked(ip.payload())?;
        if !icmp.verify_checksum() {
            return Err(Error::Checksum);
        }
        if (icmp.msg_type(), icmp.code()) != (icmpv4::msg_type::ECHO_REQUEST, 0) {
            return Err(Error::Unsupported);
        }
    }
    Icmpv4Packet::new_checked(ip.payload_mut())?.set_msg_type(icmpv4::msg_type::ECHO_REPLY);
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    ip.set_src_addr(dst);
    ip.set_dst_addr(src);
    ip.set_ttl(REPLY_TTL);
    ip.fill_checksum();
    Ok(usize::from(ip.total_len()))
}

/// Turns the ICMPv6 echo request `ip_packet` (no extension headers) into its
/// echo reply in place: swaps the addresses, sets the hop limit to
/// [`REPLY_TTL`], changes the type and patches the checksum (the
/// pseudo-header sum does not change when the addresses swap). Requests to
/// a multicast address are [`Error::Unsupported`]: their reply needs a
/// unicast source the caller must choose. Returns the reply's length.
pub fn icmpv6_echo_reply_in_place(ip_packet: &mut [u8]) -> Result<usize> {
    let mut ip = Ipv6Packet::new_checked(ip_packet)?;
    if ip.next_header() != ip_protocol::ICMPV6 || ip.dst_addr().is_multicast() {
        return Err(Error::Unsupported);
    }
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    if src.is_unspecified() || src.is_multicast() {
        return Err(Error::Suppressed);
    }
    {
        let icmp = Icmpv6Packet::new_checked(ip.payload())?;
        if !icmp.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        if (icmp.msg_type(), icmp.code()) != (icmpv6::msg_type::ECHO_REQUEST, 0) {
            return Err(Error::Unsupported);
        }
    }
    Icmpv6Packet::new_checked(ip.payload_mut())?.set_msg_type(icmpv6::msg_type::ECHO_REPLY);
    ip.set_src_addr(dst);
    ip.set_dst_addr(src);
    ip.set_hop_limit(REPLY_TTL);
    Ok(ipv6::HEADER_LEN + usize::from(ip.payload_len()))
}

/// Answers the ARP request in the Ethernet frame `frame` in place when it
/// asks for `our_ip`: rewrites both the Ethernet header and the ARP body.
/// Returns the frame length to send (unchanged).
pub fn arp_reply_in_place(frame: &mut [u8], our_ip: Ipv4Addr, our_mac: MacAddr) -> Result<usize> {
    let len = frame.len();
    let mut eth = EthernetFrame::new_checked(frame)?;
    if eth.ethertype() != ethertype::ARP {
        return Err(Error::Unsupported);
    }
    ArpPacket::new_checked(eth.payload_mut())?.turn_into_reply(our_ip, our_mac)?;
    eth.turn_around(our_mac);
    Ok(len)
}

/// Answers the neighbor solicitation `ns_ip_packet` (IPv6, no extension
/// headers) for `our_addr` with a neighbor advertisement written into `out`
/// (RFC 4861 7.1.1, 7.2.4): solicited and to the solicitor, or, for
/// duplicate address detection (unspecified source), unsolicited to
/// all-nodes (ff02::1). Override is set and the target link-layer option
/// carries `our_mac`. Returns the IPv6 packet length written. An NS for
/// another address is [`Error::Suppressed`]; one that breaks the
/// validation rules (hop limit not 255, bad checksum, bad options) is an error.
pub fn neighbor_advert_reply(
    ns_ip_packet: &[u8],
    our_addr: Ipv6Addr,
    our_mac: MacAddr,
    out: &mut [u8],
) -> Result<usize> {
    let ip = Ipv6Packet::new_checked(ns_ip_packet)?;
    if ip.next_header() != ip_protocol::ICMPV6 {
        return Err(Error::Unsupported);
    }
    if ip.hop_limit() != 255 {
        return Err(Error::Malformed);
    }
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let icmp = Icmpv6Packet::new_checked(ip.payload())?;
    let Icmpv6Repr::NeighborSolicit {
        target_addr,
        source_lladdr,
    } = Icmpv6Repr::parse(&icmp, src, dst)?
    else {
        return Err(Error::Unsupported);
    };
    if target_addr.is_multicast() {
        return Err(Error::Malformed);
    }
    let dad = src.is_unspecified();
    // RFC 4861 7.1.1: DAD probes go to the solicited-node group and carry no
    // source link-layer option.
    if dad && (source_lladdr.is_some() || dst != icmpv6::solicited_node_multicast(target_addr)) {
        return Err(Error::Malformed);
    }
    if target_addr != our_addr {
        return Err(Error::Suppressed);
    }
    let reply_dst = if dad {
        Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1)
    } else {
        src
    };
    let na = Icmpv6Repr::NeighborAdvert {
        router: false,
        solicited: !dad,
        override_: true,
        target_addr: our_addr,
        target_lladdr: Some(our_mac),
    };
    emit_nd(our_addr, reply_dst, &na, out)
}

/// Writes into `out` a neighbor solicitation from `src` (with `our_mac` as
/// source link-layer option) asking for `target`, sent to the target's
/// solicited-node multicast address; the Ethernet destination is
/// [`icmpv6::multicast_mac`] of that address. Returns the IPv6 packet length.
pub fn emit_neighbor_solicit(
    src: Ipv6Addr,
    target: Ipv6Addr,
    our_mac: MacAddr,
    out: &mut [u8],
) -> Result<usize> {
    let ns = Icmpv6Repr::NeighborSolicit {
        target_addr: target,
        source_lladdr: Some(our_mac),
    };
    emit_nd(src, icmpv6::solicited_node_multicast(target), &ns, out)
}

fn emit_nd(src: Ipv6Addr, dst: Ipv6Addr, icmp: &Icmpv6Repr<'_>, out: &mut [u8]) -> Result<usize> {
    let ip = Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: ip_protocol::ICMPV6,
        payload_len: icmp.buffer_len() as u16,
        hop_limit: 255,
        traffic_class: 0,
        flow_label: 0,
    };
    if out.len() < ipv6::HEADER_LEN + icmp.buffer_len() {
        return Err(Error::NoRoom);
    }
    let h = ip.emit(out)?;
    Ok(h + icmp.emit(src, dst, &mut out[h..])?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::hex;

    fn v4(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }
    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    // scapy: IP(src="192.0.2.1", dst="198.51.100.7", id=1, flags="DF")/UDP(sport=1111, dport=2222)/(b"y"*30)
    // (tools/gen_vectors.py inner4)
    const INNER4: &str = "4500003a0001400040114e76c0000201c6336407045708ae0026e842797979797979797979797979797979797979797979797979797979797979";
    // scapy: IP(src="192.0.2.254", dst="192.0.2.1", ttl=64, id=0)/ICMP(type=3, code=4, nexthopmtu=1400)/bytes(inner4)[:28]
    // (ipv4_icmp_frag_needed)
    const FRAG_NEEDED_28: &str = "45000038000000004001f5c5c00002fec000020103040216000005784500003a0001400040114e76c0000201c6336407045708ae0026e842";
    // scapy: the same quoting all of inner4 (ipv4_frag_needed_full_quote)
    const FRAG_NEEDED_FULL: &str = "45000056000000004001f5a7c00002fec00002010304e3f7000005784500003a0001400040114e76c0000201c6336407045708ae0026e842797979797979797979797979797979797979797979797979797979797979";
    // scapy: same as FRAG_NEEDED_28 with ICMP(type=11, code=0) (ipv4_icmp_time_exceeded)
    const TIME_EXCEEDED_28: &str = "45000038000000004001f5c5c00002fec00002010b00ff91000000004500003a0001400040114e76c0000201c6336407045708ae0026e842";
    // scapy: IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=1, dport=2)/(b"x"*20) (inner6)
    const INNER6: &str = "60000000001c114020010db800000000000000000000000120010db800000000000000000000000200010002001cef897878787878787878787878787878787878787878";
    // scapy: IPv6(src="2001:db8::fe", dst="2001:db8::1", hlim=64)/ICMPv6PacketTooBig(mtu=1400)/inner6 (ipv6_icmpv6_ptb)
    const PTB: &str = "60000000004c3a4020010db80000000000000000000000fe20010db800000000000000000000000102002a610000057860000000001c114020010db800000000000000000000000120010db800000000000000000000000200010002001cef897878787878787878787878787878787878787878";
    // scapy: same with ICMPv6TimeExceeded(code=0) (ipv6_icmpv6_time_exceeded)
    const TIME_EXCEEDED6: &str = "60000000004c3a4020010db80000000000000000000000fe20010db800000000000000000000000103002ed90000000060000000001c114020010db800000000000000000000000120010db800000000000000000000000200010002001cef897878787878787878787878787878787878787878";
    // scapy: echo request (eth_ipv4_icmp_echo, IPv4 part) and the reply scapy builds (ipv4_echo_reply)
    const ECHO4: &str =
        "45000026123440004001a49fc0000201c0000202080089dd4242000765737067772d70696e67";
    const ECHO4_REPLY: &str =
        "45000026123440004001a49fc0000202c0000201000091dd4242000765737067772d70696e67";
    // scapy: ipv6_icmpv6_echo and ipv6_echo_reply
    const ECHO6: &str = "60000000000d3a40fe800000000000000000000000000001fe80000000000000000000000000000280006d680077000370696e6736";
    const ECHO6_REPLY: &str = "60000000000d3a40fe800000000000000000000000000002fe80000000000000000000000000000181006c680077000370696e6736";
    // scapy: DAD probe IPv6(src="::", dst="ff02::1:ff00:2", hlim=255)/ICMPv6ND_NS(tgt="fe80::2") (ipv6_dad_ns)
    // and the answer IPv6(src="fe80::2", dst="ff02::1", hlim=255)/ICMPv6ND_NA(tgt="fe80::2", S=0, O=1)/TLLA (ipv6_dad_na)
    const DAD_NS: &str = "6000000000183aff00000000000000000000000000000000ff0200000000000000000001ff00000287007c2300000000fe800000000000000000000000000002";
    const DAD_NA: &str = "6000000000203afffe800000000000000000000000000002ff0200000000000000000000000000018800579820000000fe8000000000000000000000000000020201020000000002";
    // scapy: ARP request/reply (arp_request, arp_reply) inside Ether(dst=broadcast / 02:..:01)
    const ARP_REQ: &str = "0001080006040001020000000001c0000201000000000000c0000202";
    const ARP_REPLY: &str = "0001080006040002020000000002c0000202020000000001c0000201";
    const MAC2: MacAddr = [2, 0, 0, 0, 0, 2];

    #[test]
    fn frag_needed_matches_scapy() {
        let orig = hex(INNER4);
        // Room for exactly header + 8 bytes: RFC 792 quoting.
        let mut out = [0u8; 56];
        let n = emit_icmpv4_frag_needed(&orig, 1400, v4("192.0.2.254"), &mut out).unwrap();
        assert_eq!(out[..n].to_vec(), hex(FRAG_NEEDED_28));
        // Plenty of room: RFC 1812 quotes the whole (short) original.
        let mut out = [0u8; 1500];
        let n = emit_icmpv4_frag_needed(&orig, 1400, v4("192.0.2.254"), &mut out).unwrap();
        assert_eq!(out[..n].to_vec(), hex(FRAG_NEEDED_FULL));
        // Too little room for header + 8 bytes.
        assert_eq!(
            emit_icmpv4_frag_needed(&orig, 1400, v4("192.0.2.254"), &mut out[..55]),
            Err(Error::NoRoom)
        );
    }

    #[test]
    fn icmpv4_error_capped_at_576_bytes() {
        let mut big = vec![0u8; 1400];
        Ipv4Repr {
            src_addr: v4("192.0.2.1"),
            dst_addr: v4("198.51.100.7"),
            protocol: ip_protocol::UDP,
            payload_len: 1380,
            ttl: 1,
            dscp_ecn: 0,
            ident: 9,
            dont_frag: true,
        }
        .emit(&mut big)
        .unwrap();
        let mut out = [0u8; 1500];
        let n = emit_icmpv4_time_exceeded(&big, v4("192.0.2.254"), &mut out).unwrap();
        assert_eq!(n, 576);
        let ip = Ipv4Packet::new_checked(&out[..n]).unwrap();
        let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
        assert!(ip.verify_checksum() && icmp.verify_checksum());
        assert_eq!(icmp.data(), &big[..548]);
    }

    #[test]
    fn time_exceeded_matches_scapy() {
        let mut out = [0u8; 56];
        let n = emit_icmpv4_time_exceeded(&hex(INNER4), v4("192.0.2.254"), &mut out).unwrap();
        assert_eq!(out[..n].to_vec(), hex(TIME_EXCEEDED_28));
    }

    #[test]
    fn icmpv4_errors_suppressed_when_rfc1812_says_so() {
        let src = v4("192.0.2.254");
        let mut out = [0u8; 600];
        // About an ICMP error.
        let icmp_err = hex(TIME_EXCEEDED_28);
        assert_eq!(
            emit_icmpv4_time_exceeded(&icmp_err, src, &mut out),
            Err(Error::Suppressed)
        );
        // About an echo request: allowed.
        assert!(emit_icmpv4_time_exceeded(&hex(ECHO4), src, &mut out).is_ok());
        // Non-first fragment, multicast destination, broadcast source.
        let patches: [fn(&mut Ipv4Packet<&mut [u8]>); 4] = [
            |p| p.set_ident(1), // control: still allowed
            |p| p.set_dst_addr(Ipv4Addr::new(224, 0, 0, 5)),
            |p| p.set_src_addr(Ipv4Addr::BROADCAST),
            |p| p.set_frag(false, false, 8),
        ];
        for (i, patch) in patches.iter().enumerate() {
            let mut orig = hex(INNER4);
            let mut p = Ipv4Packet::new_checked(&mut orig[..]).unwrap();
            patch(&mut p);
            p.fill_checksum();
            let r = emit_icmpv4_time_exceeded(&orig, src, &mut out);
            assert_eq!(r.is_ok(), i == 0, "case {i}: {r:?}");
        }
    }

    #[test]
    fn packet_too_big_matches_scapy() {
        let mut out = [0u8; 1500];
        let n =
            emit_icmpv6_packet_too_big(&hex(INNER6), 1400, v6("2001:db8::fe"), &mut out).unwrap();
        assert_eq!(out[..n].to_vec(), hex(PTB));
        let n = emit_icmpv6_time_exceeded(&hex(INNER6), v6("2001:db8::fe"), &mut out).unwrap();
        assert_eq!(out[..n].to_vec(), hex(TIME_EXCEEDED6));
    }

    #[test]
    fn packet_too_big_fits_in_1280() {
        let mut big = vec![0x77u8; 1500];
        Ipv6Repr {
            src_addr: v6("2001:db8::1"),
            dst_addr: v6("ff0e::1"),
            next_header: ip_protocol::UDP,
            payload_len: 1460,
            hop_limit: 1,
            traffic_class: 0,
            flow_label: 0,
        }
        .emit(&mut big)
        .unwrap();
        let mut out = [0u8; 2000];
        let n = emit_icmpv6_packet_too_big(&big, 1400, v6("2001:db8::fe"), &mut out).unwrap();
        assert_eq!(n, 1280);
        let ip = Ipv6Packet::new_checked(&out[..n]).unwrap();
        let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
        assert!(icmp.verify_checksum(ip.src_addr(), ip.dst_addr()));
        assert_eq!(icmp.mtu(), 1400);
        assert_eq!(icmp.data(), &big[..1232]);
        // Multicast destination: PTB allowed, time exceeded not.
        assert_eq!(
            emit_icmpv6_time_exceeded(&big, v6("2001:db8::fe"), &mut out),
            Err(Error::Suppressed)
        );
        // Never about an ICMPv6 error.
        assert_eq!(
            emit_icmpv6_time_exceeded(&hex(PTB), v6("2001:db8::fe"), &mut out),
            Err(Error::Suppressed)
        );
    }

    #[test]
    fn echo_replies_in_place_match_scapy() {
        let mut p = hex(ECHO4);
        assert_eq!(icmpv4_echo_reply_in_place(&mut p), Ok(p.len()));
        assert_eq!(p, hex(ECHO4_REPLY));
        // A reply is not answered.
        assert_eq!(icmpv4_echo_reply_in_place(&mut p), Err(Error::Unsupported));

        let mut p = hex(ECHO6);
        assert_eq!(icmpv6_echo_reply_in_place(&mut p), Ok(p.len()));
        assert_eq!(p, hex(ECHO6_REPLY));
        assert_eq!(icmpv6_echo_reply_in_place(&mut p), Err(Error::Unsupported));
    }

    #[test]
    fn echo_reply_rejects_corrupt_request() {
        let mut p = hex(ECHO4);
        p[30] ^= 1;
        assert_eq!(icmpv4_echo_reply_in_place(&mut p), Err(Error::Checksum));
        let mut p = hex(ECHO6);
        p[50] ^= 1;
        assert_eq!(icmpv6_echo_reply_in_place(&mut p), Err(Error::Checksum));
    }

    #[test]
    fn neighbor_advert_answers_scapy_ns() {
        let mut out = [0u8; 100];
        let ns = hex(crate::icmpv6::tests::NS);
        let n = neighbor_advert_reply(&ns, v6("fe80::2"), MAC2, &mut out).unwrap();
        assert_eq!(out[..n].to_vec(), hex(crate::icmpv6::tests::NA));
        assert_eq!(
            neighbor_advert_reply(&ns, v6("fe80::3"), MAC2, &mut out),
            Err(Error::Suppressed)
        );
        let n = neighbor_advert_reply(&hex(DAD_NS), v6("fe80::2"), MAC2, &mut out).unwrap();
        assert_eq!(out[..n].to_vec(), hex(DAD_NA));
        // Hop limit other than 255: forged off-link, ignored (RFC 4861 7.1.1).
        let mut off_link = ns.clone();
        off_link[7] = 254;
        assert_eq!(
            neighbor_advert_reply(&off_link, v6("fe80::2"), MAC2, &mut out),
            Err(Error::Malformed)
        );
        assert_eq!(
            neighbor_advert_reply(&ns, v6("fe80::2"), MAC2, &mut out[..71]),
            Err(Error::NoRoom)
        );
    }

    #[test]
    fn neighbor_solicit_matches_scapy() {
        let mut out = [0u8; 100];
        let n = emit_neighbor_solicit(v6("fe80::1"), v6("fe80::2"), [2, 0, 0, 0, 0, 1], &mut out)
            .unwrap();
        assert_eq!(out[..n].to_vec(), hex(crate::icmpv6::tests::NS));
    }

    #[test]
    fn arp_reply_in_place_rewrites_frame() {
        let eth = |dst: &str, src: &str, body: &str| hex(&format!("{dst}{src}0806{body}"));
        let mut frame = eth("ffffffffffff", "020000000001", ARP_REQ);
        let our_ip = v4("192.0.2.2");
        assert_eq!(arp_reply_in_place(&mut frame, our_ip, MAC2), Ok(42));
        assert_eq!(frame, eth("020000000001", "020000000002", ARP_REPLY));
        let mut other = eth("ffffffffffff", "020000000001", ARP_REQ);
        assert_eq!(
            arp_reply_in_place(&mut other, v4("192.0.2.9"), MAC2),
            Err(Error::Suppressed)
        );
    }
}
