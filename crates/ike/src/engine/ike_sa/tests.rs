//! Unit tests that need the SA's insides.
use super::*;
use crate::crypto::CryptoError;
use crate::engine::{Engine, EngineConfig};
use crate::message::{emit_chain, Identification};

struct CountingRng(u8);

impl RandomSource for CountingRng {
    fn fill(&mut self, dest: &mut [u8]) -> Result<(), CryptoError> {
        for b in dest {
            self.0 = self.0.wrapping_mul(31).wrapping_add(17);
            *b = self.0;
        }
        Ok(())
    }
}

fn conn(local: &str, remote: &str) -> Connection {
    Connection::new(
        "t",
        local.parse().unwrap(),
        remote.parse().unwrap(),
        Identification::fqdn(local),
        None,
        b"unit test psk",
        "aes128gcm16-prfsha256-x25519",
        "aes128gcm16",
        &["10.1.0.0/24", "10.2.0.0/24"],
        &["10.1.0.0/24", "10.2.0.0/24"],
    )
    .unwrap()
}

const A: &str = "192.0.2.1:500";
const B: &str = "192.0.2.2:500";

/// Two engines with an IKE SA up; a's SA id.
fn established() -> (Engine<CountingRng>, Engine<CountingRng>, IkeSaId) {
    let mut a = Engine::new(EngineConfig::default(), CountingRng(1));
    let mut b = Engine::new(EngineConfig::default(), CountingRng(2));
    a.add_connection(conn(A, B));
    b.add_connection(conn(B, A));
    let id = a.initiate(0, 0).unwrap();
    for _ in 0..4 {
        while let Some(t) = a.poll_transmit() {
            b.handle_datagram(0, t.src, t.dst, &t.payload);
        }
        while let Some(t) = b.poll_transmit() {
            a.handle_datagram(0, t.src, t.dst, &t.payload);
        }
    }
    assert!(a.sas[&id].state == State::Established);
    (a, b, id)
}

#[test]
fn an_authentic_request_with_an_unknown_critical_payload_is_answered() {
    let (mut a, mut b, id) = established();
    let sa = &a.sas[&id];
    let (first, mut plain) = emit_chain(&[Payload::Unrecognized {
        payload_type: PayloadType(99),
        body: vec![1, 2],
    }])
    .unwrap();
    plain[1] |= 0x80; // the critical bit
    let header = sa.header(ExchangeType::INFORMATIONAL, false, sa.next_request_id);
    let msg = wire::seal_plain(
        &header,
        first,
        &plain,
        sa.sk_out.as_ref().unwrap(),
        &mut CountingRng(9),
    )
    .unwrap();
    b.handle_datagram(0, A.parse().unwrap(), B.parse().unwrap(), &msg);
    let reply = b.poll_transmit().expect("an answer");
    let inner = wire::open(&reply.payload, a.sas[&id].sk_in.as_ref().unwrap()).unwrap();
    let n = inner
        .notify(NotifyType::UNSUPPORTED_CRITICAL_PAYLOAD)
        .expect("the notify");
    assert_eq!(n.data, vec![99]);
    assert_eq!(b.stats().malformed, 1);
    // A tampered copy is no retransmission: no answer.
    let mut forged = msg.clone();
    *forged.last_mut().unwrap() ^= 1;
    b.handle_datagram(0, A.parse().unwrap(), B.parse().unwrap(), &forged);
    assert!(b.poll_transmit().is_none());
    assert_eq!(b.stats().unexpected, 1);
    // With the next message ID it fails its integrity check.
    forged[20..24].copy_from_slice(&(header.message_id + 1).to_be_bytes());
    b.handle_datagram(0, A.parse().unwrap(), B.parse().unwrap(), &forged);
    assert!(b.poll_transmit().is_none());
    assert_eq!(b.stats().decrypt_failed, 1);
    // The real one again is a retransmission: the stored answer.
    b.handle_datagram(0, A.parse().unwrap(), B.parse().unwrap(), &msg);
    assert_eq!(b.poll_transmit().unwrap(), reply);
    let _ = a.poll_event();
}

/// CHILD_SA offers: a proposal whose additional key exchanges are all
/// optional goes as configured and again without them (for a peer
/// without RFC 9370, which rejects the first); one that requires an
/// additional exchange, and one without any, go once.
#[test]
fn esp_offers_repeat_optional_addke_proposals_without_them() {
    let proposals = crypto::parse_esp_proposals(
        "aes128gcm16-x25519-ke1_mlkem768-ke1_none,aes256gcm16-x25519-ke1_mlkem768,aes128gcm16-x25519",
    )
    .unwrap();
    let offer = intermediate::esp_offer(&proposals);
    assert_eq!(offer.len(), 4);
    assert_eq!(offer[0], proposals[0]);
    assert_eq!(offer[1].addke, <[Vec<Option<KeGroup>>; 7]>::default());
    assert_eq!(
        (offer[1].ke.clone(), offer[1].encryption.clone()),
        (proposals[0].ke.clone(), proposals[0].encryption.clone())
    );
    assert_eq!(offer[2], proposals[1]);
    assert_eq!(offer[3], proposals[2]);
}
