//! RFC 7427 digital signatures for AUTH method 14: the AlgorithmIdentifier
//! encodings, signing with our private key (aws-lc-rs) and verifying the
//! peer's signature with its end-entity certificate's key (webpki over
//! aws-lc-rs).
//!
//! ```text
//! AUTH data = ASN.1 Length (1 byte) | AlgorithmIdentifier (DER) | Signature Value
//! ```
//! The signed octets are those of RFC 7296 2.15, as for a PSK
//! ([`super::auth::signed_octets`]). ECDSA signature values are the DER
//! `ECDSA-Sig-Value` (RFC 7427 3), RSA ones the plain RSASSA octets.

use std::fmt;

use aws_lc_rs::rsa::KeyPair as RsaKeyPair;
use aws_lc_rs::signature::{self as lc, EcdsaKeyPair};
use pki_types::CertificateDer;
use webpki::aws_lc_rs as algs;
use webpki::EndEntityCert;
use zeroize::Zeroizing;

use super::cert::CertError;

/// Hash Algorithm Identifiers of N(SIGNATURE_HASH_ALGORITHMS) (RFC 7427 7).
pub mod hash {
    /// SHA2-256.
    pub const SHA2_256: u16 = 2;
    /// SHA2-384.
    pub const SHA2_384: u16 = 3;
    /// SHA2-512.
    pub const SHA2_512: u16 = 4;
}

/// The hashes we announce in N(SIGNATURE_HASH_ALGORITHMS) and accept.
pub const SUPPORTED_HASHES: [u16; 3] = [hash::SHA2_256, hash::SHA2_384, hash::SHA2_512];

/// A signature algorithm of AUTH method 14.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignatureScheme {
    /// ecdsa-with-SHA256 (any of our curves).
    EcdsaSha256,
    /// ecdsa-with-SHA384.
    EcdsaSha384,
    /// ecdsa-with-SHA512.
    EcdsaSha512,
    /// sha256WithRSAEncryption (PKCS#1 v1.5).
    RsaPkcs1Sha256,
    /// sha384WithRSAEncryption.
    RsaPkcs1Sha384,
    /// sha512WithRSAEncryption.
    RsaPkcs1Sha512,
    /// RSASSA-PSS, SHA-256, MGF1 with SHA-256, 32-byte salt.
    RsaPssSha256,
}

const ECDSA_SHA256: &[u8] = &[
    0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02,
];
const ECDSA_SHA384: &[u8] = &[
    0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03,
];
const ECDSA_SHA512: &[u8] = &[
    0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x04,
];
const RSA_SHA256: &[u8] = &[
    0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b, 0x05, 0x00,
];
const RSA_SHA384: &[u8] = &[
    0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0c, 0x05, 0x00,
];
const RSA_SHA512: &[u8] = &[
    0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0d, 0x05, 0x00,
];
/// id-RSASSA-PSS with hashAlgorithm sha256, maskGenAlgorithm mgf1 with
/// sha256, saltLength 32, trailerField default.
const RSA_PSS_SHA256: &[u8] = &[
    0x30, 0x41, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a, 0x30, 0x34, 0xa0,
    0x0f, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00,
    0xa1, 0x1c, 0x30, 0x1a, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x08, 0x30,
    0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0xa2, 0x03,
    0x02, 0x01, 0x20,
];

impl SignatureScheme {
    /// Every scheme, for look-ups.
    pub const ALL: [SignatureScheme; 7] = [
        SignatureScheme::EcdsaSha256,
        SignatureScheme::EcdsaSha384,
        SignatureScheme::EcdsaSha512,
        SignatureScheme::RsaPkcs1Sha256,
        SignatureScheme::RsaPkcs1Sha384,
        SignatureScheme::RsaPkcs1Sha512,
        SignatureScheme::RsaPssSha256,
    ];

    /// The DER AlgorithmIdentifier (RFC 7427 Appendix A).
    pub fn algorithm_identifier(self) -> &'static [u8] {
        match self {
            SignatureScheme::EcdsaSha256 => ECDSA_SHA256,
            SignatureScheme::EcdsaSha384 => ECDSA_SHA384,
            SignatureScheme::EcdsaSha512 => ECDSA_SHA512,
            SignatureScheme::RsaPkcs1Sha256 => RSA_SHA256,
            SignatureScheme::RsaPkcs1Sha384 => RSA_SHA384,
            SignatureScheme::RsaPkcs1Sha512 => RSA_SHA512,
            SignatureScheme::RsaPssSha256 => RSA_PSS_SHA256,
        }
    }

    /// The scheme of an AlgorithmIdentifier, byte for byte. RSA with the
    /// NULL parameters omitted is accepted too (RFC 4055 allows both).
    pub fn from_algorithm_identifier(der: &[u8]) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|s| s.algorithm_identifier() == der)
            .or_else(|| {
                Self::ALL.into_iter().find(|s| {
                    let id = s.algorithm_identifier();
                    id.ends_with(&[0x05, 0x00])
                        && id.len() == 15
                        && der.len() == 13
                        && der[0] == 0x30
                        && der[1] == 0x0b
                        && der[2..] == id[2..13]
                })
            })
    }

    /// The RFC 7427 hash it uses.
    pub fn hash(self) -> u16 {
        match self {
            SignatureScheme::EcdsaSha256
            | SignatureScheme::RsaPkcs1Sha256
            | SignatureScheme::RsaPssSha256 => hash::SHA2_256,
            SignatureScheme::EcdsaSha384 | SignatureScheme::RsaPkcs1Sha384 => hash::SHA2_384,
            SignatureScheme::EcdsaSha512 | SignatureScheme::RsaPkcs1Sha512 => hash::SHA2_512,
        }
    }

    /// webpki's verifiers for it (ECDSA: one per curve; webpki refuses
    /// the ones whose curve is not the key's).
    fn verifiers(self) -> Vec<&'static dyn pki_types::SignatureVerificationAlgorithm> {
        match self {
            SignatureScheme::EcdsaSha256 => vec![algs::ECDSA_P256_SHA256, algs::ECDSA_P384_SHA256],
            SignatureScheme::EcdsaSha384 => vec![algs::ECDSA_P384_SHA384, algs::ECDSA_P256_SHA384],
            SignatureScheme::EcdsaSha512 => vec![algs::ECDSA_P256_SHA512, algs::ECDSA_P384_SHA512],
            SignatureScheme::RsaPkcs1Sha256 => vec![algs::RSA_PKCS1_2048_8192_SHA256],
            SignatureScheme::RsaPkcs1Sha384 => vec![algs::RSA_PKCS1_2048_8192_SHA384],
            SignatureScheme::RsaPkcs1Sha512 => vec![algs::RSA_PKCS1_2048_8192_SHA512],
            SignatureScheme::RsaPssSha256 => vec![algs::RSA_PSS_2048_8192_SHA256_LEGACY_KEY],
        }
    }
}

/// The signature algorithms webpki accepts on certificates of a chain.
pub(crate) static CHAIN_ALGORITHMS: &[&dyn pki_types::SignatureVerificationAlgorithm] = &[
    algs::ECDSA_P256_SHA256,
    algs::ECDSA_P256_SHA384,
    algs::ECDSA_P384_SHA256,
    algs::ECDSA_P384_SHA384,
    algs::ECDSA_P384_SHA512,
    algs::ECDSA_P521_SHA512,
    algs::RSA_PKCS1_2048_8192_SHA256,
    algs::RSA_PKCS1_2048_8192_SHA384,
    algs::RSA_PKCS1_2048_8192_SHA512,
    algs::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
    algs::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
    algs::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
];

/// The AUTH payload data of method 14: ASN.1 length, AlgorithmIdentifier,
/// signature value.
pub fn auth_data(scheme: SignatureScheme, signature: &[u8]) -> Vec<u8> {
    let id = scheme.algorithm_identifier();
    let mut out = Vec::with_capacity(1 + id.len() + signature.len());
    // Every identifier above is shorter than 256 bytes.
    out.push(id.len() as u8);
    out.extend_from_slice(id);
    out.extend_from_slice(signature);
    out
}

/// Splits method-14 AUTH data: the scheme and the signature value.
pub fn parse_auth_data(data: &[u8]) -> Result<(SignatureScheme, &[u8]), CertError> {
    let (&len, rest) = data.split_first().ok_or(CertError::BadSignature)?;
    let len = usize::from(len);
    if rest.len() < len {
        return Err(CertError::BadSignature);
    }
    let (id, signature) = rest.split_at(len);
    let scheme =
        SignatureScheme::from_algorithm_identifier(id).ok_or(CertError::UnsupportedAlgorithm)?;
    Ok((scheme, signature))
}

/// Verifies method-14 AUTH `data` over `octets` with the key of the DER
/// end-entity certificate `cert`.
pub fn verify_auth(cert: &[u8], octets: &[u8], data: &[u8]) -> Result<(), CertError> {
    let (scheme, signature) = parse_auth_data(data)?;
    let der = CertificateDer::from(cert);
    let ee = EndEntityCert::try_from(&der).map_err(|_| CertError::Malformed)?;
    let ok = scheme
        .verifiers()
        .iter()
        .any(|alg| ee.verify_signature(*alg, octets, signature).is_ok());
    if ok {
        Ok(())
    } else {
        Err(CertError::BadSignature)
    }
}

/// The kind of a private key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// ECDSA on P-256.
    EcdsaP256,
    /// ECDSA on P-384.
    EcdsaP384,
    /// RSA (2048 to 8192 bits).
    Rsa,
}

/// Our private key: the DER as given (PKCS#8, SEC1 or PKCS#1), checked
/// once to load, wiped on drop. `Debug` prints the kind only.
#[derive(Clone)]
pub struct PrivateKey {
    kind: KeyKind,
    der: Zeroizing<Vec<u8>>,
    /// RSA: sign with PSS instead of PKCS#1 v1.5.
    pss: bool,
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PrivateKey({:?})", self.kind)
    }
}

impl PrivateKey {
    /// A key from DER: PKCS#8 (EC or RSA), SEC1 `ECPrivateKey` (P-256,
    /// P-384) or PKCS#1 `RSAPrivateKey`.
    pub fn from_der(der: &[u8]) -> Result<Self, CertError> {
        let kind = if EcdsaKeyPair::from_private_key_der(&lc::ECDSA_P256_SHA256_ASN1_SIGNING, der)
            .is_ok()
        {
            KeyKind::EcdsaP256
        } else if EcdsaKeyPair::from_private_key_der(&lc::ECDSA_P384_SHA384_ASN1_SIGNING, der)
            .is_ok()
        {
            KeyKind::EcdsaP384
        } else if RsaKeyPair::from_pkcs8(der).is_ok() || RsaKeyPair::from_der(der).is_ok() {
            KeyKind::Rsa
        } else {
            return Err(CertError::BadKey);
        };
        Ok(PrivateKey {
            kind,
            der: Zeroizing::new(der.to_vec()),
            pss: false,
        })
    }

    /// A key from PEM (`PRIVATE KEY`, `EC PRIVATE KEY`, `RSA PRIVATE KEY`).
    pub fn from_pem(pem: &[u8]) -> Result<Self, CertError> {
        use pki_types::pem::PemObject;
        let key = pki_types::PrivateKeyDer::from_pem_slice(pem).map_err(|_| CertError::BadKey)?;
        Self::from_der(key.secret_der())
    }

    /// An RSA key that signs with RSASSA-PSS (SHA-256) rather than
    /// PKCS#1 v1.5; no effect on ECDSA keys.
    pub fn with_pss(mut self, pss: bool) -> Self {
        self.pss = pss && self.kind == KeyKind::Rsa;
        self
    }

    /// The kind of key.
    pub fn kind(&self) -> KeyKind {
        self.kind
    }

    /// The scheme we sign with, given the hashes the peer announced
    /// (None: it sent no SIGNATURE_HASH_ALGORITHMS; we then use our
    /// default). The hash follows the key's strength as strongSwan does:
    /// SHA-256 for P-256, SHA-384 for P-384 (whatever the peer said: no
    /// other is possible), SHA-256 for RSA unless the peer wants another.
    pub fn scheme(&self, peer_hashes: Option<&[u16]>) -> SignatureScheme {
        let preferred: &[SignatureScheme] = match (self.kind, self.pss) {
            // aws-lc signs ECDSA only with the curve's own hash.
            (KeyKind::EcdsaP256, _) => &[SignatureScheme::EcdsaSha256],
            (KeyKind::EcdsaP384, _) => &[SignatureScheme::EcdsaSha384],
            (KeyKind::Rsa, true) => &[SignatureScheme::RsaPssSha256],
            (KeyKind::Rsa, false) => &[
                SignatureScheme::RsaPkcs1Sha256,
                SignatureScheme::RsaPkcs1Sha384,
                SignatureScheme::RsaPkcs1Sha512,
            ],
        };
        preferred
            .iter()
            .copied()
            .find(|s| peer_hashes.is_none_or(|h| h.contains(&s.hash())))
            .unwrap_or(preferred[0])
    }

    /// Signs `octets` with `scheme`: the signature value.
    pub fn sign(&self, scheme: SignatureScheme, octets: &[u8]) -> Result<Vec<u8>, CertError> {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let ecdsa = |alg: &'static lc::EcdsaSigningAlgorithm| -> Result<Vec<u8>, CertError> {
            let kp = EcdsaKeyPair::from_private_key_der(alg, &self.der)
                .map_err(|_| CertError::BadKey)?;
            kp.sign(&rng, octets)
                .map(|s| s.as_ref().to_vec())
                .map_err(|_| CertError::BadKey)
        };
        let rsa = |enc: &'static dyn lc::RsaEncoding| -> Result<Vec<u8>, CertError> {
            let kp = RsaKeyPair::from_pkcs8(&self.der)
                .or_else(|_| RsaKeyPair::from_der(&self.der))
                .map_err(|_| CertError::BadKey)?;
            let mut sig = vec![0u8; kp.public_modulus_len()];
            kp.sign(enc, &rng, octets, &mut sig)
                .map_err(|_| CertError::BadKey)?;
            Ok(sig)
        };
        match (self.kind, scheme) {
            (KeyKind::EcdsaP256, SignatureScheme::EcdsaSha256) => {
                ecdsa(&lc::ECDSA_P256_SHA256_ASN1_SIGNING)
            }
            (KeyKind::EcdsaP384, SignatureScheme::EcdsaSha384) => {
                ecdsa(&lc::ECDSA_P384_SHA384_ASN1_SIGNING)
            }
            (KeyKind::Rsa, SignatureScheme::RsaPkcs1Sha256) => rsa(&lc::RSA_PKCS1_SHA256),
            (KeyKind::Rsa, SignatureScheme::RsaPkcs1Sha384) => rsa(&lc::RSA_PKCS1_SHA384),
            (KeyKind::Rsa, SignatureScheme::RsaPkcs1Sha512) => rsa(&lc::RSA_PKCS1_SHA512),
            (KeyKind::Rsa, SignatureScheme::RsaPssSha256) => rsa(&lc::RSA_PSS_SHA256),
            _ => Err(CertError::UnsupportedAlgorithm),
        }
    }

    /// Method-14 AUTH data over `octets`.
    pub fn sign_auth(
        &self,
        peer_hashes: Option<&[u16]>,
        octets: &[u8],
    ) -> Result<Vec<u8>, CertError> {
        let scheme = self.scheme(peer_hashes);
        Ok(auth_data(scheme, &self.sign(scheme, octets)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_well_formed_der() {
        for s in SignatureScheme::ALL {
            let id = s.algorithm_identifier();
            let mut i = id;
            let (tag, contents) = crate::crypto::der::tlv(&mut i).unwrap();
            assert_eq!((tag, i.len()), (0x30, 0), "{s:?}");
            let mut c = contents;
            let (t, _) = crate::crypto::der::tlv(&mut c).unwrap();
            assert_eq!(t, 0x06);
            assert_eq!(SignatureScheme::from_algorithm_identifier(id), Some(s));
        }
        // sha256WithRSAEncryption without the NULL.
        assert_eq!(
            SignatureScheme::from_algorithm_identifier(&[
                0x30, 0x0b, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b
            ]),
            Some(SignatureScheme::RsaPkcs1Sha256)
        );
        assert_eq!(
            SignatureScheme::from_algorithm_identifier(&[0x30, 0x00]),
            None
        );
    }

    #[test]
    fn auth_data_layout() {
        let d = auth_data(SignatureScheme::EcdsaSha256, &[1, 2, 3]);
        assert_eq!(d[0], 12);
        assert_eq!(&d[1..13], ECDSA_SHA256);
        assert_eq!(&d[13..], &[1, 2, 3]);
        assert_eq!(
            parse_auth_data(&d).unwrap(),
            (SignatureScheme::EcdsaSha256, &[1u8, 2, 3][..])
        );
        assert_eq!(parse_auth_data(&[]), Err(CertError::BadSignature));
        assert_eq!(parse_auth_data(&d[..5]), Err(CertError::BadSignature));
        assert_eq!(parse_auth_data(&[0]), Err(CertError::UnsupportedAlgorithm));
        assert!(PrivateKey::from_der(&[0x30, 0x00]).is_err());
    }
}
