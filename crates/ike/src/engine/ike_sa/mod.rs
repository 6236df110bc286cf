//! One IKE SA's state machine. This file: the SA's state, the message
//! dispatch (window of one, stored responses, retransmission timers) and
//! what every exchange shares. The exchanges are in the submodules:
//! [`establish`] (IKE_SA_INIT and IKE_AUTH with PSK, both roles, the first
//! CHILD_SA), [`informational`] (liveness, deletes, our request queue),
//! [`create_child`] (CHILD_SA rekey and new CHILD_SAs, simultaneous
//! rekeys), [`rekey_ike`] (IKE SA rekey, simultaneous IKE SA rekeys),
//! [`lifetime`] (soft and hard limits, keepalives), [`intermediate`] (RFC 9370
//! additional key exchanges in IKE_INTERMEDIATE), [`followup`] (RFC 9370
//! IKE SA and CHILD_SA rekeys and new CHILD_SAs with additional key
//! exchanges: IKE_FOLLOWUP_KE), [`fragment`] (RFC 7383
//! reassembly and fragmenting our messages) and [`replay`] (recorded exchanges
//! for known-answer tests).
use std::net::SocketAddr;

mod create_child;
mod establish;
mod followup;
mod fragment;
mod informational;
mod intermediate;
mod lifetime;
mod pubkey;
mod rekey_ike;
mod replay;
#[cfg(test)]
mod tests;

pub(crate) use lifetime::{ChildLife, ChildState, IkeLife};
pub use pubkey::{replay_cert_ike_auth, CertReplay};
pub use replay::{replay_fragments, replay_psk_ike_auth, Replay};

use super::config::AuthKind;
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
    /// Initiator: an IKE_INTERMEDIATE request (RFC 9370 additional key
    /// exchange) sent.
    IntermediateSent,
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
    /// Delete the CHILD_SA the peer created in answer to our request
    /// (IKE_AUTH or CREATE_CHILD_SA) when we refused its answer (a
    /// proposal or selectors we no longer accept): never installed here,
    /// but the peer has it and would send on it. Named, as every ESP
    /// delete, by our inbound SPI, which the peer sends to (RFC 7296
    /// 3.11).
    DeleteRefused {
        /// Our inbound SPI of the refused CHILD_SA.
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
    /// RFC 9611: one more per-resource CHILD_SA with the selectors of the
    /// first one (CREATE_CHILD_SA with SA_RESOURCE_INFO).
    CreateResource,
    /// A new CHILD_SA with the connection's selectors (CREATE_CHILD_SA
    /// without REKEY_SA, RFC 7296 1.3.1): the IKE SA's CHILD_SA after the
    /// one it had was deleted.
    CreateChild,
}

impl OwnRequest {
    /// A request about the CHILD_SAs, which goes with them to the IKE SA
    /// that replaces this one ([`IkeSa::take_children`]).
    fn moves_with_children(&self) -> bool {
        matches!(
            self,
            OwnRequest::RekeyChild { .. }
                | OwnRequest::DeleteChild { .. }
                // The peer moves the CHILD_SA we refused with the
                // others: its delete goes on the new IKE SA.
                | OwnRequest::DeleteRefused { .. }
                // RFC 9611 per-resource CHILD_SAs still to create, and
                // the connection's own.
                | OwnRequest::CreateResource
                | OwnRequest::CreateChild
        )
    }
}

/// Our CREATE_CHILD_SA request that rekeys the IKE SA.
struct IkeRekeyState {
    new_spi_i: u64,
    ni: Vec<u8>,
    ke: crypto::KeyExchange,
}

/// The peer's IKE SA rekey answered while ours was outstanding (RFC 7296
/// 2.8.2): its nonces and the SA it created, for the lowest-nonce rule
/// when ours completes.
struct IkeCollision {
    ni: Vec<u8>,
    nr: Vec<u8>,
    new_sa: IkeSaId,
}

/// What the IKE SA remembers of each CHILD_SA (the data plane holds the
/// keys).
#[derive(Clone, Debug)]
pub(crate) struct ChildRef {
    inbound_spi: u32,
    outbound_spi: u32,
    local_ts: Vec<TrafficSelector>,
    remote_ts: Vec<TrafficSelector>,
    /// Rekeyed, being deleted or expired: a rekey or delete of the peer
    /// for it is answered as RFC 7296 2.25 says.
    state: ChildState,
    /// Its soft and hard limits, armed by the engine when it appears.
    life: Option<ChildLife>,
    /// Our inbound SPI of the CHILD_SA it replaces (a rekey's).
    rekeys: Option<u32>,
}

impl ChildRef {
    fn of(c: &ChildSa) -> Self {
        ChildRef {
            inbound_spi: c.inbound_spi,
            outbound_spi: c.outbound_spi,
            local_ts: c.local_ts.clone(),
            remote_ts: c.remote_ts.clone(),
            state: ChildState::Installed,
            life: None,
            rekeys: c.rekeys,
        }
    }

    /// The same traffic selectors as `local`/`remote` (RFC 9611 counts
    /// the CHILD_SAs of one selector pair).
    fn same_ts(&self, local: &[TrafficSelector], remote: &[TrafficSelector]) -> bool {
        self.local_ts == local && self.remote_ts == remote
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
    /// The datagrams (several when fragmented), without the marker.
    message: Vec<Vec<u8>>,
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
    last_response: Option<(u32, Vec<Vec<u8>>)>,
    /// Both sides announced IKEV2_FRAGMENTATION_SUPPORTED.
    fragmentation: bool,
    /// Fragments being reassembled: `[0]` the peer's request, `[1]` the
    /// response to ours.
    reassembly: [Option<fragment::Reassembly>; 2],
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
    /// Our RFC 9611 per-resource CHILD_SA creation in flight (its
    /// `old_inbound` is unused).
    create: Option<RekeyState>,
    /// Our IKE SA rekey in flight.
    ike_rekey: Option<IkeRekeyState>,
    /// Our IKE SA rekey or CHILD_SA request past its CREATE_CHILD_SA
    /// exchange, in its IKE_FOLLOWUP_KE exchanges (RFC 9370 2.2.4).
    followup_i: Option<followup::Initiator>,
    /// The peer's IKE SA rekey or CHILD_SA request answered, waiting for
    /// its IKE_FOLLOWUP_KE requests.
    followup_r: Option<followup::Responder>,
    /// Responder with RFC 9611 per-resource CHILD_SAs wanted on both
    /// sides: when to create those the initiator has not created itself
    /// (`lifetime::RESOURCE_TOPUP_DELAY_MS` after IKE_AUTH).
    resource_topup_at: Option<Time>,
    /// The peer asked for an RFC 9611 per-resource CHILD_SA on this SA
    /// (CREATE_CHILD_SA with SA_RESOURCE_INFO): it makes its own, and we
    /// make none for it.
    peer_asked_resources: bool,
    /// Peer rekeys of the CHILD_SA our own rekey in flight replaces
    /// (RFC 7296 2.8.1), for the lowest-nonce rule when ours completes.
    collisions: Vec<Collision>,
    /// When a half-open or dead SA is forgotten.
    expires: Option<Time>,
    /// Soft and hard limits of this IKE SA, armed by the engine once it is
    /// established.
    life: Option<IkeLife>,
    /// NAT detection said a NAT is in front of us: we send keepalives.
    local_nat: bool,
    /// When we last sent anything on this SA (for keepalives).
    last_sent: Time,
    /// This SA has been replaced (rekeyed or reauthenticated) and waits
    /// for its delete: a rekey of the peer is answered TEMPORARY_FAILURE.
    replaced: bool,
    /// RFC 7296 2.8.2: the peer's rekey of this SA while ours was
    /// outstanding.
    ike_collision: Option<IkeCollision>,
    /// RFC 7296 2.8.2: this SA lost a rekey collision and its creator (the
    /// peer) should delete it; if it is still here then (the peer never
    /// learnt the outcome: its old SA went first), we delete it.
    redundant_at: Option<Time>,
    /// The group the peer asked for in INVALID_KE_PAYLOAD to our last
    /// rekey (CHILD or IKE): the retry uses it.
    rekey_group: Option<KeGroup>,
    /// Our INFORMATIONAL requests waiting for the window.
    pending: std::collections::VecDeque<OwnRequest>,
    /// RFC 9370 additional key exchanges (IKE_INTERMEDIATE).
    addke: intermediate::AddKe,
    /// The INFORMATIONAL request outstanding, if that is what is.
    in_flight: Option<OwnRequest>,
    /// RFC 7296 2.4 INITIAL_CONTACT: as initiator, send it in IKE_AUTH
    /// (this is the only IKE SA with the peer: not a reauthentication);
    /// as responder, the peer sent it (it holds no other IKE SA with us,
    /// e.g. after a restart).
    initial_contact: bool,
    /// Made by IKE_SA_INIT (not by a rekey): when its setup began (our
    /// IKE_SA_INIT sent, the peer's received). With `up_at`, for
    /// `Engine::settle`'s check for two SAs set up at once by both sides.
    setup_began: Option<Time>,
    /// When it came up (its lifetimes were armed).
    up_at: Option<Time>,
    /// When the peer last showed it holds this SA: our IKE_AUTH answer
    /// came (we initiated it: the responder set it up before answering),
    /// or a request or an answer of the peer's on it since. None as
    /// responder until then: our IKE_AUTH answer may be lost for good.
    last_heard: Option<Time>,
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
/// exchange there (RFC 7296 1.2), so PFS groups and RFC 9370 additional
/// key exchanges are dropped (as strongSwan does).
fn without_pfs(proposals: &[EspProposal]) -> Vec<EspProposal> {
    proposals
        .iter()
        .map(|p| EspProposal {
            ke: Vec::new(),
            addke: Default::default(),
            ..p.clone()
        })
        .collect()
}

/// The responder's answer `sa` to our ESP `proposals`: its one proposal
/// must be acceptable to one of ours. The suite, and the responder's SPI
/// (our outbound one).
fn accepted_esp(
    sa: &SecurityAssociation,
    proposals: &[EspProposal],
) -> Result<(crypto::ChildSuite, u32), NotifyType> {
    let chosen = wire::offered(sa, ProtocolId::ESP);
    let [(_, transforms, spi)] = &chosen[..] else {
        return Err(NotifyType::NO_PROPOSAL_CHOSEN);
    };
    let suite = proposals
        .iter()
        .find_map(|p| p.select(transforms))
        .ok_or(NotifyType::NO_PROPOSAL_CHOSEN)?;
    let outbound_spi = <[u8; 4]>::try_from(&spi[..])
        .map(u32::from_be_bytes)
        .map_err(|_| NotifyType::INVALID_SYNTAX)?;
    Ok((suite, outbound_spi))
}

fn nonce_of(payloads: &[Payload]) -> Option<Vec<u8>> {
    payloads.iter().find_map(|p| match p {
        Payload::Nonce(n) => Some(n.0.clone()),
        _ => None,
    })
}

impl IkeSa {
    /// SPIi and SPIr, and whether we are the initiator (for the driver's
    /// listing and key export).
    pub(crate) fn spis(&self) -> (bool, u64, u64) {
        (self.role == Role::Initiator, self.spi_i, self.spi_r)
    }

    /// Whether it can be forgotten without telling the peer: before
    /// IKE_AUTH was sent (the peer holds at most a half-open SA, which it
    /// times out), or as responder before IKE_AUTH arrived.
    pub(crate) fn abortable(&self) -> bool {
        matches!(
            self.state,
            State::InitSent | State::IntermediateSent | State::InitDone
        )
    }

    /// Established and not replaced: an IKE SA the peer holds too.
    pub(crate) fn is_live(&self) -> bool {
        self.state == State::Established && !self.replaced
    }

    /// Initiator: announce INITIAL_CONTACT in IKE_AUTH (set before the
    /// IKE_SA_INIT response arrives, i.e. right after `initiate`).
    pub(crate) fn set_initial_contact(&mut self, on: bool) {
        self.initial_contact = on;
    }

    /// The suite and SK_* keys once IKE_SA_INIT is done.
    pub(crate) fn suite_and_keys(&self) -> Option<(IkeSuite, &IkeSaKeys)> {
        self.suite.zip(self.keys.as_ref())
    }

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
            fragmentation: false,
            reassembly: [None, None],
            last_request: Vec::new(),
            child_spi: 0,
            children: Vec::new(),
            rekey: None,
            create: None,
            ike_rekey: None,
            followup_i: None,
            followup_r: None,
            resource_topup_at: None,
            peer_asked_resources: false,
            collisions: Vec::new(),
            life: None,
            local_nat: false,
            last_sent: 0,
            replaced: false,
            ike_collision: None,
            redundant_at: None,
            rekey_group: None,
            expires: None,
            pending: std::collections::VecDeque::new(),
            in_flight: None,
            initial_contact: false,
            addke: Default::default(),
            setup_began: None,
            up_at: None,
            last_heard: None,
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

    /// Sends a new request (already built) and arms its retransmission
    /// timer.
    fn transmit_request(
        &mut self,
        now: Time,
        cfg: &EngineConfig,
        out: &mut Output,
        message_id: u32,
        message: Vec<Vec<u8>>,
    ) {
        for m in &message {
            Self::transmit(cfg, out, self.local, self.remote, m);
        }
        self.last_sent = now;
        self.outstanding = Some(Outstanding {
            message_id,
            message,
            retries: 0,
            next_at: now + cfg.retransmit_base_ms,
        });
    }

    /// Seals `inner` as our next request of `exchange` (the next message
    /// ID), sends it and arms its retransmission timer; `in_flight` is
    /// what the request asks. Nothing changes when sealing fails.
    #[allow(clippy::too_many_arguments)]
    fn send_request(
        &mut self,
        now: Time,
        exchange: ExchangeType,
        inner: &[Payload],
        in_flight: Option<OwnRequest>,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) -> Result<(), EngineError> {
        let id = self.next_request_id;
        let sk = self
            .sk_out
            .as_ref()
            .ok_or(EngineError::Protocol("no keys"))?;
        let msg = self.seal_out(cfg, &self.header(exchange, false, id), inner, sk, rng)?;
        self.next_request_id = id.wrapping_add(1);
        self.in_flight = in_flight;
        self.transmit_request(now, cfg, out, id, msg);
        Ok(())
    }

    /// The inner payloads of an encrypted response: from its reassembled
    /// fragments or its SK payload. None (counted as `decrypt_failed`)
    /// when it does not open or its payloads do not parse; None, uncounted,
    /// without keys.
    fn open_response(
        &self,
        reassembled: Option<fragment::Reassembled>,
        datagram: &[u8],
        out: &mut Output,
    ) -> Option<Inner> {
        let sk = self.sk_in.as_ref()?;
        match fragment::open_or_reassembled(reassembled, datagram, sk)
            .and_then(|r| r.map_err(EngineError::Codec))
        {
            Ok(inner) => Some(inner),
            Err(_) => {
                out.stats.decrypt_failed += 1;
                None
            }
        }
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
        conns: &[Connection],
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) {
        let reassembled = if wire::is_fragment(datagram) {
            match self.on_fragment(src, dst, header, datagram, cfg, out) {
                Some(r) => Some(r),
                None => return,
            }
        } else {
            None
        };
        if header.response {
            self.handle_response(
                now,
                src,
                dst,
                header,
                datagram,
                reassembled,
                conn,
                cfg,
                rng,
                out,
            );
        } else {
            self.handle_request(
                now,
                src,
                dst,
                header,
                datagram,
                reassembled,
                conn,
                conns,
                cfg,
                rng,
                out,
            );
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
        reassembled: Option<fragment::Reassembled>,
        conn: &Connection,
        cfg: &EngineConfig,
        rng: &mut dyn RandomSource,
        out: &mut Output,
    ) {
        if self.outstanding.as_ref().map(|o| o.message_id) != Some(header.message_id) {
            out.stats.unexpected += 1;
            return;
        }
        let established = self.state == State::Established;
        let result = match (self.state, header.exchange) {
            (State::InitSent, ExchangeType::IKE_SA_INIT) => {
                self.on_init_response(now, src, dst, header, datagram, conn, cfg, rng, out)
            }
            (State::Established, ExchangeType::INFORMATIONAL) if self.in_flight.is_some() => {
                if self.open_response(reassembled, datagram, out).is_none() {
                    return;
                }
                self.on_info_response(now, conn, cfg, rng, out)
            }
            (State::Established, ExchangeType::CREATE_CHILD_SA) if self.ike_rekey.is_some() => {
                let Some(inner) = self.open_response(reassembled, datagram, out) else {
                    return;
                };
                self.on_rekey_ike_response(now, inner, conn, cfg, rng, out)
            }
            (State::Established, ExchangeType::CREATE_CHILD_SA) if self.create.is_some() => {
                let Some(inner) = self.open_response(reassembled, datagram, out) else {
                    return;
                };
                self.on_create_child_response(now, inner, conn, cfg, rng, out)
            }
            (State::Established, ExchangeType::CREATE_CHILD_SA) if self.rekey.is_some() => {
                let Some(inner) = self.open_response(reassembled, datagram, out) else {
                    return;
                };
                self.on_rekey_child_response(now, inner, conn, cfg, rng, out)
            }
            (State::Established, ExchangeType::IKE_FOLLOWUP_KE) if self.followup_i.is_some() => {
                let Some(inner) = self.open_response(reassembled, datagram, out) else {
                    return;
                };
                self.on_followup_response(now, inner, conn, cfg, rng, out)
            }
            (State::IntermediateSent, ExchangeType::IKE_INTERMEDIATE) => {
                let Some(inner) = self.open_response(reassembled, datagram, out) else {
                    return;
                };
                self.on_intermediate_response(now, header, inner, conn, cfg, rng, out)
            }
            (State::AuthSent, ExchangeType::IKE_AUTH) => {
                let Some(inner) = self.open_response(reassembled, datagram, out) else {
                    return;
                };
                self.on_auth_response(now, inner, conn, cfg, out)
            }
            _ => {
                out.stats.unexpected += 1;
                return;
            }
        };
        // Authentic (each arm above returns when it does not open): the
        // peer holds this SA.
        if established || self.state == State::Established {
            self.last_heard = Some(now);
        }
        if result.is_err() {
            out.stats.malformed += 1;
            if self.state == State::InitSent {
                // A response that does not parse is ignored (it may be
                // forged); the retransmission timer keeps running.
            }
        }
        // Whatever the answer did, a free window sends our next queued
        // request (a path that ended early must not leave the queue
        // stuck: found by the engine fuzz target).
        if self.outstanding.is_none() && self.state == State::Established {
            let _ = self.pump(now, conn, cfg, rng, out);
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
        reassembled: Option<fragment::Reassembled>,
        conn: &Connection,
        conns: &[Connection],
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
                    for b in bytes {
                        Self::transmit(cfg, out, dst, src, b);
                    }
                    out.stats.retransmitted_responses += 1;
                    self.followup_request_repeated(now);
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
        let (inner, error) = match fragment::open_or_reassembled(reassembled, datagram, sk) {
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
        // moved to port 4500 after NAT detection); one after IKE_AUTH
        // says it holds the SA.
        self.local = dst;
        self.remote = src;
        if self.state == State::Established {
            self.last_heard = Some(now);
        }
        let (reply, events) = match (inner, self.state, header.exchange) {
            (None, state, _) => {
                // A broken IKE_AUTH ends the SA (RFC 7296 2.21.2).
                if state == State::InitDone {
                    self.die(now, cfg);
                }
                (error.into_iter().map(Payload::Notify).collect(), Vec::new())
            }
            (Some(inner), State::InitDone, ExchangeType::IKE_INTERMEDIATE)
                if !self.intermediate_done() =>
            {
                match self.on_intermediate_request(header, &inner, rng) {
                    Ok(reply) => (reply, Vec::new()),
                    Err(_) => {
                        out.stats.malformed += 1;
                        self.die(now, cfg);
                        let n = Notify::ike(NotifyType::INVALID_SYNTAX, Vec::new());
                        (vec![Payload::Notify(n)], Vec::new())
                    }
                }
            }
            (Some(inner), State::InitDone, ExchangeType::IKE_AUTH) if self.intermediate_done() => {
                match self.on_auth_request(now, inner, conns, cfg, rng) {
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
                self.on_create_child_request(now, &inner, conn, rng, out)
            }
            (Some(inner), State::Established, ExchangeType::IKE_FOLLOWUP_KE) => {
                self.on_followup_request(now, &inner, rng, out)
            }
            _ => {
                out.stats.unexpected += 1;
                return;
            }
        };
        let Some(sk) = self.sk_out.as_ref() else {
            return;
        };
        let Ok(bytes) = self.seal_out(
            cfg,
            &self.header(header.exchange, true, header.message_id),
            &reply,
            sk,
            rng,
        ) else {
            out.stats.malformed += 1;
            return;
        };
        for b in &bytes {
            Self::transmit(cfg, out, dst, src, b);
        }
        self.last_sent = now;
        self.last_response = Some((header.message_id, bytes));
        self.last_request = datagram.to_vec();
        self.expected_request_id = header.message_id.wrapping_add(1);
        self.after_response_sealed();
        out.events.extend(events);
    }

    /// When this SA next needs [`IkeSa::on_timeout`].
    pub fn next_timeout(&self, cfg: &EngineConfig) -> Option<Time> {
        [
            self.outstanding.as_ref().map(|o| o.next_at),
            self.expires,
            self.next_life_timeout(cfg),
            self.followup_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Retransmits or gives up; false when the SA should be forgotten.
    pub fn on_timeout(&mut self, now: Time, cfg: &EngineConfig, out: &mut Output) -> bool {
        if self.expires.is_some_and(|t| now >= t) {
            return false;
        }
        self.expire_followup(now);
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
        // Every fragment again (RFC 7383 2.6.1).
        let message = o.message.clone();
        for m in &message {
            Self::transmit(cfg, out, self.local, self.remote, m);
        }
        self.last_sent = now;
        out.stats.retransmitted_requests += 1;
        true
    }
}
