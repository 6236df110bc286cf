//! What the manager hands to the code that builds a data-plane snapshot.
//!
//! The manager owns the SAs (`Arc`s, so their sequence numbers, replay
//! windows and counters survive every table swap) and the policy; a
//! snapshot builder, given a [`LiveView`], turns them into whatever table
//! type the workers read. [`control_tables`] builds the control crate's own
//! [`Tables`]; the data plane may build its own type from the same view.

use std::sync::{Arc, Mutex};

use espgw_esp::{InboundSa, OutboundSa};

use crate::config::Tunnel;
use crate::tables::{Rule, SadBuilder, Spd, Tables, TunnelId};

/// An outbound SA as workers share it: `encap_burst` takes `&self`.
pub type SharedOutbound = Arc<OutboundSa>;
/// An inbound SA as workers share it: `decap_burst` takes `&mut self`, so
/// a worker locks it once per burst.
pub type SharedInbound = Arc<Mutex<InboundSa>>;

/// One inbound SA of a tunnel.
pub struct InboundView<'a> {
    pub spi: u32,
    pub sa: &'a SharedInbound,
    /// An old SA kept after a rekey until it drains; it still decrypts.
    pub draining: bool,
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
    /// Current SA first (if it has not hard-expired), then draining ones.
    pub inbound: Vec<InboundView<'a>>,
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
/// for every change; any `FnMut(&LiveView) -> T + Send` is one.
pub type SnapshotBuilder<T> = Box<dyn for<'a> FnMut(&LiveView<'a>) -> T + Send>;

/// An SA in the control crate's own [`Tables`].
pub enum LiveSa {
    Outbound(SharedOutbound),
    Inbound(SharedInbound),
}

impl LiveSa {
    pub fn outbound(&self) -> Option<&OutboundSa> {
        match self {
            LiveSa::Outbound(sa) => Some(sa),
            LiveSa::Inbound(_) => None,
        }
    }

    pub fn inbound(&self) -> Option<&Mutex<InboundSa>> {
        match self {
            LiveSa::Inbound(sa) => Some(sa),
            LiveSa::Outbound(_) => None,
        }
    }
}

/// The control crate's snapshot: SPD plus a SAD with inbound SAs mapped by
/// (SPI, the tunnel's local address) and outbound SAs by tunnel id.
pub type LiveTables = Tables<LiveSa>;

/// Builds [`LiveTables`] from a view (the default snapshot builder).
pub fn control_tables(view: &LiveView) -> LiveTables {
    let mut sad = SadBuilder::new();
    for t in &view.tunnels {
        if let Some(out) = t.outbound {
            // Ids come from the manager, far below the limit; an error here
            // would only leave the tunnel without SA, i.e. discarding.
            let _ = sad.set_outbound(t.id, Arc::new(LiveSa::Outbound(Arc::clone(out))));
        }
        for i in &t.inbound {
            // The manager refuses duplicate and reserved SPIs before they
            // get here.
            let _ = sad.insert_inbound(
                i.spi,
                t.tunnel.local,
                Arc::new(LiveSa::Inbound(Arc::clone(i.sa))),
            );
        }
    }
    Tables::new(Arc::clone(view.spd), sad.build())
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
