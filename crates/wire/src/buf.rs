//! The packet buffer the ESP engine edits in place.
//!
//! Outer headers are prepended into headroom and the ESP trailer and ICV are
//! appended into tailroom, so a packet is never copied. DPDK mbufs implement
//! this trait (in `dpdk/`), and [`VecBuf`] implements it for tests, fuzzing
//! and the pure-Rust benchmarks.

/// Not enough headroom or tailroom (or length) for the requested change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRoom;

impl core::fmt::Display for NoRoom {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("not enough room in the packet buffer")
    }
}

impl std::error::Error for NoRoom {}

/// A contiguous packet with room to grow at both ends.
pub trait PacketBuf {
    /// The packet bytes.
    fn data(&self) -> &[u8];
    /// The packet bytes, writable.
    fn data_mut(&mut self) -> &mut [u8];
    /// Free bytes before the packet.
    fn headroom(&self) -> usize;
    /// Free bytes after the packet.
    fn tailroom(&self) -> usize;
    /// Grows the packet by `n` bytes at the front (contents unspecified).
    fn prepend(&mut self, n: usize) -> Result<(), NoRoom>;
    /// Grows the packet by `n` bytes at the back (contents unspecified).
    fn append(&mut self, n: usize) -> Result<(), NoRoom>;
    /// Removes `n` bytes from the front.
    fn adj(&mut self, n: usize) -> Result<(), NoRoom>;
    /// Removes `n` bytes from the back.
    fn trim(&mut self, n: usize) -> Result<(), NoRoom>;

    /// Packet length in bytes.
    fn len(&self) -> usize {
        self.data().len()
    }
    /// Hints the CPU to start loading the packet's first bytes (a worker
    /// calls it for a whole burst before touching the headers: with a
    /// NIC the packets arrive in L3 or memory, not in L1). A hint only:
    /// the default does nothing.
    #[inline]
    fn prefetch(&self) {}
    /// Leaves the UDP checksum of the frame in this buffer to the device
    /// that transmits it: the IP header starts `l2_len` bytes in, is
    /// `l3_len` long (`ipv6` says which version) and the UDP checksum
    /// field holds the pseudo-header sum ([`crate::checksum::offload_seed`]).
    /// The caller asks only for a port whose TX UDP checksum offload is
    /// on. A DPDK mbuf sets its offload flags and lengths for the NIC; the
    /// default completes the checksum here, as the NIC would
    /// ([`crate::checksum::complete_offloaded_udp`]), so that a buffer
    /// without a device (tests, the benchmark's sinks) sends it right.
    #[inline]
    fn offload_udp_checksum(&mut self, l2_len: usize, l3_len: usize, ipv6: bool) {
        let _ = ipv6;
        crate::checksum::complete_offloaded_udp_at(self.data_mut(), l2_len + l3_len);
    }
    /// True when the packet holds no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A heap buffer with headroom and tailroom, for tests and benchmarks.
#[derive(Clone)]
pub struct VecBuf {
    storage: Vec<u8>,
    start: usize,
    end: usize,
    /// The last [`PacketBuf::offload_udp_checksum`] request (l2_len,
    /// l3_len, ipv6), kept for tests to see that it was made.
    udp_offload: Option<(usize, usize, bool)>,
}

impl VecBuf {
    /// Headroom that [`VecBuf::from_packet`] leaves, as a DPDK mbuf would (RTE_PKTMBUF_HEADROOM).
    pub const DEFAULT_HEADROOM: usize = 128;
    /// Tailroom that [`VecBuf::from_packet`] leaves: enough for any ESP trailer and ICV.
    pub const DEFAULT_TAILROOM: usize = 128;

    /// A buffer holding `packet` with the given room on each side.
    pub fn with_room(packet: &[u8], headroom: usize, tailroom: usize) -> Self {
        let mut storage = vec![0u8; headroom + packet.len() + tailroom];
        storage[headroom..headroom + packet.len()].copy_from_slice(packet);
        VecBuf {
            storage,
            start: headroom,
            end: headroom + packet.len(),
            udp_offload: None,
        }
    }

    /// The UDP checksum offload asked for this buffer, if any: `(l2_len,
    /// l3_len, ipv6)` of the last [`PacketBuf::offload_udp_checksum`]
    /// (which, having no device, completed the checksum as a NIC would).
    pub fn udp_checksum_offload(&self) -> Option<(usize, usize, bool)> {
        self.udp_offload
    }

    /// A buffer holding `packet` with default headroom and tailroom.
    pub fn from_packet(packet: &[u8]) -> Self {
        Self::with_room(packet, Self::DEFAULT_HEADROOM, Self::DEFAULT_TAILROOM)
    }

    /// Replaces the contents with `packet`, keeping the original capacity split.
    /// Panics if `packet` does not fit in the storage.
    pub fn reset(&mut self, packet: &[u8], headroom: usize) {
        self.start = headroom;
        self.end = headroom + packet.len();
        self.storage[self.start..self.end].copy_from_slice(packet);
        self.udp_offload = None;
    }
}

impl core::fmt::Debug for VecBuf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("VecBuf")
            .field("len", &(self.end - self.start))
            .field("headroom", &self.start)
            .field("tailroom", &(self.storage.len() - self.end))
            .finish()
    }
}

impl PacketBuf for VecBuf {
    fn offload_udp_checksum(&mut self, l2_len: usize, l3_len: usize, ipv6: bool) {
        self.udp_offload = Some((l2_len, l3_len, ipv6));
        crate::checksum::complete_offloaded_udp_at(self.data_mut(), l2_len + l3_len);
    }
    fn data(&self) -> &[u8] {
        &self.storage[self.start..self.end]
    }
    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.end]
    }
    fn headroom(&self) -> usize {
        self.start
    }
    fn tailroom(&self) -> usize {
        self.storage.len() - self.end
    }
    fn prepend(&mut self, n: usize) -> Result<(), NoRoom> {
        if n > self.start {
            return Err(NoRoom);
        }
        self.start -= n;
        Ok(())
    }
    fn append(&mut self, n: usize) -> Result<(), NoRoom> {
        if n > self.tailroom() {
            return Err(NoRoom);
        }
        self.end += n;
        Ok(())
    }
    fn adj(&mut self, n: usize) -> Result<(), NoRoom> {
        if n > self.end - self.start {
            return Err(NoRoom);
        }
        self.start += n;
        Ok(())
    }
    fn trim(&mut self, n: usize) -> Result<(), NoRoom> {
        if n > self.end - self.start {
            return Err(NoRoom);
        }
        self.end -= n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_shrinks_within_room() {
        let mut b = VecBuf::with_room(&[1, 2, 3], 2, 1);
        assert_eq!(b.prepend(3), Err(NoRoom));
        b.prepend(2).unwrap();
        b.data_mut()[..2].copy_from_slice(&[9, 8]);
        assert_eq!(b.data(), &[9, 8, 1, 2, 3]);
        assert_eq!(b.append(2), Err(NoRoom));
        b.append(1).unwrap();
        assert_eq!(b.len(), 6);
        b.adj(2).unwrap();
        b.trim(1).unwrap();
        assert_eq!(b.data(), &[1, 2, 3]);
        assert_eq!(b.trim(4), Err(NoRoom));
        assert_eq!((b.headroom(), b.tailroom()), (2, 1));
    }
}
