//! INFORMATIONAL exchanges between two engines: liveness checks (DPD),
//! deleting a CHILD_SA and the IKE SA, each side's own message IDs and
//! the window of one request.

mod engine_common;

use engine_common::*;
use espgw_ike::engine::{Event, FailReason, IkeSaId};
use espgw_ike::message::Message;

const PSK: &[u8] = b"informational psk";

/// Two engines with the IKE SA and first CHILD_SA up; returns the SA ids
/// (a's, b's).
fn established() -> (Pair, IkeSaId, IkeSaId) {
    let ike = "aes128gcm16-prfsha256-x25519";
    let (a, b) = connections(PSK, PSK, ike, ike, "aes128gcm16", "aes128gcm16");
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
    p.events_a.clear();
    p.events_b.clear();
    p.sent.clear();
    (p, id_a, id_b)
}

fn message_ids(p: &Pair) -> Vec<(bool, u32)> {
    p.sent
        .iter()
        .map(|t| Message::parse_raw(strip(&t.payload)).unwrap().0)
        .map(|h| (h.response, h.message_id))
        .collect()
}

fn strip(d: &[u8]) -> &[u8] {
    d.strip_prefix(&[0, 0, 0, 0][..]).unwrap_or(d)
}

#[test]
fn liveness_check_from_either_side_is_answered() {
    let (mut p, id_a, id_b) = established();
    p.b.check_liveness(p.now, id_b).unwrap();
    p.run(&[], 60_000);
    assert!(
        matches!(p.events_b[..], [Event::PeerAlive { .. }]),
        "{:?}",
        p.events_b
    );
    // b's own first request has message ID 0 (each side counts its own).
    assert_eq!(message_ids(&p), vec![(false, 0), (true, 0)]);
    p.sent.clear();
    p.a.check_liveness(p.now, id_a).unwrap();
    p.run(&[], 60_000);
    assert!(
        matches!(p.events_a[..], [Event::PeerAlive { .. }]),
        "{:?}",
        p.events_a
    );
    // a's requests continue after IKE_SA_INIT (0) and IKE_AUTH (1).
    assert_eq!(message_ids(&p), vec![(false, 2), (true, 2)]);
}

#[test]
fn liveness_check_without_answers_fails_the_ike_sa() {
    let (mut p, id_a, _) = established();
    p.a.check_liveness(p.now, id_a).unwrap();
    p.run(&[Fate::Drop; 6], 60_000);
    assert!(
        matches!(
            p.events_a[..],
            [Event::IkeSaFailed {
                reason: FailReason::Timeout,
                ..
            }]
        ),
        "{:?}",
        p.events_a
    );
    assert!(p.a.check_liveness(p.now, id_a).is_err());
}

#[test]
fn requests_wait_for_the_window() {
    let ike = "aes128gcm16-prfsha256-x25519";
    let (a, b) = connections(PSK, PSK, ike, ike, "aes128gcm16", "aes128gcm16");
    let mut p = Pair::new(a, b, test_config());
    let id_a = p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    let child = children(&p.events_a)[0].inbound_spi;
    p.events_a.clear();
    p.a.check_liveness(p.now, id_a).unwrap();
    p.a.delete_child_sa(p.now, id_a, child).unwrap();
    // Only the first is on the wire until it is answered.
    assert!(p.a.poll_transmit().is_some());
    assert!(p.a.poll_transmit().is_none());
    p.sent.clear();
    p.queue.clear();
    p.run(&[], 60_000);
    assert!(
        matches!(p.events_a[..], [Event::PeerAlive { .. }, Event::ChildSaDeleted { inbound_spi, .. }] if inbound_spi == child),
        "{:?}",
        p.events_a
    );
}

#[test]
fn deleting_a_child_sa_removes_it_on_both_sides() {
    let ike = "aes128gcm16-prfsha256-x25519";
    let (a, b) = connections(PSK, PSK, ike, ike, "aes128gcm16", "aes128gcm16");
    let mut p = Pair::new(a, b, test_config());
    let id_a = p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    let (ca, cb) = (
        children(&p.events_a)[0].clone(),
        children(&p.events_b)[0].clone(),
    );
    p.events_a.clear();
    p.events_b.clear();
    assert!(
        p.a.delete_child_sa(p.now, id_a, 12345).is_err(),
        "unknown SPI"
    );
    p.a.delete_child_sa(p.now, id_a, ca.inbound_spi).unwrap();
    p.run(&[], 60_000);
    assert!(
        matches!(p.events_a[..], [Event::ChildSaDeleted { inbound_spi, outbound_spi, .. }] if inbound_spi == ca.inbound_spi && outbound_spi == ca.outbound_spi),
        "{:?}",
        p.events_a
    );
    assert!(
        matches!(p.events_b[..], [Event::ChildSaDeleted { inbound_spi, outbound_spi, .. }] if inbound_spi == cb.inbound_spi && outbound_spi == cb.outbound_spi),
        "{:?}",
        p.events_b
    );
}

#[test]
fn deleting_the_ike_sa_ends_it_on_both_sides() {
    let (mut p, id_a, id_b) = established();
    p.b.delete_ike_sa(p.now, id_b).unwrap();
    // Lost once: the retransmission is answered, then a retransmitted
    // duplicate is answered from the stored response.
    p.run(&[Fate::Drop, Fate::Deliver, Fate::Duplicate], 60_000);
    assert!(
        matches!(p.events_b[..], [Event::IkeSaDeleted { .. }]),
        "{:?}",
        p.events_b
    );
    assert!(
        matches!(p.events_a[..], [Event::IkeSaDeleted { .. }]),
        "{:?}",
        p.events_a
    );
    assert!(p.a.check_liveness(p.now, id_a).is_err());
    // Both forget the SA after the linger time.
    p.run(&[], 60_000);
    assert_eq!((p.a.ike_sa_count(), p.b.ike_sa_count()), (0, 0));
}
