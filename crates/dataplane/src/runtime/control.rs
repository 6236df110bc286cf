//! The control plane around a running data plane: the SA manager that
//! publishes table snapshots to the workers, the control socket
//! (`espgw ctl`), the metrics endpoint and the lifetime ticker, all from
//! crates/control; and the data plane's side of their stats.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use espgw_control::config::Config;
use espgw_control::ike::{
    monotonic_ms, EngineConfig, IkeControl, IkeDriver, IkeService, PuntRings, PuntTransport,
    SystemRandom, PUNT_RING_SLOTS,
};
use espgw_control::live::{
    self, Clock, ControlBackend, ControlServer, CountersSource, DataplaneCounters, LiveControl,
    MetricsServer, SaManager, StatsSource,
};

use espgw_control::state::{ReservationPolicy, SeqKeeper, StateDir};

use crate::counters::WorkerCounters;
use espgw_control::tables::Tables;

/// What the workers read: a snapshot per change, published by the manager.
pub type Snapshot = Arc<Tables>;

/// The live control plane of a run; dropping it stops its threads.
pub(super) struct Control {
    pub live: Arc<LiveControl<Snapshot>>,
    _socket: Option<ControlServer>,
    _metrics: Option<MetricsServer>,
    ticker: Option<JoinHandle<()>>,
    /// Extends sequence reservations and writes inbound high-water marks;
    /// flushes them once more when the run stops.
    keeper: Option<JoinHandle<()>>,
    state: Option<Arc<SeqKeeper>>,
    /// The IKE driver on the punt rings, when the config has connections.
    ike: Option<Ike>,
}

/// IKEv2 in the gateway: the driver behind its service, the punt rings
/// the workers fill and drain, and the thread that moves datagrams and
/// runs the timers.
struct Ike {
    service: Arc<IkeService<SystemRandom>>,
    rings: Arc<PuntRings>,
    thread: Option<JoinHandle<()>>,
    /// Stops the IKE thread (after the shutdown Deletes were sent, which
    /// the workers must still be running for).
    done: Arc<AtomicBool>,
}

/// How long the IKE thread sleeps when there was nothing to do: an IKE
/// round trip waits at most this long in the punt ring.
const IKE_IDLE: Duration = Duration::from_millis(2);
/// How long a SIGTERM waits for the workers to send the Deletes.
const DELETE_FLUSH: Duration = Duration::from_secs(1);

impl Ike {
    fn start(config: &Config, live: &Arc<LiveControl<Snapshot>>) -> Result<Ike, String> {
        let driver = IkeDriver::new(
            &config.connections,
            EngineConfig {
                retransmit_base_ms: config.gateway.ike_retransmit_ms,
                max_retransmits: config.gateway.ike_retransmit_tries,
                ..EngineConfig::default()
            },
            SystemRandom::new(),
        )
        .map_err(|e| format!("IKE: {e}"))?;
        let rings = PuntRings::new(PUNT_RING_SLOTS);
        let service = Arc::new(
            IkeService::new(
                driver,
                Box::new(PuntTransport(Arc::clone(&rings))),
                monotonic_ms(),
            )
            .with_rings(Arc::clone(&rings)),
        );
        let control: Arc<dyn IkeControl<Snapshot>> = Arc::clone(&service) as _;
        live.set_ike(control);
        let done = Arc::new(AtomicBool::new(false));
        let thread = {
            let (service, rings, live, done) = (
                Arc::clone(&service),
                Arc::clone(&rings),
                Arc::clone(live),
                Arc::clone(&done),
            );
            std::thread::Builder::new()
                .name("espgw-ike".into())
                .spawn(move || ike_loop(&service, &rings, &live, &done))
                .map_err(|e| format!("IKE thread: {e}"))?
        };
        tracing::info!(
            connections = config.connections.len(),
            "IKE: running on the unprotected port(s), UDP 500 and 4500"
        );
        Ok(Ike {
            service,
            rings,
            thread: Some(thread),
            done,
        })
    }
}

/// The IKE thread: `start` connections initiated and `trap` ones
/// installed, then every punted datagram and every acquire into the
/// driver, and its timers when due and at least once a second (after the
/// manager's own tick: CHILD_SA soft expiry).
fn ike_loop(
    service: &IkeService<SystemRandom>,
    rings: &PuntRings,
    live: &LiveControl<Snapshot>,
    done: &AtomicBool,
) {
    service.start(&mut live.manager());
    let mut next_tick = 0;
    while !done.load(Ordering::Relaxed) {
        let mut busy = false;
        while let Some(d) = rings.receive() {
            busy = true;
            service.datagram(&mut live.manager(), d.src, d.dst, d.payload());
        }
        while let Some(a) = rings.next_acquire() {
            busy = true;
            service.acquire(&mut live.manager(), &a);
        }
        let now = service.now();
        if now >= next_tick || service.poll_timeout().is_some_and(|t| t <= now) {
            service.tick(&mut live.manager());
            next_tick = now + 1_000;
        }
        if !busy {
            std::thread::sleep(IKE_IDLE);
        }
    }
}

/// The workers' counter copies (published every 100 ms) as the control
/// plane's stats.
pub(super) struct LiveCounters {
    pub workers: Vec<Arc<Mutex<WorkerCounters>>>,
    pub ports: Vec<String>,
    /// Per port: its TX UDP checksum offload is on (`PortInfo::tx_udp_checksum`).
    pub tx_udp_checksum: Vec<bool>,
    /// ESP steering per port, as the main lcore last left it (`None`: not
    /// in effect).
    pub steering: Arc<Mutex<Option<Vec<live::EspSteeringState>>>>,
}

impl CountersSource for LiveCounters {
    fn counters(&self) -> DataplaneCounters {
        let mut total = WorkerCounters::default();
        let mut workers = Vec::new();
        for (k, w) in self.workers.iter().enumerate() {
            let c = w.lock().map(|c| c.clone()).unwrap_or_default();
            total.merge(&c);
            workers.push(live::WorkerLoad {
                worker: k,
                busy_ratio: if c.polls == 0 {
                    0.0
                } else {
                    c.busy_polls as f64 / c.polls as f64
                },
                mss_clamped: c.mss_clamped,
                spread_out: c.spread_out,
                spread_in: c.spread_in,
                spread_kept: c.spread_kept,
                spread_unneeded: c.spread_unneeded,
                reorder_late_sent: c.reorder_late_sent,
                spread_back: c.spread_back.to_vec(),
                spread_back_ns: c.spread_back_ns,
                spread_solo: c.spread_solo,
                spread_trials: c.spread_trials.to_vec(),
                spread_trial_with_pps: c.spread_trial_pps[0],
                spread_trial_without_pps: c.spread_trial_pps[1],
                spread_off: c.spread_off != 0,
                sa_handoff_out: c.sa_handoff_out,
                sa_handoff_in: c.sa_handoff_in,
                sa_handoff_kept: c.sa_handoff_kept,
            });
        }
        let steering = self.steering.lock().map(|s| s.clone()).unwrap_or_default();
        let ports = self
            .ports
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let c = total.ports.get(i).copied().unwrap_or_default();
                live::PortTraffic {
                    name: name.clone(),
                    rx_packets: c.rx_packets,
                    tx_packets: c.tx_packets,
                    rx_bytes: c.rx_bytes,
                    tx_bytes: c.tx_bytes,
                    esp_steering: steering.as_ref().and_then(|s| s.get(i).cloned()),
                    tx_udp_checksum: self.tx_udp_checksum.get(i).copied().unwrap_or(false),
                }
            })
            .collect();
        let drops: BTreeMap<String, u64> = total
            .drops
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| (r.name().to_string(), n))
            .collect();
        DataplaneCounters {
            ports,
            workers,
            drops,
        }
    }
}

impl Control {
    /// Creates the manager (the config's SAs), publishes the first
    /// snapshot, and starts the socket, metrics and ticker the config asks
    /// for. A socket or metrics address that cannot be bound is reported
    /// and skipped: the data plane runs without it.
    pub fn start(
        config: &Config,
        started: Instant,
        counters: LiveCounters,
        stop: &Arc<AtomicBool>,
    ) -> Result<Control, String> {
        let clock: Clock = Arc::new(move || started.elapsed().as_secs());
        let mtu = usize::from(config.dataplane.mtu);
        let (state, unavailable) = open_state(config)?;
        let mut manager = SaManager::with_state(
            config,
            clock(),
            Box::new(move |view| Arc::new(Tables::from_view(view, mtu))),
            state.clone(),
        )
        .map_err(|e| e.to_string())?;
        if let Some(why) = unavailable {
            manager.refuse_aead_without_state(why);
        }
        // `espgw ctl sa rekey` (step 1) answers once the workers use the
        // new inbound SA, so the peer's step 2 cannot race them.
        manager.set_publish_wait(Duration::from_secs(1));
        let keeper = state.as_ref().map(|k| {
            k.spawn(Arc::clone(stop))
                .map_err(|e| format!("sequence keeper thread: {e}"))
        });
        let keeper = keeper.transpose()?;
        let live = Arc::new(LiveControl::new(config, manager, clock, Arc::new(counters)));
        let socket = config.gateway.control_socket.as_ref().and_then(|path| {
            let backend: Arc<dyn ControlBackend> = Arc::clone(&live) as _;
            let access = live::Access::for_this_process(config.gateway.control_group);
            ControlServer::bind_with(path, backend, access)
                .map_err(|e| eprintln!("espgw: control socket {}: {e}", path.display()))
                .ok()
        });
        let metrics = config.gateway.metrics.and_then(|addr| {
            let source: Arc<dyn StatsSource> = Arc::clone(&live) as _;
            MetricsServer::bind(addr, source)
                .map_err(|e| eprintln!("espgw: metrics {addr}: {e}"))
                .ok()
        });
        let ike = if config.connections.is_empty() {
            None
        } else {
            Some(Ike::start(config, &live)?)
        };
        let ticker = live
            .spawn_ticker(Duration::from_secs(1), Arc::clone(stop))
            .map_err(|e| eprintln!("espgw: lifetime ticker: {e}"))
            .ok();
        Ok(Control {
            live,
            _socket: socket,
            _metrics: metrics,
            ticker,
            keeper,
            state,
            ike,
        })
    }

    /// The punt rings the workers use, when IKE runs.
    pub fn punt(&self) -> Option<Arc<PuntRings>> {
        self.ike.as_ref().map(|i| Arc::clone(&i.rings))
    }

    /// SIGTERM, while the workers still run: Delete for every IKE SA, sent
    /// by the workers (waits until they took them from the ring, at most
    /// [`DELETE_FLUSH`]); then the IKE thread stops.
    pub fn stop_ike(&mut self) {
        let Some(ike) = self.ike.as_mut() else {
            return;
        };
        let n = ike.service.shutdown(&mut self.live.manager());
        let deadline = Instant::now() + DELETE_FLUSH;
        while ike.rings.transmit_pending() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        // The worker that took the last one sends it in the same poll.
        std::thread::sleep(Duration::from_millis(20));
        let p = ike.rings.stats();
        tracing::info!(
            ike_sas = n,
            punted = p.received,
            sent = p.transmitted,
            transmit_dropped = p.transmit_dropped,
            "IKE: Delete sent for every IKE SA"
        );
        ike.done.store(true, Ordering::Relaxed);
        if let Some(t) = ike.thread.take() {
            let _ = t.join();
        }
    }

    /// The snapshot published last.
    pub fn current(&self) -> Snapshot {
        Arc::clone(self.live.manager().current().as_ref())
    }

    /// Waits for the ticker and the sequence keeper (after `stop` was set,
    /// and after the workers stopped) and writes the SA state a last time;
    /// the socket and metrics stop when `self` drops.
    pub fn shutdown(mut self) {
        if let Some(ike) = self.ike.as_mut() {
            ike.done.store(true, Ordering::Relaxed);
            if let Some(t) = ike.thread.take() {
                let _ = t.join();
            }
        }
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        if let Some(k) = self.keeper.take() {
            let _ = k.join();
        }
        // The workers have stopped (the caller waited for them): their
        // last bursts' high-water marks are final now.
        if let Some(state) = &self.state {
            state.poll(std::time::Instant::now(), true);
        }
    }
}

/// The state directory of the run (crate espgw_control::state), or why
/// there is none. Manually keyed AEAD SAs need it: without it a restart
/// would send their sequence numbers, the AEAD nonces, again from 1. A
/// config with such a tunnel is refused when the directory is unusable,
/// naming the tunnels, the directory and why; one without them runs
/// unpersisted with a warning, and refuses AEAD SAs added live.
fn open_state(config: &Config) -> Result<(Option<Arc<SeqKeeper>>, Option<String>), String> {
    let dir = &config.gateway.state_dir;
    match StateDir::open(dir) {
        Ok(state) => {
            tracing::info!(dir = %dir.display(), keys = state.len(), "SA state directory open: manual SAs continue their sequence numbers");
            Ok((
                Some(Arc::new(SeqKeeper::new(
                    state,
                    ReservationPolicy::default(),
                ))),
                None,
            ))
        }
        Err(e) => {
            let aead: Vec<String> = config
                .tunnels
                .iter()
                .filter(|t| t.suite.is_aead())
                .map(|t| format!("{:?} ({})", t.name, t.suite.name()))
                .collect();
            if !aead.is_empty() {
                return Err(format!(
                    "tunnel {} refused: its sequence numbers (the AEAD nonces) cannot be persisted in [gateway].state_dir: {e}. \
                     Manually keyed AEAD SAs need a writable state directory, or a restart would reuse nonces (RFC 4106 section 8)",
                    aead.join(", ")
                ));
            }
            tracing::warn!(error = %e, "no usable SA state directory: CBC SAs restart at sequence 1; AEAD SAs added live are refused");
            Ok((
                None,
                Some(format!(
                    "AEAD SAs need the state directory, which is unusable: {e}"
                )),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `espgw ctl stats` and the metrics endpoint get from the
    /// workers' live counters: per-worker load and MSS clamps, port sums.
    #[test]
    fn live_counters_carry_busy_ratio_mss_clamps_and_port_sums() {
        let worker = |polls, busy, clamped, rx| {
            let mut c = WorkerCounters::new(2, 0);
            c.polls = polls;
            c.busy_polls = busy;
            c.mss_clamped = clamped;
            c.ports[0].rx_packets = rx;
            // The fan-out's counters, distinct per worker.
            (c.spread_out, c.spread_in, c.reorder_late_sent) = (rx + 1, rx + 2, rx + 3);
            (c.spread_kept, c.spread_unneeded) = (rx + 4, rx + 5);
            (c.sa_handoff_out, c.sa_handoff_in, c.sa_handoff_kept) = (rx + 6, rx + 7, rx + 8);
            Arc::new(Mutex::new(c))
        };
        let steering = Arc::new(Mutex::new(None));
        let live = LiveCounters {
            workers: vec![worker(8, 2, 3, 10), worker(0, 0, 0, 5)],
            ports: vec!["prot".into(), "unprot".into()],
            tx_udp_checksum: vec![false, true],
            steering: Arc::clone(&steering),
        };
        assert!(live
            .counters()
            .ports
            .iter()
            .all(|p| p.esp_steering.is_none()));
        // What the main lcore's steering left, port by port.
        let refused = live::EspSteeringState {
            state: "refused".into(),
            rules: 0,
            refused: vec!["udp4".into()],
        };
        *steering.lock().unwrap() = Some(vec![live::EspSteeringState::default(), refused.clone()]);
        assert_eq!(live.counters().ports[1].esp_steering, Some(refused));
        let offloads: Vec<bool> = live
            .counters()
            .ports
            .iter()
            .map(|p| p.tx_udp_checksum)
            .collect();
        assert_eq!(offloads, [false, true]);
        let c = live.counters();
        assert_eq!(c.workers.len(), 2);
        assert_eq!(
            (c.workers[0].busy_ratio, c.workers[0].mss_clamped),
            (0.25, 3)
        );
        assert_eq!(
            (c.workers[1].busy_ratio, c.workers[1].mss_clamped),
            (0.0, 0)
        );
        let fan = |w: &live::WorkerLoad| {
            (
                w.spread_out,
                w.spread_in,
                w.reorder_late_sent,
                w.spread_kept,
                w.spread_unneeded,
            )
        };
        assert_eq!(
            (fan(&c.workers[0]), fan(&c.workers[1])),
            ((11, 12, 13, 14, 15), (6, 7, 8, 9, 10))
        );
        let handoff = |w: &live::WorkerLoad| (w.sa_handoff_out, w.sa_handoff_in, w.sa_handoff_kept);
        assert_eq!(
            (handoff(&c.workers[0]), handoff(&c.workers[1])),
            ((16, 17, 18), (11, 12, 13))
        );
        assert_eq!(c.ports[0].rx_packets, 15);
        assert_eq!(c.ports[1].name, "unprot");
    }
}
