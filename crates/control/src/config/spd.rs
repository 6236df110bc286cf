//! The security policy database order and the config's diagnostics about it.
//!
//! Tunnels and policies form one ordered list: lower `priority` first, and
//! for equal priorities the one written first in the file. The first entry
//! whose selector matches a packet decides (protect through the tunnel,
//! bypass, or discard). An entry that no packet can reach is an error,
//! since the config says something it will not do; a tunnel that partly
//! overlaps an earlier one gets a warning.
//!
//! Reachability is the tables' own check ([`unreachable_rules`]) over the
//! very rules the data plane compiles ([`super::to_tables`]), asked twice:
//! once with whole rules (an entry covered by one earlier entry, whose
//! prefix lists count as unions), and once with each tunnel split into its
//! (local, remote) prefix pairs (an entry whose pairs are each covered by
//! some earlier entry, not necessarily the same one).

use super::model::{Policy, SpdEntry, Tunnel};
use super::reader::Ctx;
use super::sections::Located;
use super::to_tables::{policy_rule, tunnel_id, tunnel_rule};
use crate::tables::{unreachable_rules, IpPrefix, Rule, Selector};

struct Entry {
    spd: SpdEntry,
    priority: u32,
    offset: usize,
    path: String,
    label: String,
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
        });
    }
    for (i, p) in policies.iter().enumerate() {
        entries.push(Entry {
            spd: SpdEntry::Policy(i),
            priority: p.item.priority,
            offset: ctx.offset_of(&p.path).unwrap_or(0),
            path: p.path.clone(),
            label: p.path.clone(),
        });
    }
    entries.sort_by_key(|e| (e.priority, e.offset));

    // Rules in SPD order: the tables consult equal priorities in list
    // order, so rule i is entry i and consult order is SPD order.
    let rules: Vec<Rule> = entries
        .iter()
        .map(|e| match e.spd {
            SpdEntry::Tunnel(i) => tunnel_rule(tunnel_id(i), &tunnels[i].item),
            SpdEntry::Policy(i) => policy_rule(&policies[i].item),
        })
        .collect();
    let shadowed_by = shadowers(&rules);

    for (i, e) in entries.iter().enumerate() {
        if let Some(by) = &shadowed_by[i] {
            let names: Vec<String> = by
                .iter()
                .map(|&j| {
                    let a = &entries[j];
                    format!("{} (line {})", a.label, ctx.src.line_col(a.offset).0)
                })
                .collect();
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
            let earlier_tunnels = entries[..i]
                .iter()
                .zip(&rules)
                .filter(|(a, _)| matches!(a.spd, SpdEntry::Tunnel(_)));
            for (a, earlier) in earlier_tunnels {
                if let Some((s, x)) = overlapping_pair(&rules[i].selector, &earlier.selector) {
                    ctx.warn(
                        &format!("{}.local_ts", e.path),
                        format!(
                            "selector {} -> {} overlaps {} -> {} of {}, which is matched first",
                            s.0, s.1, x.0, x.1, a.label
                        ),
                    );
                }
            }
        }
    }
    entries.iter().map(|e| e.spd).collect()
}

/// For each rule (in consult order), the earlier rules that together take
/// all its traffic, or `None` when some packet reaches it.
fn shadowers(rules: &[Rule]) -> Vec<Option<Vec<usize>>> {
    let mut by: Vec<Option<Vec<usize>>> = vec![None; rules.len()];
    for (shadowed, first) in unreachable_rules(rules) {
        by[shadowed.0 as usize] = Some(vec![first.0 as usize]);
    }

    let (pairs, owner) = split_into_pairs(rules);
    if pairs.len() == rules.len() {
        // No rule has more than one pair: the split asks nothing new.
        return by;
    }
    // For each rule, the owner of the first rule covering each of its
    // pairs (`None` for an uncovered pair). A pair is only ever reported
    // covered by a sibling when an earlier rule covers that sibling, and
    // then the earlier rule is named first, so siblings are left out.
    let mut pair_by: Vec<Vec<Option<usize>>> = vec![Vec::new(); rules.len()];
    let mut covered = vec![None; pairs.len()];
    for (shadowed, first) in unreachable_rules(&pairs) {
        covered[shadowed.0 as usize] = Some(owner[first.0 as usize]);
    }
    for (pair, &rule) in owner.iter().enumerate() {
        pair_by[rule].push(covered[pair].filter(|&o| o != rule));
    }
    for (found, pairs_by) in by.iter_mut().zip(pair_by) {
        if found.is_none() && !pairs_by.is_empty() && pairs_by.iter().all(Option::is_some) {
            let mut names: Vec<usize> = pairs_by.into_iter().flatten().collect();
            names.dedup();
            *found = Some(names);
        }
    }
    by
}

/// Each rule as one rule per (source, destination) prefix pair of one
/// family, in order, with the index of the rule each came from. A rule with
/// an empty (any) list stays whole on that side; a rule with no pair of one
/// family (it matches nothing) contributes no rule.
fn split_into_pairs(rules: &[Rule]) -> (Vec<Rule>, Vec<usize>) {
    let mut pairs = Vec::with_capacity(rules.len());
    let mut owner = Vec::with_capacity(rules.len());
    for (i, rule) in rules.iter().enumerate() {
        let sides = |list: &[IpPrefix]| -> Vec<Vec<IpPrefix>> {
            if list.is_empty() {
                vec![Vec::new()]
            } else {
                list.iter().map(|p| vec![*p]).collect()
            }
        };
        for src in sides(&rule.selector.src) {
            for dst in sides(&rule.selector.dst) {
                let same_family = match (src.first(), dst.first()) {
                    (Some(s), Some(d)) => s.family() == d.family(),
                    _ => true,
                };
                if same_family {
                    let mut pair = rule.clone();
                    pair.selector.src = src.clone();
                    pair.selector.dst = dst;
                    pairs.push(pair);
                    owner.push(i);
                }
            }
        }
    }
    (pairs, owner)
}

type Pair = (IpPrefix, IpPrefix);

/// The first (local, remote) pair of tunnel selector `a` that shares a
/// packet with a pair of tunnel selector `b`, with that pair of `b`.
fn overlapping_pair(a: &Selector, b: &Selector) -> Option<(Pair, Pair)> {
    let pairs = |s: &Selector| -> Vec<Pair> {
        s.src
            .iter()
            .flat_map(|l| {
                s.dst
                    .iter()
                    .filter(|r| r.family() == l.family())
                    .map(|r| (*l, *r))
            })
            .collect()
    };
    let b_pairs = pairs(b);
    pairs(a).into_iter().find_map(|s| {
        b_pairs
            .iter()
            .find(|x| x.0.overlaps(&s.0) && x.1.overlaps(&s.1))
            .map(|x| (s, *x))
    })
}
