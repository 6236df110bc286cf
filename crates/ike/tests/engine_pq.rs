//! RFC 9370 additional key exchanges (ML-KEM) in IKE_INTERMEDIATE
//! exchanges (RFC 9242), espgw to espgw: establishment, negotiation with
//! peers with and without ADDKE, the key schedule recomputed independently,
//! loss / duplication / reordering, and rekeys.

mod engine_common;

use std::cell::RefCell;
use std::rc::Rc;

use engine_common::*;
use espgw_ike::crypto::mlkem::{self, DecapsulationKey, MlKem};
use espgw_ike::crypto::{CryptoError, KeGroup, RandomSource};
use espgw_ike::engine::{Engine, EngineConfig, Event, FailReason, Transmit};
use espgw_ike::message::{ExchangeType, Message, NotifyType, Payload, NON_ESP_MARKER};
use proptest::prelude::*;

const PSK: &[u8] = b"post-quantum test psk";
const PQ: &str = "aes256gcm16-prfsha384-x25519-ke1_mlkem768";

fn up(events: &[Event]) -> Option<espgw_ike::crypto::IkeSuite> {
    events.iter().find_map(|e| match e {
        Event::IkeSaUp { suite, .. } => Some(*suite),
        _ => None,
    })
}

fn established(ike_a: &str, ike_b: &str, cfg: EngineConfig) -> Pair {
    let (a, b) = connections(PSK, PSK, ike_a, ike_b, "aes256gcm16", "aes256gcm16");
    let mut p = Pair::new(a, b, cfg);
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 600_000);
    p
}

#[test]
fn x25519_plus_mlkem768_establishes_through_ike_intermediate() {
    let p = established(PQ, PQ, test_config());
    assert!(failures(&p.events_a).is_empty(), "{:?}", p.events_a);
    assert!(failures(&p.events_b).is_empty(), "{:?}", p.events_b);
    let (sa, sb) = (up(&p.events_a).unwrap(), up(&p.events_b).unwrap());
    assert_eq!(sa, sb);
    assert_eq!(sa.ke, KeGroup::Curve25519);
    assert_eq!(sa.addke[0], Some(KeGroup::MlKem768));
    let (ca, cb) = (children(&p.events_a), children(&p.events_b));
    assert_eq!((ca.len(), cb.len()), (1, 1));
    assert_same_child(ca[0], cb[0]);
    // IKE_SA_INIT (0), IKE_INTERMEDIATE (1), IKE_AUTH (2), each answered.
    let exchanges: Vec<_> = p.sent.iter().map(header_of).collect();
    let requests: Vec<_> = exchanges
        .iter()
        .filter(|e| !e.1)
        .map(|e| (e.0, e.2))
        .collect();
    assert_eq!(
        requests.first(),
        Some(&(ExchangeType::IKE_SA_INIT, 0)),
        "{exchanges:?}"
    );
    assert!(requests.contains(&(ExchangeType::IKE_INTERMEDIATE, 1)));
    assert!(requests.contains(&(ExchangeType::IKE_AUTH, 2)));
    assert!(exchanges.contains(&(ExchangeType::IKE_INTERMEDIATE, true, 1)));
    assert!(exchanges.contains(&(ExchangeType::IKE_AUTH, true, 2)));
    // Both announced IKE_INTERMEDIATE in IKE_SA_INIT.
    for t in p.sent.iter().take(2) {
        let m = Message::parse(&t.payload).unwrap();
        assert!(m
            .notifies(NotifyType::INTERMEDIATE_EXCHANGE_SUPPORTED)
            .next()
            .is_some());
    }
    // The ML-KEM encapsulation key (1184 bytes) does not fit the default
    // 1232-byte datagram with its headers: the request is fragmented.
    let intermediate_datagrams = exchanges
        .iter()
        .filter(|e| **e == (ExchangeType::IKE_INTERMEDIATE, false, 1))
        .count();
    assert!(intermediate_datagrams >= 2, "{exchanges:?}");
}

#[test]
fn two_additional_exchanges_and_every_ml_kem_size() {
    for (ike, want) in [
        (
            "aes128gcm16-prfsha256-ecp256-ke1_mlkem512-ke2_mlkem1024",
            vec![KeGroup::MlKem512, KeGroup::MlKem1024],
        ),
        (
            "chacha20poly1305-prfsha512-x25519-ke1_mlkem1024-ke3_ecp384",
            vec![KeGroup::MlKem1024, KeGroup::Ecp384],
        ),
        (
            "aes256-sha256-modp2048-ke1_mlkem768",
            vec![KeGroup::MlKem768],
        ),
    ] {
        let p = established(ike, ike, test_config());
        assert!(failures(&p.events_a).is_empty(), "{ike}: {:?}", p.events_a);
        let s = up(&p.events_a).unwrap();
        assert_eq!(s.additional_exchanges().collect::<Vec<_>>(), want, "{ike}");
        assert_eq!(up(&p.events_b), Some(s));
        let (ca, cb) = (children(&p.events_a), children(&p.events_b));
        assert_eq!((ca.len(), cb.len()), (1, 1), "{ike}");
        assert_same_child(ca[0], cb[0]);
        let ids: Vec<u32> = p
            .sent
            .iter()
            .map(header_of)
            .filter(|e| e.0 == ExchangeType::IKE_AUTH && !e.1)
            .map(|e| e.2)
            .collect();
        assert_eq!(ids[0], want.len() as u32 + 1, "{ike}");
    }
}

#[test]
fn negotiation_with_and_without_additional_key_exchanges() {
    let classic = "aes256gcm16-prfsha384-x25519";
    let optional = "aes256gcm16-prfsha384-x25519-ke1_mlkem768-ke1_none";
    // Optional on one side, absent on the other: up without IKE_INTERMEDIATE.
    for (a, b) in [(optional, classic), (classic, optional)] {
        let p = established(a, b, test_config());
        assert!(
            failures(&p.events_a).is_empty(),
            "{a} / {b}: {:?}",
            p.events_a
        );
        assert_eq!(up(&p.events_a).unwrap().addke, [None; 7]);
        assert_eq!(children(&p.events_b).len(), 1);
        assert!(!p
            .sent
            .iter()
            .any(|t| header_of(t).0 == ExchangeType::IKE_INTERMEDIATE));
    }
    // Optional on both: ML-KEM is chosen (first offered).
    let p = established(optional, optional, test_config());
    assert_eq!(up(&p.events_b).unwrap().addke[0], Some(KeGroup::MlKem768));
    // Required on one side, absent or different on the other:
    // NO_PROPOSAL_CHOSEN, never an SA without it.
    for (a, b) in [
        (PQ, classic),
        (classic, PQ),
        (PQ, "aes256gcm16-prfsha384-x25519-ke1_mlkem1024"),
        (PQ, "aes256gcm16-prfsha384-x25519-ke2_mlkem768"),
    ] {
        let p = established(a, b, test_config());
        assert!(
            up(&p.events_a).is_none() && up(&p.events_b).is_none(),
            "{a} / {b}"
        );
        assert!(
            p.events_a.iter().any(|e| matches!(
                e,
                Event::IkeSaFailed {
                    reason: FailReason::PeerNotify(NotifyType::NO_PROPOSAL_CHOSEN)
                        | FailReason::NoProposalChosen,
                    ..
                }
            )),
            "{a} / {b}: {:?}",
            p.events_a
        );
    }
}

#[test]
fn behind_a_nat_ike_intermediate_moves_to_port_4500() {
    // RFC 9242 3: after NAT detection the peers use port 4500 from the
    // first IKE_INTERMEDIATE exchange on.
    let (a, mut b) = connections(PSK, PSK, PQ, PQ, "aes256gcm16", "aes256gcm16");
    b.remote = addr("0.0.0.0:500");
    let mut p = Pair::new(a, b, test_config());
    p.nat_a = Some(addr("198.51.100.7:500"));
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    assert!(failures(&p.events_a).is_empty(), "{:?}", p.events_a);
    let (ca, cb) = (children(&p.events_a), children(&p.events_b));
    assert_eq!((ca.len(), cb.len()), (1, 1));
    assert!(ca[0].udp_encap && cb[0].udp_encap);
    assert_same_child(ca[0], cb[0]);
    // The NAT keepalives a sends afterwards are tests/engine_lifetime.rs's.
    for t in p.sent.iter().filter(|t| t.payload != [0xFF]) {
        let (exchange, _, _) = header_of(t);
        let on_4500 = t.dst.port() == 4500 && t.payload.starts_with(&NON_ESP_MARKER);
        assert_eq!(
            on_4500,
            exchange != ExchangeType::IKE_SA_INIT,
            "{exchange:?}"
        );
    }
}

/// Certificates (RFC 7427 signatures) with ML-KEM: the signed octets carry
/// the IntAuth values too (RFC 9242 3.3.2 is for every AUTH method).
#[test]
fn certificate_authentication_with_ml_kem() {
    let fixture = |name: &str| {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/certs")
            .join(name);
        std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let (a, b) = connections(b"", b"", PQ, PQ, "aes256gcm16", "aes256gcm16");
    let ca = fixture("ca.crt");
    let with_cert = |c: espgw_ike::engine::Connection, name: &str, peer: &str| {
        let mut c = c
            .with_pem(
                &fixture(&format!("{name}.crt")),
                &fixture(&format!("{name}.key")),
                &[&ca[..]],
            )
            .unwrap();
        c.local_id = espgw_ike::message::Identification::fqdn(&format!("{name}.example"));
        c.remote_id = Some(espgw_ike::message::Identification::fqdn(&format!(
            "{peer}.example"
        )));
        c
    };
    let (a, b) = (with_cert(a, "a", "rsa"), with_cert(b, "rsa", "a"));
    let cfg = EngineConfig {
        // The fixtures are valid in 2030.
        unix_time_at_zero_ms: Some(1_893_456_000_000),
        ..test_config()
    };
    let mut p = Pair::new(a, b, cfg);
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    assert!(failures(&p.events_a).is_empty(), "{:?}", p.events_a);
    assert!(failures(&p.events_b).is_empty(), "{:?}", p.events_b);
    assert_eq!(up(&p.events_b).unwrap().addke[0], Some(KeGroup::MlKem768));
    assert_same_child(children(&p.events_a)[0], children(&p.events_b)[0]);
}

#[test]
fn wrong_psk_with_additional_exchanges_fails_authentication() {
    let (a, b) = connections(PSK, b"other", PQ, PQ, "aes256gcm16", "aes256gcm16");
    let mut p = Pair::new(a, b, test_config());
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 600_000);
    assert!(p
        .events_b
        .iter()
        .any(|e| matches!(e, Event::AuthFailed { .. })));
    assert!(p
        .events_a
        .iter()
        .any(|e| matches!(e, Event::AuthFailed { .. })));
    assert!(children(&p.events_a).is_empty());
}

/// The new SA of the one IKE SA rekey among `events`.
fn rekeyed(events: &[Event]) -> u64 {
    let new: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::IkeSaRekeyed { new, .. } => Some(*new),
            _ => None,
        })
        .collect();
    assert_eq!(new.len(), 1, "{events:?}");
    new[0]
}

#[test]
fn ike_sa_rekeys_run_the_additional_exchanges_in_ike_followup_ke() {
    // RFC 9370 2.2.4: an IKE SA that ran ML-KEM rekeys with it again, the
    // additional exchange in an IKE_FOLLOWUP_KE exchange after the
    // CREATE_CHILD_SA one. Required on both sides, either side starting;
    // optional on one or both (the SA ran ML-KEM, so the rekey offers it
    // and it is chosen). Twice in a row (the rekeyed SA rekeys), then a
    // CHILD_SA rekey on the new SA.
    let optional = "aes256gcm16-prfsha384-x25519-ke1_mlkem768-ke1_none";
    for (ike_a, ike_b, by_a) in [
        (PQ, PQ, true),
        (PQ, PQ, false),
        (optional, PQ, true),
        (optional, optional, false),
    ] {
        let what = format!(
            "{ike_a} / {ike_b}, rekey by {}",
            if by_a { "a" } else { "b" }
        );
        let mut p = established(ike_a, ike_b, test_config());
        assert_eq!(up(&p.events_a).unwrap().addke[0], Some(KeGroup::MlKem768));
        let (mut sa_a, mut sa_b) = (first_up(&p.events_a), first_up(&p.events_b));
        let child = children(&p.events_a)[0].inbound_spi;
        for round in 0..2 {
            p.events_a.clear();
            p.events_b.clear();
            p.sent.clear();
            if by_a {
                p.a.rekey_ike_sa(p.now, sa_a).unwrap();
            } else {
                p.b.rekey_ike_sa(p.now, sa_b).unwrap();
            }
            p.run(&[], 600_000);
            assert!(
                failures(&p.events_a).is_empty() && failures(&p.events_b).is_empty(),
                "{what}, round {round}: {:?} {:?}",
                p.events_a,
                p.events_b
            );
            let (new_a, new_b) = (rekeyed(&p.events_a), rekeyed(&p.events_b));
            // One CREATE_CHILD_SA and one IKE_FOLLOWUP_KE exchange (its
            // request, 1184 bytes of ML-KEM key, goes in fragments: one
            // message ID).
            let mut requests: Vec<(ExchangeType, u32)> = p
                .sent
                .iter()
                .map(header_of)
                .filter(|h| !h.1 && h.0 != ExchangeType::INFORMATIONAL)
                .map(|h| (h.0, h.2))
                .collect();
            requests.dedup();
            let requests: Vec<ExchangeType> = requests.into_iter().map(|r| r.0).collect();
            assert_eq!(
                requests,
                [ExchangeType::CREATE_CHILD_SA, ExchangeType::IKE_FOLLOWUP_KE],
                "{what}, round {round}"
            );
            // Both derived the same keys for the same new SA, which has
            // ML-KEM-768 in its suite.
            let secrets = |e: &Engine<SeededRng>, id| {
                e.ike_sa_secrets()
                    .into_iter()
                    .find(|s| s.ike_sa == id)
                    .expect("the new SA")
            };
            let (ka, kb) = (secrets(&p.a, new_a), secrets(&p.b, new_b));
            assert_eq!((ka.spi_i, ka.spi_r), (kb.spi_i, kb.spi_r), "{what}");
            assert_eq!(ka.sk_ei.expose(), kb.sk_ei.expose(), "{what}");
            assert_eq!(ka.sk_er.expose(), kb.sk_er.expose(), "{what}");
            assert_eq!(ka.suite.addke[0], Some(KeGroup::MlKem768), "{what}");
            assert_eq!(kb.suite.addke[0], Some(KeGroup::MlKem768), "{what}");
            // The new SA carries requests; the old ones are gone.
            p.events_a.clear();
            p.a.check_liveness(p.now, new_a).unwrap();
            p.run(&[], 600_000);
            assert!(
                p.events_a
                    .iter()
                    .any(|e| matches!(e, Event::PeerAlive { .. })),
                "{what}: {:?}",
                p.events_a
            );
            assert_eq!((p.a.ike_sa_count(), p.b.ike_sa_count()), (1, 1), "{what}");
            (sa_a, sa_b) = (new_a, new_b);
        }
        // The CHILD_SA moved to the new SA: it rekeys there.
        p.events_a.clear();
        p.events_b.clear();
        p.a.rekey_child_sa(p.now, sa_a, child).unwrap();
        p.run(&[], 600_000);
        assert_eq!(children(&p.events_a).len(), 1, "{what}: {:?}", p.events_a);
        assert_same_child(children(&p.events_a)[0], children(&p.events_b)[0]);
    }
}

#[test]
fn a_child_sa_rekey_during_the_peers_followups_waits_for_the_new_ike_sa() {
    // a rekeys the IKE SA with ML-KEM; b has answered the CREATE_CHILD_SA
    // (link given) when its own CHILD_SA rekey comes due. It waits: a's
    // IKE_FOLLOWUP_KE moves the CHILD_SA to the new IKE SA, and the
    // CHILD_SA rekey runs there. Before (found by review), b sent it on
    // the old SA, which then had no CHILD_SA: the new CHILD_SA stayed on
    // the old IKE SA and the one it replaced was never deleted.
    let mut p = established(PQ, PQ, test_config());
    let (sa_a, sa_b) = (first_up(&p.events_a), first_up(&p.events_b));
    let (child_a, child_b) = (
        children(&p.events_a)[0].inbound_spi,
        children(&p.events_b)[0].inbound_spi,
    );
    p.events_a.clear();
    p.events_b.clear();
    p.a.rekey_ike_sa(p.now, sa_a).unwrap();
    p.collect();
    let request = p.queue.pop_front().expect("a's CREATE_CHILD_SA");
    assert_eq!(header_of(&request).0, ExchangeType::CREATE_CHILD_SA);
    p.deliver(request);
    p.b.rekey_child_sa(p.now, sa_b, child_b).unwrap();
    p.run(&[], 600_000);
    assert!(failures(&p.events_a).is_empty() && failures(&p.events_b).is_empty());
    let (new_a, new_b) = (rekeyed(&p.events_a), rekeyed(&p.events_b));
    let (ca, cb) = (children(&p.events_a), children(&p.events_b));
    assert_eq!(
        (ca.len(), cb.len()),
        (1, 1),
        "{:?} {:?}",
        p.events_a,
        p.events_b
    );
    assert_same_child(ca[0], cb[0]);
    // The new CHILD_SA replaces the old one, on the new IKE SA, and the
    // old one is gone on both sides.
    assert_eq!((ca[0].rekeys, cb[0].rekeys), (Some(child_a), Some(child_b)));
    assert_eq!((ca[0].ike_sa, cb[0].ike_sa), (new_a, new_b));
    for (ev, old) in [(&p.events_a, child_a), (&p.events_b, child_b)] {
        assert!(ev.iter().any(
            |e| matches!(e, Event::ChildSaDeleted { inbound_spi, .. } if *inbound_spi == old)
        ));
    }
}

#[test]
fn simultaneous_ike_sa_rekeys_with_followups_settle_on_one() {
    // Both sides rekey the ML-KEM IKE SA at once: each refuses the other's
    // (TEMPORARY_FAILURE while its own is outstanding) and retries after a
    // random delay, so one goes first and the other answers it. Before
    // (found by review) the delay was fixed and they collided at every
    // retry.
    let mut p = established(PQ, PQ, test_config());
    let (sa_a, sa_b) = (first_up(&p.events_a), first_up(&p.events_b));
    p.events_a.clear();
    p.events_b.clear();
    p.a.rekey_ike_sa(p.now, sa_a).unwrap();
    p.b.rekey_ike_sa(p.now, sa_b).unwrap();
    p.run(&[], 120_000);
    let count = |ev: &[Event]| {
        ev.iter()
            .filter(|e| matches!(e, Event::IkeSaRekeyed { .. }))
            .count()
    };
    assert!(
        count(&p.events_a) >= 1 && count(&p.events_b) >= 1,
        "{:?} {:?}",
        p.events_a,
        p.events_b
    );
    assert_eq!((p.a.ike_sa_count(), p.b.ike_sa_count()), (1, 1));
    let (ka, kb) = (p.a.ike_sa_secrets(), p.b.ike_sa_secrets());
    assert_eq!((ka.len(), kb.len()), (1, 1));
    assert_eq!(ka[0].sk_ei.expose(), kb[0].sk_ei.expose());
    assert_eq!(ka[0].suite.addke[0], Some(KeGroup::MlKem768));
    let (ca, cb) = (children(&p.events_a), children(&p.events_b));
    assert!(
        ca.is_empty() && cb.is_empty(),
        "the CHILD_SA stays as it was"
    );
}

/// A random source that records every draw, so the test can find the
/// private values (by matching public values on the wire) and recompute
/// the key schedule on its own.
#[derive(Clone)]
struct Recording(Rc<RefCell<(SeededRng, Vec<Vec<u8>>)>>);

impl RandomSource for Recording {
    fn fill(&mut self, dest: &mut [u8]) -> Result<(), CryptoError> {
        let mut inner = self.0.borrow_mut();
        inner.0.fill(dest)?;
        inner.1.push(dest.to_vec());
        Ok(())
    }
}

fn hmac(alg: ring::hmac::Algorithm, key: &[u8], data: &[&[u8]]) -> Vec<u8> {
    let key = ring::hmac::Key::new(alg, key);
    let mut ctx = ring::hmac::Context::with_key(&key);
    for d in data {
        ctx.update(d);
    }
    ctx.sign().as_ref().to_vec()
}

/// prf+ of RFC 7296 2.13, written again here.
fn prf_plus(alg: ring::hmac::Algorithm, key: &[u8], seed: &[u8], len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut t = Vec::new();
    let mut i = 1u8;
    while out.len() < len {
        t = hmac(alg, key, &[&t, seed, &[i]]);
        out.extend_from_slice(&t);
        i += 1;
    }
    out.truncate(len);
    out
}

/// The key schedule recomputed outside the engine from the wire and the
/// recorded randomness: the first CHILD_SA's initiator-to-responder key
/// equals prf+(SK_d(1), Ni | Nr) with SK_d(1) from SKEYSEED(1) = prf(SK_d(0),
/// K_mlkem | Ni | Nr); the schedule without the ML-KEM step does not give it.
#[test]
fn the_ml_kem_secret_enters_the_key_schedule() {
    let ike = "aes256gcm16-prfsha384-x25519-ke1_mlkem768";
    let (a, b) = connections(PSK, PSK, ike, ike, "aes256gcm16", "aes256gcm16");
    let rec_a = Recording(Rc::new(RefCell::new((SeededRng(11), Vec::new()))));
    let rec_b = Recording(Rc::new(RefCell::new((SeededRng(12), Vec::new()))));
    // One SK payload per message (no IKE fragments), so the test can
    // open each with its own AES-GCM.
    let cfg = EngineConfig {
        fragmentation: false,
        ..test_config()
    };
    let mut ea = Engine::new(cfg.clone(), rec_a.clone());
    let mut eb = Engine::new(cfg, rec_b.clone());
    ea.add_connection(a);
    eb.add_connection(b);
    ea.initiate(0, 0).unwrap();
    let mut sent: Vec<Transmit> = Vec::new();
    let mut events_a = Vec::new();
    for _ in 0..100 {
        let mut any = false;
        while let Some(t) = ea.poll_transmit() {
            eb.handle_datagram(1, t.src, t.dst, &t.payload);
            sent.push(t);
            any = true;
        }
        while let Some(t) = eb.poll_transmit() {
            ea.handle_datagram(1, t.src, t.dst, &t.payload);
            sent.push(t);
            any = true;
        }
        if !any {
            break;
        }
    }
    while let Some(e) = ea.poll_event() {
        events_a.push(e);
    }
    let child = children(&events_a)[0].clone();
    // IKE_SA_INIT request and response: SPIs, nonces, KE values.
    let init = |i: usize| Message::parse(&sent[i].payload).unwrap();
    let (req, resp) = (init(0), init(1));
    let ke = |m: &Message| {
        m.payloads
            .iter()
            .find_map(|p| match p {
                Payload::Ke(k) => Some(k.data.clone()),
                _ => None,
            })
            .unwrap()
    };
    let nonce = |m: &Message| {
        m.payloads
            .iter()
            .find_map(|p| match p {
                Payload::Nonce(n) => Some(n.0.clone()),
                _ => None,
            })
            .unwrap()
    };
    let (ni, nr) = (nonce(&req), nonce(&resp));
    let (spi_i, spi_r) = (
        resp.header.spi_i.to_be_bytes(),
        resp.header.spi_r.to_be_bytes(),
    );
    // a's X25519 private value: the recorded 32-byte draw whose public
    // value is the KE payload it sent.
    let draws_a = rec_a.0.borrow().1.clone();
    let draws_b = rec_b.0.borrow().1.clone();
    let x25519_public = |private: &[u8]| {
        let k = aws_lc_rs::agreement::PrivateKey::from_private_key(
            &aws_lc_rs::agreement::X25519,
            private,
        )
        .ok()?;
        Some(k.compute_public_key().ok()?.as_ref().to_vec())
    };
    let priv_i = draws_a
        .iter()
        .find(|d| d.len() == 32 && x25519_public(d).as_deref() == Some(&ke(&req)[..]))
        .expect("a's X25519 private value");
    let g_ir = {
        let k = aws_lc_rs::agreement::PrivateKey::from_private_key(
            &aws_lc_rs::agreement::X25519,
            priv_i,
        )
        .unwrap();
        let peer =
            aws_lc_rs::agreement::UnparsedPublicKey::new(&aws_lc_rs::agreement::X25519, ke(&resp));
        aws_lc_rs::agreement::agree(&k, peer, (), |s| Ok(s.to_vec())).unwrap()
    };
    let alg = ring::hmac::HMAC_SHA384;
    let seed = [&ni[..], &nr, &spi_i, &spi_r].concat();
    let skeyseed0 = hmac(alg, &[&ni[..], &nr].concat(), &[&g_ir]);
    let sk_d0 = prf_plus(alg, &skeyseed0, &seed, 48);
    // ML-KEM: a's 64-byte draw is its key seed; b's encapsulation
    // randomness m is one of its 32-byte draws (not its nonce).
    let dk_seed: [u8; 64] = draws_a
        .iter()
        .find(|d| d.len() == 64)
        .unwrap()
        .as_slice()
        .try_into()
        .unwrap();
    let dk = DecapsulationKey::from_seed(MlKem::MlKem768, &dk_seed);
    let ek = dk.encapsulation_key();
    let key_of = |sk_d: &[u8]| prf_plus(alg, sk_d, &[&ni[..], &nr].concat(), 36);
    let outbound = child.outbound.key.expose().to_vec();
    let matching: Vec<Vec<u8>> = draws_b
        .iter()
        .filter(|d| d.len() == 32 && d[..] != nr[..])
        .filter_map(|m| {
            let (_, k) =
                mlkem::encapsulate_with(MlKem::MlKem768, &ek, m[..].try_into().unwrap()).unwrap();
            let skeyseed1 = hmac(alg, &sk_d0, &[k.expose(), &ni, &nr]);
            let sk_d1 = prf_plus(alg, &skeyseed1, &seed, 48);
            (key_of(&sk_d1) == outbound).then(|| k.expose().to_vec())
        })
        .collect();
    assert_eq!(
        matching.len(),
        1,
        "exactly one encapsulation explains the keys"
    );
    // Without the ML-KEM step (SK_d(0) directly), the keys differ.
    assert_ne!(key_of(&sk_d0), outbound);

    // RFC 9242 3.3.2, recomputed: the initiator's AUTH covers IntAuth_i1
    // (its IKE_INTERMEDIATE request, SK_pi(0)), IntAuth_r1 (the response,
    // SK_pr(0)) and IKE_AUTH's message ID 2.
    let keys = |skeyseed: &[u8]| {
        // SK_d, SK_ei, SK_er (32-byte key + 4-byte salt), SK_pi, SK_pr.
        let km = prf_plus(alg, skeyseed, &seed, 48 + 36 + 36 + 48 + 48);
        (
            km[48..84].to_vec(),
            km[84..120].to_vec(),
            km[120..168].to_vec(),
            km[168..216].to_vec(),
        )
    };
    let (sk_ei0, sk_er0, sk_pi0, sk_pr0) = keys(&skeyseed0);
    let skeyseed1 = hmac(alg, &sk_d0, &[&matching[0], &ni, &nr]);
    let (sk_ei1, _, sk_pi1, _) = keys(&skeyseed1);
    let open = |msg: &[u8], sk_e: &[u8]| -> (u8, Vec<u8>) {
        assert_eq!(msg[16], 46, "one SK payload after the header");
        let key = ring::aead::LessSafeKey::new(
            ring::aead::UnboundKey::new(&ring::aead::AES_256_GCM, &sk_e[..32]).unwrap(),
        );
        let mut nonce = [0u8; 12];
        nonce[..4].copy_from_slice(&sk_e[32..]);
        nonce[4..].copy_from_slice(&msg[32..40]);
        let mut body = msg[40..].to_vec();
        let plain = key
            .open_in_place(
                ring::aead::Nonce::assume_unique_for_key(nonce),
                ring::aead::Aad::from(&msg[..32]),
                &mut body,
            )
            .unwrap();
        let pad = usize::from(*plain.last().unwrap());
        (msg[28], plain[..plain.len() - 1 - pad].to_vec())
    };
    // A | P with the lengths adjusted to leave out IV, padding and ICV.
    let a_p = |msg: &[u8], first: u8, inner: &[u8]| {
        let mut a = msg[..32].to_vec();
        a[24..28].copy_from_slice(&((32 + inner.len()) as u32).to_be_bytes());
        a[28] = first;
        a[30..32].copy_from_slice(&((4 + inner.len()) as u16).to_be_bytes());
        [a, inner.to_vec()].concat()
    };
    let find = |exchange: ExchangeType, response: bool, id: u32| {
        sent.iter()
            .find(|t| header_of(t) == (exchange, response, id))
            .unwrap()
            .payload
            .clone()
    };
    let req = find(ExchangeType::IKE_INTERMEDIATE, false, 1);
    let resp = find(ExchangeType::IKE_INTERMEDIATE, true, 1);
    let (f, p_req) = open(&req, &sk_ei0);
    let int_auth_i1 = hmac(alg, &sk_pi0, &[&a_p(&req, f, &p_req)]);
    let (f, p_resp) = open(&resp, &sk_er0);
    let int_auth_r1 = hmac(alg, &sk_pr0, &[&a_p(&resp, f, &p_resp)]);
    // The IKE_AUTH request: IDi body and AUTH data from its inner chain.
    let (mut next, auth_plain) = open(&find(ExchangeType::IKE_AUTH, false, 2), &sk_ei1);
    let (mut idi, mut auth) = (None, None);
    let mut rest = &auth_plain[..];
    while next != 0 {
        let len = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
        match next {
            35 => idi = Some(rest[4..len].to_vec()),
            39 => auth = Some(rest[8..len].to_vec()),
            _ => {}
        }
        next = rest[0];
        rest = &rest[len..];
    }
    let maced = hmac(alg, &sk_pi1, &[&idi.unwrap()]);
    let octets = [
        &sent[0].payload[..],
        &nr,
        &maced,
        &int_auth_i1,
        &int_auth_r1,
        &2u32.to_be_bytes(),
    ]
    .concat();
    let pad = hmac(alg, PSK, &[b"Key Pad for IKEv2"]);
    assert_eq!(hmac(alg, &pad, &[&octets]), auth.unwrap());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any finite pattern of loss, duplication and reordering during
    /// IKE_SA_INIT, the IKE_INTERMEDIATE exchanges and IKE_AUTH (with the
    /// default fragment size, where the ML-KEM key is fragmented, and with
    /// 160-byte fragments) ends with one IKE SA and the same CHILD_SA.
    #[test]
    fn lossy_network_still_converges_with_ml_kem(
        fates in proptest::collection::vec(fate(), 0..40),
        small_fragments in any::<bool>(),
        two in any::<bool>(),
    ) {
        let ike = if two { "aes128gcm16-prfsha256-x25519-ke1_mlkem768-ke2_mlkem512" } else { PQ };
        let (a, b) = connections(PSK, PSK, ike, ike, "aes256gcm16", "aes256gcm16");
        let mut cfg = EngineConfig { max_retransmits: 64, ..test_config() };
        if small_fragments {
            cfg.fragment_size = 160;
        }
        let mut p = Pair::new(a, b, cfg);
        p.a.initiate(0, 0).unwrap();
        p.run(&fates, 600_000);
        prop_assert!(failures(&p.events_a).is_empty(), "{:?}", p.events_a);
        prop_assert!(failures(&p.events_b).is_empty(), "{:?}", p.events_b);
        let ups = |ev: &[Event]| ev.iter().filter(|e| matches!(e, Event::IkeSaUp { .. })).count();
        prop_assert_eq!((ups(&p.events_a), ups(&p.events_b)), (1, 1));
        let (ca, cb) = (children(&p.events_a), children(&p.events_b));
        prop_assert_eq!((ca.len(), cb.len()), (1, 1));
        assert_same_child(ca[0], cb[0]);
    }

    /// An IKE SA rekey with IKE_FOLLOWUP_KE exchanges (one or two
    /// additional exchanges, the ML-KEM key in fragments or not, either
    /// side starting) through any finite pattern of loss, duplication and
    /// reordering: the rekey completes with the same keys on both sides,
    /// or it fails without harm (the old SA stays on both, or it timed out
    /// as any unanswered request does); never two live SAs on one side or
    /// a half-made one, and the CHILD_SA stays the same.
    #[test]
    fn ike_sa_rekey_with_followups_under_a_lossy_network(
        fates in proptest::collection::vec(fate(), 0..30),
        small_fragments in any::<bool>(),
        two in any::<bool>(),
        by_a in any::<bool>(),
    ) {
        let ike = if two { "aes128gcm16-prfsha256-x25519-ke1_mlkem768-ke2_mlkem512" } else { PQ };
        let (a, b) = connections(PSK, PSK, ike, ike, "aes256gcm16", "aes256gcm16");
        let mut cfg = EngineConfig { max_retransmits: 64, ..test_config() };
        if small_fragments {
            cfg.fragment_size = 160;
        }
        let mut p = Pair::new(a, b, cfg);
        p.a.initiate(0, 0).unwrap();
        p.run(&[], 600_000);
        let (sa_a, sa_b) = (first_up(&p.events_a), first_up(&p.events_b));
        let child = children(&p.events_a)[0].inbound_spi;
        p.events_a.clear();
        p.events_b.clear();
        if by_a {
            p.a.rekey_ike_sa(p.now, sa_a).unwrap();
        } else {
            p.b.rekey_ike_sa(p.now, sa_b).unwrap();
        }
        p.run(&fates, 600_000);
        let rekeyed = |ev: &[Event]| -> Vec<u64> {
            ev.iter().filter_map(|e| match e {
                Event::IkeSaRekeyed { new, .. } => Some(*new),
                _ => None,
            }).collect()
        };
        let dead = |ev: &[Event]| ev.iter().any(|e| matches!(e, Event::IkeSaFailed { .. }));
        let (ra, rb) = (rekeyed(&p.events_a), rekeyed(&p.events_b));
        prop_assert!(ra.len() <= 1 && rb.len() <= 1, "{:?} {:?}", p.events_a, p.events_b);
        let auth_failed = p.events_a.iter().chain(&p.events_b).any(|e| matches!(e, Event::AuthFailed { .. }));
        prop_assert!(!auth_failed);
        if dead(&p.events_a) || dead(&p.events_b) {
            // A request that went unanswered through all its
            // retransmissions ends its SA, as on any exchange.
            return Ok(());
        }
        if ra.len() == 1 && rb.len() == 1 {
            let secrets = |e: &Engine<SeededRng>, id| e.ike_sa_secrets().into_iter().find(|s| s.ike_sa == id);
            let (ka, kb) = (secrets(&p.a, ra[0]), secrets(&p.b, rb[0]));
            prop_assert!(ka.is_some() && kb.is_some());
            let (ka, kb) = (ka.unwrap(), kb.unwrap());
            prop_assert_eq!((ka.spi_i, ka.spi_r), (kb.spi_i, kb.spi_r));
            prop_assert_eq!(ka.sk_ei.expose(), kb.sk_ei.expose());
            prop_assert_eq!(ka.sk_er.expose(), kb.sk_er.expose());
            prop_assert_eq!((p.a.ike_sa_count(), p.b.ike_sa_count()), (1, 1));
        } else {
            // Not rekeyed: on neither side, both keep the old SA.
            prop_assert!(ra.is_empty() && rb.is_empty(), "{:?} {:?}", p.events_a, p.events_b);
            prop_assert!(p.a.ike_sa_ids().contains(&sa_a) && p.b.ike_sa_ids().contains(&sa_b));
        }
        // The CHILD_SA was neither lost nor doubled.
        let child_changed = p.events_a.iter().chain(&p.events_b)
            .any(|e| matches!(e, Event::ChildSaDeleted { .. } | Event::ChildSaInstalled(_)));
        prop_assert!(!child_changed, "{:?} {:?}", p.events_a, p.events_b);
        let _ = child;
    }
}
