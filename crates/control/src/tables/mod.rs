//! The tables the control plane owns and the data plane reads.
//!
//! - [`Spd`]: the security policy database, compiled from [`Rule`]s into a
//!   first-match lookup whose cost does not grow with the number of
//!   tunnels ([`linear_first_match`] is its reference meaning;
//!   [`unreachable_rules`] finds rules that can never match).
//! - [`Sad`]: inbound SA by (SPI, destination), outbound SA by tunnel;
//!   generic over the SA type.
//! - [`Tables`]: the snapshot the workers read (SPD, SAD, and each tunnel
//!   in its runtime form, [`TunnelEntry`]); the gateway's SA type is
//!   [`LiveSa`]. `live::SaManager` builds it (the conversions are in
//!   `live/snapshot.rs`) and the data plane's worker reads it as is.
//! - [`Publisher`] / [`Reader`]: RCU-style publication of immutable
//!   snapshots (such as [`Tables`]) to worker threads.
//!
//! The design, its costs and measurements are in docs/tables.md.
//!
//! ```
//! use std::sync::Arc;
//! use espgw_control::tables::*;
//!
//! // The control plane compiles the policy and the SAs into one snapshot.
//! let tunnel = Rule {
//!     priority: 100,
//!     selector: Selector {
//!         src: vec!["10.1.0.0/24".parse().unwrap()],
//!         dst: vec!["10.2.0.0/24".parse().unwrap()],
//!         ..Selector::default()
//!     },
//!     action: Action::Protect(TunnelId(0)),
//! };
//! let spd = Arc::new(Spd::new(&[tunnel], Action::Discard));
//! let mut sad = SadBuilder::new();
//! sad.set_outbound(TunnelId(0), Arc::new("the tunnel's SA")).unwrap();
//! let mut publisher = Publisher::new(Arc::new(Tables::new(spd, sad.build(), vec![])));
//!
//! // Each worker gets a reader and, once per poll loop, passes a quiescent
//! // point; in between it looks up without locks or atomics.
//! let mut reader = publisher.reader();
//! reader.quiescent();
//! let tables = reader.get();
//! let key = FlowKey {
//!     src: "10.1.0.7".parse().unwrap(),
//!     dst: "10.2.0.9".parse().unwrap(),
//!     proto: 6,
//!     sport: 40000,
//!     dport: 443,
//! };
//! let Action::Protect(tunnel) = tables.spd.lookup(&key) else { panic!() };
//! assert_eq!(**tables.sad.outbound_sa(tunnel).unwrap(), "the tunnel's SA");
//!
//! // The control plane replaces the snapshot and frees old ones once every
//! // worker has moved on.
//! let next = Tables::new(Arc::clone(&publisher.current().spd), SadBuilder::new().build(), vec![]);
//! publisher.publish(Arc::new(next));
//! assert!(reader.quiescent());
//! assert_eq!(publisher.reclaim(), 1);
//! ```

mod policy;
mod prefix;
mod rcu;
mod sad;
mod shadow;
mod snapshot;
mod spd;

#[cfg(test)]
mod tests;

pub use policy::{
    consult_order, linear_first_match, Action, FlowKey, Rule, RuleId, Selector, TunnelId,
};
pub(crate) use prefix::parse_addr_len;
pub use prefix::{Family, IpPrefix, PortRange, PrefixParseError};
pub use rcu::{Generation, Publisher, Reader, Watcher};
pub use sad::{SaIndex, Sad, SadBuilder, SadError, MAX_TUNNEL_ID};
pub use shadow::{selector_covers, unreachable_rules};
pub use snapshot::{
    inner_mtu, LiveSa, MssLimits, SharedInbound, SharedOutbound, Tables, TunnelEntry,
};
pub use spd::{Decision, Spd};
