//! Counts of one measurement and the arithmetic that turns them into the
//! reported rates. Kept free of DPDK so the maths is unit-tested.
//!
//! Time is the TSC cycles spent inside the measured call only (the cipher
//! call, `encap_burst`/`decap_burst`, or `Worker::process_burst`); the
//! generator's packet copy and the sink's checks and frees are outside it.
//! Rates are therefore what one core sustains doing that stage alone.
//!
//! The I/O-inclusive time adds to the stage what a poll-mode driver costs
//! the core around it when it copies frames (net_pcap, af_packet): the
//! generator's fill (mbuf allocation and copy, the RX side), the worker's
//! periodic tick, and draining and bulk-freeing the output mbufs (the TX
//! side); only the sink's checks stay out. It is what `espgw run` over
//! net_pcap -> net_null compares with.

use hdrhistogram::Histogram;

use crate::sink::Tally;

/// What one worker thread measured for one layer of one case.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Packets handed to the stage while measuring.
    pub packets: u64,
    /// Inner IP bytes of those packets.
    pub inner_bytes: u64,
    /// Bytes the same packets take on the encrypted Ethernet link
    /// (ESP frame + preamble, FCS and gap).
    pub wire_bytes: u64,
    /// TSC cycles inside the measured call.
    pub cycles: u64,
    /// TSC cycles of generator fill + stage + tick + drain and bulk free
    /// (every burst's interval contains its stage's: `io_cycles >= cycles`).
    pub io_cycles: u64,
    /// Wall-clock nanoseconds of the whole loop (generator and sink included).
    pub loop_ns: u64,
    /// Wall time of the loop the bench spent on its own business, not a
    /// peer's traffic: the fan-out's drain before a window reset. Part of
    /// `loop_ns` (a row's `loop_ns` is its slowest worker's, and helpers
    /// run the whole time anyway), given so that its share can be read.
    pub untimed_ns: u64,
    pub tally: Tally,
    /// Nanoseconds from the end of a burst's generation to the sink, one
    /// sample per packet.
    pub latency_ns: Histogram<u64>,
    /// Stage cycles per packet of each burst, one sample per burst: its
    /// median is robust to the preemptions of a shared machine, which the
    /// mean (`cycles / packets`) includes.
    pub burst_cycles: Histogram<u64>,
    /// The same for the I/O-inclusive cycles.
    pub io_burst_cycles: Histogram<u64>,
    /// Decrypt fan-out (worker layer): packets the receiving worker handed
    /// to other workers while measuring, so a row shows whether the
    /// fan-out it measures did fan out.
    pub spread_out: u64,
    /// The fan-out's live check (`--spread-recheck-ms`), while measuring:
    /// packets the receiving worker decrypted alone because the check had
    /// the fan-out off, and the trials it finished by verdict (on, off,
    /// keeping up, no helper).
    pub spread_solo: u64,
    pub spread_trials: [u64; 4],
    /// Each of those trials' rates, packets per second of the worker's
    /// loop time with the fan-out and without it.
    pub spread_trial_pps: Vec<[u64; 2]>,
    /// Worker layer: the packets the worker dropped while measuring, by
    /// reason (what `lost` consists of: `reorder_late` from the fan-out's
    /// bound, `replayed` from a window that missed, ...).
    pub drops: std::collections::BTreeMap<&'static str, u64>,
}

impl Measured {
    pub fn new() -> Self {
        Measured {
            packets: 0,
            inner_bytes: 0,
            wire_bytes: 0,
            cycles: 0,
            io_cycles: 0,
            loop_ns: 0,
            untimed_ns: 0,
            tally: Tally::default(),
            // 1 ns .. 10 s, 3 significant digits.
            latency_ns: Histogram::new_with_bounds(1, 10_000_000_000, 3)
                .expect("valid histogram bounds"),
            burst_cycles: Histogram::new_with_bounds(1, 100_000_000_000, 3)
                .expect("valid histogram bounds"),
            io_burst_cycles: Histogram::new_with_bounds(1, 100_000_000_000, 3)
                .expect("valid histogram bounds"),
            spread_out: 0,
            spread_solo: 0,
            spread_trials: [0; 4],
            spread_trial_pps: Vec::new(),
            drops: std::collections::BTreeMap::new(),
        }
    }

    /// Packets that went in and never reached the sink (dropped or held by
    /// the stage).
    pub fn lost(&self) -> u64 {
        self.packets
            .saturating_sub(self.tally.valid + self.tally.invalid)
    }
}

impl Default for Measured {
    fn default() -> Self {
        Self::new()
    }
}

/// A burst that took more than this many times the median burst was
/// preempted (a time slice is milliseconds, a burst microseconds): it
/// measured the scheduler of a shared machine, not espgw.
pub const PREEMPTED_FACTOR: u64 = 20;

/// Mean per-packet cycles of the bursts that were not preempted, with the
/// number of bursts kept and left out. From the per-burst histogram
/// (3 significant digits, so within 0.1%).
pub fn unpreempted(h: &Histogram<u64>) -> Option<(f64, u64, u64)> {
    if h.is_empty() {
        return None;
    }
    let limit = h.value_at_quantile(0.5).saturating_mul(PREEMPTED_FACTOR);
    let (mut sum, mut kept) = (0f64, 0u64);
    for v in h.iter_recorded() {
        let value = h.median_equivalent(v.value_iterated_to());
        if value <= limit {
            sum += value as f64 * v.count_at_value() as f64;
            kept += v.count_at_value();
        }
    }
    (kept > 0).then(|| (sum / kept as f64, kept, h.len() - kept))
}

/// The reported numbers of one layer of one case (all workers).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Rates {
    /// Million packets per second (sum over workers).
    pub mpps: f64,
    /// Inner IP throughput, Gbit/s.
    pub gbps_inner: f64,
    /// On-wire (encrypted Ethernet link) throughput, Gbit/s.
    pub gbps_wire: f64,
    /// TSC cycles per packet, preempted bursts left out: what the rates
    /// above are computed from.
    pub cycles_per_packet: f64,
    /// TSC cycles per packet over every burst (all cycles / all packets).
    pub cycles_per_packet_mean: f64,
    /// Median over bursts of the cycles per packet.
    pub cycles_per_packet_p50: f64,
    /// Share of bursts left out as preempted.
    pub preempted: f64,
    /// Packets per second of the whole generator + stage + sink loop, Mpps.
    pub loop_mpps: f64,
    /// I/O-inclusive cycles per packet (generator fill + stage + tick +
    /// drain and bulk free, no sink checks), preempted bursts left out.
    pub io_cycles_per_packet: f64,
    /// Million packets per second at those cycles (sum over workers).
    pub io_mpps: f64,
}

/// Cycles per packet from a per-burst histogram with the preempted bursts
/// left out, and the share left out; `cycles / packets` without one.
fn cycles_per_packet(h: &Histogram<u64>, cycles: u64, packets: u64) -> (f64, f64) {
    match unpreempted(h) {
        Some((cpp, kept, left)) => (cpp, left as f64 / (kept + left) as f64),
        None => (cycles as f64 / packets.max(1) as f64, 0.0),
    }
}

/// Rates of one worker. Without a per-burst histogram (hand-made counts)
/// every cycle counts.
pub fn worker_rates(m: &Measured, tsc_hz: f64) -> Rates {
    if m.packets == 0 || m.cycles == 0 || tsc_hz <= 0.0 {
        return Rates::default();
    }
    let mean = m.cycles as f64 / m.packets as f64;
    let (cpp, preempted) = cycles_per_packet(&m.burst_cycles, m.cycles, m.packets);
    let (io_cpp, _) = cycles_per_packet(&m.io_burst_cycles, m.io_cycles, m.packets);
    let pps = tsc_hz / cpp;
    let per_packet = |bytes: u64| bytes as f64 / m.packets as f64;
    Rates {
        mpps: pps / 1e6,
        gbps_inner: pps * per_packet(m.inner_bytes) * 8.0 / 1e9,
        gbps_wire: pps * per_packet(m.wire_bytes) * 8.0 / 1e9,
        cycles_per_packet: cpp,
        cycles_per_packet_mean: mean,
        cycles_per_packet_p50: m.burst_cycles.value_at_quantile(0.5) as f64,
        preempted,
        loop_mpps: if m.loop_ns > 0 {
            m.packets as f64 / (m.loop_ns as f64 / 1e9) / 1e6
        } else {
            0.0
        },
        io_cycles_per_packet: io_cpp,
        io_mpps: if io_cpp > 0.0 {
            tsc_hz / io_cpp / 1e6
        } else {
            0.0
        },
    }
}

/// Rates of several workers running at once, each on its own core: the
/// per-worker rates add up; cycles per packet are pooled over all workers.
pub fn aggregate_rates(per_worker: &[Measured], tsc_hz: f64) -> Rates {
    let mut total = Rates::default();
    let (mut cycles, mut packets) = (0u64, 0u64);
    for m in per_worker {
        let r = worker_rates(m, tsc_hz);
        total.mpps += r.mpps;
        total.gbps_inner += r.gbps_inner;
        total.gbps_wire += r.gbps_wire;
        total.loop_mpps += r.loop_mpps;
        total.io_mpps += r.io_mpps;
        cycles += m.cycles;
        packets += m.packets;
    }
    if packets == 0 {
        return total;
    }
    total.cycles_per_packet_mean = cycles as f64 / packets as f64;
    let all = merge(per_worker);
    total.cycles_per_packet_p50 = all.burst_cycles.value_at_quantile(0.5) as f64;
    (total.cycles_per_packet, total.preempted) =
        cycles_per_packet(&all.burst_cycles, all.cycles, all.packets);
    (total.io_cycles_per_packet, _) =
        cycles_per_packet(&all.io_burst_cycles, all.io_cycles, all.packets);
    total
}

/// Scaling efficiency: the N-worker rate over N times the 1-worker rate
/// (1.0 = perfectly linear).
pub fn efficiency(rate_n: f64, n: usize, rate_1: f64) -> Option<f64> {
    (n > 0 && rate_1 > 0.0).then(|| rate_n / (n as f64 * rate_1))
}

/// How close a layer gets to the raw cipher on the same packets: ceiling
/// cycles per packet over the layer's (1.0 = no overhead at all).
pub fn ratio_to_ceiling(
    layer_cycles_per_packet: f64,
    ceiling_cycles_per_packet: f64,
) -> Option<f64> {
    (layer_cycles_per_packet > 0.0 && ceiling_cycles_per_packet > 0.0)
        .then(|| ceiling_cycles_per_packet / layer_cycles_per_packet)
}

/// Merges several workers' measurements (latency histograms and tallies).
pub fn merge(per_worker: &[Measured]) -> Measured {
    let mut all = Measured::new();
    for m in per_worker {
        all.packets += m.packets;
        all.inner_bytes += m.inner_bytes;
        all.wire_bytes += m.wire_bytes;
        all.cycles += m.cycles;
        all.io_cycles += m.io_cycles;
        all.loop_ns = all.loop_ns.max(m.loop_ns);
        all.spread_out += m.spread_out;
        all.spread_solo += m.spread_solo;
        for (a, b) in all.spread_trials.iter_mut().zip(m.spread_trials) {
            *a += b;
        }
        all.spread_trial_pps.extend_from_slice(&m.spread_trial_pps);
        all.untimed_ns += m.untimed_ns;
        for (reason, n) in &m.drops {
            *all.drops.entry(reason).or_default() += n;
        }
        all.tally.merge(&m.tally);
        // Same bounds on both sides: add cannot fail.
        let _ = all.latency_ns.add(&m.latency_ns);
        let _ = all.burst_cycles.add(&m.burst_cycles);
        let _ = all.io_burst_cycles.add(&m.io_burst_cycles);
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(packets: u64, inner: u64, wire: u64, cycles: u64) -> Measured {
        let mut m = Measured::new();
        m.packets = packets;
        m.inner_bytes = inner;
        m.wire_bytes = wire;
        m.cycles = cycles;
        m.loop_ns = 2_000_000_000;
        m
    }

    #[test]
    fn rates_from_known_counts() {
        // 10 M packets of 1420 inner bytes in 3e9 cycles at 3 GHz = 1 s.
        let m = measured(
            10_000_000,
            10_000_000 * 1420,
            10_000_000 * 1500,
            3_000_000_000,
        );
        let r = worker_rates(&m, 3e9);
        assert!((r.mpps - 10.0).abs() < 1e-9);
        assert!((r.gbps_inner - 113.6).abs() < 1e-9);
        assert!((r.gbps_wire - 120.0).abs() < 1e-9);
        assert!((r.cycles_per_packet - 300.0).abs() < 1e-9);
        // 10 M packets in a 2 s loop.
        assert!((r.loop_mpps - 5.0).abs() < 1e-9);
        // No I/O cycles recorded: no I/O rate (not infinity).
        assert_eq!(r.io_mpps, 0.0);
    }

    #[test]
    fn io_rate_from_known_counts_and_below_the_stage_rate() {
        // Stage 300 cycles/packet; with fill and free 400: at 3 GHz 10 and
        // 7.5 Mpps. Two workers add up.
        let mut m = measured(1_000_000, 64_000_000, 0, 300_000_000);
        m.io_cycles = 400_000_000;
        let r = worker_rates(&m, 3e9);
        assert!((r.io_cycles_per_packet - 400.0).abs() < 1e-9);
        assert!((r.io_mpps - 7.5).abs() < 1e-9, "{}", r.io_mpps);
        let both = aggregate_rates(&[m.clone(), m], 3e9);
        assert!((both.io_mpps - 15.0).abs() < 1e-9);
        assert!((both.io_cycles_per_packet - 400.0).abs() < 1e-9);
        // From per-burst histograms, a preempted burst left out as for the
        // stage rate.
        let mut h = measured(100 * 32, 0, 0, 99 * 32 * 300 + 32 * 300);
        h.burst_cycles.record_n(300, 100).unwrap();
        h.io_cycles = (99 * 400 + 1_000_000) * 32;
        h.io_burst_cycles.record_n(400, 99).unwrap();
        h.io_burst_cycles.record(1_000_000).unwrap();
        let r = worker_rates(&h, 3e9);
        assert!((r.io_cycles_per_packet - 400.0).abs() < 0.5);
        assert!(r.io_mpps < r.mpps);
    }

    #[test]
    fn empty_measurement_gives_zero_not_nan() {
        let r = worker_rates(&Measured::new(), 3e9);
        assert_eq!(r.mpps, 0.0);
        assert_eq!(r.cycles_per_packet, 0.0);
    }

    #[test]
    fn workers_add_up_and_cycles_pool() {
        // Worker 0: 1 Mpkt in 1 s (3e9 cycles); worker 1: 1 Mpkt in 0.5 s.
        let a = measured(1_000_000, 64_000_000, 0, 3_000_000_000);
        let b = measured(1_000_000, 64_000_000, 0, 1_500_000_000);
        let r = aggregate_rates(&[a, b], 3e9);
        assert!((r.mpps - 3.0).abs() < 1e-9, "{}", r.mpps);
        assert!((r.cycles_per_packet - 2250.0).abs() < 1e-9);
        assert!((r.gbps_inner - 3.0 * 64.0 * 8.0 / 1000.0).abs() < 1e-9);
    }

    #[test]
    fn preempted_bursts_are_left_out_of_the_rates_but_not_the_mean() {
        // 99 bursts at 300 cycles/packet, one preempted at 1e6.
        let mut m = measured(
            100 * 32,
            100 * 32 * 64,
            100 * 32 * 100,
            (99 * 300 + 1_000_000) * 32,
        );
        m.burst_cycles.record_n(300, 99).unwrap();
        m.burst_cycles.record(1_000_000).unwrap();
        let r = worker_rates(&m, 3e9);
        assert!(
            (r.cycles_per_packet - 300.0).abs() < 0.5,
            "{}",
            r.cycles_per_packet
        );
        assert!((r.mpps - 10.0).abs() < 0.02, "{}", r.mpps);
        assert!((r.gbps_inner - 10.0 * 64.0 * 8.0 / 1000.0).abs() < 0.02);
        assert!((r.preempted - 0.01).abs() < 1e-9);
        assert!((r.cycles_per_packet_mean - 10_297.0).abs() < 1e-6);
        // A burst at 19x the median is kept.
        let mut h = Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).unwrap();
        h.record_n(100, 3).unwrap();
        h.record(1900).unwrap();
        let (cpp, kept, left) = unpreempted(&h).unwrap();
        assert_eq!((kept, left), (4, 0));
        assert!((cpp - 550.0).abs() < 1.0);
    }

    #[test]
    fn efficiency_and_ceiling_ratio() {
        assert_eq!(efficiency(7.0, 2, 4.0), Some(0.875));
        assert_eq!(efficiency(8.0, 2, 4.0), Some(1.0));
        assert_eq!(efficiency(1.0, 2, 0.0), None);
        assert_eq!(ratio_to_ceiling(1000.0, 900.0), Some(0.9));
        assert_eq!(ratio_to_ceiling(0.0, 900.0), None);
    }

    #[test]
    fn merge_sums_counts_and_histograms() {
        let mut a = measured(10, 640, 0, 100);
        let mut b = measured(20, 1280, 0, 300);
        a.latency_ns.record_n(1000, 10).unwrap();
        b.latency_ns.record_n(3000, 20).unwrap();
        a.burst_cycles.record(90).unwrap();
        b.burst_cycles.record_n(300, 2).unwrap();
        a.io_cycles = 150;
        b.io_cycles = 450;
        b.io_burst_cycles.record_n(400, 2).unwrap();
        a.tally.valid = 10;
        b.tally.valid = 19;
        b.tally.invalid = 1;
        let m = merge(&[a, b]);
        assert_eq!(
            (m.packets, m.cycles, m.tally.valid, m.tally.invalid),
            (30, 400, 29, 1)
        );
        assert_eq!(m.latency_ns.len(), 30);
        assert_eq!(
            m.latency_ns.value_at_quantile(0.5),
            m.latency_ns.highest_equivalent(3000)
        );
        assert_eq!(m.lost(), 0);
        assert_eq!(m.burst_cycles.value_at_quantile(0.5), 300);
        assert_eq!((m.io_cycles, m.io_burst_cycles.len()), (600, 2));
    }
}
