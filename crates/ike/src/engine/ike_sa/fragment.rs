//! IKE fragmentation (RFC 7383): reassembly of the peer's SKF fragments
//! and the choice to fragment our own encrypted messages.
//!
//! Only after IKE_SA_INIT (the keys exist) and only when both sides sent
//! IKEV2_FRAGMENTATION_SUPPORTED. Every fragment is authenticated and
//! decrypted on its own before it is kept (RFC 7383 2.6), for the message
//! ID the window expects; at most [`MAX_FRAGMENTS`] fragments and
//! [`MAX_REASSEMBLED_LEN`] bytes of plaintext per message, one message in
//! reassembly per direction (the peer's request, the response to ours).

use super::*;
use crate::engine::wire::OpenedFragment;

/// More fragments than any certificate exchange needs at 576 bytes each.
pub(crate) const MAX_FRAGMENTS: u16 = 64;
/// Plaintext of a reassembled message, at most.
pub(crate) const MAX_REASSEMBLED_LEN: usize = 64 * 1024;

/// A message being reassembled.
pub(crate) struct Reassembly {
    message_id: u32,
    first: PayloadType,
    parts: Vec<Option<Vec<u8>>>,
    len: usize,
}

/// A reassembled message: its first inner payload type and the inner
/// payload chain.
pub(crate) type Reassembled = (PayloadType, Vec<u8>);

/// What adding one fragment gave.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Added {
    /// Kept; more to come.
    Kept,
    /// A duplicate, a fragment of an older fragmentation (smaller total),
    /// or over the bounds: dropped.
    Dropped,
    /// The last missing one: the whole message.
    Complete(Reassembled),
}

impl Reassembly {
    /// Adds an authenticated fragment of message `message_id` to `slot`.
    pub fn add(slot: &mut Option<Reassembly>, message_id: u32, f: OpenedFragment) -> Added {
        if f.total > MAX_FRAGMENTS || f.number == 0 || f.number > f.total {
            return Added::Dropped;
        }
        let restart = match slot {
            Some(r) if r.message_id == message_id => {
                let have = r.parts.len();
                match usize::from(f.total).cmp(&have) {
                    // From an earlier, coarser fragmentation: RFC 7383 2.6
                    // says to ignore it.
                    std::cmp::Ordering::Less => return Added::Dropped,
                    // The sender fragmented again, smaller (PMTU): start over.
                    std::cmp::Ordering::Greater => true,
                    std::cmp::Ordering::Equal => false,
                }
            }
            // Nothing yet, or a stale message: this one replaces it.
            _ => true,
        };
        if restart {
            *slot = Some(Reassembly {
                message_id,
                first: PayloadType(0),
                parts: vec![None; usize::from(f.total)],
                len: 0,
            });
        }
        let Some(r) = slot.as_mut() else {
            return Added::Dropped;
        };
        let i = usize::from(f.number) - 1;
        if r.parts[i].is_some() {
            return Added::Dropped;
        }
        if r.len + f.plain.len() > MAX_REASSEMBLED_LEN {
            *slot = None;
            return Added::Dropped;
        }
        if f.number == 1 {
            r.first = f.first;
        }
        r.len += f.plain.len();
        r.parts[i] = Some(f.plain);
        if r.parts.iter().any(Option::is_none) {
            return Added::Kept;
        }
        let Some(r) = slot.take() else {
            return Added::Dropped;
        };
        let plain = r.parts.into_iter().flatten().flatten().collect();
        Added::Complete((r.first, plain))
    }
}

impl IkeSa {
    /// A datagram with an SKF payload: authenticates it and keeps it.
    /// Returns the whole message once the last fragment is in.
    pub(super) fn on_fragment(
        &mut self,
        src: SocketAddr,
        dst: SocketAddr,
        header: &HeaderRepr,
        datagram: &[u8],
        cfg: &EngineConfig,
        out: &mut Output,
    ) -> Option<Reassembled> {
        let Some(sk) = self.sk_in.as_ref() else {
            out.stats.fragments_dropped += 1;
            return None;
        };
        if !self.fragmentation || header.exchange == ExchangeType::IKE_SA_INIT {
            out.stats.fragments_dropped += 1;
            return None;
        }
        let id = header.message_id;
        let expected = if header.response {
            self.outstanding.as_ref().map(|o| o.message_id) == Some(id)
        } else {
            id == self.expected_request_id
        };
        if !expected {
            // A fragment of the request we answered last: fragment 1 (and
            // only it, RFC 7383 2.6.1) makes us send the response again.
            let last = match &self.last_response {
                Some((last, bytes)) if !header.response && *last == id => Some(bytes.clone()),
                _ => None,
            };
            // After an IKE_INTERMEDIATE exchange the keys changed: that
            // request came under the previous ones.
            let dup_sk = self.previous_sk_in().unwrap_or(sk);
            match (last, wire::open_fragment(datagram, dup_sk)) {
                (Some(bytes), Ok(f)) if f.number == 1 => {
                    for b in &bytes {
                        Self::transmit(cfg, out, dst, src, b);
                    }
                    out.stats.retransmitted_responses += 1;
                }
                _ => out.stats.unexpected += 1,
            }
            return None;
        }
        let f = match wire::open_fragment(datagram, sk) {
            Ok(f) => f,
            Err(_) => {
                out.stats.decrypt_failed += 1;
                return None;
            }
        };
        let slot = &mut self.reassembly[usize::from(header.response)];
        match Reassembly::add(slot, id, f) {
            Added::Kept => None,
            Added::Dropped => {
                out.stats.fragments_dropped += 1;
                None
            }
            Added::Complete(r) => Some(r),
        }
    }

    /// Seals `inner` for the peer: SKF fragments when fragmentation was
    /// negotiated and the message would not fit `cfg.fragment_size`.
    pub(super) fn seal_out(
        &self,
        cfg: &EngineConfig,
        header: &HeaderRepr,
        inner: &[Payload],
        sk: &SkCipher,
        rng: &mut dyn RandomSource,
    ) -> Result<Vec<Vec<u8>>, EngineError> {
        let marker = if self.local.port() == cfg.nat_t_port {
            crate::message::NON_ESP_MARKER.len()
        } else {
            0
        };
        wire::seal_fragmented(
            header,
            inner,
            sk,
            rng,
            self.fragmentation,
            cfg.fragment_size,
            marker,
        )
    }
}

/// The inner payloads of a message: from its reassembled fragments, or
/// by opening its SK payload.
pub(super) fn open_or_reassembled(
    reassembled: Option<Reassembled>,
    datagram: &[u8],
    sk: &SkCipher,
) -> Result<Result<Inner, crate::message::Error>, EngineError> {
    match reassembled {
        Some((first, plain)) => Ok(wire::parse_inner(first, &plain)),
        None => wire::open_checked(datagram, sk),
    }
}

#[cfg(test)]
mod bounds {
    use super::*;

    fn frag(number: u16, total: u16, len: usize) -> OpenedFragment {
        OpenedFragment {
            first: PayloadType::IDI,
            number,
            total,
            plain: vec![number as u8; len],
        }
    }

    #[test]
    fn too_many_fragments_or_too_many_bytes_are_dropped() {
        let mut slot = None;
        assert_eq!(
            Reassembly::add(&mut slot, 1, frag(1, MAX_FRAGMENTS + 1, 10)),
            Added::Dropped
        );
        assert!(slot.is_none());
        let half = MAX_REASSEMBLED_LEN / 2 + 1;
        assert_eq!(Reassembly::add(&mut slot, 1, frag(1, 3, half)), Added::Kept);
        // The second half would pass the bound: the message is given up.
        assert_eq!(
            Reassembly::add(&mut slot, 1, frag(2, 3, half)),
            Added::Dropped
        );
        assert!(slot.is_none());
    }

    #[test]
    fn a_finer_refragmentation_restarts_and_a_coarser_one_is_ignored() {
        let mut slot = None;
        assert_eq!(Reassembly::add(&mut slot, 1, frag(1, 2, 4)), Added::Kept);
        // The sender fragmented again into 3: start over.
        assert_eq!(Reassembly::add(&mut slot, 1, frag(2, 3, 4)), Added::Kept);
        // A late fragment of the 2-fragment version: ignored.
        assert_eq!(Reassembly::add(&mut slot, 1, frag(2, 2, 4)), Added::Dropped);
        assert_eq!(Reassembly::add(&mut slot, 1, frag(1, 3, 4)), Added::Kept);
        assert_eq!(Reassembly::add(&mut slot, 1, frag(1, 3, 4)), Added::Dropped);
        match Reassembly::add(&mut slot, 1, frag(3, 3, 4)) {
            Added::Complete((first, plain)) => {
                assert_eq!(first, PayloadType::IDI);
                assert_eq!(plain, [[1u8; 4], [2; 4], [3; 4]].concat());
            }
            other => panic!("{other:?}"),
        }
        // A new message ID replaces a stale partial one.
        assert_eq!(Reassembly::add(&mut slot, 2, frag(1, 2, 4)), Added::Kept);
        assert_eq!(Reassembly::add(&mut slot, 3, frag(2, 2, 4)), Added::Kept);
        assert!(matches!(
            Reassembly::add(&mut slot, 3, frag(1, 2, 4)),
            Added::Complete(_)
        ));
    }
}
