//! Decrypt fan-out: one tunnel's decryption on every worker, its packets
//! leaving in arrival order (docs/multicore.md).
//!
//! The worker that receives an SA's ESP (the owner; RSS puts one tunnel on
//! one queue) cuts each SA group into parts, gives every part an order
//! ticket from the SA's [`Reorder`] stage, and hands parts, as [`Job`]s, to
//! other workers' inboxes (lock-free rings); a part no other worker has
//! room for it does itself. The worker that takes a part decrypts it with
//! the shared [`InboundSa`](espgw_esp::InboundSa) (no lock: its replay
//! window is atomic) and *finishes* it ([`Job::process`]): selector check
//! against the tunnel of the owner's snapshot, TTL, route, neighbor,
//! Ethernet header. Each packet comes back as a ready frame with its TX
//! port, as a drop with its reason, or, for anything unusual (an ICMP
//! answer or error to make, a local destination, an unresolved neighbor,
//! too big for the port, a TCP SYN to clamp), unfinished. The owner
//! completes the job's ticket and, in ticket order, pushes the frames on
//! its own TX queues, counts the drops, and runs its full forwarding path
//! (`Forward`) on the unfinished ones: the owner still counts every
//! packet, and order is kept because only the owner transmits.
//!
//! Tickets are per part (per job), not per packet: the owner's per-packet
//! share is the classification, a push into the part's vector and, at
//! release, a push onto the TX queue.
//!
//! Snapshot safety: a job carries the owner's snapshot (`Arc<Tables>`), and
//! the finishing worker checks the selectors of the job's tunnel in that
//! snapshot, the one the owner classified the packets with. If the owner
//! switched to another snapshot before the release (a rekey, a removed
//! tunnel), every ready frame of the job is checked again at release
//! against the tunnel as the owner's current snapshot has it (gone:
//! `unknown_spi`; selectors no longer matching: `policy_mismatch`).
//! The reorder stages are kept by SA (its address, [`sa_key`]), not by
//! SAD index: a new snapshot may give an SA another index (a rekey of any
//! tunnel renumbers the SAD), and the SA's next group must still queue
//! behind its parts out, in the same stage, and never share a stage with
//! another SA. A job names its stage by the SA and the stage's id, so a
//! part that comes back after its stage was dropped (at a switch, once
//! nothing of it was outstanding) is late, never taken for another
//! stage's ticket.
//!
//! Bounds: a ticket not back `max_wait` after it was issued is given up
//! (its packets, if they come back later, are dropped as `reorder_late`).
//! Jobs are boxes the owner allocates up to [`MAX_JOBS_PER_WORKER`] per
//! worker (and as many more for the handoff below) and then reuses, as it
//! reuses the reorder stages of SAs it no longer spreads: in steady state
//! nothing allocates. With every
//! box out, the owner gives up its oldest outstanding part (as if its
//! bound had passed) to free the boxes waiting behind it, and, if none is
//! waiting, decrypts the group itself outside the stage. That is also the
//! owner's back-pressure: a slow worker cannot make it hold an unbounded
//! number of buffers.
//!
//! Per-CPU SAs (RFC 9611) take another way through the same rings: the
//! *handoff*. Each such inbound SA has a lane (`Tables::inbound_lane`),
//! and the owner hands each of its groups whole, in a job box, to worker
//! `lane % workers` (its handoff ring, FIFO), which decrypts, forwards,
//! transmits and counts the packets itself and returns only the empty box.
//! No ticket, no reorder stage: one SA's packets are decrypted by one
//! worker in arrival order, each SA with its own replay window, so nothing
//! can come late; SAs are independent (the peer's own workers send on
//! them), so their relative order is not kept. A full ring does not let a
//! group overtake the ones queued: the owner drops it (`sa_handoff_full`)
//! unless nothing of that SA is queued, in which case it decrypts the group
//! itself (`sa_handoff_kept`). The taking worker returns the box at its
//! next poll, once what the group became has been sent, so that an owner
//! that decrypts the SA's next group itself cannot send it first. The
//! owner's bookkeeping of what it handed off is keyed by the SA (its
//! address), which stays the same when a new snapshot moves it in the SAD.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
pub use espgw_control::config::SpreadWhen;
use espgw_control::config::{Side, SpreadLate};
use espgw_control::tables::{SaIndex, Tables, TunnelEntry, TunnelId};
use espgw_esp::Verdict;
use espgw_wire::{ethernet, ethertype, ip_protocol, tcp, MacAddr, PacketBuf};

use super::esp::SelectorMemo;
use crate::ip::{decrement_ttl, parse_ip, parse_v4_fast, parse_v6_fast};
use crate::neighbor::Neighbors;
use crate::network::Network;
use crate::ports::PortIdx;
use crate::reason::DropReason;
use crate::reorder::Reorder;
use crate::route::NextHop;
use crate::spread_trial::{Progress, SpreadTrial, TrialOutcome};

/// Jobs one owner may have out or waiting at once, per worker of the run
/// (each up to a burst), with the default bound (the config crate's
/// [`espgw_control::config::fan_out_jobs`] scales it with a longer one).
pub const MAX_JOBS_PER_WORKER: usize = espgw_control::config::FAN_OUT_JOBS_PER_WORKER;
/// How long the owner waits for a missing part, in nanoseconds, by
/// default (`[dataplane] spread_wait_us`): far longer than a worker takes
/// to decrypt a burst, short enough that a stuck worker costs a
/// reordering, not a stall, and few buffers.
pub const MAX_WAIT_NS: u64 = 100_000;
/// Smallest part handed to another worker: below it the ring round trip
/// costs more than the decryption it moves.
pub const MIN_PART: usize = 8;
/// Parts a worker's inbox may hold before the owner stops handing it
/// more and decrypts the next part itself: enough that the helper never
/// runs dry between the owner's bursts, few enough that a slow helper
/// does not collect the owner's whole stage.
pub const INBOX_DEPTH: usize = 2;
/// Jobs (groups of up to a burst) a worker's handoff ring holds, from all
/// owners together. What bounds the buffers is each owner's budget
/// ([`HANDOFF_JOBS`] groups, and as many packets as its fan-out may hold);
/// the ring only has to take them.
pub const HANDOFF_DEPTH: usize = 256;
/// Groups one owner may have handed off and not back, per
/// [`MAX_JOBS_PER_WORKER`] of its fan-out: under a light load groups are
/// a packet or a few, and a worker descheduled for a slice (milliseconds
/// on a shared machine) must not make the owner drop them
/// (`sa_handoff_full`) while few packets wait (with 4, tests/e2e/
/// ike_percpu.sh dropped up to 161 packets a gateway on 2 shared vCPUs;
/// with 16, none). The packets are bounded as the fan-out's are
/// (`MAX_JOBS_PER_WORKER` x workers x burst); boxes are allocated only as
/// needed (about 1 KB each).
pub const HANDOFF_JOBS: usize = 16;

/// With `spread_late = "send"`, the oldest a late part may be (since it
/// was cut) and still be sent: far beyond any reordering a transport
/// rides out, so that a worker stalled for seconds does not release
/// stale packets; older ones are dropped as `reorder_late` all the same.
pub const LATE_SEND_MAX_NS: u64 = 100_000_000;

/// How long the owner lets its oldest part wait before it takes back
/// the parts still queued in other workers' inboxes (not yet started) and
/// does them itself: a worker that is descheduled or busy then delays
/// only the part in its hands, not the ones queued behind it. A quarter
/// of the default bound, or of a shorter one: a longer bound waits longer
/// for the part in a slow worker's hands, not for the ones queued.
pub const STEAL_AFTER_NS: u64 = MAX_WAIT_NS / 4;

/// The rings between workers: per worker an inbox of jobs to decrypt and
/// a return ring for the jobs it handed out, and whether it is busy with
/// its own traffic. Built once for the run by the runtime and shared by
/// every worker (`Worker::set_spread`).
pub struct SpreadRings<B> {
    /// Jobs one owner may have out at once (the fan-out's; as many tickets
    /// as one SA's reorder stage holds, so that issuing one never has to
    /// give one up).
    max_jobs: usize,
    /// [`MAX_JOBS_PER_WORKER`] x workers, whatever the bound: what the
    /// handoff's budget is counted in (it has no reorder wait).
    base_jobs: usize,
    /// How long an owner waits for a missing part (nanoseconds; the
    /// reorder stages' bound).
    max_wait_ns: u64,
    /// When an owner spreads.
    when: SpreadWhen,
    /// What an owner does with a part that comes back after its stage
    /// gave up on it.
    late: SpreadLate,
    /// Per-CPU SAs' groups go whole to their lane's worker (the handoff,
    /// `[dataplane] per_cpu_handoff`) instead of through the fan-out.
    handoff_lanes: bool,
    inbox: Box<[ArrayQueue<Box<Job<B>>>]>,
    done: Box<[ArrayQueue<Box<Job<B>>>]>,
    /// Per worker: groups of per-CPU SAs handed to it whole (the
    /// handoff), in arrival order; never taken back by another worker.
    handoff: Box<[ArrayQueue<Box<Job<B>>>]>,
    /// Per worker: its last poll's receive filled a whole burst, i.e. its
    /// own RX queues keep it busy. No owner hands such a worker a part:
    /// with every worker saturated by its own tunnels (the many-tunnel
    /// case RSS already spreads) the fan-out would only move the same
    /// work between cores and add the ring hops and cache misses
    /// (docs/multicore.md, "Busy workers take no parts").
    /// Each flag on a cache line of its own: written by its worker only
    /// (when it changes), read by the owners choosing helpers.
    busy: Box<[CachePadded<AtomicBool>]>,
    /// Most parts an owner cuts a group into (besides `len / MIN_PART` and
    /// the other workers; unlimited unless set). Written before the
    /// workers start, read by owners: a line no one writes afterwards.
    max_parts: AtomicUsize,
    /// With [`SpreadWhen::Behind`]: every owner checks, this often in its
    /// loop time, whether the fan-out makes it deliver more than alone
    /// ([`crate::spread_trial`], `[dataplane] spread_recheck_ms`; 0: no
    /// check). Written before the workers start, like `max_parts`.
    recheck_ns: AtomicU64,
    /// With the live check: each owner starts with the fan-out off (the
    /// start-up probe found the cores' round trip over its limit) until a
    /// trial finds it delivers more. Written before the workers start.
    starts_off: AtomicBool,
}

impl<B> SpreadRings<B> {
    /// Rings for `workers` workers; late parts are dropped; every group
    /// worth splitting is split ([`SpreadWhen::Always`]).
    pub fn new(workers: usize) -> Arc<SpreadRings<B>> {
        Self::with_late(workers, SpreadLate::Drop)
    }

    /// Rings for `workers` workers whose late parts meet `late`
    /// (`[dataplane] spread_late`), splitting every group worth it.
    pub fn with_late(workers: usize, late: SpreadLate) -> Arc<SpreadRings<B>> {
        Self::with_options(workers, late, SpreadWhen::Always)
    }

    /// Rings for `workers` workers whose late parts meet `late` and whose
    /// owners spread `when` (`spread_decrypt = "auto"`: [`SpreadWhen::Behind`]).
    pub fn with_options(workers: usize, late: SpreadLate, when: SpreadWhen) -> Arc<SpreadRings<B>> {
        Self::with_handoff(workers, late, when, false)
    }

    /// [`Self::with_options`], and with `handoff` the groups of per-CPU
    /// SAs go whole to their lane's worker (`[dataplane] per_cpu_handoff`).
    pub fn with_handoff(
        workers: usize,
        late: SpreadLate,
        when: SpreadWhen,
        handoff: bool,
    ) -> Arc<SpreadRings<B>> {
        Self::with_wait(workers, late, when, handoff, MAX_WAIT_NS)
    }

    /// [`Self::with_handoff`] whose owners wait `max_wait_ns` for a
    /// missing part (`[dataplane] spread_wait_us`), with the job boxes
    /// [`espgw_control::config::fan_out_jobs`] gives that bound.
    pub fn with_wait(
        workers: usize,
        late: SpreadLate,
        when: SpreadWhen,
        handoff: bool,
        max_wait_ns: u64,
    ) -> Arc<SpreadRings<B>> {
        let workers = workers.max(1);
        let max_wait_ns = max_wait_ns.max(1);
        let base_jobs = MAX_JOBS_PER_WORKER * workers;
        let wait_us = u32::try_from(max_wait_ns.div_ceil(1000)).unwrap_or(u32::MAX);
        let max_jobs = espgw_control::config::fan_out_jobs(workers, wait_us);
        Arc::new(SpreadRings {
            max_jobs,
            base_jobs,
            max_wait_ns,
            when,
            late,
            handoff_lanes: handoff,
            // Owners push only while an inbox holds fewer than
            // `INBOX_DEPTH` (`helpers_with_room`), so it holds at most that
            // plus one racing push per owner; a push it refuses comes back
            // to the owner, who does the part itself (`send`).
            inbox: (0..workers)
                .map(|_| ArrayQueue::new((INBOX_DEPTH + 1) * workers))
                .collect(),
            // At most `max_jobs` of an owner's fan-out jobs and
            // `HANDOFF_JOBS` x `base_jobs` handoff jobs exist: its return
            // ring never refuses one.
            done: (0..workers)
                .map(|_| ArrayQueue::new(max_jobs + HANDOFF_JOBS * base_jobs))
                .collect(),
            handoff: (0..workers)
                .map(|_| ArrayQueue::new(HANDOFF_DEPTH))
                .collect(),
            busy: (0..workers)
                .map(|_| CachePadded::new(AtomicBool::new(false)))
                .collect(),
            max_parts: AtomicUsize::new(usize::MAX),
            recheck_ns: AtomicU64::new(0),
            starts_off: AtomicBool::new(false),
        })
    }

    /// Sets the most parts an owner cuts one SA group into (at least 1;
    /// by default as many as the group has [`MIN_PART`]s and there are
    /// other workers). Fewer, bigger parts mean fewer job boxes, ring
    /// operations and cross-core cache lines per packet, and fewer helpers
    /// per group (1: each group whole to one helper, the next group to
    /// the next), which matters where a cache line moves slowly between
    /// cores (docs/multicore.md, "Sixteen cores").
    pub fn set_max_parts(&self, parts: usize) {
        self.max_parts.store(parts.max(1), Ordering::Relaxed);
    }

    /// The most parts an owner cuts one SA group into.
    pub fn max_parts(&self) -> usize {
        self.max_parts.load(Ordering::Relaxed)
    }

    /// Sets how often (nanoseconds of an owner's loop time) each owner
    /// checks whether the fan-out pays, with [`SpreadWhen::Behind`] only
    /// (`"always"` spreads whatever it measures); 0: never. Before the
    /// workers start: an owner reads it once.
    pub fn set_recheck_ns(&self, ns: u64) {
        self.recheck_ns.store(ns, Ordering::Relaxed);
    }

    /// With the live check ([`Self::set_recheck_ns`]): each owner starts
    /// with the fan-out off until a trial finds it delivers more (the
    /// start-up probe's "over the limit"). Before the workers start.
    pub fn set_starts_off(&self, off: bool) {
        self.starts_off.store(off, Ordering::Relaxed);
    }

    /// How often each owner checks whether the fan-out pays (0: never).
    pub fn recheck_ns(&self) -> u64 {
        if self.when == SpreadWhen::Behind {
            self.recheck_ns.load(Ordering::Relaxed)
        } else {
            0
        }
    }

    /// Whether per-CPU SAs' groups are handed off whole.
    pub fn hands_off(&self) -> bool {
        self.handoff_lanes
    }

    /// How long an owner waits for a missing part (nanoseconds).
    pub fn max_wait_ns(&self) -> u64 {
        self.max_wait_ns
    }

    /// How long an SA's oldest part may wait before its owner takes back
    /// the parts still queued at other workers ([`STEAL_AFTER_NS`], or a
    /// quarter of a shorter bound); also the longest an idle worker may
    /// sleep and still serve its inbox in time.
    pub fn steal_after_ns(&self) -> u64 {
        (self.max_wait_ns / 4).min(STEAL_AFTER_NS)
    }

    /// Job boxes one owner may have out at once (each up to a burst of
    /// packets: what the fan-out may hold of the mempool, per owner).
    pub fn max_jobs(&self) -> usize {
        self.max_jobs
    }

    /// Whether `worker` said last that its own traffic keeps it busy.
    pub fn is_busy(&self, worker: usize) -> bool {
        self.busy
            .get(worker)
            .is_some_and(|b| b.load(Ordering::Relaxed))
    }

    pub fn workers(&self) -> usize {
        self.inbox.len()
    }

    pub fn late(&self) -> SpreadLate {
        self.late
    }

    /// Test hook: the jobs waiting in `worker`'s inbox.
    #[cfg(test)]
    pub(crate) fn queued_for(&self, worker: usize) -> usize {
        self.inbox[worker].len()
    }

    /// Test hook: takes every job queued for `worker`, as if it had
    /// started them and then stopped (descheduled, stuck).
    #[cfg(test)]
    pub(crate) fn seize(&self, worker: usize) -> Seized<B> {
        Seized(std::iter::from_fn(|| self.inbox[worker].pop()).collect())
    }

    /// Test hook: puts back what [`Self::seize`] took, for `worker` to
    /// finish in its next tick.
    #[cfg(test)]
    pub(crate) fn unseize(&self, worker: usize, jobs: Seized<B>) {
        for j in jobs.0 {
            let _ = self.inbox[worker].push(j);
        }
    }
}

/// Jobs taken out of an inbox by a test ([`SpreadRings::seize`]).
#[cfg(test)]
#[allow(clippy::vec_box)]
pub(crate) struct Seized<B>(Vec<Box<Job<B>>>);

/// What the worker that finished a packet of a job decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// A frame with its Ethernet header, for this TX port.
    Tx(PortIdx),
    /// Dropped (counted by the owner with this reason).
    Drop(DropReason),
    /// Decrypted, the rest left to the owner's full forwarding path.
    Unfinished,
}

/// Part of one SA group, out for decryption and back.
pub(super) struct Job<B> {
    pub(super) owner: usize,
    pub(super) slot: SaIndex,
    pub(super) tunnel: TunnelId,
    /// The owner's snapshot when it cut the part (the SA and the tunnel
    /// are looked up in it).
    pub(super) tables: Option<Arc<Tables>>,
    /// The burst's time (engine seconds).
    pub(super) now: u64,
    /// When the owner cut the part (the worker clock, nanoseconds): how
    /// late a late part is.
    pub(super) cut_ns: u64,
    /// The part's order ticket (not used by a handoff).
    pub(super) ticket: u64,
    /// The SA's [`sa_key`]: with `stage`, which reorder stage the ticket
    /// is of; for a handoff, the owner's bookkeeping.
    pub(super) sa: usize,
    /// The id of the reorder stage that issued the ticket ([`SaStage`]).
    pub(super) stage: u64,
    /// A per-CPU SA's group handed off whole: the worker that takes it
    /// decrypts, forwards and counts it, and returns the empty box.
    pub(super) handoff: bool,
    /// With `handoff`: the group's packets, for the owner's bookkeeping.
    pub(super) handoff_pkts: u32,
    pub(super) pkts: Vec<B>,
    pub(super) ports: Vec<PortIdx>,
    pub(super) verdicts: Vec<Verdict>,
    pub(super) outcomes: Vec<Outcome>,
}

/// The last next hop a finishing worker resolved (valid while its
/// neighbor cache's generation stays the same).
#[derive(Clone, Copy)]
pub(super) struct Hop {
    dst: IpAddr,
    hop: NextHop,
    mac: MacAddr,
    generation: u64,
}

impl<B: PacketBuf> Job<B> {
    /// Decrypts the packets in place and finishes what it can of each
    /// (see the module doc), on the worker that runs it: `net` and
    /// `neighbors` are that worker's, the tunnel is the job's snapshot's.
    /// Counts nothing: the owner counts every outcome.
    pub(super) fn process(
        &mut self,
        net: &Network,
        neighbors: &mut Neighbors<B>,
        hop: &mut Option<Hop>,
    ) {
        self.verdicts.clear();
        self.verdicts.resize(self.pkts.len(), Verdict::default());
        self.outcomes.clear();
        let Some(tables) = self.tables.as_deref() else {
            self.outcomes
                .resize(self.pkts.len(), Outcome::Drop(DropReason::UnknownSpi));
            return;
        };
        let sa = tables.inbound_sa(self.slot).map(|(_, _, sa)| sa);
        let (Some(sa), Some(tunnel)) = (sa, tables.tunnel(self.tunnel)) else {
            // Cut from this snapshot, so both exist; dropped, not trusted.
            self.outcomes
                .resize(self.pkts.len(), Outcome::Drop(DropReason::UnknownSpi));
            return;
        };
        // No lock: any number of workers decrypt for one SA at once.
        sa.decap_burst(&mut self.pkts, &mut self.verdicts, self.now);
        let mut memo = SelectorMemo::default();
        for (pkt, verdict) in self.pkts.iter_mut().zip(&self.verdicts) {
            let o = match *verdict {
                Verdict::Drop(r) => Outcome::Drop(DropReason::from_esp(r)),
                Verdict::Forward => finish(net, neighbors, hop, tunnel, &mut memo, pkt),
            };
            self.outcomes.push(o);
        }
    }
}

/// The forwarding of one decrypted packet as `Forward::packet` does it
/// (esp.rs), for the common case only: what needs more (an answer, a
/// hold, an ICMP error, an MSS clamp) is left [`Outcome::Unfinished`],
/// untouched but for the IP parse (which only trims link padding), for
/// the owner's full path. IPv4 on its `V4Meta`, as `Forward::packet`.
#[inline]
fn finish<B: PacketBuf>(
    net: &Network,
    neighbors: &mut Neighbors<B>,
    hop_cache: &mut Option<Hop>,
    tunnel: &TunnelEntry,
    memo: &mut SelectorMemo,
    pkt: &mut B,
) -> Outcome {
    if pkt.data().first().is_some_and(|b| b >> 4 == 6) {
        return finish_v6(net, neighbors, hop_cache, tunnel, memo, pkt);
    }
    let v = match parse_v4_fast(pkt) {
        Ok(v) => v,
        Err(r) => return Outcome::Drop(r),
    };
    let inside = memo.inside_v4(tunnel, v.src, v.dst);
    let ours_or_last = v.ttl <= 1 || net.is_local_v4(v.dst);
    let tcp_at = (v.proto == ip_protocol::TCP).then_some(usize::from(v.hl));
    let parsed = Parsed {
        inside,
        ours_or_last,
        tcp_at,
        dst: v.dst_addr(),
        v6: false,
    };
    finish_parsed(net, neighbors, hop_cache, tunnel, pkt, parsed)
}

/// [`finish`] of an IPv6 packet.
#[inline(never)]
fn finish_v6<B: PacketBuf>(
    net: &Network,
    neighbors: &mut Neighbors<B>,
    hop_cache: &mut Option<Hop>,
    tunnel: &TunnelEntry,
    memo: &mut SelectorMemo,
    pkt: &mut B,
) -> Outcome {
    // TCP or UDP right after the fixed header: the IPv6 fast path's
    // integers, as the owner's `Forward::v6` takes them.
    let parsed = if let Some(v) = parse_v6_fast(pkt) {
        Parsed {
            inside: memo.inside_v6(tunnel, v.src, v.dst),
            ours_or_last: v.hop_limit <= 1 || net.is_local_v6(v.dst),
            tcp_at: (v.proto == ip_protocol::TCP).then_some(40),
            dst: v.dst_addr(),
            v6: true,
        }
    } else {
        let m = match parse_ip(pkt) {
            Ok(m) => m,
            Err(r) => return Outcome::Drop(r),
        };
        Parsed {
            inside: memo.inside(tunnel, m.src, m.dst),
            ours_or_last: m.ttl <= 1 || net.is_local(m.dst),
            tcp_at: (m.proto == ip_protocol::TCP).then_some(m.l4_offset),
            dst: m.dst,
            v6: m.v6,
        }
    };
    finish_parsed(net, neighbors, hop_cache, tunnel, pkt, parsed)
}

/// What [`finish`] needs of a decrypted packet's parse, from any of the
/// three parses (IPv4 and IPv6 fast paths, the general one).
struct Parsed {
    /// Within the tunnel's selectors.
    inside: bool,
    /// For us, or at its last hop (TTL or hop limit 1 or 0).
    ours_or_last: bool,
    /// A TCP packet's header offset (a SYN may need its MSS clamped).
    tcp_at: Option<usize>,
    dst: IpAddr,
    v6: bool,
}

/// The steps after the parse, for every parse: outside the selectors
/// dropped as a policy mismatch; for us, at its last hop, or a TCP SYN of
/// a clamping tunnel left to the owner; else forwarded. The helper's
/// counterpart of the owner's `Forward::parsed` (worker/esp.rs).
#[inline(always)]
fn finish_parsed<B: PacketBuf>(
    net: &Network,
    neighbors: &mut Neighbors<B>,
    hop_cache: &mut Option<Hop>,
    tunnel: &TunnelEntry,
    pkt: &mut B,
    p: Parsed,
) -> Outcome {
    if !p.inside {
        return Outcome::Drop(DropReason::PolicyMismatch);
    }
    if p.ours_or_last {
        return Outcome::Unfinished;
    }
    if tunnel.mss_clamp.is_some() && p.tcp_at.is_some_and(|at| is_syn(pkt, at)) {
        return Outcome::Unfinished;
    }
    forward(net, neighbors, hop_cache, pkt, p.dst, p.v6)
}

fn is_syn<B: PacketBuf>(pkt: &B, l4_offset: usize) -> bool {
    pkt.data()
        .get(l4_offset + 13)
        .is_some_and(|f| f & tcp::flags::SYN != 0)
}

/// Route, neighbor, side, MTU, TTL and Ethernet header of a packet
/// inside its tunnel's selectors and not for us.
#[inline]
fn forward<B: PacketBuf>(
    net: &Network,
    neighbors: &mut Neighbors<B>,
    hop_cache: &mut Option<Hop>,
    pkt: &mut B,
    dst: IpAddr,
    v6: bool,
) -> Outcome {
    let generation = neighbors.generation();
    let (hop, mac) = match *hop_cache {
        Some(c) if c.dst == dst && c.generation == generation => (c.hop, c.mac),
        _ => {
            let Some(hop) = net.routes.lookup(dst) else {
                return Outcome::Drop(DropReason::NoRoute);
            };
            let Some(mac) = neighbors.lookup(hop.port, hop.addr) else {
                return Outcome::Unfinished;
            };
            *hop_cache = Some(Hop {
                dst,
                hop,
                mac,
                generation,
            });
            (hop, mac)
        }
    };
    let out = &net.ports[hop.port];
    if out.side == Side::Unprotected {
        return Outcome::Drop(DropReason::PlaintextBlocked);
    }
    if pkt.len() > out.mtu {
        return Outcome::Unfinished;
    }
    decrement_ttl(pkt, v6);
    let ethertype = if v6 { ethertype::IPV6 } else { ethertype::IPV4 };
    if pkt.prepend(ethernet::HEADER_LEN).is_err() {
        return Outcome::Drop(DropReason::NoRoom);
    }
    if let Some(h) = pkt.data_mut().first_chunk_mut::<{ ethernet::HEADER_LEN }>() {
        h[..6].copy_from_slice(&mac);
        h[6..12].copy_from_slice(&out.mac);
        h[12..].copy_from_slice(&ethertype.to_be_bytes());
    }
    Outcome::Tx(hop.port)
}

/// An SA whose groups this owner handed off and are not all back.
struct Handed {
    /// The SA ([`sa_key`]).
    sa: usize,
    /// The worker they are at.
    to: u16,
    jobs: u32,
    pkts: u32,
}

/// An inbound SA's identity for the handoff's bookkeeping: its address,
/// the same in every snapshot that holds it (and it stays allocated while
/// a job out holds the snapshot it came from).
pub(super) fn sa_key(sa: &espgw_control::tables::SharedInbound) -> usize {
    Arc::as_ptr(sa) as usize
}

/// [`Spread::stage_of_slot`]'s "this SA has no stage" (positions are far
/// fewer).
const NO_STAGE: u32 = u32::MAX;

/// The reorder stage of one SA an owner spread.
pub(super) struct SaStage<B> {
    /// The SA ([`sa_key`]).
    sa: usize,
    /// Unique among this owner's stages, ever: a part carries it, so that
    /// one back after its stage was dropped and another made for the same
    /// SA (tickets start again at 0) is late, not a ticket of the new one.
    id: u64,
    pub(super) reorder: Reorder<Box<Job<B>>>,
}

/// What one worker keeps for the fan-out: its end of the rings, its job
/// boxes, and (as an owner) the reorder stage of each SA it spreads.
/// Jobs stay boxed while they wait here: the rings move one pointer per
/// job, and a box moves between rings and these lists without a copy.
#[allow(clippy::vec_box)]
pub(super) struct Spread<B> {
    pub(super) me: usize,
    rings: Arc<SpreadRings<B>>,
    free: Vec<Box<Job<B>>>,
    /// Job boxes allocated so far (at most `rings.max_jobs` for the
    /// fan-out and as many for the handoff).
    boxes: u64,
    /// Round robin over the other workers.
    next: usize,
    pub(super) burst: usize,
    /// The reorder stages (of jobs) of the SAs this worker spread, by SA
    /// (a few: the SAs with parts out, or spread since the last snapshot
    /// switch, [`Self::new_snapshot`]).
    pub(super) stages: Vec<SaStage<B>>,
    /// By SAD index of the current snapshot: the stage of that index's SA
    /// (its position in `stages` + 1; [`NO_STAGE`]: it has none; 0: not
    /// looked up yet). A memo, cleared at each switch, so that a group
    /// finds its stage, or that it has none, without a search.
    stage_of_slot: Vec<u32>,
    /// Stages dropped at a switch, empty, for the next SA spread: a
    /// switch (any tunnel's rekey) does not make the fan-out allocate.
    spare: Vec<Reorder<Box<Job<B>>>>,
    /// The id of the next stage made.
    next_stage_id: u64,
    /// The parts of the group being split (empty between groups).
    pub(super) staged: Vec<(Option<usize>, Box<Job<B>>)>,
    /// The next hop this worker resolved last for a part it finished.
    pub(super) hop: Option<Hop>,
    /// Scratch: the workers a group is cut for (kept for its capacity).
    pub(super) targets: Vec<usize>,
    pub(super) dests: Vec<Option<usize>>,
    /// This owner's handoff jobs not back yet (queued at or being done by
    /// another worker), by SA: a few entries (the SAs with groups out).
    handed: Vec<Handed>,
    /// Handoff jobs this worker finished, returned to their owners at its
    /// next poll: after the runtime sent what they became (an owner that
    /// saw its last group of an SA back could otherwise decrypt the next
    /// one itself and send it first).
    finished: Vec<Box<Job<B>>>,
    /// A receive of this poll filled a whole burst.
    full_rx: bool,
    /// What this worker last published as its busy flag.
    busy_published: bool,
    /// The live check of whether spreading pays (`None`: not checked).
    trial: Option<SpreadTrial>,
}

impl<B: PacketBuf> Spread<B> {
    pub(super) fn new(me: usize, rings: Arc<SpreadRings<B>>, burst: usize) -> Self {
        let workers = rings.workers();
        Spread {
            me,
            free: Vec::new(),
            boxes: 0,
            next: me,
            burst,
            stages: Vec::new(),
            stage_of_slot: Vec::new(),
            spare: Vec::new(),
            next_stage_id: 0,
            staged: Vec::with_capacity(workers),
            hop: None,
            targets: Vec::with_capacity(workers),
            dests: Vec::with_capacity(workers),
            handed: Vec::new(),
            finished: Vec::new(),
            full_rx: false,
            busy_published: false,
            trial: (rings.recheck_ns() > 0).then(|| {
                let trial = SpreadTrial::new(rings.recheck_ns());
                if rings.starts_off.load(Ordering::Relaxed) {
                    trial.starting_off()
                } else {
                    trial
                }
            }),
            rings,
        }
    }

    /// Notes a receive of `n` packets (of this worker's own RX queues).
    pub(super) fn received(&mut self, n: usize) {
        self.full_rx |= n >= self.burst;
    }

    /// Whether per-CPU SAs' groups go whole to their lane's worker.
    pub(super) fn hands_off(&self) -> bool {
        self.rings.hands_off()
    }

    /// Whether this worker hands out parts of its groups now: always, or
    /// (`SpreadWhen::Behind`) only when a receive of this poll filled a
    /// whole burst.
    pub(super) fn wants_help(&self) -> bool {
        self.behind() && self.trial.as_ref().is_none_or(|t| t.allows())
    }

    /// Whether this worker needs help now: always, or (`SpreadWhen::Behind`)
    /// when a receive of this poll filled a whole burst. What the per-CPU
    /// handoff goes by: the live check measures the fan-out only (its
    /// windows count the fan-out's parts), so it neither holds back nor
    /// judges the handoff.
    pub(super) fn behind(&self) -> bool {
        self.rings.when == SpreadWhen::Always || self.full_rx
    }

    /// Whether this worker would hand out parts now but the live check
    /// ([`crate::spread_trial`]) has the fan-out off (a trial's window
    /// without it, or a trial found it slower).
    pub(super) fn held_back(&self) -> bool {
        self.full_rx && self.trial.as_ref().is_some_and(|t| !t.allows())
    }

    /// Once per poll, before [`Self::publish_busy`]: feeds the live check
    /// this poll's counts. The outcome when a trial ended.
    pub(super) fn observe_trial(&mut self, now_ns: u64, p: Progress) -> Option<TrialOutcome> {
        let full = self.full_rx;
        self.trial.as_mut()?.observe(now_ns, p, full)
    }

    /// Whether the last trial of the live check turned the fan-out off.
    pub(super) fn trial_off(&self) -> bool {
        self.trial.as_ref().is_some_and(|t| !t.decided_on())
    }

    /// The owner switched to another snapshot: SAD indexes may now name
    /// other SAs, so the index memo goes, and so do the stages with
    /// nothing outstanding (their SA may be gone; one spread again gets a
    /// new stage). Stages with parts out stay, found by their SA.
    pub(super) fn new_snapshot(&mut self) {
        self.stage_of_slot.clear();
        // An empty stage waits for nothing it issued, so it can serve
        // another SA (a new id tells their parts apart; tickets just go on
        // from where they were).
        let idle = self.stages.extract_if(.., |s| s.reorder.outstanding() == 0);
        self.spare.extend(idle.map(|s| s.reorder));
    }

    /// Once per poll: publishes whether this poll's receive filled a
    /// burst (a store only when that changed, so an idle or a saturated
    /// worker writes nothing), and starts the next poll's count.
    pub(super) fn publish_busy(&mut self) {
        if self.full_rx != self.busy_published {
            self.busy_published = self.full_rx;
            self.rings.busy[self.me].store(self.full_rx, Ordering::Relaxed);
        }
        self.full_rx = false;
    }

    fn new_box(&self) -> Box<Job<B>> {
        Box::new(Job {
            owner: self.me,
            slot: SaIndex(0),
            tunnel: TunnelId(0),
            tables: None,
            now: 0,
            cut_ns: 0,
            ticket: 0,
            sa: 0,
            stage: 0,
            handoff: false,
            handoff_pkts: 0,
            pkts: Vec::with_capacity(self.burst),
            ports: Vec::with_capacity(self.burst),
            verdicts: Vec::with_capacity(self.burst),
            outcomes: Vec::with_capacity(self.burst),
        })
    }

    /// `[dataplane] spread_late`: what to do with a late part.
    pub(super) fn late(&self) -> SpreadLate {
        self.rings.late
    }

    pub(super) fn workers(&self) -> usize {
        self.rings.workers()
    }

    pub(super) fn max_parts(&self) -> usize {
        self.rings.max_parts()
    }

    /// The position in `stages` of the stage of SA `sa` ([`sa_key`]),
    /// SAD index `slot` of the current snapshot, if it has one.
    pub(super) fn stage_of(&self, slot: SaIndex, sa: usize) -> Option<usize> {
        if self.stages.is_empty() {
            return None;
        }
        match self
            .stage_of_slot
            .get(slot.0 as usize)
            .copied()
            .unwrap_or(0)
        {
            NO_STAGE => None,
            0 => self.stages.iter().position(|s| s.sa == sa),
            memo => {
                let p = memo as usize - 1;
                // (Always the SA's within a snapshot; checked all the same.)
                match self.stages.get(p) {
                    Some(s) if s.sa == sa => Some(p),
                    _ => self.stages.iter().position(|s| s.sa == sa),
                }
            }
        }
    }

    /// [`Self::stage_of`] that remembers the answer for `slot`, a stage or
    /// none (the per-group lookup of SAs that are not spread: it must not
    /// search every time).
    fn find_stage(&mut self, slot: SaIndex, sa: usize) -> Option<usize> {
        let found = self.stage_of(slot, sa);
        if !self.stages.is_empty() {
            self.remember(slot, found.map_or(NO_STAGE, |p| p as u32 + 1));
        }
        found
    }

    fn remember(&mut self, slot: SaIndex, memo: u32) {
        let i = slot.0 as usize;
        if self.stage_of_slot.len() <= i {
            self.stage_of_slot.resize(i + 1, 0);
        }
        self.stage_of_slot[i] = memo;
    }

    /// [`Self::stage_of`], made on first use (and remembered for `slot`).
    pub(super) fn stage_for(&mut self, slot: SaIndex, sa: usize) -> usize {
        let p = match self.stage_of(slot, sa) {
            Some(p) => p,
            None => {
                let cap = self.rings.max_jobs;
                let reorder = self
                    .spare
                    .pop()
                    .unwrap_or_else(|| Reorder::new(cap, self.rings.max_wait_ns));
                self.stages.push(SaStage {
                    sa,
                    id: self.next_stage_id,
                    reorder,
                });
                self.next_stage_id += 1;
                self.stages.len() - 1
            }
        };
        self.remember(slot, p as u32 + 1);
        p
    }

    /// The id of the stage at position `p` (for the jobs it tickets).
    pub(super) fn stage_id(&self, p: usize) -> u64 {
        self.stages[p].id
    }

    /// The position of the stage that ticketed `job`, if it is still
    /// there (else the job is late).
    pub(super) fn stage_of_job(&self, job: &Job<B>) -> Option<usize> {
        let hint = self.stage_of(job.slot, job.sa);
        match hint {
            Some(p) if self.stages[p].id == job.stage => Some(p),
            _ => self
                .stages
                .iter()
                .position(|s| s.sa == job.sa && s.id == job.stage),
        }
    }

    /// Outstanding tickets of SA `sa` ([`sa_key`], SAD index `slot`; 0
    /// when it has no stage).
    pub(super) fn outstanding(&mut self, slot: SaIndex, sa: usize) -> usize {
        self.find_stage(slot, sa)
            .map_or(0, |p| self.stages[p].reorder.outstanding())
    }

    /// An empty job box for the fan-out, if this owner may have one more
    /// of its parts out (`max_jobs`; the handoff has its own, so that a
    /// worker slow to take per-CPU SAs' groups cannot make the fan-out of
    /// ordinary SAs give up parts to free boxes).
    pub(super) fn job(&mut self) -> Option<Box<Job<B>>> {
        let out = (self.boxes - self.free.len() as u64).saturating_sub(self.handed_total());
        self.box_within(out, self.rings.max_jobs as u64)
    }

    /// An empty job box for the handoff of a group of `n` packets, if this
    /// owner may have one more out: [`HANDOFF_JOBS`] x `base_jobs` groups,
    /// `base_jobs` x burst packets (as many as the fan-out may hold with
    /// the default bound; the handoff has no reorder wait to cover).
    pub(super) fn handoff_job(&mut self, n: usize) -> Option<Box<Job<B>>> {
        let max = self.rings.base_jobs as u64;
        let pkts: u64 = self.handed.iter().map(|h| u64::from(h.pkts)).sum();
        if pkts + n as u64 > max * self.burst as u64 {
            return None;
        }
        self.box_within(self.handed_total(), HANDOFF_JOBS as u64 * max)
    }

    /// A box, free or new, if `out` (of its kind) is under `max`.
    fn box_within(&mut self, out: u64, max: u64) -> Option<Box<Job<B>>> {
        if out >= max {
            return None;
        }
        if let Some(j) = self.free.pop() {
            return Some(j);
        }
        self.boxes += 1;
        Some(self.new_box())
    }

    /// A box back (emptied) for reuse.
    pub(super) fn recycle(&mut self, mut job: Box<Job<B>>) {
        job.tables = None;
        job.handoff = false;
        job.pkts.clear();
        job.ports.clear();
        job.outcomes.clear();
        self.free.push(job);
    }

    /// Up to `max` other workers with room in their inbox and not busy
    /// with their own traffic, round robin (into `out`).
    pub(super) fn helpers_with_room(&mut self, max: usize, out: &mut Vec<usize>) {
        out.clear();
        let n = self.workers();
        for _ in 0..n {
            if out.len() == max {
                break;
            }
            self.next = (self.next + 1) % n;
            if self.next != self.me
                && self.rings.inbox[self.next].len() < INBOX_DEPTH
                && !self.rings.is_busy(self.next)
            {
                out.push(self.next);
            }
        }
    }

    /// Hands `job` to worker `to`; gives it back if the inbox is full.
    pub(super) fn send(&self, to: usize, job: Box<Job<B>>) -> Result<(), Box<Job<B>>> {
        self.rings.inbox[to].push(job)
    }

    /// A job from this worker's inbox, to decrypt.
    pub(super) fn take_work(&self) -> Option<Box<Job<B>>> {
        self.rings.inbox[self.me].pop()
    }

    /// A job not yet started from worker `from`'s inbox (any owner's),
    /// for this worker to do instead.
    pub(super) fn steal(&self, from: usize) -> Option<Box<Job<B>>> {
        if from == self.me {
            return None;
        }
        self.rings.inbox.get(from)?.pop()
    }

    /// True when one of this worker's SAs has waited
    /// [`SpreadRings::steal_after_ns`] or more at `now` for its oldest part.
    pub(super) fn overdue(&self, now: u64) -> bool {
        self.stages.iter().any(|s| {
            s.reorder
                .oldest_pending_since()
                .is_some_and(|t| now.saturating_sub(t) >= self.rings.steal_after_ns())
        })
    }

    /// Returns a finished job to its owner. The owner's return ring holds
    /// every job it can have out, so it takes this one; if it could not
    /// (a bug), the packets are dropped with the box.
    pub(super) fn give_back(&self, job: Box<Job<B>>) {
        let owner = job.owner;
        let _ = self.rings.done[owner].push(job);
    }

    /// A job of this worker's back from another worker.
    pub(super) fn take_done(&self) -> Option<Box<Job<B>>> {
        self.rings.done[self.me].pop()
    }

    /// The worker a group of a per-CPU SA of lane `lane`, with none of
    /// its groups out, goes to; `None`: this one decrypts it. When this
    /// worker keeps up alone (`"auto"`), itself; else the lane's home
    /// worker, `lane % workers` (itself for its own lanes), as RSS on the
    /// SPI would place the SA. (While groups of the SA are out, they go to
    /// where those went: [`Self::handed_to`].)
    ///
    /// (Tried in session 15: a lane whose home is this worker handed to
    /// another worker while that one had few of this one's groups. With
    /// FIFO per SA a lane moves back only once all of it is back, so under
    /// load it never did: the other worker decrypted everything, and the
    /// pair ran no faster than with the static split; docs/multicore.md.)
    pub(super) fn lane_worker(&self, lane: u32) -> Option<usize> {
        if !self.behind() {
            return None;
        }
        let home = lane as usize % self.workers();
        (home != self.me).then_some(home)
    }

    /// The worker this owner's groups of SA `sa` (its [`sa_key`]) are out
    /// at, if any are: its next groups must go there too, or they would
    /// overtake them. Keyed by the SA, not its SAD index: the index of an
    /// SA can change from one snapshot to the next, the SA cannot.
    pub(super) fn handed_to(&self, sa: usize) -> Option<usize> {
        self.handed
            .iter()
            .find(|h| h.sa == sa)
            .map(|h| usize::from(h.to))
    }

    /// Every handoff job of this owner not back yet (all SAs).
    pub(super) fn handed_total(&self) -> u64 {
        self.handed.iter().map(|h| u64::from(h.jobs)).sum()
    }

    /// Hands `job` (a whole group of SA `sa`, by its [`sa_key`]) to worker
    /// `to`; gives it back if that worker's handoff ring is full.
    pub(super) fn hand_off(
        &mut self,
        to: usize,
        sa: usize,
        mut job: Box<Job<B>>,
    ) -> Result<(), Box<Job<B>>> {
        job.handoff = true;
        job.sa = sa;
        let n = job.pkts.len() as u32;
        job.handoff_pkts = n;
        match self.rings.handoff[to].push(job) {
            Ok(()) => {
                match self.handed.iter_mut().find(|h| h.sa == sa) {
                    Some(h) => {
                        h.jobs += 1;
                        h.pkts += n;
                    }
                    // (Worker indexes fit: a run has at most a few hundred.)
                    None => self.handed.push(Handed {
                        sa,
                        to: to as u16,
                        jobs: 1,
                        pkts: n,
                    }),
                }
                Ok(())
            }
            Err(mut job) => {
                job.handoff = false;
                Err(job)
            }
        }
    }

    /// A handoff job of this worker's own returned empty: recycled.
    pub(super) fn handoff_back(&mut self, job: Box<Job<B>>) {
        if let Some(i) = self.handed.iter().position(|h| h.sa == job.sa) {
            self.handed[i].jobs -= 1;
            self.handed[i].pkts = self.handed[i].pkts.saturating_sub(job.handoff_pkts);
            if self.handed[i].jobs == 0 {
                self.handed.swap_remove(i);
            }
        }
        self.recycle(job);
    }

    /// A group handed to worker `w`: its own to decrypt and forward, or
    /// (at shutdown, when every worker drains every ring, as a worker that
    /// stopped takes no more) another's.
    pub(super) fn take_handoff_of(&self, w: usize) -> Option<Box<Job<B>>> {
        self.rings.handoff.get(w)?.pop()
    }

    /// Keeps a finished handoff job for [`Self::return_finished`].
    pub(super) fn finished(&mut self, job: Box<Job<B>>) {
        self.finished.push(job);
    }

    /// Returns the handoff jobs finished in the last poll to their owners
    /// (their packets sent by now).
    pub(super) fn return_finished(&mut self) {
        while let Some(job) = self.finished.pop() {
            self.give_back(job);
        }
    }

    /// Every job waiting in a reorder stage, finished (at shutdown).
    #[allow(clippy::vec_box)]
    pub(super) fn drain(&mut self) -> Vec<Box<Job<B>>> {
        let mut out = Vec::new();
        for r in self.stages.iter_mut().map(|s| &mut s.reorder) {
            while r.outstanding() != 0 {
                match r.pop(u64::MAX) {
                    Some(p) => out.push(p),
                    None => break,
                }
            }
        }
        out
    }
}
