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
    const ZERO: Self;

    /// The low `WIDTH` bits of `v`.
    fn from_u128(v: u128) -> Self;

    /// The netmask of a `len`-bit prefix.
    fn mask(len: u8) -> Self;

    fn and(self, mask: Self) -> Self;

    /// A well-mixed 64-bit hash (Fibonacci hashing, upper half of the
    /// product moved down): slots use its low bits, filters bits 40 and up.
    fn hash(self) -> u64;
}

/// 2^64 divided by the golden ratio: Fibonacci hashing.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

impl AddrBits for u32 {
    const WIDTH: u8 = 32;
    const ZERO: u32 = 0;

    #[inline]
    fn hash(self) -> u64 {
        let product = u128::from(self) * u128::from(GOLDEN);
        (product as u64) ^ ((product >> 64) as u64)
    }

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
    const ZERO: u128 = 0;

    #[inline]
    fn hash(self) -> u64 {
        let folded = (self as u64) ^ ((self >> 64) as u64).rotate_left(29);
        let product = u128::from(folded) * u128::from(GOLDEN);
        (product as u64) ^ ((product >> 64) as u64)
    }

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

/// Where a leaf's further candidates lie in the shared candidate array.
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    start: u32,
    len: u32,
}

/// One table slot: a leaf's network, its best candidate by value, and
/// where the others are. For IPv4 rules the whole slot is one 64-byte cache
/// line, so a lookup that ends at the first candidate (the usual case: one
/// tunnel per network) reads one line of the table and nothing else.
#[derive(Debug, Clone, Copy)]
struct Slot<B, V> {
    net: B,
    occupied: bool,
    rest: Span,
    first: V,
}

/// Bytes of one table slot (for the layout test).
#[cfg(test)]
pub(crate) fn slot_size<B, V>() -> usize {
    core::mem::size_of::<Slot<B, V>>()
}

/// The leaves of one prefix length: an open-addressed table with linear
/// probing and load at most one half.
///
/// In front of it, a one-hash bit filter of about 8 bits per leaf, small
/// enough to stay cached: most addresses with no leaf at this length are
/// turned away without touching the table (a /24 tunnel's packets skip the
/// /32 level this way).
#[derive(Debug)]
struct Level<B, V> {
    mask: B,
    slots: Vec<Slot<B, V>>,
    /// `slots.len() - 1`; the length is a power of two.
    slot_mask: usize,
    filter: Vec<u64>,
    /// `filter.len() * 64 - 1`; a power of two less one.
    filter_mask: usize,
}

/// Bit position of `hash` in a filter: bits of the hash the slot index
/// does not use, so a filter hit says something the slot does not.
#[inline]
fn filter_bit(hash: u64, filter_mask: usize) -> usize {
    (hash >> 40) as usize & filter_mask
}

impl<B: AddrBits, V: Copy> Level<B, V> {
    /// `None` when there are no leaves (no level is needed then).
    fn new(mask: B, leaves: &[Slot<B, V>]) -> Option<Level<B, V>> {
        let filler = Slot {
            occupied: false,
            ..*leaves.first()?
        };
        let size = (leaves.len() * 2).next_power_of_two();
        let mut slots = vec![filler; size];
        let slot_mask = size - 1;
        let filter_bits = (leaves.len() * 8).next_power_of_two().max(64);
        let mut filter = vec![0u64; filter_bits / 64];
        let filter_mask = filter_bits - 1;
        for leaf in leaves {
            let hash = leaf.net.hash();
            let bit = filter_bit(hash, filter_mask);
            filter[bit / 64] |= 1 << (bit % 64);
            let mut i = hash as usize & slot_mask;
            while slots[i].occupied {
                i = (i + 1) & slot_mask;
            }
            slots[i] = *leaf;
        }
        Some(Level {
            mask,
            slots,
            slot_mask,
            filter,
            filter_mask,
        })
    }

    /// The slot of the network that holds `addr` at this length.
    #[inline]
    fn get(&self, addr: B) -> Option<&Slot<B, V>> {
        let net = addr.and(self.mask);
        let hash = net.hash();
        let bit = filter_bit(hash, self.filter_mask);
        if self.filter.get(bit / 64).copied().unwrap_or(0) & (1 << (bit % 64)) == 0 {
            return None;
        }
        let mut i = hash as usize & self.slot_mask;
        // Terminates: at most half the slots are occupied.
        loop {
            let slot = self.slots.get(i)?;
            if !slot.occupied {
                return None;
            }
            if slot.net == net {
                return Some(slot);
            }
            i = (i + 1) & self.slot_mask;
        }
    }
}

/// The candidates for one address, in rank order: `first` then `rest`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidates<'a, V> {
    pub(crate) first: &'a [V],
    pub(crate) rest: &'a [V],
}

impl<V> Default for Candidates<'_, V> {
    fn default() -> Self {
        Candidates {
            first: &[],
            rest: &[],
        }
    }
}

/// Maps an address to the candidates of the longest indexed prefix that
/// contains it, in rank order. Candidates are stored by value (`V` is a
/// compiled rule), so reaching them costs no further indirection.
#[derive(Debug)]
pub(crate) struct PrefixIndex<B, V> {
    /// Longest prefix length first.
    levels: Vec<Level<B, V>>,
    /// Every leaf's candidates after its first, back to back; each leaf's
    /// run sorted by rank.
    candidates: Vec<V>,
}

impl<B: AddrBits, V: Copy> PrefixIndex<B, V> {
    /// Indexes `(network, prefix length, rank)` entries; `values(rank)` is
    /// what the lookup returns for a rank (one or more values, kept
    /// together). A rank may appear under several prefixes. Building costs
    /// one probe per leaf and shorter length; memory is the sum of the
    /// candidate lists, which is linear unless many short prefixes cover
    /// many long ones.
    pub(crate) fn build<'v>(
        entries: impl IntoIterator<Item = (B, u8, u32)>,
        values: impl Fn(u32) -> &'v [V],
    ) -> PrefixIndex<B, V>
    where
        V: 'v,
    {
        let mut groups: BTreeMap<u8, FxHashMap<B, Vec<u32>>> = BTreeMap::new();
        for (net, len, rank) in entries {
            let len = len.min(B::WIDTH);
            groups
                .entry(len)
                .or_default()
                .entry(net.and(B::mask(len)))
                .or_default()
                .push(rank);
        }
        let lens: Vec<u8> = groups.keys().copied().collect();

        let mut levels = Vec::with_capacity(lens.len());
        let mut candidates = Vec::new();
        for (depth, &len) in lens.iter().enumerate().rev() {
            let shorter = &lens[..depth];
            let mut leaves = Vec::with_capacity(groups[&len].len());
            for (&net, own) in &groups[&len] {
                let mut ranks = own.clone();
                for &short in shorter {
                    if let Some(covering) = groups[&short].get(&net.and(B::mask(short))) {
                        ranks.extend_from_slice(covering);
                    }
                }
                ranks.sort_unstable();
                ranks.dedup();
                let mut ordered = ranks.iter().flat_map(|&rank| values(rank).iter().copied());
                let Some(first) = ordered.next() else {
                    continue; // a rank without values: nothing to find
                };
                let start = candidates.len();
                candidates.extend(ordered);
                leaves.push(Slot {
                    net,
                    occupied: true,
                    rest: Span {
                        start: start as u32,
                        len: (candidates.len() - start) as u32,
                    },
                    first,
                });
            }
            levels.extend(Level::new(B::mask(len), &leaves));
        }
        PrefixIndex { levels, candidates }
    }

    /// The candidates for `addr`, in rank order; none when no indexed
    /// prefix holds it.
    #[inline]
    pub(crate) fn candidates(&self, addr: B) -> Candidates<'_, V> {
        for level in &self.levels {
            if let Some(slot) = level.get(addr) {
                let start = slot.rest.start as usize;
                return Candidates {
                    first: std::slice::from_ref(&slot.first),
                    rest: self
                        .candidates
                        .get(start..start + slot.rest.len as usize)
                        .unwrap_or(&[]),
                };
            }
        }
        Candidates::default()
    }

    /// Distinct prefix lengths, i.e. the most probes a lookup costs.
    pub(crate) fn depth(&self) -> usize {
        self.levels.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every candidate, in order.
    fn all(index: &PrefixIndex<u32, u32>, addr: u32) -> Vec<u32> {
        let found = index.candidates(addr);
        found.first.iter().chain(found.rest).copied().collect()
    }

    #[test]
    fn longest_leaf_includes_covering_prefixes() {
        // 10.0.0.0/8 -> 0, 10.1.0.0/16 -> 1, 10.1.2.0/24 -> 2, 11.0.0.0/8 -> 3;
        // rank 1 has two values, which stay together.
        let values: [&[u32]; 4] = [&[100], &[110, 111], &[120], &[130]];
        let index = PrefixIndex::<u32, u32>::build(
            [
                (0x0a00_0000, 8, 0),
                (0x0a01_0000, 16, 1),
                (0x0a01_0200, 24, 2),
                (0x0b00_0000, 8, 3),
            ],
            |rank| values[rank as usize],
        );
        assert_eq!(all(&index, 0x0a01_0203), [100, 110, 111, 120]);
        assert_eq!(all(&index, 0x0a01_0303), [100, 110, 111]);
        assert_eq!(all(&index, 0x0a02_0000), [100]);
        assert_eq!(all(&index, 0x0b01_0101), [130]);
        assert_eq!(all(&index, 0x0c00_0000), [0u32; 0]);
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
            let ranks: Vec<u32> = (0..50).collect();
            let index = PrefixIndex::<u32, u32>::build(entries.iter().copied(), |rank| ranks.get(rank as usize..=rank as usize).unwrap_or(&[]));
            for addr in addrs {
                let addr = (addr as u32) << 24 | 0x00ab_cdef;
                let mut want: Vec<u32> = entries
                    .iter()
                    .filter(|&&(net, len, _)| addr & u32::mask(len) == net & u32::mask(len))
                    .map(|&(_, _, c)| c)
                    .collect();
                want.sort_unstable();
                want.dedup();
                prop_assert_eq!(all(&index, addr), want);
            }
        }
    }
}
