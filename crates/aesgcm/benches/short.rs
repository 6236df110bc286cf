//! Seal and open of this crate against ring and intel-ipsec-mb (its direct
//! GCM API, through dpdk/ipsec-mb), per input size: where the fused
//! short-packet code wins and where the libraries' wide code takes over.
//!
//!     cargo bench -p espgw-aesgcm --bench short
//!
//! Each cell is the best of ESPGW_BENCH_ROUNDS (default 7) samples of about
//! ESPGW_BENCH_MS (default 20) milliseconds, the three implementations
//! alternating; AAD is 8 bytes (ESP without ESN). Nanoseconds per
//! operation, and TSC cycles at 2.45 GHz (this project's EPYC).

use std::hint::black_box;
use std::time::Instant;

use espgw_aesgcm::AesGcm;
use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, AES_128_GCM, AES_256_GCM};

const SIZES: [usize; 17] = [
    16, 32, 48, 64, 68, 96, 128, 160, 192, 224, 256, 288, 320, 384, 448, 512, 1420,
];

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn time_per_op(iters: u64, mut op: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..iters {
        op();
    }
    start.elapsed().as_nanos() as f64 / iters as f64
}

fn best_of<const N: usize>(rounds: u64, ms: u64, mut ops: [&mut dyn FnMut(); N]) -> [f64; N] {
    let mut iters = [0u64; N];
    for (i, op) in ops.iter_mut().enumerate() {
        let per = time_per_op(1000, &mut **op);
        iters[i] = ((ms as f64 * 1e6 / per) as u64).max(1);
    }
    let mut best = [f64::MAX; N];
    for _ in 0..rounds {
        for (i, op) in ops.iter_mut().enumerate() {
            best[i] = best[i].min(time_per_op(iters[i], &mut **op));
        }
    }
    best
}

fn main() {
    let smoke = std::env::args().all(|a| a != "--bench");
    let (rounds, ms) = if smoke {
        (1, 1)
    } else {
        (
            env_or("ESPGW_BENCH_ROUNDS", 7),
            env_or("ESPGW_BENCH_MS", 20),
        )
    };
    let nonce = [7u8; 12];
    let aad = [1u8; 8];
    println!(
        "| key | size | op | espgw-aesgcm ns (cycles) | ring ns (cycles) | intel-ipsec-mb ns (cycles) |"
    );
    println!("|---|---|---|---|---|---|");
    for (bits, alg) in [(128, &AES_128_GCM), (256, &AES_256_GCM)] {
        let key = vec![0x5a; bits / 8];
        let ours = AesGcm::new(&key).expect("AES-NI and PCLMULQDQ");
        let theirs = LessSafeKey::new(UnboundKey::new(alg, &key).unwrap());
        let imb = ipsec_mb::GcmKey::new(&key).expect("intel-ipsec-mb initialises");
        for size in SIZES {
            let mut a = vec![3u8; size];
            let mut b = vec![3u8; size];
            let mut c = vec![3u8; size];
            let seal = best_of(
                rounds,
                ms,
                [
                    &mut || {
                        black_box(ours.seal(&nonce, &aad, black_box(&mut a)));
                    },
                    &mut || {
                        let n = Nonce::assume_unique_for_key(nonce);
                        let tag = theirs
                            .seal_in_place_separate_tag(n, Aad::from(&aad), black_box(&mut b))
                            .unwrap();
                        black_box(tag.as_ref()[0]);
                    },
                    &mut || {
                        black_box(imb.seal(&nonce, &aad, black_box(&mut c)));
                    },
                ],
            );
            let mut ct = vec![3u8; size];
            let tag = ours.seal(&nonce, &aad, &mut ct);
            let ring_tag: Tag = tag.into();
            let open = best_of(
                rounds,
                ms,
                [
                    &mut || {
                        a.copy_from_slice(&ct);
                        ours.open(&nonce, &aad, black_box(&mut a), &tag).unwrap();
                    },
                    &mut || {
                        b.copy_from_slice(&ct);
                        let n = Nonce::assume_unique_for_key(nonce);
                        theirs
                            .open_in_place_separate_tag(
                                n,
                                Aad::from(&aad),
                                ring_tag,
                                black_box(&mut b),
                                0..,
                            )
                            .unwrap();
                    },
                    &mut || {
                        c.copy_from_slice(&ct);
                        imb.open(&nonce, &aad, black_box(&mut c), &tag).unwrap();
                    },
                ],
            );
            for (op, [o, r, i]) in [("seal", seal), ("open", open)] {
                println!(
                    "| {bits} | {size} | {op} | {o:.1} ({:.0}) | {r:.1} ({:.0}) | {i:.1} ({:.0}) |",
                    o * 2.45,
                    r * 2.45,
                    i * 2.45
                );
            }
        }
    }
    // Two packets at a time (`seal_two`, one interleaved AES pass) against
    // two `seal` calls: nanoseconds per packet.
    println!();
    println!("| key | size | seal x2 ns per packet | seal_two 128-bit ns per packet | seal_two ns per packet (512-bit where the CPU has it) |");
    println!("|---|---|---|---|---|");
    for bits in [128, 256] {
        let key = vec![0x5a; bits / 8];
        let ours = AesGcm::new(&key).expect("AES-NI and PCLMULQDQ");
        let narrow = AesGcm::new(&key).expect("AES-NI and PCLMULQDQ").narrow();
        let other = [8u8; 12];
        for size in [48, 64, 68, 80, 96, 111] {
            let (mut a, mut b) = (vec![3u8; size], vec![4u8; size]);
            let (mut c, mut d) = (vec![3u8; size], vec![4u8; size]);
            let (mut e, mut f) = (vec![3u8; size], vec![4u8; size]);
            let [one, two_narrow, two] = best_of(
                rounds,
                ms,
                [
                    &mut || {
                        black_box(ours.seal(&nonce, &aad, black_box(&mut a)));
                        black_box(ours.seal(&other, &aad, black_box(&mut b)));
                    },
                    &mut || {
                        black_box(narrow.seal_two(
                            (&nonce, &aad, black_box(&mut e)),
                            (&other, &aad, black_box(&mut f)),
                        ));
                    },
                    &mut || {
                        black_box(ours.seal_two(
                            (&nonce, &aad, black_box(&mut c)),
                            (&other, &aad, black_box(&mut d)),
                        ));
                    },
                ],
            );
            println!(
                "| {bits} | {size} | {:.1} | {:.1} | {:.1} |",
                one / 2.0,
                two_narrow / 2.0,
                two / 2.0
            );
        }
    }
    // The nonce built just before each call, as ESP does, against a nonce
    // that sits unchanged in memory: what reading a freshly stored nonce
    // costs. Built by `esp_nonce` (bytes 0..8 and 8..12, what EspAead
    // uses) and piecewise (the salt, then the IV: what it used before); a
    // load that spans two stores waits for them to reach the cache
    // (docs/crypto.md, "A freshly built nonce"). Nanoseconds per operation.
    println!();
    println!("| key | size | op | nonce at rest ns | esp_nonce just built ns | piecewise just built ns |");
    println!("|---|---|---|---|---|---|");
    for bits in [128, 256] {
        let key = vec![0x5a; bits / 8];
        let ours = AesGcm::new(&key).expect("AES-NI and PCLMULQDQ");
        let imb = ipsec_mb::GcmKey::new(&key).expect("intel-ipsec-mb initialises");
        let alg = if bits == 128 {
            &AES_128_GCM
        } else {
            &AES_256_GCM
        };
        let theirs = LessSafeKey::new(UnboundKey::new(alg, &key).unwrap());
        let ring_seal = |n: [u8; 12], buf: &mut [u8]| {
            theirs
                .seal_in_place_separate_tag(Nonce::assume_unique_for_key(n), Aad::from(&aad), buf)
                .unwrap()
        };
        let salt = [0x11u8, 0x22, 0x33, 0x44];
        let seq = std::cell::Cell::new(0u64);
        let next = || {
            seq.set(seq.get() + 1);
            seq.get()
        };
        let esp_nonce = || espgw_aesgcm::esp_nonce(salt, next());
        let piecewise = || {
            let mut n = [0u8; 12];
            n[..4].copy_from_slice(&salt);
            n[4..].copy_from_slice(&next().to_be_bytes());
            n
        };
        for size in [64, 68, 96, 1420] {
            let mut ct = vec![3u8; size];
            // Every open fails the tag check (a wrong tag; the built nonces
            // differ too) after the same work: the tag is computed before
            // it is compared, and the buffer is left alone.
            let mut bad = ours.seal(&nonce, &aad, &mut ct);
            bad[0] ^= 1;
            let mut bufs: Vec<Vec<u8>> = (0..12).map(|_| ct.clone()).collect();
            let [b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11] = &mut bufs[..] else {
                unreachable!()
            };
            let row: [f64; 12] = best_of(
                rounds,
                ms,
                [
                    &mut || {
                        black_box(ours.seal(black_box(&nonce), &aad, black_box(&mut b0[..])));
                    },
                    &mut || {
                        let n = esp_nonce();
                        black_box(ours.seal(black_box(&n), &aad, black_box(&mut b1[..])));
                    },
                    &mut || {
                        let n = piecewise();
                        black_box(ours.seal(black_box(&n), &aad, black_box(&mut b2[..])));
                    },
                    &mut || {
                        black_box(ours.open(black_box(&nonce), &aad, black_box(&mut b3[..]), &bad))
                            .ok();
                    },
                    &mut || {
                        let n = esp_nonce();
                        black_box(ours.open(black_box(&n), &aad, black_box(&mut b4[..]), &bad))
                            .ok();
                    },
                    &mut || {
                        let n = piecewise();
                        black_box(ours.open(black_box(&n), &aad, black_box(&mut b5[..]), &bad))
                            .ok();
                    },
                    &mut || {
                        black_box(imb.seal(black_box(&nonce), &aad, black_box(&mut b6[..])));
                    },
                    &mut || {
                        let n = esp_nonce();
                        black_box(imb.seal(black_box(&n), &aad, black_box(&mut b7[..])));
                    },
                    &mut || {
                        let n = piecewise();
                        black_box(imb.seal(black_box(&n), &aad, black_box(&mut b8[..])));
                    },
                    &mut || {
                        let _tag = black_box(ring_seal(black_box(nonce), black_box(&mut b9[..])));
                    },
                    &mut || {
                        let _tag =
                            black_box(ring_seal(black_box(esp_nonce()), black_box(&mut b10[..])));
                    },
                    &mut || {
                        let _tag =
                            black_box(ring_seal(black_box(piecewise()), black_box(&mut b11[..])));
                    },
                ],
            );
            for (op, r) in ["seal", "open", "intel-ipsec-mb seal", "ring seal"]
                .iter()
                .zip(row.chunks(3))
            {
                println!(
                    "| {bits} | {size} | {op} | {:.1} | {:.1} | {:.1} |",
                    r[0], r[1], r[2]
                );
            }
        }
    }
    // Open of short inputs: the 128-bit path against the 512-bit one (AVX-512,
    // VAES, VPCLMULQDQ; the same key as the CPU runs it), ESP's 8- and
    // 12-byte AAD; nanoseconds per open.
    let wide = AesGcm::new(&[0x5a; 16]).expect("AES-NI and PCLMULQDQ");
    if !wide.uses_wide_path() {
        println!();
        println!("(no 512-bit short open on this CPU)");
        return;
    }
    println!();
    println!("| key | size | aad | open 128-bit ns | open 512-bit ns | 128-bit / 512-bit |");
    println!("|---|---|---|---|---|---|");
    for bits in [128, 256] {
        let key = vec![0x5a; bits / 8];
        let wide = AesGcm::new(&key).expect("AES-NI and PCLMULQDQ");
        let narrow = AesGcm::new(&key).expect("AES-NI and PCLMULQDQ").narrow();
        for aad_len in [8usize, 12] {
            let aad = &[1u8; 12][..aad_len];
            for size in [16, 48, 64, 68, 80, 96, 111] {
                let mut ct = vec![3u8; size];
                let tag = wide.seal(&nonce, aad, &mut ct);
                let (mut a, mut b) = (ct.clone(), ct.clone());
                let [n, w] = best_of(
                    rounds,
                    ms,
                    [
                        &mut || {
                            a.copy_from_slice(&ct);
                            narrow.open(&nonce, aad, black_box(&mut a), &tag).unwrap();
                        },
                        &mut || {
                            b.copy_from_slice(&ct);
                            wide.open(&nonce, aad, black_box(&mut b), &tag).unwrap();
                        },
                    ],
                );
                println!(
                    "| {bits} | {size} | {aad_len} | {n:.1} | {w:.1} | {:.2} |",
                    n / w
                );
            }
        }
    }
}
