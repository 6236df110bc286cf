//! What the engine needs to know about a peer (a connection, named after
//! swanctl.conf's `connections`) and about its own timers.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::crypto::{cert, signature, CertError, PrivateKey};
use crate::crypto::{
    parse_esp_proposals, parse_ike_proposals, EspProposal, IkeProposal, ProposalError, SecretBytes,
};
use crate::message::{Identification, TrafficSelector};

/// One peer: addresses, identities, the pre-shared key, proposals in
/// strongSwan syntax and the traffic selectors of the first CHILD_SA.
#[derive(Clone, Debug)]
pub struct Connection {
    /// A name for events and logs.
    pub name: String,
    /// Our address and IKE port (normally 500).
    pub local: SocketAddr,
    /// The peer's address and IKE port. As responder, an IKE_SA_INIT from
    /// this IP (any port) uses this connection; an unspecified IP matches
    /// any peer.
    pub remote: SocketAddr,
    /// Our identity (IDi or IDr).
    pub local_id: Identification,
    /// The identity the peer must present; None accepts any.
    pub remote_id: Option<Identification>,
    /// The pre-shared key (never logged: [`SecretBytes`] prints its length).
    pub psk: SecretBytes,
    /// IKE SA proposals, in our order of preference.
    pub proposals: Vec<IkeProposal>,
    /// CHILD_SA proposals (a PFS group in them is ignored for the first
    /// CHILD_SA, which IKE_AUTH creates without a key exchange).
    pub esp_proposals: Vec<EspProposal>,
    /// Our side's selectors (TSi as initiator, TSr as responder).
    pub local_ts: Vec<TrafficSelector>,
    /// The peer side's selectors.
    pub remote_ts: Vec<TrafficSelector>,
    /// Rekey, reauthentication and expiry of this connection's SAs
    /// (swanctl.conf's `rekey_time`, `life_time`, ... with its defaults).
    pub lifetimes: Lifetimes,

    // ---- certificate authentication (docs/ike.md, "Certificates") ----
    /// How both sides authenticate: with `psk`, or with certificates and
    /// RFC 7427 signatures (`cert`, `key`, `cacerts`).
    pub auth: AuthKind,
    /// Our certificate (DER), then intermediate CA certificates to send
    /// with it. Empty for PSK.
    pub cert: Vec<Vec<u8>>,
    /// Our private key (never printed: `Debug` shows its kind).
    pub key: Option<PrivateKey>,
    /// The CA certificates (DER) we trust for the peer's certificate: each
    /// is a trust anchor, and each is named in our CERTREQ.
    pub cacerts: Vec<Vec<u8>>,
    /// IKE fragmentation (RFC 7383) for this connection; None: the
    /// engine's [`EngineConfig::fragmentation`]. As responder it applies
    /// from the connection chosen at IKE_SA_INIT (by the peer's address).
    pub fragmentation: Option<bool>,
    /// Forced UDP encapsulation (strongSwan's `encap = yes`): our
    /// NAT_DETECTION_SOURCE_IP hash is faked so the peer sees a NAT in
    /// front of us; IKE moves to the NAT-T port from IKE_AUTH and the
    /// CHILD_SAs are `udp_encap` even without a NAT.
    pub force_encap: bool,
    /// RFC 9611 per-resource CHILD_SAs: how many CHILD_SAs with the same
    /// traffic selectors this connection wants (0 or 1: off, the
    /// SA_RESOURCE_INFO notify is neither sent nor echoed). As initiator:
    /// SA_RESOURCE_INFO in IKE_AUTH and, when the responder echoes it,
    /// this many less one more CHILD_SAs by CREATE_CHILD_SA; as
    /// responder: the echo, and at most this many such CHILD_SAs (more
    /// are refused with TS_MAX_QUEUE).
    pub per_resource_sas: u32,
}

/// How a connection authenticates (both directions the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthKind {
    /// Pre-shared key: AUTH method 2 both ways.
    Psk,
    /// X.509 certificates: AUTH method 14 (RFC 7427) both ways, CERT and
    /// CERTREQ sent.
    PubKey,
}

impl Connection {
    /// A connection from strongSwan-style strings: `proposals` and
    /// `esp_proposals` as in swanctl.conf, selectors as CIDR prefixes
    /// (`10.1.0.0/24`). Errors name the bad proposal or prefix.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: &str,
        local: SocketAddr,
        remote: SocketAddr,
        local_id: Identification,
        remote_id: Option<Identification>,
        psk: &[u8],
        proposals: &str,
        esp_proposals: &str,
        local_ts: &[&str],
        remote_ts: &[&str],
    ) -> Result<Self, ConfigError> {
        let parse_ts = |list: &[&str]| -> Result<Vec<TrafficSelector>, ConfigError> {
            list.iter()
                .map(|s| {
                    cidr_selector(s).ok_or_else(|| ConfigError::TrafficSelector(s.to_string()))
                })
                .collect()
        };
        Ok(Connection {
            name: name.to_string(),
            local,
            remote,
            local_id,
            remote_id,
            psk: SecretBytes::from_slice(psk),
            proposals: parse_ike_proposals(proposals).map_err(ConfigError::Proposal)?,
            esp_proposals: parse_esp_proposals(esp_proposals).map_err(ConfigError::Proposal)?,
            local_ts: parse_ts(local_ts)?,
            remote_ts: parse_ts(remote_ts)?,
            auth: AuthKind::Psk,
            cert: Vec::new(),
            key: None,
            cacerts: Vec::new(),
            lifetimes: Lifetimes::default(),
            fragmentation: None,
            force_encap: false,
            per_resource_sas: 0,
        })
    }

    /// Switches the connection to certificates: `cert` is our certificate
    /// (DER) followed by any intermediates to send, `key` its private key,
    /// `cacerts` the CAs trusted for the peer. Checks that every
    /// certificate parses and that `key` signs what `cert`'s key verifies.
    pub fn with_certificates(
        mut self,
        cert: Vec<Vec<u8>>,
        key: PrivateKey,
        cacerts: Vec<Vec<u8>>,
    ) -> Result<Self, ConfigError> {
        let ee = cert
            .first()
            .ok_or(ConfigError::Certificate(CertError::Missing))?;
        for c in cert.iter().chain(&cacerts) {
            cert::subject(c).map_err(ConfigError::Certificate)?;
        }
        let probe = b"espgw: does the key belong to the certificate?";
        let data = key
            .sign_auth(None, probe)
            .map_err(ConfigError::Certificate)?;
        signature::verify_auth(ee, probe, &data)
            .map_err(|_| ConfigError::Certificate(CertError::BadKey))?;
        self.auth = AuthKind::PubKey;
        self.cert = cert;
        self.key = Some(key);
        self.cacerts = cacerts;
        Ok(self)
    }

    /// [`Connection::with_certificates`] from PEM texts (what the gateway
    /// config's `cert`, `key` and `cacerts` files hold): certificates as
    /// `CERTIFICATE` blocks (ours first in `cert`), the key as PKCS#8,
    /// SEC1 or PKCS#1. The caller reads the files; the engine does no I/O.
    pub fn with_pem(self, cert: &[u8], key: &[u8], cacerts: &[&[u8]]) -> Result<Self, ConfigError> {
        let chain = cert::certs_from_pem(cert).map_err(ConfigError::Certificate)?;
        let key = PrivateKey::from_pem(key).map_err(ConfigError::Certificate)?;
        let mut cas = Vec::new();
        for pem in cacerts {
            cas.extend(cert::certs_from_pem(pem).map_err(ConfigError::Certificate)?);
        }
        self.with_certificates(chain, key, cas)
    }

    /// Our identity becomes our certificate's subject DN (ID_DER_ASN1_DN),
    /// strongSwan's default when a certificate is configured without a
    /// `local_id`.
    pub fn with_local_id_from_cert(mut self) -> Result<Self, ConfigError> {
        let ee = self
            .cert
            .first()
            .ok_or(ConfigError::Certificate(CertError::Missing))?;
        self.local_id = cert::subject_id(ee).map_err(ConfigError::Certificate)?;
        Ok(self)
    }
}

// ---- lifetimes (issue 11: timers) ----

/// When a connection's SAs are rekeyed, reauthenticated and expire, with
/// strongSwan's semantics and defaults (swanctl.conf). Times in
/// milliseconds, 0 = off. A soft limit (rekey, reauth) is reached at the
/// configured value minus a random jitter in `[0, rand)` drawn per SA from
/// the engine's random source, so the two ends (and many SAs) do not all
/// rekey at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lifetimes {
    /// IKE SA rekey (`rekey_time`, default 4 h).
    pub ike_rekey_time_ms: u64,
    /// IKE SA reauthentication (`reauth_time`, default 0 = off): a new
    /// IKE SA with IKE_SA_INIT and IKE_AUTH, then the old one deleted.
    pub ike_reauth_time_ms: u64,
    /// The IKE SA is deleted this long after its (jittered) rekey or
    /// reauth time if that has not replaced it (`over_time`; None = 10 %
    /// of the larger of the two).
    pub ike_over_time_ms: Option<u64>,
    /// Jitter range of the IKE SA's soft limit (`rand_time`; None =
    /// `over_time`).
    pub ike_rand_time_ms: Option<u64>,
    /// CHILD_SA rekey (`rekey_time`, default 1 h).
    pub child_rekey_time_ms: u64,
    /// CHILD_SA hard expiry: deleted (`life_time`; None = rekey_time
    /// + 10 %).
    pub child_life_time_ms: Option<u64>,
    /// Jitter range of the CHILD_SA rekey (`rand_time`; None = life_time -
    /// rekey_time).
    pub child_rand_time_ms: Option<u64>,
    /// CHILD_SA rekey after this many bytes (`rekey_bytes`, 0 = off).
    pub child_rekey_bytes: u64,
    /// CHILD_SA deleted after this many bytes (`life_bytes`; None =
    /// rekey_bytes + 10 %).
    pub child_life_bytes: Option<u64>,
    /// Jitter of the byte rekey (`rand_bytes`; None = life - rekey).
    pub child_rand_bytes: Option<u64>,
    /// CHILD_SA rekey after this many packets (`rekey_packets`, 0 = off).
    pub child_rekey_packets: u64,
    /// CHILD_SA deleted after this many packets (`life_packets`; None =
    /// rekey_packets + 10 %).
    pub child_life_packets: Option<u64>,
    /// Jitter of the packet rekey (`rand_packets`; None = life - rekey).
    pub child_rand_packets: Option<u64>,
}

impl Default for Lifetimes {
    fn default() -> Self {
        Lifetimes {
            ike_rekey_time_ms: 4 * 3_600_000,
            ike_reauth_time_ms: 0,
            ike_over_time_ms: None,
            ike_rand_time_ms: None,
            child_rekey_time_ms: 3_600_000,
            child_life_time_ms: None,
            child_rand_time_ms: None,
            child_rekey_bytes: 0,
            child_life_bytes: None,
            child_rand_bytes: None,
            child_rekey_packets: 0,
            child_life_packets: None,
            child_rand_packets: None,
        }
    }
}

/// A soft limit, the hard limit and the jitter range of one quantity, with
/// strongSwan's derivation of the unset ones: hard = soft + 10 %, jitter =
/// hard - soft (never beyond soft). All 0 when off.
pub(crate) fn limits(soft: u64, hard: Option<u64>, rand: Option<u64>) -> (u64, u64, u64) {
    let hard = hard.unwrap_or_else(|| soft.saturating_add(soft / 10));
    if soft == 0 {
        return (0, hard, 0);
    }
    let rand = rand.unwrap_or(hard.saturating_sub(soft)).min(soft);
    (soft, hard, rand)
}

impl Lifetimes {
    /// The IKE SA's (rekey, reauth, over, rand) times.
    pub(crate) fn ike(&self) -> (u64, u64, u64, u64) {
        let longest = self.ike_rekey_time_ms.max(self.ike_reauth_time_ms);
        let over = self.ike_over_time_ms.unwrap_or(longest / 10);
        let rand = self.ike_rand_time_ms.unwrap_or(over);
        (self.ike_rekey_time_ms, self.ike_reauth_time_ms, over, rand)
    }
}

// ---- end lifetimes ----

/// A connection that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// A proposal string is wrong.
    Proposal(ProposalError),
    /// A traffic selector is not an address/prefix.
    TrafficSelector(String),
    /// A certificate or key is unusable.
    Certificate(CertError),
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::Proposal(e) => write!(f, "{e}"),
            ConfigError::TrafficSelector(s) => {
                write!(f, "traffic selector \"{s}\" is not ADDRESS/PREFIX")
            }
            ConfigError::Certificate(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// All ports, all protocols, the addresses of `prefix` (`10.1.0.0/24`,
/// `2001:db8::/64`; a bare address is a /32 or /128).
pub fn cidr_selector(prefix: &str) -> Option<TrafficSelector> {
    let (addr, len) = match prefix.split_once('/') {
        Some((a, l)) => (a.parse::<IpAddr>().ok()?, Some(l.parse::<u32>().ok()?)),
        None => (prefix.parse::<IpAddr>().ok()?, None),
    };
    match addr {
        IpAddr::V4(a) => {
            let len = len.unwrap_or(32);
            if len > 32 {
                return None;
            }
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            let start = u32::from(a) & mask;
            Some(TrafficSelector::Ipv4 {
                ip_protocol: 0,
                start_port: 0,
                end_port: u16::MAX,
                start: Ipv4Addr::from(start),
                end: Ipv4Addr::from(start | !mask),
            })
        }
        IpAddr::V6(a) => {
            let len = len.unwrap_or(128);
            if len > 128 {
                return None;
            }
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            let start = u128::from(a) & mask;
            Some(TrafficSelector::Ipv6 {
                ip_protocol: 0,
                start_port: 0,
                end_port: u16::MAX,
                start: Ipv6Addr::from(start),
                end: Ipv6Addr::from(start | !mask),
            })
        }
    }
}

/// The engine's timers, in milliseconds.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// First retransmission of an unanswered request after this long;
    /// each further one waits twice as long as the previous.
    pub retransmit_base_ms: u64,
    /// The longest wait between two retransmissions.
    pub retransmit_max_ms: u64,
    /// Retransmissions before the IKE SA is given up.
    pub max_retransmits: u32,
    /// A responder's IKE SA that has not completed IKE_AUTH after this
    /// long is forgotten.
    pub half_open_timeout_ms: u64,
    /// At most this many responder IKE SAs waiting for IKE_AUTH; further
    /// IKE_SA_INIT requests are dropped (counted) until some complete or
    /// time out. Bounds the state and the key exchanges an unauthenticated
    /// flood costs.
    pub max_half_open: usize,
    /// From this many half-open responder SAs on, an IKE_SA_INIT request
    /// must carry a valid COOKIE (RFC 7296 2.6): one without is answered
    /// statelessly with a cookie, before any key exchange. 0 demands
    /// cookies always; `usize::MAX` never.
    pub cookie_threshold: usize,
    /// The cookie secret is replaced after this long; cookies of the
    /// previous secret are still accepted for one more lifetime.
    pub cookie_secret_lifetime_ms: u64,
    /// A failed or deleted IKE SA is kept this long to answer
    /// retransmissions of the request that ended it.
    pub linger_ms: u64,
    /// Offer and accept IKE fragmentation (RFC 7383).
    pub fragmentation: bool,
    /// Our encrypted messages longer than this (the UDP payload, marker
    /// included) go out as SKF fragments of at most this size, when the
    /// peer supports fragmentation. The default fits a 1280-byte IPv6 path
    /// (1280 - 40 - 8).
    pub fragment_size: usize,
    /// The NAT-T port (RFC 3948): IKE moves there when a NAT is detected,
    /// with the non-ESP marker in front of each message.
    pub nat_t_port: u16,
    // ---- lifetimes and keepalives (issue 11: timers) ----
    /// NAT keepalives (RFC 3948 4): while we are behind a NAT, a 1-byte
    /// 0xFF datagram to the peer's NAT-T port when the engine sent
    /// nothing on the IKE SA for this long. 0 = off.
    pub keepalive_ms: u64,

    // ---- certificate validation time ----
    /// The UNIX time, in milliseconds, at the engine's `now` = 0: the
    /// engine reads no clock, and certificate validity is checked at
    /// UNIX time `unix_time_at_zero_ms + now`. A caller whose `now` counts
    /// from its start sets it to the wall clock then (and may update it
    /// with [`super::Engine::config_mut`] after a wall-clock step). None:
    /// no certificate is accepted (`CertError::NoTime`).
    pub unix_time_at_zero_ms: Option<u64>,
}

impl EngineConfig {
    /// The UNIX time in seconds at `now`, when known.
    pub fn unix_time(&self, now: u64) -> Option<u64> {
        self.unix_time_at_zero_ms
            .map(|z| z.saturating_add(now) / 1000)
    }
}

impl Default for EngineConfig {
    /// strongSwan's retransmission defaults rounded: 4 s, doubling, 5
    /// retransmissions.
    fn default() -> Self {
        EngineConfig {
            retransmit_base_ms: 4_000,
            retransmit_max_ms: 64_000,
            max_retransmits: 5,
            half_open_timeout_ms: 30_000,
            max_half_open: 1_000,
            cookie_threshold: 100,
            cookie_secret_lifetime_ms: 300_000,
            linger_ms: 10_000,
            fragmentation: true,
            fragment_size: 1232,
            nat_t_port: 4500,
            unix_time_at_zero_ms: None,
            keepalive_ms: 20_000,
        }
    }
}
