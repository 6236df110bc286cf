//! One IKE SA's state machine: IKE_SA_INIT and IKE_AUTH (PSK) as
//! initiator and responder, the first CHILD_SA, the request window of one
//! with retransmission, and answers to the peer's INFORMATIONAL requests.

use std::net::SocketAddr;

use crate::crypto::auth::{maced_id, psk_auth, signed_octets, verify_psk_auth};
use crate::crypto::{
    self, select_esp, select_ike, ChildSaKeys, EspProposal, IkeSaKeys, IkeSuite, KeGroup,
    RandomSource, Role, SkCipher,
};
use crate::message::{
    AuthMethod, Authentication, Delete, ExchangeType, HeaderRepr, KeyExchange, Message, Nonce,
    Notify, NotifyType, Payload, PayloadType, ProtocolId, SecurityAssociation, TrafficSelector,
    TrafficSelectors,
};

use super::wire::{self, Inner};
use super::{
    id_text, nat, ts, AuthFailure, ChildSa, Connection, ConnectionId, EngineConfig, EngineError,
    Event, FailReason, IkeSaId, Output, Time, Transmit,
};

/// Our nonce length: 32 bytes (at least half the largest PRF key size,
/// RFC 7296 2.10).
const NONCE_LEN: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Initiator: IKE_SA_INIT request sent.
    InitSent,
    /// Initiator: IKE_AUTH request sent.
    AuthSent,
    /// Responder: IKE_SA_INIT answered, waiting for IKE_AUTH.
    InitDone,
    /// IKE_AUTH done.
    Established,
    /// Failed or deleted: only answers retransmissions until it expires.
    Dead,
}

/// A request of ours (INFORMATIONAL or CREATE_CHILD_SA), queued until
/// the window (one outstanding request, RFC 7296 2.3) is free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OwnRequest {
    /// An empty INFORMATIONAL: is the peer alive (dead peer detection)?
    Liveness,
    /// Delete this IKE SA (and its CHILD_SAs).
    DeleteIke,
    /// Delete one CHILD_SA, named by our inbound SPI.
    DeleteChild {
        /// Our inbound SPI.
        inbound_spi: u32,
    },
    /// Replace one CHILD_SA (named by our inbound SPI) by a new one with
    /// fresh keys (CREATE_CHILD_SA with REKEY_SA, RFC 7296 1.3.3), then
    /// delete the old one.
    RekeyChild {
        /// Our inbound SPI of the CHILD_SA to replace.
        inbound_spi: u32,
    },
    /// Replace the IKE SA by a new one (RFC 7296 1.3.2, 2.18), then delete
    /// the old one.
    RekeyIke,
}

/// Our CREATE_CHILD_SA request that rekeys the IKE SA.
struct IkeRekeyState {
    new_spi_i: u64,
    ni: Vec<u8>,
    ke: crypto::KeyExchange,
}

/// What the IKE SA remembers of each CHILD_SA (the data plane holds the
/// keys).
#[derive(Clone, Debug)]
struct ChildRef {
    inbound_spi: u32,
    outbound_spi: u32,
    local_ts: Vec<TrafficSelector>,
    remote_ts: Vec<TrafficSelector>,
}

impl ChildRef {
    fn of(c: &ChildSa) -> Self {
        ChildRef {
            inbound_spi: c.inbound_spi,
            outbound_spi: c.outbound_spi,
            local_ts: c.local_ts.clone(),
            remote_ts: c.remote_ts.clone(),
        }
    }
}

/// A peer's CHILD_SA rekey of the SA we are rekeying too.
struct Collision {
    old_inbound: u32,
    /// Nonces of the peer's exchange.
    ni: Vec<u8>,
    nr: Vec<u8>,
}

/// Our CREATE_CHILD_SA request that rekeys a CHILD_SA.
struct RekeyState {
    old_inbound: u32,
    new_inbound: u32,
    ni: Vec<u8>,
    ke: Option<crypto::KeyExchange>,
    local_ts: Vec<TrafficSelector>,
    remote_ts: Vec<TrafficSelector>,
}

/// Our request waiting for its response.
struct Outstanding {
    message_id: u32,
    message: Vec<u8>,
    retries: u32,
    next_at: Time,
}

pub(crate) struct IkeSa {
    id: IkeSaId,
    connection: ConnectionId,
    role: Role,
    state: State,
    spi_i: u64,
    spi_r: u64,
    local: SocketAddr,
    remote: SocketAddr,
    udp_encap: bool,
    suite: Option<IkeSuite>,
    ke: Option<crypto::KeyExchange>,
    ni: Vec<u8>,
    nr: Vec<u8>,
    init_request: Vec<u8>,
    init_response: Vec<u8>,
    cookie: Option<Vec<u8>>,
    keys: Option<IkeSaKeys>,
    sk_out: Option<SkCipher>,
    sk_in: Option<SkCipher>,
    next_request_id: u32,
    expected_request_id: u32,
    outstanding: Option<Outstanding>,
    /// Message ID and bytes (no marker) of our last response.
    last_response: Option<(u32, Vec<u8>)>,
    /// The request that response answers, as received: only a byte-equal
    /// copy is a retransmission (a forged datagram with that message ID
    /// gets nothing).
    last_request: Vec<u8>,
    /// Initiator: the inbound SPI offered for the first CHILD_SA.
    child_spi: u32,
    /// CHILD_SAs (inbound, outbound SPI) of this IKE SA.
    children: Vec<ChildRef>,
    /// Our CHILD_SA rekey in flight.
    rekey: Option<RekeyState>,
    /// Our IKE SA rekey in flight.
    ike_rekey: Option<IkeRekeyState>,
    /// Peer rekeys of the CHILD_SA our own rekey in flight replaces
    /// (RFC 7296 2.8.1), for the lowest-nonce rule when ours completes.
    collisions: Vec<Collision>,
    /// When a half-open or dead SA is forgotten.
    expires: Option<Time>,
    /// Our INFORMATIONAL requests waiting for the window.
    pending: std::collections::VecDeque<OwnRequest>,
    /// The INFORMATIONAL request outstanding, if that is what is.
    in_flight: Option<OwnRequest>,
}

fn random_bytes(rng: &mut dyn RandomSource, n: usize) -> Result<Vec<u8>, EngineError> {
    let mut v = vec![0u8; n];
    rng.fill(&mut v)?;
    Ok(v)
}

/// A random CHILD_SA SPI: 1..=255 are reserved (RFC 4303 2.1).
fn random_child_spi(rng: &mut dyn RandomSource) -> Result<u32, EngineError> {
    loop {
        let mut b = [0u8; 4];
        rng.fill(&mut b)?;
        let spi = u32::from_be_bytes(b);
        if spi > 255 {
            return Ok(spi);
        }
    }
}

/// The ESP proposals for a CHILD_SA that IKE_AUTH creates: no key
/// exchange there (RFC 7296 1.2), so PFS groups are dropped.
fn without_pfs(proposals: &[EspProposal]) -> Vec<EspProposal> {
    proposals
        .iter()
        .map(|p| EspProposal {
            ke: Vec::new(),
            ..p.clone()
        })
        .collect()
}

fn nonce_of(payloads: &[Payload]) -> Option<Vec<u8>> {
    payloads.iter().find_map(|p| match p {
        Payload::Nonce(n) => Some(n.0.clone()),
        _ => None,
    })
}

impl IkeSa {
    fn new(
        id: IkeSaId,
        connection: ConnectionId,
        role: Role,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Self {
        IkeSa {
            id,
            connection,
            role,
            state: State::InitSent,
            spi_i: 0,
            spi_r: 0,
            local,
            remote,
            udp_encap: false,
            suite: None,
            ke: None,
            ni: Vec::new(),
            nr: Vec::new(),
            init_request: Vec::new(),
            init_response: Vec::new(),
            cookie: None,
            keys: None,
            sk_out: None,
            sk_in: None,
            next_request_id: 0,
            expected_request_id: 0,
            outstanding: None,
            last_response: None,
            last_request: Vec::new(),
            child_spi: 0,
            children: Vec::new(),
            rekey: None,
            ike_rekey: None,
            collisions: Vec::new(),
            expires: None,
            pending: std::collections::VecDeque::new(),
            in_flight: None,
        }
    }

    pub fn id(&self) -> IkeSaId {
        self.id
    }

    /// A responder SA that has answered IKE_SA_INIT and waits for IKE_AUTH.
    pub fn is_half_open(&self) -> bool {
        self.state == State::InitDone
    }

    pub fn connection(&self) -> ConnectionId {
        self.connection
    }

    /// The header's SPIs and I flag fit this SA.
    pub fn matches(&self, h: &HeaderRepr) -> bool {
        match self.role {
            Role::Initiator => {
                !h.initiator
                    && h.spi_i == self.spi_i
                    && (self.state == State::InitSent || h.spi_r == self.spi_r)
            }
            Role::Responder => h.initiator && h.spi_i == self.spi_i && h.spi_r == self.spi_r,
        }
    }

    fn header(&self, exchange: ExchangeType, response: bool, message_id: u32) -> HeaderRepr {
        HeaderRepr {
            spi_i: self.spi_i,
            spi_r: self.spi_r,
            exchange,
            initiator: self.role == Role::Initiator,
            response,
            version_flag: false,
            message_id,
        }
    }

    /// Queues an IKE message from `src` to `dst`, with the non-ESP marker
    /// on the NAT-T port.
    fn transmit(
        cfg: &EngineConfig,
        out: &mut Output,
        src: SocketAddr,
        dst: SocketAddr,
        message: &[u8],
    ) {
        let mut payload = Vec::with_capacity(message.len() + 4);
        if src.port() == cfg.nat_t_port {
            payload.extend_from_slice(&crate::message::NON_ESP_MARKER);
        }
        payload.extend_from_slice(message);
        out.transmits.push_back(Transmit { src, dst, payload });
    }

    /// Sends a new request and arms its retransmission timer.
    fn send_request(
        &mut self,
        now: Time,
        cfg: &EngineConfig,
        out: &mut Output,
        message_id: u32,
        message: Vec<u8>,
    ) {
        Self::transmit(cfg, out, self.local, self.remote, &message);
        self.outstanding = Some(Outstanding {
            message_id,
            message,
            retries: 0,
            next_at: now + cfg.retransmit_base_ms,
        });
    }

    fn fail(&mut self, now: Time, cfg: &EngineConfig, out: &mut Output, reason: FailReason) {
        out.events.push_back(Event::IkeSaFailed {
            ike_sa: self.id,
            connection: self.connection,
            peer: self.remote,
            reason,
        });
        self.die(now, cfg);
    }

    fn die(&mut self, now: Time, cfg: &EngineConfig) {
        self.state = State::Dead;
        self.outstanding = None;
        self.expires = Some(now + cfg.linger_ms);
    }

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
        sa.spi_i = id;
        sa.ke = Some(crypto::KeyExchange::generate(group, rng)?);
        sa.ni = random_bytes(rng, NONCE_LEN)?;
        sa.send_init_request(now, conn, cfg, out)?;
        Ok(sa)
    }

    fn send_init_request(
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
        let proposals = conn
            .proposals
            .iter()
            .enumerate()
            .map(|(i, p)| wire::proposal(i as u8 + 1, ProtocolId::IKE, Vec::new(), &p.transforms()))
            .collect();
        payloads.push(Payload::Sa(SecurityAssociation(proposals)));
        payloads.push(Payload::Ke(KeyExchange {
            group: ke.group().id(),
            data: ke.public_value().to_vec(),
        }));
        payloads.push(Payload::Nonce(Nonce(self.ni.clone())));
        payloads.push(Payload::Notify(Notify::ike(
            NotifyType::NAT_DETECTION_SOURCE_IP,
            nat::hash(self.spi_i, 0, self.local),
        )));
        payloads.push(Payload::Notify(Notify::ike(
            NotifyType::NAT_DETECTION_DESTINATION_IP,
            nat::hash(self.spi_i, 0, self.remote),
        )));
        let msg = Message {
            header: self.header(ExchangeType::IKE_SA_INIT, false, 0),
            payloads,
        }
        .emit()?;
        self.init_request = msg.clone();
        self.state = State::InitSent;
        self.send_request(now, cfg, out, 0, msg);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn on_init_response(
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
        if let Some(nat) = nat::detect(&msg, self.spi_i, self.spi_r, src, dst) {
            if nat.any() {
                // RFC 7296 2.23: the initiator moves to port 4500 for
                // IKE_AUTH on; the responder follows it there.
                self.udp_encap = true;
                self.local.set_port(cfg.nat_t_port);
                self.remote.set_port(cfg.nat_t_port);
            }
        }
        self.outstanding = None;
        self.next_request_id = 1;
        self.send_auth_request(now, conn, cfg, rng, out)
    }

    fn derive_ike_keys(&mut self, shared: &crypto::SecretBytes) -> Result<(), EngineError> {
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

    /// Our AUTH value: prf(prf(PSK, pad), first message | peer nonce |
    /// prf(SK_p, our ID body)).
    fn our_auth(&self, conn: &Connection, id_body: &[u8]) -> Result<Vec<u8>, EngineError> {
        let (suite, keys) = self
            .suite
            .zip(self.keys.as_ref())
            .ok_or(EngineError::Protocol("no keys"))?;
        let (first, peer_nonce, sk_p) = match self.role {
            Role::Initiator => (&self.init_request, &self.nr, &keys.sk_pi),
            Role::Responder => (&self.init_response, &self.ni, &keys.sk_pr),
        };
        let mac = maced_id(suite.prf, sk_p.expose(), id_body);
        let octets = signed_octets(first, peer_nonce, mac.expose());
        Ok(psk_auth(suite.prf, conn.psk.expose(), &octets)
            .expose()
            .to_vec())
    }

    /// Checks the peer's IDx and AUTH payloads.
    fn verify_peer(&self, conn: &Connection, inner: &Inner) -> Result<(), AuthFailure> {
        let (suite, keys) = self
            .suite
            .zip(self.keys.as_ref())
            .ok_or(AuthFailure::BadAuth)?;
        let (id_type, first, peer_nonce, sk_p) = match self.role {
            Role::Initiator => (PayloadType::IDR, &self.init_response, &self.ni, &keys.sk_pr),
            Role::Responder => (PayloadType::IDI, &self.init_request, &self.nr, &keys.sk_pi),
        };
        let (Some(Payload::IdI(id) | Payload::IdR(id)), Some(id_body)) =
            (inner.find(id_type), inner.id_body(id_type))
        else {
            return Err(AuthFailure::UnsupportedMethod);
        };
        if conn.remote_id.as_ref().is_some_and(|want| want != id) {
            return Err(AuthFailure::WrongIdentity);
        }
        let Some(Payload::Auth(auth)) = inner.find(PayloadType::AUTH) else {
            return Err(AuthFailure::UnsupportedMethod);
        };
        if auth.method != AuthMethod::SHARED_KEY_MIC {
            return Err(AuthFailure::UnsupportedMethod);
        }
        let mac = maced_id(suite.prf, sk_p.expose(), id_body);
        let octets = signed_octets(first, peer_nonce, mac.expose());
        if verify_psk_auth(suite.prf, conn.psk.expose(), &octets, &auth.data) {
            Ok(())
        } else {
            Err(AuthFailure::BadAuth)
        }
    }

    fn peer_id_text(&self, inner: &Inner) -> Option<String> {
        inner.payloads.iter().find_map(|p| match (p, self.role) {
            (Payload::IdR(id), Role::Initiator) | (Payload::IdI(id), Role::Responder) => {
                Some(id_text(id))
            }
            _ => None,
        })
    }

    fn send_auth_request(
        &mut self,
        now: Time,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        self.child_spi = random_child_spi(rng)?;
        let idi = Payload::IdI(conn.local_id.clone());
        let auth = self.our_auth(conn, &wire::id_body(&idi)?)?;
        let mut inner = vec![idi];
        if let Some(r) = &conn.remote_id {
            inner.push(Payload::IdR(r.clone()));
        }
        inner.push(Payload::Auth(Authentication {
            method: AuthMethod::SHARED_KEY_MIC,
            data: auth,
        }));
        let proposals = without_pfs(&conn.esp_proposals)
            .iter()
            .enumerate()
            .map(|(i, p)| {
                wire::proposal(
                    i as u8 + 1,
                    ProtocolId::ESP,
                    self.child_spi.to_be_bytes().to_vec(),
                    &p.transforms(),
                )
            })
            .collect();
        inner.push(Payload::Sa(SecurityAssociation(proposals)));
        inner.push(Payload::TsI(TrafficSelectors(conn.local_ts.clone())));
        inner.push(Payload::TsR(TrafficSelectors(conn.remote_ts.clone())));
        let sk = self
            .sk_out
            .as_ref()
            .ok_or(EngineError::Protocol("no keys"))?;
        let msg = wire::seal(
            &self.header(ExchangeType::IKE_AUTH, false, 1),
            &inner,
            sk,
            rng,
        )?;
        self.state = State::AuthSent;
        self.next_request_id = 2;
        self.send_request(now, cfg, out, 1, msg);
        Ok(())
    }

    fn on_auth_response(
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
        if let Err(reason) = self.verify_peer(conn, &inner) {
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
        });
        match self.initiator_child(conn, &inner) {
            Ok(child) => {
                self.children.push(ChildRef::of(&child));
                out.events
                    .push_back(Event::ChildSaInstalled(Box::new(child)));
            }
            Err(notify) => out.events.push_back(Event::ChildSaFailed {
                ike_sa: self.id,
                notify,
            }),
        }
        Ok(())
    }

    fn initiator_child(&self, conn: &Connection, inner: &Inner) -> Result<ChildSa, NotifyType> {
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
        let chosen = wire::offered(sa, ProtocolId::ESP);
        let [(_, transforms, spi)] = &chosen[..] else {
            return Err(NotifyType::NO_PROPOSAL_CHOSEN);
        };
        let suite = without_pfs(&conn.esp_proposals)
            .iter()
            .find_map(|p| p.select(transforms))
            .ok_or(NotifyType::NO_PROPOSAL_CHOSEN)?;
        let outbound_spi = <[u8; 4]>::try_from(&spi[..])
            .map(u32::from_be_bytes)
            .map_err(|_| NotifyType::INVALID_SYNTAX)?;
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
    fn child(
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
            None,
            (inbound_spi, outbound_spi),
            local_ts,
            remote_ts,
        )
    }

    /// A CHILD_SA's keys: KEYMAT = prf+(SK_d, [g^ir] | Ni | Nr) with the
    /// nonces of the exchange that creates it; the first half protects
    /// traffic from that exchange's initiator (`we_initiated`).
    #[allow(clippy::too_many_arguments)]
    fn derive_child(
        &self,
        suite: crypto::ChildSuite,
        we_initiated: bool,
        (ni, nr): (&[u8], &[u8]),
        pfs: Option<&[u8]>,
        (inbound_spi, outbound_spi): (u32, u32),
        local_ts: Vec<TrafficSelector>,
        remote_ts: Vec<TrafficSelector>,
    ) -> Result<ChildSa, EngineError> {
        let (ike, keys) = self
            .suite
            .zip(self.keys.as_ref())
            .ok_or(EngineError::Protocol("no keys"))?;
        let km = ChildSaKeys::derive(ike.prf, keys.sk_d.expose(), pfs, ni, nr, suite.esp)?;
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
        })
    }

    fn auth_failed(
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
        conn: &Connection,
        now: Time,
        src: SocketAddr,
        dst: SocketAddr,
        datagram: &[u8],
        msg: &Message,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Option<IkeSa> {
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
        let Some((number, suite)) = select_ike(
            &conn.proposals,
            offered.iter().map(|(n, t, _)| (*n, &t[..])),
        ) else {
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
        sa.spi_i = h.spi_i;
        sa.spi_r = id;
        sa.ni = ni;
        let built = (|| -> Result<Vec<u8>, EngineError> {
            let ke = crypto::KeyExchange::generate(suite.ke, rng)?;
            let shared = ke.shared_secret(&peer_ke.data)?;
            sa.nr = random_bytes(rng, NONCE_LEN)?;
            sa.suite = Some(suite);
            let payloads = vec![
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
                    nat::hash(sa.spi_i, sa.spi_r, dst),
                )),
                Payload::Notify(Notify::ike(
                    NotifyType::NAT_DETECTION_DESTINATION_IP,
                    nat::hash(sa.spi_i, sa.spi_r, src),
                )),
            ];
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
            sa.udp_encap = nat.any();
        }
        Self::transmit(cfg, out, dst, src, &bytes);
        sa.last_response = Some((0, bytes));
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
                out.transmits.push_back(Transmit {
                    src: self.init_local(),
                    dst: self.init_remote(),
                    payload: bytes.clone(),
                });
                out.stats.retransmitted_responses += 1;
                return;
            }
        }
        out.stats.unexpected += 1;
    }

    fn init_local(&self) -> SocketAddr {
        self.local
    }

    fn init_remote(&self) -> SocketAddr {
        self.remote
    }

    fn on_auth_request(
        &mut self,
        now: Time,
        inner: Inner,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
    ) -> Result<(Vec<Payload>, Vec<Event>), EngineError> {
        if let Err(reason) = self.verify_peer(conn, &inner) {
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
        let idr = Payload::IdR(conn.local_id.clone());
        let auth = self.our_auth(conn, &wire::id_body(&idr)?)?;
        let mut reply = vec![
            idr,
            Payload::Auth(Authentication {
                method: AuthMethod::SHARED_KEY_MIC,
                data: auth,
            }),
        ];
        self.state = State::Established;
        self.expires = None;
        let mut events = vec![Event::IkeSaUp {
            ike_sa: self.id,
            connection: self.connection,
            suite: self.suite.ok_or(EngineError::Protocol("no suite"))?,
            local: self.local,
            remote: self.remote,
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

    fn responder_child(
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

    /// An INFORMATIONAL request: liveness checks get an empty answer,
    /// deletes are acknowledged as RFC 7296 1.4.1 says.
    fn on_informational(
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
                                ..
                            } = self.children.remove(pos);
                            ours.push(inbound_spi);
                            out.events.push_back(Event::ChildSaDeleted {
                                ike_sa: self.id,
                                inbound_spi,
                                outbound_spi,
                            });
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

    // ---- both ----

    /// A message for this SA (SPIs and I flag already matched).
    #[allow(clippy::too_many_arguments)]
    pub fn handle(
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
    ) {
        if header.response {
            self.handle_response(now, src, dst, header, datagram, conn, cfg, rng, out);
        } else {
            self.handle_request(now, src, dst, header, datagram, conn, cfg, rng, out);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn handle_response(
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
    ) {
        if self.outstanding.as_ref().map(|o| o.message_id) != Some(header.message_id) {
            out.stats.unexpected += 1;
            return;
        }
        let result = match (self.state, header.exchange) {
            (State::InitSent, ExchangeType::IKE_SA_INIT) => {
                self.on_init_response(now, src, dst, header, datagram, conn, cfg, rng, out)
            }
            (State::Established, ExchangeType::INFORMATIONAL) if self.in_flight.is_some() => {
                let Some(sk) = self.sk_in.as_ref() else {
                    return;
                };
                match wire::open(datagram, sk) {
                    Ok(_) => self.on_info_response(now, conn, cfg, rng, out),
                    Err(_) => {
                        out.stats.decrypt_failed += 1;
                        return;
                    }
                }
            }
            (State::Established, ExchangeType::CREATE_CHILD_SA) if self.ike_rekey.is_some() => {
                let Some(sk) = self.sk_in.as_ref() else {
                    return;
                };
                match wire::open(datagram, sk) {
                    Ok(inner) => self.on_rekey_ike_response(now, inner, conn, cfg, rng, out),
                    Err(_) => {
                        out.stats.decrypt_failed += 1;
                        return;
                    }
                }
            }
            (State::Established, ExchangeType::CREATE_CHILD_SA) if self.rekey.is_some() => {
                let Some(sk) = self.sk_in.as_ref() else {
                    return;
                };
                match wire::open(datagram, sk) {
                    Ok(inner) => self.on_rekey_child_response(now, inner, conn, cfg, rng, out),
                    Err(_) => {
                        out.stats.decrypt_failed += 1;
                        return;
                    }
                }
            }
            (State::AuthSent, ExchangeType::IKE_AUTH) => {
                let Some(sk) = self.sk_in.as_ref() else {
                    return;
                };
                match wire::open(datagram, sk) {
                    Ok(inner) => self.on_auth_response(now, inner, conn, cfg, out),
                    Err(_) => {
                        out.stats.decrypt_failed += 1;
                        return;
                    }
                }
            }
            _ => {
                out.stats.unexpected += 1;
                return;
            }
        };
        if result.is_err() {
            out.stats.malformed += 1;
            if self.state == State::InitSent {
                // A response that does not parse is ignored (it may be
                // forged); the retransmission timer keeps running.
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn handle_request(
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
    ) {
        if header.message_id != self.expected_request_id {
            match &self.last_response {
                Some((id, bytes))
                    if *id == header.message_id
                        && id.wrapping_add(1) == self.expected_request_id
                        && datagram == &self.last_request[..] =>
                {
                    Self::transmit(cfg, out, dst, src, bytes);
                    out.stats.retransmitted_responses += 1;
                }
                _ => out.stats.unexpected += 1,
            }
            return;
        }
        if self.state == State::Dead {
            out.stats.unexpected += 1;
            return;
        }
        let Some(sk) = self.sk_in.as_ref() else {
            out.stats.unexpected += 1;
            return;
        };
        let (inner, error) = match wire::open_checked(datagram, sk) {
            Ok(Ok(i)) => (Some(i), None),
            // Authentic, but its payloads are malformed or carry an
            // unsupported critical payload: answered with the error notify
            // (RFC 7296 2.5, 2.21.2); the request counts as processed.
            Ok(Err(e)) => {
                out.stats.malformed += 1;
                (None, Some(Notify::ike(e.notify_type(), e.notify_data())))
            }
            Err(_) => {
                out.stats.decrypt_failed += 1;
                return;
            }
        };
        // An authenticated request: the peer is at `src` now (it may have
        // moved to port 4500 after NAT detection).
        self.local = dst;
        self.remote = src;
        let (reply, events) = match (inner, self.state, header.exchange) {
            (None, state, _) => {
                // A broken IKE_AUTH ends the SA (RFC 7296 2.21.2).
                if state == State::InitDone {
                    self.die(now, cfg);
                }
                (error.into_iter().map(Payload::Notify).collect(), Vec::new())
            }
            (Some(inner), State::InitDone, ExchangeType::IKE_AUTH) => {
                match self.on_auth_request(now, inner, conn, cfg, rng) {
                    Ok(r) => r,
                    Err(_) => {
                        out.stats.malformed += 1;
                        return;
                    }
                }
            }
            (Some(inner), State::Established, ExchangeType::INFORMATIONAL) => {
                (self.on_informational(now, inner, cfg, out), Vec::new())
            }
            (Some(inner), State::Established, ExchangeType::CREATE_CHILD_SA) => {
                self.on_create_child_request(&inner, conn, rng, out)
            }
            _ => {
                out.stats.unexpected += 1;
                return;
            }
        };
        let Some(sk) = self.sk_out.as_ref() else {
            return;
        };
        let Ok(bytes) = wire::seal(
            &self.header(header.exchange, true, header.message_id),
            &reply,
            sk,
            rng,
        ) else {
            out.stats.malformed += 1;
            return;
        };
        Self::transmit(cfg, out, dst, src, &bytes);
        self.last_response = Some((header.message_id, bytes));
        self.last_request = datagram.to_vec();
        self.expected_request_id = header.message_id.wrapping_add(1);
        out.events.extend(events);
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
        if let OwnRequest::DeleteChild { inbound_spi } | OwnRequest::RekeyChild { inbound_spi } =
            request
        {
            if !self.children.iter().any(|c| c.inbound_spi == inbound_spi) {
                return Err(EngineError::Protocol("no such CHILD_SA"));
            }
        }
        self.pending.push_back(request);
        self.pump(now, conn, cfg, rng, out)
    }

    /// Sends the next queued request if none is outstanding.
    fn pump(
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
        let Some(request) = self.pending.pop_front() else {
            return Ok(());
        };
        let inner = match request {
            OwnRequest::RekeyChild { inbound_spi } => {
                return self.send_rekey_child(now, inbound_spi, conn, cfg, rng, out)
            }
            OwnRequest::RekeyIke => return self.send_rekey_ike(now, conn, cfg, rng, out),
            OwnRequest::Liveness => Vec::new(),
            OwnRequest::DeleteIke => vec![Payload::Delete(Delete::Ike)],
            OwnRequest::DeleteChild { inbound_spi } => vec![Payload::Delete(Delete::Child {
                protocol: ProtocolId::ESP,
                spis: vec![inbound_spi],
            })],
        };
        let id = self.next_request_id;
        let sk = self
            .sk_out
            .as_ref()
            .ok_or(EngineError::Protocol("no keys"))?;
        let msg = wire::seal(
            &self.header(ExchangeType::INFORMATIONAL, false, id),
            &inner,
            sk,
            rng,
        )?;
        self.next_request_id = id.wrapping_add(1);
        self.in_flight = Some(request);
        self.send_request(now, cfg, out, id, msg);
        Ok(())
    }

    /// The answer to our INFORMATIONAL request: what it asked is done.
    fn on_info_response(
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
                        ..
                    } = self.children.remove(pos);
                    out.events.push_back(Event::ChildSaDeleted {
                        ike_sa: self.id,
                        inbound_spi,
                        outbound_spi,
                    });
                }
            }
            Some(OwnRequest::RekeyChild { .. } | OwnRequest::RekeyIke) => {}
            Some(OwnRequest::Liveness) => {
                out.events.push_back(Event::PeerAlive { ike_sa: self.id })
            }
            None => {}
        }
        self.pump(now, conn, cfg, rng, out)
    }

    /// When this SA next needs [`IkeSa::on_timeout`].
    pub fn next_timeout(&self) -> Option<Time> {
        match (self.outstanding.as_ref().map(|o| o.next_at), self.expires) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Retransmits or gives up; false when the SA should be forgotten.
    pub fn on_timeout(&mut self, now: Time, cfg: &EngineConfig, out: &mut Output) -> bool {
        if self.expires.is_some_and(|t| now >= t) {
            return false;
        }
        let Some(o) = self.outstanding.as_mut() else {
            return true;
        };
        if now < o.next_at {
            return true;
        }
        if o.retries >= cfg.max_retransmits {
            if self.in_flight == Some(OwnRequest::DeleteIke) {
                // Our delete went unanswered (the peer may have deleted the
                // SA and forgotten it, its answer lost): deleted all the
                // same, as strongSwan does. Not a failure: after an IKE SA
                // rekey the new SA is up.
                out.events
                    .push_back(Event::IkeSaDeleted { ike_sa: self.id });
                self.die(now, cfg);
            } else {
                self.fail(now, cfg, out, FailReason::Timeout);
            }
            return true;
        }
        o.retries += 1;
        let wait = cfg
            .retransmit_base_ms
            .checked_shl(o.retries)
            .unwrap_or(u64::MAX)
            .min(cfg.retransmit_max_ms);
        o.next_at = now + wait;
        let message = o.message.clone();
        Self::transmit(cfg, out, self.local, self.remote, &message);
        out.stats.retransmitted_requests += 1;
        true
    }
}

/// What [`replay_psk_ike_auth`] found.
pub struct Replay {
    /// The IKE SA keys derived from the recorded messages and g^ir.
    pub keys: IkeSaKeys,
    /// The first CHILD_SA as the initiator's engine would install it.
    pub child: ChildSa,
    /// Our AUTH for the initiator's ID equals the recorded one.
    pub auth_i_equal: bool,
    /// Our AUTH for the responder's ID equals the recorded one.
    pub auth_r_equal: bool,
}

/// Runs a recorded PSK exchange (IKE_SA_INIT and IKE_AUTH pairs, as
/// captured from strongSwan) through the engine's own parsing, proposal
/// selection, key derivation, SK opening, AUTH verification and CHILD_SA
/// code, with g^ir given (no peer logs its private value, so a live
/// replay is impossible). `conn` is the initiator's connection.
pub fn replay_psk_ike_auth(
    conn: &Connection,
    init_request: &[u8],
    init_response: &[u8],
    auth_request: &[u8],
    auth_response: &[u8],
    shared_secret: &[u8],
) -> Result<Replay, EngineError> {
    let req = Message::parse(init_request)?;
    let resp = Message::parse(init_response)?;
    let chosen = match resp.find(PayloadType::SA) {
        Some(Payload::Sa(sa)) => wire::offered(sa, ProtocolId::IKE),
        _ => return Err(EngineError::Protocol("no SA")),
    };
    let suite = chosen
        .first()
        .and_then(|(_, t, _)| conn.proposals.iter().find_map(|p| p.select(t)))
        .ok_or(EngineError::Protocol("no acceptable proposal"))?;
    let ni = nonce_of(&req.payloads).ok_or(EngineError::Protocol("no Ni"))?;
    let nr = nonce_of(&resp.payloads).ok_or(EngineError::Protocol("no Nr"))?;
    let shared = crypto::SecretBytes::from_slice(shared_secret);
    let mut views = [Role::Initiator, Role::Responder].map(|role| {
        let mut sa = IkeSa::new(0, 0, role, conn.local, conn.remote);
        sa.spi_i = resp.header.spi_i;
        sa.spi_r = resp.header.spi_r;
        sa.ni = ni.clone();
        sa.nr = nr.clone();
        sa.init_request = init_request.to_vec();
        sa.init_response = init_response.to_vec();
        sa.suite = Some(suite);
        sa
    });
    for v in views.iter_mut() {
        v.derive_ike_keys(&shared)?;
    }
    let [initiator, responder] = views;
    // The responder's view opens and checks the request, the initiator's
    // the response: both with the one PSK, as each charon did.
    let request = wire::open(
        auth_request,
        responder
            .sk_in
            .as_ref()
            .ok_or(EngineError::Protocol("no keys"))?,
    )?;
    let response = wire::open(
        auth_response,
        initiator
            .sk_in
            .as_ref()
            .ok_or(EngineError::Protocol("no keys"))?,
    )?;
    let mut responder_conn = conn.clone();
    responder_conn.remote_id = None;
    responder
        .verify_peer(&responder_conn, &request)
        .map_err(|_| EngineError::Protocol("initiator AUTH does not verify"))?;
    let mut initiator_conn = conn.clone();
    initiator_conn.remote_id = None;
    initiator
        .verify_peer(&initiator_conn, &response)
        .map_err(|_| EngineError::Protocol("responder AUTH does not verify"))?;
    let auth_of = |inner: &Inner| match inner.find(PayloadType::AUTH) {
        Some(Payload::Auth(a)) => a.data.clone(),
        _ => Vec::new(),
    };
    let id_body = |inner: &Inner, t| inner.id_body(t).map(<[u8]>::to_vec).unwrap_or_default();
    let auth_i_equal =
        initiator.our_auth(conn, &id_body(&request, PayloadType::IDI))? == auth_of(&request);
    let auth_r_equal =
        responder.our_auth(conn, &id_body(&response, PayloadType::IDR))? == auth_of(&response);
    let mut initiator = initiator;
    initiator.child_spi = match request.find(PayloadType::SA) {
        Some(Payload::Sa(sa)) => wire::offered(sa, ProtocolId::ESP)
            .first()
            .and_then(|(_, _, spi)| <[u8; 4]>::try_from(&spi[..]).ok())
            .map(u32::from_be_bytes)
            .ok_or(EngineError::Protocol("no ESP SPI"))?,
        _ => return Err(EngineError::Protocol("no SA in IKE_AUTH request")),
    };
    let child = initiator
        .initiator_child(conn, &response)
        .map_err(|_| EngineError::Protocol("CHILD_SA refused"))?;
    let keys = initiator
        .keys
        .take()
        .ok_or(EngineError::Protocol("no keys"))?;
    Ok(Replay {
        keys,
        child,
        auth_i_equal,
        auth_r_equal,
    })
}

impl IkeSa {
    /// Sends CREATE_CHILD_SA with REKEY_SA for our CHILD_SA `old_inbound`:
    /// the connection's ESP proposals (with their PFS group: then a KE
    /// payload of the first one), a fresh nonce and SPI, the old SA's
    /// selectors.
    fn send_rekey_child(
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
        let new_inbound = random_child_spi(rng)?;
        let ni = random_bytes(rng, NONCE_LEN)?;
        let ke = match conn.esp_proposals.first().and_then(|p| p.ke.first()) {
            Some(g) => Some(crypto::KeyExchange::generate(*g, rng)?),
            None => None,
        };
        let proposals = conn
            .esp_proposals
            .iter()
            .enumerate()
            .map(|(i, p)| {
                wire::proposal(
                    i as u8 + 1,
                    ProtocolId::ESP,
                    new_inbound.to_be_bytes().to_vec(),
                    &p.transforms(),
                )
            })
            .collect();
        let mut inner = vec![
            Payload::Notify(Notify::child(
                ProtocolId::ESP,
                old_inbound,
                NotifyType::REKEY_SA,
                Vec::new(),
            )),
            Payload::Sa(SecurityAssociation(proposals)),
            Payload::Nonce(Nonce(ni.clone())),
        ];
        if let Some(k) = &ke {
            inner.push(Payload::Ke(KeyExchange {
                group: k.group().id(),
                data: k.public_value().to_vec(),
            }));
        }
        inner.push(Payload::TsI(TrafficSelectors(old.local_ts.clone())));
        inner.push(Payload::TsR(TrafficSelectors(old.remote_ts.clone())));
        let id = self.next_request_id;
        let sk = self
            .sk_out
            .as_ref()
            .ok_or(EngineError::Protocol("no keys"))?;
        let msg = wire::seal(
            &self.header(ExchangeType::CREATE_CHILD_SA, false, id),
            &inner,
            sk,
            rng,
        )?;
        self.next_request_id = id.wrapping_add(1);
        self.in_flight = Some(OwnRequest::RekeyChild {
            inbound_spi: old_inbound,
        });
        self.rekey = Some(RekeyState {
            old_inbound,
            new_inbound,
            ni,
            ke,
            local_ts: old.local_ts,
            remote_ts: old.remote_ts,
        });
        self.send_request(now, cfg, out, id, msg);
        Ok(())
    }

    /// The answer to our CHILD_SA rekey: install the new CHILD_SA, then
    /// delete the old one (RFC 7296 2.8). A refusal keeps the old one.
    fn on_rekey_child_response(
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
        match self.rekeyed_child(&rekey, &inner, conn) {
            Ok((child, nr)) => {
                let ours = child.inbound_spi;
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
                        self.pending
                            .push_back(OwnRequest::DeleteChild { inbound_spi: ours });
                    }
                }
            }
            Err(notify) => out.events.push_back(Event::ChildSaFailed {
                ike_sa: self.id,
                notify,
            }),
        }
        self.pump(now, conn, cfg, rng, out)
    }

    fn rekeyed_child(
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
        let chosen = wire::offered(sa, ProtocolId::ESP);
        let [(_, transforms, spi)] = &chosen[..] else {
            return Err(NotifyType::NO_PROPOSAL_CHOSEN);
        };
        let suite = conn
            .esp_proposals
            .iter()
            .find_map(|p| p.select(transforms))
            .ok_or(NotifyType::NO_PROPOSAL_CHOSEN)?;
        let outbound_spi = <[u8; 4]>::try_from(&spi[..])
            .map(u32::from_be_bytes)
            .map_err(|_| NotifyType::INVALID_SYNTAX)?;
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
    fn on_create_child_request(
        &mut self,
        inner: &Inner,
        conn: &Connection,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> (Vec<Payload>, Vec<Event>) {
        let refuse = |n: Notify| (vec![Payload::Notify(n)], Vec::new());
        if let Some(Payload::Sa(sa)) = inner.find(PayloadType::SA) {
            if sa.0.iter().any(|p| p.protocol == ProtocolId::IKE) {
                return self.respond_rekey_ike(inner, conn, rng, out);
            }
        }
        if let Some(n) = inner.notify(NotifyType::REKEY_SA) {
            let known = n
                .child_spi()
                .is_some_and(|spi| self.children.iter().any(|c| c.outbound_spi == spi));
            if !known {
                return refuse(Notify {
                    notify_type: NotifyType::CHILD_SA_NOT_FOUND,
                    data: Vec::new(),
                    ..n.clone()
                });
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
        reply.push(Payload::TsI(TrafficSelectors(tsi)));
        reply.push(Payload::TsR(TrafficSelectors(tsr)));
        // The peer rekeys the SA our own rekey in flight replaces: remember
        // its nonces for RFC 7296 2.8.1 when ours completes.
        let rekeyed = inner
            .notify(NotifyType::REKEY_SA)
            .and_then(|n| n.child_spi());
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
        self.children.push(ChildRef::of(&child));
        (reply, vec![Event::ChildSaInstalled(Box::new(child))])
    }
}

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
    /// The IKE SA that replaces this one: SKEYSEED = prf(SK_d (old),
    /// g^ir (new) | Ni | Nr) with the old PRF (RFC 7296 2.18, as strongSwan
    /// does), keys with the new suite and SPIs, message IDs from 0, the
    /// CHILD_SAs moved over. `role` is ours in the rekey exchange.
    #[allow(clippy::too_many_arguments)]
    fn rekeyed_ike_sa(
        &mut self,
        role: Role,
        (spi_i, spi_r): (u64, u64),
        suite: IkeSuite,
        ni: Vec<u8>,
        nr: Vec<u8>,
        shared: &crypto::SecretBytes,
    ) -> Result<IkeSa, EngineError> {
        let (old_suite, old_keys) = self
            .suite
            .zip(self.keys.as_ref())
            .ok_or(EngineError::Protocol("no keys"))?;
        let skeyseed = crypto::rekey_skeyseed(
            old_suite.prf,
            old_keys.sk_d.expose(),
            shared.expose(),
            &ni,
            &nr,
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
        sa.suite = Some(suite);
        sa.ni = ni;
        sa.nr = nr;
        sa.keys = Some(keys);
        sa.sk_out = Some(o);
        sa.sk_in = Some(i);
        sa.state = State::Established;
        sa.children = std::mem::take(&mut self.children);
        Ok(sa)
    }

    fn send_rekey_ike(
        &mut self,
        now: Time,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        let suite = self.suite.ok_or(EngineError::Protocol("no suite"))?;
        let new_spi_i = random_ike_spi(rng)?;
        let ni = random_bytes(rng, NONCE_LEN)?;
        let ke = crypto::KeyExchange::generate(suite.ke, rng)?;
        let proposals = conn
            .proposals
            .iter()
            .enumerate()
            .map(|(i, p)| {
                wire::proposal(
                    i as u8 + 1,
                    ProtocolId::IKE,
                    new_spi_i.to_be_bytes().to_vec(),
                    &p.transforms(),
                )
            })
            .collect();
        let inner = vec![
            Payload::Sa(SecurityAssociation(proposals)),
            Payload::Nonce(Nonce(ni.clone())),
            Payload::Ke(KeyExchange {
                group: ke.group().id(),
                data: ke.public_value().to_vec(),
            }),
        ];
        let id = self.next_request_id;
        let sk = self
            .sk_out
            .as_ref()
            .ok_or(EngineError::Protocol("no keys"))?;
        let msg = wire::seal(
            &self.header(ExchangeType::CREATE_CHILD_SA, false, id),
            &inner,
            sk,
            rng,
        )?;
        self.next_request_id = id.wrapping_add(1);
        self.in_flight = Some(OwnRequest::RekeyIke);
        self.ike_rekey = Some(IkeRekeyState { new_spi_i, ni, ke });
        self.send_request(now, cfg, out, id, msg);
        Ok(())
    }

    fn on_rekey_ike_response(
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
        let refused = |notify| Event::IkeRekeyFailed {
            ike_sa: self.id,
            notify,
        };
        if let Some(n) = inner.error_notify() {
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
            ([(_, transforms, spi)], Some(Payload::Ke(theirs)), Some(nr)) => conn
                .proposals
                .iter()
                .find_map(|p| p.select(transforms))
                .filter(|s| s.ke == st.ke.group() && theirs.group == s.ke.id())
                .zip(<[u8; 8]>::try_from(&spi[..]).ok().map(u64::from_be_bytes))
                .map(|(suite, spi_r)| (suite, spi_r, theirs.data.clone(), nr)),
            _ => None,
        };
        let Some((suite, spi_r, their_ke, nr)) = accepted else {
            out.events
                .push_back(refused(NotifyType::NO_PROPOSAL_CHOSEN));
            return self.pump(now, conn, cfg, rng, out);
        };
        let Ok(shared) = st.ke.shared_secret(&their_ke) else {
            out.events.push_back(refused(NotifyType::INVALID_SYNTAX));
            return self.pump(now, conn, cfg, rng, out);
        };
        let new = self.rekeyed_ike_sa(
            Role::Initiator,
            (st.new_spi_i, spi_r),
            suite,
            st.ni,
            nr,
            &shared,
        )?;
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
    fn respond_rekey_ike(
        &mut self,
        inner: &Inner,
        conn: &Connection,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> (Vec<Payload>, Vec<Event>) {
        let refuse = |n: Notify| (vec![Payload::Notify(n)], Vec::new());
        let offered = match inner.find(PayloadType::SA) {
            Some(Payload::Sa(sa)) => wire::offered(sa, ProtocolId::IKE),
            _ => Vec::new(),
        };
        let Some((number, suite)) = select_ike(
            &conn.proposals,
            offered.iter().map(|(n, t, _)| (*n, &t[..])),
        ) else {
            return refuse(Notify::ike(NotifyType::NO_PROPOSAL_CHOSEN, Vec::new()));
        };
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
        let Ok(new) = self.rekeyed_ike_sa(
            Role::Responder,
            (peer_spi, spi_r),
            suite,
            ni,
            nr.clone(),
            &shared,
        ) else {
            return refuse(Notify::ike(NotifyType::TEMPORARY_FAILURE, Vec::new()));
        };
        let event = Event::IkeSaRekeyed {
            old: self.id,
            new: new.id,
        };
        out.new_sas.push(new);
        (
            vec![
                Payload::Sa(SecurityAssociation(vec![wire::proposal(
                    number,
                    ProtocolId::IKE,
                    spi_r.to_be_bytes().to_vec(),
                    &suite.transforms(),
                )])),
                Payload::Nonce(Nonce(nr)),
                Payload::Ke(KeyExchange {
                    group: suite.ke.id(),
                    data: ours.public_value().to_vec(),
                }),
            ],
            vec![event],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::CryptoError;
    use crate::engine::{Engine, EngineConfig};
    use crate::message::{emit_chain, Identification};

    struct CountingRng(u8);

    impl RandomSource for CountingRng {
        fn fill(&mut self, dest: &mut [u8]) -> Result<(), CryptoError> {
            for b in dest {
                self.0 = self.0.wrapping_mul(31).wrapping_add(17);
                *b = self.0;
            }
            Ok(())
        }
    }

    fn conn(local: &str, remote: &str) -> Connection {
        Connection::new(
            "t",
            local.parse().unwrap(),
            remote.parse().unwrap(),
            Identification::fqdn(local),
            None,
            b"unit test psk",
            "aes128gcm16-prfsha256-x25519",
            "aes128gcm16",
            &["10.1.0.0/24", "10.2.0.0/24"],
            &["10.1.0.0/24", "10.2.0.0/24"],
        )
        .unwrap()
    }

    const A: &str = "192.0.2.1:500";
    const B: &str = "192.0.2.2:500";

    /// Two engines with an IKE SA up; a's SA id.
    fn established() -> (Engine<CountingRng>, Engine<CountingRng>, IkeSaId) {
        let mut a = Engine::new(EngineConfig::default(), CountingRng(1));
        let mut b = Engine::new(EngineConfig::default(), CountingRng(2));
        a.add_connection(conn(A, B));
        b.add_connection(conn(B, A));
        let id = a.initiate(0, 0).unwrap();
        for _ in 0..4 {
            while let Some(t) = a.poll_transmit() {
                b.handle_datagram(0, t.src, t.dst, &t.payload);
            }
            while let Some(t) = b.poll_transmit() {
                a.handle_datagram(0, t.src, t.dst, &t.payload);
            }
        }
        assert!(a.sas[&id].state == State::Established);
        (a, b, id)
    }

    #[test]
    fn an_authentic_request_with_an_unknown_critical_payload_is_answered() {
        let (mut a, mut b, id) = established();
        let sa = &a.sas[&id];
        let (first, mut plain) = emit_chain(&[Payload::Unrecognized {
            payload_type: PayloadType(99),
            body: vec![1, 2],
        }])
        .unwrap();
        plain[1] |= 0x80; // the critical bit
        let header = sa.header(ExchangeType::INFORMATIONAL, false, sa.next_request_id);
        let msg = wire::seal_plain(
            &header,
            first,
            &plain,
            sa.sk_out.as_ref().unwrap(),
            &mut CountingRng(9),
        )
        .unwrap();
        b.handle_datagram(0, A.parse().unwrap(), B.parse().unwrap(), &msg);
        let reply = b.poll_transmit().expect("an answer");
        let inner = wire::open(&reply.payload, a.sas[&id].sk_in.as_ref().unwrap()).unwrap();
        let n = inner
            .notify(NotifyType::UNSUPPORTED_CRITICAL_PAYLOAD)
            .expect("the notify");
        assert_eq!(n.data, vec![99]);
        assert_eq!(b.stats().malformed, 1);
        // A tampered copy is no retransmission: no answer.
        let mut forged = msg.clone();
        *forged.last_mut().unwrap() ^= 1;
        b.handle_datagram(0, A.parse().unwrap(), B.parse().unwrap(), &forged);
        assert!(b.poll_transmit().is_none());
        assert_eq!(b.stats().unexpected, 1);
        // With the next message ID it fails its integrity check.
        forged[20..24].copy_from_slice(&(header.message_id + 1).to_be_bytes());
        b.handle_datagram(0, A.parse().unwrap(), B.parse().unwrap(), &forged);
        assert!(b.poll_transmit().is_none());
        assert_eq!(b.stats().decrypt_failed, 1);
        // The real one again is a retransmission: the stored answer.
        b.handle_datagram(0, A.parse().unwrap(), B.parse().unwrap(), &msg);
        assert_eq!(b.poll_transmit().unwrap(), reply);
        let _ = a.poll_event();
    }
}
