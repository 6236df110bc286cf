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

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use espgw_control::config::Side;
use espgw_esp::{Encap, Verdict};
use espgw_wire::{
    arp, ethernet, ethertype, icmpv6, ip_protocol, reply, ArpPacket, ArpRepr, EthernetFrame,
    EthernetRepr, Icmpv6Packet, Icmpv6Repr, Ipv6Packet, MacAddr, PacketBuf,
};

use crate::counters::WorkerCounters;
use crate::fragment::fragment_v4;
use crate::ip::{decrement_ttl, parse_v4, parse_v6, IpMeta};
use crate::neighbor::{Held, Neighbors, SharedNeighbors};
use crate::pool::BufPool;
use crate::reason::Drop;
use crate::route::NextHop;
use crate::spd::{Action, Flow};
use crate::tables::{inner_mtu, PortIdx, Tables};
use crate::tx::TxQueues;

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
}

impl<B: PacketBuf, P: BufPool<B>> Worker<B, P> {
    /// A worker over `tables`; `burst` sizes the staging areas (they grow
    /// if a burst is larger). `shared` is the neighbor board of all workers.
    pub fn new(
        id: usize,
        tables: Arc<Tables>,
        pool: P,
        burst: usize,
        shared: SharedNeighbors,
    ) -> Self {
        Worker {
            id,
            neighbors: Neighbors::new(&tables.static_neighbors, shared),
            counters: WorkerCounters::new(tables.ports.len(), tables.tunnel_ids()),
            out_stage: (0..tables.tunnels.len())
                .map(|_| Stage::new(burst))
                .collect(),
            in_stage: (0..tables.inbound.len())
                .map(|_| Stage::new(burst))
                .collect(),
            verdicts: Vec::with_capacity(burst),
            scratch: vec![0u8; icmpv6::MIN_MTU].into_boxed_slice(),
            last_tick_ns: 0,
            hop_cache: None,
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
            .resize_with(tables.tunnels.len(), || Stage::new(burst));
        self.in_stage
            .resize_with(tables.inbound.len(), || Stage::new(burst));
        self.tables = tables;
    }

    /// This worker's index.
    pub fn id(&self) -> usize {
        self.id
    }

    /// The counters so far (`held` is current).
    pub fn counters(&self) -> &WorkerCounters {
        &self.counters
    }

    /// The tables this worker reads.
    pub fn tables(&self) -> &Arc<Tables> {
        &self.tables
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
        self.counters.bursts += 1;
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
            self.drop_pkt(pkt, Drop::NeighborUnresolved, None);
        }
        self.counters.held = self.neighbors.held() as u64;
    }

    /// Drops every packet still waiting for a next hop (at shutdown).
    pub fn shutdown(&mut self) {
        for pkt in self.neighbors.drain_held() {
            self.drop_pkt(pkt, Drop::Shutdown, None);
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
            self.counters.drop(Drop::TxFull, None);
        }
    }

    /// Counts one loop iteration of the runtime, `busy` when it moved packets.
    #[inline]
    pub fn count_poll(&mut self, busy: bool) {
        self.counters.polls += 1;
        self.counters.busy_polls += u64::from(busy);
    }

    /// Pipeline mode: counts frames handed to the I/O lcore for `port`
    /// (`handed`) and those the ring refused (freed by the caller). The
    /// I/O lcore counts what the device sends.
    pub fn count_handoff(&mut self, handed: u64, refused: u64) {
        self.counters.tx += handed;
        for _ in 0..refused {
            self.counters.drop(Drop::RingFull, None);
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

        let eth = match EthernetFrame::new_checked(pkt.data()) {
            Ok(f) => EthernetRepr::parse(&f),
            Err(_) => return self.drop_pkt(pkt, Drop::Malformed, Some(port)),
        };
        if eth.vlan_tci.is_some() {
            return self.drop_pkt(pkt, Drop::Vlan, Some(port));
        }
        let group = eth.dst_addr[0] & 1 != 0;
        if !group && eth.dst_addr != self.tables.ports[port].mac {
            return self.drop_pkt(pkt, Drop::NotOurMac, Some(port));
        }
        match eth.ethertype {
            ethertype::ARP => self.arp_input(port, pkt, tx),
            ethertype::IPV4 => {
                if pkt.adj(ethernet::HEADER_LEN).is_err() {
                    return self.drop_pkt(pkt, Drop::Malformed, Some(port));
                }
                match parse_v4(&mut pkt) {
                    Ok(m) => self.ip_input(port, pkt, m, group, tx, now),
                    Err(r) => self.drop_pkt(pkt, r, Some(port)),
                }
            }
            ethertype::IPV6 => {
                if pkt.adj(ethernet::HEADER_LEN).is_err() {
                    return self.drop_pkt(pkt, Drop::Malformed, Some(port));
                }
                match parse_v6(&mut pkt) {
                    Ok(m) if m.proto == ip_protocol::ICMPV6 && is_nd(&pkt, &m) => {
                        self.nd_input(port, pkt, m, eth.src_addr, tx)
                    }
                    Ok(m) => self.ip_input(port, pkt, m, group, tx, now),
                    Err(r) => self.drop_pkt(pkt, r, Some(port)),
                }
            }
            _ => self.drop_pkt(pkt, Drop::UnsupportedEthertype, Some(port)),
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
        if self.tables.is_local(m.dst) {
            return self.local_input(port, pkt, m, tx, now);
        }
        if group || is_group(m.dst) || is_group(m.src) {
            return self.drop_pkt(pkt, Drop::Multicast, Some(port));
        }
        if m.ttl <= 1 {
            return self.time_exceeded(port, pkt, m, tx, now);
        }
        match self.tables.ports[port].side {
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
        let flow = Flow {
            local: m.src,
            remote: m.dst,
            proto: m.proto,
            local_port: m.sport,
            remote_port: m.dport,
        };
        let d = self.tables.spd.lookup(&flow);
        match d.action {
            Action::Protect(t) => {
                let tunnel = &self.tables.tunnels[t];
                let mtu = self.tables.ports[tunnel.port].mtu;
                let len = pkt.len();
                let (id, fits, inner) = match tunnel.out.as_deref() {
                    Some(out) => (
                        tunnel.id,
                        len + out.overhead(len) <= mtu,
                        inner_mtu(out, mtu),
                    ),
                    // Hard-expired and not replaced: never in the clear.
                    None => return self.drop_pkt(pkt, Drop::SaExpired, Some(port)),
                };
                if !fits {
                    let inner_mtu = inner;
                    self.counters.tunnel(id).out_mtu_exceeded += 1;
                    if m.dont_frag {
                        return self.too_big(port, pkt, m, inner_mtu, tx, now);
                    }
                    // IPv4 without DF: fragment, then encrypt each fragment.
                    decrement_ttl(&mut pkt, m.v6);
                    let Some(rest) = fragment_v4(&mut pkt, inner_mtu, &self.pool) else {
                        return self.drop_pkt(pkt, Drop::FragmentationNeeded, Some(port));
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
                    Drop::NoPolicy
                } else {
                    Drop::PolicyDiscard
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
        let flow = Flow {
            local: m.dst,
            remote: m.src,
            proto: m.proto,
            local_port: m.dport,
            remote_port: m.sport,
        };
        match self.tables.spd.lookup(&flow).action {
            Action::Bypass => {
                decrement_ttl(&mut pkt, m.v6);
                self.route_out(pkt, m.dst, Egress::Bypass, Some(port), tx, now);
            }
            Action::Protect(_) | Action::Discard => {
                self.drop_pkt(pkt, Drop::UnprotectedPlaintext, Some(port))
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
                    return self.drop_pkt(pkt, Drop::LocalUnsupported, Some(port));
                }
                self.counters.local += 1;
                self.counters.generated += 1;
                self.originate(pkt, tx, now);
            }
            _ => self.drop_pkt(pkt, Drop::LocalUnsupported, Some(port)),
        }
    }

    /// ESP to one of our addresses: staged for its inbound SA.
    fn esp_input(&mut self, port: PortIdx, pkt: B, m: IpMeta, encap: Encap) {
        let loc = match espgw_esp::locate_esp(pkt.data(), encap) {
            Ok(l) => l,
            Err(r) => return self.drop_pkt(pkt, Drop::from_esp(r), Some(port)),
        };
        let Some(slot) = self.tables.inbound_by_spi(loc.spi) else {
            return self.drop_pkt(pkt, Drop::UnknownSpi, Some(port));
        };
        let tunnel = &self.tables.tunnels[self.tables.inbound[slot].tunnel];
        if tunnel.local != m.dst {
            return self.drop_pkt(pkt, Drop::UnknownSpi, Some(port));
        }
        if tunnel.udp_encap != matches!(encap, Encap::Udp { .. }) {
            return self.drop_pkt(pkt, Drop::NotEsp, Some(port));
        }
        self.in_stage[slot].push(pkt, port);
    }

    // ---------------------------------------------------------------
    // ARP and neighbor discovery
    // ---------------------------------------------------------------

    fn arp_input(&mut self, port: PortIdx, mut pkt: B, tx: &mut TxQueues<B>) {
        let parsed = EthernetFrame::new_checked(pkt.data()).ok().and_then(|f| {
            ArpPacket::new_checked(f.payload())
                .ok()
                .map(|a| ArpRepr::parse(&a))
        });
        let a = match parsed {
            Some(Ok(a)) => a,
            Some(Err(_)) => return self.drop_pkt(pkt, Drop::ArpIgnored, Some(port)),
            None => return self.drop_pkt(pkt, Drop::Malformed, Some(port)),
        };
        let p = &self.tables.ports[port];
        let (our_mac, for_us) = (p.mac, p.owns(a.target_ip.into()));
        let sender: IpAddr = a.sender_ip.into();
        // RFC 826: update a known sender, add one that talks to us. Only
        // senders on our subnets: anything else is not a next hop of ours.
        let valid_sender =
            !a.sender_ip.is_unspecified() && p.on_link_v4(a.sender_ip) && a.sender_mac[0] & 1 == 0;
        if valid_sender && (for_us || self.neighbors.knows(port, sender)) {
            self.learned(port, sender, a.sender_mac, tx);
        }
        if !for_us {
            return self.drop_pkt(pkt, Drop::ArpIgnored, Some(port));
        }
        match a.operation {
            arp::operation::REQUEST => {
                if reply::arp_reply_in_place(pkt.data_mut(), a.target_ip, our_mac).is_err() {
                    return self.drop_pkt(pkt, Drop::ArpIgnored, Some(port));
                }
                self.counters.local += 1;
                self.counters.generated += 1;
                tx.push(port, pkt);
            }
            _ => {
                // A reply to us: learned above.
                self.counters.local += 1;
                drop(pkt);
            }
        }
    }

    fn nd_input(
        &mut self,
        port: PortIdx,
        mut pkt: B,
        m: IpMeta,
        eth_src: MacAddr,
        tx: &mut TxQueues<B>,
    ) {
        let (IpAddr::V6(src), IpAddr::V6(dst)) = (m.src, m.dst) else {
            return self.drop_pkt(pkt, Drop::NdIgnored, Some(port));
        };
        let repr = Ipv6Packet::new_checked(pkt.data())
            .ok()
            .filter(|ip| ip.hop_limit() == 255)
            .and_then(|ip| {
                let icmp = Icmpv6Packet::new_checked(ip.payload()).ok()?;
                match Icmpv6Repr::parse(&icmp, src, dst).ok()? {
                    Icmpv6Repr::NeighborSolicit {
                        target_addr,
                        source_lladdr,
                    } => Some((true, target_addr, source_lladdr)),
                    Icmpv6Repr::NeighborAdvert {
                        target_addr,
                        target_lladdr,
                        ..
                    } => Some((false, target_addr, target_lladdr)),
                    _ => None,
                }
            });
        let Some((solicit, target, lladdr)) = repr else {
            return self.drop_pkt(pkt, Drop::NdIgnored, Some(port));
        };
        let p = &self.tables.ports[port];
        let our_mac = p.mac;
        let for_us = p.owns(target.into());
        if !solicit {
            // An advertisement: learn it if we asked or know it.
            let mac = lladdr.unwrap_or(eth_src);
            if self.neighbors.knows(port, target.into()) || for_us {
                self.learned(port, target.into(), mac, tx);
                self.counters.local += 1;
                return drop(pkt);
            }
            return self.drop_pkt(pkt, Drop::NdIgnored, Some(port));
        }
        if !for_us {
            return self.drop_pkt(pkt, Drop::NdIgnored, Some(port));
        }
        let dad = src.is_unspecified();
        if let (false, Some(mac)) = (dad, lladdr) {
            self.learned(port, src.into(), mac, tx);
        }
        let n = match reply::neighbor_advert_reply(pkt.data(), target, our_mac, &mut self.scratch) {
            Ok(n) => n,
            Err(_) => return self.drop_pkt(pkt, Drop::NdIgnored, Some(port)),
        };
        if overwrite(&mut pkt, &self.scratch[..n]).is_err() {
            return self.drop_pkt(pkt, Drop::NoRoom, Some(port));
        }
        self.counters.local += 1;
        self.counters.generated += 1;
        let dst_mac = if dad {
            ALL_NODES_MAC
        } else {
            lladdr.unwrap_or(eth_src)
        };
        self.send_frame(port, dst_mac, pkt, None, tx);
    }

    /// Records a neighbor and sends what waited for it.
    fn learned(&mut self, port: PortIdx, ip: IpAddr, mac: MacAddr, tx: &mut TxQueues<B>) {
        let released = self.neighbors.learn(port, ip, mac);
        self.counters.held = self.neighbors.held() as u64;
        for pkt in released {
            self.send_frame(port, mac, pkt, None, tx);
        }
    }

    /// Sends an ARP request (IPv4) or neighbor solicitation (IPv6) for `ip` on `port`.
    fn solicit(&mut self, port: PortIdx, ip: IpAddr, tx: &mut TxQueues<B>) {
        let Some(mut buf) = self.pool.alloc() else {
            self.counters.alloc_failures += 1;
            return;
        };
        let p = &self.tables.ports[port];
        let built = match ip {
            IpAddr::V4(target) => {
                let src = p.first_v4().unwrap_or(Ipv4Addr::UNSPECIFIED);
                let len = ethernet::HEADER_LEN + arp::PACKET_LEN;
                buf.append(len.max(60)).ok().map(|_| {
                    let d = buf.data_mut();
                    d.fill(0);
                    let eth = EthernetRepr {
                        src_addr: p.mac,
                        dst_addr: ethernet::BROADCAST_MAC,
                        vlan_tci: None,
                        ethertype: ethertype::ARP,
                    };
                    let h = eth.emit(d).unwrap_or(0);
                    ArpRepr::request(p.mac, src, target)
                        .emit(&mut d[h..])
                        .is_ok()
                })
            }
            IpAddr::V6(target) => p.first_v6().and_then(|src| {
                let n = reply::emit_neighbor_solicit(src, target, p.mac, &mut self.scratch).ok()?;
                buf.append(ethernet::HEADER_LEN + n).ok()?;
                let eth = EthernetRepr {
                    src_addr: p.mac,
                    dst_addr: icmpv6::multicast_mac(icmpv6::solicited_node_multicast(target)),
                    vlan_tci: None,
                    ethertype: ethertype::IPV6,
                };
                let d = buf.data_mut();
                let h = eth.emit(d).ok()?;
                d[h..].copy_from_slice(&self.scratch[..n]);
                Some(true)
            }),
        };
        if built == Some(true) {
            self.counters.generated += 1;
            tx.push(port, buf);
        } else {
            self.counters.alloc_failures += 1;
        }
    }

    // ---------------------------------------------------------------
    // ICMP errors
    // ---------------------------------------------------------------

    fn time_exceeded(&mut self, port: PortIdx, pkt: B, m: IpMeta, tx: &mut TxQueues<B>, now: Now) {
        self.icmp_error(port, port, pkt, m, Drop::TtlExceeded, 0, tx, now);
    }

    fn too_big(
        &mut self,
        port: PortIdx,
        pkt: B,
        m: IpMeta,
        mtu: usize,
        tx: &mut TxQueues<B>,
        now: Now,
    ) {
        self.icmp_error(port, port, pkt, m, Drop::MtuExceeded, mtu, tx, now);
    }

    /// Drops `pkt` for `reason` and, where RFC 1812 / 4443 allow, sends
    /// the matching ICMP error back to its source, built in the same buffer.
    /// The error's source address is that of `src_port`: the port facing
    /// the packet's sender, so that an error about decrypted traffic goes
    /// back through the tunnel from an address inside its selectors.
    #[allow(clippy::too_many_arguments)]
    fn icmp_error(
        &mut self,
        port: PortIdx,
        src_port: PortIdx,
        mut pkt: B,
        m: IpMeta,
        reason: Drop,
        mtu: usize,
        tx: &mut TxQueues<B>,
        now: Now,
    ) {
        self.counters.drop(reason, Some(port));
        let p = &self.tables.ports[src_port];
        let scratch = &mut self.scratch[..];
        let built = match (m.v6, reason) {
            (false, Drop::TtlExceeded) => p
                .first_v4()
                .map(|src| reply::emit_icmpv4_time_exceeded(pkt.data(), src, scratch)),
            (false, _) => p.first_v4().map(|src| {
                let mtu = mtu.min(usize::from(u16::MAX)) as u16;
                reply::emit_icmpv4_frag_needed(pkt.data(), mtu, src, scratch)
            }),
            (true, Drop::TtlExceeded) => p
                .first_v6()
                .map(|src| reply::emit_icmpv6_time_exceeded(pkt.data(), src, scratch)),
            (true, _) => p.first_v6().map(|src| {
                reply::emit_icmpv6_packet_too_big(
                    pkt.data(),
                    mtu.max(icmpv6::MIN_MTU) as u32,
                    src,
                    scratch,
                )
            }),
        };
        let Some(Ok(n)) = built else {
            return;
        };
        if overwrite(&mut pkt, &self.scratch[..n]).is_err() {
            return;
        }
        self.counters.generated += 1;
        self.originate(pkt, tx, now);
    }

    /// Sends an IP packet the gateway made (echo reply, ICMP error): into
    /// a tunnel when the SPD protects its addresses (so the far side's
    /// hosts can ping and traceroute us through the tunnel), else routed
    /// in the clear like any of our own packets.
    fn originate(&mut self, mut pkt: B, tx: &mut TxQueues<B>, now: Now) {
        let v6 = pkt.data().first().is_some_and(|b| b >> 4 == 6);
        let m = if v6 {
            parse_v6(&mut pkt)
        } else {
            parse_v4(&mut pkt)
        };
        let Ok(m) = m else {
            return self.drop_pkt(pkt, Drop::Malformed, None);
        };
        let flow = Flow {
            local: m.src,
            remote: m.dst,
            proto: m.proto,
            local_port: m.sport,
            remote_port: m.dport,
        };
        if let Action::Protect(t) = self.tables.spd.lookup(&flow).action {
            let tunnel = &self.tables.tunnels[t];
            let len = pkt.len();
            let Some(out) = tunnel.out.as_deref() else {
                return self.drop_pkt(pkt, Drop::SaExpired, None);
            };
            if len + out.overhead(len) > self.tables.ports[tunnel.port].mtu {
                return self.drop_pkt(pkt, Drop::MtuExceeded, None);
            }
            return self.out_stage[t].push(pkt, ORIGINATED);
        }
        self.route_out(pkt, m.dst, Egress::Trusted, None, tx, now);
    }

    // ---------------------------------------------------------------
    // Stages 2 and 3: ESP per SA group
    // ---------------------------------------------------------------

    fn run_outbound(&mut self, tx: &mut TxQueues<B>, now: Now) {
        for t in 0..self.out_stage.len() {
            if self.out_stage[t].pkts.is_empty() {
                continue;
            }
            let mut stage = std::mem::replace(&mut self.out_stage[t], Stage::new(0));
            let tables = Arc::clone(&self.tables);
            let tunnel = &tables.tunnels[t];
            self.verdicts.clear();
            match tunnel.out.as_deref() {
                Some(out) => {
                    self.verdicts.resize(stage.pkts.len(), Verdict::default());
                    out.encap_burst(&mut stage.pkts, &mut self.verdicts, now.secs());
                }
                // Staged only with an SA, and a snapshot does not change
                // within a burst; dropped rather than trusted.
                None => self.verdicts.resize(
                    stage.pkts.len(),
                    Verdict::Drop(espgw_esp::DropReason::SaExpired),
                ),
            }
            // Every packet of the group goes to the same peer: one route
            // and neighbor lookup for all of them.
            let hop = tables.routes.lookup(tunnel.remote);
            let resolved = hop.and_then(|h| {
                self.neighbors
                    .lookup(h.port, h.addr)
                    .map(|mac| (h.port, mac))
            });
            for (i, (pkt, port)) in stage.pkts.drain(..).zip(stage.ports.drain(..)).enumerate() {
                let port = (port != ORIGINATED).then_some(port);
                match (self.verdicts[i], resolved) {
                    (Verdict::Forward, Some((out, mac))) if pkt.len() <= tables.ports[out].mtu => {
                        self.send_frame(out, mac, pkt, port, tx)
                    }
                    (Verdict::Forward, _) => {
                        self.route_out(pkt, tunnel.remote, Egress::Trusted, port, tx, now)
                    }
                    (Verdict::Drop(r), _) => self.drop_pkt(pkt, Drop::from_esp(r), port),
                }
            }
            self.out_stage[t] = stage;
        }
    }

    fn run_inbound(&mut self, tx: &mut TxQueues<B>, now: Now) {
        for t in 0..self.in_stage.len() {
            if self.in_stage[t].pkts.is_empty() {
                continue;
            }
            let mut stage = std::mem::replace(&mut self.in_stage[t], Stage::new(0));
            let tables = Arc::clone(&self.tables);
            let slot = &tables.inbound[t];
            let tunnel = &tables.tunnels[slot.tunnel];
            self.verdicts.clear();
            self.verdicts.resize(stage.pkts.len(), Verdict::default());
            {
                // One lock per SA group per burst; uncontended with one worker.
                let mut sa = slot.sa.lock().unwrap_or_else(|e| e.into_inner());
                sa.decap_burst(&mut stage.pkts, &mut self.verdicts, now.secs());
            }
            for (i, (mut pkt, port)) in stage.pkts.drain(..).zip(stage.ports.drain(..)).enumerate()
            {
                if let Verdict::Drop(r) = self.verdicts[i] {
                    self.drop_pkt(pkt, Drop::from_esp(r), Some(port));
                    continue;
                }
                let v6 = pkt.data().first().is_some_and(|b| b >> 4 == 6);
                let m = if v6 {
                    parse_v6(&mut pkt)
                } else {
                    parse_v4(&mut pkt)
                };
                let m = match m {
                    Ok(m) => m,
                    Err(r) => {
                        self.drop_pkt(pkt, r, Some(port));
                        continue;
                    }
                };
                if !tunnel.inbound_matches(m.src, m.dst) {
                    self.counters.tunnel(tunnel.id).in_policy_mismatch += 1;
                    self.drop_pkt(pkt, Drop::PolicyMismatch, Some(port));
                    continue;
                }
                if self.tables.is_local(m.dst) {
                    // A ping through the tunnel to one of our protected
                    // addresses: answered, back through the tunnel.
                    let answered = m.proto == ip_protocol::ICMP
                        && reply::icmpv4_echo_reply_in_place(pkt.data_mut()).is_ok()
                        || m.proto == ip_protocol::ICMPV6
                            && reply::icmpv6_echo_reply_in_place(pkt.data_mut()).is_ok();
                    if !answered {
                        self.drop_pkt(pkt, Drop::LocalUnsupported, Some(port));
                        continue;
                    }
                    self.counters.local += 1;
                    self.counters.generated += 1;
                    self.originate(pkt, tx, now);
                    continue;
                }
                if m.ttl <= 1 {
                    // Time exceeded from the port facing the destination,
                    // back through the tunnel (traceroute across it).
                    let src_port = self.tables.routes.lookup(m.dst).map_or(port, |h| h.port);
                    self.icmp_error(port, src_port, pkt, m, Drop::TtlExceeded, 0, tx, now);
                    continue;
                }
                decrement_ttl(&mut pkt, m.v6);
                self.route_out(pkt, m.dst, Egress::ProtectedOnly, Some(port), tx, now);
            }
            self.in_stage[t] = stage;
        }
    }

    // ---------------------------------------------------------------
    // Egress: route, neighbor, Ethernet, TX
    // ---------------------------------------------------------------

    /// Sends the IP packet `pkt` (no L2 header) towards `dst`.
    fn route_out(
        &mut self,
        pkt: B,
        dst: IpAddr,
        egress: Egress,
        in_port: Option<PortIdx>,
        tx: &mut TxQueues<B>,
        now: Now,
    ) {
        let generation = self.neighbors.generation();
        let cached = self
            .hop_cache
            .filter(|c| c.dst == dst && c.generation == generation);
        let (hop, mac) = match cached {
            Some(c) => (c.hop, Some(c.mac)),
            None => {
                let Some(hop) = self.tables.routes.lookup(dst) else {
                    return self.drop_pkt(pkt, Drop::NoRoute, in_port);
                };
                let mac = self.neighbors.lookup(hop.port, hop.addr);
                if let Some(mac) = mac {
                    self.hop_cache = Some(HopCache {
                        dst,
                        hop,
                        mac,
                        generation,
                    });
                }
                (hop, mac)
            }
        };
        let out = &self.tables.ports[hop.port];
        if egress == Egress::ProtectedOnly && out.side == Side::Unprotected {
            return self.drop_pkt(pkt, Drop::PlaintextBlocked, in_port);
        }
        if pkt.len() > out.mtu {
            // Only decrypted or bypassed packets can get here oversize.
            return self.drop_pkt(pkt, Drop::MtuExceeded, in_port);
        }
        if let Some(mac) = mac {
            return self.send_frame(hop.port, mac, pkt, in_port, tx);
        }
        match self.neighbors.hold(hop.port, hop.addr, pkt, now.ns) {
            Held::Queued { request } => {
                self.counters.held = self.neighbors.held() as u64;
                if request {
                    self.solicit(hop.port, hop.addr, tx);
                }
            }
            Held::Full(pkt) => self.drop_pkt(pkt, Drop::NeighborQueueFull, in_port),
        }
    }

    /// Prepends the Ethernet header to the IP packet `pkt` and queues it.
    /// (Frames already carrying one, like NA answers built from a
    /// stripped packet, come here stripped too.)
    fn send_frame(
        &mut self,
        port: PortIdx,
        dst_mac: MacAddr,
        mut pkt: B,
        in_port: Option<PortIdx>,
        tx: &mut TxQueues<B>,
    ) {
        let ethertype = match pkt.data().first().map(|b| b >> 4) {
            Some(4) => ethertype::IPV4,
            Some(6) => ethertype::IPV6,
            _ => return self.drop_pkt(pkt, Drop::Malformed, in_port),
        };
        if pkt.prepend(ethernet::HEADER_LEN).is_err() {
            return self.drop_pkt(pkt, Drop::NoRoom, in_port);
        }
        let eth = EthernetRepr {
            src_addr: self.tables.ports[port].mac,
            dst_addr: dst_mac,
            vlan_tci: None,
            ethertype,
        };
        let _ = eth.emit(pkt.data_mut());
        tx.push(port, pkt);
    }

    fn drop_pkt(&mut self, pkt: B, reason: Drop, port: Option<PortIdx>) {
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
