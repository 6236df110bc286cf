//! `[[connection]]` and `[[connection.child]]`: IKEv2 peers, named as in
//! strongSwan's swanctl.conf. The validated model; the reader is
//! `sections/connection.rs`, the driver that uses it `crate::ike`.

use std::net::IpAddr;

use espgw_esp::SecretBytes;

use super::model::{MssClamp, PortId};
use super::net::Prefix;

/// strongSwan's IKE SA `rekey_time` default: 4 h.
pub const DEFAULT_IKE_REKEY_TIME: u64 = 4 * 3600;
/// strongSwan's CHILD_SA `rekey_time` default: 1 h.
pub const DEFAULT_CHILD_REKEY_TIME: u64 = 3600;
/// strongSwan's `replay_window` default (charon.replay_window).
pub const DEFAULT_CHILD_REPLAY_WINDOW: u32 = 32;
/// IKE proposals when `proposals` is absent: every combination the engine
/// implements, AEAD first (strongSwan's `default` keyword, cut to what
/// espgw-ike does).
pub const DEFAULT_IKE_PROPOSALS: &[&str] = &[
    "aes128gcm16-aes256gcm16-chacha20poly1305-prfsha256-prfsha384-prfsha512-x25519-ecp256-ecp384-modp2048",
    "aes128-aes256-sha256-sha384-sha512-x25519-ecp256-ecp384-modp2048",
];
/// ESP proposals when `esp_proposals` is absent: what the data plane
/// implements, without PFS (strongSwan's ESP default has no group either).
pub const DEFAULT_ESP_PROPOSALS: &[&str] = &[
    "aes128gcm16-aes256gcm16-chacha20poly1305",
    "aes128-aes256-sha256",
];

/// How the peer is authenticated.
#[derive(Clone)]
pub enum IkeAuth {
    /// A pre-shared key (`psk` or `psk_file`), zeroized on drop.
    Psk(SecretBytes),
    /// X.509 certificates and RFC 7427 signatures (`auth = "pubkey"`).
    PubKey(Box<PubKeyAuth>),
}

/// `cert`, `key` and `cacerts` as loaded and checked by `espgw check`:
/// the key signs what the certificate verifies, and the certificate chains
/// (through the intermediates after it in `cert`) to one of `cacerts` at
/// the time the config was read.
#[derive(Clone)]
pub struct PubKeyAuth {
    /// Our certificate (DER), then the intermediates sent with it.
    pub cert: Vec<Vec<u8>>,
    /// Its private key (wiped on drop; `Debug` prints the kind only).
    pub key: espgw_ike::crypto::PrivateKey,
    /// The CAs trusted for the peer's certificate (DER).
    pub cacerts: Vec<Vec<u8>>,
}

impl std::fmt::Debug for IkeAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IkeAuth::Psk(k) => write!(f, "Psk({} bytes)", k.len()),
            IkeAuth::PubKey(p) => write!(
                f,
                "PubKey({} certificate(s), {:?}, {} CA(s))",
                p.cert.len(),
                p.key,
                p.cacerts.len()
            ),
        }
    }
}

/// `start_action` (of a child; a connection's is its children's default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAction {
    /// Wait for the peer to initiate.
    None,
    /// Initiate when the gateway starts, and again after a failure.
    Start,
    /// Install the tunnel's policy at start-up without SAs (a trap); the
    /// first packet that needs it makes a worker raise an acquire, and
    /// the IKE driver initiates (docs/ike.md "start_action trap").
    Trap,
}

impl StartAction {
    pub fn name(self) -> &'static str {
        match self {
            StartAction::None => "none",
            StartAction::Start => "start",
            StartAction::Trap => "trap",
        }
    }
}

/// An IKEv2 identity as written (`local_id`, `remote_id`), kinds as
/// strongSwan reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IkeId {
    /// An IPv4 or IPv6 address.
    Ip(IpAddr),
    /// `@host.example` or `host.example`.
    Fqdn(String),
    /// `user@example.org`.
    Email(String),
    /// A distinguished name (`C=CH, O=strongSwan, CN=moon`): `der` is the
    /// Name as a certificate's subject holds it, `text` as written (or as
    /// strongSwan prints a certificate's subject).
    Dn { der: Vec<u8>, text: String },
}

impl IkeId {
    /// The IKE identity (ID payload) this is.
    pub fn identification(&self) -> espgw_ike::message::Identification {
        use espgw_ike::message::{IdType, Identification};
        match self {
            IkeId::Ip(a) => Identification::ip(*a),
            IkeId::Fqdn(s) => Identification::fqdn(s),
            IkeId::Email(s) => Identification::email(s),
            IkeId::Dn { der, .. } => Identification {
                id_type: IdType::DER_ASN1_DN,
                data: der.clone(),
            },
        }
    }
}

impl std::fmt::Display for IkeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IkeId::Ip(a) => write!(f, "{a}"),
            IkeId::Fqdn(s) | IkeId::Email(s) | IkeId::Dn { text: s, .. } => f.write_str(s),
        }
    }
}

/// `[[connection]]`.
#[derive(Debug, Clone)]
pub struct Connection {
    pub name: String,
    /// Our address (one of the unprotected port's).
    pub local: IpAddr,
    /// The peer's address; `None` for `"%any"` (respond to anyone).
    pub remote: Option<IpAddr>,
    /// The unprotected port `local` is on.
    pub port: PortId,
    /// Our identity; default: `local` with a PSK, the certificate's
    /// subject DN with `auth = "pubkey"` (strongSwan's defaults).
    pub local_id: IkeId,
    /// The identity the peer must show; `None` (`"%any"`, the default):
    /// any.
    pub remote_id: Option<IkeId>,
    pub auth: IkeAuth,
    /// IKE proposals, strongSwan syntax, each checked by espgw-ike.
    pub proposals: Vec<String>,
    /// Dead peer detection interval in seconds; 0: off.
    pub dpd_delay: u64,
    /// IKE SA rekey interval in seconds; 0: never.
    pub rekey_time: u64,
    /// Reauthentication interval in seconds (a new IKE SA and CHILD_SA,
    /// make-before-break, then the old IKE SA deleted); 0: off.
    pub reauth_time: u64,
    /// IKE fragmentation (RFC 7383).
    pub fragmentation: bool,
    /// `encap = "udp"`: ESP in UDP (and IKE on the NAT-T port) even
    /// without a NAT, as strongSwan's `encap = yes`.
    pub force_encap: bool,
    pub children: Vec<Child>,
}

/// `[[connection.child]]`.
#[derive(Debug, Clone)]
pub struct Child {
    pub name: String,
    pub local_ts: Vec<Prefix>,
    pub remote_ts: Vec<Prefix>,
    /// ESP proposals, strongSwan syntax, each checked by espgw-ike.
    pub esp_proposals: Vec<String>,
    /// Rekey after this many seconds; 0: never by time.
    pub rekey_time: u64,
    /// Hard lifetime in seconds (SAs removed); 0: none.
    pub life_time: u64,
    /// Rekey after this many bytes / packets (either direction); 0: off.
    pub rekey_bytes: u64,
    pub rekey_packets: u64,
    pub replay_window: u32,
    pub mss_clamp: Option<MssClamp>,
    pub start_action: StartAction,
    /// RFC 9611 per-CPU CHILD_SAs (`per_cpu_sas`): how many CHILD_SAs
    /// with these selectors to negotiate (as initiator) or accept (as
    /// responder) when the peer takes part; 1 (the default): one, and the
    /// SA_RESOURCE_INFO notify is neither sent nor echoed. `"auto"` is
    /// resolved to `[dataplane] workers` when the config is read.
    pub per_cpu_sas: u32,
    /// `per_cpu_sas = "auto"` was written (for `espgw check`'s summary).
    pub per_cpu_auto: bool,
}

impl Connection {
    /// The name the SA manager knows a child's tunnel by:
    /// `connection/child`. The config refuses a `[[tunnel]]` of that name.
    pub fn tunnel_name(&self, child: &Child) -> String {
        format!("{}/{}", self.name, child.name)
    }

    /// The IKE proposals as one strongSwan string (comma-separated).
    pub fn proposals_string(&self) -> String {
        self.proposals.join(",")
    }
}

impl Child {
    pub fn esp_proposals_string(&self) -> String {
        self.esp_proposals.join(",")
    }
}
