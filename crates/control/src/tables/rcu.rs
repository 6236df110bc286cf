//! Publishing immutable table snapshots to worker threads, RCU-style.
//!
//! The control thread owns a [`Publisher`]; each worker owns a [`Reader`].
//! - A worker reads its snapshot through [`Reader::get`]: a plain reference
//!   to the `Arc` it holds, no atomic operation at all.
//! - Once per poll-loop iteration, at a point where it holds no reference
//!   into the snapshot, the worker calls [`Reader::quiescent`]: one Acquire
//!   load of the published generation. Only when that changed does it take
//!   a lock, clone the new `Arc`, drop its old one, and then store the
//!   generation it now holds into its own cache-line-sized slot.
//! - The publisher keeps every replaced snapshot until each registered
//!   reader's slot shows a newer generation, and only then drops it
//!   ([`Publisher::reclaim`]). A reader drops its old `Arc` *before* it
//!   stores its new generation, so the publisher's copy is always the last
//!   one: snapshots are freed on the control thread, never on a worker
//!   (unless the publisher itself is gone: at shutdown drop the readers
//!   first).
//!
//! A registered reader that stops calling `quiescent` holds reclamation
//! back (memory grows by one snapshot per publish, nothing breaks); a
//! worker that stops drops its `Reader`, which unregisters it.
//!
//! Only safe Rust: `Arc`, `Mutex` and atomics.

use std::sync::atomic::{AtomicU64, Ordering};

// Each slot alone on its cache line(s) (128 bytes on x86_64, where
// adjacent-line prefetch pairs 64-byte lines): a worker's stores to its own
// slot do not slow down other workers' loads.
use crossbeam_utils::CachePadded;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Counts publications; the initial snapshot is generation 0.
pub type Generation = u64;

/// One reader's progress: the generation of the snapshot it holds.
#[derive(Debug, Default)]
struct Slot {
    seen: CachePadded<AtomicU64>,
}

/// What the publisher and its readers share.
struct Shared<T> {
    /// Read by every worker once per poll; written once per publish.
    generation: CachePadded<AtomicU64>,
    /// The current snapshot and its generation, for readers catching up.
    current: Mutex<(Generation, Arc<T>)>,
    /// Slots of the registered readers.
    readers: Mutex<Vec<Arc<Slot>>>,
}

/// Lock, and carry on if another thread panicked while holding the lock:
/// every critical section here leaves the data consistent at each step.
fn lock<X>(m: &Mutex<X>) -> MutexGuard<'_, X> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The control thread's end. See the module documentation.
pub struct Publisher<T> {
    shared: Arc<Shared<T>>,
    generation: Generation,
    current: Arc<T>,
    /// Replaced snapshots not yet known to be unused, oldest first.
    retired: Vec<(Generation, Arc<T>)>,
}

impl<T: Send + Sync> Publisher<T> {
    /// Starts with `initial` as generation 0.
    pub fn new(initial: Arc<T>) -> Publisher<T> {
        Publisher {
            shared: Arc::new(Shared {
                generation: CachePadded::new(AtomicU64::new(0)),
                current: Mutex::new((0, Arc::clone(&initial))),
                readers: Mutex::new(Vec::new()),
            }),
            generation: 0,
            current: initial,
            retired: Vec::new(),
        }
    }

    /// A [`Watcher`] of the published snapshots (not a registered reader).
    pub fn watcher(&self) -> Watcher<T> {
        Watcher {
            shared: Arc::clone(&self.shared),
            seen: None,
        }
    }

    /// Registers a reader that starts on the current snapshot; move it to
    /// the worker thread. Dropping it unregisters it.
    pub fn reader(&self) -> Reader<T> {
        // Holding the registry lock while taking the snapshot means no
        // reclaim can run between "took generation g" and "slot says g".
        let mut readers = lock(&self.shared.readers);
        let (generation, snapshot) = {
            let current = lock(&self.shared.current);
            (current.0, Arc::clone(&current.1))
        };
        let slot = Arc::new(Slot {
            seen: CachePadded::new(AtomicU64::new(generation)),
        });
        readers.push(Arc::clone(&slot));
        drop(readers);
        Reader {
            snapshot,
            generation,
            registration: Registration {
                shared: Arc::clone(&self.shared),
                slot,
            },
        }
    }

    /// Makes `next` the current snapshot; returns its generation. Readers
    /// switch at their next quiescent point. The replaced snapshot is kept
    /// until [`Publisher::reclaim`] finds every reader past it.
    pub fn publish(&mut self, next: Arc<T>) -> Generation {
        self.generation += 1;
        {
            let mut current = lock(&self.shared.current);
            *current = (self.generation, Arc::clone(&next));
        }
        // After the snapshot is in place: a reader that sees the new number
        // finds this snapshot (or a newer one) under the lock.
        self.shared
            .generation
            .store(self.generation, Ordering::Release);
        let previous = std::mem::replace(&mut self.current, next);
        self.retired.push((self.generation - 1, previous));
        self.generation
    }

    /// The oldest generation some reader may still hold; the current one
    /// when no reader is registered.
    fn oldest_in_use(&self) -> Generation {
        lock(&self.shared.readers)
            .iter()
            .map(|slot| slot.seen.load(Ordering::Acquire))
            .min()
            .unwrap_or(self.generation)
    }

    /// Drops the replaced snapshots no reader holds any more, here on the
    /// calling (control) thread; returns how many. Call after each publish
    /// and periodically.
    pub fn reclaim(&mut self) -> usize {
        let oldest = self.oldest_in_use();
        let before = self.retired.len();
        // A reader at generation g still holds snapshot g; it has dropped
        // every older one before it published g in its slot.
        self.retired.retain(|(generation, _)| *generation >= oldest);
        before - self.retired.len()
    }

    /// Waits (polling, sleeping briefly) until every registered reader holds
    /// the current snapshot, then reclaims. Returns false if `timeout`
    /// passed first (a stalled worker); what could be reclaimed still was.
    pub fn synchronize(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let caught_up = self.oldest_in_use() >= self.generation;
            if caught_up || Instant::now() >= deadline {
                self.reclaim();
                return caught_up;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// The current snapshot.
    pub fn current(&self) -> &Arc<T> {
        &self.current
    }

    pub fn generation(&self) -> Generation {
        self.generation
    }

    /// Replaced snapshots still waiting for readers.
    pub fn pending(&self) -> usize {
        self.retired.len()
    }

    /// Registered readers.
    pub fn readers(&self) -> usize {
        lock(&self.shared.readers).len()
    }
}

/// A control-side observer of the published snapshots: it clones the
/// newest one when asked, and only if it changed, but holds none between
/// calls and is not a registered reader, so neither reclamation nor a
/// publish that waits for the readers ever waits for it. For a thread that
/// acts on changes now and then (the runtime's ESP steering, every 20 ms),
/// not for workers: a snapshot it clones is freed on its thread if the
/// publisher dropped its own copy meanwhile.
pub struct Watcher<T> {
    shared: Arc<Shared<T>>,
    seen: Option<Generation>,
}

impl<T> Watcher<T> {
    /// The newest snapshot and its generation if it was published since the
    /// last call (the first call: the current one); otherwise one Acquire
    /// load and `None`.
    pub fn changed(&mut self) -> Option<(Generation, Arc<T>)> {
        let published = self.shared.generation.load(Ordering::Acquire);
        if self.seen == Some(published) {
            return None;
        }
        let (generation, snapshot) = {
            let current = lock(&self.shared.current);
            (current.0, Arc::clone(&current.1))
        };
        self.seen = Some(generation);
        Some((generation, snapshot))
    }
}

/// Removes a reader's slot when the reader goes away.
struct Registration<T> {
    shared: Arc<Shared<T>>,
    slot: Arc<Slot>,
}

impl<T> Drop for Registration<T> {
    fn drop(&mut self) {
        lock(&self.shared.readers).retain(|slot| !Arc::ptr_eq(slot, &self.slot));
    }
}

/// A worker's end. See the module documentation.
pub struct Reader<T> {
    // Field order matters: fields drop in declaration order, so the reader
    // lets go of its snapshot before `registration` removes its slot (and
    // with it the only thing keeping the publisher from freeing that
    // snapshot). Reversed, the worker could drop the last reference.
    snapshot: Arc<T>,
    generation: Generation,
    registration: Registration<T>,
}

impl<T> Reader<T> {
    /// The snapshot this reader holds. Free: no atomic, no lock.
    #[inline]
    pub fn get(&self) -> &T {
        &self.snapshot
    }

    /// Call at a quiescent point, holding no reference from [`Reader::get`]
    /// (the borrow checker enforces that). Switches to the newest snapshot
    /// if there is one and returns true; otherwise costs one Acquire load.
    #[inline]
    pub fn quiescent(&mut self) -> bool {
        let published = self.registration.shared.generation.load(Ordering::Acquire);
        if published == self.generation {
            return false;
        }
        self.catch_up();
        true
    }

    #[cold]
    fn catch_up(&mut self) {
        let (generation, snapshot) = {
            let current = lock(&self.registration.shared.current);
            (current.0, Arc::clone(&current.1))
        };
        // Drop the old reference first, then announce the new generation:
        // once the slot says `generation`, the publisher may free the old
        // snapshot, and it must hold the last reference when it does.
        self.snapshot = snapshot;
        self.generation = generation;
        self.registration
            .slot
            .seen
            .store(generation, Ordering::Release);
    }

    /// Generation of the snapshot held.
    pub fn generation(&self) -> Generation {
        self.generation
    }
}
