//! Cookies as responder (RFC 7296 2.6): above the threshold an
//! IKE_SA_INIT request without a valid COOKIE gets one back and leaves no
//! state; the initiator retries with it and the SA comes up.

mod engine_common;

use engine_common::*;
use espgw_ike::engine::{EngineConfig, Event};
use espgw_ike::message::{Message, Notify, NotifyType, Payload};

const PSK: &[u8] = b"espgw test psk 0123456789";
const IKE: &str = "aes128gcm16-prfsha256-x25519";

fn pair(cfg: EngineConfig) -> Pair {
    let (a, b) = connections(PSK, PSK, IKE, IKE, "aes128gcm16", "aes128gcm16");
    Pair::new(a, b, cfg)
}

fn ups(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, Event::IkeSaUp { .. }))
        .count()
}

fn cookie_of(datagram: &[u8]) -> Option<Vec<u8>> {
    let m = Message::parse(datagram).unwrap();
    let c = m
        .notifies(NotifyType::COOKIE)
        .next()
        .map(|n| n.data.clone());
    c
}

/// `request` with `cookie` as its first payload (replacing any).
fn with_cookie(request: &[u8], cookie: Vec<u8>) -> Vec<u8> {
    let mut m = Message::parse(request).unwrap();
    m.payloads
        .retain(|p| !matches!(p, Payload::Notify(n) if n.notify_type == NotifyType::COOKIE));
    m.payloads
        .insert(0, Payload::Notify(Notify::ike(NotifyType::COOKIE, cookie)));
    m.emit().unwrap()
}

fn cookie_cfg(threshold: usize) -> EngineConfig {
    EngineConfig {
        cookie_threshold: threshold,
        ..test_config()
    }
}

#[test]
fn threshold_zero_answers_with_a_cookie_keeps_nothing_then_accepts_the_retry() {
    let mut p = pair(cookie_cfg(0));
    p.a.initiate(0, 0).unwrap();
    let init = p.a.poll_transmit().unwrap();
    assert!(cookie_of(&init.payload).is_none());
    p.b.handle_datagram(0, init.src, init.dst, &init.payload);
    // No state, one stateless answer carrying only the cookie.
    assert_eq!(p.b.ike_sa_count(), 0);
    assert_eq!(p.b.stats().cookies_sent, 1);
    let answer = p.b.poll_transmit().unwrap();
    assert!(p.b.poll_transmit().is_none());
    let m = Message::parse(&answer.payload).unwrap();
    assert_eq!(m.header.spi_r, 0);
    assert_eq!(m.payloads.len(), 1);
    assert!(cookie_of(&answer.payload).is_some());
    // The initiator retries with the cookie; the rest runs to the end.
    p.queue.push_back(answer);
    p.run(&[], 60_000);
    assert_eq!((ups(&p.events_a), ups(&p.events_b)), (1, 1));
    assert_eq!(p.b.stats().cookies_sent, 1);
    assert_eq!(p.b.stats().cookies_invalid, 0);
    // The retry carried the cookie first.
    let retry = p
        .sent
        .iter()
        .find(|t| t.dst == init.dst && cookie_of(&t.payload).is_some())
        .unwrap();
    let m = Message::parse(&retry.payload).unwrap();
    assert!(matches!(&m.payloads[0], Payload::Notify(n) if n.notify_type == NotifyType::COOKIE));
}

#[test]
fn threshold_one_demands_cookies_only_while_an_sa_is_half_open() {
    let mut p = pair(cookie_cfg(1));
    // The first request is below the threshold: answered with state.
    p.a.initiate(0, 0).unwrap();
    let first = p.a.poll_transmit().unwrap();
    p.b.handle_datagram(0, first.src, first.dst, &first.payload);
    assert_eq!(p.b.ike_sa_count(), 1);
    assert_eq!(p.b.stats().cookies_sent, 0);
    // Its response is lost; the SA stays half-open. A second one now
    // needs a cookie, and both come up in the end.
    assert!(p.b.poll_transmit().is_some());
    p.a.initiate(0, 0).unwrap();
    p.run(&[], 60_000);
    assert_eq!((ups(&p.events_a), ups(&p.events_b)), (2, 2));
    assert_eq!(p.b.stats().cookies_sent, 1);
}

#[test]
fn a_wrong_cookie_or_one_for_another_peer_is_refused_without_state() {
    let mut p = pair(cookie_cfg(0));
    p.a.initiate(0, 0).unwrap();
    let init = p.a.poll_transmit().unwrap();
    p.b.handle_datagram(0, init.src, init.dst, &init.payload);
    let cookie = cookie_of(&p.b.poll_transmit().unwrap().payload).unwrap();

    let mut wrong = cookie.clone();
    *wrong.last_mut().unwrap() ^= 1;
    p.b.handle_datagram(0, init.src, init.dst, &with_cookie(&init.payload, wrong));
    assert_eq!(p.b.ike_sa_count(), 0);
    assert_eq!(p.b.stats().cookies_invalid, 1);
    // Answered again with a fresh (the right) cookie.
    let again = p.b.poll_transmit().unwrap();
    assert_eq!(cookie_of(&again.payload).unwrap(), cookie);

    // The right cookie from another address is not valid there.
    let other = addr("192.0.2.9:500");
    p.b.handle_datagram(
        0,
        other,
        init.dst,
        &with_cookie(&init.payload, cookie.clone()),
    );
    assert_eq!(p.b.ike_sa_count(), 0);
    assert_eq!(p.b.stats().cookies_invalid, 2);
    assert_eq!(p.b.stats().cookies_sent, 3);

    // The right cookie from the right peer is taken.
    p.b.handle_datagram(0, init.src, init.dst, &with_cookie(&init.payload, cookie));
    assert_eq!(p.b.ike_sa_count(), 1);
    assert_eq!(p.b.stats().cookies_invalid, 2);
}

#[test]
fn cookies_outlive_one_secret_rotation_but_not_two() {
    let lifetime = 10_000;
    let cfg = EngineConfig {
        cookie_secret_lifetime_ms: lifetime,
        ..cookie_cfg(0)
    };
    let mut p = pair(cfg);
    p.a.initiate(0, 0).unwrap();
    let init = p.a.poll_transmit().unwrap();
    p.b.handle_datagram(0, init.src, init.dst, &init.payload);
    let cookie = cookie_of(&p.b.poll_transmit().unwrap().payload).unwrap();
    let retry = with_cookie(&init.payload, cookie);

    // After one rotation the old cookie is still good (a peer that got
    // it just before the rotation is not refused).
    let mut q = pair(EngineConfig {
        cookie_secret_lifetime_ms: lifetime,
        ..cookie_cfg(0)
    });
    q.b.handle_datagram(0, init.src, init.dst, &init.payload);
    let _ = q.b.poll_transmit();
    q.b.handle_datagram(lifetime + 1, init.src, init.dst, &retry);
    assert_eq!(q.b.stats().cookies_invalid, 0);
    assert_eq!(q.b.ike_sa_count(), 1);

    // After two rotations it is refused.
    p.b.handle_datagram(lifetime, init.src, init.dst, &init.payload);
    let _ = p.b.poll_transmit();
    p.b.handle_datagram(2 * lifetime, init.src, init.dst, &retry);
    assert_eq!(p.b.stats().cookies_invalid, 1);
    assert_eq!(p.b.ike_sa_count(), 0);
}
