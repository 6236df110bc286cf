//! Two engines talking: IKE_SA_INIT + IKE_AUTH with PSK end with the same
//! CHILD_SA on both sides; proposal, KE and authentication failures; the
//! window, retransmission and duplicate handling; NAT-T.

mod engine_common;

use engine_common::*;
use espgw_ike::crypto::EspSuite;
use espgw_ike::engine::{AuthFailure, Event, FailReason};
use espgw_ike::message::{
    ExchangeType, Message, NotifyType, Payload, PayloadType, TrafficSelector,
};

const PSK: &[u8] = b"espgw test psk 0123456789";

fn pair(ike_a: &str, ike_b: &str, esp: &str) -> Pair {
    let (a, b) = connections(PSK, PSK, ike_a, ike_b, esp, esp);
    Pair::new(a, b, test_config())
}

fn up(p: &Pair) {
    assert!(
        p.events_a
            .iter()
            .any(|e| matches!(e, Event::IkeSaUp { .. })),
        "{:?}",
        p.events_a
    );
    assert!(
        p.events_b
            .iter()
            .any(|e| matches!(e, Event::IkeSaUp { .. })),
        "{:?}",
        p.events_b
    );
    let (ca, cb) = (children(&p.events_a), children(&p.events_b));
    assert_eq!((ca.len(), cb.len()), (1, 1));
    assert_same_child(ca[0], cb[0]);
}

#[test]
fn psk_exchange_installs_the_same_child_sa_on_both_sides() {
    for (ike, esp, suite) in [
        (
            "aes128gcm16-prfsha256-x25519",
            "aes128gcm16",
            EspSuite::Aes128Gcm16,
        ),
        (
            "aes256-sha256-prfsha256-modp2048",
            "aes256-sha256-modp2048",
            EspSuite::Aes256Sha256,
        ),
        (
            "aes256gcm16-prfsha384-ecp384",
            "aes256gcm16-esn",
            EspSuite::Aes256Gcm16,
        ),
        (
            "chacha20poly1305-prfsha512-ecp256",
            "chacha20poly1305",
            EspSuite::ChaCha20Poly1305,
        ),
    ] {
        let mut p = pair(ike, ike, esp);
        p.a.initiate(0, 0).unwrap();
        p.run(&[], 60_000);
        up(&p);
        let a = children(&p.events_a)[0];
        assert_eq!(a.suite, suite, "{ike} {esp}");
        assert_eq!(a.esn, esp.contains("-esn"));
        assert_eq!(a.outbound.key.len(), suite.key_len());
        // No NAT between them: both NAT-D checks pass on both sides.
        assert!(!a.udp_encap && !children(&p.events_b)[0].udp_encap);
        // Four datagrams: two exchanges, nothing retransmitted.
        assert_eq!(p.sent.len(), 4, "{ike}");
        // b narrowed a's TSr 10.2.0.0/16 to its own 10.2.0.0/24.
        assert_eq!(
            a.remote_ts,
            vec![TrafficSelector::Ipv4 {
                ip_protocol: 0,
                start_port: 0,
                end_port: 65535,
                start: "10.2.0.0".parse().unwrap(),
                end: "10.2.0.255".parse().unwrap(),
            }]
        );
    }
}

#[test]
fn invalid_ke_payload_makes_the_initiator_retry_with_the_requested_group() {
    let mut p = pair(
        "aes128gcm16-prfsha256-x25519-ecp256",
        "aes128gcm16-prfsha256-ecp256",
        "aes128gcm16",
    );
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    up(&p);
    let groups: Vec<u16> = p
        .sent
        .iter()
        .filter(|t| t.src == addr(A))
        .filter_map(|t| Message::parse(&t.payload).ok())
        .filter_map(|m| match m.find(PayloadType::KE) {
            Some(Payload::Ke(k)) => Some(k.group),
            _ => None,
        })
        .collect();
    assert_eq!(groups, vec![31, 19]);
}

#[test]
fn no_common_proposal_fails_the_initiator() {
    let mut p = pair(
        "aes128gcm16-prfsha256-x25519",
        "aes256-sha256-prfsha256-modp2048",
        "aes128gcm16",
    );
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    assert!(
        matches!(
            p.events_a[..],
            [Event::IkeSaFailed {
                reason: FailReason::PeerNotify(NotifyType::NO_PROPOSAL_CHOSEN),
                ..
            }]
        ),
        "{:?}",
        p.events_a
    );
    assert!(p.events_b.is_empty());
    // ... but counted it: the responder's only trace of the mismatch.
    assert_eq!(p.b.stats().init_no_proposal, 1);
    assert_eq!(p.a.stats().init_no_proposal, 0);
    // The responder kept no state for it.
    assert_eq!(p.b.ike_sa_count(), 0);
}

#[test]
fn no_common_esp_proposal_brings_the_ike_sa_up_without_a_child() {
    let (a, b) = connections(
        PSK,
        PSK,
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16",
        "aes256-sha256",
    );
    let mut p = Pair::new(a, b, test_config());
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    for events in [&p.events_a, &p.events_b] {
        assert!(events.iter().any(|e| matches!(e, Event::IkeSaUp { .. })));
        assert!(
            events.iter().any(|e| matches!(
                e,
                Event::ChildSaFailed {
                    notify: NotifyType::NO_PROPOSAL_CHOSEN,
                    ..
                }
            )),
            "{events:?}"
        );
    }
}

#[test]
fn wrong_psk_is_authentication_failed_naming_the_peer_not_the_secret() {
    let wrong = b"not the same key at all";
    let (a, b) = connections(
        wrong,
        PSK,
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16",
        "aes128gcm16",
    );
    let mut p = Pair::new(a, b, test_config());
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    let line = match &p.events_b[..] {
        [e @ Event::AuthFailed {
            reason: AuthFailure::BadAuth,
            peer,
            peer_id,
            ..
        }] => {
            assert_eq!(*peer, addr(A));
            assert_eq!(peer_id.as_deref(), Some("a.example"));
            e.to_string()
        }
        other => panic!("{other:?}"),
    };
    assert!(
        line.contains("192.0.2.1") && line.contains("a.example"),
        "{line}"
    );
    for secret in [PSK, &wrong[..]] {
        assert!(!line.contains(std::str::from_utf8(secret).unwrap()));
        assert!(!format!("{:?}", p.events_b).contains(std::str::from_utf8(secret).unwrap()));
    }
    assert!(
        matches!(
            p.events_a[..],
            [Event::AuthFailed {
                reason: AuthFailure::RejectedByPeer,
                ..
            }]
        ),
        "{:?}",
        p.events_a
    );
    assert!(children(&p.events_a).is_empty() && children(&p.events_b).is_empty());
}

#[test]
fn unanswered_requests_are_retransmitted_with_backoff_then_given_up() {
    let mut p = pair(
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16",
    );
    p.a.initiate(0, 0).unwrap();
    let first = p.a.poll_transmit().unwrap();
    let mut times = Vec::new();
    while let Some(t) = p.a.poll_timeout() {
        p.a.handle_timeout(t);
        if let Some(again) = p.a.poll_transmit() {
            assert_eq!(again, first, "a retransmission is the same datagram");
            times.push(t);
        }
        if p.a.poll_event().is_some() {
            break;
        }
    }
    // base 100 ms, doubling, capped at 1000 ms; 5 retransmissions, then
    // one more wait before giving up.
    assert_eq!(times, vec![100, 300, 700, 1500, 2500]);
    assert_eq!(p.a.stats().retransmitted_requests, 5);
}

#[test]
fn duplicate_request_is_answered_from_the_stored_response_and_stray_responses_are_ignored() {
    let mut p = pair(
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16",
    );
    p.a.initiate(0, 0).unwrap();
    let init = p.a.poll_transmit().unwrap();
    p.b.handle_datagram(0, init.src, init.dst, &init.payload);
    let init_resp = p.b.poll_transmit().unwrap();
    // The same IKE_SA_INIT again: the same answer, no new SA.
    p.b.handle_datagram(0, init.src, init.dst, &init.payload);
    assert_eq!(p.b.poll_transmit().unwrap(), init_resp);
    assert_eq!(p.b.ike_sa_count(), 1);
    p.a.handle_datagram(0, init_resp.src, init_resp.dst, &init_resp.payload);
    let auth = p.a.poll_transmit().unwrap();
    // The IKE_SA_INIT response again: no request outstanding with ID 0.
    p.a.handle_datagram(0, init_resp.src, init_resp.dst, &init_resp.payload);
    assert!(p.a.poll_transmit().is_none());
    assert_eq!(p.a.stats().unexpected, 1);
    p.b.handle_datagram(0, auth.src, auth.dst, &auth.payload);
    let auth_resp = p.b.poll_transmit().unwrap();
    p.b.handle_datagram(0, auth.src, auth.dst, &auth.payload);
    assert_eq!(
        p.b.poll_transmit().unwrap(),
        auth_resp,
        "stored response, byte for byte"
    );
    assert_eq!(p.b.stats().retransmitted_responses, 2);
    let installs = std::iter::from_fn(|| p.b.poll_event())
        .filter(|e| matches!(e, Event::ChildSaInstalled(_)))
        .count();
    assert_eq!(
        installs, 1,
        "the duplicate did not install a second CHILD_SA"
    );
    p.a.handle_datagram(0, auth_resp.src, auth_resp.dst, &auth_resp.payload);
    p.a.handle_datagram(0, auth_resp.src, auth_resp.dst, &auth_resp.payload);
    let installs = std::iter::from_fn(|| p.a.poll_event())
        .filter(|e| matches!(e, Event::ChildSaInstalled(_)))
        .count();
    assert_eq!(installs, 1);
    assert_eq!(p.a.stats().unexpected, 2);
    // A tampered copy of the IKE_AUTH request with a fresh message ID
    // fails its integrity check and is dropped.
    let mut forged = auth.payload.clone();
    forged[23] = 2;
    let last = forged.len() - 1;
    forged[last] ^= 1;
    p.b.handle_datagram(0, auth.src, auth.dst, &forged);
    assert!(p.b.poll_transmit().is_none());
    assert_eq!(p.b.stats().decrypt_failed, 1);
}

#[test]
fn a_nat_in_front_of_the_initiator_moves_ike_to_4500_with_the_marker() {
    let (a, mut b) = connections(
        PSK,
        PSK,
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16",
        "aes128gcm16",
    );
    // b sees a only by its public address: it accepts any peer.
    b.remote = addr("0.0.0.0:500");
    let mut p = Pair::new(a, b, test_config());
    p.nat_a = Some(addr("198.51.100.7:500"));
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    up(&p);
    let (ca, cb) = (children(&p.events_a)[0], children(&p.events_b)[0]);
    assert!(ca.udp_encap && cb.udp_encap);
    assert_eq!(ca.local.port(), 4500);
    assert_eq!(cb.remote, addr("198.51.100.7:4500"));
    // IKE_SA_INIT on 500 without marker, IKE_AUTH on 4500 with it (the
    // NAT keepalives a sends afterwards are tests/engine_lifetime.rs's).
    let ports: Vec<(u16, bool)> = p
        .sent
        .iter()
        .filter(|t| t.payload != [0xFF])
        .map(|t| (t.dst.port(), t.payload.starts_with(&[0, 0, 0, 0])))
        .collect();
    assert_eq!(
        ports,
        vec![(500, false), (500, false), (4500, true), (4500, true)]
    );
    let auth = Message::parse(&p.sent[2].payload[4..]).unwrap();
    assert_eq!(auth.header.exchange, ExchangeType::IKE_AUTH);
}

#[test]
fn a_duplicated_invalid_ke_answer_does_not_fail_the_retry() {
    // Found by engine_properties: the duplicate asks for the group the
    // retry already uses; it must be ignored, not treated as a refusal.
    let mut p = pair(
        "aes128gcm16-prfsha256-x25519-ecp256",
        "aes128gcm16-prfsha256-ecp256",
        "aes128gcm16",
    );
    p.a.initiate(0, 0).unwrap();
    p.run(&[Fate::Deliver, Fate::Duplicate], 60_000);
    up(&p);
    assert_eq!(p.a.stats().unexpected, 1);
}

#[test]
fn half_open_sas_are_bounded_and_time_out() {
    let ike = "aes128gcm16-prfsha256-x25519";
    let (a, b) = connections(PSK, PSK, ike, ike, "aes128gcm16", "aes128gcm16");
    let cfg = espgw_ike::engine::EngineConfig {
        max_half_open: 2,
        half_open_timeout_ms: 5_000,
        ..test_config()
    };
    let mut p = Pair::new(a, b, cfg);
    // Three IKE_SA_INIT requests that never go on to IKE_AUTH.
    let inits: Vec<_> = (0..3)
        .map(|_| {
            p.a.initiate(0, 0).unwrap();
            p.a.poll_transmit().unwrap()
        })
        .collect();
    for t in &inits {
        p.b.handle_datagram(0, t.src, t.dst, &t.payload);
    }
    assert_eq!(p.b.ike_sa_count(), 2);
    assert_eq!(p.b.stats().half_open_refused, 1);
    let answered = std::iter::from_fn(|| p.b.poll_transmit()).count();
    assert_eq!(answered, 2);
    // After the half-open timeout they are gone and a new one is taken.
    p.b.handle_timeout(5_000);
    assert_eq!(p.b.ike_sa_count(), 0);
    p.b.handle_datagram(5_000, inits[2].src, inits[2].dst, &inits[2].payload);
    assert_eq!(p.b.ike_sa_count(), 1);
}
