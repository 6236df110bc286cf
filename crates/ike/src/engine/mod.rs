//! The IKEv2 exchanges as an I/O-free, clock-free engine (the quinn-proto
//! / boringtun shape): the caller feeds datagrams with
//! [`Engine::handle_datagram`] and the time with [`Engine::handle_timeout`],
//! and drains [`Engine::poll_transmit`] (datagrams to send),
//! [`Engine::poll_event`] (SAs up, CHILD_SA keys to install, failures) and
//! [`Engine::poll_timeout`] (when to call again). Time is a number of
//! milliseconds since an epoch the caller picks; randomness comes from the
//! [`RandomSource`] the engine is built with, so tests are deterministic.
//!
//! What exists (docs/ike.md, "Exchanges and state machine"): IKE_SA_INIT
//! and IKE_AUTH (PSK or certificates) as initiator and responder, the first CHILD_SA
//! with traffic selector narrowing, INVALID_KE_PAYLOAD and COOKIE retries
//! as initiator, NAT detection and the switch to port 4500, message IDs
//! with a window of one, retransmission with exponential backoff,
//! duplicate requests answered from the stored response, INFORMATIONAL
//! both ways (liveness, deletes), CHILD_SA rekey (with PFS) and IKE SA
//! rekey both ways, simultaneous CHILD_SA and IKE SA rekeys (RFC 7296
//! 2.8.1, 2.8.2, 2.25), a half-open bound, cookies as responder, IKE
//! fragmentation (RFC 7383) both ways, X.509 certificates with RFC 7427
//! signatures and the responder's choice of connection by identity,
//! lifetimes (rekey, reauth, expiry by time, bytes and packets, with
//! jitter) and NAT keepalives.

mod config;
mod cookie;
mod ike_sa;
mod nat;
pub mod ts;
mod wire;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::SocketAddr;

pub use config::{cidr_selector, AuthKind, ConfigError, Connection, EngineConfig, Lifetimes};
pub use nat::NatDetection;

use crate::crypto::{CryptoError, EspKeys, EspSuite, IkeSuite, KeGroup, RandomSource};
use crate::message::{self, Identification, Message, NotifyType, TrafficSelector};
use cookie::{CookieInput, CookieSecrets};
#[doc(hidden)]
pub use ike_sa::{replay_cert_ike_auth, replay_fragments, replay_psk_ike_auth, CertReplay, Replay};
use ike_sa::{IkeSa, OwnRequest};

/// Milliseconds since an epoch of the caller's choosing.
pub type Time = u64;

/// Index of a connection in the engine ([`Engine::add_connection`]).
pub type ConnectionId = usize;

/// An IKE SA, named by our own SPI (SPIi when we initiated, SPIr when we
/// responded).
pub type IkeSaId = u64;

/// A datagram to send. On the NAT-T port `payload` already starts with
/// the non-ESP marker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Our address to send from.
    pub src: SocketAddr,
    /// The peer's address.
    pub dst: SocketAddr,
    /// The UDP payload.
    pub payload: Vec<u8>,
}

/// A CHILD_SA for the data plane. Keys are laid out as espgw's
/// `[[tunnel]]` takes them (docs/config.md): `key` is the cipher key then
/// the 4-byte salt (GCM, ChaCha20), `auth_key` the HMAC key (CBC suites).
#[derive(Clone, Debug)]
pub struct ChildSa {
    /// The IKE SA it belongs to.
    pub ike_sa: IkeSaId,
    /// The connection.
    pub connection: ConnectionId,
    /// ESP suite.
    pub suite: EspSuite,
    /// Extended sequence numbers negotiated.
    pub esn: bool,
    /// The SPI the peer puts on packets to us (we chose it).
    pub inbound_spi: u32,
    /// The SPI we put on packets to the peer (it chose it).
    pub outbound_spi: u32,
    /// Keys of packets we receive.
    pub inbound: EspKeys,
    /// Keys of packets we send.
    pub outbound: EspKeys,
    /// Our side's traffic selectors, as narrowed.
    pub local_ts: Vec<TrafficSelector>,
    /// The peer side's traffic selectors, as narrowed.
    pub remote_ts: Vec<TrafficSelector>,
    /// Our tunnel endpoint (and UDP port when encapsulated).
    pub local: SocketAddr,
    /// The peer's tunnel endpoint.
    pub remote: SocketAddr,
    /// ESP in UDP (RFC 3948) on the NAT-T port: a NAT was detected (or
    /// faked by the peer).
    pub udp_encap: bool,
    /// It comes from an exchange we started (our IKE_AUTH as initiator,
    /// our CREATE_CHILD_SA): the peer, its responder, installed it both
    /// ways before answering.
    pub initiated_by_us: bool,
    /// A rekey (RFC 7296 2.8): the inbound SPI of the CHILD_SA it
    /// replaces (deleted next, by whoever started the rekey).
    pub rekeys: Option<u32>,
    /// RFC 9611: an additional per-resource CHILD_SA (created by
    /// CREATE_CHILD_SA with SA_RESOURCE_INFO) with the same traffic
    /// selectors as a CHILD_SA the IKE SA already has; not a rekey of it.
    /// A rekey of such an SA is `rekeys: Some(..)` as for any other.
    pub per_resource: bool,
    /// The key exchange of the CREATE_CHILD_SA exchange that made it (its
    /// PFS group); `None` for the one IKE_AUTH makes, or without PFS.
    pub key_exchange: Option<KeGroup>,
    /// RFC 9370 additional key exchanges that followed it
    /// (IKE_FOLLOWUP_KE): `[n - 1]` for ADDKEn, `None` where none ran.
    pub additional_key_exchanges: [Option<KeGroup>; 7],
}

/// An IKE SA's SPIs and SK_e/SK_a keys, for a packet analyser
/// ([`Engine::ike_sa_secrets`]; Wireshark's `ikev2_decryption_table`).
/// `Debug` prints the SPIs and the suite, never the keys.
#[derive(Clone)]
pub struct IkeSaSecrets {
    /// The SA (our SPI).
    pub ike_sa: IkeSaId,
    /// We initiated it.
    pub initiator: bool,
    /// The initiator's SPI.
    pub spi_i: u64,
    /// The responder's SPI.
    pub spi_r: u64,
    /// Encryption, integrity (None with an AEAD), PRF and group.
    pub suite: IkeSuite,
    /// Encryption keys, initiator to responder and back: the cipher key,
    /// then the salt with AES-GCM and ChaCha20-Poly1305 (RFC 5282 / 7634).
    pub sk_ei: crate::crypto::SecretBytes,
    pub sk_er: crate::crypto::SecretBytes,
    /// Integrity keys (empty with an AEAD).
    pub sk_ai: crate::crypto::SecretBytes,
    pub sk_ar: crate::crypto::SecretBytes,
}

impl fmt::Debug for IkeSaSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IkeSaSecrets")
            .field("spi_i", &format_args!("{:016x}", self.spi_i))
            .field("spi_r", &format_args!("{:016x}", self.spi_r))
            .field("suite", &self.suite)
            .finish_non_exhaustive()
    }
}

/// Why an IKE SA did not come up or went away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailReason {
    /// The peer answered with this error notification.
    PeerNotify(NotifyType),
    /// None of the peer's proposals (or its choice) is acceptable to us.
    NoProposalChosen,
    /// No answer after all retransmissions.
    Timeout,
    /// The peer's message broke the protocol (wrong KE group, missing
    /// payloads, a key exchange value that is not a group element).
    Protocol(&'static str),
}

/// Why authentication failed. Never carries the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthFailure {
    /// The peer's AUTH value does not match our PSK.
    BadAuth,
    /// The peer's identity is not the configured one.
    WrongIdentity,
    /// The peer's AUTH payload is missing or of a method we do not do.
    UnsupportedMethod,
    /// The peer sent AUTHENTICATION_FAILED: it did not accept ours.
    RejectedByPeer,
    /// The peer's certificate, or the signature made with its key, was
    /// not accepted (expired, untrusted, not its identity, bad signature).
    Certificate(crate::crypto::CertError),
}

/// A redundant IKE SA of two of one connection ([`Engine::drop_duplicate_of`]).
#[derive(Clone, Copy, Debug)]
struct Duplicate {
    /// The IKE SA kept.
    kept: IkeSaId,
    /// From when we may delete it (the peer's redundant SA of two set up
    /// at once: after the linger, the peer deleting it itself first)...
    act_at: Time,
    /// ...once the peer sent or answered something on the kept SA at this
    /// time or later (it still holds that one).
    since: Time,
    /// A liveness check on the kept SA asks (sent once `act_at` came).
    asked: bool,
}

/// What the engine tells its driver.
#[derive(Clone, Debug)]
pub enum Event {
    /// IKE_AUTH completed: the IKE SA is established.
    IkeSaUp {
        /// The SA.
        ike_sa: IkeSaId,
        /// The connection.
        connection: ConnectionId,
        /// The negotiated suite.
        suite: IkeSuite,
        /// Our address (port 4500 after a NAT switch).
        local: SocketAddr,
        /// The peer's.
        remote: SocketAddr,
        /// We initiated it (sent IKE_SA_INIT).
        initiator: bool,
        /// The initiator's SPI (ours when `initiator`).
        spi_i: u64,
        /// The responder's SPI.
        spi_r: u64,
        /// We are the responder and the peer sent INITIAL_CONTACT: it
        /// holds no other IKE SA with us (it restarted, or this is its
        /// first), so any older IKE SA and CHILD_SAs with it are stale.
        /// Without it a new IKE SA from a peer that has one is its
        /// reauthentication: it installs the CHILD_SA only once our answer
        /// arrives.
        initial_contact: bool,
        /// Both sides set this connection up at once and this SA lost
        /// (`Engine`'s duplicate check: the lowest nonce, as RFC 7296
        /// 2.8.2): its initiator deletes it. Its CHILD_SA, which follows,
        /// must not take the tunnel over from the other SA's; its inbound
        /// SA may still receive until the peer knows.
        redundant: bool,
    },
    /// A CHILD_SA to install in the data plane.
    ChildSaInstalled(Box<ChildSa>),
    /// The peer deleted a CHILD_SA: remove it from the data plane.
    ChildSaDeleted {
        /// The IKE SA.
        ike_sa: IkeSaId,
        /// Our inbound SPI of the deleted SA.
        inbound_spi: u32,
        /// Its outbound SPI.
        outbound_spi: u32,
    },
    /// The IKE SA is up but its first CHILD_SA was refused.
    ChildSaFailed {
        /// The IKE SA.
        ike_sa: IkeSaId,
        /// The error notification sent or received.
        notify: NotifyType,
    },
    /// Authentication failed; the IKE SA is gone. `Display` is the log
    /// line: it names the peer and never the secret.
    AuthFailed {
        /// The SA.
        ike_sa: IkeSaId,
        /// The connection.
        connection: ConnectionId,
        /// The peer's address.
        peer: SocketAddr,
        /// The identity the peer presented, if any.
        peer_id: Option<String>,
        /// What was wrong.
        reason: AuthFailure,
    },
    /// The IKE SA could not be set up (or timed out).
    IkeSaFailed {
        /// The SA.
        ike_sa: IkeSaId,
        /// The connection.
        connection: ConnectionId,
        /// The peer's address.
        peer: SocketAddr,
        /// Why.
        reason: FailReason,
    },
    /// The peer answered our liveness check.
    PeerAlive {
        /// The SA.
        ike_sa: IkeSaId,
    },
    /// Our IKE SA rekey was refused; the old SA stays.
    IkeRekeyFailed {
        /// The SA.
        ike_sa: IkeSaId,
        /// The notify received (or what was wrong with the answer).
        notify: NotifyType,
    },
    /// The IKE SA was rekeyed (RFC 7296 2.18): its CHILD_SAs now belong to
    /// `new`; `old` is deleted next (an `IkeSaDeleted` for it follows,
    /// which concerns no CHILD_SA any more).
    IkeSaRekeyed {
        /// The old SA.
        old: IkeSaId,
        /// The new SA.
        new: IkeSaId,
    },
    /// The IKE SA (and with it its CHILD_SAs) is deleted, by the peer or
    /// by our own [`Engine::delete_ike_sa`].
    IkeSaDeleted {
        /// The SA.
        ike_sa: IkeSaId,
    },
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::IkeSaUp {
                ike_sa,
                remote,
                suite,
                ..
            } => {
                write!(
                    f,
                    "IKE SA {ike_sa:016x} with {remote} established ({suite:?})"
                )
            }
            Event::ChildSaInstalled(c) => write!(
                f,
                "CHILD_SA {:08x}/{:08x} ({}) installed",
                c.inbound_spi,
                c.outbound_spi,
                c.suite.config_name()
            ),
            Event::ChildSaDeleted {
                inbound_spi,
                outbound_spi,
                ..
            } => {
                write!(f, "CHILD_SA {inbound_spi:08x}/{outbound_spi:08x} deleted")
            }
            Event::ChildSaFailed { ike_sa, notify } => {
                write!(
                    f,
                    "IKE SA {ike_sa:016x}: first CHILD_SA refused ({notify:?})"
                )
            }
            Event::AuthFailed {
                peer,
                peer_id,
                reason,
                ..
            } => write!(
                f,
                "authentication of peer {peer} (id {}) failed: {reason:?}",
                peer_id.as_deref().unwrap_or("none")
            ),
            Event::IkeSaFailed { peer, reason, .. } => {
                write!(f, "IKE SA with {peer} failed: {reason:?}")
            }
            Event::IkeRekeyFailed { ike_sa, notify } => {
                write!(f, "IKE SA {ike_sa:016x}: rekey refused ({notify:?})")
            }
            Event::IkeSaRekeyed { old, new } => {
                write!(f, "IKE SA {old:016x} rekeyed, now {new:016x}")
            }
            Event::PeerAlive { ike_sa } => write!(f, "IKE SA {ike_sa:016x}: peer alive"),
            Event::IkeSaDeleted { ike_sa } => write!(f, "IKE SA {ike_sa:016x} deleted"),
        }
    }
}

/// Datagrams the engine did not act on, by reason (a counted drop, never
/// a panic).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Not an IKE message (ESP or a keepalive on the NAT-T port).
    pub not_ike: u64,
    /// The header or payload chain did not parse.
    pub malformed: u64,
    /// No IKE SA with that SPI, or no connection for the peer.
    pub unknown_sa: u64,
    /// A response to no outstanding request, a request outside the
    /// window, or a message the SA's state does not expect.
    pub unexpected: u64,
    /// The SK payload failed its integrity check or did not decrypt.
    pub decrypt_failed: u64,
    /// Duplicate requests answered from the stored response.
    pub retransmitted_responses: u64,
    /// Our requests sent again after a timeout.
    pub retransmitted_requests: u64,
    /// IKE_SA_INIT requests dropped at the half-open limit.
    pub half_open_refused: u64,
    /// SKF fragments not kept: fragmentation not negotiated, no keys
    /// yet, a duplicate, or over the reassembly bounds.
    pub fragments_dropped: u64,
    /// IKE_SA_INIT requests answered with a COOKIE (none or a wrong one
    /// while cookies are demanded), no state kept.
    pub cookies_sent: u64,
    /// Of those, requests that carried a cookie we did not accept (wrong,
    /// or made with a secret no longer held).
    pub cookies_invalid: u64,
    /// NAT keepalives (RFC 3948, one 0xFF octet) received on the NAT-T
    /// port: ignored.
    pub keepalives_received: u64,
    /// NAT keepalives we sent (we are behind a NAT and were idle).
    pub keepalives_sent: u64,
    /// IKE_SA_INIT requests answered with NO_PROPOSAL_CHOSEN: no offered
    /// IKE proposal matched any connection's. The responder keeps no state
    /// and raises no event for them, so this counter is the only place the
    /// responder's operator sees a peer configured with other proposals.
    pub init_no_proposal: u64,
    /// Both sides set a connection up at once: IKE SAs found redundant
    /// (`Engine::drop_duplicate_of`; its initiator deletes it).
    pub duplicate_ike_sas: u64,
}

/// Errors of the engine's own calls (not of received datagrams, which
/// are counted in [`Stats`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineError {
    /// No such connection.
    UnknownConnection,
    /// The codec refused a message.
    Codec(message::Error),
    /// Cryptography failed.
    Crypto(CryptoError),
    /// A protocol rule.
    Protocol(&'static str),
}

impl From<message::Error> for EngineError {
    fn from(e: message::Error) -> Self {
        EngineError::Codec(e)
    }
}

impl From<CryptoError> for EngineError {
    fn from(e: CryptoError) -> Self {
        EngineError::Crypto(e)
    }
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::UnknownConnection => write!(f, "unknown connection"),
            EngineError::Codec(e) => write!(f, "{e}"),
            EngineError::Crypto(e) => write!(f, "{e}"),
            EngineError::Protocol(s) => write!(f, "{s}"),
        }
    }
}

impl std::error::Error for EngineError {}

/// What an SA hands back to the engine while handling something.
pub(crate) struct Output {
    pub transmits: VecDeque<Transmit>,
    pub events: VecDeque<Event>,
    pub stats: Stats,
    /// IKE SAs created by a rekey, for the engine to adopt.
    pub new_sas: Vec<IkeSa>,
    /// IKE SAs whose reauthentication time came: the engine starts a new
    /// IKE SA for their connection.
    pub reauth: Vec<IkeSaId>,
    /// (from, to): CHILD_SAs to move between IKE SAs (RFC 7296 2.8.2).
    pub child_moves: Vec<(IkeSaId, IkeSaId)>,
}

/// The IKEv2 engine: every IKE SA of every connection.
pub struct Engine<R: RandomSource> {
    config: EngineConfig,
    rng: R,
    connections: Vec<Connection>,
    sas: HashMap<IkeSaId, IkeSa>,
    /// Responder SAs by (peer address, SPIi), to answer a retransmitted
    /// IKE_SA_INIT request (SPIr still zero) from the stored response.
    half_open: HashMap<(SocketAddr, u64), IkeSaId>,
    cookies: CookieSecrets,
    out: Output,
    /// Reauthentications in progress: new IKE SA -> the one it replaces.
    reauth: HashMap<IkeSaId, IkeSaId>,
    /// Both sides set a connection up at once: redundant IKE SA -> what
    /// is known of it, until it is dropped ([`Engine::settle_duplicates`]).
    duplicates: HashMap<IkeSaId, Duplicate>,
    /// Two IKE SAs of one connection, one initiated by each side, that
    /// did not come up at once as far as we saw: looked at again at the
    /// time given ([`Engine::look_again`]).
    look_again: Vec<(IkeSaId, IkeSaId, Time)>,
}

impl<R: RandomSource> Engine<R> {
    /// An engine with no connections.
    pub fn new(config: EngineConfig, rng: R) -> Self {
        Engine {
            config,
            rng,
            connections: Vec::new(),
            sas: HashMap::new(),
            half_open: HashMap::new(),
            cookies: CookieSecrets::default(),
            out: Output {
                transmits: VecDeque::new(),
                events: VecDeque::new(),
                stats: Stats::default(),
                new_sas: Vec::new(),
                reauth: Vec::new(),
                child_moves: Vec::new(),
            },
            reauth: HashMap::new(),
            duplicates: HashMap::new(),
            look_again: Vec::new(),
        }
    }

    /// Adds a connection (used for initiating and for matching peers).
    pub fn add_connection(&mut self, connection: Connection) -> ConnectionId {
        self.connections.push(connection);
        self.connections.len() - 1
    }

    /// Tells the engine the wall clock, for certificate validity: at our
    /// `now` it is `unix_time_ms` milliseconds since 1970
    /// ([`EngineConfig::unix_time_at_zero_ms`]).
    pub fn set_unix_time(&mut self, now: Time, unix_time_ms: u64) {
        self.config.unix_time_at_zero_ms = Some(unix_time_ms.saturating_sub(now));
    }

    /// A connection, to change what later exchanges use (proposals for
    /// the next rekey, lifetimes of SAs armed from now on), as a reload
    /// of swanctl.conf does. SAs already up keep their negotiated suites.
    pub fn connection_mut(&mut self, connection: ConnectionId) -> Option<&mut Connection> {
        self.connections.get_mut(connection)
    }

    /// The IKE SAs held, by our SPI.
    pub fn ike_sa_ids(&self) -> Vec<IkeSaId> {
        self.sas.keys().copied().collect()
    }

    /// The nonces (Ni, Nr) of the exchange that created an IKE SA (its
    /// IKE_SA_INIT, or the CREATE_CHILD_SA that rekeyed it): for tests of
    /// RFC 7296 2.8.2. Nonces are not secret.
    #[doc(hidden)]
    pub fn ike_sa_nonces(&self, ike_sa: IkeSaId) -> Option<(Vec<u8>, Vec<u8>)> {
        self.sas.get(&ike_sa).map(IkeSa::nonces)
    }

    /// The counters of datagrams not acted on.
    pub fn stats(&self) -> &Stats {
        &self.out.stats
    }

    /// The IKE SA is established and not being replaced (rekeyed,
    /// reauthenticated, redundant): requests about its CHILD_SAs are
    /// acted on there.
    pub fn ike_sa_live(&self, ike_sa: IkeSaId) -> bool {
        self.sas.get(&ike_sa).is_some_and(IkeSa::is_live)
    }

    /// The number of IKE SAs held (half-open, established, lingering).
    pub fn ike_sa_count(&self) -> usize {
        self.sas.len()
    }

    /// Forgets an IKE SA still being set up, sending nothing and raising
    /// no event: while our IKE_SA_INIT or IKE_INTERMEDIATE is unanswered,
    /// or as responder before IKE_AUTH came (the peer holds at most a
    /// half-open SA, which it times out). Refused once IKE_AUTH was sent
    /// (the responder may have established it and installed its
    /// CHILD_SA: let it come up, then [`Engine::delete_ike_sa`]) and for
    /// an established SA.
    pub fn abort_ike_sa(&mut self, ike_sa: IkeSaId) -> Result<(), EngineError> {
        let sa = self
            .sas
            .get(&ike_sa)
            .ok_or(EngineError::Protocol("no such IKE SA"))?;
        if !sa.abortable() {
            return Err(EngineError::Protocol(
                "IKE_AUTH sent or done: delete it once it is up",
            ));
        }
        self.sas.remove(&ike_sa);
        self.half_open.retain(|_, v| *v != ike_sa);
        Ok(())
    }

    /// Whether we initiated an IKE SA, and its SPIi and SPIr (SPIr is 0
    /// while our IKE_SA_INIT is unanswered).
    pub fn ike_sa_spis(&self, ike_sa: IkeSaId) -> Option<(bool, u64, u64)> {
        self.sas.get(&ike_sa).map(IkeSa::spis)
    }

    /// The SPIs and SK_e/SK_a keys of every IKE SA past IKE_SA_INIT, for
    /// decrypting captures (`espgw keys wireshark`). Secrets: the caller
    /// decides who sees them.
    pub fn ike_sa_secrets(&self) -> Vec<IkeSaSecrets> {
        let mut out: Vec<IkeSaSecrets> = self
            .sas
            .iter()
            .filter_map(|(id, sa)| {
                let (initiator, spi_i, spi_r) = sa.spis();
                let (suite, k) = sa.suite_and_keys()?;
                Some(IkeSaSecrets {
                    ike_sa: *id,
                    initiator,
                    spi_i,
                    spi_r,
                    suite,
                    sk_ei: k.sk_ei.clone(),
                    sk_er: k.sk_er.clone(),
                    sk_ai: k.sk_ai.clone(),
                    sk_ar: k.sk_ar.clone(),
                })
            })
            .collect();
        out.sort_by_key(|s| s.ike_sa);
        out
    }

    /// Starts an IKE SA (and its first CHILD_SA) for `connection`: the
    /// IKE_SA_INIT request is queued for [`Engine::poll_transmit`].
    pub fn initiate(
        &mut self,
        now: Time,
        connection: ConnectionId,
    ) -> Result<IkeSaId, EngineError> {
        if connection >= self.connections.len() {
            return Err(EngineError::UnknownConnection);
        }
        let id = self.fresh_spi()?;
        let conn = &self.connections[connection];
        // INITIAL_CONTACT only when no other IKE SA with the peer is up:
        // the peer may then drop any state it still holds for us.
        let alone = !self
            .sas
            .values()
            .any(|sa| sa.remote().ip() == conn.remote.ip() && sa.is_live());
        let mut sa = IkeSa::initiate(
            id,
            connection,
            conn,
            now,
            &self.config,
            &mut self.rng,
            &mut self.out,
        )?;
        sa.set_initial_contact(alone);
        self.sas.insert(id, sa);
        Ok(id)
    }

    fn informational(
        &mut self,
        now: Time,
        ike_sa: IkeSaId,
        request: OwnRequest,
    ) -> Result<(), EngineError> {
        let sa = self
            .sas
            .get_mut(&ike_sa)
            .ok_or(EngineError::Protocol("no such IKE SA"))?;
        let conn = &self.connections[sa.connection()];
        let r = sa.queue_request(
            now,
            request,
            conn,
            &self.config,
            &mut self.rng,
            &mut self.out,
        );
        self.settle(now);
        r
    }

    /// Asks the peer whether it is alive (an empty INFORMATIONAL, dead
    /// peer detection): [`Event::PeerAlive`] when it answers,
    /// [`Event::IkeSaFailed`] with [`FailReason::Timeout`] when it does not.
    pub fn check_liveness(&mut self, now: Time, ike_sa: IkeSaId) -> Result<(), EngineError> {
        self.informational(now, ike_sa, OwnRequest::Liveness)
    }

    /// Deletes the IKE SA and its CHILD_SAs ([`Event::IkeSaDeleted`] once
    /// the peer answered).
    pub fn delete_ike_sa(&mut self, now: Time, ike_sa: IkeSaId) -> Result<(), EngineError> {
        self.informational(now, ike_sa, OwnRequest::DeleteIke)
    }

    /// Deletes one CHILD_SA, named by our inbound SPI
    /// ([`Event::ChildSaDeleted`] once the peer answered).
    pub fn delete_child_sa(
        &mut self,
        now: Time,
        ike_sa: IkeSaId,
        inbound_spi: u32,
    ) -> Result<(), EngineError> {
        self.informational(now, ike_sa, OwnRequest::DeleteChild { inbound_spi })
    }

    /// A new CHILD_SA on an established IKE SA with its connection's
    /// selectors and ESP proposals (CREATE_CHILD_SA without REKEY_SA, RFC
    /// 7296 1.3.1): [`Event::ChildSaInstalled`] when the peer accepts it,
    /// [`Event::ChildSaFailed`] with its notify when it refuses. For an
    /// IKE SA whose CHILD_SA was deleted (the connection's traffic again
    /// without a new IKE SA).
    pub fn create_child_sa(&mut self, now: Time, ike_sa: IkeSaId) -> Result<(), EngineError> {
        self.informational(now, ike_sa, OwnRequest::CreateChild)
    }

    /// Rekeys one CHILD_SA (named by our inbound SPI): CREATE_CHILD_SA
    /// with REKEY_SA (PFS when the connection's ESP proposal has a
    /// group), [`Event::ChildSaInstalled`] for the new one, then the old
    /// one is deleted ([`Event::ChildSaDeleted`]).
    pub fn rekey_child_sa(
        &mut self,
        now: Time,
        ike_sa: IkeSaId,
        inbound_spi: u32,
    ) -> Result<(), EngineError> {
        self.informational(now, ike_sa, OwnRequest::RekeyChild { inbound_spi })
    }

    /// Rekeys the IKE SA (CREATE_CHILD_SA with a new KE and SPIs, RFC
    /// 7296 1.3.2 and 2.18): [`Event::IkeSaRekeyed`], then the old SA is
    /// deleted.
    pub fn rekey_ike_sa(&mut self, now: Time, ike_sa: IkeSaId) -> Result<(), EngineError> {
        self.informational(now, ike_sa, OwnRequest::RekeyIke)
    }

    /// Takes in the IKE SAs a rekey created.
    fn adopt_new_sas(&mut self) {
        for sa in std::mem::take(&mut self.out.new_sas) {
            // A random 64-bit SPI colliding is not worth more than a drop.
            self.sas.entry(sa.id()).or_insert(sa);
        }
    }

    /// After every input: adopt new SAs, arm the lifetimes of SAs that
    /// just came up, start and finish reauthentications.
    fn settle(&mut self, now: Time) {
        self.adopt_new_sas();
        // RFC 7296 2.8.2: the CHILD_SAs leave the SA that lost the
        // collision; its creator deletes it (and we do, after a linger,
        // if that delete never comes).
        for (from, to) in std::mem::take(&mut self.out.child_moves) {
            let children = match self.sas.get_mut(&from) {
                Some(sa) => {
                    sa.mark_redundant(now + self.config.linger_ms);
                    sa.take_children()
                }
                None => Default::default(),
            };
            if let Some(sa) = self.sas.get_mut(&to) {
                sa.add_children(children);
            }
        }
        for old in std::mem::take(&mut self.out.reauth) {
            self.start_reauth(now, old);
        }
        // Reauthentications, duplicates and pairs to look at again follow
        // this input's IKE SA rekeys.
        self.follow_ike_rekeys();
        // A reauthentication whose new SA is up replaces the old SA; one
        // whose new SA failed is forgotten (the old SA runs to its hard
        // limit).
        let mut done = Vec::new();
        for (&new, &old) in &self.reauth {
            // A rekey of the old SA is under way (or its RFC 7296 2.8.2
            // collision undecided): wait for its IkeSaRekeyed (followed
            // above) and replace the SA it made, else that one would live
            // on beside the new SA with the CHILD_SAs (found by the
            // property test with ML-KEM on the CHILD_SAs and by review).
            let undecided = self.sas.get(&old).is_some_and(|sa| sa.rekey_in_flight());
            match self.sas.get(&new) {
                Some(sa) if sa.is_established() && undecided => {}
                Some(sa) if sa.is_established() => done.push((new, old, true)),
                Some(sa) if !sa.is_dead() => {}
                _ => done.push((new, old, false)),
            }
        }
        for (new, old, up) in done {
            self.reauth.remove(&new);
            if let (true, Some(sa)) = (up, self.sas.get_mut(&old)) {
                let conn = &self.connections[sa.connection()];
                sa.replace_by_reauth(now, conn, &self.config, &mut self.rng, &mut self.out);
            }
        }
        // SAs that came up with this input (their lifetimes not armed yet).
        let fresh: Vec<IkeSaId> = self
            .sas
            .iter()
            .filter(|(_, sa)| sa.is_established() && sa.ike_lifetimes().is_none())
            .map(|(id, _)| *id)
            .collect();
        for sa in self.sas.values_mut() {
            let conn = &self.connections[sa.connection()];
            sa.arm_lifetimes(now, conn, &mut self.rng);
        }
        for id in fresh {
            self.drop_duplicate_of(now, id);
        }
        self.look_again(now);
        self.settle_duplicates(now);
        for sa in self.sas.values_mut() {
            let conn = &self.connections[sa.connection()];
            sa.kick(now, conn, &self.config, &mut self.rng, &mut self.out);
        }
    }

    /// The engine's own records of IKE SAs follow this input's IKE SA
    /// rekeys (`IkeSaRekeyed`, still queued) to the SAs they made: a
    /// reauthentication under way whose old SA was rekeyed replaces the
    /// SA that rekey made (else that one would live on beside the new SA
    /// with the CHILD_SAs: found by the timed-rekey property test with
    /// ML-KEM on the CHILD_SAs, tests/engine_pq_child.rs); a duplicate's
    /// SAs and a pair to look at again, likewise.
    fn follow_ike_rekeys(&mut self) {
        if self.reauth.is_empty() && self.duplicates.is_empty() && self.look_again.is_empty() {
            return;
        }
        let rekeys: Vec<(IkeSaId, IkeSaId)> = self
            .out
            .events
            .iter()
            .filter_map(|e| match e {
                Event::IkeSaRekeyed { old, new } => Some((*old, *new)),
                _ => None,
            })
            .collect();
        for (old, new) in rekeys {
            let follow = |x: &mut IkeSaId| {
                if *x == old {
                    *x = new;
                }
            };
            self.reauth.values_mut().for_each(follow);
            for (a, b, _) in self.look_again.iter_mut() {
                follow(a);
                follow(b);
            }
            self.duplicates
                .values_mut()
                .for_each(|d| follow(&mut d.kept));
            if let Some(d) = self.duplicates.remove(&old) {
                self.duplicates.insert(new, d);
            }
        }
    }

    /// Both sides set the connection up at once (both `start`, or both
    /// reauthenticating at the same moment): `fresh`, just up, and another
    /// IKE SA of the same connection with the same peer, initiated by the
    /// other side, whose setups overlapped (each one's IKE_SA_INIT began
    /// before the other came up). Left alone, both would live on with the
    /// CHILD_SAs twice, rekeying and reauthenticating side by side. As
    /// for an RFC 7296 2.8.2 collision, the SA whose IKE_SA_INIT holds the
    /// lowest of the four nonces is redundant and its initiator deletes
    /// it: both sides see the same nonces, so they agree without a word;
    /// a peer that does not do this (strongSwan keeps both) has its
    /// redundant SA deleted by us after the linger. An SA that came up
    /// long after the other (a peer that restarted, a reauthentication of
    /// one side) is no duplicate. When the redundant SA is the one just
    /// up, its queued `IkeSaUp` says so, so that the driver does not let
    /// its CHILD_SA take the tunnel over from the one that stays.
    fn drop_duplicate_of(&mut self, now: Time, fresh: IkeSaId) {
        let Some(new) = self.sas.get(&fresh) else {
            return;
        };
        let Some((ours, began, _)) = new.setup_span() else {
            return;
        };
        let (connection, peer) = (new.connection(), new.remote().ip());
        // A `%any` connection serves whoever comes (two road warriors
        // behind one NAT share an address): no duplicates there.
        if self.connections[connection].remote.ip().is_unspecified() {
            return;
        }
        let other = self.sas.iter().find_map(|(id, sa)| {
            let (theirs, _, up) = sa.setup_span()?;
            (*id != fresh
                && sa.connection() == connection
                && sa.remote().ip() == peer
                && theirs != ours)
                .then_some((*id, up))
        });
        let Some((other, other_up)) = other else {
            return;
        };
        if began > other_up {
            // Not set up at once as far as we saw: most likely the peer's
            // reauthentication (it deletes the old SA in a moment; its
            // delete may be lost and retransmitted) or a peer that
            // restarted, or both set up at once where the peer saw the
            // overlap and we did not. Looked at again once every
            // retransmission series of the peer's (taken to be as ours)
            // has ended: if both are still up then, the newer is kept.
            let wait = self.config.linger_ms.max(self.retransmission_budget());
            self.look_again.push((fresh, other, now + wait));
            return;
        }
        let lowest = |id: &IkeSaId| self.sas[id].lowest_nonce().to_vec();
        let (redundant, kept) = if lowest(&fresh) < lowest(&other) {
            (fresh, other)
        } else {
            (other, fresh)
        };
        // Ours once the peer showed it holds the kept one at any time; the
        // peer's after the linger, once it showed so since.
        let linger_at = now + self.config.linger_ms;
        let (act_at, since) = if self.sas[&redundant].spis().0 {
            (now, 0)
        } else {
            (linger_at, linger_at)
        };
        self.decide_duplicate(now, redundant, kept, act_at, since);
    }

    /// How long one of our requests is retransmitted before it is given
    /// up (the sum of the waits).
    fn retransmission_budget(&self) -> Time {
        let c = &self.config;
        (0..=c.max_retransmits)
            .map(|i| {
                c.retransmit_base_ms
                    .saturating_mul(1u64 << i.min(20))
                    .min(c.retransmit_max_ms)
            })
            .sum()
    }

    /// The pairs of [`Engine::drop_duplicate_of`] to look at again whose
    /// time came: both still up (following IKE SA rekeys), the newer is
    /// kept (the peer's new SA of a reauthentication whose delete of the
    /// old one never came, a peer's after its restart; where the peer saw
    /// two set up at once and we did not, it has decided by then) and the
    /// older is deleted once the peer shows, from now on, that it holds
    /// the newer.
    fn look_again(&mut self, now: Time) {
        if self.look_again.is_empty() {
            return;
        }
        let due: Vec<(IkeSaId, IkeSaId)> = self
            .look_again
            .iter()
            .filter(|(_, _, at)| *at <= now)
            .map(|(a, b, _)| (*a, *b))
            .collect();
        if due.is_empty() {
            return;
        }
        self.look_again.retain(|(_, _, at)| *at > now);
        for (newer, older) in due {
            let live = |id: &IkeSaId| self.sas.get(id).is_some_and(IkeSa::is_live);
            let known =
                self.duplicates.contains_key(&newer) || self.duplicates.contains_key(&older);
            if live(&newer) && live(&older) && !known {
                self.decide_duplicate(now, older, newer, now, now);
            }
        }
    }

    /// `redundant` goes, `kept` stays ([`Engine::settle_duplicates`]
    /// deletes it from `act_at` on, once the peer showed it holds `kept`
    /// at `since` or later).
    fn decide_duplicate(
        &mut self,
        now: Time,
        redundant: IkeSaId,
        kept: IkeSaId,
        act_at: Time,
        since: Time,
    ) {
        // Its IkeSaUp, if still queued (the SA just came up), says so.
        for e in self.out.events.iter_mut() {
            if let Event::IkeSaUp {
                ike_sa,
                redundant: r,
                ..
            } = e
            {
                if *ike_sa == redundant {
                    *r = true;
                }
            }
        }
        self.out.stats.duplicate_ike_sas += 1;
        self.duplicates.insert(
            redundant,
            Duplicate {
                kept,
                act_at,
                since,
                asked: false,
            },
        );
        self.settle_duplicates(now);
    }

    /// Drops the redundant SAs of [`Engine::drop_duplicate_of`] once the
    /// peer has shown that it holds the SA kept, so that the two sides
    /// never end on different SAs:
    /// - our redundant SA: the peer initiated the kept one, but our
    ///   IKE_AUTH answer may never have reached it, and then ours is the
    ///   only SA it has. Deleted once the peer sent or answered anything
    ///   on the kept SA; a liveness check on it asks.
    /// - the peer's: the peer deletes it (it sees the same nonces). If it
    ///   has not after the linger (strongSwan keeps both; an espgw may not
    ///   have seen the overlap), we delete it, but only after the peer
    ///   answered on the kept SA since: the peer may have given that one
    ///   up meanwhile (its checks on it lost), and then the redundant SA is
    ///   the only one it has.
    /// - of a pair looked at again ([`Engine::look_again`]): the older,
    ///   once the peer answered on the newer after the look.
    ///
    /// A kept SA that fails leaves the redundant one as it is. Both follow
    /// IKE SA rekeys (`IkeSaRekeyed`) to the SAs they made.
    fn settle_duplicates(&mut self, now: Time) {
        if self.duplicates.is_empty() {
            return;
        }
        let mut drop = Vec::new();
        let mut ask = Vec::new();
        self.duplicates.retain(|&redundant, d| {
            let (Some(r), Some(k)) = (self.sas.get(&redundant), self.sas.get(&d.kept)) else {
                return false;
            };
            if !r.is_live() || !k.is_live() {
                return false;
            }
            if now < d.act_at {
                return true;
            }
            if k.heard_since(d.since) {
                drop.push(redundant);
                return false;
            }
            d.asked = true;
            ask.push(d.kept);
            true
        });
        for kept in ask {
            let Some(sa) = self.sas.get_mut(&kept) else {
                continue;
            };
            if !sa.has_pending(OwnRequest::Liveness) {
                let conn = &self.connections[sa.connection()];
                let _ = sa.queue_request(
                    now,
                    OwnRequest::Liveness,
                    conn,
                    &self.config,
                    &mut self.rng,
                    &mut self.out,
                );
            }
        }
        for redundant in drop {
            if let Some(sa) = self.sas.get_mut(&redundant) {
                let conn = &self.connections[sa.connection()];
                sa.drop_duplicate(now, conn, &self.config, &mut self.rng, &mut self.out);
            }
        }
    }

    /// When [`Engine::settle_duplicates`] or [`Engine::look_again`] next
    /// has to look: the linger of a redundant SA of the peer's, a pair to
    /// look at again.
    fn duplicates_timeout(&self) -> Option<Time> {
        self.duplicates
            .values()
            .filter(|d| !d.asked)
            .map(|d| d.act_at)
            .chain(self.look_again.iter().map(|(_, _, at)| *at))
            .min()
    }

    /// Reauthentication (make-before-break): a new IKE SA for the same
    /// connection, towards the peer's current address; the old one is
    /// deleted once the new one is up.
    fn start_reauth(&mut self, now: Time, old: IkeSaId) {
        let Some(sa) = self.sas.get(&old) else {
            return;
        };
        let connection = sa.connection();
        let remote = sa.remote();
        let Ok(id) = self.fresh_spi() else {
            return;
        };
        let mut conn = self.connections[connection].clone();
        if conn.remote.ip().is_unspecified() {
            // A responder-only connection: reach the peer where it is, on
            // its IKE port.
            conn.remote = SocketAddr::new(remote.ip(), conn.remote.port().max(500));
        }
        if let Ok(sa) = IkeSa::initiate(
            id,
            connection,
            &conn,
            now,
            &self.config,
            &mut self.rng,
            &mut self.out,
        ) {
            self.sas.insert(id, sa);
            self.reauth.insert(id, old);
        }
    }

    /// The data plane's counters for one CHILD_SA (named by our inbound
    /// SPI): bytes and packets so far, the larger of the two directions.
    /// Past the connection's `child_rekey_bytes` / `child_rekey_packets`
    /// (less jitter) the CHILD_SA is rekeyed; past its `child_life_*` it is
    /// deleted at once ([`Event::ChildSaDeleted`], then a delete to the
    /// peer).
    pub fn child_sa_usage(
        &mut self,
        now: Time,
        ike_sa: IkeSaId,
        inbound_spi: u32,
        bytes: u64,
        packets: u64,
    ) -> Result<(), EngineError> {
        let sa = self
            .sas
            .get_mut(&ike_sa)
            .ok_or(EngineError::Protocol("no such IKE SA"))?;
        let conn = &self.connections[sa.connection()];
        let r = sa.child_usage(
            now,
            inbound_spi,
            bytes,
            packets,
            conn,
            &self.config,
            &mut self.rng,
            &mut self.out,
        );
        self.settle(now);
        r
    }

    /// An IKE SA's soft and hard times (rekey, reauth, expiry), once it
    /// is established.
    #[allow(clippy::type_complexity)]
    pub fn ike_sa_lifetimes(
        &self,
        ike_sa: IkeSaId,
    ) -> Option<(Option<Time>, Option<Time>, Option<Time>)> {
        self.sas.get(&ike_sa)?.ike_lifetimes()
    }

    /// A CHILD_SA's rekey and expiry times (by our inbound SPI).
    pub fn child_sa_lifetimes(
        &self,
        ike_sa: IkeSaId,
        inbound_spi: u32,
    ) -> Option<(Option<Time>, Option<Time>)> {
        self.sas.get(&ike_sa)?.child_lifetimes(inbound_spi)
    }

    /// A datagram received from `src` at our address `dst` (the UDP
    /// payload, with the non-ESP marker when on the NAT-T port).
    pub fn handle_datagram(
        &mut self,
        now: Time,
        src: SocketAddr,
        dst: SocketAddr,
        datagram: &[u8],
    ) {
        let nat_t = self.config.nat_t_port;
        if dst.port() == nat_t && datagram == [0xFF] {
            // A NAT keepalive (RFC 3948 2.3): keeps the peer's mapping, no
            // answer.
            self.out.stats.keepalives_received += 1;
            return;
        }
        let ike = if dst.port() == nat_t {
            match message::strip_non_esp_marker(datagram) {
                Some(m) => m,
                None => {
                    self.out.stats.not_ike += 1;
                    return;
                }
            }
        } else {
            datagram
        };
        let header = match Message::parse_raw(ike) {
            Ok((h, _)) => h,
            Err(_) => {
                self.out.stats.malformed += 1;
                return;
            }
        };
        let id = if header.initiator {
            // Sent by the original initiator: we are the responder.
            if header.exchange == message::ExchangeType::IKE_SA_INIT
                && !header.response
                && header.spi_r == 0
            {
                self.on_init_request(now, src, dst, ike, header.spi_i);
                return;
            }
            header.spi_r
        } else {
            header.spi_i
        };
        let conns = &self.connections;
        match self.sas.get_mut(&id) {
            Some(sa) if sa.matches(&header) => {
                let conn = &conns[sa.connection()];
                // The half-open index entry stays until the SA goes: a late
                // duplicate IKE_SA_INIT request still gets the stored answer.
                sa.handle(
                    now,
                    src,
                    dst,
                    &header,
                    ike,
                    conn,
                    conns,
                    &self.config,
                    &mut self.rng,
                    &mut self.out,
                );
                self.settle(now);
            }
            _ => self.out.stats.unknown_sa += 1,
        }
    }

    fn on_init_request(
        &mut self,
        now: Time,
        src: SocketAddr,
        dst: SocketAddr,
        ike: &[u8],
        spi_i: u64,
    ) {
        if let Some(id) = self.half_open.get(&(src, spi_i)) {
            if let Some(sa) = self.sas.get(id) {
                sa.answer_init_duplicate(ike, &mut self.out);
                return;
            }
        }
        let msg = match Message::parse(ike) {
            Ok(m) => m,
            Err(_) => {
                self.out.stats.malformed += 1;
                return;
            }
        };
        let half_open = self.sas.values().filter(|sa| sa.is_half_open()).count();
        if half_open >= self.config.cookie_threshold && !self.cookie_ok(now, src, dst, &msg) {
            return;
        }
        if half_open >= self.config.max_half_open {
            self.out.stats.half_open_refused += 1;
            return;
        }
        let Some(connection) = self
            .connections
            .iter()
            .position(|c| c.remote.ip().is_unspecified() || c.remote.ip() == src.ip())
        else {
            self.out.stats.unknown_sa += 1;
            return;
        };
        let Ok(id) = self.fresh_spi() else {
            return;
        };
        if let Some(sa) = IkeSa::respond(
            id,
            connection,
            &self.connections,
            now,
            src,
            dst,
            ike,
            &msg,
            &self.config,
            &mut self.rng,
            &mut self.out,
        ) {
            self.half_open.insert((src, spi_i), id);
            self.sas.insert(id, sa);
        }
    }

    /// While cookies are demanded: whether `msg` carries a valid one. If
    /// not, it is answered with a fresh cookie (RFC 7296 2.6) and nothing
    /// is kept.
    fn cookie_ok(&mut self, now: Time, src: SocketAddr, dst: SocketAddr, msg: &Message) -> bool {
        let Some(ni) = msg.payloads.iter().find_map(|p| match p {
            message::Payload::Nonce(n) => Some(&n.0),
            _ => None,
        }) else {
            self.out.stats.malformed += 1;
            return false;
        };
        let input = CookieInput {
            ni,
            peer: src,
            spi_i: msg.header.spi_i,
        };
        if let Some(c) = msg.notifies(NotifyType::COOKIE).next() {
            if self
                .cookies
                .valid(now, &self.config, &mut self.rng, &c.data, &input)
            {
                return true;
            }
            self.out.stats.cookies_invalid += 1;
        }
        let Ok(cookie) = self.cookies.make(now, &self.config, &mut self.rng, &input) else {
            return false;
        };
        let reply = Message {
            header: message::HeaderRepr {
                spi_r: 0,
                response: true,
                initiator: false,
                ..msg.header
            },
            payloads: vec![message::Payload::Notify(message::Notify::ike(
                NotifyType::COOKIE,
                cookie,
            ))],
        };
        if let Ok(bytes) = reply.emit() {
            let mut payload = Vec::with_capacity(bytes.len() + 4);
            if dst.port() == self.config.nat_t_port {
                payload.extend_from_slice(&message::NON_ESP_MARKER);
            }
            payload.extend_from_slice(&bytes);
            self.out.transmits.push_back(Transmit {
                src: dst,
                dst: src,
                payload,
            });
            self.out.stats.cookies_sent += 1;
        }
        false
    }

    /// A random SPI not in use (never zero).
    fn fresh_spi(&mut self) -> Result<IkeSaId, EngineError> {
        loop {
            let mut b = [0u8; 8];
            self.rng.fill(&mut b)?;
            let spi = u64::from_be_bytes(b);
            if spi != 0 && !self.sas.contains_key(&spi) {
                return Ok(spi);
            }
        }
    }

    /// The earliest time [`Engine::handle_timeout`] has work to do.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.sas
            .values()
            .filter_map(|sa| sa.next_timeout(&self.config))
            .chain(self.duplicates_timeout())
            .min()
    }

    /// Retransmits unanswered requests, gives up on peers that stopped
    /// answering, forgets half-open and finished SAs.
    pub fn handle_timeout(&mut self, now: Time) {
        let mut gone = Vec::new();
        for (id, sa) in self.sas.iter_mut() {
            if !sa.on_timeout(now, &self.config, &mut self.out) {
                gone.push(*id);
                continue;
            }
            let conn = &self.connections[sa.connection()];
            sa.on_life_timeout(now, conn, &self.config, &mut self.rng, &mut self.out);
        }
        for id in gone {
            self.sas.remove(&id);
            self.half_open.retain(|_, v| *v != id);
        }
        self.settle(now);
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.transmits.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.out.events.pop_front()
    }
}

/// The text of an identity for events and logs (FQDN, email, address).
pub(crate) fn id_text(id: &Identification) -> String {
    if let Some(ip) = id.as_ip() {
        ip.to_string()
    } else if let Some(dn) = (id.id_type == message::IdType::DER_ASN1_DN)
        .then(|| crate::crypto::der::dn_text(&id.data))
        .flatten()
    {
        dn
    } else if let Some(s) = id.as_str() {
        s.to_string()
    } else {
        format!("{:?} ({} bytes)", id.id_type, id.data.len())
    }
}
