//! `espgw ctl` (the real binary) against a live control socket: keys from
//! standard input with no warning, keys as flags with one, and clients of
//! another uid kept out by the socket's mode and by SO_PEERCRED.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use espgw_control::config::HostFacts;
use espgw_control::fixtures::GatewayToml;
use espgw_control::live::{monotonic_clock, Access, ControlServer, LiveControl, SaManager};

/// Gateway "gw-a": gateway 1 of the demo pair, its own keys.
fn config_text() -> String {
    GatewayToml::demo(1).name("gw-a").render()
}

const KEY_1: &str = "e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4";
const KEY_2: &str = "0102030405060708090a0b0c0d0e0f1011121314";

/// A fresh directory (mode 0755, so another uid can reach a socket in it
/// when the socket's own mode lets it).
fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("espgw-ctl-it-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn server(sock: &Path, group: Option<u32>) -> ControlServer {
    let host = HostFacts::assumed(1);
    let (config, _) = espgw_control::parse_str(Path::new("gw.toml"), config_text(), &host).unwrap();
    let manager = SaManager::with_control_tables(&config, 0).unwrap();
    let control = Arc::new(LiveControl::new(
        &config,
        manager,
        monotonic_clock(),
        Arc::new(()),
    ));
    ControlServer::bind_with(sock, control, Access::for_this_process(group)).unwrap()
}

/// Runs `espgw ctl --socket SOCK ARGS` with `stdin`, optionally as another
/// uid/gid.
fn ctl(sock: &Path, args: &str, stdin: &str, as_user: Option<(u32, u32)>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_espgw"));
    cmd.arg("ctl").arg("--socket").arg(sock);
    cmd.args(args.split_whitespace());
    if let Some((uid, gid)) = as_user {
        use std::os::unix::process::CommandExt;
        cmd.uid(uid).gid(gid);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn keys_from_stdin_are_quiet_and_keys_as_flags_warn() {
    let dir = temp_dir("stdin");
    let sock = dir.join("gw.sock");
    let server = server(&sock, None);

    let keys = format!("[in]\nspi = 0xb002\nkey = \"{KEY_1}\"\n");
    let out = ctl(&sock, "sa rekey t --keys-file -", &keys, None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("new inbound SPI 0x0000b002"));
    assert_eq!(text(&out.stderr), "", "no warning for keys on stdin");

    let out = ctl(
        &sock,
        &format!("sa rekey t --out-spi 0xa002 --out-key {KEY_2}"),
        "",
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.starts_with(
            "espgw ctl: warning: --out-key puts a key on the command line, where every local user can read it"
        ),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.contains(&KEY_2[..8]), "{err}");
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn other_users_are_kept_out_and_the_control_group_is_let_in() {
    if std::fs::metadata(temp_dir("uidcheck")).unwrap().uid() != 0 {
        eprintln!("skipped: switching uid for the client needs root");
        return;
    }
    const NOBODY: u32 = 65534;
    const GROUP: u32 = 4242;
    let dir = temp_dir("peers");
    let sock = dir.join("gw.sock");
    let server = server(&sock, Some(GROUP));

    // A member of the control group (primary gid here).
    let out = ctl(&sock, "status", "", Some((NOBODY, GROUP)));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("gateway gw-a: up"));

    // Anyone else: the socket's mode (0660, group 4242) refuses connect().
    let out = ctl(&sock, "status", "", Some((NOBODY, NOBODY)));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("Permission denied"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(server.refused_peers(), 0, "never reached accept");

    // Were the mode ever wider, SO_PEERCRED still refuses, and counts.
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = ctl(&sock, "status", "", Some((NOBODY, NOBODY)));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "espgw ctl: uid 65534 may not use this control socket\n"
    );
    assert_eq!(server.refused_peers(), 1);
    // Root still gets in.
    assert!(ctl(&sock, "status", "", None).status.success());
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(temp_dir("uidcheck"));
}
