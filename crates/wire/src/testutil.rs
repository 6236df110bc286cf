//! Helpers shared by the unit tests.

/// Decodes a hex string (whitespace ignored); panics on bad input (tests only).
pub fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    assert_eq!(digits.len() & 1, 0, "odd hex length");
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(core::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

/// Asserts that `check` rejects every proper prefix of `packet`.
pub fn assert_prefixes_rejected<E: core::fmt::Debug>(
    packet: &[u8],
    check: impl Fn(&[u8]) -> Result<(), E>,
) {
    assert!(check(packet).is_ok(), "the whole packet must be accepted");
    for len in 0..packet.len() {
        assert!(
            check(&packet[..len]).is_err(),
            "prefix of {len} bytes accepted"
        );
    }
}
