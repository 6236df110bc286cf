//! Routing: longest-prefix match over the config's routes and the
//! connected subnets of every port.

use std::net::IpAddr;

use espgw_control::config::net::Prefix;
use espgw_control::config::Route as ConfigRoute;

use crate::ports::{PortIdx, PortInfo};

/// Where a packet goes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextHop {
    pub port: PortIdx,
    /// The neighbor to resolve: the gateway of a route, or the destination
    /// itself on a connected subnet.
    pub addr: IpAddr,
}

#[derive(Debug, Clone)]
struct Entry {
    prefix: Prefix,
    /// `None`: connected (the destination is on the link).
    via: Option<IpAddr>,
    port: PortIdx,
}

/// The routes, longest prefix first, so the first match is the best.
#[derive(Debug, Clone, Default)]
pub struct RouteTable {
    entries: Vec<Entry>,
}

impl RouteTable {
    /// Connected subnets of `ports` plus the configured `routes`. On equal
    /// prefixes a connected subnet wins over a route.
    pub fn build(ports: &[PortInfo], routes: &[ConfigRoute]) -> RouteTable {
        let mut entries = Vec::new();
        for (i, p) in ports.iter().enumerate() {
            let v4 = p.v4.iter().map(|(a, l)| Prefix::new((*a).into(), *l));
            let v6 = p.v6.iter().map(|(a, l)| Prefix::new((*a).into(), *l));
            for prefix in v4.chain(v6) {
                entries.push(Entry {
                    prefix,
                    via: None,
                    port: i,
                });
            }
        }
        for r in routes {
            entries.push(Entry {
                prefix: r.dest,
                via: Some(r.via),
                port: r.port.0,
            });
        }
        // Stable: connected entries (pushed first) stay ahead of equal routes.
        entries.sort_by_key(|e| std::cmp::Reverse(e.prefix.prefix_len()));
        RouteTable { entries }
    }

    /// The next hop for `dst`, if any route covers it. A linear scan over a
    /// few entries; many routes would want a trie (documented limit).
    #[inline]
    pub fn lookup(&self, dst: IpAddr) -> Option<NextHop> {
        self.entries
            .iter()
            .find(|e| e.prefix.contains(dst))
            .map(|e| NextHop {
                port: e.port,
                addr: e.via.unwrap_or(dst),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use espgw_control::config::{PortId, Side};

    fn port(addr: &str, len: u8) -> PortInfo {
        PortInfo {
            name: "p".into(),
            device: "d".into(),
            side: Side::Protected,
            mac: [2, 0, 0, 0, 0, 1],
            v4: vec![(addr.parse().unwrap(), len)],
            v6: vec![],
            mtu: 1500,
            tx_udp_checksum: false,
        }
    }

    #[test]
    fn longest_prefix_wins_and_connected_beats_route() {
        let ports = [port("10.1.0.1", 24), port("192.0.2.1", 24)];
        let routes = [
            ConfigRoute {
                dest: Prefix::parse("0.0.0.0/0").unwrap(),
                via: "192.0.2.254".parse().unwrap(),
                port: PortId(1),
            },
            ConfigRoute {
                dest: Prefix::parse("10.1.0.0/24").unwrap(),
                via: "192.0.2.9".parse().unwrap(),
                port: PortId(1),
            },
        ];
        let t = RouteTable::build(&ports, &routes);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            t.lookup(ip("10.1.0.10")),
            Some(NextHop {
                port: 0,
                addr: ip("10.1.0.10")
            })
        );
        assert_eq!(
            t.lookup(ip("8.8.8.8")),
            Some(NextHop {
                port: 1,
                addr: ip("192.0.2.254")
            })
        );
        assert_eq!(t.lookup(ip("2001:db8::1")), None);
    }
}
