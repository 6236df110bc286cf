//! One worker lcore's loop: RX burst from each port, the core, TX flush,
//! timers, counters published, idle back-off.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dpdk::{Burst, Mbuf, Mempool, RxQueue, TxQueue};
use espgw_control::config::Poll;
use espgw_control::tables::Reader;

use super::control::Snapshot;
use espgw_wire::PacketBuf;

use crate::counters::WorkerCounters;
use crate::neighbor::SharedNeighbors;
use crate::pool::BufPool;
use crate::tx::TxQueues;
use crate::worker::{Now, Worker};

/// The mbuf pool as the core's buffer source (ARP/ND requests).
#[derive(Clone)]
pub struct MbufPool(pub Mempool);

impl BufPool<Mbuf> for MbufPool {
    fn alloc(&self) -> Option<Mbuf> {
        self.0.alloc()
    }
}

/// Empty polls in a row before an adaptive worker starts sleeping.
const SPIN_POLLS: u32 = 64;
const MIN_SLEEP: Duration = Duration::from_micros(10);
/// How often the live counters are copied out for the control thread.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);
/// TX calls that took nothing before the rest of a burst is dropped.
const TX_RETRIES: u32 = 4;

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

/// Everything a worker lcore needs, moved onto it.
pub(super) struct Job {
    pub id: usize,
    /// The control plane's snapshots (the first one is where it starts).
    pub reader: Reader<Snapshot>,
    pub pool: MbufPool,
    pub shared: SharedNeighbors,
    pub rx: Vec<RxQueue>,
    pub tx: Vec<TxQueue>,
    pub poll: Poll,
    /// Longest idle sleep of adaptive polling.
    pub idle_sleep: Duration,
    pub burst: usize,
    pub stop: Arc<AtomicBool>,
    pub started: Instant,
    pub live: Arc<Mutex<WorkerCounters>>,
}

impl Job {
    /// Runs until `stop`; returns the final counters. The burst size is a
    /// compile-time constant of the DPDK burst type: the config's `burst`
    /// is rounded up to the next supported size.
    pub fn run(self) -> WorkerCounters {
        match self.burst {
            0..=16 => self.run_n::<16>(),
            17..=32 => self.run_n::<32>(),
            33..=64 => self.run_n::<64>(),
            65..=128 => self.run_n::<128>(),
            129..=256 => self.run_n::<256>(),
            _ => self.run_n::<512>(),
        }
    }

    fn run_n<const N: usize>(mut self) -> WorkerCounters {
        let tables = Arc::clone(self.reader.get());
        let ports = tables.ports.len();
        let mut worker = Worker::new(self.id, tables, self.pool.clone(), N, self.shared.clone());
        #[cfg(debug_assertions)]
        if let Some(n) = crate::supervise::injected_panic(self.id) {
            worker.inject_panic_after(n);
        }
        let mut rx_burst: Burst<N> = Burst::new();
        let mut tx_burst: Burst<N> = Burst::new();
        let mut pkts: Vec<Mbuf> = Vec::with_capacity(N);
        let mut txq: TxQueues<Mbuf> = TxQueues::new(ports, 2 * N);
        let mut backoff = Backoff::new(self.poll, self.idle_sleep);
        let mut last_publish = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            let now = Now {
                ns: self.started.elapsed().as_nanos() as u64,
            };
            let mut got = 0;
            for (port, q) in self.rx.iter_mut().enumerate() {
                let n = q.rx_burst(&mut rx_burst);
                if n == 0 {
                    continue;
                }
                got += n;
                // Burst has no in-order drain: pop (reversed), then reverse.
                while let Some(m) = rx_burst.pop() {
                    pkts.push(m);
                }
                pkts.reverse();
                worker.process_burst(port, &mut pkts, &mut txq, now);
            }
            worker.tick(&mut txq, now);
            let sent = flush(&mut worker, &mut txq, &mut self.tx, &mut tx_burst);
            // A quiescent point: between bursts, holding nothing from the
            // old snapshot but the worker's own reference.
            if self.reader.quiescent() {
                worker.set_tables(Arc::clone(self.reader.get()));
            }
            worker.count_poll(got + sent > 0);
            if last_publish.elapsed() >= PUBLISH_EVERY {
                last_publish = Instant::now();
                if let Ok(mut live) = self.live.try_lock() {
                    live.clone_from(worker.counters());
                }
            }
            backoff.after(got + sent);
        }
        worker.shutdown();
        flush(&mut worker, &mut txq, &mut self.tx, &mut tx_burst);
        worker.counters().clone()
    }
}

/// Sends what the worker queued, port by port, in bursts of `N`; counts
/// what the device took and drops (frees, counts) what it would not.
/// Returns the number of frames sent.
fn flush<P: BufPool<Mbuf>, const N: usize>(
    worker: &mut Worker<Mbuf, P>,
    txq: &mut TxQueues<Mbuf>,
    queues: &mut [TxQueue],
    burst: &mut Burst<N>,
) -> usize {
    let mut total = 0;
    for (port, q) in queues.iter_mut().enumerate() {
        let mut frames = txq.drain(port).peekable();
        while frames.peek().is_some() {
            let mut bytes = 0u64;
            while !burst.is_full() {
                let Some(mut m) = frames.next() else { break };
                m.clear_offload_flags();
                bytes += m.len() as u64;
                if let Err(m) = burst.push(m) {
                    drop(m);
                }
            }
            let mut sent = 0;
            let mut misses = 0;
            while !burst.is_empty() && misses < TX_RETRIES {
                let n = q.tx_burst(burst);
                if n == 0 {
                    misses += 1;
                }
                sent += n;
            }
            let refused = burst.len();
            let refused_bytes: u64 = burst.iter().map(|m| m.len() as u64).sum();
            burst.clear();
            worker.count_tx(port, sent as u64, bytes - refused_bytes, refused as u64);
            total += sent;
        }
    }
    total
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
