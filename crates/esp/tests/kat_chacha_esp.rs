//! The ChaCha20-Poly1305 ESP packet of RFC 7634 Appendix A ("ESP Example"),
//! from tests/vectors/rfc7634_chacha20_poly1305_esp.json, reproduced byte
//! for byte including the outer IPv4 header (140 octets).
//!
//! The published IV (1011121314151617) is not the sequence number (5), so
//! the packet is sealed through `EspAead::seal_with_iv` (what `seal` calls)
//! over the backend `new_cipher` picks, and opened through `new_cipher`.

mod kat_support;

use espgw_esp::crypto::aead::EspAead;
use espgw_esp::crypto::ring_aead::RingAead;
use espgw_esp::crypto::{new_cipher, IcvMismatch};
use espgw_esp::Suite;
use kat_support::{field, seq_of, vectors};

struct Published {
    keymat: Vec<u8>,
    seq: u64,
    esn: bool,
    iv: [u8; 8],
    plaintext: Vec<u8>,
    outer_header: Vec<u8>,
    /// outer IPv4 || SPI || seq || IV || ciphertext || tag
    ip_packet: Vec<u8>,
}

fn published() -> Published {
    let all = vectors("rfc7634_chacha20_poly1305_esp.json");
    assert_eq!(all.len(), 1);
    let v = &all[0];
    let keymat = field(v, "keymat");
    assert_eq!(keymat, [field(v, "key"), field(v, "salt")].concat());
    let (seq, esn) = seq_of(&field(v, "seq"));
    let outer_header = field(v, "outer_ipv4_header");
    let ip_packet = [
        outer_header.clone(),
        field(v, "spi"),
        field(v, "seq"),
        field(v, "iv"),
        field(v, "ciphertext"),
        field(v, "tag"),
    ]
    .concat();
    assert_eq!(ip_packet.len(), 140, "RFC 7634 A: 140-octet packet");
    Published {
        keymat,
        seq,
        esn,
        iv: field(v, "iv").try_into().unwrap(),
        plaintext: field(v, "plaintext"),
        outer_header,
        ip_packet,
    }
}

#[test]
fn seal_reproduces_the_rfc7634_packet() {
    let p = published();
    let esp = EspAead::<RingAead>::new(Suite::Chacha20Poly1305, &p.keymat).unwrap();
    let spi = &p.ip_packet[20..24];
    let mut packet = [
        p.outer_header.clone(),
        spi.to_vec(),
        vec![0; 4 + 8],
        p.plaintext.clone(),
        vec![0; 16],
    ]
    .concat();
    esp.seal_with_iv(&mut packet[20..], p.seq, p.esn, p.iv);
    assert_eq!(packet, p.ip_packet);
}

#[test]
fn new_cipher_opens_the_rfc7634_packet_and_rejects_tampering() {
    let p = published();
    let cipher = new_cipher(Suite::Chacha20Poly1305, &p.keymat, &[]).unwrap();
    let mut packet = p.ip_packet.clone();
    cipher.open(&mut packet[20..], p.seq, p.esn).unwrap();
    assert_eq!(&packet[20 + 16..140 - 16], &p.plaintext[..]);

    for byte in 20..140 {
        let mut packet = p.ip_packet.clone();
        packet[byte] ^= 0x80;
        assert_eq!(
            cipher.open(&mut packet[20..], p.seq, p.esn),
            Err(IcvMismatch),
            "byte {byte}"
        );
    }
    // Same packet under ESN with nonzero high bits: the AAD differs.
    let mut packet = p.ip_packet.clone();
    assert_eq!(
        cipher.open(&mut packet[20..], p.seq | 1 << 32, true),
        Err(IcvMismatch)
    );
}

#[test]
fn wrong_key_lengths_are_refused() {
    let p = published();
    let err = new_cipher(Suite::Chacha20Poly1305, &p.keymat[..32], &[])
        .err()
        .unwrap();
    assert_eq!((err.expected, err.got), (36, 32));
    assert!(new_cipher(Suite::Chacha20Poly1305, &p.keymat, &[0; 32]).is_err());
}
