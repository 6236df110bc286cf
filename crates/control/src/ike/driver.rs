//! [`IkeDriver`]: the engine, the config's connections, and the SA manager
//! joined up. Sans I/O like the engine: datagrams and time go in,
//! datagrams come out through [`IkeDriver::poll_transmit`], CHILD_SAs go
//! into the [`SaManager`] passed to each call.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use espgw_esp::Suite;
use espgw_ike::crypto::RandomSource;
use espgw_ike::engine::{
    AuthFailure, ChildSa, Connection as EngineConnection, ConnectionId, Engine, EngineConfig,
    Event, FailReason, IkeSaId, Time, Transmit,
};
use tracing::{info, warn};

use super::selectors;
use super::status::{IkeChildInfo, IkeMetrics, IkeSaInfo};
use crate::config::connection::{Child, Connection, IkeAuth, IkeId, StartAction};
use crate::config::{
    EncapMode as Encap, Lifetime, Limits, SaKeys, SecretBytes, Tunnel, DEFAULT_PRIORITY,
};
use crate::live::SaManager;

/// First wait before re-initiating a failed `start` connection; doubles
/// per failure up to [`RETRY_MAX_MS`].
pub const RETRY_BASE_MS: u64 = 1_000;
/// The longest wait between two attempts.
pub const RETRY_MAX_MS: u64 = 60_000;
/// A rekey responder switches its outbound SA when the peer deletes the
/// old one (the peer then has the new inbound SA); if that delete never
/// comes, after this long anyway.
pub const OUTBOUND_SWITCH_TIMEOUT_MS: u64 = 5_000;
/// When the peer reauthenticates (a new IKE SA without INITIAL_CONTACT
/// whose CHILD_SA takes a tunnel over), our outbound switch waits until the
/// peer shows it has the new SA: its first packet on our new inbound SA,
/// or its Delete of the old IKE SA; after this long anyway.
pub const TAKEOVER_SWITCH_TIMEOUT_MS: u64 = 1_000;
/// A refused IKE SA rekey is tried again after about this long (between
/// half and one and a half times it: `ike_rekey_retry_delay`).
pub const IKE_REKEY_RETRY_MS: u64 = 60_000;
/// The shortest time between two acquires that initiate one connection
/// (besides: none while an IKE SA of it exists, so an acquire from every
/// worker for one packet burst initiates once).
pub const ACQUIRE_INTERVAL_MS: u64 = 1_000;

/// Why a driver call was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IkeError(pub String);

impl std::fmt::Display for IkeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for IkeError {}

fn ike_err<T>(msg: impl Into<String>) -> Result<T, IkeError> {
    Err(IkeError(msg.into()))
}

/// One CHILD_SA as the driver tracks it (keys live in the SA manager only).
#[derive(Debug, Clone)]
struct ChildState {
    inbound_spi: u32,
    outbound_spi: u32,
    suite: &'static str,
    /// Its key exchanges ([`key_exchange_names`]), for `ike list`.
    key_exchange: String,
    udp_encap: bool,
    installed_at: Time,
    /// The negotiated selectors, for `ike list`.
    local_ts: Vec<String>,
    remote_ts: Vec<String>,
}

/// An RFC 9611 per-CPU CHILD_SA of a connection besides its `current`
/// one: a pair of the tunnel's in the SA manager (keyed there by its
/// inbound SPI), rekeyed and deleted on its own.
#[derive(Debug)]
struct Extra {
    ike_sa: IkeSaId,
    child: ChildState,
    /// Our rekey of it is in flight.
    rekeying: bool,
    /// The peer rekeyed it: the new outbound SA waits for the peer's
    /// delete of the old one (our inbound SPI of it) or the deadline.
    pending: Option<(u32, SaKeys, Time)>,
    /// Inbound SPIs of the SAs it replaced, until they are deleted: a
    /// second new SA for one of them (a rekey collision) is a pair of its
    /// own until the engine deletes the redundant one.
    replaced: Vec<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SaPhase {
    Connecting,
    Established,
}

#[derive(Debug)]
struct IkeSaState {
    connection: ConnectionId,
    phase: SaPhase,
    initiator: bool,
    suite: Option<String>,
    local: Option<SocketAddr>,
    remote: Option<SocketAddr>,
    established_at: Option<Time>,
    /// A retry of a refused IKE SA rekey (the engine's own lifetimes
    /// rekey the SA at `rekey_time`, and retry themselves after a
    /// TEMPORARY_FAILURE; after any other refusal they do not).
    rekey_at: Option<Time>,
    next_dpd: Option<Time>,
    dpd_outstanding: bool,
    /// Its connection was terminated while we were setting it up: it is
    /// deleted as soon as it is up, and its CHILD_SA never installed.
    doomed: bool,
    /// The peer set it up with INITIAL_CONTACT: it holds no other IKE SA
    /// with us (a restart), so its CHILD_SA takes a tunnel over at once.
    initial_contact: bool,
    /// Both sides set the connection up at once and the engine found this
    /// SA redundant (`Event::IkeSaUp::redundant`): its CHILD_SA does not
    /// take the tunnel over, and the SA is deleted next.
    redundant: bool,
}

/// A rekey's new outbound SA held back until the peer deleted the old one.
#[derive(Debug)]
struct PendingSwitch {
    /// The new CHILD_SA (by our inbound SPI) whose outbound SA this is.
    for_inbound: u32,
    old_inbound: u32,
    keys: SaKeys,
    deadline: Time,
    /// A takeover by a new IKE SA of the peer's: the old IKE SA, whose
    /// deletion (or the peer's first packet on `for_inbound`) releases the
    /// switch.
    takeover_of: Option<IkeSaId>,
}

#[derive(Debug)]
struct ConnState {
    config: Connection,
    /// The first (only) child: the engine negotiates one per IKE SA.
    child: Child,
    tunnel: String,
    /// The CHILD_SA the tunnel runs on now, and its IKE SA.
    current: Option<(IkeSaId, ChildState)>,
    /// The one `current` replaced by a rekey, until it is deleted.
    previous: Option<(IkeSaId, ChildState)>,
    /// Two new CHILD_SAs of one rekey are up (a rekey collision, RFC 7296
    /// 2.8.1): `previous` and `current`; one of them is about to be
    /// deleted, and only then is the outbound SA settled.
    collision: bool,
    pending_switch: Option<PendingSwitch>,
    /// Our rekey of `current` is in flight.
    child_rekeying: bool,
    /// The IKE SA we asked for a new CHILD_SA of this connection
    /// (`create_child_sa`) until it answers: moved with an IKE SA rekey,
    /// dropped with the IKE SA.
    child_creating: Option<IkeSaId>,
    /// `start`: when to initiate next, and the wait after that.
    retry_at: Option<Time>,
    backoff_ms: u64,
    /// `ike terminate` stops re-initiation until `ike initiate` (not the
    /// acquires of a trap: its policy stays trapped).
    stopped: bool,
    last_acquire: Option<Time>,
    /// `start_action = "trap"` and its tunnel is a trap in the SA manager
    /// now (no CHILD_SA up).
    trapped: bool,
    /// RFC 9611 per-CPU CHILD_SAs besides `current` (`per_cpu_sas`).
    extras: Vec<Extra>,
    /// CHILD_SAs of this connection on other IKE SAs than `current`'s
    /// that are still up there: taken over by a newer IKE SA's, or of a
    /// redundant IKE SA (both sides set the connection up at once), by
    /// (IKE SA, our inbound SPI). Mostly they go with their IKE SA soon;
    /// if instead `current`'s IKE SA goes first, the tunnel carries on
    /// with a rekey of one of these ([`IkeDriver::fall_back`]).
    standby: Vec<(IkeSaId, ChildState)>,
}

/// See the module documentation.
pub struct IkeDriver<R: RandomSource> {
    engine: Engine<R>,
    conns: Vec<ConnState>,
    sas: BTreeMap<IkeSaId, IkeSaState>,
    metrics: IkeMetrics,
    /// The engine's UNIX time follows the system clock (no
    /// `unix_time_at_zero_ms` was configured, no [`IkeDriver::set_unix_time`]
    /// was called): set again with each datagram, so a stepped clock is
    /// followed too.
    system_clock: bool,
    /// Shutdown began: no acquire initiates, no trap is installed again.
    shutting_down: bool,
}

fn unspecified(like: IpAddr) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    }
}

/// The engine's connection for a config connection (its one child).
fn engine_connection(
    c: &Connection,
    child: &Child,
    ike_port: u16,
) -> Result<EngineConnection, IkeError> {
    let psk: &[u8] = match &c.auth {
        IkeAuth::Psk(psk) => psk.expose(),
        IkeAuth::PubKey(_) => &[],
    };
    let ts = |v: &[crate::config::net::Prefix]| -> Vec<String> {
        v.iter().map(|p| p.to_string()).collect()
    };
    let (l, r) = (ts(&child.local_ts), ts(&child.remote_ts));
    let l: Vec<&str> = l.iter().map(String::as_str).collect();
    let r: Vec<&str> = r.iter().map(String::as_str).collect();
    EngineConnection::new(
        &c.name,
        SocketAddr::new(c.local, ike_port),
        SocketAddr::new(c.remote.unwrap_or_else(|| unspecified(c.local)), ike_port),
        c.local_id.identification(),
        c.remote_id.as_ref().map(IkeId::identification),
        psk,
        &c.proposals_string(),
        &child.esp_proposals_string(),
        &l,
        &r,
    )
    .map(|mut e| {
        e.fragmentation = Some(c.fragmentation);
        e.force_encap = c.force_encap;
        // The engine reauthenticates by itself (make-before-break: a new
        // IKE SA with the CHILD_SA, then the old one deleted); the driver
        // sees a CHILD_SA of a new IKE SA take the tunnel over.
        e.lifetimes.ike_reauth_time_ms = c.reauth_time.saturating_mul(1000);
        // The engine's own rekey and expiry timers follow the
        // configuration too (the driver's IKE rekey timer and the SA
        // manager's CHILD_SA lifetimes fire at about the same times and
        // find the rekey under way, or done). Until session 26 the engine
        // kept its defaults whatever the configuration said: an IKE SA
        // rekey every 4 h even with `rekey_time = 0` ("never"), a CHILD_SA
        // rekey every hour and its deletion at 66 min when that failed,
        // whatever the child's `rekey_time` and `life_time`.
        e.lifetimes.ike_rekey_time_ms = c.rekey_time.saturating_mul(1000);
        // "less a random up to 10 %" of rekey_time (the engine's default
        // range is 10 % of the longer of rekey_time and reauth_time).
        e.lifetimes.ike_rand_time_ms = (c.rekey_time > 0).then(|| c.rekey_time * 100);
        e.lifetimes.child_rekey_time_ms = child.rekey_time.saturating_mul(1000);
        e.lifetimes.child_life_time_ms = Some(child.life_time.saturating_mul(1000));
        // RFC 9611: SA_RESOURCE_INFO and the additional CHILD_SAs.
        e.per_resource_sas = child.per_cpu_sas;
        e
    })
    .and_then(|e| match &c.auth {
        IkeAuth::Psk(_) => Ok(e),
        IkeAuth::PubKey(p) => e.with_certificates(p.cert.clone(), p.key.clone(), p.cacerts.clone()),
    })
    .map_err(|e| IkeError(format!("connection {:?}: {e}", c.name)))
}

/// The UNIX time in milliseconds from the system clock: the engine reads
/// no clock, certificates' validity is checked against this.
fn system_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// An IKE suite as strongSwan's `swanctl --list-sas` prints it
/// (`AES_GCM_16-256/PRF_HMAC_SHA2_384/ECP_384`), to compare the two.
pub fn suite_name(s: &espgw_ike::crypto::IkeSuite) -> String {
    use espgw_ike::crypto::{Encryption, Integrity, Prf};
    let enc = match s.encryption {
        Encryption::AesCbc128 => "AES_CBC-128",
        Encryption::AesCbc256 => "AES_CBC-256",
        Encryption::AesGcm16_128 => "AES_GCM_16-128",
        Encryption::AesGcm16_256 => "AES_GCM_16-256",
        Encryption::ChaCha20Poly1305 => "CHACHA20_POLY1305",
    };
    let integ = s.integrity.map(|i| match i {
        Integrity::HmacSha1_96 => "HMAC_SHA1_96",
        Integrity::HmacSha256_128 => "HMAC_SHA2_256_128",
        Integrity::HmacSha384_192 => "HMAC_SHA2_384_192",
        Integrity::HmacSha512_256 => "HMAC_SHA2_512_256",
    });
    let prf = match s.prf {
        Prf::HmacSha256 => "PRF_HMAC_SHA2_256",
        Prf::HmacSha384 => "PRF_HMAC_SHA2_384",
        Prf::HmacSha512 => "PRF_HMAC_SHA2_512",
    };
    [Some(enc), integ, Some(prf)]
        .into_iter()
        .flatten()
        .map(str::to_string)
        .chain([key_exchange_names(Some(s.ke), &s.addke)])
        .collect::<Vec<_>>()
        .join("/")
}

/// Key exchanges as strongSwan prints them: the first, then the RFC 9370
/// additional ones that ran (`CURVE_25519/KE1_ML_KEM_768`), so an operator
/// sees that the post-quantum exchange took place, not only that it was
/// configured. Empty when none ran (the CHILD_SA IKE_AUTH makes).
pub fn key_exchange_names(
    first: Option<espgw_ike::crypto::KeGroup>,
    additional: &[Option<espgw_ike::crypto::KeGroup>; 7],
) -> String {
    use espgw_ike::crypto::KeGroup;
    let name = |g: KeGroup| match g {
        KeGroup::Modp2048 => "MODP_2048",
        KeGroup::Ecp256 => "ECP_256",
        KeGroup::Ecp384 => "ECP_384",
        KeGroup::Curve25519 => "CURVE_25519",
        // Only additional key exchanges (RFC 9370) are ML-KEM; names as
        // strongSwan 6 prints them.
        KeGroup::MlKem512 => "ML_KEM_512",
        KeGroup::MlKem768 => "ML_KEM_768",
        KeGroup::MlKem1024 => "ML_KEM_1024",
    };
    first
        .map(|g| name(g).to_string())
        .into_iter()
        .chain(
            additional
                .iter()
                .enumerate()
                .filter_map(|(n, g)| g.map(|g| format!("KE{}_{}", n + 1, name(g)))),
        )
        .collect::<Vec<_>>()
        .join("/")
}

/// How long after a refused IKE SA rekey to try again: between half and
/// one and a half [`IKE_REKEY_RETRY_MS`], drawn from our SPI (random) and
/// the time, so two peers refused by each other's colliding rekeys (both
/// answer TEMPORARY_FAILURE while a rekey with IKE_FOLLOWUP_KE is
/// pending) do not retry in step (RFC 7296 2.25).
fn ike_rekey_retry_delay(spi: IkeSaId, now: Time) -> u64 {
    // splitmix64 of the two: spreads nearby inputs over the whole range.
    let mut z = spi ^ now.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    IKE_REKEY_RETRY_MS / 2 + z % IKE_REKEY_RETRY_MS
}

fn esp_secret(s: &espgw_ike::crypto::SecretBytes) -> SecretBytes {
    SecretBytes::new(s.expose().to_vec())
}

impl<R: RandomSource> IkeDriver<R> {
    /// A driver for `connections` (the validated config's), each with its
    /// own `fragmentation`.
    pub fn new(
        connections: &[Connection],
        engine_config: EngineConfig,
        rng: R,
    ) -> Result<Self, IkeError> {
        Self::with_ike_port(connections, engine_config, rng, 500)
    }

    /// [`Self::new`] with another IKE port than 500, ours and the peers'
    /// (unprivileged tests over loopback; the NAT-T port is the engine
    /// config's).
    pub fn with_ike_port(
        connections: &[Connection],
        engine_config: EngineConfig,
        rng: R,
        ike_port: u16,
    ) -> Result<Self, IkeError> {
        let system_clock = engine_config.unix_time_at_zero_ms.is_none();
        let mut engine = Engine::new(engine_config, rng);
        let mut conns = Vec::new();
        for c in connections {
            let Some(child) = c.children.first() else {
                return ike_err(format!("connection {:?} has no child", c.name));
            };
            let id = engine.add_connection(engine_connection(c, child, ike_port)?);
            debug_assert_eq!(id, conns.len());
            conns.push(ConnState {
                config: c.clone(),
                child: child.clone(),
                tunnel: c.tunnel_name(child),
                current: None,
                previous: None,
                collision: false,
                pending_switch: None,
                child_rekeying: false,
                child_creating: None,
                retry_at: None,
                backoff_ms: RETRY_BASE_MS,
                stopped: false,
                last_acquire: None,
                trapped: false,
                extras: Vec::new(),
                standby: Vec::new(),
            });
        }
        Ok(IkeDriver {
            engine,
            conns,
            sas: BTreeMap::new(),
            metrics: IkeMetrics::default(),
            system_clock,
            shutting_down: false,
        })
    }

    /// Fixes the UNIX time certificates are checked against: at `now` it is
    /// `unix_time_ms` (tests; a runtime leaves the system clock in charge).
    pub fn set_unix_time(&mut self, now: Time, unix_time_ms: u64) {
        self.system_clock = false;
        self.engine.set_unix_time(now, unix_time_ms);
    }

    fn sync_clock(&mut self, now: Time) {
        if self.system_clock {
            self.engine.set_unix_time(now, system_unix_ms());
        }
    }

    /// The SPIs and SK_e/SK_a keys of every IKE SA past IKE_SA_INIT, for
    /// `espgw keys wireshark` (`crate::wireshark::ikev2_line`). Secrets:
    /// only for a caller that may see keys.
    pub fn ike_sa_secrets(&self) -> Vec<espgw_ike::engine::IkeSaSecrets> {
        self.engine.ike_sa_secrets()
    }

    /// The engine's counters of datagrams not acted on.
    pub fn engine_stats(&self) -> &espgw_ike::engine::Stats {
        self.engine.stats()
    }

    pub fn metrics(&self) -> IkeMetrics {
        let mut m = self.metrics.clone();
        m.sas_connecting = self
            .sas
            .values()
            .filter(|s| s.phase == SaPhase::Connecting)
            .count() as u64;
        m.sas_established = self
            .sas
            .values()
            .filter(|s| s.phase == SaPhase::Established)
            .count() as u64;
        let st = self.engine.stats();
        m.dropped = st.not_ike
            + st.malformed
            + st.unknown_sa
            + st.unexpected
            + st.decrypt_failed
            + st.half_open_refused
            + st.fragments_dropped;
        m.init_no_proposal = st.init_no_proposal;
        m.duplicate_ike_sas = st.duplicate_ike_sas;
        m.cookies_sent = st.cookies_sent;
        m.cookies_invalid = st.cookies_invalid;
        m.half_open_refused = st.half_open_refused;
        m
    }

    fn conn_by_name(&self, name: &str) -> Result<ConnectionId, IkeError> {
        self.conns
            .iter()
            .position(|c| c.config.name == name)
            .ok_or_else(|| IkeError(format!("no connection named {name:?}")))
    }

    /// Start-up: initiates every `start_action = "start"` connection and
    /// installs the trap of every `"trap"` one.
    pub fn start<T: Send + Sync + 'static>(&mut self, now: Time, manager: &mut SaManager<T>) {
        for id in 0..self.conns.len() {
            match self.conns[id].child.start_action {
                StartAction::Start => self.initiate_id(now, id),
                StartAction::Trap => self.install_trap(now, id, manager),
                StartAction::None => {}
            }
        }
        self.process_events(now, manager);
    }

    /// The tunnel of a trap: the child's configured selectors (the
    /// negotiated ones replace them with the CHILD_SA), no SAs. Its
    /// suite is the first ESP proposal's cipher, for `sa list` only.
    fn trap_tunnel(&self, id: ConnectionId) -> Option<Tunnel> {
        let conn = &self.conns[id];
        let c = &conn.config;
        let suite = conn
            .child
            .esp_proposals
            .iter()
            .flat_map(|p| p.split(['-', ',']))
            .find_map(|tok| Suite::ALL.iter().copied().find(|s| s.name() == tok))
            .or_else(|| Suite::ALL.first().copied())?;
        let none = || SaKeys {
            spi: 0,
            key: SecretBytes::new(Vec::new()),
            auth_key: None,
        };
        Some(Tunnel {
            name: conn.tunnel.clone(),
            local: c.local,
            remote: c.remote?,
            port: c.port,
            local_ts: conn.child.local_ts.clone(),
            remote_ts: conn.child.remote_ts.clone(),
            suite,
            esn: false,
            replay_window: conn.child.replay_window,
            encap: if c.force_encap {
                Encap::udp_4500()
            } else {
                Encap::None
            },
            lifetime: Lifetime::default(),
            outbound: none(),
            inbound: none(),
            priority: DEFAULT_PRIORITY,
            mss_clamp: conn.child.mss_clamp,
        })
    }

    /// Puts connection `id`'s tunnel in the SA manager as a trap (when it
    /// has no tunnel there): its traffic raises acquires.
    fn install_trap<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        id: ConnectionId,
        manager: &mut SaManager<T>,
    ) {
        if self.shutting_down || self.conns[id].child.start_action != StartAction::Trap {
            return;
        }
        let Some(t) = self.trap_tunnel(id) else {
            return;
        };
        if manager.tunnel(&t.name).is_some() {
            self.conns[id].trapped = manager.is_trap(&t.name);
            return;
        }
        match manager.add_trap(t, now / 1000) {
            Ok(()) => {
                info!(connection = %self.conns[id].config.name, tunnel = %self.conns[id].tunnel, "IKE: trap installed, the first packet initiates");
                self.conns[id].trapped = true;
            }
            Err(e) => {
                warn!(connection = %self.conns[id].config.name, error = %e, "IKE: cannot install the trap")
            }
        }
    }

    fn initiate_id(&mut self, now: Time, id: ConnectionId) {
        self.sync_clock(now);
        self.conns[id].retry_at = None;
        match self.engine.initiate(now, id) {
            Ok(sa) => {
                info!(connection = %self.conns[id].config.name, ike_sa = %format!("{sa:016x}"), "IKE: initiating");
                self.metrics.initiated += 1;
                self.sas.insert(
                    sa,
                    IkeSaState {
                        connection: id,
                        phase: SaPhase::Connecting,
                        initiator: true,
                        suite: None,
                        local: None,
                        remote: None,
                        established_at: None,
                        rekey_at: None,
                        next_dpd: None,
                        dpd_outstanding: false,
                        doomed: false,
                        initial_contact: false,
                        redundant: false,
                    },
                );
            }
            Err(e) => {
                warn!(connection = %self.conns[id].config.name, error = %e, "IKE: cannot initiate");
                self.schedule_retry(now, id);
            }
        }
    }

    /// `ike initiate NAME`: a new IKE SA now (and `start` retries again).
    pub fn initiate<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        name: &str,
        manager: &mut SaManager<T>,
    ) -> Result<(), IkeError> {
        let id = self.conn_by_name(name)?;
        if self.conns[id].config.remote.is_none() && self.childless_ike_sa(id).is_none() {
            // Only a CHILD_SA on the IKE SA the peer set up (its address is
            // known there) is ours to ask for.
            return ike_err(format!(
                "connection {name:?} has remote = \"%any\": it can only respond \
                 (or add a CHILD_SA to an IKE SA the peer set up)"
            ));
        }
        self.conns[id].stopped = false;
        self.conns[id].backoff_ms = RETRY_BASE_MS;
        let childless = self.childless_ike_sa(id);
        self.bring_up(now, id, childless);
        self.process_events(now, manager);
        Ok(())
    }

    /// An acquire from the data plane: a packet for the trapped tunnel
    /// `tunnel` (its id, as the worker's snapshot had it) found no SA.
    /// Initiates the connection's IKE SA (with its CHILD_SA) unless one of
    /// its IKE SAs exists (being set up or up: every worker raises its
    /// own acquire for the same traffic, and they initiate once), one was
    /// initiated less than [`ACQUIRE_INTERVAL_MS`] ago, or the gateway is
    /// shutting down. An IKE SA that is up but lost its CHILD_SA gets a
    /// new CHILD_SA instead (CREATE_CHILD_SA). Returns whether it
    /// initiated either.
    pub fn acquire<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        tunnel: u32,
        manager: &mut SaManager<T>,
    ) -> bool {
        self.metrics.acquires_received += 1;
        let name = manager
            .tunnel_name(crate::tables::TunnelId(tunnel))
            .map(str::to_string);
        let Some(id) = name.and_then(|n| self.conns.iter().position(|c| c.tunnel == n)) else {
            // A tunnel gone since (or not ours): nothing to set up.
            self.metrics.acquires_ignored += 1;
            return false;
        };
        // An IKE SA up without the connection's CHILD_SA (the peer's or
        // `ike terminate --child`'s Delete took it) gets a new CHILD_SA;
        // anything else of the connection's (an IKE SA being set up, a
        // CHILD_SA up, being rekeyed or being created) means there is
        // nothing to initiate.
        let childless = self.childless_ike_sa(id);
        let busy = childless.is_none() && self.sas.values().any(|s| s.connection == id);
        let c = &self.conns[id];
        let recent = c
            .last_acquire
            .is_some_and(|t| now.saturating_sub(t) < ACQUIRE_INTERVAL_MS);
        if busy
            || recent
            || c.config.remote.is_none()
            || c.child.start_action != StartAction::Trap
            || self.shutting_down
        {
            self.metrics.acquires_ignored += 1;
            return false;
        }
        let action = match childless {
            Some(_) => "a new CHILD_SA on the IKE SA up",
            None => "initiating",
        };
        info!(connection = %c.config.name, tunnel = %c.tunnel, action, "IKE: acquire");
        self.metrics.acquires_handled += 1;
        self.conns[id].last_acquire = Some(now);
        self.bring_up(now, id, childless);
        self.process_events(now, manager);
        true
    }

    /// The connection's established IKE SA that carries none of its
    /// CHILD_SA (deleted by either side, none being created or rekeyed,
    /// no other IKE SA of the connection being set up): where a new
    /// CHILD_SA goes instead of a new IKE SA.
    fn childless_ike_sa(&self, id: ConnectionId) -> Option<IkeSaId> {
        let c = &self.conns[id];
        let creating = c
            .child_creating
            .is_some_and(|sa| self.sas.contains_key(&sa));
        if c.current.is_some() || c.pending_switch.is_some() || c.child_rekeying || creating {
            return None;
        }
        let up = |s: &IkeSaState| s.phase == SaPhase::Established && !s.doomed;
        let mut own = self.sas.iter().filter(|(_, s)| s.connection == id);
        let (&first, s) = own.next()?;
        (up(s) && own.all(|(_, s)| up(s))).then_some(first)
    }

    /// Connection `id`'s CHILD_SA: on `childless` (its IKE SA that lost
    /// its CHILD_SA, [`Self::childless_ike_sa`]) when there is one, not on
    /// a second IKE SA with the same peer; else with a new IKE SA.
    fn bring_up(&mut self, now: Time, id: ConnectionId, childless: Option<IkeSaId>) {
        match childless {
            Some(sa) => self.create_child(now, id, sa),
            None => self.initiate_id(now, id),
        }
    }

    /// Asks for a new CHILD_SA of connection `id` on its IKE SA `sa`
    /// (CREATE_CHILD_SA, RFC 7296 1.3.1); the answer comes as
    /// `ChildSaInstalled` or `ChildSaFailed`. When the engine refuses to
    /// ask (the IKE SA is being replaced), a new IKE SA with the CHILD_SA
    /// is initiated instead (when the connection names its peer).
    fn create_child(&mut self, now: Time, id: ConnectionId, sa: IkeSaId) {
        self.sync_clock(now);
        match self.engine.create_child_sa(now, sa) {
            Ok(()) => self.conns[id].child_creating = Some(sa),
            Err(e) if self.conns[id].config.remote.is_some() => {
                info!(connection = %self.conns[id].config.name, error = %e, "IKE: no new CHILD_SA on this IKE SA; initiating a new one");
                self.initiate_id(now, id);
            }
            Err(e) => {
                warn!(connection = %self.conns[id].config.name, error = %e, "IKE: no new CHILD_SA on this IKE SA")
            }
        }
    }

    /// `ike terminate NAME`: deletes its IKE SAs (and so its CHILD_SAs)
    /// and stops re-initiating it. A `trap` connection's policy stays
    /// trapped: its next packet initiates again (as strongSwan's
    /// `swanctl --terminate`; there is no `--uninstall` yet).
    pub fn terminate<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        name: &str,
        manager: &mut SaManager<T>,
    ) -> Result<usize, IkeError> {
        let id = self.conn_by_name(name)?;
        self.conns[id].stopped = true;
        self.conns[id].retry_at = None;
        let sas: Vec<IkeSaId> = self
            .sas
            .iter()
            .filter(|(_, s)| s.connection == id)
            .map(|(k, _)| *k)
            .collect();
        for sa in &sas {
            let Some(s) = self.sas.get_mut(sa) else {
                continue;
            };
            if s.phase == SaPhase::Established {
                if let Err(e) = self.engine.delete_ike_sa(now, *sa) {
                    warn!(ike_sa = %format!("{sa:016x}"), error = %e, "IKE: delete refused");
                }
            } else if self.engine.abort_ike_sa(*sa).is_ok() {
                // Before IKE_AUTH: forgotten, the peer's half-open SA
                // times out.
                self.sas.remove(sa);
            } else {
                // IKE_AUTH is out: the peer may have it up with its
                // CHILD_SA, so it is deleted once it is up here too (or
                // fails by itself).
                s.doomed = true;
            }
        }
        // The tunnel goes now, not when the peer answers: the operator
        // asked for the traffic to stop.
        self.remove_tunnel(now, id, manager, "terminated");
        self.process_events(now, manager);
        Ok(sas.len())
    }

    /// Shutdown (SIGTERM): sends Delete for every established IKE SA (its
    /// CHILD_SAs go with it), removes the tunnels and stops re-initiating.
    /// Flush the transmits, then wait a little for the answers (or not:
    /// the peer forgets the SAs on our Delete either way). Returns the
    /// number of IKE SAs deleted.
    pub fn shutdown<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        manager: &mut SaManager<T>,
    ) -> usize {
        self.shutting_down = true;
        let names: Vec<String> = self.conns.iter().map(|c| c.config.name.clone()).collect();
        names
            .iter()
            .map(|n| self.terminate(now, n, manager).unwrap_or(0))
            .sum()
    }

    /// Deletes connection `name`'s CHILD_SA of child `child` (INFORMATIONAL
    /// Delete, RFC 7296 1.4.1), keeping the IKE SA; with RFC 9611 per-CPU
    /// CHILD_SAs the others go with it (the tunnel goes with its first
    /// CHILD_SA). What a peer's `swanctl --terminate --child` does;
    /// `espgw ctl ike terminate NAME --child CHILD` calls it. A `trap`
    /// connection is trapped again, and its next packet asks for a new
    /// CHILD_SA on that IKE SA ([`Self::acquire`]), as `ike initiate` does.
    pub fn delete_child<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        name: &str,
        child: &str,
        manager: &mut SaManager<T>,
    ) -> Result<(), IkeError> {
        let (id, sa, spi) = self.current_child(name, child)?;
        // Our rekey of it is out: deleting the old one now would leave the
        // new one the answer installs. The operator tries again.
        if self.conns[id].child_rekeying {
            return ike_err(format!(
                "{name}/{child} is being rekeyed: try again in a moment"
            ));
        }
        self.engine
            .delete_child_sa(now, sa, spi)
            .map_err(|e| IkeError(e.to_string()))?;
        self.process_events(now, manager);
        Ok(())
    }

    /// Connection `name`'s current CHILD_SA of child `child`: the
    /// connection, its IKE SA and our inbound SPI (the engine's name for
    /// the CHILD_SA).
    fn current_child(
        &self,
        name: &str,
        child: &str,
    ) -> Result<(ConnectionId, IkeSaId, u32), IkeError> {
        let id = self.conn_by_name(name)?;
        if child != self.conns[id].child.name {
            return ike_err(format!("connection {name:?} has no child {child:?}"));
        }
        let Some((sa, c)) = &self.conns[id].current else {
            return ike_err(format!("{name}/{child} has no CHILD_SA up"));
        };
        Ok((id, *sa, c.inbound_spi))
    }

    /// `ike rekey NAME [--child CHILD]`: the IKE SA, or the CHILD_SA.
    pub fn rekey<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        name: &str,
        child: Option<&str>,
        manager: &mut SaManager<T>,
    ) -> Result<(), IkeError> {
        match child {
            Some(child) => {
                let (id, sa, spi) = self.current_child(name, child)?;
                self.engine
                    .rekey_child_sa(now, sa, spi)
                    .map_err(|e| IkeError(e.to_string()))?;
                self.conns[id].child_rekeying = true;
            }
            None => {
                let id = self.conn_by_name(name)?;
                let sa = self
                    .sas
                    .iter()
                    .find(|(_, s)| s.connection == id && s.phase == SaPhase::Established)
                    .map(|(k, _)| *k)
                    .ok_or_else(|| IkeError(format!("connection {name:?} has no IKE SA up")))?;
                self.engine
                    .rekey_ike_sa(now, sa)
                    .map_err(|e| IkeError(e.to_string()))?;
            }
        }
        self.process_events(now, manager);
        Ok(())
    }

    /// A datagram for the engine (UDP payload; on 4500 with its marker).
    pub fn handle_datagram<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        src: SocketAddr,
        dst: SocketAddr,
        payload: &[u8],
        manager: &mut SaManager<T>,
    ) {
        self.metrics.received += 1;
        self.sync_clock(now);
        self.engine.handle_datagram(now, src, dst, payload);
        self.process_events(now, manager);
    }

    /// The next time [`Self::handle_timeout`] has something to do.
    pub fn poll_timeout(&self) -> Option<Time> {
        let mut next = self.engine.poll_timeout();
        let mut take = |t: Option<Time>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n: Time| n.min(t)));
            }
        };
        for c in &self.conns {
            take(c.retry_at);
            for x in &c.extras {
                take(x.pending.as_ref().map(|p| p.2));
            }
            if !c.collision {
                take(c.pending_switch.as_ref().map(|p| p.deadline));
            }
        }
        for s in self.sas.values() {
            take(s.rekey_at);
            take(s.next_dpd.filter(|_| !s.dpd_outstanding));
        }
        next
    }

    /// Timers: the engine's retransmissions, re-initiation, IKE SA rekeys,
    /// dead peer detection, held-back outbound switches, and CHILD_SA
    /// rekeys the SA manager's lifetimes call for (soft expiry by time,
    /// bytes or packets: call this after `SaManager::tick`).
    pub fn handle_timeout<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        manager: &mut SaManager<T>,
    ) {
        self.sync_clock(now);
        self.engine.handle_timeout(now);
        for id in 0..self.conns.len() {
            if self.conns[id].retry_at.is_some_and(|t| t <= now) && !self.conns[id].stopped {
                self.initiate_id(now, id);
            }
            // A takeover: the peer's first packet on the new inbound SA
            // shows it sends, so receives, on the new CHILD_SA.
            if let Some(spi) = self.conns[id]
                .pending_switch
                .as_ref()
                .filter(|p| p.takeover_of.is_some())
                .map(|p| p.for_inbound)
            {
                let tunnel = &self.conns[id].tunnel;
                if manager.inbound_packets(tunnel, spi).is_some_and(|n| n > 0) {
                    if let Some(p) = self.conns[id].pending_switch.take() {
                        self.switch(now, id, p.keys, manager);
                    }
                }
            }
            // In a collision the switch waits for the deletion that
            // settles it, however long.
            if !self.conns[id].collision
                && self.conns[id]
                    .pending_switch
                    .as_ref()
                    .is_some_and(|p| p.deadline <= now)
            {
                let p = self.conns[id].pending_switch.take();
                if let Some(p) = p {
                    warn!(tunnel = %self.conns[id].tunnel, "IKE: the peer did not delete the rekeyed CHILD_SA; switching outbound anyway");
                    self.switch(now, id, p.keys, manager);
                }
            }
        }
        let ids: Vec<IkeSaId> = self.sas.keys().copied().collect();
        for sa in ids {
            let Some(s) = self.sas.get_mut(&sa) else {
                continue;
            };
            if s.phase != SaPhase::Established {
                continue;
            }
            if s.rekey_at.is_some_and(|t| t <= now) {
                s.rekey_at = None;
                if let Err(e) = self.engine.rekey_ike_sa(now, sa) {
                    warn!(ike_sa = %format!("{sa:016x}"), error = %e, "IKE: rekey refused");
                }
                continue;
            }
            let Some(s) = self.sas.get_mut(&sa) else {
                continue;
            };
            if !s.dpd_outstanding && s.next_dpd.is_some_and(|t| t <= now) {
                s.dpd_outstanding = true;
                if self.engine.check_liveness(now, sa).is_err() {
                    s.dpd_outstanding = false;
                }
            }
        }
        // CHILD_SA rekeys: the manager raised a soft expiry for the tunnel.
        let soft = manager.soft_expired();
        for id in 0..self.conns.len() {
            self.extras_timeout(now, id, &soft, manager);
            let c = &self.conns[id];
            if c.child_rekeying || c.pending_switch.is_some() {
                continue;
            }
            let Some((sa, child)) = &c.current else {
                continue;
            };
            // A per-CPU pair's soft expiry rekeys that pair only.
            let lane = |spi: u32| {
                c.extras
                    .iter()
                    .any(|x| x.child.inbound_spi == spi || x.child.outbound_spi == spi)
            };
            if soft.iter().any(|r| r.tunnel == c.tunnel && !lane(r.spi)) {
                let (sa, spi) = (*sa, child.inbound_spi);
                match self.engine.rekey_child_sa(now, sa, spi) {
                    Ok(()) => {
                        info!(tunnel = %c.tunnel, "IKE: CHILD_SA lifetime reached, rekeying");
                        self.conns[id].child_rekeying = true;
                    }
                    Err(e) => {
                        warn!(tunnel = %c.tunnel, error = %e, "IKE: CHILD_SA rekey refused")
                    }
                }
            }
        }
        self.process_events(now, manager);
    }

    /// Per-CPU CHILD_SAs of connection `id`: held-back outbound switches
    /// whose deadline passed, and rekeys of pairs the manager reports
    /// soft-expired (`soft`).
    fn extras_timeout<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        id: ConnectionId,
        soft: &[crate::live::SaRef],
        manager: &mut SaManager<T>,
    ) {
        let tunnel = self.conns[id].tunnel.clone();
        for i in 0..self.conns[id].extras.len() {
            let x = &mut self.conns[id].extras[i];
            if x.pending.as_ref().is_some_and(|p| p.2 <= now) {
                let spi = x.child.inbound_spi;
                if let Some((_, keys, _)) = x.pending.take() {
                    warn!(tunnel = %tunnel, "IKE: the peer did not delete the rekeyed per-CPU CHILD_SA; switching outbound anyway");
                    if let Err(e) = manager.switch_extra_outbound(&tunnel, spi, keys, now / 1000) {
                        warn!(tunnel = %tunnel, error = %e, "IKE: outbound switch of a per-CPU CHILD_SA refused");
                    }
                }
                continue;
            }
            let due = !x.rekeying
                && x.pending.is_none()
                && soft.iter().any(|r| {
                    r.tunnel == tunnel
                        && (r.spi == x.child.inbound_spi || r.spi == x.child.outbound_spi)
                });
            if due {
                let (sa, spi) = (x.ike_sa, x.child.inbound_spi);
                match self.engine.rekey_child_sa(now, sa, spi) {
                    Ok(()) => {
                        info!(tunnel = %tunnel, in_spi = %format!("{spi:#010x}"), "IKE: per-CPU CHILD_SA lifetime reached, rekeying");
                        self.conns[id].extras[i].rekeying = true;
                    }
                    Err(e) => {
                        warn!(tunnel = %tunnel, error = %e, "IKE: per-CPU CHILD_SA rekey refused")
                    }
                }
            }
        }
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        let t = self.engine.poll_transmit();
        if t.is_some() {
            self.metrics.sent += 1;
        }
        t
    }

    /// `ike list`.
    pub fn list(&self, now: Time) -> Vec<IkeSaInfo> {
        let secs = |t: Option<Time>| t.map(|t| now.saturating_sub(t) / 1000);
        let mut out: Vec<IkeSaInfo> = self
            .sas
            .iter()
            .map(|(id, s)| {
                let c = &self.conns[s.connection];
                let info = |ch: &ChildState, rekeying: bool, per_cpu: bool| IkeChildInfo {
                    name: c.child.name.clone(),
                    tunnel: c.tunnel.clone(),
                    in_spi: ch.inbound_spi,
                    out_spi: ch.outbound_spi,
                    suite: ch.suite.to_string(),
                    key_exchange: ch.key_exchange.clone(),
                    udp_encap: ch.udp_encap,
                    age_seconds: now.saturating_sub(ch.installed_at) / 1000,
                    rekeying,
                    local_ts: ch.local_ts.clone(),
                    remote_ts: ch.remote_ts.clone(),
                    per_cpu,
                };
                let mut children = match &c.current {
                    Some((sa, ch)) if sa == id => {
                        vec![info(
                            ch,
                            c.child_rekeying || c.pending_switch.is_some(),
                            false,
                        )]
                    }
                    _ => Vec::new(),
                };
                children.extend(
                    c.extras
                        .iter()
                        .filter(|x| x.ike_sa == *id)
                        .map(|x| info(&x.child, x.rekeying || x.pending.is_some(), true)),
                );
                let (_, spi_i, spi_r) = self.engine.ike_sa_spis(*id).unwrap_or((false, 0, 0));
                IkeSaInfo {
                    connection: c.config.name.clone(),
                    ike_sa: format!("{id:016x}"),
                    spi_i: format!("{spi_i:016x}"),
                    spi_r: format!("{spi_r:016x}"),
                    state: match s.phase {
                        SaPhase::Connecting => "connecting".into(),
                        SaPhase::Established => "established".into(),
                    },
                    initiator: s.initiator,
                    local: s.local.map(|a| a.to_string()),
                    remote: s
                        .remote
                        .map(|a| a.to_string())
                        .or_else(|| c.config.remote.map(|r| r.to_string())),
                    proposal: s.suite.clone(),
                    established_seconds: secs(s.established_at),
                    // The engine's rekey time, or the driver's retry of a
                    // refused rekey, whichever comes first.
                    rekey_in_seconds: [
                        s.rekey_at,
                        self.engine
                            .ike_sa_lifetimes(*id)
                            .and_then(|(rekey, _, _)| rekey),
                    ]
                    .into_iter()
                    .flatten()
                    .min()
                    .map(|t| t.saturating_sub(now) / 1000),
                    children,
                }
            })
            .collect();
        // A trap without IKE SA: shown, so `ike list` tells a trapped
        // connection from one that is down.
        for (id, c) in self.conns.iter().enumerate() {
            if c.trapped && !self.sas.values().any(|s| s.connection == id) {
                out.push(IkeSaInfo {
                    connection: c.config.name.clone(),
                    ike_sa: String::new(),
                    spi_i: String::new(),
                    spi_r: String::new(),
                    state: "trapped".into(),
                    initiator: false,
                    local: Some(c.config.local.to_string()),
                    remote: c.config.remote.map(|r| r.to_string()),
                    proposal: None,
                    established_seconds: None,
                    rekey_in_seconds: None,
                    children: Vec::new(),
                });
            }
        }
        out.sort_by(|a, b| {
            a.connection
                .cmp(&b.connection)
                .then(a.ike_sa.cmp(&b.ike_sa))
        });
        out
    }

    fn schedule_retry(&mut self, now: Time, id: ConnectionId) {
        let c = &mut self.conns[id];
        if c.child.start_action != StartAction::Start || c.stopped || c.config.remote.is_none() {
            return;
        }
        if self.sas.values().any(|s| s.connection == id) {
            return;
        }
        c.retry_at = Some(now + c.backoff_ms);
        info!(connection = %c.config.name, in_ms = c.backoff_ms, "IKE: will initiate again");
        c.backoff_ms = (c.backoff_ms * 2).min(RETRY_MAX_MS);
    }

    /// Removes the tunnel of connection `id` (its SAs go; its traffic is
    /// then discarded: see docs/config.md [[connection]]).
    fn remove_tunnel<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        id: ConnectionId,
        manager: &mut SaManager<T>,
        why: &str,
    ) {
        let c = &mut self.conns[id];
        c.current = None;
        c.previous = None;
        c.collision = false;
        c.pending_switch = None;
        c.child_rekeying = false;
        c.extras.clear();
        if manager.tunnel(&c.tunnel).is_some() && !manager.is_trap(&c.tunnel) {
            match manager.delete_tunnel(&c.tunnel, now / 1000) {
                Ok(()) => info!(tunnel = %c.tunnel, why, "IKE: CHILD_SA removed"),
                Err(e) => warn!(tunnel = %c.tunnel, error = %e, "IKE: cannot remove tunnel"),
            }
        }
        // "trap": the policy is trapped again, the next packet initiates.
        self.install_trap(now, id, manager);
    }

    /// Drops the driver's state of an IKE SA that is gone; its CHILD_SA
    /// (when the tunnel runs on it) goes too.
    fn ike_sa_gone<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        sa: IkeSaId,
        manager: &mut SaManager<T>,
        failed: bool,
    ) {
        let Some(s) = self.sas.remove(&sa) else {
            return;
        };
        let id = s.connection;
        self.conns[id].standby.retain(|(x, _)| *x != sa);
        // A new CHILD_SA asked of it will not come.
        if self.conns[id].child_creating == Some(sa) {
            self.conns[id].child_creating = None;
        }
        // Its per-CPU CHILD_SAs go with it (the tunnel and the others stay).
        let tunnel = self.conns[id].tunnel.clone();
        let gone: Vec<u32> = self.conns[id]
            .extras
            .iter()
            .filter(|x| x.ike_sa == sa)
            .map(|x| x.child.inbound_spi)
            .collect();
        self.conns[id].extras.retain(|x| x.ike_sa != sa);
        for spi in gone {
            let _ = manager.remove_extra_pair(&tunnel, spi, now / 1000);
        }
        // The peer deleted the IKE SA its new one replaced: it has the new
        // CHILD_SA, our held-back outbound switch to it happens now.
        if self.conns[id]
            .pending_switch
            .as_ref()
            .is_some_and(|p| p.takeover_of == Some(sa))
        {
            if let Some(p) = self.conns[id].pending_switch.take() {
                self.switch(now, id, p.keys, manager);
            }
        }
        if self.conns[id]
            .current
            .as_ref()
            .is_some_and(|(o, _)| *o == sa)
            && !self.fall_back(now, id)
        {
            self.remove_tunnel(
                now,
                id,
                manager,
                if failed {
                    "IKE SA failed"
                } else {
                    "IKE SA deleted"
                },
            );
        }
        if failed {
            self.schedule_retry(now, id);
        }
    }

    fn switch<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        id: ConnectionId,
        keys: SaKeys,
        manager: &mut SaManager<T>,
    ) {
        let tunnel = self.conns[id].tunnel.clone();
        if let Err(e) = manager.switch_outbound(&tunnel, keys, now / 1000) {
            warn!(tunnel = %tunnel, error = %e, "IKE: outbound switch refused");
        }
    }

    /// The manager's tunnel for a new CHILD_SA.
    fn tunnel_for(&self, id: ConnectionId, c: &ChildSa) -> Result<Tunnel, String> {
        let conn = &self.conns[id];
        let suite = Suite::ALL
            .iter()
            .copied()
            .find(|s| s.name() == c.suite.config_name())
            .ok_or_else(|| format!("suite {} unknown to the data plane", c.suite.config_name()))?;
        let local_ts = selectors::to_prefixes(&c.local_ts).map_err(|e| e.to_string())?;
        let remote_ts = selectors::to_prefixes(&c.remote_ts).map_err(|e| e.to_string())?;
        let keys = |spi: u32, k: &espgw_ike::crypto::EspKeys| SaKeys {
            spi,
            key: esp_secret(&k.key),
            auth_key: (!k.auth_key.is_empty()).then(|| esp_secret(&k.auth_key)),
        };
        let ch = &conn.child;
        let opt = |v: u64| (v > 0).then_some(v);
        Ok(Tunnel {
            name: conn.tunnel.clone(),
            local: c.local.ip(),
            remote: c.remote.ip(),
            port: conn.config.port,
            local_ts,
            remote_ts,
            suite,
            esn: c.esn,
            replay_window: ch.replay_window,
            // The peer's NAT-T port as its IKE messages came from: 4500,
            // or what a NAT in front of it mapped 4500 to (the engine
            // follows the source of each authenticated request; RFC 3948
            // sends ESP back the same way). Every new outbound SA of the
            // tunnel follows a new mapping (`child_installed`).
            encap: if c.udp_encap {
                Encap::Udp {
                    peer_port: match c.remote.port() {
                        // (No port: not from a datagram; cannot be.)
                        0 => espgw_esp::Encap::NAT_T_PORT,
                        port => port,
                    },
                }
            } else {
                Encap::None
            },
            // The manager's soft expiry is the rekey trigger (time, bytes,
            // packets from the data plane's counters); the hard one
            // removes the SA when no rekey came in time.
            lifetime: Lifetime {
                hard: Limits {
                    seconds: opt(ch.life_time),
                    bytes: None,
                    packets: None,
                },
                soft: Limits {
                    // Less up to 10 %, as strongSwan's rand_time: two
                    // peers with equal timers rarely rekey at once (a
                    // collision costs an extra exchange). The SPI we chose
                    // at random is the random number.
                    seconds: opt(
                        ch.rekey_time - u64::from(c.inbound_spi) % (ch.rekey_time / 10 + 1)
                    ),
                    bytes: opt(ch.rekey_bytes),
                    packets: opt(ch.rekey_packets),
                },
            },
            outbound: keys(c.outbound_spi, &c.outbound),
            inbound: keys(c.inbound_spi, &c.inbound),
            priority: DEFAULT_PRIORITY,
            mss_clamp: ch.mss_clamp,
        })
    }

    fn child_installed<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        c: ChildSa,
        manager: &mut SaManager<T>,
    ) {
        let id = c.connection;
        // The answer to our request for the connection's CHILD_SA, whatever
        // becomes of it below.
        if c.initiated_by_us && !c.per_resource && c.rekeys.is_none() {
            self.conns[id].child_creating = None;
        }
        if self.sas.get(&c.ike_sa).is_some_and(|s| s.doomed) {
            return;
        }
        let ts_text = |v: &[espgw_ike::message::TrafficSelector]| -> Vec<String> {
            selectors::to_prefixes(v)
                .map(|p| p.iter().map(|p| p.to_string()).collect())
                .unwrap_or_default()
        };
        let state = ChildState {
            inbound_spi: c.inbound_spi,
            outbound_spi: c.outbound_spi,
            suite: c.suite.config_name(),
            key_exchange: key_exchange_names(c.key_exchange, &c.additional_key_exchanges),
            udp_encap: c.udp_encap,
            installed_at: now,
            local_ts: ts_text(&c.local_ts),
            remote_ts: ts_text(&c.remote_ts),
        };
        let tunnel = match self.tunnel_for(id, &c) {
            Ok(t) => t,
            Err(why) => {
                warn!(tunnel = %self.conns[id].tunnel, why, "IKE: CHILD_SA cannot be installed; deleting it");
                let _ = self.engine.delete_child_sa(now, c.ike_sa, c.inbound_spi);
                return;
            }
        };
        let name = tunnel.name.clone();
        let secs = now / 1000;
        // Whatever this CHILD_SA becomes below (a rekey, a per-CPU pair, a
        // takeover by a new IKE SA), its outbound SA is new: it goes to the
        // port the peer's messages come from now, which a NAT in front of
        // the peer may have mapped anew. (A tunnel re-created below gets
        // the port from `tunnel` itself.)
        manager.follow_peer_port(&name, tunnel.encap);
        // RFC 9611 per-CPU CHILD_SAs: their own pairs of the tunnel.
        let lane_of = |x: &Extra, spi: u32| x.child.inbound_spi == spi;
        if let Some(old) = c
            .rekeys
            .filter(|old| self.conns[id].extras.iter().any(|x| lane_of(x, *old)))
        {
            return self.extra_rekeyed(now, id, old, c, state, tunnel, manager);
        }
        let collision = c.rekeys.is_some_and(|old| {
            self.conns[id]
                .extras
                .iter()
                .any(|x| x.replaced.contains(&old))
        });
        if c.per_resource || collision {
            return self.extra_added(now, id, c, state, tunnel, manager);
        }
        // Both sides set the connection up at once and this CHILD_SA's IKE
        // SA lost (it is deleted next, by us or by the peer): the tunnel
        // stays on the other's. Its inbound SA is installed all the same
        // (the peer may send on it until it knows), draining from the
        // start; it goes with its IKE SA.
        let redundant = self.sas.get(&c.ike_sa).is_some_and(|s| s.redundant);
        let kept = self.conns[id]
            .current
            .as_ref()
            .is_some_and(|(sa, _)| *sa != c.ike_sa);
        if redundant && kept {
            if let Err(e) = manager.install_inbound_draining(&name, tunnel.inbound.clone(), secs) {
                warn!(tunnel = %name, error = %e, "IKE: inbound SA of a redundant IKE SA's CHILD_SA refused");
            }
            self.conns[id].standby.push((c.ike_sa, state));
            info!(tunnel = %name, ike_sa = %format!("{:016x}", c.ike_sa), in_spi = %format!("{:#010x}", c.inbound_spi), "IKE: both sides set the connection up at once; the CHILD_SA of the redundant IKE SA only receives until it goes");
            return;
        }
        let current = self.conns[id].current.as_ref();
        // A rekey: a new CHILD_SA of the same IKE SA. One of another IKE SA
        // (the peer set up a new one, after a restart or a lost DPD) takes
        // the tunnel over at once: the peer has it installed both ways.
        let rekey_of = current
            .filter(|(sa, _)| *sa == c.ike_sa)
            .map(|(_, s)| s.inbound_spi);
        // The SA a takeover replaces: its IKE SA and our inbound SPI.
        let old = current.map(|(sa, s)| (*sa, s.inbound_spi));
        // The peer's new IKE SA came with INITIAL_CONTACT: it lost the old
        // one (a restart) and has the new CHILD_SA as soon as it has our
        // answer, as for a first CHILD_SA; nothing to wait for.
        let restarted = self.sas.get(&c.ike_sa).is_some_and(|s| s.initial_contact);
        // (The peer's NAT-mapped port may differ: a peer back from a NAT
        // that mapped it anew still takes its tunnel over, and the new SAs
        // follow its port.)
        let takeover = current.is_some_and(|(sa, _)| *sa != c.ike_sa)
            && manager.tunnel(&name).is_some_and(|t| {
                t.local == tunnel.local
                    && t.remote == tunnel.remote
                    && t.encap.is_udp() == tunnel.encap.is_udp()
            });
        // Our exchange: the peer (its responder) installed it both ways
        // before answering.
        let ours = c.initiated_by_us;
        if ours {
            self.conns[id].child_rekeying = false;
        }
        if takeover {
            self.conns[id].pending_switch = None;
            self.conns[id].previous = None;
            self.conns[id].collision = false;
            // Our own new IKE SA (our reauthentication): the peer installed
            // the CHILD_SA both ways before it answered, so outbound at
            // once. The peer's, with INITIAL_CONTACT (it restarted and
            // holds no old SA): at once too. The peer's without it (its
            // reauthentication): held back until the peer shows it has the
            // SA: its Delete of the old IKE SA, its first packet on the new
            // one, or TAKEOVER_SWITCH_TIMEOUT_MS (docs/ike.md "reauth_time").
            let r = manager
                .install_inbound(&name, tunnel.inbound.clone(), secs)
                .and_then(|()| match old {
                    // The peer's new IKE SA: it installs the CHILD_SA when
                    // our IKE_AUTH answer arrives, so our outbound waits for
                    // a sign that it has (TAKEOVER_SWITCH_TIMEOUT_MS).
                    Some((old_sa, old_inbound)) if !ours && !restarted => {
                        self.conns[id].pending_switch = Some(PendingSwitch {
                            for_inbound: c.inbound_spi,
                            old_inbound,
                            keys: tunnel.outbound.clone(),
                            deadline: now + TAKEOVER_SWITCH_TIMEOUT_MS,
                            takeover_of: Some(old_sa),
                        });
                        Ok(())
                    }
                    _ => manager.switch_outbound(&name, tunnel.outbound, secs),
                });
            if let Err(e) = r {
                self.conns[id].pending_switch = None;
                warn!(tunnel = %name, error = %e, "IKE: CHILD_SA of a new IKE SA refused; deleting it");
                let _ = self.engine.delete_child_sa(now, c.ike_sa, c.inbound_spi);
                return;
            }
            info!(tunnel = %name, ike_sa = %format!("{:016x}", c.ike_sa), "IKE: a new IKE SA's CHILD_SA took the tunnel over");
            self.metrics.children_installed += 1;
            if let Some((old_sa, old_child)) = self.conns[id].current.replace((c.ike_sa, state)) {
                if self
                    .sas
                    .get(&old_sa)
                    .is_some_and(|s| s.phase == SaPhase::Established)
                {
                    self.conns[id].standby.push((old_sa, old_child));
                }
            }
            return;
        }
        match rekey_of {
            Some(old_inbound) if manager.tunnel(&name).is_some() => {
                // Make before break: the new inbound SA first (published to
                // the workers before the call returns), then the outbound.
                if let Err(e) = manager.install_inbound(&name, tunnel.inbound.clone(), secs) {
                    warn!(tunnel = %name, error = %e, "IKE: new inbound SA refused; deleting the CHILD_SA");
                    let _ = self.engine.delete_child_sa(now, c.ike_sa, c.inbound_spi);
                    return;
                }
                // The SA this one replaced is not deleted yet: it was itself
                // new, so both sides rekeyed at once.
                let conn = &mut self.conns[id];
                conn.collision = conn.previous.is_some();
                conn.previous = conn.current.take();
                if ours {
                    // We started the rekey: the peer installed both
                    // directions before it answered. (In a collision the
                    // peer's SA keeps its held-back switch: it may win.)
                    self.switch(now, id, tunnel.outbound, manager);
                } else {
                    // The peer's rekey: it sends on the new SA only once it
                    // has our answer, and takes it inbound only then too;
                    // our outbound waits for its delete of the old SA.
                    self.conns[id].pending_switch = Some(PendingSwitch {
                        for_inbound: c.inbound_spi,
                        old_inbound,
                        keys: tunnel.outbound,
                        deadline: now + OUTBOUND_SWITCH_TIMEOUT_MS,
                        takeover_of: None,
                    });
                }
                self.metrics.child_rekeys += 1;
            }
            _ => {
                // A trap is replaced in place by add_tunnel (one publish).
                if manager.tunnel(&name).is_some() && !manager.is_trap(&name) {
                    let _ = manager.delete_tunnel(&name, secs);
                }
                if let Err(e) = manager.add_tunnel(tunnel, secs) {
                    warn!(tunnel = %name, error = %e, "IKE: CHILD_SA refused by the SA manager; deleting it");
                    let _ = self.engine.delete_child_sa(now, c.ike_sa, c.inbound_spi);
                    return;
                }
            }
        }
        info!(tunnel = %name, in_spi = %format!("{:#010x}", c.inbound_spi), out_spi = %format!("{:#010x}", c.outbound_spi), suite = c.suite.config_name(), udp_encap = c.udp_encap, "IKE: CHILD_SA installed");
        self.conns[id].trapped = false;
        self.metrics.children_installed += 1;
        self.conns[id].current = Some((c.ike_sa, state));
    }

    /// A new per-CPU CHILD_SA: one more SA pair of the tunnel, outbound
    /// at once (ours: the peer installed it both ways before answering;
    /// the peer's: as for a first CHILD_SA, it has it once our answer
    /// arrives). Without the tunnel (no first CHILD_SA) it is deleted.
    fn extra_added<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        id: ConnectionId,
        c: ChildSa,
        state: ChildState,
        tunnel: Tunnel,
        manager: &mut SaManager<T>,
    ) {
        let name = tunnel.name.clone();
        let up = manager.tunnel(&name).is_some() && !manager.is_trap(&name);
        let r = if up {
            manager.add_extra_pair(&name, tunnel.outbound, tunnel.inbound, now / 1000)
        } else {
            Err(crate::live::LiveError(
                "the tunnel has no first CHILD_SA".into(),
            ))
        };
        if let Err(e) = r {
            warn!(tunnel = %name, error = %e, "IKE: per-CPU CHILD_SA refused; deleting it");
            let _ = self.engine.delete_child_sa(now, c.ike_sa, c.inbound_spi);
            return;
        }
        info!(tunnel = %name, in_spi = %format!("{:#010x}", c.inbound_spi), out_spi = %format!("{:#010x}", c.outbound_spi), pairs = self.conns[id].extras.len() + 2, "IKE: per-CPU CHILD_SA installed");
        self.metrics.children_installed += 1;
        self.conns[id].extras.push(Extra {
            ike_sa: c.ike_sa,
            child: state,
            rekeying: false,
            pending: None,
            replaced: Vec::new(),
        });
    }

    /// A rekey of per-CPU CHILD_SA `old`: its pair's new inbound SA first,
    /// then its outbound (at once for our rekey; for the peer's once it
    /// deleted the old SA, or after [`OUTBOUND_SWITCH_TIMEOUT_MS`]). The
    /// other pairs are not touched.
    #[allow(clippy::too_many_arguments)]
    fn extra_rekeyed<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        id: ConnectionId,
        old: u32,
        c: ChildSa,
        state: ChildState,
        tunnel: Tunnel,
        manager: &mut SaManager<T>,
    ) {
        let name = tunnel.name.clone();
        let secs = now / 1000;
        if let Err(e) = manager.rekey_extra_inbound(&name, old, tunnel.inbound.clone(), secs) {
            warn!(tunnel = %name, error = %e, "IKE: new inbound SA of a per-CPU CHILD_SA refused; deleting it");
            let _ = self.engine.delete_child_sa(now, c.ike_sa, c.inbound_spi);
            return;
        }
        let Some(x) = self.conns[id]
            .extras
            .iter_mut()
            .find(|x| x.child.inbound_spi == old)
        else {
            return;
        };
        x.child = state;
        x.replaced.push(old);
        x.ike_sa = c.ike_sa;
        if c.initiated_by_us {
            x.rekeying = false;
            x.pending = None;
            if let Err(e) =
                manager.switch_extra_outbound(&name, c.inbound_spi, tunnel.outbound, secs)
            {
                warn!(tunnel = %name, error = %e, "IKE: outbound switch of a per-CPU CHILD_SA refused");
            }
        } else {
            x.pending = Some((old, tunnel.outbound, now + OUTBOUND_SWITCH_TIMEOUT_MS));
        }
        info!(tunnel = %name, in_spi = %format!("{:#010x}", c.inbound_spi), old_in_spi = %format!("{old:#010x}"), "IKE: per-CPU CHILD_SA rekeyed");
        self.metrics.child_rekeys += 1;
    }

    /// A deleted CHILD_SA that is (or was) per-CPU; false when it is none
    /// of those.
    fn extra_deleted<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        inbound_spi: u32,
        manager: &mut SaManager<T>,
    ) -> bool {
        for id in 0..self.conns.len() {
            let tunnel = self.conns[id].tunnel.clone();
            let extras = &mut self.conns[id].extras;
            if let Some(i) = extras
                .iter()
                .position(|x| x.child.inbound_spi == inbound_spi)
            {
                extras.remove(i);
                if let Err(e) = manager.remove_extra_pair(&tunnel, inbound_spi, now / 1000) {
                    warn!(tunnel = %tunnel, error = %e, "IKE: cannot remove a per-CPU SA pair");
                }
                return true;
            }
            if let Some(x) = extras
                .iter_mut()
                .find(|x| x.pending.as_ref().is_some_and(|p| p.0 == inbound_spi))
            {
                // The peer deleted the SA its rekey replaced: it receives on
                // the new one.
                let spi = x.child.inbound_spi;
                x.replaced.retain(|s| *s != inbound_spi);
                if let Some((_, keys, _)) = x.pending.take() {
                    if let Err(e) = manager.switch_extra_outbound(&tunnel, spi, keys, now / 1000) {
                        warn!(tunnel = %tunnel, error = %e, "IKE: outbound switch of a per-CPU CHILD_SA refused");
                    }
                }
                return true;
            }
            if let Some(x) = extras
                .iter_mut()
                .find(|x| x.replaced.contains(&inbound_spi))
            {
                // An old SA of a finished rekey: it drains in the manager.
                x.replaced.retain(|s| *s != inbound_spi);
                return true;
            }
        }
        false
    }

    fn child_deleted<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        inbound_spi: u32,
        manager: &mut SaManager<T>,
    ) {
        let is = |x: &Option<(IkeSaId, ChildState)>| {
            x.as_ref()
                .is_some_and(|(_, c)| c.inbound_spi == inbound_spi)
        };
        for c in &mut self.conns {
            c.standby.retain(|(_, x)| x.inbound_spi != inbound_spi);
        }
        if self.extra_deleted(now, inbound_spi, manager) {
            return;
        }
        let Some(id) = self.conns.iter().position(|c| {
            is(&c.current)
                || is(&c.previous)
                || c.pending_switch
                    .as_ref()
                    .is_some_and(|p| p.old_inbound == inbound_spi || p.for_inbound == inbound_spi)
        }) else {
            // An old SA of a finished rekey: it drains in the manager.
            return;
        };
        if self.conns[id].collision {
            self.settle_collision(now, id, inbound_spi, manager);
            return;
        }
        match self.conns[id].pending_switch.as_ref() {
            // The SA we were about to send on is gone.
            Some(p) if p.for_inbound == inbound_spi => self.conns[id].pending_switch = None,
            // The peer deleted the SA it replaced: it receives on the new one.
            Some(p) if p.old_inbound == inbound_spi => {
                if let Some(p) = self.conns[id].pending_switch.take() {
                    self.switch(now, id, p.keys, manager);
                }
            }
            _ => {}
        }
        if is(&self.conns[id].previous) {
            self.conns[id].previous = None;
        }
        if is(&self.conns[id].current) {
            // The tunnel goes with its first CHILD_SA: its per-CPU ones are
            // deleted with the peer too, or the peer would keep sending on
            // SAs we no longer have.
            let extras: Vec<(IkeSaId, u32)> = self.conns[id]
                .extras
                .iter()
                .map(|x| (x.ike_sa, x.child.inbound_spi))
                .collect();
            for (sa, spi) in extras {
                let _ = self.engine.delete_child_sa(now, sa, spi);
            }
            self.remove_tunnel(now, id, manager, "CHILD_SA deleted");
        }
    }

    /// The tunnel's CHILD_SA went with its IKE SA while another IKE SA
    /// of the connection still has one for it (`standby`:
    /// both sides set the connection up at once and the SA kept is the
    /// one that went, or a newer IKE SA's CHILD_SA took over and then went
    /// first): that CHILD_SA is current again and rekeyed at once; the
    /// rekey's new CHILD_SA takes the outbound SA over as any rekey of
    /// ours does. (Not switched back to as it is: its outbound SA's
    /// sequence numbers went on with the SA manager's retired copy, and
    /// the same keys must not count from 1 again.) Until the rekey is done
    /// (a round trip) the tunnel keeps the gone SA's outbound SA, whose
    /// packets the peer drops. The tunnel and its other IKE SAs' per-CPU
    /// pairs stay as they are. Returns whether it fell back.
    fn fall_back(&mut self, now: Time, id: ConnectionId) -> bool {
        while let Some((sa, child)) = self.conns[id].standby.pop() {
            // Not an IKE SA being replaced (a redundant one, the old one
            // of a reauthentication): the engine would hold the rekey
            // there until the SA is gone.
            let up = self.engine.ike_sa_live(sa) && self.sas.get(&sa).is_some_and(|s| !s.doomed);
            if up
                && self
                    .engine
                    .rekey_child_sa(now, sa, child.inbound_spi)
                    .is_ok()
            {
                info!(tunnel = %self.conns[id].tunnel, ike_sa = %format!("{sa:016x}"), in_spi = %format!("{:#010x}", child.inbound_spi), "IKE: the tunnel carries on with another IKE SA's CHILD_SA, rekeyed");
                let c = &mut self.conns[id];
                c.current = Some((sa, child));
                c.previous = None;
                c.collision = false;
                c.pending_switch = None;
                c.child_rekeying = true;
                return true;
            }
        }
        false
    }

    /// A deletion during a rekey collision. The loser of the two new SAs
    /// settles it: the other one is current (its inbound SA receives
    /// again if it was replaced) and the outbound SA is its own (a held-
    /// back switch to it happens now). The old SA's deletion settles
    /// nothing.
    fn settle_collision<T: Send + Sync + 'static>(
        &mut self,
        now: Time,
        id: ConnectionId,
        inbound_spi: u32,
        manager: &mut SaManager<T>,
    ) {
        let conn = &mut self.conns[id];
        let spi_of = |x: &Option<(IkeSaId, ChildState)>| x.as_ref().map(|(_, c)| c.inbound_spi);
        let winner_was_replaced = if spi_of(&conn.current) == Some(inbound_spi) {
            // The newer lost: the earlier new one is current again.
            conn.current = conn.previous.take();
            true
        } else if spi_of(&conn.previous) == Some(inbound_spi) {
            conn.previous = None;
            false
        } else {
            return;
        };
        conn.collision = false;
        let Some(winner) = spi_of(&conn.current) else {
            return;
        };
        let tunnel = conn.tunnel.clone();
        let pending = conn.pending_switch.take();
        if winner_was_replaced {
            if let Err(e) = manager.reactivate_inbound(&tunnel, winner, now / 1000) {
                warn!(tunnel = %tunnel, error = %e, "IKE: cannot reactivate the surviving CHILD_SA");
            }
        }
        if let Some(p) = pending.filter(|p| p.for_inbound == winner) {
            self.switch(now, id, p.keys, manager);
        }
        info!(tunnel = %tunnel, in_spi = %format!("{winner:#010x}"), "IKE: rekey collision resolved");
    }

    /// Turns the engine's events into SA manager calls and state.
    fn process_events<T: Send + Sync + 'static>(&mut self, now: Time, manager: &mut SaManager<T>) {
        while let Some(ev) = self.engine.poll_event() {
            // Display of an event never holds a key.
            info!(event = %ev, "IKE");
            match ev {
                Event::IkeSaUp {
                    ike_sa,
                    connection,
                    suite,
                    local,
                    remote,
                    initiator,
                    initial_contact,
                    redundant,
                    ..
                } => {
                    let c = &mut self.conns[connection];
                    c.backoff_ms = RETRY_BASE_MS;
                    c.retry_at = None;
                    let dpd = c.config.dpd_delay;
                    let s = self.sas.entry(ike_sa).or_insert(IkeSaState {
                        connection,
                        phase: SaPhase::Connecting,
                        initiator: false,
                        suite: None,
                        local: None,
                        remote: None,
                        established_at: None,
                        rekey_at: None,
                        next_dpd: None,
                        dpd_outstanding: false,
                        doomed: false,
                        initial_contact: false,
                        redundant: false,
                    });
                    s.phase = SaPhase::Established;
                    s.initiator = initiator;
                    s.initial_contact = initial_contact;
                    s.redundant = redundant;
                    if s.doomed {
                        info!(ike_sa = %format!("{ike_sa:016x}"), "IKE: terminated while being set up; deleting it");
                        if let Err(e) = self.engine.delete_ike_sa(now, ike_sa) {
                            warn!(error = %e, "IKE: delete refused");
                        }
                    } else {
                        // Up again (the peer initiated after `ike
                        // terminate`): the operator's stop is over, and a
                        // dead peer is re-initiated as for any `start`
                        // connection.
                        self.conns[connection].stopped = false;
                    }
                    s.suite = Some(suite_name(&suite));
                    s.local = Some(local);
                    s.remote = Some(remote);
                    s.established_at = Some(now);
                    s.rekey_at = None;
                    s.next_dpd = (dpd > 0).then(|| now + dpd * 1000);
                    self.metrics.handshakes += 1;
                }
                Event::ChildSaInstalled(c) => self.child_installed(now, *c, manager),
                Event::ChildSaDeleted { inbound_spi, .. } => {
                    self.child_deleted(now, inbound_spi, manager)
                }
                Event::ChildSaFailed { ike_sa, notify } => {
                    if let Some(s) = self.sas.get(&ike_sa) {
                        let c = &mut self.conns[s.connection];
                        if c.child_creating == Some(ike_sa) {
                            c.child_creating = None;
                        }
                    }
                    // RFC 9611: the peer takes no more per-CPU CHILD_SAs;
                    // the ones up carry on. Not a failure.
                    if notify == espgw_ike::message::NotifyType::TS_MAX_QUEUE {
                        info!(ike_sa = %format!("{ike_sa:016x}"), "IKE: the peer takes no more per-CPU CHILD_SAs (TS_MAX_QUEUE)");
                        continue;
                    }
                    self.metrics.child_failures += 1;
                    if let Some(s) = self.sas.get(&ike_sa) {
                        let c = &mut self.conns[s.connection];
                        c.child_rekeying = false;
                        for x in c.extras.iter_mut().filter(|x| x.ike_sa == ike_sa) {
                            x.rekeying = false;
                        }
                    }
                }
                Event::AuthFailed { ike_sa, reason, .. } => {
                    self.metrics.auth_failures += 1;
                    if reason == AuthFailure::RejectedByPeer {
                        self.metrics.auth_rejected_by_peer += 1;
                    }
                    self.ike_sa_gone(now, ike_sa, manager, true);
                }
                Event::IkeSaFailed { ike_sa, reason, .. } => {
                    let established = self
                        .sas
                        .get(&ike_sa)
                        .is_some_and(|s| s.phase == SaPhase::Established);
                    if reason == FailReason::Timeout && established {
                        self.metrics.dpd_failures += 1;
                    } else {
                        self.metrics.handshake_failures += 1;
                    }
                    self.ike_sa_gone(now, ike_sa, manager, true);
                }
                Event::PeerAlive { ike_sa } => {
                    if let Some(s) = self.sas.get_mut(&ike_sa) {
                        s.dpd_outstanding = false;
                        let dpd = self.conns[s.connection].config.dpd_delay;
                        s.next_dpd = (dpd > 0).then(|| now + dpd * 1000);
                    }
                }
                Event::IkeRekeyFailed { ike_sa, notify } => {
                    // The engine retries after TEMPORARY_FAILURE itself
                    // (5-15 s); after anything else its timer is spent.
                    if notify != espgw_ike::message::NotifyType::TEMPORARY_FAILURE {
                        if let Some(s) = self.sas.get_mut(&ike_sa) {
                            s.rekey_at = Some(now + ike_rekey_retry_delay(ike_sa, now));
                        }
                    }
                }
                Event::IkeSaRekeyed { old, new } => {
                    self.metrics.ike_rekeys += 1;
                    let Some(o) = self.sas.get(&old) else {
                        continue;
                    };
                    let id = o.connection;
                    let dpd = self.conns[id].config.dpd_delay;
                    let redundant = o.redundant;
                    let state = IkeSaState {
                        connection: id,
                        phase: SaPhase::Established,
                        initiator: o.initiator,
                        suite: o.suite.clone(),
                        local: o.local,
                        remote: o.remote,
                        established_at: Some(now),
                        rekey_at: None,
                        next_dpd: (dpd > 0).then(|| now + dpd * 1000),
                        dpd_outstanding: false,
                        doomed: false,
                        initial_contact: false,
                        redundant,
                    };
                    self.sas.insert(new, state);
                    let conn = &mut self.conns[id];
                    // A queued request for a new CHILD_SA moved with the
                    // CHILD_SAs (the engine refuses the peer's rekey while
                    // one is in flight).
                    if conn.child_creating == Some(old) {
                        conn.child_creating = Some(new);
                    }
                    for (sa, _) in [&mut conn.current, &mut conn.previous]
                        .into_iter()
                        .flatten()
                    {
                        if *sa == old {
                            *sa = new;
                        }
                    }
                    for x in conn.extras.iter_mut().filter(|x| x.ike_sa == old) {
                        x.ike_sa = new;
                    }
                    for (sa, _) in conn.standby.iter_mut().filter(|(sa, _)| *sa == old) {
                        *sa = new;
                    }
                    // The old SA is deleted next; it owns no CHILD_SA now.
                    if let Some(o) = self.sas.get_mut(&old) {
                        o.rekey_at = None;
                        o.next_dpd = None;
                    }
                }
                Event::IkeSaDeleted { ike_sa } => self.ike_sa_gone(now, ike_sa, manager, false),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The retry delay after a refused IKE SA rekey stays within half to
    /// one and a half `IKE_REKEY_RETRY_MS`, and two SAs (nearby SPIs, the
    /// same moment) draw different delays: two peers refusing each
    /// other's rekeys with IKE_FOLLOWUP_KE retry apart.
    #[test]
    fn ike_rekey_retry_delays_spread_within_their_bounds() {
        let now = 1_234_567;
        let delays: Vec<u64> = (1..=200u64)
            .map(|spi| ike_rekey_retry_delay(spi, now))
            .collect();
        for d in &delays {
            assert!(
                (IKE_REKEY_RETRY_MS / 2..IKE_REKEY_RETRY_MS * 3 / 2).contains(d),
                "{d}"
            );
        }
        let distinct: std::collections::BTreeSet<_> = delays.iter().collect();
        assert!(distinct.len() > 190, "{} distinct", distinct.len());
        let (lo, hi) = (delays.iter().min().unwrap(), delays.iter().max().unwrap());
        assert!(hi - lo > IKE_REKEY_RETRY_MS * 9 / 10, "{lo}..{hi}");
        // The same SA refused again later waits a different time.
        assert_ne!(
            ike_rekey_retry_delay(7, now),
            ike_rekey_retry_delay(7, now + 1)
        );
    }
}
