//! The engine fuzz body on stable: the seeds, and random mutations of them
//! and random inputs, none of which may panic or break the body's
//! invariants (no busy timer, bounded IKE SAs, nothing left after two days
//! without a network). `ESPGW_FUZZ_ITERATIONS` sets the number of random
//! inputs (default 300). The real fuzzer is crates/ike/fuzz (target
//! `engine`).

#[path = "../fuzz/engine_body.rs"]
mod engine_body;

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
        .unwrap_or(300)
}

#[test]
fn seeds_run_clean() {
    for s in engine_body::seeds() {
        engine_body::run(&s);
    }
}

/// The checked-in corpus: the seeds and the inputs campaigns found
/// (`regression-*`), each run several times because the engine's SA map
/// iterates in a different order each run.
#[test]
fn corpus_runs_clean() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/corpus/engine");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let input = std::fs::read(entry.unwrap().path()).unwrap();
        for _ in 0..10 {
            engine_body::run(&input);
        }
        n += 1;
    }
    assert!(n >= engine_body::seeds().len());
}

#[test]
fn random_mutations_and_random_inputs() {
    let seeds = engine_body::seeds();
    let mut rng = Rng(0x2545f4914f6cdd1d);
    for i in 0..iterations() {
        let input = if i % 4 == 3 {
            let len = rng.below(600);
            (0..len).map(|_| rng.next() as u8).collect::<Vec<u8>>()
        } else {
            let mut s = seeds[rng.below(seeds.len())].clone();
            for _ in 0..1 + rng.below(8) {
                let at = rng.below(s.len());
                match rng.below(4) {
                    0 => s[at] = rng.next() as u8,
                    1 => s[at] ^= 1 << rng.below(8),
                    2 => {
                        let b = rng.next() as u8;
                        s.insert(at, b);
                    }
                    _ => {
                        s.remove(at);
                    }
                }
            }
            s
        };
        engine_body::run(&input);
    }
}

/// Writes the seeds as libFuzzer corpus files:
/// `cargo test -p espgw-ike --test engine_smoke -- --ignored write_seed_corpus`.
#[test]
#[ignore]
fn write_seed_corpus() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/corpus/engine");
    std::fs::create_dir_all(dir).unwrap();
    for (i, input) in engine_body::seeds().iter().enumerate() {
        std::fs::write(format!("{dir}/seed-{i:02}"), input).unwrap();
    }
}
