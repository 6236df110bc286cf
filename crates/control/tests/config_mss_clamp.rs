//! `[[tunnel]] mss_clamp`: accepted values, and errors that name the line
//! and key path (in the style of config_errors.rs).

mod common;
use common::*;
use espgw_control::config::MssClamp;

/// The base config with `mss_clamp = <value>` in its tunnel.
fn with_clamp(value: &str) -> String {
    with(
        &base(),
        "esp = \"aes128gcm16\"",
        &format!("esp = \"aes128gcm16\"\nmss_clamp = {value}"),
    )
}

#[test]
fn absent_auto_and_numbers_are_read() {
    let clamp = |text: &str| {
        let (config, _) = parse(text).unwrap_or_else(|d| panic!("{}", render(&d)));
        config.tunnels[0].mss_clamp
    };
    assert_eq!(clamp(&base()), None);
    assert_eq!(clamp(&with_clamp("\"auto\"")), Some(MssClamp::Auto));
    assert_eq!(clamp(&with_clamp("536")), Some(MssClamp::Fixed(536)));
    assert_eq!(clamp(&with_clamp("1360")), Some(MssClamp::Fixed(1360)));
    assert_eq!(clamp(&with_clamp("9000")), Some(MssClamp::Fixed(9000)));
}

#[test]
fn out_of_range_numbers_name_the_range() {
    for bad in ["535", "9001", "0", "-1"] {
        let text = with_clamp(bad);
        assert_error(
            &errors(&text),
            line_of(&text, "mss_clamp"),
            "tunnel[0].mss_clamp",
            "is out of range (expected an integer in 536..=9000)",
        );
    }
}

#[test]
fn wrong_words_and_types_say_what_was_expected() {
    let text = with_clamp("\"on\"");
    assert_error(
        &errors(&text),
        line_of(&text, "mss_clamp"),
        "tunnel[0].mss_clamp",
        "unknown value \"on\" (expected one of: \"auto\")",
    );
    for bad in ["true", "1360.0", "[1360]"] {
        let text = with_clamp(bad);
        assert_error(
            &errors(&text),
            line_of(&text, "mss_clamp"),
            "tunnel[0].mss_clamp",
            "wrong type",
        );
    }
}
