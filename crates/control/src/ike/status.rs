//! What `espgw ctl ike list` and the metrics show. No keys.

use serde::{Deserialize, Serialize};

/// One IKE SA.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IkeSaInfo {
    pub connection: String,
    /// Our SPI of the IKE SA, 16 hex digits (a u64 does not survive JSON
    /// numbers in every client).
    pub ike_sa: String,
    /// The initiator's and the responder's SPI, 16 hex digits each (one
    /// of them is `ike_sa`; SPIr is all zeros while our IKE_SA_INIT is
    /// unanswered), as `swanctl --list-sas` shows both.
    #[serde(default)]
    pub spi_i: String,
    #[serde(default)]
    pub spi_r: String,
    /// "connecting", "established", or "trapped" (a `start_action =
    /// "trap"` connection without IKE SA: its policy waits for a packet;
    /// the SPIs are empty then).
    pub state: String,
    /// We initiated it (or the rekey that made it).
    pub initiator: bool,
    pub local: Option<String>,
    pub remote: Option<String>,
    /// The negotiated encryption/integrity/PRF/group.
    pub proposal: Option<String>,
    pub established_seconds: Option<u64>,
    pub rekey_in_seconds: Option<u64>,
    pub children: Vec<IkeChildInfo>,
}

/// One CHILD_SA of an IKE SA.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IkeChildInfo {
    pub name: String,
    /// The SA manager's tunnel (`connection/child`): `ctl sa list` shows
    /// its SAs and counters.
    pub tunnel: String,
    pub in_spi: u32,
    pub out_spi: u32,
    pub suite: String,
    /// The key exchanges of the exchange that made it, as strongSwan
    /// prints them (`CURVE_25519/KE1_ML_KEM_768`); empty for the one
    /// IKE_AUTH makes (its keys come from the IKE SA's) or without PFS.
    #[serde(default)]
    pub key_exchange: String,
    pub udp_encap: bool,
    pub age_seconds: u64,
    /// A rekey is in flight (or its outbound switch is held back).
    pub rekeying: bool,
    /// The negotiated selectors (ours, the peer's), as prefixes.
    #[serde(default)]
    pub local_ts: Vec<String>,
    #[serde(default)]
    pub remote_ts: Vec<String>,
    /// An RFC 9611 per-CPU CHILD_SA besides the tunnel's first one
    /// (`per_cpu_sas`): same selectors, its own SA pair.
    #[serde(default)]
    pub per_cpu: bool,
}

/// Counters of the IKE driver (Prometheus: `espgw_ike_*`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IkeMetrics {
    /// IKE SAs being set up / up, now.
    pub sas_connecting: u64,
    pub sas_established: u64,
    /// IKE_SA_INIT exchanges we started.
    pub initiated: u64,
    /// IKE SAs that came up (either role).
    pub handshakes: u64,
    /// IKE SAs that failed before coming up (timeout, refused proposals,
    /// error notifies).
    pub handshake_failures: u64,
    /// Authentication failures, either way.
    pub auth_failures: u64,
    /// Of those, the peer refused ours.
    pub auth_rejected_by_peer: u64,
    /// Established IKE SAs lost to unanswered requests (dead peer).
    pub dpd_failures: u64,
    pub ike_rekeys: u64,
    pub child_rekeys: u64,
    pub children_installed: u64,
    pub child_failures: u64,
    /// Datagrams handed to the engine / sent by it.
    pub received: u64,
    pub sent: u64,
    /// Datagrams the engine did not act on (malformed, unknown SPI,
    /// unexpected, failed integrity, over the half-open bound, fragments).
    pub dropped: u64,
    /// Acquires the IKE thread took from the workers' acquire ring.
    pub acquires_received: u64,
    /// Acquires that initiated the connection.
    pub acquires_handled: u64,
    /// Acquires that did not initiate (an IKE SA of the connection being
    /// set up or up, the 1 s interval, the tunnel gone, shutdown).
    pub acquires_ignored: u64,
    /// Acquires the workers queued / that found the acquire ring full (the
    /// service fills these from the rings; 0 without them).
    #[serde(default)]
    pub acquires_raised: u64,
    #[serde(default)]
    pub acquires_dropped: u64,
    /// Datagrams the driver sent that never reached a worker: the
    /// transmit ring was full / the datagram was larger than a slot (the
    /// service fills these from the rings).
    #[serde(default)]
    pub transmit_ring_full: u64,
    #[serde(default)]
    pub transmit_too_big: u64,
    /// IKE_SA_INIT requests we answered with NO_PROPOSAL_CHOSEN (a peer
    /// configured with other proposals: the responder side of a
    /// handshake failure, which raises no event of its own).
    #[serde(default)]
    pub init_no_proposal: u64,
    /// Both sides set a connection up at once: IKE SAs found redundant,
    /// deleted by their initiator (docs/ike.md "Both sides at once").
    #[serde(default)]
    pub duplicate_ike_sas: u64,
    /// IKE_SA_INIT requests answered with a COOKIE (DoS protection on:
    /// too many half-open SAs), and of those requests the ones whose cookie
    /// we did not accept.
    #[serde(default)]
    pub cookies_sent: u64,
    #[serde(default)]
    pub cookies_invalid: u64,
    /// IKE_SA_INIT requests dropped at the half-open limit (also counted
    /// in `dropped`).
    #[serde(default)]
    pub half_open_refused: u64,
}

impl IkeMetrics {
    /// Prometheus text exposition lines.
    pub fn prometheus(&self, gateway: &str, out: &mut String) {
        use std::fmt::Write;
        let g = gateway.replace('\\', "\\\\").replace('"', "\\\"");
        let _ = writeln!(
            out,
            "# HELP espgw_ike_sas IKE SAs by state.\n# TYPE espgw_ike_sas gauge"
        );
        let _ = writeln!(
            out,
            "espgw_ike_sas{{gateway=\"{g}\",state=\"connecting\"}} {}",
            self.sas_connecting
        );
        let _ = writeln!(
            out,
            "espgw_ike_sas{{gateway=\"{g}\",state=\"established\"}} {}",
            self.sas_established
        );
        for (name, help, v) in [
            (
                "initiated",
                "IKE_SA_INIT exchanges started by us.",
                self.initiated,
            ),
            (
                "handshakes",
                "IKE SAs established (either role).",
                self.handshakes,
            ),
            (
                "handshake_failures",
                "IKE SAs that failed before coming up.",
                self.handshake_failures,
            ),
            (
                "auth_failures",
                "IKE authentication failures, either way.",
                self.auth_failures,
            ),
            (
                "dpd_failures",
                "Established IKE SAs lost to an unresponsive peer.",
                self.dpd_failures,
            ),
            ("ike_rekeys", "IKE SA rekeys.", self.ike_rekeys),
            (
                "child_rekeys",
                "CHILD_SA rekeys installed.",
                self.child_rekeys,
            ),
            (
                "children_installed",
                "CHILD_SAs installed (first and rekeyed).",
                self.children_installed,
            ),
            ("child_failures", "CHILD_SAs refused.", self.child_failures),
            (
                "datagrams_received",
                "IKE datagrams handed to the engine.",
                self.received,
            ),
            ("datagrams_sent", "IKE datagrams sent.", self.sent),
            (
                "datagrams_dropped",
                "IKE datagrams the engine did not act on.",
                self.dropped,
            ),
            (
                "init_no_proposal",
                "IKE_SA_INIT requests answered with NO_PROPOSAL_CHOSEN.",
                self.init_no_proposal,
            ),
            (
                "duplicate_ike_sas",
                "IKE SAs found redundant: both sides set the connection up at once.",
                self.duplicate_ike_sas,
            ),
            (
                "cookies_sent",
                "IKE_SA_INIT requests answered with a COOKIE (DoS protection).",
                self.cookies_sent,
            ),
            (
                "cookies_invalid",
                "IKE_SA_INIT requests whose COOKIE was not accepted.",
                self.cookies_invalid,
            ),
            (
                "half_open_refused",
                "IKE_SA_INIT requests dropped at the half-open limit.",
                self.half_open_refused,
            ),
            (
                "transmit_ring_full",
                "IKE datagrams dropped: the transmit ring to the workers was full.",
                self.transmit_ring_full,
            ),
            (
                "transmit_too_big",
                "IKE datagrams dropped: larger than a transmit ring slot.",
                self.transmit_too_big,
            ),
            (
                "acquires_raised",
                "Acquires the workers raised for trapped tunnels (rate-limited per tunnel and worker).",
                self.acquires_raised,
            ),
            (
                "acquires_dropped",
                "Acquires lost to a full acquire ring.",
                self.acquires_dropped,
            ),
            (
                "acquires_handled",
                "Acquires that initiated a connection.",
                self.acquires_handled,
            ),
            (
                "acquires_ignored",
                "Acquires suppressed by the driver (an IKE SA of the connection already being set up or up, the 1 s interval).",
                self.acquires_ignored,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP espgw_ike_{name}_total {help}\n# TYPE espgw_ike_{name}_total counter"
            );
            let _ = writeln!(out, "espgw_ike_{name}_total{{gateway=\"{g}\"}} {v}");
        }
    }
}
