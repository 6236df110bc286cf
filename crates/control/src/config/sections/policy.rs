//! `[[policy]]`: bypass and discard rules.

use crate::config::model::{Policy, PolicyAction};
use crate::config::net::{PortRange, Prefix};
use crate::config::reader::{Ctx, Field, Table};
use crate::config::sections::tunnel::DEFAULT_PRIORITY;

pub(crate) const KEYS: &[&str] = &[
    "action", "src", "dst", "proto", "sport", "dport", "priority",
];

pub(crate) const ACTIONS: &[(&str, PolicyAction)] = &[
    ("bypass", PolicyAction::Bypass),
    ("discard", PolicyAction::Discard),
];

/// Protocol names accepted for `proto`, with their IANA numbers.
const PROTOCOLS: &[(&str, u8)] = &[
    ("icmp", 1),
    ("tcp", 6),
    ("udp", 17),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
    ("icmpv6", 58),
    ("sctp", 132),
];
/// Protocols with port numbers.
const PORTED: &[u8] = &[6, 17, 132];

fn prefix_or_any(ctx: &mut Ctx, f: &Field) -> Option<Option<Prefix>> {
    if f.str(ctx)? == "any" {
        return Some(None);
    }
    f.parse_with(
        ctx,
        "a prefix like \"10.1.0.0/24\" or \"any\"",
        Prefix::parse,
    )
    .map(Some)
}

fn proto(ctx: &mut Ctx, f: &Field) -> Option<Option<u8>> {
    if f.is_int() {
        return f.int(ctx, 0, 255).map(|p| Some(p as u8));
    }
    let mut choices: Vec<(&str, Option<u8>)> =
        PROTOCOLS.iter().map(|(n, p)| (*n, Some(*p))).collect();
    choices.push(("any", None));
    f.choice(ctx, &choices)
}

fn ports(ctx: &mut Ctx, f: &Field) -> Option<PortRange> {
    if f.is_int() {
        return f.int(ctx, 0, 65535).map(|p| PortRange::single(p as u16));
    }
    f.parse_with(ctx, "a port or range like \"1024-65535\"", PortRange::parse)
}

pub(crate) fn read(ctx: &mut Ctx, t: Table) -> Option<Policy> {
    let action = t
        .require(ctx, "action", "\"bypass\" or \"discard\"")
        .and_then(|f| f.choice(ctx, ACTIONS));
    let src = t
        .get(ctx, "src")
        .map_or(Some(None), |f| prefix_or_any(ctx, &f));
    let dst = t
        .get(ctx, "dst")
        .map_or(Some(None), |f| prefix_or_any(ctx, &f));
    let proto = t.get(ctx, "proto").map_or(Some(None), |f| proto(ctx, &f));
    let sport_field = t.get(ctx, "sport");
    let dport_field = t.get(ctx, "dport");
    let sport = sport_field.as_ref().map(|f| ports(ctx, f));
    let dport = dport_field.as_ref().map(|f| ports(ctx, f));
    let priority = t
        .get(ctx, "priority")
        .map_or(Some(DEFAULT_PRIORITY as i128), |f| {
            f.int(ctx, 0, i128::from(u32::MAX))
        })
        .map(|v| v as u32);
    let path = t.path.clone();
    t.finish(ctx);

    let (src, dst, proto) = (src?, dst?, proto?);
    if let (Some(s), Some(d)) = (src, dst) {
        if s.is_ipv4() != d.is_ipv4() {
            ctx.error(
                &format!("{path}.dst"),
                format!("{d} and src {s} are of different IP families"),
                Some("both IPv4 or both IPv6"),
            );
            return None;
        }
    }
    for (field, name) in [(&sport_field, "sport"), (&dport_field, "dport")] {
        if field.is_some() && !proto.is_some_and(|p| PORTED.contains(&p)) {
            ctx.error(
                &format!("{path}.{name}"),
                format!("{name} needs a protocol with ports"),
                Some("proto = \"tcp\", \"udp\" or \"sctp\""),
            );
            return None;
        }
    }
    let sport = match sport {
        Some(p) => Some(p?),
        None => None,
    };
    let dport = match dport {
        Some(p) => Some(p?),
        None => None,
    };
    Some(Policy {
        action: action?,
        src,
        dst,
        proto,
        sport,
        dport,
        priority: priority?,
    })
}
