//! How long a cache line takes to go from one worker core to another and
//! back: what the decrypt fan-out pays for every line of a packet, job box
//! or ring slot it moves between workers. On the hosts measured it decided
//! whether the fan-out could pay at all (docs/multicore.md, "Why the
//! fan-out does not pay on this machine"): 51-63 ns between the 2-vCPU Zen
//! 5 machine's cores, where it paid in quiet runs, 146-192 ns between any
//! two of the 16-vCPU Xeon guest's, where it never did. `espgw run`
//! measures it at start-up with `spread_decrypt = "auto"` and leaves the
//! fan-out off above `spread_max_round_trip_ns` ([`FanOutGate`]).
//!
//! The same method as bench/c2c-latency.c, so that the numbers compare:
//! two threads pinned to CPUs A and B pass a counter through one cache
//! line, each waiting for the other's value and writing the next (every
//! step is one transfer of the line), no pause in the spin; the time per
//! round trip of a round, the median of the rounds.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Round trips per round and rounds per pair at start-up: a few ms per
/// pair at 50-200 ns a round trip, so 15 pairs stay well under a second.
pub const TRIPS: u32 = 4000;
pub const ROUNDS: usize = 7;
/// A round that takes longer than this has lost a thread to another task
/// (4000 round trips take 0.2-1.4 ms at 50-350 ns). A pair whose core
/// does not answer costs at most 4 such rounds, so 15 pairs at most about
/// 1.2 s; a normal pair a few ms.
pub const ROUND_LIMIT: Duration = Duration::from_millis(20);
/// Pairs measured at most: the first worker's core against the next 15.
pub const MAX_PAIRS: usize = 15;

/// The counter's line, alone in its 128 bytes (two lines: the adjacent
/// line prefetcher pairs them on Intel).
#[repr(align(128))]
struct Line(AtomicU64);

/// One pair's result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairRoundTrip {
    pub a: usize,
    pub b: usize,
    /// Median of the rounds, in nanoseconds per round trip; `None` when
    /// most rounds ran past [`ROUND_LIMIT`] (a core busy with other work).
    pub ns: Option<f64>,
}

/// Why a probe measured nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeError {
    /// Fewer than two distinct CPUs to run on.
    OneCpu,
    /// The thread could not be pinned to this CPU (not in the process's
    /// affinity mask, or absent).
    Pin(usize),
    /// A probe thread could not be started.
    Spawn(String),
}

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeError::OneCpu => write!(f, "the workers have one CPU between them"),
            ProbeError::Pin(cpu) => write!(f, "cannot pin a thread to CPU {cpu}"),
            ProbeError::Spawn(e) => write!(f, "cannot start a probe thread: {e}"),
        }
    }
}

/// The CPU ids `core_affinity` (libc's `CPU_SET`) can pin to: it indexes
/// a fixed 1024-bit set and panics beyond it.
const CPU_SETSIZE: usize = 1024;

/// Raises its flag when its thread leaves, by any path (a panic too), so
/// that the other probe thread never waits for it forever.
struct LeaveFlag<'a>(&'a AtomicBool);

impl Drop for LeaveFlag<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// The counter's value for step `step` of round `round`: the round in the
/// high bits, so that an echo thread still inside an aborted round can
/// never answer (or be answered by) a later one.
fn tagged(round: usize, step: u64) -> u64 {
    ((round as u64 + 1) << 40) | step
}

/// Spins until `line` holds `want`; false when the round is aborted, the
/// other thread has left, or the round ran past its limit (which aborts it
/// for the other thread too). The clock and the flags are read once every
/// 4096 tries, so the spin is the bare load the C probe does.
fn wait_for(
    line: &AtomicU64,
    want: u64,
    abort: &AtomicBool,
    other_left: &AtomicBool,
    round: Instant,
) -> bool {
    let mut tries = 0u32;
    while line.load(Ordering::Acquire) != want {
        tries = tries.wrapping_add(1);
        if tries.is_multiple_of(4096) {
            if abort.load(Ordering::Relaxed) || other_left.load(Ordering::Acquire) {
                return false;
            }
            if round.elapsed() > ROUND_LIMIT {
                abort.store(true, Ordering::Relaxed);
                return false;
            }
        }
    }
    true
}

/// Spins until `ready()`; false when the other thread left first (it will
/// not make `ready` true). The two probe threads' waits for each other
/// outside a round.
fn spin_until(ready: impl Fn() -> bool, other_left: &AtomicBool) -> bool {
    while !ready() {
        if other_left.load(Ordering::Acquire) {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}

/// Pins this thread to `cpu`; on failure records the CPU in `bad`.
fn pin(cpu: usize, bad: &AtomicUsize) -> bool {
    let ok = cpu < CPU_SETSIZE && core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
    if !ok {
        bad.store(cpu, Ordering::Release);
    }
    ok
}

/// Nanoseconds per round trip between CPUs `a` and `b`, one value per
/// round (`None` for a round that ran past [`ROUND_LIMIT`]). Stops early
/// once more than half the rounds failed (the pair's median is then
/// `None` whatever the rest give): at most `rounds / 2 + 1` rounds of
/// [`ROUND_LIMIT`] for a pair whose core is busy with other work.
fn rounds(a: usize, b: usize, trips: u32, rounds: usize) -> Result<Vec<Option<f64>>, ProbeError> {
    let line = Line(AtomicU64::new(0));
    // Round r starts when `go` reaches r + 1; `ready` counts the threads
    // pinned; each thread's `LeaveFlag` raises its `*_left` when it ends.
    let go = AtomicUsize::new(0);
    let ready = AtomicUsize::new(0);
    let bad = AtomicUsize::new(usize::MAX);
    let (echo_left, timer_left) = (AtomicBool::new(false), AtomicBool::new(false));
    let abort: Vec<AtomicBool> = (0..rounds).map(|_| AtomicBool::new(false)).collect();
    let mut times = Vec::with_capacity(rounds);
    let spawned = std::thread::scope(|s| {
        let echo = std::thread::Builder::new()
            .name("espgw-probe-echo".into())
            .spawn_scoped(s, || {
                let _leave = LeaveFlag(&echo_left);
                if !pin(b, &bad) {
                    return;
                }
                ready.fetch_add(1, Ordering::AcqRel);
                for (r, abort) in abort.iter().enumerate() {
                    if !spin_until(|| go.load(Ordering::Acquire) > r, &timer_left) {
                        return;
                    }
                    let round = Instant::now();
                    for i in 0..u64::from(trips) {
                        if !wait_for(&line.0, tagged(r, 2 * i + 1), abort, &timer_left, round) {
                            break;
                        }
                        line.0.store(tagged(r, 2 * i + 2), Ordering::Release);
                    }
                }
            });
        if let Err(e) = echo {
            return Err(ProbeError::Spawn(e.to_string()));
        }
        let timer = std::thread::Builder::new()
            .name("espgw-probe".into())
            .spawn_scoped(s, || {
                let _leave = LeaveFlag(&timer_left);
                if !pin(a, &bad) {
                    return;
                }
                if !spin_until(|| ready.load(Ordering::Acquire) >= 1, &echo_left) {
                    return;
                }
                let mut failed = 0;
                for (r, abort) in abort.iter().enumerate() {
                    if echo_left.load(Ordering::Acquire) || failed > rounds / 2 {
                        return;
                    }
                    go.store(r + 1, Ordering::Release);
                    let round = Instant::now();
                    let mut done = true;
                    for i in 0..u64::from(trips) {
                        line.0.store(tagged(r, 2 * i + 1), Ordering::Release);
                        if !wait_for(&line.0, tagged(r, 2 * i + 2), abort, &echo_left, round) {
                            done = false;
                            break;
                        }
                    }
                    let ns = round.elapsed().as_nanos() as f64 / f64::from(trips);
                    times.push(done.then_some(ns));
                    if !done {
                        failed += 1;
                        // The echo thread may still be inside this round:
                        // the tags keep it from answering the next one.
                        abort.store(true, Ordering::Relaxed);
                    }
                }
            });
        if let Err(e) = timer {
            // The echo thread leaves once it sees no timer.
            timer_left.store(true, Ordering::Release);
            return Err(ProbeError::Spawn(e.to_string()));
        }
        Ok(())
    });
    spawned?;
    match bad.load(Ordering::Acquire) {
        usize::MAX => Ok(times),
        cpu => Err(ProbeError::Pin(cpu)),
    }
}

/// Measured times before failed ones (`None`: no answer, slower than any).
fn none_last(x: &Option<f64>, y: &Option<f64>) -> std::cmp::Ordering {
    match (x, y) {
        (Some(x), Some(y)) => x.total_cmp(y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    }
}

/// The median of the rounds, `None` when half of them or more failed.
fn median(mut rounds: Vec<Option<f64>>) -> Option<f64> {
    let n = rounds.len();
    rounds.sort_by(none_last);
    rounds.get(n / 2).copied().flatten()
}

/// The round trip between CPUs `a` and `b` ([`TRIPS`] x [`ROUNDS`]).
pub fn pair(a: usize, b: usize) -> Result<PairRoundTrip, ProbeError> {
    pair_with(a, b, TRIPS, ROUNDS)
}

/// [`pair`] with its sizes (tests use small ones).
pub fn pair_with(
    a: usize,
    b: usize,
    trips: u32,
    n_rounds: usize,
) -> Result<PairRoundTrip, ProbeError> {
    if a == b {
        return Err(ProbeError::OneCpu);
    }
    let ns = median(rounds(a, b, trips, n_rounds.max(1))?);
    Ok(PairRoundTrip { a, b, ns })
}

/// The CPUs this process may run on (its affinity mask), ascending
/// ([`espgw_control::config::process_cpus`]).
pub fn allowed_cpus() -> Vec<usize> {
    espgw_control::config::process_cpus()
        .into_iter()
        .map(|c| c as usize)
        .collect()
}

/// The CPUs `workers` workers run on: their `lcores` when pinned, else the
/// first `workers` CPUs this process may use (unpinned workers float, and
/// the kernel spreads busy threads over the CPUs it has: these stand for
/// them). Distinct, in order.
pub fn worker_cpus(lcores: Option<&[u32]>, workers: usize) -> Vec<usize> {
    let mut cpus: Vec<usize> = match lcores {
        Some(l) => l.iter().take(workers).map(|&c| c as usize).collect(),
        None => allowed_cpus().into_iter().take(workers).collect(),
    };
    let mut seen = std::collections::HashSet::new();
    cpus.retain(|c| seen.insert(*c));
    cpus
}

/// The first CPU against each of the others (up to [`MAX_PAIRS`]): the
/// fan-out's receiving worker trades lines with every other worker.
pub fn from_first(cpus: &[usize]) -> Result<Vec<PairRoundTrip>, ProbeError> {
    let Some((&first, others)) = cpus.split_first() else {
        return Err(ProbeError::OneCpu);
    };
    if others.is_empty() {
        return Err(ProbeError::OneCpu);
    }
    others
        .iter()
        .take(MAX_PAIRS)
        .map(|&b| pair(first, b))
        .collect()
}

/// The workers' cores of `dp` probed and judged against `limit_ns`:
/// what `espgw run` does at start-up and `espgw check --probe-cores`
/// prints.
pub fn probe_workers(dp: &espgw_control::config::Dataplane, limit_ns: u32) -> FanOutGate {
    let cpus = worker_cpus(dp.lcores.as_deref(), dp.workers);
    FanOutGate::decide(from_first(&cpus), limit_ns).with_live_check(dp.spread_recheck_ms > 0)
}

/// The start-up probe for a config: `None` unless the fan-out would run
/// as `spread_decrypt = "auto"` (2 or more workers, run-to-completion);
/// [`FanOutGate::NotProbed`] with `spread_max_round_trip_ns = 0`.
pub fn gate_for(dp: &espgw_control::config::Dataplane) -> Option<FanOutGate> {
    if dp.spread_when() != Some(espgw_control::config::SpreadWhen::Behind) {
        return None;
    }
    if dp.spread_max_round_trip_ns == 0 {
        return Some(FanOutGate::NotProbed);
    }
    Some(probe_workers(dp, dp.spread_max_round_trip_ns))
}

/// What `spread_decrypt = "auto"` does after the start-up probe.
#[derive(Debug, Clone, PartialEq)]
pub enum FanOutGate {
    /// Not probed (`spread_max_round_trip_ns = 0`).
    NotProbed,
    /// Probed: each pair's round trip, and the limit the median pair is
    /// held to ([`FanOutGate::on`]).
    Probed {
        pairs: Vec<PairRoundTrip>,
        limit_ns: u32,
        /// The receiving workers' live check runs (`spread_recheck_ms`):
        /// over the limit the fan-out then starts off instead of staying
        /// off, and a trial turns it on where it delivers more.
        live_check: bool,
    },
    /// The probe could not run: the fan-out stays off.
    Failed { error: ProbeError },
}

impl FanOutGate {
    /// The decision from a probe's pairs: on when the median pair's round
    /// trip is at most `limit_ns`. A pair that measured nothing (its core
    /// busy with other work through most rounds) counts as slower than any
    /// limit: a helper that cannot answer within [`ROUND_LIMIT`] makes every
    /// part late.
    pub fn decide(probe: Result<Vec<PairRoundTrip>, ProbeError>, limit_ns: u32) -> FanOutGate {
        match probe {
            Ok(pairs) => FanOutGate::Probed {
                pairs,
                limit_ns,
                live_check: false,
            },
            Err(error) => FanOutGate::Failed { error },
        }
    }

    /// The same decision where the receiving workers' live check runs
    /// (`spread_recheck_ms` > 0) or not.
    pub fn with_live_check(mut self, on: bool) -> FanOutGate {
        if let FanOutGate::Probed { live_check, .. } = &mut self {
            *live_check = on;
        }
        self
    }

    /// Whether the fan-out starts off but runs: over the limit with the
    /// live check, which may turn it on (the per-CPU handoff, which no
    /// trial measures, stays off then).
    pub fn starts_off(&self) -> bool {
        self.runs() && !self.on()
    }

    /// Whether the fan-out's rings are built for the run: when it starts
    /// on, and when it starts off but each receiving worker's live check
    /// may turn it on. Not when the probe failed (a CPU that cannot be
    /// pinned, a probe thread that did not start): something is wrong
    /// with the cores, not slow.
    pub fn runs(&self) -> bool {
        match self {
            FanOutGate::Probed { live_check, .. } => self.on() || *live_check,
            _ => self.on(),
        }
    }

    /// The median pair's round trip (the slower middle one for an even
    /// count); `None` when not probed or that pair gave no number.
    pub fn median_ns(&self) -> Option<f64> {
        match self {
            FanOutGate::Probed { pairs, .. } => median(pairs.iter().map(|p| p.ns).collect()),
            _ => None,
        }
    }

    /// The slowest pair's round trip; `None` when not probed or some pair
    /// gave no number.
    pub fn slowest_ns(&self) -> Option<f64> {
        match self {
            FanOutGate::Probed { pairs, .. } => {
                pairs.iter().map(|p| p.ns).max_by(none_last).flatten()
            }
            _ => None,
        }
    }

    /// Whether the fan-out starts on (the only way it runs without the
    /// live check).
    pub fn on(&self) -> bool {
        match self {
            FanOutGate::NotProbed => true,
            FanOutGate::Probed { limit_ns, .. } => {
                self.median_ns().is_some_and(|m| m <= f64::from(*limit_ns))
            }
            FanOutGate::Failed { .. } => false,
        }
    }

    /// The start-up log line's text.
    pub fn describe(&self) -> String {
        let ns = |v: Option<f64>| v.map_or("no answer".to_string(), |v| format!("{v:.0} ns"));
        match self {
            FanOutGate::NotProbed => "the fan-out is on (cores not probed)".into(),
            FanOutGate::Probed {
                pairs,
                limit_ns,
                live_check,
            } => format!(
                "a cache line's round trip between worker cores takes {} (median of {} pair(s) from CPU {}, slowest {}): {}",
                ns(self.median_ns()),
                pairs.len(),
                pairs.first().map_or(0, |p| p.a),
                ns(self.slowest_ns()),
                if self.on() {
                    format!("at most spread_max_round_trip_ns = {limit_ns}, the fan-out is on")
                } else if *live_check {
                    format!("over spread_max_round_trip_ns = {limit_ns}, the fan-out starts off (it would likely cost the receiving worker more than the others save it); each receiving worker's live check (spread_recheck_ms) turns it on where it delivers more, and the per-CPU handoff stays off")
                } else {
                    format!("over spread_max_round_trip_ns = {limit_ns}, the fan-out stays off (it would cost the receiving worker more than the others save it)")
                }
            ),
            FanOutGate::Failed { error } => {
                format!("cores not probed ({error}): the fan-out stays off")
            }
        }
    }

    /// For the stats JSON (`spread_decrypt_gate`).
    pub fn json(&self) -> serde_json::Value {
        match self {
            FanOutGate::NotProbed => serde_json::json!({ "state": "on", "probed": false }),
            FanOutGate::Probed {
                pairs,
                limit_ns,
                live_check,
            } => serde_json::json!({
                "state": if self.on() { "on" } else { "off" },
                "probed": true,
                "live_check": live_check,
                "round_trip_ns": self.median_ns(),
                "slowest_round_trip_ns": self.slowest_ns(),
                "limit_ns": limit_ns,
                "pairs": pairs.iter().map(|p| serde_json::json!({
                    "cpus": [p.a, p.b],
                    "round_trip_ns": p.ns,
                })).collect::<Vec<_>>(),
            }),
            FanOutGate::Failed { error } => serde_json::json!({
                "state": "off",
                "probed": false,
                "error": error.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair_ns(b: usize, ns: Option<f64>) -> PairRoundTrip {
        PairRoundTrip { a: 0, b, ns }
    }

    #[test]
    fn median_puts_failed_rounds_last() {
        assert_eq!(median(vec![Some(3.0), None, Some(1.0)]), Some(3.0));
        assert_eq!(median(vec![None, Some(2.0), None]), None);
        assert_eq!(
            median(vec![Some(5.0), Some(1.0), Some(9.0), None]),
            Some(9.0)
        );
        assert_eq!(median(vec![]), None);
    }

    #[test]
    fn gate_follows_the_median_pair() {
        // The two hosts measured: Zen 5 (58 ns) on, the Xeon guest off.
        let zen5 = FanOutGate::decide(Ok(vec![pair_ns(1, Some(58.0))]), 100);
        assert!(zen5.on(), "{zen5:?}");
        let xeon: Vec<_> = (1..16)
            .map(|b| pair_ns(b, Some(146.0 + b as f64 * 3.0)))
            .collect();
        let gate = FanOutGate::decide(Ok(xeon), 100);
        assert!(!gate.on());
        assert!(matches!(gate, FanOutGate::Probed { .. }), "{gate:?}");
        assert_eq!(gate.median_ns(), Some(146.0 + 8.0 * 3.0));
        assert_eq!(gate.slowest_ns(), Some(146.0 + 15.0 * 3.0));
        // The limit itself is on; one slow pair of three does not decide.
        let mixed = vec![
            pair_ns(1, Some(100.0)),
            pair_ns(2, Some(40.0)),
            pair_ns(3, Some(400.0)),
        ];
        assert!(FanOutGate::decide(Ok(mixed), 100).on());
    }

    #[test]
    fn gate_is_off_when_cores_do_not_answer_or_cannot_be_probed() {
        let silent = vec![pair_ns(1, None), pair_ns(2, None), pair_ns(3, Some(50.0))];
        let gate = FanOutGate::decide(Ok(silent), 100);
        assert!(!gate.on());
        assert!(gate.describe().contains("no answer"), "{}", gate.describe());
        let failed = FanOutGate::decide(Err(ProbeError::OneCpu), 100);
        assert!(!failed.on());
        assert_eq!(failed.json()["state"], "off");
        assert!(FanOutGate::NotProbed.on());
    }

    /// With the live check (`spread_recheck_ms` > 0) a gate over the
    /// limit starts the fan-out off instead of leaving it out: its rings
    /// are built (`runs`), and the log and JSON say so. A failed probe
    /// still leaves it out.
    #[test]
    fn over_the_limit_with_the_live_check_the_fan_out_starts_off() {
        let slow = || FanOutGate::decide(Ok(vec![pair_ns(1, Some(330.0))]), 120);
        let hard = slow();
        assert!(!hard.on() && !hard.runs());
        assert!(hard.describe().contains("stays off"), "{}", hard.describe());
        assert_eq!(hard.json()["live_check"], false);
        let checked = slow().with_live_check(true);
        assert!(!checked.on() && checked.runs() && checked.starts_off());
        assert!(!hard.starts_off());
        assert!(
            checked.describe().contains("starts off"),
            "{}",
            checked.describe()
        );
        assert_eq!(checked.json()["state"], "off");
        assert_eq!(checked.json()["live_check"], true);
        let fast = FanOutGate::decide(Ok(vec![pair_ns(1, Some(60.0))]), 120).with_live_check(true);
        assert!(fast.on() && fast.runs() && !fast.starts_off());
        let failed = FanOutGate::decide(Err(ProbeError::OneCpu), 120).with_live_check(true);
        assert!(!failed.runs());
        assert!(FanOutGate::NotProbed.runs());
    }

    #[test]
    fn json_names_the_numbers_and_the_state() {
        let gate = FanOutGate::decide(Ok(vec![pair_ns(1, Some(180.0))]), 100);
        let j = gate.json();
        assert_eq!(j["state"], "off");
        assert_eq!(j["round_trip_ns"], 180.0);
        assert_eq!(j["limit_ns"], 100);
        assert_eq!(j["pairs"][0]["cpus"], serde_json::json!([0, 1]));
        assert!(gate.describe().contains("stays off"), "{}", gate.describe());
    }

    #[test]
    fn worker_cpus_are_the_pinned_cores_without_repeats() {
        assert_eq!(worker_cpus(Some(&[3, 5, 3, 7]), 3), vec![3, 5]);
        assert_eq!(worker_cpus(Some(&[2, 4, 6]), 2), vec![2, 4]);
        let unpinned = worker_cpus(None, 2);
        assert!(unpinned.len() <= 2);
        assert_eq!(
            unpinned,
            allowed_cpus().into_iter().take(2).collect::<Vec<_>>()
        );
    }

    #[test]
    fn one_cpu_is_refused() {
        assert_eq!(pair(0, 0), Err(ProbeError::OneCpu));
        assert_eq!(from_first(&[4]), Err(ProbeError::OneCpu));
        assert_eq!(from_first(&[]), Err(ProbeError::OneCpu));
    }

    #[test]
    fn a_cpu_outside_the_mask_is_named_and_ends_the_probe() {
        let allowed = allowed_cpus();
        let first = allowed.first().copied().unwrap_or(0);
        // Outside the mask but inside the CPU set libc can express.
        if let Some(absent) = (0..CPU_SETSIZE).find(|c| !allowed.contains(c)) {
            assert_eq!(
                pair_with(first, absent, 10, 3),
                Err(ProbeError::Pin(absent))
            );
            assert_eq!(
                pair_with(absent, first, 10, 3),
                Err(ProbeError::Pin(absent))
            );
        }
        // Beyond it (libc's CPU_SET would panic): refused, no hang.
        assert_eq!(pair_with(first, 5000, 10, 3), Err(ProbeError::Pin(5000)));
        assert_eq!(pair_with(5000, first, 10, 3), Err(ProbeError::Pin(5000)));
    }

    /// Both threads on one CPU: every step waits for the scheduler, so no
    /// round finishes within its limit, as with a helper core busy with
    /// other work. The pair gives no number, after at most 4 of 7 rounds,
    /// and the probe ends (no hang).
    #[test]
    fn a_core_that_does_not_answer_gives_no_number_and_stops_early() {
        let Some(&cpu) = allowed_cpus().first() else {
            return;
        };
        let started = Instant::now();
        let got = rounds(cpu, cpu, TRIPS, ROUNDS).expect("pinned");
        assert!(!got.is_empty() && got.len() <= ROUNDS / 2 + 1, "{got:?}");
        assert_eq!(median(got.clone()), None, "{got:?}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn round_tags_keep_rounds_apart() {
        assert_ne!(tagged(0, 1), tagged(1, 1));
        assert_ne!(tagged(3, 2 * 3999 + 2), tagged(4, 2));
        assert_eq!(tagged(2, 7) & ((1 << 40) - 1), 7);
    }

    /// The probe itself on this machine's first two CPUs: a finite, positive
    /// number per pair (no timing asserted: this is not a benchmark).
    #[test]
    fn probe_measures_a_round_trip_between_two_cpus() {
        let cpus = allowed_cpus();
        if cpus.len() < 2 {
            eprintln!("one CPU: nothing to probe");
            return;
        }
        // The rounds' limit makes a descheduled echo thread a None, never
        // a hang; with 5 rounds one of them answers on any machine that
        // runs the test suite.
        let p = pair_with(cpus[0], cpus[1], 200, 5).expect("probe");
        assert_eq!((p.a, p.b), (cpus[0], cpus[1]));
        if let Some(ns) = p.ns {
            assert!(ns.is_finite() && ns > 0.0, "{ns}");
        }
    }
}
