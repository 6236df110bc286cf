//! PSK AUTH (RFC 7296 section 2.15), against values computed with
//! Python's hmac (crypto_vectors.py): no RFC publishes one.

use espgw_ike::crypto::auth::{maced_id, psk_auth, signed_octets, verify_psk_auth, KEY_PAD};
use espgw_ike::crypto::transform::Prf;

fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("test vector hex"))
        .collect()
}

fn seq(n: usize, start: u8) -> Vec<u8> {
    (0..n).map(|i| start.wrapping_add(i as u8)).collect()
}

#[test]
fn psk_auth_matches_the_reference() {
    let prf = Prf::HmacSha384;
    let first_message = seq(300, 0x05);
    let nr = seq(32, 0x99);
    let sk_pi = seq(48, 0x33);
    // IDi' : ID_FQDN (2), three reserved bytes, the identity.
    let idi = [&[2u8, 0, 0, 0][..], b"gw-a.example.net"].concat();
    let psk = b"correct horse battery staple";

    let maced = maced_id(prf, &sk_pi, &idi);
    assert_eq!(
        maced.expose(),
        unhex(
            "47847fd45e5fea8aa28d6d8703987ef8dd378a22d636c7a4707b5c6a5df15076\
             af4607f62ab03eb6fdc4cc6ff81ae513"
        )
    );
    let octets = signed_octets(&first_message, &nr, maced.expose());
    assert_eq!(octets.len(), 300 + 32 + 48);
    assert_eq!(&octets[..300], &first_message[..]);
    assert_eq!(&octets[300..332], &nr[..]);
    let auth = psk_auth(prf, psk, &octets);
    let expected = unhex(
        "13f8ea88dc6faec48f1368cd7ed183f9daafe8313014f4b0cc099a48a7148641\
         cea594ce88f249fb304515705a3e1c48",
    );
    assert_eq!(auth.expose(), expected);
    assert!(verify_psk_auth(prf, psk, &octets, &expected));

    // A wrong PSK, a changed message byte or a truncated value fail.
    assert!(!verify_psk_auth(prf, b"wrong", &octets, &expected));
    let mut other = octets.clone();
    other[10] ^= 1;
    assert!(!verify_psk_auth(prf, psk, &other, &expected));
    assert!(!verify_psk_auth(prf, psk, &octets, &expected[..47]));
    assert!(!verify_psk_auth(prf, psk, &octets, &[]));
}

#[test]
fn key_pad_is_the_17_byte_rfc_string() {
    assert_eq!(KEY_PAD.len(), 17);
    assert_eq!(KEY_PAD, b"Key Pad for IKEv2");
}
