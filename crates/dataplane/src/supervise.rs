//! What happens when a worker panics: loudly, the whole gateway stops.
//!
//! A panic in a worker is a bug (workers must not panic on any input), and
//! after one its queues are no longer polled: the ports fill and drop
//! silently while the process looks alive. So the runtime runs each worker
//! lcore's loop under [`Supervisor::guard`], which catches the panic, logs
//! it (worker, lcore, message), marks the worker's published counters
//! (`panics`), and sets the run's stop flag: the control loop sees it within
//! one of its 20 ms sleeps, stops the other workers, writes the final
//! counters and `espgw run` exits with status 70 (EX_SOFTWARE), so the
//! supervisor (systemd `Restart=on-failure`) restarts the gateway. A
//! restart of the worker alone would keep running code that just broke an
//! invariant, with its neighbor cache and staged packets lost.
//!
//! DPDK-free, so the behavior is unit-tested with std threads and the
//! worker's test-only panic hook ([`crate::Worker::inject_panic_after`]).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::counters::WorkerCounters;

/// A worker lcore whose loop panicked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerPanic {
    /// Its index (the I/O lcore of pipeline mode comes after the workers).
    pub worker: usize,
    /// The EAL lcore it ran on (`None` off DPDK, in tests).
    pub lcore: Option<u32>,
    /// The panic's message.
    pub message: String,
}

impl core::fmt::Display for WorkerPanic {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "worker {}", self.worker)?;
        if let Some(lc) = self.lcore {
            write!(f, " (lcore {lc})")?;
        }
        write!(f, " panicked: {}", self.message)
    }
}

/// Shared by the control loop and every worker lcore of a run.
#[derive(Debug)]
pub struct Supervisor {
    /// The run's stop flag (also set by SIGINT/SIGTERM).
    stop: Arc<AtomicBool>,
    /// The first panic of the run: the one the exit reports.
    first: Mutex<Option<WorkerPanic>>,
}

impl Supervisor {
    pub fn new(stop: Arc<AtomicBool>) -> Arc<Supervisor> {
        Arc::new(Supervisor {
            stop,
            first: Mutex::new(None),
        })
    }

    /// Runs a worker lcore's loop `job`. If it panics: an error log line,
    /// `panics` counted in `live` (the counters it last published, which
    /// stand in for the final ones), and the gateway told to stop.
    pub fn guard<T>(
        &self,
        worker: usize,
        lcore: Option<u32>,
        live: &Mutex<WorkerCounters>,
        job: impl FnOnce() -> T,
    ) -> Result<T, WorkerPanic> {
        // The job owns everything it touches; nothing is used after an
        // unwind but `live`, whose lock a panicking worker never holds
        // (it only try_locks to publish, never across packet work).
        let payload = match catch_unwind(AssertUnwindSafe(job)) {
            Ok(v) => return Ok(v),
            Err(payload) => payload,
        };
        let p = WorkerPanic {
            worker,
            lcore,
            message: panic_message(payload.as_ref()),
        };
        tracing::error!(
            worker,
            lcore = lcore.map_or(-1, i64::from),
            panic = %p.message,
            "worker panicked: its queues are no longer polled; stopping the gateway (exit status 70)"
        );
        live.lock().unwrap_or_else(|e| e.into_inner()).panics += 1;
        self.first
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(|| p.clone());
        self.stop.store(true, Ordering::Relaxed);
        Err(p)
    }

    /// The first worker panic of the run, if any.
    pub fn failure(&self) -> Option<WorkerPanic> {
        self.first.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// What a worker lcore's launch handle gave back: its loop's result under
/// [`Supervisor::guard`], or a panic that escaped the guard (none should).
pub type Joined = std::thread::Result<Result<WorkerCounters, WorkerPanic>>;

/// The final counters of every worker lcore (of one that panicked: the
/// copy it last published, `panics` counted) and the first panic, from
/// `joined[k]` = (lcore of worker k, what its handle gave back).
pub fn collect(
    joined: Vec<(Option<u32>, Joined)>,
    lives: &[Arc<Mutex<WorkerCounters>>],
) -> (Vec<WorkerCounters>, Option<WorkerPanic>) {
    let mut counters = Vec::new();
    let mut first = None;
    for (k, (lcore, j)) in joined.into_iter().enumerate() {
        let last_published = || {
            lives
                .get(k)
                .map(|l| l.lock().unwrap_or_else(|e| e.into_inner()).clone())
                .unwrap_or_default()
        };
        match j {
            Ok(Ok(c)) => counters.push(c),
            Ok(Err(p)) => {
                counters.push(last_published());
                first.get_or_insert(p);
            }
            Err(payload) => {
                let mut c = last_published();
                c.panics += 1;
                counters.push(c);
                first.get_or_insert(WorkerPanic {
                    worker: k,
                    lcore,
                    message: panic_message(payload.as_ref()),
                });
            }
        }
    }
    (counters, first)
}

/// The message of a panic payload (`panic!` with a literal or a format).
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic without a message)".to_string()
    }
}

/// Test hook of debug builds: `ESPGW_TEST_WORKER_PANIC=K:N` makes worker
/// `K` panic after its `N`th burst, so that a run's handling of a worker
/// panic can be checked end to end (`docs/operations.md`, exit status).
/// Not in release builds, and not reachable from the config.
#[cfg(debug_assertions)]
pub fn injected_panic(worker: usize) -> Option<u64> {
    let v = std::env::var("ESPGW_TEST_WORKER_PANIC").ok()?;
    let (k, n) = v.split_once(':')?;
    (k.trim().parse::<usize>().ok()? == worker)
        .then(|| n.trim().parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use espgw_wire::VecBuf;

    use super::*;
    use crate::neighbor::SharedNeighbors;
    use crate::pool::VecBufPool;
    use crate::tx::TxQueues;
    use crate::worker::{Now, Worker};

    /// A stand-in for a worker lcore's loop: bursts of frames through a
    /// real worker until `stop`, counters published after each.
    fn worker_loop(
        mut w: Worker<VecBuf, VecBufPool>,
        stop: &AtomicBool,
        live: &Mutex<WorkerCounters>,
    ) -> WorkerCounters {
        let mut tx = TxQueues::new(w.net().ports.len(), 64);
        while !stop.load(Ordering::Relaxed) {
            let mut burst = vec![VecBuf::from_packet(&[0u8; 60])];
            w.process_burst(0, &mut burst, &mut tx, Now { ns: 1 });
            live.lock().unwrap().clone_from(w.counters());
            std::thread::sleep(Duration::from_millis(1));
        }
        w.counters().clone()
    }

    /// Two workers on threads, worker 1 armed to panic after 3 bursts: the
    /// supervisor stops the run (the other worker returns normally), the
    /// outcome names worker 1 and the panic's message, and its counters
    /// (the last it published) record the panic.
    #[test]
    fn a_worker_panic_stops_the_run_and_is_reported() {
        let tables = crate::tests::gateway_a_tables();
        let stop = Arc::new(AtomicBool::new(false));
        let sup = Supervisor::new(Arc::clone(&stop));
        let lives: Vec<_> = (0..2)
            .map(|_| Arc::new(Mutex::new(WorkerCounters::default())))
            .collect();
        let mut threads = Vec::new();
        for (k, live) in lives.iter().enumerate() {
            let mut w = Worker::new(
                k,
                Arc::new(crate::tests::gateway_a_net()),
                Arc::clone(&tables),
                VecBufPool,
                32,
                SharedNeighbors::default(),
            );
            if k == 1 {
                w.inject_panic_after(3);
            }
            let (sup, stop, live) = (Arc::clone(&sup), Arc::clone(&stop), Arc::clone(live));
            threads.push(std::thread::spawn(move || {
                sup.guard(k, None, &live, || worker_loop(w, &stop, &live))
            }));
        }
        // The control loop: until stop (a signal, the duration, or a panic).
        let started = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "a worker panic did not stop the run"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let joined = threads.into_iter().map(|t| (None, t.join())).collect();
        let (counters, failure) = collect(joined, &lives);

        let failure = failure.expect("the run reports the panic");
        assert_eq!((failure.worker, failure.lcore), (1, None));
        assert!(
            failure.message.contains("injected panic"),
            "{}",
            failure.message
        );
        assert_eq!(sup.failure(), Some(failure.clone()));
        assert!(failure.to_string().starts_with("worker 1 panicked: "));
        assert_eq!(counters.len(), 2);
        assert_eq!((counters[0].panics, counters[1].panics), (0, 1));
        assert_eq!(counters[1].bursts, 3, "the last counters it published");
        assert!(counters[0].bursts > 0);
    }

    #[test]
    fn without_a_panic_there_is_no_failure() {
        let stop = Arc::new(AtomicBool::new(false));
        let sup = Supervisor::new(Arc::clone(&stop));
        let live = Mutex::new(WorkerCounters::default());
        let c = WorkerCounters {
            rx: 5,
            ..WorkerCounters::default()
        };
        assert_eq!(sup.guard(0, Some(1), &live, || c.clone()), Ok(c.clone()));
        assert!(!stop.load(Ordering::Relaxed));
        assert_eq!(sup.failure(), None);
        let (counters, failure) = collect(vec![(Some(1), Ok(Ok(c.clone())))], &[]);
        assert_eq!((counters, failure), (vec![c], None));
    }

    #[test]
    fn a_panic_outside_the_guard_still_counts() {
        let payload: Box<dyn Any + Send> = Box::new(format!("boom {}", 7));
        let (counters, failure) = collect(vec![(Some(3), Err(payload))], &[]);
        assert_eq!(counters[0].panics, 1);
        assert_eq!(
            failure.unwrap().to_string(),
            "worker 0 (lcore 3) panicked: boom 7"
        );
    }

    #[cfg(debug_assertions)]
    #[test]
    fn the_debug_hook_reads_worker_and_bursts() {
        // Process-wide: the variable name is used by this test only.
        std::env::set_var("ESPGW_TEST_WORKER_PANIC", "1:40");
        assert_eq!(injected_panic(1), Some(40));
        assert_eq!(injected_panic(0), None);
        std::env::remove_var("ESPGW_TEST_WORKER_PANIC");
        assert_eq!(injected_panic(1), None);
    }
}
