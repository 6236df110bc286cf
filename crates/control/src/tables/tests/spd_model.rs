//! Property tests: the compiled [`Spd`] answers exactly like
//! [`linear_first_match`], and every rule [`unreachable_rules`] reports is
//! really unreachable.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use crate::tables::{
    linear_first_match, selector_covers, unreachable_rules, Action, FlowKey, IpPrefix, PortRange,
    Rule, RuleId, Selector, Spd, TunnelId,
};

// A small address universe so that random prefixes nest, overlap and
// collide often: 10.0.{0..3}.{0..7} and 2001:db8::{0..3}:{0..7}.
fn v4(a: u8, b: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, a, b))
}

fn v6(a: u8, b: u8) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, a as u16, b as u16))
}

fn addr() -> impl Strategy<Value = IpAddr> {
    (0u8..4, 0u8..8, 0u8..10).prop_map(|(a, b, f)| if f == 0 { v6(a, b) } else { v4(a, b) })
}

fn prefix() -> impl Strategy<Value = IpPrefix> {
    (addr(), 0usize..9).prop_map(|(ip, i)| {
        let len = match ip {
            IpAddr::V4(_) => [0, 8, 16, 22, 23, 24, 30, 31, 32][i],
            IpAddr::V6(_) => [0, 32, 64, 109, 110, 112, 126, 127, 128][i],
        };
        IpPrefix::new(ip, len)
    })
}

fn ports() -> impl Strategy<Value = PortRange> {
    prop_oneof![
        Just(PortRange::ANY),
        (0u16..8, 0u16..4).prop_map(|(lo, n)| PortRange::new(lo, lo + n).unwrap()),
    ]
}

fn selector() -> impl Strategy<Value = Selector> {
    (
        prop::collection::vec(prefix(), 0..3),
        prop::collection::vec(prefix(), 0..3),
        prop::option::of(prop_oneof![Just(6u8), Just(17u8)]),
        ports(),
        ports(),
    )
        .prop_map(|(src, dst, proto, sport, dport)| Selector {
            src,
            dst,
            proto,
            sport,
            dport,
        })
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        (0u32..8).prop_map(|t| Action::Protect(TunnelId(t))),
        Just(Action::Bypass),
        Just(Action::Discard),
    ]
}

fn rule() -> impl Strategy<Value = Rule> {
    (0u32..4, selector(), action()).prop_map(|(priority, selector, action)| Rule {
        priority,
        selector,
        action,
    })
}

fn key() -> impl Strategy<Value = FlowKey> {
    (
        (0u8..4, 0u8..8, 0u8..4, 0u8..8, 0u8..12),
        prop_oneof![Just(6u8), Just(17u8), Just(1u8)],
        0u16..10,
        0u16..10,
    )
        .prop_map(|((a, b, c, d, f), proto, sport, dport)| {
            // Mostly v4, some v6, a few impossible mixed-family keys.
            let (src, dst) = match f {
                0 | 1 => (v6(a, b), v6(c, d)),
                2 => (v4(a, b), v6(c, d)),
                _ => (v4(a, b), v4(c, d)),
            };
            FlowKey {
                src,
                dst,
                proto,
                sport,
                dport,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn compiled_spd_matches_linear_scan(
        rules in prop::collection::vec(rule(), 0..24),
        keys in prop::collection::vec(key(), 1..64),
    ) {
        let spd = Spd::new(&rules, Action::Discard);
        let mut burst = vec![Action::Bypass; keys.len()];
        spd.lookup_burst(&keys, &mut burst);
        for (k, from_burst) in keys.iter().zip(burst) {
            let want = linear_first_match(&rules, k);
            prop_assert_eq!(spd.matching_rule(k), want, "key {:?}", k);
            let want_action = want.map_or(Action::Discard, |id| rules[id.0 as usize].action);
            prop_assert_eq!(spd.lookup(k), want_action);
            prop_assert_eq!(from_burst, want_action);
        }
    }

    #[test]
    fn reported_rules_are_unreachable(
        rules in prop::collection::vec(rule(), 0..16),
        keys in prop::collection::vec(key(), 1..128),
    ) {
        for (shadowed, by) in unreachable_rules(&rules) {
            let (s, b) = (&rules[shadowed.0 as usize], &rules[by.0 as usize]);
            prop_assert!((b.priority, by) < (s.priority, shadowed));
            for k in &keys {
                if s.selector.matches(k) {
                    prop_assert!(b.selector.matches(k));
                }
                prop_assert_ne!(linear_first_match(&rules, k), Some(shadowed));
            }
        }
    }

    /// A copy of a rule with a narrower port range, consulted after it, is
    /// always found.
    #[test]
    fn narrowed_copies_are_found(
        mut rules in prop::collection::vec(rule(), 1..16),
        pick in any::<prop::sample::Index>(),
        port in 0u16..8,
    ) {
        let original = rules[pick.index(rules.len())].clone();
        let mut copy = original.clone();
        copy.selector.dport = PortRange::single(original.selector.dport.first.max(port).min(original.selector.dport.last));
        copy.priority = original.priority;
        let copy_id = RuleId(rules.len() as u32);
        rules.push(copy.clone());
        // A selector that matches no packet is not reported (see shadow.rs).
        prop_assume!(selector_covers(&copy.selector, &copy.selector));
        prop_assert!(unreachable_rules(&rules).iter().any(|&(s, _)| s == copy_id));
    }
}

#[test]
fn typical_gateway_policy() {
    let p = |s: &str| s.parse::<IpPrefix>().unwrap();
    let rules = vec![
        // IKE to the gateway itself, before everything.
        Rule {
            priority: 0,
            selector: Selector {
                proto: Some(17),
                dport: PortRange::single(500),
                ..Selector::default()
            },
            action: Action::Bypass,
        },
        Rule {
            priority: 100,
            selector: Selector {
                src: vec![p("10.1.0.0/24")],
                dst: vec![p("10.2.0.0/24"), p("10.3.0.0/16")],
                ..Selector::default()
            },
            action: Action::Protect(TunnelId(0)),
        },
        Rule {
            priority: 100,
            selector: Selector {
                src: vec![p("2001:db8:1::/48")],
                dst: vec![p("2001:db8:2::/48")],
                ..Selector::default()
            },
            action: Action::Protect(TunnelId(1)),
        },
        // Management network in the clear, whatever the destination.
        Rule {
            priority: 200,
            selector: Selector {
                src: vec![p("192.168.0.0/16")],
                ..Selector::default()
            },
            action: Action::Bypass,
        },
    ];
    let spd = Spd::new(&rules, Action::Discard);
    let k = |src: &str, dst: &str, proto, dport| FlowKey {
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        proto,
        sport: 40000,
        dport,
    };
    assert_eq!(
        spd.lookup(&k("10.1.0.5", "10.2.0.9", 6, 80)),
        Action::Protect(TunnelId(0))
    );
    assert_eq!(
        spd.lookup(&k("10.1.0.5", "10.3.200.9", 6, 80)),
        Action::Protect(TunnelId(0))
    );
    assert_eq!(
        spd.lookup(&k("10.1.0.5", "10.2.0.9", 17, 500)),
        Action::Bypass
    );
    assert_eq!(
        spd.lookup(&k("10.1.1.5", "10.2.0.9", 6, 80)),
        Action::Discard
    );
    assert_eq!(
        spd.lookup(&k("2001:db8:1::5", "2001:db8:2::7", 58, 0)),
        Action::Protect(TunnelId(1))
    );
    assert_eq!(
        spd.lookup(&k("192.168.3.3", "8.8.8.8", 6, 443)),
        Action::Bypass
    );
    assert_eq!(
        spd.matching_rule(&k("192.168.3.3", "8.8.8.8", 6, 443)),
        Some(RuleId(3))
    );
    assert_eq!(spd.matching_rule(&k("172.16.0.1", "8.8.8.8", 6, 443)), None);
    assert_eq!(spd.len(), 4);
}
