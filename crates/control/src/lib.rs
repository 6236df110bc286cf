//! espgw-control: the control plane.
//!
//! Today this crate holds the configuration model ([`config`]): the
//! `gateway.toml` schema parsed into typed, validated values, with every
//! problem reported at once as `FILE:LINE:COL: key.path: message`. It also
//! renders the SAs of a config as Wireshark `esp_sa` lines ([`wireshark`]).
//! [`live`] changes SAs and policy while the data plane runs (add, delete,
//! make-before-break rekey, lifetimes) and serves the control socket and
//! the Prometheus metrics (docs/operations.md). [`state`] persists the
//! sequence numbers and key records of manually keyed SAs, so a restart
//! never reuses an AEAD nonce.

pub mod config;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod ike;
pub mod live;
pub mod state;
pub mod tables;
pub mod wireshark;

pub use config::{load, load_with, parse_str, Config, Diagnostic, HostFacts, Severity};
