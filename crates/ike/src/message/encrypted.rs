//! Encrypted and Authenticated payload SK (RFC 7296 3.14) and its fragment
//! form SKF (RFC 7383 2.5).
//!
//! ```text
//! SK:  | Next Payload  |C|  RESERVED   |         Payload Length        |
//!      |                     Initialization Vector                     |
//!      ~                   Encrypted IKE Payloads                      ~
//!      |               |             Padding (0-255 octets)            |
//!      |                                               |  Pad Length   |
//!      ~                    Integrity Checksum Data                    ~
//!
//! SKF: | Next Payload  |C|  RESERVED   |         Payload Length        |
//!      |        Fragment Number        |        Total Fragments        |
//!      |          IV, ciphertext, ICV as in SK ...                     |
//! ```
//!
//! The codec does not know the cipher, so the body is kept whole and
//! [`split`] cuts it into IV, ciphertext and ICV from the lengths the
//! caller's cipher gives. After decryption, [`strip_padding`] removes the
//! padding and the inner chain is parsed by the same walker
//! ([`super::PayloadIter::inner`]) starting with the SK's Next Payload.
//!
//! For emission: [`super::emit_chain`] builds the inner payloads, [`pad`]
//! pads them to the cipher's block, and the caller encrypts and places IV,
//! ciphertext and ICV in `body`. The SK is the last payload, so its body is
//! the last `body.len()` bytes of the emitted message: the integrity (or
//! AEAD associated data) covers everything before the ICV (before the IV
//! for AEAD, RFC 5282 5.1).

use super::error::{Error, Problem, Result};
use super::payload::{be16, put16, TooLong};
use super::types::PayloadType;

mod fragment_field {
    pub const NUMBER: usize = 0;
    pub const TOTAL: usize = 2;
    pub const BODY: usize = 4;
}

/// An SK payload: the first inner payload's type and the encrypted body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encrypted {
    /// Next Payload of the SK header: the first payload inside.
    pub next_payload: PayloadType,
    /// IV, ciphertext (payloads, padding, pad length) and ICV.
    pub body: Vec<u8>,
}

/// An SKF payload (RFC 7383).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncryptedFragment {
    /// First inner payload's type in fragment 1; 0 in the others (the
    /// engine checks, as it reassembles).
    pub next_payload: PayloadType,
    /// Fragment Number (1-based).
    pub number: u16,
    /// Total Fragments.
    pub total: u16,
    /// IV, ciphertext and ICV of this fragment.
    pub body: Vec<u8>,
}

impl EncryptedFragment {
    /// Parses an SKF body, checking 1 <= number <= total.
    pub(crate) fn parse(next_payload: PayloadType, body: &[u8]) -> Result<Self> {
        let err = |p| Error::payload(PayloadType::SKF, p);
        if body.len() < fragment_field::BODY {
            return Err(err(Problem::BodyTooShort {
                len: body.len(),
                min: fragment_field::BODY,
            }));
        }
        let number = be16(body, fragment_field::NUMBER);
        let total = be16(body, fragment_field::TOTAL);
        if number == 0 || number > total {
            return Err(err(Problem::FragmentNumber { number, total }));
        }
        Ok(EncryptedFragment {
            next_payload,
            number,
            total,
            body: body[fragment_field::BODY..].to_vec(),
        })
    }

    pub(crate) fn emit_body(&self, out: &mut Vec<u8>) -> core::result::Result<(), TooLong> {
        put16(out, self.number);
        put16(out, self.total);
        out.extend_from_slice(&self.body);
        Ok(())
    }
}

/// The three parts of an SK/SKF body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkParts<'a> {
    /// Initialization vector.
    pub iv: &'a [u8],
    /// Ciphertext: payloads, padding and the pad length byte.
    pub ciphertext: &'a [u8],
    /// Integrity checksum (the AEAD tag for AEAD ciphers).
    pub icv: &'a [u8],
}

/// Cuts an SK (or SKF) body into IV, ciphertext and ICV. `block_len` is the
/// cipher's block size (16 for AES-CBC; 1 for AEAD ciphers, which need no
/// alignment). The ciphertext must hold at least the pad length byte.
/// `payload` is SK or SKF, for the error.
pub fn split(
    payload: PayloadType,
    body: &[u8],
    iv_len: usize,
    icv_len: usize,
    block_len: usize,
) -> Result<SkParts<'_>> {
    let err = |p| Error::payload(payload, p);
    let min = iv_len.saturating_add(icv_len).saturating_add(1);
    if body.len() < min {
        return Err(err(Problem::EncryptedTooShort {
            len: body.len(),
            min,
        }));
    }
    let (iv, rest) = body.split_at(iv_len);
    let (ciphertext, icv) = rest.split_at(rest.len() - icv_len);
    if block_len > 1 && !ciphertext.len().is_multiple_of(block_len) {
        return Err(err(Problem::CiphertextNotBlockAligned {
            len: ciphertext.len(),
            block: block_len,
        }));
    }
    Ok(SkParts {
        iv,
        ciphertext,
        icv,
    })
}

/// Removes the padding from a decrypted SK plaintext: the last byte is the
/// Pad Length, and that many padding bytes precede it (their value is not
/// checked: RFC 7296 3.14 lets them be anything).
pub fn strip_padding(payload: PayloadType, plaintext: &[u8]) -> Result<&[u8]> {
    let Some((&pad, rest)) = plaintext.split_last() else {
        return Err(Error::payload(
            payload,
            Problem::PadLength { pad: 0, len: 0 },
        ));
    };
    let pad_len = usize::from(pad);
    if pad_len > rest.len() {
        return Err(Error::payload(
            payload,
            Problem::PadLength {
                pad,
                len: plaintext.len(),
            },
        ));
    }
    Ok(&rest[..rest.len() - pad_len])
}

/// Pads an inner payload chain for encryption: zero padding and the Pad
/// Length byte, so the result is a multiple of `block_len` (1 for AEAD).
pub fn pad(inner: &[u8], block_len: usize) -> Vec<u8> {
    let block = block_len.clamp(1, 256);
    let pad_len = (block - (inner.len() + 1) % block) % block;
    let mut out = Vec::with_capacity(inner.len() + pad_len + 1);
    out.extend_from_slice(inner);
    out.resize(inner.len() + pad_len, 0);
    // pad_len < block <= 256
    out.push(u8::try_from(pad_len).unwrap_or(u8::MAX));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_cuts_iv_ciphertext_icv() {
        let body: Vec<u8> = (0..8 + 16 + 16).collect();
        let p = split(PayloadType::SK, &body, 8, 16, 1).unwrap();
        assert_eq!(p.iv, &body[..8]);
        assert_eq!(p.ciphertext, &body[8..24]);
        assert_eq!(p.icv, &body[24..]);
    }

    #[test]
    fn split_rejects_short_and_misaligned_bodies() {
        assert_eq!(
            split(PayloadType::SK, &[0; 24], 8, 16, 1),
            Err(Error::payload(
                PayloadType::SK,
                Problem::EncryptedTooShort { len: 24, min: 25 }
            ))
        );
        assert_eq!(
            split(PayloadType::SKF, &[0; 16 + 17 + 12], 16, 12, 16),
            Err(Error::payload(
                PayloadType::SKF,
                Problem::CiphertextNotBlockAligned { len: 17, block: 16 }
            ))
        );
        // Absurd lengths from a caller do not overflow.
        assert!(split(PayloadType::SK, &[0; 4], usize::MAX, usize::MAX, 1).is_err());
    }

    #[test]
    fn pad_then_strip_is_identity() {
        for block in [1usize, 8, 16] {
            for len in 0..40 {
                let inner: Vec<u8> = (0..len as u8).collect();
                let padded = pad(&inner, block);
                assert_eq!(padded.len() % block, 0);
                assert_eq!(strip_padding(PayloadType::SK, &padded).unwrap(), &inner[..]);
            }
        }
        assert_eq!(pad(&[1, 2], 16).len(), 16);
        assert_eq!(pad(&[1, 2], 1), [1, 2, 0]);
    }

    #[test]
    fn pad_length_past_the_start_is_an_error() {
        assert_eq!(
            strip_padding(PayloadType::SK, &[1, 2, 3]),
            Err(Error::payload(
                PayloadType::SK,
                Problem::PadLength { pad: 3, len: 3 }
            ))
        );
        assert!(strip_padding(PayloadType::SK, &[]).is_err());
        assert_eq!(strip_padding(PayloadType::SK, &[1, 2, 2]), Ok(&[][..]));
    }

    #[test]
    fn fragment_numbers_are_checked() {
        let f = EncryptedFragment::parse(PayloadType::IDI, &[0, 1, 0, 3, 9]).unwrap();
        assert_eq!((f.number, f.total, f.body.as_slice()), (1, 3, &[9u8][..]));
        for (n, t) in [(0u16, 3u16), (4, 3), (1, 0)] {
            let mut b = n.to_be_bytes().to_vec();
            b.extend(t.to_be_bytes());
            assert_eq!(
                EncryptedFragment::parse(PayloadType::NONE, &b),
                Err(Error::payload(
                    PayloadType::SKF,
                    Problem::FragmentNumber {
                        number: n,
                        total: t
                    }
                ))
            );
        }
        assert_eq!(
            EncryptedFragment::parse(PayloadType::NONE, &[0, 1, 0]),
            Err(Error::payload(
                PayloadType::SKF,
                Problem::BodyTooShort { len: 3, min: 4 }
            ))
        );
    }
}
