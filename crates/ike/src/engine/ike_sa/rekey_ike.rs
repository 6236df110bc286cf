//! IKE SA rekey (RFC 7296 1.3.2, 2.18) as initiator and responder.

use super::*;

fn random_ike_spi(rng: &mut dyn RandomSource) -> Result<u64, EngineError> {
    loop {
        let mut b = [0u8; 8];
        rng.fill(&mut b)?;
        let spi = u64::from_be_bytes(b);
        if spi != 0 {
            return Ok(spi);
        }
    }
}

impl IkeSa {
    /// Our rekey of this SA failed or was overtaken while the peer's rekey
    /// of it had been answered (RFC 7296 2.8.2, 2.25.2): the peer's new SA
    /// stands and takes the CHILD_SAs; the peer deletes this one (if it
    /// does not within the linger, we do).
    pub(super) fn yield_to_peer_rekey(&mut self, out: &mut Output) {
        let Some(c) = self.ike_collision.take() else {
            return;
        };
        out.child_moves.push((self.id, c.new_sa));
        out.events.push_back(Event::IkeSaRekeyed {
            old: self.id,
            new: c.new_sa,
        });
    }

    /// The IKE SA that replaces this one: SKEYSEED = prf(SK_d (old),
    /// g^ir (new) | Ni | Nr) with the old PRF (RFC 7296 2.18, as strongSwan
    /// does), keys with the new suite and SPIs, message IDs from 0, the
    /// CHILD_SAs are moved by the caller. `role` is ours in the rekey
    /// exchange. `shared`: the CREATE_CHILD_SA exchange's shared secret,
    /// then those of the RFC 9370 additional exchanges (IKE_FOLLOWUP_KE),
    /// which go after the nonces (RFC 9370 2.2.4).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rekeyed_ike_sa(
        &mut self,
        role: Role,
        (spi_i, spi_r): (u64, u64),
        suite: IkeSuite,
        ni: Vec<u8>,
        nr: Vec<u8>,
        shared: &[crypto::SecretBytes],
    ) -> Result<IkeSa, EngineError> {
        let (old_suite, old_keys) = self
            .suite
            .zip(self.keys.as_ref())
            .ok_or(EngineError::Protocol("no keys"))?;
        let (first, additional) = shared
            .split_first()
            .ok_or(EngineError::Protocol("no shared secret"))?;
        let additional: Vec<&[u8]> = additional.iter().map(|s| s.expose()).collect();
        let skeyseed = crypto::rekey_skeyseed_with_additional(
            old_suite.prf,
            old_keys.sk_d.expose(),
            first.expose(),
            &ni,
            &nr,
            &additional,
        );
        let id = if role == Role::Initiator {
            spi_i
        } else {
            spi_r
        };
        let mut sa = IkeSa::new(id, self.connection, role, self.local, self.remote);
        let keys = IkeSaKeys::derive(
            &suite,
            skeyseed.expose(),
            &ni,
            &nr,
            &spi_i.to_be_bytes(),
            &spi_r.to_be_bytes(),
        )?;
        let (o, i) = SkCipher::pair(&suite, &keys, role)?;
        sa.spi_i = spi_i;
        sa.spi_r = spi_r;
        sa.udp_encap = self.udp_encap;
        sa.local_nat = self.local_nat;
        // Fragmentation carries over to the rekeyed SA (RFC 7383 2.3).
        sa.fragmentation = self.fragmentation;
        sa.suite = Some(suite);
        sa.ni = ni;
        sa.nr = nr;
        sa.keys = Some(keys);
        sa.sk_out = Some(o);
        sa.sk_in = Some(i);
        sa.state = State::Established;
        Ok(sa)
    }

    /// The IKE proposals our rekey of this SA offers. When this SA ran
    /// additional key exchanges, the peer has RFC 9370 and the
    /// connection's proposals go as configured: their additional
    /// exchanges follow in IKE_FOLLOWUP_KE exchanges (RFC 9370 2.2.4).
    /// Otherwise only those whose additional exchanges are all optional,
    /// without them: a peer without RFC 9370 rejects a proposal with
    /// transform types it does not know (RFC 7296 3.3.6).
    fn rekey_offer(&self, conn: &Connection) -> Vec<crypto::IkeProposal> {
        let ran_addke = self
            .suite
            .is_some_and(|s| s.additional_exchanges().next().is_some());
        if ran_addke {
            conn.proposals.clone()
        } else {
            intermediate::rekey_proposals(&conn.proposals)
        }
    }

    pub(super) fn send_rekey_ike(
        &mut self,
        now: Time,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        let suite = self.suite.ok_or(EngineError::Protocol("no suite"))?;
        let proposals = self.rekey_offer(conn);
        if proposals.is_empty() {
            out.events.push_back(Event::IkeRekeyFailed {
                ike_sa: self.id,
                notify: NotifyType::NO_PROPOSAL_CHOSEN,
            });
            return self.pump(now, conn, cfg, rng, out);
        }
        let new_spi_i = random_ike_spi(rng)?;
        let ni = random_bytes(rng, NONCE_LEN)?;
        // The group the peer asked for in INVALID_KE_PAYLOAD, else ours.
        let group = self.rekey_group.take().unwrap_or(suite.ke);
        let ke = crypto::KeyExchange::generate(group, rng)?;
        let offer = wire::offer(
            ProtocolId::IKE,
            &new_spi_i.to_be_bytes(),
            proposals.iter().map(|p| p.transforms()),
        );
        let inner = vec![
            Payload::Sa(offer),
            Payload::Nonce(Nonce(ni.clone())),
            Payload::Ke(KeyExchange {
                group: ke.group().id(),
                data: ke.public_value().to_vec(),
            }),
        ];
        self.send_request(
            now,
            ExchangeType::CREATE_CHILD_SA,
            &inner,
            Some(OwnRequest::RekeyIke),
            cfg,
            rng,
            out,
        )?;
        self.ike_rekey = Some(IkeRekeyState { new_spi_i, ni, ke });
        Ok(())
    }

    pub(super) fn on_rekey_ike_response(
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
        let Some(st) = self.ike_rekey.take() else {
            return Ok(());
        };
        let id = self.id;
        let refused = |notify| Event::IkeRekeyFailed { ike_sa: id, notify };
        if let Some(g) = super::create_child::requested_group(&inner) {
            // INVALID_KE_PAYLOAD for a group of our proposals other than
            // the one we sent: the same rekey again with it.
            if g != st.ke.group() && conn.proposals.iter().any(|p| p.ke.contains(&g)) {
                // A collision with the peer's rekey stays pending: the
                // retry's nonces decide it.
                self.rekey_group = Some(g);
                self.pending.push_front(OwnRequest::RekeyIke);
                return self.pump(now, conn, cfg, rng, out);
            }
        }
        if let Some(n) = inner.error_notify() {
            if n == NotifyType::TEMPORARY_FAILURE && self.ike_collision.is_none() {
                self.retry_ike_rekey_later(now, rng);
            }
            // The peer's rekey that collided with ours, if any, stands.
            self.yield_to_peer_rekey(out);
            out.events.push_back(refused(n));
            return self.pump(now, conn, cfg, rng, out);
        }
        let chosen = match inner.find(PayloadType::SA) {
            Some(Payload::Sa(sa)) => wire::offered(sa, ProtocolId::IKE),
            _ => Vec::new(),
        };
        let accepted = match (
            &chosen[..],
            inner.find(PayloadType::KE),
            nonce_of(&inner.payloads),
        ) {
            ([(_, transforms, spi)], Some(Payload::Ke(theirs)), Some(nr)) => self
                .rekey_offer(conn)
                .iter()
                .find_map(|p| p.select(transforms))
                .filter(|s| s.ke == st.ke.group() && theirs.group == s.ke.id())
                .zip(<[u8; 8]>::try_from(&spi[..]).ok().map(u64::from_be_bytes))
                .map(|(suite, spi_r)| (suite, spi_r, theirs.data.clone(), nr)),
            _ => None,
        };
        let Some((suite, spi_r, their_ke, nr)) = accepted else {
            self.yield_to_peer_rekey(out);
            out.events
                .push_back(refused(NotifyType::NO_PROPOSAL_CHOSEN));
            return self.pump(now, conn, cfg, rng, out);
        };
        let Ok(shared) = st.ke.shared_secret(&their_ke) else {
            self.yield_to_peer_rekey(out);
            out.events.push_back(refused(NotifyType::INVALID_SYNTAX));
            return self.pump(now, conn, cfg, rng, out);
        };
        if suite.additional_exchanges().next().is_some() {
            // RFC 9370 2.2.4: the additional key exchanges follow in
            // IKE_FOLLOWUP_KE exchanges on this SA; the new SA comes when
            // the last is done.
            let link = inner.notify(NotifyType::ADDITIONAL_KEY_EXCHANGE);
            let (Some(link), None) = (link, self.ike_collision.as_ref()) else {
                // No link to follow up on; or the peer's own rekey of this
                // SA was answered meanwhile (a collision), which stands.
                self.yield_to_peer_rekey(out);
                out.events.push_back(refused(NotifyType::INVALID_SYNTAX));
                return self.pump(now, conn, cfg, rng, out);
            };
            let link = link.data.clone();
            let state = followup::Initiator::new(followup::NewSa::ike(
                (st.new_spi_i, spi_r),
                suite,
                (st.ni, nr),
                shared,
            ));
            return self.send_followup(now, state, link, cfg, rng, out);
        }
        self.finish_rekey_ike(
            now,
            (st.new_spi_i, spi_r),
            suite,
            (st.ni, nr),
            &[shared],
            conn,
            cfg,
            rng,
            out,
        )
    }

    /// Our rekey of this SA is complete (its CREATE_CHILD_SA exchange, and
    /// the IKE_FOLLOWUP_KE exchanges when it had additional key
    /// exchanges): the new SA takes the CHILD_SAs and this one is deleted,
    /// or, after a collision lost, the other way round.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish_rekey_ike(
        &mut self,
        now: Time,
        (new_spi_i, spi_r): (u64, u64),
        suite: IkeSuite,
        (ni, nr): (Vec<u8>, Vec<u8>),
        shared: &[crypto::SecretBytes],
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        let ours_lowest = ni.as_slice().min(nr.as_slice()).to_vec();
        let mut new =
            self.rekeyed_ike_sa(Role::Initiator, (new_spi_i, spi_r), suite, ni, nr, shared)?;
        self.replaced = true;
        self.pending.retain(|r| *r != OwnRequest::RekeyIke);
        // RFC 7296 2.8.2: both sides rekeyed this SA at once. The new SA
        // whose exchange holds the lowest of the four nonces is deleted by
        // the side that started that exchange; the CHILD_SAs (kept here
        // until now) go to the other one. As strongSwan does, only the
        // winner deletes the old SA: the loser's answer to the winner's
        // rekey stays retransmittable on it until the winner has it.
        let collision = self.ike_collision.take();
        let lost = collision.as_ref().is_some_and(|c| {
            let theirs_lowest = c.ni.as_slice().min(c.nr.as_slice()).to_vec();
            ours_lowest < theirs_lowest
        });
        if let (true, Some(c)) = (lost, &collision) {
            new.replaced = true;
            new.pending.push_back(OwnRequest::DeleteIke);
            new.pump(now, conn, cfg, rng, out)?;
            out.new_sas.push(new);
            out.child_moves.push((self.id, c.new_sa));
            out.events.push_back(Event::IkeSaRekeyed {
                old: self.id,
                new: c.new_sa,
            });
            return Ok(());
        }
        // We won (or there was no collision): the peer's new SA, if any,
        // is redundant and deleted by the peer.
        if let Some(c) = collision {
            out.child_moves.push((c.new_sa, new.id));
        }
        new.add_children(self.take_children());
        out.events.push_back(Event::IkeSaRekeyed {
            old: self.id,
            new: new.id,
        });
        out.new_sas.push(new);
        self.pending.push_front(OwnRequest::DeleteIke);
        self.pump(now, conn, cfg, rng, out)
    }

    /// The peer rekeys the IKE SA: choose, answer with our new SPI, nonce
    /// and KE, and hand the new SA to the engine. The peer deletes the old
    /// one next.
    pub(super) fn respond_rekey_ike(
        &mut self,
        now: Time,
        inner: &Inner,
        conn: &Connection,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> (Vec<Payload>, Vec<Event>) {
        let refuse = |n: Notify| (vec![Payload::Notify(n)], Vec::new());
        // `create`: our request for a new CHILD_SA (the connection's own
        // or RFC 9611's) whose answer would arrive on this SA after its
        // CHILD_SAs moved.
        let child_exchange = self.rekey.is_some()
            || self.create.is_some()
            || matches!(
                self.in_flight,
                Some(OwnRequest::DeleteChild { .. } | OwnRequest::DeleteRefused { .. })
            );
        if self.replaced || child_exchange {
            // RFC 7296 2.25: this SA is already replaced (our rekey or
            // reauthentication completed) and our delete of it follows.
            // And as strongSwan: not while our own CHILD_SA exchange on it
            // is outstanding (moving the CHILD_SAs now would strand the
            // one it creates or deletes; found by the timed-rekey property
            // test). The peer tries again later.
            return refuse(Notify::ike(NotifyType::TEMPORARY_FAILURE, Vec::new()));
        }
        if self.followup_pending() {
            // An IKE SA rekey with IKE_FOLLOWUP_KE exchanges is under way
            // (either side's): the peer tries again later.
            return refuse(Notify::ike(NotifyType::TEMPORARY_FAILURE, Vec::new()));
        }
        let offered = match inner.find(PayloadType::SA) {
            Some(Payload::Sa(sa)) => wire::offered(sa, ProtocolId::IKE),
            _ => Vec::new(),
        };
        // RFC 9370 2.2.4: a proposal with additional key exchanges is
        // taken as configured, they follow in IKE_FOLLOWUP_KE exchanges;
        // else one whose additional exchanges are all optional, without
        // them.
        let offered_transforms = || offered.iter().map(|(n, t, _)| (*n, &t[..]));
        let Some((number, suite)) =
            select_ike(&conn.proposals, offered_transforms()).or_else(|| {
                select_ike(
                    &intermediate::rekey_proposals(&conn.proposals),
                    offered_transforms(),
                )
            })
        else {
            return refuse(Notify::ike(NotifyType::NO_PROPOSAL_CHOSEN, Vec::new()));
        };
        let followups = suite.additional_exchanges().next().is_some();
        if followups && self.ike_rekey.is_some() {
            // Our own rekey of this SA is outstanding: a collision that
            // the nonces would decide only once the peer's additional
            // exchanges are done; refused instead (RFC 7296 2.25), each
            // side tries again after its own delay.
            return refuse(Notify::ike(NotifyType::TEMPORARY_FAILURE, Vec::new()));
        }
        let peer_spi = offered
            .iter()
            .find(|(n, _, _)| *n == number)
            .and_then(|(_, _, spi)| <[u8; 8]>::try_from(&spi[..]).ok())
            .map(u64::from_be_bytes)
            .filter(|s| *s != 0);
        let (Some(peer_spi), Some(ni)) = (peer_spi, nonce_of(&inner.payloads)) else {
            return refuse(Notify::ike(NotifyType::INVALID_SYNTAX, Vec::new()));
        };
        let Some(Payload::Ke(theirs)) = inner
            .find(PayloadType::KE)
            .filter(|p| matches!(p, Payload::Ke(k) if k.group == suite.ke.id()))
        else {
            return refuse(Notify::invalid_ke_payload(suite.ke.id()));
        };
        let built = (|| -> Result<(crypto::KeyExchange, crypto::SecretBytes, Vec<u8>, u64), EngineError> {
            let ours = crypto::KeyExchange::generate(suite.ke, rng)?;
            let shared = ours.shared_secret(&theirs.data)?;
            Ok((ours, shared, random_bytes(rng, NONCE_LEN)?, random_ike_spi(rng)?))
        })();
        let Ok((ours, shared, nr, spi_r)) = built else {
            return refuse(Notify::ike(NotifyType::INVALID_SYNTAX, Vec::new()));
        };
        // Our answer: the chosen proposal with our new SPI, Nr, KEr (and,
        // with additional exchanges to follow, the link for them).
        let mut reply = vec![
            Payload::Sa(SecurityAssociation(vec![wire::proposal(
                number,
                ProtocolId::IKE,
                spi_r.to_be_bytes().to_vec(),
                &suite.transforms(),
            )])),
            Payload::Nonce(Nonce(nr.clone())),
            Payload::Ke(KeyExchange {
                group: suite.ke.id(),
                data: ours.public_value().to_vec(),
            }),
        ];
        if followups {
            let Ok(link) = random_bytes(rng, followup::LINK_LEN) else {
                return refuse(Notify::ike(NotifyType::TEMPORARY_FAILURE, Vec::new()));
            };
            self.followup_r = Some(followup::Responder::new(
                now,
                followup::NewSa::ike((peer_spi, spi_r), suite, (ni, nr), shared),
                link.clone(),
            ));
            reply.push(Payload::Notify(Notify::ike(
                NotifyType::ADDITIONAL_KEY_EXCHANGE,
                link,
            )));
            return (reply, Vec::new());
        }
        let collision = self.ike_rekey.is_some().then(|| (ni.clone(), nr.clone()));
        let Ok(mut new) =
            self.rekeyed_ike_sa(Role::Responder, (peer_spi, spi_r), suite, ni, nr, &[shared])
        else {
            return refuse(Notify::ike(NotifyType::TEMPORARY_FAILURE, Vec::new()));
        };
        // Our own rekey of this SA is outstanding: RFC 7296 2.8.2 decides
        // when its answer comes, and the CHILD_SAs stay here until then.
        // Otherwise they move now and the peer deletes this SA.
        let mut events = Vec::new();
        if let Some((ni, nr)) = collision {
            self.ike_collision = Some(IkeCollision {
                ni,
                nr,
                new_sa: new.id,
            });
        } else {
            new.add_children(self.take_children());
            events.push(Event::IkeSaRekeyed {
                old: self.id,
                new: new.id,
            });
        }
        self.replaced = true;
        out.new_sas.push(new);
        (reply, events)
    }
}
