//! Seal and open throughput of every cipher backend, per suite and packet
//! size, through the same `EspCipher` trait the engine calls: the
//! measurement behind `new_cipher`'s choice (docs/crypto.md).
//!
//!     cargo bench -p espgw-esp --features bench-backends --bench aead
//!
//! Without `--features bench-backends` only the default backends run.
//! Environment: ESPGW_BENCH_MS (time per sample, default 20),
//! ESPGW_BENCH_ROUNDS (samples per cell, default 7), ESPGW_BENCH_SUITE
//! (comma-separated suite names to run, default all), ESPGW_BENCH_SIZES
//! (comma-separated payload sizes, default 64,128,256,512,1024,1420,8192)
//! and ESPGW_BENCH_BACKENDS (comma-separated backend column names, default
//! all compiled in).
//!
//! Method. The machine is small and shared, so time is the thread's CPU
//! time (CLOCK_THREAD_CPUTIME_ID: time the core spent on other processes is
//! not counted), the backends of one cell (suite, size, operation) are
//! sampled in turn, round after round, and a cell reports the best and the
//! median sample: load that comes and goes hits every backend alike. Each operation starts by copying the pristine
//! packet into the work buffer (open must start from ciphertext every time;
//! seal does the same so the two compare), so the numbers include one
//! memcpy of the packet. Size = bytes of ESP payload region (payload,
//! padding, pad length, next header); CBC suites round 1420 up to 1424, as
//! padding would.

use std::hint::black_box;
use std::time::{Duration, Instant};

use espgw_esp::crypto::aead::{AeadPrimitive, EspAead};
use espgw_esp::crypto::cbc_hmac::{CbcCipher, CbcHmac};
use espgw_esp::crypto::fast_gcm::{FastGcm, FastGcmIpsecMb};
use espgw_esp::crypto::integrity::{
    Integrity, RingHmacSha1, RingHmacSha256, RustCryptoHmacSha1, RustCryptoHmacSha256,
};
use espgw_esp::crypto::ipsec_mb_aead::IpsecMbAead;
use espgw_esp::crypto::ring_aead::RingAead;
use espgw_esp::crypto::rustcrypto_cbc::{Aes128Cbc, Aes256Cbc};
use espgw_esp::crypto::EspCipher;
use espgw_esp::Suite;

const SIZES: [usize; 7] = [64, 128, 256, 512, 1024, 1420, 8192];

struct Backend {
    name: String,
    cipher: Box<dyn EspCipher>,
}

fn aead<P: AeadPrimitive + 'static>(name: &str, suite: Suite) -> Backend {
    let keymat = vec![0x5a; suite.key_len()];
    Backend {
        name: name.to_string(),
        cipher: Box::new(EspAead::<P>::new(suite, &keymat).unwrap()),
    }
}

fn cbc<C: CbcCipher + 'static, M: Integrity + 'static>(name: &str, suite: Suite) -> Backend {
    let key = vec![0x5a; suite.key_len()];
    let auth = vec![0xa5; suite.auth_key_len()];
    Backend {
        name: name.to_string(),
        cipher: Box::new(CbcHmac::<C, M>::new(suite, &key, &auth).unwrap()),
    }
}

/// Every backend compiled in for `suite`; `new_cipher` builds one of these.
fn backends(suite: Suite) -> Vec<Backend> {
    let mut all = Vec::new();
    if suite.is_aead() {
        all.push(aead::<RingAead>("ring", suite));
        all.push(aead::<IpsecMbAead>("ipsec-mb", suite));
        if suite != Suite::Chacha20Poly1305 {
            all.push(aead::<FastGcm>("fast-gcm", suite));
            all.push(aead::<FastGcmIpsecMb>("fast-gcm-ipsec-mb", suite));
        }
        #[cfg(feature = "awslc")]
        all.push(aead::<espgw_esp::crypto::awslc::AwsLcAead>(
            "aws-lc-rs",
            suite,
        ));
        #[cfg(feature = "rustcrypto-aead")]
        all.push(aead::<espgw_esp::crypto::rustcrypto_aead::RustCryptoAead>(
            "rustcrypto",
            suite,
        ));
        return all;
    }
    // Labels are "CBC backend / HMAC backend".
    macro_rules! cbc_combos {
        ($aes:ty, $awslc_aes:ident, $rc_mac:ty, $ring_mac:ty, $awslc_mac:ident) => {{
            all.push(cbc::<$aes, $rc_mac>("rustcrypto / rustcrypto", suite));
            all.push(cbc::<$aes, $ring_mac>("rustcrypto / ring", suite));
            #[cfg(feature = "awslc")]
            {
                use espgw_esp::crypto::awslc::{$awslc_aes, $awslc_mac};
                all.push(cbc::<$aes, $awslc_mac>("rustcrypto / aws-lc", suite));
                all.push(cbc::<$awslc_aes, $rc_mac>("aws-lc / rustcrypto", suite));
                all.push(cbc::<$awslc_aes, $ring_mac>("aws-lc / ring", suite));
                all.push(cbc::<$awslc_aes, $awslc_mac>("aws-lc / aws-lc", suite));
            }
        }};
    }
    match suite {
        Suite::Aes128Sha256 => cbc_combos!(
            Aes128Cbc,
            AwsLcAes128Cbc,
            RustCryptoHmacSha256,
            RingHmacSha256,
            AwsLcHmacSha256
        ),
        Suite::Aes256Sha256 => cbc_combos!(
            Aes256Cbc,
            AwsLcAes256Cbc,
            RustCryptoHmacSha256,
            RingHmacSha256,
            AwsLcHmacSha256
        ),
        Suite::Aes128Sha1 => cbc_combos!(
            Aes128Cbc,
            AwsLcAes128Cbc,
            RustCryptoHmacSha1,
            RingHmacSha1,
            AwsLcHmacSha1
        ),
        _ => unreachable!(),
    }
    all
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Seal,
    Open,
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU time this thread has run, in nanoseconds. Unlike wall time it does
/// not count the time other processes on this shared machine hold the core.
#[allow(unsafe_code)] // libc call; see the lints note in crates/esp/Cargo.toml
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "CLOCK_THREAD_CPUTIME_ID");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Runs `op` `iters` times; returns CPU nanoseconds per operation.
fn sample(cipher: &dyn EspCipher, op: Op, pristine: &[u8], work: &mut [u8], iters: u64) -> f64 {
    let start = thread_cpu_ns();
    for seq in 1..=iters {
        work.copy_from_slice(pristine);
        match op {
            Op::Seal => cipher.seal(black_box(work), seq, true),
            Op::Open => cipher.open(black_box(work), 1, true).expect("valid packet"),
        }
        black_box(&*work);
    }
    (thread_cpu_ns() - start) as f64 / iters as f64
}

/// Iterations that take about `target` for this cipher.
fn calibrate(
    cipher: &dyn EspCipher,
    op: Op,
    pristine: &[u8],
    work: &mut [u8],
    target: Duration,
) -> u64 {
    let mut iters = 16u64;
    loop {
        let start = Instant::now();
        sample(cipher, op, pristine, work, iters);
        let took = start.elapsed();
        if took >= target / 4 || iters > 1 << 30 {
            let per_iter = took.as_nanos().max(1) as f64 / iters as f64;
            return ((target.as_nanos() as f64 / per_iter) as u64).max(1);
        }
        iters *= 4;
    }
}

struct Cell {
    best_ns: f64,
    median_ns: f64,
}

fn measure_cell(backends: &[Backend], suite: Suite, size: usize, op: Op) -> Vec<Cell> {
    let target = Duration::from_millis(env_or("ESPGW_BENCH_MS", 20));
    let rounds = env_or("ESPGW_BENCH_ROUNDS", 7) as usize;
    let len = 8 + suite.iv_len() + size + suite.icv_len();
    let setups: Vec<(Vec<u8>, Vec<u8>, u64)> = backends
        .iter()
        .map(|b| {
            let mut packet = vec![0u8; len];
            packet[..4].copy_from_slice(&[0x00, 0x00, 0x10, 0x01]);
            for (i, byte) in packet[8 + suite.iv_len()..len - suite.icv_len()]
                .iter_mut()
                .enumerate()
            {
                *byte = i as u8;
            }
            if op == Op::Open {
                b.cipher.seal(&mut packet, 1, true);
            }
            let mut work = packet.clone();
            let iters = calibrate(&*b.cipher, op, &packet, &mut work, target);
            (packet, work, iters)
        })
        .collect();
    let mut samples = vec![Vec::with_capacity(rounds); backends.len()];
    let mut setups = setups;
    for _ in 0..rounds {
        for (i, b) in backends.iter().enumerate() {
            let (packet, work, iters) = &mut setups[i];
            samples[i].push(sample(&*b.cipher, op, packet, work, *iters));
        }
    }
    samples
        .into_iter()
        .map(|mut s| {
            s.sort_by(|a, b| a.total_cmp(b));
            Cell {
                best_ns: s[0],
                median_ns: s[s.len() / 2],
            }
        })
        .collect()
}

fn gbps(size: usize, ns: f64) -> f64 {
    size as f64 * 8.0 / ns
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs this too:
    // keep that a smoke run.
    let smoke = std::env::args().all(|a| a != "--bench");
    let only: Option<String> = std::env::var("ESPGW_BENCH_SUITE").ok();
    println!("# ESP seal/open, Gbit/s of payload (Mops), best of rounds [median]");
    for suite in Suite::ALL {
        if only
            .as_deref()
            .is_some_and(|list| list.split(',').all(|s| s != suite.name()))
        {
            continue;
        }
        let wanted = std::env::var("ESPGW_BENCH_BACKENDS").ok();
        let backends: Vec<Backend> = backends(suite)
            .into_iter()
            .filter(|b| {
                wanted
                    .as_deref()
                    .is_none_or(|list| list.split(',').any(|n| n == b.name))
            })
            .collect();
        println!("\n## {suite}\n");
        print!("| size | op |");
        for b in &backends {
            print!(" {} |", b.name);
        }
        println!();
        print!("|---|---|");
        for _ in &backends {
            print!("---|");
        }
        println!();
        let sizes: Vec<usize> = match std::env::var("ESPGW_BENCH_SIZES") {
            Ok(list) => list.split(',').filter_map(|n| n.parse().ok()).collect(),
            Err(_) => SIZES.to_vec(),
        };
        for size in sizes {
            let size = size.next_multiple_of(suite.block_align());
            for op in [Op::Seal, Op::Open] {
                let cells = if smoke {
                    // One pass to prove every backend runs; no timing.
                    for b in &backends {
                        let mut p = vec![0u8; 8 + suite.iv_len() + size + suite.icv_len()];
                        b.cipher.seal(&mut p, 1, true);
                        b.cipher.open(&mut p, 1, true).expect("round trip");
                    }
                    continue;
                } else {
                    measure_cell(&backends, suite, size, op)
                };
                print!(
                    "| {size} | {} |",
                    if op == Op::Seal { "seal" } else { "open" }
                );
                for c in &cells {
                    print!(
                        " {:.2} ({:.2}) [{:.2}] |",
                        gbps(size, c.best_ns),
                        1e3 / c.best_ns,
                        gbps(size, c.median_ns)
                    );
                }
                println!();
            }
        }
    }
}
