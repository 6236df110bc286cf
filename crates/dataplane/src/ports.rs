//! The ports as the workers see them. Its own module so that `route` and
//! `tables` both depend on it and not on each other.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use espgw_control::config::net::Prefix;
use espgw_control::config::{self as cfg, Side};
use espgw_wire::MacAddr;

/// Index of a port in [`crate::Tables::ports`] (the config's port order).
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
    /// The port's NIC computes UDP checksums on transmit (its TX UDP
    /// checksum offload is on: `[dataplane] tx_checksum_offload` and a
    /// NIC that offers it). Set by `espgw run` after configuring the port;
    /// false until then and everywhere else.
    pub tx_udp_checksum: bool,
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

/// A config port with its MAC and MTU, as the workers see it.
pub(crate) fn port_info(p: &cfg::Port, mac: MacAddr, mtu: usize) -> PortInfo {
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
        tx_udp_checksum: false,
    }
}
