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

/// On an Intel CPU with AVX-512, `WIDE_VECTOR_WORKERS` or more workers and
/// `max_simd_bitwidth` left at its default, the operator is told to
/// measure 256-bit vectors (docs/crypto.md, "Wide vectors on many Intel
/// cores"), at `dataplane.workers`; not with fewer workers, on another
/// CPU, or once the key is set either way.
#[test]
fn many_workers_on_intel_avx512_are_told_to_compare_widths() {
    use espgw_control::config::WIDE_VECTOR_WORKERS;
    let warned = |workers: usize, intel: bool, lines: &str| {
        let host = espgw_control::HostFacts {
            cpus: 32,
            intel_avx512: intel,
            ..host()
        };
        let text = with(
            &with_dp(lines),
            "workers = 2",
            &format!("workers = {workers}"),
        );
        let (_, diags) = espgw_control::parse_str(std::path::Path::new("test.toml"), text, &host)
            .unwrap_or_else(|d| panic!("{}", render(&d)));
        let shown = render(&diags);
        shown
            .contains("Wide vectors on many Intel cores")
            .then_some(shown)
    };
    let many = WIDE_VECTOR_WORKERS;
    let shown = warned(many, true, "").expect("warned");
    assert!(shown.contains("dataplane.workers"), "{shown}");
    assert!(
        shown.contains(&format!("--workers {many} --max-simd-bitwidth 256")),
        "{shown}"
    );
    assert_eq!(warned(many - 1, true, ""), None, "fewer workers");
    assert_eq!(warned(many, false, ""), None, "another CPU");
    for set in ["max_simd_bitwidth = 512", "max_simd_bitwidth = 256"] {
        assert_eq!(warned(many, true, set), None, "{set}");
    }
}

/// What `HostFacts::this_machine` reads: the vendor and both flags the
/// 512-bit AES-GCM paths need, from /proc/cpuinfo's first processor.
#[test]
fn cpuinfo_intel_avx512_needs_the_vendor_and_both_flags() {
    use espgw_control::config::cpuinfo_says_intel_avx512 as says;
    let info = |vendor: &str, flags: &str| {
        format!("processor\t: 0\nvendor_id\t: {vendor}\nmodel name\t: x\nflags\t\t: fpu {flags} sse\n\nprocessor\t: 1\n")
    };
    assert!(says(&info("GenuineIntel", "avx2 avx512f vaes")));
    assert!(!says(&info("AuthenticAMD", "avx2 avx512f vaes")));
    assert!(!says(&info("GenuineIntel", "avx2 avx512f")));
    assert!(!says(&info("GenuineIntel", "avx2 vaes")));
    assert!(
        !says(&info("GenuineIntel", "avx2 avx512fx vaes")),
        "whole flags only"
    );
    assert!(!says(""));
}
