//! IKEv2 in the gateway: the control plane's driver of the
//! `espgw_ike::engine` (docs/ike.md "Gateway integration").
//!
//! - [`IkeDriver`] owns the engine and the config's `[[connection]]`s; it
//!   is sans I/O (datagrams and milliseconds in, datagrams out) and turns
//!   the engine's events into [`crate::live::SaManager`] calls: a first
//!   CHILD_SA becomes a tunnel named `connection/child`, a rekey installs
//!   the new inbound SA before the outbound switch (make before break),
//!   a deleted CHILD_SA or a failed IKE SA removes the tunnel (its
//!   traffic is then discarded, never sent in clear).
//! - [`IkeTransport`] sends datagrams: the data plane's punt rings ([`PuntTransport`]),
//!   [`UdpTransport`] (kernel sockets) for development, and
//!   [`MemoryTransport`] for tests.
//! - [`IkeService`]: driver + transport + clock behind a mutex, for the
//!   control socket's `ike` commands ([`IkeControl`]).

mod driver;
mod punt;
pub mod selectors;
mod service;
mod status;
mod transport;

pub use driver::{
    key_exchange_names, suite_name, IkeDriver, IkeError, ACQUIRE_INTERVAL_MS, IKE_REKEY_RETRY_MS,
    OUTBOUND_SWITCH_TIMEOUT_MS, RETRY_BASE_MS, RETRY_MAX_MS,
};
pub use punt::{
    Acquire, PuntDatagram, PuntError, PuntRings, PuntStats, PuntTransport, ACQUIRE_RING_SLOTS,
    IKE_PORT, PUNT_DATAGRAM_MAX, PUNT_RING_SLOTS,
};
pub use service::{monotonic_ms, IkeControl, IkeService, MsClock};
pub use status::{IkeChildInfo, IkeMetrics, IkeSaInfo};
pub use transport::{IkeTransport, MemoryTransport, Received, UdpTransport};

/// What a runtime needs from the engine crate to build a driver, so
/// binaries need no dependency of their own on it.
pub use espgw_ike::crypto::SystemRandom;
pub use espgw_ike::engine::{EngineConfig, Transmit};
