//! Config tunnels and policies as SPD rules of the control tables: the
//! config's own conversion (`config::to_tables`), which `espgw check`'s
//! shadowing check uses too.

pub(crate) use crate::config::to_tables::policy_rule;
use crate::config::to_tables::{tunnel_rule as config_tunnel_rule, tunnel_selector};
use crate::config::{PolicyAction, Tunnel};
use crate::tables::{Action, Rule, TunnelId};

/// A tunnel's selectors: protected side (`local_ts`) as source, far side
/// (`remote_ts`) as destination, as for outbound traffic.
pub(crate) fn tunnel_rule(t: &Tunnel, id: TunnelId) -> Rule {
    config_tunnel_rule(id, t)
}

/// The same selectors with another action: what stands in for a deleted
/// tunnel when unmatched traffic would otherwise be bypassed in the clear.
pub(crate) fn tunnel_selector_rule(t: &Tunnel, action: Action) -> Rule {
    Rule {
        priority: t.priority,
        selector: tunnel_selector(t),
        action,
    }
}

pub(crate) fn action(a: PolicyAction) -> Action {
    a.into()
}
