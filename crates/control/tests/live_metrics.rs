//! The Prometheus endpoint: scrape it over TCP and check the exposition.

#[path = "live_support.rs"]
mod support;

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use espgw_control::live::{
    metrics, monotonic_clock, CountersSource, DataplaneCounters, Dir, EspSteeringState,
    LifetimeLeft, LiveControl, MetricsServer, PortTraffic, SaInfo, SaManager, SaState,
    StatsSnapshot, WorkerLoad,
};
use espgw_esp::Verdict;
use support::*;

struct FakeDataplane;

impl CountersSource for FakeDataplane {
    fn counters(&self) -> DataplaneCounters {
        DataplaneCounters {
            ports: vec![
                PortTraffic {
                    name: "prot".into(),
                    rx_packets: 1000,
                    tx_packets: 990,
                    esp_steering: Some(EspSteeringState {
                        state: "idle".into(),
                        ..EspSteeringState::default()
                    }),
                    ..PortTraffic::default()
                },
                PortTraffic {
                    name: "unprot".into(),
                    rx_packets: 7,
                    tx_packets: 996,
                    esp_steering: Some(EspSteeringState {
                        state: "steering".into(),
                        rules: 3,
                        refused: vec!["udp6".into()],
                    }),
                    tx_udp_checksum: true,
                    ..PortTraffic::default()
                },
            ],
            workers: vec![
                WorkerLoad {
                    worker: 0,
                    busy_ratio: 0.5,
                    mss_clamped: 0,
                    spread_out: 40,
                    spread_in: 0,
                    spread_kept: 9,
                    spread_unneeded: 21,
                    reorder_late_sent: 0,
                    spread_back: vec![1, 2, 3, 4, 0, 0, 0, 1],
                    spread_back_ns: 2_500_000,
                    spread_solo: 96,
                    spread_trials: vec![2, 1, 4, 3],
                    spread_trial_with_pps: 1_500_000,
                    spread_trial_without_pps: 2_600_000,
                    spread_off: true,
                    sa_handoff_out: 64,
                    sa_handoff_in: 0,
                    sa_handoff_kept: 5,
                },
                WorkerLoad {
                    worker: 1,
                    busy_ratio: 0.125,
                    mss_clamped: 17,
                    spread_out: 0,
                    spread_in: 40,
                    spread_kept: 0,
                    spread_unneeded: 0,
                    reorder_late_sent: 3,
                    spread_back: Vec::new(),
                    spread_back_ns: 0,
                    sa_handoff_out: 0,
                    sa_handoff_in: 64,
                    sa_handoff_kept: 0,
                    ..WorkerLoad::default()
                },
            ],
            drops: BTreeMap::from([("no_route".to_string(), 4), ("policy".to_string(), 6)]),
        }
    }
}

/// One sample: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Parses the text exposition format strictly enough to catch mistakes:
/// every sample belongs to a family with HELP and TYPE given before it,
/// label values are quoted with valid escapes, values are numbers.
fn parse_exposition(text: &str) -> (HashMap<String, String>, Vec<Sample>) {
    let mut types = HashMap::new();
    let mut helped = std::collections::HashSet::new();
    let mut samples = Vec::new();
    let valid_name = |n: &str| {
        !n.is_empty()
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
            && !n.starts_with(|c: char| c.is_ascii_digit())
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP has text");
            assert!(valid_name(name) && !help.is_empty(), "{line}");
            helped.insert(name.to_string());
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(helped.contains(name), "TYPE before HELP: {line}");
            assert!(
                types.insert(name.to_string(), kind.to_string()).is_none(),
                "twice: {line}"
            );
            continue;
        }
        assert!(
            !line.starts_with('#') && !line.is_empty(),
            "stray line {line:?}"
        );
        let (name, rest) = match line.find('{') {
            Some(i) => (&line[..i], &line[i..]),
            None => line.split_at(line.find(' ').unwrap()),
        };
        assert!(valid_name(name), "{line}");
        // A histogram's samples carry its name with a suffix.
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                name.strip_suffix(suffix)
                    .filter(|base| types.get(*base).map(String::as_str) == Some("histogram"))
            })
            .unwrap_or(name);
        assert!(types.contains_key(family), "sample before its TYPE: {line}");
        if family != name {
            assert_eq!(
                name.ends_with("_bucket"),
                rest.contains("le=\""),
                "le on buckets only: {line}"
            );
        }
        if types[family] == "counter" {
            assert!(name.ends_with("_total"), "counter without _total: {line}");
        }
        let mut labels = BTreeMap::new();
        let mut chars = rest.chars().peekable();
        if chars.peek() == Some(&'{') {
            chars.next();
            loop {
                let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
                assert!(valid_name(&key), "label name {key:?} in {line}");
                assert_eq!(chars.next(), Some('"'), "{line}");
                let mut value = String::new();
                loop {
                    match chars.next().expect("unterminated label value") {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some('\\') => value.push('\\'),
                            Some('"') => value.push('"'),
                            Some('n') => value.push('\n'),
                            other => panic!("bad escape {other:?} in {line}"),
                        },
                        c => value.push(c),
                    }
                }
                labels.insert(key, value);
                match chars.next() {
                    Some(',') => continue,
                    Some('}') => break,
                    other => panic!("{other:?} after a label in {line}"),
                }
            }
        }
        let value: String = chars.collect();
        let value: f64 = value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line}"));
        samples.push((name.to_string(), labels, value));
    }
    (types, samples)
}

fn find<'a>(samples: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Option<&'a Sample> {
    samples.iter().find(|(n, l, _)| {
        n == name
            && labels
                .iter()
                .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
    })
}

fn scrape(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn scrape_parses_and_carries_every_family() {
    let config = config(gateway_toml(
        1,
        "lifetime = { seconds = 3600, bytes = 1000000 }",
        "discard",
        "",
    ));
    let manager = SaManager::with_control_tables(&config, 0).unwrap();
    // Some traffic through the tunnel's outbound SA.
    {
        let tables = manager.current();
        let sa = tables
            .sad
            .outbound_sa(espgw_control::tables::TunnelId(0))
            .and_then(|s| s.outbound())
            .unwrap();
        let mut burst: Vec<_> = (0..5)
            .map(|i| inner_packet([10, 1, 0, 7], [10, 2, 0, 9], i))
            .collect();
        let mut v = [Verdict::Forward; 5];
        assert_eq!(sa.encap_burst(&mut burst, &mut v, 0), 5);
    }
    let control = Arc::new(LiveControl::new(
        &config,
        manager,
        monotonic_clock(),
        Arc::new(FakeDataplane),
    ));
    let server = MetricsServer::bind("127.0.0.1:0".parse().unwrap(), control).unwrap();
    let response = scrape(server.local_addr(), "/metrics");
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.0 200 OK\r\n"), "{head}");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    assert!(
        head.contains(&format!("Content-Length: {}", body.len())),
        "{head}"
    );
    let (types, samples) = parse_exposition(body);

    for (name, kind) in [
        ("espgw_port_rx_packets_total", "counter"),
        ("espgw_port_tx_packets_total", "counter"),
        ("espgw_worker_busy_ratio", "gauge"),
        ("espgw_port_esp_steering_rules", "gauge"),
        ("espgw_port_esp_steering_refused", "gauge"),
        ("espgw_port_tx_udp_checksum_offload", "gauge"),
        ("espgw_worker_mss_clamped_total", "counter"),
        ("espgw_worker_spread_out_total", "counter"),
        ("espgw_worker_spread_in_total", "counter"),
        ("espgw_worker_spread_kept_total", "counter"),
        ("espgw_worker_spread_unneeded_total", "counter"),
        ("espgw_worker_reorder_late_sent_total", "counter"),
        ("espgw_worker_spread_solo_total", "counter"),
        ("espgw_worker_spread_trials_total", "counter"),
        ("espgw_worker_spread_trial_rate_pps", "gauge"),
        ("espgw_worker_spread_off", "gauge"),
        ("espgw_worker_spread_part_return_seconds", "histogram"),
        ("espgw_worker_sa_handoff_out_total", "counter"),
        ("espgw_worker_sa_handoff_in_total", "counter"),
        ("espgw_worker_sa_handoff_kept_total", "counter"),
        ("espgw_sa_packets_total", "counter"),
        ("espgw_sa_bytes_total", "counter"),
        ("espgw_sa_drops_total", "counter"),
        ("espgw_sa_lifetime_remaining_seconds", "gauge"),
        ("espgw_sa_lifetime_remaining_bytes", "gauge"),
        ("espgw_sa_lifetime_remaining_packets", "gauge"),
        ("espgw_drops_total", "counter"),
        ("espgw_sa_soft_expiries_total", "counter"),
        ("espgw_tunnel_packets_total", "counter"),
        ("espgw_tunnel_drops_total", "counter"),
    ] {
        assert_eq!(types.get(name).map(String::as_str), Some(kind), "{name}");
    }
    let value = |name, labels: &[(&str, &str)]| {
        find(&samples, name, labels)
            .unwrap_or_else(|| panic!("no {name} {labels:?} in\n{body}"))
            .2
    };
    assert_eq!(
        value("espgw_port_rx_packets_total", &[("port", "prot")]),
        1000.0
    );
    assert_eq!(
        value("espgw_port_tx_packets_total", &[("port", "unprot")]),
        996.0
    );
    assert_eq!(value("espgw_worker_busy_ratio", &[("worker", "1")]), 0.125);
    assert_eq!(
        value("espgw_port_esp_steering_rules", &[("port", "unprot")]),
        3.0
    );
    for (port, offloaded) in [("prot", 0.0), ("unprot", 1.0)] {
        assert_eq!(
            value("espgw_port_tx_udp_checksum_offload", &[("port", port)]),
            offloaded
        );
    }
    assert_eq!(
        value("espgw_port_esp_steering_rules", &[("port", "prot")]),
        0.0
    );
    assert_eq!(
        value(
            "espgw_port_esp_steering_refused",
            &[("port", "unprot"), ("form", "udp6")]
        ),
        1.0
    );
    assert!(
        find(
            &samples,
            "espgw_port_esp_steering_refused",
            &[("port", "prot")]
        )
        .is_none(),
        "nothing refused on prot"
    );
    assert_eq!(
        value("espgw_worker_mss_clamped_total", &[("worker", "1")]),
        17.0
    );
    assert_eq!(
        value("espgw_worker_spread_out_total", &[("worker", "0")]),
        40.0
    );
    assert_eq!(
        value("espgw_worker_spread_in_total", &[("worker", "1")]),
        40.0
    );
    assert_eq!(
        value("espgw_worker_spread_kept_total", &[("worker", "0")]),
        9.0
    );
    assert_eq!(
        value("espgw_worker_spread_unneeded_total", &[("worker", "0")]),
        21.0
    );
    assert_eq!(
        value("espgw_worker_reorder_late_sent_total", &[("worker", "1")]),
        3.0
    );
    // The live check: its trials by verdict, the last rates, on or off.
    assert_eq!(
        value("espgw_worker_spread_solo_total", &[("worker", "0")]),
        96.0
    );
    for (worker, verdict, want) in [
        ("0", "on", 2.0),
        ("0", "off", 1.0),
        ("0", "keeping_up", 4.0),
        ("0", "no_helper", 3.0),
        ("1", "off", 0.0),
    ] {
        let labels = [("worker", worker), ("verdict", verdict)];
        assert_eq!(value("espgw_worker_spread_trials_total", &labels), want);
    }
    for (fan_out, want) in [("with", 1.5e6), ("without", 2.6e6)] {
        let labels = [("worker", "0"), ("fan_out", fan_out)];
        assert_eq!(value("espgw_worker_spread_trial_rate_pps", &labels), want);
    }
    assert_eq!(value("espgw_worker_spread_off", &[("worker", "0")]), 1.0);
    assert_eq!(value("espgw_worker_spread_off", &[("worker", "1")]), 0.0);
    // The parts' return times: cumulative buckets in seconds, +Inf = count.
    let bucket = "espgw_worker_spread_part_return_seconds_bucket";
    for (le, want) in [
        ("0.00001", 1.0),
        ("0.000025", 3.0),
        ("0.00005", 6.0),
        ("0.0001", 10.0),
        ("0.001", 10.0),
        ("+Inf", 11.0),
    ] {
        assert_eq!(
            value(bucket, &[("worker", "0"), ("le", le)]),
            want,
            "le {le}"
        );
    }
    assert_eq!(
        value(
            "espgw_worker_spread_part_return_seconds_count",
            &[("worker", "0")]
        ),
        11.0
    );
    assert_eq!(
        value(
            "espgw_worker_spread_part_return_seconds_sum",
            &[("worker", "0")]
        ),
        0.0025
    );
    assert_eq!(value(bucket, &[("worker", "1"), ("le", "+Inf")]), 0.0);
    assert_eq!(
        value("espgw_worker_sa_handoff_out_total", &[("worker", "0")]),
        64.0
    );
    assert_eq!(
        value("espgw_worker_sa_handoff_in_total", &[("worker", "1")]),
        64.0
    );
    assert_eq!(
        value("espgw_worker_sa_handoff_kept_total", &[("worker", "0")]),
        5.0
    );
    assert_eq!(value("espgw_drops_total", &[("reason", "policy")]), 6.0);
    let out_sa = [("tunnel", "t"), ("dir", "out"), ("spi", "0x0000a001")];
    assert_eq!(value("espgw_sa_packets_total", &out_sa), 5.0);
    // 5 inner packets of 60 bytes.
    assert_eq!(value("espgw_sa_bytes_total", &out_sa), 300.0);
    assert_eq!(
        value("espgw_sa_lifetime_remaining_bytes", &out_sa),
        999_700.0
    );
    assert_eq!(
        value(
            "espgw_tunnel_packets_total",
            &[("tunnel", "t"), ("dir", "out")]
        ),
        5.0
    );
    let in_sa = [("tunnel", "t"), ("dir", "in"), ("spi", "0x0000b001")];
    assert_eq!(value("espgw_sa_packets_total", &in_sa), 0.0);
    assert!(value("espgw_sa_lifetime_remaining_seconds", &in_sa) <= 3600.0);
    // No packet limit configured: no such series.
    assert!(find(&samples, "espgw_sa_lifetime_remaining_packets", &out_sa).is_none());

    let other = scrape(server.local_addr(), "/");
    assert!(other.starts_with("HTTP/1.0 404"), "{other}");
}

#[test]
fn label_values_are_escaped() {
    let name = "we\"ird\\tun\nnel";
    let snapshot = StatsSnapshot {
        sas: vec![SaInfo {
            tunnel: name.into(),
            dir: Dir::In,
            spi: 0x1234,
            suite: "aes256gcm16".into(),
            state: SaState::Draining,
            packets: 3,
            bytes: 4,
            drops: BTreeMap::from([("replayed".to_string(), 2)]),
            lifetime_left: LifetimeLeft {
                packets: Some(9),
                ..LifetimeLeft::default()
            },
            age_seconds: 1,
            udp_port: None,
        }],
        ..StatsSnapshot::default()
    };
    let text = metrics::render(&snapshot);
    let (_, samples) = parse_exposition(&text);
    let labels = [("tunnel", name), ("dir", "in"), ("spi", "0x00001234")];
    let drops = find(&samples, "espgw_sa_drops_total", &labels).unwrap();
    assert_eq!(drops.1.get("reason").unwrap(), "replayed");
    assert_eq!(drops.2, 2.0);
    assert_eq!(
        find(&samples, "espgw_sa_lifetime_remaining_packets", &labels)
            .unwrap()
            .2,
        9.0
    );
    let state = find(&samples, "espgw_sa_state", &labels).unwrap();
    assert_eq!(state.1.get("state").unwrap(), "draining");
}

/// A client that sends its request one byte every 50 ms and never ends
/// it; returns how long until the server closed the connection (or None
/// if it still had not after `give_up`).
fn dribble(
    addr: std::net::SocketAddr,
    give_up: std::time::Duration,
) -> std::thread::JoinHandle<Option<std::time::Duration>> {
    let mut s = TcpStream::connect(addr).unwrap();
    std::thread::spawn(move || {
        let start = std::time::Instant::now();
        s.set_read_timeout(Some(std::time::Duration::from_millis(50)))
            .unwrap();
        let request = b"GET /metrics HTTP/1.0\r\nX-Slow: "
            .iter()
            .chain(b"a".repeat(10_000).iter())
            .copied()
            .collect::<Vec<u8>>();
        for b in request {
            if s.write_all(&[b]).is_err() {
                return Some(start.elapsed());
            }
            // A read that returns (EOF or data) means the server gave up on us.
            let mut buf = [0u8; 256];
            match s.read(&mut buf) {
                Ok(_) => return Some(start.elapsed()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => return Some(start.elapsed()),
            }
            if start.elapsed() > give_up {
                return None;
            }
        }
        None
    })
}

/// A scrape that must finish within `limit`; its status line.
fn timed_scrape(addr: std::net::SocketAddr, limit: std::time::Duration) -> String {
    let start = std::time::Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(limit)).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut out = String::new();
    let r = s.read_to_string(&mut out);
    assert!(
        r.is_ok() && start.elapsed() < limit,
        "scrape took {:?} ({r:?})",
        start.elapsed()
    );
    out.lines().next().unwrap_or("").to_string()
}

#[test]
fn a_slow_client_neither_stalls_scrapes_nor_stays_forever() {
    use std::time::Duration;
    let source = || {
        let config = config(gateway_toml(1, "", "discard", ""));
        Arc::new(LiveControl::new(
            &config,
            SaManager::with_control_tables(&config, 0).unwrap(),
            monotonic_clock(),
            Arc::new(FakeDataplane),
        ))
    };
    // Default settings: two dribblers connected first, scrapes still answer.
    let server = MetricsServer::bind("127.0.0.1:0".parse().unwrap(), source()).unwrap();
    let addr = server.local_addr();
    let slow = [
        dribble(addr, Duration::from_secs(3)),
        dribble(addr, Duration::from_secs(3)),
    ];
    std::thread::sleep(Duration::from_millis(100));
    for _ in 0..3 {
        assert_eq!(
            timed_scrape(addr, Duration::from_secs(1)),
            "HTTP/1.0 200 OK"
        );
    }
    for s in slow {
        let _ = s.join();
    }
    drop(server);

    // A short deadline: the dribbler is cut off at it, though it sends a
    // byte every 50 ms (a per-read timeout would never fire).
    let deadline = Duration::from_millis(400);
    let server =
        MetricsServer::bind_with_deadline("127.0.0.1:0".parse().unwrap(), source(), deadline)
            .unwrap();
    let addr = server.local_addr();
    let slow = dribble(addr, Duration::from_secs(5));
    assert_eq!(
        timed_scrape(addr, Duration::from_secs(1)),
        "HTTP/1.0 200 OK"
    );
    let closed_after = slow
        .join()
        .unwrap()
        .expect("the slow client was never cut off");
    assert!(
        closed_after >= deadline && closed_after < deadline + Duration::from_secs(1),
        "cut off after {closed_after:?}"
    );
    // A client that connects and sends nothing is closed at the deadline too.
    let mut idle = TcpStream::connect(addr).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let start = std::time::Instant::now();
    let mut buf = Vec::new();
    let _ = idle.read_to_end(&mut buf);
    assert!(
        start.elapsed() < deadline + Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    assert!(buf.is_empty());
}
