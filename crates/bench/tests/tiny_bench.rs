//! A tiny real run (root, DPDK without hugepages or NIC): one suite, one
//! size, both directions, 0.05 s per layer. Checks that every layer's sink
//! validated packets and found none invalid or lost, and that the reports
//! carry those numbers. No timing assertions: the machine may be busy.
//! Not root: skipped (see `skip`; a failure in CI).

use espgw_bench::layers::Layer;
use espgw_bench::options::{Direction, Options, Size};
use espgw_bench::report;
use espgw_esp::Suite;

#[path = "../../../tests/support/skip.rs"]
mod skip_rule;
use skip_rule::{is_root, skip};

#[test]
fn tiny_bench_validates_every_packet_of_every_layer() {
    if !is_root() {
        skip(
            "tiny_bench (crates/bench/tests/tiny_bench.rs)",
            "DPDK needs root",
        );
        return;
    }
    let opts = Options {
        suites: vec![Suite::Aes128Gcm16],
        sizes: vec![Size::Imix],
        directions: vec![Direction::Encrypt, Direction::Decrypt],
        workers: 1,
        seconds: 0.05,
        progress: false,
        command: "tiny_bench".into(),
        ..Options::default()
    };
    let rep = espgw_bench::run(&opts).expect("bench runs");
    assert_eq!(rep.rows.len(), 2 * Layer::ALL.len());
    for row in &rep.rows {
        let what = format!(
            "{} {} {}",
            row.direction.name(),
            row.layer.name(),
            row.size.label()
        );
        let t = &row.measured.tally;
        assert!(t.valid > 0, "{what}: sink validated nothing");
        assert_eq!(
            t.invalid, 0,
            "{what}: invalid packets ({:?})",
            t.first_invalid
        );
        assert_eq!(row.measured.lost(), 0, "{what}: packets lost in the stage");
        assert_eq!(t.valid, row.measured.packets, "{what}");
        assert!(
            row.rates.mpps > 0.0 && row.rates.cycles_per_packet > 0.0,
            "{what}"
        );
        assert_eq!(
            row.measured.latency_ns.len(),
            row.measured.packets,
            "{what}: one latency sample per packet"
        );
        // Each burst's I/O interval contains its stage's.
        assert!(
            row.measured.io_cycles >= row.measured.cycles,
            "{what}: I/O cycles {} < stage cycles {}",
            row.measured.io_cycles,
            row.measured.cycles
        );
        assert_eq!(
            row.measured.io_burst_cycles.len(),
            row.measured.burst_cycles.len()
        );
        assert!(row.rates.io_mpps > 0.0, "{what}");
        assert_eq!(row.flows, 64, "{what}");
    }
    assert!(rep.all_valid());

    let json = report::json::render(&rep);
    assert_eq!(json["results"].as_array().map(Vec::len), Some(6));
    assert_eq!(json["results"][0]["invalid"], 0);
    assert_eq!(json["results"][2]["layer"], "worker");
    assert_eq!(json["results"][2]["flows"], 64);
    assert!(json["results"][2]["io_mpps"].as_f64().unwrap_or(0.0) > 0.0);
    assert!(json["machine"]["tsc_hz"].as_u64().unwrap_or(0) > 0);
    // Built in a git checkout (CI's clean clone): the commit the binary
    // was built from, a full hash.
    if let Some(commit) = json["machine"]["build_commit"].as_str() {
        assert!(
            commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
            "{commit}"
        );
    }
    let svg = report::svg::render(&rep);
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("<polyline"));
    assert!(report::table::render(&rep).contains("aes128gcm16"));
}
