//! The compiled rules of one address family and their first-match lookup.

use super::index::{AddrBits, Candidates, PrefixIndex};
use crate::tables::policy::{consult_order, family_part, Action, Rule, RuleId};
use crate::tables::prefix::{Family, IpPrefix, PortRange};

/// One source network of a rule, with what is left to check once an index
/// has vouched for the rule's destination. A rule with several source
/// networks becomes several of these, adjacent and of equal rank; stored
/// by value in each candidate list, 32 bytes for IPv4 (half a cache line,
/// never straddling one), 64 for IPv6.
#[derive(Debug, Clone, Copy)]
#[repr(align(32))]
pub(crate) struct CompiledRule<B> {
    /// Position in consult order: lower is consulted first.
    rank: u32,
    /// Source network and mask; mask 0 for any source.
    src_net: B,
    src_mask: B,
    proto: Option<u8>,
    sport: PortRange,
    dport: PortRange,
    pub(crate) action: Action,
}

/// Every rule that can match packets of one family, reachable three ways:
/// - rules naming destinations, through a destination prefix index;
/// - rules for any destination but naming sources, through a source index;
/// - rules for any source and destination, in a short wildcard list.
///
/// The three candidate lists are each in rank order; the answer is the
/// lowest-ranked candidate that passes its remaining checks.
#[derive(Debug)]
pub(crate) struct FamilyTable<B> {
    by_dst: PrefixIndex<B, CompiledRule<B>>,
    by_src: PrefixIndex<B, CompiledRule<B>>,
    wildcard: Vec<CompiledRule<B>>,
    /// Rule ids by rank, for reporting which rule matched.
    ids: Vec<RuleId>,
}

/// A prefix as the index's integer network and length.
fn net<B: AddrBits>(p: &IpPrefix) -> (B, u8) {
    (B::from_u128(p.bits()), p.prefix_len())
}

impl<B: AddrBits> FamilyTable<B> {
    pub(crate) fn build(rules: &[Rule], family: Family) -> FamilyTable<B> {
        let mut variants = Vec::new();
        // Span of each rank's variants in `variants`.
        let mut by_rank: Vec<(usize, usize)> = Vec::new();
        let mut ids = Vec::new();
        let mut dst_entries = Vec::new();
        let mut src_entries = Vec::new();
        let mut wildcard_ranks = Vec::new();

        for id in consult_order(rules) {
            let rule = &rules[id.0 as usize];
            let sel = &rule.selector;
            let (Some(src), Some(dst)) =
                (family_part(&sel.src, family), family_part(&sel.dst, family))
            else {
                continue; // the rule never matches this family
            };
            let rank = ids.len() as u32;
            ids.push(id);
            let variant = |(src_net, src_mask): (B, B)| CompiledRule {
                rank,
                src_net,
                src_mask,
                proto: sel.proto,
                sport: sel.sport,
                dport: sel.dport,
                action: rule.action,
            };
            let start = variants.len();
            if src.is_empty() {
                // Any source: network 0, mask 0.
                variants.push(variant((B::ZERO, B::ZERO)));
            }
            variants.extend(src.iter().map(|p| {
                let (bits, len) = net::<B>(p);
                variant((bits, B::mask(len)))
            }));
            by_rank.push((start, variants.len()));

            let entries = |list: &[IpPrefix]| -> Vec<(B, u8, u32)> {
                list.iter()
                    .map(|p| {
                        let (bits, len) = net::<B>(p);
                        (bits, len, rank)
                    })
                    .collect()
            };
            if !dst.is_empty() {
                dst_entries.extend(entries(&dst));
            } else if !src.is_empty() {
                src_entries.extend(entries(&src));
            } else {
                wildcard_ranks.push(rank);
            }
        }
        let values = |rank: u32| -> &[CompiledRule<B>] {
            by_rank
                .get(rank as usize)
                .and_then(|&(start, end)| variants.get(start..end))
                .unwrap_or(&[])
        };
        FamilyTable {
            by_dst: PrefixIndex::build(dst_entries, values),
            by_src: PrefixIndex::build(src_entries, values),
            wildcard: wildcard_ranks
                .iter()
                .flat_map(|&rank| values(rank).iter().copied())
                .collect(),
            ids,
        }
    }

    /// Everything but the destination (which the index that produced the
    /// candidate has already checked, or which the rule does not restrict).
    #[inline]
    fn passes(rule: &CompiledRule<B>, src: B, proto: u8, sport: u16, dport: u16) -> bool {
        (rule.proto.is_none() || rule.proto == Some(proto))
            && rule.sport.contains(sport)
            && rule.dport.contains(dport)
            && src.and(rule.src_mask) == rule.src_net
    }

    /// The first candidate that passes, if it ranks before `best`.
    #[inline]
    fn first_passing<'a>(
        candidates: &'a [CompiledRule<B>],
        best: Option<&'a CompiledRule<B>>,
        key: (B, u8, u16, u16),
    ) -> Option<&'a CompiledRule<B>> {
        let (src, proto, sport, dport) = key;
        let limit = best.map_or(u32::MAX, |rule| rule.rank);
        for rule in candidates {
            if rule.rank >= limit {
                break;
            }
            if Self::passes(rule, src, proto, sport, dport) {
                return Some(rule);
            }
        }
        best
    }

    /// The first rule in consult order that matches.
    #[inline]
    pub(crate) fn lookup(
        &self,
        src: B,
        dst: B,
        proto: u8,
        sport: u16,
        dport: u16,
    ) -> Option<&CompiledRule<B>> {
        self.finish(self.dst_candidates(dst), src, proto, sport, dport)
    }

    /// The destination probe: the part of a lookup that misses the cache on
    /// a large table, split off so that a burst can issue it for many keys
    /// before it needs any of the answers.
    #[inline]
    pub(crate) fn dst_candidates(&self, dst: B) -> Candidates<'_, CompiledRule<B>> {
        self.by_dst.candidates(dst)
    }

    /// The rest of a lookup, given `dst_candidates(dst)`.
    #[inline]
    pub(crate) fn finish<'a>(
        &'a self,
        by_dst: Candidates<'a, CompiledRule<B>>,
        src: B,
        proto: u8,
        sport: u16,
        dport: u16,
    ) -> Option<&'a CompiledRule<B>> {
        let rest = (src, proto, sport, dport);
        let best = Self::first_passing(&self.wildcard, None, rest);
        let best = Self::first_passing_in(by_dst, best, rest);
        Self::first_passing_in(self.by_src.candidates(src), best, rest)
    }

    /// [`Self::first_passing`] over a leaf's first candidate, then the rest.
    #[inline]
    fn first_passing_in<'a>(
        found: Candidates<'a, CompiledRule<B>>,
        best: Option<&'a CompiledRule<B>>,
        key: (B, u8, u16, u16),
    ) -> Option<&'a CompiledRule<B>> {
        let best = Self::first_passing(found.first, best, key);
        Self::first_passing(found.rest, best, key)
    }

    /// The config position of a matched rule.
    pub(crate) fn id(&self, rule: &CompiledRule<B>) -> Option<RuleId> {
        self.ids.get(rule.rank as usize).copied()
    }

    /// Rules this family can match.
    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    /// Probes a lookup costs at most (destination plus source index).
    pub(crate) fn depth(&self) -> usize {
        self.by_dst.depth() + self.by_src.depth()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout the lookup cost depends on (see the `Slot` docs).
    #[test]
    fn compiled_rules_fill_whole_lines() {
        assert_eq!(core::mem::size_of::<CompiledRule<u32>>(), 32);
        assert_eq!(core::mem::size_of::<CompiledRule<u128>>(), 64);
        assert_eq!(
            super::super::index::slot_size::<u32, CompiledRule<u32>>(),
            64
        );
    }
}
