//! The decap fuzz target's body on stable Rust: the checked-in seed corpus
//! (fuzz/corpus/decap) plus a few hundred thousand random and mutated
//! inputs, so CI exercises it without nightly or cargo-fuzz. The same body
//! runs under libFuzzer with `cargo +nightly fuzz run decap` in crates/esp/fuzz.
//!
//! Regenerate the seed corpus with
//! `cargo test -p espgw-esp --test fuzz_decap -- --ignored write_seed_corpus`.

mod common;
mod fuzz_body;

use std::path::PathBuf;

use common::Rng;
use espgw_esp::{OutboundSa, Verdict};
use espgw_wire::{PacketBuf, VecBuf};

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/decap")
}

fn corpus() -> Vec<Vec<u8>> {
    let mut entries: Vec<_> = std::fs::read_dir(corpus_dir())
        .expect("seed corpus directory")
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    entries.sort();
    entries
}

/// Real packets: for every selector (SA), a few inner packets encapped with
/// that SA's keys, prefixed with the selector byte.
fn seed_inputs() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    // Per suite: plain ESP; ESN near the 2^32 boundary; UDP with a 4096
    // window; UDP + ESN with the window off.
    let variants = [0x00u8, 0x08 | 0x40 | 0x10, 0x10 | 0x20, 0x18];
    for selector in
        (0..espgw_esp::Suite::ALL.len() as u8).flat_map(|suite| variants.map(|v| suite | v))
    {
        let cfg = fuzz_body::config(selector);
        let mut peer = cfg.clone();
        std::mem::swap(&mut peer.local, &mut peer.remote);
        let sa = OutboundSa::new(&peer, 0)
            .unwrap()
            .starting_after(fuzz_body::start(selector));
        for (v6, size) in [(false, 0), (true, 40)] {
            let inner = common::inner_packet(v6, &vec![0xA5; size]);
            let mut bufs = [VecBuf::from_packet(&inner)];
            let mut verdicts = [Verdict::default()];
            sa.encap_burst(&mut bufs, &mut verdicts, 0);
            assert!(verdicts[0].is_forward());
            let mut input = vec![selector];
            input.extend_from_slice(bufs[0].data());
            out.push(input);
        }
    }
    out
}

#[test]
#[ignore = "writes fuzz/corpus/decap; run by hand"]
fn write_seed_corpus() {
    std::fs::create_dir_all(corpus_dir()).unwrap();
    for (i, input) in seed_inputs().iter().enumerate() {
        std::fs::write(corpus_dir().join(format!("seed-{i:03}")), input).unwrap();
    }
}

#[test]
fn seed_corpus_packets_decap() {
    let corpus = corpus();
    assert!(
        corpus.len() >= 12,
        "seed corpus missing: {}",
        corpus_dir().display()
    );
    for input in &corpus {
        fuzz_body::run(input);
        // Unmodified seeds are real packets: the first copy must go through.
        let cfg = fuzz_body::config(input[0]);
        let sa = espgw_esp::InboundSa::new(&cfg, 0)
            .unwrap()
            .starting_after(fuzz_body::start(input[0]));
        let mut bufs = [VecBuf::from_packet(&input[1..])];
        let mut v = [Verdict::default()];
        sa.decap_burst(&mut bufs, &mut v, 0);
        assert_eq!(v, [Verdict::Forward], "seed with selector {:#x}", input[0]);
    }
}

fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    for _ in 0..=rng.next_u64() % 4 {
        let r = rng.next_u64();
        let len = input.len().max(1);
        match r % 6 {
            0 => {
                let i = (r >> 8) as usize % len;
                if let Some(b) = input.get_mut(i) {
                    *b ^= 1 << (r >> 40 & 7);
                }
            }
            1 => {
                let i = (r >> 8) as usize % len;
                if let Some(b) = input.get_mut(i) {
                    *b = (r >> 32) as u8;
                }
            }
            2 => input.truncate((r >> 8) as usize % len),
            3 => input.extend_from_slice(&rng.bytes((r >> 8) as usize % 32)),
            4 => {
                // Keep the selector, swap the packet for another SA's view.
                if let Some(b) = input.first_mut() {
                    *b ^= (r >> 16) as u8 & 0x7F;
                }
            }
            _ => {
                let i = (r >> 8) as usize % len;
                input.insert(i.min(input.len()), (r >> 24) as u8);
            }
        }
    }
}

#[test]
fn random_and_mutated_inputs_never_panic() {
    let iterations: usize = std::env::var("ESPGW_FUZZ_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300_000);
    let corpus = corpus();
    let mut rng = Rng(0xF022_5EED);
    for i in 0..iterations {
        let mut input = if i % 4 == 0 {
            let n = (rng.next_u64() % 200) as usize;
            rng.bytes(n)
        } else {
            corpus[i % corpus.len()].clone()
        };
        if i % 4 != 1 {
            mutate(&mut rng, &mut input);
        }
        fuzz_body::run(&input);
    }
}

#[test]
fn sealed_mode_reaches_the_trailer_checks() {
    // Selector 0x80: sealed mode, AES-128-GCM, no ESN, window off.
    let mut ok = common::inner_packet(false, &[1, 2, 3]);
    ok.extend_from_slice(&[1, 2, 3, 3, 4]); // pad 1,2,3; pad length 3; next header 4: 28 bytes
    let cfg = fuzz_body::config(0x80);
    let packet = fuzz_body::sealed_packet(&cfg, 1, &ok);
    let sa = espgw_esp::InboundSa::new(&cfg, 0).unwrap();
    let mut bufs = [VecBuf::from_packet(&packet)];
    let mut v = [Verdict::default()];
    sa.decap_burst(&mut bufs, &mut v, 0);
    assert_eq!(v, [Verdict::Forward]);
    assert_eq!(bufs[0].data(), &ok[..23]);
    let mut bad = ok.clone();
    bad[24] = 7;
    let packet = fuzz_body::sealed_packet(&cfg, 2, &bad);
    let mut bufs = [VecBuf::from_packet(&packet)];
    sa.decap_burst(&mut bufs, &mut v, 0);
    assert_eq!(v, [Verdict::Drop(espgw_esp::DropReason::BadPadding)]);
}
