//! An owned DPDK packet buffer and its in-place edits ([`PacketBuf`]).
//!
//! The per-packet operations are plain field arithmetic on `rte_mbuf`
//! (`buf_addr`, `data_off`, `data_len`, `pkt_len`, `buf_len`), written here in
//! Rust rather than called through the C shim so they inline into the data
//! path. They cover single-segment mbufs: every PMD we use delivers those
//! when the mempool's data room fits the MTU. A chained mbuf
//! ([`Mbuf::nb_segs`] > 1) exposes only its first segment through
//! [`PacketBuf`], and `append`/`trim` refuse it; callers should drop such
//! packets (count them) rather than process a partial view.

use std::ptr::NonNull;

use dpdk_sys as sys;
use espgw_wire::buf::{NoRoom, PacketBuf};

/// The `ol_flags` bits of a TX checksum request: the L4 checksum kind and
/// the IP version (`PacketBuf::offload_udp_checksum` sets them).
const TX_CHECKSUM_REQUEST: u64 =
    sys::RTE_MBUF_F_TX_L4_MASK | sys::RTE_MBUF_F_TX_IPV4 | sys::RTE_MBUF_F_TX_IPV6;

/// An owned `rte_mbuf`, returned to its pool on drop.
///
/// `repr(transparent)` over a non-null pointer: a `[Mbuf]` has the layout of
/// the `struct rte_mbuf *[]` arrays DPDK's burst calls take.
#[repr(transparent)]
pub struct Mbuf {
    raw: NonNull<sys::rte_mbuf>,
}

// SAFETY: an Mbuf is the only handle to its rte_mbuf (refcnt 1, never
// shared), so moving it to another thread moves exclusive access. Freeing
// from any thread is fine: the pool is multi-producer.
unsafe impl Send for Mbuf {}

impl Mbuf {
    /// Takes ownership of a raw mbuf.
    ///
    /// # Safety
    /// `raw` must be a valid, single-segment-or-chained `rte_mbuf` from a
    /// pktmbuf pool, not owned by anything else (refcnt 1, not in any ring,
    /// queue or other `Mbuf`), and its pool must outlive it.
    #[inline]
    pub unsafe fn from_raw(raw: NonNull<sys::rte_mbuf>) -> Self {
        Mbuf { raw }
    }

    /// Gives up ownership without freeing; the caller must free or hand it on.
    #[inline]
    pub fn into_raw(self) -> NonNull<sys::rte_mbuf> {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }

    /// The raw mbuf, still owned by `self`.
    #[inline]
    pub fn as_ptr(&self) -> *mut sys::rte_mbuf {
        self.raw.as_ptr()
    }

    #[inline]
    fn m(&self) -> &sys::rte_mbuf {
        // SAFETY: raw is valid and exclusively ours for as long as self lives.
        unsafe { self.raw.as_ref() }
    }

    #[inline]
    fn m_mut(&mut self) -> &mut sys::rte_mbuf {
        // SAFETY: as in `m`, and &mut self gives exclusive access.
        unsafe { self.raw.as_mut() }
    }

    /// Number of segments; anything but 1 means a chained mbuf.
    #[inline]
    pub fn nb_segs(&self) -> u16 {
        self.m().nb_segs
    }

    /// Total packet length over all segments (`pkt_len`).
    #[inline]
    pub fn pkt_len(&self) -> u32 {
        self.m().pkt_len
    }

    /// The port the packet arrived on (set by the PMD on receive).
    #[inline]
    pub fn port(&self) -> u16 {
        self.m().port
    }

    /// Offload flags (`ol_flags`, RTE_MBUF_F_*).
    #[inline]
    pub fn ol_flags(&self) -> u64 {
        self.m().ol_flags
    }

    /// The RSS hash the NIC computed, when `ol_flags` has RTE_MBUF_F_RX_RSS_HASH.
    #[inline]
    pub fn rss_hash(&self) -> Option<u32> {
        if self.m().ol_flags & sys::RTE_MBUF_F_RX_RSS_HASH as u64 != 0 {
            // SAFETY: the PMD wrote the rss member when it set the flag; every
            // member of this union is plain integers, so any bits are valid.
            Some(unsafe { self.m().__bindgen_anon_2.hash.rss })
        } else {
            None
        }
    }

    /// The `tx_offload` lengths word (l2_len bits 0-6, l3_len 7-15, ...).
    #[inline]
    pub fn tx_offload(&self) -> u64 {
        // SAFETY: both members of this union are plain integers of the
        // same 8 bytes, so any bits are a valid u64.
        unsafe { self.m().__bindgen_anon_3.tx_offload }
    }

    /// The UDP checksum offload asked of the NIC for this packet, if any:
    /// `(l2_len, l3_len, ipv6)` as `PacketBuf::offload_udp_checksum` set
    /// them (what a benchmark's sink completes in the NIC's stead).
    pub fn udp_checksum_offload(&self) -> Option<(usize, usize, bool)> {
        let flags = self.ol_flags();
        if flags & sys::RTE_MBUF_F_TX_L4_MASK != sys::RTE_MBUF_F_TX_UDP_CKSUM {
            return None;
        }
        let lengths = self.tx_offload();
        Some((
            (lengths & 0x7f) as usize,
            ((lengths >> 7) & 0x1ff) as usize,
            flags & sys::RTE_MBUF_F_TX_IPV6 != 0,
        ))
    }

    /// Withdraws a UDP checksum offload request (a benchmark's sink,
    /// having done the NIC's part, before the mbuf goes round again).
    #[inline]
    pub fn clear_udp_checksum_offload(&mut self) {
        let m = self.m_mut();
        m.ol_flags &= !TX_CHECKSUM_REQUEST;
        m.__bindgen_anon_3.tx_offload = 0;
    }

    /// Clears the offload flags of a received mbuf before it is sent, so
    /// that no stale RX flag is read as a TX offload request, but keeps
    /// the TX UDP checksum request that `PacketBuf::offload_udp_checksum`
    /// made for this transmission (the only TX offload espgw asks for).
    /// That a kept request is this transmission's rests on DPDK's RX
    /// contract: a PMD assigns `ol_flags` of every mbuf it hands out
    /// (rte_pktmbuf_alloc resets them, and the drivers that refill their
    /// rings with rte_mbuf_raw_alloc, where a request from the mbuf's last
    /// transmission is still there, write the whole word on receive, or
    /// their own RX flags would be stale too); the mbufs espgw allocates
    /// itself come reset.
    #[inline]
    pub fn clear_offload_flags(&mut self) {
        self.m_mut().ol_flags &= TX_CHECKSUM_REQUEST;
    }

    /// Appends `bytes` at the end of the packet.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) -> Result<(), NoRoom> {
        let old = self.len();
        self.append(bytes.len())?;
        self.data_mut()[old..].copy_from_slice(bytes);
        Ok(())
    }

    /// Appends `bytes` as a NIC's DMA would write them: with non-temporal
    /// (streaming) stores, which do not pull the buffer's lines into this
    /// core's cache, nor wait for another core that last wrote them to
    /// give them up. A benchmark's generator uses it so that handing a
    /// packet to another core costs what it costs after a real RX, not a
    /// transfer of lines this core just dirtied (docs/multicore.md).
    ///
    /// The stores are weakly ordered: call [`Mbuf::streaming_fence`] after
    /// the last one before another thread may read the packets.
    pub fn extend_from_slice_streaming(&mut self, bytes: &[u8]) -> Result<(), NoRoom> {
        let old = self.len();
        self.append(bytes.len())?;
        let dst = &mut self.data_mut()[old..];
        stream_copy(dst, bytes);
        Ok(())
    }

    /// Orders every streaming store of this thread before its later
    /// stores (an SFENCE): what hands packets written by
    /// [`Mbuf::extend_from_slice_streaming`] to another thread needs it
    /// first, since a ring's release ordering does not cover such stores.
    #[inline]
    pub fn streaming_fence() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: SFENCE only orders stores; SSE is part of x86-64.
        unsafe {
            std::arch::x86_64::_mm_sfence()
        }
    }

    #[inline]
    fn data_ptr(&self) -> *mut u8 {
        let m = self.m();
        // SAFETY: data_off <= buf_len, so the result stays inside the buffer.
        unsafe { (m.buf_addr as *mut u8).add(usize::from(m.data_off)) }
    }
}

impl PacketBuf for Mbuf {
    /// Sets the offload request for the NIC: RTE_MBUF_F_TX_UDP_CKSUM with
    /// the IP version's flag, and `l2_len`/`l3_len` in `tx_offload` (the
    /// other lengths zero: no tunnel or TSO offload). The checksum field
    /// already holds the pseudo-header sum the Intel-style NICs need;
    /// drivers that compute it whole (net_tap) overwrite it.
    #[inline]
    fn offload_udp_checksum(&mut self, l2_len: usize, l3_len: usize, ipv6: bool) {
        let version = if ipv6 {
            sys::RTE_MBUF_F_TX_IPV6
        } else {
            sys::RTE_MBUF_F_TX_IPV4
        };
        // rte_mbuf_core.h: l2_len is bits 0-6 and l3_len bits 7-15 of
        // tx_offload (RTE_MBUF_L2_LEN_BITS, RTE_MBUF_L3_LEN_BITS).
        debug_assert!(l2_len <= 0x7f && l3_len <= 0x1ff, "{l2_len} / {l3_len}");
        let lengths = (l2_len as u64 & 0x7f) | ((l3_len as u64 & 0x1ff) << 7);
        let m = self.m_mut();
        // Assigned, not added to: whatever L4 or IP version request the
        // mbuf still carried goes.
        m.ol_flags = (m.ol_flags & !TX_CHECKSUM_REQUEST) | sys::RTE_MBUF_F_TX_UDP_CKSUM | version;
        m.__bindgen_anon_3.tx_offload = lengths;
    }

    #[inline]
    fn prefetch(&self) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: a prefetch never faults or changes memory; the
            // address is the start of this mbuf's data anyway.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(self.data_ptr() as *const i8) }
        }
    }

    #[inline]
    fn data(&self) -> &[u8] {
        // SAFETY: [data_off, data_off + data_len) lies inside this mbuf's
        // buffer (DPDK invariant kept by every edit below), and the buffer is
        // exclusively ours while self is borrowed.
        unsafe { std::slice::from_raw_parts(self.data_ptr(), usize::from(self.m().data_len)) }
    }

    #[inline]
    fn data_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.m().data_len);
        // SAFETY: as in `data`, with &mut self for exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.data_ptr(), len) }
    }

    #[inline]
    fn headroom(&self) -> usize {
        usize::from(self.m().data_off)
    }

    #[inline]
    fn tailroom(&self) -> usize {
        let m = self.m();
        usize::from(m.buf_len) - usize::from(m.data_off) - usize::from(m.data_len)
    }

    #[inline]
    fn prepend(&mut self, n: usize) -> Result<(), NoRoom> {
        if n > self.headroom() {
            return Err(NoRoom);
        }
        let n16 = n as u16; // n <= data_off, a u16
        let m = self.m_mut();
        m.data_off -= n16;
        m.data_len += n16; // data_off + data_len <= buf_len: no overflow
        m.pkt_len += u32::from(n16);
        Ok(())
    }

    #[inline]
    fn append(&mut self, n: usize) -> Result<(), NoRoom> {
        if self.nb_segs() != 1 || n > self.tailroom() {
            return Err(NoRoom);
        }
        let n16 = n as u16; // n <= tailroom <= buf_len, a u16
        let m = self.m_mut();
        m.data_len += n16;
        m.pkt_len += u32::from(n16);
        Ok(())
    }

    #[inline]
    fn adj(&mut self, n: usize) -> Result<(), NoRoom> {
        if n > usize::from(self.m().data_len) {
            return Err(NoRoom);
        }
        let n16 = n as u16; // n <= data_len, a u16
        let m = self.m_mut();
        m.data_off += n16;
        m.data_len -= n16;
        m.pkt_len -= u32::from(n16);
        Ok(())
    }

    #[inline]
    fn trim(&mut self, n: usize) -> Result<(), NoRoom> {
        if self.nb_segs() != 1 || n > usize::from(self.m().data_len) {
            return Err(NoRoom);
        }
        let n16 = n as u16; // n <= data_len, a u16
        let m = self.m_mut();
        m.data_len -= n16;
        m.pkt_len -= u32::from(n16);
        Ok(())
    }
}

impl Drop for Mbuf {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own the mbuf (and its chain); it is not referenced after this.
        unsafe { sys::shim_rte_pktmbuf_free(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for Mbuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mbuf")
            .field("len", &self.len())
            .field("pkt_len", &self.pkt_len())
            .field("nb_segs", &self.nb_segs())
            .field("headroom", &self.headroom())
            .field("tailroom", &self.tailroom())
            .finish()
    }
}

/// Copies `src` into `dst` (same length) with 16-byte streaming stores for
/// the aligned middle and plain stores for the unaligned ends.
fn stream_copy(dst: &mut [u8], src: &[u8]) {
    // The loads below rely on it: a shorter `src` would be read past its end.
    assert_eq!(dst.len(), src.len(), "stream_copy: lengths differ");
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let head = dst.as_ptr().align_offset(16).min(dst.len());
        dst[..head].copy_from_slice(&src[..head]);
        let body = (dst.len() - head) / 16 * 16;
        let mut at = head;
        while at < head + body {
            // SAFETY: `at + 16 <= dst.len() == src.len()`; dst + at is
            // 16-byte aligned (head aligned it, and `at` moves by 16);
            // the load is unaligned; SSE2 is part of x86-64.
            unsafe {
                let v = _mm_loadu_si128(src.as_ptr().add(at) as *const __m128i);
                _mm_stream_si128(dst.as_mut_ptr().add(at) as *mut __m128i, v);
            }
            at += 16;
        }
        dst[at..].copy_from_slice(&src[at..]);
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

#[cfg(test)]
mod stream_copy_tests {
    use super::stream_copy;

    /// Every length and alignment up to a few vectors: the bytes arrive.
    #[test]
    fn copies_every_length_at_every_alignment() {
        let src: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut buf = vec![0u8; 400];
        for offset in 0..16 {
            for len in 0..src.len().min(buf.len() - offset) {
                buf.fill(0xEE);
                stream_copy(&mut buf[offset..offset + len], &src[..len]);
                super::Mbuf::streaming_fence();
                assert_eq!(
                    &buf[offset..offset + len],
                    &src[..len],
                    "offset {offset} len {len}"
                );
                assert!(buf[..offset].iter().all(|&b| b == 0xEE));
                assert!(buf[offset + len..].iter().all(|&b| b == 0xEE));
            }
        }
    }
}
