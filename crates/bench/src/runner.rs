//! Runs the cases: EAL and pools once, then per case one pinned thread per
//! worker, each with its own generator, pool and sink (no cross-core
//! handoff), all layers in turn, the threads starting each layer together.

use espgw_esp::crypto::provider::SimdWidth;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Barrier};

use dpdk::{lcore, Eal, Mbuf, Mempool, MBUF_HEADROOM, SOCKET_ANY};
use espgw_control::config::{fan_out_jobs, SpreadLate};
use espgw_dataplane::worker::{SpreadRings, SpreadWhen};
use espgw_esp::Suite;

use crate::case::CaseData;
use crate::gateway::{self, Gateway};
use crate::layers::{self, Ctx, Layer};
use crate::machine::Machine;
use crate::options::{self, Direction, Inner, Options, Outer, Size};
use crate::stats::{aggregate_rates, efficiency, merge, ratio_to_ceiling, Measured, Rates};

/// Mbufs per worker pool: a burst in flight plus the mempool cache.
const POOL_MBUFS: u32 = 4095;
const POOL_CACHE: u32 = 256;
/// Data room of the standard DPDK mbuf (RTE_MBUF_DEFAULT_BUF_SIZE).
const DATA_ROOM: u16 = 2048 + MBUF_HEADROOM;

/// One row of the report: one layer of one case.
#[derive(Debug, Clone)]
pub struct Row {
    pub suite: Suite,
    pub size: Size,
    pub direction: Direction,
    pub workers: usize,
    /// Tunnels the workers carried (worker w: tunnel w % tunnels).
    pub tunnels: usize,
    /// The tunnels' outer form.
    pub outer: Outer,
    /// The inner packets' family.
    pub inner: Inner,
    /// Anti-replay window of the tunnels (0: off; see [`replay_window`]).
    pub replay_window: u32,
    /// Distinct flows per worker.
    pub flows: usize,
    pub layer: Layer,
    pub rates: Rates,
    /// All workers merged (counts, tally, latency).
    pub measured: Measured,
    /// Ceiling cycles per packet over this layer's, same case.
    pub ratio_to_ceiling: Option<f64>,
    /// Only on rows of the scaled run (workers > 1): wall-clock loop rate
    /// of N workers over N times that of one.
    pub efficiency: Option<f64>,
}

impl Row {
    /// True when the sink saw every packet and all were right.
    pub fn valid(&self) -> bool {
        self.measured.tally.valid > 0
            && self.measured.tally.invalid == 0
            && self.measured.lost() == 0
    }
}

/// A case that could not be measured (a stage that failed or panicked,
/// a fan-out part not back after 2 s, a gateway that could not be built):
/// reported with the rows, and the run goes on with the next case, so
/// that one case's failure (on a shared machine, a worker descheduled for
/// seconds) does not cost a long run its other numbers.
#[derive(Debug, Clone)]
pub struct CaseFailure {
    pub suite: Suite,
    pub size: Size,
    pub direction: Direction,
    pub workers: usize,
    pub error: String,
}

/// Everything a run produced.
#[derive(Debug, Clone)]
pub struct Report {
    pub machine: Machine,
    pub options: Options,
    pub eal_args: Vec<String>,
    pub rows: Vec<Row>,
    /// Cases that produced no rows, and why.
    pub failures: Vec<CaseFailure>,
}

impl Report {
    /// Every case measured and every packet of every row right.
    pub fn all_valid(&self) -> bool {
        self.failures.is_empty() && self.rows.iter().all(Row::valid)
    }
}

/// Free 2 MiB hugepages, from sysfs (0 when unknown).
fn free_hugepages() -> u64 {
    std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// EAL arguments: no PCI devices (no NIC needed), hugepages when enough are
/// free (what a real deployment uses), plain memory otherwise, `pools_mib`
/// for the pools ([`pools_mib`]) and 128 MiB for the rest.
pub fn eal_args(hugepages: bool, pools_mib: usize, simd: SimdWidth) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "-l".into(),
        "0".into(),
        "--no-pci".into(),
        "--log-level=lib.eal:error".into(),
    ];
    if hugepages {
        a.push("--in-memory".into());
    } else {
        let mib = 128 + pools_mib;
        a.extend([
            "--no-huge".into(),
            "--no-shconf".into(),
            "-m".into(),
            mib.to_string(),
        ]);
    }
    a.push(format!("--file-prefix=espgw-bench-{}", std::process::id()));
    // As `espgw run` does with `max_simd_bitwidth` below 512.
    if simd != SimdWidth::Bits512 {
        a.push(format!("--force-max-simd-bitwidth={}", simd.bits()));
    }
    a
}

/// Runs the benchmark described by `opts`. Initialises the EAL (once per
/// process).
pub fn run(opts: &Options) -> Result<Report, String> {
    opts.check_sizes().map_err(|e| e.to_string())?;
    // Ask for hugepages (2 MiB) only with room to spare.
    // ESPGW_BENCH_NO_HUGEPAGES=1 forces plain memory (valgrind cannot map
    // DPDK's hugepage areas).
    let forced_off = std::env::var_os("ESPGW_BENCH_NO_HUGEPAGES").is_some_and(|v| v == "1");
    let pools_mib = pools_mib(opts);
    let hugepages = !forced_off && free_hugepages() >= 16 + pools_mib as u64 / 2;
    let args = eal_args(hugepages, pools_mib, opts.simd_width);
    // Before any cipher is built: the width the ciphers may use.
    espgw_esp::crypto::provider::set_max_simd_width(opts.simd_width);
    espgw_esp::crypto::provider::set_ipsec_mb_allowed(!opts.no_ipsec_mb);
    // Before the EAL pins this thread to lcore 0: the CPUs we may use.
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    // What moving a line between the workers' cores costs here (for the
    // multi-worker rows, and what the fan-out's "auto" would decide),
    // while nothing else of ours runs.
    let core_round_trips = if opts.workers > 1 {
        let ids: Vec<usize> = cores.iter().take(opts.workers).map(|c| c.id).collect();
        espgw_dataplane::core_probe::from_first(&ids).unwrap_or_default()
    } else {
        Vec::new()
    };
    let eal = Eal::init(&args).map_err(|e| format!("DPDK EAL init failed: {e}"))?;
    let tsc_hz = dpdk::cycles::tsc_hz();
    if tsc_hz == 0 {
        return Err("DPDK reports a TSC frequency of 0".into());
    }
    let pools = (0..opts.workers)
        .map(|w| {
            Mempool::new(
                &format!("bench{w}"),
                pool_mbufs(opts, w),
                POOL_CACHE,
                DATA_ROOM,
                SOCKET_ANY,
            )
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("mempool: {e}"))?;

    let counts: Vec<usize> = if opts.workers > 1 {
        vec![1, opts.workers]
    } else {
        vec![1]
    };
    let replay_window = replay_window(opts);
    let total = opts.suites.len() * opts.sizes.len() * opts.directions.len() * counts.len();
    let mut rows: Vec<Row> = Vec::new();
    let mut failures: Vec<CaseFailure> = Vec::new();
    let mut done = 0;
    for &suite in &opts.suites {
        for &size in &opts.sizes {
            for &direction in &opts.directions {
                for &n in &counts {
                    done += 1;
                    if opts.progress {
                        progress(done, total, suite, size, direction, n);
                    }
                    let spec = CaseSpec {
                        suite,
                        size,
                        direction,
                        workers: n,
                        tunnels: options::tunnels_for(opts.tunnels, n),
                        outer: opts.outer,
                        inner: opts.inner,
                        replay_window,
                        seconds: opts.seconds,
                        flows: opts.flows,
                        persist_seq: opts.persist_seq,
                        spread: opts.spread_decrypt && n > 1,
                        spread_late: opts.spread_late,
                        spread_wait_ns: u64::from(opts.spread_wait_us) * 1000,
                        per_cpu: opts.per_cpu_sas,
                        streaming_rx: opts.streaming_rx,
                        tx_checksum_offload: opts.tx_checksum_offload,
                        spread_parts: opts.spread_parts,
                        spread_recheck_ns: u64::from(opts.spread_recheck_ms) * 1_000_000,
                        tsc_hz: tsc_hz as f64,
                    };
                    match run_case(spec, &pools[..n], &cores) {
                        Ok(per_layer) => {
                            rows.extend(rows_of_case(spec, per_layer, tsc_hz as f64, &rows))
                        }
                        Err(error) => {
                            eprintln!(
                                "espgw bench: {} {} {} x{n} failed (the run goes on): {error}",
                                suite.name(),
                                size.label(),
                                direction.name()
                            );
                            failures.push(CaseFailure {
                                suite,
                                size,
                                direction,
                                workers: n,
                                error,
                            });
                        }
                    }
                }
            }
        }
    }
    if opts.progress && std::io::stderr().is_terminal() {
        eprintln!();
    }
    drop(pools);
    drop(eal);
    Ok(Report {
        machine: Machine {
            core_round_trips,
            ..Machine::this(tsc_hz, hugepages, cores.len())
        },
        options: opts.clone(),
        eal_args: args,
        rows,
        failures,
    })
}

fn progress(done: usize, total: usize, suite: Suite, size: Size, dir: Direction, n: usize) {
    const WIDTH: usize = 30;
    if !std::io::stderr().is_terminal() {
        // A log, not a terminal: one line per case instead of a redrawn bar.
        eprintln!(
            "[{done}/{total}] {} {} {} x{n}",
            suite.name(),
            size.label(),
            dir.name()
        );
        return;
    }
    let filled = done * WIDTH / total.max(1);
    eprint!(
        "\r[{}{}] {done}/{total} {} {} {} x{n}          ",
        "#".repeat(filled),
        " ".repeat(WIDTH - filled),
        suite.name(),
        size.label(),
        dir.name()
    );
    let _ = std::io::stderr().flush();
}

/// The bench tunnels' anti-replay window: off when workers share a tunnel
/// without the fan-out. Each worker replays its own pre-encrypted packets,
/// pass after pass, and starts a fresh window at each pass; workers that
/// all receive one inbound SA's ESP cannot (one worker's reset would refuse
/// the other's numbers), so those cases run without the window, the
/// one-worker rows of the same run too so that the efficiency compares
/// like with like. (Per-CPU SAs: every worker has its own inbound SA, so
/// the window stays on, as with a tunnel per worker. The fan-out: one
/// worker receives each tunnel, so it stays on too.)
pub fn replay_window(opts: &Options) -> u32 {
    let shared = options::tunnels_for(opts.tunnels, opts.workers) < opts.workers;
    // With the fan-out one worker receives each tunnel's ESP: it resets the
    // window once the parts it handed out are back (layers::worker), so
    // the window stays on and its cost (updated by every worker that
    // decrypts) is measured.
    if !opts.per_cpu_sas && !opts.spread_decrypt && shared {
        0
    } else if opts.spread_decrypt {
        // The receiving worker runs ahead of a slow helper by up to what
        // its job boxes hold (`fan_out_jobs`, as `SpreadRings::with_wait`
        // builds them): the window spans that, or a part merely slow would
        // be dropped as too old (`replayed`).
        u32::try_from(fan_out_packets(opts))
            .unwrap_or(u32::MAX)
            .clamp(gateway::REPLAY_WINDOW, espgw_esp::MAX_REPLAY_WINDOW)
    } else {
        gateway::REPLAY_WINDOW
    }
}

/// Mbufs of worker `w`'s pool. A worker that receives a tunnel for the
/// decrypt fan-out or the handoff (one of the first `tunnels`) needs, on
/// top of [`POOL_MBUFS`], what its job boxes may hold out
/// (`fan_out_jobs` bursts) and what the other workers' mempool caches may
/// keep of its pool: with the handoff they free its packets on their own
/// lcores, each cache holding up to 1.5 times its size and a burst
/// before it gives any back (with 16 workers, 4095 ran out: session 18).
/// Rounded up to a power of two less one, the size a DPDK ring-backed
/// pool uses best.
fn pool_mbufs(opts: &Options, w: usize) -> u32 {
    let receives = w < options::tunnels_for(opts.tunnels, opts.workers);
    if !(opts.spread_decrypt && receives) || opts.workers < 2 {
        return POOL_MBUFS;
    }
    let caches = opts
        .workers
        .saturating_mul(POOL_CACHE as usize * 3 / 2 + crate::generator::BURST);
    let want = (POOL_MBUFS as usize)
        .saturating_add(fan_out_packets(opts))
        .saturating_add(caches)
        .saturating_add(1);
    want.checked_next_power_of_two()
        .and_then(|p| u32::try_from(p - 1).ok())
        .unwrap_or(u32::MAX)
}

/// The packets one receiving worker's fan-out may have out: its job boxes
/// (`fan_out_jobs`, as `SpreadRings::with_wait` builds them) of a burst
/// each.
fn fan_out_packets(opts: &Options) -> usize {
    fan_out_jobs(opts.workers, opts.spread_wait_us).saturating_mul(crate::generator::BURST)
}

/// Memory for every worker's pool, in MiB: 4 KiB an mbuf (its data room,
/// header and the pool's own overhead fit with room to spare: 16 MiB a
/// 4095-mbuf pool, as before the owner's pool grew).
fn pools_mib(opts: &Options) -> usize {
    (0..opts.workers)
        .map(|w| (pool_mbufs(opts, w) as usize + 1).div_ceil(256))
        .sum()
}

/// One case and how to measure it.
#[derive(Debug, Clone, Copy)]
struct CaseSpec {
    suite: Suite,
    size: Size,
    direction: Direction,
    workers: usize,
    tunnels: usize,
    outer: Outer,
    inner: Inner,
    replay_window: u32,
    /// Measuring time per layer.
    seconds: f64,
    flows: usize,
    persist_seq: bool,
    /// One tunnel on per-CPU SA pairs, one per worker.
    per_cpu: bool,
    /// The decrypt fan-out between the workers of the one tunnel.
    spread: bool,
    /// What the fan-out does with a late part.
    spread_late: SpreadLate,
    /// The fan-out's reorder bound.
    spread_wait_ns: u64,
    /// The most parts the fan-out cuts a group into.
    spread_parts: Option<usize>,
    /// The fan-out's live check (0: none).
    spread_recheck_ns: u64,
    /// The generator's streaming stores (`--streaming-rx`).
    streaming_rx: bool,
    /// The unprotected port computes UDP checksums (`--tx-checksum-offload`).
    tx_checksum_offload: bool,
    tsc_hz: f64,
}

/// What one worker thread shares with the others of its case, and its own pool.
struct WorkerEnv<'a> {
    w: usize,
    gateway: &'a Gateway,
    barrier: &'a Barrier,
    pool: &'a Mempool,
    spread: Option<&'a Arc<SpreadRings<Mbuf>>>,
    /// The per-CPU SA handoff: slices of the worker layer worker 0 (the
    /// receiving worker) has finished; the others run each slice until it
    /// has, so that it never waits on a worker that stopped.
    owner_slices: &'a std::sync::atomic::AtomicUsize,
}

/// Runs every layer of one case on `spec.workers` workers (one pool each,
/// pinned round-robin over `cores`); returns, per layer, each worker's
/// measurement.
fn run_case(
    spec: CaseSpec,
    pools: &[Mempool],
    cores: &[core_affinity::CoreId],
) -> Result<Vec<(Layer, Vec<Measured>)>, String> {
    let n = spec.workers;
    let mut gw = if spec.per_cpu {
        Gateway::per_cpu(spec.suite, n, spec.replay_window, spec.outer, spec.inner)?
    } else {
        Gateway::build_with(
            spec.suite,
            spec.tunnels,
            spec.replay_window,
            spec.persist_seq,
            spec.outer,
            spec.inner,
        )?
    };
    if spec.tx_checksum_offload {
        gw.offload_tx_udp_checksum()?;
    }
    let barrier = Barrier::new(n);
    let owner_slices = std::sync::atomic::AtomicUsize::new(0);
    let rings = spec
        .spread
        // As `spread_decrypt = "auto"`: the owner spreads while its
        // receive fills whole bursts, which the generator's always do.
        // With per-CPU SAs, the handoff.
        .then(|| {
            SpreadRings::<Mbuf>::with_wait(
                n,
                spec.spread_late,
                SpreadWhen::Behind,
                spec.per_cpu,
                spec.spread_wait_ns,
            )
        });
    if let (Some(rings), Some(parts)) = (&rings, spec.spread_parts) {
        rings.set_max_parts(parts);
    }
    if let Some(rings) = &rings {
        rings.set_recheck_ns(spec.spread_recheck_ns);
    }
    let results: Vec<Result<Vec<Measured>, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|w| {
                let env = WorkerEnv {
                    w,
                    gateway: &gw,
                    barrier: &barrier,
                    pool: &pools[w],
                    spread: rings.as_ref(),
                    owner_slices: &owner_slices,
                };
                let core = (!cores.is_empty()).then(|| cores[w % cores.len()]);
                s.spawn(move || worker_thread(spec, env, core))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("bench worker panicked".into()))
            })
            .collect()
    });
    let per_worker: Vec<Vec<Measured>> = results.into_iter().collect::<Result<_, _>>()?;
    Ok(Layer::ALL
        .iter()
        .enumerate()
        .map(|(i, &layer)| {
            (
                layer,
                per_worker.iter().map(|layers| layers[i].clone()).collect(),
            )
        })
        .collect())
}

fn worker_thread(
    spec: CaseSpec,
    env: WorkerEnv<'_>,
    core: Option<core_affinity::CoreId>,
) -> Result<Vec<Measured>, String> {
    if let Some(core) = core {
        core_affinity::set_for_current(core);
    }
    // An lcore id gives this thread its mempool cache, as on an EAL worker.
    let registered = lcore::register_thread().is_ok();
    let result = measure_layers(spec, &env);
    if registered {
        lcore::unregister_thread();
    }
    result
}

/// Every layer in slices, in turn ([`crate::layers::SLICE_SECONDS`]),
/// each slice started together with the other workers.
fn measure_layers(spec: CaseSpec, env: &WorkerEnv<'_>) -> Result<Vec<Measured>, String> {
    let gw = env.gateway;
    let case = CaseData::new(
        gw,
        spec.suite,
        spec.size,
        spec.direction,
        env.w,
        spec.tunnels,
        spec.flows,
    )
    .map(|mut case| {
        case.shared = !spec.per_cpu && spec.tunnels < spec.workers;
        case
    });
    let slices = layers::slices(spec.seconds);
    let slice = spec.seconds / slices as f64;
    let mut measured: Vec<Measured> = Layer::ALL.iter().map(|_| Measured::new()).collect();
    let mut failure: Option<String> = case.as_ref().err().cloned();
    // The per-CPU SA handoff: worker 0 receives every pair's ESP, as one
    // RX queue does when RSS cannot tell the SAs apart.
    let handoff = spec.per_cpu && env.spread.is_some() && spec.direction == Direction::Decrypt;
    let lanes: Result<Vec<CaseData>, String> = if handoff && env.w == 0 {
        let lane = |k| {
            CaseData::new(
                gw,
                spec.suite,
                spec.size,
                spec.direction,
                k,
                spec.tunnels,
                spec.flows,
            )
        };
        (1..spec.workers).map(lane).collect()
    } else {
        Ok(Vec::new())
    };
    // (A failure waits at the barriers with the others, below.)
    let lanes = lanes.unwrap_or_else(|e| {
        failure.get_or_insert(e);
        Vec::new()
    });
    let ctx = case.as_ref().ok().map(|case| Ctx {
        gateway: gw,
        case,
        pool: env.pool,
        tsc_hz: spec.tsc_hz,
        spread: env.spread,
        lanes: &lanes,
        streaming_rx: spec.streaming_rx,
    });
    let mut steps = Vec::new();
    if let Some(ctx) = &ctx {
        for layer in Layer::ALL {
            match ctx.stage(layer) {
                Ok(step) => steps.push(step),
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
    }
    use std::sync::atomic::Ordering;
    for s in 0..slices {
        for (i, layer) in Layer::ALL.iter().enumerate() {
            // Every thread waits here even after an error, or the others hang.
            env.barrier.wait();
            let waited_on = handoff && *layer == Layer::Worker;
            if failure.is_some() {
                if waited_on && env.w == 0 {
                    env.owner_slices.fetch_add(1, Ordering::Release);
                }
                continue;
            }
            // The handoff's other workers run until worker 0 is done.
            let more = || waited_on && env.w != 0 && env.owner_slices.load(Ordering::Acquire) <= s;
            // A panicking stage must not leave this thread's share of the
            // barrier to the others (they would wait for it forever): it
            // becomes this thread's failure, reported like an error.
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                layers::run_for_then_while(slice, more, &mut measured[i], &mut steps[i])
            }));
            if waited_on && env.w == 0 {
                env.owner_slices.fetch_add(1, Ordering::Release);
            }
            match run {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failure = Some(e),
                Err(panic) => {
                    let what = espgw_dataplane::supervise::panic_message(&*panic);
                    failure = Some(format!("the {:?} layer panicked: {what}", Layer::ALL[i]));
                }
            }
        }
    }
    drop(steps); // frees the mbufs the stages still hold
    match failure {
        Some(e) => Err(e),
        None => Ok(measured),
    }
}

fn rows_of_case(
    spec: CaseSpec,
    per_layer: Vec<(Layer, Vec<Measured>)>,
    tsc_hz: f64,
    earlier: &[Row],
) -> Vec<Row> {
    let (suite, size, direction, n) = (spec.suite, spec.size, spec.direction, spec.workers);
    let ceiling = per_layer
        .iter()
        .find(|(l, _)| *l == Layer::Cipher)
        .map(|(_, m)| aggregate_rates(m, tsc_hz).cycles_per_packet)
        .unwrap_or(0.0);
    per_layer
        .into_iter()
        .map(|(layer, measured)| {
            let rates = aggregate_rates(&measured, tsc_hz);
            let single = earlier.iter().find(|r| {
                r.suite == suite
                    && r.size == size
                    && r.direction == direction
                    && r.layer == layer
                    && r.workers == 1
            });
            Row {
                suite,
                size,
                direction,
                workers: n,
                tunnels: spec.tunnels,
                outer: spec.outer,
                inner: spec.inner,
                replay_window: spec.replay_window,
                flows: spec.flows,
                layer,
                rates,
                measured: merge(&measured),
                ratio_to_ceiling: ratio_to_ceiling(rates.cycles_per_packet, ceiling),
                efficiency: if n > 1 {
                    // Wall-clock rates of the whole loops: a worker that
                    // shares its core (more workers than free cores) shows
                    // here, while its stage cycles would hide it.
                    single.and_then(|r| efficiency(rates.loop_mpps, n, r.rates.loop_mpps))
                } else {
                    None
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fan-out or handoff owner's pool holds its job boxes' packets and
    /// every other worker's cache of it; the other pools stay small.
    #[test]
    fn a_receiving_workers_pool_covers_its_boxes_and_the_caches() {
        let mut opts = Options {
            workers: 16,
            tunnels: Some(1),
            spread_decrypt: true,
            ..Options::default()
        };
        let owner = pool_mbufs(&opts, 0) as usize;
        let boxes = fan_out_jobs(16, opts.spread_wait_us) * crate::generator::BURST;
        let caches = 16 * (POOL_CACHE as usize * 3 / 2 + crate::generator::BURST);
        assert!(owner >= POOL_MBUFS as usize + boxes + caches, "{owner}");
        assert!((owner + 1).is_power_of_two());
        assert_eq!(pool_mbufs(&opts, 1), POOL_MBUFS);
        // Memory for them all (4 KiB an mbuf).
        assert_eq!(pools_mib(&opts), (owner + 1) / 256 + 15 * 16);
        opts.spread_decrypt = false;
        assert_eq!(pool_mbufs(&opts, 0), POOL_MBUFS);
        assert_eq!(pools_mib(&opts), 16 * 16);
    }
}
