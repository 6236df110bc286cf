//! libFuzzer target for a whole `Worker::process_burst`: bursts of arbitrary
//! and mutated real frames (seeds in corpus/worker: ESP made by the peer's
//! own encap, plaintext from the hosts, ARP/ND/ping) on both ports of a
//! gateway with IPv4 or IPv6 outer, plain or UDP-encapsulated ESP.
//!
//!     cd crates/dataplane/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run worker corpus/worker
//!
//! The body is shared with the stable test crates/dataplane/tests/fuzz_worker.rs.
#![no_main]

#[path = "../../tests/fuzz_worker_body/mod.rs"]
mod fuzz_worker_body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fuzz_worker_body::run(data);
});
