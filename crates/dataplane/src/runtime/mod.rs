//! `espgw run`: the DPDK side. EAL, one mbuf pool, every port with one
//! RX/TX queue pair per worker, workers on EAL lcores (worker k owns queue
//! k of every port, run to completion), a control loop on the main lcore
//! that waits for SIGINT/SIGTERM, `--duration` or a worker panic
//! ([`crate::supervise`]), then the final counters.

mod control;
mod eal_args;
mod pipeline;
mod poller;
mod steering;
mod trial_log;
mod worker_loop;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dpdk::{lcore, Eal, Mempool, Port, PortConfig, Ring, RingMode};
// QUEUE_DESCRIPTORS: per RX and TX queue (the config's mbuf sizing counts them).
use espgw_control::config::{Config, Mode, PIPELINE_RING_SLOTS, QUEUE_DESCRIPTORS};
use espgw_control::Diagnostic;

use crate::counters::WorkerCounters;
use crate::neighbor::SharedNeighbors;
use crate::stats::{NicCounters, Stats};
use crate::supervise::{self, Supervisor, WorkerPanic};
use espgw_control::live::TablesError;
use espgw_control::tables::Tables;

use crate::network::Network;

pub use eal_args::{device_arg, eal_args, is_pci, lcore_map, lcores_needed, queues_per_port};
pub use poller::MbufPool;

/// What `espgw run` was asked to do.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub config: PathBuf,
    /// Stop after this long; `None`: until SIGINT/SIGTERM.
    pub duration: Option<Duration>,
    /// Where to write the final counters as JSON.
    pub stats_json: Option<PathBuf>,
}

/// Why a run could not start (or finish cleanly).
#[derive(Debug)]
pub enum RunError {
    /// The config did not validate; nothing was started.
    Config(Vec<Diagnostic>),
    Tables(TablesError),
    Dpdk(dpdk::Error),
    Io(PathBuf, std::io::Error),
    /// A worker panicked (a bug: workers must not panic on any input); the
    /// gateway stopped (`espgw run` exits with status 70).
    WorkerPanicked(WorkerPanic),
    Setup(String),
}

impl core::fmt::Display for RunError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RunError::Config(d) => write!(
                f,
                "the config has {} error(s)",
                d.iter().filter(|d| d.is_error()).count()
            ),
            RunError::Tables(e) => write!(f, "{e}"),
            RunError::Dpdk(e) => write!(f, "DPDK: {e}"),
            RunError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            RunError::WorkerPanicked(p) => write!(f, "{p}; the gateway stopped"),
            RunError::Setup(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for RunError {}

impl From<dpdk::Error> for RunError {
    fn from(e: dpdk::Error) -> Self {
        RunError::Dpdk(e)
    }
}

/// Extra data room per mbuf beyond the largest frame: ESP trailer and ICV
/// growth of a packet that arrived at full size is refused by the PMTU
/// check anyway, so this is slack, not a requirement.
const DATA_ROOM_SLACK: u32 = 128;
/// DPDK's default mbuf size (RTE_MBUF_DEFAULT_BUF_SIZE): some PMDs size
/// their receive frames by it (af_packet wants 2016 bytes after headroom).
const MIN_DATA_ROOM: u32 = 2048 + 128;

/// The data room af_packet ports need: their PMD refuses an RX pool whose
/// mbufs are smaller than its ring frames (framesz, e.g. 9216 for MTU 9000),
/// whatever the MTU. 0 without af_packet ports.
fn af_packet_data_room(config: &Config) -> u32 {
    config
        .ports
        .iter()
        .filter(|p| dpdk::port::af_packet::is_af_packet(&p.device))
        .map(|p| {
            let frames = dpdk::port::af_packet::AfPacketFrames::from_devargs(&p.device);
            frames.rx_buffer_needed() + u32::from(dpdk::MBUF_HEADROOM)
        })
        .max()
        .unwrap_or(0)
}

/// Runs the gateway described by `opts.config` until a signal or the
/// duration; returns the final counters (also written to `--stats-json`).
pub fn run(opts: &RunOptions) -> Result<serde_json::Value, RunError> {
    let (config, warnings) = espgw_control::load(&opts.config).map_err(RunError::Config)?;
    for w in &warnings {
        eprintln!("{w}");
    }
    // Before any SA is built: the ciphers' vector width.
    config.dataplane.apply_simd_width();
    if let Some(note) = espgw_esp::crypto::provider::simd_width_note() {
        eprintln!("espgw {}: {note}", config.gateway.name);
    }
    // Every SA is built once before DPDK starts, so a key the cipher
    // refuses stops the run before any port comes up.
    Tables::from_config(&config, 0).map_err(RunError::Tables)?;
    let stop = Arc::new(AtomicBool::new(false));
    // A signal ends the main loop, which then stops the workers, after IKE
    // sent its Deletes through them (`stop` stops the workers at once).
    let signalled = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&signalled))
            .map_err(|e| RunError::Setup(format!("signal handler: {e}")))?;
    }
    // The CPUs this process may run on (taskset, systemd's CPUAffinity=),
    // before the EAL pins this thread: the lcores float over these.
    let mut cpus = crate::core_probe::allowed_cpus();
    if cpus.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        cpus = (0..n).collect();
    }
    let args = eal_args(
        &config.dataplane,
        &config.ports,
        &config.gateway.name,
        &cpus,
    );
    eprintln!("espgw {}: EAL {}", config.gateway.name, args.join(" "));
    let _eal = Eal::init(&args)?;
    // `spread_decrypt = "auto"`: the cores' cache-line round trip decides
    // whether the fan-out can pay on this host. Before the ports start
    // (nothing queues up meanwhile) and while the workers' cores are idle.
    let gate = crate::core_probe::gate_for(&config.dataplane);
    if let Some(g) = &gate {
        eprintln!(
            "espgw {}: spread_decrypt \"auto\": {}",
            config.gateway.name,
            g.describe()
        );
    }
    let (json, result) = run_with_eal(&config, opts, &stop, &signalled, gate.as_ref());
    if let (Some(path), Some(json)) = (&opts.stats_json, &json) {
        let text = serde_json::to_string_pretty(json).unwrap_or_default();
        std::fs::write(path, text + "\n").map_err(|e| RunError::Io(path.clone(), e))?;
    }
    result?;
    json.ok_or_else(|| RunError::Setup("no counters".into()))
}

/// Everything after EAL init. Returns the counters whenever workers ran,
/// even if stopping them went wrong, so that they are still written.
fn run_with_eal(
    config: &Config,
    opts: &RunOptions,
    stop: &Arc<AtomicBool>,
    signalled: &AtomicBool,
    gate: Option<&crate::core_probe::FanOutGate>,
) -> (Option<serde_json::Value>, Result<(), RunError>) {
    let setup = match Setup::new(config) {
        Ok(s) => s,
        Err(e) => return (None, Err(e)),
    };
    let started = Instant::now();
    // One live counter copy per worker lcore (the I/O lcore included).
    let lives: Vec<Arc<Mutex<WorkerCounters>>> = (0..lcores_needed(&config.dataplane))
        .map(|_| Arc::new(Mutex::new(WorkerCounters::default())))
        .collect();
    let steering_view = Arc::new(Mutex::new(None));
    let counters = control::LiveCounters {
        workers: lives.clone(),
        ports: setup.net.ports.iter().map(|p| p.name.clone()).collect(),
        tx_udp_checksum: setup.net.ports.iter().map(|p| p.tx_udp_checksum).collect(),
        steering: Arc::clone(&steering_view),
    };
    let mut control = match control::Control::start(config, started, counters, stop) {
        Ok(c) => c,
        Err(e) => return (None, Err(RunError::Setup(e))),
    };
    // A worker that panics sets `stop`: the loop below ends within 20 ms.
    let supervisor = Supervisor::new(Arc::clone(stop));
    let starts_off = gate.is_some_and(|g| g.starts_off());
    let run = Launch {
        control: &control,
        lives: &lives,
        stop: Arc::clone(stop),
        started,
        supervisor: &supervisor,
        spread: config
            .dataplane
            .spread_when()
            .filter(|_| gate.is_none_or(|g| g.runs()))
            .map(|when| {
                // Over the probe's limit with the live check on: the
                // fan-out starts off (each worker's trials may turn it on)
                // and the per-CPU handoff, which no trial measures, stays
                // off.
                let rings = crate::worker::SpreadRings::with_wait(
                    config.dataplane.workers,
                    config.dataplane.spread_late,
                    when,
                    config.dataplane.per_cpu_handoff && !starts_off,
                    u64::from(config.dataplane.spread_wait_us) * 1000,
                );
                rings.set_recheck_ns(u64::from(config.dataplane.spread_recheck_ms) * 1_000_000);
                rings.set_starts_off(starts_off);
                rings
            }),
    };
    let workers = match setup.launch(config, run) {
        Ok(w) => w,
        Err(e) => {
            stop.store(true, Ordering::Relaxed);
            control.shutdown();
            return (None, Err(e));
        }
    };
    eprintln!(
        "espgw {}: running, {} worker(s), ports: {}",
        config.gateway.name,
        workers.len(),
        setup
            .net
            .ports
            .iter()
            .map(|p| format!(
                "{} ({}, {})",
                p.name,
                p.device,
                crate::stats::mac_string(p.mac)
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut links = LinkWatch::new(&setup.ports, &setup.net);
    // `steer_esp`: flow rules follow the snapshots from here on (queue k
    // is worker k's in run-to-completion mode).
    let mut steering = config.dataplane.steers_esp().then(|| {
        let queues = u16::try_from(queues_per_port(&config.dataplane)).unwrap_or(u16::MAX);
        steering::Steering::new(queues, control.live.watcher(), steering_view)
    });
    let mut trials = trial_log::TrialLog::new(config.dataplane.workers, starts_off);
    while !stop.load(Ordering::Relaxed) && !signalled.load(Ordering::Relaxed) {
        if opts.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        links.poll(&setup.ports, &setup.net);
        trials.poll(&lives);
        if let Some(s) = steering.as_mut() {
            s.poll(&setup.ports, &setup.net);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Workers still running (not stopped by a panic): IKE says goodbye
    // through them first.
    if !stop.load(Ordering::Relaxed) {
        control.stop_ike();
    }
    stop.store(true, Ordering::Relaxed);
    let joined = workers
        .into_iter()
        .map(|h| (Some(h.lcore()), h.wait()))
        .collect();
    let (counters, panicked) = supervise::collect(joined, &lives);
    let result = match panicked {
        Some(p) => Err(RunError::WorkerPanicked(p)),
        None => Ok(()),
    };
    let tables = control.current();
    control.shutdown();
    let nic = setup
        .ports
        .iter()
        .map(|p| {
            p.stats().ok().map(|s| NicCounters {
                rx_packets: s.rx_packets,
                tx_packets: s.tx_packets,
                rx_missed: s.rx_missed,
                rx_errors: s.rx_errors,
                tx_errors: s.tx_errors,
                rx_nombuf: s.rx_nombuf,
            })
        })
        .collect();
    let stats = Stats {
        seconds: started.elapsed().as_secs_f64(),
        workers: counters,
        nic,
    };
    let mut json = stats.to_json(&setup.net, &tables);
    if let Some(g) = gate {
        json["spread_decrypt_gate"] = g.json();
    }
    if let Some(s) = steering.as_mut() {
        for (i, port) in json["ports"]
            .as_array_mut()
            .into_iter()
            .flatten()
            .enumerate()
        {
            port["esp_steering"] = s.json(i);
        }
        json["esp_steering_failed_tries"] = s.failed_tries().into();
        s.remove_all(&setup.ports, &setup.net);
    }
    drop(steering);
    let total = stats.total();
    eprintln!(
        "espgw {}: stopped after {:.1}s: rx {} tx {} local {} generated {} dropped {} held {}{}",
        config.gateway.name,
        stats.seconds,
        total.rx,
        total.tx,
        total.local,
        total.generated,
        total.drops.total(),
        total.held,
        if total.balanced() {
            ""
        } else {
            " (counters do not balance!)"
        }
    );
    if let Err(e) = setup.stop() {
        eprintln!("espgw: stopping ports: {e}");
    }
    (Some(json), result)
}

/// The started ports, the pool and the network they make.
/// Logs one line per link state change of a port (never per packet),
/// checked from the control loop about once a second.
struct LinkWatch {
    up: Vec<Option<bool>>,
    last: Instant,
}

impl LinkWatch {
    fn new(ports: &[Port], net: &Network) -> LinkWatch {
        let mut w = LinkWatch {
            up: vec![None; ports.len()],
            last: Instant::now(),
        };
        w.check(ports, net);
        w
    }

    fn poll(&mut self, ports: &[Port], net: &Network) {
        if self.last.elapsed() >= Duration::from_secs(1) {
            self.last = Instant::now();
            self.check(ports, net);
        }
    }

    fn check(&mut self, ports: &[Port], net: &Network) {
        for (k, port) in ports.iter().enumerate() {
            let Ok(link) = port.link() else { continue };
            if self.up[k] == Some(link.up) {
                continue;
            }
            let name = net.ports.get(k).map_or("?", |p| p.name.as_str());
            if link.up {
                tracing::info!(port = name, speed_mbps = link.speed_mbps, "link up");
            } else {
                tracing::warn!(port = name, "link down");
            }
            self.up[k] = Some(link.up);
        }
    }
}

struct Setup {
    /// One per NUMA socket with ports ([`crate::numa::PoolPlan`]); the
    /// first also serves what workers make themselves (ARP, ND, ICMP
    /// errors, IKE datagrams: few).
    pools: Vec<Mempool>,
    ports: Vec<Port>,
    net: Arc<Network>,
    shared: SharedNeighbors,
}

type WorkerHandle = lcore::LaunchHandle<Result<WorkerCounters, WorkerPanic>>;

/// What every worker lcore of a run shares.
struct Launch<'a> {
    control: &'a control::Control,
    /// Where worker k publishes its counters (the I/O lcore after the workers).
    lives: &'a [Arc<Mutex<WorkerCounters>>],
    stop: Arc<AtomicBool>,
    started: Instant,
    supervisor: &'a Arc<Supervisor>,
    /// The decrypt fan-out's rings, shared by every worker, when
    /// `[dataplane] spread_decrypt` is on (docs/multicore.md).
    spread: Option<Arc<crate::worker::SpreadRings<dpdk::Mbuf>>>,
}

impl Launch<'_> {
    /// Starts `job` on `lc` as worker lcore `k`, under the supervisor.
    fn start(
        &self,
        k: usize,
        lc: u32,
        job: impl FnOnce() -> WorkerCounters + Send + 'static,
    ) -> Result<WorkerHandle, RunError> {
        let sup = Arc::clone(self.supervisor);
        let live = Arc::clone(&self.lives[k]);
        Ok(lcore::launch(lc, move || {
            sup.guard(k, Some(lc), &live, job)
        })?)
    }
}

impl Setup {
    fn new(config: &Config) -> Result<Setup, RunError> {
        let dp = &config.dataplane;
        let queues = queues_per_port(dp);
        let queues = u16::try_from(queues).map_err(|_| {
            RunError::Setup(format!("{queues} queues per port: more than DPDK allows"))
        })?;
        let data_room = (Mempool::data_room_for_mtu(dp.mtu) + DATA_ROOM_SLACK)
            .max(MIN_DATA_ROOM)
            .max(af_packet_data_room(config));
        let data_room = u16::try_from(data_room)
            .map_err(|_| RunError::Setup("mtu too large for an mbuf".into()))?;
        let cache = dp.mempool_cache();
        let mut opened = Vec::new();
        for p in &config.ports {
            opened.push(Port::open(&p.device)?);
        }
        let sockets: Vec<i32> = opened
            .iter()
            .map(|port| port.info().map_or(-1, |i| i.socket))
            .collect();
        let plan = crate::numa::PoolPlan::for_ports(&sockets);
        let mut pools = Vec::new();
        for (i, &socket) in plan.sockets.iter().enumerate() {
            let name = plan.name(i);
            let pool = match Mempool::new(&name, dp.mbufs, cache, data_room, socket) {
                Ok(pool) => pool,
                // No memory on that socket (hugepages reserved on another
                // node, `--socket-mem`, `--no-huge`): anywhere, as before
                // per-socket pools, rather than not at all.
                Err(e) if socket >= 0 => {
                    eprintln!(
                        "espgw {}: no pool of {} mbufs on NUMA socket {socket} ({e}): \
                         its ports' packets come from memory on any socket",
                        config.gateway.name, dp.mbufs
                    );
                    Mempool::new(&name, dp.mbufs, cache, data_room, dpdk::SOCKET_ANY)?
                }
                Err(e) => return Err(e.into()),
            };
            pools.push(pool);
        }
        if plan.sockets.len() > 1 {
            let names: Vec<&str> = config.ports.iter().map(|p| p.name.as_str()).collect();
            eprintln!(
                "espgw {}: ports on {} NUMA sockets: a pool of {} mbufs on each ({})",
                config.gateway.name,
                plan.sockets.len(),
                dp.mbufs,
                plan.describe(&names)
            );
        }
        let mut ports = Vec::new();
        let mut macs = Vec::new();
        let ports_and_pools = config.ports.iter().zip(opened).zip(&plan.port_pool);
        for (i, ((p, mut port), &k)) in ports_and_pools.enumerate() {
            let pool = &pools[k];
            // TX UDP checksum offload only where ESP in UDP over IPv6 may
            // leave: on ixgbe and i40e any TX offload takes the whole port
            // off the driver's vector TX path (docs/dataplane.md).
            let needed = config.may_send_esp_in_udp_v6(espgw_control::config::PortId(i));
            let pc = PortConfig {
                rx_queues: queues,
                tx_queues: queues,
                rx_descriptors: QUEUE_DESCRIPTORS,
                tx_descriptors: QUEUE_DESCRIPTORS,
                mtu: dp.mtu,
                rss: true,
                promiscuous: true,
                tx_udp_checksum: dp.tx_checksum_offload && needed,
            };
            let mut refused = None;
            if let Err(e) = port.configure(&pc, pool) {
                if !pc.tx_udp_checksum {
                    return Err(e.into());
                }
                // A driver that lists the offload but will not take it:
                // the checksum in software, not a gateway that cannot start.
                refused = Some(e.to_string());
                let plain = PortConfig {
                    tx_udp_checksum: false,
                    ..pc
                };
                port.configure(&plain, pool)?;
            }
            if let Some(note) = port.mtu_note() {
                eprintln!("espgw {}: {note}", config.gateway.name);
            }
            // The port as set up, where a hardware port differs from the
            // virtual devices the tests run on (RSS on the SPI above all):
            // the descriptors as asked for (the driver may round them).
            let (driver, socket) = port
                .info()
                .map_or((String::from("?"), -1), |i| (i.driver, i.socket));
            let udp_checksum = match (port.tx_udp_checksum(), dp.tx_checksum_offload, needed) {
                (true, _, _) => "offloaded".to_string(),
                (false, false, _) => "in software (tx_checksum_offload = \"off\")".to_string(),
                (false, true, false) => {
                    "not asked of the device (no ESP in UDP over IPv6 leaves by this port)"
                        .to_string()
                }
                (false, true, true) => match &refused {
                    Some(e) => format!("in software (the device refused the offload: {e})"),
                    None => "in software (the device offers no offload)".to_string(),
                },
            };
            eprintln!(
                "espgw {}: port {}: driver {driver}, socket {socket}, {queues} RX/TX queue pair(s), \
                 {QUEUE_DESCRIPTORS} descriptors asked for each, RSS: {}, TX UDP checksum: {udp_checksum}",
                config.gateway.name,
                p.name,
                port.rss_summary()
            );
            port.start()?;
            macs.push(port.mac()?);
            ports.push(port);
        }
        let mut net = Network::from_config(config, &macs).map_err(RunError::Tables)?;
        for (info, port) in net.ports.iter_mut().zip(&ports) {
            info.tx_udp_checksum = port.tx_udp_checksum();
        }
        let net = Arc::new(net);
        Ok(Setup {
            pools,
            ports,
            net,
            shared: SharedNeighbors::default(),
        })
    }

    /// Starts one worker per configured worker on the EAL's worker lcores.
    fn launch(&self, config: &Config, run: Launch) -> Result<Vec<WorkerHandle>, RunError> {
        let lcores = lcore::worker_ids();
        let needed = lcores_needed(&config.dataplane);
        if lcores.len() < needed {
            return Err(RunError::Setup(format!(
                "{needed} worker lcores needed but the EAL has {} (check -l/--lcores in dataplane.eal)",
                lcores.len()
            )));
        }
        if config.dataplane.mode == Mode::Pipeline {
            return self.launch_pipeline(config, run, &lcores);
        }
        let workers = config.dataplane.workers;
        let mut handles = Vec::new();
        for (k, &lc) in lcores.iter().take(workers).enumerate() {
            let q = k as u16;
            let rx = self
                .ports
                .iter()
                .map(|p| p.rx_queue(q))
                .collect::<Result<Vec<_>, _>>()?;
            let tx = self
                .ports
                .iter()
                .map(|p| p.tx_queue(q))
                .collect::<Result<Vec<_>, _>>()?;
            let job = worker_loop::Job {
                setup: self.worker_setup(config, &run, k),
                rx,
                tx,
                burst: usize::from(config.dataplane.burst),
                stop: Arc::clone(&run.stop),
            };
            handles.push(run.start(k, lc, move || job.run())?);
        }
        Ok(handles)
    }

    /// What worker `k` starts from, in either mode.
    fn worker_setup(&self, config: &Config, run: &Launch, k: usize) -> poller::WorkerSetup {
        poller::WorkerSetup {
            id: k,
            net: Arc::clone(&self.net),
            reader: run.control.live.reader(),
            pool: MbufPool(self.pools[0].clone()),
            shared: self.shared.clone(),
            poll: config.dataplane.poll,
            idle_sleep: Duration::from_micros(u64::from(config.dataplane.idle_sleep_us)),
            started: run.started,
            live: Arc::clone(&run.lives[k]),
            punt: run.control.punt(),
            spread: run
                .spread
                .as_ref()
                .map(|r| Arc::clone(r) as Arc<dyn std::any::Any + Send + Sync>),
        }
    }

    /// Pipeline mode: workers on the first lcores, the I/O lcore after them.
    fn launch_pipeline(
        &self,
        config: &Config,
        run: Launch,
        lcores: &[u32],
    ) -> Result<Vec<WorkerHandle>, RunError> {
        let workers = config.dataplane.workers;
        let ports = self.ports.len();
        let mut index = Vec::new();
        for (i, p) in self.ports.iter().enumerate() {
            let id = usize::from(p.id());
            if index.len() <= id {
                index.resize(id + 1, None);
            }
            index[id] = Some(i);
        }
        let port_index: pipeline::PortIndex = Arc::new(index);
        let done = Arc::new(AtomicUsize::new(0));
        let rx_stopped = Arc::new(AtomicBool::new(false));
        let ring =
            |name: String| Ring::new(&name, PIPELINE_RING_SLOTS, dpdk::SOCKET_ANY, RingMode::SPSC);
        let mut to_workers = Vec::new();
        let mut from_workers = Vec::new();
        let mut handles = Vec::new();
        for (k, &lc) in lcores.iter().take(workers).enumerate() {
            let input = ring(format!("espgw_in{k}"))?;
            let outputs = (0..ports)
                .map(|p| ring(format!("espgw_out{k}_{p}")))
                .collect::<Result<Vec<_>, _>>()?;
            to_workers.push(input.producer()?);
            from_workers.push(
                outputs
                    .iter()
                    .map(|r| r.consumer())
                    .collect::<Result<Vec<_>, _>>()?,
            );
            let job = pipeline::CryptoJob {
                setup: self.worker_setup(config, &run, k),
                from_io: input.consumer()?,
                to_io: outputs
                    .iter()
                    .map(|r| r.producer())
                    .collect::<Result<Vec<_>, _>>()?,
                port_index: Arc::clone(&port_index),
                rx_stopped: Arc::clone(&rx_stopped),
                done: Arc::clone(&done),
            };
            handles.push(run.start(k, lc, move || job.run())?);
        }
        let io = pipeline::IoJob {
            rx: self
                .ports
                .iter()
                .map(|p| p.rx_queue(0))
                .collect::<Result<Vec<_>, _>>()?,
            tx: self
                .ports
                .iter()
                .map(|p| p.tx_queue(0))
                .collect::<Result<Vec<_>, _>>()?,
            to_workers,
            from_workers,
            port_index,
            poll: config.dataplane.poll,
            idle_sleep: Duration::from_micros(u64::from(config.dataplane.idle_sleep_us)),
            stop: Arc::clone(&run.stop),
            done,
            rx_stopped,
            live: Arc::clone(&run.lives[workers]),
        };
        handles.push(run.start(workers, lcores[workers], move || io.run())?);
        Ok(handles)
    }

    fn stop(mut self) -> Result<(), RunError> {
        for p in &mut self.ports {
            p.stop()?;
        }
        drop(self.ports);
        drop(self.pools);
        Ok(())
    }
}
