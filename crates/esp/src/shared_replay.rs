//! An anti-replay window that several workers check and update at once,
//! without a lock: the inbound half of one SA served by every core
//! (docs/multicore.md).
//!
//! Same contract as [`ReplayWindow`](crate::ReplayWindow): [`check`] before
//! the ICV (never changes state), [`update`] only after it verified, so a
//! forged packet never moves the window (RFC 4303 §3.4.3). A number is
//! accepted by `update` at most once however many workers race on it.
//!
//! Layout: an RFC 6479 ring of blocks, but each ring word carries its own
//! block number next to the bits, so a word is (re)claimed for a new block
//! and marked in one compare-and-swap and nobody ever clears words ahead of
//! the top (clearing is what makes the plain ring bitmap unsafe to share:
//! a worker clearing a word can erase a bit another worker just set). A
//! word is `tag << 32 | bits`: `tag` the low 32 bits of the block number
//! (`seq >> 5`), `bits` one per sequence number of the block. The top is an
//! `AtomicU64` (the full 64-bit number with ESN) moved by `fetch_max`.
//!
//! `update(seq)`: `fetch_max` the top first, then refuse `seq` if it is
//! left of the window of the (new) top; then loop on the word's CAS: same
//! tag: refuse if the bit is set, else set it; other tag: reload the top
//! (which now covers whoever wrote that word: they raised the top before
//! their CAS) and refuse if `seq` left the window, else the word holds an
//! older block, whose numbers all lie left of the window (the ring has
//! one block more than the window spans), and is replaced by `seq`'s block
//! with only `seq`'s bit. Acceptance is the CAS that turns the bit on, so
//! two workers cannot both accept a number.
//!
//! The one approximation: tags are 32 bits, so a word left untouched while
//! the top moved by a multiple of 2^37 numbers at once is taken for the
//! current block; its stale bits can then refuse fresh numbers (a loss of
//! reordered packets after a 2^37 jump, never a replay accepted).
//!
//! [`check`]: SharedReplayWindow::check
//! [`update`]: SharedReplayWindow::update

use std::sync::atomic::{AtomicU64, Ordering};

use crate::replay::{infer_esn, Replayed, MAX_REPLAY_WINDOW};

/// Sequence numbers per ring word.
const BLOCK_BITS: u64 = 32;
const BLOCK_SHIFT: u32 = 5;
const BITS_MASK: u64 = 0xFFFF_FFFF;

/// The receive-side sequence state of one inbound SA, shared by workers.
pub struct SharedReplayWindow {
    /// Configured window in packets; 0 = anti-replay off.
    size: u64,
    /// Highest sequence number authenticated so far (0: none yet). Own
    /// cache line: it is the word every worker reads per packet and
    /// writes when the window moves.
    top: Line,
    /// Ring of tagged words; `len()` is a power of two.
    words: Box<[AtomicU64]>,
}

#[repr(align(64))]
struct Line(AtomicU64);

impl core::fmt::Debug for SharedReplayWindow {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SharedReplayWindow")
            .field("size", &self.size)
            .field("top", &self.top())
            .finish()
    }
}

#[inline]
fn block(seq: u64) -> u64 {
    seq >> BLOCK_SHIFT
}

#[inline]
fn tag_of(word: u64) -> u64 {
    word >> 32
}

#[inline]
fn bit(seq: u64) -> u64 {
    1u64 << (seq & (BLOCK_BITS - 1))
}

impl SharedReplayWindow {
    /// A window of `size` packets (0 = off), clamped to [`MAX_REPLAY_WINDOW`].
    pub fn new(size: u32) -> Self {
        let size = u64::from(size.min(MAX_REPLAY_WINDOW));
        // The window spans at most ceil(size / 32) + 1 blocks; one more
        // makes every block sharing a word with a block of the window lie
        // entirely left of it.
        let words = if size == 0 {
            1
        } else {
            (size.div_ceil(BLOCK_BITS) as usize + 2).next_power_of_two()
        };
        SharedReplayWindow {
            size,
            top: Line(AtomicU64::new(0)),
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// A window of `size` packets whose top is `top` and in which every
    /// number up to `top` counts as seen (the state after a restart; see
    /// [`ReplayWindow::restored`](crate::ReplayWindow::restored)).
    pub fn restored(size: u32, top: u64) -> Self {
        let w = SharedReplayWindow::new(size);
        w.top.0.store(top, Ordering::Relaxed);
        if w.size != 0 && top != 0 {
            // Every block the window can reach, full; the top's own block
            // only up to the top.
            let len = w.words.len() as u64;
            let top_block = block(top);
            for back in 0..len.min(top_block + 1) {
                let b = top_block - back;
                let bits = if back == 0 {
                    let t = bit(top);
                    t | (t - 1)
                } else {
                    BITS_MASK
                };
                w.words[w.index(b)].store(((b & BITS_MASK) << 32) | bits, Ordering::Relaxed);
            }
        }
        w
    }

    /// Forgets every number seen: the window of a fresh SA. Each word is
    /// cleared on its own, so this is only right while no other thread
    /// uses the window (a benchmark replaying one pre-encrypted stream
    /// through an SA it alone decrypts with).
    pub fn reset(&self) {
        self.top.0.store(0, Ordering::Release);
        for w in self.words.iter() {
            w.store(0, Ordering::Release);
        }
    }

    /// Configured size in packets (0 = anti-replay off).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Highest authenticated sequence number (0 before the first packet).
    pub fn top(&self) -> u64 {
        self.top.0.load(Ordering::Acquire)
    }

    /// The full 64-bit sequence number for a received low half (RFC 4303
    /// Appendix A), against the top as it is now.
    pub fn infer_esn(&self, seq_lo: u32) -> Option<u64> {
        infer_esn(self.size, self.top(), seq_lo)
    }

    #[inline]
    fn index(&self, block: u64) -> usize {
        (block & (self.words.len() as u64 - 1)) as usize
    }

    #[inline]
    fn left_of_window(&self, seq: u64, top: u64) -> bool {
        seq <= top && top - seq >= self.size
    }

    /// Before decryption: could `seq` be new? Never changes state. A
    /// packet it lets through can still be refused by [`Self::update`]
    /// (another worker accepted the same number meanwhile).
    #[inline]
    pub fn check(&self, seq: u64) -> Result<(), Replayed> {
        if seq == 0 {
            return Err(Replayed);
        }
        let top = self.top();
        if self.size == 0 || seq > top {
            return Ok(());
        }
        if self.left_of_window(seq, top) {
            return Err(Replayed);
        }
        let word = self.words[self.index(block(seq))].load(Ordering::Acquire);
        if tag_of(word) == block(seq) & BITS_MASK && word & bit(seq) != 0 {
            Err(Replayed)
        } else {
            Ok(())
        }
    }

    /// After the ICV verified: records `seq` as seen, moving the top if it
    /// is the highest. `Ok` for exactly one of any number of concurrent
    /// calls with the same `seq`; `Err` (and nothing recorded) when `seq`
    /// is zero, already seen, or left of the window.
    #[inline]
    pub fn update(&self, seq: u64) -> Result<(), Replayed> {
        if seq == 0 {
            return Err(Replayed);
        }
        // Raised before the word is written: whoever sees the word's new
        // tag (Acquire) then sees a top at least this high.
        let top = self.top.0.fetch_max(seq, Ordering::AcqRel).max(seq);
        if self.size == 0 {
            return Ok(());
        }
        if self.left_of_window(seq, top) {
            return Err(Replayed);
        }
        let want_tag = block(seq) & BITS_MASK;
        let me = bit(seq);
        let slot = &self.words[self.index(block(seq))];
        let mut cur = slot.load(Ordering::Acquire);
        loop {
            let new = if tag_of(cur) == want_tag {
                if cur & me != 0 {
                    return Err(Replayed);
                }
                cur | me
            } else {
                // Another block holds the word. If it were newer than
                // ours, the top (raised by its writer before its CAS)
                // would put `seq` left of the window.
                if self.left_of_window(seq, self.top()) {
                    return Err(Replayed);
                }
                (want_tag << 32) | me
            };
            match slot.compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(()),
                Err(actual) => cur = actual,
            }
        }
    }

    /// After the ICVs of a burst verified: [`Self::update`] for every
    /// `seqs[i]` whose bit `i` is set in `verified`, with one `fetch_max`
    /// of the top for the whole burst and one compare-and-swap per run of
    /// numbers sharing a ring word (32 consecutive numbers), instead of
    /// one of each per packet. Returns the mask of the numbers accepted:
    /// each number is accepted at most once, over concurrent callers and
    /// within `seqs` (a number twice in `seqs`: its first occurrence).
    ///
    /// Panics if `seqs` is longer than 64 (a caller bug).
    pub fn update_burst(&self, seqs: &[u64], verified: u64) -> u64 {
        assert!(seqs.len() <= 64, "at most 64 numbers per call");
        let mut pending = verified & low_mask(seqs.len());
        let mut max = 0u64;
        // In order: every verified number one above the previous one (the
        // common case: one sender, no loss, no duplicate in the chunk).
        let mut in_order = true;
        let mut first = 0;
        let mut bits = pending;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let s = seqs[i];
            if s == 0 {
                pending &= !(1 << i);
                in_order = false;
                continue;
            }
            if max == 0 {
                first = s;
            } else if s != max.wrapping_add(1) {
                in_order = false;
            }
            max = max.max(s);
        }
        if pending == 0 {
            return 0;
        }
        if in_order {
            if let Some(accepted) = self.update_range(first, max, seqs, pending) {
                return accepted;
            }
        }
        if self.size == 0 {
            if max > self.top() {
                self.top.0.fetch_max(max, Ordering::AcqRel);
            }
            return pending;
        }
        if self.size < BLOCK_BITS {
            // A window narrower than a run: numbers of one run can leave
            // it by the run's own top, so one at a time, as one at a time
            // is what the result must equal.
            let mut accepted = 0;
            let mut bits = pending;
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if self.update(seqs[i]).is_ok() {
                    accepted |= 1 << i;
                }
            }
            return accepted;
        }
        let mut accepted = 0;
        while pending != 0 {
            // The run: the first pending number's block, and every later
            // pending number of the same block up to the first pending
            // number of another block (in-order traffic: the whole block).
            let first = pending.trailing_zeros() as usize;
            let b = block(seqs[first]);
            let mut run = 0u64;
            let mut run_max = 0u64;
            let mut bits = pending;
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let s = seqs[i];
                if block(s) != b {
                    break;
                }
                run |= 1 << i;
                run_max = run_max.max(s);
            }
            pending &= !run;
            // The top is raised run by run, in burst order, not to the
            // burst's highest number up front: a number is judged against
            // the window as the numbers before it in the burst left it,
            // as one at a time would (a number followed in its burst by a
            // jump of more than the window is still accepted). Raised
            // before the run's word is written, as in `update`; a plain
            // load first: a run of old numbers needs no locked write.
            let mut top = self.top();
            if run_max > top {
                top = self.top.0.fetch_max(run_max, Ordering::AcqRel).max(run_max);
            }
            let mut want = 0u64;
            let mut bits = run;
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let s = seqs[i];
                // Left of the window, or a repeat within the burst:
                // refused (not in `want`, so never marked accepted).
                if !self.left_of_window(s, top) && want & bit(s) == 0 {
                    want |= bit(s);
                    accepted |= 1 << i;
                }
            }
            if want == 0 {
                continue;
            }
            let taken = self.mark(b, want);
            if taken != want {
                // Unmark the refused numbers of this run.
                let mut bits = accepted & run;
                while bits != 0 {
                    let i = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if taken & bit(seqs[i]) == 0 {
                        accepted &= !(1 << i);
                    }
                }
            }
        }
        accepted
    }

    /// `update_burst` for the numbers `first..=last`, consecutive and in
    /// `seqs` (at the positions `pending`) in that order: one mask per
    /// ring word (at most three for 64 numbers) instead of a pass over
    /// the numbers. `None` (nothing done) when `first` is left of the
    /// window; the caller then takes the general path.
    #[inline]
    fn update_range(&self, first: u64, last: u64, seqs: &[u64], pending: u64) -> Option<u64> {
        let mut top = self.top();
        // Decided before the top moves: the general path judges each
        // number against the top the numbers before it left, and must
        // not find it already raised to `last`.
        if self.size != 0 && self.left_of_window(first, top.max(last)) {
            return None;
        }
        if last > top {
            top = self.top.0.fetch_max(last, Ordering::AcqRel).max(last);
        }
        if self.size == 0 {
            return Some(pending);
        }
        if self.left_of_window(first, top) {
            // Another worker moved the top meanwhile: number by number.
            return None;
        }
        let (b0, b1) = (block(first), block(last));
        let mut all = true;
        let mut taken = [0u64; 3];
        for (k, b) in (b0..=b1).enumerate() {
            let lo = if b == b0 { first & (BLOCK_BITS - 1) } else { 0 };
            let hi = if b == b1 {
                last & (BLOCK_BITS - 1)
            } else {
                BLOCK_BITS - 1
            };
            let want = (BITS_MASK >> (BLOCK_BITS - 1 - (hi - lo))) << lo;
            taken[k] = self.mark(b, want);
            all &= taken[k] == want;
        }
        if all {
            return Some(pending);
        }
        // Some were seen already (or left the window meanwhile).
        let mut accepted = 0;
        let mut bits = pending;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let s = seqs[i];
            if taken[(block(s) - b0) as usize] & bit(s) != 0 {
                accepted |= 1 << i;
            }
        }
        Some(accepted)
    }

    /// Sets the bits `want` of block `b` in its word (the block's numbers
    /// not left of the window as of the caller's top); returns the bits
    /// this call turned on (the numbers it accepts).
    #[inline]
    fn mark(&self, b: u64, want: u64) -> u64 {
        let want_tag = b & BITS_MASK;
        let slot = &self.words[self.index(b)];
        let mut cur = slot.load(Ordering::Acquire);
        loop {
            let (new, taken) = if tag_of(cur) == want_tag {
                (cur | want, want & !cur)
            } else {
                // As in `update`: a newer block in the word would have
                // raised the top past every number of `b`. Keep only the
                // numbers still inside the window of the top as it is now.
                let top = self.top();
                let mut keep = 0;
                let mut bits = want;
                while bits != 0 {
                    let j = u64::from(bits.trailing_zeros());
                    bits &= bits - 1;
                    if !self.left_of_window((b << BLOCK_SHIFT) | j, top) {
                        keep |= 1 << j;
                    }
                }
                ((want_tag << 32) | keep, keep)
            };
            if taken == 0 {
                return 0;
            }
            match slot.compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return taken,
                Err(actual) => cur = actual,
            }
        }
    }
}

#[inline]
fn low_mask(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ReplayWindow;
    use proptest::prelude::*;
    use std::collections::HashSet;
    use std::sync::Barrier;

    #[test]
    fn the_ring_has_a_spare_block_beyond_the_window() {
        for size in 1..=600u32 {
            let w = SharedReplayWindow::new(size);
            let len = w.words.len() as u64;
            // A block sharing a word with one of the window is `len`
            // blocks away, so all of its numbers are out of the window.
            assert!((len - 1) * BLOCK_BITS >= u64::from(size) + BLOCK_BITS - 1);
        }
    }

    #[test]
    fn restored_refuses_everything_up_to_top_and_accepts_after() {
        for size in [1u32, 32, 64, 100, 1024, 4096] {
            for top in [1u64, 31, 32, 63, 64, 65, 100, 5000, (1 << 32) + 7] {
                let w = SharedReplayWindow::restored(size, top);
                assert_eq!(w.top(), top);
                let low = top.saturating_sub(u64::from(size) + 70).max(1);
                for s in low..=top {
                    assert_eq!(w.check(s), Err(Replayed), "size {size} top {top} seq {s}");
                    assert_eq!(w.update(s), Err(Replayed), "size {size} top {top} seq {s}");
                }
                // Reordered arrivals after the restart (the windows that
                // span the reordering): all new, each once.
                for s in [top + 3, top + 1, top + 2, top + 70, top + 65] {
                    if size < 64 {
                        break;
                    }
                    assert_eq!(w.update(s), Ok(()), "size {size} top {top} seq {s}");
                    assert_eq!(w.check(s), Err(Replayed));
                }
            }
        }
        let w = SharedReplayWindow::restored(0, 77);
        assert_eq!((w.top(), w.check(5), w.update(5)), (77, Ok(()), Ok(())));
    }

    #[test]
    fn zero_and_edges() {
        let w = SharedReplayWindow::new(64);
        assert_eq!(w.update(0), Err(Replayed));
        w.update(100).unwrap();
        assert_eq!(w.check(37), Ok(()));
        assert_eq!(w.check(36), Err(Replayed));
        assert_eq!(w.update(36), Err(Replayed));
        assert_eq!(w.update(37), Ok(()));
        assert_eq!(w.update(37), Err(Replayed));
        w.update(101).unwrap();
        assert_eq!(w.check(37), Err(Replayed));
        assert_eq!(w.check(38), Ok(()));
    }

    #[test]
    fn esn_inference_follows_the_top() {
        let w = SharedReplayWindow::new(64);
        w.update(0xFFFF_FFF0).unwrap();
        assert_eq!(w.infer_esn(5), Some((1 << 32) | 5));
        assert_eq!(w.infer_esn(0xFFFF_FFF5), Some(0xFFFF_FFF5));
    }

    /// The obvious model: every number seen, plus the highest.
    struct Model {
        size: u64,
        seen: HashSet<u64>,
        top: u64,
    }

    impl Model {
        fn accepts(&self, s: u64) -> bool {
            s != 0
                && (self.size == 0
                    || s > self.top
                    || self.top - s < self.size && !self.seen.contains(&s))
        }
    }

    proptest! {
        /// One thread: exactly the sequential window (and its model).
        #[test]
        fn sequentially_matches_the_plain_window_and_the_model(
            size in prop_oneof![Just(0u32), 1u32..200, Just(1024u32), 4000u32..5000],
            start in prop_oneof![Just(0u64), 0u64..1_000_000, Just(u64::MAX - 100_000)],
            restore in any::<bool>(),
            steps in proptest::collection::vec((-3000i64..3000, any::<bool>()), 1..400),
        ) {
            let (shared, mut plain, mut model) = if restore && start != 0 {
                (SharedReplayWindow::restored(size, start), ReplayWindow::restored(size, start),
                 Model { size: u64::from(size), seen: (1..=start).rev().take(5000).collect(), top: start })
            } else {
                (SharedReplayWindow::new(size), ReplayWindow::new(size),
                 Model { size: u64::from(size), seen: HashSet::new(), top: 0 })
            };
            let mut cursor = start;
            for (delta, authentic) in steps {
                cursor = cursor.saturating_add_signed(delta).max(1);
                let s = cursor;
                let expected = model.accepts(s);
                prop_assert_eq!(shared.check(s).is_ok(), expected, "check {} top {}", s, model.top);
                prop_assert_eq!(plain.check(s).is_ok(), expected);
                prop_assert_eq!(shared.infer_esn(s as u32), plain.infer_esn(s as u32));
                if authentic {
                    prop_assert_eq!(shared.update(s).is_ok(), expected, "update {} top {}", s, model.top);
                    prop_assert_eq!(plain.update(s).is_ok(), expected);
                    if expected {
                        model.seen.insert(s);
                        model.top = model.top.max(s);
                    }
                }
                prop_assert_eq!(shared.top(), model.top);
            }
        }
    }

    /// Several workers take the same stream (every number handed to 2 or 3
    /// of them, each with its own local reordering) and race on check +
    /// update. Every number must be accepted at most once, and every
    /// number inside the final window exactly once (a refusal is only
    /// right for a seen number or one left of the window, and the window
    /// only moves right).
    fn stress(size: u32, threads: usize, n: u64, jitter: u64, seed: u64, burst: usize) {
        let w = SharedReplayWindow::new(size);
        let barrier = Barrier::new(threads);
        let accepted: Vec<Vec<u64>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (w, barrier) = (&w, &barrier);
                    s.spawn(move || {
                        // Deterministic per-thread stream: numbers of
                        // 1..=n this thread owns, shuffled within chunks.
                        let mut rng = seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                        let mut next = || {
                            rng ^= rng << 13;
                            rng ^= rng >> 7;
                            rng ^= rng << 17;
                            rng
                        };
                        let mut mine: Vec<u64> = (1..=n)
                            .filter(|&x| {
                                let third = (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 61) < 4;
                                let k = threads as u64;
                                // Each number to 2 threads, half of them to 3.
                                (x + t as u64).is_multiple_of(k)
                                    || (x + t as u64 + 1).is_multiple_of(k)
                                    || third && (x + t as u64 + 2).is_multiple_of(k)
                            })
                            .collect();
                        for chunk in mine.chunks_mut(jitter as usize) {
                            for i in (1..chunk.len()).rev() {
                                chunk.swap(i, (next() % (i as u64 + 1)) as usize);
                            }
                        }
                        barrier.wait();
                        let mut got = Vec::new();
                        if burst <= 1 {
                            for x in mine {
                                if w.check(x).is_ok() && w.update(x).is_ok() {
                                    got.push(x);
                                }
                            }
                        } else {
                            // As `InboundSa` does: check each, update
                            // the ones that passed (the "verified") at
                            // once, burst sizes varying.
                            let mut rest = &mine[..];
                            while !rest.is_empty() {
                                let len = (1 + next() as usize % burst).min(rest.len());
                                let (now, later) = rest.split_at(len);
                                rest = later;
                                let mut verified = 0u64;
                                for (i, &x) in now.iter().enumerate() {
                                    if w.check(x).is_ok() {
                                        verified |= 1 << i;
                                    }
                                }
                                let acc = w.update_burst(now, verified);
                                assert_eq!(acc & !verified, 0, "accepted an unverified one");
                                got.extend(
                                    now.iter()
                                        .enumerate()
                                        .filter(|(i, _)| acc & (1 << i) != 0)
                                        .map(|(_, &x)| x),
                                );
                            }
                        }
                        got
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut count = vec![0u32; n as usize + 1];
        for x in accepted.iter().flatten() {
            count[*x as usize] += 1;
        }
        let top = w.top();
        for (x, &c) in count.iter().enumerate().skip(1) {
            assert!(c <= 1, "seq {x} accepted {c} times (size {size})");
            if top - (x as u64) < u64::from(size) {
                assert_eq!(c, 1, "seq {x} inside the final window never accepted");
            }
        }
        assert_eq!(top, n);
    }

    #[test]
    fn concurrent_workers_accept_each_number_at_most_once() {
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get().clamp(4, 8));
        // Races are rare on a loaded 2-vCPU machine: several rounds.
        for round in 0..3u64 {
            for (i, (size, jitter)) in [(64u32, 16u64), (128, 200), (1024, 64), (1, 1), (33, 8)]
                .into_iter()
                .enumerate()
            {
                stress(
                    size,
                    threads,
                    200_000,
                    jitter,
                    0x5EED + i as u64 + 16 * round,
                    1,
                );
            }
        }
    }

    #[test]
    fn concurrent_bursts_accept_each_number_at_most_once() {
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get().clamp(4, 8));
        for round in 0..3u64 {
            for (i, (size, jitter, burst)) in [
                (64u32, 16u64, 32usize),
                (128, 200, 64),
                (1024, 64, 32),
                (1, 1, 8),
                (33, 8, 64),
                (4096, 700, 64),
            ]
            .into_iter()
            .enumerate()
            {
                stress(
                    size,
                    threads,
                    200_000,
                    jitter,
                    0xB0057 + i as u64 + 16 * round,
                    burst,
                );
            }
        }
    }

    proptest! {
        /// One thread, bursts: `update_burst` is the model's "take each
        /// verified number in burst order, as one `update` at a time
        /// would: raise the top to it, accept it if it is inside the
        /// window and unseen" (so a number twice in one burst: its first
        /// occurrence; a number followed in its burst by a jump of more
        /// than the window: accepted), and agrees with `check` afterwards.
        #[test]
        fn bursts_match_the_model(
            size in prop_oneof![Just(0u32), 1u32..200, Just(1024u32)],
            start in prop_oneof![Just(0u64), 0u64..1_000_000, Just(u64::MAX - 100_000)],
            bursts in proptest::collection::vec(
                proptest::collection::vec(
                    // Mostly in order (the one-mask-per-word path), with
                    // jumps back (numbers seen) and ahead.
                    (prop_oneof![6 => Just(1i64), 1 => -300i64..300],
                     prop::bool::weighted(0.9)),
                    0..64),
                1..40),
        ) {
            let w = SharedReplayWindow::new(size);
            let mut model = Model { size: u64::from(size), seen: HashSet::new(), top: 0 };
            let mut cursor = start;
            for b in bursts {
                let mut seqs = Vec::new();
                let mut verified = 0u64;
                for (i, (delta, ok)) in b.into_iter().enumerate() {
                    cursor = cursor.saturating_add_signed(delta);
                    // Zero now and then: never accepted.
                    seqs.push(if cursor % 97 == 0 { 0 } else { cursor });
                    if ok {
                        verified |= 1 << i;
                    }
                }
                let got = w.update_burst(&seqs, verified);
                let mut want = 0u64;
                for (i, &s) in seqs.iter().enumerate() {
                    if verified & (1 << i) == 0 || s == 0 {
                        continue;
                    }
                    model.top = model.top.max(s);
                    let inside = model.size == 0 || model.top - s < model.size;
                    if inside && (model.size == 0 || !model.seen.contains(&s)) {
                        want |= 1 << i;
                        model.seen.insert(s);
                    }
                }
                prop_assert_eq!(got, want, "seqs {:?} verified {:#x} top {}", &seqs, verified, model.top);
                prop_assert_eq!(w.top(), model.top);
                for &s in &seqs {
                    prop_assert_eq!(w.check(s).is_ok(), model.accepts(s), "check {}", s);
                }
            }
        }
    }
}
