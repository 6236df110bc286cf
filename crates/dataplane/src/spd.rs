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

/// A worker's cache of recent SPD decisions, in front of [`Spd::lookup`].
///
/// Consecutive packets of a flow (a TCP window, a UDP stream) ask the SPD
/// the same question, and a hit here is cheaper than the compiled lookup
/// (docs/benchmarks.md: both counts under "Where the cycles go", the
/// command under "Profiling"). Direct-mapped, keyed by the full 5-tuple, so
/// a hit returns exactly what `Spd::lookup` would (the property test below
/// holds it to that); a collision just replaces the slot. A
/// decision depends only on the flow and the SPD, and a snapshot's SPD
/// never changes: the worker [`clear`](FlowCache::clear)s the cache when it
/// switches snapshots. Per worker, so no sharing and no locks (VPP's IPsec
/// SPD flow cache has the same shape).
pub struct FlowCache {
    slots: Box<[(CacheKey, Decision)]>,
    mask: usize,
}

/// A [`Flow`] packed for a cheap compare. `family` 0 marks an empty slot
/// (a real key has 4 or 6), so the two families never collide either.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
struct CacheKey {
    local: u128,
    remote: u128,
    /// Local port << 16 | remote port; port-less packets look up as 0
    /// (what `Spd::lookup` does with `None`).
    ports: u32,
    proto: u8,
    family: u8,
}

impl CacheKey {
    #[inline]
    fn new(flow: &Flow) -> CacheKey {
        let (local, remote, family) = match (flow.local, flow.remote) {
            (IpAddr::V4(l), IpAddr::V4(r)) => (u32::from(l).into(), u32::from(r).into(), 4),
            (l, r) => (v6_bits(l), v6_bits(r), 6),
        };
        CacheKey {
            local,
            remote,
            ports: u32::from(flow.local_port.unwrap_or(0)) << 16
                | u32::from(flow.remote_port.unwrap_or(0)),
            proto: flow.proto,
            family,
        }
    }

    #[inline]
    fn hash(&self) -> usize {
        let fold = |x: u128| (x as u64) ^ ((x >> 64) as u64);
        let h = fold(self.local)
            ^ fold(self.remote).rotate_left(32)
            ^ (u64::from(self.ports) << 8 | u64::from(self.proto));
        // Fibonacci hashing: the high bits of the product mix every input bit.
        (h.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize
    }
}

/// An address as 128 bits (an IPv4 one of a mixed pair, which no packet
/// has, as its IPv4-mapped form).
fn v6_bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped().into(),
        IpAddr::V6(a) => a.into(),
    }
}

impl FlowCache {
    /// Slots of the worker's cache: flows in flight per worker well beyond
    /// a burst, 64 KiB.
    pub const SLOTS: usize = 1024;

    /// A cache of `slots` entries (rounded up to a power of two).
    pub fn new(slots: usize) -> FlowCache {
        let n = slots.max(1).next_power_of_two();
        let empty = Decision {
            action: Action::Discard,
            by_default: true,
        };
        FlowCache {
            slots: vec![(CacheKey::default(), empty); n].into_boxed_slice(),
            mask: n - 1,
        }
    }

    /// Forgets every decision (call when the SPD changes).
    pub fn clear(&mut self) {
        self.slots
            .iter_mut()
            .for_each(|s| s.0 = CacheKey::default());
    }

    /// `spd.lookup(flow)`, from the cache when this flow was looked up last
    /// in its slot.
    #[inline]
    pub fn lookup(&mut self, spd: &Spd, flow: &Flow) -> Decision {
        let key = CacheKey::new(flow);
        let slot = &mut self.slots[key.hash() & self.mask];
        if slot.0 == key {
            return slot.1;
        }
        let d = spd.lookup(flow);
        *slot = (key, d);
        d
    }
}

impl std::fmt::Debug for FlowCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let used = self.slots.iter().filter(|s| s.0.family != 0).count();
        write!(f, "FlowCache({used}/{} slots)", self.slots.len())
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

    /// The cache answers exactly what the SPD does, for flows that collide
    /// in a tiny cache, both families, with and without ports, and after a
    /// clear.
    #[test]
    fn flow_cache_agrees_with_the_spd() {
        use proptest::prelude::*;
        let wild = Selector {
            src: Vec::new(),
            dst: Vec::new(),
            proto: None,
            sport: PortRange::ANY,
            dport: PortRange::ANY,
        };
        let rules = vec![
            Rule {
                priority: 0,
                selector: Selector {
                    src: vec![prefix("10.1.0.0/24")],
                    dst: vec![prefix("10.2.0.0/16")],
                    dport: PortRange::new(10, 50).unwrap(),
                    ..wild.clone()
                },
                action: tables::Action::Protect(TunnelId(1)),
            },
            Rule {
                priority: 1,
                selector: Selector {
                    src: vec![prefix("fd00:1::/64")],
                    proto: Some(17),
                    ..wild.clone()
                },
                action: tables::Action::Protect(TunnelId(0)),
            },
            Rule {
                priority: 2,
                selector: Selector {
                    dst: vec![prefix("10.2.0.0/24")],
                    ..wild.clone()
                },
                action: tables::Action::Bypass,
            },
            Rule {
                priority: 3,
                selector: Selector {
                    dst: vec![prefix("10.3.0.0/16")],
                    ..wild
                },
                action: tables::Action::Discard,
            },
        ];
        let spd = compiled(&rules, 2);
        let flow_strategy = (
            any::<bool>(),
            0u8..4,
            0u8..4,
            prop_oneof![Just(6u8), Just(17u8), Just(1u8)],
            0u16..64,
        );
        proptest!(|(flows in proptest::collection::vec(flow_strategy, 1..200), slots in 1usize..8)| {
            let mut cache = FlowCache::new(slots);
            for (i, (v6, a, b, proto, port)) in flows.into_iter().enumerate() {
                let (local, remote) = if v6 {
                    (format!("fd00:{}::{}", a % 2 + 1, a), format!("fd00:2::{b}"))
                } else {
                    (format!("10.1.0.{a}"), format!("10.{}.0.{b}", b % 3 + 1))
                };
                let f = Flow {
                    local: local.parse().unwrap(),
                    remote: remote.parse().unwrap(),
                    proto,
                    local_port: (proto != 1).then_some(40000 + u16::from(a)),
                    remote_port: (proto != 1).then_some(port),
                };
                if i % 50 == 49 {
                    cache.clear();
                }
                prop_assert_eq!(cache.lookup(&spd, &f), spd.lookup(&f));
                // A second ask is a hit and must not differ either.
                prop_assert_eq!(cache.lookup(&spd, &f), spd.lookup(&f));
            }
        });
    }
}
