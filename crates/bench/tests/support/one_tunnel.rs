//! What the one-tunnel bench tests share (each is its own test binary, the
//! EAL starting once per process): the options of a short two-worker run
//! of one tunnel, and the check of every row it gives.

use espgw_bench::layers::Layer;
use espgw_bench::options::{Direction, Options, Size};
use espgw_bench::{Report, Row};
use espgw_esp::Suite;

/// aes128gcm16 at 64 B, both directions, 1 and 2 workers on one tunnel.
pub fn options(command: &str) -> Options {
    Options {
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
        command: command.into(),
        ..Options::default()
    }
}

/// Every layer's row of 1 and 2 workers, both directions: the sink
/// validated packets and found none invalid, none was lost in the stage,
/// one tunnel with anti-replay window `replay_window`, the efficiency on
/// the 2-worker rows only.
pub fn check_rows(rep: &Report, replay_window: u32) {
    check_rows_losing(rep, replay_window, |_| false);
}

/// [`check_rows`], except that the rows `may_lose` picks may lose packets
/// in the stage (the decrypt fan-out's reorder stage drops a part later
/// than its bound: timing, not correctness); their losses are printed
/// (`ROW: lost N of M`).
pub fn check_rows_losing(rep: &Report, replay_window: u32, may_lose: impl Fn(&Row) -> bool) {
    assert_eq!(rep.rows.len(), 2 * 2 * Layer::ALL.len());
    for row in &rep.rows {
        let what = check_sink(row, may_lose(row));
        assert_eq!(row.tunnels, 1, "{what}");
        assert_eq!(row.replay_window, replay_window, "{what}");
        assert_eq!(row.efficiency.is_some(), row.workers == 2, "{what}");
    }
    assert!(rep.rows.iter().filter(|r| !may_lose(r)).all(Row::valid));
}

/// One row's sink: it validated packets and found none invalid; none was
/// lost in the stage unless `may_lose` (then the loss is printed, `ROW:
/// lost N of M`, and only the reorder stage may have dropped: a
/// `replayed` drop would be the anti-replay window refusing a packet the
/// fan-out merely delayed). Returns the row's name for further messages.
pub fn check_sink(row: &Row, may_lose: bool) -> String {
    let what = format!(
        "{} {} {} x{}",
        row.outer.name(),
        row.direction.name(),
        row.layer.name(),
        row.workers
    );
    let t = &row.measured.tally;
    assert!(t.valid > 0, "{what}: sink validated nothing");
    assert_eq!(t.invalid, 0, "{what}: invalid ({:?})", t.first_invalid);
    if may_lose {
        eprintln!(
            "{what}: lost {} of {} (dropped: {:?})",
            row.measured.lost(),
            row.measured.packets,
            row.measured.drops
        );
        for reason in row.measured.drops.keys() {
            assert!(
                ["reorder_late", "reorder_full"].contains(reason),
                "{what}: dropped as {reason}: {:?}",
                row.measured.drops
            );
        }
    } else {
        assert!(
            row.measured.drops.is_empty(),
            "{what}: {:?}",
            row.measured.drops
        );
        assert_eq!(row.measured.lost(), 0, "{what}: packets lost in the stage");
    }
    what
}
