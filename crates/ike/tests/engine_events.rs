//! What the engine's events say about their origin: IkeSaUp carries the
//! role and both SPIs (checked against the IKE header on the wire);
//! ChildSaInstalled says whether our exchange made it and which CHILD_SA a
//! rekey replaces.

mod engine_common;

use engine_common::*;
use espgw_ike::engine::{Event, IkeSaId};
use espgw_ike::message::{ExchangeType, Message};

const PSK: &[u8] = b"events psk";

fn up_info(events: &[Event]) -> (IkeSaId, bool, u64, u64) {
    events
        .iter()
        .find_map(|e| match e {
            Event::IkeSaUp {
                ike_sa,
                initiator,
                spi_i,
                spi_r,
                ..
            } => Some((*ike_sa, *initiator, *spi_i, *spi_r)),
            _ => None,
        })
        .expect("IkeSaUp")
}

#[test]
fn ike_sa_up_names_the_role_and_both_spis_and_children_their_origin() {
    let ike = "aes128gcm16-prfsha256-x25519";
    let (a, b) = connections(PSK, PSK, ike, ike, "aes128gcm16", "aes128gcm16");
    let mut p = Pair::new(a, b, test_config());
    let id_a = p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    // The SPIs of the IKE_AUTH response as the wire carries them.
    let (wire_i, wire_r) = p
        .sent
        .iter()
        .map(|t| {
            t.payload
                .strip_prefix(&[0, 0, 0, 0][..])
                .unwrap_or(&t.payload)
        })
        .find_map(|d| {
            let h = Message::parse_raw(d).ok()?.0;
            (h.exchange == ExchangeType::IKE_AUTH && h.response).then_some((h.spi_i, h.spi_r))
        })
        .unwrap();
    let (sa_a, init_a, ia, ra) = up_info(&p.events_a);
    let (sa_b, init_b, ib, rb) = up_info(&p.events_b);
    assert_eq!((sa_a, init_a, init_b), (id_a, true, false));
    assert_eq!((ia, ra), (wire_i, wire_r));
    assert_eq!((ib, rb), (wire_i, wire_r));
    assert_eq!(sa_a, ia, "the initiator's id is SPIi");
    assert_eq!(sa_b, rb, "the responder's id is SPIr");
    let (ca, cb) = (
        children(&p.events_a)[0].clone(),
        children(&p.events_b)[0].clone(),
    );
    assert!(ca.initiated_by_us && !cb.initiated_by_us);
    // Established: not abortable (delete_ike_sa tells the peer).
    assert!(p.a.abort_ike_sa(sa_a).is_err() && p.b.abort_ike_sa(sa_b).is_err());
    assert!(p.a.abort_ike_sa(12345).is_err());
    assert_eq!((ca.rekeys, cb.rekeys), (None, None));

    // A rekey by the responder of the IKE SA (b): b's new CHILD_SA is its
    // own exchange's; each side names its own old inbound SPI.
    p.events_a.clear();
    p.events_b.clear();
    p.b.rekey_child_sa(p.now, sa_b, cb.inbound_spi).unwrap();
    p.run(&[], 60_000);
    let (na, nb) = (children(&p.events_a), children(&p.events_b));
    assert_eq!((na.len(), nb.len()), (1, 1));
    assert!(!na[0].initiated_by_us && nb[0].initiated_by_us);
    assert_eq!(na[0].rekeys, Some(ca.inbound_spi));
    assert_eq!(nb[0].rekeys, Some(cb.inbound_spi));
}

/// Whether the first IKE_SA_INIT request announces fragmentation.
fn init_announces_fragmentation(a_frag: Option<bool>, engine_frag: bool) -> (bool, bool) {
    use espgw_ike::message::{NotifyType, Payload};
    let ike = "aes128gcm16-prfsha256-x25519";
    let (mut a, b) = connections(PSK, PSK, ike, ike, "aes128gcm16", "aes128gcm16");
    a.fragmentation = a_frag;
    let mut cfg = test_config();
    cfg.fragmentation = engine_frag;
    let mut p = Pair::new(a, b, cfg);
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    let announces = |response: bool| {
        p.sent.iter().any(|t| {
            let Ok(m) = Message::parse(&t.payload) else {
                return false;
            };
            m.header.exchange == ExchangeType::IKE_SA_INIT
                && m.header.response == response
                && m.payloads.iter().any(|pl| {
                    matches!(pl, Payload::Notify(n) if n.notify_type == NotifyType::IKEV2_FRAGMENTATION_SUPPORTED)
                })
        })
    };
    (announces(false), announces(true))
}

#[test]
fn a_connection_overrides_the_engine_fragmentation_setting() {
    // Engine default on: a connection with it off announces nothing, and
    // the responder (default, on) answers only an announcement.
    assert_eq!(init_announces_fragmentation(None, true), (true, true));
    assert_eq!(
        init_announces_fragmentation(Some(false), true),
        (false, false)
    );
    // Engine default off: the initiator's connection turns it on; the
    // responder's (engine default) does not answer it.
    assert_eq!(
        init_announces_fragmentation(Some(true), false),
        (true, false)
    );
}

/// RFC 7296 2.4 INITIAL_CONTACT: the initiator sends it in IKE_AUTH when
/// it holds no other IKE SA with the peer, and the responder's IkeSaUp
/// says so; a second IKE SA while the first is up carries none.
#[test]
fn initial_contact_only_when_no_other_ike_sa_with_the_peer_is_up() {
    let ike = "aes128gcm16-prfsha256-x25519";
    let (a, b) = connections(PSK, PSK, ike, ike, "aes128gcm16", "aes128gcm16");
    let mut p = Pair::new(a, b, test_config());
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    let flag = |ev: &[Event]| {
        ev.iter()
            .filter_map(|e| match e {
                Event::IkeSaUp {
                    initial_contact, ..
                } => Some(*initial_contact),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(flag(&p.events_b), vec![true], "the responder sees it");
    assert_eq!(
        flag(&p.events_a),
        vec![false],
        "only a responder reports it"
    );
    // (The notify rides in the encrypted IKE_AUTH: the responder's event
    // is the witness.) A second IKE SA while the first is up: none.
    p.events_a.clear();
    p.events_b.clear();
    let now = p.now;
    p.a.initiate(now, 0).unwrap();
    p.run(&[], 60_000);
    assert_eq!(
        flag(&p.events_b),
        vec![false],
        "the first IKE SA is still up"
    );
}
