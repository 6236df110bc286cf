//! Decrypt fan-out: one tunnel's decryption on every worker, its packets
//! leaving in arrival order (docs/multicore.md).
//!
//! The worker that receives an SA's ESP (the owner; RSS puts one tunnel on
//! one queue) gives every packet of the SA group an order ticket from the
//! SA's [`Reorder`] stage, keeps one part of the group and hands the other
//! parts, as [`Job`]s, to other workers' inboxes (lock-free rings). Every
//! worker, in its [`Worker::tick`](super::Worker::tick), decrypts the jobs
//! in its inbox with the shared [`InboundSa`](espgw_esp::InboundSa) (no
//! lock: its replay window is atomic) and puts each job back on its
//! owner's return ring. The owner completes the tickets (a packet dropped
//! by the replay window or its ICV completes its ticket as a drop, so it
//! never holds up the others) and releases the packets in ticket order to
//! the selector check and forwarding that `EspIn` does for every packet.
//!
//! Bounds: a ticket not back `max_wait` after it was issued is given up
//! (its packet, if it comes back later, is dropped as `reorder_late`); the
//! stage holds at most `capacity` tickets per SA (the oldest outstanding
//! one is given up to make room). Jobs are boxes the owner allocates up to
//! [`MAX_JOBS_PER_WORKER`] per worker and then reuses: in steady state
//! nothing allocates; with every box out, the owner decrypts the part
//! itself. That is also the owner's back-pressure: it never has more than
//! that many parts out, so a slow worker cannot make it hold an unbounded
//! number of buffers (the packets waiting behind a part in the reorder
//! stage are bounded by the same count of bursts).

use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use espgw_control::tables::{SaIndex, SharedInbound, TunnelId};
use espgw_esp::Verdict;
use espgw_wire::PacketBuf;

use crate::ports::PortIdx;
use crate::reorder::Reorder;

/// Jobs one owner may have out at once, per worker of the run (each up to
/// a part of a burst): with 2 workers, 8 parts of at most half a burst.
pub const MAX_JOBS_PER_WORKER: usize = 4;
/// Tickets one SA's reorder stage holds. Each decrypted packet waiting
/// behind a missing one holds a buffer: this and the wait below bound
/// them (at 10 Mpps, 100 µs is 1000 packets), well inside a worker's
/// share of the mbuf pool.
pub const REORDER_CAPACITY: usize = 1024;
/// How long the owner waits for a missing ticket, in nanoseconds: far
/// longer than a worker takes to decrypt a burst, short enough that a
/// stuck worker costs a reordering, not a stall, and few buffers.
pub const MAX_WAIT_NS: u64 = 100_000;
/// Smallest part handed to another worker: below it the ring round trip
/// costs more than the decryption it moves.
pub const MIN_PART: usize = 8;

/// The rings between workers: per worker an inbox of jobs to decrypt and
/// a return ring for the jobs it handed out. Built once for the run by the
/// runtime and shared by every worker (`Worker::set_spread`).
pub struct SpreadRings<B> {
    /// Jobs one owner may have out at once.
    max_jobs: usize,
    inbox: Box<[ArrayQueue<Box<Job<B>>>]>,
    done: Box<[ArrayQueue<Box<Job<B>>>]>,
}

impl<B> SpreadRings<B> {
    /// Rings for `workers` workers.
    pub fn new(workers: usize) -> Arc<SpreadRings<B>> {
        let workers = workers.max(1);
        let max_jobs = MAX_JOBS_PER_WORKER * workers;
        Arc::new(SpreadRings {
            max_jobs,
            // Every owner's jobs could sit in one inbox at once.
            inbox: (0..workers)
                .map(|_| ArrayQueue::new(max_jobs * workers))
                .collect(),
            // At most `max_jobs` of an owner's jobs exist: its return ring
            // never refuses one.
            done: (0..workers).map(|_| ArrayQueue::new(max_jobs)).collect(),
        })
    }

    pub fn workers(&self) -> usize {
        self.inbox.len()
    }
}

/// A decrypted packet waiting for its turn: the packet, its port, and the
/// tunnel of the SA that decrypted it (by its stable id, looked up again at
/// release: the snapshot may have changed meanwhile, and a SAD index can
/// then name another SA, whose selectors must not be the ones checked).
pub(super) type Released<B> = (B, PortIdx, TunnelId);

/// Part of one SA group, out for decryption and back.
pub(super) struct Job<B> {
    pub(super) owner: usize,
    pub(super) slot: SaIndex,
    pub(super) tunnel: TunnelId,
    pub(super) sa: Option<SharedInbound>,
    /// The burst's time (engine seconds).
    pub(super) now: u64,
    /// Each packet's order ticket.
    pub(super) tickets: Vec<u64>,
    pub(super) pkts: Vec<B>,
    pub(super) ports: Vec<PortIdx>,
    pub(super) verdicts: Vec<Verdict>,
}

impl<B: PacketBuf> Job<B> {
    /// Decrypts the packets in place, verdicts beside them.
    pub(super) fn decrypt(&mut self) {
        self.verdicts.clear();
        self.verdicts.resize(self.pkts.len(), Verdict::default());
        if let Some(sa) = &self.sa {
            sa.decap_burst(&mut self.pkts, &mut self.verdicts, self.now);
        }
    }
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
    /// Job boxes allocated so far (at most `rings.max_jobs`).
    boxes: usize,
    /// Round robin over the other workers.
    next: usize,
    pub(super) burst: usize,
    /// By SAD index: the reorder stage of an SA this worker spread.
    pub(super) reorders: Vec<Option<Reorder<Released<B>>>>,
    /// The part this worker decrypts itself (never handed out).
    pub(super) own: Option<Box<Job<B>>>,
    /// The parts of the group being split (empty between groups).
    pub(super) staged: Vec<Box<Job<B>>>,
}

impl<B: PacketBuf> Spread<B> {
    pub(super) fn new(me: usize, rings: Arc<SpreadRings<B>>, burst: usize) -> Self {
        let workers = rings.workers();
        let mut s = Spread {
            me,
            rings,
            free: Vec::new(),
            boxes: 0,
            next: me,
            burst,
            reorders: Vec::new(),
            own: None,
            staged: Vec::with_capacity(workers),
        };
        s.own = Some(s.new_box());
        s
    }

    fn new_box(&self) -> Box<Job<B>> {
        Box::new(Job {
            owner: self.me,
            slot: SaIndex(0),
            tunnel: TunnelId(0),
            sa: None,
            now: 0,
            tickets: Vec::with_capacity(self.burst),
            pkts: Vec::with_capacity(self.burst),
            ports: Vec::with_capacity(self.burst),
            verdicts: Vec::with_capacity(self.burst),
        })
    }

    pub(super) fn workers(&self) -> usize {
        self.rings.workers()
    }

    /// The reorder stage of SA `slot`, made on first use.
    pub(super) fn reorder(&mut self, slot: SaIndex) -> &mut Reorder<Released<B>> {
        let i = slot.0 as usize;
        if self.reorders.len() <= i {
            self.reorders.resize_with(i + 1, || None);
        }
        self.reorders[i].get_or_insert_with(|| Reorder::new(REORDER_CAPACITY, MAX_WAIT_NS))
    }

    /// Outstanding tickets of SA `slot` (0 when it has no stage).
    pub(super) fn outstanding(&self, slot: SaIndex) -> usize {
        self.reorders
            .get(slot.0 as usize)
            .and_then(Option::as_ref)
            .map_or(0, Reorder::outstanding)
    }

    /// An empty job box, if this owner may have one more out.
    pub(super) fn job(&mut self) -> Option<Box<Job<B>>> {
        if let Some(j) = self.free.pop() {
            return Some(j);
        }
        if self.boxes == self.rings.max_jobs {
            return None;
        }
        self.boxes += 1;
        Some(self.new_box())
    }

    /// A box back (emptied) for reuse.
    pub(super) fn recycle(&mut self, mut job: Box<Job<B>>) {
        job.sa = None;
        job.tickets.clear();
        job.pkts.clear();
        job.ports.clear();
        self.free.push(job);
    }

    /// The next worker to hand a part to (never this one).
    pub(super) fn next_worker(&mut self) -> usize {
        let n = self.workers();
        self.next = (self.next + 1) % n;
        if self.next == self.me {
            self.next = (self.next + 1) % n;
        }
        self.next
    }

    /// Hands `job` to worker `to`; gives it back if the inbox is full.
    pub(super) fn send(&self, to: usize, job: Box<Job<B>>) -> Result<(), Box<Job<B>>> {
        self.rings.inbox[to].push(job)
    }

    /// A job from this worker's inbox, to decrypt.
    pub(super) fn take_work(&self) -> Option<Box<Job<B>>> {
        self.rings.inbox[self.me].pop()
    }

    /// Returns a decrypted job to its owner. The owner's return ring holds
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

    /// Every packet waiting in a reorder stage, decrypted (at shutdown).
    pub(super) fn drain(&mut self) -> Vec<Released<B>> {
        let mut out = Vec::new();
        for r in self.reorders.iter_mut().flatten() {
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
