//! The tables the control plane owns and the data plane reads.
//!
//! - [`Spd`]: the security policy database, compiled from [`Rule`]s into a
//!   first-match lookup whose cost does not grow with the number of
//!   tunnels ([`linear_first_match`] is its reference meaning;
//!   [`unreachable_rules`] finds rules that can never match).
//! - [`Sad`]: inbound SA by (SPI, destination), outbound SA by tunnel;
//!   generic over the SA type.
//! - [`Publisher`] / [`Reader`]: RCU-style publication of immutable
//!   snapshots (such as [`Tables`]) to worker threads.
//!
//! The design, its costs and measurements are in docs/tables.md.

mod policy;
mod prefix;
mod rcu;
mod sad;
mod shadow;
mod spd;

#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use policy::{
    consult_order, linear_first_match, Action, FlowKey, Rule, RuleId, Selector, TunnelId,
};
pub use prefix::{Family, IpPrefix, PortRange, PrefixParseError};
pub use rcu::{Generation, Publisher, Reader};
pub use sad::{SaIndex, Sad, SadBuilder, SadError, MAX_TUNNEL_ID};
pub use shadow::{selector_covers, unreachable_rules};
pub use spd::Spd;

/// One snapshot of everything a worker looks up, published as a whole.
/// The SPD sits behind its own `Arc` so that an SA change (rekey, add,
/// delete) republishes without recompiling the policy.
pub struct Tables<S> {
    pub spd: Arc<Spd>,
    pub sad: Sad<S>,
}

impl<S> Tables<S> {
    pub fn new(spd: Arc<Spd>, sad: Sad<S>) -> Tables<S> {
        Tables { spd, sad }
    }
}
