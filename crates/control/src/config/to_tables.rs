//! From a validated config to the tables the workers read: its tunnels and
//! policies as SPD [`Rule`]s, and its SAs in a [`SadBuilder`].
//!
//! The config checker uses the same rules for its shadowing check
//! (`spd.rs`), so what `espgw check` reports is about the very rules the
//! data plane compiles.

use core::fmt;
use std::sync::Arc;

use super::model::{Config, Policy, PolicyAction, SpdEntry, Tunnel};
use crate::tables::{Action, PortRange, Rule, SadBuilder, SadError, Selector, Spd, TunnelId};

impl From<PolicyAction> for Action {
    fn from(action: PolicyAction) -> Action {
        match action {
            PolicyAction::Bypass => Action::Bypass,
            PolicyAction::Discard => Action::Discard,
        }
    }
}

/// The id of the tunnel at `index` in [`Config::tunnels`]. The config
/// checker bounds the number of tunnels far below `u32::MAX`.
pub fn tunnel_id(index: usize) -> TunnelId {
    TunnelId(index as u32)
}

/// A tunnel's traffic, as for outbound packets: from its `local_ts` to its
/// `remote_ts` (same family), any protocol and port.
pub fn tunnel_selector(tunnel: &Tunnel) -> Selector {
    Selector {
        src: tunnel.local_ts.clone(),
        dst: tunnel.remote_ts.clone(),
        ..Selector::default()
    }
}

/// A tunnel's SPD rule: its traffic is protected by tunnel `id` (the
/// config index for config tunnels, see [`tunnel_id`]).
pub fn tunnel_rule(id: TunnelId, tunnel: &Tunnel) -> Rule {
    Rule {
        priority: tunnel.priority,
        selector: tunnel_selector(tunnel),
        action: Action::Protect(id),
    }
}

/// A `[[policy]]`'s SPD rule; an absent field matches anything.
pub fn policy_rule(policy: &Policy) -> Rule {
    Rule {
        priority: policy.priority,
        selector: Selector {
            src: policy.src.into_iter().collect(),
            dst: policy.dst.into_iter().collect(),
            proto: policy.proto,
            sport: policy.sport.unwrap_or(PortRange::ANY),
            dport: policy.dport.unwrap_or(PortRange::ANY),
        },
        action: policy.action.into(),
    }
}

/// The config's SPD: its tunnels and policies as rules in SPD order
/// ([`Config::spd`], so rule `i` is `cfg.spd[i]`), and the action for
/// traffic that matches none of them. `tables::Spd::new(&rules, default)`
/// compiles it; [`spd_from_config`] does just that.
pub fn tables_from_config(cfg: &Config) -> (Vec<Rule>, Action) {
    let rules = cfg
        .spd
        .iter()
        .map(|&entry| match entry {
            SpdEntry::Tunnel(i) => tunnel_rule(tunnel_id(i), &cfg.tunnels[i]),
            SpdEntry::Policy(i) => policy_rule(&cfg.policies[i]),
        })
        .collect();
    (rules, cfg.default_action.into())
}

/// The compiled SPD of a config.
pub fn spd_from_config(cfg: &Config) -> Spd {
    let (rules, default) = tables_from_config(cfg);
    Spd::new(&rules, default)
}

/// Why [`sad_from_config`] could not build the SAD.
#[derive(Debug)]
pub enum SadFromConfigError<E> {
    /// The caller's constructor refused one of the tunnel's SAs.
    Sa {
        tunnel: String,
        inbound: bool,
        error: E,
    },
    /// The SAD refused a mapping (reserved or duplicate inbound SPI; the
    /// config checker refuses both, so only a config built by hand gets here).
    Table { tunnel: String, error: SadError },
}

impl<E: fmt::Display> fmt::Display for SadFromConfigError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SadFromConfigError::Sa {
                tunnel,
                inbound,
                error,
            } => {
                let dir = if *inbound { "inbound" } else { "outbound" };
                write!(f, "tunnel {tunnel:?}: {dir} SA: {error}")
            }
            SadFromConfigError::Table { tunnel, error } => write!(f, "tunnel {tunnel:?}: {error}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for SadFromConfigError<E> {}

/// The config's SAs in a SAD: for each tunnel (id = its index), the
/// outbound SA `make_outbound` returns under its [`TunnelId`], and the
/// inbound SA `make_inbound` returns under (its inbound SPI, its `local`
/// address). Generic over the SA type, like the SAD: the gateway passes
/// constructors of the ESP engine's SAs (from [`Tunnel::outbound_sa`] /
/// [`Tunnel::inbound_sa`]), tests pass stand-ins. Stops at the first error.
pub fn sad_from_config<S, E>(
    cfg: &Config,
    mut make_outbound: impl FnMut(TunnelId, &Tunnel) -> Result<Arc<S>, E>,
    mut make_inbound: impl FnMut(TunnelId, &Tunnel) -> Result<Arc<S>, E>,
) -> Result<SadBuilder<S>, SadFromConfigError<E>> {
    let mut sad = SadBuilder::new();
    for (i, tunnel) in cfg.tunnels.iter().enumerate() {
        let id = tunnel_id(i);
        let sa_error = |inbound, error| SadFromConfigError::Sa {
            tunnel: tunnel.name.clone(),
            inbound,
            error,
        };
        let table_error = |error| SadFromConfigError::Table {
            tunnel: tunnel.name.clone(),
            error,
        };
        let outbound = make_outbound(id, tunnel).map_err(|e| sa_error(false, e))?;
        let inbound = make_inbound(id, tunnel).map_err(|e| sa_error(true, e))?;
        sad.set_outbound(id, outbound).map_err(table_error)?;
        sad.insert_inbound(tunnel.inbound.spi, tunnel.local, inbound)
            .map_err(table_error)?;
    }
    Ok(sad)
}
