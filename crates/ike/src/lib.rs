//! espgw-ike: IKEv2 (RFC 7296) without I/O and without a clock.
//!
//! The engine is driven the way boringtun and quinn-proto drive their
//! protocol cores: the caller hands it datagrams and the current time, and
//! takes back datagrams to send, CHILD_SA keys to install or delete, and the
//! next time it wants to be woken. Nothing here opens a socket or reads a
//! clock, so every exchange is tested deterministically and every parser is
//! fuzzed. The gateway (crates/control, issue 13) drives it.
//!
//! Layout (one job per module):
//! - [`message`]: the wire format: header, payloads, strict length checks,
//!   typed errors for every malformed input (never a panic).
//! - [`crypto`]: transforms and proposals (strongSwan names), PRF and
//!   prf+, SKEYSEED and key derivation (RFC 7296 2.14, 2.17), key exchange
//!   groups, the SK payload's encryption and integrity.
//! - [`engine`]: the exchanges (IKE_SA_INIT, IKE_AUTH with PSK,
//!   CREATE_CHILD_SA, INFORMATIONAL) as a state machine per IKE SA behind
//!   an [`engine::Engine`] that dispatches by SPI.
//!
//! What is supported and what is not: docs/ike.md.

pub mod crypto;
pub mod engine;
pub mod message;
