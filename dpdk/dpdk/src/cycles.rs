//! The time-stamp counter and the spin-wait hint.

use dpdk_sys as sys;

/// The CPU's time-stamp counter (rdtsc).
#[inline]
pub fn rdtsc() -> u64 {
    // SAFETY: reads the TSC; no preconditions.
    unsafe { sys::shim_rte_rdtsc() }
}

/// TSC ticks per second as the EAL measured it (0 before EAL init).
pub fn tsc_hz() -> u64 {
    if !crate::eal::running() {
        return 0;
    }
    // SAFETY: the EAL is running; a plain read.
    unsafe { sys::rte_get_tsc_hz() }
}

/// CPU hint for a busy-wait loop (x86 `pause`).
#[inline]
pub fn pause() {
    // SAFETY: a CPU hint; no preconditions.
    unsafe { sys::shim_rte_pause() }
}
