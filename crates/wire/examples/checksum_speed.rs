//! Measures the Internet checksum's speed on packet-sized buffers.
//! Run: cargo run --release -p espgw-wire --example checksum_speed
use espgw_wire::checksum;
use std::hint::black_box;
use std::time::Instant;

/// Textbook RFC 1071 loop, for comparison.
fn naive(data: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    for pair in data.chunks(2) {
        acc += u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
    }
    while acc > 0xffff {
        acc = (acc >> 16) + (acc & 0xffff);
    }
    !(acc as u16)
}

/// Alternative: 32-bit words into a u64 with no carries, a loop meant to
/// vectorize.
fn words32(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        acc += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    for (i, b) in chunks.remainder().iter().enumerate() {
        acc += u64::from(*b) << (24 - 8 * i);
    }
    while acc > 0xffff {
        acc = (acc >> 16) + (acc & 0xffff);
    }
    !(acc as u16)
}

/// The library's loop before issue 14's wide path (still what it uses
/// under 128 bytes): 8-byte words into a u64 with end-around carry.
fn carry64(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let (s, carry) = acc.overflowing_add(u64::from_be_bytes(c.try_into().unwrap()));
        acc = s + u64::from(carry);
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    let (s, carry) = acc.overflowing_add(u64::from_be_bytes(tail));
    acc = s + u64::from(carry);
    let mut folded = (acc >> 32) + (acc & 0xffff_ffff);
    while folded > 0xffff {
        folded = (folded >> 16) + (folded & 0xffff);
    }
    !(folded as u16)
}

fn main() {
    for size in [20usize, 64, 576, 1500, 9000] {
        let data: Vec<u8> = (0..size).map(|i| (i * 7 + 3) as u8).collect();
        assert_eq!(checksum::checksum(&data), naive(&data));
        assert_eq!(carry64(&data), naive(&data));
        let iters = 5 * (100_000_000 / size.max(64));
        for (name, f) in [
            ("fast", checksum::checksum as fn(&[u8]) -> u16),
            ("naive", naive),
            ("words32", words32),
            ("carry64", carry64),
        ] {
            // Best of 5 runs: the build machine is shared and noisy.
            let mut s = f64::MAX;
            for _ in 0..5 {
                let t = Instant::now();
                let mut x = 0u16;
                for _ in 0..iters / 5 {
                    x ^= f(black_box(&data));
                }
                black_box(x);
                s = s.min(t.elapsed().as_secs_f64() * 5.0);
            }
            println!(
                "{name:>7} {size:>5} B: {:7.2} GB/s {:7.1} ns/call",
                (iters * size) as f64 / s / 1e9,
                s * 1e9 / iters as f64
            );
        }
    }
}
