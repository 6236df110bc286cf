//! The SA manager: owns every SA and the published data-plane snapshot,
//! and changes them live (add, delete, make-before-break rekey, lifetimes).
//!
//! Runs on the control thread. Every change builds a new snapshot with the
//! caller's [`SnapshotBuilder`] and publishes it RCU-style; SAs are shared
//! by `Arc` between snapshots, so the sequence numbers, replay windows and
//! counters of SAs that did not change carry over untouched. Each change
//! writes one `tracing` info line (never a key, never per packet).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;

use espgw_esp::{Expiry, InboundCounters, InboundSa, OutboundSa, SaConfig, SaStats};
use tracing::{info, warn};

use super::rules;
use super::snapshot::{InboundView, LiveView, SnapshotBuilder, TunnelView};
use super::status::{
    Dir, Event, EventCounts, LifetimeLeft, SaInfo, SaRef, SaState, TunnelStatus, TunnelTotals,
};
use crate::config::{Config, EncapMode, SaKeys, SpdEntry, Tunnel};
use crate::state::{Admission, KeyHasher, KeyId, KeyRefused, Record, SaDir, SeqKeeper};
use crate::tables::{
    Action, Generation, Publisher, Reader, Rule, SharedInbound, SharedOutbound, Spd, Tables,
    TunnelId, Watcher,
};

/// How long an inbound SA replaced by a rekey keeps decrypting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainPolicy {
    /// Remove it once no packet arrived on it for this many seconds...
    pub idle_seconds: u64,
    /// ...or at the latest this many seconds after the rekey.
    pub timeout_seconds: u64,
}

impl Default for DrainPolicy {
    /// 5 s idle (far beyond any packet still in flight), 60 s at most.
    fn default() -> DrainPolicy {
        DrainPolicy {
            idle_seconds: 5,
            timeout_seconds: 60,
        }
    }
}

/// Why a live change was refused. Messages never contain key material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveError(pub String);

impl std::fmt::Display for LiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LiveError {}

fn err<T>(msg: impl Into<String>) -> Result<T, LiveError> {
    Err(LiveError(msg.into()))
}

/// Events kept for `ctl status`.
const RECENT_EVENTS: usize = 32;

fn hex_spi(spi: u32) -> String {
    format!("{spi:#010x}")
}

struct OutboundSlot {
    sa: SharedOutbound,
    spi: u32,
    created: u64,
    soft_reported: bool,
}

struct Drain {
    since: u64,
    /// Packet count at the last tick, and when it last changed.
    last_packets: u64,
    active_at: u64,
    /// The per-CPU pair it served before its rekey (0: the tunnel's own),
    /// kept as its lane while it drains, so that what the peer still
    /// sends on it is decrypted where that pair's traffic was (the
    /// handoff, `Tables::inbound_lane`). (Its pair number as of the
    /// rekey: a pair removed since shifts the later ones, which only
    /// moves where it is decrypted.)
    pair: u32,
}

impl Drain {
    /// Draining from `now`, with `packets` received so far, for pair
    /// `pair`.
    fn from(now: u64, packets: u64, pair: u32) -> Drain {
        Drain {
            since: now,
            last_packets: packets,
            active_at: now,
            pair,
        }
    }
}

struct InboundSlot {
    sa: SharedInbound,
    /// Its counters (kept after the SA is gone).
    counters: Arc<InboundCounters>,
    spi: u32,
    created: u64,
    soft_reported: bool,
    /// `Some` once a rekey replaced it.
    drain: Option<Drain>,
}

struct LiveTunnel {
    id: TunnelId,
    config: Tunnel,
    /// Counters of this tunnel's SAs that are gone (replaced, drained,
    /// expired) and that no snapshot holds any more, so tunnel totals never
    /// go backwards: [out, in].
    retired: [SaStats; 2],
    /// Replaced or removed SAs that a worker may still be using (an older
    /// snapshot holds them): their counters still move, so totals read them
    /// live until the last snapshot lets go ([`Self::settle`]).
    retiring_out: Vec<SharedOutbound>,
    retiring_in: Vec<(SharedInbound, Arc<InboundCounters>)>,
    outbound: Option<OutboundSlot>,
    /// At most one not draining (the current one), which comes first.
    inbound: Vec<InboundSlot>,
    /// A trap ([`SaManager::add_trap`]): the policy without SAs, until
    /// `add_tunnel` of the same name replaces it.
    trap: bool,
    /// RFC 9611 per-CPU SA pairs besides the tunnel's own (IKE
    /// `per_cpu_sas`): same selectors, each with its own sequence
    /// counter; worker `w` encrypts with pair `w % n` (the tunnel's own
    /// outbound SA being pair 0). A rekey of one drains its old inbound
    /// SA in `inbound`.
    extra: Vec<ExtraPair>,
}

/// One per-CPU SA pair of a tunnel ([`SaManager::add_extra_pair`]).
struct ExtraPair {
    /// `None` after it hard-expired.
    out: Option<OutboundSlot>,
    inbound: InboundSlot,
}

impl LiveTunnel {
    fn current_inbound(&self) -> Option<&InboundSlot> {
        self.inbound.iter().find(|s| s.drain.is_none())
    }

    /// Moves the counters of retiring SAs that only this list still holds
    /// (every snapshot with them reclaimed) into `retired`: final now.
    fn settle(&mut self) {
        let retired = &mut self.retired;
        self.retiring_out.retain(|sa| {
            let held = Arc::strong_count(sa) > 1;
            if !held {
                add_stats(&mut retired[0], sa.stats());
            }
            held
        });
        self.retiring_in.retain(|(sa, counters)| {
            let held = Arc::strong_count(sa) > 1;
            if !held {
                add_stats(&mut retired[1], counters.stats());
            }
            held
        });
    }
}

/// An SPD entry in consult order.
enum Entry {
    Policy(Rule),
    Tunnel(String),
    /// A deleted tunnel's selectors, discarding, while the default action
    /// is bypass (so its traffic is never sent in the clear).
    Tombstone(String, Rule),
}

/// Where the keys of this gateway's SAs are recorded: in the state
/// directory (persisted, with sequence numbers: `espgw run`), or only in
/// memory for this process (tests, tools). Either way a live change never
/// installs a key some SA of this gateway already used.
enum KeyBook {
    Persisted(Arc<SeqKeeper>),
    InMemory {
        /// Boxed: ring's HMAC key is large, and the persisted variant small.
        hasher: Box<KeyHasher>,
        seen: HashMap<KeyId, Record>,
        /// Why AEAD SAs must be refused (a run whose state directory is
        /// unusable: a restart could not know their sequence numbers).
        aead_refused: Option<String>,
    },
}

impl KeyBook {
    fn key_id(&self, sa: &SaConfig) -> KeyId {
        let (key, auth) = (sa.key.expose(), sa.auth_key.expose());
        match self {
            KeyBook::Persisted(k) => k.key_id(sa.suite, key, auth),
            KeyBook::InMemory { hasher, .. } => hasher.key_id(sa.suite, key, auth),
        }
    }

    fn record(&self, id: &KeyId) -> Option<Record> {
        match self {
            KeyBook::Persisted(k) => k.record(id),
            KeyBook::InMemory { seen, .. } => seen.get(id).cloned(),
        }
    }

    /// Refuses a key recorded for another SA (at start-up) or at all (live),
    /// before anything is built: a rekey checks both keys first.
    fn check(&self, sa: &SaConfig, dir: SaDir, admission: Admission) -> Result<(), KeyRefused> {
        let record = self.record(&self.key_id(sa));
        crate::state::admit(record.as_ref(), dir, sa.spi, admission).map(|_| ())
    }

    fn outbound(
        &mut self,
        tunnel: &str,
        cfg: &SaConfig,
        now: u64,
        admission: Admission,
    ) -> Result<SharedOutbound, LiveError> {
        let sa = OutboundSa::new(cfg, now)
            .map_err(|e| LiveError(format!("tunnel {tunnel:?} out: {e}")))?;
        self.check(cfg, SaDir::Out, admission)
            .map_err(|e| refused(tunnel, SaDir::Out, e))?;
        let id = self.key_id(cfg);
        match self {
            KeyBook::Persisted(keeper) => match keeper.admit_outbound(tunnel, id, sa, admission) {
                Ok(sa) => Ok(sa),
                Err(KeyRefused::State(e)) if !cfg.suite.is_aead() => {
                    // CBC + HMAC does not fail open on a repeated sequence
                    // number the way an AEAD nonce does: run unpersisted,
                    // loudly (a peer that kept its window will count the
                    // repeats as replays after a restart).
                    warn!(tunnel, dir = "out", error = %e, "SA state cannot be written: this CBC SA starts at sequence 1 after every restart");
                    Ok(Arc::new(OutboundSa::new(cfg, now).map_err(|e| {
                        LiveError(format!("tunnel {tunnel:?} out: {e}"))
                    })?))
                }
                Err(e) => Err(refused(tunnel, SaDir::Out, e)),
            },
            KeyBook::InMemory {
                seen, aead_refused, ..
            } => {
                if let Some(why) = aead_refused.as_ref().filter(|_| cfg.suite.is_aead()) {
                    return err(format!("tunnel {tunnel:?} out: {why}"));
                }
                seen.insert(id, record(tunnel, SaDir::Out, cfg.spi));
                Ok(Arc::new(sa))
            }
        }
    }

    fn inbound(
        &mut self,
        tunnel: &str,
        cfg: &SaConfig,
        now: u64,
        admission: Admission,
    ) -> Result<SharedInbound, LiveError> {
        let sa = InboundSa::new(cfg, now)
            .map_err(|e| LiveError(format!("tunnel {tunnel:?} in: {e}")))?;
        self.check(cfg, SaDir::In, admission)
            .map_err(|e| refused(tunnel, SaDir::In, e))?;
        let id = self.key_id(cfg);
        match self {
            KeyBook::Persisted(keeper) => match keeper.admit_inbound(tunnel, id, sa, admission) {
                Ok(sa) => Ok(sa),
                Err(KeyRefused::State(e)) if !cfg.suite.is_aead() => {
                    warn!(tunnel, dir = "in", error = %e, "SA state cannot be written: this CBC SA's replay window starts empty after every restart");
                    Ok(Arc::new(InboundSa::new(cfg, now).map_err(|e| {
                        LiveError(format!("tunnel {tunnel:?} in: {e}"))
                    })?))
                }
                Err(e) => Err(refused(tunnel, SaDir::In, e)),
            },
            KeyBook::InMemory {
                seen, aead_refused, ..
            } => {
                if let Some(why) = aead_refused.as_ref().filter(|_| cfg.suite.is_aead()) {
                    return err(format!("tunnel {tunnel:?} in: {why}"));
                }
                seen.insert(id, record(tunnel, SaDir::In, cfg.spi));
                Ok(Arc::new(sa))
            }
        }
    }
}

fn record(tunnel: &str, dir: SaDir, spi: u32) -> Record {
    Record {
        dir,
        spi,
        tunnel: tunnel.to_string(),
        value: 0,
    }
}

fn refused(tunnel: &str, dir: SaDir, e: KeyRefused) -> LiveError {
    LiveError(format!("tunnel {tunnel:?} {}: {e}", dir.name()))
}

/// The out and in keys of one tunnel must differ: the peer sends under
/// its out key what we receive under our in key, so equal keys would have
/// both ends counting nonces from 1 under one key.
fn check_distinct_keys(tunnel: &str, out: &SaKeys, inbound: &SaKeys) -> Result<(), LiveError> {
    if out.key.expose() == inbound.key.expose() {
        return err(format!(
            "tunnel {tunnel:?}: the in key equals the out key; use two different random keys"
        ));
    }
    Ok(())
}

/// See the module documentation.
pub struct SaManager<T> {
    gateway: String,
    publisher: Publisher<T>,
    builder: SnapshotBuilder<T>,
    tunnels: Vec<LiveTunnel>,
    entries: Vec<Entry>,
    default_action: Action,
    rules: Vec<Rule>,
    spd: Arc<Spd>,
    drain: DrainPolicy,
    counts: EventCounts,
    recent: VecDeque<Event>,
    started: u64,
    keys: KeyBook,
    /// How long a change a peer acts on next (a new inbound SA, a new
    /// tunnel) waits for every worker to take the new snapshot before the
    /// call returns; zero: no wait ([`Self::set_publish_wait`]).
    publish_wait: std::time::Duration,
}

impl SaManager<Tables> {
    /// A manager publishing [`Tables`] (the workers' snapshot) itself, not
    /// in an `Arc`: for tests and tools that read snapshots through a
    /// [`Reader`](crate::tables::Reader) only.
    pub fn with_control_tables(config: &Config, now: u64) -> Result<Self, LiveError> {
        let mtu = usize::from(config.dataplane.mtu);
        SaManager::new(config, now, Box::new(move |v| Tables::from_view(v, mtu)))
    }
}

impl<T: Send + Sync + 'static> SaManager<T> {
    /// Creates the SAs of every config tunnel (tunnel id = config index)
    /// and publishes the first snapshot built by `builder`.
    /// Keys are recorded in memory only: see [`Self::with_state`].
    pub fn new(config: &Config, now: u64, builder: SnapshotBuilder<T>) -> Result<Self, LiveError> {
        Self::with_state(config, now, builder, None)
    }

    /// Like [`Self::new`], with the SAs' sequence numbers and keys
    /// persisted by `keeper` (what `espgw run` does): each SA continues
    /// where the same SA stopped, and a key recorded for another SA is
    /// refused (crate::state).
    pub fn with_state(
        config: &Config,
        now: u64,
        builder: SnapshotBuilder<T>,
        keeper: Option<Arc<SeqKeeper>>,
    ) -> Result<Self, LiveError> {
        let mut keys = match keeper {
            Some(k) => KeyBook::Persisted(k),
            None => KeyBook::InMemory {
                hasher: Box::new(KeyHasher::ephemeral()),
                seen: HashMap::new(),
                aead_refused: None,
            },
        };
        let mut tunnels = Vec::with_capacity(config.tunnels.len());
        for (i, t) in config.tunnels.iter().enumerate() {
            tunnels.push(new_tunnel(
                &mut keys,
                TunnelId(i as u32),
                t.clone(),
                now,
                Admission::Startup,
            )?);
        }
        let mut entries = Vec::new();
        for e in &config.spd {
            entries.push(match *e {
                SpdEntry::Tunnel(i) => Entry::Tunnel(config.tunnels[i].name.clone()),
                SpdEntry::Policy(i) => Entry::Policy(rules::policy_rule(&config.policies[i])),
            });
        }
        let default_action = rules::action(config.default_action);
        let mut builder = builder;
        let rules = compile_rules(&entries, &tunnels);
        let spd = Arc::new(Spd::new(&rules, default_action));
        let first = builder(&view(&spd, &rules, &tunnels));
        let mut manager = SaManager {
            gateway: config.gateway.name.clone(),
            publisher: Publisher::new(Arc::new(first)),
            builder,
            tunnels: Vec::new(),
            entries,
            default_action,
            rules,
            spd,
            drain: DrainPolicy::default(),
            counts: EventCounts::default(),
            recent: VecDeque::new(),
            started: now,
            keys,
            publish_wait: std::time::Duration::ZERO,
        };
        for t in &tunnels {
            manager.log_up(t, now);
        }
        manager.tunnels = tunnels;
        Ok(manager)
    }

    /// From now on, refuses AEAD SAs (live `sa add` / `sa rekey`) with
    /// `why`: for a gateway without a usable state directory, where such an
    /// SA would start at sequence 1 again after a restart.
    pub fn refuse_aead_without_state(&mut self, why: String) {
        if let KeyBook::InMemory { aead_refused, .. } = &mut self.keys {
            *aead_refused = Some(why);
        }
    }

    /// Makes `install_inbound` (rekey step 1) and `add_tunnel` return only
    /// once every worker uses the new snapshot, or after `wait` with a
    /// warning: a keying daemon (or `espgw ctl`) that tells the peer to
    /// switch right after would otherwise race the workers, and the peer's
    /// first packets under the new SPI would be `unknown_spi` drops.
    /// `espgw run` sets one second.
    pub fn set_publish_wait(&mut self, wait: std::time::Duration) {
        self.publish_wait = wait;
    }

    /// Waits per [`Self::set_publish_wait`].
    fn wait_for_workers(&mut self, what: &str) {
        if self.publish_wait.is_zero() {
            return;
        }
        if !self.publisher.synchronize(self.publish_wait) {
            warn!(change = what, wait_ms = self.publish_wait.as_millis() as u64, "not every worker took the new tables in time; the change is published and takes effect when they do");
        }
    }

    pub fn set_drain_policy(&mut self, drain: DrainPolicy) {
        self.drain = drain;
    }

    pub fn gateway(&self) -> &str {
        &self.gateway
    }

    /// A reader for one worker (move it to the worker's thread).
    pub fn reader(&self) -> Reader<T> {
        self.publisher.reader()
    }

    /// A watcher of the snapshots: not a reader, never waited for.
    pub fn watcher(&self) -> Watcher<T> {
        self.publisher.watcher()
    }

    /// The snapshot published last.
    pub fn current(&self) -> &Arc<T> {
        self.publisher.current()
    }

    pub fn generation(&self) -> Generation {
        self.publisher.generation()
    }

    /// Replaced snapshots some reader may still hold.
    pub fn pending_snapshots(&self) -> usize {
        self.publisher.pending()
    }

    pub fn events(&self) -> EventCounts {
        self.counts
    }

    /// The settings of tunnel `name` (its config keys are those it was
    /// created with).
    pub fn tunnel(&self, name: &str) -> Option<&Tunnel> {
        self.find(name).map(|i| &self.tunnels[i].config)
    }

    /// Tunnel names in SPD order.
    pub fn tunnel_names(&self) -> Vec<String> {
        self.tunnels.iter().map(|t| t.config.name.clone()).collect()
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.tunnels.iter().position(|t| t.config.name == name)
    }

    fn find_or_err(&self, name: &str) -> Result<usize, LiveError> {
        self.find(name)
            .ok_or_else(|| LiveError(format!("no tunnel named {name:?}")))
    }

    /// The tunnel whose current or draining SA uses `spi` (either direction).
    pub fn tunnel_by_spi(&self, spi: u32) -> Option<&str> {
        self.tunnels
            .iter()
            .find(|t| {
                t.outbound.as_ref().is_some_and(|o| o.spi == spi)
                    || t.inbound.iter().any(|i| i.spi == spi)
                    || t.extra.iter().any(|x| {
                        x.inbound.spi == spi || x.out.as_ref().is_some_and(|o| o.spi == spi)
                    })
            })
            .map(|t| t.config.name.as_str())
    }

    /// Refuses an inbound SPI some SA already receives on. By SPI alone,
    /// whatever the local address: the data plane finds inbound SAs by SPI
    /// (as the config reader requires), so a second SA with the same SPI
    /// would take the first one's packets.
    fn check_inbound_spi(&self, spi: u32) -> Result<(), LiveError> {
        if spi < 256 {
            return err(format!("SPI {} is reserved (0..=255)", hex_spi(spi)));
        }
        let clash = self.tunnels.iter().find(|t| {
            t.inbound.iter().any(|i| i.spi == spi) || t.extra.iter().any(|x| x.inbound.spi == spi)
        });
        match clash {
            Some(t) => err(format!(
                "inbound SPI {} is already used by tunnel {:?}",
                hex_spi(spi),
                t.config.name
            )),
            None => Ok(()),
        }
    }

    /// Refuses an outbound SPI another of our SAs already sends to `remote`.
    fn check_outbound_spi(&self, spi: u32, remote: IpAddr) -> Result<(), LiveError> {
        if spi < 256 {
            return err(format!("SPI {} is reserved (0..=255)", hex_spi(spi)));
        }
        let clash = self.tunnels.iter().find(|t| {
            t.config.remote == remote
                && (t.outbound.as_ref().is_some_and(|o| o.spi == spi)
                    || t.extra
                        .iter()
                        .any(|x| x.out.as_ref().is_some_and(|o| o.spi == spi)))
        });
        match clash {
            Some(t) => err(format!(
                "outbound SPI {} to {remote} is already used by tunnel {:?}",
                hex_spi(spi),
                t.config.name
            )),
            None => Ok(()),
        }
    }

    /// Adds a tunnel (SA pair plus SPD rule) and publishes. Its rule comes
    /// after every existing rule of the same priority. A trap of the same
    /// name ([`Self::add_trap`]) is replaced in place, in one publish (its
    /// traffic goes from `acquire` drops straight to the new SAs).
    pub fn add_tunnel(&mut self, tunnel: Tunnel, now: u64) -> Result<(), LiveError> {
        let trap = self.find(&tunnel.name).filter(|&i| self.tunnels[i].trap);
        if self.find(&tunnel.name).is_some() && trap.is_none() {
            return err(format!("tunnel {:?} already exists", tunnel.name));
        }
        self.check_inbound_spi(tunnel.inbound.spi)?;
        self.check_outbound_spi(tunnel.outbound.spi, tunnel.remote)?;
        check_distinct_keys(&tunnel.name, &tunnel.outbound, &tunnel.inbound)?;
        let id = match trap {
            Some(i) => self.tunnels[i].id,
            None => self.free_id(),
        };
        let live = new_tunnel(&mut self.keys, id, tunnel, now, Admission::Live)?;
        let name = live.config.name.clone();
        if let Some(i) = trap {
            // Its SPD entry stays where it is.
            self.tunnels.remove(i);
        } else {
            // A tombstone of an earlier tunnel of this name gives way.
            self.entries
                .retain(|e| !matches!(e, Entry::Tombstone(n, _) if *n == name));
            self.entries.push(Entry::Tunnel(name));
        }
        self.log_up(&live, now);
        self.tunnels.push(live);
        self.counts.tunnels_added += 1;
        self.recompile();
        self.publish();
        self.wait_for_workers("tunnel added");
        Ok(())
    }

    /// Adds a trap: the SPD protects `tunnel`'s selectors into it, but it
    /// has no SAs (its keys are not used), so the workers drop its
    /// traffic as `acquire` and raise acquires (IKE `start_action =
    /// "trap"`). [`Self::add_tunnel`] of the same name replaces it;
    /// [`Self::delete_tunnel`] removes it. Publishes.
    pub fn add_trap(&mut self, tunnel: Tunnel, now: u64) -> Result<(), LiveError> {
        if self.find(&tunnel.name).is_some() {
            return err(format!("tunnel {:?} already exists", tunnel.name));
        }
        let name = tunnel.name.clone();
        let live = LiveTunnel {
            id: self.free_id(),
            config: tunnel,
            retired: [SaStats::default(); 2],
            retiring_out: Vec::new(),
            retiring_in: Vec::new(),
            outbound: None,
            inbound: Vec::new(),
            trap: true,
            extra: Vec::new(),
        };
        self.entries
            .retain(|e| !matches!(e, Entry::Tombstone(n, _) if *n == name));
        self.entries.push(Entry::Tunnel(name.clone()));
        info!(tunnel = %name, "trap installed: its traffic raises an acquire and is dropped until SAs are negotiated");
        self.event(now, "trap", &name, None, None);
        self.tunnels.push(live);
        self.recompile();
        self.publish();
        Ok(())
    }

    /// True when tunnel `name` is a trap without SAs.
    pub fn is_trap(&self, name: &str) -> bool {
        self.find(name).is_some_and(|i| self.tunnels[i].trap)
    }

    /// The name of the tunnel with id `id` (what an acquire from a worker
    /// names).
    pub fn tunnel_name(&self, id: TunnelId) -> Option<&str> {
        self.tunnels
            .iter()
            .find(|t| t.id == id)
            .map(|t| t.config.name.as_str())
    }

    /// The lowest id no tunnel uses (keeps the dense outbound table small).
    fn free_id(&self) -> TunnelId {
        let mut used: Vec<u32> = self.tunnels.iter().map(|t| t.id.0).collect();
        used.sort_unstable();
        let mut id = 0;
        for u in used {
            if u != id {
                break;
            }
            id += 1;
        }
        TunnelId(id)
    }

    /// Deletes a tunnel and publishes. Its traffic then falls to the
    /// remaining rules and the default action; when that is bypass, a
    /// discard rule with its selectors stays in its place, so the traffic
    /// is never sent in the clear.
    pub fn delete_tunnel(&mut self, name: &str, now: u64) -> Result<(), LiveError> {
        let i = self.find_or_err(name)?;
        let gone = self.tunnels.remove(i);
        let keep_discarding = self.default_action == Action::Bypass;
        for e in &mut self.entries {
            if matches!(e, Entry::Tunnel(n) if n == name) {
                *e = Entry::Tombstone(
                    name.to_string(),
                    rules::tunnel_selector_rule(&gone.config, Action::Discard),
                );
            }
        }
        if !keep_discarding {
            self.entries
                .retain(|e| !matches!(e, Entry::Tombstone(n, _) if n == name));
        }
        info!(tunnel = %name, "tunnel deleted: its SAs are removed, its traffic is discarded");
        self.event(now, "tunnel-deleted", name, None, None);
        self.counts.tunnels_deleted += 1;
        self.recompile();
        self.publish();
        Ok(())
    }

    /// Rekey step 1 (make): installs a new inbound SA next to the current
    /// one and publishes. The old one keeps decrypting (draining) until
    /// idle for the drain time or the drain timeout; see [`Self::tick`].
    pub fn install_inbound(&mut self, name: &str, keys: SaKeys, now: u64) -> Result<(), LiveError> {
        let (i, slot) = self.new_inbound_slot(name, keys, now)?;
        let spi = slot.spi;
        let t = &mut self.tunnels[i];
        let mut old_spis = Vec::new();
        for slot in t.inbound.iter_mut().filter(|s| s.drain.is_none()) {
            slot.drain = Some(Drain::from(now, slot.counters.stats().packets, 0));
            old_spis.push(slot.spi);
        }
        t.inbound.insert(0, slot);
        info!(tunnel = %name, dir = "in", spi = %hex_spi(spi), draining = ?old_spis.iter().map(|s| hex_spi(*s)).collect::<Vec<_>>(), "rekey: new inbound SA installed, old one draining");
        self.event(now, "rekey-in", name, Some(Dir::In), Some(spi));
        self.counts.rekeys_inbound += 1;
        self.publish();
        self.wait_for_workers("new inbound SA");
        Ok(())
    }

    /// A new inbound SA of tunnel `name` (its SPI unused, its keys
    /// admitted), not installed yet: the tunnel's index and the slot.
    fn new_inbound_slot(
        &mut self,
        name: &str,
        keys: SaKeys,
        now: u64,
    ) -> Result<(usize, InboundSlot), LiveError> {
        let i = self.find_or_err(name)?;
        self.check_inbound_spi(keys.spi)?;
        let mut config = self.tunnels[i].config.clone();
        config.inbound = keys;
        let sa = self
            .keys
            .inbound(name, &config.inbound_sa(), now, Admission::Live)?;
        let slot = InboundSlot {
            counters: counters_of(&sa),
            sa,
            spi: config.inbound.spi,
            created: now,
            soft_reported: false,
            drain: None,
        };
        Ok((i, slot))
    }

    /// Installs an inbound SA that starts out draining, beside the
    /// tunnel's current one, which stays current: for a CHILD_SA the peer
    /// may send on for a moment but that will not carry the tunnel (its
    /// IKE SA lost to another set up at the same time, docs/ike.md). It
    /// goes as any draining SA does, or when deleted.
    pub fn install_inbound_draining(
        &mut self,
        name: &str,
        keys: SaKeys,
        now: u64,
    ) -> Result<(), LiveError> {
        let (i, mut slot) = self.new_inbound_slot(name, keys, now)?;
        let spi = slot.spi;
        slot.drain = Some(Drain::from(now, 0, 0));
        self.tunnels[i].inbound.push(slot);
        info!(tunnel = %name, dir = "in", spi = %hex_spi(spi), "inbound SA installed draining (the current one stays)");
        self.event(now, "draining-in", name, Some(Dir::In), Some(spi));
        self.publish();
        self.wait_for_workers("draining inbound SA");
        Ok(())
    }

    /// A tunnel in UDP whose peer's NAT now maps its port 4500 to
    /// another (the IKE driver saw its messages come from there): the
    /// outbound SAs made from now on (the next switch, a rekey's) send to
    /// `encap`'s port. The SAs in use keep theirs: an SA's outer header is
    /// fixed with its sequence counter, and a second SA on the same keys
    /// would start its numbers again (nonce reuse). Nothing for a tunnel
    /// not in UDP or not there.
    pub fn follow_peer_port(&mut self, name: &str, encap: EncapMode) {
        let Some(i) = self.find(name) else {
            return;
        };
        let config = &mut self.tunnels[i].config;
        if let (EncapMode::Udp { peer_port: old }, EncapMode::Udp { peer_port: new }) =
            (config.encap, encap)
        {
            if old != new {
                info!(tunnel = %name, old_port = old, new_port = new, "the peer's NAT maps its port 4500 to another: the next outbound SA follows");
                config.encap = encap;
            }
        }
    }

    /// Rekey step 2 (switch): the tunnel encrypts with a new outbound SA
    /// from the next snapshot on. The peer must already accept it (its
    /// step 1 done).
    pub fn switch_outbound(&mut self, name: &str, keys: SaKeys, now: u64) -> Result<(), LiveError> {
        let i = self.find_or_err(name)?;
        let remote = self.tunnels[i].config.remote;
        self.check_outbound_spi(keys.spi, remote)?;
        let mut config = self.tunnels[i].config.clone();
        config.outbound = keys;
        let sa = self
            .keys
            .outbound(name, &config.outbound_sa(), now, Admission::Live)?;
        let spi = config.outbound.spi;
        let t = &mut self.tunnels[i];
        let old = t.outbound.replace(OutboundSlot {
            sa,
            spi,
            created: now,
            soft_reported: false,
        });
        if let Some(o) = &old {
            t.retiring_out.push(Arc::clone(&o.sa));
        }
        let old_spi = old.map(|o| hex_spi(o.spi));
        info!(tunnel = %name, dir = "out", spi = %hex_spi(spi), old_spi = ?old_spi, "rekey: outbound switched to new SA");
        self.event(now, "rekey-out", name, Some(Dir::Out), Some(spi));
        self.counts.rekeys_outbound += 1;
        self.publish();
        Ok(())
    }

    /// A whole local rekey, make-before-break: the new inbound SA (if
    /// given) is installed and published before the outbound SA (if
    /// given) switches. Between two gateways, a keying daemon should run
    /// step 1 on both peers before step 2 on either (`sa rekey` with only
    /// `in`, then with only `out`).
    pub fn rekey(
        &mut self,
        name: &str,
        outbound: Option<SaKeys>,
        inbound: Option<SaKeys>,
        now: u64,
    ) -> Result<(), LiveError> {
        let i = self.find_or_err(name)?;
        if outbound.is_none() && inbound.is_none() {
            return err("rekey needs new keys for out, in, or both");
        }
        // Check both before changing anything, so a bad `out` does not
        // leave a half-done rekey behind.
        let mut config = self.tunnels[i].config.clone();
        if let (Some(o), Some(i)) = (&outbound, &inbound) {
            check_distinct_keys(name, o, i)?;
        }
        if let Some(keys) = &inbound {
            self.check_inbound_spi(keys.spi)?;
            config.inbound = keys.clone();
            let sa = config.inbound_sa();
            InboundSa::new(&sa, now).map_err(|e| LiveError(format!("tunnel {name:?} in: {e}")))?;
            self.keys
                .check(&sa, SaDir::In, Admission::Live)
                .map_err(|e| refused(name, SaDir::In, e))?;
        }
        if let Some(keys) = &outbound {
            self.check_outbound_spi(keys.spi, config.remote)?;
            config.outbound = keys.clone();
            let sa = config.outbound_sa();
            OutboundSa::new(&sa, now)
                .map_err(|e| LiveError(format!("tunnel {name:?} out: {e}")))?;
            self.keys
                .check(&sa, SaDir::Out, Admission::Live)
                .map_err(|e| refused(name, SaDir::Out, e))?;
        }
        if let Some(keys) = inbound {
            self.install_inbound(name, keys, now)?;
        }
        if let Some(keys) = outbound {
            self.switch_outbound(name, keys, now)?;
        }
        Ok(())
    }

    /// RFC 9611 per-CPU SAs: adds one more SA pair to tunnel `name` (same
    /// selectors, its own keys and sequence counter) and publishes; the
    /// workers then spread the tunnel's outbound traffic over its pairs
    /// (worker `w` on pair `w % n`), and the inbound SA decrypts into the
    /// tunnel like its own. Refused for a trap or a tunnel that does not
    /// exist.
    pub fn add_extra_pair(
        &mut self,
        name: &str,
        outbound: SaKeys,
        inbound: SaKeys,
        now: u64,
    ) -> Result<(), LiveError> {
        let i = self.find_or_err(name)?;
        if self.tunnels[i].trap {
            return err(format!("tunnel {name:?} is a trap without SAs"));
        }
        self.check_inbound_spi(inbound.spi)?;
        self.check_outbound_spi(outbound.spi, self.tunnels[i].config.remote)?;
        check_distinct_keys(name, &outbound, &inbound)?;
        let mut config = self.tunnels[i].config.clone();
        config.outbound = outbound;
        config.inbound = inbound;
        let (out_cfg, in_cfg) = (config.outbound_sa(), config.inbound_sa());
        self.keys
            .check(&out_cfg, SaDir::Out, Admission::Live)
            .map_err(|e| refused(name, SaDir::Out, e))?;
        let out = self.keys.outbound(name, &out_cfg, now, Admission::Live)?;
        let inb = self.keys.inbound(name, &in_cfg, now, Admission::Live)?;
        let (out_spi, in_spi) = (config.outbound.spi, config.inbound.spi);
        let t = &mut self.tunnels[i];
        t.extra.push(ExtraPair {
            out: Some(OutboundSlot {
                sa: out,
                spi: out_spi,
                created: now,
                soft_reported: false,
            }),
            inbound: InboundSlot {
                counters: counters_of(&inb),
                sa: inb,
                spi: in_spi,
                created: now,
                soft_reported: false,
                drain: None,
            },
        });
        let pairs = t.extra.len() + 1;
        info!(tunnel = %name, out_spi = %hex_spi(out_spi), in_spi = %hex_spi(in_spi), pairs, "per-CPU SA pair added");
        self.event(now, "sa-up", name, Some(Dir::Out), Some(out_spi));
        self.event(now, "sa-up", name, Some(Dir::In), Some(in_spi));
        self.publish();
        self.wait_for_workers("per-CPU SA pair added");
        Ok(())
    }

    /// Rekey step 1 of a per-CPU pair (named by its current inbound SPI
    /// `old_in`): its new inbound SA replaces the old one, which drains
    /// (as after [`Self::install_inbound`]). Publishes.
    pub fn rekey_extra_inbound(
        &mut self,
        name: &str,
        old_in: u32,
        keys: SaKeys,
        now: u64,
    ) -> Result<(), LiveError> {
        let i = self.find_or_err(name)?;
        let x = self.extra_index(i, old_in)?;
        self.check_inbound_spi(keys.spi)?;
        let mut config = self.tunnels[i].config.clone();
        config.inbound = keys;
        let sa = self
            .keys
            .inbound(name, &config.inbound_sa(), now, Admission::Live)?;
        let spi = config.inbound.spi;
        let t = &mut self.tunnels[i];
        let mut old = std::mem::replace(
            &mut t.extra[x].inbound,
            InboundSlot {
                counters: counters_of(&sa),
                sa,
                spi,
                created: now,
                soft_reported: false,
                drain: None,
            },
        );
        // (`extra` pairs are numbered from 1, as in the view.)
        old.drain = Some(Drain::from(now, old.counters.stats().packets, x as u32 + 1));
        t.inbound.push(old);
        info!(tunnel = %name, dir = "in", spi = %hex_spi(spi), old_spi = %hex_spi(old_in), "rekey of a per-CPU SA pair: new inbound SA installed, old one draining");
        self.event(now, "rekey-in", name, Some(Dir::In), Some(spi));
        self.counts.rekeys_inbound += 1;
        self.publish();
        self.wait_for_workers("new inbound SA of a per-CPU pair");
        Ok(())
    }

    /// Rekey step 2 of a per-CPU pair (named by its current inbound SPI
    /// `in_spi`): it encrypts with the new outbound SA from the next
    /// snapshot on. Publishes.
    pub fn switch_extra_outbound(
        &mut self,
        name: &str,
        in_spi: u32,
        keys: SaKeys,
        now: u64,
    ) -> Result<(), LiveError> {
        let i = self.find_or_err(name)?;
        let x = self.extra_index(i, in_spi)?;
        let remote = self.tunnels[i].config.remote;
        self.check_outbound_spi(keys.spi, remote)?;
        let mut config = self.tunnels[i].config.clone();
        config.outbound = keys;
        let sa = self
            .keys
            .outbound(name, &config.outbound_sa(), now, Admission::Live)?;
        let spi = config.outbound.spi;
        let t = &mut self.tunnels[i];
        let old = t.extra[x].out.replace(OutboundSlot {
            sa,
            spi,
            created: now,
            soft_reported: false,
        });
        if let Some(o) = &old {
            t.retiring_out.push(Arc::clone(&o.sa));
        }
        info!(tunnel = %name, dir = "out", spi = %hex_spi(spi), old_spi = ?old.map(|o| hex_spi(o.spi)), "rekey of a per-CPU SA pair: outbound switched");
        self.event(now, "rekey-out", name, Some(Dir::Out), Some(spi));
        self.counts.rekeys_outbound += 1;
        self.publish();
        Ok(())
    }

    /// Removes the per-CPU pair whose current inbound SPI is `in_spi`
    /// (its CHILD_SA was deleted); the tunnel and its other pairs stay.
    /// Publishes.
    pub fn remove_extra_pair(
        &mut self,
        name: &str,
        in_spi: u32,
        now: u64,
    ) -> Result<(), LiveError> {
        let i = self.find_or_err(name)?;
        let x = self.extra_index(i, in_spi)?;
        let t = &mut self.tunnels[i];
        let gone = t.extra.remove(x);
        if let Some(o) = &gone.out {
            t.retiring_out.push(Arc::clone(&o.sa));
        }
        t.retiring_in.push((
            Arc::clone(&gone.inbound.sa),
            Arc::clone(&gone.inbound.counters),
        ));
        info!(tunnel = %name, in_spi = %hex_spi(in_spi), pairs = t.extra.len() + 1, "per-CPU SA pair removed");
        self.event(now, "sa-removed", name, Some(Dir::In), Some(in_spi));
        self.publish();
        Ok(())
    }

    /// The per-CPU pairs of tunnel `name` as (outbound SPI, inbound SPI),
    /// the tunnel's own pair not included.
    pub fn extra_pairs(&self, name: &str) -> Vec<(Option<u32>, u32)> {
        self.find(name).map_or_else(Vec::new, |i| {
            self.tunnels[i]
                .extra
                .iter()
                .map(|x| (x.out.as_ref().map(|o| o.spi), x.inbound.spi))
                .collect()
        })
    }

    fn extra_index(&self, tunnel: usize, in_spi: u32) -> Result<usize, LiveError> {
        self.tunnels[tunnel]
            .extra
            .iter()
            .position(|x| x.inbound.spi == in_spi)
            .ok_or_else(|| {
                LiveError(format!(
                    "tunnel {:?} has no per-CPU SA pair with inbound SPI {}",
                    self.tunnels[tunnel].config.name,
                    hex_spi(in_spi)
                ))
            })
    }

    /// Undoes a rekey's step 1 for a keying daemon: the draining inbound
    /// SA `spi` becomes current again and the current one drains. For an
    /// IKE CHILD_SA rekey collision (RFC 7296 2.8.1), where the SA
    /// installed last is the one deleted and the one before it stays.
    pub fn reactivate_inbound(&mut self, name: &str, spi: u32, now: u64) -> Result<(), LiveError> {
        let i = self.find_or_err(name)?;
        let t = &mut self.tunnels[i];
        let Some(pos) = t.inbound.iter().position(|s| s.spi == spi) else {
            return err(format!(
                "tunnel {name:?} has no inbound SA {}",
                hex_spi(spi)
            ));
        };
        if t.inbound[pos].drain.is_none() {
            return Ok(());
        }
        for slot in t.inbound.iter_mut().filter(|s| s.drain.is_none()) {
            slot.drain = Some(Drain::from(now, slot.counters.stats().packets, 0));
        }
        let mut slot = t.inbound.remove(pos);
        slot.drain = None;
        t.inbound.insert(0, slot);
        info!(tunnel = %name, dir = "in", spi = %hex_spi(spi), "rekey undone: inbound SA current again");
        self.event(now, "reactivated-in", name, Some(Dir::In), Some(spi));
        self.publish();
        Ok(())
    }

    /// Once per control-loop tick (about a second): polls every SA's
    /// lifetime, raises soft-expiry events, removes hard-expired SAs and
    /// drained inbound SAs (one publish for all of it), and frees snapshots
    /// no worker holds any more.
    pub fn tick(&mut self, now: u64) {
        let mut changed = false;
        let mut events: Vec<(&'static str, String, Dir, u32)> = Vec::new();
        let drain = self.drain;
        for t in &mut self.tunnels {
            let name = &t.config.name;
            if let Some(out) = &mut t.outbound {
                let e = out.sa.expiry(now);
                if e.is_hard() {
                    warn!(tunnel = %name, dir = "out", spi = %hex_spi(out.spi), reason = %expiry_reason(e), "hard expiry: SA removed, tunnel traffic discarded until rekey");
                    events.push(("hard-expiry", name.clone(), Dir::Out, out.spi));
                    t.retiring_out.push(Arc::clone(&out.sa));
                    t.outbound = None;
                    changed = true;
                } else if e.is_soft() && !out.soft_reported {
                    out.soft_reported = true;
                    info!(tunnel = %name, dir = "out", spi = %hex_spi(out.spi), reason = %expiry_reason(e), "soft expiry: rekey due");
                    events.push(("soft-expiry", name.clone(), Dir::Out, out.spi));
                }
            }
            let mut keep = Vec::with_capacity(t.inbound.len());
            for mut slot in t.inbound.drain(..) {
                // The lifetime clock needs the SA itself (once a second);
                // the counters do not.
                let e = slot.sa.expiry(now);
                let stats = slot.counters.stats();
                let packets = stats.packets;
                if e.is_hard() {
                    t.retiring_in
                        .push((Arc::clone(&slot.sa), Arc::clone(&slot.counters)));
                    warn!(tunnel = %name, dir = "in", spi = %hex_spi(slot.spi), reason = %expiry_reason(e), "hard expiry: SA removed");
                    events.push(("hard-expiry", name.clone(), Dir::In, slot.spi));
                    changed = true;
                    continue;
                }
                if let Some(d) = &mut slot.drain {
                    if packets != d.last_packets {
                        d.last_packets = packets;
                        d.active_at = now;
                    }
                    let idle = now.saturating_sub(d.active_at) >= drain.idle_seconds;
                    let timed_out = now.saturating_sub(d.since) >= drain.timeout_seconds;
                    if idle || timed_out {
                        t.retiring_in
                            .push((Arc::clone(&slot.sa), Arc::clone(&slot.counters)));
                        info!(tunnel = %name, dir = "in", spi = %hex_spi(slot.spi), timed_out, "drained: old inbound SA removed");
                        events.push(("drained", name.clone(), Dir::In, slot.spi));
                        changed = true;
                        continue;
                    }
                } else if e.is_soft() && !slot.soft_reported {
                    slot.soft_reported = true;
                    info!(tunnel = %name, dir = "in", spi = %hex_spi(slot.spi), reason = %expiry_reason(e), "soft expiry: rekey due");
                    events.push(("soft-expiry", name.clone(), Dir::In, slot.spi));
                }
                keep.push(slot);
            }
            t.inbound = keep;
            // Per-CPU pairs: the same limits, pair by pair. A pair whose
            // inbound SA hard-expired goes as a whole.
            let mut pairs = Vec::with_capacity(t.extra.len());
            for mut x in t.extra.drain(..) {
                if let Some(out) = &mut x.out {
                    let e = out.sa.expiry(now);
                    if e.is_hard() {
                        warn!(tunnel = %name, dir = "out", spi = %hex_spi(out.spi), reason = %expiry_reason(e), "hard expiry of a per-CPU SA: removed");
                        events.push(("hard-expiry", name.clone(), Dir::Out, out.spi));
                        t.retiring_out.push(Arc::clone(&out.sa));
                        x.out = None;
                        changed = true;
                    } else if e.is_soft() && !out.soft_reported {
                        out.soft_reported = true;
                        events.push(("soft-expiry", name.clone(), Dir::Out, out.spi));
                    }
                }
                let slot = &mut x.inbound;
                let e = slot.sa.expiry(now);
                if e.is_hard() {
                    warn!(tunnel = %name, dir = "in", spi = %hex_spi(slot.spi), reason = %expiry_reason(e), "hard expiry of a per-CPU SA: pair removed");
                    events.push(("hard-expiry", name.clone(), Dir::In, slot.spi));
                    t.retiring_in
                        .push((Arc::clone(&slot.sa), Arc::clone(&slot.counters)));
                    if let Some(o) = x.out.take() {
                        t.retiring_out.push(o.sa);
                    }
                    changed = true;
                    continue;
                }
                if e.is_soft() && !slot.soft_reported {
                    slot.soft_reported = true;
                    events.push(("soft-expiry", name.clone(), Dir::In, slot.spi));
                }
                pairs.push(x);
            }
            t.extra = pairs;
        }
        for (kind, tunnel, dir, spi) in events {
            match kind {
                "hard-expiry" => self.counts.hard_expiries += 1,
                "soft-expiry" => self.counts.soft_expiries += 1,
                _ => self.counts.drained += 1,
            }
            self.event(now, kind, &tunnel, Some(dir), Some(spi));
        }
        if changed {
            self.publish();
        }
        self.publisher.reclaim();
        for t in &mut self.tunnels {
            t.settle();
        }
    }

    /// Packets inbound SA `spi` of tunnel `name` has decrypted so far
    /// (None: no such SA). One counter read, no list built.
    pub fn inbound_packets(&self, name: &str, spi: u32) -> Option<u64> {
        let t = &self.tunnels[self.find(name)?];
        t.inbound
            .iter()
            .chain(t.extra.iter().map(|x| &x.inbound))
            .find(|i| i.spi == spi)
            .map(|i| i.counters.stats().packets)
    }

    /// Every SA, tunnel by tunnel: outbound, then inbound (current first),
    /// then the tunnel's per-CPU pairs (RFC 9611).
    pub fn sa_list(&self, now: u64) -> Vec<SaInfo> {
        let mut out = Vec::new();
        for t in &self.tunnels {
            let c = &t.config;
            let outbound = |o: &OutboundSlot| {
                let state = if o.soft_reported || o.sa.expiry(now).is_soft() {
                    SaState::SoftExpired
                } else {
                    SaState::Active
                };
                SaInfo {
                    udp_port: o.sa.udp_remote_port(),
                    ..sa_info(c, Dir::Out, o.spi, o.created, state, o.sa.stats(), now)
                }
            };
            // No lock: a scrape must never wait for a worker's burst. Soft
            // expiry as of the last tick (once a second).
            let inbound = |i: &InboundSlot| {
                let state = match (&i.drain, i.soft_reported) {
                    (Some(_), _) => SaState::Draining,
                    (None, true) => SaState::SoftExpired,
                    (None, false) => SaState::Active,
                };
                sa_info(c, Dir::In, i.spi, i.created, state, i.counters.stats(), now)
            };
            out.extend(t.outbound.iter().map(outbound));
            out.extend(t.inbound.iter().map(inbound));
            for x in &t.extra {
                out.extend(x.out.iter().map(outbound));
                out.push(inbound(&x.inbound));
            }
        }
        out
    }

    /// One line per tunnel.
    pub fn tunnel_status(&self) -> Vec<TunnelStatus> {
        self.tunnels
            .iter()
            .map(|t| TunnelStatus {
                name: t.config.name.clone(),
                local: t.config.local.to_string(),
                remote: t.config.remote.to_string(),
                out_spi: t.outbound.as_ref().map(|o| o.spi),
                in_spi: t.current_inbound().map(|i| i.spi),
                draining: t.inbound.iter().filter(|i| i.drain.is_some()).count(),
                soft_expired: t.outbound.as_ref().is_some_and(|o| o.soft_reported)
                    || t.inbound
                        .iter()
                        .any(|i| i.drain.is_none() && i.soft_reported),
            })
            .collect()
    }

    /// Per tunnel and direction: every packet its SAs carried or dropped,
    /// past SAs included (what a tunnel's counters should show).
    pub fn tunnel_totals(&self) -> Vec<TunnelTotals> {
        let mut out = Vec::with_capacity(self.tunnels.len() * 2);
        for t in &self.tunnels {
            let mut sums = t.retired;
            for sa in &t.retiring_out {
                add_stats(&mut sums[0], sa.stats());
            }
            for (_, counters) in &t.retiring_in {
                add_stats(&mut sums[1], counters.stats());
            }
            if let Some(o) = &t.outbound {
                add_stats(&mut sums[0], o.sa.stats());
            }
            for i in &t.inbound {
                add_stats(&mut sums[1], i.counters.stats());
            }
            for x in &t.extra {
                if let Some(o) = &x.out {
                    add_stats(&mut sums[0], o.sa.stats());
                }
                add_stats(&mut sums[1], x.inbound.counters.stats());
            }
            for (dir, s) in [(Dir::Out, sums[0]), (Dir::In, sums[1])] {
                out.push(TunnelTotals {
                    tunnel: t.config.name.clone(),
                    dir,
                    packets: s.packets,
                    bytes: s.bytes,
                    drops: drop_map(&s),
                });
            }
        }
        out
    }

    /// SAs that reached a soft lifetime and still carry traffic.
    pub fn soft_expired(&self) -> Vec<SaRef> {
        let mut out = Vec::new();
        for t in &self.tunnels {
            if let Some(o) = t.outbound.as_ref().filter(|o| o.soft_reported) {
                out.push(SaRef {
                    tunnel: t.config.name.clone(),
                    dir: Dir::Out,
                    spi: o.spi,
                });
            }
            for i in t
                .inbound
                .iter()
                .filter(|i| i.drain.is_none() && i.soft_reported)
            {
                out.push(SaRef {
                    tunnel: t.config.name.clone(),
                    dir: Dir::In,
                    spi: i.spi,
                });
            }
            for x in &t.extra {
                if let Some(o) = x.out.as_ref().filter(|o| o.soft_reported) {
                    out.push(SaRef {
                        tunnel: t.config.name.clone(),
                        dir: Dir::Out,
                        spi: o.spi,
                    });
                }
                if x.inbound.soft_reported {
                    out.push(SaRef {
                        tunnel: t.config.name.clone(),
                        dir: Dir::In,
                        spi: x.inbound.spi,
                    });
                }
            }
        }
        out
    }

    /// The latest state changes, oldest first.
    pub fn recent_events(&self) -> Vec<Event> {
        self.recent.iter().cloned().collect()
    }

    pub fn uptime(&self, now: u64) -> u64 {
        now.saturating_sub(self.started)
    }

    fn event(&mut self, at: u64, kind: &str, tunnel: &str, dir: Option<Dir>, spi: Option<u32>) {
        if self.recent.len() == RECENT_EVENTS {
            self.recent.pop_front();
        }
        self.recent.push_back(Event {
            at,
            kind: kind.to_string(),
            tunnel: tunnel.to_string(),
            dir,
            spi,
        });
    }

    fn log_up(&mut self, t: &LiveTunnel, now: u64) {
        let suite = t.config.suite.name();
        if let Some(o) = &t.outbound {
            info!(tunnel = %t.config.name, dir = "out", spi = %hex_spi(o.spi), suite, remote = %t.config.remote, "SA up");
            self.event(now, "sa-up", &t.config.name, Some(Dir::Out), Some(o.spi));
        }
        for i in &t.inbound {
            info!(tunnel = %t.config.name, dir = "in", spi = %hex_spi(i.spi), suite, local = %t.config.local, "SA up");
            self.event(now, "sa-up", &t.config.name, Some(Dir::In), Some(i.spi));
        }
    }

    fn recompile(&mut self) {
        self.rules = compile_rules(&self.entries, &self.tunnels);
        self.spd = Arc::new(Spd::new(&self.rules, self.default_action));
    }

    /// Builds and publishes a snapshot of the current state.
    fn publish(&mut self) {
        let next = (self.builder)(&view(&self.spd, &self.rules, &self.tunnels));
        self.publisher.publish(Arc::new(next));
        self.counts.publishes += 1;
        self.publisher.reclaim();
    }
}

/// An inbound SA's lock-free counters (taken once, when it is created).
fn counters_of(sa: &SharedInbound) -> Arc<InboundCounters> {
    sa.counters()
}

fn add_stats(acc: &mut SaStats, s: SaStats) {
    acc.packets += s.packets;
    acc.bytes += s.bytes;
    for (reason, n) in s.drops.iter() {
        acc.drops.add_n(reason, n);
    }
}

/// Drops by reason name, reasons that happened only.
fn drop_map(s: &SaStats) -> BTreeMap<String, u64> {
    s.drops
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| (r.name().to_string(), n))
        .collect()
}

fn expiry_reason(e: Expiry) -> String {
    let mut parts = Vec::new();
    for (flag, name) in [
        (Expiry::HARD_SECONDS, "hard seconds"),
        (Expiry::HARD_BYTES, "hard bytes"),
        (Expiry::HARD_PACKETS, "hard packets"),
        (Expiry::SEQUENCE_EXHAUSTED, "sequence numbers used up"),
        (Expiry::SOFT_SECONDS, "soft seconds"),
        (Expiry::SOFT_BYTES, "soft bytes"),
        (Expiry::SOFT_PACKETS, "soft packets"),
    ] {
        if e.contains(flag) {
            parts.push(name);
        }
    }
    parts.join(", ")
}

fn new_tunnel(
    keys: &mut KeyBook,
    id: TunnelId,
    config: Tunnel,
    now: u64,
    admission: Admission,
) -> Result<LiveTunnel, LiveError> {
    let name = &config.name;
    check_distinct_keys(name, &config.outbound, &config.inbound)?;
    // Both keys are checked before either is recorded, so a refused tunnel
    // leaves no record of its other key behind.
    let (out_cfg, in_cfg) = (config.outbound_sa(), config.inbound_sa());
    keys.check(&out_cfg, SaDir::Out, admission)
        .map_err(|e| refused(name, SaDir::Out, e))?;
    keys.check(&in_cfg, SaDir::In, admission)
        .map_err(|e| refused(name, SaDir::In, e))?;
    let out = keys.outbound(name, &out_cfg, now, admission)?;
    let inbound = keys.inbound(name, &in_cfg, now, admission)?;
    Ok(LiveTunnel {
        id,
        retired: [SaStats::default(); 2],
        retiring_out: Vec::new(),
        retiring_in: Vec::new(),
        outbound: Some(OutboundSlot {
            sa: out,
            spi: config.outbound.spi,
            created: now,
            soft_reported: false,
        }),
        inbound: vec![InboundSlot {
            counters: counters_of(&inbound),
            sa: inbound,
            spi: config.inbound.spi,
            created: now,
            soft_reported: false,
            drain: None,
        }],
        config,
        trap: false,
        extra: Vec::new(),
    })
}

fn compile_rules(entries: &[Entry], tunnels: &[LiveTunnel]) -> Vec<Rule> {
    // By name through a map: a scan per entry is quadratic (0.5 s at
    // 10,000 tunnels).
    let by_name: HashMap<&str, &LiveTunnel> = tunnels
        .iter()
        .map(|t| (t.config.name.as_str(), t))
        .collect();
    entries
        .iter()
        .filter_map(|e| match e {
            Entry::Policy(rule) | Entry::Tombstone(_, rule) => Some(rule.clone()),
            Entry::Tunnel(name) => by_name
                .get(name.as_str())
                .map(|t| rules::tunnel_rule(&t.config, t.id)),
        })
        .collect()
}

fn view<'a>(spd: &'a Arc<Spd>, rules: &'a [Rule], tunnels: &'a [LiveTunnel]) -> LiveView<'a> {
    LiveView {
        spd,
        rules,
        tunnels: tunnels
            .iter()
            .map(|t| TunnelView {
                id: t.id,
                tunnel: &t.config,
                outbound: t.outbound.as_ref().map(|o| &o.sa),
                extra_outbound: t
                    .extra
                    .iter()
                    .filter_map(|x| x.out.as_ref().map(|o| &o.sa))
                    .collect(),
                inbound: t
                    .inbound
                    .iter()
                    .map(|i| InboundView {
                        spi: i.spi,
                        sa: &i.sa,
                        draining: i.drain.is_some(),
                        pair: i.drain.as_ref().map_or(0, |d| d.pair),
                    })
                    .chain(t.extra.iter().zip(1..).map(|(x, pair)| InboundView {
                        spi: x.inbound.spi,
                        sa: &x.inbound.sa,
                        draining: false,
                        pair,
                    }))
                    .collect(),
                trap: t.trap,
            })
            .collect(),
    }
}

fn sa_info(
    t: &Tunnel,
    dir: Dir,
    spi: u32,
    created: u64,
    state: SaState,
    stats: SaStats,
    now: u64,
) -> SaInfo {
    let hard = &t.lifetime.hard;
    SaInfo {
        tunnel: t.name.clone(),
        dir,
        spi,
        suite: t.suite.name().to_string(),
        state,
        packets: stats.packets,
        bytes: stats.bytes,
        drops: drop_map(&stats),
        lifetime_left: LifetimeLeft {
            seconds: hard
                .seconds
                .map(|s| created.saturating_add(s).saturating_sub(now)),
            bytes: hard.bytes.map(|b| b.saturating_sub(stats.bytes)),
            packets: hard.packets.map(|p| p.saturating_sub(stats.packets)),
        },
        age_seconds: now.saturating_sub(created),
        udp_port: None,
    }
}

impl<T: Send + Sync + 'static> std::fmt::Debug for SaManager<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaManager")
            .field("gateway", &self.gateway)
            .field("tunnels", &self.tunnels.len())
            .field("generation", &self.publisher.generation())
            .finish_non_exhaustive()
    }
}
