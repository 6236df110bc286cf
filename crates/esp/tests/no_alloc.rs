//! The hot path allocates nothing: encap and decap bursts run under a
//! counting global allocator that must see zero allocations.
//! Only the test's own thread is counted: the harness's other threads may
//! allocate at any moment (CI once saw 4 allocations on a loaded machine
//! while this thread's encap ran).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use common::*;
use espgw_esp::{Suite, Verdict};
use espgw_wire::{PacketBuf, VecBuf};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
/// Address of the counted thread's `MARK` (0: none yet).
static COUNTED_THREAD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // Const-initialised and without Drop: reading its address never
    // allocates, so the allocator itself may use it.
    static MARK: u8 = const { 0 };
}

fn this_thread() -> usize {
    MARK.with(|m| m as *const u8 as usize)
}

fn count() {
    if this_thread() == COUNTED_THREAD.load(SeqCst) {
        ALLOCATIONS.fetch_add(1, SeqCst);
    }
}

// SAFETY: forwards to the system allocator unchanged, only counting.
// (GlobalAlloc is an unsafe trait; crates/esp/Cargo.toml lists the few
// items of this crate allowed `unsafe`.)
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn encap_and_decap_bursts_do_not_allocate() {
    COUNTED_THREAD.store(this_thread(), SeqCst);
    // The counter sees this thread's allocations (so a zero below means
    // something), and not another thread's.
    static GO: AtomicUsize = AtomicUsize::new(0);
    let other = std::thread::spawn(|| {
        while GO.load(SeqCst) == 0 {
            std::hint::spin_loop();
        }
        drop(std::hint::black_box(vec![1u8; 10]));
        GO.store(2, SeqCst);
    });
    let probe = ALLOCATIONS.load(SeqCst);
    GO.store(1, SeqCst);
    while GO.load(SeqCst) != 2 {
        std::hint::spin_loop();
    }
    assert_eq!(
        ALLOCATIONS.load(SeqCst),
        probe,
        "another thread was counted"
    );
    other.join().unwrap();
    let probe = ALLOCATIONS.load(SeqCst);
    drop(std::hint::black_box(vec![1u8; 10]));
    assert!(ALLOCATIONS.load(SeqCst) > probe);

    for suite in Suite::ALL {
        for (esn, outer_v6, udp) in [(false, false, false), (true, true, true)] {
            let cfg = config(suite, esn, outer_v6, udp, &mut Rng(3));
            let out = outbound(&cfg);
            let inb = inbound(&peer_view(&cfg));
            let packets: Vec<Vec<u8>> = (0..32)
                .map(|i| inner_packet(i % 2 == 0, &vec![i as u8; i * 40]))
                .collect();
            let mut bufs: Vec<VecBuf> = packets.iter().map(|p| VecBuf::from_packet(p)).collect();
            let mut verdicts = vec![Verdict::default(); bufs.len()];
            // Tampered copy and a replay in the decap burst exercise the drop paths too.
            let before = ALLOCATIONS.load(SeqCst);
            out.encap_burst(&mut bufs, &mut verdicts, 0);
            let encap_allocs = ALLOCATIONS.load(SeqCst) - before;
            assert!(verdicts.iter().all(|v| v.is_forward()));
            let mut burst = bufs.clone();
            burst[3] = burst[2].clone();
            let n = burst[4].len();
            burst[4].data_mut()[n - 1] ^= 1;
            let before = ALLOCATIONS.load(SeqCst);
            inb.decap_burst(&mut burst, &mut verdicts, 0);
            let decap_allocs = ALLOCATIONS.load(SeqCst) - before;
            assert_eq!(verdicts.iter().filter(|v| !v.is_forward()).count(), 2);
            assert_eq!((encap_allocs, decap_allocs), (0, 0), "{suite}");
        }
    }
}
