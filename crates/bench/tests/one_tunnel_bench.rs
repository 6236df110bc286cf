//! `--workers 2 --tunnels 1` (root, DPDK without hugepages or NIC): both
//! workers carry one tunnel, sharing its SA pair, both directions, 0.25 s
//! per layer. Checks that every layer's sink validated packets and found
//! none invalid or lost, that the shared outbound SA gave the two workers
//! distinct sequence numbers, and that the reports say `tunnels`. Its own
//! test binary: the EAL starts once per process. Not root: skipped.

use espgw_bench::report;
use espgw_esp::OutboundSa;
use espgw_esp::Suite;

#[path = "support/one_tunnel.rs"]
mod one_tunnel;
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
    let rep = espgw_bench::run(&one_tunnel::options("one_tunnel_bench")).expect("bench runs");
    one_tunnel::check_rows(&rep, 0);
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
        espgw_bench::options::Inner::Ipv4,
    )
    .unwrap();
    let sas: Vec<&std::sync::Arc<OutboundSa>> =
        gw.tables.tunnels().filter_map(|e| e.out.as_ref()).collect();
    assert_eq!(sas.len(), 1);
    assert_eq!(gw.config.tunnels[0].inbound_sa().replay_window, 0);
}
