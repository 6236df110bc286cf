//! Lock-free rings (`rte_ring`) that carry owned mbufs between cores.
//!
//! A ring is created single- or multi-producer and single- or
//! multi-consumer. Enqueueing and dequeueing go through [`RingProducer`] and
//! [`RingConsumer`] handles; on a single-producer (single-consumer) ring only
//! one producer (consumer) handle can exist at a time, which is exactly the
//! condition under which DPDK's single-thread fast paths are safe.

use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use dpdk_sys as sys;

use crate::burst::Burst;
use crate::eal::{ensure_running, LiveGuard};
use crate::error::{libc_errno, Error, Result};
use crate::mbuf::Mbuf;

/// Who may enqueue and dequeue at the same time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingMode {
    /// Only one producer handle at a time (faster enqueue).
    pub single_producer: bool,
    /// Only one consumer handle at a time (faster dequeue).
    pub single_consumer: bool,
}

impl RingMode {
    /// Any number of producers and consumers.
    pub const MPMC: RingMode = RingMode {
        single_producer: false,
        single_consumer: false,
    };
    /// One producer, one consumer.
    pub const SPSC: RingMode = RingMode {
        single_producer: true,
        single_consumer: true,
    };
    /// Many producers (e.g. every worker), one consumer.
    pub const MPSC: RingMode = RingMode {
        single_producer: false,
        single_consumer: true,
    };
}

/// A ring of owned mbufs. Cheap to clone (shared handle).
#[derive(Clone)]
pub struct Ring {
    inner: Arc<RingInner>,
}

struct RingInner {
    raw: NonNull<sys::rte_ring>,
    mode: RingMode,
    /// Producer / consumer handles out (counted only for the single-* sides).
    handles: Mutex<(bool, bool)>,
    _live: LiveGuard,
}

// SAFETY: the rte_ring is only touched through enqueue/dequeue calls whose
// thread-safety matches the ring's flags (enforced by the handles), plus
// rte_ring_count, which is safe from any thread.
unsafe impl Send for RingInner {}
// SAFETY: see Send.
unsafe impl Sync for RingInner {}

impl Ring {
    /// Creates a ring that holds up to `capacity` mbufs (any size; DPDK's
    /// EXACT_SZ flag), in memory of NUMA `socket`.
    pub fn new(name: &str, capacity: u32, socket: i32, mode: RingMode) -> Result<Ring> {
        ensure_running("Ring::new")?;
        let c_name = CString::new(name)
            .map_err(|_| Error::invalid(format!("ring name {name:?} contains NUL")))?;
        let mut flags = sys::RING_F_EXACT_SZ;
        if mode.single_producer {
            flags |= sys::RING_F_SP_ENQ;
        }
        if mode.single_consumer {
            flags |= sys::RING_F_SC_DEQ;
        }
        // SAFETY: the EAL is running, c_name is valid; NULL is handled below.
        let raw = unsafe { sys::rte_ring_create(c_name.as_ptr(), capacity, socket, flags) };
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::from_rte_errno(format!("rte_ring_create({name}, {capacity})")))?;
        Ok(Ring {
            inner: Arc::new(RingInner {
                raw,
                mode,
                handles: Mutex::new((false, false)),
                _live: LiveGuard::new(),
            }),
        })
    }

    /// Mbufs in the ring now (a snapshot).
    pub fn len(&self) -> usize {
        // SAFETY: raw is a live ring; rte_ring_count is safe from any thread.
        unsafe { sys::shim_rte_ring_count(self.inner.raw.as_ptr()) as usize }
    }

    /// True when the ring is empty (a snapshot).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A handle for enqueueing. On a single-producer ring this fails with
    /// EBUSY while another producer handle exists.
    pub fn producer(&self) -> Result<RingProducer> {
        self.take(true)?;
        Ok(RingProducer {
            ring: self.clone(),
            _not_sync: std::marker::PhantomData,
        })
    }

    /// A handle for dequeueing (see [`Ring::producer`]).
    pub fn consumer(&self) -> Result<RingConsumer> {
        self.take(false)?;
        Ok(RingConsumer {
            ring: self.clone(),
            _not_sync: std::marker::PhantomData,
        })
    }

    fn take(&self, producer: bool) -> Result<()> {
        let single = if producer {
            self.inner.mode.single_producer
        } else {
            self.inner.mode.single_consumer
        };
        if !single {
            return Ok(());
        }
        let mut h = self.inner.handles.lock().unwrap_or_else(|e| e.into_inner());
        let slot = if producer { &mut h.0 } else { &mut h.1 };
        if *slot {
            return Err(Error::new(
                format!(
                    "ring: single-{} ring already has one",
                    if producer { "producer" } else { "consumer" }
                ),
                libc_errno::EBUSY,
            ));
        }
        *slot = true;
        Ok(())
    }

    fn give_back(&self, producer: bool) {
        let mut h = self.inner.handles.lock().unwrap_or_else(|e| e.into_inner());
        if producer {
            h.0 = false;
        } else {
            h.1 = false;
        }
    }
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("mode", &self.inner.mode)
            .field("len", &self.len())
            .finish()
    }
}

impl Drop for RingInner {
    fn drop(&mut self) {
        // Free the mbufs still queued, then the ring. No handle is left, so
        // nobody else touches the ring.
        let mut rest: Burst<32> = Burst::new();
        loop {
            let room = rest.free_slots() as u32;
            // SAFETY: exclusive access; the spare slots have room for `room` pointers.
            let n = unsafe {
                sys::shim_rte_ring_dequeue_burst(
                    self.raw.as_ptr(),
                    rest.spare_raw_slots() as *mut *mut std::ffi::c_void,
                    room,
                    std::ptr::null_mut(),
                )
            };
            if n == 0 {
                break;
            }
            // SAFETY: the ring only ever holds owned mbufs (RingProducer), n were written.
            unsafe { rest.assume_pushed(n as usize) };
            rest.clear();
        }
        // SAFETY: the ring is empty and unused from now on.
        unsafe { sys::rte_ring_free(self.raw.as_ptr()) };
    }
}

/// Enqueues mbufs into a [`Ring`]. `Send`, not `Sync`.
#[derive(Debug)]
pub struct RingProducer {
    ring: Ring,
    _not_sync: std::marker::PhantomData<std::cell::Cell<()>>,
}

impl RingProducer {
    /// Moves as many mbufs as fit from the front of `burst` into the ring;
    /// returns how many. The rest stay in `burst`, still owned (retry or drop).
    #[inline]
    pub fn enqueue_burst<const N: usize>(&mut self, burst: &mut Burst<N>) -> usize {
        let n = burst.len() as u32;
        if n == 0 {
            return 0;
        }
        // SAFETY: this handle's existence satisfies the ring's producer mode;
        // the first n slots hold owned mbufs; the ring takes the first `sent`.
        let sent = unsafe {
            sys::shim_rte_ring_enqueue_burst(
                self.ring.inner.raw.as_ptr(),
                burst.raw_slots() as *const *mut std::ffi::c_void,
                n,
                std::ptr::null_mut(),
            )
        };
        // SAFETY: sent <= n; the ring owns those now.
        unsafe { burst.assume_taken_front(sent as usize) };
        sent as usize
    }

    /// Enqueues one mbuf, or hands it back when the ring is full.
    pub fn enqueue(&mut self, m: Mbuf) -> std::result::Result<(), Mbuf> {
        let mut one: Burst<1> = Burst::new();
        one.push(m)?;
        if self.enqueue_burst(&mut one) == 1 {
            Ok(())
        } else {
            Err(one.pop().expect("the unsent mbuf stays in the burst"))
        }
    }
}

impl Drop for RingProducer {
    fn drop(&mut self) {
        self.ring.give_back(true);
    }
}

/// Dequeues mbufs from a [`Ring`]. `Send`, not `Sync`.
#[derive(Debug)]
pub struct RingConsumer {
    ring: Ring,
    _not_sync: std::marker::PhantomData<std::cell::Cell<()>>,
}

impl RingConsumer {
    /// Dequeues up to `burst.free_slots()` mbufs, appended to `burst`;
    /// returns how many.
    #[inline]
    pub fn dequeue_burst<const N: usize>(&mut self, burst: &mut Burst<N>) -> usize {
        let room = burst.free_slots() as u32;
        if room == 0 {
            return 0;
        }
        // SAFETY: this handle's existence satisfies the ring's consumer mode;
        // the spare slots have room for `room` pointers; each dequeued pointer
        // is an owned mbuf put there by a RingProducer.
        let n = unsafe {
            sys::shim_rte_ring_dequeue_burst(
                self.ring.inner.raw.as_ptr(),
                burst.spare_raw_slots() as *mut *mut std::ffi::c_void,
                room,
                std::ptr::null_mut(),
            )
        };
        // SAFETY: n <= room slots were written with owned mbufs.
        unsafe { burst.assume_pushed(n as usize) };
        n as usize
    }
}

impl Drop for RingConsumer {
    fn drop(&mut self) {
        self.ring.give_back(false);
    }
}
