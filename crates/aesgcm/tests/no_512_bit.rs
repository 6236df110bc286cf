//! `allow_512_bit(false)`: keys made afterwards run the 128-bit path, as on
//! a CPU without AVX-512, and seal and open exactly as the 512-bit path
//! does; keys made before keep their path. Its own test binary (so its own
//! process): the switch is process-wide.

use espgw_aesgcm::{allow_512_bit, has_wide_open, is_512_bit_allowed, AesGcm};

#[test]
fn turning_the_512_bit_path_off_and_on() {
    if !espgw_aesgcm::is_supported() {
        eprintln!("skipped: no AES-NI/PCLMULQDQ/AVX");
        return;
    }
    let key = [0x42u8; 16];
    let cpu_has_it = has_wide_open();
    assert!(is_512_bit_allowed());
    let before = AesGcm::new(&key).unwrap();
    assert_eq!(before.uses_wide_path(), cpu_has_it);

    allow_512_bit(false);
    assert!(!is_512_bit_allowed());
    assert!(!has_wide_open());
    let off = AesGcm::new(&key).unwrap();
    assert!(!off.uses_wide_path());
    // Made before the switch: unchanged.
    assert_eq!(before.uses_wide_path(), cpu_has_it);

    // Both paths give the same bytes over the wide path's whole range.
    let nonce = [7u8; 12];
    let aad = [1u8; 8];
    for len in 40..=120 {
        let plain: Vec<u8> = (0..len).map(|i| (i * 31 + len) as u8).collect();
        let (mut a, mut b) = (plain.clone(), plain.clone());
        let tag_a = before.seal(&nonce, &aad, &mut a);
        let tag_b = off.seal(&nonce, &aad, &mut b);
        assert_eq!((a.clone(), tag_a), (b, tag_b), "seal of {len} bytes");
        off.open(&nonce, &aad, &mut a, &tag_a).unwrap();
        assert_eq!(a, plain, "open of {len} bytes");
    }

    allow_512_bit(true);
    assert_eq!(has_wide_open(), cpu_has_it);
    assert_eq!(AesGcm::new(&key).unwrap().uses_wide_path(), cpu_has_it);
}
