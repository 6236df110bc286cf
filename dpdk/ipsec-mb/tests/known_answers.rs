//! Known answers from the GCM specification: D. McGrew and J. Viega, "The
//! Galois/Counter Mode of Operation (GCM)", submission to NIST (2005),
//! Appendix B "AES Test Vectors", test cases 1-4 (AES-128) and 13-16
//! (AES-256): the cases with a 96-bit IV (5/6 and 17/18 use other IV
//! lengths, which ESP never does). They cover an empty plaintext with empty
//! AAD, one block, four blocks, and 60 bytes (a partial last block) with
//! 20 bytes of AAD (a partial AAD block).

use ipsec_mb::{GcmKey as AesGcm, Library, TagMismatch as OpenError};

#[path = "../../../crates/aesgcm/tests/gcm_suite/known_answers.rs"]
mod known_answers;

/// Says which code the library runs here (`-- --nocapture`): the tests
/// above test that one.
#[test]
fn the_library_initialises_here() {
    let lib = Library::get().expect("intel-ipsec-mb initialises on an x86_64 CPU");
    println!("intel-ipsec-mb: {lib:?}");
}
