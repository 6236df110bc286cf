//! SPD lookup cost as the number of tunnels grows.
//!
//! `cargo bench -p espgw-control --bench spd`
//!
//! Each tunnel is one Protect rule whose local_ts (source) is a distinct
//! /24 and whose remote_ts (destination) is a distinct /24 (even tunnels)
//! or /32 (odd tunnels), plus a few bypass/discard policies in front (IKE
//! bypass for any address, a telnet discard, a management bypass by
//! source). Lookups are for packets spread over all tunnels in random
//! order, so larger tables also pay their cache misses. Prints the median
//! ns per lookup over several runs, and the ratio to the 1-tunnel case.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use espgw_control::tables::{
    unreachable_rules, Action, Family, FlowKey, IpPrefix, PortRange, Rule, SadBuilder, Selector,
    Spd, TunnelId,
};

const TUNNEL_COUNTS: [u32; 4] = [1, 100, 10_000, 100_000];
const KEYS: usize = 4096;
const RUNS: usize = 11;
const LOOKUPS_PER_RUN: usize = 2_000_000;

/// xorshift64*: reproducible spread of packets over tunnels and hosts.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Addresses of tunnel `i` in `family`: (local network, remote network,
/// remote prefix length).
fn tunnel_nets(family: Family, i: u32) -> (IpPrefix, IpPrefix) {
    let i = i as u128;
    let (local, remote, remote_len) = match family {
        // 16.0.0.0/4 for local /24s, 32.0.0.0/4 for remote /24s, 48.0.0.0/4
        // for remote /32s: room for a million tunnels each.
        Family::V4 => {
            let remote = if i & 1 == 0 {
                (0x2000_0000 | (i << 8), 24)
            } else {
                (0x3000_0000 | i, 32)
            };
            (
                IpAddr::V4(Ipv4Addr::from((0x1000_0000 | (i << 8)) as u32)),
                IpAddr::V4(Ipv4Addr::from(remote.0 as u32)),
                remote.1,
            )
        }
        // Same shape in 2001:db8::/32: /120s and /128s.
        Family::V6 => {
            let base = 0x2001_0db8u128 << 96;
            let remote = if i & 1 == 0 {
                (base | (2 << 64) | (i << 8), 120)
            } else {
                (base | (3 << 64) | i, 128)
            };
            (
                IpAddr::V6(Ipv6Addr::from(base | (1 << 64) | (i << 8))),
                IpAddr::V6(Ipv6Addr::from(remote.0)),
                remote.1,
            )
        }
    };
    let local_len = family.width() - 8;
    (
        IpPrefix::new(local, local_len),
        IpPrefix::new(remote, remote_len),
    )
}

fn policy(priority: u32, selector: Selector, action: Action) -> Rule {
    Rule {
        priority,
        selector,
        action,
    }
}

fn rules(family: Family, tunnels: u32) -> Vec<Rule> {
    let mut rules = vec![
        policy(
            0,
            Selector {
                proto: Some(17),
                dport: PortRange::single(500),
                ..Selector::default()
            },
            Action::Bypass,
        ),
        policy(
            0,
            Selector {
                proto: Some(17),
                dport: PortRange::single(4500),
                ..Selector::default()
            },
            Action::Bypass,
        ),
        policy(
            10,
            Selector {
                proto: Some(6),
                dport: PortRange::single(23),
                ..Selector::default()
            },
            Action::Discard,
        ),
        policy(
            200,
            Selector {
                src: vec![
                    "192.168.0.0/16".parse().unwrap(),
                    "fd00::/8".parse().unwrap(),
                ],
                ..Selector::default()
            },
            Action::Bypass,
        ),
    ];
    for i in 0..tunnels {
        let (local, remote) = tunnel_nets(family, i);
        rules.push(policy(
            100,
            Selector {
                src: vec![local],
                dst: vec![remote],
                ..Selector::default()
            },
            Action::Protect(TunnelId(i)),
        ));
    }
    rules
}

/// Packets of random tunnels, with random hosts inside their networks.
fn keys(family: Family, tunnels: u32, rng: &mut Rng) -> Vec<(FlowKey, TunnelId)> {
    (0..KEYS)
        .map(|_| {
            let t = (rng.next() % tunnels as u64) as u32;
            let (local, remote) = tunnel_nets(family, t);
            let host = |p: IpPrefix, r: u64| -> IpAddr {
                let spare = family.width() - p.prefix_len();
                let bits = if spare == 0 {
                    0
                } else {
                    r as u128 & ((1u128 << spare) - 1)
                };
                match p.addr() {
                    IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a) | bits as u32)),
                    IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a) | bits)),
                }
            };
            let key = FlowKey {
                src: host(local, rng.next()),
                dst: host(remote, rng.next()),
                proto: 6,
                sport: 1024 + (rng.next() % 60000) as u16,
                dport: 443,
            };
            (key, TunnelId(t))
        })
        .collect()
}

/// ns per lookup, one run.
fn run_once(spd: &Spd, keys: &[FlowKey]) -> f64 {
    let rounds = LOOKUPS_PER_RUN / keys.len();
    let start = Instant::now();
    for _ in 0..rounds {
        for key in keys {
            black_box(spd.lookup(black_box(key)));
        }
    }
    start.elapsed().as_nanos() as f64 / (rounds * keys.len()) as f64
}

/// ns per lookup, one run, through `lookup_burst` in bursts of 32.
fn run_once_burst(spd: &Spd, keys: &[FlowKey]) -> f64 {
    let rounds = LOOKUPS_PER_RUN / keys.len();
    let mut actions = [Action::Discard; 32];
    let start = Instant::now();
    for _ in 0..rounds {
        for burst in keys.chunks(32) {
            spd.lookup_burst(black_box(burst), &mut actions);
            black_box(&actions);
        }
    }
    start.elapsed().as_nanos() as f64 / (rounds * keys.len()) as f64
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

struct Case {
    tunnels: u32,
    spd: Spd,
    keys: Vec<FlowKey>,
    build_ms: f64,
    samples: Vec<f64>,
    burst_samples: Vec<f64>,
}

fn case(family: Family, tunnels: u32) -> Case {
    let rules = rules(family, tunnels);
    let built = Instant::now();
    let spd = Spd::new(&rules, Action::Discard);
    let build_ms = built.elapsed().as_secs_f64() * 1e3;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ tunnels as u64);
    let flows = keys(family, tunnels, &mut rng);
    // The benchmark only means something if the answers are right.
    for (key, tunnel) in &flows {
        assert_eq!(spd.lookup(key), Action::Protect(*tunnel), "{key:?}");
    }
    let keys: Vec<FlowKey> = flows.iter().map(|(k, _)| *k).collect();
    let mut actions = vec![Action::Discard; keys.len()];
    spd.lookup_burst(&keys, &mut actions);
    assert!(flows
        .iter()
        .zip(&actions)
        .all(|((_, tunnel), action)| *action == Action::Protect(*tunnel)));
    Case {
        tunnels,
        spd,
        keys,
        build_ms,
        samples: Vec::new(),
        burst_samples: Vec::new(),
    }
}

fn main() {
    println!(
        "SPD lookup: median of {RUNS} runs of {LOOKUPS_PER_RUN} lookups over {KEYS} random flows"
    );
    println!("(runs interleaved across table sizes, so machine load hits all sizes alike)");
    println!("single: one lookup() per key; burst: lookup_burst() over 32 keys at a time");
    println!(
        "{:>8} {:>6} {:>10} {:>7} {:>10} {:>7} {:>7} {:>9}",
        "tunnels", "family", "single ns", "ratio", "burst ns", "ratio", "probes", "build ms"
    );
    for family in Family::ALL {
        let mut cases: Vec<Case> = TUNNEL_COUNTS.iter().map(|&n| case(family, n)).collect();
        for _ in 0..RUNS {
            for case in &mut cases {
                let ns = run_once(&case.spd, &case.keys);
                case.samples.push(ns);
                let ns = run_once_burst(&case.spd, &case.keys);
                case.burst_samples.push(ns);
            }
        }
        let base = median(cases[0].samples.clone());
        let burst_base = median(cases[0].burst_samples.clone());
        for case in &cases {
            let ns = median(case.samples.clone());
            let burst_ns = median(case.burst_samples.clone());
            println!(
                "{:>8} {:>6} {:>10.1} {:>7.2} {:>10.1} {:>7.2} {:>7} {:>9.1}",
                case.tunnels,
                format!("{family:?}"),
                ns,
                ns / base,
                burst_ns,
                burst_ns / burst_base,
                case.spd.probe_depth(family),
                case.build_ms
            );
        }
    }
    sad_inbound();
    // What the config checker pays for the shadowed-rule check.
    for family in Family::ALL {
        let rules = rules(family, 100_000);
        let start = Instant::now();
        let shadowed = unreachable_rules(&rules);
        println!(
            "unreachable_rules over {} {family:?} rules: {:.0} ms ({} shadowed)",
            rules.len(),
            start.elapsed().as_secs_f64() * 1e3,
            shadowed.len()
        );
    }
}

/// Inbound SA lookup by (SPI, destination), the per-packet SAD operation.
fn sad_inbound() {
    let gateway = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    println!("SAD inbound lookup (SPI + destination), random SPIs of existing SAs");
    for count in TUNNEL_COUNTS {
        let mut builder = SadBuilder::new();
        for i in 0..count {
            builder
                .insert_inbound(0x1000 + i, gateway, std::sync::Arc::new(i))
                .unwrap();
        }
        let sad = builder.build();
        let mut rng = Rng(0x1234_5678 ^ count as u64);
        let spis: Vec<u32> = (0..KEYS)
            .map(|_| 0x1000 + (rng.next() % count as u64) as u32)
            .collect();
        let rounds = LOOKUPS_PER_RUN / spis.len();
        let samples = (0..RUNS)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..rounds {
                    for &spi in &spis {
                        black_box(sad.inbound(black_box(spi), gateway));
                    }
                }
                start.elapsed().as_nanos() as f64 / (rounds * spis.len()) as f64
            })
            .collect();
        println!("{count:>8} SAs {:>8.1} ns/lookup", median(samples));
    }
}
