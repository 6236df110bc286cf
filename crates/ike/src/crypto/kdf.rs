//! Key derivation: SKEYSEED and the IKE SA keys (RFC 7296 section 2.14),
//! SKEYSEED of a rekeyed IKE SA (section 2.18), and CHILD_SA KEYMAT
//! (section 2.17) laid out the way espgw's SA config takes it.

use super::error::CryptoError;
use super::proposal::IkeSuite;
use super::secret::SecretBytes;
use super::transform::{EspSuite, Prf};

/// SKEYSEED = prf(Ni | Nr, g^ir) (RFC 7296 section 2.14). The nonces are
/// the key, concatenated (RFC 7296 notes HMAC accepts any key length, so no
/// special case applies to the PRFs espgw has).
pub fn skeyseed(prf: Prf, ni: &[u8], nr: &[u8], shared_secret: &[u8]) -> SecretBytes {
    // The nonces are public: no need to wipe their concatenation.
    prf.compute(&[ni, nr].concat(), &[shared_secret])
}

/// SKEYSEED of a new IKE SA that rekeys an old one (RFC 7296 section
/// 2.18): prf(SK_d (old), g^ir (new) | Ni | Nr), with the new exchange's
/// nonces.
pub fn rekey_skeyseed(
    prf: Prf,
    old_sk_d: &[u8],
    new_shared_secret: &[u8],
    ni: &[u8],
    nr: &[u8],
) -> SecretBytes {
    rekey_skeyseed_with_additional(prf, old_sk_d, new_shared_secret, ni, nr, &[])
}

/// SKEYSEED of a new IKE SA whose rekey ran RFC 9370 additional key
/// exchanges (IKE_FOLLOWUP_KE, RFC 9370 section 2.2.4):
/// prf(SK_d (old), SK(0) | Ni | Nr | SK(1) | ... | SK(n)), SK(0) the
/// CREATE_CHILD_SA exchange's shared secret and SK(1..n) the additional
/// exchanges', in order. With none it is [`rekey_skeyseed`].
pub fn rekey_skeyseed_with_additional(
    prf: Prf,
    old_sk_d: &[u8],
    first_shared_secret: &[u8],
    ni: &[u8],
    nr: &[u8],
    additional_shared_secrets: &[&[u8]],
) -> SecretBytes {
    let mut parts: Vec<&[u8]> = vec![first_shared_secret, ni, nr];
    parts.extend_from_slice(additional_shared_secrets);
    prf.compute(old_sk_d, &parts)
}

/// The seven IKE SA keys (RFC 7296 section 2.14). For AEAD suites SK_ai
/// and SK_ar are empty and SK_ei/SK_er end with the 4-byte salt (RFC 5282
/// section 7.1, RFC 7634 section 3).
#[derive(Clone, Debug)]
pub struct IkeSaKeys {
    /// Derives CHILD_SA keys and the next IKE SA's SKEYSEED.
    pub sk_d: SecretBytes,
    /// Integrity key, initiator to responder.
    pub sk_ai: SecretBytes,
    /// Integrity key, responder to initiator.
    pub sk_ar: SecretBytes,
    /// Encryption key (and salt), initiator to responder.
    pub sk_ei: SecretBytes,
    /// Encryption key (and salt), responder to initiator.
    pub sk_er: SecretBytes,
    /// Key for the initiator's AUTH computation.
    pub sk_pi: SecretBytes,
    /// Key for the responder's AUTH computation.
    pub sk_pr: SecretBytes,
}

impl IkeSaKeys {
    /// {SK_d | SK_ai | SK_ar | SK_ei | SK_er | SK_pi | SK_pr}
    ///   = prf+(SKEYSEED, Ni | Nr | SPIi | SPIr).
    pub fn derive(
        suite: &IkeSuite,
        skeyseed: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: &[u8; 8],
        spi_r: &[u8; 8],
    ) -> Result<Self, CryptoError> {
        let prf_len = suite.prf.output_len();
        let integ_len = suite.integrity.map_or(0, |i| i.key_len());
        let enc_len = suite.encryption.keymat_len();
        let total = 3 * prf_len + 2 * integ_len + 2 * enc_len;
        let keymat = suite
            .prf
            .prf_plus(skeyseed, &[ni, nr, spi_i, spi_r], total)?;
        let mut rest = keymat.expose();
        let mut take = |n: usize| {
            let (head, tail) = rest.split_at(n);
            rest = tail;
            SecretBytes::from_slice(head)
        };
        Ok(IkeSaKeys {
            sk_d: take(prf_len),
            sk_ai: take(integ_len),
            sk_ar: take(integ_len),
            sk_ei: take(enc_len),
            sk_er: take(enc_len),
            sk_pi: take(prf_len),
            sk_pr: take(prf_len),
        })
    }
}

/// One direction of a CHILD_SA, as espgw's `[[tunnel]]` takes it:
/// `key` is the cipher key followed by the salt for GCM and ChaCha20
/// (docs/config.md), `auth_key` is empty for AEAD suites.
#[derive(Clone, Debug)]
pub struct EspKeys {
    /// Cipher key then salt.
    pub key: SecretBytes,
    /// HMAC key (CBC suites only).
    pub auth_key: SecretBytes,
}

/// Both directions of a CHILD_SA.
#[derive(Clone, Debug)]
pub struct ChildSaKeys {
    /// Protects traffic from the IKE SA's original initiator to the
    /// responder (the initiator's outbound SA, the responder's inbound SA).
    pub initiator_to_responder: EspKeys,
    /// Protects traffic from the responder to the initiator.
    pub responder_to_initiator: EspKeys,
}

impl ChildSaKeys {
    /// KEYMAT = prf+(SK_d, Ni | Nr), or with PFS
    /// prf+(SK_d, g^ir (new) | Ni | Nr) (RFC 7296 section 2.17). Ni and Nr
    /// are the nonces of the exchange that created the CHILD_SA (the
    /// IKE_SA_INIT nonces for the first one). Keys for the initiator to
    /// responder direction come first; within a direction the encryption
    /// key (with its salt, RFC 4106 section 8.1 / RFC 7634 section 4)
    /// precedes the integrity key.
    pub fn derive(
        prf: Prf,
        sk_d: &[u8],
        pfs_shared_secret: Option<&[u8]>,
        ni: &[u8],
        nr: &[u8],
        suite: EspSuite,
    ) -> Result<Self, CryptoError> {
        Self::derive_with_additional(prf, sk_d, pfs_shared_secret, ni, nr, &[], suite)
    }

    /// As [`ChildSaKeys::derive`], with the shared secrets of RFC 9370
    /// additional key exchanges (IKE_FOLLOWUP_KE after CREATE_CHILD_SA)
    /// after the nonces: KEYMAT = prf+(SK_d, SK(0) | Ni | Nr | SK(1) |
    /// ... | SK(n)) (RFC 9370 2.2.4), SK(0) being the PFS secret.
    pub fn derive_with_additional(
        prf: Prf,
        sk_d: &[u8],
        pfs_shared_secret: Option<&[u8]>,
        ni: &[u8],
        nr: &[u8],
        additional_shared_secrets: &[&[u8]],
        suite: EspSuite,
    ) -> Result<Self, CryptoError> {
        let enc_len = suite.key_len();
        let integ_len = suite.auth_key_len();
        let total = 2 * (enc_len + integ_len);
        let mut seed: Vec<&[u8]> = pfs_shared_secret.into_iter().collect();
        seed.extend([ni, nr]);
        seed.extend_from_slice(additional_shared_secrets);
        let keymat = prf.prf_plus(sk_d, &seed, total)?;
        let mut rest = keymat.expose();
        let mut take = |n: usize| {
            let (head, tail) = rest.split_at(n);
            rest = tail;
            SecretBytes::from_slice(head)
        };
        let initiator_to_responder = EspKeys {
            key: take(enc_len),
            auth_key: take(integ_len),
        };
        let responder_to_initiator = EspKeys {
            key: take(enc_len),
            auth_key: take(integ_len),
        };
        Ok(ChildSaKeys {
            initiator_to_responder,
            responder_to_initiator,
        })
    }
}
