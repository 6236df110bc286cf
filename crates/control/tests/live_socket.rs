//! The control socket end to end: a real server on a temp path, driven by
//! the ctl client functions; keys never come back out.

#[path = "live_support.rs"]
mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use espgw_control::config::{SaKeys, SecretBytes};
use espgw_control::live::client;
use espgw_control::live::protocol::{DelTarget, Request};
use espgw_control::live::{
    ControlServer, CountersSource, DataplaneCounters, LiveControl, PortTraffic, SaManager,
    WorkerLoad,
};
use espgw_control::tables::Tables;
use serde_json::{json, Value};
use support::*;

struct FakeDataplane;

impl CountersSource for FakeDataplane {
    fn counters(&self) -> DataplaneCounters {
        DataplaneCounters {
            ports: vec![PortTraffic {
                name: "prot".into(),
                rx_packets: 123,
                tx_packets: 45,
                rx_bytes: 6789,
                tx_bytes: 1011,
                esp_steering: None,
                tx_udp_checksum: false,
            }],
            workers: vec![WorkerLoad {
                worker: 0,
                busy_ratio: 0.25,
                mss_clamped: 2,
                ..WorkerLoad::default()
            }],
            drops: BTreeMap::from([("policy_discard".to_string(), 3)]),
        }
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "espgw-live-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A gateway with one tunnel (soft lifetime 50 s, hard 100 s) behind a
/// control socket in a fresh directory; the clock is the returned atomic.
fn gateway(dir: &Path) -> (ControlServer, Arc<LiveControl<Tables>>, Arc<AtomicU64>) {
    let config = config(gateway_toml(
        1,
        "lifetime = { seconds = 100, soft_seconds = 50 }",
        "discard",
        "",
    ));
    let manager = SaManager::with_control_tables(&config, 0).unwrap();
    let clock = Arc::new(AtomicU64::new(0));
    let c = clock.clone();
    let control = Arc::new(LiveControl::new(
        &config,
        manager,
        Arc::new(move || c.load(Ordering::Relaxed)),
        Arc::new(FakeDataplane),
    ));
    // A directory that does not exist yet: the server creates it.
    let server = ControlServer::bind(&dir.join("run/gw.sock"), control.clone()).unwrap();
    (server, control, clock)
}

const ADD_OUT_KEY: &str = "a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4";
const ADD_IN_KEY: &str = "c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4";
const REKEY_OUT_KEY: &str = "e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4";
const REKEY_IN_KEY: &str = "0102030405060708090a0b0c0d0e0f1011121314";

fn tunnel_u(out_key: &str) -> Value {
    json!({
        "name": "u", "local": "192.0.2.1", "remote": "192.0.2.3",
        "local_ts": ["10.1.0.0/24"], "remote_ts": ["10.3.0.0/24"],
        "esp": "aes128gcm16",
        "out": {"spi": "0xc001", "key": out_key},
        "in": {"spi": 0xd001, "key": ADD_IN_KEY}
    })
}

fn keys(spi: u32, key: &str) -> Option<SaKeys> {
    Some(SaKeys {
        spi,
        key: SecretBytes::from_hex(key).unwrap(),
        auth_key: None,
    })
}

/// Runs a command both ways (table and JSON); returns the table text and
/// pushes everything seen onto `seen`.
fn ctl(sock: &Path, cmd: &Request, seen: &mut Vec<String>) -> Result<String, String> {
    let response = client::call(sock, cmd)?;
    seen.push(response.to_string());
    let text = client::output(cmd, &response, false);
    seen.push(format!("{text:?}"));
    text
}

#[test]
fn every_command_through_the_socket_and_no_key_comes_back() {
    let logs = logs();
    let dir = temp_dir("sock");
    let (server, control, clock) = gateway(&dir);
    let sock = server.path().to_path_buf();
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "socket mode {mode:o}");
    let mut seen = Vec::new();

    let status = ctl(&sock, &Request::Status, &mut seen).unwrap();
    assert!(
        status.starts_with("gateway gw-1: up 0 s, 1 worker(s), 1 tunnel(s)"),
        "{status}"
    );
    assert!(
        status.contains("t       192.0.2.1  192.0.2.2  0x0000a001  0x0000b001  0         up"),
        "{status}"
    );

    let list = ctl(&sock, &Request::SaList, &mut seen).unwrap();
    let lines: Vec<&str> = list.lines().collect();
    assert!(
        lines[0].starts_with("TUNNEL  DIR  SPI         SUITE        STATE   PACKETS"),
        "{list}"
    );
    assert_eq!(lines.len(), 3, "{list}");
    assert!(
        lines[1].contains("out  0x0000a001  aes128gcm16  active  0"),
        "{list}"
    );
    assert!(lines[1].ends_with("100     -           -"), "{list}");

    // sa add, then it is listed; adding it again is refused.
    let add = Request::SaAdd {
        tunnel: tunnel_u(ADD_OUT_KEY),
    };
    assert_eq!(ctl(&sock, &add, &mut seen).unwrap(), "tunnel \"u\" added\n");
    let e = ctl(&sock, &add, &mut seen).unwrap_err();
    assert!(e.contains("already exists"), "{e}");
    // A key of the wrong length is refused by the config checks.
    let bad = Request::SaAdd {
        tunnel: json!({"name": "w", "local": "192.0.2.1", "remote": "192.0.2.4",
            "local_ts": ["10.1.0.0/24"], "remote_ts": ["10.4.0.0/24"], "esp": "aes128gcm16",
            "out": {"spi": 0xe001, "key": &ADD_OUT_KEY[..30]},
            "in": {"spi": 0xf001, "key": ADD_IN_KEY}}),
    };
    let e = ctl(&sock, &bad, &mut seen).unwrap_err();
    assert!(e.contains("tunnel.out.key"), "{e}");
    // A local address on no port is refused, naming the key.
    let mut elsewhere = tunnel_u(ADD_OUT_KEY);
    elsewhere["name"] = json!("x");
    elsewhere["local"] = json!("198.51.100.1");
    let e = ctl(&sock, &Request::SaAdd { tunnel: elsewhere }, &mut seen).unwrap_err();
    assert!(e.contains("tunnel.local"), "{e}");

    let list = ctl(&sock, &Request::SaList, &mut seen).unwrap();
    assert!(list.contains("u       out  0x0000c001"), "{list}");

    // Rekey both directions of t: the old inbound SA drains.
    let rekey = Request::SaRekey {
        tunnel: "t".into(),
        outbound: keys(0xa002, REKEY_OUT_KEY),
        inbound: keys(0xb002, REKEY_IN_KEY),
    };
    let r = ctl(&sock, &rekey, &mut seen).unwrap();
    assert!(
        r.contains("0x0000b002 installed") && r.contains("SPI 0x0000a002"),
        "{r}"
    );
    let list = ctl(&sock, &Request::SaList, &mut seen).unwrap();
    assert!(list.contains("0x0000b001  aes128gcm16  draining"), "{list}");
    // A rekey with a short key is refused without quoting it.
    let short = Request::SaRekey {
        tunnel: "t".into(),
        outbound: keys(0xa003, &REKEY_OUT_KEY[..20]),
        inbound: None,
    };
    assert!(ctl(&sock, &short, &mut seen).is_err());

    // Soft expiry shows in status once the clock passes 50 s.
    clock.store(60, Ordering::Relaxed);
    control.tick();
    let status = ctl(&sock, &Request::Status, &mut seen).unwrap();
    assert!(
        status.contains("soft-expired (rekey due):\n  t out 0x0000a002\n  t in 0x0000b002\n"),
        "{status}"
    );

    let stats = ctl(&sock, &Request::Stats, &mut seen).unwrap();
    assert!(stats.contains("prot  123      45"), "{stats}");
    assert!(stats.contains("0       0.250  2"), "{stats}");
    assert!(stats.contains("policy_discard  3"), "{stats}");
    let json_stats = client::run(&sock, &Request::Stats, true).unwrap();
    seen.push(json_stats.clone());
    let v: Value = serde_json::from_str(&json_stats).unwrap();
    assert_eq!(v["ports"][0]["rx_packets"], 123);
    // t out+in, u out+in: the old inbound SA of t drained at the tick.
    assert_eq!(v["sas"].as_array().unwrap().len(), 4);
    for cmd in [Request::Status, Request::SaList] {
        seen.push(client::run(&sock, &cmd, true).unwrap());
    }

    // Delete by name and by SPI.
    let del = Request::SaDel {
        target: DelTarget::Tunnel("u".into()),
    };
    assert_eq!(
        ctl(&sock, &del, &mut seen).unwrap(),
        "tunnel \"u\" deleted\n"
    );
    assert!(ctl(&sock, &del, &mut seen).is_err());
    let del = Request::SaDel {
        target: DelTarget::Spi(0xb002),
    };
    assert_eq!(
        ctl(&sock, &del, &mut seen).unwrap(),
        "tunnel \"t\" deleted\n"
    );
    let status = ctl(&sock, &Request::Status, &mut seen).unwrap();
    assert!(status.contains("0 tunnel(s)"), "{status}");

    // Raw protocol: bad lines get an error line and the connection lives on.
    let mut conn = UnixStream::connect(&sock).unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    for line in [
        "not json".to_string(),
        r#"{"cmd":"reboot"}"#.to_string(),
        format!(
            r#"{{"cmd":"sa_rekey","tunnel":"t","in":{{"spi":4096,"key":{REKEY_IN_KEY:?}zz}}}}"#
        ),
        r#"{"cmd":"status"}"#.to_string(),
    ] {
        writeln!(conn, "{line}").unwrap();
        let mut answer = String::new();
        reader.read_line(&mut answer).unwrap();
        seen.push(answer.clone());
        let v: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(v["ok"], line.contains("status"), "{line} -> {answer}");
    }

    drop(server);
    assert!(!sock.exists(), "socket removed on drop");

    let log_lines = logs.lock().unwrap().clone();
    assert!(log_lines
        .iter()
        .any(|l| l.contains("rekey: outbound switched")));
    for key in [
        ADD_OUT_KEY,
        ADD_IN_KEY,
        REKEY_OUT_KEY,
        REKEY_IN_KEY,
        &KEY_A[2..],
        &KEY_B[2..],
    ] {
        let probe = &key[..12];
        let upper = probe.to_uppercase();
        for text in seen.iter().chain(&log_lines) {
            assert!(
                !text.contains(probe) && !text.contains(&upper),
                "key material in {text}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn stale_sockets_are_replaced_and_live_ones_are_not() {
    let dir = temp_dir("stale");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("gw.sock");
    // A socket file nobody listens on any more.
    drop(UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let config = config(gateway_toml(1, "", "discard", ""));
    let control = || {
        Arc::new(LiveControl::new(
            &config,
            SaManager::with_control_tables(&config, 0).unwrap(),
            espgw_control::live::monotonic_clock(),
            Arc::new(()),
        ))
    };
    let server = ControlServer::bind(&path, control()).unwrap();
    assert!(client::run(&path, &Request::Status, false).is_ok());
    // A second gateway on the same path is refused; the first keeps it.
    let e = ControlServer::bind(&path, control()).err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
    assert!(client::run(&path, &Request::Status, false).is_ok());
    drop(server);
    // A regular file is never removed.
    std::fs::write(&path, "not a socket").unwrap();
    assert!(ControlServer::bind(&path, control()).is_err());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "not a socket");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn tunnel_toml_files_become_sa_add_requests() {
    let text = format!(
        "[[tunnel]]\nname = \"u\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.3\"\n\
         local_ts = [\"10.1.0.0/24\"]\nremote_ts = [\"10.3.0.0/24\"]\nesp = \"aes128gcm16\"\n\
         out = {{ spi = 0xc001, key = \"{ADD_OUT_KEY}\" }}\nin = {{ spi = 0xd001, key = \"{ADD_IN_KEY}\" }}\n"
    );
    let v = client::tunnel_from_toml(&text).unwrap();
    assert_eq!(v["out"]["spi"], 0xc001);
    assert_eq!(v["name"], "u");
    // Bare keys at top level work too.
    let bare = text.replace("[[tunnel]]\n", "");
    assert_eq!(client::tunnel_from_toml(&bare).unwrap(), v);
    // A syntax error does not quote the line (which may hold a key).
    let broken = text.replace("key = \"a1", "key = a1");
    let e = client::tunnel_from_toml(&broken).unwrap_err();
    assert!(!e.contains(&ADD_OUT_KEY[..12]), "{e}");
}

#[test]
fn services_start_serve_tick_and_stop() {
    use espgw_control::live::Services;
    let dir = temp_dir("services");
    let sock = dir.join("gw.sock");
    let text = gateway_toml(
        1,
        "lifetime = { seconds = 100, soft_seconds = 50 }",
        "discard",
        "",
    )
    .replace(
        "name = \"gw-1\"",
        &format!(
            "name = \"gw-1\"\ncontrol_socket = {:?}\nmetrics = \"127.0.0.1:0\"",
            sock
        ),
    );
    let clock = Arc::new(AtomicU64::new(0));
    let c = clock.clone();
    let services = Services::start(
        &config(text),
        Box::new(|view| Tables::from_view(view, 1500)),
        Arc::new(move || c.load(Ordering::Relaxed)),
        Arc::new(FakeDataplane),
    )
    .unwrap();
    let reader = services.reader();
    assert!(client::run(&sock, &Request::Status, false)
        .unwrap()
        .contains("gw-1"));
    // The tick thread notices the soft lifetime by itself.
    clock.store(50, Ordering::Relaxed);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while services.control().status().soft_expired.len() < 2 {
        assert!(std::time::Instant::now() < deadline, "no tick");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let addr = services.metrics_addr().unwrap();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    std::io::Read::read_to_string(&mut s, &mut body).unwrap();
    assert!(body.contains("espgw_sa_soft_expiries_total 2"), "{body}");
    drop(reader);
    let last = services.stop();
    assert_eq!(last.sas.len(), 2);
    assert_eq!(last.ports[0].rx_packets, 123);
    assert!(!sock.exists(), "socket removed at stop");
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "metrics stopped"
    );
    let _ = std::fs::remove_dir_all(dir);
}

fn plain_control() -> Arc<LiveControl<Tables>> {
    let config = config(gateway_toml(1, "", "discard", ""));
    Arc::new(LiveControl::new(
        &config,
        SaManager::with_control_tables(&config, 0).unwrap(),
        espgw_control::live::monotonic_clock(),
        Arc::new(()),
    ))
}

#[test]
fn directories_others_can_write_or_own_are_refused() {
    use std::os::unix::fs::MetadataExt;
    let dir = temp_dir("dirs");
    std::fs::create_dir_all(&dir).unwrap();
    let me = std::fs::metadata(&dir).unwrap().uid();
    let sock = dir.join("gw.sock");
    for mode in [0o777, 0o775, 0o757, 0o1777] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
        let e = ControlServer::bind(&sock, plain_control()).err().unwrap();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{mode:o}");
        let text = e.to_string();
        assert!(
            text.contains(&format!("{} is writable by group/others", dir.display())),
            "{text}"
        );
        assert!(!sock.exists(), "nothing bound in a {mode:o} directory");
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Owned by someone else (only root can hand a directory away).
    if me == 0 {
        std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
        let e = ControlServer::bind(&sock, plain_control()).err().unwrap();
        assert!(e.to_string().contains("is owned by uid 65534"), "{e}");
        std::os::unix::fs::chown(&dir, Some(me), None).unwrap();
    }
    // 0755 and ours: bound, mode 0600, and the private staging directory
    // the socket was bound in is gone.
    let server = ControlServer::bind(&sock, plain_control()).unwrap();
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "socket mode {mode:o}");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["gw.sock"]);
    assert!(client::run(&sock, &Request::Status, false).is_ok());
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_control_group_gets_mode_0660_and_the_group() {
    use espgw_control::live::Access;
    use std::os::unix::fs::MetadataExt;
    let dir = temp_dir("group");
    let sock = dir.join("run/gw.sock");
    let access = Access::for_this_process(Some(4242));
    let server = match ControlServer::bind_with(&sock, plain_control(), access) {
        Ok(s) => s,
        // Only root may give a file a group it is not in.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            eprintln!("skipped: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let meta = std::fs::metadata(&sock).unwrap();
    assert_eq!((meta.mode() & 0o777, meta.gid()), (0o660, 4242));
    // The directory it created lets the group reach the socket.
    let run = std::fs::metadata(dir.join("run")).unwrap();
    assert_eq!((run.mode() & 0o777, run.gid()), (0o750, 4242));
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn keys_are_not_sent_to_a_socket_someone_else_owns() {
    use std::io::Read;
    let dir = temp_dir("owner");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("planted.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let rekey = Request::SaRekey {
        tunnel: "t".into(),
        outbound: keys(0xa002, REKEY_OUT_KEY),
        inbound: None,
    };
    if support_uid(&dir) != 0 {
        eprintln!("skipped: only root can give a socket to another uid");
        return;
    }
    std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
    let e = client::call(&path, &rekey).unwrap_err();
    assert!(
        e.contains("is owned by uid 65534, not by root or you (uid 0); not sending keys"),
        "{e}"
    );
    assert!(!e.contains(&REKEY_OUT_KEY[..12]));
    // The planted listener got a connection but not one byte.
    let (mut conn, _) = listener.accept().unwrap();
    let mut got = Vec::new();
    conn.read_to_end(&mut got).unwrap();
    assert!(
        got.is_empty(),
        "{} bytes reached the planted socket",
        got.len()
    );
    // Requests without keys still go (status is harmless).
    let t = std::thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        let mut line = String::new();
        BufReader::new(&conn).read_line(&mut line).unwrap();
        (&conn)
            .write_all(b"{\"ok\":false,\"error\":\"x\"}\n")
            .unwrap();
        line
    });
    client::call(&path, &Request::Status).unwrap();
    assert_eq!(t.join().unwrap(), "{\"cmd\":\"status\"}\n");
    let _ = std::fs::remove_dir_all(dir);
}

fn support_uid(p: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).unwrap().uid()
}
