//! The generic payload header (RFC 7296 3.2), the payload chain walker and
//! the [`Payload`] enum that dispatches to each payload's own format.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! | Next Payload  |C|  RESERVED   |         Payload Length        |
//! ```
//!
//! The walker is strict: every Payload Length is at least 4 and ends inside
//! its container, and the chain ends (Next Payload 0) exactly at the end of
//! the container. SK and SKF are terminal: their Next Payload field names
//! the first payload *inside* the ciphertext, so the outer chain ends with
//! them and nothing may follow (RFC 7296 3.14).

use super::auth::Authentication;
use super::cert::{Certificate, CertificateRequest};
use super::config::Config;
use super::delete::Delete;
use super::encrypted::{Encrypted, EncryptedFragment};
use super::error::{Error, Problem, Result};
use super::id::Identification;
use super::ke::{KeyExchange, Nonce};
use super::notify::Notify;
use super::opaque::Opaque;
use super::sa::SecurityAssociation;
use super::ts::TrafficSelectors;
use super::types::PayloadType;

/// Length of the generic payload header.
pub const GENERIC_HEADER_LEN: usize = 4;

mod field {
    pub const NEXT_PAYLOAD: usize = 0;
    pub const FLAGS: usize = 1;
    pub const LENGTH: core::ops::Range<usize> = 2..4;
}

/// The critical bit in the generic header's second byte; the other seven
/// bits are reserved (sent as zero, ignored on receipt).
const CRITICAL: u8 = 0x80;

/// A view of one payload at the start of a buffer. [`GenericPayload::new_checked`]
/// guarantees `4 <= Payload Length <= buffer length`.
#[derive(Debug, Clone, Copy)]
pub struct GenericPayload<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> GenericPayload<T> {
    /// Wraps `buffer` after checking the Payload Length against it. The
    /// error is the [`Problem`]; the caller knows the payload's type.
    pub fn new_checked(buffer: T) -> core::result::Result<Self, Problem> {
        let b = buffer.as_ref();
        if b.len() < GENERIC_HEADER_LEN {
            return Err(Problem::HeaderTruncated { available: b.len() });
        }
        let length = u16::from_be_bytes([b[field::LENGTH.start], b[field::LENGTH.start + 1]]);
        if usize::from(length) < GENERIC_HEADER_LEN {
            return Err(Problem::LengthTooShort { length });
        }
        if usize::from(length) > b.len() {
            return Err(Problem::LengthOverrun {
                length,
                available: b.len(),
            });
        }
        Ok(GenericPayload { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Next Payload: the type of the payload after this one (for SK and
    /// SKF: of the first payload inside the ciphertext).
    pub fn next_payload(&self) -> PayloadType {
        PayloadType(self.b()[field::NEXT_PAYLOAD])
    }
    /// The critical bit.
    pub fn critical(&self) -> bool {
        self.b()[field::FLAGS] & CRITICAL != 0
    }
    /// Payload Length, header included.
    pub fn payload_length(&self) -> u16 {
        u16::from_be_bytes([
            self.b()[field::LENGTH.start],
            self.b()[field::LENGTH.start + 1],
        ])
    }
    /// The body: the bytes after the generic header, up to Payload Length.
    pub fn body(&self) -> &[u8] {
        &self.b()[GENERIC_HEADER_LEN..usize::from(self.payload_length())]
    }
}

/// One payload as the chain walker found it: type, critical bit, and the
/// body exactly as received (what AUTH computations over IDi/IDr need).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawPayload<'a> {
    /// This payload's type (named by the previous Next Payload field).
    pub payload_type: PayloadType,
    /// The critical bit of its generic header.
    pub critical: bool,
    /// Its own Next Payload field (for SK/SKF: the first inner type).
    pub next_payload: PayloadType,
    /// The body, after the generic header.
    pub body: &'a [u8],
}

/// Walks a payload chain, yielding each payload or the first error (after
/// which it yields nothing).
#[derive(Debug, Clone)]
pub struct PayloadIter<'a> {
    rest: &'a [u8],
    next: PayloadType,
    /// The type of the payload whose Next Payload was read last (for errors
    /// about what follows it).
    previous: PayloadType,
    /// Inside a decrypted SK: another SK/SKF is an error.
    inside_encrypted: bool,
    done: bool,
}

impl<'a> PayloadIter<'a> {
    /// The chain of a message's body (the bytes after the IKE header),
    /// starting with the header's Next Payload.
    pub fn new(first: PayloadType, bytes: &'a [u8]) -> Self {
        PayloadIter {
            rest: bytes,
            next: first,
            previous: PayloadType::NONE,
            inside_encrypted: false,
            done: false,
        }
    }

    /// The chain inside a decrypted SK payload (padding already removed,
    /// [`super::encrypted::strip_padding`]), starting with the SK's Next
    /// Payload. SK and SKF may not appear in it.
    pub fn inner(first: PayloadType, bytes: &'a [u8]) -> Self {
        PayloadIter {
            inside_encrypted: true,
            ..PayloadIter::new(first, bytes)
        }
    }

    fn fail(&mut self, e: Error) -> Option<Result<RawPayload<'a>>> {
        self.done = true;
        Some(Err(e))
    }
}

impl<'a> Iterator for PayloadIter<'a> {
    type Item = Result<RawPayload<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let t = self.next;
        if t == PayloadType::NONE {
            self.done = true;
            if !self.rest.is_empty() {
                let count = self.rest.len();
                return self.fail(Error::payload(
                    self.previous,
                    Problem::TrailingBytes { count },
                ));
            }
            return None;
        }
        let p = match GenericPayload::new_checked(self.rest) {
            Ok(p) => p,
            Err(problem) => return self.fail(Error::payload(t, problem)),
        };
        let len = usize::from(p.payload_length());
        let raw = RawPayload {
            payload_type: t,
            critical: p.critical(),
            next_payload: p.next_payload(),
            body: &self.rest[GENERIC_HEADER_LEN..len],
        };
        self.rest = &self.rest[len..];
        self.previous = t;
        if t == PayloadType::SK || t == PayloadType::SKF {
            // Terminal: its Next Payload names the inner chain's first type.
            if self.inside_encrypted || !self.rest.is_empty() {
                return self.fail(Error::payload(t, Problem::EncryptedNotLast));
            }
            self.next = PayloadType::NONE;
        } else {
            self.next = raw.next_payload;
        }
        Some(Ok(raw))
    }
}

/// Returned by a body emitter when a length or count does not fit its field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLong;

/// What each payload format implements: parse its body, append its body.
pub(crate) trait PayloadBody: Sized {
    /// Parses the bytes after the generic header.
    fn parse_body(body: &[u8]) -> core::result::Result<Self, Problem>;
    /// Appends the body to `out`.
    fn emit_body(&self, out: &mut Vec<u8>) -> core::result::Result<(), TooLong>;
}

/// A parsed payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// Security Association (SA).
    Sa(SecurityAssociation),
    /// Key Exchange (KE).
    Ke(KeyExchange),
    /// Identification - Initiator (IDi).
    IdI(Identification),
    /// Identification - Responder (IDr).
    IdR(Identification),
    /// Certificate (CERT).
    Cert(Certificate),
    /// Certificate Request (CERTREQ).
    CertReq(CertificateRequest),
    /// Authentication (AUTH).
    Auth(Authentication),
    /// Nonce (Ni, Nr).
    Nonce(Nonce),
    /// Notify (N).
    Notify(Notify),
    /// Delete (D).
    Delete(Delete),
    /// Vendor ID (V): opaque.
    VendorId(Opaque),
    /// Traffic Selector - Initiator (TSi).
    TsI(TrafficSelectors),
    /// Traffic Selector - Responder (TSr).
    TsR(TrafficSelectors),
    /// Encrypted and Authenticated (SK): always the last payload.
    Encrypted(Encrypted),
    /// Encrypted and Authenticated Fragment (SKF, RFC 7383): always last.
    Fragment(EncryptedFragment),
    /// Configuration (CP): parsed so it can be ignored politely.
    Config(Config),
    /// Extensible Authentication (EAP): recognized, not supported; opaque.
    Eap(Opaque),
    /// A payload type this codec does not know, with the critical bit
    /// clear: kept so the message re-emits unchanged, ignored by the engine.
    Unrecognized {
        /// Its type.
        payload_type: PayloadType,
        /// Its body.
        body: Vec<u8>,
    },
}

impl Payload {
    /// This payload's type.
    pub fn payload_type(&self) -> PayloadType {
        match self {
            Payload::Sa(_) => PayloadType::SA,
            Payload::Ke(_) => PayloadType::KE,
            Payload::IdI(_) => PayloadType::IDI,
            Payload::IdR(_) => PayloadType::IDR,
            Payload::Cert(_) => PayloadType::CERT,
            Payload::CertReq(_) => PayloadType::CERTREQ,
            Payload::Auth(_) => PayloadType::AUTH,
            Payload::Nonce(_) => PayloadType::NONCE,
            Payload::Notify(_) => PayloadType::NOTIFY,
            Payload::Delete(_) => PayloadType::DELETE,
            Payload::VendorId(_) => PayloadType::VENDOR_ID,
            Payload::TsI(_) => PayloadType::TSI,
            Payload::TsR(_) => PayloadType::TSR,
            Payload::Encrypted(_) => PayloadType::SK,
            Payload::Fragment(_) => PayloadType::SKF,
            Payload::Config(_) => PayloadType::CP,
            Payload::Eap(_) => PayloadType::EAP,
            Payload::Unrecognized { payload_type, .. } => *payload_type,
        }
    }

    /// Parses one payload the walker found. Unknown types: kept as
    /// [`Payload::Unrecognized`] when the critical bit is clear, an
    /// [`Error::UnsupportedCriticalPayload`] when set (RFC 7296 2.5). The
    /// critical bit of a known type is ignored, as 2.5 says.
    pub fn parse(raw: &RawPayload<'_>) -> Result<Payload> {
        fn body<B: PayloadBody>(raw: &RawPayload<'_>) -> Result<B> {
            B::parse_body(raw.body).map_err(|p| Error::payload(raw.payload_type, p))
        }
        Ok(match raw.payload_type {
            PayloadType::SA => Payload::Sa(body(raw)?),
            PayloadType::KE => Payload::Ke(body(raw)?),
            PayloadType::IDI => Payload::IdI(body(raw)?),
            PayloadType::IDR => Payload::IdR(body(raw)?),
            PayloadType::CERT => Payload::Cert(body(raw)?),
            PayloadType::CERTREQ => Payload::CertReq(body(raw)?),
            PayloadType::AUTH => Payload::Auth(body(raw)?),
            PayloadType::NONCE => Payload::Nonce(body(raw)?),
            PayloadType::NOTIFY => Payload::Notify(body(raw)?),
            PayloadType::DELETE => Payload::Delete(body(raw)?),
            PayloadType::VENDOR_ID => Payload::VendorId(body(raw)?),
            PayloadType::TSI => Payload::TsI(body(raw)?),
            PayloadType::TSR => Payload::TsR(body(raw)?),
            PayloadType::SK => Payload::Encrypted(Encrypted {
                next_payload: raw.next_payload,
                body: raw.body.to_vec(),
            }),
            PayloadType::SKF => {
                Payload::Fragment(EncryptedFragment::parse(raw.next_payload, raw.body)?)
            }
            PayloadType::CP => Payload::Config(body(raw)?),
            PayloadType::EAP => Payload::Eap(body(raw)?),
            t if raw.critical => return Err(Error::UnsupportedCriticalPayload(t)),
            t => Payload::Unrecognized {
                payload_type: t,
                body: raw.body.to_vec(),
            },
        })
    }

    /// The Next Payload value SK and SKF carry in their own header (the
    /// first inner payload's type); None for every other payload, whose
    /// Next Payload is the type of the payload after it.
    fn own_next_payload(&self) -> Option<PayloadType> {
        match self {
            Payload::Encrypted(e) => Some(e.next_payload),
            Payload::Fragment(f) => Some(f.next_payload),
            _ => None,
        }
    }

    fn emit_body(&self, out: &mut Vec<u8>) -> core::result::Result<(), TooLong> {
        match self {
            Payload::Sa(p) => p.emit_body(out),
            Payload::Ke(p) => p.emit_body(out),
            Payload::IdI(p) | Payload::IdR(p) => p.emit_body(out),
            Payload::Cert(p) => p.emit_body(out),
            Payload::CertReq(p) => p.emit_body(out),
            Payload::Auth(p) => p.emit_body(out),
            Payload::Nonce(p) => p.emit_body(out),
            Payload::Notify(p) => p.emit_body(out),
            Payload::Delete(p) => p.emit_body(out),
            Payload::VendorId(p) | Payload::Eap(p) => p.emit_body(out),
            Payload::TsI(p) | Payload::TsR(p) => p.emit_body(out),
            Payload::Encrypted(p) => {
                out.extend_from_slice(&p.body);
                Ok(())
            }
            Payload::Fragment(p) => p.emit_body(out),
            Payload::Config(p) => p.emit_body(out),
            Payload::Unrecognized { body, .. } => {
                out.extend_from_slice(body);
                Ok(())
            }
        }
    }
}

/// Parses a whole chain into payloads (see [`PayloadIter`] for the checks).
pub fn parse_chain(iter: PayloadIter<'_>) -> Result<Vec<Payload>> {
    iter.map(|raw| Payload::parse(&raw?)).collect()
}

/// Appends `payloads` as a chain to `out` (generic headers, lengths and
/// Next Payload chaining written here) and returns the first payload's
/// type, for the IKE header's (or the SK's) Next Payload. SK/SKF must be
/// the last payload, and `inside_encrypted` forbids them entirely.
pub(crate) fn emit_chain_into(
    payloads: &[Payload],
    inside_encrypted: bool,
    out: &mut Vec<u8>,
) -> Result<PayloadType> {
    for (i, p) in payloads.iter().enumerate() {
        let t = p.payload_type();
        let is_last = i + 1 == payloads.len();
        let next = match p.own_next_payload() {
            Some(inner) => {
                if inside_encrypted || !is_last {
                    return Err(Error::payload(t, Problem::EncryptedNotLast));
                }
                inner
            }
            None => payloads
                .get(i + 1)
                .map_or(PayloadType::NONE, Payload::payload_type),
        };
        let start = out.len();
        out.extend_from_slice(&[next.0, 0, 0, 0]);
        p.emit_body(out)
            .map_err(|TooLong| Error::TooLong { payload: t })?;
        let len = u16::try_from(out.len() - start).map_err(|_| Error::TooLong { payload: t })?;
        out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
    }
    Ok(payloads
        .first()
        .map_or(PayloadType::NONE, Payload::payload_type))
}

/// Emits a chain on its own: the plaintext of an SK payload before padding
/// ([`super::encrypted::pad`]). Returns the first type (the SK's Next
/// Payload) and the bytes.
pub fn emit_chain(payloads: &[Payload]) -> Result<(PayloadType, Vec<u8>)> {
    let mut out = Vec::new();
    let first = emit_chain_into(payloads, true, &mut out)?;
    Ok((first, out))
}

// ---- small helpers the payload formats share ----

/// Big-endian u16 at `at`; callers check the length first.
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Appends a big-endian u16.
pub(crate) fn put16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Writes the length of `out[start..]` as a u16 at `out[start + at..]`.
pub(crate) fn patch_len16(
    out: &mut [u8],
    start: usize,
    at: usize,
) -> core::result::Result<(), TooLong> {
    let len = u16::try_from(out.len() - start).map_err(|_| TooLong)?;
    out[start + at..start + at + 2].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// The body must be at least `min` bytes.
pub(crate) fn need(body: &[u8], min: usize) -> core::result::Result<(), Problem> {
    if body.len() < min {
        Err(Problem::BodyTooShort {
            len: body.len(),
            min,
        })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(first: PayloadType, bytes: &[u8]) -> Vec<Result<(PayloadType, Vec<u8>)>> {
        PayloadIter::new(first, bytes)
            .map(|r| r.map(|p| (p.payload_type, p.body.to_vec())))
            .collect()
    }

    #[test]
    fn walks_a_chain_by_next_payload_and_length() {
        // V(body "ab") -> V(empty body) -> end
        let bytes = [43, 0, 0, 6, b'a', b'b', 0, 0, 0, 4];
        assert_eq!(
            walk(PayloadType::VENDOR_ID, &bytes),
            vec![
                Ok((PayloadType::VENDOR_ID, b"ab".to_vec())),
                Ok((PayloadType::VENDOR_ID, vec![]))
            ]
        );
    }

    #[test]
    fn length_below_header_and_past_container_are_errors() {
        assert_eq!(
            walk(PayloadType::NONCE, &[0, 0, 0, 3]),
            vec![Err(Error::payload(
                PayloadType::NONCE,
                Problem::LengthTooShort { length: 3 }
            ))]
        );
        assert_eq!(
            walk(PayloadType::NONCE, &[0, 0, 0, 9, 1, 2, 3, 4]),
            vec![Err(Error::payload(
                PayloadType::NONCE,
                Problem::LengthOverrun {
                    length: 9,
                    available: 8
                }
            ))]
        );
        assert_eq!(
            walk(PayloadType::NONCE, &[0, 0, 0]),
            vec![Err(Error::payload(
                PayloadType::NONCE,
                Problem::HeaderTruncated { available: 3 }
            ))]
        );
    }

    #[test]
    fn bytes_after_the_last_payload_are_trailing_bytes() {
        let r = walk(PayloadType::VENDOR_ID, &[0, 0, 0, 4, 9]);
        assert_eq!(
            r[1],
            Err(Error::payload(
                PayloadType::VENDOR_ID,
                Problem::TrailingBytes { count: 1 }
            ))
        );
        // Bytes with no payload at all (header says none) are trailing too.
        assert_eq!(
            walk(PayloadType::NONE, &[1]),
            vec![Err(Error::payload(
                PayloadType::NONE,
                Problem::TrailingBytes { count: 1 }
            ))]
        );
    }

    #[test]
    fn sk_ends_the_chain_and_nothing_may_follow() {
        // SK whose Next Payload (IDi=35) is the inner first type: walker stops.
        let ok = [35, 0, 0, 6, 1, 2];
        let r = walk(PayloadType::SK, &ok);
        assert_eq!(r, vec![Ok((PayloadType::SK, vec![1, 2]))]);
        let trailing = [35, 0, 0, 6, 1, 2, 0, 0, 0, 4];
        assert_eq!(
            walk(PayloadType::SK, &trailing),
            vec![Err(Error::payload(
                PayloadType::SK,
                Problem::EncryptedNotLast
            ))]
        );
        let nested: Vec<_> = PayloadIter::inner(PayloadType::SK, &ok).collect();
        assert_eq!(
            nested,
            vec![Err(Error::payload(
                PayloadType::SK,
                Problem::EncryptedNotLast
            ))]
        );
    }

    #[test]
    fn unknown_payloads_skip_unless_critical() {
        let raw = RawPayload {
            payload_type: PayloadType(200),
            critical: false,
            next_payload: PayloadType::NONE,
            body: &[7],
        };
        assert_eq!(
            Payload::parse(&raw),
            Ok(Payload::Unrecognized {
                payload_type: PayloadType(200),
                body: vec![7]
            })
        );
        let critical = RawPayload {
            critical: true,
            ..raw
        };
        let e = Payload::parse(&critical).unwrap_err();
        assert_eq!(e, Error::UnsupportedCriticalPayload(PayloadType(200)));
        assert_eq!(e.notify_data(), vec![200]);
        // The critical bit on a known payload is ignored.
        let known = RawPayload {
            payload_type: PayloadType::VENDOR_ID,
            critical: true,
            next_payload: PayloadType::NONE,
            body: &[7],
        };
        assert!(Payload::parse(&known).is_ok());
    }

    #[test]
    fn emit_chains_next_payload_and_lengths() {
        let chain = [
            Payload::VendorId(Opaque(b"ab".to_vec())),
            Payload::Eap(Opaque(vec![])),
        ];
        let (first, bytes) = emit_chain(&chain).unwrap();
        assert_eq!(first, PayloadType::VENDOR_ID);
        assert_eq!(bytes, [48, 0, 0, 6, b'a', b'b', 0, 0, 0, 4]);
        assert_eq!(
            parse_chain(PayloadIter::inner(first, &bytes)).unwrap(),
            chain
        );
    }

    #[test]
    fn emit_refuses_sk_inside_sk_and_a_body_over_65535() {
        let sk = Payload::Encrypted(Encrypted {
            next_payload: PayloadType::NONE,
            body: vec![],
        });
        assert_eq!(
            emit_chain(&[sk]).unwrap_err(),
            Error::payload(PayloadType::SK, Problem::EncryptedNotLast)
        );
        let big = Payload::VendorId(Opaque(vec![0; 65532]));
        assert_eq!(
            emit_chain(&[big]).unwrap_err(),
            Error::TooLong {
                payload: PayloadType::VENDOR_ID
            }
        );
        assert!(emit_chain(&[Payload::VendorId(Opaque(vec![0; 65531]))]).is_ok());
    }
}
