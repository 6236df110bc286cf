//! libFuzzer target for the TOML config reader (`parse_str`, what
//! `espgw check` and `espgw run` call): seeds in corpus/config are the
//! repository's configs and variants reaching every section.
//!
//!     cd crates/control/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run config corpus/config
//!
//! The body is shared with the stable test crates/control/tests/fuzz_readers.rs.
#![no_main]

#[path = "../../tests/fuzz_readers_body/mod.rs"]
mod fuzz_readers_body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fuzz_readers_body::config(data);
});
