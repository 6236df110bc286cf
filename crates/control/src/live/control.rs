//! [`LiveControl`]: the manager behind a mutex, with a clock, the
//! runtime's counters and a tunnel parser; what the control socket and
//! the metrics endpoint talk to.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;
use tracing::info;

use super::manager::SaManager;
use super::protocol::{self, DelTarget, KeysReply, RekeyReply, Request, SaListReply, TunnelReply};
use super::status::{DataplaneCounters, StatsSnapshot, Status};
use super::tunnel_json::TunnelParser;
use crate::config::Config;
use crate::ike::{IkeControl, IkeMetrics};
use crate::tables::{Reader, Watcher};

/// The runtime's side of the stats: ports, workers, gateway-wide drops.
/// Implemented by the data plane; called from the control socket's and the
/// metrics server's threads, so keep it cheap (read counters, no waiting
/// on workers).
pub trait CountersSource: Send + Sync {
    fn counters(&self) -> DataplaneCounters;
}

/// No data plane (tests, or before the ports are up).
impl CountersSource for () {
    fn counters(&self) -> DataplaneCounters {
        DataplaneCounters::default()
    }
}

/// Whatever serves complete stats snapshots (the metrics endpoint reads one).
pub trait StatsSource: Send + Sync {
    fn snapshot(&self) -> StatsSnapshot;
    /// More Prometheus families after the snapshot's (the IKE driver's).
    fn extra_metrics(&self, _gateway: &str, _out: &mut String) {}
}

/// Answers one control-socket request (a JSON response object).
pub trait ControlBackend: Send + Sync {
    fn handle(&self, request: Request) -> Value;
}

/// The clock SAs run on: whole seconds of a monotonic clock, the same one
/// the workers pass to `encap_burst`/`decap_burst`.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// A clock of seconds since it was made (`Instant`-based).
pub fn monotonic_clock() -> Clock {
    let start = std::time::Instant::now();
    Arc::new(move || start.elapsed().as_secs())
}

/// See the module documentation.
pub struct LiveControl<T> {
    manager: Mutex<SaManager<T>>,
    clock: Clock,
    counters: Arc<dyn CountersSource>,
    parser: TunnelParser,
    workers: usize,
    /// The IKE driver, once the runtime started one ([`Self::set_ike`]).
    ike: std::sync::OnceLock<Arc<dyn IkeControl<T>>>,
}

fn lock<X>(m: &Mutex<X>) -> MutexGuard<'_, X> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<T: Send + Sync + 'static> LiveControl<T> {
    pub fn new(
        config: &Config,
        manager: SaManager<T>,
        clock: Clock,
        counters: Arc<dyn CountersSource>,
    ) -> LiveControl<T> {
        LiveControl {
            manager: Mutex::new(manager),
            clock,
            counters,
            parser: TunnelParser::new(config),
            workers: config.dataplane.workers,
            ike: std::sync::OnceLock::new(),
        }
    }

    /// Connects the IKE driver: `ike_*` requests go to it from now on.
    /// Once only; a second call is refused (returns false).
    pub fn set_ike(&self, ike: Arc<dyn IkeControl<T>>) -> bool {
        self.ike.set(ike).is_ok()
    }

    /// The IKE driver's counters, if one runs.
    pub fn ike_metrics(&self) -> Option<IkeMetrics> {
        self.ike.get().map(|i| i.metrics())
    }

    pub fn now(&self) -> u64 {
        (self.clock)()
    }

    /// The manager, for direct calls (tests, the runtime's shutdown).
    pub fn manager(&self) -> MutexGuard<'_, SaManager<T>> {
        lock(&self.manager)
    }

    /// A snapshot reader for one worker.
    pub fn reader(&self) -> Reader<T> {
        self.manager().reader()
    }

    /// A watcher of the snapshots for a control-side thread (not a reader:
    /// publishing never waits for it).
    pub fn watcher(&self) -> Watcher<T> {
        self.manager().watcher()
    }

    /// Lifetimes, drains, snapshot reclamation: call about once a second.
    pub fn tick(&self) {
        let now = self.now();
        self.manager().tick(now);
    }

    /// Runs [`Self::tick`] every `period` on a thread until `stop` is set.
    pub fn spawn_ticker(
        self: &Arc<Self>,
        period: Duration,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<JoinHandle<()>> {
        let me = Arc::clone(self);
        std::thread::Builder::new()
            .name("espgw-ctl-tick".into())
            .spawn(move || {
                // Short sleeps so `stop` is seen promptly.
                let step = period.min(Duration::from_millis(100));
                let mut waited = Duration::ZERO;
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(step);
                    waited += step;
                    if waited >= period {
                        waited = Duration::ZERO;
                        me.tick();
                    }
                }
            })
    }

    pub fn status(&self) -> Status {
        let now = self.now();
        let m = self.manager();
        Status {
            gateway: m.gateway().to_string(),
            uptime_seconds: m.uptime(now),
            generation: m.generation(),
            pending_snapshots: m.pending_snapshots(),
            workers: self.workers,
            tunnels: m.tunnel_status(),
            events: m.events(),
            soft_expired: m.soft_expired(),
            recent: m.recent_events(),
        }
    }

    fn dispatch(&self, request: Request) -> Result<Value, String> {
        let now = self.now();
        let command = request.command();
        let reply = |v: Result<Value, serde_json::Error>| v.map_err(|e| e.to_string());
        let answer = match request {
            Request::Status => reply(serde_json::to_value(self.status()))?,
            Request::SaList => reply(serde_json::to_value(SaListReply {
                sas: self.manager().sa_list(now),
            }))?,
            Request::Stats => reply(serde_json::to_value(self.snapshot()))?,
            Request::SaAdd { tunnel } => {
                let tunnel = self.parser.parse(&tunnel)?;
                let name = tunnel.name.clone();
                self.manager()
                    .add_tunnel(tunnel, now)
                    .map_err(|e| e.to_string())?;
                reply(serde_json::to_value(TunnelReply { tunnel: name }))?
            }
            Request::SaDel { target } => {
                let mut m = self.manager();
                let name = match target {
                    DelTarget::Tunnel(name) => name,
                    DelTarget::Spi(spi) => m
                        .tunnel_by_spi(spi)
                        .ok_or_else(|| format!("no SA with SPI {spi:#010x}"))?
                        .to_string(),
                };
                m.delete_tunnel(&name, now).map_err(|e| e.to_string())?;
                reply(serde_json::to_value(TunnelReply { tunnel: name }))?
            }
            Request::SaRekey {
                tunnel,
                outbound,
                inbound,
            } => {
                let (out_spi, in_spi) = (
                    outbound.as_ref().map(|k| k.spi),
                    inbound.as_ref().map(|k| k.spi),
                );
                self.manager()
                    .rekey(&tunnel, outbound, inbound, now)
                    .map_err(|e| e.to_string())?;
                reply(serde_json::to_value(RekeyReply {
                    tunnel,
                    out_spi,
                    in_spi,
                }))?
            }
            Request::KeysWireshark => {
                // Lock order: manager, then the driver.
                let m = self.manager();
                let mut esp_sa = Vec::new();
                for name in m.tunnel_names() {
                    if let Some(t) = m.tunnel(&name) {
                        for l in crate::wireshark::tunnel_esp_sa_lines(t) {
                            esp_sa.push(l.as_str().to_string());
                        }
                    }
                }
                let (mut ikev2, mut ikev2_skipped) = (Vec::new(), Vec::new());
                for s in self.ike.get().map(|i| i.secrets()).unwrap_or_default() {
                    match crate::wireshark::ikev2_line(&s) {
                        Some(l) => ikev2.push(l.as_str().to_string()),
                        None => ikev2_skipped.push(format!("{:016x}", s.ike_sa)),
                    }
                }
                drop(m);
                let r = KeysReply {
                    ikev2,
                    esp_sa,
                    ikev2_skipped,
                };
                reply(serde_json::to_value(&r))?
            }
            Request::Ike(command) => {
                let ike = self
                    .ike
                    .get()
                    .ok_or("IKE is not running in this gateway (no [[connection]], or no IKE transport yet)")?;
                // Lock order: manager, then the driver (as the IKE thread).
                let mut m = self.manager();
                ike.command(command, &mut m)?
            }
        };
        if !matches!(command, "status" | "sa_list" | "stats" | "ike_list") {
            info!(command, "control socket request done");
        }
        Ok(answer)
    }
}

impl<T: Send + Sync + 'static> ControlBackend for LiveControl<T> {
    fn handle(&self, request: Request) -> Value {
        match self.dispatch(request) {
            Ok(fields) => protocol::ok(fields),
            Err(e) => protocol::error(e),
        }
    }
}

impl<T: Send + Sync + 'static> StatsSource for LiveControl<T> {
    fn extra_metrics(&self, gateway: &str, out: &mut String) {
        if let Some(m) = self.ike_metrics() {
            m.prometheus(gateway, out);
        }
    }

    fn snapshot(&self) -> StatsSnapshot {
        let dp = self.counters.counters();
        let now = self.now();
        let m = self.manager();
        StatsSnapshot {
            gateway: m.gateway().to_string(),
            uptime_seconds: m.uptime(now),
            ports: dp.ports,
            workers: dp.workers,
            drops: dp.drops,
            sas: m.sa_list(now),
            tunnels: m.tunnel_totals(),
            events: m.events(),
        }
    }
}
