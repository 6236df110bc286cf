//! Where a worker gets a fresh buffer for a packet it originates (ARP and
//! ND requests). Everything else is answered or forwarded in the buffer it
//! arrived in.

use espgw_wire::{PacketBuf, VecBuf};

/// A source of empty packet buffers.
pub trait BufPool<B: PacketBuf> {
    /// An empty buffer (length 0) with headroom and at least 1514 bytes of
    /// tailroom, or `None` when exhausted.
    fn alloc(&self) -> Option<B>;
}

/// Heap buffers, for tests and the pure-Rust benchmarks.
#[derive(Debug, Clone, Copy, Default)]
pub struct VecBufPool;

impl BufPool<VecBuf> for VecBufPool {
    fn alloc(&self) -> Option<VecBuf> {
        Some(VecBuf::with_room(&[], VecBuf::DEFAULT_HEADROOM, 2048))
    }
}
