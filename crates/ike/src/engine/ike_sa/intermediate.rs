//! RFC 9370 additional key exchanges in IKE_INTERMEDIATE exchanges
//! (RFC 9242), both roles.
//!
//! After IKE_SA_INIT has chosen a proposal with ADDKEs (and both sides
//! sent N(INTERMEDIATE_EXCHANGE_SUPPORTED)), the initiator runs one
//! IKE_INTERMEDIATE exchange per additional key exchange, in ADDKE order:
//! KEi(n) is our public value (an ML-KEM encapsulation key), KEr(n) the
//! responder's (the ciphertext). Both messages are protected with the keys
//! of the previous stage; when the exchange completes, both sides replace
//! every key (RFC 9370 2.2.2):
//!
//! ```text
//! SKEYSEED(n) = prf(SK_d(n-1), SK(n) | Ni | Nr)
//! {SK_d(n) ... SK_pr(n)} = prf+(SKEYSEED(n), Ni | Nr | SPIi | SPIr)
//! ```
//!
//! and the messages are folded into the IKE_AUTH signed octets (RFC 9242
//! 3.3.2): IntAuth_i(n) = prf(SK_pi, IntAuth_i(n-1) | A | P) over each
//! request, IntAuth_r(n) likewise with SK_pr over each response, with the
//! SK_p keys that protected the message (those of the previous stage; see
//! docs/ike.md for why this choice and that no other implementation has
//! checked it), A the IKE header through the Encrypted payload's generic
//! header with lengths that leave out IV, padding and ICV (RFC 9242's
//! Figure 1) and P the inner payloads; AUTH then covers
//! `... | MACedID | IntAuth_iN | IntAuth_rN | IKE_AUTH_MID`.
//!
//! Rekeys of an SA whose proposal has ADDKEs would need IKE_FOLLOWUP_KE
//! (RFC 9370 2.2.4), which is not implemented: [`rekey_proposals`] keeps
//! only proposals where every ADDKE is optional, without their ADDKEs, so
//! a required one is never silently dropped (the rekey fails instead).

use super::*;
use crate::message::{emit_chain, GENERIC_HEADER_LEN, HEADER_LEN};

/// The additional key exchanges' state of one IKE SA.
#[derive(Default)]
pub(super) struct AddKe {
    /// Exchanges completed (both roles).
    done: usize,
    /// Initiator: our key exchange of the exchange in flight.
    ke: Option<crypto::KeyExchange>,
    /// IntAuth_i(n) and IntAuth_r(n) so far (empty before the first).
    int_auth_i: Vec<u8>,
    int_auth_r: Vec<u8>,
    /// Responder: the shared secret of the exchange just answered; the
    /// keys change once the response is sealed with the old ones.
    pending: Option<crypto::SecretBytes>,
    /// Responder: the inbound cipher before the last update, to recognise
    /// a retransmitted fragment 1 of the request answered last.
    previous_sk_in: Option<SkCipher>,
}

/// The IKE proposals usable where no additional key exchange can run (a
/// peer without IKE_INTERMEDIATE, rekeys): those whose every ADDKE is
/// optional (`keN_none`) or absent, with the ADDKEs removed.
pub(crate) fn rekey_proposals(proposals: &[crypto::IkeProposal]) -> Vec<crypto::IkeProposal> {
    proposals
        .iter()
        .filter(|p| p.addke.iter().all(|m| m.is_empty() || m.contains(&None)))
        .map(|p| crypto::IkeProposal {
            addke: Default::default(),
            ..p.clone()
        })
        .collect()
}

/// Whether any proposal asks for an additional key exchange.
/// The ESP proposals to offer in CREATE_CHILD_SA: each as configured,
/// and after one whose additional key exchanges are all optional
/// (`keN_none`) the same without them. A peer without RFC 9370 rejects a
/// proposal with transform types it does not know (RFC 7296 3.3.6) and
/// takes the second; one with RFC 9370 takes the first (with the ADDKEs
/// it wants, or NONE). We cannot tell them apart beforehand: strongSwan 6
/// announces IKE_INTERMEDIATE only when its IKE proposals have ADDKEs
/// (found by review), and RFC 9242 alone does not mean RFC 9370.
/// Proposals that require an ADDKE go only as configured.
pub(crate) fn esp_offer(proposals: &[EspProposal]) -> Vec<EspProposal> {
    let mut out = Vec::with_capacity(proposals.len() * 2);
    for p in proposals {
        out.push(p.clone());
        let has = p.addke.iter().any(|m| !m.is_empty());
        let optional = p.addke.iter().all(|m| m.is_empty() || m.contains(&None));
        if has && optional {
            out.push(EspProposal {
                addke: Default::default(),
                ..p.clone()
            });
        }
    }
    out
}

pub(crate) fn wants_addke(proposals: &[crypto::IkeProposal]) -> bool {
    proposals
        .iter()
        .any(|p| p.addke.iter().any(|m| m.iter().any(Option::is_some)))
}

/// `A | P` of RFC 9242 3.3.2 for a message with `header` whose inner
/// payloads are `plain` (first payload `first`): the IKE header and the
/// Encrypted payload's generic header with their lengths adjusted to
/// leave out IV, padding, Pad Length and ICV (RFC 9242 Figure 1), so the
/// value does not depend on the cipher or on fragmentation, then the
/// inner payloads. No unencrypted payloads precede SK in our messages.
fn int_auth_octets(
    header: &HeaderRepr,
    first: PayloadType,
    plain: &[u8],
) -> Result<Vec<u8>, EngineError> {
    let sk_len = GENERIC_HEADER_LEN + plain.len();
    let sk_len16 = u16::try_from(sk_len).map_err(|_| EngineError::Protocol("message too long"))?;
    let total = u32::try_from(HEADER_LEN + sk_len)
        .map_err(|_| EngineError::Protocol("message too long"))?;
    let mut a = vec![0u8; HEADER_LEN];
    header.emit(&mut a, PayloadType::SK, total);
    a.push(first.0);
    a.push(0);
    a.extend_from_slice(&sk_len16.to_be_bytes());
    a.extend_from_slice(plain);
    Ok(a)
}

impl IkeSa {
    fn addke_methods(&self) -> Vec<KeGroup> {
        self.suite
            .map(|s| s.additional_exchanges().collect())
            .unwrap_or_default()
    }

    /// All additional key exchanges of the chosen proposal are done.
    pub(super) fn intermediate_done(&self) -> bool {
        self.addke.done >= self.addke_methods().len()
    }

    /// What RFC 9242 3.3.2 appends to the AUTH signed octets: empty when
    /// no IKE_INTERMEDIATE exchange took place.
    pub(super) fn int_auth_suffix(&self) -> Vec<u8> {
        if self.addke.done == 0 {
            return Vec::new();
        }
        // IKE_SA_INIT is message 0 and the IKE_INTERMEDIATE exchanges
        // follow it without gaps, so IKE_AUTH's ID is their count + 1.
        let mid = u32::try_from(self.addke.done + 1).unwrap_or(u32::MAX);
        [
            &self.addke.int_auth_i[..],
            &self.addke.int_auth_r[..],
            &mid.to_be_bytes(),
        ]
        .concat()
    }

    /// Folds one message into IntAuth_i (`initiator`) or IntAuth_r, with
    /// the SK_p key in use now.
    fn fold_int_auth(&mut self, initiator: bool, octets: &[u8]) -> Result<(), EngineError> {
        let (suite, keys) = self
            .suite
            .zip(self.keys.as_ref())
            .ok_or(EngineError::Protocol("no keys"))?;
        let (key, prev) = if initiator {
            (&keys.sk_pi, &self.addke.int_auth_i)
        } else {
            (&keys.sk_pr, &self.addke.int_auth_r)
        };
        let next = suite.prf.compute(key.expose(), &[prev, octets]);
        let next = next.expose().to_vec();
        if initiator {
            self.addke.int_auth_i = next;
        } else {
            self.addke.int_auth_r = next;
        }
        Ok(())
    }

    /// Replaces every key after one additional key exchange (RFC 9370
    /// 2.2.2), keeping the inbound cipher it replaces.
    fn update_keys(&mut self, shared: &crypto::SecretBytes) -> Result<(), EngineError> {
        let (suite, keys) = self
            .suite
            .zip(self.keys.as_ref())
            .ok_or(EngineError::Protocol("no keys"))?;
        let skeyseed = crypto::rekey_skeyseed(
            suite.prf,
            keys.sk_d.expose(),
            shared.expose(),
            &self.ni,
            &self.nr,
        );
        let keys = IkeSaKeys::derive(
            &suite,
            skeyseed.expose(),
            &self.ni,
            &self.nr,
            &self.spi_i.to_be_bytes(),
            &self.spi_r.to_be_bytes(),
        )?;
        let (o, i) = SkCipher::pair(&suite, &keys, self.role)?;
        self.sk_out = Some(o);
        self.addke.previous_sk_in = self.sk_in.replace(i);
        self.keys = Some(keys);
        self.addke.done += 1;
        Ok(())
    }

    // ---- initiator ----

    /// After IKE_SA_INIT: the first IKE_INTERMEDIATE when the chosen
    /// proposal has additional key exchanges, else IKE_AUTH.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn after_init_response(
        &mut self,
        now: Time,
        msg: &Message,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        if self.intermediate_done() {
            return self.send_auth_request(now, conn, cfg, rng, out);
        }
        if msg
            .notifies(NotifyType::INTERMEDIATE_EXCHANGE_SUPPORTED)
            .next()
            .is_none()
        {
            // RFC 9370 2.2.1: ADDKEs need IKE_INTERMEDIATE.
            self.fail(
                now,
                cfg,
                out,
                FailReason::Protocol("additional key exchange without IKE_INTERMEDIATE support"),
            );
            return Ok(());
        }
        self.send_intermediate(now, cfg, rng, out)
    }

    /// Our IKE_INTERMEDIATE request for the next additional key exchange.
    fn send_intermediate(
        &mut self,
        now: Time,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        let group = *self
            .addke_methods()
            .get(self.addke.done)
            .ok_or(EngineError::Protocol("no additional key exchange left"))?;
        let ke = crypto::KeyExchange::generate(group, rng)?;
        let inner = vec![Payload::Ke(KeyExchange {
            group: group.id(),
            data: ke.public_value().to_vec(),
        })];
        let header = self.header(ExchangeType::IKE_INTERMEDIATE, false, self.next_request_id);
        let (first, plain) = emit_chain(&inner)?;
        let octets = int_auth_octets(&header, first, &plain)?;
        let saved = self.addke.int_auth_i.clone();
        self.fold_int_auth(true, &octets)?;
        if let Err(e) = self.send_request(
            now,
            ExchangeType::IKE_INTERMEDIATE,
            &inner,
            None,
            cfg,
            rng,
            out,
        ) {
            self.addke.int_auth_i = saved;
            return Err(e);
        }
        self.addke.ke = Some(ke);
        self.state = State::IntermediateSent;
        Ok(())
    }

    /// The responder's IKE_INTERMEDIATE answer: KEr(n), then new keys, then
    /// the next exchange or IKE_AUTH.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_intermediate_response(
        &mut self,
        now: Time,
        header: &HeaderRepr,
        inner: Inner,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        self.outstanding = None;
        if let Some(n) = inner.error_notify() {
            self.fail(now, cfg, out, FailReason::PeerNotify(n));
            return Ok(());
        }
        let Some(ke) = self.addke.ke.take() else {
            return Err(EngineError::Protocol("no key exchange in flight"));
        };
        let theirs = match inner.find(PayloadType::KE) {
            Some(Payload::Ke(k)) if k.group == ke.group().id() => k,
            _ => {
                self.fail(
                    now,
                    cfg,
                    out,
                    FailReason::Protocol("IKE_INTERMEDIATE response without the KE asked for"),
                );
                return Ok(());
            }
        };
        let Ok(shared) = ke.shared_secret(&theirs.data) else {
            self.fail(now, cfg, out, FailReason::Protocol("invalid KE value"));
            return Ok(());
        };
        let (first, plain) = inner.plain();
        let octets = int_auth_octets(header, first, plain)?;
        self.fold_int_auth(false, &octets)?;
        self.update_keys(&shared)?;
        if self.intermediate_done() {
            self.send_auth_request(now, conn, cfg, rng, out)
        } else {
            self.send_intermediate(now, cfg, rng, out)
        }
    }

    // ---- responder ----

    /// The initiator's IKE_INTERMEDIATE request: our KEr(n). The keys
    /// change after the response is sealed ([`IkeSa::after_response_sealed`]).
    pub(super) fn on_intermediate_request(
        &mut self,
        header: &HeaderRepr,
        inner: &Inner,
        rng: &mut dyn RandomSource,
    ) -> Result<Vec<Payload>, EngineError> {
        let group = *self
            .addke_methods()
            .get(self.addke.done)
            .ok_or(EngineError::Protocol("no additional key exchange left"))?;
        let theirs = match inner.find(PayloadType::KE) {
            Some(Payload::Ke(k)) if k.group == group.id() => k,
            _ => {
                return Err(EngineError::Protocol(
                    "IKE_INTERMEDIATE without the KE wanted",
                ))
            }
        };
        let (public, shared) = crypto::KeyExchange::respond(group, &theirs.data, rng)?;
        let reply = vec![Payload::Ke(KeyExchange {
            group: group.id(),
            data: public,
        })];
        let (first, plain) = inner.plain();
        let request = int_auth_octets(header, first, plain)?;
        let (rfirst, rplain) = emit_chain(&reply)?;
        let response = int_auth_octets(
            &self.header(ExchangeType::IKE_INTERMEDIATE, true, header.message_id),
            rfirst,
            &rplain,
        )?;
        let saved = (self.addke.int_auth_i.clone(), self.addke.int_auth_r.clone());
        let folded = self
            .fold_int_auth(true, &request)
            .and_then(|()| self.fold_int_auth(false, &response));
        if let Err(e) = folded {
            (self.addke.int_auth_i, self.addke.int_auth_r) = saved;
            return Err(e);
        }
        self.addke.pending = Some(shared);
        Ok(reply)
    }

    /// Called once a response of ours is sealed and stored: applies the
    /// key update of the IKE_INTERMEDIATE exchange it answered.
    pub(super) fn after_response_sealed(&mut self) {
        match self.addke.pending.take() {
            Some(shared) => {
                if self.update_keys(&shared).is_err() {
                    // Cannot happen with the keys we derived before; the
                    // peer's IKE_AUTH will fail to open and the half-open
                    // SA expire.
                    self.keys = None;
                }
            }
            None => self.addke.previous_sk_in = None,
        }
    }

    /// The inbound cipher of the request answered last, when the keys
    /// changed since (a retransmitted IKE_INTERMEDIATE fragment).
    pub(super) fn previous_sk_in(&self) -> Option<&SkCipher> {
        self.addke.previous_sk_in.as_ref()
    }

    /// The IKE_SA_INIT proposals for a request with or without
    /// N(INTERMEDIATE_EXCHANGE_SUPPORTED).
    pub(super) fn init_proposals(
        conn: &Connection,
        peer_supports_intermediate: bool,
    ) -> std::borrow::Cow<'_, [crypto::IkeProposal]> {
        if peer_supports_intermediate {
            std::borrow::Cow::Borrowed(&conn.proposals[..])
        } else {
            std::borrow::Cow::Owned(rekey_proposals(&conn.proposals))
        }
    }
}
