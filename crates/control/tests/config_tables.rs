//! From config to tables: the SPD rules and SAD entries a config produces,
//! checked against the shipped demo configs and against an independent
//! reading of the config's first-match meaning.

mod common;
use common::*;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use espgw_control::config::net::Prefix;
use espgw_control::config::{
    load_with, sad_from_config, spd_from_config, tables_from_config, Config,
    PolicyAction as ConfigAction, SadFromConfigError, DEFAULT_PRIORITY,
};
use espgw_control::tables::{
    linear_first_match, Action, FlowKey, PortRange, Rule, SadError, Selector, Spd, TunnelId,
};
use espgw_esp::{ConfigError, InboundSa, OutboundSa};

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

fn load_repo(rel: &str) -> Config {
    load_with(&repo_file(rel), &host())
        .unwrap_or_else(|d| panic!("{}", render(&d)))
        .0
}

fn p(s: &str) -> Prefix {
    Prefix::parse(s).unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn key(src: &str, dst: &str, proto: u8, sport: u16, dport: u16) -> FlowKey {
    FlowKey {
        src: ip(src),
        dst: ip(dst),
        proto,
        sport,
        dport,
    }
}

/// The engine's two SA types under one SAD, as the gateway needs them.
enum EngineSa {
    Out(OutboundSa),
    In(InboundSa),
}

/// The SAD of a config with real ESP engine SAs, built from the config's
/// own `outbound_sa()` / `inbound_sa()`.
fn engine_sad(
    cfg: &Config,
) -> Result<espgw_control::tables::SadBuilder<EngineSa>, SadFromConfigError<ConfigError>> {
    sad_from_config(
        cfg,
        |_, t| {
            Ok(Arc::new(EngineSa::Out(OutboundSa::new(
                &t.outbound_sa(),
                0,
            )?)))
        },
        |_, t| Ok(Arc::new(EngineSa::In(InboundSa::new(&t.inbound_sa(), 0)?))),
    )
}

#[test]
fn static_configs_give_one_protect_rule_and_both_sas() {
    for (file, local_ts, remote_ts, local, out_spi, in_spi) in [
        (
            "configs/static-a.toml",
            "10.1.0.0/24",
            "10.2.0.0/24",
            "192.0.2.1",
            0xa001,
            0xb001,
        ),
        (
            "configs/static-b.toml",
            "10.2.0.0/24",
            "10.1.0.0/24",
            "192.0.2.2",
            0xb001,
            0xa001,
        ),
    ] {
        let cfg = load_repo(file);
        let (rules, default) = tables_from_config(&cfg);
        assert_eq!(
            rules,
            vec![Rule {
                priority: DEFAULT_PRIORITY,
                selector: Selector {
                    src: vec![p(local_ts)],
                    dst: vec![p(remote_ts)],
                    proto: None,
                    sport: PortRange::ANY,
                    dport: PortRange::ANY,
                },
                action: Action::Protect(TunnelId(0)),
            }],
            "{file}"
        );
        assert_eq!(default, Action::Discard, "{file}");

        // Outbound traffic of the protected subnet goes into tunnel 0; the
        // reverse direction and anything else is discarded.
        let spd = spd_from_config(&cfg);
        let host_of = |prefix: &str| prefix.replace("0/24", "7");
        let out = key(&host_of(local_ts), &host_of(remote_ts), 6, 40000, 443);
        assert_eq!(spd.lookup(&out), Action::Protect(TunnelId(0)), "{file}");
        assert_eq!(spd.lookup(&out.reversed()), Action::Discard, "{file}");

        let sad = engine_sad(&cfg)
            .unwrap_or_else(|e| panic!("{file}: {e}"))
            .build();
        let Some(EngineSa::Out(sa)) = sad.outbound_sa(TunnelId(0)).map(|a| &**a) else {
            panic!("{file}: no outbound SA for tunnel 0");
        };
        assert_eq!(sa.spi(), out_spi, "{file}");
        let Some(EngineSa::In(sa)) = sad.inbound_sa(in_spi, ip(local)).map(|a| &**a) else {
            panic!("{file}: no inbound SA for SPI {in_spi:#x} to {local}");
        };
        assert_eq!(sa.spi(), in_spi, "{file}");
        // Only the tunnel's own SPI, to its own address, finds it.
        assert!(sad.inbound_sa(out_spi, ip(local)).is_none(), "{file}");
        assert!(sad.inbound_sa(in_spi, ip("192.0.2.9")).is_none(), "{file}");
        assert_eq!(sad.sas().len(), 2, "{file}");
    }
}

#[test]
fn sa_constructor_errors_name_the_tunnel_and_direction() {
    let cfg = parse(&base()).unwrap().0;
    let err = sad_from_config::<(), _>(&cfg, |_, _| Ok(Arc::new(())), |_, _| Err("no"))
        .err()
        .unwrap();
    assert_eq!(err.to_string(), "tunnel \"t1\": inbound SA: no");

    // A config built by hand can hold a reserved SPI; the SAD refuses it.
    let mut bad = cfg.clone();
    bad.tunnels[0].inbound.spi = 7;
    let err = sad_from_config::<(), &str>(&bad, |_, _| Ok(Arc::new(())), |_, _| Ok(Arc::new(())))
        .err()
        .unwrap();
    assert!(matches!(
        err,
        SadFromConfigError::Table {
            error: SadError::ReservedSpi(7),
            ..
        }
    ));
}

/// A `[[tunnel]]` named `tN` from the base config's address to 192.0.2.(N+1),
/// with SPIs 0x100N (out) and 0x200N (in); `extra` is one more line or "".
fn tunnel(name: &str, local_ts: &[&str], remote_ts: &[&str], extra: &str) -> String {
    let n = &name[1..];
    let peer: u8 = n.parse::<u8>().unwrap() + 1;
    // A key of its own per SA (the config refuses a key used twice).
    let out_key = format!("{}{:02x}", &OUT_KEY[..OUT_KEY.len() - 2], 0x80 + peer);
    let in_key = format!("{}{:02x}", &IN_KEY[..IN_KEY.len() - 2], 0x80 + peer);
    format!(
        "\n[[tunnel]]\nname = \"{name}\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.{peer}\"\n\
         local_ts = {local_ts:?}\nremote_ts = {remote_ts:?}\nesp = \"aes128gcm16\"\n{extra}\n\
         out = {{ spi = 0x100{n}, key = \"{out_key}\" }}\nin = {{ spi = 0x200{n}, key = \"{in_key}\" }}\n"
    )
}

/// Tunnels (IPv4 and IPv6 selectors, several priorities) and policies
/// (protocols, port ranges) that interleave in the SPD.
fn mixed_config() -> String {
    let text = with(
        &base(),
        "default_action = \"discard\"",
        "default_action = \"bypass\"",
    );
    text + &tunnel(
        "t2",
        &["10.1.0.0/24", "fd00:1::/64"],
        &["10.3.0.0/16", "fd00:3::/48"],
        "",
    ) + &tunnel("t3", &["10.1.0.128/25"], &["10.2.0.0/23"], "priority = 500")
        + r#"
[[policy]]
action = "bypass"
proto = "udp"
dport = 53
priority = 100

[[policy]]
action = "discard"
src = "10.1.0.0/16"
proto = "tcp"
dport = "20-23"
priority = 200

[[policy]]
action = "bypass"
dst = "fd00:3::/48"
proto = "icmpv6"
priority = 1500

[[policy]]
action = "discard"
proto = "tcp"
sport = "1000-2000"
priority = 900
"#
}

/// The config's meaning, read straight from its tunnels and policies: the
/// first entry (by priority, then file order: here every tunnel is written
/// before every policy) whose fields all match decides.
fn config_meaning(cfg: &Config, k: &FlowKey) -> Action {
    let in_list = |list: &[Prefix], a: IpAddr| list.iter().any(|p| p.contains(a));
    let in_opt = |p: &Option<Prefix>, a: IpAddr| p.is_none_or(|p| p.contains(a));
    let in_ports =
        |r: &Option<PortRange>, port: u16| r.is_none_or(|r| r.first <= port && port <= r.last);
    let mut entries: Vec<(u32, usize, Action, bool)> = Vec::new();
    for (i, t) in cfg.tunnels.iter().enumerate() {
        let hit = in_list(&t.local_ts, k.src) && in_list(&t.remote_ts, k.dst);
        entries.push((t.priority, i, Action::Protect(TunnelId(i as u32)), hit));
    }
    for (i, pol) in cfg.policies.iter().enumerate() {
        let hit = in_opt(&pol.src, k.src)
            && in_opt(&pol.dst, k.dst)
            && pol.proto.is_none_or(|proto| proto == k.proto)
            && in_ports(&pol.sport, k.sport)
            && in_ports(&pol.dport, k.dport);
        let action = match pol.action {
            ConfigAction::Bypass => Action::Bypass,
            ConfigAction::Discard => Action::Discard,
        };
        entries.push((pol.priority, cfg.tunnels.len() + i, action, hit));
    }
    entries.sort_by_key(|e| (e.0, e.1));
    entries.iter().find(|e| e.3).map_or(Action::Bypass, |e| e.2)
}

/// Addresses at the edges of every prefix the config names, and outside.
fn sample_addresses(cfg: &Config) -> Vec<IpAddr> {
    let mut prefixes: Vec<Prefix> = Vec::new();
    for t in &cfg.tunnels {
        prefixes.extend(&t.local_ts);
        prefixes.extend(&t.remote_ts);
    }
    for pol in &cfg.policies {
        prefixes.extend(pol.src.iter().chain(&pol.dst));
    }
    let mut out: Vec<IpAddr> = ["10.9.9.9", "10.1.1.1", "fd00:9::1", "fd00:1:0:1::1"]
        .iter()
        .map(|s| ip(s))
        .collect();
    for prefix in prefixes {
        let (base, width): (u128, u32) = match prefix.addr() {
            IpAddr::V4(a) => (u32::from(a).into(), 32),
            IpAddr::V6(a) => (u128::from(a), 128),
        };
        let host_bits = width - u32::from(prefix.prefix_len());
        let last = base | ((1u128 << host_bits) - 1);
        for bits in [base, base + 1, last, last.wrapping_add(1)] {
            out.push(match prefix.addr() {
                IpAddr::V4(_) => IpAddr::V4((bits as u32).into()),
                IpAddr::V6(_) => IpAddr::V6(bits.into()),
            });
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn compiled_spd_linear_scan_and_config_meaning_agree() {
    let (cfg, _warnings) = parse(&mixed_config()).unwrap_or_else(|d| panic!("{}", render(&d)));
    let (rules, default) = tables_from_config(&cfg);
    assert_eq!(default, Action::Bypass);
    assert_eq!(rules.len(), 7);
    let spd = Spd::new(&rules, default);

    let addresses = sample_addresses(&cfg);
    let mut checked = 0;
    let mut seen = std::collections::HashSet::new();
    for &src in &addresses {
        for &dst in addresses.iter().filter(|d| d.is_ipv4() == src.is_ipv4()) {
            for proto in [1u8, 6, 17, 58] {
                for sport in [0u16, 999, 1000, 2000, 40000] {
                    for dport in [0u16, 20, 23, 24, 53, 443] {
                        let k = FlowKey {
                            src,
                            dst,
                            proto,
                            sport,
                            dport,
                        };
                        let linear = linear_first_match(&rules, &k)
                            .map_or(default, |id| rules[id.0 as usize].action);
                        let compiled = spd.lookup(&k);
                        assert_eq!(compiled, linear, "{k:?}");
                        assert_eq!(compiled, config_meaning(&cfg, &k), "{k:?}");
                        seen.insert(compiled);
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 10_000, "{checked}");
    // Every tunnel, both policy actions and the default are exercised.
    for action in [
        Action::Protect(TunnelId(0)),
        Action::Protect(TunnelId(1)),
        Action::Protect(TunnelId(2)),
        Action::Bypass,
        Action::Discard,
    ] {
        assert!(seen.contains(&action), "{action:?} never decided");
    }

    // Some decisions worked out by hand.
    let cases = [
        // DNS is bypassed before any tunnel (priority 100).
        (key("10.1.0.7", "10.2.0.9", 17, 5000, 53), Action::Bypass),
        // Telnet from 10.1/16 is discarded (priority 200) ...
        (key("10.1.0.7", "10.2.0.9", 6, 5000, 23), Action::Discard),
        // ... t3 (priority 500) takes the upper half of 10.1.0.0/24 ...
        (
            key("10.1.0.200", "10.2.1.9", 6, 5000, 443),
            Action::Protect(TunnelId(2)),
        ),
        // ... TCP from ports 1000-2000 is discarded (900) before t1 (1000) ...
        (key("10.1.0.7", "10.2.0.9", 6, 1500, 443), Action::Discard),
        (
            key("10.1.0.7", "10.2.0.9", 6, 2001, 443),
            Action::Protect(TunnelId(0)),
        ),
        // ... and t2 protects IPv6 too; unmatched traffic is bypassed.
        (
            key("fd00:1::5", "fd00:3::5", 58, 0, 0),
            Action::Protect(TunnelId(1)),
        ),
        (key("fd00:9::5", "fd00:3::5", 58, 0, 0), Action::Bypass),
        (key("10.9.0.1", "10.2.0.9", 6, 5000, 443), Action::Bypass),
    ];
    for (k, want) in cases {
        assert_eq!(spd.lookup(&k), want, "{k:?}");
    }

    // Every tunnel's SAs: outbound by id, inbound by (SPI, local).
    let sad = sad_from_config::<(u32, bool), &str>(
        &cfg,
        |_, t| Ok(Arc::new((t.outbound.spi, false))),
        |_, t| Ok(Arc::new((t.inbound.spi, true))),
    )
    .unwrap()
    .build();
    for (i, t) in cfg.tunnels.iter().enumerate() {
        let id = TunnelId(i as u32);
        assert_eq!(**sad.outbound_sa(id).unwrap(), (t.outbound.spi, false));
        assert_eq!(
            **sad.inbound_sa(t.inbound.spi, t.local).unwrap(),
            (t.inbound.spi, true)
        );
    }
    assert_eq!(sad.sas().len(), 2 * cfg.tunnels.len());
}

#[test]
fn a_tunnel_covered_by_the_union_of_an_earlier_ones_prefixes_is_unreachable() {
    // The two /25 halves of t2 cover t3's /24: no one prefix does.
    let text = base()
        + &tunnel(
            "t2",
            &["10.1.0.0/25", "10.1.0.128/25"],
            &["10.3.0.0/24"],
            "",
        )
        + &tunnel("t3", &["10.1.0.0/24"], &["10.3.0.0/24"], "");
    let t2 = line_of(&text, "name = \"t2\"") - 1;
    assert_error(
        &errors(&text),
        line_of(&text, "local_ts = [\"10.1.0.0/24\"]\nremote_ts = [\"10.3"),
        "tunnel[2].local_ts",
        &format!("unreachable: all its traffic is matched first by tunnel \"t2\" (line {t2})"),
    );
}

#[test]
fn a_tunnel_whose_pairs_are_covered_by_different_entries_is_unreachable() {
    // t3's IPv4 pair is t1's, its IPv6 pair is taken by a discard policy;
    // the error names them in the order of t3's pairs.
    let text = base()
        + r#"
[[policy]]
action = "discard"
dst = "fd00:2::/48"
priority = 10

"# + &tunnel(
        "t3",
        &["10.1.0.0/24", "fd00:1::/64"],
        &["10.2.0.0/24", "fd00:2::/48"],
        "",
    );
    let errs = errors(&text);
    assert_error(
        &errs,
        line_of(&text, "local_ts = [\"10.1.0.0/24\", \"fd00"),
        "tunnel[1].local_ts",
        &format!(
            "matched first by tunnel \"t1\" (line {}), policy[0] (line {})",
            line_of(&text, "[[tunnel]]"),
            line_of(&text, "[[policy]]")
        ),
    );
}
