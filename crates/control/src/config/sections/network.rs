//! `[[port]]`, `[[neighbor]]` and `[[route]]`.

use std::collections::HashMap;
use std::net::IpAddr;

use super::Located;
use crate::config::model::{Neighbor, Port, PortId, Route, Side};
use crate::config::net::{IfAddr, MacAddr, Prefix};
use crate::config::reader::{Ctx, Field, Table};

pub(crate) const PORT_KEYS: &[&str] = &["name", "side", "device", "address", "mac"];
pub(crate) const NEIGHBOR_KEYS: &[&str] = &["address", "mac", "port"];
pub(crate) const ROUTE_KEYS: &[&str] = &["dest", "via", "port"];

const IFADDR: &str = "\"IP/prefix\", e.g. \"10.1.0.1/24\"";
const MAC: &str = "\"aa:bb:cc:dd:ee:ff\" (unicast)";

pub(crate) fn read_port(ctx: &mut Ctx, t: Table) -> Option<Port> {
    let name = t
        .require(ctx, "name", "a port name")
        .and_then(|f| f.str(ctx).map(str::to_string));
    let side = t
        .require(ctx, "side", "\"protected\" or \"unprotected\"")
        .and_then(|f| {
            f.choice(
                ctx,
                &[
                    ("protected", Side::Protected),
                    ("unprotected", Side::Unprotected),
                ],
            )
        });
    let device = t
        .require(ctx, "device", "a DPDK device string")
        .and_then(|f| {
            let d = f.str(ctx)?;
            if d.trim().is_empty() {
                f.error(ctx, "empty device", Some("a PCI address or vdev string"));
                return None;
            }
            Some(d.to_string())
        });
    let addresses = t.require(ctx, "address", IFADDR).and_then(|f| {
        let items = f.one_or_many(ctx, IFADDR);
        let parsed: Vec<Option<IfAddr>> = items
            .iter()
            .map(|i| i.parse_with(ctx, IFADDR, IfAddr::parse))
            .collect();
        if items.is_empty() {
            f.error(ctx, "no address", Some(IFADDR));
        }
        parsed
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .filter(|v| !v.is_empty())
    });
    // Outer None: the key is absent; inner None: it failed to parse.
    let mac = t
        .get(ctx, "mac")
        .map(|f| f.parse_with(ctx, MAC, MacAddr::parse));
    t.finish(ctx);
    let mac = match mac {
        Some(parsed) => Some(parsed?),
        None => None,
    };
    Some(Port {
        name: name?,
        side: side?,
        device: device?,
        addresses: addresses?,
        mac,
    })
}

/// Port names to ids, plus the names of ports that failed to read, so a
/// reference to a broken port is not also reported as "no such port".
pub(crate) struct PortNames {
    pub ids: HashMap<String, PortId>,
    pub declared: Vec<String>,
}

impl PortNames {
    pub fn resolve(&self, ctx: &mut Ctx, f: &Field) -> Option<PortId> {
        let name = f.str(ctx)?;
        if let Some(id) = self.ids.get(name) {
            return Some(*id);
        }
        if !self.declared.iter().any(|d| d == name) {
            let mut known: Vec<&str> = self.ids.keys().map(String::as_str).collect();
            known.sort_unstable();
            f.error(
                ctx,
                format!("no [[port]] named {name:?}"),
                Some(&format!("one of: {}", known.join(", "))),
            );
        }
        None
    }
}

fn ip(ctx: &mut Ctx, f: &Field) -> Option<IpAddr> {
    f.parse::<IpAddr>(ctx, "an IP address", "an IPv4 or IPv6 address")
}

/// Reports a next hop or neighbor that is not on the port's subnets.
fn check_on_link(ctx: &mut Ctx, ports: &[Port], port: PortId, addr: IpAddr, key: &str, what: &str) {
    let p = &ports[port.0];
    if !p.on_link(addr) {
        let subnets: Vec<String> = p.addresses.iter().map(|a| a.subnet().to_string()).collect();
        ctx.error(
            key,
            format!("{what} {addr} is not on a subnet of port {:?}", p.name),
            Some(&format!("an address in {}", subnets.join(" or "))),
        );
    }
}

pub(crate) fn read_neighbor(
    ctx: &mut Ctx,
    t: Table,
    ports: &[Port],
    names: &PortNames,
) -> Option<Neighbor> {
    let address = t
        .require(ctx, "address", "an IP address")
        .and_then(|f| ip(ctx, &f));
    let mac = t
        .require(ctx, "mac", MAC)
        .and_then(|f| f.parse_with(ctx, MAC, MacAddr::parse));
    let port = t
        .require(ctx, "port", "a port name")
        .and_then(|f| names.resolve(ctx, &f));
    let path = t.path.clone();
    t.finish(ctx);
    let (address, port) = (address?, port?);
    check_on_link(
        ctx,
        ports,
        port,
        address,
        &format!("{path}.address"),
        "neighbor",
    );
    Some(Neighbor {
        address,
        mac: mac?,
        port,
    })
}

pub(crate) fn read_route(
    ctx: &mut Ctx,
    t: Table,
    ports: &[Port],
    names: &PortNames,
) -> Option<Route> {
    let dest = t
        .require(ctx, "dest", "a prefix")
        .and_then(|f| f.parse_with(ctx, "a prefix like \"10.2.0.0/16\"", Prefix::parse));
    let via = t
        .require(ctx, "via", "a next-hop IP address")
        .and_then(|f| ip(ctx, &f));
    let port = t
        .require(ctx, "port", "a port name")
        .and_then(|f| names.resolve(ctx, &f));
    let path = t.path.clone();
    t.finish(ctx);
    let (dest, via, port) = (dest?, via?, port?);
    if dest.is_ipv4() != via.is_ipv4() {
        ctx.error(
            &format!("{path}.via"),
            format!("next hop {via} is not in the family of {dest}"),
            Some(if dest.is_ipv4() {
                "an IPv4 next hop"
            } else {
                "an IPv6 next hop"
            }),
        );
        return None;
    }
    check_on_link(ctx, ports, port, via, &format!("{path}.via"), "next hop");
    Some(Route { dest, via, port })
}

/// Cross-checks between ports: names, addresses, sides.
pub(crate) fn check_ports(ctx: &mut Ctx, ports: &[Located<Port>], any_port_failed: bool) {
    for (i, p) in ports.iter().enumerate() {
        if let Some(first) = ports[..i].iter().find(|q| q.item.name == p.item.name) {
            let line = ctx.line_of(&first.path).unwrap_or(0);
            ctx.error(
                &format!("{}.name", p.path),
                format!(
                    "duplicate port name {:?} (first at line {line})",
                    p.item.name
                ),
                Some("a unique name"),
            );
        }
        for (j, a) in p.item.addresses.iter().enumerate() {
            let key = format!("{}.address", p.path);
            let earlier = ports[..i]
                .iter()
                .flat_map(|q| q.item.addresses.iter())
                .chain(p.item.addresses[..j].iter());
            for b in earlier {
                if a.addr == b.addr {
                    ctx.error(
                        &key,
                        format!("address {} is configured twice", a.addr),
                        Some("a unique address"),
                    );
                } else if a.subnet().overlaps(&b.subnet()) {
                    ctx.warn(
                        &key,
                        format!("subnet {} overlaps {}", a.subnet(), b.subnet()),
                    );
                }
            }
        }
        if p.item.device.trim().is_empty() {
            continue;
        }
        if let Some(first) = ports[..i].iter().find(|q| q.item.device == p.item.device) {
            ctx.error(
                &format!("{}.device", p.path),
                format!("device is already used by port {:?}", first.item.name),
                Some("one port per device"),
            );
        }
    }
    for (side, word) in [
        (Side::Protected, "protected"),
        (Side::Unprotected, "unprotected"),
    ] {
        // A port that failed to read may have been the missing side; its
        // own error says what to fix.
        if !ports.iter().any(|p| p.item.side == side) && !any_port_failed {
            ctx.error(
                "port",
                format!("no [[port]] with side = \"{word}\""),
                Some("at least one protected and one unprotected port"),
            );
        }
    }
}
