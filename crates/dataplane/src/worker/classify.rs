//! Stage 1, per packet as it arrives: what is it, and where does it go
//! next ([`Link`], [`EspIn`], [`EspOut`], [`Icmp`], [`Egress`], or a
//! counted drop).

use std::net::IpAddr;

use espgw_control::config::Side;
use espgw_control::ike::{Acquire, IKE_PORT};
use espgw_control::tables::{inner_mtu, Action, Decision, MssLimits, SaIndex, Spd, TunnelId};
use espgw_esp::Encap;
use espgw_wire::{ethernet, ethertype, icmpv6, ip_protocol, reply, MacAddr, PacketBuf};

use super::acquire::AcquireLimiter;
use super::egress::Egress;
use super::esp::{EspIn, EspOut};
use super::icmp::Icmp;
use super::link::Link;
use super::mss::clamp_mss;
use super::punt::{NatT, Punt};
use super::{is_group, Core, EgressPolicy};
use crate::flow_cache::FlowCache;
use crate::fragment::fragment_v4;
use crate::ip::{
    decrement_ttl, is_group_v4, is_group_v6, parse_v4_fast, parse_v6, parse_v6_fast, IpMeta,
    V4Meta, V6Meta,
};
use crate::pool::BufPool;
use crate::ports::PortIdx;
use crate::reason::DropReason;
use crate::tx::TxQueues;

/// The last inbound SA found: consecutive ESP packets of a burst mostly
/// share one SPI, and they skip the SAD's hash lookup.
#[derive(Clone, Copy)]
struct LastInbound {
    spi: u32,
    dst: IpAddr,
    slot: SaIndex,
    udp_encap: bool,
}

/// What the protect path needs of a tunnel, read once per snapshot
/// instead of per packet (the tunnel entry, its port's MTU, its outbound
/// SA's overhead: a chain of loads and the padding arithmetic). Only for a
/// tunnel with an outbound SA; a packet that does not fit takes the full
/// path ([`Classify::protect`]).
#[derive(Clone, Copy)]
struct Protected {
    /// The largest inner packet that fits the tunnel's port MTU once
    /// encapsulated (`inner_mtu`; `len + overhead(len)` only grows with
    /// `len`, so a packet fits exactly when it is at most this long).
    fits: usize,
    mss_clamp: Option<MssLimits>,
}

/// The classification stage: its caches of SPD and SAD answers, valid for
/// one snapshot ([`Classify::forget`] when the worker switches).
pub(super) struct Classify {
    /// Recent SPD decisions of this snapshot's SPD.
    spd_cache: FlowCache,
    last_inbound: Option<LastInbound>,
    /// By tunnel id, for this snapshot (filled as tunnels are used).
    protected: Vec<Option<Protected>>,
    /// Acquires raised per trapped tunnel (kept across snapshots: a
    /// tunnel id names the same trap until its SAs arrive).
    acquires: AcquireLimiter,
}

impl Classify {
    pub(super) fn new() -> Classify {
        Classify {
            spd_cache: FlowCache::new(FlowCache::SLOTS),
            last_inbound: None,
            protected: Vec::new(),
            acquires: AcquireLimiter::new(),
        }
    }

    /// Forgets what it learned of the previous snapshot.
    pub(super) fn forget(&mut self) {
        self.spd_cache.clear();
        self.last_inbound = None;
        self.protected.clear();
    }

    /// A packet received on `port` (counted as received by the caller,
    /// once per burst).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn input<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        port: PortIdx,
        mut pkt: B,
        esp_in: &mut EspIn<B>,
        esp_out: &mut EspOut<B>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
    ) {
        // The Ethernet header read in place (no header view, no MAC copies
        // into a Repr): this runs for every packet.
        let d = pkt.data();
        if d.len() < ethernet::HEADER_LEN {
            return core.drop_pkt(pkt, DropReason::Malformed, Some(port));
        }
        let ether_type = u16::from_be_bytes([d[12], d[13]]);
        if ether_type == ethertype::VLAN {
            let r = if d.len() < ethernet::HEADER_LEN + ethernet::VLAN_TAG_LEN {
                DropReason::Malformed
            } else {
                DropReason::Vlan
            };
            return core.drop_pkt(pkt, r, Some(port));
        }
        let group = d[0] & 1 != 0;
        if !group && d[..6] != core.net.ports[port].mac {
            return core.drop_pkt(pkt, DropReason::NotOurMac, Some(port));
        }
        let src_mac: MacAddr = [d[6], d[7], d[8], d[9], d[10], d[11]];
        // Each parse result goes straight to `ip_input` inside its arm:
        // carrying it out of the match in a variable (or a struct) copied
        // the header summary through the stack once more, a measurable
        // cost on the decrypt path (docs/benchmarks.md, issue 12 entry).
        match ether_type {
            ethertype::ARP => Link::arp_input(core, port, pkt, tx),
            ethertype::IPV4 => {
                if pkt.adj(ethernet::HEADER_LEN).is_err() {
                    return core.drop_pkt(pkt, DropReason::Malformed, Some(port));
                }
                match parse_v4_fast(&mut pkt) {
                    Ok(v) => self
                        .ip_input_v4(core, port, pkt, v, group, esp_in, esp_out, icmp, egress, tx),
                    Err(r) => core.drop_pkt(pkt, r, Some(port)),
                }
            }
            ethertype::IPV6 => {
                if pkt.adj(ethernet::HEADER_LEN).is_err() {
                    return core.drop_pkt(pkt, DropReason::Malformed, Some(port));
                }
                self.ipv6_input(
                    core, port, pkt, group, src_mac, esp_in, esp_out, icmp, egress, tx,
                )
            }
            _ => core.drop_pkt(pkt, DropReason::UnsupportedEthertype, Some(port)),
        }
    }

    /// An IPv6 packet (L2 stripped): ESP to us straight after the fixed
    /// header ([`Self::esp_v6_input`]) and TCP or UDP there (the IPv6 fast
    /// path, [`Self::ip_input_v6`]) without the extension header walk and
    /// the `IpMeta`; everything else parsed by `parse_v6` and decided by
    /// the general path. Out of line and marked cold, though IPv6 traffic
    /// need not be rare: its code inline moved the IPv4 paths' cycles
    /// (code placement in `Worker::process_burst`; docs/benchmarks.md,
    /// session 22).
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn ipv6_input<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        port: PortIdx,
        pkt: B,
        group: bool,
        src_mac: MacAddr,
        esp_in: &mut EspIn<B>,
        esp_out: &mut EspOut<B>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
    ) {
        let Some(mut pkt) = self.esp_v6_input(core, port, pkt, esp_in) else {
            return;
        };
        if let Some(v) = parse_v6_fast(&mut pkt) {
            return self.ip_input_v6(core, port, pkt, v, group, esp_in, esp_out, icmp, egress, tx);
        }
        match parse_v6(&mut pkt) {
            Ok(m) if m.proto == ip_protocol::ICMPV6 && is_nd(&pkt, &m) => {
                Link::nd_input(core, port, pkt, m, src_mac, tx)
            }
            Ok(m) => self.ip_input(core, port, pkt, m, group, esp_in, esp_out, icmp, egress, tx),
            Err(r) => core.drop_pkt(pkt, r, Some(port)),
        }
    }

    /// [`Self::ip_input`] of an IPv6 TCP or UDP packet on its [`V6Meta`]
    /// (the IPv6 fast path): the same tests in the same order, on
    /// integers; what has no code of its own here (local packets, group
    /// addresses aside, the last hop, unprotected transit, and in
    /// [`Self::decided`] the full protect path) gets the `IpMeta` and goes
    /// the general way.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn ip_input_v6<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        port: PortIdx,
        pkt: B,
        v: V6Meta,
        group: bool,
        esp_in: &mut EspIn<B>,
        esp_out: &mut EspOut<B>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
    ) {
        if core.net.is_local_v6(v.dst) {
            let m = v.meta();
            return self.local_input(core, port, pkt, m, esp_in, esp_out, icmp, egress, tx);
        }
        self.transit_fast(core, port, pkt, &v, group, esp_out, icmp, egress, tx)
    }

    /// The transit steps of both fast paths, after the local test, on the
    /// header's integers ([`FastMeta`]): group addresses dropped, the last
    /// hop answered, then the SPD's decision through the flow cache
    /// (protected side) or the unprotected transit.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn transit_fast<B: PacketBuf, P: BufPool<B>, M: FastMeta>(
        &mut self,
        core: &mut Core<B, P>,
        port: PortIdx,
        pkt: B,
        v: &M,
        group: bool,
        esp_out: &mut EspOut<B>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
    ) {
        if group || v.has_group_address() {
            return core.drop_pkt(pkt, DropReason::Multicast, Some(port));
        }
        if v.hops_left() <= 1 {
            return icmp.time_exceeded(core, esp_out, egress, tx, port, pkt, v.meta());
        }
        match core.net.ports[port].side {
            Side::Protected => {
                let d = v.lookup(&mut self.spd_cache, &core.tables.spd);
                let (dst, meta) = (v.dst_addr(), || v.meta());
                self.decided(
                    core,
                    port,
                    pkt,
                    d,
                    M::V6,
                    dst,
                    meta,
                    esp_out,
                    icmp,
                    egress,
                    tx,
                )
            }
            Side::Unprotected => {
                let m = v.meta();
                self.unprotected_transit(core, port, pkt, m, esp_out, icmp, egress, tx)
            }
        }
    }

    /// An IPv6 packet (L2 stripped) with ESP to us straight after its
    /// fixed header, bare or in UDP 4500: staged for its SA as
    /// `parse_v6` and `local_input` would, without the extension header
    /// walk and the `IpMeta`. Anything else is given back.
    #[inline(always)]
    fn esp_v6_input<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        port: PortIdx,
        mut pkt: B,
        esp_in: &mut EspIn<B>,
    ) -> Option<B> {
        let Some(e) = esp_v6(pkt.data()) else {
            return Some(pkt);
        };
        if !core.net.is_local_v6(e.dst.into()) {
            return Some(pkt);
        }
        let dst = IpAddr::V6(e.dst);
        let padding = pkt.len() - e.total;
        if pkt.trim(padding).is_err() {
            core.drop_pkt(pkt, DropReason::Malformed, Some(port));
        } else {
            self.esp_for_spi(core, port, pkt, dst, e.spi, e.udp, esp_in);
        }
        None
    }

    /// [`Self::ip_input`] of an IPv4 packet on its [`V4Meta`] (the IPv4
    /// fast path): the same tests in the same order, on integers. What has
    /// no code of its own here (local packets but ESP, ICMP errors,
    /// unprotected transit, and in [`Self::decided`] the full protect
    /// path) gets the packet's `IpMeta` and goes the general way.
    #[allow(clippy::too_many_arguments)]
    fn ip_input_v4<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        port: PortIdx,
        pkt: B,
        v: V4Meta,
        group: bool,
        esp_in: &mut EspIn<B>,
        esp_out: &mut EspOut<B>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
    ) {
        if core.net.is_local_v4(v.dst) {
            // What `local_input` does with ESP, bare or in UDP 4500 (RFC
            // 3948: NAT traversal, and all that strongSwan's kernel-libipsec
            // sends), without the `IpMeta`: the SPI read here where
            // `locate_esp` would find it, and one staging step for both
            // forms (one inlined copy of it, not two: code that grows here
            // moves the other paths' cycles, docs/benchmarks.md).
            let hl = usize::from(v.hl);
            let esp = match v.proto {
                ip_protocol::ESP => esp_spi_v4(pkt.data(), hl).map(|spi| (spi, false)),
                ip_protocol::UDP if v.has_ports() && v.dport == Encap::NAT_T_PORT => {
                    esp_spi_udp4(pkt.data(), hl).map(|spi| (spi, true))
                }
                _ => None,
            };
            let dst = v.dst_addr();
            if let Some((spi, udp)) = esp {
                return self.esp_for_spi(core, port, pkt, dst, spi, udp, esp_in);
            }
            if v.proto == ip_protocol::ESP {
                return self.esp_input(core, port, pkt, dst, Encap::None, esp_in);
            }
            // Keepalives, IKE on 4500, truncated ESP in UDP and all else
            // local: the general path.
            let m = v.meta();
            return self.local_input(core, port, pkt, m, esp_in, esp_out, icmp, egress, tx);
        }
        self.transit_fast(core, port, pkt, &v, group, esp_out, icmp, egress, tx)
    }

    /// A parsed IP packet (L2 stripped, header summary `m`) received on
    /// `port`; `group`: sent to a multicast/broadcast MAC address.
    #[allow(clippy::too_many_arguments)]
    fn ip_input<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        port: PortIdx,
        pkt: B,
        m: IpMeta,
        group: bool,
        esp_in: &mut EspIn<B>,
        esp_out: &mut EspOut<B>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
    ) {
        if core.net.is_local(m.dst) {
            return self.local_input(core, port, pkt, m, esp_in, esp_out, icmp, egress, tx);
        }
        if group || is_group(m.dst) || is_group(m.src) {
            return core.drop_pkt(pkt, DropReason::Multicast, Some(port));
        }
        if m.ttl <= 1 {
            return icmp.time_exceeded(core, esp_out, egress, tx, port, pkt, m);
        }
        match core.net.ports[port].side {
            Side::Protected => {
                self.protected_transit(core, port, pkt, m, esp_out, icmp, egress, tx)
            }
            Side::Unprotected => {
                self.unprotected_transit(core, port, pkt, m, esp_out, icmp, egress, tx)
            }
        }
    }

    /// A packet from a protected host to somewhere else: the SPD decides.
    #[allow(clippy::too_many_arguments)]
    fn protected_transit<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        port: PortIdx,
        pkt: B,
        m: IpMeta,
        esp_out: &mut EspOut<B>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
    ) {
        let d = self.spd_cache.lookup(&core.tables.spd, &m.outbound_flow());
        self.decided(
            core,
            port,
            pkt,
            d,
            m.v6,
            m.dst,
            || m,
            esp_out,
            icmp,
            egress,
            tx,
        )
    }

    /// A packet from a protected host to `dst` (IPv6 or not: `v6`) with
    /// the SPD's decision `d`: protected (what `protect` decides for a
    /// packet that fits, without its loads; the length is checked first,
    /// the MSS clamp does not change it), bypassed or dropped. `meta`
    /// gives the packet's `IpMeta` where a step needs one: the fast paths
    /// build it only there. Inlined into each transit path, the IPv4 and
    /// IPv6 fast paths' and the general one's.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn decided<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        port: PortIdx,
        mut pkt: B,
        d: Decision,
        v6: bool,
        dst: IpAddr,
        meta: impl Fn() -> IpMeta,
        esp_out: &mut EspOut<B>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
    ) {
        match d.action {
            Action::Protect(id) => match self.protected.get(id.0 as usize) {
                Some(&Some(p)) if pkt.len() <= p.fits => {
                    if p.mss_clamp.is_some() {
                        clamp_mss(&mut core.counters, &mut pkt, &meta(), p.mss_clamp);
                    }
                    decrement_ttl(&mut pkt, v6);
                    esp_out.push(id.0 as usize, pkt, port);
                }
                _ => self.protect(core, port, pkt, meta(), id, esp_out, icmp, egress, tx),
            },
            Action::Bypass => {
                decrement_ttl(&mut pkt, v6);
                let policy = EgressPolicy::Bypass;
                egress.route(core, icmp, esp_out, tx, pkt, dst, policy, Some(port));
            }
            Action::Discard => {
                let r = if d.by_default {
                    DropReason::NoPolicy
                } else {
                    DropReason::PolicyDiscard
                };
                core.drop_pkt(pkt, r, Some(port));
            }
        }
    }

    /// A packet for tunnel `id` the SPD protects: MSS clamp, MTU (ICMP
    /// too big or fragments), TTL, staged for the tunnel's outbound SA.
    #[allow(clippy::too_many_arguments)]
    fn protect<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        port: PortIdx,
        mut pkt: B,
        m: IpMeta,
        id: TunnelId,
        esp_out: &mut EspOut<B>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
    ) {
        let tables = &core.tables;
        let Some(tunnel) = tables.tunnel(id) else {
            // An SPD naming a tunnel the snapshot lacks: discarded,
            // by a rule.
            return core.drop_pkt(pkt, DropReason::PolicyDiscard, Some(port));
        };
        let mtu = core.net.ports[tunnel.port].mtu;
        // Checked here first: without a clamp configured (the
        // common case) this skips a call per packet.
        if tunnel.mss_clamp.is_some() {
            clamp_mss(&mut core.counters, &mut pkt, &m, tunnel.mss_clamp);
        }
        let len = pkt.len();
        // This worker's SA of the tunnel (RFC 9611: one per worker where
        // the peer agreed; they share the suite, so `fits` holds for all).
        let Some(out) = tunnel.out_for(core.worker).map(|sa| &**sa) else {
            if tunnel.trap {
                // No SA negotiated yet: never in the clear, ask IKE.
                return self.acquire(core, port, pkt, id, &m);
            }
            // Hard-expired and not replaced: never in the clear.
            return core.drop_pkt(pkt, DropReason::SaExpired, Some(port));
        };
        let (t, id) = (id.0 as usize, id.0);
        if self.protected.get(t).is_none_or(Option::is_none) {
            if self.protected.len() <= t {
                self.protected.resize(t + 1, None);
            }
            self.protected[t] = Some(Protected {
                fits: inner_mtu(out, mtu),
                mss_clamp: tunnel.mss_clamp,
            });
        }
        if len + out.overhead(len) > mtu {
            // Only for packets that do not fit: inner_mtu walks the
            // padding steps, which cost every packet when it ran
            // for all (docs/benchmarks.md, "inner MTU only when
            // needed").
            let inner_mtu = inner_mtu(out, mtu);
            if m.dont_frag {
                core.counters.tunnel(id).out_mtu_exceeded += 1;
                return icmp.too_big(core, esp_out, egress, tx, port, pkt, m, inner_mtu);
            }
            core.counters.tunnel(id).out_fragmented += 1;
            // IPv4 without DF: fragment, then encrypt each fragment.
            decrement_ttl(&mut pkt, m.v6);
            let Some(rest) = fragment_v4(&mut pkt, inner_mtu, &core.pool) else {
                return core.drop_pkt(pkt, DropReason::FragmentationNeeded, Some(port));
            };
            core.counters.generated += rest.len() as u64;
            esp_out.push(t, pkt, port);
            for frag in rest {
                esp_out.push(t, frag, port);
            }
            return;
        }
        decrement_ttl(&mut pkt, m.v6);
        esp_out.push(t, pkt, port);
    }

    /// A packet for trapped tunnel `id`: dropped (`acquire`), and an
    /// acquire raised unless this worker raised one for the tunnel less
    /// than `ACQUIRE_INTERVAL_NS` ago (worker/acquire.rs).
    #[cold]
    fn acquire<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        port: PortIdx,
        pkt: B,
        id: TunnelId,
        m: &IpMeta,
    ) {
        if self.acquires.allow(id.0, core.now.ns) {
            let a = Acquire {
                tunnel: id.0,
                src: m.src,
                dst: m.dst,
                proto: m.proto,
            };
            // Without rings no IKE driver runs, and there is no trap.
            if core.punt.as_deref().is_some_and(|r| r.raise_acquire(a)) {
                core.counters.acquires_raised += 1;
            }
        } else {
            core.counters.acquires_suppressed += 1;
        }
        core.drop_pkt(pkt, DropReason::Acquire, Some(port));
    }

    /// Plaintext on an unprotected port, not for us: only a bypass policy
    /// lets it through.
    #[allow(clippy::too_many_arguments)]
    fn unprotected_transit<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        port: PortIdx,
        mut pkt: B,
        m: IpMeta,
        esp_out: &mut EspOut<B>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
    ) {
        match self
            .spd_cache
            .lookup(&core.tables.spd, &m.inbound_flow())
            .action
        {
            Action::Bypass => {
                decrement_ttl(&mut pkt, m.v6);
                let policy = EgressPolicy::Bypass;
                egress.route(core, icmp, esp_out, tx, pkt, m.dst, policy, Some(port));
            }
            Action::Protect(_) | Action::Discard => {
                core.drop_pkt(pkt, DropReason::UnprotectedPlaintext, Some(port))
            }
        }
    }

    /// A packet to one of our addresses: ESP, IKE (to the control thread),
    /// ping, or unsupported.
    #[allow(clippy::too_many_arguments)]
    fn local_input<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        port: PortIdx,
        mut pkt: B,
        m: IpMeta,
        esp_in: &mut EspIn<B>,
        esp_out: &mut EspOut<B>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
    ) {
        match m.proto {
            ip_protocol::ESP => self.esp_input(core, port, pkt, m.dst, Encap::None, esp_in),
            ip_protocol::UDP if m.dport == Some(Encap::NAT_T_PORT) => {
                match Punt::nat_t(core, port, &pkt, &m) {
                    NatT::Esp => self.esp_input(core, port, pkt, m.dst, Encap::udp_4500(), esp_in),
                    NatT::Ike => Punt::ike_input(core, port, pkt, m),
                    NatT::Keepalive => core.drop_pkt(pkt, DropReason::NatKeepalive, Some(port)),
                }
            }
            ip_protocol::UDP if m.dport == Some(IKE_PORT) && Punt::takes(core, port) => {
                Punt::ike_input(core, port, pkt, m)
            }
            ip_protocol::ICMP | ip_protocol::ICMPV6 => {
                let answered = if m.v6 {
                    reply::icmpv6_echo_reply_in_place(pkt.data_mut()).is_ok()
                } else {
                    reply::icmpv4_echo_reply_in_place(pkt.data_mut()).is_ok()
                };
                if !answered {
                    return core.drop_pkt(pkt, DropReason::LocalUnsupported, Some(port));
                }
                core.counters.local += 1;
                core.counters.generated += 1;
                let origin = core.origin_of(port);
                icmp.originate(core, esp_out, egress, tx, pkt, origin);
            }
            _ => core.drop_pkt(pkt, DropReason::LocalUnsupported, Some(port)),
        }
    }

    /// ESP to our address `dst`: staged for its inbound SA, found by SPI
    /// and the address it was sent to (RFC 4301 4.1).
    fn esp_input<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        port: PortIdx,
        pkt: B,
        dst: IpAddr,
        encap: Encap,
        esp_in: &mut EspIn<B>,
    ) {
        let loc = match espgw_esp::locate_esp(pkt.data(), encap) {
            Ok(l) => l,
            Err(r) => return core.drop_pkt(pkt, DropReason::from_esp(r), Some(port)),
        };
        let udp = matches!(encap, Encap::Udp { .. });
        self.esp_for_spi(core, port, pkt, dst, loc.spi, udp, esp_in);
    }

    /// ESP to our address `dst` with SPI `spi` (`udp`: in UDP), located:
    /// staged for its inbound SA.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn esp_for_spi<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        port: PortIdx,
        pkt: B,
        dst: IpAddr,
        spi: u32,
        udp: bool,
        esp_in: &mut EspIn<B>,
    ) {
        let found = match self.last_inbound {
            Some(l) if l.spi == spi && l.dst == dst => Some(l),
            _ => {
                let tables = &core.tables;
                let found = tables.sad.inbound(spi, dst).and_then(|slot| {
                    let (_, tunnel, _) = tables.inbound_sa(slot)?;
                    Some(LastInbound {
                        spi,
                        dst,
                        slot,
                        udp_encap: tables.tunnel(tunnel)?.udp_encap,
                    })
                });
                self.last_inbound = found.or(self.last_inbound);
                found
            }
        };
        let Some(found) = found else {
            return core.drop_pkt(pkt, DropReason::UnknownSpi, Some(port));
        };
        if found.udp_encap != udp {
            return core.drop_pkt(pkt, DropReason::NotEsp, Some(port));
        }
        esp_in.push(found.slot, pkt, port);
    }
}

/// What the transit fast paths read of a header their parse summarized:
/// an IPv4 [`V4Meta`] or an IPv6 [`V6Meta`], on integers of their width.
trait FastMeta {
    /// Hop limit or TTL decrement: IPv6's.
    const V6: bool;
    /// Source or destination a multicast, broadcast or unspecified address.
    fn has_group_address(&self) -> bool;
    /// The TTL or hop limit.
    fn hops_left(&self) -> u8;
    /// The SPD's decision for the flow, through the worker's flow cache.
    fn lookup(&self, cache: &mut FlowCache, spd: &Spd) -> Decision;
    fn dst_addr(&self) -> IpAddr;
    fn meta(&self) -> IpMeta;
}

impl FastMeta for V4Meta {
    const V6: bool = false;
    #[inline(always)]
    fn has_group_address(&self) -> bool {
        is_group_v4(self.dst) || is_group_v4(self.src)
    }
    #[inline(always)]
    fn hops_left(&self) -> u8 {
        self.ttl
    }
    #[inline(always)]
    fn lookup(&self, cache: &mut FlowCache, spd: &Spd) -> Decision {
        cache.lookup_v4(spd, self.src, self.dst, self.proto, self.sport, self.dport)
    }
    #[inline(always)]
    fn dst_addr(&self) -> IpAddr {
        V4Meta::dst_addr(self)
    }
    #[inline(always)]
    fn meta(&self) -> IpMeta {
        V4Meta::meta(self)
    }
}

impl FastMeta for V6Meta {
    const V6: bool = true;
    #[inline(always)]
    fn has_group_address(&self) -> bool {
        is_group_v6(self.dst) || is_group_v6(self.src)
    }
    #[inline(always)]
    fn hops_left(&self) -> u8 {
        self.hop_limit
    }
    #[inline(always)]
    fn lookup(&self, cache: &mut FlowCache, spd: &Spd) -> Decision {
        cache.lookup_v6(spd, self.src, self.dst, self.proto, self.sport, self.dport)
    }
    #[inline(always)]
    fn dst_addr(&self) -> IpAddr {
        V6Meta::dst_addr(self)
    }
    #[inline(always)]
    fn meta(&self) -> IpMeta {
        V6Meta::meta(self)
    }
}

/// The SPI `locate_esp(d, Encap::None)` finds in an IPv4 packet that
/// `parse_v4_fast` accepted (header length `hl`, trimmed to its total
/// length) and whose protocol is ESP, when it finds one: not a fragment,
/// the 8-byte ESP header there, SPI not 0. `None`: `locate_esp` says what
/// is wrong (the general path).
#[inline]
fn esp_spi_v4(d: &[u8], hl: usize) -> Option<u32> {
    let frag = u16::from_be_bytes([*d.get(6)?, *d.get(7)?]) & 0x3fff;
    let esp = d.get(hl..)?.first_chunk::<8>()?;
    let spi = u32::from_be_bytes([esp[0], esp[1], esp[2], esp[3]]);
    (frag == 0 && spi != 0).then_some(spi)
}

/// The SPI of ESP in UDP that `Punt::nat_t` and `locate_esp(d,
/// Encap::udp_4500())` take for ESP in an IPv4 packet that `parse_v4_fast`
/// accepted (header length `hl`, trimmed to its total length) with UDP to
/// port 4500, when they would: not a fragment, a UDP length that holds an
/// 8-byte ESP header and fits the packet, SPI not 0 (0 is IKE's non-ESP
/// marker). `None`: the general path decides (keepalive, IKE, truncated).
#[inline]
fn esp_spi_udp4(d: &[u8], hl: usize) -> Option<u32> {
    let frag = u16::from_be_bytes([*d.get(6)?, *d.get(7)?]) & 0x3fff;
    let udp = d.get(hl..)?.first_chunk::<16>()?;
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    let spi = u32::from_be_bytes([udp[8], udp[9], udp[10], udp[11]]);
    (frag == 0 && udp_len >= 16 && hl + udp_len <= d.len() && spi != 0).then_some(spi)
}

/// ESP to an IPv6 address, found by [`esp_v6`].
struct EspV6 {
    dst: std::net::Ipv6Addr,
    spi: u32,
    /// In UDP to port 4500.
    udp: bool,
    /// The packet's length by its header (without link padding).
    total: usize,
}

/// ESP right after an IPv6 fixed header, bare or in UDP to port 4500,
/// when `parse_v6` and, for a local destination, `local_input` would take
/// it as ESP with this SPI: version 6, a payload length the packet holds,
/// an 8-byte ESP header within it (and within the UDP length) with an SPI
/// not 0. `None`: the general path decides (extension headers, other
/// protocols, keepalives, IKE, truncated).
#[inline]
fn esp_v6(d: &[u8]) -> Option<EspV6> {
    let h = d.first_chunk::<40>()?;
    let total = 40 + usize::from(u16::from_be_bytes([h[4], h[5]]));
    if h[0] >> 4 != 6 || total > d.len() {
        return None;
    }
    let (esp_at, end, udp) = match h[6] {
        ip_protocol::ESP => (40, total, false),
        ip_protocol::UDP => {
            let u = d[40..total].first_chunk::<8>()?;
            let udp_len = usize::from(u16::from_be_bytes([u[4], u[5]]));
            if u16::from_be_bytes([u[2], u[3]]) != Encap::NAT_T_PORT || 40 + udp_len > total {
                return None;
            }
            (48, 40 + udp_len, true)
        }
        _ => return None,
    };
    let esp = d[esp_at..end.max(esp_at)].first_chunk::<8>()?;
    let spi = u32::from_be_bytes([esp[0], esp[1], esp[2], esp[3]]);
    let dst: [u8; 16] = h[24..40].try_into().ok()?;
    (spi != 0).then_some(EspV6 {
        dst: dst.into(),
        spi,
        udp,
        total,
    })
}

/// True for an ICMPv6 neighbor solicitation or advertisement.
fn is_nd<B: PacketBuf>(pkt: &B, m: &IpMeta) -> bool {
    matches!(
        pkt.data().get(m.l4_offset),
        Some(&icmpv6::msg_type::NEIGHBOR_SOLICIT) | Some(&icmpv6::msg_type::NEIGHBOR_ADVERT)
    )
}

#[cfg(test)]
mod tests {
    use super::{esp_spi_udp4, esp_spi_v4, esp_v6};
    use crate::ip::parse_v4_fast;
    use espgw_control::tables::inner_mtu;
    use espgw_wire::{PacketBuf, VecBuf};
    use std::net::IpAddr;

    /// The classifier's SPI read agrees with `locate_esp`: whenever it
    /// gives an SPI, `locate_esp` finds that one, and for an unfragmented
    /// ESP header it always gives one; else the general path decides.
    /// IPv4 ESP packets that parse, with options, fragment bits, short or
    /// zero-SPI ESP headers, and link padding.
    #[test]
    fn esp_spi_v4_agrees_with_locate_esp() {
        use proptest::prelude::*;
        let packets = (
            0usize..=3,
            0usize..24,
            0usize..4,
            any::<[u8; 20]>(),
            proptest::collection::vec(any::<u8>(), 40),
            0usize..5,
        )
            .prop_map(|(opt_words, esp_len, pad, fields, rest, variant)| {
                let hl = 20 + 4 * opt_words;
                let total = hl + esp_len;
                let mut p = fields.to_vec();
                p.extend_from_slice(&rest[..4 * opt_words + esp_len + pad]);
                p[0] = 0x40 | (hl / 4) as u8;
                p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
                p[9] = 50;
                let flags_frag = [0x0000u16, 0x4000, 0x2000, 0x0001, 0x4000][variant];
                p[6..8].copy_from_slice(&flags_frag.to_be_bytes());
                if variant == 4 && esp_len >= 4 {
                    p[hl..hl + 4].copy_from_slice(&[0; 4]);
                }
                p[10..12].copy_from_slice(&[0, 0]);
                let sum = espgw_wire::checksum::sum(&p[..hl]);
                p[10..12].copy_from_slice(&(!sum).to_be_bytes());
                p
            });
        proptest!(|(bytes in packets)| {
            let mut pkt = VecBuf::from_packet(&bytes);
            let v = parse_v4_fast(&mut pkt).unwrap();
            let fast = esp_spi_v4(pkt.data(), usize::from(v.hl));
            let general = espgw_esp::locate_esp(pkt.data(), espgw_esp::Encap::None);
            match (fast, general) {
                (Some(spi), Ok(loc)) => prop_assert_eq!(spi, loc.spi),
                (None, Err(_)) => {}
                (fast, general) => prop_assert!(false, "{:?} vs {:?}", fast, general),
            }
        });
    }
    use espgw_esp::{Encap, Lifetimes, OutboundSa, SaConfig, Suite};

    /// The classifier's NAT-T read agrees with the general path's
    /// (`Punt::nat_t`'s payload test, then `locate_esp` with port 4500):
    /// whenever it gives an SPI, the payload is ESP (not a keepalive, not
    /// IKE's non-ESP marker) and `locate_esp` finds that SPI; for every
    /// unfragmented packet that both take as ESP it gives one. IPv4 UDP
    /// packets to port 4500 with options, fragment bits, UDP lengths around
    /// the edges, keepalives, zero SPIs and link padding.
    #[test]
    fn esp_spi_udp4_agrees_with_nat_t_and_locate_esp() {
        use proptest::prelude::*;
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        static FOUND: AtomicUsize = AtomicUsize::new(0);
        let packets = (
            0usize..=2,
            prop_oneof![0usize..4, 4usize..40],
            prop::sample::select(vec![0i32, 0, 0, -1, -8, 1, 3, -100]),
            0usize..4,
            any::<[u8; 20]>(),
            proptest::collection::vec(any::<u8>(), 64),
            0usize..6,
        )
            .prop_map(
                |(opt_words, payload_len, udp_off, pad, fields, rest, variant)| {
                    let hl = 20 + 4 * opt_words;
                    let total = hl + 8 + payload_len;
                    let mut p = fields.to_vec();
                    p.extend_from_slice(&rest[..4 * opt_words + 8 + payload_len + pad]);
                    p[0] = 0x40 | (hl / 4) as u8;
                    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
                    p[9] = 17;
                    let flags_frag = [0x0000u16, 0x4000, 0x2000, 0x0000, 0x4000, 0x0000][variant];
                    p[6..8].copy_from_slice(&flags_frag.to_be_bytes());
                    p[hl + 2..hl + 4].copy_from_slice(&4500u16.to_be_bytes());
                    let udp_len = ((8 + payload_len) as i32 + udp_off).clamp(0, 0xffff) as u16;
                    p[hl + 4..hl + 6].copy_from_slice(&udp_len.to_be_bytes());
                    match variant {
                        3 if payload_len >= 4 => p[hl + 8..hl + 12].copy_from_slice(&[0; 4]),
                        5 if payload_len >= 1 => p[hl + 8] = 0xff,
                        _ => {}
                    }
                    p[10..12].copy_from_slice(&[0, 0]);
                    let sum = espgw_wire::checksum::sum(&p[..hl]);
                    p[10..12].copy_from_slice(&(!sum).to_be_bytes());
                    p
                },
            );
        proptest!(|(bytes in packets)| {
            let mut pkt = VecBuf::from_packet(&bytes);
            let v = parse_v4_fast(&mut pkt).unwrap();
            prop_assert!(v.has_ports() && v.dport == Encap::NAT_T_PORT);
            let d = pkt.data();
            let hl = usize::from(v.hl);
            let fast = esp_spi_udp4(d, hl);
            // `Punt::nat_t`: what follows the UDP header, to the packet's end.
            let nat_t_esp = !matches!(&d[hl + 8..], [0xff] | [0, 0, 0, 0, ..]);
            let general = espgw_esp::locate_esp(d, Encap::udp_4500());
            match (fast, nat_t_esp, general) {
                (Some(spi), true, Ok(loc)) => {
                    prop_assert_eq!(spi, loc.spi);
                    FOUND.fetch_add(1, Relaxed);
                }
                (Some(_), _, general) => prop_assert!(false, "fast took {:?}", general),
                (None, true, Ok(loc)) => prop_assert!(false, "left {:?} to the general path", loc),
                (None, _, _) => {}
            }
        });
        assert!(FOUND.load(Relaxed) > 10);
    }

    /// The classifier's IPv6 read agrees with the general path's
    /// (`parse_v6`, then for ESP in UDP `Punt::nat_t`'s payload test, then
    /// `locate_esp`): whenever it finds ESP, `parse_v6` gives that
    /// destination and protocol (port 4500 in UDP) and trims to its length,
    /// the payload is ESP and `locate_esp` finds the SPI; for every packet
    /// with ESP straight after the fixed header that the general path
    /// takes, it finds it too. Random IPv6 headers with the version, next
    /// header, payload and UDP lengths, ports and SPI around their edges,
    /// short packets and link padding.
    #[test]
    fn esp_v6_agrees_with_parse_v6_and_locate_esp() {
        use crate::ip::parse_v6;
        use proptest::prelude::*;
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        static FOUND: [AtomicUsize; 2] = [const { AtomicUsize::new(0) }; 2];
        let packets = (
            any::<[u8; 100]>(),
            prop_oneof![0usize..100, 56usize..100],
            prop::sample::select(vec![6u8, 6, 6, 4]),
            prop::sample::select(vec![50u8, 50, 17, 17, 6, 60]),
            prop_oneof![0usize..70, (0usize..4).prop_map(|pad| 1000 + pad)],
            prop::sample::select(vec![4500u16, 4500, 500]),
            prop::sample::select(vec![0i32, 0, -1, -8, 1, -60]),
            0usize..4,
        );
        let config = ProptestConfig::with_cases(2048);
        proptest!(config, |((bytes, len, version, nh, payload, dport, udp_off, variant) in packets)| {
            let (mut p, payload) = crate::ip::shaped_v6(&bytes[..len], version, nh, payload);
            if p.len() >= 40 {
                let esp_at = if nh == 17 { 48 } else { 40 };
                if nh == 17 && p.len() >= 48 {
                    p[42..44].copy_from_slice(&dport.to_be_bytes());
                    let udp_len = (payload as i32 + udp_off).clamp(0, 0xffff) as u16;
                    p[44..46].copy_from_slice(&udp_len.to_be_bytes());
                }
                match variant {
                    1 if p.len() >= esp_at + 4 => p[esp_at..esp_at + 4].copy_from_slice(&[0; 4]),
                    2 if nh == 17 && p.len() >= 49 => p[48] = 0xff,
                    _ => {}
                }
            }
            let fast = esp_v6(&p);
            let mut pkt = VecBuf::from_packet(&p);
            let parsed = parse_v6(&mut pkt);
            let general = parsed.as_ref().ok().and_then(|m| {
                let d = pkt.data();
                let encap = match (m.proto, m.dport) {
                    (50, _) => Encap::None,
                    (17, Some(Encap::NAT_T_PORT))
                        if !matches!(d.get(m.l4_offset + 8..), Some([0xff] | [0, 0, 0, 0, ..])) =>
                    {
                        Encap::udp_4500()
                    }
                    _ => return None,
                };
                let loc = espgw_esp::locate_esp(d, encap).ok()?;
                Some((m.dst, loc.spi, encap != Encap::None, d.len()))
            });
            match (fast, general) {
                (Some(e), Some((dst, spi, udp, total))) => {
                    prop_assert_eq!((IpAddr::V6(e.dst), e.spi, e.udp, e.total), (dst, spi, udp, total));
                    FOUND[usize::from(e.udp)].fetch_add(1, Relaxed);
                }
                (Some(e), None) => prop_assert!(false, "fast took spi {:#x}: {:?}", e.spi, parsed),
                (None, Some(g)) if p.get(6).is_some_and(|&nh| nh == 50 || nh == 17) => {
                    prop_assert!(false, "left {:?} to the general path", g)
                }
                (None, _) => {}
            }
        });
        for found in &FOUND {
            assert!(found.load(Relaxed) > 10, "{found:?}");
        }
    }

    /// The fast path's test (`len <= fits`, with `fits = inner_mtu(out,
    /// mtu)`, worker/classify.rs `Protected`) says "fits" for exactly the
    /// lengths the full path's test (`len + overhead(len) <= mtu`) does:
    /// every suite, both outer families and framings, MTUs around the
    /// padding steps, every length up to past the MTU.
    #[test]
    fn fits_agrees_with_the_overhead_test() {
        for suite in Suite::ALL {
            for (local, remote) in [("192.0.2.1", "192.0.2.2"), ("2001:db8::1", "2001:db8::2")] {
                for encap in [Encap::None, Encap::udp_4500()] {
                    let cfg = SaConfig {
                        suite,
                        spi: 0x100,
                        key: vec![7; suite.key_len()].into(),
                        auth_key: vec![9; suite.auth_key_len()].into(),
                        esn: false,
                        replay_window: 64,
                        encap,
                        local: local.parse().unwrap(),
                        remote: remote.parse().unwrap(),
                        lifetimes: Lifetimes::default(),
                    };
                    let out = OutboundSa::new(&cfg, 0).unwrap();
                    for mtu in (1280..1300).chain(1490..1510).chain([576, 9000]) {
                        let fits = inner_mtu(&out, mtu);
                        for len in 20..mtu + 40 {
                            assert_eq!(
                                len <= fits,
                                len + out.overhead(len) <= mtu,
                                "{suite} {local} {encap:?} mtu {mtu} len {len}"
                            );
                        }
                    }
                }
            }
        }
    }
}
