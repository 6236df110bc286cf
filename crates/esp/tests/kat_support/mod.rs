//! Helpers shared by the known-answer tests: hex and the published vector
//! files copied from shared/test-vectors into tests/vectors/ (each file names
//! its source in its "source" and "retrieved_via" fields).

#![allow(dead_code)] // each test binary uses a different subset

use serde_json::Value;

/// Decodes lowercase or uppercase hex; panics on malformed test data.
pub fn hex(s: &str) -> Vec<u8> {
    assert!(s.len() & 1 == 0, "odd-length hex {s:?}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// Loads tests/vectors/NAME and returns its "vectors" array.
pub fn vectors(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/vectors/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let json: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    json["vectors"].as_array().expect("vectors array").clone()
}

/// The hex field `key` of vector `v`, decoded.
pub fn field(v: &Value, key: &str) -> Vec<u8> {
    hex(v[key]
        .as_str()
        .unwrap_or_else(|| panic!("field {key} missing in {}", v["name"])))
}

/// A big-endian sequence number of 4 or 8 bytes, and whether it is an ESN.
pub fn seq_of(bytes: &[u8]) -> (u64, bool) {
    let mut be = [0u8; 8];
    be[8 - bytes.len()..].copy_from_slice(bytes);
    (u64::from_be_bytes(be), bytes.len() == 8)
}
