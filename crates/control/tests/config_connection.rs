//! `[[connection]]` / `[[connection.child]]`: the valid form with its
//! defaults, and one test per error, each asserting the line and key path.

mod common;
use common::*;

use espgw_control::config::connection::{IkeAuth, IkeId, StartAction};
use espgw_control::config::Summary;

const PSK: &str = "a-long-random-pre-shared-key-0123";

/// The base config with tunnel t1's selectors moved out of the way and a
/// connection "c" protecting 10.1.0.0/24 <-> 10.2.0.0/24.
fn with_connection(conn_lines: &str, child_lines: &str) -> String {
    let base = with(
        &base(),
        "remote_ts = [\"10.2.0.0/24\"]",
        "remote_ts = [\"10.9.0.0/24\"]",
    );
    format!(
        "{base}\n[[connection]]\nname = \"c\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\n\
         psk = \"{PSK}\"\n{conn_lines}\n\n[[connection.child]]\nname = \"net\"\n\
         local_ts = [\"10.1.0.0/24\"]\nremote_ts = [\"10.2.0.0/24\"]\n{child_lines}\n"
    )
}

#[test]
fn a_minimal_connection_takes_strongswan_defaults() {
    let text = with_connection("", "");
    let (config, warnings) = parse(&text).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert!(warnings.is_empty(), "{}", render(&warnings));
    let c = &config.connections[0];
    assert_eq!(c.name, "c");
    assert_eq!(c.local_id, IkeId::Ip("192.0.2.1".parse().unwrap()));
    assert_eq!(c.remote_id, None);
    let IkeAuth::Psk(k) = &c.auth else {
        panic!("psk")
    };
    assert_eq!(k.expose(), PSK.as_bytes());
    assert_eq!(c.rekey_time, 4 * 3600);
    assert_eq!(c.dpd_delay, 0);
    assert!(c.fragmentation);
    let ch = &c.children[0];
    assert_eq!(ch.rekey_time, 3600);
    assert_eq!(ch.life_time, 3960);
    assert_eq!((ch.rekey_bytes, ch.rekey_packets), (0, 0));
    assert_eq!(ch.replay_window, 32);
    assert_eq!(ch.start_action, StartAction::None);
    assert_eq!(c.tunnel_name(ch), "c/net");
    // `espgw check` prints it, and never the key.
    let summary = Summary(&config).to_string();
    assert!(summary.contains("1 connection"), "{summary}");
    assert!(
        summary.contains("connection \"c\": 192.0.2.1 -> 192.0.2.2"),
        "{summary}"
    );
    assert!(
        summary.contains("child \"net\": protect 10.1.0.0/24 <-> 10.2.0.0/24"),
        "{summary}"
    );
    assert!(!summary.contains(PSK), "{summary}");
    // Debug of the config does not show the key either.
    assert!(!format!("{config:?}").contains(PSK));
}

#[test]
fn every_key_is_read() {
    let text = with_connection(
        "local_id = \"@gw1.example\"\nremote_id = \"ops@example.org\"\nauth = \"psk\"\n\
         proposals = [\"aes256gcm16-prfsha384-ecp384\", \"aes128-sha256-x25519\"]\nencap = \"auto\"\n\
         dpd_delay = 30\nrekey_time = 7200\nreauth_time = 0\nstart_action = \"start\"\nfragmentation = false",
        "esp_proposals = [\"aes128gcm16-x25519\"]\nrekey_time = 600\nlife_time = 700\n\
         rekey_bytes = 1000000\nrekey_packets = 5000\nreplay_window = 128\nmss_clamp = \"auto\"",
    );
    let (config, _) = parse(&text).unwrap_or_else(|d| panic!("{}", render(&d)));
    let c = &config.connections[0];
    assert_eq!(c.local_id, IkeId::Fqdn("gw1.example".into()));
    assert_eq!(c.remote_id, Some(IkeId::Email("ops@example.org".into())));
    assert_eq!(c.proposals.len(), 2);
    assert_eq!(
        (c.dpd_delay, c.rekey_time, c.fragmentation),
        (30, 7200, false)
    );
    let ch = &c.children[0];
    assert_eq!(
        ch.start_action,
        StartAction::Start,
        "the connection's start_action is the default"
    );
    assert_eq!((ch.rekey_time, ch.life_time), (600, 700));
    assert_eq!(
        (ch.rekey_bytes, ch.rekey_packets, ch.replay_window),
        (1_000_000, 5000, 128)
    );
}

#[test]
fn bad_proposals_are_named() {
    let text = with_connection(
        "proposals = [\"aes256gcm16-prfsha384-ecp384\", \"aes256gcm16-ecp384\"]",
        "",
    );
    assert_error(
        &errors(&text),
        line_of(&text, "proposals ="),
        "connection[0].proposals[1]",
        "proposal 1 \"aes256gcm16-ecp384\"",
    );
    let text = with_connection("", "esp_proposals = [\"aes256-sha1\"]");
    assert_error(
        &errors(&text),
        line_of(&text, "esp_proposals"),
        "connection[0].child[0].esp_proposals[0]",
        "\"aes256-sha1\"",
    );
    let text = with_connection("", "esp_proposals = [\"3des-md5\"]");
    assert_error(
        &errors(&text),
        line_of(&text, "esp_proposals"),
        "connection[0].child[0].esp_proposals[0]",
        "unknown algorithm \"3des\"",
    );
}

#[test]
fn trap_and_reauth_are_read() {
    // "trap" at the connection: the children's default.
    let text = with_connection("start_action = \"trap\"\nreauth_time = 3600", "");
    let (config, _) = parse(&text).unwrap_or_else(|d| panic!("{}", render(&d)));
    let c = &config.connections[0];
    assert_eq!(c.children[0].start_action, StartAction::Trap);
    assert_eq!(c.reauth_time, 3600);
    // At the child, and reauth_time off by default.
    let text = with_connection("", "start_action = \"trap\"");
    let (config, _) = parse(&text).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert_eq!(
        config.connections[0].children[0].start_action,
        StartAction::Trap
    );
    assert_eq!(config.connections[0].reauth_time, 0);
    // A child overrides the connection's "trap".
    let text = with_connection("start_action = \"trap\"", "start_action = \"none\"");
    let (config, _) = parse(&text).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert_eq!(
        config.connections[0].children[0].start_action,
        StartAction::None
    );
}

#[test]
fn trap_needs_a_peer_address() {
    let any = |t: String| t.replace("remote = \"192.0.2.2\"", "remote = \"%any\"");
    let text = any(with_connection("start_action = \"trap\"", ""));
    assert_error(
        &errors(&text),
        line_of(&text, "start_action"),
        "connection[0].start_action",
        "remote = \"%any\" names no peer",
    );
    let text = any(with_connection("", "start_action = \"trap\""));
    assert_error(
        &errors(&text),
        line_of(&text, "start_action"),
        "connection[0].child[0].start_action",
        "remote = \"%any\" names no peer",
    );
    // Without "trap", %any draws no such error.
    let text = any(with_connection("", ""));
    assert!(
        !errors(&text)
            .iter()
            .any(|d| d.message.contains("names no peer")),
        "{:?}",
        errors(&text)
    );
}

#[test]
fn unsupported_features_are_refused_at_their_key() {
    // A second child.
    let text = format!(
        "{}\n[[connection.child]]\nname = \"two\"\nlocal_ts = [\"10.1.1.0/24\"]\nremote_ts = [\"10.2.1.0/24\"]\n",
        with_connection("", "")
    );
    assert_error(
        &errors(&text),
        line_of(&text, "name = \"two\"") - 1,
        "connection[0].child[1]",
        "a second [[connection.child]]",
    );
}

#[test]
fn psk_rules() {
    // Missing.
    let text = with(&with_connection("", ""), &format!("psk = \"{PSK}\"\n"), "");
    assert_error(
        &errors(&text),
        line_of(&text, "[[connection]]"),
        "connection[0].psk",
        "needs a pre-shared key",
    );
    // Short: a warning, and the value is never quoted.
    let text = with(&with_connection("", ""), PSK, "short");
    let (_, warnings) = parse(&text).unwrap();
    let w = warnings
        .iter()
        .find(|w| w.key == "connection[0].psk")
        .unwrap_or_else(|| panic!("{}", render(&warnings)));
    assert!(
        w.message.contains("5 bytes") && !w.to_string().contains("short\""),
        "{w}"
    );
    // Bad hex: an error at the key that does not echo it.
    let text = with(&with_connection("", ""), PSK, "0xzz112233");
    let errs = errors(&text);
    assert_error(&errs, line_of(&text, "psk ="), "connection[0].psk", "");
    assert!(!render(&errs).contains("zz112233"));
    // cert with psk.
    let text = with_connection("cert = \"x.pem\"", "");
    assert_error(
        &errors(&text),
        line_of(&text, "cert ="),
        "connection[0].cert",
        "only for auth = \"pubkey\"",
    );
}

#[test]
fn psk_file_follows_the_key_file_rules() {
    let dir = temp_dir("psk-file");
    let psk_path = dir.join("c.psk");
    std::fs::write(&psk_path, format!("{PSK}\n")).unwrap();
    let text = with(
        &with_connection("", ""),
        &format!("psk = \"{PSK}\""),
        "psk_file = \"c.psk\"",
    );
    let config_path = dir.join("gw.toml");
    let host = espgw_control::config::HostFacts {
        check_permissions: true,
        ..espgw_control::config::HostFacts::assumed(4)
    };
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&psk_path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (config, warnings) = espgw_control::config::parse_str(&config_path, text.clone(), &host)
        .unwrap_or_else(|d| panic!("{}", render(&d)));
    let IkeAuth::Psk(k) = &config.connections[0].auth else {
        panic!("psk")
    };
    assert_eq!(
        k.expose(),
        PSK.as_bytes(),
        "the trailing newline is no part of the key"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.file == psk_path && w.message.contains("holds keys and is readable")),
        "{}",
        render(&warnings)
    );
    // Not a regular file.
    let text2 = with(&text, "psk_file = \"c.psk\"", "psk_file = \"/dev/zero\"");
    let errs = match espgw_control::config::parse_str(&config_path, text2.clone(), &host) {
        Ok(_) => panic!("accepted"),
        Err(d) => d,
    };
    let e = errs
        .iter()
        .find(|d| d.key == "connection[0].psk_file")
        .unwrap_or_else(|| panic!("{}", render(&errs)));
    assert!(e.message.contains("not a regular file"), "{e}");
    assert_eq!(e.line(), Some(line_of(&text2, "psk_file")));
    // Both psk and psk_file.
    let text3 = with(&text, "psk_file", &format!("psk = \"{PSK}\"\npsk_file"));
    assert_error(
        &errors(&text3),
        line_of(&text3, "psk_file"),
        "connection[0].psk_file",
        "psk and psk_file are both given",
    );
}

#[test]
fn addresses_and_identities() {
    let text = with_connection("", "");
    let t = with(
        &text,
        "name = \"c\"\nlocal = \"192.0.2.1\"",
        "name = \"c\"\nlocal = \"203.0.113.1\"",
    );
    assert_error(
        &errors(&t),
        line_of(&t, "203.0.113.1"),
        "connection[0].local",
        "not on any unprotected port's subnet",
    );
    let t = with(
        &text,
        "remote = \"192.0.2.2\"\npsk",
        "remote = \"2001:db8::2\"\npsk",
    );
    assert_error(
        &errors(&t),
        line_of(&t, "2001:db8::2"),
        "connection[0].remote",
        "different IP families",
    );
    let t = with(
        &text,
        "remote = \"192.0.2.2\"\npsk",
        "remote = \"%any\"\npsk",
    );
    let (config, _) = parse(&t).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert_eq!(config.connections[0].remote, None);
    let t = with_connection("remote_id = \"CN=gw2, O=example\"", "");
    let (config, _) = parse(&t).unwrap_or_else(|d| panic!("{}", render(&d)));
    let Some(IkeId::Dn { der, text: written }) = &config.connections[0].remote_id else {
        panic!("a DN")
    };
    assert_eq!(written, "CN=gw2, O=example");
    assert_eq!(
        espgw_control::config::dn::dn_text(der).as_deref(),
        Some("CN=gw2, O=example")
    );
    let t = with_connection("remote_id = \"CN=gw2, XX=example\"", "");
    assert_error(
        &errors(&t),
        line_of(&t, "remote_id"),
        "connection[0].remote_id",
        "unknown attribute \"XX\"",
    );
    let t = with(&text, "name = \"c\"", "name = \"a/b\"");
    assert_error(
        &errors(&t),
        line_of(&t, "a/b"),
        "connection[0].name",
        "contains '/'",
    );
    let t = with_connection("dpd_delay = -1", "");
    assert_error(
        &errors(&t),
        line_of(&t, "dpd_delay"),
        "connection[0].dpd_delay",
        "out of range",
    );
    let t = with_connection("colour = \"blue\"", "");
    assert_error(
        &errors(&t),
        line_of(&t, "colour"),
        "connection[0].colour",
        "unknown key",
    );
}

#[test]
fn child_lifetimes_and_selectors() {
    let t = with_connection("", "rekey_time = 600\nlife_time = 600");
    assert_error(
        &errors(&t),
        line_of(&t, "life_time"),
        "connection[0].child[0].life_time",
        "not above rekey_time 600",
    );
    let t = with_connection("", "");
    let t = with(
        &t,
        "remote_ts = [\"10.2.0.0/24\"]\n",
        "remote_ts = [\"2001:db8::/64\"]\n",
    );
    assert_error(
        &errors(&t),
        line_of(&t, "2001:db8::/64"),
        "connection[0].child[0].remote_ts",
        "same IP family",
    );
    let t = with(
        &with_connection("", ""),
        "local_ts = [\"10.1.0.0/24\"]\nremote_ts = [\"10.2.0.0/24\"]\n",
        "local_ts = [\"10.1.0.0/24\"]\n",
    );
    assert_error(
        &errors(&t),
        line_of(&t, "name = \"net\"") - 1,
        "connection[0].child[0].remote_ts",
        "missing required key",
    );
    let t = with(&with_connection("", ""), "name = \"net\"\n", "");
    assert_error(
        &errors(&t),
        line_of(&t, "[[connection.child]]"),
        "connection[0].child[0].name",
        "missing required key",
    );
    let t = with(
        &with_connection("", ""),
        "\n[[connection.child]]\nname = \"net\"\nlocal_ts = [\"10.1.0.0/24\"]\nremote_ts = [\"10.2.0.0/24\"]\n",
        "\n",
    );
    assert_error(
        &errors(&t),
        line_of(&t, "[[connection]]"),
        "connection[0].child",
        "protects nothing",
    );
}

#[test]
fn children_must_fit_the_security_policy() {
    // Overlapping a [[tunnel]]: tunnel t1 protects 10.1.0.0/24 -> 10.9.0.0/24.
    let t = with(
        &with_connection("", ""),
        "local_ts = [\"10.1.0.0/24\"]\nremote_ts = [\"10.2.0.0/24\"]\n",
        "local_ts = [\"10.1.0.0/24\"]\nremote_ts = [\"10.9.0.0/16\"]\n",
    );
    assert_error(
        &errors(&t),
        line_of(&t, "name = \"net\"") + 1,
        "connection[0].child[0].local_ts",
        "overlaps tunnel \"t1\"",
    );
    // Overlapping a bypass policy.
    let t = format!(
        "{}\n[[policy]]\naction = \"bypass\"\ndst = \"10.2.0.0/16\"\npriority = 5000\n",
        with_connection("", "")
    );
    assert_error(
        &errors(&t),
        line_of(&t, "name = \"net\"") + 1,
        "connection[0].child[0].local_ts",
        "bypass policy at line",
    );
    // A discard policy consulted later is fine; one consulted first warns.
    let t = format!(
        "{}\n[[policy]]\naction = \"discard\"\ndst = \"10.2.0.0/16\"\npriority = 5000\n",
        with_connection("", "")
    );
    let (_, w) = parse(&t).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert!(w.is_empty(), "{}", render(&w));
    let t = format!(
        "{}\n[[policy]]\naction = \"discard\"\ndst = \"10.2.0.0/16\"\npriority = 10\n",
        with_connection("", "")
    );
    let (_, w) = parse(&t).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert!(
        w.iter().any(|w| w.key == "connection[0].child[0].local_ts"),
        "{}",
        render(&w)
    );
    // Two connections with overlapping children; duplicate names.
    let one = with_connection("", "");
    let second = "\n[[connection]]\nname = \"c\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.3\"\n\
                  psk = \"another-long-random-key-987654\"\n\n[[connection.child]]\nname = \"net\"\n\
                  local_ts = [\"10.1.0.128/25\"]\nremote_ts = [\"10.2.0.0/16\"]\n";
    let t = format!("{one}{second}");
    let errs = errors(&t);
    assert_error(
        &errs,
        line_of(&t, "192.0.2.3") - 2,
        "connection[1].name",
        "duplicate connection name",
    );
    assert_error(
        &errs,
        line_of(&t, "10.1.0.128/25"),
        "connection[1].child[0].local_ts",
        "overlaps child \"net\" of connection \"c\"",
    );
    // A [[tunnel]] named like a child's tunnel.
    let t = with(
        &with_connection("", ""),
        "name = \"t1\"",
        "name = \"c/net\"",
    );
    assert_error(
        &errors(&t),
        line_of(&t, "name = \"net\""),
        "connection[0].child[0].name",
        "already is",
    );
    // default_action bypass: a warning about the time before the first SA.
    let t = with(
        &with_connection("", ""),
        "default_action = \"discard\"",
        "default_action = \"bypass\"",
    );
    let (_, w) = parse(&t).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert!(
        w.iter()
            .any(|w| w.key == "default_action" && w.message.contains("in clear")),
        "{}",
        render(&w)
    );
}

/// The engine's test certificates (crates/ike/testdata/certs, made by
/// strongSwan's pki with make.sh there).
fn cert_file(name: &str) -> String {
    format!(
        "{}/../ike/testdata/certs/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn pubkey_connection(cert: &str, key: &str, cas: &[&str], extra: &str) -> String {
    let cas: Vec<String> = cas
        .iter()
        .map(|c| format!("\"{}\"", cert_file(c)))
        .collect();
    with(
        &with_connection(
            &format!(
                "auth = \"pubkey\"\ncert = \"{}\"\nkey = \"{}\"\ncacerts = [{}]\n{extra}",
                cert_file(cert),
                cert_file(key),
                cas.join(", ")
            ),
            "",
        ),
        &format!("psk = \"{PSK}\"\n"),
        "",
    )
}

#[test]
fn pubkey_loads_the_certificate_key_and_cas() {
    let text = pubkey_connection("a.crt", "a.key", &["ca.crt"], "");
    let (config, _) = parse(&text).unwrap_or_else(|d| panic!("{}", render(&d)));
    let c = &config.connections[0];
    let IkeAuth::PubKey(p) = &c.auth else {
        panic!("pubkey")
    };
    assert_eq!((p.cert.len(), p.cacerts.len()), (1, 1));
    // The key never shows in Debug.
    assert!(!format!("{:?}", c.auth).contains("PRIVATE"));
    // strongSwan's default identity: the certificate's subject DN, the
    // same DER bytes as the certificate (so the peer's check matches).
    let IkeId::Dn { der, text: dn } = &c.local_id else {
        panic!("{:?}", c.local_id)
    };
    assert_eq!(dn, "C=CH, O=espgw test, CN=a.example");
    let pem = std::fs::read(cert_file("a.crt")).unwrap();
    let cert = &espgw_ike::crypto::cert::certs_from_pem(&pem).unwrap()[0];
    assert_eq!(der, &espgw_ike::crypto::cert::subject(cert).unwrap());
    // Our DN encoder writes what pki wrote.
    assert_eq!(
        &espgw_control::config::dn::dn_to_der("C=CH, O=espgw test, CN=a.example").unwrap(),
        der
    );
    // A local_id from the certificate: a subjectAltName, or the DN.
    for id in [
        "a.example",
        "a@example.com",
        "192.0.2.1",
        "C=CH, O=espgw test, CN=a.example",
    ] {
        let t = pubkey_connection(
            "a.crt",
            "a.key",
            &["ca.crt"],
            &format!("local_id = \"{id}\""),
        );
        parse(&t).unwrap_or_else(|d| panic!("{id}: {}", render(&d)));
    }
    // An intermediate after the certificate chains to the root.
    let dir = temp_dir("pubkey-chain");
    let chain = dir.join("chain.pem");
    let both = [
        std::fs::read_to_string(cert_file("chained.crt")).unwrap(),
        std::fs::read_to_string(cert_file("int.crt")).unwrap(),
    ]
    .concat();
    std::fs::write(&chain, both).unwrap();
    let t = with(
        &pubkey_connection("chained.crt", "chained.key", &["ca.crt"], ""),
        &cert_file("chained.crt"),
        chain.to_str().unwrap(),
    );
    let (config, _) = parse(&t).unwrap_or_else(|d| panic!("{}", render(&d)));
    let IkeAuth::PubKey(p) = &config.connections[0].auth else {
        panic!("pubkey")
    };
    assert_eq!(p.cert.len(), 2);
    // Without it, no chain.
    let t = pubkey_connection("chained.crt", "chained.key", &["ca.crt"], "");
    assert_error(
        &errors(&t),
        line_of(&t, "cert = \"/"),
        "connection[0].cert",
        "not issued by a trusted CA",
    );
}

#[test]
fn pubkey_errors_are_at_their_key() {
    for (cert, key, cas, extra, needle, at, words) in [
        // Another certificate's key.
        (
            "a.crt",
            "b.key",
            &["ca.crt"][..],
            "",
            "key = \"/",
            "connection[0].key",
            "is not the private key of the certificate",
        ),
        // Not issued by the CA we trust.
        (
            "stranger.crt",
            "stranger.key",
            &["ca.crt"][..],
            "",
            "cert = \"/",
            "connection[0].cert",
            "not issued by a trusted CA",
        ),
        (
            "expired.crt",
            "expired.key",
            &["ca.crt"][..],
            "",
            "cert = \"/",
            "connection[0].cert",
            "certificate expired",
        ),
        (
            "notyet.crt",
            "notyet.key",
            &["ca.crt"][..],
            "",
            "cert = \"/",
            "connection[0].cert",
            "not yet valid",
        ),
        // A key file that holds a certificate.
        (
            "a.crt",
            "a.crt",
            &["ca.crt"][..],
            "",
            "key = \"/",
            "connection[0].key",
            "no usable private key",
        ),
        // A cacerts file that holds a key.
        (
            "a.crt",
            "a.key",
            &["a.key"][..],
            "",
            "cacerts = [",
            "connection[0].cacerts[0]",
            "cacerts file",
        ),
        (
            "a.crt",
            "a.key",
            &[][..],
            "",
            "cacerts = [",
            "connection[0].cacerts",
            "empty list",
        ),
        // An identity the certificate does not hold.
        (
            "a.crt",
            "a.key",
            &["ca.crt"][..],
            "local_id = \"b.example\"",
            "local_id",
            "connection[0].local_id",
            "not in our certificate",
        ),
    ] {
        let t = pubkey_connection(cert, key, cas, extra);
        assert_error(&errors(&t), line_of(&t, needle), at, words);
        // The key file's contents never show.
        assert!(!render(&errors(&t)).contains("PRIVATE KEY"));
    }
    let t = pubkey_connection("a.crt", "/nonexistent.key", &["ca.crt"], "");
    let t = with(&t, &cert_file("/nonexistent.key"), "/nonexistent.key");
    assert_error(
        &errors(&t),
        line_of(&t, "key = \"/"),
        "connection[0].key",
        "cannot read key file",
    );
    let t = with(
        &pubkey_connection("a.crt", "a.key", &["ca.crt"], ""),
        &format!("cacerts = [\"{}\"]\n", cert_file("ca.crt")),
        "",
    );
    assert_error(
        &errors(&t),
        line_of(&t, "[[connection]]"),
        "connection[0].cacerts",
        "needs the CAs",
    );
    let t = with(
        &pubkey_connection("a.crt", "a.key", &["ca.crt"], ""),
        "auth",
        &format!("psk = \"{PSK}\"\nauth"),
    );
    assert_error(
        &errors(&t),
        line_of(&t, "psk ="),
        "connection[0].psk",
        "only for auth = \"psk\"",
    );
}

#[test]
fn the_private_key_file_gets_the_mode_warning() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("pubkey-mode");
    let key = dir.join("a.key");
    std::fs::copy(cert_file("a.key"), &key).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let text = with(
        &pubkey_connection("a.crt", "a.key", &["ca.crt"], ""),
        &cert_file("a.key"),
        "a.key",
    );
    let host = espgw_control::config::HostFacts {
        check_permissions: true,
        ..espgw_control::config::HostFacts::assumed(4)
    };
    let (_, warnings) = espgw_control::config::parse_str(&dir.join("gw.toml"), text, &host)
        .unwrap_or_else(|d| panic!("{}", render(&d)));
    assert!(
        warnings
            .iter()
            .any(|w| w.file == key && w.message.contains("holds keys and is readable")),
        "{}",
        render(&warnings)
    );
}

#[test]
fn fragmentation_is_per_connection() {
    let text = format!(
        "{}\n[[connection]]\nname = \"d\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.3\"\n\
         psk = \"{PSK}\"\nfragmentation = false\n\n[[connection.child]]\nname = \"net\"\n\
         local_ts = [\"10.1.1.0/24\"]\nremote_ts = [\"10.3.0.0/24\"]\n",
        with_connection("", "")
    );
    let (config, _) = parse(&text).unwrap_or_else(|d| panic!("{}", render(&d)));
    let f: Vec<bool> = config.connections.iter().map(|c| c.fragmentation).collect();
    assert_eq!(f, vec![true, false]);
}

#[test]
fn encap_udp_forces_udp_encapsulation() {
    let (config, _) =
        parse(&with_connection("encap = \"udp\"", "")).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert!(config.connections[0].force_encap);
    let (config, _) = parse(&with_connection("", "")).unwrap();
    assert!(!config.connections[0].force_encap);
}

#[test]
fn per_cpu_sas_is_a_count_or_auto() {
    let (config, _) = parse(&with_connection("", "")).unwrap();
    let c = &config.connections[0].children[0];
    assert_eq!(
        (c.per_cpu_sas, c.per_cpu_auto),
        (1, false),
        "off by default"
    );
    let (config, _) = parse(&with_connection("", "per_cpu_sas = 3")).unwrap();
    assert_eq!(config.connections[0].children[0].per_cpu_sas, 3);
    // "auto": one per data-plane worker.
    let (config, _) = parse(&with_connection("", "per_cpu_sas = \"auto\""))
        .unwrap_or_else(|d| panic!("{}", render(&d)));
    let c = &config.connections[0].children[0];
    assert!(c.per_cpu_auto);
    assert_eq!(c.per_cpu_sas as usize, config.dataplane.workers);
    for bad in ["0", "1025", "-1", "\"all\"", "true"] {
        let t = with_connection("", &format!("per_cpu_sas = {bad}"));
        assert_error(
            &errors(&t),
            line_of(&t, "per_cpu_sas"),
            "connection[0].child[0].per_cpu_sas",
            "",
        );
    }
}

#[test]
fn check_summary_shows_the_per_cpu_plan() {
    let (config, _) = parse(&with_connection("", "per_cpu_sas = \"auto\"")).unwrap();
    let text = Summary(&config).to_string();
    let n = config.dataplane.workers;
    assert!(
        text.contains(&format!(
            "c/net: up to {n} CHILD_SAs with the same selectors (per_cpu_sas = \"auto\")"
        )),
        "{text}"
    );
    assert!(
        text.contains("no two workers share an outbound SA"),
        "{text}"
    );
    let (config, _) = parse(&with_connection("", "")).unwrap();
    assert!(!Summary(&config).to_string().contains("per_cpu_sas"));
}

/// With the decrypt fan-out on, a replay window narrower than what the
/// receiving worker may have out for one SA (16 job boxes x workers x
/// burst per 100 µs of `spread_wait_us`) is warned about at its key: a
/// part decrypted late could be dropped as a replay. A child's default
/// (strongSwan's 32) is; 1024 on 2 workers is not; a longer bound makes
/// the tunnel's 1024 too narrow as well; without the fan-out, nothing.
#[test]
fn a_replay_window_narrower_than_the_fan_out_is_warned_about() {
    let fan_out = |text: &str, lines: &str| {
        with(
            text,
            "poll = \"busy\"",
            &format!("poll = \"busy\"\n{lines}"),
        )
    };
    let warned = |text: &str| {
        let (config, diags) = parse(text).unwrap_or_else(|d| panic!("{}", render(&d)));
        let shown = render(&diags);
        let at = |key: &str| {
            shown
                .lines()
                .any(|l| l.contains(key) && l.contains("narrower than what the decrypt fan-out"))
        };
        let reach = espgw_control::config::fan_out_reach(&config.dataplane);
        (
            at("connection[0].child[0].replay_window"),
            at("tunnel[0].replay_window"),
            reach,
            shown,
        )
    };
    let auto = "spread_decrypt = \"auto\"";
    let (child, tunnel, reach, shown) = warned(&fan_out(&with_connection("", ""), auto));
    assert_eq!((child, tunnel, reach), (true, false, 1024), "{shown}");
    assert!(shown.contains("1024 or more"), "{shown}");
    let wide = with_connection("", "replay_window = 1024");
    let (child, tunnel, _, shown) = warned(&fan_out(&wide, auto));
    assert_eq!((child, tunnel), (false, false), "{shown}");
    let longer = fan_out(&wide, &format!("{auto}\nspread_wait_us = 400"));
    let (child, tunnel, reach, shown) = warned(&longer);
    assert_eq!((child, tunnel, reach), (true, true, 4096), "{shown}");
    let (child, tunnel, reach, shown) = warned(&with_connection("", ""));
    assert_eq!((child, tunnel, reach), (false, false, 0), "{shown}");
}
