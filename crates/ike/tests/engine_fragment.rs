//! IKE fragmentation (RFC 7383) between two engines: negotiated in
//! IKE_SA_INIT, IKE_AUTH (and later exchanges) sent in SKF fragments of
//! at most `fragment_size` bytes, reassembled under loss, duplication and
//! reordering.

mod engine_common;

use engine_common::*;
use espgw_ike::engine::{EngineConfig, Event};
use espgw_ike::message::{ExchangeType, Message, Payload, PayloadType};

const PSK: &[u8] = b"espgw test psk 0123456789";
const IKE: &str = "aes128gcm16-prfsha256-x25519";

fn pair(cfg: EngineConfig) -> Pair {
    let (a, b) = connections(PSK, PSK, IKE, IKE, "aes128gcm16", "aes128gcm16");
    Pair::new(a, b, cfg)
}

fn small(size: usize) -> EngineConfig {
    EngineConfig {
        fragment_size: size,
        ..test_config()
    }
}

fn up(p: &Pair) {
    let ups = |ev: &[Event]| {
        ev.iter()
            .filter(|e| matches!(e, Event::IkeSaUp { .. }))
            .count()
    };
    assert_eq!((ups(&p.events_a), ups(&p.events_b)), (1, 1));
    let child = |ev: &[Event]| {
        ev.iter()
            .find_map(|e| match e {
                Event::ChildSaInstalled(c) => Some((c.inbound_spi, c.outbound_spi)),
                _ => None,
            })
            .unwrap()
    };
    let (a, b) = (child(&p.events_a), child(&p.events_b));
    assert_eq!((a.0, a.1), (b.1, b.0));
}

/// (fragment number, total) of each SKF datagram of `exchange` sent to
/// `dst_ip`'s side, in order.
fn fragments(p: &Pair, exchange: ExchangeType, to_b: bool) -> Vec<(u16, u16)> {
    p.sent
        .iter()
        .filter(|t| (t.dst.ip() == addr(B).ip()) == to_b)
        .filter_map(|t| {
            let ike = if t.dst.port() == 4500 {
                &t.payload[4..]
            } else {
                &t.payload[..]
            };
            let m = Message::parse(ike).ok()?;
            if m.header.exchange != exchange {
                return None;
            }
            m.payloads.iter().find_map(|pl| match pl {
                Payload::Fragment(f) => Some((f.number, f.total)),
                _ => None,
            })
        })
        .collect()
}

#[test]
fn both_sides_fragment_ike_auth_at_a_tiny_fragment_size() {
    let size = 160;
    let mut p = pair(small(size));
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    up(&p);
    let to_b = fragments(&p, ExchangeType::IKE_AUTH, true);
    let to_a = fragments(&p, ExchangeType::IKE_AUTH, false);
    assert!(to_b.len() >= 2 && to_a.len() >= 2, "{to_b:?} {to_a:?}");
    assert!(to_b.iter().all(|&(_, t)| usize::from(t) == to_b.len()));
    // Every datagram fits the fragment size.
    assert!(p.sent.iter().skip(2).all(|t| t.payload.len() <= size));
    assert_eq!(p.a.stats().fragments_dropped, 0);
    assert_eq!(p.b.stats().fragments_dropped, 0);
    // Later exchanges are fragmented too.
    let sa = p
        .events_a
        .iter()
        .find_map(|e| match e {
            Event::IkeSaUp { ike_sa, .. } => Some(*ike_sa),
            _ => None,
        })
        .unwrap();
    p.a.check_liveness(p.now, sa).unwrap();
    p.run(&[], 60_000);
    assert!(p
        .events_a
        .iter()
        .any(|e| matches!(e, Event::PeerAlive { .. })));
}

#[test]
fn the_default_size_does_not_fragment_a_psk_ike_auth() {
    let mut p = pair(test_config());
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    up(&p);
    assert!(fragments(&p, ExchangeType::IKE_AUTH, true).is_empty());
}

#[test]
fn no_fragments_when_one_side_does_not_support_them() {
    // a offers fragmentation, b does not.
    let mut p = pair(small(160));
    let (_, b) = connections(PSK, PSK, IKE, IKE, "aes128gcm16", "aes128gcm16");
    let off = EngineConfig {
        fragmentation: false,
        ..small(160)
    };
    p.b = espgw_ike::engine::Engine::new(off, SeededRng(2));
    p.b.add_connection(b);
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    up(&p);
    assert!(fragments(&p, ExchangeType::IKE_AUTH, true).is_empty());
    assert!(fragments(&p, ExchangeType::IKE_AUTH, false).is_empty());
}

#[test]
fn lost_duplicated_and_reordered_fragments_still_reassemble() {
    // Datagrams 0 and 1 are IKE_SA_INIT; then IKE_AUTH fragments.
    let mut p = pair(small(160));
    p.a.initiate(0, 0).unwrap();
    p.run(
        &[
            Fate::Deliver,
            Fate::Deliver,
            Fate::Defer,
            Fate::Duplicate,
            Fate::Drop,
            Fate::Defer,
            Fate::Duplicate,
        ],
        60_000,
    );
    up(&p);
    // A duplicate is dropped, counted.
    assert!(p.b.stats().fragments_dropped >= 1);
}

#[test]
fn a_forged_fragment_is_not_kept() {
    let mut p = pair(small(160));
    p.a.initiate(0, 0).unwrap();
    // IKE_SA_INIT both ways.
    p.run(&[Fate::Deliver, Fate::Deliver, Fate::Drop, Fate::Drop], 0);
    let frag = p
        .sent
        .iter()
        .rev()
        .find(|t| t.dst.ip() == addr(B).ip())
        .unwrap()
        .clone();
    let mut forged = frag.payload.clone();
    let last = forged.len() - 1;
    forged[last] ^= 1;
    let before = p.b.stats().decrypt_failed;
    p.b.handle_datagram(p.now, frag.src, frag.dst, &forged);
    assert_eq!(p.b.stats().decrypt_failed, before + 1);
    // The genuine fragments (retransmitted) still complete the exchange.
    p.run(&[], 60_000);
    up(&p);
}

#[test]
fn skf_payload_type_is_what_goes_out() {
    let mut p = pair(small(160));
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    let t = p
        .sent
        .iter()
        .find(|t| {
            let ike = if t.dst.port() == 4500 {
                &t.payload[4..]
            } else {
                &t.payload[..]
            };
            Message::parse(ike).is_ok_and(|m| m.header.exchange == ExchangeType::IKE_AUTH)
        })
        .unwrap();
    let ike = if t.dst.port() == 4500 {
        &t.payload[4..]
    } else {
        &t.payload[..]
    };
    let m = Message::parse(ike).unwrap();
    assert_eq!(m.payloads[0].payload_type(), PayloadType::SKF);
}

// ---- charon's fragmented IKE_AUTH (the RSA certificate run) ----

const RUN: &str = "rsa-chacha20poly1305-prfsha512-x25519";

fn run_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/strongswan")
        .join(RUN)
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// The first `"key": "value"` after `section` in run.json.
fn field(json: &str, section: &str, key: &str) -> String {
    let from = json.find(section).unwrap_or_else(|| panic!("no {section}"));
    let pat = format!("\"{key}\": \"");
    let at = from + json[from..].find(&pat).unwrap() + pat.len();
    let end = at + json[at..].find('"').unwrap();
    json[at..end].to_string()
}

fn recorded(index: usize) -> Vec<u8> {
    let messages = run_dir().join("messages");
    let prefix = format!("{index:02}-");
    let name = std::fs::read_dir(&messages)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.starts_with(&prefix))
        .unwrap();
    unhex(std::fs::read_to_string(messages.join(name)).unwrap().trim())
}

#[test]
fn charons_fragmented_ike_auth_reassembles_to_the_logged_plaintext() {
    let json = std::fs::read_to_string(run_dir().join("run.json")).unwrap();
    let conn = espgw_ike::engine::Connection::new(
        "a",
        addr(A),
        addr(B),
        espgw_ike::message::Identification::fqdn("a.example"),
        None,
        b"unused",
        "chacha20poly1305-prfsha512-x25519",
        "aes128gcm16",
        &["10.1.0.0/24"],
        &["10.2.0.0/24"],
    )
    .unwrap();
    let shared = unhex(&field(&json, "\"ike_sas\"", "shared_secret"));
    let (init_req, init_resp) = (recorded(1), recorded(2));
    // Messages 3-4: a's request in two fragments, 5-6: b's response.
    for (first, from_initiator) in [(3, true), (5, false)] {
        let expected: Vec<u8> = [first, first + 1]
            .iter()
            .flat_map(|i| unhex(&field(&json, &format!("\"index\": {i},"), "plaintext")))
            .collect();
        let first_type: u8 = {
            let from = json.find(&format!("\"index\": {first},")).unwrap();
            let pat = "\"first_inner_payload\": ";
            let at = from + json[from..].find(pat).unwrap() + pat.len();
            let end = at + json[at..].find(|c: char| !c.is_ascii_digit()).unwrap();
            json[at..end].parse().unwrap()
        };
        let (f1, f2) = (recorded(first), recorded(first + 1));
        // In order, and reversed with fragment 2 duplicated.
        for order in [vec![&f1[..], &f2[..]], vec![&f2[..], &f2[..], &f1[..]]] {
            let (t, plain) = espgw_ike::engine::replay_fragments(
                &conn,
                &init_req,
                &init_resp,
                &shared,
                &order,
                from_initiator,
            )
            .unwrap();
            assert_eq!(t, first_type);
            assert_eq!(plain, expected, "message {first}");
            assert!(plain.len() > 1000, "a certificate's worth");
        }
        // A fragment with a flipped bit is refused before it is kept.
        let mut bad = f2.clone();
        let n = bad.len() - 1;
        bad[n] ^= 1;
        assert!(espgw_ike::engine::replay_fragments(
            &conn,
            &init_req,
            &init_resp,
            &shared,
            &[&f1[..], &bad[..]],
            from_initiator,
        )
        .is_err());
    }
}

#[test]
fn fragment_one_of_an_answered_request_resends_every_response_fragment() {
    let mut p = pair(small(160));
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    up(&p);
    let request: Vec<_> = p
        .sent
        .iter()
        .filter(|t| {
            t.dst.ip() == addr(B).ip()
                && Message::parse(&t.payload)
                    .is_ok_and(|m| m.header.exchange == ExchangeType::IKE_AUTH)
        })
        .cloned()
        .collect();
    let response_fragments = fragments(&p, ExchangeType::IKE_AUTH, false).len();
    let (resent, unexpected) = (p.b.stats().retransmitted_responses, p.b.stats().unexpected);
    // Every fragment of the request again, last first: only fragment 1
    // brings the response back, all of it (RFC 7383 2.6.1).
    for t in request.iter().rev() {
        p.b.handle_datagram(p.now, t.src, t.dst, &t.payload);
    }
    assert_eq!(p.b.stats().retransmitted_responses, resent + 1);
    assert_eq!(
        p.b.stats().unexpected,
        unexpected + request.len() as u64 - 1
    );
    let again: Vec<_> = std::iter::from_fn(|| p.b.poll_transmit()).collect();
    assert_eq!(again.len(), response_fragments);
    assert!(response_fragments >= 2);
}
