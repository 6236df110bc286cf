//! RFC 9611 per-resource CHILD_SAs between two engines: SA_RESOURCE_INFO
//! in IKE_AUTH and its echo, the additional CHILD_SAs with identical
//! selectors, TS_MAX_QUEUE past the responder's limit, a responder that
//! does not echo (as a peer that ignores the notify), and rekeys and
//! deletes of one such SA leaving the others alone.

mod engine_common;

use engine_common::*;
use espgw_ike::engine::{ChildSa, Event, IkeSaId};
use espgw_ike::message::{ExchangeType, Message, NotifyType};

const PSK: &[u8] = b"per-resource psk";
const IKE: &str = "aes256gcm16-prfsha384-ecp384";

/// a initiates to b, a wanting `want_a` per-resource SAs and b taking
/// `want_b`; runs until quiet.
fn up(want_a: u32, want_b: u32, esp: &str) -> (Pair, IkeSaId, IkeSaId) {
    let (mut a, mut b) = connections(PSK, PSK, IKE, IKE, esp, esp);
    a.per_resource_sas = want_a;
    b.per_resource_sas = want_b;
    let mut p = Pair::new(a, b, test_config());
    let id_a = p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    let id_b = p
        .events_b
        .iter()
        .find_map(|e| match e {
            Event::IkeSaUp { ike_sa, .. } => Some(*ike_sa),
            _ => None,
        })
        .unwrap();
    (p, id_a, id_b)
}

/// CREATE_CHILD_SA requests a sent (`from_a`) or b sent.
fn create_child_requests(p: &Pair, from_a: bool) -> usize {
    let a = addr("192.0.2.1:500");
    p.sent
        .iter()
        .filter(|t| (t.src.ip() == a.ip()) == from_a)
        .map(|t| {
            t.payload
                .strip_prefix(&[0, 0, 0, 0][..])
                .unwrap_or(&t.payload)
        })
        .filter(|d| {
            let h = Message::parse_raw(d).unwrap().0;
            h.exchange == ExchangeType::CREATE_CHILD_SA && !h.response
        })
        .count()
}

fn failures(events: &[Event]) -> Vec<NotifyType> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ChildSaFailed { notify, .. } => Some(*notify),
            _ => None,
        })
        .collect()
}

/// Each of a's CHILD_SAs has its twin on b (crossed SPIs, same keys), and
/// all have the same selectors.
fn check_pairs(a: &[&ChildSa], b: &[&ChildSa]) {
    assert_eq!(a.len(), b.len());
    for ca in a {
        let cb = b
            .iter()
            .find(|cb| cb.inbound_spi == ca.outbound_spi)
            .expect("b has a's SA");
        assert_same_child(ca, cb);
        assert_eq!(ca.local_ts, a[0].local_ts, "identical selectors");
        assert_eq!(ca.remote_ts, a[0].remote_ts, "identical selectors");
        assert_eq!(cb.local_ts, b[0].local_ts);
    }
    let mut spis: Vec<u32> = a.iter().map(|c| c.inbound_spi).collect();
    spis.sort_unstable();
    spis.dedup();
    assert_eq!(spis.len(), a.len(), "distinct SPIs");
}

#[test]
fn both_want_four_four_child_sas_with_one_selector_pair() {
    for esp in ["aes128gcm16", "aes256gcm16-ecp256"] {
        let (p, _, _) = up(4, 4, esp);
        let (ca, cb) = (children(&p.events_a), children(&p.events_b));
        assert_eq!(ca.len(), 4, "{esp}");
        check_pairs(&ca, &cb);
        assert!(!ca[0].per_resource && !cb[0].per_resource);
        assert!(ca[1..].iter().all(|c| c.per_resource && c.rekeys.is_none()));
        assert!(cb[1..].iter().all(|c| c.per_resource && c.rekeys.is_none()));
        assert_eq!(create_child_requests(&p, true), 3);
        assert_eq!(create_child_requests(&p, false), 0);
        assert!(failures(&p.events_a).is_empty());
        assert!(failures(&p.events_b).is_empty());
    }
}

#[test]
fn responder_limit_is_answered_ts_max_queue_and_stops_the_series() {
    let (p, _, _) = up(4, 2, "aes128gcm16");
    let (ca, cb) = (children(&p.events_a), children(&p.events_b));
    assert_eq!((ca.len(), cb.len()), (2, 2));
    check_pairs(&ca, &cb);
    // One refused request, the last one not sent.
    assert_eq!(create_child_requests(&p, true), 2);
    assert_eq!(failures(&p.events_a), vec![NotifyType::TS_MAX_QUEUE]);
    // Nothing else failed: the IKE SA and both CHILD_SAs stay.
    assert!(!p.events_a.iter().any(|e| matches!(
        e,
        Event::IkeSaFailed { .. } | Event::ChildSaDeleted { .. } | Event::IkeSaDeleted { .. }
    )));
    assert_eq!(NotifyType::TS_MAX_QUEUE.0, 48);
    assert_eq!(NotifyType::SA_RESOURCE_INFO.0, 16444);
}

#[test]
fn a_responder_that_does_not_echo_gets_one_child_sa_only() {
    // b does not want per-resource SAs: it ignores the notify as a peer
    // without RFC 9611 does (strongSwan 5.9), and a asks for nothing more.
    for want_b in [0, 1] {
        let (p, _, _) = up(4, want_b, "aes128gcm16");
        assert_eq!(children(&p.events_a).len(), 1);
        assert_eq!(children(&p.events_b).len(), 1);
        assert_eq!(create_child_requests(&p, true), 0);
        assert!(failures(&p.events_a).is_empty());
    }
}

#[test]
fn an_initiator_that_does_not_ask_creates_one_child_sa() {
    let (p, _, _) = up(0, 4, "aes128gcm16");
    assert_eq!(children(&p.events_a).len(), 1);
    assert_eq!(create_child_requests(&p, true), 0);
}

#[test]
fn rekey_of_one_per_resource_sa_leaves_the_others() {
    for by_a in [true, false] {
        let (mut p, id_a, id_b) = up(3, 3, "aes128gcm16");
        let before_a: Vec<ChildSa> = children(&p.events_a).into_iter().cloned().collect();
        let before_b: Vec<ChildSa> = children(&p.events_b).into_iter().cloned().collect();
        assert_eq!(before_a.len(), 3);
        p.events_a.clear();
        p.events_b.clear();
        p.sent.clear();
        // The second one (an additional SA) is rekeyed alone.
        let (old_a, old_b) = (
            before_a[1].clone(),
            before_b
                .iter()
                .find(|c| c.inbound_spi == before_a[1].outbound_spi)
                .unwrap()
                .clone(),
        );
        if by_a {
            p.a.rekey_child_sa(p.now, id_a, old_a.inbound_spi).unwrap();
        } else {
            p.b.rekey_child_sa(p.now, id_b, old_b.inbound_spi).unwrap();
        }
        p.run(&[], 60_000);
        let (na, nb) = (children(&p.events_a), children(&p.events_b));
        assert_eq!((na.len(), nb.len()), (1, 1), "by_a {by_a}");
        assert_same_child(na[0], nb[0]);
        assert_eq!(na[0].rekeys, Some(old_a.inbound_spi));
        assert_eq!(nb[0].rekeys, Some(old_b.inbound_spi));
        assert_eq!(na[0].local_ts, old_a.local_ts);
        let deleted_a: Vec<u32> = p
            .events_a
            .iter()
            .filter_map(|e| match e {
                Event::ChildSaDeleted { inbound_spi, .. } => Some(*inbound_spi),
                _ => None,
            })
            .collect();
        assert_eq!(deleted_a, vec![old_a.inbound_spi], "only the rekeyed one");
        // The two others are still there: rekeying each works.
        for c in [&before_a[0], &before_a[2]] {
            p.events_a.clear();
            p.a.rekey_child_sa(p.now, id_a, c.inbound_spi).unwrap();
            p.run(&[], 60_000);
            assert_eq!(children(&p.events_a).len(), 1);
        }
    }
}

#[test]
fn delete_of_one_per_resource_sa_removes_only_it() {
    let (mut p, id_a, _) = up(3, 3, "aes128gcm16");
    let before: Vec<ChildSa> = children(&p.events_a).into_iter().cloned().collect();
    p.events_a.clear();
    p.events_b.clear();
    p.a.delete_child_sa(p.now, id_a, before[2].inbound_spi)
        .unwrap();
    p.run(&[], 60_000);
    let gone = |events: &[Event]| -> Vec<u32> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::ChildSaDeleted { inbound_spi, .. } => Some(*inbound_spi),
                _ => None,
            })
            .collect()
    };
    assert_eq!(gone(&p.events_a), vec![before[2].inbound_spi]);
    assert_eq!(gone(&p.events_b), vec![before[2].outbound_spi]);
    // The first one still rekeys: it exists on both sides.
    p.events_a.clear();
    p.a.rekey_child_sa(p.now, id_a, before[0].inbound_spi)
        .unwrap();
    p.run(&[], 60_000);
    assert_eq!(children(&p.events_a).len(), 1);
}

#[test]
fn the_responder_creates_the_per_resource_sas_the_initiator_does_not() {
    // a (initiator) sends SA_RESOURCE_INFO but asks for no more CHILD_SAs
    // itself, as strongSwan 6 with kernel-libipsec does (it asks only on
    // per-CPU kernel acquires); b (responder) wants 4: 2 s after IKE_AUTH
    // it asks for the other 3, and a, which takes up to 4, installs them.
    // (a is made to ask for none by taking its per_resource_sas to 1
    // while the IKE_AUTH response is processed.)
    let (mut a, mut b) = connections(PSK, PSK, IKE, IKE, "aes128gcm16", "aes128gcm16");
    a.per_resource_sas = 4;
    b.per_resource_sas = 4;
    let mut p = Pair::new(a, b, test_config());
    p.a.initiate(0, 0).unwrap();
    for _ in 0..10 {
        p.collect();
        let Some(t) = p.queue.pop_front() else {
            break;
        };
        let auth_response = {
            let d = t
                .payload
                .strip_prefix(&[0, 0, 0, 0][..])
                .unwrap_or(&t.payload);
            let h = Message::parse_raw(d).unwrap().0;
            h.exchange == ExchangeType::IKE_AUTH && h.response
        };
        if auth_response {
            p.a.connection_mut(0).unwrap().per_resource_sas = 1;
            p.deliver(t);
            p.a.connection_mut(0).unwrap().per_resource_sas = 4;
        } else {
            p.deliver(t);
        }
    }
    p.run(&[], 1_000);
    assert_eq!(children(&p.events_a).len(), 1);
    assert_eq!(create_child_requests(&p, true), 0, "a asks for none");
    assert_eq!(create_child_requests(&p, false), 0, "b waits first");
    p.run(&[], 60_000);
    let (ca, cb) = (children(&p.events_a), children(&p.events_b));
    assert_eq!((ca.len(), cb.len()), (4, 4));
    check_pairs(&ca, &cb);
    assert!(ca[1..].iter().all(|c| c.per_resource) && cb[1..].iter().all(|c| c.per_resource));
    assert_eq!(create_child_requests(&p, true), 0);
    assert_eq!(create_child_requests(&p, false), 3);
    assert!(failures(&p.events_a).is_empty() && failures(&p.events_b).is_empty());
}

#[test]
fn an_initiator_that_asks_for_some_itself_gets_no_more_from_the_responder() {
    // a asks for 2 (one more after IKE_AUTH), b wants 4: a makes its own,
    // so b adds none (two sides adding at once could overshoot both).
    let (p, _, _) = up(2, 4, "aes128gcm16");
    let (ca, cb) = (children(&p.events_a), children(&p.events_b));
    assert_eq!((ca.len(), cb.len()), (2, 2));
    check_pairs(&ca, &cb);
    assert_eq!(create_child_requests(&p, true), 1);
    assert_eq!(create_child_requests(&p, false), 0);
    assert!(failures(&p.events_a).is_empty() && failures(&p.events_b).is_empty());
}
