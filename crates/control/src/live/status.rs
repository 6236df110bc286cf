//! Plain data the control plane reports: per-SA rows, manager status and
//! the data plane's counters. Serializable, so the same structs travel
//! over the control socket, feed the metrics endpoint and are parsed back
//! by `espgw ctl`. None of them holds key material.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Direction of an SA, seen from this gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dir {
    /// Encrypts traffic towards the peer.
    Out,
    /// Decrypts traffic from the peer.
    In,
}

impl Dir {
    pub fn name(self) -> &'static str {
        match self {
            Dir::Out => "out",
            Dir::In => "in",
        }
    }
}

/// Where an SA is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SaState {
    /// Carrying traffic.
    Active,
    /// A soft lifetime was reached: still carrying traffic, due for rekey.
    SoftExpired,
    /// Replaced by a rekey; still decrypts what the peer sent under it
    /// until idle for the drain time (or the drain timeout passes).
    Draining,
}

impl SaState {
    pub fn name(self) -> &'static str {
        match self {
            SaState::Active => "active",
            SaState::SoftExpired => "soft-expired",
            SaState::Draining => "draining",
        }
    }
}

/// How much an SA may still carry before it hard-expires; `None` is
/// unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifetimeLeft {
    pub seconds: Option<u64>,
    pub bytes: Option<u64>,
    pub packets: Option<u64>,
}

/// One SA, as `sa list` and the metrics show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaInfo {
    pub tunnel: String,
    pub dir: Dir,
    pub spi: u32,
    /// Suite name as in the config (`aes128gcm16`, ...).
    pub suite: String,
    pub state: SaState,
    pub packets: u64,
    /// Inner (plaintext) bytes, what byte lifetimes count.
    pub bytes: u64,
    /// Drops by reason name (`replayed`, `icv_mismatch`, ...); only
    /// reasons that happened.
    pub drops: BTreeMap<String, u64>,
    pub lifetime_left: LifetimeLeft,
    /// Seconds since the SA was installed.
    pub age_seconds: u64,
    /// Outbound ESP in UDP: the peer's port it is sent to (4500, or what
    /// a NAT in front of the peer mapped 4500 to); `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_port: Option<u16>,
}

/// A tunnel's traffic in one direction over all its SAs, past ones
/// included: never goes backwards while the tunnel exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunnelTotals {
    pub tunnel: String,
    pub dir: Dir,
    pub packets: u64,
    pub bytes: u64,
    pub drops: BTreeMap<String, u64>,
}

/// Counts of state changes since start (never reset).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventCounts {
    pub tunnels_added: u64,
    pub tunnels_deleted: u64,
    pub rekeys_inbound: u64,
    pub rekeys_outbound: u64,
    pub soft_expiries: u64,
    pub hard_expiries: u64,
    pub drained: u64,
    pub publishes: u64,
}

/// One state change, kept in a short history for `ctl status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// The manager's clock (seconds) when it happened.
    pub at: u64,
    /// `sa-up`, `soft-expiry`, `hard-expiry`, `rekey-in`, `rekey-out`,
    /// `reactivated-in`, `draining-in` (an inbound SA installed draining:
    /// a redundant IKE SA's CHILD_SA), `drained`, `sa-removed`, `trap`,
    /// `tunnel-deleted`.
    pub kind: String,
    pub tunnel: String,
    pub dir: Option<Dir>,
    pub spi: Option<u32>,
}

/// A tunnel's health in one line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunnelStatus {
    pub name: String,
    pub local: String,
    pub remote: String,
    /// Current outbound SPI; `None` after a hard expiry (traffic discarded).
    pub out_spi: Option<u32>,
    /// Current inbound SPI; `None` after a hard expiry.
    pub in_spi: Option<u32>,
    /// Old inbound SAs still draining after rekeys.
    pub draining: usize,
    /// Some SA of the tunnel reached a soft lifetime.
    pub soft_expired: bool,
}

/// What `ctl status` shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub gateway: String,
    pub uptime_seconds: u64,
    /// Publication count of the data-plane snapshot.
    pub generation: u64,
    /// Replaced snapshots some worker may still hold.
    pub pending_snapshots: usize,
    pub workers: usize,
    pub tunnels: Vec<TunnelStatus>,
    pub events: EventCounts,
    /// SAs whose soft lifetime passed: a keying daemon should rekey them.
    pub soft_expired: Vec<SaRef>,
    /// The latest state changes, oldest first.
    pub recent: Vec<Event>,
}

/// Names one SA.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaRef {
    pub tunnel: String,
    pub dir: Dir,
    pub spi: u32,
}

/// A port's traffic as `ctl stats` and the metrics report it: the sum the
/// runtime makes of every worker's `espgw_dataplane::PortCounters`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PortTraffic {
    pub name: String,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    /// `[dataplane] steer_esp` on this port, where it is in effect:
    /// `None` when it is not (1 worker, pipeline mode, `"off"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub esp_steering: Option<EspSteeringState>,
    /// The port's NIC computes the UDP checksums of ESP in UDP over IPv6
    /// (`[dataplane] tx_checksum_offload`, docs/dataplane.md "TX checksum
    /// offload").
    #[serde(default)]
    pub tx_udp_checksum: bool,
}

/// What ESP steering does on a port (docs/multicore.md, "Steering SAs to
/// workers by SPI").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EspSteeringState {
    /// `"steering"` (rules in), `"refused"` (the NIC took none: RSS), or
    /// `"idle"` (no ESP is received on the port).
    pub state: String,
    /// Rules the NIC holds now.
    pub rules: u64,
    /// Forms of rule (`esp4`, `esp6`, `udp4`, `udp6`) the NIC refused.
    pub refused: Vec<String>,
}

/// Decrypt fan-out: the upper bounds, in microseconds, of the buckets in
/// which each worker counts how long its handed-out parts took to come
/// back ([`WorkerLoad::spread_back`]; a last bucket takes what is longer):
/// from a part of small packets on an idle helper to the ceiling of
/// `spread_wait_us`.
pub const SPREAD_BACK_BOUNDS_US: [u64; 7] = [10, 25, 50, 100, 200, 400, 1000];

/// The verdicts of the decrypt fan-out's live check (`spread_recheck_ms`),
/// as the stats JSON, `ctl stats` and the metrics name them, in the order
/// of [`WorkerLoad::spread_trials`] (and of the data plane's
/// `TrialVerdict::index`): the fan-out delivered as much as the worker
/// alone (on), less (off: off until the next trial), the worker kept up
/// alone, or the fan-out found no free helper (the last two measure
/// nothing and leave the decision in effect).
pub const SPREAD_TRIAL_VERDICTS: [&str; 4] = ["on", "off", "keeping_up", "no_helper"];

/// A worker's load as `ctl stats` and the metrics report it, taken from
/// the worker's own `espgw_dataplane::WorkerCounters` by the runtime.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerLoad {
    /// Worker index (0..workers).
    pub worker: usize,
    /// Share of polls that found packets (0..=1) over the run, or over
    /// whatever recent window the runtime keeps.
    pub busy_ratio: f64,
    /// TCP SYN / SYN-ACK whose MSS option the worker lowered (`mss_clamp`).
    #[serde(default)]
    pub mss_clamped: u64,
    /// Decrypt fan-out (`spread_decrypt`): packets this worker handed to
    /// others to decrypt, and packets it decrypted for others.
    #[serde(default)]
    pub spread_out: u64,
    #[serde(default)]
    pub spread_in: u64,
    /// Decrypt fan-out: packets of groups worth spreading that this worker
    /// decrypted itself because every other worker was busy with its own
    /// traffic (or had a full inbox).
    #[serde(default)]
    pub spread_kept: u64,
    /// Decrypt fan-out (`spread_decrypt = "auto"`): packets of groups worth
    /// spreading that this worker decrypted itself because it kept up
    /// alone (no help needed).
    #[serde(default)]
    pub spread_unneeded: u64,
    /// Decrypt fan-out with `spread_late = "send"`: packets of late parts
    /// sent out of arrival order instead of dropped.
    #[serde(default)]
    pub reorder_late_sent: u64,
    /// Decrypt fan-out: parts this worker handed out that another worker
    /// decrypted, by how long they took to come back, in microseconds:
    /// one count per bucket of [`SPREAD_BACK_BOUNDS_US`] (not cumulative)
    /// and one for longer; and the sum of those times in nanoseconds.
    #[serde(default)]
    pub spread_back: Vec<u64>,
    #[serde(default)]
    pub spread_back_ns: u64,
    /// Decrypt fan-out's live check (`spread_recheck_ms`): packets of
    /// groups worth spreading this worker decrypted itself while behind
    /// because the check had the fan-out off.
    #[serde(default)]
    pub spread_solo: u64,
    /// The live check's trials by verdict, one count per
    /// [`SPREAD_TRIAL_VERDICTS`] (empty: none kept).
    #[serde(default)]
    pub spread_trials: Vec<u64>,
    /// The last trial's rates: packets per second this worker delivered
    /// with the fan-out and without it (0 before the first trial).
    #[serde(default)]
    pub spread_trial_with_pps: u64,
    #[serde(default)]
    pub spread_trial_without_pps: u64,
    /// The fan-out is off for this worker (its last trial found it slower,
    /// or it started off and no trial has turned it on yet).
    #[serde(default)]
    pub spread_off: bool,
    /// Per-CPU SA handoff (RFC 9611 SAs with the fan-out on): packets this
    /// worker handed to the worker of their SA, and packets handed to it.
    #[serde(default)]
    pub sa_handoff_out: u64,
    #[serde(default)]
    pub sa_handoff_in: u64,
    /// Per-CPU SA handoff: packets of another worker's SA this worker
    /// decrypted itself (that worker's handoff ring full or no job box
    /// free, nothing of the SA queued there).
    #[serde(default)]
    pub sa_handoff_kept: u64,
}

/// What the runtime reports about itself (everything except SAs, which
/// the manager knows).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DataplaneCounters {
    pub ports: Vec<PortTraffic>,
    pub workers: Vec<WorkerLoad>,
    /// Gateway-wide drops by reason name (policy, no route, ESP reasons...).
    pub drops: BTreeMap<String, u64>,
}

/// Everything `ctl stats` and the metrics endpoint show.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    pub gateway: String,
    pub uptime_seconds: u64,
    pub ports: Vec<PortTraffic>,
    pub workers: Vec<WorkerLoad>,
    pub drops: BTreeMap<String, u64>,
    pub sas: Vec<SaInfo>,
    /// Per tunnel and direction, over all its SAs so far.
    pub tunnels: Vec<TunnelTotals>,
    pub events: EventCounts,
}
