//! The snapshot publisher under load: readers on their own threads, the
//! publisher publishing and reclaiming as fast as it can. Snapshots record
//! the thread that frees them; every one must be freed, and all of them on
//! the publisher's thread.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use crate::tables::{Action, Publisher, Sad, SadBuilder, Spd, Tables, TunnelId};

/// A snapshot that reports where it was freed.
struct Tracked {
    generation: u64,
    /// Some payload, checked by readers to be the one published with it.
    payload: Vec<u64>,
    freed_on: Arc<Mutex<Vec<ThreadId>>>,
}

impl Tracked {
    fn new(generation: u64, freed_on: &Arc<Mutex<Vec<ThreadId>>>) -> Arc<Tracked> {
        Arc::new(Tracked {
            generation,
            payload: vec![generation; 16],
            freed_on: Arc::clone(freed_on),
        })
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.freed_on.lock().unwrap().push(thread::current().id());
    }
}

#[test]
fn snapshots_are_freed_on_the_publisher_thread_only() {
    let freed_on = Arc::new(Mutex::new(Vec::new()));
    let mut publisher = Publisher::new(Tracked::new(0, &freed_on));
    let stop = Arc::new(AtomicBool::new(false));

    let workers: Vec<_> = (0..3)
        .map(|_| {
            let mut reader = publisher.reader();
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut switches = 0u64;
                let mut last = 0;
                while !stop.load(Ordering::Relaxed) {
                    if reader.quiescent() {
                        switches += 1;
                    }
                    let snapshot = reader.get();
                    assert!(snapshot.generation >= last, "went back in time");
                    assert!(snapshot.payload.iter().all(|&v| v == snapshot.generation));
                    assert_eq!(snapshot.generation, reader.generation());
                    last = snapshot.generation;
                    std::hint::spin_loop();
                }
                // The reader (and its snapshot reference) is dropped here,
                // on the worker thread: that must not be the last reference.
                switches
            })
        })
        .collect();

    let deadline = Instant::now() + Duration::from_secs(2);
    let mut published = 0u64;
    while Instant::now() < deadline {
        published = publisher.publish(Tracked::new(published + 1, &freed_on));
        publisher.reclaim();
        if published & 63 == 0 {
            // Give the workers a chance on a machine with few cores.
            thread::sleep(Duration::from_micros(100));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let switches: Vec<u64> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    assert!(
        switches.iter().all(|&s| s > 0),
        "a worker never saw an update: {switches:?}"
    );
    assert_eq!(publisher.readers(), 0);

    publisher.reclaim();
    assert_eq!(
        publisher.pending(),
        0,
        "no reader left, so nothing may wait"
    );
    drop(publisher);

    let freed_on = freed_on.lock().unwrap();
    assert_eq!(
        freed_on.len() as u64,
        published + 1,
        "every snapshot freed once"
    );
    let here = thread::current().id();
    assert!(
        freed_on.iter().all(|&t| t == here),
        "a snapshot was freed on a worker"
    );
}

#[test]
fn a_stalled_reader_holds_reclaim_back_until_it_passes_or_leaves() {
    let freed_on = Arc::new(Mutex::new(Vec::new()));
    let mut publisher = Publisher::new(Tracked::new(0, &freed_on));
    let mut stalled = publisher.reader();
    let mut active = publisher.reader();
    for g in 1..=3 {
        publisher.publish(Tracked::new(g, &freed_on));
        active.quiescent();
    }
    assert_eq!(publisher.reclaim(), 0);
    assert_eq!(publisher.pending(), 3);
    assert!(!publisher.synchronize(Duration::from_millis(20)));
    assert_eq!(stalled.get().generation, 0);

    assert!(stalled.quiescent());
    assert!(!stalled.quiescent(), "nothing new the second time");
    assert_eq!(stalled.get().generation, 3);
    assert_eq!(publisher.reclaim(), 3);
    assert_eq!(freed_on.lock().unwrap().len(), 3);

    publisher.publish(Tracked::new(4, &freed_on));
    active.quiescent();
    assert_eq!(publisher.reclaim(), 0, "the stalled reader still holds 3");
    drop(stalled);
    assert_eq!(publisher.readers(), 1);
    assert_eq!(publisher.reclaim(), 1);
    assert_eq!(active.get().generation, 4);
}

#[test]
fn synchronize_waits_for_a_reader_on_another_thread() {
    let freed_on = Arc::new(Mutex::new(Vec::new()));
    let mut publisher = Publisher::new(Tracked::new(0, &freed_on));
    let mut reader = publisher.reader();
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                reader.quiescent();
                thread::sleep(Duration::from_millis(1));
            }
        })
    };
    publisher.publish(Tracked::new(1, &freed_on));
    assert!(publisher.synchronize(Duration::from_secs(10)));
    assert_eq!(publisher.pending(), 0);
    assert_eq!(
        freed_on.lock().unwrap().as_slice(),
        &[thread::current().id()]
    );
    stop.store(true, Ordering::Relaxed);
    worker.join().unwrap();
}

/// Stand-in for the ESP engine's SA: its mutable state is an atomic.
struct StandInSa {
    packets: AtomicU64,
}

fn tables(spd: &Arc<Spd>, sad: Sad<StandInSa>) -> Arc<Tables<StandInSa>> {
    Arc::new(Tables::new(Arc::clone(spd), sad, Vec::new()))
}

#[test]
fn sa_state_survives_table_swaps() {
    let spd = Arc::new(Spd::new(&[], Action::Discard));
    let gateway: IpAddr = "192.0.2.1".parse().unwrap();
    let first_sa = Arc::new(StandInSa {
        packets: AtomicU64::new(0),
    });
    let mut sad = SadBuilder::new();
    sad.set_outbound(TunnelId(0), Arc::clone(&first_sa))
        .unwrap();
    sad.insert_inbound(0x1000, gateway, Arc::clone(&first_sa))
        .unwrap();
    let mut publisher = Publisher::new(tables(&spd, sad.build()));

    let mut reader = publisher.reader();
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            let mut sent = 0u64;
            let mut switches = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if reader.quiescent() {
                    switches += 1;
                }
                let t = reader.get();
                // One "burst" through tunnel 0, found afresh in each snapshot.
                if let Some(sa) = t.sad.outbound_sa(TunnelId(0)) {
                    sa.packets.fetch_add(32, Ordering::Relaxed);
                    sent += 32;
                }
                thread::yield_now();
            }
            (sent, switches)
        })
    };

    // Add tunnels one by one, each new table built from the last one.
    for n in 1..50u32 {
        let mut next = publisher.current().sad.to_builder();
        let sa = Arc::new(StandInSa {
            packets: AtomicU64::new(0),
        });
        next.set_outbound(TunnelId(n), Arc::clone(&sa)).unwrap();
        next.insert_inbound(0x1000 + n, gateway, sa).unwrap();
        publisher.publish(tables(&spd, next.build()));
        publisher.reclaim();
        thread::sleep(Duration::from_millis(2));
    }
    stop.store(true, Ordering::Relaxed);
    let (sent, switches) = worker.join().unwrap();

    assert!(switches > 0 && sent > 0);
    assert_eq!(
        first_sa.packets.load(Ordering::Relaxed),
        sent,
        "counts lost in a swap"
    );
    let last = publisher.current();
    assert!(Arc::ptr_eq(
        last.sad.outbound_sa(TunnelId(0)).unwrap(),
        &first_sa
    ));
    assert!(Arc::ptr_eq(
        last.sad.inbound_sa(0x1000, gateway).unwrap(),
        &first_sa
    ));
    assert_eq!(last.sad.sas().len(), 50);
}

/// A watcher sees each publication once, is not a reader (the publisher
/// counts none and reclaims without it), and holds nothing between calls.
#[test]
fn a_watcher_sees_changes_without_holding_reclamation_back() {
    let freed_on = Arc::new(Mutex::new(Vec::new()));
    let mut publisher = Publisher::new(Tracked::new(0, &freed_on));
    let mut watcher = publisher.watcher();
    assert_eq!(publisher.readers(), 0);
    let (g, first) = watcher
        .changed()
        .expect("the first call sees the current one");
    assert_eq!((g, first.generation), (0, 0));
    drop(first);
    assert!(watcher.changed().is_none(), "nothing new");
    publisher.publish(Tracked::new(1, &freed_on));
    publisher.publish(Tracked::new(2, &freed_on));
    // Both replaced snapshots are reclaimed at once: no reader to wait for.
    publisher.reclaim();
    assert_eq!(freed_on.lock().unwrap().len(), 2);
    let (g, newest) = watcher.changed().expect("changed");
    assert_eq!((g, newest.generation), (2, 2), "straight to the newest");
    assert!(watcher.changed().is_none());
}
