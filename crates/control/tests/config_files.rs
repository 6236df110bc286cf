//! Config files on disk: the shipped examples, key files, file modes.

mod common;
use common::*;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use espgw_control::config::connection::{IkeAuth, StartAction};
use espgw_control::config::{load_with, EncapMode, HostFacts, Side};
use espgw_esp::Suite;

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// The demo's pair (gateway.toml, configs/gateway-b.toml): IKEv2 with one
/// pre-shared key file, no static key, one side initiating, the other
/// waiting, everything else mirrored.
#[test]
fn demo_configs_are_ikev2_mirror_images() {
    let (a, wa) =
        load_with(&repo_file("gateway.toml"), &host()).unwrap_or_else(|d| panic!("{}", render(&d)));
    let (b, wb) = load_with(&repo_file("configs/gateway-b.toml"), &host())
        .unwrap_or_else(|d| panic!("{}", render(&d)));
    assert!(
        wa.is_empty() && wb.is_empty(),
        "{}{}",
        render(&wa),
        render(&wb)
    );
    assert!(a.tunnels.is_empty() && b.tunnels.is_empty(), "no manual SA");
    for f in ["gateway.toml", "configs/gateway-b.toml"] {
        let text = std::fs::read_to_string(repo_file(f)).unwrap();
        assert!(
            !text.lines().any(|l| {
                let l = l.trim_start();
                l.starts_with("key") || l.starts_with("psk =") || l.starts_with("out =")
            }),
            "{f} holds a key"
        );
    }
    assert_eq!((a.connections.len(), b.connections.len()), (1, 1));
    let (ca, cb) = (&a.connections[0], &b.connections[0]);
    assert_eq!((ca.local, ca.remote), (cb.remote.unwrap(), Some(cb.local)));
    assert_eq!(ca.local_id, *cb.remote_id.as_ref().unwrap());
    assert_eq!(cb.local_id, *ca.remote_id.as_ref().unwrap());
    assert_eq!(ca.proposals, cb.proposals);
    let (IkeAuth::Psk(ka), IkeAuth::Psk(kb)) = (&ca.auth, &cb.auth) else {
        panic!("PSK on both sides");
    };
    assert_eq!(ka.expose(), kb.expose(), "one key file, read by both");
    assert!(ka.len() >= 32);
    let (xa, xb) = (&ca.children[0], &cb.children[0]);
    assert_eq!((&xa.local_ts, &xa.remote_ts), (&xb.remote_ts, &xb.local_ts));
    assert_eq!(xa.esp_proposals, xb.esp_proposals);
    assert_eq!(
        (xa.start_action, xb.start_action),
        (StartAction::Start, StartAction::None)
    );
}

/// The manual-SA pair (configs/static-a.toml, static-b.toml) of the
/// end-to-end tests of manual SAs.
#[test]
fn static_configs_are_valid_mirror_images() {
    let (a, wa) = load_with(&repo_file("configs/static-a.toml"), &host())
        .unwrap_or_else(|d| panic!("{}", render(&d)));
    let (b, wb) = load_with(&repo_file("configs/static-b.toml"), &host())
        .unwrap_or_else(|d| panic!("{}", render(&d)));
    assert!(
        wa.is_empty() && wb.is_empty(),
        "{}{}",
        render(&wa),
        render(&wb)
    );
    assert_eq!(a.ports.len(), 2);
    assert_eq!(a.ports[0].side, Side::Protected);
    assert_eq!(a.ports[0].device, "net_af_packet0,iface=gwa-prot");
    let (ta, tb) = (&a.tunnels[0], &b.tunnels[0]);
    assert_eq!(ta.suite, Suite::Aes128Gcm16);
    assert_eq!(ta.encap, EncapMode::None);
    assert_eq!((ta.local, ta.remote), (tb.remote, tb.local));
    assert_eq!((&ta.local_ts, &ta.remote_ts), (&tb.remote_ts, &tb.local_ts));
    assert_eq!(ta.outbound.spi, tb.inbound.spi);
    assert_eq!(ta.inbound.spi, tb.outbound.spi);
    assert_eq!(ta.outbound.key, tb.inbound.key);
    assert_eq!(ta.inbound.key, tb.outbound.key);
    assert_ne!(
        ta.outbound.key, ta.inbound.key,
        "each direction has its own key"
    );
    // Soft lifetime defaults to 90% of the hard one.
    assert_eq!(ta.lifetime.hard.seconds, Some(86400));
    assert_eq!(ta.lifetime.soft.seconds, Some(77760));

    // The ESP engine accepts what the config built, direction by direction.
    let (out, inn) = (ta.outbound_sa(), ta.inbound_sa());
    out.validate().unwrap();
    inn.validate().unwrap();
    assert_eq!(
        (out.spi, out.local, out.remote),
        (ta.outbound.spi, ta.local, ta.remote)
    );
    assert_eq!(inn.key.expose(), tb.outbound.key.expose());
    assert!(out.auth_key.is_empty());
    assert_eq!(out.lifetimes.seconds.hard, Some(86400));
    assert_eq!(out.lifetimes.seconds.soft, Some(77760));
    assert_eq!(out.replay_window, 1024);
}

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn with_key_file(base: &str) -> String {
    let text = with(base, &format!(", key = \"{OUT_KEY}\" }}"), " }");
    let text = with(&text, &format!(", key = \"{IN_KEY}\" }}"), " }");
    with(
        &text,
        "esp = \"aes128gcm16\"",
        "esp = \"aes128gcm16\"\nkey_file = \"keys/t1.toml\"",
    )
}

#[test]
fn keys_can_live_in_a_key_file_next_to_the_config() {
    let dir = temp_dir("keyfile");
    std::fs::create_dir(dir.join("keys")).unwrap();
    let config = dir.join("gw.toml");
    write(&config, &with_key_file(&base()), 0o644);
    write(
        &dir.join("keys/t1.toml"),
        &format!("[out]\nkey = \"{OUT_KEY}\"\n[in]\nkey = \"0x{IN_KEY}\"\n"),
        0o600,
    );
    let (c, warnings) = load_with(
        &config,
        &HostFacts {
            check_permissions: true,
            ..HostFacts::assumed(4)
        },
    )
    .unwrap_or_else(|d| panic!("{}", render(&d)));
    // The config holds no keys, so its mode 0644 is fine.
    assert!(warnings.is_empty(), "{}", render(&warnings));
    assert_eq!(c.tunnels[0].inbound.key.to_hex().as_str(), IN_KEY);
}

#[test]
fn key_file_errors_point_into_the_key_file() {
    let dir = temp_dir("keyfile-bad");
    std::fs::create_dir(dir.join("keys")).unwrap();
    let config = dir.join("gw.toml");
    write(&config, &with_key_file(&base()), 0o600);
    let keys = dir.join("keys/t1.toml");
    write(
        &keys,
        &format!(
            "[out]\nkey = \"{OUT_KEY}\"\n[in]\nkey = \"{}\"\nextra = 1\n",
            "ab".repeat(16)
        ),
        0o600,
    );
    let diags = load_with(&config, &host()).unwrap_err();
    let text = render(&diags);
    let prefix = keys.display().to_string();
    assert!(text.contains(&format!("{prefix}:4:7: tunnel[0].in.key: wrong length for aes128gcm16: got 16 bytes (expected 20 bytes: 16-byte key + 4-byte salt)")), "{text}");
    assert!(
        text.contains(&format!("{prefix}:5:1: tunnel[0].in.extra: unknown key")),
        "{text}"
    );

    // A key given both inline and in the key file is ambiguous.
    write(&keys, &format!("[out]\nkey = \"{OUT_KEY}\"\n"), 0o600);
    let inline = with(
        &with_key_file(&base()),
        "out = { spi = 0x1001 }",
        &format!("out = {{ spi = 0x1001, key = \"{OUT_KEY}\" }}"),
    );
    write(&config, &inline, 0o600);
    let text = render(&load_with(&config, &host()).unwrap_err());
    assert!(
        text.contains("tunnel[0].out.key: key is given both here and in key_file"),
        "{text}"
    );
    assert!(
        text.contains("tunnel[0].in: missing key for aes128gcm16"),
        "{text}"
    );

    std::fs::remove_file(&keys).unwrap();
    let text = render(&load_with(&config, &host()).unwrap_err());
    assert!(
        text.contains("tunnel[0].key_file: cannot read key file \"keys/t1.toml\""),
        "{text}"
    );
}

#[test]
fn readable_files_with_keys_get_a_warning() {
    let dir = temp_dir("modes");
    let config = dir.join("gw.toml");
    let facts = HostFacts {
        check_permissions: true,
        ..HostFacts::assumed(4)
    };
    write(&config, &base(), 0o644);
    let (_, warnings) = load_with(&config, &facts).unwrap();
    let text = render(&warnings);
    assert_eq!(
        text,
        format!(
            "warning: {} holds keys and is readable by group/others (mode 0644); chmod 600 it\n",
            config.display()
        )
    );
    write(&config, &base(), 0o600);
    let (_, warnings) = load_with(&config, &facts).unwrap();
    assert!(warnings.is_empty(), "{}", render(&warnings));
}

#[test]
fn files_others_can_change_get_a_warning() {
    use std::os::unix::fs::MetadataExt;
    let dir = temp_dir("writable");
    let config = dir.join("gw.toml");
    let facts = HostFacts {
        check_permissions: true,
        ..HostFacts::assumed(4)
    };
    // No inline keys: readable is fine, writable by group/others is not.
    let no_keys = with_key_file(&base());
    std::fs::create_dir_all(dir.join("keys")).unwrap();
    let keys = dir.join("keys/t1.toml");
    write(
        &keys,
        &format!("[out]\nkey = \"{OUT_KEY}\"\n[in]\nkey = \"{IN_KEY}\"\n"),
        0o600,
    );
    for mode in [0o664, 0o646, 0o620] {
        write(&config, &no_keys, mode);
        let (_, warnings) = load_with(&config, &facts).unwrap();
        assert_eq!(
            render(&warnings),
            format!(
                "warning: {} is writable by group/others (mode {mode:04o}): they can change the \
                 gateway's keys and policy; chmod go-w it\n",
                config.display()
            )
        );
    }
    write(&config, &no_keys, 0o644);
    assert!(load_with(&config, &facts).unwrap().1.is_empty());
    // A key file others can write: warned too, with its own path.
    write(
        &keys,
        &format!("[out]\nkey = \"{OUT_KEY}\"\n[in]\nkey = \"{IN_KEY}\"\n"),
        0o602,
    );
    let text = render(&load_with(&config, &facts).unwrap().1);
    assert!(
        text.contains(&format!(
            "warning: {} is writable by group/others (mode 0602)",
            keys.display()
        )),
        "{text}"
    );
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o600)).unwrap();
    // Owned by another user (only root can give a file away).
    if std::fs::metadata(&config).unwrap().uid() == 0 {
        std::os::unix::fs::chown(&config, Some(65534), None).unwrap();
        let text = render(&load_with(&config, &facts).unwrap().1);
        assert_eq!(
            text,
            format!(
                "warning: {} is owned by uid 65534, not by root or you (uid 0): its owner can \
                 change the gateway's keys and policy; chown it\n",
                config.display()
            )
        );
    } else {
        eprintln!("skipped the owner check: only root can chown");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A key file must be a small regular file: `/dev/zero` or a FIFO would be
/// read until memory runs out or forever (found by the config fuzz harness).
#[test]
fn key_files_that_are_not_small_regular_files_are_refused() {
    let dir = temp_dir("keyfile-special");
    std::fs::create_dir(dir.join("keys")).unwrap();
    let config = dir.join("gw.toml");
    let text = with_key_file(&base());
    let text = with(
        &text,
        "key_file = \"keys/t1.toml\"",
        "key_file = \"/dev/zero\"",
    );
    write(&config, &text, 0o600);
    let text = render(&load_with(&config, &host()).unwrap_err());
    assert!(text.contains("not a regular file"), "{text}");

    let big = dir.join("keys/t1.toml");
    write(&big, &format!("# {}\n", "x".repeat(70_000)), 0o600);
    write(&config, &with_key_file(&base()), 0o600);
    let text = render(&load_with(&config, &host()).unwrap_err());
    assert!(text.contains("larger than 65536 bytes"), "{text}");
}
