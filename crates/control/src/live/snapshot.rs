//! What the manager hands to the code that builds the workers' snapshot,
//! and the one conversion into it.
//!
//! The manager owns the SAs (`Arc`s, so their sequence numbers, replay
//! windows and counters survive every table swap) and the policy; given a
//! [`LiveView`] of them, [`Tables::from_view`] builds the snapshot the
//! workers read ([`Tables`], in `crate::tables`). [`Tables::from_config`]
//! builds the same snapshot straight from a config (fresh SAs, tunnel id =
//! config index) for tests, benchmarks and `espgw check`. Both turn each
//! config `[[tunnel]]` ([`Tunnel`], the file's model) into its runtime
//! form with [`tunnel_entry`].

use std::sync::Arc;

use espgw_esp::{InboundSa, OutboundSa};

use crate::config::{self as cfg, Config, Tunnel};
use crate::tables::{
    LiveSa, MssLimits, Rule, SadBuilder, SharedInbound, SharedOutbound, Spd, Tables, TunnelEntry,
    TunnelId,
};

/// One inbound SA of a tunnel.
pub struct InboundView<'a> {
    pub spi: u32,
    pub sa: &'a SharedInbound,
    /// An old SA kept after a rekey until it drains; it still decrypts.
    pub draining: bool,
    /// Which SA pair of the tunnel it belongs to: 0 for the tunnel's own
    /// (current or draining), 1.. for RFC 9611 per-CPU extra pairs.
    pub pair: u32,
}

/// One tunnel as the workers should see it.
pub struct TunnelView<'a> {
    /// Stable for the tunnel's life; config tunnels have their config index.
    pub id: TunnelId,
    /// The tunnel's settings (addresses, selectors, suite). Its `outbound`
    /// and `inbound` keys are those the tunnel was created with, not
    /// necessarily the current ones: use the SAs below.
    pub tunnel: &'a Tunnel,
    /// `None` after the outbound SA hard-expired: the tunnel's traffic is
    /// discarded until a rekey installs a new one.
    pub outbound: Option<&'a SharedOutbound>,
    /// RFC 9611 per-CPU outbound SAs besides `outbound` (same selectors,
    /// each its own sequence counter); usually empty.
    pub extra_outbound: Vec<&'a SharedOutbound>,
    /// Current SA first (if it has not hard-expired), then draining ones.
    pub inbound: Vec<InboundView<'a>>,
    /// A trap: the policy without SAs (`SaManager::add_trap`).
    pub trap: bool,
}

/// Everything a snapshot is built from.
pub struct LiveView<'a> {
    /// The policy compiled from `rules`; recompiled only when tunnels are
    /// added or deleted, so a rekey republishes without recompiling.
    pub spd: &'a Arc<Spd>,
    /// The SPD rules in consult order ties (config order, then tunnels
    /// added at run time); `Protect` names [`TunnelView::id`]s.
    pub rules: &'a [Rule],
    pub tunnels: Vec<TunnelView<'a>>,
}

/// Builds the snapshot type `T` from a view. Called on the control thread
/// for every change; any `FnMut(&LiveView) -> T + Send` is one. The
/// gateway's is `Tables::from_view` (wrapped in an `Arc` by the data
/// plane, whose workers keep a reference across a burst).
pub type SnapshotBuilder<T> = Box<dyn for<'a> FnMut(&LiveView<'a>) -> T + Send>;

/// The runtime form of config tunnel `t` under `id`, whose outbound SA is
/// `out` (`None`: hard-expired) and whose outer MTU is `mtu`.
pub fn tunnel_entry(
    id: TunnelId,
    t: &Tunnel,
    out: Option<&SharedOutbound>,
    mtu: usize,
) -> TunnelEntry {
    TunnelEntry {
        id,
        name: t.name.clone(),
        local: t.local,
        remote: t.remote,
        port: t.port.0,
        local_ts: t.local_ts.clone(),
        remote_ts: t.remote_ts.clone(),
        udp_encap: t.encap.is_udp(),
        mss_clamp: t
            .mss_clamp
            .and_then(|c| mss_limits(c, out.map(|o| &**o), mtu)),
        out: out.cloned(),
        extra_out: Vec::new(),
        trap: false,
    }
}

/// The limits of `mss_clamp = clamp` on a tunnel whose outbound SA is
/// `out` and whose outer MTU is `mtu`. "auto" needs the SA (its suite,
/// encapsulation and outer family make the overhead): without one (it
/// hard-expired) there is nothing to clamp to, and the tunnel's outbound
/// traffic is dropped anyway.
pub fn mss_limits(clamp: cfg::MssClamp, out: Option<&OutboundSa>, mtu: usize) -> Option<MssLimits> {
    match clamp {
        cfg::MssClamp::Fixed(v) => Some(MssLimits::fixed(v)),
        cfg::MssClamp::Auto => out.map(|o| MssLimits::auto(o, mtu)),
    }
}

/// Why [`Tables::from_config`] could not build a snapshot.
#[derive(Debug)]
pub struct TablesError(pub String);

impl core::fmt::Display for TablesError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TablesError {}

impl Tables {
    /// The snapshot of the manager's live view; `mtu` is the ports' outer
    /// MTU (config `dataplane.mtu`), for `mss_clamp = "auto"`. Inbound SAs
    /// are mapped by (SPI, the tunnel's `local`), outbound ones by tunnel id.
    pub fn from_view(view: &LiveView, mtu: usize) -> Tables {
        let mut sad = SadBuilder::new();
        let mut tunnels = Vec::with_capacity(view.tunnels.len());
        for t in &view.tunnels {
            if let Some(out) = t.outbound {
                // Ids come from the manager, far below the limit; an error
                // here would only leave the tunnel without SA, i.e.
                // discarding.
                let _ = sad.set_outbound(t.id, Arc::new(LiveSa::Outbound(Arc::clone(out))));
            }
            // Lanes only where there is more than one pair to spread (a
            // draining SA keeps its pair's number, but a tunnel whose
            // extra pairs are all gone is not per-CPU any more).
            let per_cpu = t.inbound.iter().any(|i| !i.draining && i.pair != 0);
            for i in &t.inbound {
                // The manager refuses duplicate and reserved SPIs before
                // they get here.
                let sa = LiveSa::Inbound {
                    spi: i.spi,
                    tunnel: t.id,
                    draining: i.draining,
                    lane: per_cpu.then_some(i.pair),
                    sa: Arc::clone(i.sa),
                };
                let _ = sad.insert_inbound(i.spi, t.tunnel.local, Arc::new(sa));
            }
            let mut entry = tunnel_entry(t.id, t.tunnel, t.outbound, mtu);
            entry.trap = t.trap;
            entry.extra_out = t.extra_outbound.iter().map(|o| Arc::clone(o)).collect();
            tunnels.push(entry);
        }
        Tables::new(Arc::clone(view.spd), sad.build(), tunnels)
    }

    /// A snapshot straight from `config`, creating its SAs (tunnel id =
    /// config index); `now` (seconds of the run's clock) starts their
    /// lifetimes.
    pub fn from_config(config: &Config, now: u64) -> Result<Tables, TablesError> {
        let mtu = usize::from(config.dataplane.mtu);
        let mut sad = SadBuilder::new();
        let mut tunnels = Vec::with_capacity(config.tunnels.len());
        for (i, t) in config.tunnels.iter().enumerate() {
            let id = TunnelId(i as u32);
            let err = |dir: &str, e: &dyn std::fmt::Display| {
                TablesError(format!("tunnel {:?} {dir}: {e}", t.name))
            };
            let out = OutboundSa::new(&t.outbound_sa(), now).map_err(|e| err("out", &e))?;
            let sa = InboundSa::new(&t.inbound_sa(), now).map_err(|e| err("in", &e))?;
            let out = Arc::new(out);
            tunnels.push(tunnel_entry(id, t, Some(&out), mtu));
            sad.set_outbound(id, Arc::new(LiveSa::Outbound(out)))
                .map_err(|e| err("out", &e))?;
            let sa = LiveSa::Inbound {
                spi: t.inbound.spi,
                tunnel: id,
                draining: false,
                lane: None,
                sa: Arc::new(sa),
            };
            sad.insert_inbound(t.inbound.spi, t.local, Arc::new(sa))
                .map_err(|e| err("in", &e))?;
        }
        let spd = Arc::new(cfg::spd_from_config(config));
        Ok(Tables::new(spd, sad.build(), tunnels))
    }
}

/// Holds the control thread's own reference to snapshots that workers
/// also keep a clone of, so that the *last* reference is always dropped
/// (and the memory freed) on the control thread, never on a worker.
///
/// For a data plane whose worker keeps an `Arc<Tables>` of its own: publish
/// `Arc<Tables>` snapshots, let the worker clone the `Arc` after a
/// quiescent point that switched, and [`keep`](Keeper::keep) every
/// snapshot built; [`reap`](Keeper::reap) (on the control thread, e.g. at
/// each build) drops the ones nobody else holds any more.
pub struct Keeper<X> {
    held: Vec<Arc<X>>,
}

impl<X> Default for Keeper<X> {
    fn default() -> Keeper<X> {
        Keeper { held: Vec::new() }
    }
}

impl<X> Keeper<X> {
    pub fn new() -> Keeper<X> {
        Keeper::default()
    }

    /// Keeps a reference to `x` until it is the only one left.
    pub fn keep(&mut self, x: &Arc<X>) {
        self.held.push(Arc::clone(x));
    }

    /// Drops every kept value no one else refers to; returns how many.
    /// A count of 1 cannot grow again (only this keeper can clone it), so
    /// this drop is the last one.
    pub fn reap(&mut self) -> usize {
        let before = self.held.len();
        self.held.retain(|x| Arc::strong_count(x) > 1);
        before - self.held.len()
    }

    /// Values still kept.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeper_drops_only_what_nobody_else_holds() {
        let mut keeper = Keeper::new();
        let a = Arc::new(1);
        let b = Arc::new(2);
        keeper.keep(&a);
        keeper.keep(&b);
        let worker_copy = Arc::clone(&a);
        drop(a);
        drop(b);
        assert_eq!(keeper.reap(), 1, "b is held by the keeper alone");
        assert_eq!(keeper.len(), 1);
        drop(worker_copy);
        assert_eq!(keeper.reap(), 1);
        assert!(keeper.is_empty());
    }
}
