//! Security policy database lookup: first matching rule wins.
//!
//! Rules are in the config's SPD order (priority, then file order). Each
//! selector is written from the protected side: `local` is the protected
//! host's address, `remote` the far side's. An outbound packet (protected
//! port in) matches with `local = src`; a plaintext packet arriving on an
//! unprotected port is checked the other way round (`local = dst`).

use std::net::IpAddr;
use std::sync::Arc;

use espgw_control::config::net::Prefix;
use espgw_control::tables;

/// What the SPD says to do with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Through the tunnel with this index.
    Protect(usize),
    /// Forward in the clear.
    Bypass,
    /// Drop.
    Discard,
}

/// A 5-tuple pattern; `None` matches anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selector {
    pub local: Option<Prefix>,
    pub remote: Option<Prefix>,
    pub proto: Option<u8>,
    /// Inclusive port range on the protected side.
    pub local_port: Option<(u16, u16)>,
    /// Inclusive port range on the far side.
    pub remote_port: Option<(u16, u16)>,
}

/// The fields of a packet the SPD looks at, oriented from the protected side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    pub local: IpAddr,
    pub remote: IpAddr,
    pub proto: u8,
    /// `None` when the protocol has no ports or they are not in this
    /// packet (a non-first fragment); then port selectors do not match.
    pub local_port: Option<u16>,
    pub remote_port: Option<u16>,
}

fn port_in(range: Option<(u16, u16)>, port: Option<u16>) -> bool {
    match (range, port) {
        (None, _) => true,
        (Some((a, b)), Some(p)) => a <= p && p <= b,
        (Some(_), None) => false,
    }
}

impl Selector {
    /// True when `flow` matches every field.
    #[inline]
    pub fn matches(&self, flow: &Flow) -> bool {
        self.local.is_none_or(|p| p.contains(flow.local))
            && self.remote.is_none_or(|p| p.contains(flow.remote))
            && self.proto.is_none_or(|p| p == flow.proto)
            && port_in(self.local_port, flow.local_port)
            && port_in(self.remote_port, flow.remote_port)
    }
}

/// One SPD entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpdRule {
    pub selector: Selector,
    pub action: Action,
}

/// The ordered rules, compiled into the control plane's first-match
/// lookup ([`espgw_control::tables::Spd`]: prefix-indexed, its cost does
/// not grow with the number of tunnels). Its `Protect` actions name tunnel
/// ids; `index_of_id` maps them to this snapshot's tunnel indexes.
#[derive(Debug)]
pub struct Spd {
    compiled: Arc<tables::Spd>,
    index_of_id: Vec<Option<usize>>,
}

/// The SPD's decision and whether a rule (rather than the default) made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub action: Action,
    pub by_default: bool,
}

fn prefixes(p: Option<Prefix>) -> Vec<tables::IpPrefix> {
    // Through the text form: the config's prefixes are valid, so it parses.
    p.and_then(|p| p.to_string().parse::<tables::IpPrefix>().ok())
        .into_iter()
        .collect()
}

fn ports(r: Option<(u16, u16)>) -> tables::PortRange {
    r.and_then(|(a, b)| tables::PortRange::new(a, b))
        .unwrap_or(tables::PortRange::ANY)
}

impl Spd {
    /// Compiles `rules` (in lookup order; `Protect(i)` names tunnel index
    /// *i*, which is also its id) with `default` for no match.
    pub fn new(rules: Vec<SpdRule>, default: Action) -> Spd {
        let action = |a: Action| match a {
            Action::Protect(i) => tables::Action::Protect(tables::TunnelId(i as u32)),
            Action::Bypass => tables::Action::Bypass,
            Action::Discard => tables::Action::Discard,
        };
        let compiled: Vec<tables::Rule> = rules
            .iter()
            .enumerate()
            .map(|(i, r)| tables::Rule {
                priority: i as u32,
                selector: tables::Selector {
                    src: prefixes(r.selector.local),
                    dst: prefixes(r.selector.remote),
                    proto: r.selector.proto,
                    sport: ports(r.selector.local_port),
                    dport: ports(r.selector.remote_port),
                },
                action: action(r.action),
            })
            .collect();
        let ids = rules
            .iter()
            .filter_map(|r| match r.action {
                Action::Protect(i) => Some(i + 1),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        Spd {
            compiled: Arc::new(tables::Spd::new(&compiled, action(default))),
            index_of_id: (0..ids).map(Some).collect(),
        }
    }

    /// An SPD the control plane compiled; `index_of_id[id]` is the index of
    /// tunnel `id` in the snapshot (`None`: no such tunnel: discard).
    pub fn from_compiled(compiled: Arc<tables::Spd>, index_of_id: Vec<Option<usize>>) -> Spd {
        Spd {
            compiled,
            index_of_id,
        }
    }

    /// The first rule matching `flow`, or the default. A packet without
    /// ports (not TCP/UDP/SCTP, or a non-first fragment) is looked up with
    /// ports 0, so a rule's port range matches it only if it holds 0.
    #[inline]
    pub fn lookup(&self, flow: &Flow) -> Decision {
        let key = tables::FlowKey {
            src: flow.local,
            dst: flow.remote,
            proto: flow.proto,
            sport: flow.local_port.unwrap_or(0),
            dport: flow.remote_port.unwrap_or(0),
        };
        let (action, by_default) = match self.compiled.lookup(&key) {
            tables::Action::Protect(tables::TunnelId(id)) => {
                match self.index_of_id.get(id as usize).copied().flatten() {
                    Some(i) => (Action::Protect(i), false),
                    None => (Action::Discard, false),
                }
            }
            tables::Action::Bypass => (Action::Bypass, false),
            // Only drops need to know which: a second look, off the fast path.
            tables::Action::Discard => {
                (Action::Discard, self.compiled.matching_rule(&key).is_none())
            }
        };
        Decision { action, by_default }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Option<Prefix> {
        Some(Prefix::parse(s).unwrap())
    }

    fn flow(local: &str, remote: &str, proto: u8, rport: Option<u16>) -> Flow {
        Flow {
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
            proto,
            local_port: Some(40000),
            remote_port: rport,
        }
    }

    /// The compiled lookup agrees with a plain first-match scan using
    /// [`Selector::matches`] (ports: a selector's range never matches a
    /// packet without ports unless the range holds 0).
    #[test]
    fn compiled_lookup_agrees_with_a_linear_scan() {
        use proptest::prelude::*;
        let nets = [
            "10.1.0.0/24",
            "10.1.0.0/16",
            "10.2.0.0/24",
            "0.0.0.0/0",
            "10.1.0.128/25",
        ];
        let rule = (
            0usize..6,
            0usize..6,
            proptest::option::of(prop_oneof![Just(6u8), Just(17u8)]),
            any::<bool>(),
            0usize..3,
        );
        proptest!(|(rules in proptest::collection::vec(rule, 0..8), flows in proptest::collection::vec((0u8..4, 0u8..4, prop_oneof![Just(6u8), Just(17u8), Just(1u8)], 0u16..100), 1..20))| {
            let rules: Vec<SpdRule> = rules
                .into_iter()
                .map(|(l, r, proto, ranged, act)| SpdRule {
                    selector: Selector {
                        local: nets.get(l).map(|s| Prefix::parse(s).unwrap()),
                        remote: nets.get(r).map(|s| Prefix::parse(s).unwrap()),
                        proto,
                        local_port: None,
                        remote_port: ranged.then_some((10, 50)),
                    },
                    action: [Action::Bypass, Action::Discard, Action::Protect(3)][act],
                })
                .collect();
            let spd = Spd::new(rules.clone(), Action::Discard);
            for (a, b, proto, port) in flows {
                let f = Flow {
                    local: format!("10.1.0.{}", a * 60).parse().unwrap(),
                    remote: format!("10.{}.0.9", b).parse().unwrap(),
                    proto,
                    local_port: (proto != 1).then_some(40000),
                    remote_port: (proto != 1).then_some(port),
                };
                let want = rules.iter().find(|r| r.selector.matches(&f)).map(|r| r.action);
                let got = spd.lookup(&f);
                prop_assert_eq!(got.action, want.unwrap_or(Action::Discard));
                prop_assert_eq!(got.by_default, want.is_none());
            }
        });
    }

    #[test]
    fn first_match_wins_and_default_applies() {
        let any = Selector {
            local: None,
            remote: None,
            proto: None,
            local_port: None,
            remote_port: None,
        };
        let spd = Spd::new(
            vec![
                SpdRule {
                    selector: Selector {
                        proto: Some(6),
                        remote_port: Some((22, 22)),
                        ..any
                    },
                    action: Action::Discard,
                },
                SpdRule {
                    selector: Selector {
                        local: p("10.1.0.0/24"),
                        remote: p("10.2.0.0/24"),
                        ..any
                    },
                    action: Action::Protect(0),
                },
            ],
            Action::Discard,
        );
        let d = spd.lookup(&flow("10.1.0.10", "10.2.0.10", 17, Some(53)));
        assert_eq!(d.action, Action::Protect(0));
        assert!(!d.by_default);
        let d = spd.lookup(&flow("10.1.0.10", "10.2.0.10", 6, Some(22)));
        assert_eq!(d.action, Action::Discard);
        assert!(!d.by_default);
        // A port selector never matches a packet without ports.
        let d = spd.lookup(&flow("10.1.0.10", "10.2.0.10", 6, None));
        assert_eq!(d.action, Action::Protect(0));
        let d = spd.lookup(&flow("10.1.0.10", "10.3.0.10", 17, Some(53)));
        assert_eq!(d.action, Action::Discard);
        assert!(d.by_default);
        // Families never cross.
        let d = spd.lookup(&flow("fd00:1::1", "fd00:2::1", 17, Some(53)));
        assert!(d.by_default);
    }
}
