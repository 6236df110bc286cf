//! `--workers 2 --per-cpu-sas` (root, DPDK without hugepages or NIC): one
//! tunnel on two RFC 9611 per-CPU SA pairs, both directions, 0.25 s per
//! layer. Each worker's sink expects its own pair's SPI (`out_spi(w)`), so
//! a data plane that sealed worker 1's packets with the tunnel's first
//! outbound SA fails the worker rows; decrypt input reaches each worker on
//! its own inbound SA, whose window stays on. Its own test binary: the
//! EAL starts once per process. Not root: skipped.

use espgw_bench::gateway::REPLAY_WINDOW;
use espgw_bench::options::Options;
use espgw_bench::report;

#[path = "support/one_tunnel.rs"]
mod one_tunnel;
#[path = "../../../tests/support/skip.rs"]
mod skip_rule;
use skip_rule::{is_root, skip};

#[test]
fn one_tunnel_on_per_cpu_sas_validates_every_packet() {
    if !is_root() {
        skip(
            "per_cpu_bench (crates/bench/tests/per_cpu_bench.rs)",
            "DPDK needs root",
        );
        return;
    }
    let opts = Options {
        per_cpu_sas: true,
        ..one_tunnel::options("per_cpu_bench")
    };
    let rep = espgw_bench::run(&opts).expect("bench runs");
    one_tunnel::check_rows(&rep, REPLAY_WINDOW);
    let json = report::json::render(&rep);
    assert_eq!(json["options"]["per_cpu_sas"], true);
    assert!(report::table::render(&rep).contains("1 tunnel on per-CPU SA pairs"));
}
