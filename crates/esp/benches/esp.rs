//! ESP engine micro-benchmark: encap and decap per suite at 64 and 1420
//! inner bytes, next to the raw `EspCipher::seal` / `open` on the same bytes.
//!
//!     cargo bench -p espgw-esp --bench esp [-- --quick]
//!
//! Every measured loop includes copying the packet into its buffer (the
//! engine works in place, so each iteration needs a fresh packet); that copy
//! is measured on its own and subtracted from both sides. Bursts of 32, one
//! SA, IPv4 outer and inner, no ESN, replay window 1024. Cycles come from
//! the TSC (`_rdtsc`), which on modern x86 ticks at a constant rate that can
//! differ from the core clock under turbo: compare cycles within one run.

use std::hint::black_box;
use std::net::IpAddr;
use std::time::Instant;

use espgw_esp::crypto::{new_cipher, EspCipher};
use espgw_esp::{Encap, InboundSa, Lifetimes, OutboundSa, SaConfig, Suite, Verdict};
use espgw_wire::{PacketBuf, VecBuf};

const BURST: usize = 32;
/// Packets per decap round: each round needs a fresh replay window.
const ROUND: usize = 1024;

#[inline]
#[allow(unsafe_code)] // RDTSC; see the lints note in crates/esp/Cargo.toml
fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions on x86_64; bench-only.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

#[derive(Clone, Copy)]
struct Cost {
    ns: f64,
    cycles: f64,
}

impl core::ops::Sub for Cost {
    type Output = Cost;
    fn sub(self, o: Cost) -> Cost {
        Cost {
            ns: self.ns - o.ns,
            cycles: self.cycles - o.cycles,
        }
    }
}

/// Runs `round` (which handles `per_round` packets) until `budget_s` has
/// passed; returns the best round's cost per packet (least disturbed by the
/// other tenants of a shared machine).
fn measure(budget_s: f64, per_round: usize, mut round: impl FnMut()) -> Cost {
    round(); // warm up
    let start = Instant::now();
    let mut best = Cost {
        ns: f64::MAX,
        cycles: f64::MAX,
    };
    while start.elapsed().as_secs_f64() < budget_s {
        let (t0, c0) = (Instant::now(), tsc());
        round();
        let (c1, t1) = (tsc(), Instant::now());
        let n = per_round as f64;
        let cost = Cost {
            ns: (t1 - t0).as_nanos() as f64 / n,
            cycles: (c1 - c0) as f64 / n,
        };
        if cost.ns < best.ns {
            best = cost;
        }
    }
    best
}

fn config(suite: Suite) -> SaConfig {
    SaConfig {
        suite,
        spi: 0x1000,
        key: vec![0x42; suite.key_len()].into(),
        auth_key: vec![0x24; suite.auth_key_len()].into(),
        esn: false,
        replay_window: 1024,
        encap: Encap::None,
        local: IpAddr::from([192, 0, 2, 1]),
        remote: IpAddr::from([192, 0, 2, 2]),
        lifetimes: Lifetimes::default(),
    }
}

fn inner_packet(len: usize) -> Vec<u8> {
    let mut p = vec![0x5Au8; len];
    p[0] = 0x45;
    p[1] = 0;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[9] = 17;
    p
}

fn cipher(suite: Suite) -> Box<dyn EspCipher> {
    let cfg = config(suite);
    new_cipher(suite, cfg.key.expose(), cfg.auth_key.expose()).unwrap()
}

/// ESP packet length (SPI to ICV) for an inner packet of `len` bytes.
fn esp_len(suite: Suite, len: usize) -> usize {
    let a = suite.block_align();
    8 + suite.iv_len() + (len + 2).div_ceil(a) * a + suite.icv_len()
}

struct Row {
    copy_in: Cost,
    seal: Cost,
    encap: Cost,
    copy_out: Cost,
    open: Cost,
    decap: Cost,
}

fn bench(suite: Suite, len: usize, budget: f64) -> Row {
    let inner = inner_packet(len);
    let payload_at = 8 + suite.iv_len();
    let elen = esp_len(suite, len);

    // Copy of the inner packet into a buffer: the cost shared by both sides.
    let mut bufs: Vec<VecBuf> = (0..BURST).map(|_| VecBuf::from_packet(&inner)).collect();
    let copy_in = measure(budget, BURST, || {
        for b in bufs.iter_mut() {
            b.reset(black_box(&inner), VecBuf::DEFAULT_HEADROOM);
        }
        black_box(&mut bufs);
    });

    // Raw seal: copy the inner packet to the payload area, seal in place.
    let c = cipher(suite);
    let mut raw: Vec<Vec<u8>> = (0..BURST).map(|_| vec![0u8; elen]).collect();
    let mut seq = 0u64;
    let seal = measure(budget, BURST, || {
        // Copy the whole burst first, as the engine loop does.
        for r in raw.iter_mut() {
            r[payload_at..payload_at + len].copy_from_slice(black_box(&inner));
        }
        for r in raw.iter_mut() {
            seq += 1;
            c.seal(r, seq, false);
        }
        black_box(&mut raw);
    });

    // Engine encap: reset the buffer to the inner packet, encap the burst.
    let out = OutboundSa::new(&config(suite), 0).unwrap();
    let mut verdicts = [Verdict::default(); BURST];
    let encap = measure(budget, BURST, || {
        for b in bufs.iter_mut() {
            b.reset(black_box(&inner), VecBuf::DEFAULT_HEADROOM);
        }
        out.encap_burst(&mut bufs, &mut verdicts, 0);
        black_box(&mut bufs);
    });
    assert!(verdicts.iter().all(|v| v.is_forward()));

    // Decap inputs: ROUND distinct packets, so the replay window sees each once per round.
    let sealed: Vec<Vec<u8>> = {
        let sender = OutboundSa::new(&config(suite), 0).unwrap();
        (0..ROUND)
            .map(|_| {
                let mut b = [VecBuf::from_packet(&inner)];
                let mut v = [Verdict::default()];
                sender.encap_burst(&mut b, &mut v, 0);
                b[0].data().to_vec()
            })
            .collect()
    };
    let mut rbufs: Vec<VecBuf> = (0..BURST)
        .map(|_| VecBuf::from_packet(&sealed[0]))
        .collect();
    let copy_out = measure(budget, ROUND, || {
        for chunk in sealed.chunks(BURST) {
            for (b, p) in rbufs.iter_mut().zip(chunk) {
                b.reset(black_box(p), VecBuf::DEFAULT_HEADROOM);
            }
            black_box(&mut rbufs);
        }
    });

    // Raw open on the ESP part of the same packets.
    let mut esp_bufs = vec![vec![0u8; elen]; BURST];
    let open = measure(budget, ROUND, || {
        for (n, chunk) in sealed.chunks(BURST).enumerate() {
            for (b, p) in esp_bufs.iter_mut().zip(chunk) {
                b.copy_from_slice(black_box(&p[20..]));
            }
            for (i, b) in esp_bufs.iter_mut().enumerate() {
                let seq = (n * BURST + i) as u64 + 1;
                c.open(b, seq, false).unwrap();
            }
        }
        black_box(&mut esp_bufs);
    });

    let cfg = config(suite);
    let mut sa = InboundSa::new(&cfg, 0).unwrap();
    let decap = measure(budget, ROUND, || {
        // A fresh window per round (not per packet); its cost is spread
        // over ROUND packets and is negligible.
        sa = InboundSa::new(&cfg, 0).unwrap();
        for chunk in sealed.chunks(BURST) {
            for (b, p) in rbufs.iter_mut().zip(chunk) {
                b.reset(black_box(p), VecBuf::DEFAULT_HEADROOM);
            }
            sa.decap_burst(&mut rbufs, &mut verdicts, 0);
        }
        black_box(&mut rbufs);
    });
    assert!(verdicts.iter().all(|v| v.is_forward()), "{verdicts:?}");

    Row {
        copy_in,
        seal,
        encap,
        copy_out,
        open,
        decap,
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let budget = if quick { 0.05 } else { 0.3 };
    println!(
        "ESP engine vs raw EspCipher, IPv4/IPv4 tunnel, burst {BURST}; per packet, buffer copy subtracted\n"
    );
    println!(
        "{:<17} {:>5} | {:>9} {:>9} {:>6} {:>9} | {:>9} {:>9} {:>6} {:>9}",
        "suite",
        "bytes",
        "seal ns",
        "encap ns",
        "ratio",
        "+cycles",
        "open ns",
        "decap ns",
        "ratio",
        "+cycles"
    );
    for suite in Suite::ALL {
        for len in [64usize, 1420] {
            let r = bench(suite, len, budget);
            let (seal, encap) = (r.seal - r.copy_in, r.encap - r.copy_in);
            let (open, decap) = (r.open - r.copy_out, r.decap - r.copy_out);
            println!(
                "{:<17} {:>5} | {:>9.1} {:>9.1} {:>6.3} {:>9.1} | {:>9.1} {:>9.1} {:>6.3} {:>9.1}",
                suite.name(),
                len,
                seal.ns,
                encap.ns,
                encap.ns / seal.ns,
                encap.cycles - seal.cycles,
                open.ns,
                decap.ns,
                decap.ns / open.ns,
                decap.cycles - open.cycles,
            );
        }
    }
    println!("\n+cycles: TSC cycles the engine adds per packet around the cipher call.");
}
