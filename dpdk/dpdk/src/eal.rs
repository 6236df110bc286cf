//! EAL initialisation and clean-up, once per process.
//!
//! Every other object of this crate checks [`running`] before touching DPDK,
//! so nothing can call into DPDK before `rte_eal_init` or after
//! `rte_eal_cleanup`.

use std::ffi::{c_char, CString};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use dpdk_sys as sys;

use crate::error::{libc_errno, Error, Result};

const UNINIT: u8 = 0;
const INITIALISING: u8 = 1;
const RUNNING: u8 = 2;
const FINISHED: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(UNINIT);

/// Live objects (mempools, rings, ports) whose DPDK memory `rte_eal_cleanup`
/// would pull away; clean-up is skipped while any is alive.
static LIVE_OBJECTS: AtomicUsize = AtomicUsize::new(0);

/// True between a successful [`Eal::init`] and the [`Eal`]'s drop.
pub fn running() -> bool {
    STATE.load(Ordering::Acquire) == RUNNING
}

/// Fails with a clear error unless the EAL is up.
pub(crate) fn ensure_running(what: &str) -> Result<()> {
    if running() {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{what}: the DPDK EAL is not initialised"
        )))
    }
}

/// Counts a live object for the clean-up check; drop the guard when it dies.
#[derive(Debug)]
pub(crate) struct LiveGuard(());

impl LiveGuard {
    pub(crate) fn new() -> Self {
        LIVE_OBJECTS.fetch_add(1, Ordering::AcqRel);
        LiveGuard(())
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        LIVE_OBJECTS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The initialised DPDK Environment Abstraction Layer.
///
/// Dropping it waits for every worker lcore, then calls `rte_eal_cleanup` if
/// no mempool, ring or port is alive and no mbuf is outstanding; otherwise
/// it leaves DPDK's memory in place (and says so on stderr), because freeing
/// it would leave those objects dangling. The EAL cannot be initialised again
/// in the same process either way.
#[derive(Debug)]
pub struct Eal {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Eal {
    /// Initialises the EAL with `args`, the EAL arguments *without* a program
    /// name (e.g. `["-l", "0-1", "--in-memory", "--no-pci"]`).
    ///
    /// Can succeed once per process; a second call fails with `EALREADY`.
    /// On failure the error carries DPDK's `rte_errno` text.
    pub fn init(args: &[String]) -> Result<Eal> {
        if STATE
            .compare_exchange(UNINIT, INITIALISING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(Error::new(
                "rte_eal_init: the EAL can be initialised once per process",
                libc_errno::EALREADY,
            ));
        }
        let mut owned = Vec::with_capacity(args.len() + 1);
        owned.push(CString::new("espgw").expect("literal has no NUL"));
        for arg in args {
            match CString::new(arg.as_str()) {
                Ok(c) => owned.push(c),
                Err(_) => {
                    STATE.store(UNINIT, Ordering::Release);
                    return Err(Error::invalid(format!("EAL argument {arg:?} contains NUL")));
                }
            }
        }
        // The EAL keeps pointers into argv (and permutes the array), so both
        // the strings and the array live for the rest of the process.
        let strings: &'static mut [CString] = Vec::leak(owned);
        let argv: &'static mut [*mut c_char] = Vec::leak(
            strings
                .iter_mut()
                .map(|s| s.as_ptr() as *mut c_char)
                .chain(std::iter::once(std::ptr::null_mut()))
                .collect(),
        );
        let argc = (argv.len() - 1) as i32;
        // SAFETY: argv holds argc valid NUL-terminated strings followed by a
        // NULL, all leaked so they outlive the EAL; the STATE guard above makes
        // this the only rte_eal_init call of the process.
        let ret = unsafe { sys::rte_eal_init(argc, argv.as_mut_ptr()) };
        if ret < 0 {
            let err = Error::from_rte_errno(format!("rte_eal_init({})", args.join(" ")));
            // DPDK does not support a second rte_eal_init after a failed one either.
            STATE.store(FINISHED, Ordering::Release);
            return Err(err);
        }
        STATE.store(RUNNING, Ordering::Release);
        Ok(Eal {
            _not_send: std::marker::PhantomData,
        })
    }
}

impl Drop for Eal {
    fn drop(&mut self) {
        // SAFETY: the EAL is running (an Eal exists only after a successful
        // init); waiting for workers has no other precondition.
        unsafe { sys::rte_eal_mp_wait_lcore() };
        // Refuse new objects first, then look at what is still alive.
        STATE.store(FINISHED, Ordering::Release);
        crate::kept_pools::free_idle_pools();
        let live = LIVE_OBJECTS.load(Ordering::Acquire);
        if live > 0 || crate::kept_pools::any_pool_left() {
            eprintln!(
                "dpdk: skipping rte_eal_cleanup: {live} mempool/ring/port object(s) or mbufs still alive"
            );
            return;
        }
        // SAFETY: every worker is idle, and no object of this crate refers to
        // DPDK memory any more (checked above); STATE now refuses new objects.
        let ret = unsafe { sys::rte_eal_cleanup() };
        if ret < 0 {
            eprintln!("dpdk: rte_eal_cleanup failed: errno {}", -ret);
        }
    }
}
