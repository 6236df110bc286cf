//! Packet-buffer pools (`rte_pktmbuf_pool_create`).

use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::Arc;

use dpdk_sys as sys;

use crate::burst::Burst;
use crate::eal::{ensure_running, LiveGuard};
use crate::error::{libc_errno, Error, Result};
use crate::mbuf::Mbuf;

/// Ask DPDK for memory on any NUMA socket.
pub const SOCKET_ANY: i32 = sys::SOCKET_ID_ANY;

/// Bytes DPDK reserves before the packet in every mbuf (RTE_PKTMBUF_HEADROOM).
pub const MBUF_HEADROOM: u16 = sys::RTE_PKTMBUF_HEADROOM as u16;

/// Ethernet header (14) + two VLAN tags (8) + FCS (4): what a frame adds to the MTU.
const L2_OVERHEAD: u32 = 14 + 8 + 4;

/// A pool of packet buffers. Cheap to clone (shared handle); safe to use from
/// any thread: the pool uses DPDK's default multi-producer/multi-consumer
/// ring, and each EAL lcore has its own cache.
///
/// The pool is freed when the last handle drops and no mbuf from it is still
/// in use; if mbufs are still out, it is kept (leaked) so they stay valid.
#[derive(Clone)]
pub struct Mempool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    raw: NonNull<sys::rte_mempool>,
    data_room: u16,
    _live: LiveGuard,
}

// SAFETY: an rte_mempool created by rte_pktmbuf_pool_create uses the default
// "ring_mp_mc" ops: get/put are safe from any number of threads at once, and
// the per-lcore caches are only touched by their own lcore.
unsafe impl Send for PoolInner {}
// SAFETY: see Send; all methods take &self and are thread-safe in DPDK.
unsafe impl Sync for PoolInner {}

impl Mempool {
    /// Creates a pool of `n_mbufs` packet buffers with `data_room` bytes each
    /// (headroom included: see [`Mempool::data_room_for_mtu`]), a per-lcore
    /// cache of `cache` buffers (0 for none, at most 512) on NUMA `socket`
    /// ([`SOCKET_ANY`] for any).
    pub fn new(name: &str, n_mbufs: u32, cache: u32, data_room: u16, socket: i32) -> Result<Self> {
        ensure_running("Mempool::new")?;
        if data_room <= MBUF_HEADROOM {
            return Err(Error::invalid(format!(
                "mempool {name}: data room {data_room} leaves no space after the {MBUF_HEADROOM}-byte headroom"
            )));
        }
        let c_name = CString::new(name)
            .map_err(|_| Error::invalid(format!("mempool name {name:?} contains NUL")))?;
        // SAFETY: the EAL is running and c_name is a valid C string; DPDK
        // copies the name. A NULL return is handled below.
        let raw = unsafe {
            sys::rte_pktmbuf_pool_create(c_name.as_ptr(), n_mbufs, cache, 0, data_room, socket)
        };
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::from_rte_errno(format!(
                "rte_pktmbuf_pool_create({name}, n={n_mbufs}, cache={cache}, data_room={data_room})"
            ))
        })?;
        Ok(Mempool {
            inner: Arc::new(PoolInner {
                raw,
                data_room,
                _live: LiveGuard::new(),
            }),
        })
    }

    /// The data room (headroom + maximum frame) an mbuf needs to receive a
    /// frame of `mtu` bytes of L3 payload with up to two VLAN tags in one
    /// segment. Add your own margin for ESP growth in tailroom.
    pub fn data_room_for_mtu(mtu: u16) -> u32 {
        u32::from(MBUF_HEADROOM) + u32::from(mtu) + L2_OVERHEAD
    }

    /// The data room of each mbuf (headroom included).
    pub fn data_room(&self) -> u16 {
        self.inner.data_room
    }

    /// Takes one empty mbuf (headroom [`MBUF_HEADROOM`], length 0), or `None`
    /// when the pool is exhausted.
    pub fn alloc(&self) -> Option<Mbuf> {
        // SAFETY: raw is a live pool (we hold a handle); a NULL return means
        // empty. A non-NULL mbuf is reset and exclusively ours.
        let m = unsafe { sys::shim_rte_pktmbuf_alloc(self.inner.raw.as_ptr()) };
        // SAFETY: m is NULL or a freshly allocated mbuf that nobody else holds.
        NonNull::new(m).map(|m| unsafe { Mbuf::from_raw(m) })
    }

    /// Appends `n` empty mbufs to `burst`, all or nothing: fails with ENOSPC
    /// when the burst has less than `n` free slots, ENOMEM when the pool has
    /// fewer than `n` mbufs.
    pub fn alloc_bulk<const N: usize>(&self, burst: &mut Burst<N>, n: usize) -> Result<()> {
        if n > burst.free_slots() {
            return Err(Error::new(
                "Mempool::alloc_bulk: burst too small",
                libc_errno::ENOSPC,
            ));
        }
        let slots = burst.spare_raw_slots();
        // SAFETY: slots points at n (<= free slots) writable pointer slots; the
        // pool is live. On success each slot holds a fresh mbuf we own.
        let ret =
            unsafe { sys::shim_rte_pktmbuf_alloc_bulk(self.inner.raw.as_ptr(), slots, n as u32) };
        if ret != 0 {
            return Err(Error::new("rte_pktmbuf_alloc_bulk", libc_errno::ENOMEM));
        }
        // SAFETY: rte_pktmbuf_alloc_bulk initialised exactly n slots.
        unsafe { burst.assume_pushed(n) };
        Ok(())
    }

    /// Mbufs free in the pool (per-lcore caches included).
    pub fn available(&self) -> u32 {
        // SAFETY: raw is a live pool; the count is a racy snapshot by design.
        unsafe { sys::rte_mempool_avail_count(self.inner.raw.as_ptr()) }
    }

    /// Mbufs taken from the pool and not yet returned.
    pub fn in_use(&self) -> u32 {
        // SAFETY: as in `available`.
        unsafe { sys::rte_mempool_in_use_count(self.inner.raw.as_ptr()) }
    }

    /// The raw pool, for calls this wrapper does not cover. It stays valid
    /// while this handle lives.
    pub fn as_ptr(&self) -> *mut sys::rte_mempool {
        self.inner.raw.as_ptr()
    }
}

impl std::fmt::Debug for Mempool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mempool")
            .field("data_room", &self.inner.data_room)
            .field("available", &self.available())
            .finish()
    }
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        // SAFETY: the pool is live; no handle is left, so nobody can allocate
        // from it any more. If no mbuf is out either, nothing refers to it and
        // it can be freed; otherwise it must stay for those mbufs.
        unsafe {
            if sys::rte_mempool_in_use_count(self.raw.as_ptr()) == 0 {
                sys::rte_mempool_free(self.raw.as_ptr());
            } else {
                crate::kept_pools::keep(self.raw);
            }
        }
    }
}
