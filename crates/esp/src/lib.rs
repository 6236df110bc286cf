//! RFC 4303 ESP in tunnel mode: cipher suites, SAs, encap/decap bursts,
//! anti-replay, extended sequence numbers and lifetimes.
//!
//! Pure Rust and no DPDK, so it can be unit-tested, property-tested and
//! fuzzed anywhere. Packets are edited in place through
//! [`espgw_wire::PacketBuf`].

pub mod crypto;
pub mod suite;

pub use suite::Suite;
