//! The three layers measured on the same mbufs, each from a generator
//! through the stage to the sink, one core per worker:
//!
//! * [`cipher`]: the raw `EspCipher::seal`/`open` over the ESP bytes, the
//!   ceiling (same library, same packet sizes, same buffers);
//! * [`engine`]: `OutboundSa::encap_burst` / `InboundSa::decap_burst`;
//! * [`worker`]: `Worker::process_burst`, the code path of `espgw run`
//!   (classification, SPD, ESP, routing, neighbor, Ethernet, TX queues).
//!
//! The stage call is timed (TSC), and apart from it the generator's fill
//! and the release of the output mbufs for the I/O-inclusive rate; the
//! sink's checks are never timed. See [`crate::stats`].

pub mod cipher;
pub mod engine;
pub mod worker;

use std::time::Instant;

use dpdk::cycles::rdtsc;
use dpdk::{Burst, Mbuf, Mempool};

use crate::case::CaseData;
use crate::generator::{Slot, BURST};
use crate::stats::Measured;

/// Which layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Cipher,
    Engine,
    Worker,
}

impl Layer {
    pub const ALL: [Layer; 3] = [Layer::Cipher, Layer::Engine, Layer::Worker];

    pub fn name(self) -> &'static str {
        match self {
            Layer::Cipher => "cipher",
            Layer::Engine => "engine",
            Layer::Worker => "worker",
        }
    }
}

/// What a layer measurement runs with.
pub struct Ctx<'a> {
    pub gateway: &'a crate::gateway::Gateway,
    pub case: &'a CaseData,
    pub pool: &'a Mempool,
    pub tsc_hz: f64,
    /// The decrypt fan-out's rings, shared by the case's workers.
    pub spread: Option<&'a std::sync::Arc<espgw_dataplane::worker::SpreadRings<Mbuf>>>,
    /// The per-CPU SA handoff (per-CPU SAs with the fan-out on), worker 0
    /// only: the cases of the other workers' SA pairs (lanes 1..), whose
    /// ESP worker 0 receives too, interleaved with its own, and hands to
    /// their workers. Empty otherwise.
    pub lanes: &'a [CaseData],
    /// The generator writes packets with streaming stores (`--streaming-rx`).
    pub streaming_rx: bool,
}

/// One layer's loop body: one burst from the generator through the stage
/// to the sink; counts it when its argument is true.
pub type Step<'a> = Box<dyn FnMut(&mut Measured, bool) -> Result<(), String> + 'a>;

impl<'a> Ctx<'a> {
    /// The loop body of `layer`, with its own generator, SA or worker.
    pub fn stage(&'a self, layer: Layer) -> Result<Step<'a>, String> {
        match layer {
            Layer::Cipher => cipher::stage(self),
            Layer::Engine => engine::stage(self),
            Layer::Worker => worker::stage(self),
        }
    }
}

/// Layers take turns in slices of about this long, so that a change in
/// the load of a shared machine hits all of them alike and their ratios
/// stay fair.
pub const SLICE_SECONDS: f64 = 0.1;

/// The number of slices `seconds` is cut into (1..=50).
pub fn slices(seconds: f64) -> usize {
    ((seconds / SLICE_SECONDS).round() as usize).clamp(1, 50)
}

/// Encrypt cases: the sink has the peer decrypt every packet of one burst
/// in this many (every burst would make the sink slower than the stage).
pub const PEER_CHECK_EVERY: u64 = 16;

/// Share of the time spent warming up (caches, branch predictors, the
/// mempool cache) before counting starts.
const WARMUP_SHARE: f64 = 0.1;

/// Runs `step` until `seconds` of wall time have passed; the first
/// [`WARMUP_SHARE`] of them are not counted (caches and predictors are
/// warmed again after another layer ran). `step(record)` handles one
/// burst and adds to the measurement when `record` is true.
pub fn run_for(
    seconds: f64,
    measured: &mut Measured,
    step: impl FnMut(&mut Measured, bool) -> Result<(), String>,
) -> Result<(), String> {
    run_for_then_while(seconds, || false, measured, step)
}

/// [`run_for`], then on while `more()` says so (checked with the clock):
/// a worker that others wait on (the per-CPU SA handoff's) runs as long
/// as the worker that hands it work.
pub fn run_for_then_while(
    seconds: f64,
    more: impl Fn() -> bool,
    measured: &mut Measured,
    mut step: impl FnMut(&mut Measured, bool) -> Result<(), String>,
) -> Result<(), String> {
    let start = Instant::now();
    let warm_until = seconds * WARMUP_SHARE;
    let mut counting_since: Option<Instant> = None;
    let mut bursts = 0u64;
    loop {
        // The clock is read every 16 bursts: cheap, and at most a few µs late.
        if bursts & 15 == 0 {
            let t = start.elapsed().as_secs_f64();
            if t >= seconds && !more() {
                break;
            }
            if counting_since.is_none() && t >= warm_until {
                counting_since = Some(Instant::now());
            }
        }
        step(measured, counting_since.is_some())?;
        bursts += 1;
    }
    measured.loop_ns += counting_since.map_or(0, |t| t.elapsed().as_nanos() as u64);
    Ok(())
}

/// The TSC cycles of one burst.
#[derive(Debug, Clone, Copy, Default)]
pub struct BurstCycles {
    /// Inside the stage call.
    pub stage: u64,
    /// Generator fill + stage (+ the worker's tick) + draining and freeing
    /// the output: the stage with the I/O a copying PMD adds around it.
    pub io: u64,
    /// From the end of a burst's generation to the sink taking it.
    pub latency: u64,
}

/// Records one burst: its cycles, bytes and latency.
#[inline]
pub fn record_burst(
    m: &mut Measured,
    case: &CaseData,
    slots: &[Slot],
    cycles: BurstCycles,
    tsc_hz: f64,
) {
    let mut bytes = Bytes::default();
    for s in slots {
        bytes.add(case, s.inner_len);
    }
    let n = slots.len() as u64;
    record_counts(m, n, &bytes, cycles, n, tsc_hz);
}

/// Some packets: how many, their inner and their wire bytes.
#[derive(Debug, Default)]
pub struct Bytes {
    pub packets: u64,
    pub inner: u64,
    pub wire: u64,
}

impl Bytes {
    /// One packet of `inner_len` inner bytes of `case`.
    #[inline]
    pub fn add(&mut self, case: &CaseData, inner_len: usize) {
        self.packets += 1;
        self.inner += inner_len as u64;
        self.wire += case.wire_bytes(inner_len) as u64;
    }
}

/// Records `packets` with their `bytes` and `cycles`, and the burst's
/// latency (`cycles.latency`; none when 0) as `latency_samples` samples.
#[inline]
pub fn record_counts(
    m: &mut Measured,
    packets: u64,
    bytes: &Bytes,
    cycles: BurstCycles,
    latency_samples: u64,
    tsc_hz: f64,
) {
    m.packets += packets;
    m.cycles += cycles.stage;
    m.io_cycles += cycles.io;
    m.inner_bytes += bytes.inner;
    m.wire_bytes += bytes.wire;
    if let (Some(stage), Some(io)) = (
        cycles.stage.checked_div(packets),
        cycles.io.checked_div(packets),
    ) {
        let _ = m.burst_cycles.record(stage.max(1));
        let _ = m.io_burst_cycles.record(io.max(1));
    }
    if cycles.latency > 0 && latency_samples > 0 {
        let ns = (cycles.latency as f64 * 1e9 / tsc_hz) as u64;
        // Saturate rather than fail on an absurd sample (a preempted thread).
        let _ = m
            .latency_ns
            .record_n(ns.clamp(1, 10_000_000_000), latency_samples);
    }
}

/// Frees every mbuf of `pkts` with bulk calls (what a PMD's TX does with
/// sent frames), through `staging`; returns the TSC cycles it took.
#[inline]
pub fn free_bulk(pkts: &mut Vec<Mbuf>, staging: &mut Burst<BURST>) -> u64 {
    let t0 = tsc();
    for m in pkts.drain(..) {
        if let Err(m) = staging.push(m) {
            staging.clear();
            // Cannot fail: the burst was just emptied.
            let _ = staging.push(m);
        }
    }
    staging.clear();
    tsc() - t0
}

/// The TSC, through the DPDK wrapper (all FFI stays in dpdk/).
#[inline]
pub fn tsc() -> u64 {
    rdtsc()
}
