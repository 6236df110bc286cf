//! `[dataplane] spread_decrypt`: the decrypt fan-out (docs/multicore.md).

mod common;
use common::*;

use espgw_control::config::{Mode, SpreadDecrypt};

/// The base config (two workers) with `workers` set and extra
/// `[dataplane]` lines.
fn with_dp(workers: u32, lines: &str) -> String {
    let text = with(&base(), "workers = 2", &format!("workers = {workers}"));
    with(
        &text,
        "poll = \"busy\"",
        &format!("poll = \"busy\"\n{lines}"),
    )
}

#[test]
fn off_by_default_and_auto_only_spreads_with_several_workers_in_run_to_completion() {
    let (config, _) = parse(&base()).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert_eq!(config.dataplane.spread_decrypt, SpreadDecrypt::Off);
    assert!(!config.dataplane.spreads_decrypt());
    for (workers, lines, want, spreads) in [
        (2, "spread_decrypt = \"off\"", SpreadDecrypt::Off, false),
        (1, "spread_decrypt = \"auto\"", SpreadDecrypt::Auto, false),
        (2, "spread_decrypt = \"auto\"", SpreadDecrypt::Auto, true),
        (
            2,
            "spread_decrypt = \"auto\"\nmode = \"pipeline\"",
            SpreadDecrypt::Auto,
            false,
        ),
    ] {
        let text = with_dp(workers, lines);
        let (config, _) = parse(&text).unwrap_or_else(|d| panic!("{}", render(&d)));
        assert_eq!(config.dataplane.workers, workers as usize);
        assert_eq!(config.dataplane.spread_decrypt, want, "{lines}");
        assert_eq!(config.dataplane.spreads_decrypt(), spreads, "{lines}");
        if lines.contains("pipeline") {
            assert_eq!(config.dataplane.mode, Mode::Pipeline);
        }
    }
}

#[test]
fn another_value_names_the_choices() {
    let text = with_dp(2, "spread_decrypt = \"on\"");
    let shown = render(&errors(&text));
    assert!(
        shown.contains("dataplane.spread_decrypt") && shown.contains("auto"),
        "{shown}"
    );
}
