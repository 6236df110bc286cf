//! One Wycheproof AEAD case against an implementation given as `open` and
//! `seal` closures: shared by the AES-GCM suite (crates/aesgcm and
//! dpdk/ipsec-mb) and dpdk/ipsec-mb's ChaCha20-Poly1305 test.

use wycheproof::aead::Test;

/// The cases checked so far.
#[derive(Debug, Default)]
pub struct Tally {
    /// Valid cases: opened to the published plaintext and sealed to the
    /// published ciphertext and tag.
    pub valid: usize,
    /// Invalid cases (modified tag, ...): refused, buffer unchanged.
    pub invalid: usize,
}

/// Checks case `t`: `open(nonce, aad, buf, tag)` returns whether it
/// opened; `seal(nonce, aad, buf)` returns the tag. Panics (naming the
/// case) on any disagreement; a failed open must leave the ciphertext.
pub fn check_case(
    tally: &mut Tally,
    t: &Test,
    open: impl Fn(&[u8; 12], &[u8], &mut [u8], &[u8; 16]) -> bool,
    seal: impl Fn(&[u8; 12], &[u8], &mut [u8]) -> [u8; 16],
) {
    let ctx = format!("tc {} {:?}", t.tc_id, t.flags);
    let nonce: [u8; 12] = t.nonce[..].try_into().unwrap();
    let tag: [u8; 16] = t.tag[..].try_into().unwrap();
    let mut buf = t.ct.to_vec();
    let opened = open(&nonce, &t.aad, &mut buf, &tag);
    if t.result.must_fail() {
        assert!(!opened, "{ctx} must fail to open");
        assert_eq!(buf, &t.ct[..], "{ctx}: failed open changed the buffer");
        tally.invalid += 1;
        return;
    }
    assert!(opened, "{ctx} must open");
    assert_eq!(buf, &t.pt[..], "{ctx}");
    let mut buf = t.pt.to_vec();
    let sealed = seal(&nonce, &t.aad, &mut buf);
    assert_eq!((&buf[..], &sealed[..]), (&t.ct[..], &t.tag[..]), "{ctx}");
    tally.valid += 1;
}
