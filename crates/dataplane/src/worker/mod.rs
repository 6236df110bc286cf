//! The packet-processing core of one worker, generic over the packet buffer
//! (DPDK mbufs in production, `VecBuf` in tests) and free of DPDK.
//!
//! A burst goes through these stages (VPP-style: the ESP work is done per
//! SA group, one engine call per SA per burst):
//!
//! 1. per packet: Ethernet classify; ARP, ND and ping to our addresses are
//!    answered in place; IP packets are parsed once ([`IpMeta`]);
//!    protected side: TTL, SPD, PMTU, then staged per outbound SA (or
//!    forwarded if bypassed); unprotected side: ESP to us is staged per
//!    inbound SA by SPI, plaintext is checked against the SPD.
//! 2. per outbound SA: `encap_burst`, then route + neighbor + Ethernet.
//! 3. per inbound SA: `decap_burst` (one lock per SA group), traffic
//!    selector check, TTL, route + neighbor + Ethernet.
//!
//! Every packet ends in exactly one place: a TX queue, a counted drop, the
//! gateway itself (`local`), or a neighbor wait queue (`held`).
//!
//! This file holds the worker and stage 1; `link` (ARP, ND), `icmp` (ICMP
//! errors, gateway-originated packets), `esp_stage` (stages 2 and 3) and
//! `egress` (route, neighbor, Ethernet, TX) add their parts of it.

use std::net::IpAddr;
use std::sync::Arc;

use espgw_control::config::Side;
use espgw_control::tables::{inner_mtu, Action, Tables};
use espgw_esp::{Encap, Verdict};
use espgw_wire::{ethernet, ethertype, icmpv6, ip_protocol, reply, MacAddr, PacketBuf};

use crate::counters::WorkerCounters;
use crate::flow_cache::FlowCache;
use crate::fragment::fragment_v4;
use crate::ip::{decrement_ttl, parse_v4, parse_v6, IpMeta};
use crate::neighbor::{Neighbors, SharedNeighbors};
use crate::network::Network;
use crate::pool::BufPool;
use crate::ports::PortIdx;
use crate::ratelimit::TokenBucket;
use crate::reason::DropReason;
use crate::route::NextHop;
use crate::tx::TxQueues;

mod egress;
mod esp_stage;
mod icmp;
mod link;
mod mss;

/// Time of the run's monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Now {
    /// Nanoseconds since the run started.
    pub ns: u64,
}

impl Now {
    /// Whole seconds, the ESP engine's lifetime clock.
    pub fn secs(self) -> u64 {
        self.ns / 1_000_000_000
    }
}

/// How often [`Worker::tick`] does neighbor retries and expiries.
const TICK_NS: u64 = 100_000_000;

/// The "ingress port" of packets the gateway made itself (no port's
/// receive counters are charged for their drops).
const ORIGINATED: PortIdx = PortIdx::MAX;

/// ICMP errors one worker may send per second, and in one go.
pub const ICMP_ERRORS_PER_SEC: u64 = 1000;
pub const ICMP_ERROR_BURST: u64 = 100;

/// All-nodes multicast MAC (ff02::1), for answers to DAD probes.
const ALL_NODES_MAC: MacAddr = [0x33, 0x33, 0, 0, 0, 1];

/// What a packet is allowed to do on the way out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Egress {
    /// Plaintext the SPD allowed in the clear: any port.
    Bypass,
    /// ESP, or what the gateway itself sends: any port.
    Trusted,
    /// Decrypted traffic: never out of an unprotected port.
    ProtectedOnly,
}

/// Where the packet the gateway answers (with an ICMP error or an echo
/// reply) came from: the answer quotes or echoes its bytes, so it may
/// leave only as that packet could have (see [`Worker::originate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// In the clear on an unprotected port (or the gateway's own packet).
    Unprotected,
    /// In the clear on a protected port.
    Protected,
    /// Out of a tunnel (decrypted).
    Decrypted,
}

/// The last next hop resolved: consecutive packets to one destination
/// (the common case) skip the route and neighbor lookups.
#[derive(Clone, Copy)]
struct HopCache {
    dst: IpAddr,
    hop: NextHop,
    mac: MacAddr,
    /// [`Neighbors::generation`] when cached.
    generation: u64,
}

/// Packets of one SA group, and the port each came in on.
struct Stage<B> {
    pkts: Vec<B>,
    ports: Vec<PortIdx>,
}

impl<B> Stage<B> {
    fn new(capacity: usize) -> Self {
        Stage {
            pkts: Vec::with_capacity(capacity),
            ports: Vec::with_capacity(capacity),
        }
    }
    fn push(&mut self, pkt: B, port: PortIdx) {
        self.pkts.push(pkt);
        self.ports.push(port);
    }
}

/// One data-plane worker: its counters, neighbor cache and staging areas.
pub struct Worker<B: PacketBuf, P: BufPool<B>> {
    id: usize,
    /// Ports, routes, static neighbors: fixed for the run.
    net: Arc<Network>,
    /// The control plane's current snapshot (SPD, SAD, tunnels).
    tables: Arc<Tables>,
    pool: P,
    neighbors: Neighbors<B>,
    counters: WorkerCounters,
    out_stage: Vec<Stage<B>>,
    in_stage: Vec<Stage<B>>,
    verdicts: Vec<Verdict>,
    /// Where ICMP errors and ND answers are built before they are copied
    /// over the packet they answer.
    scratch: Box<[u8]>,
    last_tick_ns: u64,
    hop_cache: Option<HopCache>,
    /// Recent SPD decisions of this snapshot's SPD.
    spd_cache: FlowCache,
    icmp_limit: TokenBucket,
    /// Test hook ([`Worker::inject_panic_after`]): not in release builds.
    #[cfg(any(test, debug_assertions))]
    panic_after_bursts: Option<u64>,
}

impl<B: PacketBuf, P: BufPool<B>> Worker<B, P> {
    /// A worker on the network `net` reading `tables`; `burst` sizes the
    /// staging areas (they grow if a burst is larger). `shared` is the
    /// neighbor board of all workers.
    pub fn new(
        id: usize,
        net: Arc<Network>,
        tables: Arc<Tables>,
        pool: P,
        burst: usize,
        shared: SharedNeighbors,
    ) -> Self {
        Worker {
            id,
            neighbors: Neighbors::new(&net.static_neighbors, shared),
            counters: WorkerCounters::new(net.ports.len(), tables.tunnel_ids()),
            out_stage: (0..tables.tunnel_ids())
                .map(|_| Stage::new(burst))
                .collect(),
            in_stage: (0..tables.sad.sas().len())
                .map(|_| Stage::new(burst))
                .collect(),
            verdicts: Vec::with_capacity(burst),
            scratch: vec![0u8; icmpv6::MIN_MTU].into_boxed_slice(),
            last_tick_ns: 0,
            hop_cache: None,
            spd_cache: FlowCache::new(FlowCache::SLOTS),
            icmp_limit: TokenBucket::new(ICMP_ERRORS_PER_SEC, ICMP_ERROR_BURST),
            #[cfg(any(test, debug_assertions))]
            panic_after_bursts: None,
            net,
            tables,
            pool,
        }
    }

    /// Switches to a new snapshot of the tables (call between bursts,
    /// when the control plane published one). Ports and static neighbors
    /// never change during a run; tunnels and SAs may.
    pub fn set_tables(&mut self, tables: Arc<Tables>) {
        if Arc::ptr_eq(&self.tables, &tables) {
            return;
        }
        let burst = self.verdicts.capacity();
        self.out_stage
            .resize_with(tables.tunnel_ids(), || Stage::new(burst));
        self.in_stage
            .resize_with(tables.sad.sas().len(), || Stage::new(burst));
        self.spd_cache.clear();
        self.tables = tables;
    }

    /// Test hook of test and debug builds (absent from release builds,
    /// not reachable from the config): the worker panics in its next
    /// burst once it has processed `bursts`, so that the runtime's handling
    /// of a worker panic can be tested (`crate::supervise`).
    #[cfg(any(test, debug_assertions))]
    pub fn inject_panic_after(&mut self, bursts: u64) {
        self.panic_after_bursts = Some(bursts);
    }

    /// This worker's index.
    pub fn id(&self) -> usize {
        self.id
    }

    /// The counters so far (`held` is current).
    pub fn counters(&self) -> &WorkerCounters {
        &self.counters
    }

    /// The snapshot this worker reads.
    pub fn tables(&self) -> &Arc<Tables> {
        &self.tables
    }

    /// The network this worker runs on.
    pub fn net(&self) -> &Arc<Network> {
        &self.net
    }

    /// Processes a burst received on `port`: every packet of `pkts` is
    /// taken (the vector is left empty, its capacity kept) and ends up in
    /// `tx`, dropped and counted, consumed, or held for its next hop.
    pub fn process_burst(
        &mut self,
        port: PortIdx,
        pkts: &mut Vec<B>,
        tx: &mut TxQueues<B>,
        now: Now,
    ) {
        if pkts.is_empty() {
            return;
        }
        #[cfg(any(test, debug_assertions))]
        if self
            .panic_after_bursts
            .is_some_and(|n| self.counters.bursts >= n)
        {
            panic!("injected panic (test hook) in worker {}", self.id);
        }
        self.counters.bursts += 1;
        for pkt in pkts.iter() {
            pkt.prefetch();
        }
        for pkt in pkts.drain(..) {
            self.input(port, pkt, tx, now);
        }
        self.run_outbound(tx, now);
        self.run_inbound(tx, now);
        // Answers to traffic that came through a tunnel go back through it.
        if self.out_stage.iter().any(|s| !s.pkts.is_empty()) {
            self.run_outbound(tx, now);
        }
    }

    /// Periodic work (call once per loop): neighbor retries and expiries.
    pub fn tick(&mut self, tx: &mut TxQueues<B>, now: Now) {
        if now.ns.saturating_sub(self.last_tick_ns) < TICK_NS {
            return;
        }
        self.last_tick_ns = now.ns;
        let t = self.neighbors.tick(now.ns);
        for ((port, _), mac, held) in t.resolved {
            for pkt in held {
                self.send_frame(port, mac, pkt, None, tx);
            }
        }
        for (port, ip) in t.retry {
            self.solicit(port, ip, tx);
        }
        for pkt in t.expired {
            self.drop_pkt(pkt, DropReason::NeighborUnresolved, None);
        }
        self.counters.held = self.neighbors.held() as u64;
    }

    /// Drops every packet still waiting for a next hop (at shutdown).
    pub fn shutdown(&mut self) {
        for pkt in self.neighbors.drain_held() {
            self.drop_pkt(pkt, DropReason::Shutdown, None);
        }
        self.counters.held = 0;
    }

    /// Counts that the device queue of `port` took `sent` frames of
    /// `bytes` bytes and refused `refused` (which the caller freed).
    pub fn count_tx(&mut self, port: PortIdx, sent: u64, bytes: u64, refused: u64) {
        self.counters.tx += sent;
        let p = &mut self.counters.ports[port];
        p.tx_packets += sent;
        p.tx_bytes += bytes;
        p.tx_dropped += refused;
        for _ in 0..refused {
            self.counters.drop(DropReason::TxFull, None);
        }
    }

    /// Counts one loop iteration of the runtime, `busy` when it moved packets.
    #[inline]
    pub fn count_poll(&mut self, busy: bool) {
        self.counters.polls += 1;
        self.counters.busy_polls += u64::from(busy);
    }

    /// Pipeline mode: counts frames handed to the I/O lcore (`handed`) and
    /// those the ring refused (freed by the caller). The I/O lcore counts
    /// what the devices send.
    pub fn count_handoff(&mut self, handed: u64, refused: u64) {
        self.counters.tx += handed;
        for _ in 0..refused {
            self.counters.drop(DropReason::RingFull, None);
        }
    }

    // ---------------------------------------------------------------
    // Stage 1: per packet
    // ---------------------------------------------------------------

    fn input(&mut self, port: PortIdx, mut pkt: B, tx: &mut TxQueues<B>, now: Now) {
        self.counters.rx += 1;
        let pc = &mut self.counters.ports[port];
        pc.rx_packets += 1;
        pc.rx_bytes += pkt.len() as u64;

        // The Ethernet header read in place (no header view, no MAC copies
        // into a Repr): this runs for every packet.
        let d = pkt.data();
        if d.len() < ethernet::HEADER_LEN {
            return self.drop_pkt(pkt, DropReason::Malformed, Some(port));
        }
        let ether_type = u16::from_be_bytes([d[12], d[13]]);
        if ether_type == ethertype::VLAN {
            let r = if d.len() < ethernet::HEADER_LEN + ethernet::VLAN_TAG_LEN {
                DropReason::Malformed
            } else {
                DropReason::Vlan
            };
            return self.drop_pkt(pkt, r, Some(port));
        }
        let group = d[0] & 1 != 0;
        if !group && d[..6] != self.net.ports[port].mac {
            return self.drop_pkt(pkt, DropReason::NotOurMac, Some(port));
        }
        let src_mac: MacAddr = [d[6], d[7], d[8], d[9], d[10], d[11]];
        match ether_type {
            ethertype::ARP => self.arp_input(port, pkt, tx),
            ethertype::IPV4 => {
                if pkt.adj(ethernet::HEADER_LEN).is_err() {
                    return self.drop_pkt(pkt, DropReason::Malformed, Some(port));
                }
                match parse_v4(&mut pkt) {
                    Ok(m) => self.ip_input(port, pkt, m, group, tx, now),
                    Err(r) => self.drop_pkt(pkt, r, Some(port)),
                }
            }
            ethertype::IPV6 => {
                if pkt.adj(ethernet::HEADER_LEN).is_err() {
                    return self.drop_pkt(pkt, DropReason::Malformed, Some(port));
                }
                match parse_v6(&mut pkt) {
                    Ok(m) if m.proto == ip_protocol::ICMPV6 && is_nd(&pkt, &m) => {
                        self.nd_input(port, pkt, m, src_mac, tx)
                    }
                    Ok(m) => self.ip_input(port, pkt, m, group, tx, now),
                    Err(r) => self.drop_pkt(pkt, r, Some(port)),
                }
            }
            _ => self.drop_pkt(pkt, DropReason::UnsupportedEthertype, Some(port)),
        }
    }

    fn ip_input(
        &mut self,
        port: PortIdx,
        pkt: B,
        m: IpMeta,
        group: bool,
        tx: &mut TxQueues<B>,
        now: Now,
    ) {
        if self.net.is_local(m.dst) {
            return self.local_input(port, pkt, m, tx, now);
        }
        if group || is_group(m.dst) || is_group(m.src) {
            return self.drop_pkt(pkt, DropReason::Multicast, Some(port));
        }
        if m.ttl <= 1 {
            return self.time_exceeded(port, pkt, m, tx, now);
        }
        match self.net.ports[port].side {
            Side::Protected => self.protected_transit(port, pkt, m, tx, now),
            Side::Unprotected => self.unprotected_transit(port, pkt, m, tx, now),
        }
    }

    /// A packet from a protected host to somewhere else: the SPD decides.
    fn protected_transit(
        &mut self,
        port: PortIdx,
        mut pkt: B,
        m: IpMeta,
        tx: &mut TxQueues<B>,
        now: Now,
    ) {
        let d = self.spd_cache.lookup(&self.tables.spd, &m.outbound_flow());
        match d.action {
            Action::Protect(id) => {
                let Some(tunnel) = self.tables.tunnel(id) else {
                    // An SPD naming a tunnel the snapshot lacks: discarded,
                    // by a rule.
                    return self.drop_pkt(pkt, DropReason::PolicyDiscard, Some(port));
                };
                let clamp = tunnel.mss_clamp;
                self.clamp_mss(&mut pkt, &m, clamp);
                let tunnel = self.tables.tunnel(id).unwrap_or_else(|| unreachable!());
                let mtu = self.net.ports[tunnel.port].mtu;
                let len = pkt.len();
                let t = id.0 as usize;
                let (id, out) = match self.tables.outbound_sa(id) {
                    Some(out) => (id.0, &**out),
                    // Hard-expired and not replaced: never in the clear.
                    None => return self.drop_pkt(pkt, DropReason::SaExpired, Some(port)),
                };
                if len + out.overhead(len) > mtu {
                    // Only for packets that do not fit: inner_mtu walks the
                    // padding steps, which cost every packet when it ran
                    // for all (docs/benchmarks.md, "inner MTU only when
                    // needed").
                    let inner_mtu = inner_mtu(out, mtu);
                    if m.dont_frag {
                        self.counters.tunnel(id).out_mtu_exceeded += 1;
                        return self.too_big(port, pkt, m, inner_mtu, tx, now);
                    }
                    self.counters.tunnel(id).out_fragmented += 1;
                    // IPv4 without DF: fragment, then encrypt each fragment.
                    decrement_ttl(&mut pkt, m.v6);
                    let Some(rest) = fragment_v4(&mut pkt, inner_mtu, &self.pool) else {
                        return self.drop_pkt(pkt, DropReason::FragmentationNeeded, Some(port));
                    };
                    self.counters.generated += rest.len() as u64;
                    self.out_stage[t].push(pkt, port);
                    for frag in rest {
                        self.out_stage[t].push(frag, port);
                    }
                    return;
                }
                decrement_ttl(&mut pkt, m.v6);
                self.out_stage[t].push(pkt, port);
            }
            Action::Bypass => {
                decrement_ttl(&mut pkt, m.v6);
                self.route_out(pkt, m.dst, Egress::Bypass, Some(port), tx, now);
            }
            Action::Discard => {
                let r = if d.by_default {
                    DropReason::NoPolicy
                } else {
                    DropReason::PolicyDiscard
                };
                self.drop_pkt(pkt, r, Some(port));
            }
        }
    }

    /// Plaintext on an unprotected port, not for us: only a bypass policy
    /// lets it through.
    fn unprotected_transit(
        &mut self,
        port: PortIdx,
        mut pkt: B,
        m: IpMeta,
        tx: &mut TxQueues<B>,
        now: Now,
    ) {
        match self
            .spd_cache
            .lookup(&self.tables.spd, &m.inbound_flow())
            .action
        {
            Action::Bypass => {
                decrement_ttl(&mut pkt, m.v6);
                self.route_out(pkt, m.dst, Egress::Bypass, Some(port), tx, now);
            }
            Action::Protect(_) | Action::Discard => {
                self.drop_pkt(pkt, DropReason::UnprotectedPlaintext, Some(port))
            }
        }
    }

    /// A packet to one of our addresses: ESP, ping, or unsupported.
    fn local_input(
        &mut self,
        port: PortIdx,
        mut pkt: B,
        m: IpMeta,
        tx: &mut TxQueues<B>,
        now: Now,
    ) {
        match m.proto {
            ip_protocol::ESP => self.esp_input(port, pkt, m, Encap::None),
            ip_protocol::UDP if m.dport == Some(Encap::NAT_T_PORT) => {
                self.esp_input(port, pkt, m, Encap::udp_4500())
            }
            ip_protocol::ICMP | ip_protocol::ICMPV6 => {
                let answered = if m.v6 {
                    reply::icmpv6_echo_reply_in_place(pkt.data_mut()).is_ok()
                } else {
                    reply::icmpv4_echo_reply_in_place(pkt.data_mut()).is_ok()
                };
                if !answered {
                    return self.drop_pkt(pkt, DropReason::LocalUnsupported, Some(port));
                }
                self.counters.local += 1;
                self.counters.generated += 1;
                let origin = self.origin_of(port);
                self.originate(pkt, origin, tx, now);
            }
            _ => self.drop_pkt(pkt, DropReason::LocalUnsupported, Some(port)),
        }
    }

    /// ESP to one of our addresses: staged for its inbound SA.
    fn esp_input(&mut self, port: PortIdx, pkt: B, m: IpMeta, encap: Encap) {
        let loc = match espgw_esp::locate_esp(pkt.data(), encap) {
            Ok(l) => l,
            Err(r) => return self.drop_pkt(pkt, DropReason::from_esp(r), Some(port)),
        };
        // By SPI and our address the packet was sent to (RFC 4301 4.1).
        let found = self.tables.sad.inbound(loc.spi, m.dst).and_then(|i| {
            let (_, tunnel, _) = self.tables.inbound_sa(i)?;
            Some((i, self.tables.tunnel(tunnel)?.udp_encap))
        });
        let Some((slot, udp_encap)) = found else {
            return self.drop_pkt(pkt, DropReason::UnknownSpi, Some(port));
        };
        if udp_encap != matches!(encap, Encap::Udp { .. }) {
            return self.drop_pkt(pkt, DropReason::NotEsp, Some(port));
        }
        self.in_stage[slot.0 as usize].push(pkt, port);
    }

    /// Where a clear packet received on `port` came from.
    fn origin_of(&self, port: PortIdx) -> Origin {
        match self.net.ports.get(port).map(|p| p.side) {
            Some(Side::Protected) => Origin::Protected,
            _ => Origin::Unprotected,
        }
    }

    fn drop_pkt(&mut self, pkt: B, reason: DropReason, port: Option<PortIdx>) {
        self.counters.drop(reason, port);
        drop(pkt);
    }
}

/// True for an ICMPv6 neighbor solicitation or advertisement.
fn is_nd<B: PacketBuf>(pkt: &B, m: &IpMeta) -> bool {
    matches!(
        pkt.data().get(m.l4_offset),
        Some(&icmpv6::msg_type::NEIGHBOR_SOLICIT) | Some(&icmpv6::msg_type::NEIGHBOR_ADVERT)
    )
}

/// Multicast, broadcast or unspecified: never forwarded.
fn is_group(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_multicast() || a.is_broadcast() || a.is_unspecified(),
        IpAddr::V6(a) => a.is_multicast() || a.is_unspecified(),
    }
}

/// Replaces the packet's bytes with `bytes` (growing or shrinking it).
fn overwrite<B: PacketBuf>(pkt: &mut B, bytes: &[u8]) -> Result<(), espgw_wire::NoRoom> {
    let len = pkt.len();
    if bytes.len() > len {
        pkt.append(bytes.len() - len)?;
    } else {
        pkt.trim(len - bytes.len())?;
    }
    pkt.data_mut().copy_from_slice(bytes);
    Ok(())
}
