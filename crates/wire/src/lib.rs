//! Packet views over byte buffers: Ethernet, ARP, IPv4, IPv6, UDP, ICMP/ICMPv6, ESP.
//!
//! No allocation and no DPDK. Every view has a checked constructor for
//! untrusted input; accessors never panic once the view exists.
#![forbid(unsafe_code)]

pub mod buf;

pub use buf::{NoRoom, PacketBuf, VecBuf};
