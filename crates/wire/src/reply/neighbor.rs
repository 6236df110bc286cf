//! Neighbor resolution: ARP replies in place (RFC 826) and Neighbor
//! Discovery solicitations and advertisements (RFC 4861).

use crate::ethernet::{ethertype, EthernetFrame, MacAddr};
use crate::icmpv6::{self, Icmpv6Packet, Icmpv6Repr};
use crate::ipv6::{self, Ipv6Packet, Ipv6Repr};
use crate::{ip_protocol, ArpPacket, Error, PacketBuf, Result};
use core::net::{Ipv4Addr, Ipv6Addr};

/// Longest ARP reply frame sent: the minimum Ethernet frame without FCS
/// (14 + 28 bytes of headers, the rest padding).
pub const ARP_REPLY_MAX_LEN: usize = 60;

/// Answers the ARP request in the Ethernet frame `frame` in place when it
/// asks for `our_ip`: rewrites both the Ethernet header and the ARP body.
/// Returns the length of the reply frame: the request's, but at most
/// [`ARP_REPLY_MAX_LEN`] (a request padded far past its body, as the worker
/// fuzz target sent, must not be answered above the MTU); the caller trims
/// the frame to it.
pub fn arp_reply_in_place(frame: &mut [u8], our_ip: Ipv4Addr, our_mac: MacAddr) -> Result<usize> {
    let len = frame.len().min(ARP_REPLY_MAX_LEN);
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
    let reply_dst = plan_advert(ns_ip_packet, our_addr)?;
    emit_nd(
        our_addr,
        reply_dst,
        &advert(our_addr, our_mac, reply_dst),
        out,
    )
}

/// Turns `buf`, holding a neighbor solicitation for `our_addr`, into the
/// advertisement that answers it (see [`neighbor_advert_reply`]), growing
/// or trimming it to the 72 bytes of the reply. `buf` is unchanged on error.
pub fn neighbor_advert_in_buf<B: PacketBuf + ?Sized>(
    buf: &mut B,
    our_addr: Ipv6Addr,
    our_mac: MacAddr,
) -> Result<()> {
    let reply_dst = plan_advert(buf.data(), our_addr)?;
    let na = advert(our_addr, our_mac, reply_dst);
    let need = ipv6::HEADER_LEN + na.buffer_len();
    let len = buf.len();
    if len < need {
        buf.append(need - len).map_err(|_| Error::NoRoom)?;
    } else {
        buf.trim(len - need).map_err(|_| Error::NoRoom)?;
    }
    emit_nd(our_addr, reply_dst, &na, buf.data_mut()).map(|_| ())
}

/// The advertisement from us: solicited unless it answers a DAD probe (sent
/// to all-nodes), override set since the address is ours.
fn advert(our_addr: Ipv6Addr, our_mac: MacAddr, reply_dst: Ipv6Addr) -> Icmpv6Repr<'static> {
    Icmpv6Repr::NeighborAdvert {
        router: false,
        solicited: reply_dst != ALL_NODES,
        override_: true,
        target_addr: our_addr,
        target_lladdr: Some(our_mac),
    }
}

/// All-nodes multicast, where answers to DAD probes go.
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// Validates a solicitation (RFC 4861 7.1.1) and checks it asks for
/// `our_addr`; returns where the advertisement goes (7.2.4).
fn plan_advert(ns_ip_packet: &[u8], our_addr: Ipv6Addr) -> Result<Ipv6Addr> {
    let ip = Ipv6Packet::new_checked(ns_ip_packet)?;
    if ip.next_header() != ip_protocol::ICMPV6 {
        return Err(Error::Unsupported);
    }
    // Only on-link senders can send hop limit 255: anything else is forged.
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
    // DAD probes go to the solicited-node group and carry no source
    // link-layer option.
    if dad && (source_lladdr.is_some() || dst != icmpv6::solicited_node_multicast(target_addr)) {
        return Err(Error::Malformed);
    }
    if target_addr != our_addr {
        return Err(Error::Suppressed);
    }
    Ok(if dad { ALL_NODES } else { src })
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
