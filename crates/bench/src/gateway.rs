//! The synthetic gateway a case runs through: a config as an operator
//! would write it (one protected port, one unprotected port, one tunnel per
//! worker, static neighbors so no ARP is needed), compiled into the data
//! plane's own [`Tables`] by the same code `espgw run` uses.
//!
//! Each worker gets its own tunnel (its own SAs, SPIs and far network), as
//! a multi-tunnel gateway with RSS would: workers then share no SA state,
//! so the scaling run measures the cores, not a lock.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use espgw_control::live::SaManager;
use espgw_control::state::{ReservationPolicy, SeqKeeper, StateDir};
use espgw_control::tables::Tables;
use espgw_control::{Config, HostFacts};
use espgw_dataplane::Network;
use espgw_esp::{SaConfig, Suite};
use espgw_wire::MacAddr;

use crate::packets::FrameAddrs;

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
/// with the given anti-replay window.
/// MTU 9000: a 1500-byte inner packet is encapsulated, not answered with
/// "fragmentation needed" (the case measures ESP, not PMTU handling).
pub fn config_text(suite: Suite, workers: usize, replay_window: u32) -> String {
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
address = "{GW_PROT_IP}/24"
[[port]]
name = "unprot"
side = "unprotected"
device = "net_null1"
address = "{GW_UNPROT_IP}/24"
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
    for w in 0..workers {
        let far = far_host(w).octets();
        t.push_str(&format!(
            r#"[[tunnel]]
name = "w{w}"
local = "{GW_UNPROT_IP}"
remote = "{PEER_IP}"
local_ts = ["10.1.0.0/24"]
remote_ts = ["{}.{}.{}.0/24"]
esp = "{}"
replay_window = {}
out = {}
in = {}
"#,
            far[0],
            far[1],
            far[2],
            suite.name(),
            replay_window,
            sa_keys(suite, out_spi(w)),
            sa_keys(suite, in_spi(w)),
        ));
    }
    t
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
    /// With `--persist-seq`: the SA state and its keeper thread, as in
    /// `espgw run` (stopped and removed on drop).
    persistence: Option<Persistence>,
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
    pub fn new(suite: Suite, workers: usize) -> Result<Gateway, String> {
        Self::build(suite, workers, false)
    }

    /// Like [`Gateway::build`] with `tunnels` tunnels and anti-replay
    /// window `replay_window` (0: off).
    pub fn build_with(
        suite: Suite,
        tunnels: usize,
        replay_window: u32,
        persist_seq: bool,
    ) -> Result<Gateway, String> {
        let host = HostFacts {
            cpus: tunnels.max(1),
            check_permissions: false,
        };
        let text = config_text(suite, tunnels, replay_window);
        let (config, _warnings) = espgw_control::parse_str(Path::new("bench.toml"), text, &host)
            .map_err(|d| format!("bench gateway config rejected: {d:?}"))?;
        Self::from_config(config, persist_seq)
    }

    /// Like [`Gateway::new`]; with `persist_seq` the SAs are admitted
    /// through a fresh state directory and a running sequence keeper, as
    /// `espgw run` does, so the measurement includes their cost.
    pub fn build(suite: Suite, workers: usize, persist_seq: bool) -> Result<Gateway, String> {
        Self::build_with(suite, workers, REPLAY_WINDOW, persist_seq)
    }

    fn from_config(config: Config, persist_seq: bool) -> Result<Gateway, String> {
        if persist_seq {
            return Self::persisted(config);
        }
        let net = Network::from_config(&config, &[GW_PROT_MAC, GW_UNPROT_MAC])
            .map_err(|e| format!("bench gateway tables: {e}"))?;
        let tables =
            Tables::from_config(&config, 0).map_err(|e| format!("bench gateway tables: {e}"))?;
        Ok(Gateway {
            config,
            net: Arc::new(net),
            tables: Arc::new(tables),
            persistence: None,
        })
    }

    fn persisted(config: Config) -> Result<Gateway, String> {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "espgw-bench-state-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let state = StateDir::open(&dir).map_err(|e| e.to_string())?;
        let state = Arc::new(SeqKeeper::new(state, ReservationPolicy::default()));
        let net = Network::from_config(&config, &[GW_PROT_MAC, GW_UNPROT_MAC])
            .map_err(|e| format!("bench gateway tables: {e}"))?;
        let mtu = usize::from(config.dataplane.mtu);
        let manager = SaManager::with_state(
            &config,
            0,
            Box::new(move |view| Arc::new(Tables::from_view(view, mtu))),
            Some(Arc::clone(&state)),
        )
        .map_err(|e| format!("bench gateway SAs: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let keeper = state
            .spawn(Arc::clone(&stop))
            .map_err(|e| format!("sequence keeper: {e}"))?;
        Ok(Gateway {
            net: Arc::new(net),
            tables: Arc::clone(manager.current()),
            config,
            persistence: Some(Persistence {
                dir,
                stop,
                keeper: Some(keeper),
                state,
                _manager: std::sync::Mutex::new(manager),
            }),
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

/// The tunnel's outer addresses, as the sink expects them.
pub fn outer_ips() -> (IpAddr, IpAddr) {
    (GW_UNPROT_IP.into(), PEER_IP.into())
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
    fn far_hosts_are_distinct_per_worker() {
        let hosts: std::collections::HashSet<_> = (0..600).map(far_host).collect();
        assert_eq!(hosts.len(), 600);
    }
}
