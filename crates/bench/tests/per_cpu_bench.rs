//! `--workers 2 --per-cpu-sas` (root, DPDK without hugepages or NIC): one
//! tunnel on two RFC 9611 per-CPU SA pairs, both directions, 0.25 s per
//! layer. Each worker's sink expects its own pair's SPI (`out_spi(w)`), so
//! a data plane that sealed worker 1's packets with the tunnel's first
//! outbound SA fails the worker rows; decrypt input reaches each worker on
//! its own inbound SA, whose window stays on. Its own test binary: the
//! EAL starts once per process. Not root: skipped.

use espgw_bench::gateway::REPLAY_WINDOW;
use espgw_bench::layers::Layer;
use espgw_bench::options::{Direction, Options, Size};
use espgw_bench::report;
use espgw_esp::Suite;

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
        suites: vec![Suite::Aes128Gcm16],
        sizes: vec![Size::Fixed(64)],
        directions: vec![Direction::Encrypt, Direction::Decrypt],
        workers: 2,
        tunnels: Some(1),
        per_cpu_sas: true,
        // As in one_tunnel_bench.rs: long enough for a descheduled thread.
        seconds: 0.25,
        progress: false,
        command: "per_cpu_bench".into(),
        ..Options::default()
    };
    let rep = espgw_bench::run(&opts).expect("bench runs");
    assert_eq!(rep.rows.len(), 2 * 2 * Layer::ALL.len());
    for row in &rep.rows {
        let what = format!(
            "{} {} x{}",
            row.direction.name(),
            row.layer.name(),
            row.workers
        );
        let t = &row.measured.tally;
        assert!(t.valid > 0, "{what}: sink validated nothing");
        assert_eq!(t.invalid, 0, "{what}: invalid ({:?})", t.first_invalid);
        assert_eq!(row.measured.lost(), 0, "{what}: packets lost in the stage");
        assert_eq!(row.tunnels, 1, "{what}");
        assert_eq!(row.replay_window, REPLAY_WINDOW, "{what}");
    }
    assert!(rep.all_valid());
    let json = report::json::render(&rep);
    assert_eq!(json["options"]["per_cpu_sas"], true);
    assert!(report::table::render(&rep).contains("1 tunnel on per-CPU SA pairs"));
}
