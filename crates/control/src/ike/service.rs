//! [`IkeService`]: the driver and its transport behind a mutex with a
//! millisecond clock; what the control socket (`espgw ctl ike ...`) and
//! the IKE thread call. Lock order: the SA manager first, then the
//! driver (the control socket holds the manager when it asks).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use espgw_ike::crypto::RandomSource;
use espgw_ike::engine::Time;
use serde_json::Value;

use super::driver::IkeDriver;
use super::punt::{Acquire, PuntRings};
use super::status::IkeMetrics;
use super::transport::{IkeTransport, UdpTransport};
use crate::live::protocol::{IkeCommand, IkeListReply, IkeReply};
use crate::live::LiveControl;
use crate::live::SaManager;

/// Milliseconds of a monotonic clock.
pub type MsClock = Arc<dyn Fn() -> Time + Send + Sync>;

/// A clock of milliseconds since it was made.
pub fn monotonic_ms() -> MsClock {
    let start = std::time::Instant::now();
    Arc::new(move || start.elapsed().as_millis() as Time)
}

/// What `LiveControl` asks of the IKE side ([`IkeService`] implements it).
pub trait IkeControl<T>: Send + Sync {
    /// Answers an `ike_*` request; `manager` is locked by the caller.
    fn command(&self, command: IkeCommand, manager: &mut SaManager<T>) -> Result<Value, String>;
    fn metrics(&self) -> IkeMetrics;
    /// The IKE SAs' SPIs and SK_e/SK_a keys (`keys_wireshark`, which the
    /// socket answers to root and the gateway's user only).
    fn secrets(&self) -> Vec<espgw_ike::engine::IkeSaSecrets> {
        Vec::new()
    }
}

struct Inner<R: RandomSource> {
    driver: IkeDriver<R>,
    transport: Box<dyn IkeTransport>,
}

impl<R: RandomSource> Inner<R> {
    fn flush(&mut self) {
        while let Some(t) = self.driver.poll_transmit() {
            self.transport.send(t);
        }
    }
}

/// See the module documentation.
pub struct IkeService<R: RandomSource> {
    inner: Mutex<Inner<R>>,
    clock: MsClock,
    /// The punt rings, for the workers' acquire counters in the metrics.
    rings: Option<Arc<PuntRings>>,
}

impl<R: RandomSource + Send> IkeService<R> {
    pub fn new(driver: IkeDriver<R>, transport: Box<dyn IkeTransport>, clock: MsClock) -> Self {
        IkeService {
            inner: Mutex::new(Inner { driver, transport }),
            clock,
            rings: None,
        }
    }

    /// The metrics also show the acquires the workers raised on `rings`.
    pub fn with_rings(mut self, rings: Arc<PuntRings>) -> Self {
        self.rings = Some(rings);
        self
    }

    fn lock(&self) -> MutexGuard<'_, Inner<R>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn now(&self) -> Time {
        (self.clock)()
    }

    /// Runs `f` on the driver, then sends what it queued.
    pub fn with<T, X>(
        &self,
        manager: &mut SaManager<T>,
        f: impl FnOnce(&mut IkeDriver<R>, Time, &mut SaManager<T>) -> X,
    ) -> X {
        let now = self.now();
        let mut inner = self.lock();
        let x = f(&mut inner.driver, now, manager);
        inner.flush();
        x
    }

    /// Start-up: initiates the `start` connections.
    pub fn start<T: Send + Sync + 'static>(&self, manager: &mut SaManager<T>) {
        self.with(manager, |d, now, m| d.start(now, m));
    }

    /// A received datagram.
    pub fn datagram<T: Send + Sync + 'static>(
        &self,
        manager: &mut SaManager<T>,
        src: std::net::SocketAddr,
        dst: std::net::SocketAddr,
        payload: &[u8],
    ) {
        self.with(manager, |d, now, m| {
            d.handle_datagram(now, src, dst, payload, m)
        });
    }

    /// An acquire a worker raised (`IkeDriver::acquire`, which dedups).
    pub fn acquire<T: Send + Sync + 'static>(&self, manager: &mut SaManager<T>, a: &Acquire) {
        let initiated = self.with(manager, |d, now, m| d.acquire(now, a.tunnel, m));
        if initiated {
            tracing::info!(tunnel = a.tunnel, src = %a.src, dst = %a.dst, proto = a.proto, "IKE: initiated by this packet's acquire");
        }
    }

    /// Timers; call at least at [`Self::poll_timeout`] and after each
    /// `SaManager::tick`.
    pub fn tick<T: Send + Sync + 'static>(&self, manager: &mut SaManager<T>) {
        self.with(manager, |d, now, m| d.handle_timeout(now, m));
    }

    pub fn poll_timeout(&self) -> Option<Time> {
        self.lock().driver.poll_timeout()
    }

    /// SIGTERM: Delete for every IKE SA, sent before this returns.
    pub fn shutdown<T: Send + Sync + 'static>(&self, manager: &mut SaManager<T>) -> usize {
        self.with(manager, |d, now, m| d.shutdown(now, m))
    }
}

impl<R: RandomSource + Send + 'static> IkeService<R> {
    /// Runs the driver on kernel UDP sockets (the development transport,
    /// see [`UdpTransport`]) on a thread until `stop`: each datagram from
    /// `rx` goes in, and the timers run when due and at least once a
    /// second (after the manager's own tick, CHILD_SA soft expiry). `rx`
    /// is a clone of the transport the service sends with.
    pub fn spawn_udp<T: Send + Sync + 'static>(
        self: &Arc<Self>,
        live: Arc<LiveControl<T>>,
        rx: UdpTransport,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<JoinHandle<()>> {
        let me = Arc::clone(self);
        std::thread::Builder::new()
            .name("espgw-ike".into())
            .spawn(move || {
                let step = Duration::from_millis(20);
                let mut next_tick = 0;
                while !stop.load(Ordering::Relaxed) {
                    match rx.recv(step) {
                        Ok(Some((src, dst, payload))) => {
                            let mut m = live.manager();
                            me.datagram(&mut m, src, dst, &payload);
                        }
                        Ok(None) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, "IKE: receive failed");
                            std::thread::sleep(step);
                        }
                    }
                    let now = me.now();
                    if now >= next_tick || me.poll_timeout().is_some_and(|t| t <= now) {
                        let mut m = live.manager();
                        me.tick(&mut m);
                        next_tick = now + 1_000;
                    }
                }
            })
    }
}

impl<T: Send + Sync + 'static, R: RandomSource + Send> IkeControl<T> for IkeService<R> {
    fn secrets(&self) -> Vec<espgw_ike::engine::IkeSaSecrets> {
        self.lock().driver.ike_sa_secrets()
    }

    fn command(&self, command: IkeCommand, manager: &mut SaManager<T>) -> Result<Value, String> {
        let json = |v: Result<Value, serde_json::Error>| v.map_err(|e| e.to_string());
        match command {
            IkeCommand::List => {
                let now = self.now();
                let sas = self.lock().driver.list(now);
                json(serde_json::to_value(IkeListReply { sas }))
            }
            IkeCommand::Initiate { connection } => {
                self.with(manager, |d, now, m| d.initiate(now, &connection, m))
                    .map_err(|e| e.to_string())?;
                json(serde_json::to_value(IkeReply {
                    connection,
                    done: "initiating".into(),
                }))
            }
            IkeCommand::Terminate {
                connection,
                child: Some(child),
            } => {
                self.with(manager, |d, now, m| {
                    d.delete_child(now, &connection, &child, m)
                })
                .map_err(|e| e.to_string())?;
                json(serde_json::to_value(IkeReply {
                    connection,
                    done: format!(
                        "deleting CHILD_SA {child} (and its per-CPU ones); its tunnel is removed, \
                         the IKE SA stays"
                    ),
                }))
            }
            IkeCommand::Terminate {
                connection,
                child: None,
            } => {
                let n = self
                    .with(manager, |d, now, m| d.terminate(now, &connection, m))
                    .map_err(|e| e.to_string())?;
                json(serde_json::to_value(IkeReply {
                    connection,
                    done: format!("deleting {n} IKE SA(s); its tunnel is removed"),
                }))
            }
            IkeCommand::Rekey { connection, child } => {
                self.with(manager, |d, now, m| {
                    d.rekey(now, &connection, child.as_deref(), m)
                })
                .map_err(|e| e.to_string())?;
                json(serde_json::to_value(IkeReply {
                    connection,
                    done: match child {
                        Some(c) => format!("rekeying CHILD_SA {c}"),
                        None => "rekeying the IKE SA".into(),
                    },
                }))
            }
        }
    }

    fn metrics(&self) -> IkeMetrics {
        let mut m = self.lock().driver.metrics();
        if let Some(r) = &self.rings {
            let s = r.stats();
            m.acquires_raised = s.acquires_raised;
            m.acquires_dropped = s.acquires_dropped;
            m.transmit_ring_full = s.transmit_dropped.saturating_sub(s.transmit_too_big);
            m.transmit_too_big = s.transmit_too_big;
        }
        m
    }
}
