//! The poll loop both data-plane modes share. A worker lcore, in
//! run-to-completion mode ([`super::worker_loop`]) or in the pipeline
//! ([`super::pipeline`]), runs [`WorkerSetup::run`]: each poll takes what
//! came in, runs the core's timers, sends what the core queued, passes the
//! RCU quiescent point (switching to a newly published snapshot), counts the
//! poll, publishes its counters every [`PUBLISH_EVERY`] and backs off when
//! idle. What differs between the modes (where packets come from, where the
//! output goes, how the loop ends) is a [`PacketPath`], a generic parameter:
//! no dynamic dispatch, nothing allocated per poll. The pipeline's I/O lcore
//! has no core of its own; it uses the parts that apply to it
//! ([`Publisher`], [`Backoff`], [`send_with_retries`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dpdk::{Burst, Mbuf, Mempool, TxQueue};
use espgw_control::config::Poll;
use espgw_control::tables::Reader;

use super::control::Snapshot;
use crate::counters::WorkerCounters;
use crate::neighbor::SharedNeighbors;
use crate::pool::BufPool;
use crate::tx::TxQueues;
use crate::worker::{Now, Worker};

/// How often the live counters are copied out for the control thread.
pub(super) const PUBLISH_EVERY: Duration = Duration::from_millis(100);
/// TX calls that took nothing before the rest of a burst is dropped.
pub(super) const TX_RETRIES: u32 = 4;
/// Empty polls in a row before an adaptive poller starts sleeping.
const SPIN_POLLS: u32 = 64;
const MIN_SLEEP: Duration = Duration::from_micros(10);

/// The mbuf pool as the core's buffer source (ARP/ND requests).
#[derive(Clone)]
pub struct MbufPool(pub Mempool);

impl BufPool<Mbuf> for MbufPool {
    fn alloc(&self) -> Option<Mbuf> {
        self.0.alloc()
    }
}

/// The core as the runtime runs it: on mbufs from the DPDK pool.
pub(super) type MbufWorker = Worker<Mbuf, MbufPool>;

/// Idle handling: `busy` spins; `adaptive` sleeps after [`SPIN_POLLS`]
/// empty polls, 10 µs doubling up to `[dataplane] idle_sleep_us` (100 µs
/// unless configured), back to spinning on traffic.
pub(super) struct Backoff {
    adaptive: bool,
    idle: u32,
    sleep: Duration,
    max_sleep: Duration,
}

impl Backoff {
    /// Call on the polling thread itself: an adaptive one asks the kernel
    /// for exact sleeps (see [`dpdk::lcore::set_precise_sleep`]).
    pub fn new(poll: Poll, max_sleep: Duration) -> Self {
        if poll == Poll::Adaptive && !dpdk::lcore::set_precise_sleep() {
            tracing::debug!("timer slack not lowered: adaptive sleeps may end up to 50 µs late");
        }
        Backoff {
            adaptive: poll == Poll::Adaptive,
            idle: 0,
            sleep: MIN_SLEEP,
            max_sleep: max_sleep.max(MIN_SLEEP),
        }
    }

    /// Call once per loop with the number of packets moved.
    pub fn after(&mut self, work: usize) {
        if work > 0 {
            self.idle = 0;
            self.sleep = MIN_SLEEP;
            return;
        }
        self.idle = self.idle.saturating_add(1);
        if self.adaptive && self.idle > SPIN_POLLS {
            std::thread::sleep(self.sleep);
            self.sleep = (self.sleep * 2).min(self.max_sleep);
        }
    }
}

/// Copies an lcore's counters to where the control thread reads them, at
/// most every [`PUBLISH_EVERY`]; never waits for the lock (a poll that finds
/// it taken publishes at the next one).
pub(super) struct Publisher {
    live: Arc<Mutex<WorkerCounters>>,
    last: Instant,
}

impl Publisher {
    pub fn new(live: Arc<Mutex<WorkerCounters>>) -> Self {
        Publisher {
            live,
            last: Instant::now(),
        }
    }

    /// Call once per loop.
    #[inline]
    pub fn publish(&mut self, counters: &WorkerCounters) {
        if self.last.elapsed() >= PUBLISH_EVERY {
            self.last = Instant::now();
            if let Ok(mut live) = self.live.try_lock() {
                live.clone_from(counters);
            }
        }
    }
}

/// Hands `burst` to the device queue until it is empty or [`TX_RETRIES`]
/// calls took nothing; returns the frames sent. What is left in `burst` was
/// refused: the caller counts it and clears it (which frees it).
pub(super) fn send_with_retries<const N: usize>(q: &mut TxQueue, burst: &mut Burst<N>) -> usize {
    let mut sent = 0;
    let mut misses = 0;
    while !burst.is_empty() && misses < TX_RETRIES {
        let n = q.tx_burst(burst);
        if n == 0 {
            misses += 1;
        }
        sent += n;
    }
    sent
}

/// When a worker loop ends, as its [`PacketPath`] sees it at the top of a poll.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Stop {
    /// Keep polling.
    No,
    /// End before this poll takes anything (run to completion: the RX
    /// queues keep what is left, the ports are stopped after).
    Now,
    /// End after the first poll that takes nothing (the pipeline: nothing
    /// more enters the worker's ring, so it is drained first).
    WhenDrained,
}

/// What sets one worker loop apart from the other: where packets come from
/// and where the output goes.
pub(super) trait PacketPath {
    /// Read once at the top of every poll, before any input is taken.
    fn stop(&self) -> Stop;
    /// Feeds what arrived to the core; returns the packets taken.
    fn receive(&mut self, worker: &mut MbufWorker, txq: &mut TxQueues<Mbuf>, now: Now) -> usize;
    /// Sends what the core queued; returns the frames that count as work of
    /// this poll (for `busy_polls` and the back-off).
    fn send(&mut self, worker: &mut MbufWorker, txq: &mut TxQueues<Mbuf>) -> usize;
}

/// Everything a worker lcore starts from, whichever mode, moved onto it.
pub(super) struct WorkerSetup {
    pub id: usize,
    /// The control plane's snapshots (the first one is where it starts).
    pub reader: Reader<Snapshot>,
    pub pool: MbufPool,
    pub shared: SharedNeighbors,
    pub poll: Poll,
    /// Longest idle sleep of adaptive polling.
    pub idle_sleep: Duration,
    pub started: Instant,
    /// Where its counters are copied for the control thread.
    pub live: Arc<Mutex<WorkerCounters>>,
}

impl WorkerSetup {
    /// Polls `path` until it says stop, with staging sized for bursts of
    /// `burst`; then drops what still waits for a neighbor, sends the rest
    /// and returns the final counters.
    pub fn run<P: PacketPath>(mut self, burst: usize, mut path: P) -> WorkerCounters {
        let tables = Arc::clone(self.reader.get());
        let ports = tables.ports.len();
        let mut worker = Worker::new(
            self.id,
            tables,
            self.pool.clone(),
            burst,
            self.shared.clone(),
        );
        #[cfg(debug_assertions)]
        if let Some(n) = crate::supervise::injected_panic(self.id) {
            worker.inject_panic_after(n);
        }
        let mut txq: TxQueues<Mbuf> = TxQueues::new(ports, 2 * burst);
        let mut backoff = Backoff::new(self.poll, self.idle_sleep);
        let mut publisher = Publisher::new(Arc::clone(&self.live));
        loop {
            let stop = path.stop();
            if stop == Stop::Now {
                break;
            }
            let now = Now {
                ns: self.started.elapsed().as_nanos() as u64,
            };
            let got = path.receive(&mut worker, &mut txq, now);
            worker.tick(&mut txq, now);
            let sent = path.send(&mut worker, &mut txq);
            // A quiescent point: between bursts, holding nothing from the
            // old snapshot but the worker's own reference.
            if self.reader.quiescent() {
                worker.set_tables(Arc::clone(self.reader.get()));
            }
            worker.count_poll(got + sent > 0);
            publisher.publish(worker.counters());
            if stop == Stop::WhenDrained && got == 0 {
                break;
            }
            backoff.after(got + sent);
        }
        worker.shutdown();
        path.send(&mut worker, &mut txq);
        worker.counters().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adaptive: spins for SPIN_POLLS empty polls, then sleeps from 10 µs
    /// doubling up to the configured maximum, and is back at 10 µs after
    /// any work. Busy polling never backs off.
    #[test]
    fn backoff_doubles_up_to_the_configured_sleep_and_resets_on_work() {
        let mut b = Backoff::new(Poll::Adaptive, Duration::from_micros(50));
        for _ in 0..SPIN_POLLS {
            b.after(0);
        }
        assert_eq!(b.sleep, MIN_SLEEP, "still spinning");
        let mut seen = Vec::new();
        for _ in 0..5 {
            b.after(0);
            seen.push(b.sleep.as_micros());
        }
        assert_eq!(seen, [20, 40, 50, 50, 50]);
        b.after(3);
        assert_eq!((b.idle, b.sleep), (0, MIN_SLEEP));

        // Busy: the sleep never grows (`after` never reaches the sleep).
        let mut busy = Backoff::new(Poll::Busy, Duration::from_micros(50));
        for _ in 0..10 * SPIN_POLLS {
            busy.after(0);
        }
        assert_eq!(busy.sleep, MIN_SLEEP);
    }
}
