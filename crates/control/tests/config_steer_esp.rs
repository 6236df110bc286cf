//! `[dataplane] steer_esp`: NIC flow rules that send each inbound SA's ESP
//! to one worker's RX queue by SPI (docs/multicore.md, "Steering SAs to
//! workers by SPI").

mod common;
use common::*;

use espgw_control::config::SteerEsp;

/// Parsed, with whether `steer_esp` was warned about as doing nothing.
fn parsed(workers: u32, lines: &str) -> (espgw_control::config::Config, bool) {
    let (config, diags) =
        parse(&with_workers_dp(workers, lines)).unwrap_or_else(|d| panic!("{}", render(&d)));
    let shown = render(&diags);
    let warned = shown.contains("dataplane.steer_esp") && shown.contains("no effect");
    (config, warned)
}

#[test]
fn auto_by_default_and_only_steers_with_several_workers_in_run_to_completion() {
    let (config, warned) = parsed(2, "");
    assert_eq!(config.dataplane.steer_esp, SteerEsp::Auto);
    assert!(config.dataplane.steers_esp());
    assert!(!warned, "the default is not warned about");
    for (workers, lines, want, steers, warns) in [
        (2, "steer_esp = \"off\"", SteerEsp::Off, false, false),
        (2, "steer_esp = \"auto\"", SteerEsp::Auto, true, false),
        // Set where it can do nothing: kept, warned about, by its key.
        (1, "steer_esp = \"auto\"", SteerEsp::Auto, false, true),
        (
            2,
            "steer_esp = \"auto\"\nmode = \"pipeline\"",
            SteerEsp::Auto,
            false,
            true,
        ),
        (1, "steer_esp = \"off\"", SteerEsp::Off, false, false),
        // The default where it can do nothing: silent.
        (1, "", SteerEsp::Auto, false, false),
    ] {
        let (config, warned) = parsed(workers, lines);
        assert_eq!(config.dataplane.steer_esp, want, "{workers} {lines}");
        assert_eq!(config.dataplane.steers_esp(), steers, "{workers} {lines}");
        assert_eq!(warned, warns, "{workers} {lines}");
    }
}

#[test]
fn another_value_names_the_choices() {
    let shown = render(&errors(&with_workers_dp(2, "steer_esp = \"on\"")));
    assert!(
        shown.contains("dataplane.steer_esp") && shown.contains("auto") && shown.contains("off"),
        "{shown}"
    );
    let shown = render(&errors(&with_workers_dp(2, "steer_esp = true")));
    assert!(shown.contains("dataplane.steer_esp"), "{shown}");
}

/// `espgw check`'s queue plan says what the rules do, and what happens
/// without them.
#[test]
fn check_says_how_sas_are_steered() {
    let plan = |workers: u32, lines: &str| queue_plan(&with_workers_dp(workers, lines));
    let auto = plan(2, "");
    assert!(
        auto.contains("each inbound SA gets one (steer_esp = \"auto\")")
            && auto.contains("lane % 2")
            && auto.contains("RSS decides"),
        "{auto}"
    );
    assert!(
        auto.contains("where the NIC takes none, and for a tunnel of one SA, one peer's ESP"),
        "{auto}"
    );
    let off = plan(2, "steer_esp = \"off\"");
    assert!(!off.contains("each inbound SA gets one"), "{off}");
    assert!(off.contains("(steer_esp = \"off\")"), "{off}");
    let one = plan(1, "");
    assert!(!one.contains("steer_esp"), "{one}");
}
