//! Key material never shows up in diagnostics, summaries or Debug output,
//! however the config around it is broken.

mod common;
use common::*;

use espgw_control::config::Summary;

/// Every 8-hex-digit window of the test keys: finding any of them in output
/// means part of a key leaked.
fn key_fragments() -> Vec<String> {
    let mut out = Vec::new();
    for key in [OUT_KEY, IN_KEY] {
        for i in 0..=key.len() - 8 {
            out.push(key[i..i + 8].to_string());
            out.push(key[i..i + 8].to_uppercase());
        }
    }
    out
}

fn assert_no_key(output: &str, what: &str) {
    for frag in key_fragments() {
        assert!(
            !output.contains(&frag),
            "{what} leaks key fragment {frag}:\n{output}"
        );
    }
}

/// Broken variants of the base config: each line deleted, cut in half,
/// duplicated, or with its key renamed.
fn mutants() -> Vec<String> {
    let base = base();
    let lines: Vec<&str> = base.lines().collect();
    let mut out = Vec::new();
    for i in 0..lines.len() {
        let edit = |f: &dyn Fn(&str) -> String| {
            lines
                .iter()
                .enumerate()
                .map(|(j, l)| if i == j { f(l) } else { l.to_string() })
                .collect::<Vec<_>>()
                .join("\n")
        };
        out.push(edit(&|_| String::new()));
        out.push(edit(&|l| l[..l.len() / 2].to_string()));
        out.push(edit(&|l| format!("{l}\n{l}")));
        out.push(edit(&|l| l.replacen("key", "kee", 1)));
        out.push(edit(&|l| l.replacen("aes128gcm16", "aes256-sha256", 1)));
        out.push(edit(&|l| l.replacen("\", ", "\", key = \"zz\", ", 1)));
    }
    out
}

#[test]
fn no_diagnostic_of_a_broken_config_contains_key_hex() {
    let mut rejected = 0;
    for text in mutants() {
        match parse(&text) {
            Ok((config, warnings)) => {
                assert_no_key(&render(&warnings), "warnings");
                assert_no_key(&format!("{config:?}"), "Config Debug");
                assert_no_key(&Summary(&config).to_string(), "summary");
            }
            Err(diags) => {
                rejected += 1;
                assert_no_key(&render(&diags), "diagnostics");
                assert_no_key(&format!("{diags:?}"), "diagnostics Debug");
            }
        }
    }
    // The mutants must actually exercise the error paths.
    assert!(rejected > 40, "only {rejected} mutants were rejected");
}

#[test]
fn debug_of_a_valid_config_redacts_keys() {
    let (config, _) = parse(&base()).unwrap();
    let debug = format!("{config:?}");
    assert_no_key(&debug, "Config Debug");
    assert!(debug.contains("<redacted 20 bytes>"), "{debug}");
    assert_eq!(config.tunnels[0].inbound.key.to_hex().as_str(), IN_KEY);
}
