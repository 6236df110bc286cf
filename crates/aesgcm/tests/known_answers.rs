//! Known answers from the GCM specification: D. McGrew and J. Viega, "The
//! Galois/Counter Mode of Operation (GCM)", submission to NIST (2005),
//! Appendix B "AES Test Vectors", test cases 1-4 (AES-128) and 13-16
//! (AES-256): the cases with a 96-bit IV (5/6 and 17/18 use other IV
//! lengths, which ESP never does). They cover an empty plaintext with empty
//! AAD, one block, four blocks, and 60 bytes (a partial last block) with
//! 20 bytes of AAD (a partial AAD block).

use espgw_aesgcm::{AesGcm, OpenError};

#[path = "gcm_suite/known_answers.rs"]
mod known_answers;

#[test]
fn supported_on_this_machine() {
    // The project's machines (and CI) are x86_64 with AES-NI and PCLMULQDQ;
    // if this fails, the fast path silently never runs.
    assert!(espgw_aesgcm::is_supported());
}

#[test]
fn debug_shows_no_key_material() {
    let key = AesGcm::new(&[0xab; 16]).unwrap();
    let shown = format!("{key:?}");
    assert_eq!(shown, "AesGcm { key_bits: 128, .. }");
}
