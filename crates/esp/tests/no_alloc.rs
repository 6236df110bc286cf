//! The hot path allocates nothing: encap and decap bursts run under a
//! counting global allocator that must see zero allocations.
//! (One test in this binary, so no other test thread allocates meanwhile.)

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

use common::*;
use espgw_esp::{Suite, Verdict};
use espgw_wire::{PacketBuf, VecBuf};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, SeqCst);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, SeqCst);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn encap_and_decap_bursts_do_not_allocate() {
    // The counter sees allocations at all (so a zero below means something).
    let probe = ALLOCATIONS.load(SeqCst);
    drop(std::hint::black_box(vec![1u8; 10]));
    assert!(ALLOCATIONS.load(SeqCst) > probe);

    for suite in Suite::ALL {
        for (esn, outer_v6, udp) in [(false, false, false), (true, true, true)] {
            let cfg = config(suite, esn, outer_v6, udp, &mut Rng(3));
            let out = outbound(&cfg);
            let mut inb = inbound(&peer_view(&cfg));
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
