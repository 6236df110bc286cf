//! `[dataplane] max_simd_bitwidth`: 512 unless the config says 256; any
//! other value is an error that names the file, the line and the key; a
//! DPDK `--force-max-simd-bitwidth` in `eal` that caps one side and not
//! the other is warned about.

mod common;
use common::*;

use espgw_esp::crypto::provider::SimdWidth;

fn with_dp(lines: &str) -> String {
    with(
        &base(),
        "poll = \"busy\"",
        &format!("poll = \"busy\"\n{lines}"),
    )
}

fn with_width(value: &str) -> String {
    with_dp(&format!("max_simd_bitwidth = {value}"))
}

#[test]
fn whatever_the_cpu_has_unless_capped_at_256() {
    let (config, _) = parse(&base()).unwrap_or_else(|d| panic!("{}", render(&d)));
    assert_eq!(config.dataplane.max_simd_bitwidth, SimdWidth::Bits512);
    for (value, want) in [("256", SimdWidth::Bits256), ("512", SimdWidth::Bits512)] {
        let (config, diags) =
            parse(&with_width(value)).unwrap_or_else(|d| panic!("{}", render(&d)));
        assert_eq!(config.dataplane.max_simd_bitwidth, want, "{value}");
        assert_eq!(want.bits().to_string(), value);
        assert!(diags.is_empty(), "{}", render(&diags));
        // `espgw check`'s summary names a cap, and only a cap.
        let summary = espgw_control::config::Summary(&config).to_string();
        assert_eq!(
            summary.contains("vectors up to 256 bits"),
            want == SimdWidth::Bits256,
            "{summary}"
        );
    }
}

#[test]
fn other_widths_are_errors_at_their_line() {
    for value in ["128", "384", "1024", "-1", "\"avx2\""] {
        let text = with_width(value);
        let line = 1 + text
            .lines()
            .position(|l| l.starts_with("max_simd_bitwidth"))
            .unwrap();
        let shown = render(&errors(&text));
        assert!(
            shown.contains("dataplane.max_simd_bitwidth"),
            "{value}: {shown}"
        );
        assert!(
            shown.contains(&format!(":{line}")),
            "{value}: line {line}: {shown}"
        );
        assert!(
            shown.contains("256") && shown.contains("512"),
            "{value}: {shown}"
        );
    }
}

#[test]
fn a_dpdk_cap_in_eal_that_the_ciphers_do_not_share_is_warned_about() {
    let eal = |flag: &str| format!("eal = [\"--no-huge\", {flag}]");
    for (lines, warned) in [
        (eal("\"--force-max-simd-bitwidth=256\""), true),
        (eal("\"--force-max-simd-bitwidth\", \"128\""), true),
        (
            format!(
                "max_simd_bitwidth = 256\n{}",
                eal("\"--force-max-simd-bitwidth=256\"")
            ),
            false,
        ),
        (
            format!(
                "max_simd_bitwidth = 256\n{}",
                eal("\"--force-max-simd-bitwidth=0\"")
            ),
            true,
        ),
        (eal("\"--force-max-simd-bitwidth=512\""), false),
        (eal("\"--in-memory\""), false),
    ] {
        let (_, diags) = parse(&with_dp(&lines)).unwrap_or_else(|d| panic!("{}", render(&d)));
        let shown = render(&diags);
        assert_eq!(
            shown.contains("dataplane.eal") && shown.contains("max_simd_bitwidth"),
            warned,
            "{lines}: {shown}"
        );
    }
}
