//! Run-to-completion mode: a worker lcore polls its own RX queue of every
//! port and transmits on its own TX queue of every port. The loop itself is
//! the shared one ([`super::poller`]); this is its packet path.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use dpdk::{Burst, Mbuf, RxQueue, TxQueue};
use espgw_wire::PacketBuf;

use super::poller::{send_with_retries, MbufPool, MbufWorker, PacketPath, Stop, WorkerSetup};
use crate::counters::WorkerCounters;
use crate::tx::TxQueues;
use crate::worker::Now;

/// Everything a worker lcore needs, moved onto it.
pub(super) struct Job {
    pub setup: WorkerSetup,
    pub rx: Vec<RxQueue>,
    pub tx: Vec<TxQueue>,
    pub burst: usize,
    pub stop: Arc<AtomicBool>,
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

    fn run_n<const N: usize>(self) -> WorkerCounters {
        let path = Queues::<N> {
            rx: self.rx,
            tx: self.tx,
            stop: self.stop,
            rx_burst: Burst::new(),
            tx_burst: Burst::new(),
            pkts: Vec::with_capacity(N),
        };
        self.setup.run(N, path)
    }
}

/// The worker's own queue pair on every port, in bursts of `N`.
struct Queues<const N: usize> {
    rx: Vec<RxQueue>,
    tx: Vec<TxQueue>,
    stop: Arc<AtomicBool>,
    rx_burst: Burst<N>,
    tx_burst: Burst<N>,
    pkts: Vec<Mbuf>,
}

impl<const N: usize> PacketPath<Mbuf, MbufPool> for Queues<N> {
    /// On a stop the loop ends at once: what is still in the RX queues
    /// stays there.
    fn stop(&self) -> Stop {
        if self.stop.load(Ordering::Relaxed) {
            Stop::Now
        } else {
            Stop::No
        }
    }

    fn receive(&mut self, worker: &mut MbufWorker, txq: &mut TxQueues<Mbuf>, now: Now) -> usize {
        let mut got = 0;
        for (port, q) in self.rx.iter_mut().enumerate() {
            let n = q.rx_burst(&mut self.rx_burst);
            if n == 0 {
                continue;
            }
            got += n;
            // Burst has no in-order drain: pop (reversed), then reverse.
            while let Some(m) = self.rx_burst.pop() {
                self.pkts.push(m);
            }
            self.pkts.reverse();
            worker.process_burst(port, &mut self.pkts, txq, now);
        }
        got
    }

    fn send(&mut self, worker: &mut MbufWorker, txq: &mut TxQueues<Mbuf>) -> usize {
        flush(worker, txq, &mut self.tx, &mut self.tx_burst)
    }
}

/// Sends what the worker queued, port by port, in bursts of `N`; counts
/// what the device took and drops (frees, counts) what it would not.
/// Returns the number of frames sent.
fn flush<const N: usize>(
    worker: &mut MbufWorker,
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
            let sent = send_with_retries(q, burst);
            let refused = burst.len();
            let refused_bytes: u64 = burst.iter().map(|m| m.len() as u64).sum();
            burst.clear();
            worker.count_tx(port, sent as u64, bytes - refused_bytes, refused as u64);
            total += sent;
        }
    }
    total
}
