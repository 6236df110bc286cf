//! What the workers read: ports, routes, static neighbors, the SPD and the
//! tunnels with their SAs, built once from a validated [`Config`].
//!
//! This is the data plane's own adapter over the config model: the control
//! plane's table publisher (RCU snapshots, SA add/del at run time) is not
//! wired in yet, so the tables are immutable for the life of a run, shared
//! by all workers through an `Arc`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};

use espgw_control::config::net::Prefix;
use espgw_control::config::{self as cfg, Config, Side, SpdEntry};
use espgw_esp::{InboundSa, Lifetimes, Limit, OutboundSa, SaConfig, SecretBytes};
use espgw_wire::MacAddr;

use crate::route::RouteTable;
use crate::spd::{Action, Selector, Spd, SpdRule};

/// Index of a port in [`Tables::ports`] (the config's port order).
pub type PortIdx = usize;

/// A port as the workers see it.
#[derive(Debug, Clone)]
pub struct PortInfo {
    pub name: String,
    pub device: String,
    pub side: Side,
    pub mac: MacAddr,
    pub v4: Vec<(Ipv4Addr, u8)>,
    pub v6: Vec<(Ipv6Addr, u8)>,
    /// Largest IP packet the port sends.
    pub mtu: usize,
}

impl PortInfo {
    /// True when `ip` is one of this port's own addresses.
    pub fn owns(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.v4.iter().any(|(x, _)| *x == a),
            IpAddr::V6(a) => self.v6.iter().any(|(x, _)| *x == a),
        }
    }
    /// The port's first IPv4 address (source of ARP and ICMP it originates).
    pub fn first_v4(&self) -> Option<Ipv4Addr> {
        self.v4.first().map(|(a, _)| *a)
    }
    /// The port's first IPv6 address.
    pub fn first_v6(&self) -> Option<Ipv6Addr> {
        self.v6.first().map(|(a, _)| *a)
    }
    /// True when `ip` is on one of this port's IPv4 subnets.
    pub fn on_link_v4(&self, ip: Ipv4Addr) -> bool {
        self.v4
            .iter()
            .any(|(a, len)| Prefix::new((*a).into(), *len).contains(ip.into()))
    }
}

/// One tunnel: both SAs and what they protect.
pub struct Tunnel {
    pub name: String,
    pub local: IpAddr,
    pub remote: IpAddr,
    /// The unprotected port its ESP leaves by (routing may pick another).
    pub port: PortIdx,
    pub local_ts: Vec<Prefix>,
    pub remote_ts: Vec<Prefix>,
    pub udp_encap: bool,
    pub out: OutboundSa,
    /// Decap needs `&mut` (the replay window): one lock per SA group per
    /// burst when several workers share it (see docs/dataplane.md).
    pub inbound: Mutex<InboundSa>,
    pub in_spi: u32,
}

impl Tunnel {
    /// True when a decapsulated packet from `src` to `dst` is inside this
    /// tunnel's traffic selectors (RFC 4301 5.2, step 4).
    pub fn inbound_matches(&self, src: IpAddr, dst: IpAddr) -> bool {
        self.remote_ts.iter().any(|p| p.contains(src))
            && self.local_ts.iter().any(|p| p.contains(dst))
    }

    /// Largest inner packet that fits `mtu` once encapsulated.
    pub fn inner_mtu(&self, mtu: usize) -> usize {
        // overhead() includes the padding, which depends on the length:
        // start a cipher block (at most 16 bytes) above the padded guess
        // and walk down to the first length that fits.
        let mut inner = (mtu + 16).saturating_sub(self.out.overhead(0));
        while inner > 0 && inner + self.out.overhead(inner) > mtu {
            inner -= 1;
        }
        inner
    }
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

/// Everything the workers look up, immutable during a run.
#[derive(Debug)]
pub struct Tables {
    pub gateway: String,
    pub ports: Vec<PortInfo>,
    pub routes: RouteTable,
    pub static_neighbors: Vec<(PortIdx, IpAddr, MacAddr)>,
    pub spd: Spd,
    pub tunnels: Vec<Arc<Tunnel>>,
    /// (inbound SPI, tunnel index), sorted by SPI for binary search.
    spi_index: Vec<(u32, usize)>,
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
    /// Builds the tables from `config`. `macs[i]` is port i's MAC as the
    /// device reports it (a configured `mac` wins). `now` (seconds of the
    /// run's clock) starts the SA lifetimes.
    pub fn from_config(config: &Config, macs: &[MacAddr], now: u64) -> Result<Tables, TablesError> {
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
            .map(|(p, mac)| port_info(p, p.mac.map_or(*mac, |m| m.0), mtu))
            .collect();
        let routes = RouteTable::build(&ports, &config.routes);
        let static_neighbors = config
            .neighbors
            .iter()
            .map(|n| (n.port.0, n.address, n.mac.0))
            .collect();
        let mut tunnels = Vec::new();
        for t in &config.tunnels {
            tunnels.push(Arc::new(tunnel(t, now)?));
        }
        let spd = build_spd(config);
        let mut spi_index: Vec<(u32, usize)> = tunnels
            .iter()
            .enumerate()
            .map(|(i, t)| (t.in_spi, i))
            .collect();
        spi_index.sort_unstable();
        Ok(Tables {
            gateway: config.gateway.name.clone(),
            ports,
            routes,
            static_neighbors,
            spd,
            tunnels,
            spi_index,
        })
    }

    /// The tunnel whose inbound SA has `spi`.
    #[inline]
    pub fn tunnel_by_spi(&self, spi: u32) -> Option<usize> {
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
}

fn port_info(p: &cfg::Port, mac: MacAddr, mtu: usize) -> PortInfo {
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    for a in &p.addresses {
        match a.addr {
            IpAddr::V4(x) => v4.push((x, a.prefix_len)),
            IpAddr::V6(x) => v6.push((x, a.prefix_len)),
        }
    }
    PortInfo {
        name: p.name.clone(),
        device: p.device.clone(),
        side: p.side,
        mac,
        v4,
        v6,
        mtu,
    }
}

fn limit(soft: Option<u64>, hard: Option<u64>) -> Limit {
    Limit { soft, hard }
}

/// The ESP engine's SA config for one direction of a config tunnel.
pub fn sa_config(t: &cfg::Tunnel, keys: &cfg::SaKeys) -> SaConfig {
    let l = &t.lifetime;
    SaConfig {
        suite: t.suite,
        spi: keys.spi,
        key: SecretBytes::new(keys.key.expose().to_vec()),
        auth_key: keys
            .auth_key
            .as_ref()
            .map_or_else(SecretBytes::default, |k| {
                SecretBytes::new(k.expose().to_vec())
            }),
        esn: t.esn,
        replay_window: t.replay_window,
        encap: match t.encap {
            cfg::Encap::None => espgw_esp::Encap::None,
            cfg::Encap::Udp => espgw_esp::Encap::udp_4500(),
        },
        local: t.local,
        remote: t.remote,
        lifetimes: Lifetimes {
            packets: limit(l.soft.packets, l.hard.packets),
            bytes: limit(l.soft.bytes, l.hard.bytes),
            seconds: limit(l.soft.seconds, l.hard.seconds),
        },
    }
}

fn tunnel(t: &cfg::Tunnel, now: u64) -> Result<Tunnel, TablesError> {
    let err = |dir: &str, e: espgw_esp::ConfigError| {
        TablesError(format!("tunnel {:?} {dir}: {e}", t.name))
    };
    let out = OutboundSa::new(&sa_config(t, &t.outbound), now).map_err(|e| err("out", e))?;
    let inbound = InboundSa::new(&sa_config(t, &t.inbound), now).map_err(|e| err("in", e))?;
    Ok(Tunnel {
        name: t.name.clone(),
        local: t.local,
        remote: t.remote,
        port: t.port.0,
        local_ts: t.local_ts.clone(),
        remote_ts: t.remote_ts.clone(),
        udp_encap: t.encap == cfg::Encap::Udp,
        out,
        inbound: Mutex::new(inbound),
        in_spi: t.inbound.spi,
    })
}

fn build_spd(config: &Config) -> Spd {
    let mut rules = Vec::new();
    for entry in &config.spd {
        match *entry {
            SpdEntry::Tunnel(i) => {
                let t = &config.tunnels[i];
                for l in &t.local_ts {
                    for r in t.remote_ts.iter().filter(|r| r.is_ipv4() == l.is_ipv4()) {
                        rules.push(SpdRule {
                            selector: Selector {
                                local: Some(*l),
                                remote: Some(*r),
                                proto: None,
                                local_port: None,
                                remote_port: None,
                            },
                            action: Action::Protect(i),
                        });
                    }
                }
            }
            SpdEntry::Policy(i) => {
                let p = &config.policies[i];
                rules.push(SpdRule {
                    selector: Selector {
                        local: p.src,
                        remote: p.dst,
                        proto: p.proto,
                        local_port: p.sport.map(|r| (r.first, r.last)),
                        remote_port: p.dport.map(|r| (r.first, r.last)),
                    },
                    action: match p.action {
                        cfg::Action::Bypass => Action::Bypass,
                        cfg::Action::Discard => Action::Discard,
                    },
                });
            }
        }
    }
    let default = match config.default_action {
        cfg::Action::Bypass => Action::Bypass,
        cfg::Action::Discard => Action::Discard,
    };
    Spd::new(rules, default)
}
