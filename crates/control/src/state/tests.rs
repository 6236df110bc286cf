//! The state directory and the sequence keeper, on real files.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use espgw_esp::config::{Encap, Lifetimes, SaConfig};
use espgw_esp::{InboundSa, OutboundSa, Suite, Verdict};
use espgw_wire::{PacketBuf, VecBuf};

use super::*;

fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "espgw-state-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Relaxed)
    ));
    let _ = fs::remove_dir_all(&dir);
    dir
}

fn sa_config(spi: u32, key: u8) -> SaConfig {
    let suite = Suite::Aes128Gcm16;
    SaConfig {
        suite,
        spi,
        key: vec![key; suite.key_len()].into(),
        auth_key: Vec::new().into(),
        esn: false,
        replay_window: 64,
        encap: Encap::None,
        local: "192.0.2.1".parse::<IpAddr>().unwrap(),
        remote: "192.0.2.2".parse::<IpAddr>().unwrap(),
        lifetimes: Lifetimes::default(),
    }
}

fn small_blocks() -> ReservationPolicy {
    ReservationPolicy {
        first_block: 100,
        max_block: 800,
        fast_refill: Duration::from_secs(2),
    }
}

fn keeper(dir: &Path) -> SeqKeeper {
    SeqKeeper::new(StateDir::open(dir).unwrap(), small_blocks())
}

fn id_of(k: &SeqKeeper, cfg: &SaConfig) -> KeyId {
    k.key_id(cfg.suite, cfg.key.expose(), cfg.auth_key.expose())
}

fn admit_out(k: &SeqKeeper, cfg: &SaConfig, a: Admission) -> Result<Arc<OutboundSa>, KeyRefused> {
    k.admit_outbound("t1", id_of(k, cfg), OutboundSa::new(cfg, 0).unwrap(), a)
}

/// Sends `n` packets through `sa`; returns the sequence numbers used.
fn send(sa: &OutboundSa, n: usize) -> Vec<u64> {
    let mut used = Vec::new();
    for chunk in 0..n.div_ceil(32) {
        let m = (n - chunk * 32).min(32);
        let mut pkts: Vec<VecBuf> = (0..m)
            .map(|_| {
                let mut p = vec![0u8; 60];
                p[0] = 0x45;
                p[3] = 60;
                p[8] = 64;
                p[9] = 17;
                VecBuf::with_room(&p, 128, 128)
            })
            .collect();
        let mut v = vec![Verdict::Forward; m];
        sa.encap_burst(&mut pkts, &mut v, 0);
        for (p, v) in pkts.iter().zip(&v) {
            if v.is_forward() {
                used.push(u64::from(u32::from_be_bytes(
                    p.data()[24..28].try_into().unwrap(),
                )));
            }
        }
    }
    used
}

#[test]
fn directory_and_secret_are_private_and_records_never_hold_the_key() {
    let dir = temp_dir("modes");
    let k = keeper(&dir);
    let cfg = sa_config(0x1001, 0xab);
    admit_out(&k, &cfg, Admission::Startup).unwrap();
    assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    assert_eq!(
        fs::metadata(dir.join("secret")).unwrap().mode() & 0o777,
        0o600
    );
    let key_hex: String = cfg
        .key
        .expose()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    for e in fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        assert!(!name.contains(&key_hex[..16]), "{name}");
        if name.ends_with(".seq") {
            assert_eq!(e.metadata().unwrap().mode() & 0o777, 0o600);
            let text = fs::read_to_string(e.path()).unwrap();
            assert!(!text.contains(&key_hex[..16]), "{text}");
        }
    }
}

#[test]
fn a_restart_continues_above_the_last_reservation_even_after_a_crash() {
    let dir = temp_dir("restart");
    let cfg = sa_config(0x1001, 1);
    let first_run = {
        let k = keeper(&dir);
        let sa = admit_out(&k, &cfg, Admission::Startup).unwrap();
        // Without the keeper the SA stops at its first reservation.
        let used = send(&sa, 150);
        assert_eq!(used.len(), 100);
        assert_eq!(
            sa.stats().drops.get(espgw_esp::DropReason::SeqNotReserved),
            50
        );
        // The keeper refills once half a block is used: (no poll here is
        // a crash right after the refill below; nothing is flushed).
        assert_eq!(k.poll(Instant::now(), false), 1);
        let more = send(&sa, 150);
        assert!(more.len() > 50, "refilled: {}", more.len());
        used.into_iter().chain(more).collect::<Vec<_>>()
    };
    let second_run = {
        let k = keeper(&dir);
        let sa = admit_out(&k, &cfg, Admission::Startup).unwrap();
        send(&sa, 50)
    };
    let max_first = *first_run.iter().max().unwrap();
    assert!(
        second_run.iter().all(|s| *s > max_first),
        "the second run reused numbers: first up to {max_first}, second {second_run:?}"
    );
}

#[test]
fn blocks_grow_while_an_sa_uses_them_up_quickly() {
    let dir = temp_dir("grow");
    let k = keeper(&dir);
    let cfg = sa_config(0x1001, 1);
    let sa = admit_out(&k, &cfg, Admission::Startup).unwrap();
    let mut ceilings = vec![sa.ceiling()];
    for _ in 0..5 {
        let left = sa.ceiling() - sa.last_sequence();
        send(&sa, left as usize);
        k.poll(Instant::now(), false);
        ceilings.push(sa.ceiling());
    }
    let steps: Vec<u64> = ceilings.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(steps, [200, 400, 800, 800, 800], "ceilings {ceilings:?}");
}

#[test]
fn a_key_of_another_sa_is_refused_and_live_changes_refuse_any_known_key() {
    let dir = temp_dir("reuse");
    let k = keeper(&dir);
    let cfg = sa_config(0x1001, 1);
    admit_out(&k, &cfg, Admission::Startup).unwrap();
    // Same key under another SPI, at start-up.
    let other = sa_config(0x2002, 1);
    let err = admit_out(&k, &other, Admission::Startup).unwrap_err();
    assert!(
        matches!(&err, KeyRefused::Reused { previous } if previous.spi == 0x1001),
        "{err}"
    );
    assert!(err.to_string().contains("0x00001001"), "{err}");
    // The same key inbound.
    let inbound = InboundSa::new(&sa_config(0x1001, 1), 0).unwrap();
    assert!(k
        .admit_inbound("t1", id_of(&k, &cfg), inbound, Admission::Startup)
        .is_err());
    // Live: even the same SA's own key is refused.
    assert!(admit_out(&k, &cfg, Admission::Live).is_err());
    // A new key is fine, and after a restart it is known.
    admit_out(&k, &sa_config(0x3003, 3), Admission::Live).unwrap();
    let k2 = keeper(&dir);
    assert!(admit_out(&k2, &sa_config(0x4004, 3), Admission::Startup).is_err());
}

#[test]
fn inbound_high_water_mark_survives_a_restart() {
    let dir = temp_dir("inbound");
    let cfg = sa_config(0x5005, 5);
    {
        let k = keeper(&dir);
        let id = id_of(&k, &cfg);
        let sa = k
            .admit_inbound(
                "t1",
                id,
                InboundSa::new(&cfg, 0).unwrap(),
                Admission::Startup,
            )
            .unwrap();
        // What a worker's bursts publish.
        sa.counters().set_highest_seen(500);
        // Not yet due, so not written...
        assert_eq!(k.poll(Instant::now(), false), 0);
        // ...but at shutdown.
        assert_eq!(k.poll(Instant::now(), true), 1);
        assert_eq!(k.record(&id).unwrap().value, 500);
    }
    let k = keeper(&dir);
    let sa = k
        .admit_inbound(
            "t1",
            id_of(&k, &cfg),
            InboundSa::new(&cfg, 0).unwrap(),
            Admission::Startup,
        )
        .unwrap();
    let w = sa.replay_window();
    assert_eq!(w.top(), 500);
    assert!(w.check(480).is_err() && w.check(500).is_err() && w.check(501).is_ok());
}

#[test]
fn an_unusable_directory_is_an_error_that_names_the_file() {
    // A path below a regular file can never become a directory (root or not).
    let base = temp_dir("unusable");
    fs::create_dir_all(&base).unwrap();
    let file = base.join("not-a-dir");
    fs::write(&file, b"x").unwrap();
    let err = StateDir::open(&file.join("gw")).err().expect("refused");
    assert!(err.to_string().contains("not-a-dir"), "{err}");

    // Group-writable directories are refused (others could roll state back).
    let open = base.join("open");
    fs::create_dir_all(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o770)).unwrap();
    let err = StateDir::open(&open).err().expect("refused");
    assert!(err.what.contains("writable by group or others"), "{err}");

    // A damaged record is named, not skipped.
    let dir = temp_dir("damaged");
    let k = keeper(&dir);
    admit_out(&k, &sa_config(0x1001, 1), Admission::Startup).unwrap();
    let rec = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "seq"))
        .unwrap();
    fs::write(&rec, b"garbage").unwrap();
    let err = StateDir::open(&dir).err().expect("refused");
    assert_eq!(err.path, rec);
}

#[test]
fn a_failed_refill_leaves_the_ceiling_where_it_was() {
    let dir = temp_dir("refill-fails");
    let k = keeper(&dir);
    let cfg = sa_config(0x1001, 1);
    let sa = admit_out(&k, &cfg, Admission::Startup).unwrap();
    send(&sa, 80);
    // The record's path becomes a non-empty directory: the rename fails.
    let rec = k
        .path()
        .join(format!("out-00001001-{}.seq", id_of(&k, &cfg)));
    fs::remove_file(&rec).unwrap();
    fs::create_dir_all(rec.join("blocker")).unwrap();
    assert_eq!(k.poll(Instant::now(), false), 0);
    assert_eq!(k.failures(), 1);
    assert_eq!(sa.ceiling(), 100);
    assert_eq!(send(&sa, 40).len(), 20);
}
