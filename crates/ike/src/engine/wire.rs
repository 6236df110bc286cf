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

/// Our SA payload offer: one proposal for each entry of `each` (its
/// transforms), numbered from 1, all with `spi`.
pub(crate) fn offer(
    protocol: ProtocolId,
    spi: &[u8],
    each: impl IntoIterator<Item = Vec<crypto::Transform>>,
) -> message::SecurityAssociation {
    message::SecurityAssociation(
        each.into_iter()
            .enumerate()
            .map(|(i, t)| proposal(i as u8 + 1, protocol, spi.to_vec(), &t))
            .collect(),
    )
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

/// Emits `header` and an SK payload holding the inner chain `plain`
/// (already emitted; `first` is its first payload's type), sealed with
/// `cipher`.
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
    /// The first inner payload's type and the decrypted inner chain, as
    /// received (RFC 9242 IntAuth covers them).
    pub raw: Option<(PayloadType, Vec<u8>)>,
    /// IDi and IDr bodies as received (an IKE_AUTH request may hold both).
    pub id_bodies: Vec<(PayloadType, Vec<u8>)>,
}

impl Inner {
    pub fn find(&self, t: PayloadType) -> Option<&Payload> {
        self.payloads.iter().find(|p| p.payload_type() == t)
    }

    /// The first inner payload's type and the inner chain as received.
    pub fn plain(&self) -> (PayloadType, &[u8]) {
        match &self.raw {
            Some((first, plain)) => (*first, plain),
            None => (PayloadType(0), &[]),
        }
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
    Ok(parse_inner(first, &plain))
}

/// Parses a decrypted inner chain whose first payload is `first`.
pub(crate) fn parse_inner(
    first: PayloadType,
    plain: &[u8],
) -> Result<Inner, crate::message::Error> {
    let mut inner = Inner {
        raw: Some((first, plain.to_vec())),
        ..Inner::default()
    };
    for raw in PayloadIter::inner(first, plain) {
        let raw = raw?;
        if raw.payload_type == PayloadType::IDI || raw.payload_type == PayloadType::IDR {
            inner.id_bodies.push((raw.payload_type, raw.body.to_vec()));
        }
        inner.payloads.push(Payload::parse(&raw)?);
    }
    Ok(inner)
}

/// One authenticated, decrypted SKF fragment (RFC 7383 2.5).
#[derive(Debug)]
pub(crate) struct OpenedFragment {
    /// Fragment 1's Next Payload: the first inner payload's type.
    pub first: PayloadType,
    pub number: u16,
    pub total: u16,
    pub plain: Vec<u8>,
}

/// Whether `datagram` (an IKE message) carries an SKF payload.
pub(crate) fn is_fragment(datagram: &[u8]) -> bool {
    Message::parse_raw(datagram).is_ok_and(|(_, mut iter)| {
        iter.any(|raw| raw.is_ok_and(|r| r.payload_type == PayloadType::SKF))
    })
}

/// Verifies and decrypts the SKF payload of `datagram`. The IKE header,
/// the SKF header and the Fragment Number / Total Fragments fields are
/// the associated data (RFC 7383 2.5), so a forged number or total fails
/// the check like a forged body.
pub(crate) fn open_fragment(
    datagram: &[u8],
    cipher: &SkCipher,
) -> Result<OpenedFragment, EngineError> {
    let (_, iter) = Message::parse_raw(datagram)?;
    let mut skf = None;
    for raw in iter {
        let raw = raw?;
        if raw.payload_type == PayloadType::SKF {
            skf = Some(message::EncryptedFragment::parse(
                raw.next_payload,
                raw.body,
            )?);
        }
    }
    let f = skf.ok_or(EngineError::Protocol("no SKF payload"))?;
    let aad = &datagram[..datagram.len() - f.body.len()];
    let plain = cipher.open(aad, &f.body)?;
    Ok(OpenedFragment {
        first: f.next_payload,
        number: f.number,
        total: f.total,
        plain,
    })
}

/// Emits `header` and `inner` sealed with `cipher`: one SK message when
/// it fits `max_datagram` bytes (`extra` more, the non-ESP marker, go in
/// front), else SKF fragments of at most that size (RFC 7383 2.5) when
/// `fragment` (negotiated) is set.
pub(crate) fn seal_fragmented(
    header: &HeaderRepr,
    inner: &[Payload],
    cipher: &SkCipher,
    rng: &mut dyn RandomSource,
    fragment: bool,
    max_datagram: usize,
    extra: usize,
) -> Result<Vec<Vec<u8>>, EngineError> {
    let (first, plain) = emit_chain(inner)?;
    let whole = HEADER_LEN + GENERIC_HEADER_LEN + cipher.body_len(plain.len()) + extra;
    if !fragment || whole <= max_datagram {
        return Ok(vec![seal_plain(header, first, &plain, cipher, rng)?]);
    }
    // The largest chunk whose fragment fits.
    let fixed = HEADER_LEN + GENERIC_HEADER_LEN + 4 + extra;
    let mut chunk = max_datagram.saturating_sub(fixed);
    while chunk > 0 && fixed + cipher.body_len(chunk) > max_datagram {
        chunk -= 1;
    }
    if chunk == 0 {
        return Err(EngineError::Protocol("fragment size too small"));
    }
    let total = u16::try_from(plain.len().div_ceil(chunk))
        .map_err(|_| EngineError::Protocol("too many fragments"))?;
    let mut out = Vec::with_capacity(usize::from(total));
    for (i, part) in plain.chunks(chunk).enumerate() {
        let number = i as u16 + 1;
        let skf_len = GENERIC_HEADER_LEN + 4 + cipher.body_len(part.len());
        let skf_len16 =
            u16::try_from(skf_len).map_err(|_| EngineError::Protocol("message too long"))?;
        let len = u32::try_from(HEADER_LEN + skf_len)
            .map_err(|_| EngineError::Protocol("message too long"))?;
        let mut msg = vec![0u8; HEADER_LEN];
        header.emit(&mut msg, PayloadType::SKF, len);
        // Fragment 1 names the first inner payload; the others carry 0.
        msg.push(if number == 1 { first.0 } else { 0 });
        msg.push(0);
        msg.extend_from_slice(&skf_len16.to_be_bytes());
        msg.extend_from_slice(&number.to_be_bytes());
        msg.extend_from_slice(&total.to_be_bytes());
        let body = cipher.seal(&msg, part, rng)?;
        msg.extend_from_slice(&body);
        out.push(msg);
    }
    Ok(out)
}
