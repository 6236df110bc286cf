//! RFC 9370 2.2.4: CREATE_CHILD_SA exchanges whose chosen proposal has
//! additional key exchanges (ML-KEM after X25519, say), both roles: IKE
//! SA rekeys, and CHILD_SAs made or rekeyed.
//!
//! ```text
//! CREATE_CHILD_SA   SA, Ni, KEi [, TSi, TSr]     -->
//!                   <--  SA, Nr, KEr [, TSi, TSr], N(ADDITIONAL_KEY_EXCHANGE)(link1)
//! IKE_FOLLOWUP_KE   KEi(1), N(ADDITIONAL_KEY_EXCHANGE)(link1)  -->
//!                   <--  KEr(1) [, N(ADDITIONAL_KEY_EXCHANGE)(link2)]
//! ... one IKE_FOLLOWUP_KE exchange per additional key exchange
//! ```
//!
//! All of it runs on the IKE SA the request came on, with its keys; the
//! new SA exists only once the last exchange is done (the responder
//! installs a CHILD_SA only then), with
//! `SKEYSEED = prf(SK_d (old), SK(0) | Ni | Nr | SK(1) | ... | SK(n))`
//! ([`crypto::rekey_skeyseed_with_additional`]) for an IKE SA, and
//! `KEYMAT = prf+(SK_d, SK(0) | Ni | Nr | SK(1) | ... | SK(n))`
//! ([`crypto::ChildSaKeys::derive_with_additional`]) for a CHILD_SA. The link is the
//! responder's opaque handle on its pending state (here 8 random bytes);
//! a request whose link it does not hold is answered STATE_NOT_FOUND, and
//! the state is dropped when no follow-up comes within
//! [`RESPONDER_WAIT_MS`] (RFC 9370 asks for a reasonable time; it names 5
//! to 20 s, restarted whenever the peer repeats a request). While one such
//! series is under way on an SA, the peer's IKE SA rekey of it is answered
//! TEMPORARY_FAILURE (RFC 7296 2.25) instead of running the collision
//! rules of RFC 7296 2.8.2 on an unfinished exchange, and ours waits in
//! the queue; so is the peer's CHILD_SA rekey with additional exchanges of
//! a CHILD_SA we are rekeying ourselves answered (2.8.1's nonces could
//! decide it only after both series), and a second series of the peer's
//! while one waits (we hold one). STATE_NOT_FOUND or TEMPORARY_FAILURE
//! for our series: a rekey is tried again later.

use super::*;

/// The link data we hand out as responder.
pub(super) const LINK_LEN: usize = 8;

/// How long the responder keeps a rekey waiting for its next
/// IKE_FOLLOWUP_KE request.
pub(super) const RESPONDER_WAIT_MS: u64 = 20_000;

/// What either side of such a series gathers for the new SA: what it is,
/// the CREATE_CHILD_SA exchange's nonces, the shared secrets SK(0),
/// SK(1), ... so far, and the methods of the additional exchanges.
pub(super) struct NewSa {
    pub(super) kind: NewKind,
    pub(super) ni: Vec<u8>,
    pub(super) nr: Vec<u8>,
    pub(super) shared: Vec<crypto::SecretBytes>,
    methods: Vec<KeGroup>,
}

/// The SA a series of IKE_FOLLOWUP_KE exchanges makes.
pub(super) enum NewKind {
    /// An IKE SA rekey: the new SA's SPIs (initiator's, responder's) and
    /// suite.
    Ike { spis: (u64, u64), suite: IkeSuite },
    /// Our CHILD_SA request (a rekey or a new one), answered.
    OurChild(Box<OurChild>),
    /// The peer's CHILD_SA request, answered.
    PeerChild(Box<PeerChild>),
}

/// Our CHILD_SA request and what the peer's CREATE_CHILD_SA answer
/// settled.
pub(super) struct OurChild {
    pub(super) request: OwnRequest,
    pub(super) state: RekeyState,
    pub(super) answer: super::create_child::ChildAnswer,
    /// The peer's rekey of the same CHILD_SA, answered before ours was
    /// (RFC 7296 2.8.1).
    pub(super) collision: Option<Collision>,
}

/// The peer's CHILD_SA request as we answered it.
pub(super) struct PeerChild {
    pub(super) suite: crypto::ChildSuite,
    /// Our inbound SPI, the peer's (our outbound).
    pub(super) spis: (u32, u32),
    pub(super) local_ts: Vec<TrafficSelector>,
    pub(super) remote_ts: Vec<TrafficSelector>,
    /// RFC 9611: one more of a per-resource group.
    pub(super) per_resource: bool,
    /// The peer's REKEY_SA: the SPI it names (our outbound SPI of the
    /// CHILD_SA it replaces).
    pub(super) rekeyed: Option<u32>,
}

impl NewSa {
    /// An IKE SA rekey's series.
    pub(super) fn ike(
        spis: (u64, u64),
        suite: IkeSuite,
        (ni, nr): (Vec<u8>, Vec<u8>),
        first: crypto::SecretBytes,
    ) -> Self {
        NewSa {
            methods: suite.additional_exchanges().collect(),
            kind: NewKind::Ike { spis, suite },
            ni,
            nr,
            shared: vec![first],
        }
    }

    /// A CHILD_SA's series (`kind`: ours or the peer's), with `suite`'s
    /// additional exchanges.
    pub(super) fn child(
        kind: NewKind,
        suite: &crypto::ChildSuite,
        (ni, nr): (Vec<u8>, Vec<u8>),
        first: crypto::SecretBytes,
    ) -> Self {
        NewSa {
            methods: suite.additional_exchanges().collect(),
            kind,
            ni,
            nr,
            shared: vec![first],
        }
    }

    /// The method of the next additional exchange, if one is left.
    fn next_method(&self) -> Option<KeGroup> {
        self.methods.get(self.shared.len() - 1).copied()
    }

    /// What our IKE_FOLLOWUP_KE requests of this series are about (the
    /// window's `in_flight`).
    fn request(&self) -> OwnRequest {
        match &self.kind {
            NewKind::OurChild(c) => c.request,
            _ => OwnRequest::RekeyIke,
        }
    }

    /// The CHILD_SA (our inbound SPI) this series of ours rekeys, if it
    /// is our CHILD_SA rekey.
    pub(super) fn rekeys_child(&self) -> Option<u32> {
        match &self.kind {
            NewKind::OurChild(c) => match c.request {
                OwnRequest::RekeyChild { inbound_spi } => Some(inbound_spi),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Our series between its CREATE_CHILD_SA exchange and its last
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

    /// The CHILD_SA (our inbound SPI) this series rekeys, if it is our
    /// CHILD_SA rekey.
    pub(super) fn rekeys_child(&self) -> Option<u32> {
        self.sa.rekeys_child()
    }

    /// An IKE SA rekey of ours.
    pub(super) fn is_ike(&self) -> bool {
        matches!(self.sa.kind, NewKind::Ike { .. })
    }
}

impl Responder {
    /// The peer's IKE SA rekey.
    pub(super) fn is_ike(&self) -> bool {
        matches!(self.sa.kind, NewKind::Ike { .. })
    }
}

/// The peer's series, answered, waiting for its IKE_FOLLOWUP_KE requests.
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
    /// A series of IKE_FOLLOWUP_KE exchanges is under way on this SA,
    /// ours or the peer's.
    pub(super) fn followup_pending(&self) -> bool {
        self.followup_i.is_some() || self.followup_r.is_some()
    }

    /// When the responder's pending rekey is given up.
    pub(super) fn followup_deadline(&self) -> Option<Time> {
        self.followup_r.as_ref().map(|r| r.deadline)
    }

    /// The peer repeated a request we answered (our stored answer goes
    /// again): it is still at it, so a pending series waits anew. Without
    /// this, lost answers to the request that started it (the peer's
    /// retransmissions back off: 4, 8, 16 s) could use up the wait before
    /// the first IKE_FOLLOWUP_KE request arrives (found by review).
    pub(super) fn followup_request_repeated(&mut self, now: Time) {
        if let Some(r) = self.followup_r.as_mut() {
            r.deadline = now + RESPONDER_WAIT_MS;
        }
    }

    /// Drops the responder's pending rekey once its deadline passed.
    pub(super) fn expire_followup(&mut self, now: Time) {
        if self.followup_r.as_ref().is_some_and(|r| now >= r.deadline) {
            self.followup_r = None;
        }
    }

    // ---- initiator ----

    /// Our IKE_FOLLOWUP_KE request for the next additional exchange of
    /// `state`, carrying `link`. A failure to send gives the series up
    /// (reported as refused).
    pub(super) fn send_followup(
        &mut self,
        now: Time,
        mut state: Initiator,
        link: Vec<u8>,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        let sent = (|| {
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
            let request = state.sa.request();
            self.send_request(
                now,
                ExchangeType::IKE_FOLLOWUP_KE,
                &inner,
                Some(request),
                cfg,
                rng,
                out,
            )?;
            Ok(ke)
        })();
        match sent {
            Ok(ke) => {
                state.ke = Some(ke);
                self.followup_i = Some(state);
                Ok(())
            }
            Err(e) => {
                self.series_refused(now, state.sa, NotifyType::TEMPORARY_FAILURE, true, rng, out);
                Err(e)
            }
        }
    }

    /// Our series ends without a new SA: the peer's `notify` (or ours for
    /// an answer we cannot use). An IKE SA rekey is retried later after
    /// TEMPORARY_FAILURE or STATE_NOT_FOUND; a CHILD_SA request ends as
    /// its CREATE_CHILD_SA refusal would (`our_child_failed`; the peer
    /// installed nothing: it does so after the last exchange).
    fn series_refused(
        &mut self,
        now: Time,
        sa: NewSa,
        notify: NotifyType,
        ours: bool,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) {
        match sa.kind {
            NewKind::OurChild(c) => {
                let OurChild { request, state, .. } = *c;
                self.our_child_failed(now, request, &state, notify, ours, rng, out);
            }
            _ => {
                // STATE_NOT_FOUND: the peer gave up waiting for our
                // request (lost answers); RFC 9370 2.2.4: start over.
                if notify == NotifyType::TEMPORARY_FAILURE || notify == NotifyType::STATE_NOT_FOUND
                {
                    self.retry_ike_rekey_later(now, rng);
                }
                out.events.push_back(Event::IkeRekeyFailed {
                    ike_sa: self.id,
                    notify,
                });
            }
        }
    }

    /// The answer to our IKE_FOLLOWUP_KE request: the next one, or the
    /// series completes. An error notify (or a wrong KE) ends it as
    /// refused (`series_refused`); an old SA stays, and a rekey is tried
    /// again later after TEMPORARY_FAILURE or STATE_NOT_FOUND. The peer is
    /// not told when we give up: its pending state refuses our IKE SA
    /// rekeys and our rekeys with ADDKEs of the CHILD_SA it rekeys
    /// (TEMPORARY_FAILURE) until it expires ([`RESPONDER_WAIT_MS`]); our
    /// retries go on until then.
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
        if let Some(n) = inner.error_notify() {
            self.series_refused(now, state.sa, n, false, rng, out);
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
            self.series_refused(now, state.sa, NotifyType::INVALID_SYNTAX, true, rng, out);
            return self.pump(now, conn, cfg, rng, out);
        };
        state.sa.shared.push(shared);
        if state.sa.next_method().is_some() {
            let Some(link) = inner.notify(NotifyType::ADDITIONAL_KEY_EXCHANGE) else {
                self.series_refused(now, state.sa, NotifyType::INVALID_SYNTAX, true, rng, out);
                return self.pump(now, conn, cfg, rng, out);
            };
            let link = link.data.clone();
            return self.send_followup(now, state, link, cfg, rng, out);
        }
        let NewSa {
            kind,
            ni,
            nr,
            shared,
            ..
        } = state.sa;
        match kind {
            NewKind::Ike { spis, suite } => {
                self.finish_rekey_ike(now, spis, suite, (ni, nr), &shared, conn, cfg, rng, out)
            }
            NewKind::OurChild(c) => self.finish_our_child(now, *c, &shared, conn, cfg, rng, out),
            // Never ours.
            NewKind::PeerChild(_) => self.pump(now, conn, cfg, rng, out),
        }
    }

    // ---- responder ----

    /// The peer's IKE_FOLLOWUP_KE request: our KEr(n), and after the last
    /// one the new SA: an IKE SA with the CHILD_SAs (the peer deletes
    /// this one next), or the CHILD_SA installed.
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
        let NewSa {
            kind,
            ni,
            nr,
            shared,
            ..
        } = state.sa;
        let (spis, suite) = match kind {
            NewKind::Ike { spis, suite } => (spis, suite),
            NewKind::PeerChild(c) => {
                return match self.finish_peer_child(*c, (&ni, &nr), &shared) {
                    Ok(event) => (reply, vec![event]),
                    Err(_) => refuse(NotifyType::TEMPORARY_FAILURE),
                };
            }
            // Never the peer's.
            NewKind::OurChild(_) => return refuse(NotifyType::STATE_NOT_FOUND),
        };
        let Ok(mut new) = self.rekeyed_ike_sa(Role::Responder, spis, suite, ni, nr, &shared) else {
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
