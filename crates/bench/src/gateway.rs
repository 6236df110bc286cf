//! The synthetic gateway a case runs through: a config as an operator
//! would write it (one protected port, one unprotected port, one tunnel per
//! worker, static neighbors so no ARP is needed), compiled into the data
//! plane's own [`Tables`] by the same code `espgw run` uses.
//!
//! Each worker gets its own tunnel (its own SAs, SPIs and far network), as
//! a multi-tunnel gateway with RSS would: workers then share no SA state,
//! so the scaling run measures the cores, not a lock.
//!
//! The tunnels' ESP travels in the form `--outer` asks for ([`Outer`]):
//! over IPv4 between 192.0.2.1 and .2 (plain or in UDP 4500), or over IPv6
//! between 2001:db8::1 and ::2, which the unprotected port and a static
//! neighbor then carry too. The inner packets are IPv4 in every form.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use espgw_control::live::SaManager;
use espgw_control::state::{ReservationPolicy, SeqKeeper, StateDir};
use espgw_control::tables::Tables;
use espgw_control::{Config, HostFacts};
use espgw_dataplane::Network;
use espgw_esp::{SaConfig, Suite, UdpChecksum};
use espgw_wire::MacAddr;

use crate::options::Inner;
use crate::options::Outer;
use crate::packets::{v6_of, FrameAddrs};

pub const PROTECTED: usize = 0;
pub const UNPROTECTED: usize = 1;

pub const GW_PROT_MAC: MacAddr = [0x02, 0xe5, 0x9b, 0, 0, 1];
pub const GW_UNPROT_MAC: MacAddr = [0x02, 0xe5, 0x9b, 0, 0, 2];
pub const HOST_MAC: MacAddr = [0x02, 0, 0, 0, 0x0a, 0x0a];
pub const PEER_MAC: MacAddr = [0x02, 0, 0, 0, 0x0b, 0x0b];

pub const GW_PROT_IP: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
pub const HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 10);
pub const GW_UNPROT_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
pub const PEER_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
/// The unprotected port's IPv6 address and the peer's, for the IPv6 outer
/// forms (documentation prefix, RFC 3849).
pub const GW_UNPROT_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
pub const PEER_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

/// Our end of the tunnels in `outer`'s family.
pub fn outer_local(outer: Outer) -> IpAddr {
    if outer.ipv6() {
        GW_UNPROT_IP6.into()
    } else {
        GW_UNPROT_IP.into()
    }
}

/// The peer's end of the tunnels in `outer`'s family.
pub fn outer_remote(outer: Outer) -> IpAddr {
    if outer.ipv6() {
        PEER_IP6.into()
    } else {
        PEER_IP.into()
    }
}

/// Outbound SPI of worker `w`'s tunnel.
pub fn out_spi(w: usize) -> u32 {
    0x1000_0000 + w as u32
}

/// Inbound SPI of worker `w`'s tunnel.
pub fn in_spi(w: usize) -> u32 {
    0x2000_0000 + w as u32
}

/// The far host worker `w` talks to (inside its tunnel's remote network).
pub fn far_host(w: usize) -> Ipv4Addr {
    // 10.2.0.0/16 for the first 256 workers, then 10.3.0.0/16, ...: one /24 each.
    Ipv4Addr::new(10, (2 + w / 256).min(255) as u8, (w % 256) as u8, 10)
}

/// Deterministic key material of `len` bytes, different per SPI: every
/// byte of the SPI shows in every fourth key byte, so no two SPIs share a
/// key (the config refuses a key used twice).
fn key_hex(len: usize, spi: u32, salt: u8) -> String {
    let spi = spi.to_be_bytes();
    (0..len)
        .map(|i| {
            let b = (i as u8).wrapping_mul(37) ^ spi[i % 4] ^ salt;
            format!("{b:02x}")
        })
        .collect()
}

fn sa_keys(suite: Suite, spi: u32) -> String {
    let key = key_hex(suite.key_len(), spi, 1);
    if suite.auth_key_len() > 0 {
        let auth = key_hex(suite.auth_key_len(), spi, 2);
        format!("{{ spi = {spi}, key = \"{key}\", auth_key = \"{auth}\" }}")
    } else {
        format!("{{ spi = {spi}, key = \"{key}\" }}")
    }
}

/// The anti-replay window of the bench tunnels.
pub const REPLAY_WINDOW: u32 = 1024;

/// The config text of the bench gateway for `suite` and `workers` tunnels
/// with the given anti-replay window, the tunnels' ESP in the `outer` form.
/// MTU 9000: a 1500-byte inner packet is encapsulated, not answered with
/// "fragmentation needed" (the case measures ESP, not PMTU handling).
/// The IPv6 forms add an IPv6 address to the unprotected port and a static
/// neighbor for the peer's (no ND), the IPv4 ones leave the config as it
/// always was. With `inner` IPv6 the protected port gets the IPv6 address
/// [`v6_of`] maps its IPv4 one to, the host a static neighbor there, and
/// the tunnels' selectors are the mapped prefixes (/120 for /24) instead.
pub fn config_text(
    suite: Suite,
    workers: usize,
    replay_window: u32,
    outer: Outer,
    inner: Inner,
) -> String {
    let prot_address = if inner.ipv6() {
        format!("[\"{GW_PROT_IP}/24\", \"{}/120\"]", v6_of(GW_PROT_IP))
    } else {
        format!("\"{GW_PROT_IP}/24\"")
    };
    let unprot_address = if outer.ipv6() {
        format!("[\"{GW_UNPROT_IP}/24\", \"{GW_UNPROT_IP6}/64\"]")
    } else {
        format!("\"{GW_UNPROT_IP}/24\"")
    };
    let mut t = format!(
        r#"default_action = "discard"
[gateway]
name = "bench"
[dataplane]
workers = 1
mtu = 9000
[[port]]
name = "prot"
side = "protected"
device = "net_null0"
address = {prot_address}
[[port]]
name = "unprot"
side = "unprotected"
device = "net_null1"
address = {unprot_address}
[[neighbor]]
address = "{HOST_IP}"
mac = "{host}"
port = "prot"
[[neighbor]]
address = "{PEER_IP}"
mac = "{peer}"
port = "unprot"
"#,
        host = mac_text(HOST_MAC),
        peer = mac_text(PEER_MAC),
    );
    if outer.ipv6() {
        t.push_str(&format!(
            "[[neighbor]]\naddress = \"{PEER_IP6}\"\nmac = \"{}\"\nport = \"unprot\"\n",
            mac_text(PEER_MAC)
        ));
    }
    if inner.ipv6() {
        t.push_str(&format!(
            "[[neighbor]]\naddress = \"{}\"\nmac = \"{}\"\nport = \"prot\"\n",
            v6_of(HOST_IP),
            mac_text(HOST_MAC)
        ));
    }
    let (local, remote) = (outer_local(outer), outer_remote(outer));
    let encap = if outer.udp() { "udp" } else { "none" };
    // The /24 of an IPv4 address, or the /120 its IPv6 mapping is in.
    let net = |a: Ipv4Addr| {
        let net = Ipv4Addr::from(u32::from(a) & !0xff);
        if inner.ipv6() {
            format!("{}/120", v6_of(net))
        } else {
            format!("{net}/24")
        }
    };
    for w in 0..workers {
        t.push_str(&format!(
            r#"[[tunnel]]
name = "w{w}"
local = "{local}"
remote = "{remote}"
encap = "{encap}"
local_ts = ["{}"]
remote_ts = ["{}"]
esp = "{}"
replay_window = {}
out = {}
in = {}
"#,
            net(HOST_IP),
            net(far_host(w)),
            suite.name(),
            replay_window,
            sa_keys(suite, out_spi(w)),
            sa_keys(suite, in_spi(w)),
        ));
    }
    t
}

/// The bench gateway's config of `tunnels` tunnels on a host of `cpus`.
fn parse_config(
    suite: Suite,
    tunnels: usize,
    cpus: usize,
    replay_window: u32,
    outer: Outer,
    inner: Inner,
) -> Result<Config, String> {
    let host = HostFacts::assumed(cpus.max(1));
    let text = config_text(suite, tunnels, replay_window, outer, inner);
    espgw_control::parse_str(Path::new("bench.toml"), text, &host)
        .map(|(config, _warnings)| config)
        .map_err(|d| format!("bench gateway config rejected: {d:?}"))
}

/// Ports, routes and static neighbors of `config`.
fn network(config: &Config) -> Result<Network, String> {
    Network::from_config(config, &[GW_PROT_MAC, GW_UNPROT_MAC])
        .map_err(|e| format!("bench gateway tables: {e}"))
}

/// The SAs of `config` admitted by a live manager (as `espgw run` admits
/// them), persisted through `keeper` when given.
fn managed(
    config: &Config,
    keeper: Option<Arc<SeqKeeper>>,
) -> Result<SaManager<Arc<Tables>>, String> {
    let mtu = usize::from(config.dataplane.mtu);
    SaManager::with_state(
        config,
        0,
        Box::new(move |view| Arc::new(Tables::from_view(view, mtu))),
        keeper,
    )
    .map_err(|e| format!("bench gateway SAs: {e}"))
}

fn mac_text(m: MacAddr) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The bench gateway, compiled.
pub struct Gateway {
    pub config: Config,
    /// Ports, routes, static neighbors.
    pub net: Arc<Network>,
    /// The control plane's snapshot the workers read.
    pub tables: Arc<Tables>,
    /// The tunnels' outer form.
    pub outer: Outer,
    /// The inner packets' family the tunnels' selectors are for.
    pub inner: Inner,
    /// With `--persist-seq`: the SA state and its keeper thread, as in
    /// `espgw run` (stopped and removed on drop).
    persistence: Option<Persistence>,
    /// Built by [`Gateway::per_cpu`]: one tunnel, SA pair `w` worker `w`'s.
    per_cpu: bool,
    /// Who computes the outer UDP checksum of ESP in UDP over IPv6: the
    /// engine ([`UdpChecksum::Compute`], the default) or the unprotected
    /// port's NIC ([`Gateway::offload_tx_udp_checksum`]).
    pub udp_checksum: UdpChecksum,
}

/// Sequence persistence of a bench gateway: a fresh state directory, the
/// manager that admitted the SAs through it, and the keeper thread that
/// extends their reservations while the workers run.
struct Persistence {
    dir: PathBuf,
    stop: Arc<AtomicBool>,
    keeper: Option<JoinHandle<()>>,
    state: Arc<SeqKeeper>,
    /// Owns the SAs' admission (the workers share the gateway by
    /// reference, and the manager's snapshot builder is not `Sync`).
    _manager: std::sync::Mutex<SaManager<Arc<Tables>>>,
}

impl Drop for Persistence {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(k) = self.keeper.take() {
            let _ = k.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Gateway {
    /// The unprotected port computes UDP checksums on transmit, as one
    /// with TX checksum offload under `espgw run`: the worker layer leaves
    /// ESP in UDP over IPv6's checksum to it, and so does the engine
    /// layer. Call before any worker shares the gateway.
    pub fn offload_tx_udp_checksum(&mut self) -> Result<(), String> {
        let net = Arc::get_mut(&mut self.net)
            .ok_or("bench gateway: the network is shared already; offload set too late")?;
        net.ports[UNPROTECTED].tx_udp_checksum = true;
        self.udp_checksum = UdpChecksum::Device;
        Ok(())
    }

    pub fn new(suite: Suite, workers: usize) -> Result<Gateway, String> {
        Self::build(suite, workers, false)
    }

    /// Like [`Gateway::new`] with the tunnels' ESP in the `outer` form.
    pub fn with_outer(suite: Suite, workers: usize, outer: Outer) -> Result<Gateway, String> {
        Self::build_with(suite, workers, REPLAY_WINDOW, false, outer, Inner::Ipv4)
    }

    /// Like [`Gateway::with_outer`] with `inner` packets through the tunnels.
    pub fn with_forms(
        suite: Suite,
        workers: usize,
        outer: Outer,
        inner: Inner,
    ) -> Result<Gateway, String> {
        Self::build_with(suite, workers, REPLAY_WINDOW, false, outer, inner)
    }

    /// Like [`Gateway::build`] with `tunnels` tunnels, anti-replay
    /// window `replay_window` (0: off) and the tunnels' ESP in `outer`.
    pub fn build_with(
        suite: Suite,
        tunnels: usize,
        replay_window: u32,
        persist_seq: bool,
        outer: Outer,
        inner: Inner,
    ) -> Result<Gateway, String> {
        let config = parse_config(suite, tunnels, tunnels, replay_window, outer, inner)?;
        Self::from_config(config, persist_seq, outer, inner)
    }

    /// Like [`Gateway::new`]; with `persist_seq` the SAs are admitted
    /// through a fresh state directory and a running sequence keeper, as
    /// `espgw run` does, so the measurement includes their cost.
    pub fn build(suite: Suite, workers: usize, persist_seq: bool) -> Result<Gateway, String> {
        Self::build_with(
            suite,
            workers,
            REPLAY_WINDOW,
            persist_seq,
            Outer::Esp4,
            Inner::Ipv4,
        )
    }

    fn from_config(
        config: Config,
        persist_seq: bool,
        outer: Outer,
        inner: Inner,
    ) -> Result<Gateway, String> {
        if persist_seq {
            return Self::persisted(config, outer, inner);
        }
        let net = network(&config)?;
        let tables =
            Tables::from_config(&config, 0).map_err(|e| format!("bench gateway tables: {e}"))?;
        Ok(Gateway {
            config,
            net: Arc::new(net),
            tables: Arc::new(tables),
            outer,
            inner,
            persistence: None,
            per_cpu: false,
            udp_checksum: UdpChecksum::Compute,
        })
    }

    /// One tunnel on `workers` RFC 9611 per-CPU SA pairs, as
    /// `per_cpu_sas` negotiates them: tunnel "w0" with its configured pair
    /// (SPIs `out_spi(0)`, `in_spi(0)`) and pairs 1.. added live through
    /// [`SaManager::add_extra_pair`] (SPIs `out_spi(w)`, `in_spi(w)`),
    /// so worker `w` encrypts with outbound SA `w`
    /// (`Tables::outbound_sa_for`) and the peer sends worker `w`'s
    /// traffic on inbound SA `w`. [`Gateway::outbound`] and the others
    /// answer per pair (`w`) as for a gateway of `workers` tunnels, whose
    /// SA configs these are; the tables hold one tunnel.
    pub fn per_cpu(
        suite: Suite,
        workers: usize,
        replay_window: u32,
        outer: Outer,
        inner: Inner,
    ) -> Result<Gateway, String> {
        let workers = workers.max(1);
        // Every pair's keys as the config of `workers` tunnels has them
        // (keys follow the SPIs); the gateway's own config has the first
        // tunnel alone, the others become its per-CPU pairs.
        let config = parse_config(suite, workers, workers, replay_window, outer, inner)?;
        let one = parse_config(suite, 1, workers, replay_window, outer, inner)?;
        let net = network(&one)?;
        let mut manager = managed(&one, None)?;
        let name = one.tunnels[0].name.clone();
        for t in &config.tunnels[1..] {
            manager
                .add_extra_pair(&name, t.outbound.clone(), t.inbound.clone(), 0)
                .map_err(|e| format!("bench gateway per-CPU SA pair: {e}"))?;
        }
        // The manager has nothing more to do: the snapshot holds the SAs.
        Ok(Gateway {
            net: Arc::new(net),
            tables: Arc::clone(manager.current()),
            config,
            outer,
            inner,
            persistence: None,
            per_cpu: true,
            udp_checksum: UdpChecksum::Compute,
        })
    }

    /// Built by [`Gateway::per_cpu`]: worker `w`'s packets go through SA
    /// pair `w` of the one tunnel.
    pub fn is_per_cpu(&self) -> bool {
        self.per_cpu
    }

    fn persisted(config: Config, outer: Outer, inner: Inner) -> Result<Gateway, String> {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "espgw-bench-state-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let state = StateDir::open(&dir).map_err(|e| e.to_string())?;
        let state = Arc::new(SeqKeeper::new(state, ReservationPolicy::default()));
        let net = network(&config)?;
        let manager = managed(&config, Some(Arc::clone(&state)))?;
        let stop = Arc::new(AtomicBool::new(false));
        let keeper = state
            .spawn(Arc::clone(&stop))
            .map_err(|e| format!("sequence keeper: {e}"))?;
        Ok(Gateway {
            net: Arc::new(net),
            tables: Arc::clone(manager.current()),
            config,
            outer,
            inner,
            persistence: Some(Persistence {
                dir,
                stop,
                keeper: Some(keeper),
                state,
                _manager: std::sync::Mutex::new(manager),
            }),
            per_cpu: false,
            udp_checksum: UdpChecksum::Compute,
        })
    }

    /// Reservations written so far and write failures (0, 0 without
    /// `--persist-seq`).
    pub fn persistence_writes(&self) -> Option<(u64, u64)> {
        self.persistence
            .as_ref()
            .map(|p| (p.state.writes(), p.state.failures()))
    }

    /// The gateway's outbound SA config of worker `w`'s tunnel.
    pub fn outbound(&self, w: usize) -> SaConfig {
        self.config.tunnels[w].outbound_sa()
    }

    /// The gateway's inbound SA config of worker `w`'s tunnel.
    pub fn inbound(&self, w: usize) -> SaConfig {
        self.config.tunnels[w].inbound_sa()
    }

    /// The peer gateway's outbound SA towards us for worker `w`: our
    /// inbound SA with the ends swapped. The generator pre-encrypts the
    /// decrypt cases with it.
    pub fn peer_outbound(&self, w: usize) -> SaConfig {
        let mut c = self.inbound(w);
        std::mem::swap(&mut c.local, &mut c.remote);
        c
    }
}

impl Gateway {
    /// The peer gateway's inbound SA for our outbound one of worker `w`:
    /// the sink decrypts samples of what the stage encrypted with it.
    pub fn peer_inbound(&self, w: usize) -> SaConfig {
        let mut c = self.outbound(w);
        std::mem::swap(&mut c.local, &mut c.remote);
        c
    }
}

/// Addresses of the plaintext frames worker `w` sends into the protected port.
pub fn protected_frame(w: usize) -> FrameAddrs {
    FrameAddrs {
        src_mac: HOST_MAC,
        dst_mac: GW_PROT_MAC,
        src_ip: HOST_IP,
        dst_ip: far_host(w),
    }
}

/// Addresses of the inner packets the peer sends to our host for worker `w`.
pub fn far_frame(w: usize) -> FrameAddrs {
    FrameAddrs {
        src_mac: PEER_MAC,
        dst_mac: GW_UNPROT_MAC,
        src_ip: far_host(w),
        dst_ip: HOST_IP,
    }
}

impl Gateway {
    /// Our end of the tunnels: where the peer's ESP is addressed, the
    /// inbound SAs' lookup key.
    pub fn local(&self) -> IpAddr {
        outer_local(self.outer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use espgw_control::tables::TunnelId;

    #[test]
    fn config_is_accepted_for_every_suite_and_several_workers() {
        for suite in Suite::ALL {
            let gw = Gateway::new(suite, 3).unwrap_or_else(|e| panic!("{}: {e}", suite.name()));
            assert_eq!(gw.tables.tunnels().count(), 3);
            let slot = gw.tables.sad.inbound(in_spi(2), GW_UNPROT_IP.into());
            let (_, tunnel, _) = gw.tables.inbound_sa(slot.expect("worker 2's SA")).unwrap();
            assert_eq!(tunnel, TunnelId(2));
            assert_eq!(gw.peer_outbound(1).spi, in_spi(1));
            assert_eq!(gw.peer_outbound(1).local, IpAddr::from(PEER_IP));
        }
    }

    #[test]
    fn per_cpu_gateway_has_one_tunnel_and_a_pair_per_worker() {
        for outer in Outer::ALL {
            let gw =
                Gateway::per_cpu(Suite::Aes128Gcm16, 3, REPLAY_WINDOW, outer, Inner::Ipv4).unwrap();
            assert_eq!(gw.tables.tunnels().count(), 1, "{}", outer.name());
            for w in 0..3 {
                // Worker w encrypts with its own pair's outbound SA...
                let out = gw.tables.outbound_sa_for(TunnelId(0), w).expect("an SA");
                assert_eq!(out.spi(), out_spi(w), "{} worker {w}", outer.name());
                assert_eq!(gw.outbound(w).spi, out_spi(w));
                // ...and its inbound SA decrypts into the one tunnel.
                let slot = gw.tables.sad.inbound(in_spi(w), gw.local());
                let (_, tunnel, _) = gw.tables.inbound_sa(slot.expect("pair's SA")).unwrap();
                assert_eq!(tunnel, TunnelId(0), "{} worker {w}", outer.name());
                assert_eq!(gw.peer_outbound(w).spi, in_spi(w));
            }
        }
    }

    #[test]
    fn every_outer_form_compiles_into_tunnels_of_that_form() {
        use espgw_esp::Encap;
        for outer in Outer::ALL {
            let gw = Gateway::with_outer(Suite::Aes128Gcm16, 2, outer)
                .unwrap_or_else(|e| panic!("{}: {e}", outer.name()));
            for w in 0..2 {
                let (o, i) = (gw.outbound(w), gw.inbound(w));
                assert_eq!(
                    (o.local, o.remote, i.local),
                    (outer_local(outer), outer_remote(outer), gw.local()),
                    "{}",
                    outer.name()
                );
                assert_eq!(o.local.is_ipv6(), outer.ipv6());
                assert_eq!(
                    o.encap,
                    if outer.udp() {
                        Encap::udp_4500()
                    } else {
                        Encap::None
                    },
                    "{}",
                    outer.name()
                );
                let slot = gw.tables.sad.inbound(in_spi(w), gw.local());
                assert!(
                    slot.is_some(),
                    "{}: inbound SA by its address",
                    outer.name()
                );
            }
        }
        // The IPv4 forms leave the config as it was: no IPv6 anywhere.
        let esp4 = config_text(
            Suite::Aes128Gcm16,
            1,
            REPLAY_WINDOW,
            Outer::Esp4,
            Inner::Ipv4,
        );
        assert!(!esp4.contains("2001:db8"), "{esp4}");
        assert!(!esp4.contains("fd00"), "{esp4}");
        assert!(esp4.contains("encap = \"none\""), "{esp4}");
    }

    /// `--inner ipv6`: the protected port and the host get the mapped
    /// IPv6 addresses, the tunnels' selectors the mapped prefixes, so the
    /// SPD protects IPv6 from our host to each worker's far host (and not
    /// the IPv4 traffic, which no selector covers then).
    #[test]
    fn ipv6_inner_gives_the_tunnels_ipv6_selectors() {
        use espgw_control::tables::Action;
        let text = config_text(
            Suite::Aes128Gcm16,
            2,
            REPLAY_WINDOW,
            Outer::Esp4,
            Inner::Ipv6,
        );
        assert!(
            text.contains("local_ts = [\"fd00:ee::a01:0/120\"]"),
            "{text}"
        );
        assert!(
            text.contains("remote_ts = [\"fd00:ee::a02:100/120\"]"),
            "{text}"
        );
        for per_cpu in [false, true] {
            let gw = if per_cpu {
                Gateway::per_cpu(
                    Suite::Aes128Gcm16,
                    2,
                    REPLAY_WINDOW,
                    Outer::Esp4,
                    Inner::Ipv6,
                )
            } else {
                Gateway::with_forms(Suite::Aes128Gcm16, 2, Outer::Esp4, Inner::Ipv6)
            }
            .unwrap();
            for w in 0..if per_cpu { 1 } else { 2 } {
                let (host, far) = (v6_of(HOST_IP).into(), v6_of(far_host(w)).into());
                let flow = espgw_control::tables::FlowKey {
                    src: host,
                    dst: far,
                    proto: 17,
                    sport: 10000,
                    dport: 5001,
                };
                let d = gw.tables.spd.decide(&flow);
                assert_eq!(d.action, Action::Protect(TunnelId(w as u32)), "worker {w}");
                let v4 = espgw_control::tables::FlowKey {
                    src: HOST_IP.into(),
                    dst: far_host(w).into(),
                    ..flow
                };
                assert_ne!(
                    gw.tables.spd.decide(&v4).action,
                    Action::Protect(TunnelId(w as u32))
                );
            }
            assert!(gw.net.is_local(v6_of(GW_PROT_IP).into()));
        }
    }

    #[test]
    fn far_hosts_are_distinct_per_worker() {
        let hosts: std::collections::HashSet<_> = (0..600).map(far_host).collect();
        assert_eq!(hosts.len(), 600);
    }
}
