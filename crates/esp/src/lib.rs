//! RFC 4303 ESP in tunnel mode: cipher suites, SAs, encap/decap bursts,
//! anti-replay, extended sequence numbers and lifetimes.
//!
//! Pure Rust and no DPDK, so it can be unit-tested, property-tested and
//! fuzzed anywhere. Packets are edited in place through
//! [`espgw_wire::PacketBuf`].

mod checksum;
pub mod config;
pub mod crypto;
mod inbound;
mod inner;
pub mod lifetime;
mod outbound;
pub mod outer;
pub mod replay;
pub mod suite;
#[cfg(test)]
mod test_cipher;
mod trailer;
#[cfg(test)]
mod tunnel_tests;
pub mod verdict;

pub use config::{ConfigError, Encap, Lifetimes, Limit, SaConfig, SecretBytes};
pub use inbound::InboundSa;
pub use lifetime::Expiry;
pub use outbound::OutboundSa;
pub use outer::{locate_esp, EspLocation};
pub use replay::{ReplayWindow, MAX_REPLAY_WINDOW};
pub use suite::Suite;
pub use verdict::{DropCounts, DropReason, SaStats, Verdict};
