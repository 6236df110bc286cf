//! Pools kept after their last handle dropped while mbufs were still out.
//!
//! Its own module so that both `mempool` (which keeps pools here) and
//! `eal` (which frees them before `rte_eal_cleanup`) depend on it, and not
//! on each other: `mempool` uses `eal`, so `eal` must not use `mempool`.

use std::ptr::NonNull;
use std::sync::Mutex;

use dpdk_sys as sys;

/// A pool pointer kept after its last handle dropped while mbufs were out.
struct LeakedPool(NonNull<sys::rte_mempool>);
// SAFETY: only used under the LEAKED mutex for thread-safe DPDK calls.
unsafe impl Send for LeakedPool {}

static LEAKED: Mutex<Vec<LeakedPool>> = Mutex::new(Vec::new());

/// Keeps `raw` until its mbufs have come back (a pool whose last handle
/// dropped while some were out).
pub(crate) fn keep(raw: NonNull<sys::rte_mempool>) {
    if let Ok(mut leaked) = LEAKED.lock() {
        leaked.push(LeakedPool(raw));
    }
}

/// Frees kept pools whose mbufs have all come back (called at EAL drop).
pub(crate) fn free_idle_pools() {
    if let Ok(mut leaked) = LEAKED.lock() {
        leaked.retain(|p| {
            // SAFETY: p is a live pool with no handle; freeing it once its
            // in-use count is 0 is the same reasoning as PoolInner::drop.
            unsafe {
                if sys::rte_mempool_in_use_count(p.0.as_ptr()) == 0 {
                    sys::rte_mempool_free(p.0.as_ptr());
                    false
                } else {
                    true
                }
            }
        });
    }
}

/// True while some pool is kept alive by outstanding mbufs.
pub(crate) fn any_pool_left() -> bool {
    LEAKED.lock().map(|l| !l.is_empty()).unwrap_or(true)
}
