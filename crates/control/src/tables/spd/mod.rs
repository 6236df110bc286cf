//! The compiled security policy database: first-match policy lookup whose
//! cost depends on the number of distinct prefix lengths, not on the number
//! of rules.
//!
//! Build it from the rule list with [`Spd::new`]; it is immutable after
//! that (publish a new one to change policy).
//! [`linear_first_match`](crate::tables::linear_first_match) defines the
//! answer; property tests hold the two to the same result.

mod family;
mod index;

use std::net::IpAddr;

use self::family::{CompiledRule, FamilyTable};
use self::index::Candidates;
use super::policy::{Action, FlowKey, Rule, RuleId};
use super::prefix::Family;

/// Keys per group in [`Spd::lookup_burst`]: enough loads in flight to
/// cover a cache miss, few enough that the probed lines stay in L1.
pub const BURST: usize = 32;

/// A key's destination probe, between the two passes of a burst.
#[derive(Clone, Copy)]
enum Probed<'a> {
    Nothing,
    V4(Candidates<'a, CompiledRule<u32>>),
    V6(Candidates<'a, CompiledRule<u128>>),
}

/// The SPD's answer for a packet and whether a rule (rather than the
/// default action) gave it: the data plane counts a discard by the default
/// (`no_policy`) apart from one by a rule (`policy_discard`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub action: Action,
    pub by_default: bool,
}

/// The compiled SPD. See the module documentation.
#[derive(Debug)]
pub struct Spd {
    v4: FamilyTable<u32>,
    v6: FamilyTable<u128>,
    default_action: Action,
    rules: usize,
}

impl Spd {
    /// Compiles `rules` (in config order; [`RuleId`]s are positions in this
    /// slice). Packets no rule matches get `default_action`.
    pub fn new(rules: &[Rule], default_action: Action) -> Spd {
        Spd {
            v4: FamilyTable::build(rules, Family::V4),
            v6: FamilyTable::build(rules, Family::V6),
            default_action,
            rules: rules.len(),
        }
    }

    /// The deciding rule's action, and (when `want_id`) its id.
    #[inline]
    fn first_match(&self, key: &FlowKey, want_id: bool) -> Option<(Action, Option<RuleId>)> {
        match (key.src, key.dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => self
                .v4
                .lookup(
                    u32::from(src),
                    u32::from(dst),
                    key.proto,
                    key.sport,
                    key.dport,
                )
                .map(|rule| (rule.action, want_id.then(|| self.v4.id(rule)).flatten())),
            (IpAddr::V6(src), IpAddr::V6(dst)) => self
                .v6
                .lookup(
                    u128::from(src),
                    u128::from(dst),
                    key.proto,
                    key.sport,
                    key.dport,
                )
                .map(|rule| (rule.action, want_id.then(|| self.v6.id(rule)).flatten())),
            // Not a packet that exists; no rule is written for it.
            _ => None,
        }
    }

    /// The action for a packet: that of the first matching rule, else the
    /// default action. No allocation, no locks.
    #[inline]
    pub fn lookup(&self, key: &FlowKey) -> Action {
        self.first_match(key, false)
            .map_or(self.default_action, |(action, _)| action)
    }

    /// [`Spd::lookup`] and whether the default action gave the answer: the
    /// worker's lookup (one pass, like `lookup`).
    #[inline]
    pub fn decide(&self, key: &FlowKey) -> Decision {
        match self.first_match(key, false) {
            Some((action, _)) => Decision {
                action,
                by_default: false,
            },
            None => Decision {
                action: self.default_action,
                by_default: true,
            },
        }
    }

    /// The rule that decides `key`, `None` when the default action does
    /// (for per-rule counters and for diagnostics).
    pub fn matching_rule(&self, key: &FlowKey) -> Option<RuleId> {
        self.first_match(key, true).and_then(|(_, id)| id)
    }

    /// Looks up a burst: `actions[i]` is the action for `keys[i]`, for the
    /// shorter of the two slices. Same answers as [`Spd::lookup`], faster on
    /// large tables: for each group of [`BURST`] keys it first does every
    /// key's destination probe (independent loads, so their cache misses
    /// overlap), then finishes each lookup from cache.
    pub fn lookup_burst(&self, keys: &[FlowKey], actions: &mut [Action]) {
        for (keys, actions) in keys.chunks(BURST).zip(actions.chunks_mut(BURST)) {
            let mut probed = [Probed::Nothing; BURST];
            for (probe, key) in probed.iter_mut().zip(keys) {
                *probe = match (key.src, key.dst) {
                    (IpAddr::V4(_), IpAddr::V4(dst)) => {
                        Probed::V4(self.v4.dst_candidates(u32::from(dst)))
                    }
                    (IpAddr::V6(_), IpAddr::V6(dst)) => {
                        Probed::V6(self.v6.dst_candidates(u128::from(dst)))
                    }
                    _ => Probed::Nothing,
                };
            }
            for ((key, action), probe) in keys.iter().zip(actions.iter_mut()).zip(probed) {
                let (proto, sport, dport) = (key.proto, key.sport, key.dport);
                let found = match (probe, key.src) {
                    (Probed::V4(by_dst), IpAddr::V4(src)) => self
                        .v4
                        .finish(by_dst, u32::from(src), proto, sport, dport)
                        .map(|rule| rule.action),
                    (Probed::V6(by_dst), IpAddr::V6(src)) => self
                        .v6
                        .finish(by_dst, u128::from(src), proto, sport, dport)
                        .map(|rule| rule.action),
                    _ => None,
                };
                *action = found.unwrap_or(self.default_action);
            }
        }
    }

    pub fn default_action(&self) -> Action {
        self.default_action
    }

    /// Number of rules it was built from.
    pub fn len(&self) -> usize {
        self.rules
    }

    pub fn is_empty(&self) -> bool {
        self.rules == 0
    }

    /// The most table probes one lookup of `family` costs (the number of
    /// distinct prefix lengths indexed), for sizing and for the docs.
    pub fn probe_depth(&self, family: Family) -> usize {
        match family {
            Family::V4 => self.v4.depth(),
            Family::V6 => self.v6.depth(),
        }
    }

    /// Rules that can match packets of `family`.
    pub fn family_len(&self, family: Family) -> usize {
        match family {
            Family::V4 => self.v4.len(),
            Family::V6 => self.v6.len(),
        }
    }
}
