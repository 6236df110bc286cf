//! The compiled rules of one address family and their first-match lookup.

use super::index::{AddrBits, PrefixIndex};
use crate::tables::policy::{consult_order, family_part, Action, Rule, RuleId};
use crate::tables::prefix::{Family, IpPrefix, PortRange};

/// A rule reduced to what is left to check once an index has vouched for
/// one of its addresses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CompiledRule {
    /// Span of the rule's source networks in `FamilyTable::src_nets`;
    /// `src_len == 0` means any source.
    src_start: u32,
    src_len: u32,
    proto: Option<u8>,
    sport: PortRange,
    dport: PortRange,
    pub(crate) action: Action,
    pub(crate) id: RuleId,
}

/// Every rule that can match packets of one family, in consult order
/// (position = rank, so comparing positions compares priorities), and
/// three ways to reach them:
/// - rules naming destinations, through a destination prefix index;
/// - rules for any destination but naming sources, through a source index;
/// - rules for any source and destination, in a short wildcard list.
///
/// The three candidate lists are each sorted by rank; the answer is the
/// lowest-ranked candidate that passes its remaining checks.
#[derive(Debug)]
pub(crate) struct FamilyTable<B> {
    rules: Vec<CompiledRule>,
    /// (network, mask) pairs of the rules' source lists.
    src_nets: Vec<(B, B)>,
    by_dst: PrefixIndex<B>,
    by_src: PrefixIndex<B>,
    wildcard: Vec<u32>,
}

/// A prefix as the index's integer network and length.
fn net<B: AddrBits>(p: &IpPrefix) -> (B, u8) {
    (B::from_u128(p.bits()), p.prefix_len())
}

impl<B: AddrBits> FamilyTable<B> {
    pub(crate) fn build(rules: &[Rule], family: Family) -> FamilyTable<B> {
        let mut compiled = Vec::new();
        let mut src_nets = Vec::new();
        let mut dst_entries = Vec::new();
        let mut src_entries = Vec::new();
        let mut wildcard = Vec::new();

        for id in consult_order(rules) {
            let rule = &rules[id.0 as usize];
            let sel = &rule.selector;
            let (Some(src), Some(dst)) =
                (family_part(&sel.src, family), family_part(&sel.dst, family))
            else {
                continue; // the rule never matches this family
            };
            let pos = compiled.len() as u32;
            compiled.push(CompiledRule {
                src_start: src_nets.len() as u32,
                src_len: src.len() as u32,
                proto: sel.proto,
                sport: sel.sport,
                dport: sel.dport,
                action: rule.action,
                id,
            });
            src_nets.extend(src.iter().map(|p| {
                let (bits, len) = net::<B>(p);
                (bits, B::mask(len))
            }));
            let entries = |list: &[IpPrefix]| -> Vec<(B, u8, u32)> {
                list.iter()
                    .map(|p| {
                        let (bits, len) = net::<B>(p);
                        (bits, len, pos)
                    })
                    .collect()
            };
            if !dst.is_empty() {
                dst_entries.extend(entries(&dst));
            } else if !src.is_empty() {
                src_entries.extend(entries(&src));
            } else {
                wildcard.push(pos);
            }
        }
        FamilyTable {
            rules: compiled,
            src_nets,
            by_dst: PrefixIndex::build(dst_entries),
            by_src: PrefixIndex::build(src_entries),
            wildcard,
        }
    }

    /// Everything but the destination (which the index that produced the
    /// candidate has already checked, or which the rule does not restrict).
    #[inline]
    fn passes(&self, rule: &CompiledRule, src: B, proto: u8, sport: u16, dport: u16) -> bool {
        (rule.proto.is_none() || rule.proto == Some(proto))
            && rule.sport.contains(sport)
            && rule.dport.contains(dport)
            && (rule.src_len == 0 || {
                let start = rule.src_start as usize;
                self.src_nets
                    .get(start..start + rule.src_len as usize)
                    .unwrap_or(&[])
                    .iter()
                    .any(|&(net, mask)| src.and(mask) == net)
            })
    }

    /// The position of the first candidate that passes, if it ranks before
    /// `best`; else `best`.
    #[inline]
    fn first_passing(&self, candidates: &[u32], best: u32, key: (B, u8, u16, u16)) -> u32 {
        let (src, proto, sport, dport) = key;
        for &pos in candidates {
            if pos >= best {
                break;
            }
            match self.rules.get(pos as usize) {
                Some(rule) if self.passes(rule, src, proto, sport, dport) => return pos,
                _ => {}
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
    ) -> Option<&CompiledRule> {
        let rest = (src, proto, sport, dport);
        let mut best = u32::MAX;
        best = self.first_passing(&self.wildcard, best, rest);
        best = self.first_passing(self.by_dst.candidates(dst), best, rest);
        best = self.first_passing(self.by_src.candidates(src), best, rest);
        self.rules.get(best as usize)
    }

    /// Rules this family can match.
    pub(crate) fn len(&self) -> usize {
        self.rules.len()
    }

    /// Hash probes a lookup costs at most (destination plus source index).
    pub(crate) fn depth(&self) -> usize {
        self.by_dst.depth() + self.by_src.depth()
    }
}
