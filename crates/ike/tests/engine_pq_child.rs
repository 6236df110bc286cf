//! RFC 9370 additional key exchanges (ML-KEM) for CHILD_SAs, espgw to
//! espgw: CHILD_SA rekeys and new CHILD_SAs (the connection's own and RFC
//! 9611 per-resource ones) run them in IKE_FOLLOWUP_KE exchanges after
//! the CREATE_CHILD_SA exchange (RFC 9370 2.2.4); negotiation with
//! required, optional and absent ML-KEM; simultaneous rekeys; loss,
//! duplication and reordering.

mod engine_common;

use engine_common::*;
use espgw_ike::engine::{EngineConfig, Event, Transmit};
use espgw_ike::message::{ExchangeType, Message, NotifyType, NON_ESP_MARKER};
use proptest::prelude::*;

const PSK: &[u8] = b"post-quantum child test psk";
const IKE_PQ: &str = "aes256gcm16-prfsha384-x25519-ke1_mlkem768";
const IKE_CLASSIC: &str = "aes256gcm16-prfsha384-x25519";
const ESP_PQ: &str = "aes128gcm16-x25519-ke1_mlkem768";
const ESP_OPTIONAL: &str = "aes128gcm16-x25519-ke1_mlkem768-ke1_none";
const ESP_CLASSIC: &str = "aes128gcm16-x25519";

fn failures(events: &[Event]) -> Vec<&Event> {
    events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::IkeSaFailed { .. }
                    | Event::AuthFailed { .. }
                    | Event::ChildSaFailed { .. }
                    | Event::IkeRekeyFailed { .. }
            )
        })
        .collect()
}

/// The IKE header of a datagram (marker stripped): (exchange, response,
/// message ID).
fn header_of(t: &Transmit) -> (ExchangeType, bool, u32) {
    let bytes = t
        .payload
        .strip_prefix(&NON_ESP_MARKER[..])
        .unwrap_or(&t.payload);
    let (h, _) = Message::parse_raw(bytes).unwrap();
    (h.exchange, h.response, h.message_id)
}

/// The exchanges of the requests sent since `p.sent` was cleared, one
/// per message ID (fragments counted once), INFORMATIONAL left out.
fn requests(p: &Pair) -> Vec<ExchangeType> {
    let mut r: Vec<(ExchangeType, u32)> = p
        .sent
        .iter()
        .map(header_of)
        .filter(|h| !h.1 && h.0 != ExchangeType::INFORMATIONAL)
        .map(|h| (h.0, h.2))
        .collect();
    r.dedup();
    r.into_iter().map(|r| r.0).collect()
}

fn first_up(events: &[Event]) -> u64 {
    events
        .iter()
        .find_map(|e| match e {
            Event::IkeSaUp { ike_sa, .. } => Some(*ike_sa),
            _ => None,
        })
        .unwrap()
}

fn clear(p: &mut Pair) {
    p.events_a.clear();
    p.events_b.clear();
    p.sent.clear();
}

/// a and b with these proposals up, their first CHILD_SA made by
/// IKE_AUTH (no key exchange there).
fn up(ike: &str, esp_a: &str, esp_b: &str, per_resource: u32, cfg: EngineConfig) -> Pair {
    let (mut a, mut b) = connections(PSK, PSK, ike, ike, esp_a, esp_b);
    a.per_resource_sas = per_resource;
    b.per_resource_sas = per_resource;
    let mut p = Pair::new(a, b, cfg);
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 600_000);
    assert!(
        failures(&p.events_a).is_empty() && failures(&p.events_b).is_empty(),
        "{:?} {:?}",
        p.events_a,
        p.events_b
    );
    p
}

fn deleted(events: &[Event], spi: u32) -> bool {
    events
        .iter()
        .any(|e| matches!(e, Event::ChildSaDeleted { inbound_spi, .. } if *inbound_spi == spi))
}

#[test]
fn child_sa_rekeys_and_new_child_sas_run_ml_kem_in_ike_followup_ke() {
    // ESP proposals with ML-KEM (required on both sides, or optional on
    // one: offered, so chosen), under an IKE SA with and without ML-KEM
    // of its own. The IKE_AUTH CHILD_SA has no key exchange; each rekey
    // (by either side) and a new CHILD_SA after a delete run one
    // CREATE_CHILD_SA and one IKE_FOLLOWUP_KE exchange and leave the same
    // CHILD_SA on both sides.
    for (ike, esp_a, esp_b) in [
        (IKE_PQ, ESP_PQ, ESP_PQ),
        (IKE_CLASSIC, ESP_PQ, ESP_PQ),
        (IKE_PQ, ESP_OPTIONAL, ESP_PQ),
        (IKE_CLASSIC, ESP_PQ, ESP_OPTIONAL),
    ] {
        let what = format!("IKE {ike}, ESP {esp_a} / {esp_b}");
        let mut p = up(ike, esp_a, esp_b, 0, test_config());
        let (sa_a, sa_b) = (first_up(&p.events_a), first_up(&p.events_b));
        let (ca, cb) = (children(&p.events_a), children(&p.events_b));
        assert_eq!((ca.len(), cb.len()), (1, 1), "{what}");
        assert_same_child(ca[0], cb[0]);
        let (mut child_a, mut child_b) = (ca[0].inbound_spi, cb[0].inbound_spi);
        for by_a in [true, false, true] {
            clear(&mut p);
            if by_a {
                p.a.rekey_child_sa(p.now, sa_a, child_a).unwrap();
            } else {
                p.b.rekey_child_sa(p.now, sa_b, child_b).unwrap();
            }
            p.run(&[], 600_000);
            let by = if by_a { "a" } else { "b" };
            assert!(
                failures(&p.events_a).is_empty() && failures(&p.events_b).is_empty(),
                "{what}, rekey by {by}: {:?} {:?}",
                p.events_a,
                p.events_b
            );
            assert_eq!(
                requests(&p),
                [ExchangeType::CREATE_CHILD_SA, ExchangeType::IKE_FOLLOWUP_KE],
                "{what}, rekey by {by}"
            );
            let (ca, cb) = (children(&p.events_a), children(&p.events_b));
            assert_eq!((ca.len(), cb.len()), (1, 1), "{what}, rekey by {by}");
            assert_same_child(ca[0], cb[0]);
            assert_eq!((ca[0].rekeys, cb[0].rekeys), (Some(child_a), Some(child_b)));
            assert!(deleted(&p.events_a, child_a) && deleted(&p.events_b, child_b));
            (child_a, child_b) = (ca[0].inbound_spi, cb[0].inbound_spi);
        }
        // Deleted, then made again without a new IKE SA.
        clear(&mut p);
        p.a.delete_child_sa(p.now, sa_a, child_a).unwrap();
        p.run(&[], 600_000);
        assert!(deleted(&p.events_a, child_a) && deleted(&p.events_b, child_b));
        clear(&mut p);
        p.b.create_child_sa(p.now, sa_b).unwrap();
        p.run(&[], 600_000);
        assert!(
            failures(&p.events_a).is_empty() && failures(&p.events_b).is_empty(),
            "{what}: {:?} {:?}",
            p.events_a,
            p.events_b
        );
        assert_eq!(
            requests(&p),
            [ExchangeType::CREATE_CHILD_SA, ExchangeType::IKE_FOLLOWUP_KE],
            "{what}, new CHILD_SA"
        );
        let (ca, cb) = (children(&p.events_a), children(&p.events_b));
        assert_eq!((ca.len(), cb.len()), (1, 1), "{what}");
        assert_same_child(ca[0], cb[0]);
    }
}

#[test]
fn the_responder_installs_the_child_sa_only_after_the_last_followup() {
    // RFC 9370 2.2.4: the CREATE_CHILD_SA answer names the link; nothing
    // is installed until the IKE_FOLLOWUP_KE exchange is done. Meanwhile
    // the responder's own CHILD_SA requests wait; when no follow-up comes
    // (the answer was lost and the initiator gave up), its pending state
    // goes after 20 s and they are sent.
    let mut p = up(IKE_CLASSIC, ESP_PQ, ESP_PQ, 0, test_config());
    let (sa_a, sa_b) = (first_up(&p.events_a), first_up(&p.events_b));
    let (child_a, child_b) = (
        children(&p.events_a)[0].inbound_spi,
        children(&p.events_b)[0].inbound_spi,
    );
    clear(&mut p);
    p.a.rekey_child_sa(p.now, sa_a, child_a).unwrap();
    p.collect();
    let request = p.queue.pop_front().expect("a's CREATE_CHILD_SA");
    assert_eq!(header_of(&request).0, ExchangeType::CREATE_CHILD_SA);
    p.deliver(request);
    p.collect();
    assert!(children(&p.events_b).is_empty(), "{:?}", p.events_b);
    let answer = p.queue.pop_back().expect("b's answer");
    assert_eq!(
        header_of(&answer),
        (ExchangeType::CREATE_CHILD_SA, true, header_of(&answer).2)
    );
    p.queue.clear();
    // b's own rekey waits while a's series is pending.
    let b_requests = |p: &mut Pair| {
        p.collect();
        let n = p
            .queue
            .iter()
            .filter(|t| t.src == addr(B) && !header_of(t).1)
            .count();
        p.queue.clear();
        n
    };
    p.b.rekey_child_sa(p.now + 1_000, sa_b, child_b).unwrap();
    assert_eq!(b_requests(&mut p), 0);
    p.b.handle_timeout(p.now + 19_000);
    assert_eq!(b_requests(&mut p), 0);
    p.b.handle_timeout(p.now + 21_000);
    assert_eq!(
        b_requests(&mut p),
        1,
        "b's rekey goes once a's state is gone"
    );
    assert!(children(&p.events_b).is_empty(), "{:?}", p.events_b);
    let deletes = p
        .events_b
        .iter()
        .any(|e| matches!(e, Event::ChildSaDeleted { .. }));
    assert!(!deletes, "{:?}", p.events_b);
}

#[test]
fn ml_kem_required_against_a_peer_without_it_is_refused_and_the_child_sa_stays() {
    // One side requires ML-KEM on its CHILD_SAs, the other has none
    // configured: the IKE_AUTH CHILD_SA comes up (no key exchange there),
    // a rekey by either side is refused (NO_PROPOSAL_CHOSEN) and the old
    // CHILD_SA carries on, on both sides.
    for by_a in [true, false] {
        let mut p = up(IKE_CLASSIC, ESP_PQ, ESP_CLASSIC, 0, test_config());
        let (sa_a, sa_b) = (first_up(&p.events_a), first_up(&p.events_b));
        let (child_a, child_b) = (
            children(&p.events_a)[0].inbound_spi,
            children(&p.events_b)[0].inbound_spi,
        );
        clear(&mut p);
        if by_a {
            p.a.rekey_child_sa(p.now, sa_a, child_a).unwrap();
        } else {
            p.b.rekey_child_sa(p.now, sa_b, child_b).unwrap();
        }
        p.run(&[], 5_000);
        let initiator = if by_a { &p.events_a } else { &p.events_b };
        assert!(
            initiator.iter().any(|e| matches!(
                e,
                Event::ChildSaFailed {
                    notify: NotifyType::NO_PROPOSAL_CHOSEN,
                    ..
                }
            )),
            "{initiator:?}"
        );
        assert!(children(&p.events_a).is_empty() && children(&p.events_b).is_empty());
        assert!(!deleted(&p.events_a, child_a) && !deleted(&p.events_b, child_b));
        assert_eq!(requests(&p), [ExchangeType::CREATE_CHILD_SA]);
    }
}

#[test]
fn per_resource_child_sas_run_ml_kem_too() {
    // RFC 9611 with ML-KEM on the CHILD_SAs: the per-resource CHILD_SAs
    // after IKE_AUTH are CREATE_CHILD_SA exchanges, each with its
    // IKE_FOLLOWUP_KE.
    let p = up(IKE_PQ, ESP_PQ, ESP_PQ, 3, test_config());
    let (ca, cb) = (children(&p.events_a), children(&p.events_b));
    assert_eq!((ca.len(), cb.len()), (3, 3), "{:?}", p.events_a);
    for (x, y) in ca.iter().zip(&cb) {
        assert_same_child(x, y);
    }
    assert_eq!(
        ca.iter().map(|c| c.per_resource).collect::<Vec<_>>(),
        [false, true, true]
    );
    let followups = p
        .sent
        .iter()
        .map(header_of)
        .filter(|h| h.0 == ExchangeType::IKE_FOLLOWUP_KE && !h.1)
        .map(|h| h.2)
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(followups.len(), 2, "one per per-resource CHILD_SA");
}

#[test]
fn simultaneous_child_sa_rekeys_with_followups_settle_on_one() {
    // Both sides rekey the same CHILD_SA at once with ML-KEM: each
    // refuses the other's (TEMPORARY_FAILURE while its own is
    // outstanding) and retries after its own random delay; one goes
    // first, the other's retry finds the CHILD_SA replaced. One CHILD_SA
    // on each side, the same one.
    let mut p = up(IKE_CLASSIC, ESP_PQ, ESP_PQ, 0, test_config());
    let (sa_a, sa_b) = (first_up(&p.events_a), first_up(&p.events_b));
    let (child_a, child_b) = (
        children(&p.events_a)[0].inbound_spi,
        children(&p.events_b)[0].inbound_spi,
    );
    clear(&mut p);
    p.a.rekey_child_sa(p.now, sa_a, child_a).unwrap();
    p.b.rekey_child_sa(p.now, sa_b, child_b).unwrap();
    p.run(&[], 120_000);
    let refused = |ev: &[Event]| {
        ev.iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::ChildSaFailed {
                        notify: NotifyType::TEMPORARY_FAILURE,
                        ..
                    }
                )
            })
            .count()
    };
    assert!(refused(&p.events_a) >= 1 && refused(&p.events_b) >= 1);
    let live = |ev: &[Event]| {
        let installed: Vec<u32> = children(ev).iter().map(|c| c.inbound_spi).collect();
        installed
            .into_iter()
            .filter(|spi| !deleted(ev, *spi))
            .collect::<Vec<_>>()
    };
    let (la, lb) = (live(&p.events_a), live(&p.events_b));
    assert_eq!(
        (la.len(), lb.len()),
        (1, 1),
        "{:?} {:?}",
        p.events_a,
        p.events_b
    );
    let find = |ev: &[Event], spi| {
        children(ev)
            .into_iter()
            .find(|c| c.inbound_spi == spi)
            .unwrap()
            .clone()
    };
    assert_same_child(&find(&p.events_a, la[0]), &find(&p.events_b, lb[0]));
    assert!(deleted(&p.events_a, child_a) && deleted(&p.events_b, child_b));
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        3 => Just(Fate::Deliver),
        2 => Just(Fate::Drop),
        1 => Just(Fate::Duplicate),
        1 => Just(Fate::Defer),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// A CHILD_SA rekey with IKE_FOLLOWUP_KE exchanges (one or two
    /// additional exchanges, fragments or not, either side starting)
    /// through any finite pattern of loss, duplication and reordering:
    /// it completes with the same new CHILD_SA on both sides and the old
    /// one deleted on both, or it fails without harm (no new CHILD_SA on
    /// either side, the old one kept; or the IKE SA timed out, as on any
    /// unanswered request).
    #[test]
    fn child_sa_rekey_with_followups_under_a_lossy_network(
        fates in proptest::collection::vec(fate(), 0..30),
        small_fragments in any::<bool>(),
        two in any::<bool>(),
        by_a in any::<bool>(),
    ) {
        let esp = if two { "aes256gcm16-ecp256-ke1_mlkem768-ke2_mlkem512" } else { ESP_PQ };
        let mut cfg = EngineConfig { max_retransmits: 64, ..test_config() };
        if small_fragments {
            cfg.fragment_size = 160;
        }
        let mut p = up(IKE_CLASSIC, esp, esp, 0, cfg);
        let (sa_a, sa_b) = (first_up(&p.events_a), first_up(&p.events_b));
        let (child_a, child_b) = (
            children(&p.events_a)[0].inbound_spi,
            children(&p.events_b)[0].inbound_spi,
        );
        clear(&mut p);
        if by_a {
            p.a.rekey_child_sa(p.now, sa_a, child_a).unwrap();
        } else {
            p.b.rekey_child_sa(p.now, sa_b, child_b).unwrap();
        }
        p.run(&fates, 600_000);
        let dead = |ev: &[Event]| ev.iter().any(|e| matches!(e, Event::IkeSaFailed { .. }));
        if dead(&p.events_a) || dead(&p.events_b) {
            return Ok(());
        }
        let (ca, cb) = (children(&p.events_a), children(&p.events_b));
        prop_assert!(ca.len() <= 1 && cb.len() <= 1, "{:?} {:?}", p.events_a, p.events_b);
        if ca.len() == 1 && cb.len() == 1 {
            assert_same_child(ca[0], cb[0]);
            prop_assert!(deleted(&p.events_a, child_a) && deleted(&p.events_b, child_b));
        } else {
            prop_assert!(ca.is_empty() && cb.is_empty(), "{:?} {:?}", p.events_a, p.events_b);
            prop_assert!(!deleted(&p.events_a, child_a) && !deleted(&p.events_b, child_b));
        }
    }
}
