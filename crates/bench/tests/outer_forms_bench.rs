//! `--outer` on a real run (root, DPDK without hugepages or NIC): for each
//! outer form, `--workers 2 --tunnels 1 --spread-decrypt`, both
//! directions, every layer, 0.25 s per layer. Checks that every row's sink
//! validated packets (in that form: the sink refuses another) and found
//! none invalid, none lost (except in the fan-out's row, where the reorder
//! stage's bound drops late parts), and that the reports name the form.
//!
//! The EAL starts once per process, so the test runs itself once per form
//! (the ignored test below, chosen by `ESPGW_BENCH_OUTER`). Not root:
//! skipped.

use espgw_bench::layers::Layer;
use espgw_bench::options::{parse_outer, Direction, Options, Outer, Size};
use espgw_bench::report;
use espgw_esp::Suite;

#[path = "../../../tests/support/skip.rs"]
mod skip_rule;
use skip_rule::{is_root, skip};

const CHILD: &str = "one_outer_form";

#[test]
fn every_outer_form_runs_on_one_tunnel_across_two_workers() {
    if !is_root() {
        skip(
            "outer_forms_bench (crates/bench/tests/outer_forms_bench.rs)",
            "DPDK needs root",
        );
        return;
    }
    let me = std::env::current_exe().expect("test binary path");
    for outer in Outer::ALL {
        let out = std::process::Command::new(&me)
            .args([
                "--exact",
                CHILD,
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("ESPGW_BENCH_OUTER", outer.name())
            .output()
            .expect("run the test binary");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{}:\n{text}", outer.name());
        // The child ran the bench, not an empty filter.
        assert!(text.contains("1 passed"), "{}:\n{text}", outer.name());
        for line in text.lines().filter(|l| l.contains(": lost ")) {
            eprintln!("{line}");
        }
    }
}

/// One form's run; run by the test above with `ESPGW_BENCH_OUTER` set.
#[test]
#[ignore = "run once per form by every_outer_form_runs_on_one_tunnel_across_two_workers"]
fn one_outer_form() {
    let name = std::env::var("ESPGW_BENCH_OUTER").expect("ESPGW_BENCH_OUTER");
    let outer = parse_outer(&name).expect("a form");
    let opts = Options {
        suites: vec![Suite::Aes128Gcm16],
        sizes: vec![Size::Fixed(64)],
        directions: vec![Direction::Encrypt, Direction::Decrypt],
        workers: 2,
        tunnels: Some(1),
        spread_decrypt: true,
        outer,
        seconds: 0.25,
        progress: false,
        command: format!("outer_forms_bench {name}"),
        ..Options::default()
    };
    let rep = espgw_bench::run(&opts).expect("bench runs");
    // 1 and 2 workers, 2 directions, every layer.
    assert_eq!(rep.rows.len(), 2 * 2 * Layer::ALL.len());
    for row in &rep.rows {
        let what = format!(
            "{name} {} {} x{}",
            row.direction.name(),
            row.layer.name(),
            row.workers
        );
        let t = &row.measured.tally;
        assert!(t.valid > 0, "{what}: sink validated nothing");
        assert_eq!(t.invalid, 0, "{what}: invalid ({:?})", t.first_invalid);
        let spread_row =
            row.workers == 2 && row.direction == Direction::Decrypt && row.layer == Layer::Worker;
        if spread_row {
            // The fan-out's reorder stage drops a part later than its bound
            // (`reorder_late`: parts still out when a slice ends, or a
            // helper descheduled; docs/multicore.md): a matter of timing,
            // not of the form, and large in a debug build on a loaded
            // machine (a fifth here). Shown, not judged; what the sink saw
            // is (above).
            eprintln!(
                "{what}: lost {} of {}",
                row.measured.lost(),
                row.measured.packets
            );
        } else {
            assert_eq!(row.measured.lost(), 0, "{what}: packets lost in the stage");
        }
        assert_eq!(row.outer, outer, "{what}");
    }
    let json = report::json::render(&rep);
    assert_eq!(json["options"]["outer"], name.as_str());
    assert_eq!(json["results"][0]["outer"], name.as_str());
    assert!(report::table::render(&rep).contains(&format!("outer form {name}:")));
}
