//! CREATE_CHILD_SA for CHILD_SAs: our rekeys, the peer's new or rekeyed
//! CHILD_SAs, and simultaneous rekeys (RFC 7296 2.8.1).

use super::*;

/// What the peer's CREATE_CHILD_SA answer to our CHILD_SA request
/// settled.
pub(super) struct ChildAnswer {
    pub(super) suite: crypto::ChildSuite,
    pub(super) outbound_spi: u32,
    pub(super) nr: Vec<u8>,
    pub(super) tsi: Vec<TrafficSelector>,
    pub(super) tsr: Vec<TrafficSelector>,
    /// The peer echoed SA_RESOURCE_INFO (RFC 9611).
    pub(super) resource_echo: bool,
}

/// The group an INVALID_KE_PAYLOAD notify of `inner` asks for.
pub(super) fn requested_group(inner: &Inner) -> Option<KeGroup> {
    inner.payloads.iter().find_map(|p| match p {
        Payload::Notify(n) => n.requested_group().and_then(KeGroup::from_id),
        _ => None,
    })
}

impl IkeSa {
    /// Sends CREATE_CHILD_SA with REKEY_SA for our CHILD_SA `old_inbound`:
    /// the connection's ESP proposals (with their PFS group: then a KE
    /// payload of the first one), a fresh nonce and SPI, the old SA's
    /// selectors.
    pub(super) fn send_rekey_child(
        &mut self,
        now: Time,
        old_inbound: u32,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        let old = self
            .children
            .iter()
            .find(|c| c.inbound_spi == old_inbound)
            .cloned()
            .ok_or(EngineError::Protocol("no such CHILD_SA"))?;
        let rekey_sa = Notify::child(
            ProtocolId::ESP,
            old_inbound,
            NotifyType::REKEY_SA,
            Vec::new(),
        );
        let (inner, state) = self.child_request(
            conn,
            rng,
            Some(rekey_sa),
            old_inbound,
            (&old.local_ts, &old.remote_ts),
        )?;
        self.send_request(
            now,
            ExchangeType::CREATE_CHILD_SA,
            &inner,
            Some(OwnRequest::RekeyChild {
                inbound_spi: old_inbound,
            }),
            cfg,
            rng,
            out,
        )?;
        self.rekey = Some(state);
        Ok(())
    }

    /// RFC 9611: sends CREATE_CHILD_SA for one more per-resource CHILD_SA
    /// with the selectors of our first installed CHILD_SA (not a rekey:
    /// no REKEY_SA), SA_RESOURCE_INFO, the connection's ESP proposals (with
    /// a KE payload when they have a PFS group), a fresh nonce and SPI.
    pub(super) fn send_create_resource(
        &mut self,
        now: Time,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        let first = self
            .children
            .iter()
            .find(|c| c.state == ChildState::Installed)
            .cloned()
            .ok_or(EngineError::Protocol("no CHILD_SA to add to"))?;
        let resource_info = Notify::ike(NotifyType::SA_RESOURCE_INFO, Vec::new());
        let ts = (&first.local_ts[..], &first.remote_ts[..]);
        self.send_new_child(
            now,
            OwnRequest::CreateResource,
            Some(resource_info),
            ts,
            conn,
            cfg,
            rng,
            out,
        )
    }

    /// RFC 7296 1.3.1: sends CREATE_CHILD_SA for a new CHILD_SA with the
    /// connection's selectors (no REKEY_SA; SA_RESOURCE_INFO only when the
    /// connection wants RFC 9611 per-resource SAs, as in IKE_AUTH), the
    /// connection's ESP proposals (with a KE payload when they have a PFS
    /// group), a fresh nonce and SPI: the IKE SA's CHILD_SA again after
    /// the one it had was deleted (by either side), without a new IKE SA.
    pub(super) fn send_create_child(
        &mut self,
        now: Time,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        // RFC 9611: the first CHILD_SA of a per-resource group says so, as
        // in IKE_AUTH; the peer's echo lets the others follow.
        let resource_info = (conn.per_resource_sas > 1)
            .then(|| Notify::ike(NotifyType::SA_RESOURCE_INFO, Vec::new()));
        let ts = (&conn.local_ts[..], &conn.remote_ts[..]);
        self.send_new_child(
            now,
            OwnRequest::CreateChild,
            resource_info,
            ts,
            conn,
            cfg,
            rng,
            out,
        )
    }

    /// Sends our CREATE_CHILD_SA `request` for a new CHILD_SA (not a
    /// rekey) with selectors `ts`, `notify` first when there is one, and
    /// keeps its state in `create` for the answer.
    #[allow(clippy::too_many_arguments)]
    fn send_new_child(
        &mut self,
        now: Time,
        request: OwnRequest,
        notify: Option<Notify>,
        ts: (&[TrafficSelector], &[TrafficSelector]),
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        let (inner, state) = self.child_request(conn, rng, notify, 0, ts)?;
        self.send_request(
            now,
            ExchangeType::CREATE_CHILD_SA,
            &inner,
            Some(request),
            cfg,
            rng,
            out,
        )?;
        self.create = Some(state);
        Ok(())
    }

    /// The payloads of our CREATE_CHILD_SA request for a new CHILD_SA
    /// with selectors `(local, remote)` (a rekey of a CHILD_SA, RFC 9611
    /// one more of its kind, or the connection's first): `notify` first
    /// when there is one (REKEY_SA or SA_RESOURCE_INFO), then a fresh SPI
    /// in the connection's ESP proposals, a nonce, a KE payload of the
    /// group the peer asked for in INVALID_KE_PAYLOAD (else the first
    /// proposal's, if any), TSi/TSr; and the state to finish it.
    fn child_request(
        &mut self,
        conn: &Connection,
        rng: &mut dyn RandomSource,
        notify: Option<Notify>,
        old_inbound: u32,
        (local, remote): (&[TrafficSelector], &[TrafficSelector]),
    ) -> Result<(Vec<Payload>, RekeyState), EngineError> {
        let new_inbound = random_child_spi(rng)?;
        let ni = random_bytes(rng, NONCE_LEN)?;
        let group = self.rekey_group.take().or_else(|| {
            conn.esp_proposals
                .first()
                .and_then(|p| p.ke.first().copied())
        });
        let ke = match group {
            Some(g) => Some(crypto::KeyExchange::generate(g, rng)?),
            None => None,
        };
        let offer = wire::offer(
            ProtocolId::ESP,
            &new_inbound.to_be_bytes(),
            intermediate::esp_offer(&conn.esp_proposals)
                .iter()
                .map(|p| p.transforms()),
        );
        let mut inner: Vec<Payload> = notify.map(Payload::Notify).into_iter().collect();
        inner.push(Payload::Sa(offer));
        inner.push(Payload::Nonce(Nonce(ni.clone())));
        if let Some(k) = &ke {
            inner.push(Payload::Ke(KeyExchange {
                group: k.group().id(),
                data: k.public_value().to_vec(),
            }));
        }
        inner.push(Payload::TsI(TrafficSelectors(local.to_vec())));
        inner.push(Payload::TsR(TrafficSelectors(remote.to_vec())));
        let state = RekeyState {
            old_inbound,
            new_inbound,
            ni,
            ke,
            local_ts: local.to_vec(),
            remote_ts: remote.to_vec(),
        };
        Ok((inner, state))
    }

    /// The answer to our request for a new CHILD_SA: RFC 9611's
    /// per-resource one (`CreateResource`) or the connection's own
    /// (`CreateChild`). An INVALID_KE_PAYLOAD naming another group of our
    /// proposals: the same request again with it. For a per-resource SA,
    /// TS_MAX_QUEUE says the peer takes no more of these selectors: the
    /// rest of our queued requests are dropped and the SAs we have carry
    /// on (reported as a `ChildSaFailed` with that notify, which fails
    /// nothing else); any other refusal stops the series the same way. A
    /// refused `CreateChild` is a `ChildSaFailed` with the peer's notify.
    pub(super) fn on_create_child_response(
        &mut self,
        now: Time,
        inner: Inner,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        self.outstanding = None;
        let request = match self.in_flight.take() {
            Some(OwnRequest::CreateChild) => OwnRequest::CreateChild,
            _ => OwnRequest::CreateResource,
        };
        let Some(create) = self.create.take() else {
            return Ok(());
        };
        self.on_child_answer(now, request, create, None, inner, conn, cfg, rng, out)
    }

    /// The answer to our CHILD_SA rekey: install the new CHILD_SA, then
    /// delete the old one (RFC 7296 2.8). A refusal keeps the old one.
    pub(super) fn on_rekey_child_response(
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
        let Some(rekey) = self.rekey.take() else {
            return Ok(());
        };
        let collision = self
            .collisions
            .iter()
            .position(|c| c.old_inbound == rekey.old_inbound)
            .map(|i| self.collisions.remove(i));
        let request = OwnRequest::RekeyChild {
            inbound_spi: rekey.old_inbound,
        };
        self.on_child_answer(now, request, rekey, collision, inner, conn, cfg, rng, out)
    }

    /// The peer's CREATE_CHILD_SA answer to our CHILD_SA `request`: the
    /// CHILD_SA now, or (RFC 9370 2.2.4) after the IKE_FOLLOWUP_KE
    /// exchanges of the chosen proposal's additional key exchanges; or
    /// the refusal.
    #[allow(clippy::too_many_arguments)]
    fn on_child_answer(
        &mut self,
        now: Time,
        request: OwnRequest,
        state: RekeyState,
        collision: Option<Collision>,
        inner: Inner,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        // INVALID_KE_PAYLOAD naming a group of our ESP proposals other
        // than the one we sent: the same request again with that group
        // (a collision recorded for a rekey is dropped with this answer).
        if let Some(g) = requested_group(&inner) {
            let ours = state.ke.as_ref().map(|k| k.group());
            if Some(g) != ours && conn.esp_proposals.iter().any(|p| p.ke.contains(&g)) {
                self.rekey_group = Some(g);
                self.pending.push_front(request);
                return self.pump(now, conn, cfg, rng, out);
            }
        }
        let link = inner
            .notify(NotifyType::ADDITIONAL_KEY_EXCHANGE)
            .map(|n| n.data.clone());
        let answered = self
            .child_answer(&state, &inner, conn)
            .and_then(|(answer, shared)| {
                let followups = answer.suite.additional_exchanges().next().is_some();
                match (followups, link, shared) {
                    (false, _, shared) => Ok((answer, shared, None)),
                    (true, Some(link), Some(first)) => Ok((answer, None, Some((link, first)))),
                    // Additional exchanges chosen without a link to
                    // follow up on (or without the PFS exchange before
                    // them).
                    (true, _, _) => Err(NotifyType::INVALID_SYNTAX),
                }
            });
        let (answer, shared, followup) = match answered {
            Ok(a) => a,
            Err(notify) => {
                // A new CHILD_SA the peer made for our refused answer
                // goes.
                self.delete_if_peer_created(&inner, state.new_inbound);
                // The peer's refusal, or ours of its answer.
                let ours = inner.error_notify().is_none();
                self.our_child_failed(now, request, &state, notify, ours, rng, out);
                return self.pump(now, conn, cfg, rng, out);
            }
        };
        let ours = followup::OurChild {
            request,
            state,
            answer,
            collision,
        };
        if let Some((link, first)) = followup {
            let nonces = (ours.state.ni.clone(), ours.answer.nr.clone());
            let suite = ours.answer.suite;
            let sa = followup::NewSa::child(
                followup::NewKind::OurChild(Box::new(ours)),
                &suite,
                nonces,
                first,
            );
            return self.send_followup(now, followup::Initiator::new(sa), link, cfg, rng, out);
        }
        self.finish_our_child(now, ours, shared.as_slice(), conn, cfg, rng, out)
    }

    /// Our CHILD_SA request is complete (its CREATE_CHILD_SA exchange and
    /// any IKE_FOLLOWUP_KE exchanges): the CHILD_SA with KEYMAT from
    /// `shared` (the PFS secret, then the additional ones), installed. A
    /// rekey's old CHILD_SA is deleted next (RFC 7296 2.8), or after a
    /// simultaneous rekey the redundant new one (2.8.1).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish_our_child(
        &mut self,
        now: Time,
        ours: followup::OurChild,
        shared: &[crypto::SecretBytes],
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        let followup::OurChild {
            request,
            state,
            answer,
            collision,
        } = ours;
        let resource_echo = answer.resource_echo;
        let nr = answer.nr.clone();
        let derived = self.derive_child(
            answer.suite,
            true,
            (&state.ni, &answer.nr),
            shared,
            (state.new_inbound, answer.outbound_spi),
            answer.tsi,
            answer.tsr,
        );
        let Ok(mut child) = derived else {
            self.pending.push_front(OwnRequest::DeleteRefused {
                inbound_spi: state.new_inbound,
            });
            self.our_child_failed(
                now,
                request,
                &state,
                NotifyType::NO_PROPOSAL_CHOSEN,
                true,
                rng,
                out,
            );
            return self.pump(now, conn, cfg, rng, out);
        };
        match request {
            OwnRequest::RekeyChild { inbound_spi: old } => {
                // A peer's rekey of the same CHILD_SA answered while our
                // IKE_FOLLOWUP_KE exchanges ran.
                let collision = collision.or_else(|| {
                    self.collisions
                        .iter()
                        .position(|c| c.old_inbound == old)
                        .map(|i| self.collisions.remove(i))
                });
                child.rekeys = Some(old);
                let ours = child.inbound_spi;
                if let Some(c) = self
                    .children
                    .iter_mut()
                    .find(|c| c.inbound_spi == old && c.state == ChildState::Installed)
                {
                    c.state = ChildState::Rekeyed;
                }
                self.children.push(ChildRef::of(&child));
                out.events
                    .push_back(Event::ChildSaInstalled(Box::new(child)));
                self.pending
                    .push_front(OwnRequest::DeleteChild { inbound_spi: old });
                // RFC 7296 2.8.1: both sides rekeyed the same SA; the new
                // SA whose exchange holds the lowest of the four nonces is
                // redundant and deleted by whoever started that exchange.
                if let Some(c) = collision {
                    let ours_lowest = state.ni.min(nr) < c.ni.min(c.nr);
                    if ours_lowest {
                        // Its delete waits behind the old SA's; meanwhile
                        // the peer may rekey it (see `queue_delete_child`).
                        self.queue_delete_child(ours);
                    }
                }
            }
            _ => {
                child.per_resource = request == OwnRequest::CreateResource;
                self.children.push(ChildRef::of(&child));
                out.events
                    .push_back(Event::ChildSaInstalled(Box::new(child)));
                // The connection's first CHILD_SA again: its per-resource
                // ones follow when the peer echoed SA_RESOURCE_INFO, as
                // after IKE_AUTH.
                if request == OwnRequest::CreateChild && conn.per_resource_sas > 1 && resource_echo
                {
                    for _ in 1..conn.per_resource_sas {
                        self.pending.push_back(OwnRequest::CreateResource);
                    }
                }
            }
        }
        self.pump(now, conn, cfg, rng, out)
    }

    /// Our CHILD_SA `request` (with `state`) ends without a CHILD_SA: the
    /// peer's `notify`, or ours (`ours`: we refused its answer or could not
    /// go on; a CHILD_SA the peer installed for it has its delete queued,
    /// `delete_if_peer_created`). A rekey's old CHILD_SA carries on and is rekeyed again
    /// later after TEMPORARY_FAILURE, after STATE_NOT_FOUND (the peer gave
    /// up waiting for our IKE_FOLLOWUP_KE request, e.g. after lost
    /// answers; RFC 9370 2.2.4 says to start over) or after our own
    /// refusal; a refused RFC 9611 per-resource SA stops that series.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn our_child_failed(
        &mut self,
        now: Time,
        request: OwnRequest,
        state: &RekeyState,
        notify: NotifyType,
        ours: bool,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) {
        match request {
            OwnRequest::RekeyChild { .. }
                if notify == NotifyType::TEMPORARY_FAILURE
                    || notify == NotifyType::STATE_NOT_FOUND
                    || ours =>
            {
                self.retry_rekey_later(now, state.old_inbound, rng);
            }
            OwnRequest::CreateResource => {
                self.pending.retain(|r| *r != OwnRequest::CreateResource);
            }
            _ => {}
        }
        out.events.push_back(Event::ChildSaFailed {
            ike_sa: self.id,
            notify,
        });
    }

    /// After we refused an answer that created a CHILD_SA at the peer (an
    /// SA payload and no error notify: the peer installed it), queues its
    /// delete ahead of our other requests, so that the peer does not keep
    /// an SA we cannot decrypt, and may send on (RFC 7296 2.9: an
    /// initiator that does not accept the narrowed selectors deletes the
    /// CHILD_SA). A refusal by the peer created nothing.
    /// An answer that announces IKE_FOLLOWUP_KE exchanges created nothing
    /// yet (RFC 9370 2.2.4: the peer installs after the last one).
    pub(super) fn delete_if_peer_created(&mut self, inner: &Inner, inbound_spi: u32) -> bool {
        let created = inner.error_notify().is_none()
            && inner.find(PayloadType::SA).is_some()
            && inner.notify(NotifyType::ADDITIONAL_KEY_EXCHANGE).is_none();
        if created {
            self.pending
                .push_front(OwnRequest::DeleteRefused { inbound_spi });
        }
        created
    }

    /// What the peer's CREATE_CHILD_SA answer to our request `rekey`
    /// settles (checked against our proposals and selectors), and the PFS
    /// shared secret; or why it is refused.
    fn child_answer(
        &self,
        rekey: &RekeyState,
        inner: &Inner,
        conn: &Connection,
    ) -> Result<(ChildAnswer, Option<crypto::SecretBytes>), NotifyType> {
        if let Some(n) = inner.error_notify() {
            return Err(n);
        }
        let (Some(Payload::Sa(sa)), Some(nr), Some(Payload::TsI(tsi)), Some(Payload::TsR(tsr))) = (
            inner.find(PayloadType::SA),
            nonce_of(&inner.payloads),
            inner.find(PayloadType::TSI),
            inner.find(PayloadType::TSR),
        ) else {
            return Err(NotifyType::INVALID_SYNTAX);
        };
        let (suite, outbound_spi) = accepted_esp(sa, &conn.esp_proposals)?;
        let shared = match (suite.ke, &rekey.ke, inner.find(PayloadType::KE)) {
            (None, _, None) => None,
            (Some(g), Some(ours), Some(Payload::Ke(theirs)))
                if ours.group() == g && theirs.group == g.id() =>
            {
                Some(
                    ours.shared_secret(&theirs.data)
                        .map_err(|_| NotifyType::INVALID_SYNTAX)?,
                )
            }
            _ => return Err(NotifyType::INVALID_KE_PAYLOAD),
        };
        if !ts::is_subset(&tsi.0, &rekey.local_ts) || !ts::is_subset(&tsr.0, &rekey.remote_ts) {
            return Err(NotifyType::TS_UNACCEPTABLE);
        }
        let answer = ChildAnswer {
            suite,
            outbound_spi,
            nr,
            tsi: tsi.0.clone(),
            tsr: tsr.0.clone(),
            resource_echo: inner.notify(NotifyType::SA_RESOURCE_INFO).is_some(),
        };
        Ok((answer, shared))
    }

    /// The peer's CREATE_CHILD_SA: a new CHILD_SA or a CHILD_SA rekey
    /// (REKEY_SA), with PFS when the chosen proposal has a group. IKE SA
    /// rekeying is not implemented: answered NO_ADDITIONAL_SAS.
    pub(super) fn on_create_child_request(
        &mut self,
        now: Time,
        inner: &Inner,
        conn: &Connection,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> (Vec<Payload>, Vec<Event>) {
        let refuse = |n: Notify| (vec![Payload::Notify(n)], Vec::new());
        if let Some(Payload::Sa(sa)) = inner.find(PayloadType::SA) {
            if sa.0.iter().any(|p| p.protocol == ProtocolId::IKE) {
                return self.respond_rekey_ike(now, inner, conn, rng, out);
            }
        }
        if self.replaced {
            // RFC 7296 2.25: this IKE SA is replaced (its CHILD_SAs may
            // have moved to the new one) and its delete follows; a
            // CHILD_SA made here now would be left behind on it.
            return refuse(Notify::ike(NotifyType::TEMPORARY_FAILURE, Vec::new()));
        }
        if let Some(n) = inner.notify(NotifyType::REKEY_SA) {
            let known = n
                .child_spi()
                .and_then(|spi| self.children.iter().find(|c| c.outbound_spi == spi));
            // RFC 7296 2.25: an SA we no longer have is CHILD_SA_NOT_FOUND;
            // one we already rekeyed or are deleting is TEMPORARY_FAILURE
            // (our delete of it is on its way).
            let answer = match known.map(|c| c.state) {
                None => Some(NotifyType::CHILD_SA_NOT_FOUND),
                Some(ChildState::Installed) => None,
                Some(_) => Some(NotifyType::TEMPORARY_FAILURE),
            };
            match answer {
                Some(NotifyType::TEMPORARY_FAILURE) => {
                    return refuse(Notify::ike(NotifyType::TEMPORARY_FAILURE, Vec::new()))
                }
                Some(notify_type) => {
                    return refuse(Notify {
                        notify_type,
                        data: Vec::new(),
                        ..n.clone()
                    })
                }
                None => {}
            }
        }
        let (Some(Payload::Sa(sa)), Some(ni), Some(Payload::TsI(tsi)), Some(Payload::TsR(tsr))) = (
            inner.find(PayloadType::SA),
            nonce_of(&inner.payloads),
            inner.find(PayloadType::TSI),
            inner.find(PayloadType::TSR),
        ) else {
            return refuse(Notify::ike(NotifyType::INVALID_SYNTAX, Vec::new()));
        };
        let offered = wire::offered(sa, ProtocolId::ESP);
        let Some((number, suite)) = select_esp(
            &conn.esp_proposals,
            offered.iter().map(|(n, t, _)| (*n, &t[..])),
        ) else {
            return refuse(Notify::ike(NotifyType::NO_PROPOSAL_CHOSEN, Vec::new()));
        };
        let Some(peer_spi) = offered
            .iter()
            .find(|(n, _, _)| *n == number)
            .and_then(|(_, _, spi)| <[u8; 4]>::try_from(&spi[..]).ok())
            .map(u32::from_be_bytes)
        else {
            return refuse(Notify::ike(NotifyType::INVALID_SYNTAX, Vec::new()));
        };
        let mut ke_reply = None;
        let mut shared = None;
        if let Some(g) = suite.ke {
            let Some(Payload::Ke(theirs)) = inner
                .find(PayloadType::KE)
                .filter(|p| matches!(p, Payload::Ke(k) if k.group == g.id()))
            else {
                return refuse(Notify::invalid_ke_payload(g.id()));
            };
            let Ok(ours) = crypto::KeyExchange::generate(g, rng) else {
                return refuse(Notify::ike(NotifyType::TEMPORARY_FAILURE, Vec::new()));
            };
            let Ok(s) = ours.shared_secret(&theirs.data) else {
                return refuse(Notify::ike(NotifyType::INVALID_SYNTAX, Vec::new()));
            };
            shared = Some(s);
            ke_reply = Some(KeyExchange {
                group: g.id(),
                data: ours.public_value().to_vec(),
            });
        }
        let tsi = ts::narrow(&tsi.0, &conn.remote_ts);
        let tsr = ts::narrow(&tsr.0, &conn.local_ts);
        if tsi.is_empty() || tsr.is_empty() {
            return refuse(Notify::ike(NotifyType::TS_UNACCEPTABLE, Vec::new()));
        }
        // RFC 9611: a new CHILD_SA (not a rekey) with SA_RESOURCE_INFO is
        // one more per-resource SA of its selectors. We take as many as
        // `per_resource_sas` (counting the SAs of those selectors we
        // have), and without it configured none beyond the first: past
        // that, TS_MAX_QUEUE.
        let resource_info = inner.notify(NotifyType::REKEY_SA).is_none()
            && inner.notify(NotifyType::SA_RESOURCE_INFO).is_some();
        self.peer_asked_resources |= resource_info;
        let have = if resource_info {
            self.children
                .iter()
                .filter(|c| c.state == ChildState::Installed && c.same_ts(&tsr, &tsi))
                .count()
        } else {
            0
        };
        if have >= (conn.per_resource_sas.max(1) as usize) {
            return refuse(Notify::ike(NotifyType::TS_MAX_QUEUE, Vec::new()));
        }
        // One more of a group (the first of its selectors is not).
        let per_resource = have > 0;
        let echo = resource_info && conn.per_resource_sas > 1;
        let (Ok(nr), Ok(inbound)) = (random_bytes(rng, NONCE_LEN), random_child_spi(rng)) else {
            return refuse(Notify::ike(NotifyType::TEMPORARY_FAILURE, Vec::new()));
        };
        let rekeyed = inner
            .notify(NotifyType::REKEY_SA)
            .and_then(|n| n.child_spi());
        let followups = suite.additional_exchanges().next().is_some();
        if followups {
            // RFC 9370 2.2.4: the CHILD_SA comes after the peer's
            // IKE_FOLLOWUP_KE requests. We hold one such series at a time;
            // and a rekey of a CHILD_SA we are rekeying ourselves would be
            // a collision that 2.8.1's nonces decide only after both
            // series: refused, each side retries after its own random
            // delay (RFC 7296 2.25).
            let ours_too = rekeyed.is_some_and(|spi| {
                self.our_child_rekey().is_some_and(|old| {
                    self.children
                        .iter()
                        .any(|c| c.outbound_spi == spi && c.inbound_spi == old)
                })
            });
            if self.followup_r.is_some() || ours_too || shared.is_none() {
                return refuse(Notify::ike(NotifyType::TEMPORARY_FAILURE, Vec::new()));
            }
        }
        let mut reply = vec![
            Payload::Sa(SecurityAssociation(vec![wire::proposal(
                number,
                ProtocolId::ESP,
                inbound.to_be_bytes().to_vec(),
                &suite.transforms(),
            )])),
            Payload::Nonce(Nonce(nr.clone())),
        ];
        reply.extend(ke_reply.map(Payload::Ke));
        if echo {
            reply.push(Payload::Notify(Notify::ike(
                NotifyType::SA_RESOURCE_INFO,
                Vec::new(),
            )));
        }
        reply.push(Payload::TsI(TrafficSelectors(tsi.clone())));
        reply.push(Payload::TsR(TrafficSelectors(tsr.clone())));
        let peer_child = followup::PeerChild {
            suite,
            spis: (inbound, peer_spi),
            local_ts: tsr,
            remote_ts: tsi,
            per_resource,
            rekeyed,
        };
        if followups {
            let (Some(first), Ok(link)) = (shared.take(), random_bytes(rng, followup::LINK_LEN))
            else {
                return refuse(Notify::ike(NotifyType::TEMPORARY_FAILURE, Vec::new()));
            };
            reply.push(Payload::Notify(Notify::ike(
                NotifyType::ADDITIONAL_KEY_EXCHANGE,
                link.clone(),
            )));
            let sa = followup::NewSa::child(
                followup::NewKind::PeerChild(Box::new(peer_child)),
                &suite,
                (ni, nr),
                first,
            );
            self.followup_r = Some(followup::Responder::new(now, sa, link));
            return (reply, Vec::new());
        }
        match self.finish_peer_child(peer_child, (&ni, &nr), shared.as_slice()) {
            Ok(event) => (reply, vec![event]),
            Err(_) => refuse(Notify::ike(NotifyType::NO_PROPOSAL_CHOSEN, Vec::new())),
        }
    }

    /// Our CHILD_SA rekey in flight (its CREATE_CHILD_SA exchange or its
    /// IKE_FOLLOWUP_KE exchanges): the old CHILD_SA's inbound SPI.
    fn our_child_rekey(&self) -> Option<u32> {
        self.rekey.as_ref().map(|r| r.old_inbound).or_else(|| {
            self.followup_i
                .as_ref()
                .and_then(followup::Initiator::rekeys_child)
        })
    }

    /// The peer's CHILD_SA request is complete (its CREATE_CHILD_SA
    /// exchange, answered with `nonces`, and any IKE_FOLLOWUP_KE
    /// exchanges): the CHILD_SA with KEYMAT from `shared` (the PFS secret,
    /// then the additional ones), installed. A rekey's old CHILD_SA is the
    /// peer's to delete.
    pub(super) fn finish_peer_child(
        &mut self,
        peer: followup::PeerChild,
        (ni, nr): (&[u8], &[u8]),
        shared: &[crypto::SecretBytes],
    ) -> Result<Event, EngineError> {
        let followup::PeerChild {
            suite,
            spis,
            local_ts,
            remote_ts,
            per_resource,
            rekeyed,
        } = peer;
        let mut child =
            self.derive_child(suite, false, (ni, nr), shared, spis, local_ts, remote_ts)?;
        // The old SA is the peer's to delete now: our own timers leave it
        // alone (a rekey of ours started later would make a second
        // replacement that neither side's 2.8.1 check sees; found by the
        // timed-rekey property test).
        if let Some(spi) = rekeyed {
            if let Some(old) = self
                .children
                .iter_mut()
                .find(|c| c.outbound_spi == spi && c.state == ChildState::Installed)
            {
                old.state = ChildState::Rekeyed;
            }
        }
        // The peer rekeys the SA our own rekey in flight replaces:
        // remember its nonces for RFC 7296 2.8.1 when ours completes.
        if let (Some(spi), Some(old)) = (rekeyed, self.our_child_rekey()) {
            if self
                .children
                .iter()
                .any(|c| c.outbound_spi == spi && c.inbound_spi == old)
            {
                self.collisions.push(Collision {
                    old_inbound: old,
                    ni: ni.to_vec(),
                    nr: nr.to_vec(),
                });
            }
        }
        child.per_resource = per_resource;
        child.rekeys = rekeyed.and_then(|spi| {
            self.children
                .iter()
                .find(|c| c.outbound_spi == spi)
                .map(|c| c.inbound_spi)
        });
        self.children.push(ChildRef::of(&child));
        Ok(Event::ChildSaInstalled(Box::new(child)))
    }
}
