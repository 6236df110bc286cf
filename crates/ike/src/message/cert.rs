//! Certificate (RFC 7296 3.6) and Certificate Request (3.7) payloads.
//!
//! ```text
//! | Cert Encoding |   Certificate Data / Certification Authority ...  |
//! ```

use super::error::Problem;
use super::payload::{need, PayloadBody, TooLong};
use super::types::CertEncoding;

/// Length of one CA entry in a CERTREQ for X.509 (a SHA-1 hash of the CA's
/// SubjectPublicKeyInfo, RFC 7296 3.7).
pub const CA_HASH_LEN: usize = 20;

/// A CERT payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Certificate {
    /// Cert Encoding.
    pub encoding: CertEncoding,
    /// Certificate Data (DER for [`CertEncoding::X509_SIGNATURE`]).
    pub data: Vec<u8>,
}

/// A CERTREQ payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateRequest {
    /// Cert Encoding requested.
    pub encoding: CertEncoding,
    /// Certification Authority: concatenated SHA-1 hashes of trusted CAs'
    /// public keys for X.509 (may be empty: "any").
    pub authorities: Vec<u8>,
}

impl CertificateRequest {
    /// The CA hashes, 20 bytes each; None when the data is not a whole
    /// number of hashes (the engine then ignores the request's CA list).
    pub fn ca_hashes(&self) -> Option<impl Iterator<Item = &[u8]>> {
        self.authorities
            .len()
            .is_multiple_of(CA_HASH_LEN)
            .then(|| self.authorities.chunks_exact(CA_HASH_LEN))
    }
}

fn parse(body: &[u8]) -> Result<(CertEncoding, Vec<u8>), Problem> {
    need(body, 1)?;
    Ok((CertEncoding(body[0]), body[1..].to_vec()))
}

impl PayloadBody for Certificate {
    fn parse_body(body: &[u8]) -> Result<Self, Problem> {
        let (encoding, data) = parse(body)?;
        Ok(Certificate { encoding, data })
    }
    fn emit_body(&self, out: &mut Vec<u8>) -> Result<(), TooLong> {
        out.push(self.encoding.0);
        out.extend_from_slice(&self.data);
        Ok(())
    }
}

impl PayloadBody for CertificateRequest {
    fn parse_body(body: &[u8]) -> Result<Self, Problem> {
        let (encoding, authorities) = parse(body)?;
        Ok(CertificateRequest {
            encoding,
            authorities,
        })
    }
    fn emit_body(&self, out: &mut Vec<u8>) -> Result<(), TooLong> {
        out.push(self.encoding.0);
        out.extend_from_slice(&self.authorities);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cert_and_certreq_layout() {
        let c = Certificate::parse_body(&[4, 0x30, 0x82]).unwrap();
        assert_eq!(c.encoding, CertEncoding::X509_SIGNATURE);
        assert_eq!(c.data, [0x30, 0x82]);
        let mut out = Vec::new();
        c.emit_body(&mut out).unwrap();
        assert_eq!(out, [4, 0x30, 0x82]);
        assert_eq!(
            Certificate::parse_body(&[]),
            Err(Problem::BodyTooShort { len: 0, min: 1 })
        );
    }

    #[test]
    fn certreq_ca_hashes_are_20_byte_chunks() {
        let mut body = vec![4];
        body.extend([1u8; 20]);
        body.extend([2u8; 20]);
        let r = CertificateRequest::parse_body(&body).unwrap();
        let hashes: Vec<&[u8]> = r.ca_hashes().unwrap().collect();
        assert_eq!(hashes, vec![&[1u8; 20][..], &[2u8; 20][..]]);
        let odd = CertificateRequest::parse_body(&[4, 1, 2]).unwrap();
        assert!(odd.ca_hashes().is_none());
    }
}
