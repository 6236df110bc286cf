//! libFuzzer target for the ESP decap path: arbitrary bytes and tampered real
//! packets (seeds in corpus/decap) must never panic.
//!
//!     cd crates/esp/fuzz && cargo +nightly fuzz run decap corpus/decap
//!
//! The body is shared with the stable test crates/esp/tests/fuzz_decap.rs.
#![no_main]

#[path = "../../tests/fuzz_body/mod.rs"]
mod fuzz_body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fuzz_body::run(data);
});
