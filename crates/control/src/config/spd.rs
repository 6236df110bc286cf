//! The security policy database order and the shadowing check.
//!
//! Tunnels and policies form one ordered list: lower `priority` first, and
//! for equal priorities the one written first in the file. The first entry
//! whose selector matches a packet decides (protect through the tunnel,
//! bypass, or discard). An entry whose every selector is covered by
//! entries before it can never match: that is an error, since the config
//! says something it will not do.

use super::model::{Policy, SpdEntry, Tunnel};
use super::net::{PortRange, Prefix};
use super::reader::Ctx;
use super::sections::Located;

/// A 5-tuple pattern; `None` matches anything.
#[derive(Debug, Clone, Copy)]
struct Selector {
    src: Option<Prefix>,
    dst: Option<Prefix>,
    proto: Option<u8>,
    sport: Option<PortRange>,
    dport: Option<PortRange>,
}

fn covers<T>(outer: &Option<T>, inner: &Option<T>, f: impl Fn(&T, &T) -> bool) -> bool {
    match (outer, inner) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(a), Some(b)) => f(a, b),
    }
}

fn overlaps<T>(a: &Option<T>, b: &Option<T>, f: impl Fn(&T, &T) -> bool) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => f(a, b),
        _ => true,
    }
}

impl Selector {
    /// Every packet `other` matches, `self` matches too.
    fn covers(&self, other: &Selector) -> bool {
        covers(&self.src, &other.src, Prefix::covers)
            && covers(&self.dst, &other.dst, Prefix::covers)
            && covers(&self.proto, &other.proto, |a, b| a == b)
            && covers(&self.sport, &other.sport, PortRange::covers)
            && covers(&self.dport, &other.dport, PortRange::covers)
    }

    /// Some packet matches both.
    fn overlaps(&self, other: &Selector) -> bool {
        overlaps(&self.src, &other.src, Prefix::overlaps)
            && overlaps(&self.dst, &other.dst, Prefix::overlaps)
            && overlaps(&self.proto, &other.proto, |a, b| a == b)
            && overlaps(&self.sport, &other.sport, PortRange::overlaps)
            && overlaps(&self.dport, &other.dport, PortRange::overlaps)
    }
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let any = |p: &Option<Prefix>| p.map_or("any".to_string(), |p| p.to_string());
        write!(f, "{} -> {}", any(&self.src), any(&self.dst))
    }
}

fn tunnel_selectors(t: &Tunnel) -> Vec<Selector> {
    let mut out = Vec::new();
    for l in &t.local_ts {
        for r in t.remote_ts.iter().filter(|r| r.is_ipv4() == l.is_ipv4()) {
            out.push(Selector {
                src: Some(*l),
                dst: Some(*r),
                proto: None,
                sport: None,
                dport: None,
            });
        }
    }
    out
}

fn policy_selector(p: &Policy) -> Selector {
    Selector {
        src: p.src,
        dst: p.dst,
        proto: p.proto,
        sport: p.sport,
        dport: p.dport,
    }
}

struct Entry {
    spd: SpdEntry,
    priority: u32,
    offset: usize,
    path: String,
    label: String,
    selectors: Vec<Selector>,
}

/// Orders tunnels and policies into the SPD and reports unreachable
/// entries (errors) and tunnels that partly overlap (warnings).
pub(crate) fn build(
    ctx: &mut Ctx,
    tunnels: &[Located<Tunnel>],
    policies: &[Located<Policy>],
) -> Vec<SpdEntry> {
    let mut entries: Vec<Entry> = Vec::new();
    for (i, t) in tunnels.iter().enumerate() {
        entries.push(Entry {
            spd: SpdEntry::Tunnel(i),
            priority: t.item.priority,
            offset: ctx.offset_of(&t.path).unwrap_or(0),
            path: t.path.clone(),
            label: format!("tunnel {:?}", t.item.name),
            selectors: tunnel_selectors(&t.item),
        });
    }
    for (i, p) in policies.iter().enumerate() {
        entries.push(Entry {
            spd: SpdEntry::Policy(i),
            priority: p.item.priority,
            offset: ctx.offset_of(&p.path).unwrap_or(0),
            path: p.path.clone(),
            label: p.path.clone(),
            selectors: vec![policy_selector(&p.item)],
        });
    }
    entries.sort_by_key(|e| (e.priority, e.offset));

    for (i, e) in entries.iter().enumerate() {
        let earlier = &entries[..i];
        let covered_by = |s: &Selector| {
            earlier
                .iter()
                .find(|a| a.selectors.iter().any(|x| x.covers(s)))
        };
        let shadowers: Vec<Option<&Entry>> = e.selectors.iter().map(covered_by).collect();
        if !e.selectors.is_empty() && shadowers.iter().all(Option::is_some) {
            let mut names: Vec<String> = shadowers
                .iter()
                .flatten()
                .map(|a| format!("{} (line {})", a.label, ctx.src.line_col(a.offset).0))
                .collect();
            names.dedup();
            let key = match e.spd {
                SpdEntry::Tunnel(_) => format!("{}.local_ts", e.path),
                SpdEntry::Policy(_) => e.path.clone(),
            };
            ctx.error(
                &key,
                format!(
                    "unreachable: all its traffic is matched first by {}",
                    names.join(", ")
                ),
                Some("selectors not covered by earlier entries, or a lower priority number"),
            );
            continue;
        }
        if let SpdEntry::Tunnel(_) = e.spd {
            for a in earlier
                .iter()
                .filter(|a| matches!(a.spd, SpdEntry::Tunnel(_)))
            {
                let overlap = e
                    .selectors
                    .iter()
                    .find_map(|s| a.selectors.iter().find(|x| x.overlaps(s)).map(|x| (s, x)));
                if let Some((s, x)) = overlap {
                    ctx.warn(
                        &format!("{}.local_ts", e.path),
                        format!(
                            "selector {s} overlaps {x} of {}, which is matched first",
                            a.label
                        ),
                    );
                }
            }
        }
    }
    entries.iter().map(|e| e.spd).collect()
}
