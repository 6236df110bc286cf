//! AUTH payload data for pre-shared keys (RFC 7296 section 2.15).
//!
//! ```text
//! InitiatorSignedOctets = RealMessage1 | NonceRData | MACedIDForI
//! MACedIDForI           = prf(SK_pi, RestOfInitIDPayload)
//! AUTH                  = prf( prf(Shared Secret, "Key Pad for IKEv2"),
//!                              <SignedOctets>)
//! ```
//! and symmetrically for the responder (RealMessage2, NonceIData, SK_pr).

use subtle::ConstantTimeEq;

use super::secret::SecretBytes;
use super::transform::Prf;

/// The key pad string of RFC 7296 section 2.15 (17 ASCII bytes, no NUL).
pub const KEY_PAD: &[u8] = b"Key Pad for IKEv2";

/// prf(SK_px, IDx'): `id_payload_body` is the ID payload after its generic
/// header (ID Type, three reserved bytes, identification data); `sk_p` is
/// SK_pi for the initiator's ID, SK_pr for the responder's.
pub fn maced_id(prf: Prf, sk_p: &[u8], id_payload_body: &[u8]) -> SecretBytes {
    prf.compute(sk_p, &[id_payload_body])
}

/// The signed octets: our whole first message as sent (IKE_SA_INIT
/// request for the initiator, response for the responder), the peer's
/// nonce data (Ni/Nr payload body), then [`maced_id`] of our own ID.
pub fn signed_octets(first_message: &[u8], peer_nonce: &[u8], maced_id: &[u8]) -> Vec<u8> {
    [first_message, peer_nonce, maced_id].concat()
}

/// AUTH = prf(prf(PSK, "Key Pad for IKEv2"), signed_octets).
pub fn psk_auth(prf: Prf, psk: &[u8], signed_octets: &[u8]) -> SecretBytes {
    let padded = prf.compute(psk, &[KEY_PAD]);
    prf.compute(padded.expose(), &[signed_octets])
}

/// Checks a received PSK AUTH value in constant time.
pub fn verify_psk_auth(prf: Prf, psk: &[u8], signed_octets: &[u8], received: &[u8]) -> bool {
    let expected = psk_auth(prf, psk, signed_octets);
    bool::from(expected.expose().ct_eq(received))
}
