//! `--workers 2 --tunnels 2 --spread-decrypt` (root, DPDK without
//! hugepages or NIC): each worker receives its own tunnel's ESP, a whole
//! burst every time, and runs the decrypt fan-out, as `espgw run` with
//! `spread_decrypt = "auto"` does when RSS gives every worker a tunnel.
//! Checks that every row's sink validated packets and found none invalid,
//! that the rows say two tunnels and the window on, and that the fan-out
//! row lost nothing beyond what a late part may cost (printed). Its own
//! test binary: the EAL starts once per process. Not root: skipped.

use espgw_bench::layers::Layer;
use espgw_bench::options::{Direction, Options};

#[allow(dead_code)]
#[path = "support/one_tunnel.rs"]
mod one_tunnel;
#[path = "../../../tests/support/skip.rs"]
mod skip_rule;
use skip_rule::{is_root, skip};

#[test]
fn two_tunnels_with_the_fan_out_validate_every_packet() {
    if !is_root() {
        skip(
            "spread_tunnels_bench (crates/bench/tests/spread_tunnels_bench.rs)",
            "DPDK needs root",
        );
        return;
    }
    let opts = Options {
        directions: vec![Direction::Decrypt],
        tunnels: Some(2),
        spread_decrypt: true,
        ..one_tunnel::options("spread_tunnels_bench")
    };
    let rep = espgw_bench::run(&opts).expect("bench runs");
    assert_eq!(rep.rows.len(), 2 * Layer::ALL.len());
    for row in &rep.rows {
        // Both workers are saturated by their own tunnel, so neither takes
        // the other's parts; only a part cut before the other's first busy
        // flag could come back late (timing, not a fault).
        let what = one_tunnel::check_sink(row, row.workers == 2 && row.layer == Layer::Worker);
        // One receiving worker per tunnel: the window stays on.
        assert_eq!(
            row.replay_window,
            espgw_bench::gateway::REPLAY_WINDOW,
            "{what}"
        );
        assert_eq!(row.tunnels, row.workers, "{what}");
    }
}
