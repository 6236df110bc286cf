//! Both peers setting the same connection up at once (both `start`, both
//! reauthenticating at the same moment): one IKE SA and one CHILD_SA on
//! each side at the end, the one both sides keep by the lowest-nonce rule
//! (`Engine::drop_duplicate_of`). An IKE SA set up after the other was up
//! is looked at again after the linger.

mod engine_common;

use engine_common::*;
use espgw_ike::engine::{EngineConfig, Event, IkeSaId, Transmit};
use espgw_ike::message::ExchangeType;
use proptest::prelude::*;

const PSK: &[u8] = b"duplicate ike sa test psk";
const IKE: &str = "aes256gcm16-prfsha384-x25519";
const ESP: &str = "aes128gcm16-x25519";

fn pair(seeds: (u64, u64)) -> Pair {
    let (a, b) = connections(PSK, PSK, IKE, IKE, ESP, ESP);
    Pair::with_seeds(a, b, test_config(), seeds)
}

/// The lower nonce of the IKE_SA_INIT that made `sa`.
fn lowest_nonce(p: &Pair, sa: IkeSaId) -> Vec<u8> {
    let (ni, nr) = p.a.ike_sa_nonces(sa).unwrap();
    ni.min(nr)
}

/// a's view of an IKE SA b knows as `sa_b`: the same SPI pair.
fn same_sa(p: &Pair, sa_a: IkeSaId, sa_b: IkeSaId) -> bool {
    let (ia, ia_i, ia_r) = p.a.ike_sa_spis(sa_a).unwrap();
    let (ib, ib_i, ib_r) = p.b.ike_sa_spis(sa_b).unwrap();
    ia != ib && (ia_i, ia_r) == (ib_i, ib_r)
}

/// Whether an `IkeSaUp` in `events` said `sa` was the redundant one.
fn up_as_redundant(events: &[Event], sa: IkeSaId) -> Option<bool> {
    events.iter().find_map(|e| match e {
        Event::IkeSaUp {
            ike_sa, redundant, ..
        } if *ike_sa == sa => Some(*redundant),
        _ => None,
    })
}

/// Both initiate at 0; every datagram is delivered except the
/// INFORMATIONALs, held until both IKE SAs are up on both sides. Then:
/// both sides named the same SA redundant (the one whose IKE_SA_INIT
/// holds the lowest nonce), its initiator deleted it, and one IKE SA and
/// one CHILD_SA are left, the same on both sides.
fn both_start(seeds: (u64, u64)) {
    let mut p = pair(seeds);
    p.a.initiate(0, 0).unwrap();
    p.b.initiate(0, 0).unwrap();
    let mut held: Vec<Transmit> = Vec::new();
    for _ in 0..100 {
        p.collect();
        let Some(tx) = p.queue.pop_front() else { break };
        if header_of(&tx).0 == ExchangeType::INFORMATIONAL {
            held.push(tx);
        } else {
            p.deliver(tx);
        }
    }
    let (ups_a, ups_b) = (live_ike_sas(&p.events_a), live_ike_sas(&p.events_b));
    assert_eq!((ups_a.len(), ups_b.len()), (2, 2), "{seeds:?}");
    // The two SAs, by a's id: the one a initiated and b's.
    let ours = |id: &IkeSaId| p.a.ike_sa_spis(*id).unwrap().0;
    let (&a_made, &b_made) = (
        ups_a.iter().find(|id| ours(id)).unwrap(),
        ups_a.iter().find(|id| !ours(id)).unwrap(),
    );
    let loser = if lowest_nonce(&p, a_made) < lowest_nonce(&p, b_made) {
        a_made
    } else {
        b_made
    };
    let winner = if loser == a_made { b_made } else { a_made };
    // Each side's IkeSaUp of the loser says so when it came up second
    // there; the winner's never does.
    assert_eq!(up_as_redundant(&p.events_a, winner), Some(false));
    let second_a = ups_a_order(&p.events_a)[1];
    assert_eq!(
        up_as_redundant(&p.events_a, loser),
        Some(second_a == loser),
        "{seeds:?}"
    );
    // Then the deletes: the loser's initiator sends one at once, no
    // linger (10 s) is waited for.
    for tx in held {
        p.queue.push_back(tx);
    }
    p.run(&[], 1_000);
    let (la, lb) = (live_ike_sas(&p.events_a), live_ike_sas(&p.events_b));
    assert_eq!(la, vec![winner], "{seeds:?}: a kept {la:?}");
    assert_eq!(lb.len(), 1, "{seeds:?}: b kept {lb:?}");
    assert!(same_sa(&p, la[0], lb[0]), "{seeds:?}: not the same SA");
    let (ca, cb) = (alive_children(&p.events_a), alive_children(&p.events_b));
    assert_eq!((ca.len(), cb.len()), (1, 1), "{seeds:?}: {ca:?} {cb:?}");
    assert_eq!((ca[0].0, ca[0].1), (cb[0].1, cb[0].0));
    assert_eq!(ca[0].2, winner);
    assert!(failures(&p.events_a).is_empty() && failures(&p.events_b).is_empty());
    assert!(p.now < test_config().linger_ms, "{seeds:?}: now {}", p.now);
    // Both saw the overlap here (no datagram was late).
    assert_eq!(
        (p.a.stats().duplicate_ike_sas, p.b.stats().duplicate_ike_sas),
        (1, 1)
    );
    // Nothing more happens later.
    p.run(&[], 60_000);
    assert_eq!(live_ike_sas(&p.events_a), vec![winner]);
    assert_eq!((p.a.ike_sa_count(), p.b.ike_sa_count()), (1, 1));
    assert_eq!(alive_children(&p.events_a).len(), 1);
}

/// IKE SAs in the order they came up.
fn ups_a_order(events: &[Event]) -> Vec<IkeSaId> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::IkeSaUp { ike_sa, .. } => Some(*ike_sa),
            _ => None,
        })
        .collect()
}

#[test]
fn both_sides_initiating_at_once_keep_one_ike_sa() {
    // Eight seed pairs: the lowest nonce falls on either side's SA.
    let mut losers_ours = 0;
    for s in 0..8u64 {
        let seeds = (2 * s + 1, 2 * s + 2);
        both_start(seeds);
        let mut p = pair(seeds);
        p.a.initiate(0, 0).unwrap();
        p.b.initiate(0, 0).unwrap();
        p.run(&[], 60_000);
        let kept = live_ike_sas(&p.events_a)[0];
        losers_ours += usize::from(!p.a.ike_sa_spis(kept).unwrap().0);
    }
    assert!(
        (1..8).contains(&losers_ours),
        "a's own SA lost in {losers_ours} of 8 runs: both cases not seen"
    );
}

/// b initiates once a's IKE SA is up (as a peer that lost its SA, or
/// that sees the overlap where we do not): not set up at once as far as
/// either engine saw, so nothing is dropped within the linger and the
/// peer's retransmissions (no SA is flagged, nothing counted: a
/// reauthentication of the peer's would delete the old SA meanwhile);
/// both still up after it, the newer (b's) is kept on both sides
/// (strongSwan keeps both: this is how an espgw facing it ends with one,
/// tests/e2e/ike_strongswan.sh BOTH_START=1).
#[test]
fn an_ike_sa_set_up_after_the_other_is_up_is_dropped_only_after_the_linger() {
    for s in 0..8u64 {
        let mut p = pair((2 * s + 1, 2 * s + 2));
        p.a.initiate(0, 0).unwrap();
        p.run(&[], 1_000);
        p.now = 1_000;
        p.b.initiate(p.now, 0).unwrap();
        p.run(&[], 5_000);
        assert_eq!(live_ike_sas(&p.events_a).len(), 2, "seed {s}");
        assert_eq!(live_ike_sas(&p.events_b).len(), 2, "seed {s}");
        assert!(p.events_a.iter().chain(&p.events_b).all(|e| !matches!(
            e,
            Event::IkeSaUp {
                redundant: true,
                ..
            }
        )));
        assert_eq!(
            (p.a.stats().duplicate_ike_sas, p.b.stats().duplicate_ike_sas),
            (0, 0)
        );
        p.run(&[], 60_000);
        let (la, lb) = (live_ike_sas(&p.events_a), live_ike_sas(&p.events_b));
        assert_eq!((la.len(), lb.len()), (1, 1), "seed {s}: a {la:?} b {lb:?}");
        assert!(same_sa(&p, la[0], lb[0]), "seed {s}");
        let (ca, cb) = (alive_children(&p.events_a), alive_children(&p.events_b));
        assert_eq!((ca.len(), cb.len()), (1, 1), "seed {s}: {ca:?} {cb:?}");
        assert!(p.a.stats().duplicate_ike_sas + p.b.stats().duplicate_ike_sas >= 1);
        assert!(
            !p.a.ike_sa_spis(la[0]).unwrap().0,
            "seed {s}: b's, the newer"
        );
    }
}

/// The peer's make-before-break (a new IKE SA, then its delete of the
/// old one within the linger) is no duplicate: nothing dropped by us,
/// the peer's new SA stays.
#[test]
fn the_peers_new_sa_that_replaces_the_old_is_no_duplicate() {
    let mut p = pair((1, 2));
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 1_000);
    let old_b = live_ike_sas(&p.events_b)[0];
    p.now = 1_000;
    p.b.initiate(p.now, 0).unwrap();
    p.run(&[], 2_000);
    p.now = 3_000;
    p.b.delete_ike_sa(p.now, old_b).unwrap();
    p.run(&[], 60_000);
    let (la, lb) = (live_ike_sas(&p.events_a), live_ike_sas(&p.events_b));
    assert_eq!((la.len(), lb.len()), (1, 1), "a {la:?} b {lb:?}");
    assert!(same_sa(&p, la[0], lb[0]));
    assert_ne!(lb[0], old_b);
    assert_eq!(
        (p.a.stats().duplicate_ike_sas, p.b.stats().duplicate_ike_sas),
        (0, 0)
    );
}

/// Both reauthenticate the same IKE SA at the same moment: each new SA
/// replaces the old one, and of the two new ones only one stays.
#[test]
fn both_sides_reauthenticating_at_once_keep_one_ike_sa() {
    for s in 0..6u64 {
        let (mut a, mut b) = connections(PSK, PSK, IKE, IKE, ESP, ESP);
        let reauth = reauth_every_30s();
        a.lifetimes = reauth.clone();
        b.lifetimes = reauth;
        let mut p = Pair::with_seeds(a, b, test_config(), (2 * s + 1, 2 * s + 2));
        p.a.initiate(0, 0).unwrap();
        p.run(&[], 1_000);
        let first = live_ike_sas(&p.events_a);
        assert_eq!(first.len(), 1);
        // Both reauthenticate at 30 s (no jitter), the new SAs at 60 s.
        p.run(&[], 45_000);
        let (la, lb) = (live_ike_sas(&p.events_a), live_ike_sas(&p.events_b));
        let ups = ups_a_order(&p.events_a).len();
        assert_eq!(ups, 3, "seed {s}: two new SAs came up on a");
        assert_eq!((la.len(), lb.len()), (1, 1), "seed {s}: a {la:?} b {lb:?}");
        assert!(!la.contains(&first[0]));
        assert!(same_sa(&p, la[0], lb[0]));
        let (ca, cb) = (alive_children(&p.events_a), alive_children(&p.events_b));
        assert_eq!((ca.len(), cb.len()), (1, 1), "seed {s}: {ca:?} {cb:?}");
        assert_eq!((ca[0].0, ca[0].1), (cb[0].1, cb[0].0));
        assert!(failures(&p.events_a).is_empty() && failures(&p.events_b).is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("DUPLICATE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(128)
    ))]

    /// Both initiate at once under loss, duplication and reordering: at
    /// the end each side holds one IKE SA, the same one, with one
    /// CHILD_SA.
    #[test]
    fn both_sides_initiating_under_a_lossy_network(
        fates in proptest::collection::vec(fate(), 0..40),
        seed in 0u64..1000,
    ) {
        // (The network here takes no time: b initiating later than 0
        // would be after a's IKE SA came up on b, which a driver does
        // not do: an IKE SA up for the connection stops its retries.)
        // Enough retransmissions that the fates lose no SA for good (5
        // losses in a row fail an SA on one side only, a state that DPD
        // and the driver's retries mend, not this engine alone).
        let (a, b) = connections(PSK, PSK, IKE, IKE, ESP, ESP);
        let cfg = EngineConfig { max_retransmits: 64, ..test_config() };
        let mut p = Pair::with_seeds(a, b, cfg, (2 * seed + 1, 2 * seed + 2));
        p.a.initiate(0, 0).unwrap();
        p.b.initiate(0, 0).unwrap();
        p.run(&fates, 300_000);
        let (la, lb) = (live_ike_sas(&p.events_a), live_ike_sas(&p.events_b));
        let (ca, cb) = (alive_children(&p.events_a), alive_children(&p.events_b));
        prop_assert!(la.len() == 1 && lb.len() == 1, "a {:?} b {:?}", la, lb);
        prop_assert!(same_sa(&p, la[0], lb[0]));
        prop_assert_eq!((ca.len(), cb.len()), (1, 1));
        prop_assert_eq!((ca[0].0, ca[0].1), (cb[0].1, cb[0].0));
        prop_assert!(failures(&p.events_a).is_empty() && failures(&p.events_b).is_empty());
    }
}

/// The peer keeps its redundant SA (strongSwan has no such rule; here b's
/// INFORMATIONAL requests are lost for the first 15 s, so b neither
/// confirms the SA it keeps nor deletes its own): once the linger (10 s)
/// is over, a asks b on the SA it keeps (b answers: only b's requests are
/// lost) and then deletes b's redundant SA itself; one IKE SA is left.
#[test]
fn the_peers_redundant_sa_is_deleted_after_the_linger() {
    let mut tried = 0;
    for s in 0..16u64 {
        let (a, b) = connections(PSK, PSK, IKE, IKE, ESP, ESP);
        let cfg = EngineConfig {
            max_retransmits: 64,
            ..test_config()
        };
        let mut p = Pair::with_seeds(a, b, cfg, (2 * s + 1, 2 * s + 2));
        p.a.initiate(0, 0).unwrap();
        p.b.initiate(0, 0).unwrap();
        let mut a_requests_at = Vec::new();
        p.run_filtered(60_000, |tx, now| {
            let (exchange, response, _) = header_of(tx);
            let from_b = tx.src.ip() == addr(B).ip();
            if exchange == ExchangeType::INFORMATIONAL && !response {
                if from_b && now < 15_000 {
                    return false;
                }
                if !from_b {
                    a_requests_at.push(now);
                }
            }
            true
        });
        let (la, lb) = (live_ike_sas(&p.events_a), live_ike_sas(&p.events_b));
        assert_eq!((la.len(), lb.len()), (1, 1), "seed {s}: a {la:?} b {lb:?}");
        assert!(same_sa(&p, la[0], lb[0]));
        // Where a kept its own SA, a's first requests (its check on that
        // SA, then its delete of b's) come after the linger, while b's
        // requests are still lost. (Where a's lost, a
        // deleted its own once b answered a's liveness check on b's.)
        if p.a.ike_sa_spis(la[0]).unwrap().0 {
            tried += 1;
            let first = a_requests_at.first().copied();
            assert!(
                first.is_some_and(|t| (10_000..15_000).contains(&t)),
                "seed {s}: a's requests at {a_requests_at:?}"
            );
        }
    }
    assert!(tried > 0, "no seed made b's SA the redundant one");
}

/// b never gets a's answers to its IKE_AUTH (they are all lost): b's SA
/// fails on b, while on a it is up beside a's own. Where a's own SA holds
/// the lowest nonce, a must not delete it on the strength of b's, which b
/// does not have: a asks b on b's SA first (no answer: that SA fails on a
/// too) and both keep a's SA.
#[test]
fn our_redundant_sa_stays_when_the_peer_never_had_the_other() {
    for s in 0..12u64 {
        let mut p = pair((2 * s + 1, 2 * s + 2));
        p.a.initiate(0, 0).unwrap();
        p.b.initiate(0, 0).unwrap();
        p.run_filtered(120_000, |tx, _| {
            let (exchange, response, _) = header_of(tx);
            let from_a = tx.src.ip() == addr(A).ip();
            !(from_a && response && exchange == ExchangeType::IKE_AUTH)
        });
        let (la, lb) = (live_ike_sas(&p.events_a), live_ike_sas(&p.events_b));
        assert_eq!((la.len(), lb.len()), (1, 1), "seed {s}: a {la:?} b {lb:?}");
        assert!(same_sa(&p, la[0], lb[0]), "seed {s}");
        assert!(p.a.ike_sa_spis(la[0]).unwrap().0, "seed {s}: a's own SA");
        let (ca, cb) = (alive_children(&p.events_a), alive_children(&p.events_b));
        assert_eq!((ca.len(), cb.len()), (1, 1), "seed {s}: {ca:?} {cb:?}");
    }
}

/// b's INFORMATIONAL requests are lost for the first 5 s, shorter than
/// the linger (10 s) but longer than b's whole retransmission series
/// (test_config: 5 tries, 3.5 s). Where a keeps its own SA K and b's R is
/// redundant, b's check on K goes unanswered and K fails on b, which keeps
/// R; a must then not delete R after the linger on the strength of K (it
/// asks b on K first, gets no answer: K fails on a too). Both end on the
/// same SA. (Found by review: a deleted R, b was left with nothing and its
/// driver never initiated again.)
#[test]
fn a_short_loss_never_leaves_the_sides_on_different_sas() {
    for s in 0..16u64 {
        let mut p = pair((2 * s + 1, 2 * s + 2));
        p.a.initiate(0, 0).unwrap();
        p.b.initiate(0, 0).unwrap();
        p.run_filtered(60_000, |tx, now| {
            let (exchange, response, _) = header_of(tx);
            let from_b = tx.src.ip() == addr(B).ip();
            !(exchange == ExchangeType::INFORMATIONAL && !response && from_b && now < 5_000)
        });
        let (la, lb) = (live_ike_sas(&p.events_a), live_ike_sas(&p.events_b));
        assert_eq!((la.len(), lb.len()), (1, 1), "seed {s}: a {la:?} b {lb:?}");
        assert!(same_sa(&p, la[0], lb[0]), "seed {s}");
        let (ca, cb) = (alive_children(&p.events_a), alive_children(&p.events_b));
        assert_eq!((ca.len(), cb.len()), (1, 1), "seed {s}: {ca:?} {cb:?}");
    }
}

/// Our redundant SA, once dropped (its delete sent, here lost), is no
/// longer live: a driver falling back to its CHILD_SA would ask for a
/// rekey that the engine holds until the SA is gone (found by review).
#[test]
fn a_dropped_redundant_sa_is_not_live() {
    let mut seen = 0;
    for s in 0..8u64 {
        let mut p = pair((2 * s + 1, 2 * s + 2));
        p.a.initiate(0, 0).unwrap();
        p.b.initiate(0, 0).unwrap();
        // a's first INFORMATIONAL request (its check on b's SA) goes
        // through, the next ones (its delete) are lost.
        let mut a_requests = 0;
        p.run_filtered(1_000, |tx, _| {
            let (exchange, response, _) = header_of(tx);
            if exchange == ExchangeType::INFORMATIONAL && !response && tx.src.ip() == addr(A).ip() {
                a_requests += 1;
                return a_requests == 1;
            }
            true
        });
        let deleted = |id: IkeSaId| {
            p.events_a
                .iter()
                .any(|e| matches!(e, Event::IkeSaDeleted { ike_sa } if *ike_sa == id))
        };
        let ups = live_ike_sas(&p.events_a);
        for id in p.a.ike_sa_ids() {
            let ours = p.a.ike_sa_spis(id).unwrap().0;
            if ours && a_requests > 1 && ups.contains(&id) && !deleted(id) {
                assert!(!p.a.ike_sa_live(id), "seed {s}: dropped but live");
                seen += 1;
            }
        }
        // The SA kept is live.
        assert_eq!(
            ups.iter().filter(|id| p.a.ike_sa_live(**id)).count(),
            1,
            "seed {s}"
        );
    }
    assert!(
        seen > 0,
        "no run had a's own SA dropped and its delete lost"
    );
}

/// b reauthenticates (make-before-break) the SA a set up; b's delete of
/// the old SA is lost twice (the default timers: retransmitted at 4 s, 12
/// s). a must not take b's new SA for a duplicate to drop before that
/// delete could come: both end with b's new SA. (Found by the second
/// review: looked at again after the 10 s linger, b's new SA was dropped
/// when its nonce was the lowest, b's delete of the old one then came,
/// and neither side had an SA left.)
#[test]
fn the_peers_reauthentication_with_a_late_delete_keeps_its_new_sa() {
    for s in 0..16u64 {
        let (a, mut b) = connections(PSK, PSK, IKE, IKE, ESP, ESP);
        b.lifetimes = reauth_every_30s();
        let cfg = EngineConfig {
            retransmit_base_ms: 4_000,
            retransmit_max_ms: 64_000,
            max_retransmits: 5,
            ..test_config()
        };
        let mut p = Pair::with_seeds(a, b, cfg, (2 * s + 1, 2 * s + 2));
        p.a.initiate(0, 0).unwrap();
        let mut b_info = 0;
        p.run_filtered(55_000, |tx, _| {
            let (exchange, response, _) = header_of(tx);
            if exchange == ExchangeType::INFORMATIONAL && !response && tx.src.ip() == addr(B).ip() {
                b_info += 1;
                return b_info > 2;
            }
            true
        });
        let (la, lb) = (live_ike_sas(&p.events_a), live_ike_sas(&p.events_b));
        assert_eq!((la.len(), lb.len()), (1, 1), "seed {s}: a {la:?} b {lb:?}");
        assert!(same_sa(&p, la[0], lb[0]), "seed {s}");
        assert!(!p.a.ike_sa_spis(la[0]).unwrap().0, "seed {s}: b's new SA");
        assert_eq!(p.a.stats().duplicate_ike_sas, 0, "seed {s}");
    }
}

/// A `%any` connection with reauthentication serving two peers behind one
/// address (two identities of b here): our reauthentication's new SA and
/// the other peer's are no duplicates; both peers keep their IKE SA.
/// (Found by the second review: one of them was deleted.)
#[test]
fn two_peers_of_an_any_connection_are_no_duplicates() {
    use espgw_ike::engine::Connection;
    use espgw_ike::message::Identification;
    for s in 0..8u64 {
        let mut a = Connection::new(
            "any",
            addr(A),
            addr("0.0.0.0:500"),
            Identification::fqdn("a.example"),
            None,
            PSK,
            IKE,
            ESP,
            &["10.1.0.0/24"],
            &["10.2.0.0/16"],
        )
        .unwrap();
        a.lifetimes = reauth_every_30s();
        let peer = |name: &str, ts: &str| {
            Connection::new(
                name,
                addr(B),
                addr(A),
                Identification::fqdn(&format!("{name}.example")),
                Some(Identification::fqdn("a.example")),
                PSK,
                IKE,
                ESP,
                &[ts],
                &["10.1.0.0/24"],
            )
            .unwrap()
        };
        let mut p = Pair::with_seeds(
            a,
            peer("b1", "10.2.1.0/24"),
            test_config(),
            (2 * s + 1, 2 * s + 2),
        );
        p.b.add_connection(peer("b2", "10.2.2.0/24"));
        p.b.initiate(0, 0).unwrap();
        p.run(&[], 1_000);
        p.now = 20_000;
        p.b.initiate(p.now, 1).unwrap();
        p.run(&[], 45_000);
        let (la, lb) = (live_ike_sas(&p.events_a), live_ike_sas(&p.events_b));
        assert_eq!((la.len(), lb.len()), (2, 2), "seed {s}: a {la:?} b {lb:?}");
        assert_eq!(p.a.stats().duplicate_ike_sas, 0, "seed {s}");
    }
}
