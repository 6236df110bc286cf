//! INFORMATIONAL exchanges: the peer's (liveness, deletes) and ours,
//! queued behind the window of one.

use super::*;

impl IkeSa {
    /// An INFORMATIONAL request: liveness checks get an empty answer,
    /// deletes are acknowledged as RFC 7296 1.4.1 says.
    pub(super) fn on_informational(
        &mut self,
        now: Time,
        inner: Inner,
        cfg: &EngineConfig,
        out: &mut Output,
    ) -> Vec<Payload> {
        let mut reply = Vec::new();
        for p in &inner.payloads {
            match p {
                Payload::Delete(Delete::Ike) => {
                    // RFC 7296 2.25.2: our own rekey of it is forgotten; if
                    // we answered the peer's rekey meanwhile, the CHILD_SAs
                    // go to that new SA.
                    self.yield_to_peer_rekey(out);
                    out.events
                        .push_back(Event::IkeSaDeleted { ike_sa: self.id });
                    self.die(now, cfg);
                    return Vec::new();
                }
                Payload::Delete(Delete::Child { protocol, spis })
                    if *protocol == ProtocolId::ESP =>
                {
                    let mut ours = Vec::new();
                    for spi in spis {
                        if let Some(pos) = self.children.iter().position(|c| c.outbound_spi == *spi)
                        {
                            let ChildRef {
                                inbound_spi,
                                outbound_spi,
                                state,
                                rekeys,
                                ..
                            } = self.children.remove(pos);
                            ours.push(inbound_spi);
                            if let Some(old) = rekeys {
                                self.replacement_gone(old);
                            }
                            // An expired one was announced already.
                            if state != ChildState::Expired {
                                out.events.push_back(Event::ChildSaDeleted {
                                    ike_sa: self.id,
                                    inbound_spi,
                                    outbound_spi,
                                });
                            }
                        }
                    }
                    if !ours.is_empty() {
                        reply.push(Payload::Delete(Delete::Child {
                            protocol: ProtocolId::ESP,
                            spis: ours,
                        }));
                    }
                }
                _ => {}
            }
        }
        reply
    }

    /// A replacement of our CHILD_SA `old` (inbound SPI) went before `old`
    /// did: the peer refused its rekey's answer (RFC 7296 2.9). `old` is
    /// ours again to rekey, unless another replacement of it (a
    /// collision's) is still there.
    fn replacement_gone(&mut self, old: u32) {
        if self.children.iter().any(|c| c.rekeys == Some(old)) {
            return;
        }
        if let Some(o) = self
            .children
            .iter_mut()
            .find(|c| c.inbound_spi == old && c.state == ChildState::Rekeyed)
        {
            o.state = ChildState::Installed;
        }
    }

    /// Queues one of our INFORMATIONAL requests; it is sent when the
    /// window is free.
    pub fn queue_request(
        &mut self,
        now: Time,
        request: OwnRequest,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        if self.state != State::Established {
            return Err(EngineError::Protocol("IKE SA not established"));
        }
        if request == OwnRequest::CreateChild && self.replaced {
            // The request would be skipped unsent (`pump`): the caller
            // asks the SA that replaced this one.
            return Err(EngineError::Protocol("IKE SA replaced"));
        }
        if let OwnRequest::DeleteChild { inbound_spi } | OwnRequest::RekeyChild { inbound_spi } =
            request
        {
            if !self.children.iter().any(|c| c.inbound_spi == inbound_spi) {
                return Err(EngineError::Protocol("no such CHILD_SA"));
            }
        }
        match request {
            OwnRequest::DeleteChild { inbound_spi } => self.queue_delete_child(inbound_spi),
            _ => self.pending.push_back(request),
        }
        self.pump(now, conn, cfg, rng, out)
    }

    /// Queues our delete of the CHILD_SA `inbound_spi`. An installed one is
    /// `Deleting` from now on, not only once the delete is sent (it may
    /// wait behind other requests): a peer's rekey of it meanwhile is
    /// answered TEMPORARY_FAILURE (RFC 7296 2.25) and our own timers leave
    /// it alone. Rekeying it instead would carry on an SA we are closing,
    /// e.g. the redundant one of a 2.8.1 collision as a second lineage
    /// that no collision check sees again (found by the timed-rekey
    /// property test, tests/engine_properties.rs).
    pub(super) fn queue_delete_child(&mut self, inbound_spi: u32) {
        if let Some(c) = self
            .children
            .iter_mut()
            .find(|c| c.inbound_spi == inbound_spi && c.state == ChildState::Installed)
        {
            c.state = ChildState::Deleting;
        }
        self.pending
            .push_back(OwnRequest::DeleteChild { inbound_spi });
    }

    /// Sends the next queued request if none is outstanding.
    pub(super) fn pump(
        &mut self,
        now: Time,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        if self.outstanding.is_some() || self.state != State::Established {
            return Ok(());
        }
        // Requests queued earlier may have become moot (a CHILD_SA rekeyed
        // or deleted meanwhile, an IKE SA already replaced): skipped.
        // Once this SA is replaced, those about the CHILD_SAs stay queued
        // for the SA that takes the CHILD_SAs (`take_children`; after a
        // lost rekey collision the engine moves them only once this call
        // returns): a CHILD_SA rekeyed here then would be left behind on
        // this SA with its old one never deleted (found by the timed-rekey
        // property test, tests/engine_properties.rs).
        let mut held = Vec::new();
        let request = loop {
            let Some(request) = self.pending.pop_front() else {
                self.pending.extend(held);
                return Ok(());
            };
            // Likewise while the peer's IKE SA rekey or CHILD_SA request
            // waits for its IKE_FOLLOWUP_KE requests: an IKE SA rekey's
            // last one moves the CHILD_SAs with these requests, and an
            // exchange of ours about them in flight then would be answered
            // on this SA after they left (found by review); a CHILD_SA
            // rekey's replaces a CHILD_SA ours may be about. Our own IKE
            // SA rekey waits too.
            let hold = request.moves_with_children() || request == OwnRequest::RekeyIke;
            if (self.replaced && request.moves_with_children())
                || (self.followup_r.is_some() && hold)
            {
                held.push(request);
                continue;
            }
            let child = |spi: u32| self.children.iter().find(|c| c.inbound_spi == spi);
            let live = match request {
                OwnRequest::RekeyChild { inbound_spi } => {
                    child(inbound_spi).is_some_and(|c| c.state == ChildState::Installed)
                }
                OwnRequest::DeleteChild { inbound_spi } => child(inbound_spi).is_some(),
                OwnRequest::RekeyIke => !self.replaced,
                // RFC 9611: only while the group is short of what we
                // want (the peer may have added to it meanwhile).
                OwnRequest::CreateResource => !self.replaced && self.resource_group_short(conn),
                OwnRequest::CreateChild => !self.replaced,
                OwnRequest::Liveness | OwnRequest::DeleteIke | OwnRequest::DeleteRefused { .. } => {
                    true
                }
            };
            if live {
                for r in held.into_iter().rev() {
                    self.pending.push_front(r);
                }
                break request;
            }
            if request == OwnRequest::CreateChild {
                // Its asker waits for an answer either way.
                out.events.push_back(Event::ChildSaFailed {
                    ike_sa: self.id,
                    notify: NotifyType::TEMPORARY_FAILURE,
                });
            }
        };
        let inner = match request {
            OwnRequest::RekeyChild { inbound_spi } => {
                return self.send_rekey_child(now, inbound_spi, conn, cfg, rng, out)
            }
            OwnRequest::RekeyIke => return self.send_rekey_ike(now, conn, cfg, rng, out),
            OwnRequest::CreateResource => {
                return self.send_create_resource(now, conn, cfg, rng, out)
            }
            OwnRequest::CreateChild => return self.send_create_child(now, conn, cfg, rng, out),
            OwnRequest::Liveness => Vec::new(),
            OwnRequest::DeleteIke => vec![Payload::Delete(Delete::Ike)],
            OwnRequest::DeleteRefused { inbound_spi } => vec![Payload::Delete(Delete::Child {
                protocol: ProtocolId::ESP,
                spis: vec![inbound_spi],
            })],
            OwnRequest::DeleteChild { inbound_spi } => {
                // RFC 7296 2.25: a rekey of the peer for it is now
                // answered TEMPORARY_FAILURE.
                if let Some(c) = self
                    .children
                    .iter_mut()
                    .find(|c| c.inbound_spi == inbound_spi && c.state != ChildState::Expired)
                {
                    c.state = ChildState::Deleting;
                }
                vec![Payload::Delete(Delete::Child {
                    protocol: ProtocolId::ESP,
                    spis: vec![inbound_spi],
                })]
            }
        };
        self.send_request(
            now,
            ExchangeType::INFORMATIONAL,
            &inner,
            Some(request),
            cfg,
            rng,
            out,
        )
    }

    /// The answer to our INFORMATIONAL request: what it asked is done.
    pub(super) fn on_info_response(
        &mut self,
        now: Time,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        self.outstanding = None;
        match self.in_flight.take() {
            Some(OwnRequest::DeleteIke) => {
                out.events
                    .push_back(Event::IkeSaDeleted { ike_sa: self.id });
                self.die(now, cfg);
                return Ok(());
            }
            Some(OwnRequest::DeleteChild { inbound_spi }) => {
                if let Some(pos) = self
                    .children
                    .iter()
                    .position(|c| c.inbound_spi == inbound_spi)
                {
                    let ChildRef {
                        inbound_spi,
                        outbound_spi,
                        state,
                        ..
                    } = self.children.remove(pos);
                    if state != ChildState::Expired {
                        out.events.push_back(Event::ChildSaDeleted {
                            ike_sa: self.id,
                            inbound_spi,
                            outbound_spi,
                        });
                    }
                }
            }
            // The peer's half of a CHILD_SA we refused is gone (its answer
            // names its own inbound SPI, which we never installed).
            Some(
                OwnRequest::RekeyChild { .. }
                | OwnRequest::RekeyIke
                | OwnRequest::CreateResource
                | OwnRequest::CreateChild
                | OwnRequest::DeleteRefused { .. },
            ) => {}
            Some(OwnRequest::Liveness) => {
                out.events.push_back(Event::PeerAlive { ike_sa: self.id })
            }
            None => {}
        }
        self.pump(now, conn, cfg, rng, out)
    }
}
