//! Whatever a peer or an operator sends, the crypto layer answers with an
//! error, never a panic: proposal strings, received transforms, SK payload
//! bodies and KE public values, all arbitrary.

use espgw_ike::crypto::ke::KeyExchange;
use espgw_ike::crypto::proposal::{parse_esp_proposals, parse_ike_proposals};
use espgw_ike::crypto::rng::RandomSource;
use espgw_ike::crypto::sk::SkCipher;
use espgw_ike::crypto::transform::{Encryption, Integrity, KeGroup, Transform, TransformType};
use espgw_ike::crypto::CryptoError;
use proptest::prelude::*;

struct CountingRng(u8);

impl RandomSource for CountingRng {
    fn fill(&mut self, dest: &mut [u8]) -> Result<(), CryptoError> {
        for b in dest {
            self.0 = self.0.wrapping_add(1);
            *b = self.0;
        }
        Ok(())
    }
}

fn ciphers() -> Vec<SkCipher> {
    vec![
        SkCipher::new(Encryption::AesGcm16_128, None, &[1; 20], &[]).unwrap(),
        SkCipher::new(Encryption::ChaCha20Poly1305, None, &[2; 36], &[]).unwrap(),
        SkCipher::new(
            Encryption::AesCbc256,
            Some(Integrity::HmacSha384_192),
            &[3; 32],
            &[4; 48],
        )
        .unwrap(),
    ]
}

fn keyword() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("aes128".to_string()),
        Just("aes256gcm16".to_string()),
        Just("chacha20poly1305".to_string()),
        Just("sha256".to_string()),
        Just("sha1".to_string()),
        Just("prfsha384".to_string()),
        Just("x25519".to_string()),
        Just("modp2048".to_string()),
        Just("esn".to_string()),
        Just("".to_string()),
        "[a-z0-9_ ]{0,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn proposal_strings_never_panic(s in "\\PC{0,80}") {
        let _ = parse_ike_proposals(&s);
        let _ = parse_esp_proposals(&s);
    }

    #[test]
    fn keyword_soup_parses_or_names_its_problem(words in prop::collection::vec(keyword(), 0..8),
                                                commas in prop::collection::vec(any::<bool>(), 0..8)) {
        let mut s = String::new();
        for (i, w) in words.iter().enumerate() {
            if i > 0 {
                s.push(if commas.get(i).copied().unwrap_or(false) { ',' } else { '-' });
            }
            s.push_str(w);
        }
        for e in [parse_ike_proposals(&s).err(), parse_esp_proposals(&s).err()]
            .into_iter()
            .flatten()
        {
            prop_assert!(e.to_string().starts_with("proposal "));
        }
    }

    #[test]
    fn selection_never_panics(raw in prop::collection::vec((1u8..8, 0u16..40, prop::option::of(0u16..300)), 0..12)) {
        let offered: Vec<Transform> = raw
            .iter()
            .map(|&(t, id, key_length)| Transform { kind: TransformType::from_u8(t), id, key_length })
            .collect();
        let ike = parse_ike_proposals("aes128-aes256-sha256-sha512-x25519-modp2048,aes128gcm16-chacha20poly1305-prfsha256-ecp256").unwrap();
        let esp = parse_esp_proposals("aes128gcm16-esn-noesn,aes256-sha1-sha256-esn,chacha20poly1305-ecp384").unwrap();
        if let Some(suite) = ike.iter().find_map(|p| p.select(&offered)) {
            // Whatever was chosen was offered.
            prop_assert!(offered.contains(&suite.encryption.transform()));
            prop_assert!(offered.contains(&suite.ke.transform()));
        }
        if let Some(suite) = esp.iter().find_map(|p| p.select(&offered)) {
            prop_assert!(offered.contains(&suite.esp.algorithms().0.transform()));
        }
    }

    #[test]
    fn sk_open_of_arbitrary_bodies_is_an_error(aad in prop::collection::vec(any::<u8>(), 0..64),
                                               body in prop::collection::vec(any::<u8>(), 0..200)) {
        for c in ciphers() {
            prop_assert!(c.open(&aad, &body).is_err());
        }
    }

    #[test]
    fn sk_round_trips(aad in prop::collection::vec(any::<u8>(), 0..64),
                      plain in prop::collection::vec(any::<u8>(), 0..300),
                      seed in any::<u8>()) {
        for c in ciphers() {
            let body = c.seal(&aad, &plain, &mut CountingRng(seed)).unwrap();
            prop_assert_eq!(body.len(), c.body_len(plain.len()));
            prop_assert_eq!(c.open(&aad, &body).unwrap(), plain.clone());
        }
    }

    #[test]
    fn arbitrary_public_values_are_refused_or_agree(peer in prop::collection::vec(any::<u8>(), 0..300),
                                                    group in 0usize..4) {
        let group = KeGroup::ALL[group];
        let ke = KeyExchange::generate(group, &mut CountingRng(9)).unwrap();
        match ke.shared_secret(&peer) {
            Ok(s) => prop_assert_eq!(s.len(), group.shared_len()),
            Err(e) => {
                let expected = matches!(
                    e,
                    CryptoError::InvalidPublicValue | CryptoError::PublicValueLength { .. }
                );
                prop_assert!(expected, "{:?}", e);
            }
        }
    }

    /// ML-KEM: any bytes as the initiator's encapsulation key (responder
    /// side) or as the responder's ciphertext (initiator side) give an
    /// error or a 32-byte secret, never a panic; the right lengths with
    /// random contents hit the modulus check and implicit rejection.
    #[test]
    fn arbitrary_ml_kem_values_are_refused_or_agree(len_pick in 0usize..4,
                                                    fill in prop::collection::vec(any::<u8>(), 1..64),
                                                    kem in 0usize..3) {
        let group = KeGroup::ML_KEM[kem];
        let ours = KeyExchange::generate(group, &mut CountingRng(3)).unwrap();
        let lens = [group.public_len(), group.ml_kem().unwrap().ciphertext_len(), 0, 33];
        let bytes: Vec<u8> = fill.iter().copied().cycle().take(lens[len_pick]).collect();
        for result in [
            KeyExchange::respond(group, &bytes, &mut CountingRng(4)).map(|(_, s)| s),
            ours.shared_secret(&bytes),
        ] {
            match result {
                Ok(s) => prop_assert_eq!(s.len(), 32),
                Err(e) => {
                    let expected = matches!(
                        e,
                        CryptoError::InvalidPublicValue | CryptoError::PublicValueLength { .. }
                    );
                    prop_assert!(expected, "{:?}", e);
                }
            }
        }
    }
}
