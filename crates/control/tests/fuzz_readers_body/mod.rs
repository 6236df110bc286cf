//! The bodies of the control plane's fuzz targets, shared by cargo-fuzz
//! (crates/control/fuzz/fuzz_targets/{request,config}.rs) and the stable
//! test tests/fuzz_readers.rs.
//!
//! * [`request`]: bytes as they arrive on the control socket, handled line
//!   by line the way `live::socket::serve` does (length limit, UTF-8, blank
//!   lines, `Request::parse`) and answered by a real `LiveControl` over a
//!   gateway built from the repository's configs/static-a.toml (manual SAs), so `sa_add` goes
//!   through `TunnelParser` and the config reader, and `sa_add`/`sa_del`/
//!   `sa_rekey` change a real `SaManager`. Checked: no panic; every answer
//!   is `{"ok":true,...}` or `{"ok":false,"error":"..."}`; no answer holds a
//!   key sent in a request or a key of the config.
//! * [`config`]: bytes as gateway.toml text through `parse_str`, the entry
//!   `espgw check` and `espgw run` use. Checked: no panic; no diagnostic
//!   quotes a key given in the text; an accepted config compiles its SPD
//!   and creates its SAs.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use espgw_control::config::{spd_from_config, Config, HostFacts};
use espgw_control::live::protocol::{self, Request, MAX_REQUEST_BYTES};
use espgw_control::live::{
    ControlBackend, CountersSource, DataplaneCounters, LiveControl, SaManager,
};
use serde_json::Value;

/// The repository's gateway A config with manual SAs (demo keys, public).
pub const GATEWAY_TOML: &str = include_str!("../../../../configs/static-a.toml");

/// At most this many request lines per input.
const MAX_LINES: usize = 32;

fn host() -> HostFacts {
    HostFacts::assumed(2)
}

/// A directory for relative `key_file` paths: it holds one valid key file
/// (`keys.toml`) so the fuzzer can reach the key-file reader too.
pub fn base_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("espgw-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("fuzz base dir");
        std::fs::write(
            dir.join("keys.toml"),
            "out = { key = \"0x5555555555555555555555555555555566666666\" }\n\
             in = { key = \"0x7777777777777777777777777777777788888888\" }\n",
        )
        .expect("fuzz key file");
        dir
    })
}

fn gateway_config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| {
        match espgw_control::parse_str(
            &base_dir().join("gateway.toml"),
            GATEWAY_TOML.to_string(),
            &host(),
        ) {
            Ok((c, _)) => c,
            Err(d) => panic!("gateway.toml does not parse: {d:?}"),
        }
    })
}

struct NoDataplane;

impl CountersSource for NoDataplane {
    fn counters(&self) -> DataplaneCounters {
        DataplaneCounters {
            ports: Vec::new(),
            workers: Vec::new(),
            drops: BTreeMap::new(),
        }
    }
}

/// Runs of at least 16 hex digits in `text` (key material candidates).
fn hex_runs(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_hexdigit())
        .filter(|r| r.len() >= 16)
        .map(str::to_ascii_lowercase)
        .collect()
}

/// Every string value under a `key` or `auth_key` field of `v`.
fn key_values(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("key" | "auth_key", Value::String(s)) => out.push(s.clone()),
                    _ => key_values(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| key_values(x, out)),
        _ => {}
    }
}

/// Every non-key string of `v` (names and the like may be echoed).
fn other_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                out.push(k.clone());
                if !matches!(k.as_str(), "key" | "auth_key") {
                    other_strings(x, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| other_strings(x, out)),
        Value::String(s) => out.push(s.clone()),
        _ => {}
    }
}

/// One control-socket input (see the module docs).
pub fn request(data: &[u8]) {
    let config = gateway_config();
    let manager = SaManager::with_control_tables(config, 0).expect("gateway.toml SAs");
    let control = LiveControl::new(config, manager, Arc::new(|| 7), Arc::new(NoDataplane));
    // Keys of the config: never in an answer.
    let config_keys: Vec<String> = hex_runs(GATEWAY_TOML)
        .into_iter()
        .filter(|r| r.len() >= 32)
        .collect();
    // Keys sent in this session, and every other string sent (names and
    // field names are echoed in errors; a key the client also sent as a
    // name is not a leak).
    let (mut sent_keys, mut sent_others) = (Vec::new(), Vec::new());
    for line in data.split_inclusive(|&b| b == b'\n').take(MAX_LINES) {
        let answer = if line.len() > MAX_REQUEST_BYTES {
            protocol::error(format!("request longer than {MAX_REQUEST_BYTES} bytes"))
        } else {
            match std::str::from_utf8(line) {
                Err(_) => protocol::error("request is not UTF-8"),
                Ok(text) if text.trim().is_empty() => continue,
                Ok(text) => {
                    match serde_json::from_str::<Value>(text) {
                        Ok(v) => {
                            let mut keys = Vec::new();
                            key_values(&v, &mut keys);
                            sent_keys.extend(keys.iter().flat_map(|k| hex_runs(k)));
                            other_strings(&v, &mut sent_others);
                        }
                        // Not JSON: nothing in it is a key.
                        Err(_) => sent_others.push(text.to_string()),
                    }
                    match Request::parse(text) {
                        Ok(r) => control.handle(r),
                        Err(e) => protocol::error(e),
                    }
                }
            }
        };
        let secrets: Vec<&String> = config_keys
            .iter()
            .chain(sent_keys.iter().filter(|k| {
                !sent_others
                    .iter()
                    .any(|o| o.to_ascii_lowercase().contains(k.as_str()))
            }))
            .collect();
        check_answer(&answer, &secrets);
    }
}

fn check_answer(answer: &Value, secrets: &[&String]) {
    let Value::Object(m) = answer else {
        panic!("answer is not an object: {answer}");
    };
    match m.get("ok") {
        Some(Value::Bool(true)) => {}
        Some(Value::Bool(false)) => assert!(
            matches!(m.get("error"), Some(Value::String(_))),
            "error answer without an error text"
        ),
        _ => panic!("answer without \"ok\""),
    }
    let text = answer.to_string().to_ascii_lowercase();
    for s in secrets {
        assert!(!text.contains(s.as_str()), "an answer holds key material");
    }
}

/// Hex runs at the start of a quoted value of a `key` or `auth_key` field
/// (`key = "0x..."`, `auth_key='...'`), unless the same run also appears
/// elsewhere in the text (names may be quoted in diagnostics).
fn toml_key_values(text: &str) -> Vec<String> {
    let lower = text.to_ascii_lowercase();
    let mut out = Vec::new();
    // `key`, `auth_key`, and a connection's `psk`.
    for (at, _) in lower.match_indices("key").chain(lower.match_indices("psk")) {
        let before = lower[..at].chars().next_back();
        let field_start = match before {
            None => true,
            Some(c) => c.is_whitespace() || c == '{' || c == ',' || lower[..at].ends_with("auth_"),
        };
        if !field_start {
            continue;
        }
        let rest = lower[at + 3..].trim_start_matches([' ', '\t']);
        let Some(rest) = rest.strip_prefix('=') else {
            continue;
        };
        let rest = rest.trim_start_matches([' ', '\t']);
        let Some(rest) = rest.strip_prefix(['"', '\'']) else {
            continue;
        };
        let rest = rest.strip_prefix("0x").unwrap_or(rest);
        let run: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
        if run.len() >= 16 && lower.matches(run.as_str()).count() == 1 {
            out.push(run);
        }
    }
    out
}

/// One TOML input (see the module docs).
pub fn config(data: &[u8]) {
    let text = String::from_utf8_lossy(data).into_owned();
    let secrets = toml_key_values(&text);
    match espgw_control::parse_str(&base_dir().join("fuzz.toml"), text, &host()) {
        Ok((config, warnings)) => {
            for d in &warnings {
                check_diagnostic(&d.to_string(), &secrets);
            }
            let _ = spd_from_config(&config);
            if let Err(e) = SaManager::with_control_tables(&config, 0) {
                panic!("an accepted config has SAs that cannot be created: {e}");
            }
        }
        Err(diags) => {
            assert!(
                diags.iter().any(|d| d.is_error()),
                "refused without an error"
            );
            for d in &diags {
                check_diagnostic(&d.to_string(), &secrets);
            }
        }
    }
}

fn check_diagnostic(text: &str, secrets: &[String]) {
    let text = text.to_ascii_lowercase();
    for s in secrets {
        assert!(!text.contains(s.as_str()), "a diagnostic quotes a key");
    }
}
