//! Worker lcores: ids, and running a closure on one.
//!
//! Choice: workers are EAL lcores started with `rte_eal_remote_launch`, not
//! std threads registered with `rte_thread_register`. The EAL already
//! creates and pins one thread per lcore given with `-l`/`--lcores` (the
//! config's `lcores` maps onto that directly), every such thread has an lcore
//! id, so mempool caches and per-lcore data work without extra steps, and no
//! affinity crate is needed. [`register_thread`] remains for a non-EAL thread
//! (e.g. the control plane) that wants a mempool cache of its own.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use dpdk_sys as sys;

use crate::eal::ensure_running;
use crate::error::{libc_errno, Error, Result};

/// Makes the calling thread's sleeps end on time. Linux lets the timers of
/// a normal thread fire up to 50 µs late ("timer slack", to batch
/// wake-ups), so a 10 µs sleep of an adaptive-polling worker really lasts
/// about 60 µs, and every packet that arrives while it sleeps waits that
/// long. Returns false where the kernel refused (the sleeps then stay
/// coarse; nothing else changes).
pub fn set_precise_sleep() -> bool {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument by value and
    // changes only this thread's timer slack; no memory is passed.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) == 0 }
}

/// Number of lcores the EAL runs (main included).
pub fn count() -> u32 {
    if !crate::eal::running() {
        return 0;
    }
    // SAFETY: the EAL is running; a plain query.
    unsafe { sys::rte_lcore_count() }
}

/// The main lcore's id (the thread that called `Eal::init`).
pub fn main_id() -> u32 {
    // SAFETY: a plain read of the EAL configuration.
    unsafe { sys::rte_get_main_lcore() }
}

/// Ids of the worker lcores (every enabled lcore but the main one), ascending.
pub fn worker_ids() -> Vec<u32> {
    let mut ids = Vec::new();
    if !crate::eal::running() {
        return ids;
    }
    let max = sys::RTE_MAX_LCORE;
    // SAFETY (each call): a plain iteration over the EAL's lcore table;
    // starting at u32::MAX (-1) yields the first lcore.
    let mut id = unsafe { sys::rte_get_next_lcore(u32::MAX, 1, 0) };
    while id < max {
        ids.push(id);
        id = unsafe { sys::rte_get_next_lcore(id, 1, 0) };
    }
    ids
}

/// The calling thread's lcore id, or `None` for a thread the EAL does not know.
#[inline]
pub fn current() -> Option<u32> {
    // SAFETY: reads a thread-local variable.
    let id = unsafe { sys::shim_rte_lcore_id() };
    (id != sys::LCORE_ID_ANY).then_some(id)
}

/// NUMA socket of an lcore.
pub fn socket_of(lcore: u32) -> u32 {
    // SAFETY: returns 0 for an out-of-range id, no other precondition.
    unsafe { sys::rte_lcore_to_socket_id(lcore) }
}

/// Registers the calling non-EAL thread as an lcore (it gets an lcore id and
/// mempool caches). Unregister with [`unregister_thread`] before it exits.
pub fn register_thread() -> Result<u32> {
    ensure_running("register_thread")?;
    // SAFETY: the EAL is running; registering the calling thread.
    let ret = unsafe { sys::rte_thread_register() };
    if ret < 0 {
        return Err(Error::from_rte_errno("rte_thread_register"));
    }
    current().ok_or_else(|| Error::new("rte_thread_register gave no lcore id", libc_errno::ENOSPC))
}

/// Gives the calling thread's lcore id back (after [`register_thread`]).
pub fn unregister_thread() {
    // SAFETY: a no-op for threads that are not registered.
    unsafe { sys::rte_thread_unregister() }
}

/// The result slot a launched closure fills.
type Slot<T> = Arc<Mutex<Option<std::thread::Result<T>>>>;

/// A closure running on a worker lcore; [`LaunchHandle::wait`] for its result.
/// Dropping the handle waits too, so a worker never outlives its handle.
#[derive(Debug)]
#[must_use = "dropping the handle waits for the worker"]
pub struct LaunchHandle<T> {
    lcore: u32,
    slot: Slot<T>,
    waited: bool,
}

impl<T> LaunchHandle<T> {
    /// The lcore the closure runs on.
    pub fn lcore(&self) -> u32 {
        self.lcore
    }

    /// Waits for the closure to return; `Err` carries its panic payload.
    pub fn wait(mut self) -> std::thread::Result<T> {
        self.wait_lcore();
        self.slot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_else(|| Err(Box::new("worker lcore returned without a result")))
    }

    fn wait_lcore(&mut self) {
        if !self.waited {
            // SAFETY: the lcore is a worker we launched; waiting has no other precondition.
            unsafe { sys::rte_eal_wait_lcore(self.lcore) };
            self.waited = true;
        }
    }
}

impl<T> Drop for LaunchHandle<T> {
    fn drop(&mut self) {
        self.wait_lcore();
    }
}

/// Runs `f` on worker lcore `lcore` (which must be idle). Call from the main lcore.
pub fn launch<T, F>(lcore: u32, f: F) -> Result<LaunchHandle<T>>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    ensure_running("lcore::launch")?;
    if lcore == main_id() {
        return Err(Error::invalid(format!(
            "lcore::launch: lcore {lcore} is the main lcore; run the closure directly"
        )));
    }
    let slot: Slot<T> = Arc::new(Mutex::new(None));
    let out = Arc::clone(&slot);
    let job: Box<dyn FnOnce() + Send> = Box::new(move || {
        // A panic must not unwind into C: catch it and hand it to wait().
        let result = catch_unwind(AssertUnwindSafe(f));
        *out.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
    });
    let arg = Box::into_raw(Box::new(job));
    // SAFETY: the trampoline receives `arg`, a leaked Box<Box<dyn FnOnce>>,
    // and reclaims it exactly once; if the launch fails DPDK never calls it
    // and we reclaim it here instead.
    let ret = unsafe { sys::rte_eal_remote_launch(Some(trampoline), arg.cast(), lcore) };
    if ret < 0 {
        // SAFETY: the launch failed, so the trampoline never took `arg`.
        drop(unsafe { Box::from_raw(arg) });
        return Err(Error::new(
            format!("rte_eal_remote_launch(lcore {lcore})"),
            -ret,
        ));
    }
    Ok(LaunchHandle {
        lcore,
        slot,
        waited: false,
    })
}

unsafe extern "C" fn trampoline(arg: *mut std::ffi::c_void) -> i32 {
    // SAFETY: `arg` is the Box<Box<dyn FnOnce()>> leaked by `launch`, passed
    // to exactly one trampoline call.
    let job = unsafe { Box::from_raw(arg as *mut Box<dyn FnOnce() + Send>) };
    job();
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precise_sleep_sets_this_threads_timer_slack_to_one_nanosecond() {
        std::thread::spawn(|| {
            assert!(set_precise_sleep());
            // SAFETY: PR_GET_TIMERSLACK takes no argument and returns the
            // slack in nanoseconds.
            let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
            assert_eq!(slack, 1);
        })
        .join()
        .unwrap();
        // Only the calling thread changed: this one keeps the default.
        // SAFETY: as above.
        let here = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        assert_ne!(here, 1);
    }
}
