//! A worker's cache of recent SPD decisions, in front of the control
//! plane's compiled SPD ([`Spd::decide`]).

use std::net::IpAddr;

use espgw_control::tables::{Action, Decision, FlowKey, Spd};

/// A worker's cache of recent SPD decisions, in front of [`Spd::decide`].
///
/// Consecutive packets of a flow (a TCP window, a UDP stream) ask the SPD
/// the same question, and a hit here is cheaper than the compiled lookup
/// (docs/benchmarks.md: both counts under "Where the cycles go", the
/// command under "Profiling"). Direct-mapped, keyed by the full 5-tuple, so
/// a hit returns exactly what `Spd::decide` would (the property test below
/// holds it to that); a collision just replaces the slot. A
/// decision depends only on the flow and the SPD, and a snapshot's SPD
/// never changes: the worker [`clear`](FlowCache::clear)s the cache when it
/// switches snapshots. Per worker, so no sharing and no locks (VPP's IPsec
/// SPD flow cache has the same shape).
pub struct FlowCache {
    slots: Box<[(CacheKey, Decision)]>,
    /// IPv4 flows, in a table of their own with a 16-byte key: two 64-bit
    /// compares for a hit instead of the 48-byte key's, and two slots per
    /// cache line instead of one.
    slots_v4: Box<[(V4Key, Decision)]>,
    mask: usize,
}

/// An IPv4 flow packed in two words: the addresses, and the ports,
/// protocol and a 1 that marks a used slot (an empty one is all zero).
#[derive(Clone, Copy, PartialEq, Eq, Default)]
struct V4Key {
    addrs: u64,
    rest: u64,
}

impl V4Key {
    #[inline(always)]
    fn new(src: u32, dst: u32, proto: u8, sport: u16, dport: u16) -> V4Key {
        V4Key {
            addrs: u64::from(src) << 32 | u64::from(dst),
            rest: (u64::from(sport) << 16 | u64::from(dport)) << 16 | u64::from(proto) << 8 | 1,
        }
    }

    #[inline(always)]
    fn hash(&self) -> usize {
        slot_hash(self.addrs ^ self.rest.wrapping_mul(FIB))
    }
}

/// Fibonacci hashing's multiplier (2^64 / the golden ratio).
const FIB: u64 = 0x9e37_79b9_7f4a_7c15;

/// A key's words combined into `h` (each but one multiplied by [`FIB`]
/// first), to a slot index: bits 40 and up of a last product, which the
/// table masks. A product carries a bit only upwards, so the high half
/// is folded down before it: every bit of `h` reaches the index. (A first
/// try of the IPv4 key, one product of `addrs ^ rest.rotate_left(23)`,
/// put the 64 flows that differ in the source port alone in one slot;
/// the 48-byte key's hash had the same shape.)
#[inline(always)]
fn slot_hash(h: u64) -> usize {
    let h = h ^ (h >> 32);
    (h.wrapping_mul(FIB) >> 40) as usize
}

/// A [`FlowKey`] of IPv6 (or, which no packet has, mixed) addresses
/// packed for a cheap compare; IPv4 flows have [`V4Key`]. `family` 0
/// marks an empty slot (a used one has 6).
#[derive(Clone, Copy, PartialEq, Eq, Default)]
struct CacheKey {
    local: u128,
    remote: u128,
    /// Source port << 16 | destination port (0 for port-less packets,
    /// as in the key).
    ports: u32,
    proto: u8,
    family: u8,
}

impl CacheKey {
    #[inline]
    fn new(flow: &FlowKey) -> CacheKey {
        let (src, dst) = (v6_bits(flow.src), v6_bits(flow.dst));
        CacheKey::v6(src, dst, flow.proto, flow.sport, flow.dport)
    }

    /// The key of an IPv6 flow from its integers: what [`Self::new`] builds
    /// of its `FlowKey`, and [`FlowCache::lookup_v6`] without one.
    #[inline(always)]
    fn v6(src: u128, dst: u128, proto: u8, sport: u16, dport: u16) -> CacheKey {
        CacheKey {
            local: src,
            remote: dst,
            ports: u32::from(sport) << 16 | u32::from(dport),
            proto,
            family: 6,
        }
    }

    #[inline]
    fn hash(&self) -> usize {
        let fold = |x: u128| (x as u64) ^ ((x >> 64) as u64);
        slot_hash(
            fold(self.local)
                ^ fold(self.remote).wrapping_mul(FIB)
                ^ (u64::from(self.ports) << 8 | u64::from(self.proto)).wrapping_mul(FIB << 1 | 1),
        )
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
    /// Slots of the worker's cache, per family: flows in flight per worker
    /// well beyond a burst, 32 KiB for IPv4 and 64 KiB for IPv6.
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
            slots_v4: vec![(V4Key::default(), empty); n].into_boxed_slice(),
            mask: n - 1,
        }
    }

    /// Forgets every decision (call when the SPD changes).
    pub fn clear(&mut self) {
        self.slots
            .iter_mut()
            .for_each(|s| s.0 = CacheKey::default());
        self.slots_v4
            .iter_mut()
            .for_each(|s| s.0 = V4Key::default());
    }

    /// `spd.decide(flow)`, from the cache when this flow was looked up last
    /// in its slot.
    ///
    /// The hit path is inlined into the caller and the miss is a separate
    /// cold function: with the SPD call in the same body, every lookup
    /// paid for the miss path's stack frame and register saves, and the
    /// caller built the key on the stack for the call (docs/benchmarks.md,
    /// "Worker layer per-packet trims").
    #[inline(always)]
    pub fn lookup(&mut self, spd: &Spd, flow: &FlowKey) -> Decision {
        if let (IpAddr::V4(src), IpAddr::V4(dst)) = (flow.src, flow.dst) {
            return self.lookup_v4(
                spd,
                src.into(),
                dst.into(),
                flow.proto,
                flow.sport,
                flow.dport,
            );
        }
        let key = CacheKey::new(flow);
        let i = key.hash() & self.mask;
        match self.slots.get(i) {
            Some((k, d)) if *k == key => *d,
            _ => self.miss(spd, flow, key, i),
        }
    }

    /// [`Self::lookup`] of the IPv4 flow `src`/`dst`/`proto`/`sport`/`dport`
    /// (ports 0 for packets without them), for the IPv4 fast path: the
    /// IPv4 table, which `lookup` of that flow as a [`FlowKey`] also uses
    /// (so the two share entries), without building the `IpAddr`s; a miss
    /// builds the `FlowKey` for the SPD.
    #[inline(always)]
    pub fn lookup_v4(
        &mut self,
        spd: &Spd,
        src: u32,
        dst: u32,
        proto: u8,
        sport: u16,
        dport: u16,
    ) -> Decision {
        let key = V4Key::new(src, dst, proto, sport, dport);
        let i = key.hash() & self.mask;
        match self.slots_v4.get(i) {
            Some((k, d)) if *k == key => *d,
            _ => {
                let flow = FlowKey {
                    src: IpAddr::V4(src.into()),
                    dst: IpAddr::V4(dst.into()),
                    proto,
                    sport,
                    dport,
                };
                self.miss_v4(spd, &flow, key, i)
            }
        }
    }

    /// [`Self::lookup`] of the IPv6 flow `src`/`dst`/`proto`/`sport`/`dport`
    /// for the IPv6 fast path: the same key and slot as `lookup` of that
    /// flow as a [`FlowKey`], built from the integers; a miss builds the
    /// `FlowKey` for the SPD.
    #[inline(always)]
    pub fn lookup_v6(
        &mut self,
        spd: &Spd,
        src: u128,
        dst: u128,
        proto: u8,
        sport: u16,
        dport: u16,
    ) -> Decision {
        let key = CacheKey::v6(src, dst, proto, sport, dport);
        let i = key.hash() & self.mask;
        match self.slots.get(i) {
            Some((k, d)) if *k == key => *d,
            _ => {
                let flow = FlowKey {
                    src: IpAddr::V6(src.into()),
                    dst: IpAddr::V6(dst.into()),
                    proto,
                    sport,
                    dport,
                };
                self.miss(spd, &flow, key, i)
            }
        }
    }

    /// An IPv4 flow not in its slot: asks the SPD and keeps the answer.
    #[cold]
    #[inline(never)]
    fn miss_v4(&mut self, spd: &Spd, flow: &FlowKey, key: V4Key, i: usize) -> Decision {
        let d = spd.decide(flow);
        if let Some(slot) = self.slots_v4.get_mut(i) {
            *slot = (key, d);
        }
        d
    }

    /// A flow not in its slot: asks the SPD and keeps the answer there.
    #[cold]
    #[inline(never)]
    fn miss(&mut self, spd: &Spd, flow: &FlowKey, key: CacheKey, i: usize) -> Decision {
        let d = spd.decide(flow);
        if let Some(slot) = self.slots.get_mut(i) {
            *slot = (key, d);
        }
        d
    }
}

impl std::fmt::Debug for FlowCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let used = self.slots.iter().filter(|s| s.0.family != 0).count()
            + self.slots_v4.iter().filter(|s| s.0.rest != 0).count();
        write!(
            f,
            "FlowCache({used}/{} slots)",
            self.slots.len() + self.slots_v4.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two IPv4 slots per 64-byte cache line.
    #[test]
    fn an_ipv4_slot_is_half_a_line() {
        assert_eq!(std::mem::size_of::<(V4Key, Decision)>(), 32);
    }

    /// Flows that differ in one field only (the bench's 64 source ports,
    /// hosts of one /24, destination ports) spread over the slots: at
    /// most a few share one.
    #[test]
    fn ipv4_flows_that_differ_in_one_field_spread_over_the_slots() {
        let mask = FlowCache::SLOTS - 1;
        let spread = |keys: Vec<V4Key>| {
            let mut slots: Vec<usize> = keys.iter().map(|k| k.hash() & mask).collect();
            slots.sort_unstable();
            slots.dedup();
            slots.len()
        };
        let (a, b) = (0x0a01_0014, 0x0a02_000a);
        let by_sport = (0..64)
            .map(|p| V4Key::new(a, b, 17, 10_000 + p, 9))
            .collect();
        let by_host = (0..64)
            .map(|h| V4Key::new(a + h, b, 17, 10_000, 9))
            .collect();
        let by_dport = (0..64)
            .map(|p| V4Key::new(a, b, 6, 40_000, 1 + p))
            .collect();
        for (what, keys) in [("sport", by_sport), ("host", by_host), ("dport", by_dport)] {
            let n = spread(keys);
            assert!(n >= 56, "{what}: 64 flows in {n} slots");
        }
    }

    /// The same for IPv6 flows (the 48-byte key): hosts that differ in
    /// the interface identifier's low bits or in its high bits, and
    /// source ports.
    #[test]
    fn ipv6_flows_that_differ_in_one_field_spread_over_the_slots() {
        let mask = FlowCache::SLOTS - 1;
        let key = |src: u128, sport: u16| {
            CacheKey::new(&FlowKey {
                src: IpAddr::V6(src.into()),
                dst: IpAddr::V6((0xfd00_0002_u128 << 96 | 10).into()),
                proto: 17,
                sport,
                dport: 9,
            })
        };
        let base = 0xfd00_0001_u128 << 96;
        let cases: [(&str, Vec<CacheKey>); 3] = [
            (
                "low host bits",
                (0..64).map(|h| key(base | h, 10_000)).collect(),
            ),
            (
                "high host bits",
                (0..64).map(|h| key(base | h << 48, 10_000)).collect(),
            ),
            (
                "sport",
                (0..64).map(|p| key(base | 20, 10_000 + p as u16)).collect(),
            ),
        ];
        for (what, keys) in cases {
            let mut slots: Vec<usize> = keys.iter().map(|k| k.hash() & mask).collect();
            slots.sort_unstable();
            slots.dedup();
            assert!(
                slots.len() >= 56,
                "{what}: 64 flows in {} slots",
                slots.len()
            );
        }
    }
    use espgw_control::tables::{self, IpPrefix, PortRange, Rule, Selector, TunnelId};

    /// A packet's SPD fields as the worker reads them (`IpMeta`): ports
    /// are `None` for protocols without them, and look up as port 0.
    struct Flow {
        local: IpAddr,
        remote: IpAddr,
        proto: u8,
        local_port: Option<u16>,
        remote_port: Option<u16>,
    }

    impl Flow {
        fn key(&self) -> FlowKey {
            FlowKey {
                src: self.local,
                dst: self.remote,
                proto: self.proto,
                sport: self.local_port.unwrap_or(0),
                dport: self.remote_port.unwrap_or(0),
            }
        }
    }

    fn prefix(s: &str) -> IpPrefix {
        IpPrefix::parse(s).unwrap()
    }

    fn flow(local: &str, remote: &str, proto: u8, rport: Option<u16>) -> FlowKey {
        Flow {
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
            proto,
            local_port: Some(40000),
            remote_port: rport,
        }
        .key()
    }

    fn compiled(rules: &[Rule]) -> Spd {
        Spd::new(rules, Action::Discard)
    }

    /// The worker's lookup (rule vs default, packets without ports looked
    /// up as port 0) agrees with the tables' plain first-match scan.
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
                        Action::Bypass,
                        Action::Discard,
                        Action::Protect(TunnelId(3)),
                    ][act],
                })
                .collect();
            let spd = compiled(&rules);
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
                prop_assert_eq!(f.key(), key);
                let want = tables::linear_first_match(&rules, &key).map(|id| rules[id.0 as usize].action);
                let got = spd.decide(&f.key());
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
        let spd = compiled(&[
            Rule {
                priority: 0,
                selector: Selector {
                    proto: Some(6),
                    dport: PortRange::single(22),
                    ..any.clone()
                },
                action: Action::Discard,
            },
            Rule {
                priority: 1,
                selector: Selector {
                    src: vec![prefix("10.1.0.0/24")],
                    dst: vec![prefix("10.2.0.0/24")],
                    ..any.clone()
                },
                action: Action::Protect(TunnelId(0)),
            },
        ]);
        let d = spd.decide(&flow("10.1.0.10", "10.2.0.10", 17, Some(53)));
        assert_eq!(d.action, Action::Protect(TunnelId(0)));
        assert!(!d.by_default);
        let d = spd.decide(&flow("10.1.0.10", "10.2.0.10", 6, Some(22)));
        assert_eq!(d.action, Action::Discard);
        assert!(!d.by_default);
        // A port selector never matches a packet without ports.
        let d = spd.decide(&flow("10.1.0.10", "10.2.0.10", 6, None));
        assert_eq!(d.action, Action::Protect(TunnelId(0)));
        let d = spd.decide(&flow("10.1.0.10", "10.3.0.10", 17, Some(53)));
        assert_eq!(d.action, Action::Discard);
        assert!(d.by_default);
        // Families never cross.
        let d = spd.decide(&flow("fd00:1::1", "fd00:2::1", 17, Some(53)));
        assert!(d.by_default);
        // A tunnel id the snapshot does not hold is discarded, by a rule:
        // the worker's part (`protected_transit`), tested in
        // tests.rs (`protect_to_a_tunnel_the_snapshot_lacks_is_a_policy_discard`).
    }

    /// The cache answers exactly what the SPD does, for flows that collide
    /// in a tiny cache, both families, with and without ports, and after a
    /// clear; the fast paths' lookups (`lookup_v4`, `lookup_v6`) share the
    /// slots with `lookup`.
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
                action: Action::Protect(TunnelId(1)),
            },
            Rule {
                priority: 1,
                selector: Selector {
                    src: vec![prefix("fd00:1::/64")],
                    proto: Some(17),
                    ..wild.clone()
                },
                action: Action::Protect(TunnelId(0)),
            },
            Rule {
                priority: 2,
                selector: Selector {
                    dst: vec![prefix("10.2.0.0/24")],
                    ..wild.clone()
                },
                action: Action::Bypass,
            },
            Rule {
                priority: 3,
                selector: Selector {
                    dst: vec![prefix("10.3.0.0/16")],
                    ..wild
                },
                action: Action::Discard,
            },
        ];
        let spd = compiled(&rules);
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
                prop_assert_eq!(cache.lookup(&spd, &f.key()), spd.decide(&f.key()));
                // A second ask is a hit and must not differ either.
                prop_assert_eq!(cache.lookup(&spd, &f.key()), spd.decide(&f.key()));
                // The IPv4 fast path's lookup shares the slots: a hit on
                // what `lookup` stored, or a miss that stores for both.
                if let (IpAddr::V4(l), IpAddr::V4(r)) = (f.local, f.remote) {
                    let k = f.key();
                    let v4 = |c: &mut FlowCache| {
                        c.lookup_v4(&spd, l.into(), r.into(), proto, k.sport, k.dport)
                    };
                    prop_assert_eq!(v4(&mut cache), spd.decide(&k));
                    if i % 3 == 0 {
                        cache.clear();
                        prop_assert_eq!(v4(&mut cache), spd.decide(&k));
                        prop_assert_eq!(cache.lookup(&spd, &k), spd.decide(&k));
                    }
                }
                // The same for the IPv6 fast path's lookup.
                if let (IpAddr::V6(l), IpAddr::V6(r)) = (f.local, f.remote) {
                    let k = f.key();
                    let v6 = |c: &mut FlowCache| {
                        c.lookup_v6(&spd, l.into(), r.into(), proto, k.sport, k.dport)
                    };
                    prop_assert_eq!(v6(&mut cache), spd.decide(&k));
                    if i % 3 == 0 {
                        cache.clear();
                        prop_assert_eq!(v6(&mut cache), spd.decide(&k));
                        prop_assert_eq!(cache.lookup(&spd, &k), spd.decide(&k));
                    }
                }
            }
        });
    }
}
