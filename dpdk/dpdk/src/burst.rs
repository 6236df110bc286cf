//! A fixed-capacity batch of owned mbufs, filled and drained by the burst
//! calls of ports, rings and mempools without touching the heap.

use std::mem::MaybeUninit;

use dpdk_sys as sys;

use crate::mbuf::Mbuf;

/// Up to `N` owned [`Mbuf`]s, stored inline (an array of `N` pointers plus a
/// length), in arrival order.
///
/// Dropping a burst frees the mbufs it still holds (one bulk free).
/// Transmit and enqueue calls take packets from the front and leave the ones
/// that did not go in the burst, still owned, for the caller to retry or to
/// drop with [`Burst::clear`].
pub struct Burst<const N: usize> {
    len: usize,
    slots: [MaybeUninit<Mbuf>; N],
}

impl<const N: usize> Burst<N> {
    /// An empty burst.
    #[inline]
    pub fn new() -> Self {
        Burst {
            len: 0,
            slots: [const { MaybeUninit::uninit() }; N],
        }
    }

    /// The capacity `N`.
    #[inline]
    pub const fn capacity(&self) -> usize {
        N
    }

    /// Number of mbufs held.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no mbuf is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when the burst holds `N` mbufs.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.len == N
    }

    /// Slots left before the burst is full.
    #[inline]
    pub fn free_slots(&self) -> usize {
        N - self.len
    }

    /// Adds `m` at the end, or hands it back when the burst is full.
    #[inline]
    pub fn push(&mut self, m: Mbuf) -> Result<(), Mbuf> {
        if self.len == N {
            return Err(m);
        }
        self.slots[self.len].write(m);
        self.len += 1;
        Ok(())
    }

    /// Removes and returns the last mbuf.
    #[inline]
    pub fn pop(&mut self) -> Option<Mbuf> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        // SAFETY: slot `len` was initialised and is now outside the live
        // range, so it is read out exactly once.
        Some(unsafe { self.slots[self.len].assume_init_read() })
    }

    /// Removes the mbuf at `index`, replacing it with the last one (O(1), the
    /// order changes). Panics if `index >= len()`, like `Vec::swap_remove`.
    #[inline]
    pub fn swap_remove(&mut self, index: usize) -> Mbuf {
        assert!(index < self.len, "Burst::swap_remove index out of range");
        let last = self.len - 1;
        self.as_mut_slice().swap(index, last);
        self.pop().expect("non-empty: checked above")
    }

    /// Keeps the mbufs for which `keep` returns true, in order; frees the others.
    pub fn retain(&mut self, mut keep: impl FnMut(&mut Mbuf) -> bool) {
        let len = self.len;
        // Cut the live range first: if `keep` panics, the unvisited mbufs
        // leak instead of being freed twice.
        self.len = 0;
        let mut kept = 0;
        for i in 0..len {
            // SAFETY: slot i < len is initialised and read out exactly once.
            let mut m = unsafe { self.slots[i].assume_init_read() };
            if keep(&mut m) {
                self.slots[kept].write(m);
                kept += 1;
                self.len = kept;
            }
        }
    }

    /// Frees every mbuf held (one bulk call).
    pub fn clear(&mut self) {
        if self.len == 0 {
            return;
        }
        let n = self.len;
        self.len = 0;
        // SAFETY: the first n slots hold owned mbufs, laid out as an array of
        // rte_mbuf pointers (Mbuf is repr(transparent) over NonNull). Setting
        // len to 0 first means they are never used again.
        unsafe {
            sys::shim_rte_pktmbuf_free_bulk(
                self.slots.as_mut_ptr() as *mut *mut sys::rte_mbuf,
                n as u32,
            )
        }
    }

    /// The mbufs held.
    #[inline]
    pub fn as_slice(&self) -> &[Mbuf] {
        // SAFETY: the first len slots are initialised Mbufs.
        unsafe { std::slice::from_raw_parts(self.slots.as_ptr() as *const Mbuf, self.len) }
    }

    /// The mbufs held, writable.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [Mbuf] {
        // SAFETY: the first len slots are initialised Mbufs.
        unsafe { std::slice::from_raw_parts_mut(self.slots.as_mut_ptr() as *mut Mbuf, self.len) }
    }

    /// Iterates over the mbufs held.
    #[inline]
    pub fn iter(&self) -> std::slice::Iter<'_, Mbuf> {
        self.as_slice().iter()
    }

    /// Iterates over the mbufs held, writable.
    #[inline]
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Mbuf> {
        self.as_mut_slice().iter_mut()
    }

    // ---- for the burst calls of this crate ----

    /// Pointer to the first free slot, as an `rte_mbuf *` array of
    /// `free_slots()` entries for DPDK to fill.
    #[inline]
    pub(crate) fn spare_raw_slots(&mut self) -> *mut *mut sys::rte_mbuf {
        // SAFETY: len <= N, so this is at most one past the end of slots.
        unsafe { self.slots.as_mut_ptr().add(self.len) as *mut *mut sys::rte_mbuf }
    }

    /// Counts `n` more slots after `len` as filled.
    ///
    /// # Safety
    /// DPDK must have written `n <= free_slots()` owned, non-null mbuf
    /// pointers into the slots from [`Burst::spare_raw_slots`].
    #[inline]
    pub(crate) unsafe fn assume_pushed(&mut self, n: usize) {
        debug_assert!(n <= self.free_slots());
        self.len += n;
    }

    /// The held mbufs as an `rte_mbuf *` array of `len()` entries for DPDK to
    /// take from the front.
    #[inline]
    pub(crate) fn raw_slots(&mut self) -> *mut *mut sys::rte_mbuf {
        self.slots.as_mut_ptr() as *mut *mut sys::rte_mbuf
    }

    /// Forgets the first `n` mbufs (DPDK took them) and moves the rest to the front.
    ///
    /// # Safety
    /// `n <= len()`, and DPDK must have taken ownership of the first `n`.
    #[inline]
    pub(crate) unsafe fn assume_taken_front(&mut self, n: usize) {
        debug_assert!(n <= self.len);
        let rest = self.len - n;
        if n > 0 && rest > 0 {
            let base = self.slots.as_mut_ptr();
            // SAFETY (caller + here): slots n..len are initialised; copying
            // them to 0..rest moves them (the old copies are past the new len).
            std::ptr::copy(base.add(n), base, rest);
        }
        self.len = rest;
    }
}

impl<const N: usize> Default for Burst<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Drop for Burst<N> {
    fn drop(&mut self) {
        self.clear();
    }
}

impl<const N: usize> std::fmt::Debug for Burst<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Burst")
            .field("len", &self.len)
            .field("capacity", &N)
            .finish()
    }
}

impl<'a, const N: usize> IntoIterator for &'a Burst<N> {
    type Item = &'a Mbuf;
    type IntoIter = std::slice::Iter<'a, Mbuf>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, const N: usize> IntoIterator for &'a mut Burst<N> {
    type Item = &'a mut Mbuf;
    type IntoIter = std::slice::IterMut<'a, Mbuf>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}
