//! `[dataplane] idle_sleep_us`: the adaptive poller's longest idle sleep.

mod common;
use common::*;

/// The base config with `poll` and `idle_sleep_us` set.
fn with_sleep(poll: &str, value: &str) -> String {
    with(
        &base(),
        "poll = \"busy\"",
        &format!("poll = \"{poll}\"\nidle_sleep_us = {value}"),
    )
}

#[test]
fn default_and_set_values_are_read() {
    let (config, _) = parse(&base()).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert_eq!(config.dataplane.idle_sleep_us, 100);
    for (value, want) in [("10", 10), ("50", 50), ("100000", 100_000)] {
        let (config, warnings) =
            parse(&with_sleep("adaptive", value)).unwrap_or_else(|d| panic!("{}", render(&d)));
        assert_eq!(config.dataplane.idle_sleep_us, want);
        assert!(warnings.is_empty(), "{}", render(&warnings));
    }
}

#[test]
fn out_of_range_values_name_the_range() {
    for bad in ["9", "0", "100001", "-5"] {
        let text = with_sleep("adaptive", bad);
        assert_error(
            &errors(&text),
            line_of(&text, "idle_sleep_us"),
            "dataplane.idle_sleep_us",
            "is out of range (expected an integer in 10..=100000)",
        );
    }
}

#[test]
fn with_busy_polling_it_is_a_warning_that_says_why() {
    let text = with_sleep("busy", "50");
    let (config, warnings) = parse(&text).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert_eq!(config.dataplane.idle_sleep_us, 50);
    let shown = render(&warnings);
    assert!(
        shown.contains("dataplane.idle_sleep_us") && shown.contains("no effect"),
        "{shown}"
    );
}
