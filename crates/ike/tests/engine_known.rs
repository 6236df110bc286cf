//! Known answers from real strongSwan runs (crates/ike/testdata/strongswan):
//! every recorded PSK IKE_SA_INIT/IKE_AUTH pair goes through the engine's
//! parsing, proposal selection, key derivation, SK opening, AUTH
//! verification and CHILD_SA code, with g^ir from run.json (charon does not
//! log DH private values, so the exchange itself cannot be replayed). The
//! keys must equal charon's, our AUTH values must equal charon's byte for
//! byte, and the CHILD_SA must carry charon's SPIs and KEYMAT.

use std::path::PathBuf;

use espgw_ike::engine::{replay_psk_ike_auth, Connection};
use espgw_ike::message::Identification;

fn dir(run: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/strongswan")
        .join(run)
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// The first `"key": "hex"` after `section` in run.json (the file is
/// flat enough that this needs no JSON parser).
fn field(json: &str, section: &str, key: &str) -> Vec<u8> {
    let from = json.find(section).unwrap_or_else(|| panic!("no {section}"));
    let pat = format!("\"{key}\": \"");
    let at = from
        + json[from..]
            .find(&pat)
            .unwrap_or_else(|| panic!("no {key}"))
        + pat.len();
    let end = at + json[at..].find('"').unwrap();
    unhex(&json[at..end])
}

fn message(run: &str, index: usize) -> Vec<u8> {
    let messages = dir(run).join("messages");
    let prefix = format!("{index:02}-");
    let name = std::fs::read_dir(&messages)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.starts_with(&prefix))
        .unwrap();
    unhex(std::fs::read_to_string(messages.join(name)).unwrap().trim())
}

fn check(run: &str, ike: &str, esp: &str, first_pair: usize) {
    let json = std::fs::read_to_string(dir(run).join("run.json")).unwrap();
    let conn = Connection::new(
        "a",
        "192.0.2.1:500".parse().unwrap(),
        "192.0.2.2:500".parse().unwrap(),
        Identification::fqdn("a.example"),
        Some(Identification::fqdn("b.example")),
        b"espgw-strongswan-test-psk-0123456789",
        ike,
        esp,
        &["10.1.0.0/24"],
        &["10.2.0.0/24"],
    )
    .unwrap();
    let r = replay_psk_ike_auth(
        &conn,
        &message(run, first_pair),
        &message(run, first_pair + 1),
        &message(run, first_pair + 2),
        &message(run, first_pair + 3),
        &field(&json, "\"ike_sas\"", "shared_secret"),
    )
    .unwrap_or_else(|e| panic!("{run}: {e}"));
    for (name, ours) in [
        ("sk_d", &r.keys.sk_d),
        ("sk_ei", &r.keys.sk_ei),
        ("sk_er", &r.keys.sk_er),
        ("sk_pi", &r.keys.sk_pi),
        ("sk_pr", &r.keys.sk_pr),
    ] {
        assert_eq!(
            ours.expose(),
            &field(&json, "\"ike_sas\"", name)[..],
            "{run} {name}"
        );
    }
    assert!(
        r.auth_i_equal && r.auth_r_equal,
        "{run}: our PSK AUTH differs from charon's"
    );
    let child = "\"child_sas\"";
    assert_eq!(
        r.child.outbound_spi.to_be_bytes().to_vec(),
        field(&json, child, "spi_r"),
        "{run}"
    );
    assert_eq!(
        r.child.inbound_spi.to_be_bytes().to_vec(),
        field(&json, child, "spi_i"),
        "{run}"
    );
    assert_eq!(
        r.child.outbound.key.expose(),
        &field(&json, child, "encr_i")[..],
        "{run}"
    );
    assert_eq!(
        r.child.inbound.key.expose(),
        &field(&json, child, "encr_r")[..],
        "{run}"
    );
    if !r.child.outbound.auth_key.is_empty() {
        assert_eq!(
            r.child.outbound.auth_key.expose(),
            &field(&json, child, "integ_i")[..],
            "{run}"
        );
        assert_eq!(
            r.child.inbound.auth_key.expose(),
            &field(&json, child, "integ_r")[..],
            "{run}"
        );
    }
}

#[test]
fn recorded_psk_runs_give_charons_keys_auth_and_child_sa() {
    check(
        "psk-aes128gcm16-prfsha256-x25519",
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16-x25519",
        1,
    );
    check(
        "psk-aes256-sha256-prfsha256-modp2048",
        "aes256-sha256-prfsha256-modp2048",
        "aes256-sha256-modp2048",
        1,
    );
    check(
        "psk-aes256gcm16-prfsha384-ecp384",
        "aes256gcm16-prfsha384-ecp384",
        "aes256gcm16-esn-noesn",
        1,
    );
    // The third IKE_SA_INIT pair (after COOKIE and INVALID_KE_PAYLOAD).
    check(
        "psk-cookie-invalid-ke-aes128gcm16-prfsha256-ecp256",
        "aes128gcm16-prfsha256-x25519-ecp256",
        "aes128gcm16",
        5,
    );
}

#[test]
fn a_wrong_psk_does_not_verify_charons_auth() {
    let run = "psk-aes128gcm16-prfsha256-x25519";
    let json = std::fs::read_to_string(dir(run).join("run.json")).unwrap();
    let conn = Connection::new(
        "a",
        "192.0.2.1:500".parse().unwrap(),
        "192.0.2.2:500".parse().unwrap(),
        Identification::fqdn("a.example"),
        None,
        b"espgw-strongswan-test-psk-012345678X",
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16",
        &["10.1.0.0/24"],
        &["10.2.0.0/24"],
    )
    .unwrap();
    let e = replay_psk_ike_auth(
        &conn,
        &message(run, 1),
        &message(run, 2),
        &message(run, 3),
        &message(run, 4),
        &field(&json, "\"ike_sas\"", "shared_secret"),
    );
    assert!(e.is_err());
}
