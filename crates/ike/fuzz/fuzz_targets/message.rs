//! libFuzzer target for the IKEv2 message codec: arbitrary bytes and
//! mutated real messages (seeds in corpus/message) must never panic, and
//! whatever parses must re-emit and re-parse to the same message.
//!
//!     cd crates/ike/fuzz && cargo +nightly fuzz run message corpus/message
//!
//! The body is shared with the stable test crates/ike/tests/message_smoke.rs.
#![no_main]

#[path = "../fuzz_body.rs"]
mod fuzz_body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fuzz_body::run(data);
});
