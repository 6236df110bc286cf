//! Packet views over byte buffers: Ethernet, ARP, IPv4, IPv6, UDP, TCP, ICMP/ICMPv6, ESP.
//!
//! No allocation and no DPDK. Every view has a checked constructor for
//! untrusted input; accessors never panic once the view exists.
//!
//! The shape follows smoltcp's wire module: per format a `XxxPacket<T:
//! AsRef<[u8]>>` view whose `new_checked` validates lengths once (setters
//! when `T: AsMut<[u8]>`), and a `XxxRepr` with `parse` and `emit`. Builders
//! for the packets the gateway answers with (ICMP errors, echo replies,
//! ARP and ND) live in [`reply`].
//!
//! ```
//! use espgw_wire::{classify_udp_encap, ethertype, ip_protocol, EspPacket, EthernetFrame};
//! use espgw_wire::{Ipv4Packet, UdpEncapKind, UdpPacket, esp::NAT_T_PORT};
//!
//! /// The SPI of a UDP-encapsulated ESP packet in an Ethernet frame, if it is one.
//! fn nat_t_spi(frame: &[u8]) -> Option<u32> {
//!     let eth = EthernetFrame::new_checked(frame).ok()?;
//!     if eth.ethertype() != ethertype::IPV4 {
//!         return None;
//!     }
//!     let ip = Ipv4Packet::new_checked(eth.into_payload()).ok()?;
//!     if !ip.verify_checksum() || ip.protocol() != ip_protocol::UDP || ip.is_fragment() {
//!         return None;
//!     }
//!     let udp = UdpPacket::new_checked(ip.into_payload()).ok()?;
//!     if udp.dst_port() != NAT_T_PORT || classify_udp_encap(udp.payload()) != UdpEncapKind::Esp {
//!         return None;
//!     }
//!     Some(EspPacket::new_checked(udp.into_payload()).ok()?.spi())
//! }
//!
//! // scapy: Ether()/IP(src="192.0.2.1", dst="192.0.2.2")/UDP(sport=4500, dport=4500)/ESP(spi=0x01020304, seq=1, data=24 x 0xcd)
//! let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
//! frame.extend_from_slice(&[
//!     0x45, 0x00, 0x00, 0x3c, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0xf6, 0xac, 0xc0, 0x00, 0x02, 0x01,
//!     0xc0, 0x00, 0x02, 0x02, 0x11, 0x94, 0x11, 0x94, 0x00, 0x28, 0xae, 0xc5, 0x01, 0x02, 0x03, 0x04,
//!     0x00, 0x00, 0x00, 0x01,
//! ]);
//! frame.extend_from_slice(&[0xcd; 24]);
//! assert_eq!(nat_t_spi(&frame), Some(0x0102_0304));
//! assert_eq!(nat_t_spi(&frame[..40]), None); // truncated: rejected, no panic
//! ```
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
pub mod tcp;
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
pub use tcp::TcpPacket;
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
