//! Live operations: SAs and policy that change while the data plane runs,
//! the control socket, and the operator's view (status, metrics).
//!
//! - [`SaManager`] (control thread) owns every SA and publishes the
//!   workers' table snapshot on each change: add/delete a tunnel,
//!   make-before-break rekey with draining of the old inbound SA, and
//!   lifetime polling (soft expiry = event, hard expiry = SA removed).
//! - [`LiveControl`] puts the manager behind a mutex together with a clock
//!   and the runtime's counters; it answers control-socket requests and
//!   metrics scrapes.
//! - [`ControlServer`]: the Unix-socket JSON-lines server; [`client`] is the
//!   other end, used by `espgw ctl`.
//! - [`MetricsServer`]: Prometheus text exposition over HTTP/1.0.
//! - [`Services`]: all of the above started (and stopped) in one call.
//!
//! Protocol, commands, rekey semantics, metric names and the runtime
//! integration steps: docs/operations.md.

mod access;
pub mod client;
mod control;
mod manager;
pub mod metrics;
pub mod protocol;
mod rules;
mod services;
mod snapshot;
mod socket;
mod status;
mod tunnel_json;

pub use access::{Access, Peer};
pub use control::{
    monotonic_clock, Clock, ControlBackend, CountersSource, LiveControl, StatsSource,
};
pub use manager::{DrainPolicy, LiveError, SaManager};
pub use metrics::MetricsServer;
pub use services::{Services, TICK};
pub use snapshot::{
    mss_limits, tunnel_entry, InboundView, Keeper, LiveView, SnapshotBuilder, TablesError,
    TunnelView,
};
pub use socket::ControlServer;
pub use status::{
    DataplaneCounters, Dir, EspSteeringState, Event, EventCounts, LifetimeLeft, PortTraffic,
    SaInfo, SaRef, SaState, StatsSnapshot, Status, TunnelStatus, WorkerLoad, SPREAD_BACK_BOUNDS_US,
    SPREAD_TRIAL_VERDICTS,
};
pub use tunnel_json::TunnelParser;
