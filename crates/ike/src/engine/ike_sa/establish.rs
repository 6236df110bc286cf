//! IKE_SA_INIT and IKE_AUTH, as initiator and responder, and the first
//! CHILD_SA they create. What authentication itself takes (PSK or
//! certificates, the responder's choice of connection) is in [`super::pubkey`].

use super::*;

impl IkeSa {
    // ---- initiator ----

    pub fn initiate(
        id: IkeSaId,
        connection: ConnectionId,
        conn: &Connection,
        now: Time,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<Self, EngineError> {
        let group = conn
            .proposals
            .first()
            .and_then(|p| p.ke.first().copied())
            .ok_or(EngineError::Protocol("connection has no IKE proposal"))?;
        let mut sa = IkeSa::new(id, connection, Role::Initiator, conn.local, conn.remote);
        sa.setup_began = Some(now);
        sa.spi_i = id;
        sa.ke = Some(crypto::KeyExchange::generate(group, rng)?);
        sa.ni = random_bytes(rng, NONCE_LEN)?;
        sa.send_init_request(now, conn, cfg, out)?;
        Ok(sa)
    }

    pub(super) fn send_init_request(
        &mut self,
        now: Time,
        conn: &Connection,
        cfg: &EngineConfig,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        let ke = self
            .ke
            .as_ref()
            .ok_or(EngineError::Protocol("no key exchange"))?;
        let mut payloads = Vec::new();
        if let Some(c) = &self.cookie {
            // RFC 7296 2.6: the cookie comes first.
            payloads.push(Payload::Notify(Notify::ike(NotifyType::COOKIE, c.clone())));
        }
        payloads.push(Payload::Sa(wire::offer(
            ProtocolId::IKE,
            &[],
            conn.proposals.iter().map(|p| p.transforms()),
        )));
        payloads.push(Payload::Ke(KeyExchange {
            group: ke.group().id(),
            data: ke.public_value().to_vec(),
        }));
        payloads.push(Payload::Nonce(Nonce(self.ni.clone())));
        payloads.push(Payload::Notify(Notify::ike(
            NotifyType::NAT_DETECTION_SOURCE_IP,
            nat::source_hash(conn.force_encap, self.spi_i, 0, self.local),
        )));
        payloads.push(Payload::Notify(Notify::ike(
            NotifyType::NAT_DETECTION_DESTINATION_IP,
            nat::hash(self.spi_i, 0, self.remote),
        )));
        if conn.fragmentation.unwrap_or(cfg.fragmentation) {
            payloads.push(Payload::Notify(Notify::ike(
                NotifyType::IKEV2_FRAGMENTATION_SUPPORTED,
                Vec::new(),
            )));
        }
        if intermediate::wants_addke(&conn.proposals) {
            payloads.push(Payload::Notify(Notify::ike(
                NotifyType::INTERMEDIATE_EXCHANGE_SUPPORTED,
                Vec::new(),
            )));
        }
        if conn.auth == AuthKind::PubKey {
            payloads.push(pubkey::hash_notify());
        }
        let msg = Message {
            header: self.header(ExchangeType::IKE_SA_INIT, false, 0),
            payloads,
        }
        .emit()?;
        self.init_request = msg.clone();
        self.state = State::InitSent;
        self.transmit_request(now, cfg, out, 0, vec![msg]);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_init_response(
        &mut self,
        now: Time,
        src: SocketAddr,
        dst: SocketAddr,
        header: &HeaderRepr,
        datagram: &[u8],
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        let msg = Message::parse(datagram)?;
        if let Some(c) = msg.notifies(NotifyType::COOKIE).next() {
            if self.cookie.as_ref() == Some(&c.data) {
                // A duplicate of the answer we already followed.
                out.stats.unexpected += 1;
                return Ok(());
            }
            self.cookie = Some(c.data.clone());
            return self.send_init_request(now, conn, cfg, out);
        }
        if let Some(n) = msg.notifies(NotifyType::INVALID_KE_PAYLOAD).next() {
            let current = self.ke.as_ref().map(|k| k.group());
            let wanted = n.requested_group().and_then(KeGroup::from_id);
            match wanted {
                // Our request is indistinguishable from its retry (both
                // have message ID 0): a duplicate of the answer we already
                // followed asks for the group we use now. Ignore it.
                Some(g) if Some(g) == current => {
                    out.stats.unexpected += 1;
                    return Ok(());
                }
                Some(g) if conn.proposals.iter().any(|p| p.ke.contains(&g)) => {
                    self.ke = Some(crypto::KeyExchange::generate(g, rng)?);
                    return self.send_init_request(now, conn, cfg, out);
                }
                _ => {
                    self.fail(
                        now,
                        cfg,
                        out,
                        FailReason::PeerNotify(NotifyType::INVALID_KE_PAYLOAD),
                    );
                    return Ok(());
                }
            }
        }
        if let Some(n) = msg.payloads.iter().find_map(|p| match p {
            Payload::Notify(n) if n.notify_type.is_error() => Some(n.notify_type),
            _ => None,
        }) {
            self.fail(now, cfg, out, FailReason::PeerNotify(n));
            return Ok(());
        }
        let chosen = match msg.find(PayloadType::SA) {
            Some(Payload::Sa(sa)) if sa.0.len() == 1 => wire::offered(sa, ProtocolId::IKE),
            _ => {
                self.fail(
                    now,
                    cfg,
                    out,
                    FailReason::Protocol("IKE_SA_INIT response without one proposal"),
                );
                return Ok(());
            }
        };
        let suite = chosen
            .first()
            .and_then(|(_, t, _)| conn.proposals.iter().find_map(|p| p.select(t)));
        let (Some(suite), Some(Payload::Ke(peer_ke)), Some(nr)) =
            (suite, msg.find(PayloadType::KE), nonce_of(&msg.payloads))
        else {
            self.fail(now, cfg, out, FailReason::NoProposalChosen);
            return Ok(());
        };
        let Some(ke) = self
            .ke
            .as_ref()
            .filter(|k| k.group() == suite.ke && peer_ke.group == suite.ke.id())
        else {
            self.fail(
                now,
                cfg,
                out,
                FailReason::Protocol("KE group differs from the chosen proposal"),
            );
            return Ok(());
        };
        let Ok(shared) = ke.shared_secret(&peer_ke.data) else {
            self.fail(now, cfg, out, FailReason::Protocol("invalid KE value"));
            return Ok(());
        };
        if header.spi_r == 0 {
            self.fail(now, cfg, out, FailReason::Protocol("responder SPI is zero"));
            return Ok(());
        }
        self.spi_r = header.spi_r;
        self.nr = nr;
        self.suite = Some(suite);
        self.init_response = datagram.to_vec();
        self.derive_ike_keys(&shared)?;
        self.fragmentation = conn.fragmentation.unwrap_or(cfg.fragmentation)
            && msg
                .notifies(NotifyType::IKEV2_FRAGMENTATION_SUPPORTED)
                .next()
                .is_some();
        if let Some(nat) = nat::detect(&msg, self.spi_i, self.spi_r, src, dst) {
            self.local_nat = nat.local_behind_nat;
            if nat.any() || conn.force_encap {
                // RFC 7296 2.23: the initiator moves to port 4500 for
                // IKE_AUTH on; the responder follows it there.
                self.udp_encap = true;
                self.local.set_port(cfg.nat_t_port);
                self.remote.set_port(cfg.nat_t_port);
            }
        }
        self.outstanding = None;
        self.next_request_id = 1;
        self.after_init_response(now, &msg, conn, cfg, rng, out)
    }

    pub(super) fn derive_ike_keys(
        &mut self,
        shared: &crypto::SecretBytes,
    ) -> Result<(), EngineError> {
        let suite = self.suite.ok_or(EngineError::Protocol("no suite"))?;
        let skeyseed = crypto::skeyseed(suite.prf, &self.ni, &self.nr, shared.expose());
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
        self.sk_in = Some(i);
        self.keys = Some(keys);
        Ok(())
    }

    pub(super) fn peer_id_text(&self, inner: &Inner) -> Option<String> {
        inner.payloads.iter().find_map(|p| match (p, self.role) {
            (Payload::IdR(id), Role::Initiator) | (Payload::IdI(id), Role::Responder) => {
                Some(id_text(id))
            }
            _ => None,
        })
    }

    pub(super) fn send_auth_request(
        &mut self,
        now: Time,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        self.child_spi = random_child_spi(rng)?;
        let (mut inner, auth) =
            self.our_auth_payloads(conn, Payload::IdI(conn.local_id.clone()))?;
        if let Some(r) = &conn.remote_id {
            inner.push(Payload::IdR(r.clone()));
        }
        inner.push(Payload::Auth(auth));
        if self.initial_contact {
            inner.push(Payload::Notify(Notify::ike(
                NotifyType::INITIAL_CONTACT,
                Vec::new(),
            )));
        }
        // RFC 9611: we want per-resource CHILD_SAs of this one's selectors.
        if conn.per_resource_sas > 1 {
            inner.push(Payload::Notify(Notify::ike(
                NotifyType::SA_RESOURCE_INFO,
                Vec::new(),
            )));
        }
        inner.push(Payload::Sa(wire::offer(
            ProtocolId::ESP,
            &self.child_spi.to_be_bytes(),
            without_pfs(&conn.esp_proposals)
                .iter()
                .map(|p| p.transforms()),
        )));
        inner.push(Payload::TsI(TrafficSelectors(conn.local_ts.clone())));
        inner.push(Payload::TsR(TrafficSelectors(conn.remote_ts.clone())));
        // The message ID is 1 (set when IKE_SA_INIT was answered); no
        // request of ours is in flight before the SA is established.
        self.send_request(now, ExchangeType::IKE_AUTH, &inner, None, cfg, rng, out)?;
        self.state = State::AuthSent;
        Ok(())
    }

    pub(super) fn on_auth_response(
        &mut self,
        now: Time,
        inner: Inner,
        conn: &Connection,
        cfg: &EngineConfig,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        self.outstanding = None;
        if inner.notify(NotifyType::AUTHENTICATION_FAILED).is_some() {
            self.auth_failed(now, cfg, out, None, AuthFailure::RejectedByPeer);
            return Ok(());
        }
        if let Err(reason) = self.verify_peer(conn, &inner, cfg.unix_time(now)) {
            let peer_id = self.peer_id_text(&inner);
            self.auth_failed(now, cfg, out, peer_id, reason);
            return Ok(());
        }
        self.state = State::Established;
        out.events.push_back(Event::IkeSaUp {
            ike_sa: self.id,
            connection: self.connection,
            suite: self.suite.ok_or(EngineError::Protocol("no suite"))?,
            local: self.local,
            remote: self.remote,
            initiator: self.role == Role::Initiator,
            spi_i: self.spi_i,
            spi_r: self.spi_r,
            initial_contact: self.role == Role::Responder && self.initial_contact,
            redundant: false,
        });
        match self.initiator_child(conn, &inner) {
            Ok(child) => {
                self.children.push(ChildRef::of(&child));
                out.events
                    .push_back(Event::ChildSaInstalled(Box::new(child)));
                // RFC 9611: the responder echoed SA_RESOURCE_INFO, so it
                // takes more CHILD_SAs of these selectors (up to its own
                // limit, TS_MAX_QUEUE past it). A peer that ignored the
                // notify gets nothing more.
                if conn.per_resource_sas > 1 && inner.notify(NotifyType::SA_RESOURCE_INFO).is_some()
                {
                    for _ in 1..conn.per_resource_sas {
                        self.pending.push_back(OwnRequest::CreateResource);
                    }
                }
            }
            Err(notify) => {
                let spi = self.child_spi;
                self.delete_if_peer_created(&inner, spi);
                out.events.push_back(Event::ChildSaFailed {
                    ike_sa: self.id,
                    notify,
                });
            }
        }
        Ok(())
    }

    pub(super) fn initiator_child(
        &self,
        conn: &Connection,
        inner: &Inner,
    ) -> Result<ChildSa, NotifyType> {
        if let Some(n) = inner.error_notify() {
            return Err(n);
        }
        let (Some(Payload::Sa(sa)), Some(Payload::TsI(tsi)), Some(Payload::TsR(tsr))) = (
            inner.find(PayloadType::SA),
            inner.find(PayloadType::TSI),
            inner.find(PayloadType::TSR),
        ) else {
            return Err(NotifyType::NO_PROPOSAL_CHOSEN);
        };
        let (suite, outbound_spi) = accepted_esp(sa, &without_pfs(&conn.esp_proposals))?;
        if !ts::is_subset(&tsi.0, &conn.local_ts) || !ts::is_subset(&tsr.0, &conn.remote_ts) {
            return Err(NotifyType::TS_UNACCEPTABLE);
        }
        self.child(
            suite,
            self.child_spi,
            outbound_spi,
            tsi.0.clone(),
            tsr.0.clone(),
        )
        .map_err(|_| NotifyType::NO_PROPOSAL_CHOSEN)
    }

    /// Derives the first CHILD_SA's keys from SK_d and the IKE_SA_INIT
    /// nonces. `local_ts`/`remote_ts` are TSi/TSr from our point of view
    /// when initiator; the responder passes them swapped.
    pub(super) fn child(
        &self,
        suite: crypto::ChildSuite,
        inbound_spi: u32,
        outbound_spi: u32,
        tsi: Vec<crate::message::TrafficSelector>,
        tsr: Vec<crate::message::TrafficSelector>,
    ) -> Result<ChildSa, EngineError> {
        let (local_ts, remote_ts) = match self.role {
            Role::Initiator => (tsi, tsr),
            Role::Responder => (tsr, tsi),
        };
        self.derive_child(
            suite,
            self.role == Role::Initiator,
            (&self.ni, &self.nr),
            &[],
            (inbound_spi, outbound_spi),
            local_ts,
            remote_ts,
        )
    }

    /// A CHILD_SA's keys: KEYMAT = prf+(SK_d, [g^ir] | Ni | Nr | [SK(1)
    /// | ... | SK(n)]) with the nonces of the exchange that creates it;
    /// `shared` holds the PFS secret g^ir first, then those of RFC 9370
    /// additional exchanges (empty without PFS). The first half protects
    /// traffic from that exchange's initiator (`we_initiated`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn derive_child(
        &self,
        suite: crypto::ChildSuite,
        we_initiated: bool,
        (ni, nr): (&[u8], &[u8]),
        shared: &[crypto::SecretBytes],
        (inbound_spi, outbound_spi): (u32, u32),
        local_ts: Vec<TrafficSelector>,
        remote_ts: Vec<TrafficSelector>,
    ) -> Result<ChildSa, EngineError> {
        let (ike, keys) = self
            .suite
            .zip(self.keys.as_ref())
            .ok_or(EngineError::Protocol("no keys"))?;
        let (pfs, additional) = match shared.split_first() {
            Some((first, rest)) => (Some(first.expose()), rest),
            None => (None, &[][..]),
        };
        let additional: Vec<&[u8]> = additional.iter().map(|s| s.expose()).collect();
        let km = ChildSaKeys::derive_with_additional(
            ike.prf,
            keys.sk_d.expose(),
            pfs,
            ni,
            nr,
            &additional,
            suite.esp,
        )?;
        let (inbound, outbound) = if we_initiated {
            (km.responder_to_initiator, km.initiator_to_responder)
        } else {
            (km.initiator_to_responder, km.responder_to_initiator)
        };
        Ok(ChildSa {
            ike_sa: self.id,
            connection: self.connection,
            suite: suite.esp,
            esn: suite.esn == crypto::Esn::Yes,
            inbound_spi,
            outbound_spi,
            inbound,
            outbound,
            local_ts,
            remote_ts,
            local: self.local,
            remote: self.remote,
            udp_encap: self.udp_encap,
            initiated_by_us: we_initiated,
            rekeys: None,
            per_resource: false,
            key_exchange: suite.ke,
            additional_key_exchanges: suite.addke,
        })
    }

    pub(super) fn auth_failed(
        &mut self,
        now: Time,
        cfg: &EngineConfig,
        out: &mut Output,
        peer_id: Option<String>,
        reason: AuthFailure,
    ) {
        out.events.push_back(Event::AuthFailed {
            ike_sa: self.id,
            connection: self.connection,
            peer: self.remote,
            peer_id,
            reason,
        });
        self.die(now, cfg);
    }

    // ---- responder ----

    /// Answers an IKE_SA_INIT request. Proposal and KE problems are
    /// answered statelessly (None); otherwise the new half-open SA.
    #[allow(clippy::too_many_arguments)]
    pub fn respond(
        id: IkeSaId,
        connection: ConnectionId,
        conns: &[Connection],
        now: Time,
        src: SocketAddr,
        dst: SocketAddr,
        datagram: &[u8],
        msg: &Message,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Option<IkeSa> {
        let conn = conns.get(connection)?;
        let h = &msg.header;
        let stateless = |out: &mut Output, n: Notify| {
            let reply = Message {
                header: HeaderRepr {
                    spi_r: 0,
                    response: true,
                    initiator: false,
                    ..*h
                },
                payloads: vec![Payload::Notify(n)],
            };
            if let Ok(bytes) = reply.emit() {
                Self::transmit(cfg, out, dst, src, &bytes);
            }
        };
        let offered = match msg.find(PayloadType::SA) {
            Some(Payload::Sa(sa)) => wire::offered(sa, ProtocolId::IKE),
            _ => {
                out.stats.malformed += 1;
                return None;
            }
        };
        let intermediate = msg
            .notifies(NotifyType::INTERMEDIATE_EXCHANGE_SUPPORTED)
            .next()
            .is_some();
        let Some((number, suite)) = select_ike(
            &Self::init_proposals(conn, intermediate),
            offered.iter().map(|(n, t, _)| (*n, &t[..])),
        ) else {
            out.stats.init_no_proposal += 1;
            stateless(out, Notify::ike(NotifyType::NO_PROPOSAL_CHOSEN, Vec::new()));
            return None;
        };
        let (Some(Payload::Ke(peer_ke)), Some(ni)) =
            (msg.find(PayloadType::KE), nonce_of(&msg.payloads))
        else {
            out.stats.malformed += 1;
            return None;
        };
        if peer_ke.group != suite.ke.id() {
            stateless(out, Notify::invalid_ke_payload(suite.ke.id()));
            return None;
        }
        let mut sa = IkeSa::new(id, connection, Role::Responder, dst, src);
        sa.setup_began = Some(now);
        sa.spi_i = h.spi_i;
        sa.spi_r = id;
        sa.ni = ni;
        let built = (|| -> Result<Vec<u8>, EngineError> {
            let ke = crypto::KeyExchange::generate(suite.ke, rng)?;
            let shared = ke.shared_secret(&peer_ke.data)?;
            sa.nr = random_bytes(rng, NONCE_LEN)?;
            sa.suite = Some(suite);
            let mut payloads = vec![
                Payload::Sa(SecurityAssociation(vec![wire::proposal(
                    number,
                    ProtocolId::IKE,
                    Vec::new(),
                    &suite.transforms(),
                )])),
                Payload::Ke(KeyExchange {
                    group: suite.ke.id(),
                    data: ke.public_value().to_vec(),
                }),
                Payload::Nonce(Nonce(sa.nr.clone())),
                Payload::Notify(Notify::ike(
                    NotifyType::NAT_DETECTION_SOURCE_IP,
                    nat::source_hash(conn.force_encap, sa.spi_i, sa.spi_r, dst),
                )),
                Payload::Notify(Notify::ike(
                    NotifyType::NAT_DETECTION_DESTINATION_IP,
                    nat::hash(sa.spi_i, sa.spi_r, src),
                )),
            ];
            // RFC 7383 2.3: announced only in answer to the peer's.
            sa.fragmentation = conn.fragmentation.unwrap_or(cfg.fragmentation)
                && msg
                    .notifies(NotifyType::IKEV2_FRAGMENTATION_SUPPORTED)
                    .next()
                    .is_some();
            if sa.fragmentation {
                payloads.push(Payload::Notify(Notify::ike(
                    NotifyType::IKEV2_FRAGMENTATION_SUPPORTED,
                    Vec::new(),
                )));
            }
            // RFC 9242 3: announced only in answer to the peer's.
            if intermediate {
                payloads.push(Payload::Notify(Notify::ike(
                    NotifyType::INTERMEDIATE_EXCHANGE_SUPPORTED,
                    Vec::new(),
                )));
            }
            // Certificates: for every connection IKE_AUTH may still
            // switch to (same peer address), as strongSwan names all its CAs.
            let candidates = conns.iter().filter(|c| {
                c.auth == AuthKind::PubKey
                    && (c.remote.ip().is_unspecified() || c.remote.ip() == src.ip())
            });
            if candidates.clone().next().is_some() {
                payloads.extend(pubkey::certreq(candidates.flat_map(|c| &c.cacerts)));
                // RFC 7427 4: only in answer to the initiator's.
                if msg
                    .notifies(NotifyType::SIGNATURE_HASH_ALGORITHMS)
                    .next()
                    .is_some()
                {
                    payloads.push(pubkey::hash_notify());
                }
            }
            let bytes = Message {
                header: sa.header(ExchangeType::IKE_SA_INIT, true, 0),
                payloads,
            }
            .emit()?;
            sa.init_request = datagram.to_vec();
            sa.init_response = bytes.clone();
            sa.derive_ike_keys(&shared)?;
            Ok(bytes)
        })();
        let Ok(bytes) = built else {
            // Chiefly a KE value that is not a group element.
            out.stats.malformed += 1;
            return None;
        };
        if let Some(nat) = nat::detect(msg, sa.spi_i, 0, src, dst) {
            sa.udp_encap = nat.any() || conn.force_encap;
            sa.local_nat = nat.local_behind_nat;
        }
        Self::transmit(cfg, out, dst, src, &bytes);
        sa.last_response = Some((0, vec![bytes]));
        sa.expected_request_id = 1;
        sa.state = State::InitDone;
        sa.expires = Some(now + cfg.half_open_timeout_ms);
        Some(sa)
    }

    /// A retransmitted IKE_SA_INIT request: the stored response again, if
    /// it is the very request we answered.
    pub fn answer_init_duplicate(&self, request: &[u8], out: &mut Output) {
        if request == self.init_request {
            if let Some((0, bytes)) = &self.last_response {
                // IKE_SA_INIT is always on the port it arrived on (500).
                for b in bytes {
                    out.transmits.push_back(Transmit {
                        src: self.init_local(),
                        dst: self.init_remote(),
                        payload: b.clone(),
                    });
                }
                out.stats.retransmitted_responses += 1;
                return;
            }
        }
        out.stats.unexpected += 1;
    }

    pub(super) fn init_local(&self) -> SocketAddr {
        self.local
    }

    pub(super) fn init_remote(&self) -> SocketAddr {
        self.remote
    }

    pub(super) fn on_auth_request(
        &mut self,
        now: Time,
        inner: Inner,
        conns: &[Connection],
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
    ) -> Result<(Vec<Payload>, Vec<Event>), EngineError> {
        if let Some(chosen) = self.select_connection(conns, &inner) {
            self.connection = chosen;
        }
        let conn = conns
            .get(self.connection)
            .ok_or(EngineError::UnknownConnection)?;
        if let Err(reason) = self.verify_peer(conn, &inner, cfg.unix_time(now)) {
            let ev = Event::AuthFailed {
                ike_sa: self.id,
                connection: self.connection,
                peer: self.remote,
                peer_id: self.peer_id_text(&inner),
                reason,
            };
            self.die(now, cfg);
            return Ok((
                vec![Payload::Notify(Notify::ike(
                    NotifyType::AUTHENTICATION_FAILED,
                    Vec::new(),
                ))],
                vec![ev],
            ));
        }
        let (mut reply, auth) =
            self.our_auth_payloads(conn, Payload::IdR(conn.local_id.clone()))?;
        reply.push(Payload::Auth(auth));
        self.state = State::Established;
        self.expires = None;
        self.initial_contact = inner.notify(NotifyType::INITIAL_CONTACT).is_some();
        let mut events = vec![Event::IkeSaUp {
            ike_sa: self.id,
            connection: self.connection,
            suite: self.suite.ok_or(EngineError::Protocol("no suite"))?,
            local: self.local,
            remote: self.remote,
            initiator: self.role == Role::Initiator,
            spi_i: self.spi_i,
            spi_r: self.spi_r,
            initial_contact: self.role == Role::Responder && self.initial_contact,
            redundant: false,
        }];
        match self.responder_child(conn, &inner, rng) {
            Ok((child, number, transforms)) => {
                reply.push(Payload::Sa(SecurityAssociation(vec![wire::proposal(
                    number,
                    ProtocolId::ESP,
                    child.inbound_spi.to_be_bytes().to_vec(),
                    &transforms,
                )])));
                reply.push(Payload::TsI(TrafficSelectors(child.remote_ts.clone())));
                reply.push(Payload::TsR(TrafficSelectors(child.local_ts.clone())));
                // RFC 9611: echoed only when we want per-resource SAs too;
                // otherwise the initiator creates no more (as with a peer
                // that does not know the notify).
                if conn.per_resource_sas > 1 && inner.notify(NotifyType::SA_RESOURCE_INFO).is_some()
                {
                    reply.push(Payload::Notify(Notify::ike(
                        NotifyType::SA_RESOURCE_INFO,
                        Vec::new(),
                    )));
                    // The per-resource SAs the initiator does not create
                    // itself by then, we do (`lifetime::topup_resources`).
                    self.resource_topup_at = Some(now + super::lifetime::RESOURCE_TOPUP_DELAY_MS);
                }
                self.children.push(ChildRef::of(&child));
                events.push(Event::ChildSaInstalled(Box::new(child)));
            }
            Err(notify) => {
                reply.push(Payload::Notify(Notify::ike(notify, Vec::new())));
                events.push(Event::ChildSaFailed {
                    ike_sa: self.id,
                    notify,
                });
            }
        }
        Ok((reply, events))
    }

    pub(super) fn responder_child(
        &self,
        conn: &Connection,
        inner: &Inner,
        rng: &mut dyn RandomSource,
    ) -> Result<(ChildSa, u8, Vec<crypto::Transform>), NotifyType> {
        let (Some(Payload::Sa(sa)), Some(Payload::TsI(tsi)), Some(Payload::TsR(tsr))) = (
            inner.find(PayloadType::SA),
            inner.find(PayloadType::TSI),
            inner.find(PayloadType::TSR),
        ) else {
            return Err(NotifyType::NO_PROPOSAL_CHOSEN);
        };
        let offered = wire::offered(sa, ProtocolId::ESP);
        let ours = without_pfs(&conn.esp_proposals);
        let (number, suite) = select_esp(&ours, offered.iter().map(|(n, t, _)| (*n, &t[..])))
            .ok_or(NotifyType::NO_PROPOSAL_CHOSEN)?;
        let spi = offered
            .iter()
            .find(|(n, _, _)| *n == number)
            .and_then(|(_, _, spi)| <[u8; 4]>::try_from(&spi[..]).ok())
            .map(u32::from_be_bytes)
            .ok_or(NotifyType::INVALID_SYNTAX)?;
        // Narrowing: what the initiator asked for, within our policy.
        let tsi = ts::narrow(&tsi.0, &conn.remote_ts);
        let tsr = ts::narrow(&tsr.0, &conn.local_ts);
        if tsi.is_empty() || tsr.is_empty() {
            return Err(NotifyType::TS_UNACCEPTABLE);
        }
        let inbound = random_child_spi(rng).map_err(|_| NotifyType::TEMPORARY_FAILURE)?;
        let child = self
            .child(suite, inbound, spi, tsi, tsr)
            .map_err(|_| NotifyType::NO_PROPOSAL_CHOSEN)?;
        Ok((child, number, suite.transforms()))
    }
}
