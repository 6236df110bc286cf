//! What the workers read besides the control plane's [`Tables`]: the
//! ports, routes and static neighbors, which come from the config and the
//! devices and never change during a run.
//!
//! A worker holds this [`Network`] (shared by all workers through an `Arc`)
//! and the current [`Tables`] snapshot, which the control plane's
//! `SaManager` builds ([`Tables::from_view`]) and publishes on every SA or
//! tunnel change (runtime/control.rs); each worker swaps it in at a
//! quiescent point between bursts (runtime/poller.rs).
//!
//! [`Tables`]: espgw_control::tables::Tables
//! [`Tables::from_view`]: espgw_control::tables::Tables::from_view

use std::net::IpAddr;

use espgw_control::config::Config;
use espgw_control::live::TablesError;
use espgw_wire::MacAddr;

use crate::route::RouteTable;

pub use crate::ports::{PortIdx, PortInfo};

/// The parts of what the workers read that come from the config and the
/// devices and never change during a run: ports, routes, static neighbors.
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

    /// True when `ip` is one of the gateway's own addresses (any port).
    #[inline]
    pub fn is_local(&self, ip: IpAddr) -> bool {
        self.ports.iter().any(|p| p.owns(ip))
    }

    /// [`Self::is_local`] of an IPv4 address as an integer (the IPv4 fast
    /// path).
    #[inline]
    pub fn is_local_v4(&self, ip: u32) -> bool {
        self.ports
            .iter()
            .any(|p| p.v4.iter().any(|(a, _)| u32::from(*a) == ip))
    }

    /// [`Self::is_local`] of an IPv6 address as an integer (the IPv6 fast
    /// path).
    #[inline]
    pub fn is_local_v6(&self, ip: u128) -> bool {
        self.ports
            .iter()
            .any(|p| p.v6.iter().any(|(a, _)| u128::from(*a) == ip))
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    /// The IPv4 fast path's test agrees with `is_local` for the gateway's
    /// own addresses on both ports, their neighbors and subnets' edges.
    #[test]
    fn is_local_v4_agrees_with_is_local() {
        let net = crate::tests::gateway_a_net();
        let mut owned = 0;
        for port in &net.ports {
            for &(a, _) in &port.v4 {
                let a = u32::from(a);
                for ip in [
                    a.wrapping_sub(1),
                    a,
                    a + 1,
                    a ^ 0xff,
                    a ^ 0xff00_0000,
                    0,
                    u32::MAX,
                ] {
                    let local = net.is_local(IpAddr::V4(Ipv4Addr::from(ip)));
                    assert_eq!(net.is_local_v4(ip), local, "{}", Ipv4Addr::from(ip));
                    owned += usize::from(local);
                }
            }
        }
        // Each port's own address, at least: the test saw both answers.
        assert!(owned >= net.ports.len());
    }

    /// The same for IPv6: the ports' own addresses, their neighbors, the
    /// unspecified address and a prefix's edge.
    #[test]
    fn is_local_v6_agrees_with_is_local() {
        use std::net::Ipv6Addr;
        let net = crate::tests::v6_gateway_net();
        let mut owned = 0;
        for port in &net.ports {
            for &(a, _) in &port.v6 {
                let a = u128::from(a);
                for ip in [a - 1, a, a + 1, a ^ (1 << 64), 0, u128::MAX] {
                    let local = net.is_local(IpAddr::V6(Ipv6Addr::from(ip)));
                    assert_eq!(net.is_local_v6(ip), local, "{}", Ipv6Addr::from(ip));
                    owned += usize::from(local);
                }
            }
        }
        assert!(owned >= 1, "the test saw an own address");
    }
}
