//! [`Services`]: everything live operations need, started and stopped in
//! one call each, so the runtime plugs them in with a few lines.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::access::Access;
use super::control::{Clock, CountersSource, LiveControl, StatsSource};
use super::manager::{LiveError, SaManager};
use super::metrics::MetricsServer;
use super::snapshot::SnapshotBuilder;
use super::socket::ControlServer;
use super::status::StatsSnapshot;
use crate::config::Config;
use crate::tables::Reader;

/// How often lifetimes and drains are checked.
pub const TICK: Duration = Duration::from_secs(1);

/// The manager, the control socket and metrics endpoint (when the config
/// names them) and the once-a-second tick, running.
pub struct Services<T: Send + Sync + 'static> {
    control: Arc<LiveControl<T>>,
    socket: Option<ControlServer>,
    metrics: Option<MetricsServer>,
    ticker: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl<T: Send + Sync + 'static> Services<T> {
    /// Creates every config tunnel's SAs (lifetimes start at `clock()`),
    /// publishes the first snapshot, binds `[gateway].control_socket` and
    /// `[gateway].metrics` if set, and starts the tick thread.
    pub fn start(
        config: &Config,
        builder: SnapshotBuilder<T>,
        clock: Clock,
        counters: Arc<dyn CountersSource>,
    ) -> Result<Services<T>, LiveError> {
        let manager = SaManager::new(config, clock(), builder)?;
        let control = Arc::new(LiveControl::new(config, manager, clock, counters));
        let stop = Arc::new(AtomicBool::new(false));
        let mut services = Services {
            control: Arc::clone(&control),
            socket: None,
            metrics: None,
            ticker: None,
            stop: Arc::clone(&stop),
        };
        if let Some(path) = &config.gateway.control_socket {
            let access = Access::for_this_process(config.gateway.control_group);
            let server = ControlServer::bind_with(path, control.clone(), access)
                .map_err(|e| LiveError(format!("control socket {}: {e}", path.display())))?;
            services.socket = Some(server);
        }
        if let Some(addr) = config.gateway.metrics {
            let server = MetricsServer::bind(addr, control.clone())
                .map_err(|e| LiveError(format!("metrics {addr}: {e}")))?;
            services.metrics = Some(server);
        }
        let ticker = control
            .spawn_ticker(TICK, stop)
            .map_err(|e| LiveError(format!("tick thread: {e}")))?;
        services.ticker = Some(ticker);
        Ok(services)
    }

    /// A snapshot reader for one worker.
    pub fn reader(&self) -> Reader<T> {
        self.control.reader()
    }

    pub fn control(&self) -> &Arc<LiveControl<T>> {
        &self.control
    }

    /// Where metrics are served (the actual port when the config said 0).
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().map(MetricsServer::local_addr)
    }

    /// Stops the tick and the servers (the socket file is removed) and
    /// returns the final counters. Drop the workers' readers first.
    pub fn stop(mut self) -> StatsSnapshot {
        self.shutdown();
        self.control.snapshot()
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        self.socket = None;
        self.metrics = None;
    }
}

impl<T: Send + Sync + 'static> Drop for Services<T> {
    fn drop(&mut self) {
        self.shutdown();
    }
}
