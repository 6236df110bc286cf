//! What one fuzz input exercises; shared by the libFuzzer target
//! (fuzz_targets/message.rs) and the stable smoke test
//! (crates/ike/tests/message_smoke.rs).
//!
//! The first byte picks a mode, the rest is the input:
//! - 0: a whole datagram through [`Message::parse`] (and the raw walker);
//! - 1: a decrypted SK plaintext (padding included) whose first inner type
//!   is the next byte, through `strip_padding` and the inner walker;
//! - 2: a port-4500 datagram: non-ESP marker, then as mode 0.
//!
//! Invariants checked besides "no panic": a parsed message re-emits, and
//! the re-emission parses to the same message (for SK/SKF bodies too, cut
//! with each cipher profile and their "plaintext" parsed as an inner chain).

use espgw_ike::message::*;

/// (IV, ICV, block) of the ciphers the engine negotiates: AES-CBC with
/// HMAC-SHA2 truncations, AES-GCM-16, ChaCha20-Poly1305, 3DES/HMAC-SHA1.
const CIPHER_PROFILES: [(usize, usize, usize); 5] = [
    (16, 16, 16),
    (16, 24, 16),
    (8, 16, 1),
    (8, 12, 8),
    (16, 32, 16),
];

/// Runs one fuzz input.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => whole_message(rest),
        1 => {
            if let Some((&first, plaintext)) = rest.split_first() {
                inner_plaintext(PayloadType(first), plaintext);
            }
        }
        _ => {
            if let Some(ike) = strip_non_esp_marker(rest) {
                whole_message(ike);
            }
        }
    }
}

fn whole_message(bytes: &[u8]) {
    // The raw walker on its own: it must stop after its first error.
    if let Ok((_, iter)) = Message::parse_raw(bytes) {
        let mut errors = 0;
        for r in iter {
            assert_eq!(errors, 0, "walker yielded after an error");
            if r.is_err() {
                errors += 1;
            }
        }
    }
    let Ok(m) = Message::parse(bytes) else {
        return;
    };
    let out = m.emit().expect("a parsed message re-emits");
    let again = Message::parse(&out).expect("a re-emitted message parses");
    assert_eq!(again, m, "parse(emit(parse(x))) != parse(x)");
    for p in &m.payloads {
        let (payload, next, body) = match p {
            Payload::Encrypted(sk) => (PayloadType::SK, sk.next_payload, &sk.body),
            Payload::Fragment(f) => (PayloadType::SKF, f.next_payload, &f.body),
            _ => continue,
        };
        for (iv, icv, block) in CIPHER_PROFILES {
            if let Ok(parts) = encrypted::split(payload, body, iv, icv, block) {
                assert_eq!(
                    parts.iv.len() + parts.ciphertext.len() + parts.icv.len(),
                    body.len()
                );
                inner_plaintext(next, parts.ciphertext);
            }
        }
    }
}

fn inner_plaintext(first: PayloadType, plaintext: &[u8]) {
    let Ok(inner) = encrypted::strip_padding(PayloadType::SK, plaintext) else {
        return;
    };
    let Ok(payloads) = parse_chain(PayloadIter::inner(first, inner)) else {
        return;
    };
    let (first_again, bytes) = emit_chain(&payloads).expect("a parsed inner chain re-emits");
    let again = parse_chain(PayloadIter::inner(first_again, &bytes))
        .expect("a re-emitted inner chain parses");
    assert_eq!(again, payloads, "inner chain round trip");
}
