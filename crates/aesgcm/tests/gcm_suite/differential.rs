//! The differential test against ring 0.17 (an independent AES-GCM) for
//! the implementation the including test names `AesGcm`, with its
//! `CASES`, `MAX_LEN` and `NEW_FAILS` (why `new` may not fail there):
//! shared by crates/aesgcm and dpdk/ipsec-mb (see the including files).

use super::AesGcm;
use proptest::prelude::*;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM};

pub fn ring_seal(key: &[u8], nonce: [u8; 12], aad: &[u8], pt: &[u8]) -> (Vec<u8>, [u8; 16]) {
    let alg = if key.len() == 16 {
        &AES_128_GCM
    } else {
        &AES_256_GCM
    };
    let key = LessSafeKey::new(UnboundKey::new(alg, key).unwrap());
    let mut ct = pt.to_vec();
    let tag = key
        .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad), &mut ct)
        .unwrap();
    (ct, tag.as_ref().try_into().unwrap())
}

fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 16),
        proptest::collection::vec(any::<u8>(), 32),
    ]
}

/// Where to flip one bit: in the ciphertext, the tag or the AAD.
#[derive(Debug, Clone)]
enum Flip {
    Ct(prop::sample::Index, u8),
    Tag(prop::sample::Index, u8),
    Aad(prop::sample::Index, u8),
}

fn flip_strategy() -> impl Strategy<Value = Flip> {
    prop_oneof![
        (any::<prop::sample::Index>(), 0u8..8).prop_map(|(i, b)| Flip::Ct(i, b)),
        (any::<prop::sample::Index>(), 0u8..8).prop_map(|(i, b)| Flip::Tag(i, b)),
        (any::<prop::sample::Index>(), 0u8..8).prop_map(|(i, b)| Flip::Aad(i, b)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(super::CASES))]

    #[test]
    fn matches_ring(
        key in key_strategy(),
        nonce in any::<[u8; 12]>(),
        aad in proptest::collection::vec(any::<u8>(), 0..=32),
        pt in proptest::collection::vec(any::<u8>(), 0..=super::MAX_LEN),
        flip in flip_strategy(),
    ) {
        let ours = AesGcm::new(&key).expect(super::NEW_FAILS);
        let (ring_ct, ring_tag) = ring_seal(&key, nonce, &aad, &pt);

        let mut buf = pt.clone();
        let tag = ours.seal(&nonce, &aad, &mut buf);
        prop_assert_eq!(&buf, &ring_ct);
        prop_assert_eq!(tag, ring_tag);

        let mut buf = ring_ct.clone();
        prop_assert!(ours.open(&nonce, &aad, &mut buf, &ring_tag).is_ok());
        prop_assert_eq!(&buf, &pt);

        let (mut ct, mut tag, mut aad) = (ring_ct.clone(), ring_tag, aad.clone());
        match flip {
            Flip::Ct(i, bit) if !ct.is_empty() => {
                let at = i.index(ct.len());
                ct[at] ^= 1 << bit
            }
            Flip::Aad(i, bit) if !aad.is_empty() => {
                let at = i.index(aad.len());
                aad[at] ^= 1 << bit
            }
            Flip::Tag(i, bit) | Flip::Ct(i, bit) | Flip::Aad(i, bit) => {
                tag[i.index(16)] ^= 1 << bit
            }
        }
        let before = ct.clone();
        prop_assert!(ours.open(&nonce, &aad, &mut ct, &tag).is_err());
        prop_assert_eq!(ct, before, "a failed open must not decrypt");
    }
}

#[test]
fn every_length_up_to_300_with_aad_lengths_up_to_40_and_some_long() {
    for key_len in [16, 32] {
        let key: Vec<u8> = (0..key_len as u8)
            .map(|i| i.wrapping_mul(29) ^ 0x5c)
            .collect();
        let ours = AesGcm::new(&key).unwrap();
        let nonce = *b"\x00\x01\x02\x03\x04\x05\x06\x07\xfe\xff\xff\xff";
        for aad_len in (0..=40).chain([64, 100, 129, 255, 1000]) {
            let aad: Vec<u8> = (0..aad_len).map(|i| i as u8).collect();
            for len in 0..=300 {
                let pt: Vec<u8> = (0..len).map(|i| (i * 7 + aad_len) as u8).collect();
                let (ct, ring_tag) = ring_seal(&key, nonce, &aad, &pt);
                let mut buf = pt.clone();
                let tag = ours.seal(&nonce, &aad, &mut buf);
                assert_eq!(
                    (&buf, tag),
                    (&ct, ring_tag),
                    "key {key_len} aad {aad_len} len {len}"
                );
            }
        }
    }
}
