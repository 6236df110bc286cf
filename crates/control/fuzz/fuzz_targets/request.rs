//! libFuzzer target for the control socket's request reader: input bytes
//! are request lines (seeds in corpus/request: sessions as `espgw ctl`
//! sends them), answered by a real `LiveControl` over configs/static-a.toml.
//!
//!     cd crates/control/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run request corpus/request
//!
//! The body is shared with the stable test crates/control/tests/fuzz_readers.rs.
#![no_main]

#[path = "../../tests/fuzz_readers_body/mod.rs"]
mod fuzz_readers_body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fuzz_readers_body::request(data);
});
