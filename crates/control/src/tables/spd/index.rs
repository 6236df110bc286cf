//! A destination (or source) prefix index answering "which rules can match
//! this address, best first" with a few hash probes.
//!
//! One hash map per distinct prefix length, probed longest first; the first
//! hit is the longest prefix that holds the address. Each leaf's candidate
//! list already includes the rules of every shorter indexed prefix that
//! covers the leaf ("push-down"), so the longest hit alone names every rule
//! whose prefix contains the address: a prefix Q containing the address is
//! no longer than the longest hit P (or Q itself would be a longer hit), and
//! two prefixes that share an address are nested, so Q covers P.

use core::fmt::Debug;
use core::hash::Hash;
use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

/// An address of one family as a plain integer (`u32` for IPv4, `u128` for
/// IPv6), so one index implementation serves both without branching on the
/// family per probe.
pub(crate) trait AddrBits: Copy + Eq + Hash + Ord + Debug + Send + Sync + 'static {
    const WIDTH: u8;

    /// The low `WIDTH` bits of `v`.
    fn from_u128(v: u128) -> Self;

    /// The netmask of a `len`-bit prefix.
    fn mask(len: u8) -> Self;

    fn and(self, mask: Self) -> Self;
}

impl AddrBits for u32 {
    const WIDTH: u8 = 32;

    fn from_u128(v: u128) -> u32 {
        v as u32
    }

    fn mask(len: u8) -> u32 {
        if len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(len.min(32)))
        }
    }

    #[inline]
    fn and(self, mask: u32) -> u32 {
        self & mask
    }
}

impl AddrBits for u128 {
    const WIDTH: u8 = 128;

    fn from_u128(v: u128) -> u128 {
        v
    }

    fn mask(len: u8) -> u128 {
        if len == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(len.min(128)))
        }
    }

    #[inline]
    fn and(self, mask: u128) -> u128 {
        self & mask
    }
}

/// Where one leaf's candidates lie in the shared candidate array.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: u32,
    len: u32,
}

/// The leaves of one prefix length.
#[derive(Debug)]
struct Level<B> {
    mask: B,
    leaves: FxHashMap<B, Span>,
}

/// Maps an address to the sorted candidate positions of the longest indexed
/// prefix that contains it.
#[derive(Debug)]
pub(crate) struct PrefixIndex<B> {
    /// Longest prefix length first.
    levels: Vec<Level<B>>,
    /// Every leaf's candidates, back to back; each run sorted ascending and
    /// free of duplicates.
    candidates: Vec<u32>,
}

impl<B: AddrBits> PrefixIndex<B> {
    /// Indexes `(network, prefix length, candidate)` entries. A candidate may
    /// appear under several prefixes. Building costs one probe per leaf and
    /// shorter length; memory is the sum of the candidate lists, which is
    /// linear unless many short prefixes cover many long ones.
    pub(crate) fn build(entries: impl IntoIterator<Item = (B, u8, u32)>) -> PrefixIndex<B> {
        let mut groups: BTreeMap<u8, FxHashMap<B, Vec<u32>>> = BTreeMap::new();
        for (net, len, candidate) in entries {
            let len = len.min(B::WIDTH);
            groups
                .entry(len)
                .or_default()
                .entry(net.and(B::mask(len)))
                .or_default()
                .push(candidate);
        }
        let lens: Vec<u8> = groups.keys().copied().collect();

        let mut levels = Vec::with_capacity(lens.len());
        let mut candidates = Vec::new();
        for (depth, &len) in lens.iter().enumerate().rev() {
            let shorter = &lens[..depth];
            let mut leaves = FxHashMap::default();
            for (&net, own) in &groups[&len] {
                let mut list = own.clone();
                for &short in shorter {
                    if let Some(covering) = groups[&short].get(&net.and(B::mask(short))) {
                        list.extend_from_slice(covering);
                    }
                }
                list.sort_unstable();
                list.dedup();
                let span = Span {
                    start: candidates.len() as u32,
                    len: list.len() as u32,
                };
                candidates.extend_from_slice(&list);
                leaves.insert(net, span);
            }
            levels.push(Level {
                mask: B::mask(len),
                leaves,
            });
        }
        PrefixIndex { levels, candidates }
    }

    /// The candidates for `addr`, ascending; empty when no indexed prefix
    /// holds it.
    #[inline]
    pub(crate) fn candidates(&self, addr: B) -> &[u32] {
        for level in &self.levels {
            if let Some(span) = level.leaves.get(&addr.and(level.mask)) {
                let start = span.start as usize;
                return self
                    .candidates
                    .get(start..start + span.len as usize)
                    .unwrap_or(&[]);
            }
        }
        &[]
    }

    /// Distinct prefix lengths, i.e. the most hash probes a miss costs.
    pub(crate) fn depth(&self) -> usize {
        self.levels.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn longest_leaf_includes_covering_prefixes() {
        // 10.0.0.0/8 -> 0, 10.1.0.0/16 -> 1, 10.1.2.0/24 -> 2, 11.0.0.0/8 -> 3
        let index = PrefixIndex::<u32>::build([
            (0x0a00_0000, 8, 0),
            (0x0a01_0000, 16, 1),
            (0x0a01_0200, 24, 2),
            (0x0b00_0000, 8, 3),
        ]);
        assert_eq!(index.candidates(0x0a01_0203), &[0, 1, 2]);
        assert_eq!(index.candidates(0x0a01_0303), &[0, 1]);
        assert_eq!(index.candidates(0x0a02_0000), &[0]);
        assert_eq!(index.candidates(0x0b01_0101), &[3]);
        assert_eq!(index.candidates(0x0c00_0000), &[] as &[u32]);
        assert_eq!(index.depth(), 3);
    }

    proptest! {
        /// The index returns exactly the candidates whose prefix contains
        /// the address, sorted: checked against a scan of the entries.
        #[test]
        fn matches_a_scan(
            entries in proptest::collection::vec((any::<u8>(), 0u8..=8, 0u32..50), 0..40),
            addrs in proptest::collection::vec(any::<u8>(), 1..40),
        ) {
            // An 8-bit universe in the top byte makes nesting and overlap common.
            let entries: Vec<(u32, u8, u32)> =
                entries.iter().map(|&(net, len, c)| ((net as u32) << 24, len, c)).collect();
            let index = PrefixIndex::<u32>::build(entries.iter().copied());
            for addr in addrs {
                let addr = (addr as u32) << 24 | 0x00ab_cdef;
                let mut want: Vec<u32> = entries
                    .iter()
                    .filter(|&&(net, len, _)| addr & u32::mask(len) == net & u32::mask(len))
                    .map(|&(_, _, c)| c)
                    .collect();
                want.sort_unstable();
                want.dedup();
                prop_assert_eq!(index.candidates(addr), &want[..]);
            }
        }
    }
}
