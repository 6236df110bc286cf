//! intel-ipsec-mb's GCM (whatever code `init_mb_mgr_auto` picks here)
//! against ring 0.17 (an independent AES-GCM): for
//! random keys of both sizes, nonces, AAD of 0..=32 bytes and plaintexts of
//! 0..=9000 bytes, `seal` must produce ring's ciphertext and tag, `open` must
//! accept ring's output and give the plaintext back, and flipping any one
//! bit of ciphertext, tag or AAD must make `open` fail and leave the buffer
//! alone.

use ipsec_mb::GcmKey as AesGcm;

const CASES: u32 = 256;
const MAX_LEN: usize = 9000;
const NEW_FAILS: &str = "the library initialises";

#[path = "../../../crates/aesgcm/tests/gcm_suite/differential.rs"]
mod differential;
