//! Every AES-GCM and ChaCha20-Poly1305 backend this machine can run,
//! forced with `new_cipher_with`, against ring (the `Ring` backend, an
//! independent implementation) through the whole ESP code path: random
//! keys and salts of every AEAD suite, sequence numbers with and without
//! ESN, and payload regions of 0..9000 bytes, so each backend's short and
//! long halves and their threshold are crossed. A backend must seal to
//! ring's packet byte for byte, open ring's packet to the plaintext, and
//! reject a packet with one flipped bit. `EspCipher::seal_two` (the pairs
//! the engine seals a burst in) must give ring's two packets too, for
//! every backend (ring's own included) and every pair of short lengths.

use espgw_esp::crypto::provider::Cpu;
use espgw_esp::crypto::{new_cipher_with, Backend, IcvMismatch};
use espgw_esp::Suite;
use proptest::prelude::*;

const SPI: u32 = 0x0102_0304;

fn gcm_backends() -> Vec<Backend> {
    backends_for(Suite::Aes128Gcm16)
}

/// The backends other than ring that serve `suite` here.
fn backends_for(suite: Suite) -> Vec<Backend> {
    Backend::ALL
        .into_iter()
        .filter(|&b| b != Backend::Ring)
        .filter(|b| b.serves(suite) && b.runs_on(Cpu::detected()))
        .collect()
}

const AEAD_SUITES: [Suite; 3] = [
    Suite::Aes128Gcm16,
    Suite::Aes256Gcm16,
    Suite::Chacha20Poly1305,
];

fn packet(payload: &[u8]) -> Vec<u8> {
    let mut esp = vec![0u8; 16 + payload.len() + 16];
    esp[..4].copy_from_slice(&SPI.to_be_bytes());
    esp[16..16 + payload.len()].copy_from_slice(payload);
    esp
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn every_aead_backend_matches_ring(
        which in 0..3usize,
        keymat in proptest::collection::vec(any::<u8>(), 36),
        seq in any::<u64>(),
        esn in any::<bool>(),
        payload in proptest::collection::vec(any::<u8>(), 0..9000),
        flip in any::<prop::sample::Index>(),
    ) {
        let suite = AEAD_SUITES[which];
        let keymat = &keymat[..suite.key_len()];
        let seq = if esn { seq } else { seq & 0xffff_ffff };
        let ring = new_cipher_with(Backend::Ring, suite, keymat, &[]).unwrap();
        let mut want = packet(&payload);
        ring.seal(&mut want, seq, esn);
        for backend in backends_for(suite) {
            let cipher = new_cipher_with(backend, suite, keymat, &[]).unwrap();
            let mut got = packet(&payload);
            cipher.seal(&mut got, seq, esn);
            prop_assert!(got == want, "{:?} {} len {}", backend, suite, payload.len());

            let mut opened = want.clone();
            prop_assert!(cipher.open(&mut opened, seq, esn).is_ok());
            prop_assert!(opened[16..16 + payload.len()] == payload[..]);

            let mut bad = want.clone();
            let at = flip.index(bad.len());
            bad[at] ^= 0x01;
            prop_assert_eq!(cipher.open(&mut bad, seq, esn), Err(IcvMismatch));
        }
    }
}

/// `seal_two` against two ring seals: every backend (ring included, whose
/// `seal_two` is the trait's default) for every pair of payload lengths
/// 0..=100 (both sides of `espgw-aesgcm`'s two-packet limit, 80 bytes) and
/// pairs with one long packet, with and without ESN.
#[test]
fn seal_two_matches_two_ring_seals() {
    let short: Vec<usize> = (0..=100).collect();
    let mut pairs: Vec<(usize, usize)> = short
        .iter()
        .flat_map(|&a| short.iter().map(move |&b| (a, b)))
        .collect();
    pairs.extend([(68, 1420), (1420, 68), (1420, 1420), (500, 9000)]);
    for suite in AEAD_SUITES {
        let keymat: Vec<u8> = (0..suite.key_len() as u8).map(|i| i ^ 0x5c).collect();
        let ring = new_cipher_with(Backend::Ring, suite, &keymat, &[]).unwrap();
        let mut backends = backends_for(suite);
        backends.push(Backend::Ring);
        let ciphers: Vec<_> = backends
            .iter()
            .map(|&b| (b, new_cipher_with(b, suite, &keymat, &[]).unwrap()))
            .collect();
        for &(la, lb) in &pairs {
            let esn = (la + lb) % 2 == 0;
            let (seq_a, seq_b) = (0x7_0000_0000 + la as u64, 0x7_0000_0100 + lb as u64);
            let (seq_a, seq_b) = if esn {
                (seq_a, seq_b)
            } else {
                (seq_a & 0xffff_ffff, seq_b & 0xffff_ffff)
            };
            let pa: Vec<u8> = (0..la).map(|i| (i * 3) as u8).collect();
            let pb: Vec<u8> = (0..lb).map(|i| (i * 5 + 1) as u8).collect();
            let (mut want_a, mut want_b) = (packet(&pa), packet(&pb));
            ring.seal(&mut want_a, seq_a, esn);
            ring.seal(&mut want_b, seq_b, esn);
            for (backend, cipher) in &ciphers {
                let (mut a, mut b) = (packet(&pa), packet(&pb));
                cipher.seal_two((&mut a, seq_a), (&mut b, seq_b), esn);
                assert!(
                    a == want_a && b == want_b,
                    "{backend:?} {suite} lengths {la} {lb} esn {esn}"
                );
            }
        }
    }
}

/// The list above is not empty on any x86_64 machine the project runs on:
/// the test would otherwise pass by comparing nothing.
#[test]
fn there_are_gcm_backends_to_compare() {
    let backends = gcm_backends();
    eprintln!("compared with ring here: {backends:?}");
    assert!(!backends.is_empty());
}
