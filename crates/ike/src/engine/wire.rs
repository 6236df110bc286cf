//! Building and opening messages for the engine: conversions between the
//! codec's SA structures and the crypto module's transforms, and the SK
//! payload framing (header and SK header written with their final
//! lengths first, because they are the AEAD's associated data / covered
//! by the ICV).

use crate::crypto::{self, RandomSource, SkCipher};
use crate::message::{
    self, emit_chain, HeaderRepr, Message, Payload, PayloadIter, PayloadType, ProtocolId,
    GENERIC_HEADER_LEN, HEADER_LEN,
};

use super::EngineError;

/// A codec transform as the proposal selection code sees it.
pub(crate) fn to_crypto(t: &message::Transform) -> crypto::Transform {
    crypto::Transform {
        kind: crypto::TransformType::from_u8(t.transform_type.0),
        id: t.id,
        key_length: t.key_length(),
    }
}

/// A negotiation transform as the codec emits it.
pub(crate) fn to_wire(t: &crypto::Transform) -> message::Transform {
    let tt = message::TransformType(t.kind.to_u8());
    match t.key_length {
        Some(bits) => message::Transform::with_key_length(tt, t.id, bits),
        None => message::Transform::new(tt, t.id),
    }
}

/// One SA payload proposal.
pub(crate) fn proposal(
    number: u8,
    protocol: ProtocolId,
    spi: Vec<u8>,
    transforms: &[crypto::Transform],
) -> message::Proposal {
    message::Proposal {
        number,
        protocol,
        spi,
        transforms: transforms.iter().map(to_wire).collect(),
    }
}

/// The offered proposals of `protocol` as (number, transforms, SPI).
pub(crate) fn offered(
    sa: &message::SecurityAssociation,
    protocol: ProtocolId,
) -> Vec<(u8, Vec<crypto::Transform>, Vec<u8>)> {
    sa.0.iter()
        .filter(|p| p.protocol == protocol)
        .map(|p| {
            (
                p.number,
                p.transforms.iter().map(to_crypto).collect(),
                p.spi.clone(),
            )
        })
        .collect()
}

/// The body of an ID payload (after its generic header): what AUTH's
/// MACedIDFor* is computed over.
pub(crate) fn id_body(id: &Payload) -> Result<Vec<u8>, EngineError> {
    let (_, bytes) = emit_chain(std::slice::from_ref(id))?;
    Ok(bytes[GENERIC_HEADER_LEN..].to_vec())
}

/// Emits `header` and an SK payload holding `inner`, sealed with
/// `cipher`.
pub(crate) fn seal(
    header: &HeaderRepr,
    inner: &[Payload],
    cipher: &SkCipher,
    rng: &mut dyn RandomSource,
) -> Result<Vec<u8>, EngineError> {
    let (first, plain) = emit_chain(inner)?;
    seal_plain(header, first, &plain, cipher, rng)
}

/// As [`seal`], from an inner chain already emitted (`first` is its first
/// payload's type).
pub(crate) fn seal_plain(
    header: &HeaderRepr,
    first: PayloadType,
    plain: &[u8],
    cipher: &SkCipher,
    rng: &mut dyn RandomSource,
) -> Result<Vec<u8>, EngineError> {
    let sk_len = GENERIC_HEADER_LEN + cipher.body_len(plain.len());
    let sk_len16 = u16::try_from(sk_len).map_err(|_| EngineError::Protocol("message too long"))?;
    let total = u32::try_from(HEADER_LEN + sk_len)
        .map_err(|_| EngineError::Protocol("message too long"))?;
    let mut out = vec![0u8; HEADER_LEN];
    header.emit(&mut out, PayloadType::SK, total);
    out.push(first.0);
    out.push(0);
    out.extend_from_slice(&sk_len16.to_be_bytes());
    let body = cipher.seal(&out, plain, rng)?;
    out.extend_from_slice(&body);
    Ok(out)
}

/// The decrypted inner payloads of an SK message, with the body of its ID
/// payload as received (for AUTH).
#[derive(Debug, Default)]
pub(crate) struct Inner {
    pub payloads: Vec<Payload>,
    /// IDi and IDr bodies as received (an IKE_AUTH request may hold both).
    pub id_bodies: Vec<(PayloadType, Vec<u8>)>,
}

impl Inner {
    pub fn find(&self, t: PayloadType) -> Option<&Payload> {
        self.payloads.iter().find(|p| p.payload_type() == t)
    }

    pub fn id_body(&self, t: PayloadType) -> Option<&[u8]> {
        self.id_bodies
            .iter()
            .find(|(k, _)| *k == t)
            .map(|(_, b)| &b[..])
    }

    pub fn notify(&self, t: message::NotifyType) -> Option<&message::Notify> {
        self.payloads.iter().find_map(|p| match p {
            Payload::Notify(n) if n.notify_type == t => Some(n),
            _ => None,
        })
    }

    /// The first error notification (type < 16384), if any.
    pub fn error_notify(&self) -> Option<message::NotifyType> {
        self.payloads.iter().find_map(|p| match p {
            Payload::Notify(n) if n.notify_type.is_error() => Some(n.notify_type),
            _ => None,
        })
    }
}

/// Verifies and decrypts the SK payload of `datagram` (an IKE message
/// without the non-ESP marker) and parses its inner chain. Fragments
/// (SKF, RFC 7383) are not supported yet.
pub(crate) fn open(datagram: &[u8], cipher: &SkCipher) -> Result<Inner, EngineError> {
    open_checked(datagram, cipher)?.map_err(EngineError::Codec)
}

/// As [`open`], telling apart a message that is not authentic (the outer
/// error: drop it silently, RFC 7296 2.21.2) from an authentic one whose
/// inner payloads are malformed (the inner error: a request gets an
/// error notify, e.g. UNSUPPORTED_CRITICAL_PAYLOAD).
pub(crate) fn open_checked(
    datagram: &[u8],
    cipher: &SkCipher,
) -> Result<Result<Inner, crate::message::Error>, EngineError> {
    let (_, iter) = Message::parse_raw(datagram)?;
    let mut sk = None;
    for raw in iter {
        let raw = raw?;
        match raw.payload_type {
            PayloadType::SK => sk = Some((raw.next_payload, raw.body)),
            PayloadType::SKF => return Err(EngineError::Protocol("IKE fragments not supported")),
            _ => {}
        }
    }
    let (first, body) = sk.ok_or(EngineError::Protocol("no SK payload"))?;
    let aad = &datagram[..datagram.len() - body.len()];
    let plain = cipher.open(aad, body)?;
    let parse = || -> Result<Inner, crate::message::Error> {
        let mut inner = Inner::default();
        for raw in PayloadIter::inner(first, &plain) {
            let raw = raw?;
            if raw.payload_type == PayloadType::IDI || raw.payload_type == PayloadType::IDR {
                inner.id_bodies.push((raw.payload_type, raw.body.to_vec()));
            }
            inner.payloads.push(Payload::parse(&raw)?);
        }
        Ok(inner)
    };
    Ok(parse())
}
