//! Rules that can never match because one rule consulted before them
//! already takes every packet they would: the config checker reports these.
//!
//! Containment is decided exactly for each field: address lists as unions
//! of prefixes (so `0.0.0.0/1` plus `128.0.0.0/1` covers any IPv4 address),
//! port ranges, and the protocol. A rule hidden only by several earlier
//! rules together (one takes TCP, another UDP, ...) is not reported.

use std::collections::BTreeMap;

use super::policy::{consult_order, family_part, Rule, RuleId, Selector};
use super::prefix::{mask128, Family, IpPrefix};

/// True when the union of `outer` holds every address of `p`.
fn union_covers(outer: &[IpPrefix], p: IpPrefix) -> bool {
    if outer.iter().any(|q| q.covers(&p)) {
        return true;
    }
    let width = p.family().width();
    // No single prefix holds p; the union can only if prefixes inside p
    // tile it, so split p in halves and ask again for each.
    if p.prefix_len() == width || !outer.iter().any(|q| p.covers(q)) {
        return false;
    }
    let low = IpPrefix::from_bits(p.family(), p.bits(), p.prefix_len() + 1);
    let high_bit = 1u128 << (width - p.prefix_len() - 1);
    let high = IpPrefix::from_bits(p.family(), p.bits() | high_bit, p.prefix_len() + 1);
    union_covers(outer, low) && union_covers(outer, high)
}

/// True when the address set `outer` holds `inner` (both one family's part
/// of a list, where empty means every address of `family`).
fn set_covers(outer: &[IpPrefix], inner: &[IpPrefix], family: Family) -> bool {
    if outer.is_empty() {
        return true;
    }
    if inner.is_empty() {
        return union_covers(outer, IpPrefix::any(family));
    }
    inner.iter().all(|p| union_covers(outer, *p))
}

/// The families whose packets `sel` can match, with its address sets there.
fn family_parts(
    sel: &Selector,
) -> impl Iterator<Item = (Family, Vec<IpPrefix>, Vec<IpPrefix>)> + '_ {
    Family::ALL.into_iter().filter_map(move |family| {
        Some((
            family,
            family_part(&sel.src, family)?,
            family_part(&sel.dst, family)?,
        ))
    })
}

/// True when every packet `inner` matches, `outer` matches too. A selector
/// that matches no packet at all is covered by nothing here: it is dead for
/// another reason (mixed families), which the config checker words itself.
pub fn selector_covers(outer: &Selector, inner: &Selector) -> bool {
    if !(outer.proto.is_none() || outer.proto == inner.proto)
        || !outer.sport.covers(&inner.sport)
        || !outer.dport.covers(&inner.dport)
    {
        return false;
    }
    let mut inner_matches_something = false;
    for (family, src, dst) in family_parts(inner) {
        inner_matches_something = true;
        let (Some(outer_src), Some(outer_dst)) = (
            family_part(&outer.src, family),
            family_part(&outer.dst, family),
        ) else {
            return false;
        };
        if !set_covers(&outer_src, &src, family) || !set_covers(&outer_dst, &dst, family) {
            return false;
        }
    }
    inner_matches_something
}

/// Earlier rules indexed by destination prefix, to find the few that can
/// cover a given rule without comparing every pair.
#[derive(Default)]
struct DstIndex {
    by_prefix: BTreeMap<(Family, u128, u8), Vec<u32>>,
    any_dst: Vec<u32>,
}

impl DstIndex {
    fn insert(&mut self, rank: u32, sel: &Selector) {
        if sel.dst.is_empty() {
            self.any_dst.push(rank);
        }
        for p in &sel.dst {
            self.by_prefix
                .entry((p.family(), p.bits(), p.prefix_len()))
                .or_default()
                .push(rank);
        }
    }

    /// Ranks of rules with a destination that shares an address with `p`,
    /// or with no destination restriction.
    fn overlapping(&self, p: IpPrefix, out: &mut Vec<u32>) {
        out.extend_from_slice(&self.any_dst);
        let family = p.family();
        let width = family.width();
        // Prefixes that hold p.
        for len in 0..p.prefix_len() {
            let key = (family, p.bits() & mask128(width, len), len);
            if let Some(ranks) = self.by_prefix.get(&key) {
                out.extend_from_slice(ranks);
            }
        }
        // Prefixes inside p (and p itself): their networks lie in p's range.
        let last = p.bits() | (mask128(width, width) & !mask128(width, p.prefix_len()));
        let inside = self
            .by_prefix
            .range((family, p.bits(), 0)..=(family, last, u8::MAX));
        for (&(_, _, len), ranks) in inside {
            if len >= p.prefix_len() {
                out.extend_from_slice(ranks);
            }
        }
    }
}

/// Every rule that no packet can reach, paired with the first rule (in
/// consult order) that covers it: `(shadowed, by)`, in consult order of the
/// shadowed rule.
///
/// Candidates come from a destination index, so a config of many disjoint
/// tunnels costs about O(n log n); rules without a destination restriction
/// are compared with every earlier rule.
pub fn unreachable_rules(rules: &[Rule]) -> Vec<(RuleId, RuleId)> {
    let order = consult_order(rules);
    let selector = |rank: u32| &rules[order[rank as usize].0 as usize].selector;
    let mut index = DstIndex::default();
    let mut found = Vec::new();
    let mut candidates = Vec::new();

    for (rank, &id) in order.iter().enumerate() {
        let rank = rank as u32;
        let sel = &rules[id.0 as usize].selector;
        // Any rule covering `sel` must share an address with its first
        // destination in a family it can match.
        let probe = family_parts(sel).next().map(|(family, _, dst)| {
            dst.first()
                .copied()
                .unwrap_or_else(|| IpPrefix::any(family))
        });
        if let Some(probe) = probe {
            candidates.clear();
            index.overlapping(probe, &mut candidates);
            candidates.sort_unstable();
            candidates.dedup();
            if let Some(&by) = candidates
                .iter()
                .find(|&&earlier| selector_covers(selector(earlier), sel))
            {
                found.push((id, order[by as usize]));
            }
        }
        index.insert(rank, sel);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::policy::{Action, TunnelId};
    use crate::tables::prefix::PortRange;

    fn prefixes(list: &[&str]) -> Vec<IpPrefix> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn rule(
        priority: u32,
        src: &[&str],
        dst: &[&str],
        proto: Option<u8>,
        dport: PortRange,
    ) -> Rule {
        Rule {
            priority,
            selector: Selector {
                src: prefixes(src),
                dst: prefixes(dst),
                proto,
                sport: PortRange::ANY,
                dport,
            },
            action: Action::Bypass,
        }
    }

    #[test]
    fn broader_earlier_rule_shadows() {
        let rules = [
            rule(10, &[], &["10.0.0.0/8"], None, PortRange::ANY),
            rule(
                10,
                &["192.168.0.0/16"],
                &["10.1.0.0/16"],
                Some(6),
                PortRange::single(80),
            ),
            // Same shape but consulted first thanks to its priority.
            rule(5, &[], &["10.2.0.0/16"], None, PortRange::ANY),
            // Outside the /8.
            rule(10, &[], &["11.0.0.0/16"], None, PortRange::ANY),
        ];
        assert_eq!(unreachable_rules(&rules), vec![(RuleId(1), RuleId(0))]);
    }

    #[test]
    fn every_field_must_be_covered() {
        let ports = PortRange::new(1000, 2000).unwrap();
        let base = rule(1, &["10.0.0.0/8"], &["20.0.0.0/8"], Some(17), ports);
        let one = PortRange::single(1500);
        let cases = [
            rule(2, &["11.0.0.0/24"], &["20.1.0.0/16"], Some(17), one),
            rule(2, &["10.0.0.0/24"], &["21.1.0.0/16"], Some(17), one),
            rule(2, &["10.0.0.0/24"], &["20.1.0.0/16"], Some(6), one),
            rule(2, &["10.0.0.0/24"], &["20.1.0.0/16"], None, one),
            rule(
                2,
                &["10.0.0.0/24"],
                &["20.1.0.0/16"],
                Some(17),
                PortRange::new(999, 1500).unwrap(),
            ),
            rule(2, &[], &["20.1.0.0/16"], Some(17), one),
        ];
        for case in cases {
            assert_eq!(
                unreachable_rules(&[base.clone(), case.clone()]),
                vec![],
                "{case:?}"
            );
        }
        let covered = rule(2, &["10.0.0.0/24"], &["20.1.0.0/16"], Some(17), one);
        assert_eq!(
            unreachable_rules(&[base, covered]),
            vec![(RuleId(1), RuleId(0))]
        );
    }

    #[test]
    fn unions_of_prefixes_cover() {
        let halves = rule(1, &[], &["0.0.0.0/1", "128.0.0.0/1"], None, PortRange::ANY);
        let all_v4 = rule(2, &[], &["0.0.0.0/0"], None, PortRange::ANY);
        assert_eq!(
            unreachable_rules(&[halves.clone(), all_v4]),
            vec![(RuleId(1), RuleId(0))]
        );
        // An empty list is both families: the halves leave IPv6 uncovered.
        let anything = rule(2, &[], &[], None, PortRange::ANY);
        assert_eq!(unreachable_rules(&[halves, anything]), vec![]);

        let split = rule(
            1,
            &[],
            &["10.0.0.0/24", "10.0.1.0/25", "10.0.1.128/25"],
            None,
            PortRange::ANY,
        );
        let whole = rule(1, &[], &["10.0.0.0/23"], None, PortRange::ANY);
        assert_eq!(
            unreachable_rules(&[split.clone(), whole]),
            vec![(RuleId(1), RuleId(0))]
        );
        let gap = rule(1, &[], &["10.0.0.0/22"], None, PortRange::ANY);
        assert_eq!(unreachable_rules(&[split, gap]), vec![]);
    }

    #[test]
    fn families_are_separate() {
        let v4 = rule(1, &[], &["0.0.0.0/0"], None, PortRange::ANY);
        let v6 = rule(1, &[], &["2001:db8::/32"], None, PortRange::ANY);
        assert_eq!(unreachable_rules(&[v4.clone(), v6]), vec![]);
        let both = rule(
            1,
            &[],
            &["10.0.0.0/8", "2001:db8::/32"],
            None,
            PortRange::ANY,
        );
        assert_eq!(unreachable_rules(&[v4.clone(), both]), vec![]);
        // A rule that matches nothing (v4 sources, v6 destinations) is not
        // reported as shadowed.
        let dead = rule(1, &["10.0.0.0/8"], &["2001:db8::/32"], None, PortRange::ANY);
        assert_eq!(unreachable_rules(&[v4, dead]), vec![]);
    }

    #[test]
    fn reports_the_first_covering_rule_in_consult_order() {
        let mut tunnel = rule(0, &[], &["10.1.0.0/16"], None, PortRange::ANY);
        tunnel.action = Action::Protect(TunnelId(0));
        let rules = [
            rule(3, &[], &[], None, PortRange::ANY),
            rule(2, &[], &["10.0.0.0/8"], None, PortRange::ANY),
            rule(4, &[], &["10.1.2.0/24"], None, PortRange::ANY),
            tunnel,
        ];
        // Rule 2 is covered by rules 3, 1 and 0; rule 3 is consulted first.
        assert_eq!(unreachable_rules(&rules), vec![(RuleId(2), RuleId(3))]);
    }
}
