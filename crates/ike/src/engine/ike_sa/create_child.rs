//! CREATE_CHILD_SA for CHILD_SAs: our rekeys, the peer's new or rekeyed
//! CHILD_SAs, and simultaneous rekeys (RFC 7296 2.8.1).

use super::*;

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
            conn.esp_proposals.iter().map(|p| p.transforms()),
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
        if let Some(g) = requested_group(&inner) {
            let ours = create.ke.as_ref().map(|k| k.group());
            if Some(g) != ours && conn.esp_proposals.iter().any(|p| p.ke.contains(&g)) {
                self.rekey_group = Some(g);
                self.pending.push_front(request);
                return self.pump(now, conn, cfg, rng, out);
            }
        }
        match self.rekeyed_child(&create, &inner, conn) {
            Ok((mut child, _)) => {
                child.per_resource = request == OwnRequest::CreateResource;
                self.children.push(ChildRef::of(&child));
                out.events
                    .push_back(Event::ChildSaInstalled(Box::new(child)));
                // The connection's first CHILD_SA again: its per-resource
                // ones follow when the peer echoed SA_RESOURCE_INFO, as
                // after IKE_AUTH.
                if request == OwnRequest::CreateChild
                    && conn.per_resource_sas > 1
                    && inner.notify(NotifyType::SA_RESOURCE_INFO).is_some()
                {
                    for _ in 1..conn.per_resource_sas {
                        self.pending.push_back(OwnRequest::CreateResource);
                    }
                }
            }
            Err(notify) => {
                if request == OwnRequest::CreateResource {
                    self.pending.retain(|r| *r != OwnRequest::CreateResource);
                }
                self.delete_if_peer_created(&inner, create.new_inbound);
                out.events.push_back(Event::ChildSaFailed {
                    ike_sa: self.id,
                    notify,
                });
            }
        }
        self.pump(now, conn, cfg, rng, out)
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
        // INVALID_KE_PAYLOAD naming a group of our ESP proposals other
        // than the one we sent: the same rekey again with that group.
        if let Some(g) = requested_group(&inner) {
            let ours = rekey.ke.as_ref().map(|k| k.group());
            if Some(g) != ours && conn.esp_proposals.iter().any(|p| p.ke.contains(&g)) {
                self.rekey_group = Some(g);
                self.pending.push_front(OwnRequest::RekeyChild {
                    inbound_spi: rekey.old_inbound,
                });
                return self.pump(now, conn, cfg, rng, out);
            }
        }
        match self.rekeyed_child(&rekey, &inner, conn) {
            Ok((mut child, nr)) => {
                child.rekeys = Some(rekey.old_inbound);
                let ours = child.inbound_spi;
                if let Some(old) = self.children.iter_mut().find(|c| {
                    c.inbound_spi == rekey.old_inbound && c.state == ChildState::Installed
                }) {
                    old.state = ChildState::Rekeyed;
                }
                self.children.push(ChildRef::of(&child));
                out.events
                    .push_back(Event::ChildSaInstalled(Box::new(child)));
                self.pending.push_front(OwnRequest::DeleteChild {
                    inbound_spi: rekey.old_inbound,
                });
                // RFC 7296 2.8.1: both sides rekeyed the same SA; the new
                // SA whose exchange holds the lowest of the four nonces is
                // redundant and deleted by whoever started that exchange.
                if let Some(c) = collision {
                    let ours_lowest = rekey.ni.min(nr) < c.ni.min(c.nr);
                    if ours_lowest {
                        // Its delete waits behind the old SA's; meanwhile
                        // the peer may rekey it (see `queue_delete_child`).
                        self.queue_delete_child(ours);
                    }
                }
            }
            Err(notify) => {
                // The old CHILD_SA carries on and is rekeyed again later; a
                // new one the peer made for our refused answer goes.
                let created = self.delete_if_peer_created(&inner, rekey.new_inbound);
                if notify == NotifyType::TEMPORARY_FAILURE || created {
                    self.retry_rekey_later(now, rekey.old_inbound);
                }
                out.events.push_back(Event::ChildSaFailed {
                    ike_sa: self.id,
                    notify,
                })
            }
        }
        self.pump(now, conn, cfg, rng, out)
    }

    /// After we refused an answer that created a CHILD_SA at the peer (an
    /// SA payload and no error notify: the peer installed it), queues its
    /// delete ahead of our other requests, so that the peer does not keep
    /// an SA we cannot decrypt, and may send on (RFC 7296 2.9: an
    /// initiator that does not accept the narrowed selectors deletes the
    /// CHILD_SA). A refusal by the peer created nothing.
    pub(super) fn delete_if_peer_created(&mut self, inner: &Inner, inbound_spi: u32) -> bool {
        let created = inner.error_notify().is_none() && inner.find(PayloadType::SA).is_some();
        if created {
            self.pending
                .push_front(OwnRequest::DeleteRefused { inbound_spi });
        }
        created
    }

    pub(super) fn rekeyed_child(
        &self,
        rekey: &RekeyState,
        inner: &Inner,
        conn: &Connection,
    ) -> Result<(ChildSa, Vec<u8>), NotifyType> {
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
        self.derive_child(
            suite,
            true,
            (&rekey.ni, &nr),
            shared.as_ref().map(|s| s.expose()),
            (rekey.new_inbound, outbound_spi),
            tsi.0.clone(),
            tsr.0.clone(),
        )
        .map(|c| (c, nr))
        .map_err(|_| NotifyType::NO_PROPOSAL_CHOSEN)
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
        let Ok(child) = self.derive_child(
            suite,
            false,
            (&ni, &nr),
            shared.as_ref().map(|s| s.expose()),
            (inbound, peer_spi),
            tsr.clone(),
            tsi.clone(),
        ) else {
            return refuse(Notify::ike(NotifyType::NO_PROPOSAL_CHOSEN, Vec::new()));
        };
        let nr_sent = nr.clone();
        let mut reply = vec![
            Payload::Sa(SecurityAssociation(vec![wire::proposal(
                number,
                ProtocolId::ESP,
                inbound.to_be_bytes().to_vec(),
                &suite.transforms(),
            )])),
            Payload::Nonce(Nonce(nr)),
        ];
        reply.extend(ke_reply.map(Payload::Ke));
        if echo {
            reply.push(Payload::Notify(Notify::ike(
                NotifyType::SA_RESOURCE_INFO,
                Vec::new(),
            )));
        }
        reply.push(Payload::TsI(TrafficSelectors(tsi)));
        reply.push(Payload::TsR(TrafficSelectors(tsr)));
        // The peer rekeys the SA our own rekey in flight replaces: remember
        // its nonces for RFC 7296 2.8.1 when ours completes.
        let rekeyed = inner
            .notify(NotifyType::REKEY_SA)
            .and_then(|n| n.child_spi());
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
        if let (Some(spi), Some(ours)) = (rekeyed, &self.rekey) {
            if self
                .children
                .iter()
                .any(|c| c.outbound_spi == spi && c.inbound_spi == ours.old_inbound)
            {
                self.collisions.push(Collision {
                    old_inbound: ours.old_inbound,
                    ni: ni.clone(),
                    nr: nr_sent.clone(),
                });
            }
        }
        let mut child = child;
        child.per_resource = per_resource;
        child.rekeys = rekeyed.and_then(|spi| {
            self.children
                .iter()
                .find(|c| c.outbound_spi == spi)
                .map(|c| c.inbound_spi)
        });
        self.children.push(ChildRef::of(&child));
        (reply, vec![Event::ChildSaInstalled(Box::new(child))])
    }
}
