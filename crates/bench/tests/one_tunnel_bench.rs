//! `--workers 2 --tunnels 1` (root, DPDK without hugepages or NIC): both
//! workers carry one tunnel, sharing its SA pair, both directions, 0.25 s
//! per layer. Checks that every layer's sink validated packets and found
//! none invalid or lost, that the shared outbound SA gave the two workers
//! distinct sequence numbers, and that the reports say `tunnels`. Its own
//! test binary: the EAL starts once per process. Not root: skipped.

use espgw_bench::layers::Layer;
use espgw_bench::options::{Direction, Options, Size};
use espgw_bench::report;
use espgw_esp::OutboundSa;
use espgw_esp::Suite;

#[path = "../../../tests/support/skip.rs"]
mod skip_rule;
use skip_rule::{is_root, skip};

#[test]
fn one_tunnel_on_two_workers_validates_every_packet() {
    if !is_root() {
        skip(
            "one_tunnel_bench (crates/bench/tests/one_tunnel_bench.rs)",
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
        // Long enough that a thread descheduled on a loaded 2-core machine
        // still gets packets through: at 0.05 s the sinks sometimes
        // validated nothing (a measuring window spent preempted).
        seconds: 0.25,
        progress: false,
        command: "one_tunnel_bench".into(),
        ..Options::default()
    };
    let rep = espgw_bench::run(&opts).expect("bench runs");
    // 1 and 2 workers, 2 directions, every layer.
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
        assert_eq!(row.replay_window, 0, "{what}");
        assert_eq!(row.efficiency.is_some(), row.workers == 2, "{what}");
    }
    assert!(rep.all_valid());
    let json = report::json::render(&rep);
    assert_eq!(json["options"]["tunnels"], 1);
    assert_eq!(json["results"][0]["tunnels"], 1);
    assert!(report::table::render(&rep).contains("1 tunnel shared by the workers"));
}

/// What the encrypt rows rely on: the bench gateway's one outbound SA,
/// used by two threads, never hands out a number twice (the sinks only
/// check SPI and shape). Needs no DPDK.
#[test]
fn the_shared_tunnel_is_one_outbound_sa() {
    let gw = espgw_bench::gateway::Gateway::build_with(
        Suite::Aes128Gcm16,
        1,
        0,
        false,
        espgw_bench::options::Outer::Esp4,
    )
    .unwrap();
    let sas: Vec<&std::sync::Arc<OutboundSa>> =
        gw.tables.tunnels().filter_map(|e| e.out.as_ref()).collect();
    assert_eq!(sas.len(), 1);
    assert_eq!(gw.config.tunnels[0].inbound_sa().replay_window, 0);
}
