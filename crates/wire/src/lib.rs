//! Packet views over byte buffers: Ethernet, ARP, IPv4, IPv6, UDP, ICMP/ICMPv6, ESP.
//!
//! No allocation and no DPDK. Every view has a checked constructor for
//! untrusted input; accessors never panic once the view exists.
//!
//! The shape follows smoltcp's wire module: per format a `XxxPacket<T:
//! AsRef<[u8]>>` view whose `new_checked` validates lengths once (setters
//! when `T: AsMut<[u8]>`), and a `XxxRepr` with `parse` and `emit`. Builders
//! for the packets the gateway answers with (ICMP errors, echo replies,
//! ARP and ND) live in [`reply`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod arp;
pub mod buf;
pub mod checksum;
pub mod error;
pub mod esp;
pub mod ethernet;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod reply;
pub mod udp;

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod testutil;

pub use arp::{ArpPacket, ArpRepr};
pub use buf::{NoRoom, PacketBuf, VecBuf};
pub use error::{Error, Result};
pub use esp::{classify_udp_encap, EspPacket, EspRepr, UdpEncapKind};
pub use ethernet::{ethertype, EthernetFrame, EthernetRepr, MacAddr};
pub use icmpv4::{Icmpv4Packet, Icmpv4Repr};
pub use icmpv6::{Icmpv6Packet, Icmpv6Repr};
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use udp::{UdpPacket, UdpRepr};

/// IP protocol / IPv6 next-header numbers (IANA).
pub mod ip_protocol {
    /// IPv6 Hop-by-Hop Options.
    pub const HOPOPTS: u8 = 0;
    /// ICMP for IPv4.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// IPv6 encapsulation (IPv6 inner packet in tunnel mode).
    pub const IPV6: u8 = 41;
    /// IPv4 encapsulation (IPv4 inner packet in tunnel mode).
    pub const IPV4: u8 = 4;
    /// IPv6 Routing header.
    pub const ROUTING: u8 = 43;
    /// IPv6 Fragment header.
    pub const FRAGMENT: u8 = 44;
    /// Encapsulating Security Payload.
    pub const ESP: u8 = 50;
    /// Authentication Header.
    pub const AH: u8 = 51;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// IPv6 No Next Header.
    pub const NO_NEXT_HEADER: u8 = 59;
    /// IPv6 Destination Options.
    pub const DSTOPTS: u8 = 60;
}
