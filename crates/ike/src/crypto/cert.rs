//! X.509 certificates for IKE authentication: loading (PEM/DER), chain
//! validation against trusted CAs (rustls-webpki), the CERTREQ hash of a
//! CA (RFC 7296 3.7), and whether an IKE identity is the certificate's.
//!
//! The engine reads no clock: validation takes the UNIX time the caller
//! passes (`EngineConfig::unix_time_at_zero_ms`, docs/ike.md).

use std::fmt;

use pki_types::{CertificateDer, UnixTime};
use webpki::{EndEntityCert, KeyPurposeIdIter};

use super::der::{self, AltName};
use super::signature::CHAIN_ALGORITHMS;
use crate::message::{IdType, Identification};

/// Why a certificate (or the signature made with its key) was not
/// accepted. Carries no key material.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CertError {
    /// The peer sent no X.509 certificate.
    Missing,
    /// The certificate does not parse.
    Malformed,
    /// Its notAfter (or a CA's) is in the past.
    Expired,
    /// Its notBefore (or a CA's) is in the future.
    NotYetValid,
    /// No chain leads from it to one of our trusted CAs.
    UntrustedIssuer,
    /// A chain exists but is invalid (a CA without cA=TRUE, a bad
    /// signature on a certificate, a path too long...).
    InvalidChain,
    /// The peer's IKE identity is not in its certificate.
    IdentityMismatch,
    /// The AUTH signature does not verify with the certificate's key.
    BadSignature,
    /// A signature algorithm we do not implement.
    UnsupportedAlgorithm,
    /// Our private key does not load or does not sign.
    BadKey,
    /// The engine was given no UNIX time, so validity cannot be checked.
    NoTime,
}

impl fmt::Display for CertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            CertError::Missing => "no certificate",
            CertError::Malformed => "malformed certificate",
            CertError::Expired => "certificate expired",
            CertError::NotYetValid => "certificate not yet valid",
            CertError::UntrustedIssuer => "certificate not issued by a trusted CA",
            CertError::InvalidChain => "invalid certificate chain",
            CertError::IdentityMismatch => "identity not in certificate",
            CertError::BadSignature => "signature does not verify",
            CertError::UnsupportedAlgorithm => "unsupported signature algorithm",
            CertError::BadKey => "private key unusable",
            CertError::NoTime => "no UNIX time to check validity against",
        };
        f.write_str(s)
    }
}

impl std::error::Error for CertError {}

/// Every certificate in a PEM text (`CERTIFICATE` blocks), as DER.
pub fn certs_from_pem(pem: &[u8]) -> Result<Vec<Vec<u8>>, CertError> {
    use pki_types::pem::PemObject;
    let certs = CertificateDer::pem_slice_iter(pem)
        .map(|c| c.map(|c| c.to_vec()).map_err(|_| CertError::Malformed))
        .collect::<Result<Vec<_>, _>>()?;
    if certs.is_empty() {
        return Err(CertError::Missing);
    }
    for c in &certs {
        parse(c)?;
    }
    Ok(certs)
}

fn parse(cert: &[u8]) -> Result<(), CertError> {
    let der = CertificateDer::from(cert);
    EndEntityCert::try_from(&der)
        .map(|_| ())
        .map_err(|_| CertError::Malformed)
}

/// The certificate's subject (the DER Name, SEQUENCE included).
pub fn subject(cert: &[u8]) -> Result<Vec<u8>, CertError> {
    let der = CertificateDer::from(cert);
    let ee = EndEntityCert::try_from(&der).map_err(|_| CertError::Malformed)?;
    Ok(der::wrap(0x30, ee.subject()))
}

/// The ID_DER_ASN1_DN identity of the certificate's subject: what
/// strongSwan uses as its identity when none is configured.
pub fn subject_id(cert: &[u8]) -> Result<Identification, CertError> {
    Ok(Identification {
        id_type: IdType::DER_ASN1_DN,
        data: subject(cert)?,
    })
}

/// The CERTREQ entry of a CA: SHA-1 of its SubjectPublicKeyInfo (RFC 7296
/// 3.7).
pub fn ca_hash(ca_cert: &[u8]) -> Result<[u8; 20], CertError> {
    let der = CertificateDer::from(ca_cert);
    let ee = EndEntityCert::try_from(&der).map_err(|_| CertError::Malformed)?;
    let spki = ee.subject_public_key_info();
    let d = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, spki.as_ref());
    let mut out = [0u8; 20];
    out.copy_from_slice(d.as_ref());
    Ok(out)
}

/// Whether `id` names the certificate's subject: ID_FQDN a dNSName
/// (ASCII case ignored), ID_RFC822_ADDR an rfc822Name (case ignored),
/// ID_IPV4/IPV6_ADDR an iPAddress, ID_DER_ASN1_DN the subject DN (the
/// same DER bytes). Other ID types never match.
pub fn id_matches(cert: &[u8], id: &Identification) -> Result<bool, CertError> {
    if id.id_type == IdType::DER_ASN1_DN {
        return Ok(subject(cert)? == id.data);
    }
    let names = der::alt_names(cert).ok_or(CertError::Malformed)?;
    Ok(names.iter().any(|n| match (id.id_type, n) {
        (IdType::FQDN, AltName::Dns(d)) | (IdType::RFC822_ADDR, AltName::Email(d)) => {
            d.eq_ignore_ascii_case(&id.data)
        }
        (IdType::IPV4_ADDR | IdType::IPV6_ADDR, AltName::Ip(a)) => *a == id.data.as_slice(),
        _ => false,
    }))
}

/// Any extended key usage is fine: IKE peers' certificates carry
/// serverAuth, clientAuth, ikeIntermediate or none, and strongSwan checks
/// none of them by default.
struct AnyUsage;

impl webpki::ExtendedKeyUsageValidator for AnyUsage {
    fn validate(&self, iter: KeyPurposeIdIter<'_, '_>) -> Result<(), webpki::Error> {
        for purpose in iter {
            purpose?;
        }
        Ok(())
    }
}

/// Validates `end_entity` (DER) with `intermediates` (the peer's other
/// CERT payloads) up to one of `trusted` (our CA certificates, each a
/// trust anchor) at `unix_time` (seconds).
pub fn validate_chain(
    end_entity: &[u8],
    intermediates: &[Vec<u8>],
    trusted: &[Vec<u8>],
    unix_time: u64,
) -> Result<(), CertError> {
    let ee_der = CertificateDer::from(end_entity);
    let ee = EndEntityCert::try_from(&ee_der).map_err(|_| CertError::Malformed)?;
    let trusted_der: Vec<CertificateDer<'_>> = trusted
        .iter()
        .map(|c| CertificateDer::from(&c[..]))
        .collect();
    let anchors = trusted_der
        .iter()
        .filter_map(|c| webpki::anchor_from_trusted_cert(c).ok())
        .collect::<Vec<_>>();
    let inter: Vec<CertificateDer<'_>> = intermediates
        .iter()
        .map(|c| CertificateDer::from(&c[..]))
        .collect();
    let time = UnixTime::since_unix_epoch(std::time::Duration::from_secs(unix_time));
    ee.verify_for_usage(
        CHAIN_ALGORITHMS,
        &anchors,
        &inter,
        time,
        AnyUsage,
        None,
        None,
    )
    .map(|_| ())
    .map_err(|e| match e {
        webpki::Error::CertExpired { .. } => CertError::Expired,
        webpki::Error::CertNotValidYet { .. } => CertError::NotYetValid,
        webpki::Error::UnknownIssuer => CertError::UntrustedIssuer,
        webpki::Error::BadDer | webpki::Error::BadDerTime => CertError::Malformed,
        _ => CertError::InvalidChain,
    })
}
