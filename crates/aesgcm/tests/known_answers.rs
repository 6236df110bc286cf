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

/// `seal_two` (two packets in one interleaved pass when both are at most 80
/// bytes, else two seals) gives the specification's answers: every pair of
/// cases under the same key, each case with itself included, in both
/// orders.
#[test]
fn seal_two_gives_the_spec_answers() {
    use known_answers::{hex, CASES};
    let mut pairs = 0;
    for a in CASES {
        for b in CASES.iter().filter(|b| b.key == a.key) {
            let key = AesGcm::new(&hex(a.key)).unwrap();
            let (na, nb): ([u8; 12], [u8; 12]) =
                (hex(a.iv).try_into().unwrap(), hex(b.iv).try_into().unwrap());
            let (aad_a, aad_b) = (hex(a.aad), hex(b.aad));
            let (mut buf_a, mut buf_b) = (hex(a.pt), hex(b.pt));
            let [tag_a, tag_b] = key.seal_two((&na, &aad_a, &mut buf_a), (&nb, &aad_b, &mut buf_b));
            let ctx = format!("{} with {}", a.name, b.name);
            assert_eq!((buf_a, tag_a.to_vec()), (hex(a.ct), hex(a.tag)), "{ctx}");
            assert_eq!((buf_b, tag_b.to_vec()), (hex(b.ct), hex(b.tag)), "{ctx}");
            pairs += 1;
        }
    }
    // Two cases under each of four keys (zero AES-128: TC1/2, K128:
    // TC3/4, zero AES-256: TC13/14, K256: TC15/16): 4 x 2 x 2 pairs.
    assert_eq!(pairs, 16);
}
