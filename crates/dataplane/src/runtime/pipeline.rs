//! `mode = "pipeline"`: one I/O lcore polls every port (queue 0) and hands
//! each frame over a single-producer/single-consumer `rte_ring` to the
//! worker its flow hashes to ([`crate::steer`]); workers run the same core
//! as in run-to-completion mode and hand their output back over one ring
//! per port; the I/O lcore transmits. A flow always meets the same worker
//! and every ring is FIFO, so flows keep their order.
//!
//! Counting: a worker's `tx` is what it handed back; the I/O lcore counts
//! what the devices sent (port `tx_packets`) and its own drops (`ring_full`
//! when a worker's ring is full, `tx_full` when a device refuses), each as
//! one received and one dropped packet, so its counters balance on their own.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dpdk::{Burst, Mbuf, RingConsumer, RingProducer, RxQueue, TxQueue};
use espgw_control::config::Poll;
use espgw_wire::PacketBuf;

use super::poller::{
    send_with_retries, Backoff, MbufPool, MbufWorker, PacketPath, Publisher, Stop, WorkerSetup,
};
use crate::counters::WorkerCounters;
use crate::reason::DropReason;
use crate::steer::worker_for;
use crate::tx::TxQueues;
use crate::worker::Now;

/// Frames per ring operation (I/O lcore and workers).
const IO_BURST: usize = 32;

/// DPDK port id -> config port index.
pub(super) type PortIndex = Arc<Vec<Option<usize>>>;

/// The I/O lcore.
pub(super) struct IoJob {
    pub rx: Vec<RxQueue>,
    pub tx: Vec<TxQueue>,
    pub to_workers: Vec<RingProducer>,
    /// `[worker][port]`.
    pub from_workers: Vec<Vec<RingConsumer>>,
    pub port_index: PortIndex,
    pub poll: Poll,
    /// Longest idle sleep of adaptive polling.
    pub idle_sleep: Duration,
    pub stop: Arc<AtomicBool>,
    /// Workers that have finished (drained their input and handed back).
    pub done: Arc<AtomicUsize>,
    /// Set once this lcore has stopped reading ports: nothing more will
    /// enter the workers' rings.
    pub rx_stopped: Arc<AtomicBool>,
    /// Where its counters are copied for the control thread.
    pub live: Arc<Mutex<WorkerCounters>>,
}

impl IoJob {
    pub fn run(mut self) -> WorkerCounters {
        // Also if this lcore panics: the workers then drain and finish.
        let _rx_stopped = SetOnDrop(Arc::clone(&self.rx_stopped));
        let workers = self.to_workers.len();
        let ports = self.rx.len();
        let mut c = WorkerCounters::new(ports, 0);
        let mut rx_burst: Burst<IO_BURST> = Burst::new();
        let mut tx_burst: Burst<IO_BURST> = Burst::new();
        let mut staged: Vec<Burst<IO_BURST>> = (0..workers).map(|_| Burst::new()).collect();
        let mut frames: Vec<Mbuf> = Vec::with_capacity(IO_BURST);
        let mut backoff = Backoff::new(self.poll, self.idle_sleep);
        let mut publisher = Publisher::new(Arc::clone(&self.live));
        loop {
            let stopping = self.stop.load(Ordering::Relaxed);
            publisher.publish(&c);
            if stopping {
                self.rx_stopped.store(true, Ordering::Release);
            }
            let mut work = 0;
            if !stopping {
                for q in self.rx.iter_mut() {
                    let n = q.rx_burst(&mut rx_burst);
                    if n == 0 {
                        continue;
                    }
                    work += n;
                    while let Some(m) = rx_burst.pop() {
                        frames.push(m);
                    }
                    frames.reverse();
                    for m in frames.drain(..) {
                        let w = worker_for(m.data(), workers);
                        if staged[w].is_full() {
                            hand_over(
                                &mut self.to_workers[w],
                                &mut staged[w],
                                &mut c,
                                &self.port_index,
                            );
                        }
                        if let Err(m) = staged[w].push(m) {
                            ring_full(&mut c, &self.port_index, &m);
                        }
                    }
                    for (w, s) in staged.iter_mut().enumerate() {
                        hand_over(&mut self.to_workers[w], s, &mut c, &self.port_index);
                    }
                }
            }
            for from in self.from_workers.iter_mut() {
                for (port, ring) in from.iter_mut().enumerate() {
                    work += transmit(ring, &mut self.tx[port], port, &mut tx_burst, &mut c);
                }
            }
            if stopping && work == 0 && self.done.load(Ordering::Acquire) == workers {
                // Every worker finished and its rings are empty.
                break;
            }
            c.polls += 1;
            c.busy_polls += u64::from(work > 0);
            backoff.after(work);
        }
        c
    }
}

fn port_of(port_index: &PortIndex, m: &Mbuf) -> usize {
    port_index
        .get(usize::from(m.port()))
        .copied()
        .flatten()
        .unwrap_or(0)
}

fn ring_full(c: &mut WorkerCounters, port_index: &PortIndex, m: &Mbuf) {
    let p = port_of(port_index, m);
    c.rx += 1;
    if let Some(pc) = c.ports.get_mut(p) {
        pc.rx_packets += 1;
        pc.rx_bytes += m.len() as u64;
    }
    c.drop(DropReason::RingFull, Some(p));
}

/// Enqueues `staged` to a worker; what the ring refuses is dropped and counted.
fn hand_over(
    ring: &mut RingProducer,
    staged: &mut Burst<IO_BURST>,
    c: &mut WorkerCounters,
    port_index: &PortIndex,
) {
    if staged.is_empty() {
        return;
    }
    ring.enqueue_burst(staged);
    for m in staged.iter() {
        ring_full(c, port_index, m);
    }
    staged.clear();
}

/// Sends what one worker handed back for `port`; returns frames moved.
fn transmit(
    ring: &mut RingConsumer,
    q: &mut TxQueue,
    port: usize,
    burst: &mut Burst<IO_BURST>,
    c: &mut WorkerCounters,
) -> usize {
    let mut moved = 0;
    loop {
        let n = ring.dequeue_burst(burst);
        if n == 0 {
            return moved;
        }
        moved += n;
        let bytes: u64 = burst.iter().map(|m| m.len() as u64).sum();
        send_with_retries(q, burst);
        let refused = burst.len() as u64;
        let refused_bytes: u64 = burst.iter().map(|m| m.len() as u64).sum();
        burst.clear();
        let pc = &mut c.ports[port];
        pc.tx_packets += n as u64 - refused;
        pc.tx_bytes += bytes - refused_bytes;
        pc.tx_dropped += refused;
        for _ in 0..refused {
            c.rx += 1;
            c.drop(DropReason::TxFull, None);
        }
    }
}

/// A worker lcore of the pipeline.
pub(super) struct CryptoJob {
    pub setup: WorkerSetup,
    pub from_io: RingConsumer,
    /// One ring back to the I/O lcore per port.
    pub to_io: Vec<RingProducer>,
    pub port_index: PortIndex,
    pub rx_stopped: Arc<AtomicBool>,
    pub done: Arc<AtomicUsize>,
}

impl CryptoJob {
    pub fn run(self) -> WorkerCounters {
        const N: usize = IO_BURST;
        // Counted when this function returns, and when it unwinds: the
        // I/O lcore waits for every worker before it stops.
        let _done = CountOnDrop(Arc::clone(&self.done));
        let path = Rings {
            from_io: self.from_io,
            to_io: self.to_io,
            port_index: self.port_index,
            rx_stopped: self.rx_stopped,
            burst: Burst::new(),
            out: Burst::new(),
            frames: Vec::with_capacity(N),
            run: Vec::with_capacity(N),
        };
        self.setup.run(N, path)
    }
}

/// A pipeline worker's rings: one from the I/O lcore, one back per port.
struct Rings {
    from_io: RingConsumer,
    to_io: Vec<RingProducer>,
    port_index: PortIndex,
    rx_stopped: Arc<AtomicBool>,
    burst: Burst<IO_BURST>,
    out: Burst<IO_BURST>,
    frames: Vec<Mbuf>,
    /// Consecutive frames of one port (the core takes a burst per port).
    run: Vec<Mbuf>,
}

impl PacketPath<Mbuf, MbufPool> for Rings {
    /// Read before the dequeue: once the I/O lcore stopped reading ports,
    /// an empty ring means there is nothing left to do.
    fn stop(&self) -> Stop {
        if self.rx_stopped.load(Ordering::Acquire) {
            Stop::WhenDrained
        } else {
            Stop::No
        }
    }

    fn receive(&mut self, worker: &mut MbufWorker, txq: &mut TxQueues<Mbuf>, now: Now) -> usize {
        let n = self.from_io.dequeue_burst(&mut self.burst);
        if n > 0 {
            while let Some(m) = self.burst.pop() {
                self.frames.push(m);
            }
            self.frames.reverse();
            // The core takes a burst per port: split into runs.
            let mut current = None;
            for m in self.frames.drain(..) {
                let p = port_of(&self.port_index, &m);
                if let Some(c) = current.filter(|c| *c != p) {
                    worker.process_burst(c, &mut self.run, txq, now);
                }
                current = Some(p);
                self.run.push(m);
            }
            if let Some(c) = current {
                worker.process_burst(c, &mut self.run, txq, now);
            }
        }
        n
    }

    /// What is handed back is not work of this poll: only what came in
    /// counts (the I/O lcore counts what it transmits).
    fn send(&mut self, worker: &mut MbufWorker, txq: &mut TxQueues<Mbuf>) -> usize {
        hand_back(worker, txq, &mut self.to_io, &mut self.out);
        0
    }
}

/// Adds one to a count when dropped (also while unwinding).
struct CountOnDrop(Arc<AtomicUsize>);

impl std::ops::Drop for CountOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

/// Sets a flag when dropped (also while unwinding).
struct SetOnDrop(Arc<AtomicBool>);

impl std::ops::Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

fn hand_back<const N: usize>(
    worker: &mut MbufWorker,
    txq: &mut TxQueues<Mbuf>,
    rings: &mut [RingProducer],
    out: &mut Burst<N>,
) {
    for (port, ring) in rings.iter_mut().enumerate() {
        let mut frames = txq.drain(port).peekable();
        while frames.peek().is_some() {
            while !out.is_full() {
                let Some(mut m) = frames.next() else { break };
                m.clear_offload_flags();
                if let Err(m) = out.push(m) {
                    drop(m);
                }
            }
            let handed = ring.enqueue_burst(out);
            let refused = out.len();
            out.clear();
            worker.count_handoff(handed as u64, refused as u64);
        }
    }
}
