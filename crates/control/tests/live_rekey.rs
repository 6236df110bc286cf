//! The proof without DPDK: rekey 1,000 times while packets flow
//! from gateway 1 to gateway 2, and lose none.
//!
//! Two `SaManager`s (one per gateway) publish `Tables`; a sender
//! thread (gateway 1's worker) looks up the SPD and the outbound SA in its
//! snapshot and encrypts bursts with real AES-GCM; a receiver thread
//! (gateway 2's worker) finds the inbound SA by SPI in its own snapshot and
//! decrypts. Packets travel through a bounded channel, so some are always
//! in flight when a rekey happens. Each rekey is make-before-break across
//! the two gateways: gateway 2 installs the new inbound SA first, then
//! gateway 1 switches its outbound SA; gateway 2 keeps the old inbound SA
//! until it is idle for the drain time.

#[path = "live_support.rs"]
mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use espgw_control::live::{DrainPolicy, SaManager, SaState};
use espgw_control::tables::Action;
use espgw_esp::{DropReason, Verdict};
use espgw_wire::VecBuf;
use support::*;

const BURST: usize = 8;
/// Bursts the "wire" holds.
const IN_FLIGHT: usize = 4;
const REKEYS: u32 = 1000;

#[derive(Default)]
struct Tally {
    sent: AtomicU64,
    /// The sender found no SA (must stay 0: a rekey never leaves a gap).
    no_outbound: AtomicU64,
    received: AtomicU64,
    unknown_spi: AtomicU64,
    replayed: AtomicU64,
    other_drops: AtomicU64,
    out_of_order: AtomicU64,
}

#[test]
fn a_thousand_rekeys_lose_no_packet() {
    let mut gw1 =
        SaManager::with_control_tables(&config(gateway_toml(1, "", "discard", "")), 0).unwrap();
    let mut gw2 =
        SaManager::with_control_tables(&config(gateway_toml(2, "", "discard", "")), 0).unwrap();
    let drain = DrainPolicy {
        idle_seconds: 2,
        timeout_seconds: 30,
    };
    gw2.set_drain_policy(drain);
    let clock = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let (wire_tx, wire_rx) = sync_channel::<Vec<VecBuf>>(IN_FLIGHT);

    let sender = {
        let mut reader = gw1.reader();
        let (stop, tally, clock) = (stop.clone(), tally.clone(), clock.clone());
        std::thread::spawn(move || {
            let key = flow("10.1.0.7", "10.2.0.9");
            let mut counter = 0u64;
            let mut verdicts = [Verdict::Forward; BURST];
            while !stop.load(Ordering::Relaxed) {
                reader.quiescent();
                let tables = reader.get();
                let Action::Protect(tunnel) = tables.spd.lookup(&key) else {
                    panic!("the tunnel's traffic is not protected");
                };
                let Some(sa) = tables.sad.outbound_sa(tunnel).and_then(|s| s.outbound()) else {
                    tally.no_outbound.fetch_add(BURST as u64, Ordering::Relaxed);
                    continue;
                };
                let mut burst: Vec<VecBuf> = (0..BURST)
                    .map(|i| inner_packet([10, 1, 0, 7], [10, 2, 0, 9], counter + i as u64))
                    .collect();
                let now = clock.load(Ordering::Relaxed);
                let sent = sa.encap_burst(&mut burst, &mut verdicts, now);
                assert_eq!(sent, BURST, "encap dropped {verdicts:?}");
                counter += BURST as u64;
                tally.sent.fetch_add(BURST as u64, Ordering::Relaxed);
                if wire_tx.send(burst).is_err() {
                    break;
                }
            }
        })
    };

    let receiver = {
        let mut reader = gw2.reader();
        let (tally, clock) = (tally.clone(), clock.clone());
        std::thread::spawn(move || {
            let mut expected = 0u64;
            loop {
                let burst = match wire_rx.recv_timeout(Duration::from_millis(20)) {
                    Ok(b) => b,
                    Err(RecvTimeoutError::Timeout) => {
                        reader.quiescent();
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                };
                // A poll-loop iteration: quiescent point, then the burst.
                reader.quiescent();
                let tables = reader.get();
                let now = clock.load(Ordering::Relaxed);
                for mut pkt in burst {
                    let Some((spi, dst)) = esp_spi_dst(&pkt) else {
                        tally.other_drops.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let Some(sa) = tables.sad.inbound_sa(spi, dst).and_then(|s| s.inbound()) else {
                        tally.unknown_spi.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let mut v = [Verdict::Forward];
                    sa.decap_burst(std::slice::from_mut(&mut pkt), &mut v, now);
                    match v[0] {
                        Verdict::Forward => {
                            if counter_of(&pkt) != Some(expected) {
                                tally.out_of_order.fetch_add(1, Ordering::Relaxed);
                            }
                            expected = counter_of(&pkt).unwrap_or(expected) + 1;
                            tally.received.fetch_add(1, Ordering::Relaxed);
                        }
                        Verdict::Drop(DropReason::Replayed) => {
                            tally.replayed.fetch_add(1, Ordering::Relaxed);
                        }
                        Verdict::Drop(_) => {
                            tally.other_drops.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
        })
    };

    let wait_for_traffic = |bursts: u64| {
        let target = tally.received.load(Ordering::Relaxed) + bursts * BURST as u64;
        let deadline = Instant::now() + Duration::from_secs(20);
        while tally.received.load(Ordering::Relaxed) < target {
            let lost = tally.unknown_spi.load(Ordering::Relaxed)
                + tally.other_drops.load(Ordering::Relaxed);
            assert!(lost == 0, "packets lost while waiting");
            assert!(Instant::now() < deadline, "traffic stalled");
            std::thread::yield_now();
        }
    };

    wait_for_traffic(2);
    let mut max_draining = 0;
    for k in 1..=REKEYS {
        let now = clock.fetch_add(1, Ordering::Relaxed) + 1;
        gw1.tick(now);
        gw2.tick(now);
        // New SPI and key for the 1 -> 2 direction, both ends.
        let spi = 0x0001_0000 + k;
        gw2.install_inbound("t", sa_keys(spi, k), now).unwrap();
        gw1.switch_outbound("t", sa_keys(spi, k), now).unwrap();
        // A tick while the old SA's packets are still in flight must not
        // remove it (it is not idle for the drain time yet).
        gw2.tick(now);
        // Every burst sealed under the old SA was on the wire or being
        // sealed when the switch was published: IN_FLIGHT + 1 bursts at
        // most. Wait for more than that, so the old SA has carried all its
        // packets before the drain clock can run out on it.
        wait_for_traffic(IN_FLIGHT as u64 + 2);
        let draining = gw2
            .sa_list(now)
            .iter()
            .filter(|s| s.state == SaState::Draining)
            .count();
        max_draining = max_draining.max(draining);
    }
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    receiver.join().unwrap();

    let t = &tally;
    let sent = t.sent.load(Ordering::Relaxed);
    let received = t.received.load(Ordering::Relaxed);
    eprintln!("{REKEYS} rekeys: sent {sent}, received {received}, max draining SAs {max_draining}");
    assert_eq!(t.no_outbound.load(Ordering::Relaxed), 0, "outbound gap");
    assert_eq!(
        t.unknown_spi.load(Ordering::Relaxed),
        0,
        "lost: unknown SPI"
    );
    assert_eq!(t.replayed.load(Ordering::Relaxed), 0, "replay-dropped");
    assert_eq!(t.other_drops.load(Ordering::Relaxed), 0, "other drops");
    assert_eq!(
        t.out_of_order.load(Ordering::Relaxed),
        0,
        "lost or reordered"
    );
    assert_eq!(sent, received, "every packet sent arrived");
    assert!(received >= u64::from(REKEYS) * (IN_FLIGHT as u64 + 2) * BURST as u64);

    // Old inbound SAs were drained all along, not piled up...
    assert!(max_draining <= 3, "{max_draining} draining SAs at once");
    assert_eq!(gw2.events().rekeys_inbound, u64::from(REKEYS));
    assert_eq!(gw1.events().rekeys_outbound, u64::from(REKEYS));
    // ...and once idle for the drain time, only the newest SA is left.
    let later = clock.load(Ordering::Relaxed) + drain.idle_seconds + 1;
    gw2.tick(later);
    gw2.tick(later + drain.idle_seconds);
    let sas = gw2.sa_list(later);
    let inbound: Vec<u32> = sas
        .iter()
        .filter(|s| s.dir == espgw_control::live::Dir::In)
        .map(|s| s.spi)
        .collect();
    assert_eq!(inbound, vec![0x0001_0000 + REKEYS]);
    assert_eq!(gw2.events().drained, u64::from(REKEYS));
    // The newest inbound SA carried the packets sent after the last rekey.
    let newest = sas.iter().find(|s| s.spi == 0x0001_0000 + REKEYS).unwrap();
    assert!(newest.packets > 0);
}
