//! Stage 5, [`Egress`]: route, neighbor, Ethernet header, TX queue.

use std::net::IpAddr;

use espgw_control::config::Side;
use espgw_wire::{ethernet, ethertype, ipv6, MacAddr, PacketBuf};

use super::esp::EspOut;
use super::icmp::{Icmp, IcmpError};
use super::link::Link;
use super::{Core, EgressPolicy, Origin};
use crate::ip::parse_ip;
use crate::neighbor::Held;
use crate::pool::BufPool;
use crate::ports::PortIdx;
use crate::reason::DropReason;
use crate::route::NextHop;
use crate::tx::TxQueues;

/// The last next hop resolved: consecutive packets to one destination
/// (the common case) skip the route and neighbor lookups.
#[derive(Clone, Copy)]
struct HopCache {
    dst: IpAddr,
    hop: NextHop,
    mac: MacAddr,
    /// [`Neighbors::generation`](crate::neighbor::Neighbors::generation)
    /// when cached.
    generation: u64,
    /// What the hop's port says of every packet to it (ports are fixed
    /// for the run): kept here so that a hit reads no port entry.
    unprotected: bool,
    mtu: usize,
    heads: FrameHeads,
}

/// The Ethernet headers of frames from one port to one neighbor, IPv4 and
/// IPv6: built once per next hop (and per group in `EspOut::run`) and
/// copied in front of each packet ([`Egress::send_with`]).
#[derive(Clone, Copy)]
pub(super) struct FrameHeads {
    v4: [u8; ethernet::HEADER_LEN],
    v6: [u8; ethernet::HEADER_LEN],
}

impl FrameHeads {
    pub(super) fn new(dst_mac: MacAddr, src_mac: MacAddr) -> FrameHeads {
        let mut v4 = [0u8; ethernet::HEADER_LEN];
        v4[..6].copy_from_slice(&dst_mac);
        v4[6..12].copy_from_slice(&src_mac);
        let mut v6 = v4;
        v4[12..].copy_from_slice(&ethertype::IPV4.to_be_bytes());
        v6[12..].copy_from_slice(&ethertype::IPV6.to_be_bytes());
        FrameHeads { v4, v6 }
    }
}

/// The egress stage: its cache of the last next hop.
pub(super) struct Egress {
    hop_cache: Option<HopCache>,
}

impl Egress {
    pub(super) fn new() -> Egress {
        Egress { hop_cache: None }
    }

    /// Sends the IP packet `pkt` (no L2 header) towards `dst`.
    /// (Too big for the port: an ICMP error from `icmp`, which may go
    /// back through a tunnel, staged in `esp_out`.)
    ///
    /// The cached next hop's case is inlined into the callers (the last
    /// step of every decrypted or bypassed packet); the rest is
    /// [`Self::route_full`].
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn route<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        icmp: &mut Icmp,
        esp_out: &mut EspOut<B>,
        tx: &mut TxQueues<B>,
        pkt: B,
        dst: IpAddr,
        policy: EgressPolicy,
        in_port: Option<PortIdx>,
    ) {
        if let Some(c) = &self.hop_cache {
            let blocked = policy == EgressPolicy::ProtectedOnly && c.unprotected;
            if c.dst == dst
                && c.generation == core.neighbors.generation()
                && !blocked
                && pkt.len() <= c.mtu
            {
                // What `route_full` decides for such a packet.
                return Self::send_with::<false, _, _>(
                    core, c.hop.port, &c.heads, pkt, in_port, tx,
                );
            }
        }
        self.route_full(core, icmp, esp_out, tx, pkt, dst, policy, in_port)
    }

    /// [`Self::route`] for every packet.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn route_full<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        icmp: &mut Icmp,
        esp_out: &mut EspOut<B>,
        tx: &mut TxQueues<B>,
        pkt: B,
        dst: IpAddr,
        policy: EgressPolicy,
        in_port: Option<PortIdx>,
    ) {
        let generation = core.neighbors.generation();
        let cached = self
            .hop_cache
            .filter(|c| c.dst == dst && c.generation == generation);
        let (hop, mac) = match cached {
            Some(c) => (c.hop, Some(c.mac)),
            None => {
                let Some(hop) = core.net.routes.lookup(dst) else {
                    return core.drop_pkt(pkt, DropReason::NoRoute, in_port);
                };
                let mac = core.neighbors.lookup(hop.port, hop.addr);
                if let Some(mac) = mac {
                    let out = &core.net.ports[hop.port];
                    self.hop_cache = Some(HopCache {
                        dst,
                        hop,
                        mac,
                        generation,
                        unprotected: out.side == Side::Unprotected,
                        mtu: out.mtu,
                        heads: FrameHeads::new(mac, out.mac),
                    });
                }
                (hop, mac)
            }
        };
        let out = &core.net.ports[hop.port];
        if policy == EgressPolicy::ProtectedOnly && out.side == Side::Unprotected {
            return core.drop_pkt(pkt, DropReason::PlaintextBlocked, in_port);
        }
        if pkt.len() > out.mtu {
            // Only decrypted or bypassed packets can get here oversize (the
            // peer's path is wider than ours): the sender learns our MTU,
            // through the tunnel when it came through one.
            let (mtu, out_port) = (out.mtu, hop.port);
            let origin = match (policy, in_port) {
                (EgressPolicy::ProtectedOnly, _) => Origin::Decrypted,
                (EgressPolicy::Bypass, Some(p)) => core.origin_of(p),
                _ => Origin::Unprotected,
            };
            let mut pkt = pkt;
            return match parse_ip(&mut pkt) {
                Ok(m) if m.dont_frag => {
                    let e = IcmpError {
                        port: in_port.unwrap_or(out_port),
                        src_port: out_port,
                        reason: DropReason::MtuExceeded,
                        mtu,
                        origin,
                    };
                    icmp.error(core, esp_out, self, tx, pkt, m, e)
                }
                _ => core.drop_pkt(pkt, DropReason::MtuExceeded, in_port),
            };
        }
        if let Some(mac) = mac {
            return Self::send_frame(core, hop.port, mac, pkt, in_port, tx);
        }
        match core.neighbors.hold(hop.port, hop.addr, pkt, core.now.ns) {
            Held::Queued { request } => {
                core.counters.held = core.neighbors.held() as u64;
                if request {
                    Link::solicit(core, hop.port, hop.addr, tx);
                }
            }
            Held::Full(pkt) => core.drop_pkt(pkt, DropReason::NeighborQueueFull, in_port),
        }
    }

    /// Prepends the Ethernet header to the IP packet `pkt` and queues it.
    /// (Frames already carrying one, like NA answers built from a
    /// stripped packet, come here stripped too.)
    ///
    /// Inlined: it is the last step of every forwarded packet, and as a
    /// call it saved and restored registers around a few stores.
    #[inline(always)]
    pub(super) fn send_frame<B: PacketBuf, P: BufPool<B>>(
        core: &mut Core<B, P>,
        port: PortIdx,
        dst_mac: MacAddr,
        mut pkt: B,
        in_port: Option<PortIdx>,
        tx: &mut TxQueues<B>,
    ) {
        let ethertype = match pkt.data().first().map(|b| b >> 4) {
            Some(4) => ethertype::IPV4,
            Some(6) => ethertype::IPV6,
            _ => return core.drop_pkt(pkt, DropReason::Malformed, in_port),
        };
        if pkt.prepend(ethernet::HEADER_LEN).is_err() {
            return core.drop_pkt(pkt, DropReason::NoRoom, in_port);
        }
        // Written in place: every forwarded packet comes through here.
        let src_mac = core.net.ports[port].mac;
        if let Some(h) = pkt.data_mut().first_chunk_mut::<{ ethernet::HEADER_LEN }>() {
            h[..6].copy_from_slice(&dst_mac);
            h[6..12].copy_from_slice(&src_mac);
            h[12..].copy_from_slice(&ethertype.to_be_bytes());
        }
        tx.push(port, pkt);
    }

    /// [`Self::send_frame`] with the headers built already (`heads`: to
    /// the next hop from `port`). `UDP_CHECKSUM`: the packet is IPv6 +
    /// UDP whose checksum field holds only its seed, for the NIC of `port`
    /// (which has TX UDP checksum offload on) to complete. A constant, so
    /// that the other packets' send is the code it was without it (as a
    /// run-time flag, with the group's, it cost ESP over IPv4 12
    /// instructions and 3.5 cycles a packet at 64 B: docs/benchmarks.md,
    /// "TX UDP checksum offload").
    #[inline(always)]
    pub(super) fn send_with<const UDP_CHECKSUM: bool, B: PacketBuf, P: BufPool<B>>(
        core: &mut Core<B, P>,
        port: PortIdx,
        heads: &FrameHeads,
        mut pkt: B,
        in_port: Option<PortIdx>,
        tx: &mut TxQueues<B>,
    ) {
        let head = match pkt.data().first().map(|b| b >> 4) {
            Some(4) => &heads.v4,
            Some(6) => &heads.v6,
            _ => return core.drop_pkt(pkt, DropReason::Malformed, in_port),
        };
        if pkt.prepend(ethernet::HEADER_LEN).is_err() {
            return core.drop_pkt(pkt, DropReason::NoRoom, in_port);
        }
        if let Some(h) = pkt.data_mut().first_chunk_mut::<{ ethernet::HEADER_LEN }>() {
            *h = *head;
        }
        if UDP_CHECKSUM {
            pkt.offload_udp_checksum(ethernet::HEADER_LEN, ipv6::HEADER_LEN, true);
        }
        tx.push(port, pkt);
    }
}
