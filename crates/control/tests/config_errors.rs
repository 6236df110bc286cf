//! One test per class of config error: each asserts the exact line and key
//! path of the diagnostic.

mod common;
use common::*;

#[test]
fn base_config_is_valid() {
    let (config, warnings) = parse(&base()).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert!(warnings.is_empty(), "{}", render(&warnings));
    assert_eq!(config.tunnels[0].outbound.spi, 0x1001);
    assert_eq!(config.tunnels[0].outbound.key.expose()[0], 0x00);
    assert_eq!(config.tunnels[0].port.0, 1);
    assert_eq!(config.dataplane.workers, 2);
}

#[test]
fn toml_syntax_error_has_a_position() {
    let text = with(&base(), "mtu = 1500", "mtu = = 1500");
    let errs = errors(&text);
    assert!(
        errs[0]
            .to_string()
            .starts_with(&format!("test.toml:{}:", line_of(&text, "mtu ="))),
        "{}",
        render(&errs)
    );
    assert!(errs[0].message.contains("TOML syntax"));
}

#[test]
fn unknown_keys_are_named_with_what_is_allowed() {
    let text = with(&base(), "poll = \"busy\"", "poll = \"busy\"\nthreads = 4");
    let errs = errors(&text);
    assert_error(
        &errs,
        line_of(&text, "threads"),
        "dataplane.threads",
        "unknown key (expected one of: workers, lcores",
    );
    let text = with(&base(), "out = { spi", "out = { salt = 1, spi");
    assert_error(
        &errors(&text),
        line_of(&text, "salt"),
        "tunnel[0].out.salt",
        "unknown key",
    );
    let text = with(&base(), "[gateway]", "[gatway]\n[gateway]");
    assert_error(
        &errors(&text),
        line_of(&text, "gatway"),
        "gatway",
        "unknown key",
    );
}

#[test]
fn wrong_types_say_what_was_expected() {
    let text = with(&base(), "mtu = 1500", "mtu = \"1500\"");
    assert_error(
        &errors(&text),
        line_of(&text, "mtu"),
        "dataplane.mtu",
        "wrong type: got string (expected an integer in 576..=9000)",
    );
    let text = with(&base(), "[[tunnel]]", "[tunnel]");
    assert_error(
        &errors(&text),
        line_of(&text, "[tunnel]"),
        "tunnel",
        "expected an array of tables ([[tunnel]])",
    );
}

#[test]
fn bad_prefixes_addresses_and_macs() {
    let text = with(
        &base(),
        "local_ts = [\"10.1.0.0/24\"]",
        "local_ts = [\"10.1.0.7/24\"]",
    );
    assert_error(
        &errors(&text),
        line_of(&text, "local_ts"),
        "tunnel[0].local_ts[0]",
        "host bits set (did you mean 10.1.0.0/24?)",
    );
    let text = with(
        &base(),
        "remote = \"192.0.2.2\"",
        "remote = \"192.0.2.300\"",
    );
    assert_error(
        &errors(&text),
        line_of(&text, "remote ="),
        "tunnel[0].remote",
        "not an IP address",
    );
    let text = with(
        &base(),
        "address = \"10.1.0.1/24\"",
        "address = \"10.1.0.1/24\"\nmac = \"02:00:00:00:00\"",
    );
    assert_error(
        &errors(&text),
        line_of(&text, "mac ="),
        "port[0].mac",
        "not a MAC address",
    );
    let text = with(
        &base(),
        "address = \"10.1.0.1/24\"",
        "address = \"10.1.0.1/40\"",
    );
    assert_error(
        &errors(&text),
        line_of(&text, "10.1.0.1/40"),
        "port[0].address",
        "prefix length",
    );
}

#[test]
fn reserved_spis_are_refused() {
    for spi in ["0", "1", "255"] {
        let text = with(&base(), "spi = 0x1001", &format!("spi = {spi}"));
        assert_error(
            &errors(&text),
            line_of(&text, "out ="),
            "tunnel[0].out.spi",
            "reserved (RFC 4303",
        );
    }
    let text = with(&base(), "spi = 0x2001", "spi = 256");
    assert!(parse(&text).is_ok());
}

fn second_tunnel(name: &str, local_ts: &str, remote_ts: &str, in_spi: &str) -> String {
    format!(
        "\n[[tunnel]]\nname = \"{name}\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.3\"\nlocal_ts = [\"{local_ts}\"]\nremote_ts = [\"{remote_ts}\"]\nesp = \"aes256gcm16\"\nout = {{ spi = 0x3001, key = \"{}\" }}\nin = {{ spi = {in_spi}, key = \"{}\" }}\n",
        "11".repeat(36),
        "22".repeat(36)
    )
}

#[test]
fn inbound_spi_collisions() {
    let text = base() + &second_tunnel("t2", "10.1.0.0/24", "10.3.0.0/24", "0x2001");
    let errs = errors(&text);
    assert_error(
        &errs,
        line_of(&text, "in = { spi = 0x2001, key = \"2222"),
        "tunnel[1].in.spi",
        "inbound SPI 0x2001 is already used by tunnel \"t1\"",
    );
}

#[test]
fn key_length_must_match_the_suite_and_is_never_printed() {
    let text = with(&base(), "esp = \"aes128gcm16\"", "esp = \"aes256gcm16\"");
    let errs = errors(&text);
    assert_error(
        &errs,
        line_of(&text, "out ="),
        "tunnel[0].out.key",
        "wrong length for aes256gcm16: got 20 bytes (expected 36 bytes: 32-byte key + 4-byte salt)",
    );
    assert_error(
        &errs,
        line_of(&text, "in ="),
        "tunnel[0].in.key",
        "got 20 bytes",
    );
    let all = render(&errs);
    assert!(
        !all.contains(OUT_KEY) && !all.contains(IN_KEY) && !all.contains("00112233"),
        "{all}"
    );
}

#[test]
fn auth_key_missing_or_extra_for_the_suite() {
    let text = with(&base(), "esp = \"aes128gcm16\"", "esp = \"aes128-sha256\"");
    let text = with(&text, OUT_KEY, "00112233445566778899aabbccddeeff");
    let text = with(&text, IN_KEY, "ffeeddccbbaa99887766554433221100");
    let errs = errors(&text);
    assert_error(&errs, line_of(&text, "out ="), "tunnel[0].out", "missing auth_key: aes128-sha256 needs an integrity key (expected auth_key = \"<32 hex bytes>\")");
    let text = with(
        &base(),
        "out = { spi = 0x1001,",
        &format!("out = {{ auth_key = \"{}\", spi = 0x1001,", "ab".repeat(32)),
    );
    let errs = errors(&text);
    assert_error(
        &errs,
        line_of(&text, "out ="),
        "tunnel[0].out.auth_key",
        "AEAD suite and takes no auth_key",
    );
}

#[test]
fn tunnel_local_must_be_on_an_unprotected_subnet() {
    let text = with(&base(), "local = \"192.0.2.1\"", "local = \"10.1.0.1\"");
    assert_error(
        &errors(&text),
        line_of(&text, "local ="),
        "tunnel[0].local",
        "not on any unprotected port's subnet (expected an address in 192.0.2.0/24)",
    );
}

#[test]
fn tunnel_remote_must_be_reachable() {
    let text = with(
        &base(),
        "remote = \"192.0.2.2\"",
        "remote = \"203.0.113.9\"",
    );
    assert_error(
        &errors(&text),
        line_of(&text, "remote ="),
        "tunnel[0].remote",
        "nor covered by a [[route]]",
    );
    let text = with(
        &base(),
        "remote = \"192.0.2.2\"",
        "remote = \"198.51.100.9\"",
    );
    assert!(parse(&text).is_ok(), "a routed remote is fine");
}

#[test]
fn route_next_hop_must_be_on_the_port_subnet() {
    let text = with(&base(), "via = \"192.0.2.254\"", "via = \"192.0.3.254\"");
    assert_error(
        &errors(&text),
        line_of(&text, "via ="),
        "route[0].via",
        "next hop 192.0.3.254 is not on a subnet of port \"unprot\"",
    );
}

#[test]
fn unknown_port_references() {
    let text = with(&base(), "port = \"unprot\"", "port = \"wan\"");
    assert_error(
        &errors(&text),
        line_of(&text, "port = \"wan\""),
        "route[0].port",
        "no [[port]] named \"wan\" (expected one of: prot, unprot)",
    );
    let text = base()
        + "\n[[neighbor]]\naddress = \"10.1.0.9\"\nmac = \"02:00:00:00:00:09\"\nport = \"lan\"\n";
    assert_error(
        &errors(&text),
        line_of(&text, "port = \"lan\""),
        "neighbor[0].port",
        "no [[port]] named \"lan\"",
    );
}

#[test]
fn duplicate_names() {
    let text = with(&base(), "name = \"unprot\"", "name = \"prot\"");
    let text = with(&text, "port = \"unprot\"", "port = \"prot\"");
    let errs = errors(&text);
    assert_error(
        &errs,
        line_of(&text, "device = \"net_ring1\"") - 2,
        "port[1].name",
        "duplicate port name \"prot\" (first at line 11)",
    );
    let text = base() + &second_tunnel("t1", "10.1.0.0/24", "10.3.0.0/24", "0x4001");
    let errs = errors(&text);
    assert_error(
        &errs,
        line_of(
            &text,
            "name = \"t1\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.3\"",
        ),
        "tunnel[1].name",
        "duplicate tunnel name",
    );
}

#[test]
fn shadowed_tunnels_and_policies_are_unreachable() {
    // A /16 tunnel first makes a later /24 one with the same remote side unreachable.
    let text = with(
        &base(),
        "local_ts = [\"10.1.0.0/24\"]",
        "local_ts = [\"10.1.0.0/16\"]",
    );
    let text = with(
        &text,
        "address = \"10.1.0.1/24\"",
        "address = \"10.1.0.1/16\"",
    );
    let text = text + &second_tunnel("t2", "10.1.5.0/24", "10.2.0.0/24", "0x4001");
    let errs = errors(&text);
    let first = format!(
        "matched first by tunnel \"t1\" (line {})",
        line_of(&text, "[[tunnel]]")
    );
    assert_error(
        &errs,
        line_of(&text, "local_ts = [\"10.1.5.0/24\"]"),
        "tunnel[1].local_ts",
        &format!("unreachable: all its traffic is {first}"),
    );

    // A discard-everything policy before the tunnel shadows it; with a
    // higher priority number it does not.
    let policy = "\n[[policy]]\naction = \"discard\"\npriority = 10\n";
    let text = base() + policy;
    assert_error(
        &errors(&text),
        line_of(&text, "local_ts"),
        "tunnel[0].local_ts",
        "matched first by policy[0]",
    );
    let text = base() + &policy.replace("10", "2000");
    assert!(parse(&text).is_ok());

    let policies = "\n[[policy]]\naction = \"bypass\"\nproto = \"udp\"\n\n[[policy]]\naction = \"discard\"\nproto = \"udp\"\ndport = 53\n";
    let text = base() + policies;
    assert_error(
        &errors(&text),
        line_of(&text, "dport") - 3,
        "policy[1]",
        "unreachable: all its traffic is matched first by policy[0]",
    );
}

#[test]
fn partly_overlapping_tunnels_warn() {
    let text = base() + &second_tunnel("t2", "10.1.0.0/16", "10.2.0.0/24", "0x4001");
    let (_, warnings) = parse(&text).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert!(
        warnings
            .iter()
            .any(|w| w.key == "tunnel[1].local_ts" && w.message.contains("overlaps")),
        "{}",
        render(&warnings)
    );
}

#[test]
fn workers_cannot_exceed_the_given_lcores() {
    let text = with(&base(), "workers = 2", "workers = 3\nlcores = \"1-2\"");
    assert_error(
        &errors(&text),
        line_of(&text, "workers"),
        "dataplane.workers",
        "3 workers but lcores lists only 2 cores",
    );
    let text = with(
        &base(),
        "workers = 2",
        "workers = \"all\"\nlcores = \"1-3\"",
    );
    assert_eq!(parse(&text).unwrap().0.dataplane.workers, 3);
    let text = with(&base(), "workers = 2", "lcores = \"3-1\"");
    assert_error(
        &errors(&text),
        line_of(&text, "lcores"),
        "dataplane.lcores",
        "empty range",
    );
}

#[test]
fn mtu_range() {
    for bad in ["575", "9001", "0"] {
        let text = with(&base(), "mtu = 1500", &format!("mtu = {bad}"));
        assert_error(
            &errors(&text),
            line_of(&text, "mtu"),
            "dataplane.mtu",
            "out of range (expected an integer in 576..=9000)",
        );
    }
    let text = with(&base(), "mtu = 1500", "mtu = 1000");
    let text = with(
        &text,
        "address = \"10.1.0.1/24\"",
        "address = [\"10.1.0.1/24\", \"2001:db8:1::1/64\"]",
    );
    assert_error(
        &errors(&text),
        line_of(&text, "mtu"),
        "dataplane.mtu",
        "below the IPv6 minimum (expected 1280..=9000",
    );
}

#[test]
fn missing_required_keys_point_at_the_table() {
    let text = with(&base(), "esp = \"aes128gcm16\"\n", "");
    assert_error(
        &errors(&text),
        line_of(&text, "[[tunnel]]"),
        "tunnel[0].esp",
        "missing required key (expected an ESP suite name)",
    );
    let text = with(&base(), "esp = \"aes128gcm16\"", "esp = \"aes128gcm8\"");
    assert_error(
        &errors(&text),
        line_of(&text, "esp ="),
        "tunnel[0].esp",
        "unknown value \"aes128gcm8\" (expected one of: \"aes128gcm16\"",
    );
}

#[test]
fn every_error_in_a_file_is_reported() {
    let text = with(&base(), "mtu = 1500", "mtu = 99999");
    let text = with(&text, "poll = \"busy\"", "poll = \"sometimes\"");
    let text = with(&text, "spi = 0x1001", "spi = 7");
    let text = with(&text, "via = \"192.0.2.254\"", "via = \"192.0.3.254\"");
    let text = with(&text, "side = \"protected\"", "side = \"inside\"");
    let errs = errors(&text);
    assert_eq!(errs.len(), 5, "{}", render(&errs));
    let lines: Vec<usize> = errs.iter().filter_map(|d| d.line()).collect();
    let mut sorted = lines.clone();
    sorted.sort_unstable();
    assert_eq!(lines, sorted, "diagnostics come in file order");
}

#[test]
fn policies_need_ports_only_with_a_ported_protocol() {
    let text = base() + "\n[[policy]]\naction = \"bypass\"\nproto = \"icmp\"\ndport = 80\n";
    assert_error(
        &errors(&text),
        line_of(&text, "dport"),
        "policy[0].dport",
        "needs a protocol with ports",
    );
}

#[test]
fn both_port_sides_are_needed() {
    let text = with(&base(), "side = \"unprotected\"", "side = \"protected\"");
    let errs = errors(&text);
    assert!(
        errs.iter()
            .any(|d| d.key == "port" && d.message == "no [[port]] with side = \"unprotected\""),
        "{}",
        render(&errs)
    );
    // A port that failed to read is not also reported as a missing side.
    let text = with(&base(), "side = \"unprotected\"", "side = \"outside\"");
    let errs = errors(&text);
    assert!(!errs.iter().any(|d| d.key == "port"), "{}", render(&errs));
}

#[test]
fn eal_core_options_are_refused() {
    let text = with(
        &base(),
        "poll = \"busy\"",
        "eal = [\"--no-huge\", \"-l\", \"--lcores=1-3\"]",
    );
    let errs = errors(&text);
    let line = line_of(&text, "eal =");
    assert_error(&errs, line, "dataplane.eal[1]", "\"-l\" chooses cores");
    assert_error(
        &errs,
        line,
        "dataplane.eal[2]",
        "\"--lcores\" chooses cores",
    );
    assert_eq!(errs.len(), 2, "{}", render(&errs));
}

#[test]
fn packet_lifetimes_beyond_32_bit_sequence_numbers_warn_without_esn() {
    let text = with(
        &base(),
        "esp = \"aes128gcm16\"",
        "esp = \"aes128gcm16\"\nlifetime = { packets = 0x1_0000_0000 }",
    );
    let (_, warnings) = parse(&text).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert!(
        warnings
            .iter()
            .any(|w| w.key == "tunnel[0].lifetime.packets"),
        "{}",
        render(&warnings)
    );
    let text = with(
        &text,
        "esp = \"aes128gcm16\"",
        "esp = \"aes128gcm16\"\nesn = true",
    );
    assert!(parse(&text).unwrap().1.is_empty());
}

#[test]
fn soft_lifetimes_must_stay_below_hard_ones() {
    let text = with(
        &base(),
        "esp = \"aes128gcm16\"",
        "esp = \"aes128gcm16\"\nlifetime = { seconds = 100, soft_seconds = 100 }",
    );
    assert_error(
        &errors(&text),
        line_of(&text, "lifetime"),
        "tunnel[0].lifetime.soft_seconds",
        "soft limit 100 is not below the hard limit 100",
    );
    let text = with(
        &base(),
        "esp = \"aes128gcm16\"",
        "esp = \"aes128gcm16\"\nlifetime = { bytes = 1000, soft_bytes = 10 }",
    );
    let lt = parse(&text).unwrap().0.tunnels[0].lifetime;
    assert_eq!((lt.hard.bytes, lt.soft.bytes), (Some(1000), Some(10)));
    let text = with(
        &base(),
        "esp = \"aes128gcm16\"",
        "esp = \"aes128gcm16\"\nlifetime = { seconds = 0 }",
    );
    assert_error(
        &errors(&text),
        line_of(&text, "lifetime"),
        "tunnel[0].lifetime.seconds",
        "out of range",
    );
}

/// The warning for `key` (exactly one), as printed.
fn warning_for(text: &str, key: &str) -> String {
    let (_, warnings) = parse(text).unwrap_or_else(|d| panic!("{}", render(&d)));
    let found: Vec<_> = warnings.iter().filter(|w| w.key == key).collect();
    assert_eq!(found.len(), 1, "{}", render(&warnings));
    found[0].to_string()
}

#[test]
fn metrics_on_a_non_loopback_address_warn() {
    for addr in ["0.0.0.0:9100", "192.0.2.1:9100", "[::]:9100"] {
        let text = with(
            &base(),
            "name = \"gw-test\"",
            &format!("name = \"gw-test\"\nmetrics = \"{addr}\""),
        );
        let w = warning_for(&text, "gateway.metrics");
        assert!(
            w.starts_with(&format!(
                "warning: test.toml:{}:",
                line_of(&text, "metrics")
            )),
            "{w}"
        );
        assert!(w.contains("is not a loopback address"), "{w}");
    }
    for addr in ["127.0.0.1:9100", "127.9.9.9:9100", "[::1]:9100"] {
        let text = with(
            &base(),
            "name = \"gw-test\"",
            &format!("name = \"gw-test\"\nmetrics = \"{addr}\""),
        );
        let (_, warnings) = parse(&text).unwrap();
        assert!(warnings.is_empty(), "{addr}: {}", render(&warnings));
    }
}

#[test]
fn a_zero_replay_window_warns() {
    let text = with(
        &base(),
        "esp = \"aes128gcm16\"",
        "esp = \"aes128gcm16\"\nreplay_window = 0",
    );
    let w = warning_for(&text, "tunnel[0].replay_window");
    assert!(
        w.contains(&format!("test.toml:{}:", line_of(&text, "replay_window"))),
        "{w}"
    );
    assert!(w.contains("turns anti-replay off"), "{w}");
    let text = with(&text, "replay_window = 0", "replay_window = 32");
    assert!(parse(&text).unwrap().1.is_empty());
}

#[test]
fn control_group_is_a_name_or_a_gid() {
    let text = |v: &str| {
        with(
            &base(),
            "name = \"gw-test\"",
            &format!("name = \"gw-test\"\ncontrol_group = {v}"),
        )
    };
    assert_eq!(
        parse(&text("4242")).unwrap().0.gateway.control_group,
        Some(4242)
    );
    // Every Linux system has group "root" (gid 0), which is refused.
    let t = text("\"root\"");
    assert_error(
        &errors(&t),
        line_of(&t, "control_group"),
        "gateway.control_group",
        "group 0 (root) may not be the control group",
    );
    let t = text("\"no-such-group-espgw\"");
    assert_error(
        &errors(&t),
        line_of(&t, "control_group"),
        "gateway.control_group",
        "no group \"no-such-group-espgw\" in /etc/group",
    );
    let t = text("-1");
    assert_error(
        &errors(&t),
        line_of(&t, "control_group"),
        "gateway.control_group",
        "out of range",
    );
    assert_eq!(parse(&base()).unwrap().0.gateway.control_group, None);
}

#[test]
fn ike_retransmission_keys_default_and_are_range_checked() {
    let (config, _) = parse(&base()).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert_eq!(
        (
            config.gateway.ike_retransmit_ms,
            config.gateway.ike_retransmit_tries
        ),
        (4000, 5)
    );
    let text = with(
        &base(),
        "[gateway]",
        "[gateway]\nike_retransmit_ms = 500\nike_retransmit_tries = 2",
    );
    let (config, _) = parse(&text).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert_eq!(
        (
            config.gateway.ike_retransmit_ms,
            config.gateway.ike_retransmit_tries
        ),
        (500, 2)
    );
    let text = with(&base(), "[gateway]", "[gateway]\nike_retransmit_ms = 99");
    assert_error(
        &errors(&text),
        line_of(&text, "ike_retransmit_ms"),
        "gateway.ike_retransmit_ms",
        "",
    );
    let text = with(&base(), "[gateway]", "[gateway]\nike_retransmit_tries = 21");
    assert_error(
        &errors(&text),
        line_of(&text, "ike_retransmit_tries"),
        "gateway.ike_retransmit_tries",
        "",
    );
}
