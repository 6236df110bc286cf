//! Differential test against ring 0.17 (an independent AES-GCM): for
//! random keys of both sizes, nonces, AAD of 0..=32 bytes and plaintexts of
//! 0..=2048 bytes, `seal` must produce ring's ciphertext and tag, `open` must
//! accept ring's output and give the plaintext back, and flipping any one
//! bit of ciphertext, tag or AAD must make `open` fail and leave the buffer
//! alone.

use espgw_aesgcm::AesGcm;

const CASES: u32 = 512;
const MAX_LEN: usize = 2048;
const NEW_FAILS: &str = "this CPU has AES-NI and PCLMULQDQ";

#[path = "gcm_suite/differential.rs"]
mod differential;
use differential::ring_seal;

/// `seal_two` gives ring's ciphertexts and tags for both packets, for every
/// pair of lengths around its 80-byte limit (interleaved when both are at
/// most 80, two seals otherwise), both key sizes, ESP's AAD lengths and a
/// long one.
#[test]
fn seal_two_matches_ring_for_every_pair_of_short_lengths() {
    for key_len in [16, 32] {
        let key: Vec<u8> = (0..key_len as u8)
            .map(|i| i.wrapping_mul(13) ^ 0xa7)
            .collect();
        // The key as the CPU runs it (512-bit pairs of 49-112 bytes where
        // it can) and the 128-bit path.
        for ours in [
            AesGcm::new(&key).unwrap(),
            AesGcm::new(&key).unwrap().narrow(),
        ] {
            for (aad_a, aad_b) in [(8, 8), (12, 12), (8, 12), (0, 40), (16, 17)] {
                let (aad_a, aad_b): (Vec<u8>, Vec<u8>) = (
                    (0..aad_a).map(|i| i as u8).collect(),
                    (0..aad_b).map(|i| !i as u8).collect(),
                );
                for len_a in (0..=116)
                    .step_by(4)
                    .chain([1, 15, 17, 47, 49, 65, 79, 81, 97, 111, 113])
                {
                    for len_b in [
                        0, 1, 16, 48, 49, 63, 64, 68, 79, 80, 81, 96, 111, 112, 113, 128,
                    ] {
                        let (na, nb) = ([len_a as u8; 12], [0xf0 ^ len_b as u8; 12]);
                        let pa: Vec<u8> = (0..len_a).map(|i| (i * 3) as u8).collect();
                        let pb: Vec<u8> = (0..len_b).map(|i| (i * 5 + 1) as u8).collect();
                        let (mut a, mut b) = (pa.clone(), pb.clone());
                        let [ta, tb] = ours.seal_two((&na, &aad_a, &mut a), (&nb, &aad_b, &mut b));
                        let ctx = format!(
                            "key {key_len} lens {len_a}/{len_b} aad {}/{}",
                            aad_a.len(),
                            aad_b.len()
                        );
                        assert_eq!((a, ta), ring_seal(&key, na, &aad_a, &pa), "{ctx} first");
                        assert_eq!((b, tb), ring_seal(&key, nb, &aad_b, &pb), "{ctx} second");
                    }
                }
            }
        }
    }
}

/// `seal` and `open` of every input of 0..=128 bytes with AAD of 0..=17
/// bytes (the 512-bit short path takes 49 to 112 and up to 16; ESP's AAD is
/// 8 or 12): `seal` gives ring's ciphertext and tag and `open` gives back
/// ring's plaintext, on both paths (the key as the CPU runs it and the
/// 128-bit one); a flipped bit of ciphertext or tag fails and leaves the
/// buffer as it was. Says which paths ran.
#[test]
fn seal_and_open_short_inputs_on_both_paths_match_ring() {
    let mut wide_ran = false;
    for key_len in [16, 32] {
        let key: Vec<u8> = (0..key_len as u8)
            .map(|i| i.wrapping_mul(29) ^ 0x5c)
            .collect();
        for narrow in [false, true] {
            let ours = AesGcm::new(&key).expect(NEW_FAILS);
            let ours = if narrow { ours.narrow() } else { ours };
            assert!(!narrow || !ours.uses_wide_path());
            wide_ran |= ours.uses_wide_path();
            for aad_len in 0..=17usize {
                let aad: Vec<u8> = (0..aad_len).map(|i| (i * 7 + 3) as u8).collect();
                for len in 0..=128usize {
                    let nonce = [(len * 3 + aad_len) as u8 ^ 0x3c; 12];
                    let plain: Vec<u8> = (0..len).map(|i| (i * 11 + len) as u8).collect();
                    let (ct, tag) = ring_seal(&key, nonce, &aad, &plain);
                    let ctx = format!("key {key_len} narrow {narrow} aad {aad_len} len {len}");
                    let mut sealed = plain.clone();
                    let sealed_tag = ours.seal(&nonce, &aad, &mut sealed);
                    assert_eq!((&sealed, sealed_tag), (&ct, tag), "{ctx} seal");
                    let mut buf = ct.clone();
                    assert_eq!(ours.open(&nonce, &aad, &mut buf, &tag), Ok(()), "{ctx}");
                    assert_eq!(buf, plain, "{ctx}");
                    let mut bad_tag = tag;
                    bad_tag[(len + aad_len) % 16] ^= 1 << (len % 8);
                    let mut buf = ct.clone();
                    assert!(
                        ours.open(&nonce, &aad, &mut buf, &bad_tag).is_err(),
                        "{ctx} tag"
                    );
                    assert_eq!(buf, ct, "{ctx} tag: buffer touched");
                    if len > 0 {
                        let mut buf = ct.clone();
                        buf[len - 1] ^= 0x80;
                        let flipped = buf.clone();
                        assert!(ours.open(&nonce, &aad, &mut buf, &tag).is_err(), "{ctx} ct");
                        assert_eq!(buf, flipped, "{ctx} ct: buffer touched");
                    }
                }
            }
        }
    }
    eprintln!(
        "seal_and_open_short_inputs_on_both_paths_match_ring: 512-bit path {}",
        if wide_ran {
            "ran"
        } else {
            "not on this CPU (128-bit path only)"
        }
    );
}
