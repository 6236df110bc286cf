//! Security policy database lookup: first matching rule wins.
//!
//! Rules are in the config's SPD order (priority, then file order). Each
//! selector is written from the protected side: `local` is the protected
//! host's address, `remote` the far side's. An outbound packet (protected
//! port in) matches with `local = src`; a plaintext packet arriving on an
//! unprotected port is checked the other way round (`local = dst`).

use std::net::IpAddr;
use std::sync::Arc;

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

/// The fields of a packet the SPD looks at, oriented from the protected side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    pub local: IpAddr,
    pub remote: IpAddr,
    pub proto: u8,
    /// `None` when the protocol has no ports or they are not in this
    /// packet (a non-first fragment); looked up as port 0 (see `lookup`).
    pub local_port: Option<u16>,
    pub remote_port: Option<u16>,
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

impl Spd {
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
    use tables::{FlowKey, IpPrefix, PortRange, Rule, Selector, TunnelId};

    fn prefix(s: &str) -> IpPrefix {
        IpPrefix::parse(s).unwrap()
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

    fn compiled(rules: &[Rule], ids: usize) -> Spd {
        Spd::from_compiled(
            Arc::new(tables::Spd::new(rules, tables::Action::Discard)),
            (0..ids).map(Some).collect(),
        )
    }

    /// The wrapper (tunnel id -> index, rule vs default, packets without
    /// ports looked up as port 0) agrees with the tables' plain first-match
    /// scan.
    #[test]
    fn lookup_agrees_with_a_linear_scan() {
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
            let rules: Vec<Rule> = rules
                .into_iter()
                .enumerate()
                .map(|(i, (l, r, proto, ranged, act))| Rule {
                    priority: i as u32,
                    selector: Selector {
                        src: nets.get(l).map(|s| prefix(s)).into_iter().collect(),
                        dst: nets.get(r).map(|s| prefix(s)).into_iter().collect(),
                        proto,
                        sport: PortRange::ANY,
                        dport: if ranged { PortRange::new(10, 50).unwrap() } else { PortRange::ANY },
                    },
                    action: [
                        tables::Action::Bypass,
                        tables::Action::Discard,
                        tables::Action::Protect(TunnelId(3)),
                    ][act],
                })
                .collect();
            let spd = compiled(&rules, 4);
            for (a, b, proto, port) in flows {
                let f = Flow {
                    local: format!("10.1.0.{}", a * 60).parse().unwrap(),
                    remote: format!("10.{}.0.9", b).parse().unwrap(),
                    proto,
                    local_port: (proto != 1).then_some(40000),
                    remote_port: (proto != 1).then_some(port),
                };
                let key = FlowKey {
                    src: f.local,
                    dst: f.remote,
                    proto,
                    sport: f.local_port.unwrap_or(0),
                    dport: f.remote_port.unwrap_or(0),
                };
                let want = tables::linear_first_match(&rules, &key).map(|id| match rules[id.0 as usize].action {
                    tables::Action::Protect(TunnelId(t)) => Action::Protect(t as usize),
                    tables::Action::Bypass => Action::Bypass,
                    tables::Action::Discard => Action::Discard,
                });
                let got = spd.lookup(&f);
                prop_assert_eq!(got.action, want.unwrap_or(Action::Discard));
                prop_assert_eq!(got.by_default, want.is_none());
            }
        });
    }

    #[test]
    fn first_match_wins_and_default_applies() {
        let any = Selector {
            src: Vec::new(),
            dst: Vec::new(),
            proto: None,
            sport: PortRange::ANY,
            dport: PortRange::ANY,
        };
        let spd = compiled(
            &[
                Rule {
                    priority: 0,
                    selector: Selector {
                        proto: Some(6),
                        dport: PortRange::single(22),
                        ..any.clone()
                    },
                    action: tables::Action::Discard,
                },
                Rule {
                    priority: 1,
                    selector: Selector {
                        src: vec![prefix("10.1.0.0/24")],
                        dst: vec![prefix("10.2.0.0/24")],
                        ..any.clone()
                    },
                    action: tables::Action::Protect(TunnelId(0)),
                },
            ],
            1,
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
        // A tunnel id the snapshot does not hold is discarded, by a rule.
        let gone = compiled(
            &[Rule {
                priority: 0,
                selector: any,
                action: tables::Action::Protect(TunnelId(5)),
            }],
            1,
        );
        let d = gone.lookup(&flow("10.1.0.10", "10.2.0.10", 17, Some(53)));
        assert_eq!((d.action, d.by_default), (Action::Discard, false));
    }
}
