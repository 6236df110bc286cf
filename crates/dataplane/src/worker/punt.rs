//! The punt stage: IKE between the unprotected port and the control
//! thread's IKE driver (docs/ike.md "Gateway integration", docs/dataplane.md
//! "Stages").
//!
//! In: [`Classify`](super::classify::Classify) hands over UDP for one of our
//! addresses received on an unprotected port, to port 500 or to port 4500;
//! [`Punt::nat_t`] tells ESP in UDP (back to the fast path), IKE (the
//! non-ESP marker, RFC 3948 2.2) and NAT-T keepalives apart;
//! [`Punt::ike_input`] checks the UDP checksum (a wrong one, or none over
//! IPv6, is dropped as `punt_bad_checksum`: the control thread never sees
//! a datagram damaged on the way, and IKE_SA_INIT has no integrity check
//! of its own) and copies the UDP payload into a slot of the punt ring
//! (`espgw_control::ike::PuntRings`) and frees the packet. Out:
//! [`Punt::transmit`], once per poll, takes what the driver queued, builds
//! IP/UDP around it in a buffer of the pool and routes it like any packet
//! the gateway originates (route, neighbor, Ethernet, TX queue).

use std::net::{IpAddr, SocketAddr};

use espgw_control::config::Side;
use espgw_control::ike::{PuntDatagram, PuntError};
use espgw_wire::{ip_protocol, udp, Ipv4Repr, Ipv6Repr, PacketBuf, UdpPacket, UdpRepr};

use super::egress::Egress;
use super::esp::EspOut;
use super::icmp::Icmp;
use super::{Core, EgressPolicy};
use crate::ip::IpMeta;
use crate::pool::BufPool;
use crate::ports::PortIdx;
use crate::reason::DropReason;
use crate::tx::TxQueues;

/// What a datagram to our UDP 4500 is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NatT {
    /// ESP in UDP (or anything that is not the two below): the fast path.
    Esp,
    /// IKE: the non-ESP marker (four zero bytes where the SPI would be).
    Ike,
    /// One 0xff byte (RFC 3948 2.2).
    Keepalive,
}

/// Datagrams one worker builds per poll at most: the control thread's
/// bursts (a Delete per IKE SA at shutdown) are spread over polls and
/// workers instead of stalling one poll.
const TRANSMIT_PER_POLL: usize = 16;

/// The IKE hop limit / TTL of what the gateway sends.
const TTL: u8 = 64;

/// The punt stage (no state of its own: the rings are in the [`Core`]).
pub(super) struct Punt;

impl Punt {
    /// True when IKE received on `port` goes to the control thread: an IKE
    /// driver runs and the port is unprotected.
    #[inline]
    pub(super) fn takes<B: PacketBuf, P: BufPool<B>>(core: &Core<B, P>, port: PortIdx) -> bool {
        core.punt.is_some()
            && core
                .net
                .ports
                .get(port)
                .is_some_and(|p| p.side == Side::Unprotected)
    }

    /// Tells a datagram to our UDP 4500 apart (`m.l4_offset` is its UDP
    /// header). Only its first payload bytes are read; a short one is left
    /// to the ESP path, which counts it.
    #[inline]
    pub(super) fn nat_t<B: PacketBuf, P: BufPool<B>>(
        core: &Core<B, P>,
        port: PortIdx,
        pkt: &B,
        m: &IpMeta,
    ) -> NatT {
        let payload = pkt
            .data()
            .get(m.l4_offset + udp::HEADER_LEN..)
            .unwrap_or(&[]);
        match payload {
            [0xff] => NatT::Keepalive,
            [0, 0, 0, 0, ..] if Self::takes(core, port) => NatT::Ike,
            _ => NatT::Esp,
        }
    }

    /// An IKE datagram for us: its UDP payload is copied into a punt slot
    /// (the packet is freed); full ring or oversize: a counted drop.
    pub(super) fn ike_input<B: PacketBuf, P: BufPool<B>>(
        core: &mut Core<B, P>,
        port: PortIdx,
        pkt: B,
        m: IpMeta,
    ) {
        let (Some(sport), Some(dport)) = (m.sport, m.dport) else {
            return core.drop_pkt(pkt, DropReason::Malformed, Some(port));
        };
        let d = pkt.data();
        let l4 = m.l4_offset;
        let Some(len) = d
            .get(l4 + 4..l4 + 6)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
        else {
            return core.drop_pkt(pkt, DropReason::Malformed, Some(port));
        };
        let Some(payload) = (len >= udp::HEADER_LEN)
            .then(|| d.get(l4 + udp::HEADER_LEN..l4 + len))
            .flatten()
        else {
            return core.drop_pkt(pkt, DropReason::Malformed, Some(port));
        };
        if !udp_checksum_ok(&d[l4..l4 + len], m.src, m.dst) {
            return core.drop_pkt(pkt, DropReason::PuntBadChecksum, Some(port));
        }
        let Some(rings) = core.punt.as_deref() else {
            return core.drop_pkt(pkt, DropReason::LocalUnsupported, Some(port));
        };
        let src = SocketAddr::new(m.src, sport);
        let dst = SocketAddr::new(m.dst, dport);
        match rings.punt(src, dst, payload) {
            Ok(()) => {
                core.counters.local += 1;
                core.counters.ike_punted += 1;
                drop(pkt);
            }
            Err(PuntError::Full) => core.drop_pkt(pkt, DropReason::PuntFull, Some(port)),
            Err(PuntError::TooBig) => core.drop_pkt(pkt, DropReason::PuntTooBig, Some(port)),
        }
    }

    /// Sends up to [`TRANSMIT_PER_POLL`] datagrams the control thread
    /// queued.
    pub(super) fn transmit<B: PacketBuf, P: BufPool<B>>(
        core: &mut Core<B, P>,
        icmp: &mut Icmp,
        esp_out: &mut EspOut<B>,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
    ) {
        for _ in 0..TRANSMIT_PER_POLL {
            let Some(d) = core.punt.as_deref().and_then(|r| r.next_transmit()) else {
                return;
            };
            let Some(mut buf) = core.pool.alloc() else {
                core.counters.alloc_failures += 1;
                continue;
            };
            if build(&mut buf, &d).is_err() {
                core.drop_pkt(buf, DropReason::PuntTooBig, None);
                continue;
            }
            core.counters.generated += 1;
            core.counters.ike_sent += 1;
            egress.route(
                core,
                icmp,
                esp_out,
                tx,
                buf,
                d.dst.ip(),
                EgressPolicy::Trusted,
                None,
            );
        }
    }
}

/// True when the UDP checksum of `datagram` (header and payload, as long
/// as its length field) verifies from `src` to `dst`; over IPv4 a zero
/// checksum means none and passes, over IPv6 it is invalid (RFC 8200 8.1).
fn udp_checksum_ok(datagram: &[u8], src: IpAddr, dst: IpAddr) -> bool {
    let Ok(u) = UdpPacket::new_checked(datagram) else {
        return false;
    };
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => u.verify_checksum_v4(s, d),
        (IpAddr::V6(s), IpAddr::V6(d)) => u.verify_checksum_v6(s, d),
        _ => false,
    }
}

/// Writes IP/UDP/payload of `d` into the empty buffer `buf`: IPv4 (no DF:
/// a large IKE message may be fragmented on the way) or IPv6 after the
/// addresses of `d`; the UDP checksum is filled (mandatory for IPv6).
fn build<B: PacketBuf>(buf: &mut B, d: &PuntDatagram) -> Result<(), ()> {
    let payload = d.payload();
    let udp_len = udp::HEADER_LEN + payload.len();
    let udp_repr = UdpRepr {
        src_port: d.src.port(),
        dst_port: d.dst.port(),
        payload_len: payload.len() as u16,
    };
    match (d.src.ip(), d.dst.ip()) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            let ip = Ipv4Repr {
                src_addr: src,
                dst_addr: dst,
                protocol: ip_protocol::UDP,
                payload_len: udp_len as u16,
                ttl: TTL,
                dscp_ecn: 0,
                ident: 0,
                dont_frag: false,
            };
            let h = ip.header_len();
            buf.append(h + udp_len).map_err(|_| ())?;
            let out = buf.data_mut();
            ip.emit(out).map_err(|_| ())?;
            udp_repr.emit(&mut out[h..]).map_err(|_| ())?;
            out[h + udp::HEADER_LEN..].copy_from_slice(payload);
            let mut u = UdpPacket::new_checked(&mut out[h..]).map_err(|_| ())?;
            u.fill_checksum_v4(src, dst);
        }
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            let ip = Ipv6Repr {
                src_addr: src,
                dst_addr: dst,
                next_header: ip_protocol::UDP,
                payload_len: udp_len as u16,
                hop_limit: TTL,
                traffic_class: 0,
                flow_label: 0,
            };
            let h = espgw_wire::ipv6::HEADER_LEN;
            buf.append(h + udp_len).map_err(|_| ())?;
            let out = buf.data_mut();
            ip.emit(out).map_err(|_| ())?;
            udp_repr.emit(&mut out[h..]).map_err(|_| ())?;
            out[h + udp::HEADER_LEN..].copy_from_slice(payload);
            let mut u = UdpPacket::new_checked(&mut out[h..]).map_err(|_| ())?;
            u.fill_checksum_v6(src, dst);
        }
        // The driver sends from the connection's local address to the
        // peer's, always of one family (config check).
        _ => return Err(()),
    }
    Ok(())
}
