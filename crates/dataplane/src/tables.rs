//! What the workers read: ports, routes, static neighbors, the SPD and the
//! tunnels with their SAs, built once from a validated [`Config`].
//!
//! This is the data plane's own adapter over the config model. A built
//! `Tables` is immutable and shared by all workers through an `Arc`; a
//! change at run time (SA added, deleted, rekeyed) is a new snapshot, built
//! by [`Tables::from_view`] from the control plane's live view and published
//! by its `SaManager` (runtime/control.rs); each worker swaps it in at a
//! quiescent point between bursts (runtime/poller.rs).

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use espgw_control::config::net::Prefix;
use espgw_control::config::{self as cfg, Config};
use espgw_control::live::LiveView;
use espgw_esp::{InboundSa, OutboundSa};
use espgw_wire::MacAddr;

use crate::route::RouteTable;
use crate::spd::Spd;

pub use crate::ports::{PortIdx, PortInfo};

/// One tunnel: its outbound SA and what it protects. Its inbound SAs are
/// [`InboundSlot`]s (a rekeyed tunnel has the current one and draining ones).
pub struct Tunnel {
    /// Stable for the tunnel's life (config tunnels: their config index);
    /// per-tunnel counters are kept by it.
    pub id: u32,
    pub name: String,
    pub local: IpAddr,
    pub remote: IpAddr,
    /// The unprotected port its ESP leaves by (routing may pick another).
    pub port: PortIdx,
    pub local_ts: Vec<Prefix>,
    pub remote_ts: Vec<Prefix>,
    pub udp_encap: bool,
    /// `None` once it hard-expired and no rekey replaced it: the tunnel's
    /// traffic is dropped (`sa_expired`), never sent in the clear.
    pub out: Option<Arc<OutboundSa>>,
    /// The MSS that TCP SYNs through the tunnel may announce (config
    /// `mss_clamp`); `None`: no clamping.
    pub mss_clamp: Option<MssLimits>,
}

/// Largest MSS per inner family, worked out from a tunnel's `mss_clamp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MssLimits {
    pub v4: u16,
    pub v6: u16,
}

/// IPv4 + TCP headers without options (what "auto" takes off the inner MTU).
const TCP_IPV4_HEADERS: usize = 20 + 20;
/// IPv6 + TCP headers without options or extension headers.
const TCP_IPV6_HEADERS: usize = 40 + 20;

impl MssLimits {
    /// The limits for `clamp` on a tunnel whose outbound SA is `out` and
    /// whose outer MTU is `mtu`. "auto" needs the SA (its suite,
    /// encapsulation and outer family make the overhead): without one (the
    /// SA hard-expired) there is nothing to clamp to, and its outbound
    /// traffic is dropped anyway.
    pub fn new(clamp: cfg::MssClamp, out: Option<&OutboundSa>, mtu: usize) -> Option<MssLimits> {
        match clamp {
            cfg::MssClamp::Fixed(v) => Some(MssLimits { v4: v, v6: v }),
            cfg::MssClamp::Auto => {
                let inner = inner_mtu(out?, mtu);
                let mss = |headers: usize| {
                    u16::try_from(inner.saturating_sub(headers)).unwrap_or(u16::MAX)
                };
                Some(MssLimits {
                    v4: mss(TCP_IPV4_HEADERS),
                    v6: mss(TCP_IPV6_HEADERS),
                })
            }
        }
    }
}

/// An inbound SA and the tunnel it belongs to.
#[derive(Debug)]
pub struct InboundSlot {
    pub spi: u32,
    /// Index into [`Tables::tunnels`].
    pub tunnel: usize,
    /// Decap needs `&mut` (the replay window): one lock per SA group per
    /// burst when several workers share it (see docs/dataplane.md).
    pub sa: Arc<Mutex<InboundSa>>,
}

impl Tunnel {
    /// True when a decapsulated packet from `src` to `dst` is inside this
    /// tunnel's traffic selectors (RFC 4301 5.2, step 4).
    pub fn inbound_matches(&self, src: IpAddr, dst: IpAddr) -> bool {
        self.remote_ts.iter().any(|p| p.contains(src))
            && self.local_ts.iter().any(|p| p.contains(dst))
    }
}

/// Largest inner packet that fits `mtu` once `out` encapsulated it.
pub fn inner_mtu(out: &OutboundSa, mtu: usize) -> usize {
    // overhead() includes the padding, which depends on the length:
    // start a cipher block (at most 16 bytes) above the padded guess
    // and walk down to the first length that fits.
    let mut inner = (mtu + 16).saturating_sub(out.overhead(0));
    while inner > 0 && inner + out.overhead(inner) > mtu {
        inner -= 1;
    }
    inner
}

impl core::fmt::Debug for Tunnel {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Tunnel")
            .field("name", &self.name)
            .field("local", &self.local)
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

/// One snapshot of everything the workers look up. Immutable: a change
/// (SA added, deleted, rekeyed) is a new snapshot ([`Tables::from_view`]).
#[derive(Debug)]
pub struct Tables {
    pub gateway: String,
    pub ports: Vec<PortInfo>,
    pub routes: RouteTable,
    pub static_neighbors: Vec<(PortIdx, IpAddr, MacAddr)>,
    pub spd: Spd,
    pub tunnels: Vec<Tunnel>,
    pub inbound: Vec<InboundSlot>,
    /// (inbound SPI, slot index), sorted by SPI for binary search.
    spi_index: Vec<(u32, usize)>,
}

/// The parts of the tables that come from the config and the devices
/// and never change during a run: ports, routes, static neighbors.
#[derive(Debug, Clone)]
pub struct Network {
    pub gateway: String,
    pub ports: Vec<PortInfo>,
    pub routes: RouteTable,
    pub static_neighbors: Vec<(PortIdx, IpAddr, MacAddr)>,
}

impl Network {
    /// From `config`; `macs[i]` is port i's MAC as the device reports it
    /// (a configured `mac` wins).
    pub fn from_config(config: &Config, macs: &[MacAddr]) -> Result<Network, TablesError> {
        if macs.len() != config.ports.len() {
            return Err(TablesError(format!(
                "{} MAC addresses for {} ports",
                macs.len(),
                config.ports.len()
            )));
        }
        let mtu = usize::from(config.dataplane.mtu);
        let ports: Vec<PortInfo> = config
            .ports
            .iter()
            .zip(macs)
            .map(|(p, mac)| crate::ports::port_info(p, p.mac.map_or(*mac, |m| m.0), mtu))
            .collect();
        Ok(Network {
            gateway: config.gateway.name.clone(),
            routes: RouteTable::build(&ports, &config.routes),
            static_neighbors: config
                .neighbors
                .iter()
                .map(|n| (n.port.0, n.address, n.mac.0))
                .collect(),
            ports,
        })
    }
}

/// Why the tables could not be built from a config.
#[derive(Debug)]
pub struct TablesError(pub String);

impl core::fmt::Display for TablesError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TablesError {}

impl Tables {
    /// Builds the tables from `config`, creating its SAs (tunnel id =
    /// config index). `macs[i]` is port i's MAC as the device reports it
    /// (a configured `mac` wins). `now` (seconds of the run's clock) starts
    /// the SA lifetimes.
    pub fn from_config(config: &Config, macs: &[MacAddr], now: u64) -> Result<Tables, TablesError> {
        let net = Network::from_config(config, macs)?;
        let mut tunnels = Vec::new();
        let mut inbound = Vec::new();
        for (i, t) in config.tunnels.iter().enumerate() {
            let err = |dir: &str, e: espgw_esp::ConfigError| {
                TablesError(format!("tunnel {:?} {dir}: {e}", t.name))
            };
            let out = OutboundSa::new(&t.outbound_sa(), now).map_err(|e| err("out", e))?;
            let sa = InboundSa::new(&t.inbound_sa(), now).map_err(|e| err("in", e))?;
            tunnels.push(tunnel(i as u32, t, Some(Arc::new(out)), &net));
            inbound.push(InboundSlot {
                spi: t.inbound.spi,
                tunnel: i,
                sa: Arc::new(Mutex::new(sa)),
            });
        }
        Ok(Tables::assemble(&net, build_spd(config), tunnels, inbound))
    }

    /// Builds a snapshot from the control plane's live view (its SAs, its
    /// compiled SPD) and the fixed network parts: the snapshot builder the
    /// runtime hands to `SaManager`.
    pub fn from_view(net: &Network, view: &LiveView) -> Tables {
        let mut tunnels = Vec::new();
        let mut inbound = Vec::new();
        let mut index_of_id = Vec::new();
        for (i, tv) in view.tunnels.iter().enumerate() {
            let id = tv.id.0 as usize;
            if index_of_id.len() <= id {
                index_of_id.resize(id + 1, None);
            }
            index_of_id[id] = Some(i);
            tunnels.push(tunnel(tv.id.0, tv.tunnel, tv.outbound.cloned(), net));
            for iv in &tv.inbound {
                inbound.push(InboundSlot {
                    spi: iv.spi,
                    tunnel: i,
                    sa: Arc::clone(iv.sa),
                });
            }
        }
        let spd = Spd::from_compiled(Arc::clone(view.spd), index_of_id);
        Tables::assemble(net, spd, tunnels, inbound)
    }

    fn assemble(
        net: &Network,
        spd: Spd,
        tunnels: Vec<Tunnel>,
        inbound: Vec<InboundSlot>,
    ) -> Tables {
        let mut spi_index: Vec<(u32, usize)> = inbound
            .iter()
            .enumerate()
            .map(|(i, s)| (s.spi, i))
            .collect();
        spi_index.sort_unstable();
        Tables {
            gateway: net.gateway.clone(),
            ports: net.ports.clone(),
            routes: net.routes.clone(),
            static_neighbors: net.static_neighbors.clone(),
            spd,
            tunnels,
            inbound,
            spi_index,
        }
    }

    /// The inbound SA slot with `spi`.
    #[inline]
    pub fn inbound_by_spi(&self, spi: u32) -> Option<usize> {
        self.spi_index
            .binary_search_by_key(&spi, |(s, _)| *s)
            .ok()
            .map(|i| self.spi_index[i].1)
    }

    /// True when `ip` is one of the gateway's own addresses (any port).
    #[inline]
    pub fn is_local(&self, ip: IpAddr) -> bool {
        self.ports.iter().any(|p| p.owns(ip))
    }

    /// One past the largest tunnel id (size of per-tunnel counter arrays).
    pub fn tunnel_ids(&self) -> usize {
        self.tunnels
            .iter()
            .map(|t| t.id as usize + 1)
            .max()
            .unwrap_or(0)
    }
}

fn tunnel(id: u32, t: &cfg::Tunnel, out: Option<Arc<OutboundSa>>, net: &Network) -> Tunnel {
    let mtu = net.ports.get(t.port.0).map_or(0, |p| p.mtu);
    Tunnel {
        mss_clamp: t
            .mss_clamp
            .and_then(|c| MssLimits::new(c, out.as_deref(), mtu)),
        id,
        name: t.name.clone(),
        local: t.local,
        remote: t.remote,
        port: t.port.0,
        local_ts: t.local_ts.clone(),
        remote_ts: t.remote_ts.clone(),
        udp_encap: t.encap == cfg::Encap::Udp,
        out,
    }
}

fn build_spd(config: &Config) -> Spd {
    // The control plane's compilation of the config's SPD order; tunnel
    // ids are the config's tunnel indices, as in this snapshot.
    let compiled = Arc::new(cfg::spd_from_config(config));
    Spd::from_compiled(compiled, (0..config.tunnels.len()).map(Some).collect())
}
