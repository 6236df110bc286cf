//! `--workers 2 --tunnels 1 --spread-decrypt --spread-parts 1
//! --streaming-rx` (root, DPDK without hugepages or NIC): the generator
//! writes every packet with streaming stores (as a NIC's DMA would) and
//! the fan-out hands each burst whole to a helper. Checks that every row
//! of both directions validated packets and found none invalid (so the
//! streaming copy and its fence deliver the bytes to the other worker),
//! that only the fan-out row may lose packets to its reorder bound, and
//! that the JSON names both options. Its own test binary: the EAL starts
//! once per process. Not root: skipped.

use espgw_bench::layers::Layer;
use espgw_bench::options::Direction;
use espgw_bench::report;

#[allow(dead_code)]
#[path = "support/one_tunnel.rs"]
mod one_tunnel;
#[path = "../../../tests/support/skip.rs"]
mod skip_rule;
use skip_rule::{is_root, skip};

#[test]
fn streamed_packets_through_the_fan_out_validate() {
    if !is_root() {
        skip(
            "streaming_rx_bench (crates/bench/tests/streaming_rx_bench.rs)",
            "DPDK needs root",
        );
        return;
    }
    let opts = espgw_bench::options::Options {
        spread_decrypt: true,
        spread_parts: Some(1),
        streaming_rx: true,
        ..one_tunnel::options("streaming_rx_bench")
    };
    let window = espgw_bench::runner::replay_window(&opts);
    let rep = espgw_bench::run(&opts).expect("bench runs");
    one_tunnel::check_rows_losing(&rep, window, |row| {
        row.workers == 2 && row.layer == Layer::Worker && row.direction == Direction::Decrypt
    });
    let json = report::json::render(&rep);
    assert_eq!(json["options"]["streaming_rx"], true);
    assert_eq!(json["options"]["spread_parts"], 1);
}
