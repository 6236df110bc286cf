//! libFuzzer target for the IKEv2 engine: two engines exchanging their
//! real datagrams through a network the input controls (loss,
//! duplication, reordering, corruption, forgery), the clock and API calls
//! (rekeys, deletes, liveness, data-plane usage). Besides "no panic": no
//! timer left due after `handle_timeout`, a bounded number of IKE SAs, and
//! none left after two days without a network (seeds in corpus/engine).
//!
//!     cd crates/ike/fuzz && cargo +nightly fuzz run engine corpus/engine
//!
//! The body is shared with the stable test crates/ike/tests/engine_smoke.rs.
#![no_main]

#[path = "../engine_body.rs"]
mod engine_body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    engine_body::run(data);
});
