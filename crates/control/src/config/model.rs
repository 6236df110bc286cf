//! The validated config: every value resolved and typed. Nothing here can
//! be malformed; `load` only returns a `Config` when every check passed.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use espgw_esp::crypto::provider::SimdWidth;
use espgw_esp::{SecretBytes, Suite};

use super::net::{IfAddr, MacAddr, PortRange, Prefix};

/// A whole gateway config.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it was read from.
    pub source: PathBuf,
    pub gateway: Gateway,
    pub dataplane: Dataplane,
    pub ports: Vec<Port>,
    pub neighbors: Vec<Neighbor>,
    pub routes: Vec<Route>,
    pub tunnels: Vec<Tunnel>,
    pub policies: Vec<Policy>,
    /// `[[connection]]`: IKEv2 peers (config/connection.rs).
    pub connections: Vec<super::connection::Connection>,
    /// What happens to traffic that matches no tunnel and no policy.
    pub default_action: PolicyAction,
    /// The security policy database in lookup order: first match wins.
    pub spd: Vec<SpdEntry>,
}

impl Config {
    /// The port an id refers to.
    pub fn port(&self, id: PortId) -> &Port {
        &self.ports[id.0]
    }

    /// Whether ESP in UDP over IPv6 may leave by port `id`, the one form
    /// whose UDP checksum covers the packet: a manual tunnel on it from an
    /// IPv6 address with `encap = "udp"`, or an IKE connection on it from
    /// an IPv6 address (NAT traversal, or a peer such as strongSwan's
    /// kernel-libipsec, may put its CHILD_SAs in UDP). `espgw run` asks
    /// for TX UDP checksum offload only on such ports: on some NICs any TX
    /// offload moves the whole port to a slower TX path
    /// (`tx_checksum_offload`, docs/dataplane.md).
    pub fn may_send_esp_in_udp_v6(&self, id: PortId) -> bool {
        let tunnels = self
            .tunnels
            .iter()
            .any(|t| t.port == id && t.local.is_ipv6() && matches!(t.encap, EncapMode::Udp { .. }));
        tunnels
            || (self.connections)
                .iter()
                .any(|c| c.port == id && c.local.is_ipv6())
    }
}

/// `[gateway]`.
#[derive(Debug, Clone)]
pub struct Gateway {
    pub name: String,
    /// Unix socket for `espgw ctl`; `None` disables it.
    pub control_socket: Option<PathBuf>,
    /// Where Prometheus metrics are served; `None` disables them.
    pub metrics: Option<SocketAddr>,
    /// Persisted sequence numbers and key records of manually keyed SAs
    /// (`state_dir`; default `/var/lib/espgw/<name>`).
    pub state_dir: PathBuf,
    /// The group (gid) whose members may also use the control socket
    /// (besides root and the gateway's uid); `None`: nobody else.
    pub control_group: Option<u32>,
    /// IKE: the first retransmission of an unanswered request after this
    /// many milliseconds, each next one after twice as long
    /// (`ike_retransmit_ms`, strongSwan's `retransmit_timeout`).
    pub ike_retransmit_ms: u64,
    /// IKE: retransmissions before a peer is given up (DPD failure)
    /// (`ike_retransmit_tries`, strongSwan's `retransmit_tries`).
    pub ike_retransmit_tries: u32,
}

/// Where `[gateway].state_dir` points when the config does not say.
pub fn default_state_dir(gateway_name: &str) -> PathBuf {
    PathBuf::from("/var/lib/espgw").join(gateway_name)
}

/// `[dataplane]`.
#[derive(Debug, Clone)]
pub struct Dataplane {
    /// Number of data-plane workers, resolved (`"all"` already counted).
    pub workers: usize,
    /// The cores workers are pinned to, if given.
    pub lcores: Option<Vec<u32>>,
    pub mode: Mode,
    pub burst: u16,
    /// Packet buffers in the one mempool: the config's `mbufs`, or sized to
    /// what the ports and workers need when it has none
    /// ([`crate::config::mbufs_needed`]).
    pub mbufs: u32,
    /// Whether the config set `mbufs` (else it was sized).
    pub mbufs_set: bool,
    /// Largest outer (unprotected side) IP packet, in bytes.
    pub mtu: u16,
    pub poll: Poll,
    /// Longest sleep of an idle adaptive-polling worker, in microseconds
    /// (it starts at 10 and doubles up to this): the latency an idle
    /// gateway adds per hop against the CPU it burns.
    pub idle_sleep_us: u32,
    /// Extra EAL arguments, passed through untouched.
    pub eal: Vec<String>,
    /// `spread_decrypt`: whether the worker that receives an SA's ESP
    /// spreads its decryption over every worker (docs/multicore.md).
    pub spread_decrypt: SpreadDecrypt,
    /// `spread_late`: what the fan-out does with a part that comes back
    /// after its reorder stage stopped waiting for it.
    pub spread_late: SpreadLate,
    /// `spread_wait_us`: how long the fan-out's receiving worker waits for
    /// a part before it gives up on it (the reorder stages' bound), in
    /// microseconds.
    pub spread_wait_us: u32,
    /// `spread_max_round_trip_ns`: with `spread_decrypt = "auto"`, `espgw
    /// run` measures at start-up how long a cache line takes from the
    /// first worker's core to each other worker's and back, and leaves the
    /// fan-out off when the median is over this (0: no probe).
    pub spread_max_round_trip_ns: u32,
    /// `spread_recheck_ms`: with `spread_decrypt = "auto"`, each receiving
    /// worker that is behind checks this often (its loop time, ms) whether
    /// the fan-out makes it deliver more than alone, and keeps it off
    /// until the next check when it does not (0: never checked).
    pub spread_recheck_ms: u32,
    /// `per_cpu_handoff`: with the fan-out on, the groups of an RFC 9611
    /// per-CPU tunnel's inbound SAs go whole to each SA's worker (the
    /// handoff, no reorder stage) instead of being split like any SA's.
    pub per_cpu_handoff: bool,
    /// `max_simd_bitwidth`: the widest vector registers the ciphers (and
    /// DPDK, through `--force-max-simd-bitwidth`) may use, 256 or 512
    /// (the default: whatever the CPU has). 256 keeps a CPU with AVX-512
    /// on the code an AVX2-only CPU runs (docs/crypto.md, "No 512-bit code").
    pub max_simd_bitwidth: SimdWidth,
    /// `steer_esp`: whether `espgw run` asks each port's NIC to send every
    /// inbound SA's ESP to one RX queue by its SPI (docs/multicore.md,
    /// "Steering SAs to workers by SPI").
    pub steer_esp: SteerEsp,
    /// `tx_checksum_offload = "auto"` (true, the default): `espgw run`
    /// turns on each port's TX UDP checksum offload where its NIC offers
    /// it, and the UDP checksum of ESP in UDP over IPv6 (the one outer
    /// checksum that covers the whole packet) is left to the NIC on such a
    /// port; `"off"` (false): always computed in software.
    pub tx_checksum_offload: bool,
}

/// `[dataplane] steer_esp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SteerEsp {
    /// Each inbound SA gets a flow rule `ESP spi -> queue` on its tunnel's
    /// port while it lives (per-CPU SAs: their lane's worker; others: the
    /// least loaded queue), where the NIC takes such rules; a port whose
    /// driver refuses them keeps RSS (one log line). Only with 2 or more
    /// workers in run-to-completion mode (the default).
    Auto,
    /// No flow rules: RSS alone decides (one tunnel's SAs share a queue).
    Off,
}

impl SteerEsp {
    pub const ALL: [SteerEsp; 2] = [SteerEsp::Auto, SteerEsp::Off];

    /// The config value (`"auto"`, `"off"`).
    pub fn name(self) -> &'static str {
        match self {
            SteerEsp::Auto => "auto",
            SteerEsp::Off => "off",
        }
    }
}

impl Dataplane {
    /// RX/TX queue pairs per port: one per worker, or the I/O lcore's one
    /// in pipeline mode.
    pub fn queues_per_port(&self) -> usize {
        match self.mode {
            Mode::RunToCompletion => self.workers,
            Mode::Pipeline => 1,
        }
    }

    /// Worker lcores: one per worker, plus the I/O lcore in pipeline mode.
    pub fn lcores_needed(&self) -> usize {
        self.workers + usize::from(self.mode == Mode::Pipeline)
    }

    /// The per-lcore cache of the mempool: an eighth of it, at most 256
    /// (DPDK's limit is 512; more only strands buffers in idle lcores).
    pub fn mempool_cache(&self) -> u32 {
        (self.mbufs / 8).min(256)
    }

    /// Whether `espgw run` installs ESP steering rules: `steer_esp =
    /// "auto"` with 2 or more workers in run-to-completion mode (pipeline
    /// mode receives on one queue; one worker has nothing to choose).
    pub fn steers_esp(&self) -> bool {
        self.steer_esp == SteerEsp::Auto && self.workers >= 2 && self.mode == Mode::RunToCompletion
    }

    /// Holds the ciphers built from now on to `max_simd_bitwidth`
    /// (process-wide): call it before the first SA of this config is built.
    pub fn apply_simd_width(&self) {
        espgw_esp::crypto::provider::set_max_simd_width(self.max_simd_bitwidth);
    }
}

/// `[dataplane] max_simd_bitwidth` when the config does not say.
pub const DEFAULT_MAX_SIMD_BITWIDTH: SimdWidth = SimdWidth::Bits512;

/// `[dataplane] spread_decrypt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpreadDecrypt {
    /// Each worker decrypts what it receives (the default).
    Off,
    /// With 2 or more workers in run-to-completion mode, an SA group of a
    /// burst is split over all workers and reordered, while the worker
    /// that receives it is behind (its receive fills whole bursts); a
    /// worker that keeps up decrypts what it receives itself.
    Auto,
    /// As `Auto`, but every group worth splitting is split, even when the
    /// receiving worker keeps up alone (tests, measurements).
    Always,
}

/// When a receiving worker hands parts of the SA groups it receives to
/// the other workers: what `spread_decrypt` means once the fan-out runs
/// ([`Dataplane::spread_when`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpreadWhen {
    /// Only while its own receive fills whole bursts (its RX queues have a
    /// backlog: it is behind), `"auto"`. A worker that keeps up decrypts
    /// its groups itself: no ring hops, no reorder stage, nothing a
    /// descheduled helper can hold past the bound.
    Behind,
    /// Every group of at least two parts, `"always"`.
    Always,
}

/// `[dataplane] spread_late`: what the decrypt fan-out's receiving worker
/// does with a part another worker returns after the SA's reorder stage
/// gave up waiting for it (its bound, or a stage out of job boxes): its
/// packets are authenticated and finished, only late.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpreadLate {
    /// Dropped as `reorder_late`: what leaves is always in arrival order,
    /// at the price of losing what a descheduled worker held (the
    /// default).
    Drop,
    /// Sent on at once, behind packets that arrived after them (counted
    /// in `reorder_late_sent`): nothing lost, a reordering instead (which
    /// a TCP sender usually rides out without the window cut a loss
    /// causes; not measured here).
    Send,
}

impl SpreadLate {
    pub const ALL: [SpreadLate; 2] = [SpreadLate::Drop, SpreadLate::Send];

    /// The config value (`"drop"`, `"send"`).
    pub fn name(self) -> &'static str {
        match self {
            SpreadLate::Drop => "drop",
            SpreadLate::Send => "send",
        }
    }
}

impl Dataplane {
    /// Whether the decrypt fan-out runs with this configuration.
    pub fn spreads_decrypt(&self) -> bool {
        self.spread_when().is_some()
    }

    /// When the decrypt fan-out spreads, if it runs at all: it needs 2 or
    /// more workers in run-to-completion mode (`"auto"` and `"always"` do
    /// nothing otherwise).
    pub fn spread_when(&self) -> Option<SpreadWhen> {
        if self.workers < 2 || self.mode != Mode::RunToCompletion {
            return None;
        }
        match self.spread_decrypt {
            SpreadDecrypt::Off => None,
            SpreadDecrypt::Auto => Some(SpreadWhen::Behind),
            SpreadDecrypt::Always => Some(SpreadWhen::Always),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    RunToCompletion,
    Pipeline,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    Busy,
    Adaptive,
}

/// Index of a port in [`Config::ports`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortId(pub usize);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Faces the hosts whose traffic is protected (plaintext).
    Protected,
    /// Faces the network the ESP tunnels cross.
    Unprotected,
}

/// `[[port]]`.
#[derive(Debug, Clone)]
pub struct Port {
    pub name: String,
    pub side: Side,
    /// DPDK device string (PCI address or vdev arguments).
    pub device: String,
    /// The gateway's own addresses on this port (it answers ARP/ND for them).
    pub addresses: Vec<IfAddr>,
    pub mac: Option<MacAddr>,
}

impl Port {
    /// True when `ip` is on one of this port's subnets.
    pub fn on_link(&self, ip: IpAddr) -> bool {
        self.addresses.iter().any(|a| a.subnet().contains(ip))
    }
}

/// `[[neighbor]]`: a static ARP/ND entry.
#[derive(Debug, Clone)]
pub struct Neighbor {
    pub address: IpAddr,
    pub mac: MacAddr,
    pub port: PortId,
}

/// `[[route]]`.
#[derive(Debug, Clone)]
pub struct Route {
    pub dest: Prefix,
    pub via: IpAddr,
    pub port: PortId,
}

/// A tunnel's `encap` as the config states it. The ESP engine's
/// `espgw_esp::Encap` is the runtime form (with the UDP ports); the one
/// conversion is in `config/sa.rs` (`Tunnel::outbound_sa` / `inbound_sa`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncapMode {
    /// Plain ESP (IP protocol 50).
    None,
    /// ESP in UDP (RFC 3948) from our port 4500 to the peer's `peer_port`:
    /// 4500 (a config's `encap = "udp"`), or, for a CHILD_SA negotiated
    /// with a peer behind a NAT that maps its port 4500 to another, the
    /// port its IKE messages came from (the IKE driver sets it).
    Udp { peer_port: u16 },
}

impl EncapMode {
    /// ESP in UDP on port 4500 at both ends (`encap = "udp"`).
    pub const fn udp_4500() -> Self {
        EncapMode::Udp {
            peer_port: espgw_esp::Encap::NAT_T_PORT,
        }
    }

    /// Whether ESP goes in UDP.
    pub fn is_udp(&self) -> bool {
        matches!(self, EncapMode::Udp { .. })
    }
}

/// SA lifetime limits. `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    pub seconds: Option<u64>,
    pub bytes: Option<u64>,
    pub packets: Option<u64>,
}

/// Hard limits expire the SA; soft limits warn (and would start a rekey).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lifetime {
    pub hard: Limits,
    pub soft: Limits,
}

/// One direction of a tunnel: SPI and keys.
#[derive(Debug, Clone)]
pub struct SaKeys {
    pub spi: u32,
    /// Cipher key; for AEAD suites followed by the 4-byte salt.
    pub key: SecretBytes,
    /// Integrity key (CBC+HMAC suites only).
    pub auth_key: Option<SecretBytes>,
}

/// `[[tunnel]]`: a pair of SAs and the traffic they protect.
#[derive(Debug, Clone)]
pub struct Tunnel {
    pub name: String,
    /// Outer source address (one of the gateway's unprotected addresses).
    pub local: IpAddr,
    /// Outer destination address (the peer gateway).
    pub remote: IpAddr,
    /// The unprotected port `local` is on.
    pub port: PortId,
    pub local_ts: Vec<Prefix>,
    pub remote_ts: Vec<Prefix>,
    pub suite: Suite,
    pub esn: bool,
    /// Anti-replay window in packets; 0 turns replay checking off.
    pub replay_window: u32,
    pub encap: EncapMode,
    pub lifetime: Lifetime,
    pub outbound: SaKeys,
    pub inbound: SaKeys,
    pub priority: u32,
    /// TCP MSS clamping of SYNs through the tunnel; `None`: off.
    pub mss_clamp: Option<MssClamp>,
}

/// `mss_clamp` of a tunnel: the largest MSS a TCP SYN / SYN-ACK through it
/// may announce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MssClamp {
    /// The tunnel's inner MTU (outer MTU less the ESP overhead of its
    /// suite, encapsulation and outer family) less 40 (IPv4) / 60 (IPv6)
    /// bytes of TCP/IP headers; worked out by the data plane, which knows
    /// the overhead.
    Auto,
    /// A fixed value in [`MIN_MSS_CLAMP`]..=[`MAX_MSS_CLAMP`], for both families.
    Fixed(u16),
}

/// Smallest fixed `mss_clamp`: the IPv4 default MSS (RFC 9293 3.7.1).
pub const MIN_MSS_CLAMP: u16 = 536;
/// Largest fixed `mss_clamp` (a 9000-byte jumbo MTU's worth).
pub const MAX_MSS_CLAMP: u16 = 9000;

/// What a `[[policy]]` (or `default_action`) does: the config's subset of
/// the SPD's [`Action`](crate::tables::Action), which adds `Protect(tunnel)`
/// for tunnels; the one conversion is `From<PolicyAction> for Action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyAction {
    /// Forward in the clear.
    Bypass,
    /// Drop (and count).
    Discard,
}

/// `[[policy]]`: a bypass or discard rule. `None` fields match anything.
#[derive(Debug, Clone)]
pub struct Policy {
    pub action: PolicyAction,
    /// Protected-side address (outbound source; inbound destination).
    pub src: Option<Prefix>,
    /// Far-side address (outbound destination; inbound source).
    pub dst: Option<Prefix>,
    /// IP protocol number.
    pub proto: Option<u8>,
    pub sport: Option<PortRange>,
    pub dport: Option<PortRange>,
    pub priority: u32,
}

/// A reference into the SPD: a tunnel or a policy, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpdEntry {
    Tunnel(usize),
    Policy(usize),
}
