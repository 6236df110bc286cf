//! CREATE_CHILD_SA between two engines: CHILD_SA rekey from either side,
//! with and without PFS, the old CHILD_SA deleted afterwards; refusals
//! keep the old CHILD_SA.

mod engine_common;

use engine_common::*;
use espgw_ike::engine::{ChildSa, Event, IkeSaId};
use espgw_ike::message::{ExchangeType, Message, NotifyType};

const PSK: &[u8] = b"create child psk";

fn up(esp_a: &str, esp_b: &str) -> (Pair, IkeSaId, IkeSaId, ChildSa, ChildSa) {
    let ike = "aes256gcm16-prfsha384-ecp384";
    let (a, b) = connections(PSK, PSK, ike, ike, esp_a, esp_b);
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
    let (ca, cb) = (
        children(&p.events_a)[0].clone(),
        children(&p.events_b)[0].clone(),
    );
    p.events_a.clear();
    p.events_b.clear();
    p.sent.clear();
    (p, id_a, id_b, ca, cb)
}

fn deleted(events: &[Event]) -> Vec<(u32, u32)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ChildSaDeleted {
                inbound_spi,
                outbound_spi,
                ..
            } => Some((*inbound_spi, *outbound_spi)),
            _ => None,
        })
        .collect()
}

fn create_child_request_len(p: &Pair) -> usize {
    p.sent
        .iter()
        .map(|t| {
            t.payload
                .strip_prefix(&[0, 0, 0, 0][..])
                .unwrap_or(&t.payload)
        })
        .find(|d| {
            let h = Message::parse_raw(d).unwrap().0;
            h.exchange == ExchangeType::CREATE_CHILD_SA && !h.response
        })
        .unwrap()
        .len()
}

/// The one CHILD_SA each side installed, the same at both ends (SPIs and
/// keys crossed).
fn one_new_child_each(p: &Pair) -> (&ChildSa, &ChildSa) {
    let (na, nb) = (children(&p.events_a), children(&p.events_b));
    assert_eq!(
        (na.len(), nb.len()),
        (1, 1),
        "{:?} {:?}",
        p.events_a,
        p.events_b
    );
    assert_same_child(na[0], nb[0]);
    (na[0], nb[0])
}

/// Rekeys (a or b initiating) and checks both sides: one new CHILD_SA
/// with the same keys, crossed SPIs, new keys, the old one deleted.
fn rekey(esp: &str, by_a: bool) -> usize {
    let (mut p, id_a, id_b, old_a, old_b) = up(esp, esp);
    if by_a {
        p.a.rekey_child_sa(p.now, id_a, old_a.inbound_spi).unwrap();
    } else {
        p.b.rekey_child_sa(p.now, id_b, old_b.inbound_spi).unwrap();
    }
    p.run(&[], 60_000);
    let (na, _) = one_new_child_each(&p);
    assert_ne!(na.inbound_spi, old_a.inbound_spi);
    assert_ne!(na.outbound.key.expose(), old_a.outbound.key.expose());
    assert_eq!(na.local_ts, old_a.local_ts);
    assert_eq!(
        deleted(&p.events_a),
        vec![(old_a.inbound_spi, old_a.outbound_spi)]
    );
    assert_eq!(
        deleted(&p.events_b),
        vec![(old_b.inbound_spi, old_b.outbound_spi)]
    );
    // Deleted once on each side: a second rekey of the old SPI is refused.
    assert!(p.a.rekey_child_sa(p.now, id_a, old_a.inbound_spi).is_err());
    create_child_request_len(&p)
}

/// RFC 7296 1.3.1: an IKE SA whose CHILD_SA was deleted carries a new
/// one from either side (`create_child_sa`: CREATE_CHILD_SA without
/// REKEY_SA): the same CHILD_SA on both sides (SPIs and keys crossed),
/// fresh SPIs and keys, the connection's selectors, not a rekey and not a
/// per-resource SA on either side (the responder saw no REKEY_SA), no new
/// IKE SA; with PFS too.
#[test]
fn a_new_child_sa_on_an_ike_sa_whose_child_sa_was_deleted() {
    for (esp, by_a) in [
        ("aes128gcm16", true),
        ("aes128gcm16", false),
        ("aes128gcm16-x25519", true),
    ] {
        let (mut p, id_a, id_b, old_a, old_b) = up(esp, esp);
        p.a.delete_child_sa(p.now, id_a, old_a.inbound_spi).unwrap();
        p.run(&[], 60_000);
        assert_eq!(
            deleted(&p.events_b),
            vec![(old_b.inbound_spi, old_b.outbound_spi)]
        );
        p.events_a.clear();
        p.events_b.clear();
        p.sent.clear();
        if by_a {
            p.a.create_child_sa(p.now, id_a).unwrap();
        } else {
            p.b.create_child_sa(p.now, id_b).unwrap();
        }
        p.run(&[], 60_000);
        let what = format!("{esp} by a: {by_a}: {:?} {:?}", p.events_a, p.events_b);
        let (na, nb) = (children(&p.events_a), children(&p.events_b));
        assert_eq!((na.len(), nb.len()), (1, 1), "{what}");
        assert_same_child(na[0], nb[0]);
        assert_ne!(na[0].inbound_spi, old_a.inbound_spi, "{what}");
        assert_ne!(na[0].outbound.key.expose(), old_a.outbound.key.expose());
        assert_eq!(
            (&na[0].local_ts, &na[0].remote_ts),
            (&old_a.local_ts, &old_a.remote_ts),
            "{what}"
        );
        for (c, ike) in [(na[0], id_a), (nb[0], id_b)] {
            assert_eq!(c.ike_sa, ike, "the same IKE SA: {what}");
            assert_eq!((c.rekeys, c.per_resource), (None, false), "{what}");
        }
        assert_eq!(na[0].initiated_by_us, by_a, "{what}");
        assert_eq!(nb[0].initiated_by_us, !by_a, "{what}");
        assert!(
            !p.events_a
                .iter()
                .chain(&p.events_b)
                .any(|e| matches!(e, Event::IkeSaUp { .. })),
            "{what}"
        );
    }
}

/// The peer rekeys the IKE SA while our request for a new CHILD_SA on it
/// is out: refused with TEMPORARY_FAILURE (RFC 7296 2.25, as while our
/// CHILD_SA rekey is out), so the new CHILD_SA is installed before the
/// CHILD_SAs move; the peer's retry then moves it to the new IKE SA, where
/// it can be deleted. Fails when the rekey is accepted at once (the
/// CHILD_SA then lands on the old IKE SA and goes with it).
#[test]
fn the_peers_ike_rekey_waits_for_our_new_child_sa() {
    let (mut p, id_a, id_b, old_a, _) = up("aes128gcm16", "aes128gcm16");
    p.a.delete_child_sa(p.now, id_a, old_a.inbound_spi).unwrap();
    p.run(&[], 60_000);
    p.events_a.clear();
    p.events_b.clear();
    // Both requests cross on the wire.
    p.a.create_child_sa(p.now, id_a).unwrap();
    p.b.rekey_ike_sa(p.now, id_b).unwrap();
    p.run(&[], 60_000);
    let what = format!("{:?} {:?}", p.events_a, p.events_b);
    assert!(
        matches!(
            p.events_b[..],
            [
                Event::ChildSaInstalled(_),
                Event::IkeRekeyFailed {
                    notify: NotifyType::TEMPORARY_FAILURE,
                    ..
                },
                Event::IkeSaRekeyed { .. },
                ..
            ]
        ),
        "{what}"
    );
    let (na, nb) = (children(&p.events_a), children(&p.events_b));
    assert_eq!((na.len(), nb.len()), (1, 1), "{what}");
    assert_same_child(na[0], nb[0]);
    let r = rekeyed(&p.events_a);
    assert_eq!(r.len(), 1, "{what}");
    p.a.delete_child_sa(p.now, r[0].1, na[0].inbound_spi)
        .expect("the new CHILD_SA moved to the new IKE SA");
}

#[test]
fn child_sa_rekey_by_the_initiator() {
    rekey("aes128gcm16", true);
}

#[test]
fn child_sa_rekey_by_the_responder() {
    rekey("aes128gcm16", false);
}

#[test]
fn child_sa_rekey_with_pfs_carries_a_key_exchange() {
    let without = rekey("aes128gcm16", true);
    let with = rekey("aes128gcm16-ecp384", true);
    // The KE payload (4 + 4 bytes of header and group, 96 of P-384 value)
    // and the ecp384 transform in the proposal (8 bytes).
    assert_eq!(with - without, 104 + 8);
    rekey("aes256-sha256-modp2048", false);
}

#[test]
fn a_refused_rekey_keeps_the_old_child_sa() {
    // a wants PFS, b does not do it: NO_PROPOSAL_CHOSEN.
    let (mut p, id_a, _, old_a, _) = up("aes128gcm16-x25519", "aes128gcm16");
    p.a.rekey_child_sa(p.now, id_a, old_a.inbound_spi).unwrap();
    p.run(&[], 60_000);
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
    assert!(p.events_b.is_empty(), "{:?}", p.events_b);
    // The old one is still there to be deleted.
    p.a.delete_child_sa(p.now, id_a, old_a.inbound_spi).unwrap();
}

#[test]
fn rekey_under_loss_and_duplication() {
    let (mut p, id_a, _, old_a, _) = up("aes128gcm16-x25519", "aes128gcm16-x25519");
    p.a.rekey_child_sa(p.now, id_a, old_a.inbound_spi).unwrap();
    p.run(
        &[
            Fate::Drop,
            Fate::Duplicate,
            Fate::Drop,
            Fate::Duplicate,
            Fate::Defer,
        ],
        60_000,
    );
    one_new_child_each(&p);
    assert_eq!(deleted(&p.events_a).len(), 1);
    assert_eq!(deleted(&p.events_b).len(), 1);
}

fn rekeyed(events: &[Event]) -> Vec<(IkeSaId, IkeSaId)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::IkeSaRekeyed { old, new } => Some((*old, *new)),
            _ => None,
        })
        .collect()
}

/// Rekeys the IKE SA (a or b initiating), then uses the new SA: a
/// liveness check each way and a CHILD_SA rekey (its keys come from the
/// new SK_d, and the CHILD_SA moved over).
fn ike_rekey(by_a: bool) {
    let (mut p, id_a, id_b, old_a, _) = up("aes128gcm16-x25519", "aes128gcm16-x25519");
    if by_a {
        p.a.rekey_ike_sa(p.now, id_a).unwrap();
    } else {
        p.b.rekey_ike_sa(p.now, id_b).unwrap();
    }
    p.run(&[], 60_000);
    let (ra, rb) = (rekeyed(&p.events_a), rekeyed(&p.events_b));
    assert_eq!(
        (ra.len(), rb.len()),
        (1, 1),
        "{:?} {:?}",
        p.events_a,
        p.events_b
    );
    let (new_a, new_b) = (ra[0].1, rb[0].1);
    assert_eq!((ra[0].0, rb[0].0), (id_a, id_b));
    assert!(new_a != id_a && new_b != id_b);
    for (events, old) in [(&p.events_a, id_a), (&p.events_b, id_b)] {
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::IkeSaDeleted { ike_sa } if *ike_sa == old)),
            "{events:?}"
        );
        assert!(
            deleted(events).is_empty(),
            "the CHILD_SA survives: {events:?}"
        );
    }
    // The old SA lingers only to answer retransmissions, then goes.
    p.run(&[], 60_000);
    assert_eq!((p.a.ike_sa_count(), p.b.ike_sa_count()), (1, 1));
    p.events_a.clear();
    p.events_b.clear();
    p.a.check_liveness(p.now, new_a).unwrap();
    p.b.check_liveness(p.now, new_b).unwrap();
    p.a.rekey_child_sa(p.now, new_a, old_a.inbound_spi).unwrap();
    p.run(&[], 60_000);
    assert!(p
        .events_a
        .iter()
        .any(|e| matches!(e, Event::PeerAlive { .. })));
    assert!(p
        .events_b
        .iter()
        .any(|e| matches!(e, Event::PeerAlive { .. })));
    let (na, _) = one_new_child_each(&p);
    assert_eq!(na.ike_sa, new_a);
}

#[test]
fn ike_sa_rekey_by_the_initiator() {
    ike_rekey(true);
}

#[test]
fn ike_sa_rekey_by_the_responder() {
    ike_rekey(false);
}

/// The CHILD_SAs a side holds at the end: installed minus deleted, by
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

#[test]
fn simultaneous_child_sa_rekeys_leave_one_child_sa() {
    // RFC 7296 2.8.1: both rekey the same CHILD_SA at once; each side gets
    // both new SAs, the one whose exchange has the lowest nonce goes, and
    // the old one goes: one CHILD_SA is left, the same on both sides.
    for seed_shift in 0..8 {
        let (mut p, id_a, id_b, old_a, old_b) = up("aes128gcm16", "aes128gcm16");
        // Different nonces each round, so either exchange can hold the lowest.
        for _ in 0..seed_shift {
            p.a.check_liveness(p.now, id_a).unwrap();
            p.run(&[], 60_000);
        }
        p.events_a.clear();
        p.events_b.clear();
        p.a.rekey_child_sa(p.now, id_a, old_a.inbound_spi).unwrap();
        p.b.rekey_child_sa(p.now, id_b, old_b.inbound_spi).unwrap();
        p.run(&[], 60_000);
        let (la, lb) = (alive(&p.events_a, &old_a), alive(&p.events_b, &old_b));
        assert_eq!(
            (la.len(), lb.len()),
            (1, 1),
            "round {seed_shift}: {:?} {:?}",
            p.events_a,
            p.events_b
        );
        assert_eq!(la[0], (lb[0].1, lb[0].0), "round {seed_shift}");
        assert_eq!(children(&p.events_a).len(), 2);
    }
}

#[test]
fn an_unanswered_delete_after_an_ike_rekey_is_no_failure() {
    // Found by engine_properties: b rekeys, a deletes the old SA on b's
    // Delete, and every answer is lost until a has forgotten the old SA.
    // b's delete times out: the old SA is deleted, nothing failed.
    use Fate::*;
    let (mut p, _, id_b, _, _) = up("aes128gcm16-x25519", "aes128gcm16-x25519");
    p.b.rekey_ike_sa(p.now, id_b).unwrap();
    let mut fates = vec![Deliver, Deliver, Drop, Drop, Deliver];
    fates.extend([Drop; 11]);
    // Ten minutes: long past every retransmission and linger, short of
    // the first lifetime (CHILD_SA rekey at 54 to 60 minutes).
    p.run(&fates, 600_000);
    assert_eq!(rekeyed(&p.events_b).len(), 1);
    assert!(
        matches!(p.events_b[..], [Event::IkeSaRekeyed { .. }, Event::IkeSaDeleted { ike_sa }] if ike_sa == id_b),
        "{:?}",
        p.events_b
    );
}

/// Whether `events` hold `ChildSaInstalled` for the CHILD_SA whose
/// outbound SPI is `spi`, and whether it was deleted again afterwards.
fn installed_then_deleted(events: &[Event], outbound_spi: u32) -> (bool, bool) {
    let installed = children(events)
        .iter()
        .any(|c| c.outbound_spi == outbound_spi);
    let deleted = deleted(events).iter().any(|&(_, out)| out == outbound_spi);
    (installed, deleted)
}

/// Whether `events` report a CHILD_SA that failed with `notify`.
fn failed_with(events: &[Event], notify: NotifyType) -> bool {
    events
        .iter()
        .any(|e| matches!(e, Event::ChildSaFailed { notify: n, .. } if *n == notify))
}

/// The SPI a sent a CHILD_SA request with: what b sends to (its outbound
/// SPI of the CHILD_SA it creates). `ChildSaFailed` carries no SPI, so it
/// is read back from b's side: the one CHILD_SA b installed that a did not.
fn strays(p: &Pair) -> Vec<u32> {
    let a_has: Vec<u32> = children(&p.events_a)
        .iter()
        .map(|c| c.inbound_spi)
        .collect();
    children(&p.events_b)
        .iter()
        .map(|c| c.outbound_spi)
        .filter(|spi| !a_has.contains(spi))
        .collect()
}

/// We refuse an answer that created a CHILD_SA at the peer (here: our ESP
/// proposals changed while the request was out, as an operator's reload
/// does, so the peer's choice is no longer ours): the peer installed it
/// and would send on it, so we delete it (RFC 7296 2.9), named by the
/// inbound SPI we offered. Checked for a CHILD_SA rekey (the old one
/// carries on at both ends) and for a new CHILD_SA. Fails without the
/// delete: b keeps a CHILD_SA that a never installed.
#[test]
fn a_child_sa_the_peer_created_but_we_refused_is_deleted() {
    for rekey_it in [true, false] {
        let (mut p, id_a, _, old_a, old_b) = up("aes128gcm16", "aes128gcm16-aes256gcm16");
        if rekey_it {
            p.a.rekey_child_sa(p.now, id_a, old_a.inbound_spi).unwrap();
        } else {
            p.a.delete_child_sa(p.now, id_a, old_a.inbound_spi).unwrap();
            p.run(&[], 60_000);
            p.events_a.clear();
            p.events_b.clear();
            p.a.create_child_sa(p.now, id_a).unwrap();
        }
        // The request is out (queued for b); now a takes only AES-256.
        p.a.connection_mut(0).unwrap().esp_proposals =
            espgw_ike::crypto::parse_esp_proposals("aes256gcm16").unwrap();
        // Less than the 10 s after which a refused rekey is tried again.
        p.run(&[], 5_000);
        let what = if rekey_it { "rekey" } else { "new CHILD_SA" };
        assert!(
            failed_with(&p.events_a, NotifyType::NO_PROPOSAL_CHOSEN),
            "{what}: {:?}",
            p.events_a
        );
        assert!(
            children(&p.events_a).is_empty(),
            "{what}: a installed nothing"
        );
        let stray = strays(&p);
        assert_eq!(stray.len(), 1, "{what}: b created one: {:?}", p.events_b);
        assert_eq!(
            installed_then_deleted(&p.events_b, stray[0]),
            (true, true),
            "{what}: b's CHILD_SA of our refused answer is deleted: {:?}",
            p.events_b
        );
        // Nothing a has was touched: a's events are the failure only.
        assert!(deleted(&p.events_a).is_empty(), "{what}: {:?}", p.events_a);
        if rekey_it {
            // The old CHILD_SA is still there at both ends; a tries its
            // rekey again 10 s later, and b takes it (the old SA is no
            // longer "rekeyed" there: its replacement went first): with
            // a's proposal of now, one new CHILD_SA on both sides, the old
            // one deleted at both. Fails when a does not try again, or b
            // still holds the old one as rekeyed (TEMPORARY_FAILURE).
            assert!(deleted(&p.events_b)
                .iter()
                .all(|&(inb, _)| inb != old_b.inbound_spi));
            p.events_a.clear();
            p.events_b.clear();
            p.run(&[], 60_000);
            one_new_child_each(&p);
            assert!(deleted(&p.events_b)
                .iter()
                .any(|&(inb, _)| inb == old_b.inbound_spi));
            assert!(deleted(&p.events_a)
                .iter()
                .any(|&(inb, _)| inb == old_a.inbound_spi));
        }
    }
}

/// The same for the IKE_AUTH CHILD_SA: the responder installed it with
/// its IKE_AUTH answer; our selectors changed while the request was out,
/// so we refuse it and delete it; the IKE SA stays up.
#[test]
fn an_ike_auth_child_sa_we_refused_is_deleted() {
    let ike = "aes256gcm16-prfsha384-ecp384";
    let (a, b) = connections(PSK, PSK, ike, ike, "aes128gcm16", "aes128gcm16");
    let mut p = Pair::new(a, b, test_config());
    p.a.initiate(0, 0).unwrap();
    // IKE_SA_INIT by hand, so that a's IKE_AUTH request is out before the
    // change.
    let init = p.a.poll_transmit().unwrap();
    p.b.handle_datagram(0, init.src, init.dst, &init.payload);
    let answer = p.b.poll_transmit().unwrap();
    p.a.handle_datagram(0, answer.src, answer.dst, &answer.payload);
    // a's IKE_AUTH request is queued; now a wants another local subnet.
    let local = vec![espgw_ike::engine::cidr_selector("10.9.0.0/24").unwrap()];
    p.a.connection_mut(0).unwrap().local_ts = local;
    p.run(&[], 60_000);
    assert!(p
        .events_a
        .iter()
        .any(|e| matches!(e, Event::IkeSaUp { .. })));
    assert!(
        failed_with(&p.events_a, NotifyType::TS_UNACCEPTABLE),
        "{:?}",
        p.events_a
    );
    let stray = strays(&p);
    assert_eq!(stray.len(), 1, "{:?}", p.events_b);
    assert_eq!(
        installed_then_deleted(&p.events_b, stray[0]),
        (true, true),
        "{:?}",
        p.events_b
    );
    assert!(
        !p.events_b
            .iter()
            .any(|e| matches!(e, Event::IkeSaDeleted { .. })),
        "the IKE SA stays"
    );
}
