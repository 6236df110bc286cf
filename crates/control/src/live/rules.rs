//! Config tunnels and policies as SPD rules of the control tables.
//!
//! Config prefixes and port ranges are the tables' own types, so this is
//! only a matter of putting the fields in place.

use crate::config::{Action as ConfigAction, Policy, Tunnel};
use crate::tables::{Action, PortRange, Rule, Selector, TunnelId};

/// A tunnel's selectors: protected side (`local_ts`) as source, far side
/// (`remote_ts`) as destination, as for outbound traffic.
pub(crate) fn tunnel_rule(t: &Tunnel, id: TunnelId) -> Rule {
    tunnel_selector_rule(t, Action::Protect(id))
}

/// The same selectors with another action: what stands in for a deleted
/// tunnel when unmatched traffic would otherwise be bypassed in the clear.
pub(crate) fn tunnel_selector_rule(t: &Tunnel, action: Action) -> Rule {
    Rule {
        priority: t.priority,
        selector: Selector {
            src: t.local_ts.clone(),
            dst: t.remote_ts.clone(),
            ..Selector::default()
        },
        action,
    }
}

pub(crate) fn policy_rule(p: &Policy) -> Rule {
    Rule {
        priority: p.priority,
        selector: Selector {
            src: p.src.iter().copied().collect(),
            dst: p.dst.iter().copied().collect(),
            proto: p.proto,
            sport: p.sport.unwrap_or(PortRange::ANY),
            dport: p.dport.unwrap_or(PortRange::ANY),
        },
        action: action(p.action),
    }
}

pub(crate) fn action(a: ConfigAction) -> Action {
    match a {
        ConfigAction::Bypass => Action::Bypass,
        ConfigAction::Discard => Action::Discard,
    }
}
