//! The packet-processing core of one worker, generic over the packet buffer
//! (DPDK mbufs in production, `VecBuf` in tests) and free of DPDK.
//!
//! A packet goes through named stages, each a type with its own state and
//! its own input; follow one from RX to TX in this order:
//!
//! 1. [`Classify`] (classify.rs), per packet as it arrives: Ethernet
//!    header, ARP / ND handed to [`Link`], IP parsed once
//!    ([`IpMeta`](crate::ip::IpMeta); IPv4 as a
//!    [`V4Meta`](crate::ip::V4Meta), the IPv4 fast path on integers);
//!    to one of our addresses: ping answered, ESP looked up in the SAD and
//!    staged for its inbound SA; in transit: TTL, SPD (through the worker's
//!    [`FlowCache`](crate::flow_cache::FlowCache)), PMTU, then staged for
//!    its tunnel or routed in the
//!    clear if bypassed.
//! 2. [`Link`] (link.rs): ARP and ND answered in place, neighbors learned,
//!    requests for unresolved next hops.
//! 3. [`EspOut`] and [`EspIn`] (esp.rs), per SA group once the burst is
//!    classified (VPP-style: one engine call per SA per burst):
//!    `encap_burst`, or `decap_burst` (no lock; with the decrypt fan-out
//!    the group is split over the workers, spread.rs), the traffic
//!    selector check and TTL.
//! 4. [`Icmp`] (icmp.rs): ICMP errors (time exceeded, too big) and what
//!    the gateway originates (echo replies), sent through the SPD.
//! 5. [`Egress`] (egress.rs): route, neighbor, Ethernet header, TX queue.
//! 6. [`Punt`] (punt.rs): IKE (UDP 500, non-ESP UDP 4500) for our
//!    addresses on an unprotected port copied to the control thread's punt
//!    ring; what the control thread queues built into IP/UDP and routed
//!    (once per poll, from [`Worker::tick`]).
//!
//! What every stage reads and counts (the network, the control plane's
//! snapshot, the neighbor cache, the counters) is the worker's [`Core`].
//! Every packet ends in exactly one place: a TX queue, a counted drop, the
//! gateway itself (`local`), or a neighbor wait queue (`held`).

use std::net::IpAddr;
use std::sync::Arc;

use espgw_control::config::Side;
use espgw_control::ike::PuntRings;
use espgw_control::tables::Tables;
use espgw_wire::{icmpv6, PacketBuf};

use crate::counters::WorkerCounters;
use crate::neighbor::{Neighbors, SharedNeighbors};
use crate::network::Network;
use crate::pool::BufPool;
use crate::ports::PortIdx;
use crate::reason::DropReason;
use crate::tx::TxQueues;

mod acquire;
mod classify;
mod egress;
mod esp;
mod icmp;
mod link;
mod mss;
mod punt;
mod spread;

use classify::Classify;
use egress::Egress;
use esp::{EspIn, EspOut};
use icmp::Icmp;
use link::Link;
use punt::Punt;
pub use spread::{SpreadRings, SpreadWhen};
/// The decrypt fan-out's bounds (for tests and docs).
pub mod spread_consts {
    pub use super::spread::{
        HANDOFF_DEPTH, HANDOFF_JOBS, INBOX_DEPTH, LATE_SEND_MAX_NS, MAX_JOBS_PER_WORKER,
        MAX_WAIT_NS, MIN_PART, STEAL_AFTER_NS,
    };
}
use spread::Spread;

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

/// What a packet is allowed to do on the way out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EgressPolicy {
    /// Plaintext the SPD allowed in the clear: any port.
    Bypass,
    /// ESP, or what the gateway itself sends: any port.
    Trusted,
    /// Decrypted traffic: never out of an unprotected port.
    ProtectedOnly,
}

/// Where the packet the gateway answers (with an ICMP error or an echo
/// reply) came from: the answer quotes or echoes its bytes, so it may
/// leave only as that packet could have (see [`Icmp::originate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// In the clear on an unprotected port (or the gateway's own packet).
    Unprotected,
    /// In the clear on a protected port.
    Protected,
    /// Out of a tunnel (decrypted).
    Decrypted,
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

/// What every stage reads and counts: the worker's view of the gateway.
struct Core<B: PacketBuf, P: BufPool<B>> {
    /// Ports, routes, static neighbors: fixed for the run.
    net: Arc<Network>,
    /// The control plane's current snapshot (SPD, SAD, tunnels).
    tables: Arc<Tables>,
    pool: P,
    neighbors: Neighbors<B>,
    counters: WorkerCounters,
    /// Where ICMP errors and ND answers are built before they are copied
    /// over the packet they answer.
    scratch: Box<[u8]>,
    /// The time of the burst (or tick) being processed.
    now: Now,
    /// The IKE punt rings, when an IKE driver runs ([`Punt`]).
    punt: Option<Arc<PuntRings>>,
    /// This worker's index: which of a tunnel's RFC 9611 per-CPU
    /// outbound SAs it encrypts with (`Tables::outbound_sa_for`).
    worker: usize,
}

impl<B: PacketBuf, P: BufPool<B>> Core<B, P> {
    fn drop_pkt(&mut self, pkt: B, reason: DropReason, port: Option<PortIdx>) {
        self.counters.drop(reason, port);
        drop(pkt);
    }

    /// Where a clear packet received on `port` came from.
    fn origin_of(&self, port: PortIdx) -> Origin {
        match self.net.ports.get(port).map(|p| p.side) {
            Some(Side::Protected) => Origin::Protected,
            _ => Origin::Unprotected,
        }
    }
}

/// One data-plane worker: its [`Core`] and its stages.
pub struct Worker<B: PacketBuf, P: BufPool<B>> {
    id: usize,
    core: Core<B, P>,
    classify: Classify,
    esp_out: EspOut<B>,
    esp_in: EspIn<B>,
    icmp: Icmp,
    egress: Egress,
    last_tick_ns: u64,
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
            classify: Classify::new(),
            esp_out: EspOut::new(&tables, burst),
            esp_in: EspIn::new(&tables, burst),
            icmp: Icmp::new(),
            egress: Egress::new(),
            last_tick_ns: 0,
            #[cfg(any(test, debug_assertions))]
            panic_after_bursts: None,
            core: Core {
                neighbors: Neighbors::new(&net.static_neighbors, shared),
                counters: WorkerCounters::new(net.ports.len(), tables.tunnel_ids()),
                scratch: vec![0u8; icmpv6::MIN_MTU].into_boxed_slice(),
                now: Now::default(),
                punt: None,
                worker: id,
                net,
                tables,
                pool,
            },
        }
    }

    /// Switches to a new snapshot of the tables (call between bursts,
    /// when the control plane published one). Ports and static neighbors
    /// never change during a run; tunnels and SAs may.
    pub fn set_tables(&mut self, tables: Arc<Tables>) {
        if Arc::ptr_eq(&self.core.tables, &tables) {
            return;
        }
        self.esp_out.resize(&tables);
        self.esp_in.resize(&tables);
        self.classify.forget();
        if let Some(spread) = &mut self.esp_in.spread {
            // SAD indexes may name other SAs now; the fan-out's reorder
            // stages are kept by SA and stay (worker/spread.rs).
            spread.new_snapshot();
        }
        self.core.tables = tables;
    }

    /// Hands IKE for our addresses on unprotected ports to the control
    /// thread through `rings`, and sends what it queues there (the punt
    /// stage, worker/punt.rs). Without it, UDP 500 is `local_unsupported`
    /// and all of UDP 4500 goes to the ESP path.
    pub fn set_punt(&mut self, rings: Arc<PuntRings>) {
        self.core.punt = Some(rings);
    }

    /// Spreads the decryption of the SAs this worker receives over every
    /// worker of `rings` (the decrypt fan-out, worker/spread.rs), and
    /// decrypts their parts for the others. Every worker of the run gets
    /// the same rings; this worker's index must be below
    /// `rings.workers()`. Without it (or with one worker), a worker
    /// decrypts what it receives itself.
    pub fn set_spread(&mut self, rings: Arc<SpreadRings<B>>) {
        if rings.workers() > 1 && self.id < rings.workers() {
            let burst = self.esp_in.burst();
            let spread = Spread::new(self.id, rings, burst);
            // Off from the start where the probe said so (until a trial).
            self.core.counters.spread_off = u64::from(spread.trial_off());
            self.esp_in.spread = Some(spread);
        }
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

    /// Groups of per-CPU SAs this worker handed to other workers that are
    /// not back yet (the handoff; 0 without the fan-out).
    pub fn handed_off(&self) -> u64 {
        self.esp_in.spread.as_ref().map_or(0, |s| s.handed_total())
    }

    /// The counters so far (`held` is current).
    pub fn counters(&self) -> &WorkerCounters {
        &self.core.counters
    }

    /// The snapshot this worker reads.
    pub fn tables(&self) -> &Arc<Tables> {
        &self.core.tables
    }

    /// The network this worker runs on.
    pub fn net(&self) -> &Arc<Network> {
        &self.core.net
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
            .is_some_and(|n| self.core.counters.bursts >= n)
        {
            panic!("injected panic (test hook) in worker {}", self.id);
        }
        let core = &mut self.core;
        core.now = now;
        core.counters.bursts += 1;
        // The receive counters once per burst, not per packet: three
        // read-modify-writes (and a port bounds check) fewer per packet.
        let mut bytes = 0u64;
        for pkt in pkts.iter() {
            pkt.prefetch();
            bytes += pkt.len() as u64;
        }
        let n = pkts.len() as u64;
        if let Some(spread) = &mut self.esp_in.spread {
            spread.received(pkts.len());
        }
        core.counters.rx += n;
        let pc = &mut core.counters.ports[port];
        pc.rx_packets += n;
        pc.rx_bytes += bytes;
        // 1-2: classify every packet (ARP/ND answered on the way), staging
        // ESP work per SA.
        for pkt in pkts.drain(..) {
            self.classify.input(
                core,
                port,
                pkt,
                &mut self.esp_in,
                &mut self.esp_out,
                &mut self.icmp,
                &mut self.egress,
                tx,
            );
        }
        // 3-5: one engine call per SA group, then out.
        self.esp_out.run(core, &mut self.icmp, &mut self.egress, tx);
        self.esp_in.run(
            core,
            &mut self.esp_out,
            &mut self.icmp,
            &mut self.egress,
            tx,
        );
        // Answers to traffic that came through a tunnel go back through it.
        if self.esp_out.has_staged() {
            self.esp_out.run(core, &mut self.icmp, &mut self.egress, tx);
        }
    }

    /// Periodic work (call once per loop): the decrypt fan-out's work
    /// (others' jobs, results back, packets released in order), neighbor
    /// retries and expiries. Returns the packets the fan-out moved (work
    /// of this poll for the idle back-off).
    pub fn tick(&mut self, tx: &mut TxQueues<B>, now: Now) -> usize {
        let mut work = 0;
        if let Some(spread) = &mut self.esp_in.spread {
            let c = &mut self.core.counters;
            let progress = crate::spread_trial::Progress {
                rx: c.rx,
                late: c.drops.get(DropReason::ReorderLate),
                eligible: c.spread_out + c.spread_kept + c.spread_solo,
                spread: c.spread_out,
            };
            if let Some(o) = spread.observe_trial(now.ns, progress) {
                c.spread_trials[o.verdict.index()] += 1;
                c.spread_trial_pps = [o.with_pps as u64, o.without_pps as u64];
                c.spread_off = u64::from(spread.trial_off());
            }
            spread.publish_busy();
            let core = &mut self.core;
            core.now = now;
            work = self.esp_in.poll_spread(
                core,
                &mut self.esp_out,
                &mut self.icmp,
                &mut self.egress,
                tx,
            );
            if self.esp_out.has_staged() {
                self.esp_out.run(core, &mut self.icmp, &mut self.egress, tx);
            }
        }
        if self.core.punt.is_some() {
            self.core.now = now;
            Punt::transmit(
                &mut self.core,
                &mut self.icmp,
                &mut self.esp_out,
                &mut self.egress,
                tx,
            );
        }
        if now.ns.saturating_sub(self.last_tick_ns) < TICK_NS {
            return work;
        }
        self.last_tick_ns = now.ns;
        let core = &mut self.core;
        core.now = now;
        let t = core.neighbors.tick(now.ns);
        for ((port, _), mac, held) in t.resolved {
            for pkt in held {
                Egress::send_frame(core, port, mac, pkt, None, tx);
            }
        }
        for (port, ip) in t.retry {
            Link::solicit(core, port, ip, tx);
        }
        for pkt in t.expired {
            core.drop_pkt(pkt, DropReason::NeighborUnresolved, None);
        }
        core.counters.held = core.neighbors.held() as u64;
        work
    }

    /// Drops every packet still waiting for a next hop (at shutdown), what
    /// waits in the decrypt fan-out's reorder stages, and the per-CPU SA
    /// groups handed off and not started: those of every worker's ring,
    /// since a worker that stopped first takes no more from its own.
    pub fn shutdown(&mut self) {
        if let Some(spread) = &mut self.esp_in.spread {
            spread.return_finished();
            for w in 0..spread.workers() {
                while let Some(mut job) = spread.take_handoff_of(w) {
                    self.core.counters.sa_handoff_in += job.pkts.len() as u64;
                    for (pkt, port) in job.pkts.drain(..).zip(job.ports.drain(..)) {
                        self.core.drop_pkt(pkt, DropReason::Shutdown, Some(port));
                    }
                    spread.give_back(job);
                }
            }
            for mut job in spread.drain() {
                self.core.counters.spreading -= job.pkts.len() as u64;
                for (pkt, port) in job.pkts.drain(..).zip(job.ports.drain(..)) {
                    self.core.drop_pkt(pkt, DropReason::Shutdown, Some(port));
                }
            }
        }
        for pkt in self.core.neighbors.drain_held() {
            self.core.drop_pkt(pkt, DropReason::Shutdown, None);
        }
        self.core.counters.held = 0;
    }

    /// Counts that the device queue of `port` took `sent` frames of
    /// `bytes` bytes and refused `refused` (which the caller freed).
    pub fn count_tx(&mut self, port: PortIdx, sent: u64, bytes: u64, refused: u64) {
        let c = &mut self.core.counters;
        c.tx += sent;
        let p = &mut c.ports[port];
        p.tx_packets += sent;
        p.tx_bytes += bytes;
        p.tx_dropped += refused;
        for _ in 0..refused {
            c.drop(DropReason::TxFull, None);
        }
    }

    /// Counts one loop iteration of the runtime, `busy` when it moved packets.
    #[inline]
    pub fn count_poll(&mut self, busy: bool) {
        self.core.counters.polls += 1;
        self.core.counters.busy_polls += u64::from(busy);
    }

    /// Pipeline mode: counts frames handed to the I/O lcore (`handed`) and
    /// those the ring refused (freed by the caller). The I/O lcore counts
    /// what the devices send.
    pub fn count_handoff(&mut self, handed: u64, refused: u64) {
        self.core.counters.tx += handed;
        for _ in 0..refused {
            self.core.counters.drop(DropReason::RingFull, None);
        }
    }
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
