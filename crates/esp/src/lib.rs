//! RFC 4303 ESP in tunnel mode: cipher suites, SAs, encap/decap bursts,
//! anti-replay, extended sequence numbers and lifetimes.
//!
//! Pure Rust and no DPDK, so it can be unit-tested, property-tested and
//! fuzzed anywhere. Packets are edited in place through
//! [`espgw_wire::PacketBuf`].
//!
//! # Engine API (data plane and control plane)
//!
//! * The control plane builds an [`SaConfig`] per direction (`local` is
//!   always this gateway) and makes [`OutboundSa::new`] / [`InboundSa::new`]
//!   with the caller's monotonic `now` in seconds (starts the time lifetimes).
//! * [`OutboundSa::encap_burst`]`(&self, pkts, verdicts, now)`: `Sync`, so
//!   all workers share one outbound SA; one atomic sequence reservation per
//!   burst (never wrapping: the SA hard-expires at 2^32-1, or 2^64-1 with
//!   ESN) and one atomic add per changed counter per burst.
//! * [`InboundSa::decap_burst`]`(&self, pkts, verdicts, now)`: `Sync` as
//!   well, so every worker may decrypt packets of one inbound SA at once:
//!   the anti-replay window is a [`SharedReplayWindow`] (checked per packet
//!   before the ICV, updated per 64 packets after it), counters and expiry
//!   flags are atomics added to once per burst. [`locate_esp`] gives the
//!   SPI for the SA lookup first.
//! * Each packet gets a [`Verdict`]: `Forward` or `Drop(`[`DropReason`]`)`,
//!   whose `name()` is the stable metrics key. Per-SA totals: `stats()`.
//! * Lifetimes: the control plane polls `expiry(now)` ([`Expiry`]: soft =
//!   rekey, hard = the SA now drops everything as `sa_expired`).
//! * Outer headers: IPv4 DF set, TTL 64, id = low 16 bits of the sequence
//!   number (see [`outer`]); IPv6 hop limit 64; NAT-T UDP checksum 0 over
//!   IPv4, computed over IPv6.

// The crate's lints are `deny` only for its test allocator and bench clocks
// (crates/esp/Cargo.toml); the library itself has no `unsafe`.
#![forbid(unsafe_code)]

pub mod config;
pub mod crypto;
mod ecn;
mod inbound;
mod inner;
pub mod lifetime;
mod outbound;
pub mod outer;
pub mod replay;
#[cfg(test)]
mod seq_tests;
pub mod shared_replay;
pub mod suite;
#[cfg(test)]
mod test_cipher;
mod trailer;
#[cfg(test)]
mod tunnel_tests;
pub mod verdict;

pub use config::{ConfigError, Encap, Lifetimes, Limit, SaConfig, SecretBytes};
pub use inbound::{InboundCounters, InboundSa};
pub use lifetime::Expiry;
pub use outbound::OutboundSa;
pub use outer::{locate_esp, EspLocation, UdpChecksum};
pub use replay::{ReplayWindow, MAX_REPLAY_WINDOW};
pub use shared_replay::SharedReplayWindow;
pub use suite::Suite;
pub use verdict::{DropCounts, DropReason, Reasons, SaStats, Verdict};
