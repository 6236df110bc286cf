//! Lifetimes between two engines with deterministic time: soft (rekey,
//! reauth) limits with their jitter, hard limits, byte and packet limits
//! reported by the caller, both sides' timers racing (RFC 7296 2.8.1,
//! 2.8.2, 2.25), INVALID_KE_PAYLOAD retries on rekeys, NAT keepalives.

mod engine_common;

use engine_common::*;
use espgw_ike::engine::{ChildSa, Engine, Event, IkeSaId, Lifetimes};
use espgw_ike::message::{ExchangeType, Message, NotifyType};

const PSK: &[u8] = b"lifetime psk";
const IKE: &str = "aes128gcm16-prfsha256-x25519";

/// No timed rekeys at all: each test turns on what it tests.
fn off() -> Lifetimes {
    Lifetimes {
        ike_rekey_time_ms: 0,
        child_rekey_time_ms: 0,
        ..Lifetimes::default()
    }
}

fn pair(la: Lifetimes, lb: Lifetimes, esp_a: &str, esp_b: &str) -> Pair {
    let (mut a, mut b) = connections(PSK, PSK, IKE, IKE, esp_a, esp_b);
    a.lifetimes = la;
    b.lifetimes = lb;
    Pair::new(a, b, test_config())
}

/// Brings the pair up at time 0: (a's IKE SA, b's, a's CHILD_SA, b's).
fn up(p: &mut Pair) -> (IkeSaId, IkeSaId, ChildSa, ChildSa) {
    let id_a = p.a.initiate(p.now, 0).unwrap();
    p.run(&[], 1_000);
    let id_b = ike_up(&p.events_b)[0];
    let (ca, cb) = (
        children(&p.events_a)[0].clone(),
        children(&p.events_b)[0].clone(),
    );
    p.events_a.clear();
    p.events_b.clear();
    p.sent.clear();
    (id_a, id_b, ca, cb)
}

/// Runs until time `t` (timers up to it fire), then sets the clock to it.
fn until(p: &mut Pair, t: u64) {
    p.run(&[], t.saturating_sub(p.now));
    p.now = p.now.max(t);
}

fn ike_up(events: &[Event]) -> Vec<IkeSaId> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::IkeSaUp { ike_sa, .. } => Some(*ike_sa),
            _ => None,
        })
        .collect()
}

fn deleted(events: &[Event]) -> Vec<u32> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ChildSaDeleted { inbound_spi, .. } => Some(*inbound_spi),
            _ => None,
        })
        .collect()
}

fn failures(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::IkeSaFailed { .. }
                    | Event::ChildSaFailed { .. }
                    | Event::IkeRekeyFailed { .. }
                    | Event::AuthFailed { .. }
            )
        })
        .count()
}

/// The CHILD_SAs alive after `events`, starting from `first`, as
/// (inbound, outbound) SPI.
fn alive(events: &[Event], first: &ChildSa) -> Vec<(u32, u32)> {
    let mut alive = vec![(first.inbound_spi, first.outbound_spi)];
    for e in events {
        match e {
            Event::ChildSaInstalled(c) => alive.push((c.inbound_spi, c.outbound_spi)),
            Event::ChildSaDeleted { inbound_spi, .. } => alive.retain(|(i, _)| i != inbound_spi),
            _ => {}
        }
    }
    alive
}

/// The IKE header of every request of `exchange` sent, with its sender.
fn requests(p: &Pair, exchange: ExchangeType) -> Vec<(std::net::SocketAddr, bool)> {
    p.sent
        .iter()
        .filter_map(|t| {
            let d = t
                .payload
                .strip_prefix(&[0, 0, 0, 0][..])
                .unwrap_or(&t.payload);
            let h = Message::parse_raw(d).ok()?.0;
            (h.exchange == exchange && !h.response).then_some((t.src, h.initiator))
        })
        .collect()
}

fn child_lifetimes(e: &Engine<SeededRng>, sa: IkeSaId, spi: u32) -> (u64, u64) {
    let (r, x) = e.child_sa_lifetimes(sa, spi).unwrap();
    (r.unwrap(), x.unwrap())
}

#[test]
fn child_sa_soft_rekey_fires_within_its_jitter_window_then_hard_never_comes() {
    // rekey_time 60 s: life_time 66 s, rand_time 6 s (strongSwan's
    // defaults derived from rekey_time).
    let l = Lifetimes {
        child_rekey_time_ms: 60_000,
        ..off()
    };
    let mut p = pair(l.clone(), l, "aes128gcm16", "aes128gcm16");
    let (id_a, id_b, ca, cb) = up(&mut p);
    let (ra, xa) = child_lifetimes(&p.a, id_a, ca.inbound_spi);
    let (rb, xb) = child_lifetimes(&p.b, id_b, cb.inbound_spi);
    for r in [ra, rb] {
        assert!((54_001..=60_000).contains(&r), "rekey at {r}");
    }
    assert_eq!((xa, xb), (66_000, 66_000));
    // Drawn per side from each engine's own random source.
    assert_ne!(ra, rb);
    let first = ra.min(rb);
    until(&mut p, first - 1);
    assert!(children(&p.events_a).is_empty() && children(&p.events_b).is_empty());
    assert!(requests(&p, ExchangeType::CREATE_CHILD_SA).is_empty());
    until(&mut p, first);
    // Exactly one rekey, by whoever's timer fired first.
    let reqs = requests(&p, ExchangeType::CREATE_CHILD_SA);
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    let by = if ra < rb { addr(A) } else { addr(B) };
    assert_eq!(reqs[0].0, by);
    let (na, nb) = (children(&p.events_a), children(&p.events_b));
    assert_eq!((na.len(), nb.len()), (1, 1));
    assert_same_child(na[0], nb[0]);
    assert_eq!(deleted(&p.events_a), vec![ca.inbound_spi]);
    assert_eq!(deleted(&p.events_b), vec![cb.inbound_spi]);
    // The new CHILD_SA has its own, fresh limits counted from `first`.
    let (r2, x2) = child_lifetimes(&p.a, id_a, na[0].inbound_spi);
    assert!((first + 54_001..=first + 60_000).contains(&r2));
    assert_eq!(x2, first + 66_000);
    assert_eq!(failures(&p.events_a) + failures(&p.events_b), 0);
}

#[test]
fn jitter_comes_from_the_random_source_and_differs_per_sa() {
    let l = Lifetimes {
        child_rekey_time_ms: 3_600_000,
        ..off()
    };
    let schedule = |seed: u64| {
        let mut p = pair(l.clone(), off(), "aes128gcm16", "aes128gcm16");
        let (a, _) = connections(PSK, PSK, IKE, IKE, "aes128gcm16", "aes128gcm16");
        p.a = Engine::new(test_config(), SeededRng(seed));
        p.a.add_connection(espgw_ike::engine::Connection {
            lifetimes: l.clone(),
            ..a
        });
        // Two IKE SAs of the same connection, one CHILD_SA each.
        let (id1, _, c1, _) = up(&mut p);
        let (id2, _, c2, _) = up(&mut p);
        (
            child_lifetimes(&p.a, id1, c1.inbound_spi).0,
            child_lifetimes(&p.a, id2, c2.inbound_spi).0,
        )
    };
    let (s1, s2) = schedule(11);
    // rand_time = 10 % of an hour: 54 to 60 minutes.
    for s in [s1, s2] {
        assert!((3_240_001..=3_600_000).contains(&s), "{s}");
    }
    assert_ne!(s1, s2, "each SA draws its own jitter");
    assert_eq!(schedule(11), (s1, s2), "the same seed, the same times");
    assert_ne!(schedule(12), (s1, s2), "another seed, other times");
    // rand_time 0 (here: 1 ms, a range holding only 0): no jitter at all.
    let exact = Lifetimes {
        child_rekey_time_ms: 60_000,
        child_rand_time_ms: Some(1),
        ..off()
    };
    let mut p = pair(exact.clone(), exact, "aes128gcm16", "aes128gcm16");
    let (id_a, _, ca, _) = up(&mut p);
    assert_eq!(
        child_lifetimes(&p.a, id_a, ca.inbound_spi),
        (60_000, 66_000)
    );
}

#[test]
fn child_sa_hard_limit_deletes_it_on_both_sides() {
    // Only a hard limit (rekey_time 0, life_time 30 s): deleted, not
    // rekeyed.
    let l = Lifetimes {
        child_life_time_ms: Some(30_000),
        ..off()
    };
    let mut p = pair(l, off(), "aes128gcm16", "aes128gcm16");
    let (id_a, _, ca, cb) = up(&mut p);
    assert_eq!(
        p.a.child_sa_lifetimes(id_a, ca.inbound_spi),
        Some((None, Some(30_000)))
    );
    until(&mut p, 29_999);
    assert!(deleted(&p.events_a).is_empty());
    until(&mut p, 30_000);
    assert_eq!(deleted(&p.events_a), vec![ca.inbound_spi]);
    assert_eq!(deleted(&p.events_b), vec![cb.inbound_spi]);
    assert!(children(&p.events_a).is_empty());
    assert_eq!(requests(&p, ExchangeType::INFORMATIONAL).len(), 1);
    assert_eq!(failures(&p.events_a) + failures(&p.events_b), 0);
}

#[test]
fn a_rekey_that_never_completes_ends_at_the_hard_limit() {
    // b refuses every rekey (no common ESP proposal any more): a keeps
    // the old CHILD_SA until life_time, then deletes it.
    let l = Lifetimes {
        child_rekey_time_ms: 60_000,
        child_rand_time_ms: Some(1),
        ..off()
    };
    let mut p = pair(l, off(), "aes128gcm16", "aes128gcm16");
    let (_, _, ca, cb) = up(&mut p);
    p.b.connection_mut(0).unwrap().esp_proposals =
        espgw_ike::crypto::parse_esp_proposals("aes256gcm16").unwrap();
    until(&mut p, 65_999);
    assert!(matches!(
        p.events_a[..],
        [Event::ChildSaFailed {
            notify: NotifyType::NO_PROPOSAL_CHOSEN,
            ..
        }]
    ));
    until(&mut p, 66_000);
    assert_eq!(deleted(&p.events_a), vec![ca.inbound_spi]);
    assert_eq!(deleted(&p.events_b), vec![cb.inbound_spi]);
}

#[test]
fn byte_and_packet_limits_reported_by_the_data_plane() {
    // rekey_bytes 1 MB: life 1.1 MB, rand 100 kB; rekey_packets 1000:
    // life 1100, rand 100.
    let l = Lifetimes {
        child_rekey_bytes: 1_000_000,
        child_rekey_packets: 1_000,
        ..off()
    };
    let mut p = pair(l, off(), "aes128gcm16", "aes128gcm16");
    let (id_a, _, ca, cb) = up(&mut p);
    // Below the soft limit less the largest jitter: nothing.
    p.a.child_sa_usage(p.now, id_a, ca.inbound_spi, 900_000, 900)
        .unwrap();
    p.run(&[], 1_000);
    assert!(p.sent.is_empty());
    // At the configured soft limit: rekeyed (once, however often it is
    // reported).
    p.a.child_sa_usage(p.now, id_a, ca.inbound_spi, 1_000_000, 900)
        .unwrap();
    p.a.child_sa_usage(p.now, id_a, ca.inbound_spi, 1_000_001, 900)
        .unwrap();
    p.run(&[], 1_000);
    assert_eq!(requests(&p, ExchangeType::CREATE_CHILD_SA).len(), 1);
    let (na, nb) = (children(&p.events_a), children(&p.events_b));
    assert_eq!((na.len(), nb.len()), (1, 1));
    assert_same_child(na[0], nb[0]);
    assert_eq!(deleted(&p.events_a), vec![ca.inbound_spi]);
    assert_eq!(deleted(&p.events_b), vec![cb.inbound_spi]);
    // The old one is gone: its counters mean nothing any more.
    assert!(p
        .a
        .child_sa_usage(p.now, id_a, ca.inbound_spi, 2_000_000, 0)
        .is_err());
    // The new one, its packets past the hard limit at once: deleted now
    // (the data plane removes it on the event), the peer told.
    let new = na[0].inbound_spi;
    let peer = nb[0].inbound_spi;
    p.events_a.clear();
    p.events_b.clear();
    p.a.child_sa_usage(p.now, id_a, new, 10, 1_100).unwrap();
    assert!(matches!(
        p.a.poll_event(),
        Some(Event::ChildSaDeleted { inbound_spi, .. }) if inbound_spi == new
    ));
    p.run(&[], 1_000);
    assert_eq!(deleted(&p.events_b), vec![peer]);
    assert!(children(&p.events_a).is_empty());
    // Reported once more: not announced twice.
    assert!(deleted(&p.events_a).is_empty());
}

#[test]
fn both_timers_at_once_child_sa_collision_leaves_one() {
    // No jitter and the same rekey_time: both sides rekey at the same
    // instant (RFC 7296 2.8.1), over several nonce orders.
    let l = Lifetimes {
        child_rekey_time_ms: 60_000,
        child_rand_time_ms: Some(1),
        ..off()
    };
    for round in 0..6 {
        let mut p = pair(l.clone(), l.clone(), "aes128gcm16", "aes128gcm16");
        let (id_a, _, ca, cb) = up(&mut p);
        for _ in 0..round {
            p.a.check_liveness(p.now, id_a).unwrap();
        }
        until(&mut p, 61_000);
        let reqs = requests(&p, ExchangeType::CREATE_CHILD_SA);
        assert_eq!(reqs.len(), 2, "both rekeyed");
        let (la, lb) = (alive(&p.events_a, &ca), alive(&p.events_b, &cb));
        assert_eq!((la.len(), lb.len()), (1, 1), "round {round}");
        assert_eq!(la[0], (lb[0].1, lb[0].0));
        assert_eq!(failures(&p.events_a) + failures(&p.events_b), 0);
    }
}

#[test]
fn a_peer_rekey_after_ours_completed_is_temporary_failure() {
    // Both timers fire; b's request reaches a only after a's rekey has
    // completed (RFC 7296 2.25): a answers TEMPORARY_FAILURE, its delete
    // of the old SA follows, both end with a's new CHILD_SA.
    use Fate::*;
    let l = Lifetimes {
        child_rekey_time_ms: 60_000,
        child_rand_time_ms: Some(1),
        ..off()
    };
    let mut p = pair(l.clone(), l, "aes128gcm16", "aes128gcm16");
    let (_, _, ca, cb) = up(&mut p);
    // [a's request, b's request]: deliver a's, defer b's behind b's
    // answer, which completes a's rekey before b's request arrives.
    until(&mut p, 59_999);
    p.run(&[Deliver, Defer, Deliver], 60_000 - p.now);
    let (la, lb) = (alive(&p.events_a, &ca), alive(&p.events_b, &cb));
    assert_eq!(
        (la.len(), lb.len()),
        (1, 1),
        "{:?} {:?}",
        p.events_a,
        p.events_b
    );
    assert_eq!(la[0], (lb[0].1, lb[0].0));
    // The survivor is a's: b installed it as responder, a as initiator.
    assert_eq!(children(&p.events_a).len(), 1);
    assert!(p.events_b.iter().any(|e| matches!(
        e,
        Event::ChildSaFailed {
            notify: NotifyType::TEMPORARY_FAILURE,
            ..
        }
    )));
    // b's retry finds nothing to rekey (the SA is gone): no more requests.
    let n = requests(&p, ExchangeType::CREATE_CHILD_SA).len();
    p.run(&[], 30_000);
    assert_eq!(requests(&p, ExchangeType::CREATE_CHILD_SA).len(), n);
}

#[test]
fn a_rekey_of_a_child_sa_being_deleted_is_temporary_failure() {
    let mut p = pair(off(), off(), "aes128gcm16", "aes128gcm16");
    let (id_a, id_b, ca, cb) = up(&mut p);
    // a deletes, b rekeys the same SA at once; b's request reaches a
    // first.
    p.a.delete_child_sa(p.now, id_a, ca.inbound_spi).unwrap();
    p.b.rekey_child_sa(p.now, id_b, cb.inbound_spi).unwrap();
    let del = p.a.poll_transmit().unwrap();
    let rekey = p.b.poll_transmit().unwrap();
    p.a.handle_datagram(p.now, rekey.src, rekey.dst, &rekey.payload);
    let answer = p.a.poll_transmit().unwrap();
    p.b.handle_datagram(p.now, answer.src, answer.dst, &answer.payload);
    p.b.handle_datagram(p.now, del.src, del.dst, &del.payload);
    p.run(&[], 1_000);
    assert!(p.events_b.iter().any(|e| matches!(
        e,
        Event::ChildSaFailed {
            notify: NotifyType::TEMPORARY_FAILURE,
            ..
        }
    )));
    assert!(children(&p.events_a).is_empty() && children(&p.events_b).is_empty());
    assert_eq!(deleted(&p.events_a), vec![ca.inbound_spi]);
    assert_eq!(deleted(&p.events_b), vec![cb.inbound_spi]);
}

#[test]
fn simultaneous_ike_sa_rekeys_delete_the_lowest_nonce_sa() {
    // RFC 7296 2.8.2 over rounds of different nonces: both sides rekey
    // the IKE SA at once. One IKE SA is left on each side, the same one
    // (same nonces), holding the CHILD_SA; the SA deleted is the one whose
    // exchange held the lowest of the four nonces. Fails when that rule is
    // reversed or fixed either way.
    let mut outcomes = [0usize; 2];
    for round in 0..10 {
        let mut p = pair(off(), off(), "aes128gcm16", "aes128gcm16");
        let (id_a, id_b, ca, cb) = up(&mut p);
        for _ in 0..round {
            p.a.check_liveness(p.now, id_a).unwrap();
            p.b.check_liveness(p.now, id_b).unwrap();
            p.run(&[], 1_000);
        }
        p.a.rekey_ike_sa(p.now, id_a).unwrap();
        p.b.rekey_ike_sa(p.now, id_b).unwrap();
        // Shorter than the linger: the deleted SAs are still held.
        p.run(&[], 5_000);
        let nonces = |e: &Engine<SeededRng>, old: IkeSaId| {
            e.ike_sa_ids()
                .into_iter()
                .filter(|id| *id != old)
                .map(|id| (id, e.ike_sa_nonces(id).unwrap()))
                .collect::<Vec<_>>()
        };
        let (new_a, new_b) = (nonces(&p.a, id_a), nonces(&p.b, id_b));
        assert_eq!((new_a.len(), new_b.len()), (2, 2), "round {round}");
        p.run(&[], 60_000);
        assert_eq!(
            (p.a.ike_sa_count(), p.b.ike_sa_count()),
            (1, 1),
            "round {round}"
        );
        let (sa, sb) = (p.a.ike_sa_ids()[0], p.b.ike_sa_ids()[0]);
        let survivor = p.a.ike_sa_nonces(sa).unwrap();
        assert_eq!(p.b.ike_sa_nonces(sb).unwrap(), survivor);
        let gone = &new_a.iter().find(|(id, _)| *id != sa).unwrap().1;
        let low = |(ni, nr): &(Vec<u8>, Vec<u8>)| ni.min(nr).clone();
        assert!(
            low(gone) < low(&survivor),
            "round {round}: the SA with the lowest nonce must go"
        );
        // Which side's exchange lost, by who deleted its SA (the side
        // that created it): both must occur over the rounds.
        let gone_id = new_a.iter().find(|(id, _)| *id != sa).unwrap().0;
        let deleter = p
            .sent
            .iter()
            .find_map(|t| {
                let h = Message::parse_raw(&t.payload).ok()?.0;
                (h.exchange == ExchangeType::INFORMATIONAL
                    && !h.response
                    && (h.spi_i == gone_id || h.spi_r == gone_id))
                    .then_some(t.src)
            })
            .unwrap();
        outcomes[usize::from(deleter == addr(A))] += 1;
        // The CHILD_SA lives on the survivor on both sides.
        assert!(p.a.child_sa_lifetimes(sa, ca.inbound_spi).is_some());
        assert!(p.b.child_sa_lifetimes(sb, cb.inbound_spi).is_some());
        assert_eq!(failures(&p.events_a) + failures(&p.events_b), 0);
        // And it still works: a CHILD_SA rekey on the survivor.
        p.events_a.clear();
        p.events_b.clear();
        p.a.rekey_child_sa(p.now, sa, ca.inbound_spi).unwrap();
        p.run(&[], 5_000);
        let (na, nb) = (children(&p.events_a), children(&p.events_b));
        assert_eq!((na.len(), nb.len()), (1, 1));
        assert_same_child(na[0], nb[0]);
    }
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
}

#[test]
fn ike_sa_timers_racing_end_with_one_ike_sa() {
    // Both sides' IKE SA rekey timers at the same instant.
    let l = Lifetimes {
        ike_rekey_time_ms: 100_000,
        ike_rand_time_ms: Some(1),
        ..off()
    };
    let mut p = pair(l.clone(), l, "aes128gcm16", "aes128gcm16");
    let (id_a, _, ca, _) = up(&mut p);
    assert_eq!(
        p.a.ike_sa_lifetimes(id_a),
        Some((Some(100_000), None, Some(110_000)))
    );
    until(&mut p, 100_000);
    assert_eq!(requests(&p, ExchangeType::CREATE_CHILD_SA).len(), 2);
    until(&mut p, 120_000);
    assert_eq!((p.a.ike_sa_count(), p.b.ike_sa_count()), (1, 1));
    let sa = p.a.ike_sa_ids()[0];
    assert!(p.a.child_sa_lifetimes(sa, ca.inbound_spi).is_some());
    assert_eq!(failures(&p.events_a) + failures(&p.events_b), 0);
    // The survivor rekeys again on its own, fresh schedule.
    let (r, _, _) = p.a.ike_sa_lifetimes(sa).unwrap();
    assert_eq!(r, Some(200_000));
}

#[test]
fn ike_sa_hard_limit_deletes_it_when_rekeys_fail() {
    // rekey_time 100 s, over_time 10 s: b refuses the rekey (no common
    // proposal any more), a deletes the IKE SA at 110 s.
    let l = Lifetimes {
        ike_rekey_time_ms: 100_000,
        ike_over_time_ms: Some(10_000),
        ike_rand_time_ms: Some(1),
        ..off()
    };
    let mut p = pair(l, off(), "aes128gcm16", "aes128gcm16");
    let (id_a, id_b, _, _) = up(&mut p);
    p.b.connection_mut(0).unwrap().proposals =
        espgw_ike::crypto::parse_ike_proposals("aes256gcm16-prfsha384-ecp384").unwrap();
    until(&mut p, 109_999);
    assert!(matches!(p.events_a[..], [Event::IkeRekeyFailed { .. }]));
    until(&mut p, 110_000);
    assert!(p
        .events_a
        .iter()
        .any(|e| matches!(e, Event::IkeSaDeleted { ike_sa } if *ike_sa == id_a)));
    assert!(p
        .events_b
        .iter()
        .any(|e| matches!(e, Event::IkeSaDeleted { ike_sa } if *ike_sa == id_b)));
}

#[test]
fn reauthentication_makes_the_new_ike_sa_before_deleting_the_old() {
    let l = Lifetimes {
        ike_reauth_time_ms: 100_000,
        ike_rand_time_ms: Some(1),
        ..off()
    };
    let mut p = pair(l, off(), "aes128gcm16", "aes128gcm16");
    let (id_a, id_b, _, _) = up(&mut p);
    assert_eq!(
        p.a.ike_sa_lifetimes(id_a),
        Some((None, Some(100_000), Some(110_000)))
    );
    until(&mut p, 120_000);
    // A full IKE_SA_INIT + IKE_AUTH, a new CHILD_SA, then the old SA goes.
    assert_eq!(requests(&p, ExchangeType::IKE_SA_INIT).len(), 1);
    assert_eq!(ike_up(&p.events_a).len(), 1);
    assert_eq!(ike_up(&p.events_b).len(), 1);
    // A reauthentication is no INITIAL_CONTACT: the peer still holds the
    // old IKE SA (the responder's driver waits before switching to it).
    assert!(
        p.events_b.iter().any(|e| matches!(
            e,
            Event::IkeSaUp {
                initial_contact: false,
                ..
            }
        )),
        "{:?}",
        p.events_b
    );
    let pos = |ev: &[Event], f: &dyn Fn(&Event) -> bool| ev.iter().position(f).unwrap();
    for (ev, old) in [(&p.events_a, id_a), (&p.events_b, id_b)] {
        let installed = pos(ev, &|e| matches!(e, Event::ChildSaInstalled(_)));
        let gone = pos(
            ev,
            &|e| matches!(e, Event::IkeSaDeleted { ike_sa } if *ike_sa == old),
        );
        assert!(installed < gone, "{ev:?}");
    }
    assert_eq!((p.a.ike_sa_count(), p.b.ike_sa_count()), (1, 1));
    assert_eq!(failures(&p.events_a) + failures(&p.events_b), 0);
}

#[test]
fn invalid_ke_on_a_child_sa_rekey_is_retried_with_the_asked_group() {
    // a's first PFS group is x25519, b takes only ecp256.
    let mut p = pair(
        off(),
        off(),
        "aes128gcm16-x25519-ecp256",
        "aes128gcm16-ecp256",
    );
    let (id_a, _, ca, _) = up(&mut p);
    p.a.rekey_child_sa(p.now, id_a, ca.inbound_spi).unwrap();
    p.run(&[], 5_000);
    assert_eq!(requests(&p, ExchangeType::CREATE_CHILD_SA).len(), 2);
    let (na, nb) = (children(&p.events_a), children(&p.events_b));
    assert_eq!((na.len(), nb.len()), (1, 1));
    assert_same_child(na[0], nb[0]);
    assert_eq!(failures(&p.events_a) + failures(&p.events_b), 0);
    // Nothing in common: one request, refused (no retry).
    let mut p = pair(off(), off(), "aes128gcm16-x25519", "aes128gcm16-ecp256");
    let (id_a, _, ca, _) = up(&mut p);
    p.a.rekey_child_sa(p.now, id_a, ca.inbound_spi).unwrap();
    p.run(&[], 5_000);
    assert_eq!(requests(&p, ExchangeType::CREATE_CHILD_SA).len(), 1);
    assert!(
        matches!(
            p.events_a[..],
            [Event::ChildSaFailed {
                notify: NotifyType::NO_PROPOSAL_CHOSEN,
                ..
            }]
        ),
        "{:?}",
        p.events_a
    );
}

#[test]
fn invalid_ke_on_an_ike_sa_rekey_is_retried_with_the_asked_group() {
    let (mut a, b) = connections(PSK, PSK, IKE, IKE, "aes128gcm16", "aes128gcm16");
    a.proposals =
        espgw_ike::crypto::parse_ike_proposals("aes128gcm16-prfsha256-x25519-ecp256").unwrap();
    let mut p = Pair::new(a, b, test_config());
    let (id_a, _, _, _) = up(&mut p);
    // b now takes only ecp256: a's rekey (x25519, the SA's group) gets
    // INVALID_KE_PAYLOAD(ecp256) and is sent again with ecp256.
    p.b.connection_mut(0).unwrap().proposals =
        espgw_ike::crypto::parse_ike_proposals("aes128gcm16-prfsha256-ecp256").unwrap();
    p.a.rekey_ike_sa(p.now, id_a).unwrap();
    p.run(&[], 30_000);
    assert_eq!(requests(&p, ExchangeType::CREATE_CHILD_SA).len(), 2);
    let rekeyed = |ev: &[Event]| {
        ev.iter()
            .filter(|e| matches!(e, Event::IkeSaRekeyed { .. }))
            .count()
    };
    assert_eq!((rekeyed(&p.events_a), rekeyed(&p.events_b)), (1, 1));
    assert_eq!(failures(&p.events_a) + failures(&p.events_b), 0);
    assert_eq!((p.a.ike_sa_count(), p.b.ike_sa_count()), (1, 1));
}

fn nat_pair() -> Pair {
    let (a, mut b) = connections(PSK, PSK, IKE, IKE, "aes128gcm16", "aes128gcm16");
    b.remote = addr("0.0.0.0:500");
    let mut p = Pair::new(a, b, test_config());
    p.nat_a = Some(addr("198.51.100.7:500"));
    p
}

fn keepalives(p: &Pair) -> Vec<&espgw_ike::engine::Transmit> {
    p.sent.iter().filter(|t| t.payload == [0xFF]).collect()
}

#[test]
fn nat_keepalives_only_behind_a_nat_and_only_when_idle() {
    let mut p = nat_pair();
    p.a.initiate(0, 0).unwrap();
    until(&mut p, 19_999);
    assert!(keepalives(&p).is_empty());
    until(&mut p, 20_000);
    // a (behind the NAT) sends one octet 0xFF to b's NAT-T port, from its
    // own; b counts and ignores it.
    let k = keepalives(&p);
    assert_eq!(k.len(), 1);
    assert_eq!(k[0].dst, addr("192.0.2.2:4500"));
    assert_eq!(k[0].src.port(), 4500);
    assert_eq!(p.b.stats().keepalives_received, 1);
    assert_eq!(p.a.stats().keepalives_sent, 1);
    assert_eq!(p.b.stats().keepalives_sent, 0);
    until(&mut p, 80_000);
    assert_eq!(keepalives(&p).len(), 4, "every 20 s");
    // Not idle: a liveness check every 10 s leaves no gap of 20 s.
    let id_a = ike_up(&p.events_a)[0];
    let before = keepalives(&p).len();
    for _ in 0..6 {
        let t = p.now + 10_000;
        until(&mut p, t);
        p.a.check_liveness(p.now, id_a).unwrap();
    }
    let t = p.now + 19_000;
    until(&mut p, t);
    assert_eq!(keepalives(&p).len(), before);
    assert_eq!(p.b.stats().not_ike, 0);
    // Without a NAT: none at all.
    let mut q = pair(off(), off(), "aes128gcm16", "aes128gcm16");
    up(&mut q);
    until(&mut q, 120_000);
    assert!(keepalives(&q).is_empty());
    assert_eq!(q.a.stats().keepalives_sent + q.b.stats().keepalives_sent, 0);
}
