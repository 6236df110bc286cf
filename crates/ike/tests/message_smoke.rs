//! The fuzz body on stable: seeds, every truncation of every seed (with the
//! header Length left alone and with it patched to match), and random
//! mutations and random bytes, none of which may panic or break the
//! parse/emit round trip. `ESPGW_FUZZ_ITERATIONS` sets the number of random
//! inputs (default 200,000). The real fuzzer is crates/ike/fuzz.

#[path = "../fuzz/fuzz_body.rs"]
mod fuzz_body;
#[path = "../fuzz/seeds.rs"]
mod seeds;

use espgw_ike::message::{Message, HEADER_LEN};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545f4914f6cdd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn iterations() -> usize {
    std::env::var("ESPGW_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000)
}

#[test]
fn seeds_parse_and_run_clean() {
    for m in seeds::messages() {
        Message::parse(&m).expect("every seed message parses");
    }
    for input in seeds::fuzz_inputs() {
        fuzz_body::run(&input);
    }
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let mut parsed_prefixes = 0;
    for m in seeds::messages() {
        for len in 0..m.len() {
            let prefix = &m[..len];
            assert!(
                Message::parse(prefix).is_err(),
                "a strict prefix parsed (len {len})"
            );
            // With the Length field patched, the walker meets the cut.
            let mut patched = prefix.to_vec();
            if len >= HEADER_LEN {
                patched[24..28].copy_from_slice(&(len as u32).to_be_bytes());
                if Message::parse(&patched).is_ok() {
                    parsed_prefixes += 1;
                }
            }
            let mut input = vec![0u8];
            input.extend(&patched);
            fuzz_body::run(&input);
        }
    }
    // Only cuts at payload boundaries whose previous Next Payload is 0 can
    // parse; the header-only cut (28 bytes) of a chain is not one of them.
    assert_eq!(parsed_prefixes, 0);
}

#[test]
fn random_mutations_and_random_bytes() {
    let seeds = seeds::fuzz_inputs();
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let (mut ok, mut err) = (0usize, 0usize);
    for i in 0..iterations() {
        let input = if i % 4 == 3 {
            // Random bytes, random mode.
            let len = rng.below(400);
            (0..len).map(|_| rng.next() as u8).collect::<Vec<u8>>()
        } else {
            let mut s = seeds[rng.below(seeds.len())].clone();
            for _ in 0..1 + rng.below(4) {
                let at = 1 + rng.below(s.len() - 1);
                s[at] = match rng.below(4) {
                    0 => rng.next() as u8,
                    1 => s[at] ^ (1 << rng.below(8)),
                    2 => 0,
                    _ => 0xff,
                };
            }
            if rng.below(8) == 0 {
                s.truncate(1 + rng.below(s.len()));
            }
            s
        };
        // Count how many mode-0 inputs parse, so the test shows it reaches
        // both sides of the parser.
        if input.first() == Some(&0) {
            match Message::parse(&input[1..]) {
                Ok(_) => ok += 1,
                Err(_) => err += 1,
            }
        }
        fuzz_body::run(&input);
    }
    if iterations() >= 10_000 {
        assert!(
            ok > 0 && err > 0,
            "mutations never/always parse: {ok} ok, {err} err"
        );
    }
}

/// Writes the seeds as libFuzzer corpus files:
/// `cargo test -p espgw-ike --test message_smoke -- --ignored write_seed_corpus`.
#[test]
#[ignore]
fn write_seed_corpus() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/corpus/message");
    std::fs::create_dir_all(dir).unwrap();
    for (i, input) in seeds::fuzz_inputs().iter().enumerate() {
        std::fs::write(format!("{dir}/seed-{i:02}"), input).unwrap();
    }
}
