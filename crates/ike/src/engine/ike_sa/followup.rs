//! RFC 9370 2.2.4: the rekey of an IKE SA whose proposal has additional
//! key exchanges (ML-KEM after X25519, say), both roles.
//!
//! ```text
//! CREATE_CHILD_SA   SA, Ni, KEi                -->
//!                   <--  SA, Nr, KEr, N(ADDITIONAL_KEY_EXCHANGE)(link1)
//! IKE_FOLLOWUP_KE   KEi(1), N(ADDITIONAL_KEY_EXCHANGE)(link1)  -->
//!                   <--  KEr(1) [, N(ADDITIONAL_KEY_EXCHANGE)(link2)]
//! ... one IKE_FOLLOWUP_KE exchange per additional key exchange
//! ```
//!
//! All of it runs on the old IKE SA, with its keys; the new SA exists only
//! once the last exchange is done, with
//! `SKEYSEED = prf(SK_d (old), SK(0) | Ni | Nr | SK(1) | ... | SK(n))`
//! ([`crypto::rekey_skeyseed_with_additional`]). The link is the
//! responder's opaque handle on its pending state (here 8 random bytes);
//! a request whose link it does not hold is answered STATE_NOT_FOUND, and
//! the state is dropped when no follow-up comes within
//! [`RESPONDER_WAIT_MS`] (RFC 9370 asks for a reasonable time; it names 5
//! to 20 s). While one such rekey is under way on an SA, either side's
//! other IKE SA rekey of it is answered TEMPORARY_FAILURE (RFC 7296 2.25)
//! instead of running the collision rules of RFC 7296 2.8.2 on an
//! unfinished exchange.
//!
//! Additional key exchanges for CHILD_SAs (IKE_FOLLOWUP_KE after a
//! CHILD_SA's CREATE_CHILD_SA) are not done here: ESP proposals cannot
//! carry them (docs/ike.md).

use super::*;

/// The link data we hand out as responder.
pub(super) const LINK_LEN: usize = 8;

/// How long the responder keeps a rekey waiting for its next
/// IKE_FOLLOWUP_KE request.
pub(super) const RESPONDER_WAIT_MS: u64 = 20_000;

/// What either side of such a rekey gathers for the new SA: its SPIs
/// (initiator's, responder's), the chosen suite, the CREATE_CHILD_SA
/// exchange's nonces, and the shared secrets SK(0), SK(1), ... so far.
pub(super) struct NewSa {
    pub(super) spis: (u64, u64),
    pub(super) suite: IkeSuite,
    pub(super) ni: Vec<u8>,
    pub(super) nr: Vec<u8>,
    pub(super) shared: Vec<crypto::SecretBytes>,
}

impl NewSa {
    /// The method of the next additional exchange, if one is left.
    fn next_method(&self) -> Option<KeGroup> {
        self.suite.additional_exchanges().nth(self.shared.len() - 1)
    }
}

/// Our IKE SA rekey between its CREATE_CHILD_SA exchange and its last
/// IKE_FOLLOWUP_KE exchange.
pub(super) struct Initiator {
    sa: NewSa,
    /// Our key exchange of the IKE_FOLLOWUP_KE request outstanding.
    ke: Option<crypto::KeyExchange>,
}

impl Initiator {
    pub(super) fn new(sa: NewSa) -> Self {
        Initiator { sa, ke: None }
    }
}

/// The peer's IKE SA rekey, answered, waiting for its IKE_FOLLOWUP_KE
/// requests.
pub(super) struct Responder {
    sa: NewSa,
    /// The link the next request must carry.
    link: Vec<u8>,
    /// Dropped when no request comes by then.
    deadline: Time,
}

impl Responder {
    pub(super) fn new(now: Time, sa: NewSa, link: Vec<u8>) -> Self {
        Responder {
            sa,
            link,
            deadline: now + RESPONDER_WAIT_MS,
        }
    }
}

impl IkeSa {
    /// An IKE SA rekey with IKE_FOLLOWUP_KE exchanges is under way on this
    /// SA, ours or the peer's.
    pub(super) fn followup_pending(&self) -> bool {
        self.followup_i.is_some() || self.followup_r.is_some()
    }

    /// When the responder's pending rekey is given up.
    pub(super) fn followup_deadline(&self) -> Option<Time> {
        self.followup_r.as_ref().map(|r| r.deadline)
    }

    /// Drops the responder's pending rekey once its deadline passed.
    pub(super) fn expire_followup(&mut self, now: Time) {
        if self.followup_r.as_ref().is_some_and(|r| now >= r.deadline) {
            self.followup_r = None;
        }
    }

    // ---- initiator ----

    /// Our IKE_FOLLOWUP_KE request for the next additional exchange of
    /// `state`, carrying `link`.
    pub(super) fn send_followup(
        &mut self,
        now: Time,
        mut state: Initiator,
        link: Vec<u8>,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        let group = state
            .sa
            .next_method()
            .ok_or(EngineError::Protocol("no additional key exchange left"))?;
        let ke = crypto::KeyExchange::generate(group, rng)?;
        let inner = vec![
            Payload::Ke(KeyExchange {
                group: group.id(),
                data: ke.public_value().to_vec(),
            }),
            Payload::Notify(Notify::ike(NotifyType::ADDITIONAL_KEY_EXCHANGE, link)),
        ];
        self.send_request(
            now,
            ExchangeType::IKE_FOLLOWUP_KE,
            &inner,
            Some(OwnRequest::RekeyIke),
            cfg,
            rng,
            out,
        )?;
        state.ke = Some(ke);
        self.followup_i = Some(state);
        Ok(())
    }

    /// The answer to our IKE_FOLLOWUP_KE request: the next one, or the
    /// rekey completes. An error notify (or a wrong KE) ends the rekey as
    /// refused; the old SA stays, and TEMPORARY_FAILURE retries later.
    /// The peer is not told when we give up: its pending state refuses
    /// our IKE SA rekeys (TEMPORARY_FAILURE) until it expires
    /// ([`RESPONDER_WAIT_MS`]); our retries go on until then.
    pub(super) fn on_followup_response(
        &mut self,
        now: Time,
        inner: Inner,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        self.outstanding = None;
        self.in_flight = None;
        let Some(mut state) = self.followup_i.take() else {
            return Ok(());
        };
        let id = self.id;
        let refused = |notify| Event::IkeRekeyFailed { ike_sa: id, notify };
        if let Some(n) = inner.error_notify() {
            if n == NotifyType::TEMPORARY_FAILURE {
                self.retry_ike_rekey_later(now, rng);
            }
            out.events.push_back(refused(n));
            return self.pump(now, conn, cfg, rng, out);
        }
        let ke = state
            .ke
            .take()
            .ok_or(EngineError::Protocol("no key exchange in flight"))?;
        let shared = match inner.find(PayloadType::KE) {
            Some(Payload::Ke(k)) if k.group == ke.group().id() => ke.shared_secret(&k.data).ok(),
            _ => None,
        };
        let Some(shared) = shared else {
            out.events.push_back(refused(NotifyType::INVALID_SYNTAX));
            return self.pump(now, conn, cfg, rng, out);
        };
        state.sa.shared.push(shared);
        if state.sa.next_method().is_some() {
            let Some(link) = inner.notify(NotifyType::ADDITIONAL_KEY_EXCHANGE) else {
                out.events.push_back(refused(NotifyType::INVALID_SYNTAX));
                return self.pump(now, conn, cfg, rng, out);
            };
            let link = link.data.clone();
            return self.send_followup(now, state, link, cfg, rng, out);
        }
        let NewSa {
            spis,
            suite,
            ni,
            nr,
            shared,
        } = state.sa;
        self.finish_rekey_ike(now, spis, suite, (ni, nr), &shared, conn, cfg, rng, out)
    }

    // ---- responder ----

    /// The peer's IKE_FOLLOWUP_KE request: our KEr(n), and after the last
    /// one the new SA with the CHILD_SAs (the peer deletes this one next).
    pub(super) fn on_followup_request(
        &mut self,
        now: Time,
        inner: &Inner,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> (Vec<Payload>, Vec<Event>) {
        let refuse = |n: NotifyType| {
            (
                vec![Payload::Notify(Notify::ike(n, Vec::new()))],
                Vec::new(),
            )
        };
        let link_matches = |r: &Responder| {
            inner
                .notify(NotifyType::ADDITIONAL_KEY_EXCHANGE)
                .is_some_and(|n| n.data == r.link)
        };
        // A wrong link leaves the pending rekey as it is (the right
        // request may still come).
        if !self.followup_r.as_ref().is_some_and(link_matches) {
            return refuse(NotifyType::STATE_NOT_FOUND);
        }
        let Some(mut state) = self.followup_r.take() else {
            return refuse(NotifyType::STATE_NOT_FOUND);
        };
        let Some(group) = state.sa.next_method() else {
            return refuse(NotifyType::STATE_NOT_FOUND);
        };
        let theirs = match inner.find(PayloadType::KE) {
            Some(Payload::Ke(k)) if k.group == group.id() => k,
            // The state is dropped: the initiator's rekey has failed.
            _ => return refuse(NotifyType::INVALID_SYNTAX),
        };
        let Ok((public, shared)) = crypto::KeyExchange::respond(group, &theirs.data, rng) else {
            return refuse(NotifyType::INVALID_SYNTAX);
        };
        state.sa.shared.push(shared);
        let mut reply = vec![Payload::Ke(KeyExchange {
            group: group.id(),
            data: public,
        })];
        if state.sa.next_method().is_some() {
            let Ok(link) = random_bytes(rng, LINK_LEN) else {
                return refuse(NotifyType::TEMPORARY_FAILURE);
            };
            reply.push(Payload::Notify(Notify::ike(
                NotifyType::ADDITIONAL_KEY_EXCHANGE,
                link.clone(),
            )));
            state.link = link;
            // Each exchange gets the whole wait: several of them with a
            // peer's retransmission backoff may take longer than one.
            state.deadline = now + RESPONDER_WAIT_MS;
            self.followup_r = Some(state);
            return (reply, Vec::new());
        }
        let Ok(mut new) = self.rekeyed_ike_sa(
            Role::Responder,
            state.sa.spis,
            state.sa.suite,
            state.sa.ni,
            state.sa.nr,
            &state.sa.shared,
        ) else {
            return refuse(NotifyType::TEMPORARY_FAILURE);
        };
        new.add_children(self.take_children());
        let events = vec![Event::IkeSaRekeyed {
            old: self.id,
            new: new.id,
        }];
        self.replaced = true;
        out.new_sas.push(new);
        (reply, events)
    }
}
