//! Helpers for config tests: a valid base config and ways to break it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use espgw_control::config::{parse_str, Config, Diagnostic, HostFacts};
use espgw_control::fixtures::{GatewayToml, TunnelToml};

pub const OUT_KEY: &str = "00112233445566778899aabbccddeeff01020304";
pub const IN_KEY: &str = "ffeeddccbbaa99887766554433221100a1a2a3a4";

/// A valid config; tests replace parts of it: gateway 1 of the demo pair
/// ([`GatewayToml::demo`]) as "gw-test", two workers, a route, tunnel "t1"
/// with SPIs 0x1001/0x2001 and [`OUT_KEY`]/[`IN_KEY`].
pub fn base() -> String {
    GatewayToml::demo(1)
        .name("gw-test")
        .default_action("discard")
        .workers(Some(2))
        .mtu(1500)
        .dataplane_line("poll = \"busy\"")
        .devices("net_ring0", "net_ring1")
        .section("[[route]]\ndest = \"198.51.100.0/24\"\nvia = \"192.0.2.254\"\nport = \"unprot\"")
        .map_tunnels(|t| TunnelToml {
            name: "t1".into(),
            out: (0x1001, OUT_KEY.into()),
            inbound: (0x2001, IN_KEY.into()),
            ..t
        })
        .render()
}

/// [`base`] with `workers` and extra `[dataplane]` lines.
pub fn with_workers_dp(workers: u32, lines: &str) -> String {
    let text = with(&base(), "workers = 2", &format!("workers = {workers}"));
    with(
        &text,
        "poll = \"busy\"",
        &format!("poll = \"busy\"\n{lines}"),
    )
}

/// The first six lines of the queue and core plan `espgw check` prints for
/// the valid config `text`.
pub fn queue_plan(text: &str) -> String {
    let (config, _) = parse(text).unwrap_or_else(|d| panic!("{}", render(&d)));
    let summary = espgw_control::config::Summary(&config).to_string();
    let at = summary
        .find("queues and cores:")
        .unwrap_or_else(|| panic!("no plan in:\n{summary}"));
    summary[at..].lines().take(6).collect::<Vec<_>>().join("\n")
}

pub fn host() -> HostFacts {
    HostFacts::assumed(4)
}

/// `text` with the first `from` replaced by `to`; panics if `from` is absent
/// so a test cannot silently check the unmodified base.
pub fn with(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "{from:?} not in config");
    text.replacen(from, to, 1)
}

/// The 1-based line of the first occurrence of `needle`.
pub fn line_of(text: &str, needle: &str) -> usize {
    let at = text
        .find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not in config"));
    text[..at].matches('\n').count() + 1
}

pub fn parse(text: &str) -> Result<(Config, Vec<Diagnostic>), Vec<Diagnostic>> {
    parse_str(Path::new("test.toml"), text.to_string(), &host())
}

/// The errors of a config that must be rejected.
pub fn errors(text: &str) -> Vec<Diagnostic> {
    match parse(text) {
        Ok(_) => panic!("config was accepted:\n{text}"),
        Err(diags) => diags.into_iter().filter(|d| d.is_error()).collect(),
    }
}

/// Asserts there is an error at `line` for `key` whose text contains `words`,
/// and that it prints in the `FILE:LINE:COL: key: message` form.
pub fn assert_error(diags: &[Diagnostic], line: usize, key: &str, words: &str) {
    let found = diags
        .iter()
        .find(|d| d.line() == Some(line) && d.key == key);
    let Some(d) = found else {
        panic!("no error at line {line} for {key}; got:\n{}", render(diags));
    };
    let text = d.to_string();
    let prefix = format!("test.toml:{line}:");
    assert!(text.starts_with(&prefix), "{text}");
    assert!(text.contains(&format!(": {key}: ")), "{text}");
    assert!(text.contains(words), "{text:?} lacks {words:?}");
}

pub fn render(diags: &[Diagnostic]) -> String {
    diags.iter().map(|d| format!("{d}\n")).collect()
}

/// A fresh directory under the system temp dir.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("espgw-control-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
