//! The poll loop both data-plane modes share. A worker lcore, in
//! run-to-completion mode ([`super::worker_loop`]) or in the pipeline
//! ([`super::pipeline`]), runs [`WorkerSetup::run`]: each poll takes what
//! came in, runs the core's timers, sends what the core queued, passes the
//! RCU quiescent point (switching to a newly published snapshot), counts the
//! poll, publishes its counters every [`PUBLISH_EVERY`] and backs off when
//! idle. What differs between the modes (where packets come from, where the
//! output goes, how the loop ends) is a [`PacketPath`], a generic parameter:
//! no dynamic dispatch, nothing allocated per poll. The loop is also generic
//! over the buffer type, so that its tests drive it with heap buffers. The
//! pipeline's I/O lcore has no core of its own; it uses the parts that
//! apply to it ([`Publisher`], [`Backoff`], [`send_with_retries`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dpdk::{Burst, Mbuf, Mempool, TxQueue};
use espgw_control::config::Poll;
use espgw_control::tables::Reader;
use espgw_wire::PacketBuf;

use super::control::Snapshot;
use crate::counters::WorkerCounters;
use crate::neighbor::SharedNeighbors;
use crate::network::Network;
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
    /// Where [`Self::publish`]'s clock starts.
    origin: Instant,
    /// When it last published, in nanoseconds of the caller's clock.
    last_ns: u64,
}

impl Publisher {
    pub fn new(live: Arc<Mutex<WorkerCounters>>) -> Self {
        Publisher {
            live,
            origin: Instant::now(),
            last_ns: 0,
        }
    }

    /// Call once per loop (reads the clock).
    #[inline]
    pub fn publish(&mut self, counters: &WorkerCounters) {
        let now_ns = self.origin.elapsed().as_nanos() as u64;
        self.publish_at(counters, now_ns);
    }

    /// Call once per loop with the loop's own clock reading (nanoseconds
    /// from any fixed origin, the same on every call): a worker's poll
    /// reads the clock once, for its `Now`, not a second time here.
    #[inline]
    pub fn publish_at(&mut self, counters: &WorkerCounters, now_ns: u64) {
        if now_ns.saturating_sub(self.last_ns) >= PUBLISH_EVERY.as_nanos() as u64 {
            self.last_ns = now_ns;
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
pub(super) trait PacketPath<B: PacketBuf, P: BufPool<B>> {
    /// Read once at the top of every poll, before any input is taken.
    fn stop(&self) -> Stop;
    /// Feeds what arrived to the core; returns the packets taken.
    fn receive(&mut self, worker: &mut Worker<B, P>, txq: &mut TxQueues<B>, now: Now) -> usize;
    /// Sends what the core queued; returns the frames that count as work of
    /// this poll (for `busy_polls` and the back-off).
    fn send(&mut self, worker: &mut Worker<B, P>, txq: &mut TxQueues<B>) -> usize;
}

/// Everything a worker lcore starts from, whichever mode, moved onto it.
pub(super) struct WorkerSetup<P = MbufPool> {
    pub id: usize,
    /// Ports, routes, static neighbors (fixed for the run).
    pub net: Arc<Network>,
    /// The control plane's snapshots (the first one is where it starts).
    pub reader: Reader<Snapshot>,
    pub pool: P,
    pub shared: SharedNeighbors,
    pub poll: Poll,
    /// Longest idle sleep of adaptive polling.
    pub idle_sleep: Duration,
    pub started: Instant,
    /// Where its counters are copied for the control thread.
    pub live: Arc<Mutex<WorkerCounters>>,
    /// The IKE punt rings, when IKE runs (every worker punts and sends).
    pub punt: Option<Arc<espgw_control::ike::PuntRings>>,
    /// The decrypt fan-out's rings (`SpreadRings<B>` of the run's buffer
    /// type), when `[dataplane] spread_decrypt` is on.
    pub spread: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl<P: Clone> WorkerSetup<P> {
    /// Polls `path` until it says stop, with staging sized for bursts of
    /// `burst`; then drops what still waits for a neighbor, sends the rest
    /// and returns the final counters.
    pub fn run<B, T>(mut self, burst: usize, mut path: T) -> WorkerCounters
    where
        B: PacketBuf + Send + 'static,
        P: BufPool<B>,
        T: PacketPath<B, P>,
    {
        let tables = Arc::clone(self.reader.get());
        let ports = self.net.ports.len();
        let mut worker = Worker::new(
            self.id,
            Arc::clone(&self.net),
            tables,
            self.pool.clone(),
            burst,
            self.shared.clone(),
        );
        if let Some(rings) = &self.punt {
            worker.set_punt(Arc::clone(rings));
        }
        let mut idle_sleep = self.idle_sleep;
        if let Some(rings) = self.spread.take() {
            match rings.downcast::<crate::worker::SpreadRings<B>>() {
                Ok(rings) => {
                    let cap = Duration::from_nanos(rings.steal_after_ns());
                    worker.set_spread(rings);
                    // A worker asleep in its idle backoff does not serve the
                    // parts other workers hand it; the owner drops what is
                    // not back within the reorder bound (`reorder_late`).
                    // Sleeping at most a quarter of the bound (of the
                    // default, with a longer one) keeps an idle
                    // helper in time (tests/e2e/spread.sh: with the
                    // default 100 µs sleep, 9 % of one tunnel's packets
                    // were dropped late; docs/multicore.md).
                    idle_sleep = idle_sleep.min(cap);
                }
                Err(_) => tracing::error!(
                    worker = self.id,
                    "decrypt fan-out rings of another buffer type: not spreading"
                ),
            }
        }
        #[cfg(debug_assertions)]
        if let Some(n) = crate::supervise::injected_panic(self.id) {
            worker.inject_panic_after(n);
        }
        let mut txq: TxQueues<B> = TxQueues::new(ports, 2 * burst);
        let mut backoff = Backoff::new(self.poll, idle_sleep);
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
            let spread = worker.tick(&mut txq, now);
            let sent = path.send(&mut worker, &mut txq);
            // A quiescent point: between bursts, holding nothing from the
            // old snapshot but the worker's own reference (the decrypt
            // fan-out's parts out hold their own).
            if self.reader.quiescent() {
                worker.set_tables(Arc::clone(self.reader.get()));
            }
            worker.count_poll(got + sent + spread > 0);
            publisher.publish_at(worker.counters(), now.ns);
            if stop == Stop::WhenDrained && got == 0 {
                break;
            }
            backoff.after(got + sent + spread);
        }
        worker.shutdown();
        path.send(&mut worker, &mut txq);
        worker.counters().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::VecBufPool;
    use espgw_control::tables::Publisher as TablesPublisher;
    use espgw_wire::VecBuf;

    type TestWorker = Worker<VecBuf, VecBufPool>;

    /// A scripted packet path: poll k (from 0) takes `input[k]` frames (0
    /// past the end), `send` reports `sent` frames per poll, and the stop
    /// it reports is `stop_at(k)`. It records what the loop did with it.
    struct Script {
        input: Vec<usize>,
        sent: usize,
        stop_at: fn(usize) -> Stop,
        polls: usize,
        sends: usize,
        /// Published to the worker's reader at the end of poll 0.
        next_tables: Option<(TablesPublisher<Snapshot>, Snapshot)>,
        /// Per poll: whether the worker read `next_tables` when it was fed.
        saw_next: Vec<bool>,
        /// Per poll: nanoseconds of `now`.
        nows: Vec<u64>,
        /// Sleep per poll (to let PUBLISH_EVERY pass).
        nap: Duration,
    }

    impl Script {
        fn new(input: Vec<usize>, stop_at: fn(usize) -> Stop) -> Self {
            Script {
                input,
                sent: 0,
                stop_at,
                polls: 0,
                sends: 0,
                next_tables: None,
                saw_next: Vec::new(),
                nows: Vec::new(),
                nap: Duration::ZERO,
            }
        }
    }

    impl PacketPath<VecBuf, VecBufPool> for Script {
        fn stop(&self) -> Stop {
            (self.stop_at)(self.polls)
        }

        fn receive(
            &mut self,
            worker: &mut TestWorker,
            txq: &mut TxQueues<VecBuf>,
            now: Now,
        ) -> usize {
            let k = self.polls;
            self.polls += 1;
            self.nows.push(now.ns);
            if let Some((publisher, next)) = &mut self.next_tables {
                self.saw_next.push(Arc::ptr_eq(worker.tables(), next));
                if k == 0 {
                    publisher.publish(Arc::new(Arc::clone(next)));
                }
            }
            let n = self.input.get(k).copied().unwrap_or(0);
            // Runts: each is dropped and counted, which is all this needs.
            let mut pkts: Vec<VecBuf> = (0..n).map(|_| VecBuf::from_packet(&[0u8; 20])).collect();
            worker.process_burst(0, &mut pkts, txq, now);
            std::thread::sleep(self.nap);
            n
        }

        fn send(&mut self, _worker: &mut TestWorker, _txq: &mut TxQueues<VecBuf>) -> usize {
            self.sends += 1;
            self.sent
        }
    }

    struct Harness {
        setup: WorkerSetup<VecBufPool>,
        tables: TablesPublisher<Snapshot>,
        live: Arc<Mutex<WorkerCounters>>,
    }

    fn harness() -> Harness {
        let tables = TablesPublisher::new(Arc::new(crate::tests::gateway_a_tables()));
        let live = Arc::new(Mutex::new(WorkerCounters::default()));
        let setup = WorkerSetup {
            id: 0,
            net: Arc::new(crate::tests::gateway_a_net()),
            reader: tables.reader(),
            pool: VecBufPool,
            shared: SharedNeighbors::default(),
            poll: Poll::Busy,
            idle_sleep: Duration::from_micros(100),
            started: Instant::now(),
            live: Arc::clone(&live),
            punt: None,
            spread: None,
        };
        Harness {
            setup,
            tables,
            live,
        }
    }

    fn run(setup: WorkerSetup<VecBufPool>, script: &mut Script) -> WorkerCounters {
        setup.run(32, script)
    }

    /// The loop takes its path by value; the tests keep the script to read
    /// what happened.
    impl PacketPath<VecBuf, VecBufPool> for &mut Script {
        fn stop(&self) -> Stop {
            (**self).stop()
        }
        fn receive(&mut self, w: &mut TestWorker, txq: &mut TxQueues<VecBuf>, now: Now) -> usize {
            (**self).receive(w, txq, now)
        }
        fn send(&mut self, w: &mut TestWorker, txq: &mut TxQueues<VecBuf>) -> usize {
            (**self).send(w, txq)
        }
    }

    /// Run to completion: a stop seen at the top of a poll ends the loop
    /// before anything more is taken (input still waiting stays where it
    /// is); the output is sent once more after the shutdown.
    #[test]
    fn stop_now_ends_the_loop_before_the_poll_takes_anything() {
        let h = harness();
        let mut script = Script::new(
            vec![3, 5, 7, 9],
            |k| if k >= 2 { Stop::Now } else { Stop::No },
        );
        let c = run(h.setup, &mut script);
        assert_eq!(
            script.polls, 2,
            "the third poll saw the stop and took nothing"
        );
        assert_eq!((c.polls, c.busy_polls), (2, 2));
        assert_eq!(c.rx, 3 + 5);
        assert_eq!(
            script.sends,
            2 + 1,
            "once per poll and once after the shutdown"
        );
        assert!(c.balanced());
    }

    /// The pipeline: once the stop is seen, polling goes on until a poll
    /// takes nothing, so whatever was still in the ring is processed.
    #[test]
    fn stop_when_drained_ends_after_the_first_poll_that_takes_nothing() {
        let h = harness();
        let mut script = Script::new(vec![3, 0, 5, 7, 0, 4], |k| {
            if k >= 2 {
                Stop::WhenDrained
            } else {
                Stop::No
            }
        });
        let c = run(h.setup, &mut script);
        // Poll 1 took nothing but the stop was not seen yet; polls 2 and 3
        // drain, poll 4 is empty: the end. Poll 5's input is never taken.
        assert_eq!(script.polls, 5);
        assert_eq!((c.polls, c.busy_polls), (5, 3));
        assert_eq!(c.rx, 3 + 5 + 7);
        assert_eq!(script.sends, 5 + 1);
    }

    /// What `send` reports counts as work of the poll (busy_polls), as
    /// run to completion counts what it transmitted.
    #[test]
    fn what_send_reports_makes_a_poll_busy() {
        let h = harness();
        let mut script = Script::new(vec![], |k| if k >= 4 { Stop::Now } else { Stop::No });
        script.sent = 1;
        let c = run(h.setup, &mut script);
        assert_eq!((c.polls, c.busy_polls), (4, 4));
    }

    /// A snapshot published while the worker runs is taken at the next
    /// quiescent point: the poll after the one in which it was published
    /// already feeds the worker with it. `now` is the time since `started`.
    #[test]
    fn a_published_snapshot_is_taken_at_the_end_of_the_poll() {
        let h = harness();
        let next: Snapshot = crate::tests::gateway_a_tables();
        let mut script = Script::new(vec![1, 1, 1], |k| if k >= 3 { Stop::Now } else { Stop::No });
        script.next_tables = Some((h.tables, Arc::clone(&next)));
        let c = run(h.setup, &mut script);
        assert_eq!(script.saw_next, [false, true, true]);
        assert_eq!(c.polls, 3);
        assert!(
            script.nows.windows(2).all(|w| w[0] <= w[1]),
            "{:?}",
            script.nows
        );
    }

    /// Counters reach the live copy every PUBLISH_EVERY, while running.
    #[test]
    fn counters_are_published_while_the_loop_runs() {
        let h = harness();
        let mut script = Script::new(vec![2; 64], |k| if k >= 30 { Stop::Now } else { Stop::No });
        script.nap = Duration::from_millis(5);
        let live = Arc::clone(&h.live);
        let c = run(h.setup, &mut script);
        let published = live.lock().unwrap().clone();
        // 30 polls of at least 5 ms each: published at least once, a copy
        // of one moment (every poll took 2 frames), never ahead of the end.
        assert!(published.polls >= 1, "nothing published");
        assert!(published.polls <= c.polls);
        assert_eq!(published.rx, 2 * published.polls);
    }

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
