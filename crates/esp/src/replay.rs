//! Anti-replay window (RFC 4303 §3.4.3) as an RFC 6479 ring bitmap, and the
//! receiver's inference of the high-order ESN bits (RFC 4303 Appendix A).
//!
//! The bitmap is a ring of `u64` words whose count is a power of two with at
//! least one word more than the window needs. Advancing the window clears only
//! the words it moves into, so nothing is ever shifted. The ring position of a
//! sequence number is simply its low bits.
//!
//! [`ReplayWindow::check`] is the cheap test made before decryption;
//! [`ReplayWindow::update`] is called only once the ICV has verified, so
//! forged packets can never move the window.

/// Largest configurable window (packets): 8 KiB of bitmap per SA.
pub const MAX_REPLAY_WINDOW: u32 = 65536;

/// When anti-replay is off the receiver still needs a window to infer the
/// ESN high bits: accept anything within half the 32-bit space of the top.
const INFERENCE_WINDOW_WHEN_OFF: u64 = 1 << 31;

/// The sequence number is zero, already seen, or left of the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replayed;

/// Receive-side sequence number state of one inbound SA.
#[derive(Clone)]
pub struct ReplayWindow {
    /// Configured window in packets; 0 = anti-replay off.
    size: u64,
    /// Highest sequence number authenticated so far (0: none yet).
    top: u64,
    /// Ring bitmap; `len()` is a power of two.
    words: Box<[u64]>,
}

impl core::fmt::Debug for ReplayWindow {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ReplayWindow")
            .field("size", &self.size)
            .field("top", &self.top)
            .finish()
    }
}

impl ReplayWindow {
    /// A window of `size` packets (0 = off), clamped to [`MAX_REPLAY_WINDOW`].
    pub fn new(size: u32) -> Self {
        let size = u64::from(size.min(MAX_REPLAY_WINDOW));
        // The window's bits span at most ceil(size/64) + 1 words.
        let words = if size == 0 {
            1
        } else {
            (size.div_ceil(64) as usize + 1).next_power_of_two()
        };
        ReplayWindow {
            size,
            top: 0,
            words: vec![0; words].into_boxed_slice(),
        }
    }

    /// A window of `size` packets whose top is `top` and in which every
    /// number up to `top` counts as seen: the state after a restart, when
    /// only the highest number received before it was persisted. Numbers
    /// the old window had not seen yet are refused too (they cannot be told
    /// apart from replays), which costs at most one window of reordered
    /// packets once, never a replay accepted.
    pub fn restored(size: u32, top: u64) -> Self {
        let mut w = ReplayWindow::new(size);
        w.top = top;
        if w.size != 0 && top != 0 {
            w.words.fill(u64::MAX);
            // Bits above `top` in its own word belong to numbers not yet
            // received; the words after it are cleared when the top moves.
            let (word, bit) = w.position(top);
            w.words[word] &= bit | (bit - 1);
        }
        w
    }

    /// Configured size in packets (0 = anti-replay off).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Highest authenticated sequence number (0 before the first packet).
    pub fn top(&self) -> u64 {
        self.top
    }

    /// The full 64-bit sequence number for a received low half, per RFC 4303
    /// Appendix A. `None` when the guess would fall past 2^64 - 1 (such a
    /// packet can only be a replay or a forgery). A guess before subspace
    /// 0 (case B with Th = 0) is subspace 0 instead: no other exists.
    pub fn infer_esn(&self, seq_lo: u32) -> Option<u64> {
        infer_esn(self.size, self.top, seq_lo)
    }

    /// Before decryption: could `seq` be new? Never changes state.
    #[inline]
    pub fn check(&self, seq: u64) -> Result<(), Replayed> {
        if seq == 0 {
            return Err(Replayed);
        }
        if seq > self.top || self.size == 0 {
            return Ok(());
        }
        if self.top - seq >= self.size {
            return Err(Replayed);
        }
        let (word, bit) = self.position(seq);
        if self.words[word] & bit != 0 {
            Err(Replayed)
        } else {
            Ok(())
        }
    }

    /// After the ICV verified: records `seq` as seen and moves the window if
    /// `seq` is the new top. Fails (changing nothing) if `check` would.
    #[inline]
    pub fn update(&mut self, seq: u64) -> Result<(), Replayed> {
        self.check(seq)?;
        if seq > self.top {
            if self.size != 0 {
                self.clear_words_up_to(seq);
            }
            self.top = seq;
        }
        if self.size != 0 {
            let (word, bit) = self.position(seq);
            self.words[word] |= bit;
        }
        Ok(())
    }

    #[inline]
    fn position(&self, seq: u64) -> (usize, u64) {
        let mask = self.words.len() as u64 - 1;
        (((seq >> 6) & mask) as usize, 1u64 << (seq & 63))
    }

    /// Zeroes the ring words that lie after the current top's word up to and
    /// including `new_top`'s word: they still hold bits of numbers that are
    /// now left of the window.
    fn clear_words_up_to(&mut self, new_top: u64) {
        let len = self.words.len() as u64;
        let old_word = self.top >> 6;
        let steps = ((new_top >> 6) - old_word).min(len);
        for i in 1..=steps {
            self.words[((old_word + i) & (len - 1)) as usize] = 0;
        }
    }
}

/// RFC 4303 Appendix A for a window of `size` packets (0: anti-replay
/// off) whose highest authenticated number is `top`.
pub(crate) fn infer_esn(size: u64, top: u64, seq_lo: u32) -> Option<u64> {
    let w = if size == 0 {
        INFERENCE_WINDOW_WHEN_OFF
    } else {
        size
    };
    let tl = top & 0xFFFF_FFFF;
    let th = top >> 32;
    let s = u64::from(seq_lo);
    let hi = if tl >= w - 1 {
        // Case A: the window lies within one 2^32 subspace.
        if s >= tl - (w - 1) {
            th
        } else {
            th.checked_add(1)?
        }
    } else {
        // Case B: the window spans the boundary below Tl.
        let bottom = tl.wrapping_sub(w - 1) & 0xFFFF_FFFF;
        if s >= bottom {
            // With Th = 0 there is no subspace below: the low half can
            // only be subspace 0's, ahead of the top (a sender far ahead;
            // the ICV decides). RFC 4303's Th - 1 would wrap. This matters
            // for a burst decrypted against the window as it was before
            // the burst: one at a time, an earlier packet of the burst
            // would have moved the top into case A.
            th.saturating_sub(1)
        } else {
            th
        }
    };
    if hi > 0xFFFF_FFFF {
        return None;
    }
    Some((hi << 32) | s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn window_at(size: u32, top: u64) -> ReplayWindow {
        let mut w = ReplayWindow::new(size);
        w.update(top).unwrap();
        w
    }

    #[test]
    fn restored_window_refuses_everything_up_to_top_and_accepts_after() {
        for size in [64u32, 100, 1024, 4096] {
            for top in [1u64, 63, 64, 65, 100, 5000, (1 << 32) + 7] {
                let mut w = ReplayWindow::restored(size, top);
                assert_eq!(w.top(), top);
                let low = top.saturating_sub(u64::from(size) + 70).max(1);
                for s in low..=top {
                    assert_eq!(w.check(s), Err(Replayed), "size {size} top {top} seq {s}");
                }
                // Reordered arrivals after the restart: all new, each once.
                for s in [top + 3, top + 1, top + 2, top + 70, top + 65] {
                    assert_eq!(w.update(s), Ok(()), "size {size} top {top} seq {s}");
                    assert_eq!(w.check(s), Err(Replayed));
                }
                assert_eq!(w.check(top), Err(Replayed));
            }
        }
        // Anti-replay off: nothing to restore but the top (for ESN inference).
        let w = ReplayWindow::restored(0, 77);
        assert_eq!((w.top(), w.check(5)), (77, Ok(())));
    }

    #[test]
    fn zero_is_never_valid() {
        assert_eq!(ReplayWindow::new(64).check(0), Err(Replayed));
        assert_eq!(ReplayWindow::new(0).check(0), Err(Replayed));
    }

    #[test]
    fn window_edges() {
        let mut w = window_at(64, 100);
        // 100 - 63 = 37 is the oldest number inside a 64-packet window.
        assert_eq!(w.check(37), Ok(()));
        assert_eq!(w.check(36), Err(Replayed));
        assert_eq!(w.check(100), Err(Replayed));
        assert_eq!(w.check(101), Ok(()));
        w.update(37).unwrap();
        assert_eq!(w.update(37), Err(Replayed));
        // Moving the top by one pushes 37 out and keeps 38 fresh.
        w.update(101).unwrap();
        assert_eq!(w.check(37), Err(Replayed));
        assert_eq!(w.check(38), Ok(()));
    }

    #[test]
    fn big_jump_forgets_everything_old() {
        let mut w = window_at(4096, 5);
        for s in 6..5000 {
            w.update(s).unwrap();
        }
        w.update(1_000_000).unwrap();
        assert_eq!(w.check(1_000_000 - 4095), Ok(()));
        assert_eq!(w.check(1_000_000 - 4096), Err(Replayed));
        assert_eq!(w.check(999_999), Ok(()));
    }

    #[test]
    fn jump_by_exactly_one_ring_keeps_no_stale_bits() {
        // 64-packet window: 2 words rounded to 2. Jumping by 128 lands on the
        // same ring word as the old top; its stale bits must be gone.
        let mut w = window_at(64, 64);
        w.update(65).unwrap();
        w.update(64 + 128 + 1).unwrap();
        assert_eq!(w.check(64 + 128), Ok(()));
        assert_eq!(w.check(64 + 128 - 1), Ok(()));
    }

    #[test]
    fn off_accepts_old_and_repeated() {
        let mut w = window_at(0, 1000);
        w.update(3).unwrap();
        assert_eq!(w.update(3), Ok(()));
        assert_eq!(w.top(), 1000);
    }

    #[test]
    fn window_of_one() {
        let mut w = window_at(1, 10);
        assert_eq!(w.check(10), Err(Replayed));
        assert_eq!(w.check(9), Err(Replayed));
        w.update(11).unwrap();
        assert_eq!(w.check(10), Err(Replayed));
    }

    // RFC 4303 Appendix A: W = 64 unless said otherwise.
    #[test]
    fn esn_case_a_window_within_one_subspace() {
        let w = window_at(64, (5 << 32) | 1000);
        assert_eq!(w.infer_esn(1001), Some((5 << 32) | 1001));
        assert_eq!(w.infer_esn(1000 - 63), Some((5 << 32) | 937));
        // Below the window: must be the next subspace (wrapped sender).
        assert_eq!(w.infer_esn(936), Some((6 << 32) | 936));
        assert_eq!(w.infer_esn(0), Some(6 << 32));
        assert_eq!(w.infer_esn(u32::MAX), Some((5 << 32) | 0xFFFF_FFFF));
    }

    #[test]
    fn esn_case_b_window_spans_subspaces() {
        let w = window_at(64, (5 << 32) | 10);
        // Bottom of window = 10 - 63 mod 2^32 = 2^32 - 53.
        assert_eq!(w.infer_esn(u32::MAX - 52), Some((4 << 32) | 0xFFFF_FFCB));
        assert_eq!(w.infer_esn(u32::MAX), Some((4 << 32) | 0xFFFF_FFFF));
        assert_eq!(w.infer_esn(u32::MAX - 53), Some((5 << 32) | 0xFFFF_FFCA));
        assert_eq!(w.infer_esn(3), Some((5 << 32) | 3));
        assert_eq!(w.infer_esn(11), Some((5 << 32) | 11));
    }

    #[test]
    fn esn_across_the_first_wrap() {
        let mut w = window_at(128, 0xFFFF_FFF0);
        // Sender wrapped: low half 5 is 2^32 + 5.
        let s = w.infer_esn(5).unwrap();
        assert_eq!(s, (1 << 32) | 5);
        w.update(s).unwrap();
        // A late packet from before the wrap still infers to subspace 0.
        assert_eq!(w.infer_esn(0xFFFF_FFF5), Some(0xFFFF_FFF5));
        assert_eq!(w.check(0xFFFF_FFF5), Ok(()));
        assert_eq!(w.check(0xFFFF_FFF0), Err(Replayed));
    }

    #[test]
    fn esn_refuses_impossible_numbers() {
        // Fresh SA, case B with Th = 0: the previous subspace does not
        // exist, so a low half below the window's wrapped bottom is
        // subspace 0's (ahead of the top), not refused.
        let w = ReplayWindow::new(64);
        assert_eq!(w.infer_esn(u32::MAX), Some(u64::from(u32::MAX)));
        assert_eq!(w.check(u64::from(u32::MAX)), Ok(()));
        assert_eq!(w.infer_esn(1), Some(1));
        let w = window_at(64, 10);
        assert_eq!(w.infer_esn(u32::MAX - 52), Some(u64::from(u32::MAX - 52)));
        // Top at the very end of the 64-bit space: there is no next subspace.
        let w = window_at(64, u64::MAX);
        assert_eq!(w.infer_esn(5), None);
        assert_eq!(w.infer_esn(u32::MAX - 1), Some(u64::MAX - 1));
    }

    #[test]
    fn esn_with_window_off_uses_half_space() {
        let w = window_at(0, (2 << 32) | 100);
        assert_eq!(w.infer_esn(50), Some((2 << 32) | 50));
        // 2^31 ahead of the top is still ahead; 2^31 - 1 behind is behind.
        assert_eq!(w.infer_esn(0x8000_0064), Some((2 << 32) | 0x8000_0064));
        assert_eq!(w.infer_esn(0x8000_0065), Some((1 << 32) | 0x8000_0065));
    }

    /// The obvious model: every number seen, plus the highest.
    struct Model {
        size: u64,
        seen: HashSet<u64>,
        top: u64,
    }

    impl Model {
        fn accepts(&self, s: u64) -> bool {
            if s == 0 {
                return false;
            }
            if self.size == 0 || s > self.top {
                return true;
            }
            self.top - s < self.size && !self.seen.contains(&s)
        }
        fn record(&mut self, s: u64) {
            self.seen.insert(s);
            self.top = self.top.max(s);
        }
    }

    proptest! {
        #[test]
        fn matches_reference_model(
            size in prop_oneof![Just(0u32), 1u32..200, Just(4096u32), 4000u32..5000],
            start in prop_oneof![Just(0u64), 0u64..1_000_000, Just(u64::MAX - 100_000)],
            steps in proptest::collection::vec((-5000i64..5000, any::<bool>()), 1..400),
        ) {
            let mut w = ReplayWindow::new(size);
            let mut model = Model { size: u64::from(size), seen: HashSet::new(), top: 0 };
            let mut cursor = start;
            for (delta, authentic) in steps {
                cursor = cursor.saturating_add_signed(delta).max(1);
                let s = cursor;
                let expected = model.accepts(s);
                prop_assert_eq!(w.check(s).is_ok(), expected, "check {} top {}", s, model.top);
                // Forged packets (ICV failure) are checked but never recorded.
                if authentic {
                    prop_assert_eq!(w.update(s).is_ok(), expected);
                    if expected {
                        model.record(s);
                    }
                }
                prop_assert_eq!(w.top(), model.top);
            }
        }

        #[test]
        fn esn_inference_recovers_numbers_inside_the_window(
            size in 1u32..=4096,
            top in 1u64..u64::MAX,
            back in 0u64..4096,
        ) {
            let w = window_at(size, top);
            let s = top.saturating_sub(back % u64::from(size)).max(1);
            prop_assert_eq!(w.infer_esn(s as u32), Some(s));
        }

        #[test]
        fn esn_inference_recovers_numbers_ahead(
            size in 1u32..=4096,
            top in 1u64..(u64::MAX - (1 << 32)),
            ahead in 1u64..(1 << 31),
        ) {
            let w = window_at(size, top);
            let s = top + ahead;
            prop_assert_eq!(w.infer_esn(s as u32), Some(s));
        }
    }
}
