//! `--workers 2 --per-cpu-sas --spread-decrypt` (root, DPDK without
//! hugepages or NIC): the per-CPU SA handoff. One tunnel on two RFC 9611
//! per-CPU SA pairs; in the decrypt rows of the worker layer worker 0
//! receives both SAs' ESP (as one RX queue does when RSS cannot tell the
//! SAs apart) and hands SA 1's groups to worker 1, which decrypts and
//! forwards them and whose sink checks every frame. Nothing may be lost:
//! the generator is paced to what the workers take, and the gateway drops
//! (`sa_handoff_full`) only when the generator outruns that. Its own test
//! binary: the EAL starts once per process. Not root: skipped.

use espgw_bench::gateway::REPLAY_WINDOW;
use espgw_bench::layers::Layer;
use espgw_bench::options::{Direction, Options};

#[path = "support/one_tunnel.rs"]
mod one_tunnel;
#[path = "../../../tests/support/skip.rs"]
mod skip_rule;
use skip_rule::{is_root, skip};

#[test]
fn the_per_cpu_sa_handoff_loses_nothing_and_hands_off() {
    if !is_root() {
        skip(
            "per_cpu_handoff_bench (crates/bench/tests/per_cpu_handoff_bench.rs)",
            "DPDK needs root",
        );
        return;
    }
    let opts = Options {
        per_cpu_sas: true,
        spread_decrypt: true,
        ..one_tunnel::options("per_cpu_handoff_bench")
    };
    let rep = espgw_bench::run(&opts).expect("bench runs");
    one_tunnel::check_rows(&rep, REPLAY_WINDOW);
    let row = rep
        .rows
        .iter()
        .find(|r| r.workers == 2 && r.layer == Layer::Worker && r.direction == Direction::Decrypt)
        .expect("the 2-worker decrypt row");
    assert!(
        row.measured.spread_out > 0,
        "worker 0 handed nothing to worker 1"
    );
    assert!(row.measured.drops.is_empty(), "{:?}", row.measured.drops);
}
