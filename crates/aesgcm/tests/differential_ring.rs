//! Differential test against ring 0.17 (an independent AES-GCM): for
//! random keys of both sizes, nonces, AAD of 0..=32 bytes and plaintexts of
//! 0..=2048 bytes, `seal` must produce ring's ciphertext and tag, `open` must
//! accept ring's output and give the plaintext back, and flipping any one
//! bit of ciphertext, tag or AAD must make `open` fail and leave the buffer
//! alone.

use espgw_aesgcm::AesGcm;
use proptest::prelude::*;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM};

fn ring_seal(key: &[u8], nonce: [u8; 12], aad: &[u8], pt: &[u8]) -> (Vec<u8>, [u8; 16]) {
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
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn matches_ring(
        key in key_strategy(),
        nonce in any::<[u8; 12]>(),
        aad in proptest::collection::vec(any::<u8>(), 0..=32),
        pt in proptest::collection::vec(any::<u8>(), 0..=2048),
        flip in flip_strategy(),
    ) {
        let ours = AesGcm::new(&key).expect("this CPU has AES-NI and PCLMULQDQ");
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

/// `seal_two` gives ring's ciphertexts and tags for both packets, for every
/// pair of lengths around its 80-byte limit (interleaved when both are at
/// most 80, two seals otherwise), both key sizes, ESP's AAD lengths and a
/// long one.
#[test]
fn seal_two_matches_ring_for_every_pair_of_short_lengths() {
    for key_len in [16, 32] {
        let key: Vec<u8> = (0..key_len as u8)
            .map(|i| i.wrapping_mul(13) ^ 0xa7)
            .collect();
        let ours = AesGcm::new(&key).unwrap();
        for (aad_a, aad_b) in [(8, 8), (12, 12), (8, 12), (0, 40)] {
            let (aad_a, aad_b): (Vec<u8>, Vec<u8>) = (
                (0..aad_a).map(|i| i as u8).collect(),
                (0..aad_b).map(|i| !i as u8).collect(),
            );
            for len_a in (0..=96).step_by(4).chain([1, 15, 17, 79, 81]) {
                for len_b in [0, 1, 16, 63, 64, 68, 79, 80, 81, 128] {
                    let (na, nb) = ([len_a as u8; 12], [0xf0 ^ len_b as u8; 12]);
                    let pa: Vec<u8> = (0..len_a).map(|i| (i * 3) as u8).collect();
                    let pb: Vec<u8> = (0..len_b).map(|i| (i * 5 + 1) as u8).collect();
                    let (mut a, mut b) = (pa.clone(), pb.clone());
                    let [ta, tb] = ours.seal_two((&na, &aad_a, &mut a), (&nb, &aad_b, &mut b));
                    let ctx = format!(
                        "key {key_len} lens {len_a}/{len_b} aad {}/{}",
                        aad_a.len(),
                        aad_b.len()
                    );
                    assert_eq!((a, ta), ring_seal(&key, na, &aad_a, &pa), "{ctx} first");
                    assert_eq!((b, tb), ring_seal(&key, nb, &aad_b, &pb), "{ctx} second");
                }
            }
        }
    }
}
