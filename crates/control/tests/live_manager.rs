//! SaManager with real ESP SAs: what each live change publishes.

#[path = "live_support.rs"]
mod support;

use std::sync::{Arc, Mutex};

use espgw_control::live::{Dir, LiveError, LiveView, SaManager, SaState};
use espgw_control::tables::{Action, LiveSa, Tables, TunnelId};
use support::*;

fn manager(lifetime: &str, default_action: &str, extra: &str) -> SaManager<Tables> {
    SaManager::with_control_tables(
        &config(gateway_toml(1, lifetime, default_action, extra)),
        100,
    )
    .unwrap()
}

/// What a worker does with the tunnel's traffic in the current snapshot:
/// `Some(spi)` of the outbound SA that encrypts it, or `None` (discarded).
fn outbound_for(m: &SaManager<Tables>, src: &str, dst: &str) -> Result<u32, Action> {
    let tables = m.current();
    match tables.spd.lookup(&flow(src, dst)) {
        Action::Protect(t) => tables
            .sad
            .outbound_sa(t)
            .and_then(|s| s.outbound())
            .map(|sa| sa.spi())
            .ok_or(Action::Discard),
        other => Err(other),
    }
}

fn inbound_spis(m: &SaManager<Tables>) -> Vec<u32> {
    let tables = m.current();
    let mut spis: Vec<u32> = [0xb001, 0xb002, 0xc001, 0xc002, 0xd001]
        .into_iter()
        .filter(|spi| tables.sad.inbound_sa(*spi, ip("192.0.2.1")).is_some())
        .collect();
    spis.sort_unstable();
    spis
}

const SECOND_TUNNEL: &str = r#"{
    "name": "u", "local": "192.0.2.1", "remote": "192.0.2.3",
    "local_ts": ["10.1.0.0/24"], "remote_ts": ["10.3.0.0/24"],
    "esp": "aes128gcm16",
    "out": {"spi": 49153, "key": "0x55555555555555555555555555555555aaaaaaaa"},
    "in": {"spi": 53249, "key": "0x66666666666666666666666666666666bbbbbbbb"}
}"#;

fn second_tunnel() -> espgw_control::config::Tunnel {
    let c = config(gateway_toml(1, "", "discard", ""));
    let parser = espgw_control::live::TunnelParser::new(&c);
    parser
        .parse(&serde_json::from_str(SECOND_TUNNEL).unwrap())
        .unwrap()
}

#[test]
fn config_tunnel_is_up_and_protects_its_traffic() {
    let m = manager("", "discard", "");
    assert_eq!(outbound_for(&m, "10.1.0.7", "10.2.0.9"), Ok(0xa001));
    assert_eq!(inbound_spis(&m), vec![0xb001]);
    // Traffic outside every selector gets the default action.
    assert_eq!(
        outbound_for(&m, "10.1.0.7", "10.9.0.9"),
        Err(Action::Discard)
    );
    let sas = m.sa_list(100);
    assert_eq!(sas.len(), 2);
    assert!(sas
        .iter()
        .all(|s| s.state == SaState::Active && s.suite == "aes128gcm16"));
}

#[test]
fn add_then_delete_a_tunnel() {
    let mut m = manager("", "discard", "");
    m.add_tunnel(second_tunnel(), 101).unwrap();
    assert_eq!(outbound_for(&m, "10.1.0.7", "10.3.0.1"), Ok(49153));
    assert!(m.current().sad.inbound_sa(53249, ip("192.0.2.1")).is_some());
    assert_eq!(m.tunnel_names(), vec!["t", "u"]);

    m.delete_tunnel("u", 102).unwrap();
    // Its traffic now matches nothing and is discarded, its SA is gone;
    // the other tunnel is untouched.
    assert_eq!(
        outbound_for(&m, "10.1.0.7", "10.3.0.1"),
        Err(Action::Discard)
    );
    assert!(m.current().sad.inbound_sa(53249, ip("192.0.2.1")).is_none());
    assert_eq!(outbound_for(&m, "10.1.0.7", "10.2.0.9"), Ok(0xa001));
    assert_eq!(m.events().tunnels_added, 1);
    assert_eq!(m.events().tunnels_deleted, 1);
    // Deleting what is not there is an error, and changes nothing.
    let generation = m.generation();
    assert!(m.delete_tunnel("u", 103).is_err());
    assert_eq!(m.generation(), generation);
}

#[test]
fn deleted_tunnel_traffic_is_discarded_even_when_the_default_is_bypass() {
    let mut m = manager("", "bypass", "");
    assert_eq!(
        outbound_for(&m, "10.1.0.7", "10.9.0.9"),
        Err(Action::Bypass)
    );
    m.delete_tunnel("t", 101).unwrap();
    assert_eq!(
        outbound_for(&m, "10.1.0.7", "10.2.0.9"),
        Err(Action::Discard)
    );
    assert_eq!(
        outbound_for(&m, "10.1.0.7", "10.9.0.9"),
        Err(Action::Bypass)
    );
    // Adding the tunnel back with the keys it had is refused: its SAs
    // would count sequence numbers (AEAD nonces) from 1 again under them.
    let c = config(gateway_toml(1, "", "bypass", ""));
    let e = m.add_tunnel(c.tunnels[0].clone(), 102).unwrap_err();
    assert!(e.0.contains("already used by this gateway"), "{e}");
    // With fresh keys it protects the traffic again.
    let mut t = c.tunnels[0].clone();
    t.outbound = sa_keys(0xa001, 71);
    t.inbound = sa_keys(0xb001, 72);
    m.add_tunnel(t, 102).unwrap();
    assert_eq!(outbound_for(&m, "10.1.0.7", "10.2.0.9"), Ok(0xa001));
}

#[test]
fn conflicting_additions_are_refused() {
    let mut m = manager("", "discard", "");
    let c = config(gateway_toml(1, "", "discard", ""));
    let same = c.tunnels[0].clone();
    let e = m.add_tunnel(same.clone(), 101).unwrap_err();
    assert!(e.0.contains("already exists"), "{e}");
    let mut renamed = same;
    renamed.name = "v".into();
    let LiveError(e) = m.add_tunnel(renamed.clone(), 101).unwrap_err();
    assert!(e.contains("inbound SPI 0x0000b001"), "{e}");
    renamed.inbound.spi = 0xc002;
    let LiveError(e) = m.add_tunnel(renamed, 101).unwrap_err();
    assert!(e.contains("outbound SPI 0x0000a001"), "{e}");
    assert_eq!(m.tunnel_names(), vec!["t"]);
}

#[test]
fn hard_expiry_removes_the_sas_and_discards_the_traffic() {
    let mut m = manager("lifetime = { seconds = 60 }", "discard", "");
    m.tick(159);
    assert_eq!(outbound_for(&m, "10.1.0.7", "10.2.0.9"), Ok(0xa001));
    assert_eq!(m.events().soft_expiries, 2, "soft at 90% = 54 s");
    m.tick(160);
    assert_eq!(m.events().hard_expiries, 2);
    assert_eq!(
        outbound_for(&m, "10.1.0.7", "10.2.0.9"),
        Err(Action::Discard)
    );
    assert!(inbound_spis(&m).is_empty());
    assert!(m.sa_list(160).is_empty());
    let status = m.tunnel_status();
    assert_eq!((status[0].out_spi, status[0].in_spi), (None, None));
    // A rekey brings the tunnel back.
    m.rekey("t", Some(sa_keys(0xa002, 1)), Some(sa_keys(0xb002, 2)), 161)
        .unwrap();
    assert_eq!(outbound_for(&m, "10.1.0.7", "10.2.0.9"), Ok(0xa002));
    assert_eq!(inbound_spis(&m), vec![0xb002]);
}

#[test]
fn soft_expiry_raises_one_event_per_sa_and_shows_in_status() {
    let mut m = manager(
        "lifetime = { seconds = 100, soft_seconds = 50 }",
        "discard",
        "",
    );
    m.tick(149);
    assert_eq!(m.events().soft_expiries, 0);
    assert!(m.soft_expired().is_empty());
    m.tick(150);
    m.tick(151);
    assert_eq!(m.events().soft_expiries, 2, "once per SA, not per tick");
    let soft = m.soft_expired();
    assert_eq!(soft.len(), 2);
    assert!(soft.iter().any(|r| r.dir == Dir::Out && r.spi == 0xa001));
    assert!(soft.iter().any(|r| r.dir == Dir::In && r.spi == 0xb001));
    let sas = m.sa_list(151);
    assert!(sas.iter().all(|s| s.state == SaState::SoftExpired));
    assert!(sas.iter().all(|s| s.lifetime_left.seconds == Some(49)));
    // Still carrying traffic.
    assert_eq!(outbound_for(&m, "10.1.0.7", "10.2.0.9"), Ok(0xa001));
    assert!(m.tunnel_status()[0].soft_expired);
    let kinds: Vec<String> = m.recent_events().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds.iter().filter(|k| *k == "soft-expiry").count(), 2);
}

/// (outbound SPI, inbound SPIs) of tunnel 0 in every snapshot published.
type Seen = Arc<Mutex<Vec<(Option<u32>, Vec<u32>)>>>;

fn recording_manager(seen: &Seen) -> SaManager<Tables> {
    let seen = Arc::clone(seen);
    let builder = move |view: &LiveView| {
        let t = view.tunnels.iter().find(|t| t.id == TunnelId(0)).unwrap();
        seen.lock().unwrap().push((
            t.outbound.map(|o| o.spi()),
            t.inbound.iter().map(|i| i.spi).collect(),
        ));
        Tables::from_view(view, 1500)
    };
    SaManager::new(
        &config(gateway_toml(1, "", "discard", "")),
        100,
        Box::new(builder),
    )
    .unwrap()
}

#[test]
fn rekey_is_make_before_break() {
    let seen: Seen = Arc::default();
    let mut m = recording_manager(&seen);
    m.rekey("t", Some(sa_keys(0xa002, 1)), Some(sa_keys(0xb002, 2)), 101)
        .unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            (Some(0xa001), vec![0xb001]),
            // Make: the new inbound SA is published next to the old one...
            (Some(0xa001), vec![0xb002, 0xb001]),
            // ...before the outbound SA switches.
            (Some(0xa002), vec![0xb002, 0xb001]),
        ]
    );
    let states: Vec<(u32, SaState)> = m.sa_list(101).iter().map(|s| (s.spi, s.state)).collect();
    assert_eq!(
        states,
        vec![
            (0xa002, SaState::Active),
            (0xb002, SaState::Active),
            (0xb001, SaState::Draining)
        ]
    );
    // Default drain: 5 s idle. The old SA stays until then...
    m.tick(105);
    assert_eq!(seen.lock().unwrap().len(), 3);
    // ...and goes (break) with one more publish.
    m.tick(106);
    assert_eq!(
        seen.lock().unwrap().last().unwrap(),
        &(Some(0xa002), vec![0xb002])
    );
    assert_eq!(m.events().drained, 1);
}

#[test]
fn a_bad_rekey_changes_nothing() {
    let seen: Seen = Arc::default();
    let mut m = recording_manager(&seen);
    let mut short = sa_keys(0xa002, 1);
    short.key = espgw_control::config::SecretBytes::from_hex("0011").unwrap();
    let e = m
        .rekey("t", Some(short), Some(sa_keys(0xb002, 2)), 101)
        .unwrap_err();
    assert!(e.0.contains("out"), "{e}");
    // Reusing the current inbound SPI is refused too.
    assert!(m.rekey("t", None, Some(sa_keys(0xb001, 3)), 101).is_err());
    assert!(m
        .rekey("nope", None, Some(sa_keys(0xb003, 3)), 101)
        .is_err());
    assert_eq!(seen.lock().unwrap().len(), 1, "nothing published");
}

#[test]
fn drain_timeout_removes_a_busy_old_sa() {
    let mut m = manager("", "discard", "");
    m.set_drain_policy(espgw_control::live::DrainPolicy {
        idle_seconds: 1_000,
        timeout_seconds: 10,
    });
    m.rekey("t", None, Some(sa_keys(0xb002, 2)), 100).unwrap();
    m.tick(109);
    assert_eq!(inbound_spis(&m), vec![0xb001, 0xb002]);
    m.tick(110);
    assert_eq!(inbound_spis(&m), vec![0xb002]);
}

#[test]
fn state_changes_are_logged_without_keys() {
    let logs = logs();
    let mut m = manager("lifetime = { seconds = 60 }", "discard", "");
    m.rekey("t", Some(sa_keys(0xa002, 7)), Some(sa_keys(0xb002, 8)), 101)
        .unwrap();
    m.tick(170);
    let lines = logs.lock().unwrap().clone();
    for needle in [
        "SA up",
        "rekey: new inbound SA installed",
        "rekey: outbound switched",
        "hard expiry",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(needle)),
            "no {needle:?} in {lines:#?}"
        );
    }
    for key in [&KEY_A[2..], &KEY_B[2..], &key_hex(7), &key_hex(8)] {
        assert!(!lines.iter().any(|l| l.contains(&key[..16])), "key in logs");
    }
}

fn encap(m: &SaManager<Tables>, n: usize) {
    let tables = m.current();
    let sa = tables
        .sad
        .outbound_sa(TunnelId(0))
        .and_then(|s| s.outbound())
        .unwrap();
    let mut burst: Vec<_> = (0..n)
        .map(|i| inner_packet([10, 1, 0, 7], [10, 2, 0, 9], i as u64))
        .collect();
    let mut v = vec![espgw_esp::Verdict::Forward; n];
    assert_eq!(sa.encap_burst(&mut burst, &mut v, 100), n);
}

#[test]
fn tunnel_totals_keep_the_counts_of_replaced_sas() {
    let mut m = manager("", "discard", "");
    encap(&m, 3);
    m.rekey("t", Some(sa_keys(0xa002, 1)), None, 101).unwrap();
    encap(&m, 2);
    let out_sa = m.sa_list(101);
    assert_eq!(out_sa[0].spi, 0xa002);
    assert_eq!(out_sa[0].packets, 2);
    let totals = m.tunnel_totals();
    let out = totals.iter().find(|t| t.dir == Dir::Out).unwrap();
    assert_eq!(
        (out.tunnel.as_str(), out.packets, out.bytes),
        ("t", 5, 5 * 60)
    );
    let inb = totals.iter().find(|t| t.dir == Dir::In).unwrap();
    assert_eq!(inb.packets, 0);
}

/// Packets a worker still encrypts on the old outbound SA after the switch
/// (its snapshot is one behind) count in the tunnel's totals: found by
/// tests/e2e/live_ops.sh, where A's totals came out hundreds below the wire.
#[test]
fn tunnel_totals_count_packets_sent_on_a_replaced_sa_after_the_switch() {
    let mut m = manager("", "discard", "");
    let mut worker = m.reader();
    let outbound_of = |t: &Tables| -> Arc<LiveSa> {
        Arc::clone(t.sad.outbound_sa(TunnelId(0)).expect("an outbound SA"))
    };
    // What a worker holds while it encrypts a burst.
    let old_sa = outbound_of(worker.get());
    let send = |sa: &LiveSa, n: usize| {
        let sa = sa.outbound().expect("outbound");
        let mut pkts: Vec<_> = (0..n)
            .map(|i| inner_packet([10, 1, 0, 7], [10, 2, 0, 9], i as u64))
            .collect();
        let mut v = vec![espgw_esp::Verdict::Forward; n];
        sa.encap_burst(&mut pkts, &mut v, 100)
    };
    assert_eq!(send(&old_sa, 5), 5);
    m.switch_outbound("t", sa_keys(0xa002, 901), 101).unwrap();
    // The worker has not passed a quiescent point yet: 7 more on the old SA.
    assert_eq!(send(&old_sa, 7), 7);
    let out = |m: &SaManager<Tables>| {
        m.tunnel_totals()
            .into_iter()
            .find(|t| t.dir == Dir::Out)
            .unwrap()
            .packets
    };
    assert_eq!(out(&m), 12);
    // Once the worker moves on and the old snapshot is reclaimed, the
    // count is final and stays.
    drop(old_sa);
    worker.quiescent();
    m.tick(102);
    assert_eq!(out(&m), 12);
    let new_sa = outbound_of(worker.get());
    assert_eq!(send(&new_sa, 3), 3);
    assert_eq!(out(&m), 15);
}

/// With a publish wait (what `espgw run` sets), rekey step 1 returns only
/// once every worker holds the snapshot with the new inbound SA.
#[test]
fn inbound_install_waits_for_every_worker_to_take_the_new_snapshot() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;
    let mut m = manager("", "discard", "");
    m.set_publish_wait(Duration::from_secs(10));
    let mut worker = m.reader();
    let stop = Arc::new(AtomicBool::new(false));
    let seen_new = Arc::new(AtomicBool::new(false));
    let thread = {
        let (stop, seen_new) = (Arc::clone(&stop), Arc::clone(&seen_new));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // A slow worker: a burst takes 20 ms.
                std::thread::sleep(Duration::from_millis(20));
                if worker.quiescent() {
                    let has = worker
                        .get()
                        .sad
                        .inbound_sa(0xb002, ip("192.0.2.1"))
                        .is_some();
                    seen_new.store(has, Ordering::Relaxed);
                }
            }
        })
    };
    m.install_inbound("t", sa_keys(0xb002, 902), 101).unwrap();
    // Returned: the worker took the snapshot (it records what it saw right
    // after taking it, so allow it that instant).
    std::thread::sleep(Duration::from_millis(5));
    assert!(
        seen_new.load(Ordering::Relaxed),
        "install returned before the worker switched"
    );
    stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();
}

/// A scrape (`sa list`, tunnel totals: what metrics and `espgw ctl stats`
/// read) sees what workers decrypting at the same time add to an inbound
/// SA's counters: there is no lock to take (the SA is shared as is), and
/// every worker's bursts add to the one set of counters.
#[test]
fn sa_counters_add_up_over_workers_decrypting_at_once() {
    use espgw_esp::Verdict;
    use espgw_wire::VecBuf;
    let m = manager("", "discard", "");
    let tables = m.current();
    let inbound = Arc::clone(
        tables
            .sad
            .inbound_sa(0xb001, ip("192.0.2.1"))
            .expect("the inbound SA"),
    );
    // Four workers, 50 bursts of 8 packets each too short to be ESP.
    std::thread::scope(|s| {
        for _ in 0..4 {
            let sa = inbound.inbound().expect("inbound");
            s.spawn(move || {
                for _ in 0..50 {
                    let mut burst: Vec<VecBuf> =
                        (0..8).map(|_| VecBuf::from_packet(&[0x45; 12])).collect();
                    let mut v = vec![Verdict::Forward; 8];
                    assert_eq!(sa.decap_burst(&mut burst, &mut v, 101), 0);
                }
            });
        }
    });
    let list = m.sa_list(101);
    let row = list
        .iter()
        .find(|r| r.spi == 0xb001)
        .expect("the inbound SA's row");
    assert_eq!(
        row.drops.values().sum::<u64>(),
        4 * 50 * 8,
        "{:?}",
        row.drops
    );
    assert_eq!(row.packets, 0);
}

/// Inbound SAs are found by SPI alone (as the config reader requires), so a
/// live tunnel with another local address may not take an inbound SPI that
/// is in use: it would take the other tunnel's ESP. The same for a rekey.
#[test]
fn an_inbound_spi_in_use_is_refused_whatever_the_local_address() {
    let mut m = manager("", "discard", "");
    let mut other = second_tunnel();
    other.local = ip("192.0.2.9");
    other.inbound.spi = 0xb001; // tunnel t's inbound SPI, on 192.0.2.1
    let LiveError(e) = m.add_tunnel(other, 101).unwrap_err();
    assert!(e.contains("inbound SPI 0x0000b001"), "{e}");
    m.add_tunnel(second_tunnel(), 101).unwrap();
    let LiveError(e) = m
        .install_inbound("u", sa_keys(0xb001, 903), 102)
        .unwrap_err();
    assert!(e.contains("inbound SPI 0x0000b001"), "{e}");
}

/// `sa_add` over the socket never reads a file on the gateway's side: a
/// client could make it read any path as root (and learn which exist).
#[test]
fn a_live_tunnel_with_a_key_file_is_refused() {
    let c = config(gateway_toml(1, "", "discard", ""));
    let parser = espgw_control::live::TunnelParser::new(&c);
    let mut fields: serde_json::Value = serde_json::from_str(SECOND_TUNNEL).unwrap();
    fields["key_file"] = serde_json::json!("/etc/hostname");
    let e = parser.parse(&fields).unwrap_err();
    assert!(
        e.contains("key_file: not accepted over the control socket"),
        "{e}"
    );
}
