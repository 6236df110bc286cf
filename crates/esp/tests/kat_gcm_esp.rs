//! AES-GCM ESP packets of draft-mcgrew-gcm-test-01 §4 ("Test Cases for the
//! use of GCM and GMAC in IPsec ESP", D. McGrew, 2009), from
//! tests/vectors/mcgrew_gcm_esp.json.
//!
//! Of the 17 published packets, the AES-128 and AES-256 GCM ones are our
//! suites aes128gcm16 / aes256gcm16. Case 7 (AES-192) and case 15 (GMAC,
//! RFC 4543) are not suites espgw speaks, so they are only counted.
//!
//! Our `seal` takes the IV from the sequence number (so nonces never repeat);
//! in none of the published packets is the IV equal to the sequence number,
//! so the byte-for-byte reproduction goes through the same ESP code with the
//! published IV (`EspAead::seal_with_iv`, which `seal` calls), over the
//! backend `new_cipher` picks (`FastGcm`: espgw-aesgcm for these short
//! packets) and over ring alone. `open`, which reads the IV from the packet,
//! goes through `new_cipher` itself.

mod kat_support;

use espgw_esp::crypto::aead::{AeadPrimitive, EspAead};
use espgw_esp::crypto::fast_gcm::FastGcm;
use espgw_esp::crypto::ring_aead::RingAead;
use espgw_esp::crypto::{new_cipher, IcvMismatch};
use espgw_esp::Suite;
use kat_support::{field, seq_of, vectors};

struct Case {
    name: String,
    suite: Suite,
    keymat: Vec<u8>,
    seq: u64,
    esn: bool,
    iv: [u8; 8],
    plaintext: Vec<u8>,
    packet: Vec<u8>,
}

/// The published cases that are aes128gcm16 / aes256gcm16, and how many
/// were published in all.
fn cases() -> (Vec<Case>, usize) {
    let all = vectors("mcgrew_gcm_esp.json");
    let total = all.len();
    let ours = all
        .iter()
        .filter(|v| v["algorithm"] == "AES-GCM-ESP")
        .filter_map(|v| {
            let key = field(v, "key");
            let suite = match key.len() {
                16 => Suite::Aes128Gcm16,
                32 => Suite::Aes256Gcm16,
                _ => return None,
            };
            let nonce = field(v, "nonce");
            let (seq, esn) = seq_of(&field(v, "seq"));
            let mut keymat = key;
            keymat.extend_from_slice(&nonce[..4]);
            Some(Case {
                name: v["name"].as_str().unwrap().to_string(),
                suite,
                keymat,
                seq,
                esn,
                iv: nonce[4..].try_into().unwrap(),
                plaintext: field(v, "plaintext"),
                packet: field(v, "packet"),
            })
        })
        .collect();
    (ours, total)
}

#[test]
fn all_seventeen_are_read_and_fifteen_are_our_suites() {
    let (ours, total) = cases();
    assert_eq!(total, 17);
    assert_eq!(ours.len(), 15);
    assert_eq!(
        ours.iter()
            .filter(|c| c.suite == Suite::Aes256Gcm16)
            .count(),
        4
    );
}

#[test]
fn seal_reproduces_every_published_packet() {
    seal_reproduces_with::<FastGcm>();
    seal_reproduces_with::<RingAead>();
}

fn seal_reproduces_with<P: AeadPrimitive>() {
    for c in cases().0 {
        let esp = EspAead::<P>::new(c.suite, &c.keymat).unwrap();
        let mut buf = Vec::new();
        buf.extend_from_slice(&c.packet[..4]); // SPI: the engine writes it
        buf.extend_from_slice(&[0; 4 + 8]);
        buf.extend_from_slice(&c.plaintext);
        buf.extend_from_slice(&[0; 16]);
        esp.seal_with_iv(&mut buf, c.seq, c.esn, c.iv);
        assert_eq!(buf, c.packet, "{}", c.name);
    }
}

#[test]
fn new_cipher_opens_every_published_packet() {
    for c in cases().0 {
        let cipher = new_cipher(c.suite, &c.keymat, &[]).unwrap();
        assert_eq!(cipher.suite(), c.suite);
        let mut buf = c.packet.clone();
        cipher.open(&mut buf, c.seq, c.esn).unwrap();
        assert_eq!(&buf[16..buf.len() - 16], &c.plaintext[..], "{}", c.name);
    }
}

#[test]
fn new_cipher_rejects_any_flipped_bit_and_the_wrong_esn() {
    for c in cases().0 {
        let cipher = new_cipher(c.suite, &c.keymat, &[]).unwrap();
        for byte in 0..c.packet.len() {
            let mut buf = c.packet.clone();
            buf[byte] ^= 0x01;
            assert_eq!(
                cipher.open(&mut buf, c.seq, c.esn),
                Err(IcvMismatch),
                "{} byte {byte}",
                c.name
            );
        }
        // The high half of an ESN is not on the wire but is authenticated.
        if c.esn {
            let mut buf = c.packet.clone();
            let wrong = c.seq ^ (1 << 32);
            assert_eq!(cipher.open(&mut buf, wrong, true), Err(IcvMismatch));
        }
    }
}

#[test]
fn new_cipher_seal_sends_the_sequence_number_as_iv_and_round_trips() {
    for c in cases().0 {
        let cipher = new_cipher(c.suite, &c.keymat, &[]).unwrap();
        let mut buf = c.packet.clone();
        let end = buf.len() - 16;
        buf[16..end].copy_from_slice(&c.plaintext);
        cipher.seal(&mut buf, c.seq, c.esn);
        assert_eq!(&buf[..4], &c.packet[..4]);
        assert_eq!(&buf[4..8], &(c.seq as u32).to_be_bytes());
        assert_eq!(&buf[8..16], &c.seq.to_be_bytes());
        cipher.open(&mut buf, c.seq, c.esn).unwrap();
        assert_eq!(&buf[16..buf.len() - 16], &c.plaintext[..], "{}", c.name);
    }
}
