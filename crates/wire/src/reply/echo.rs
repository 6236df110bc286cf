//! ICMP and ICMPv6 echo replies, turned around in place.

use super::icmp_error::bad_v4_source;
use super::REPLY_TTL;
use crate::icmpv4::{self, Icmpv4Packet};
use crate::icmpv6::{self, Icmpv6Packet};
use crate::ipv4::Ipv4Packet;
use crate::ipv6::{self, Ipv6Packet};
use crate::{ip_protocol, Error, Result};

/// Turns the IPv4 ICMP echo request `ip_packet` into its echo reply in
/// place: swaps the addresses, sets the TTL to [`REPLY_TTL`], changes the
/// type and patches both checksums. Returns the reply's length (the
/// original total length). The caller checks the destination is ours.
pub fn icmpv4_echo_reply_in_place(ip_packet: &mut [u8]) -> Result<usize> {
    let mut ip = Ipv4Packet::new_checked(ip_packet)?;
    if !ip.verify_checksum() {
        return Err(Error::Checksum);
    }
    if ip.protocol() != ip_protocol::ICMP || ip.is_fragment() {
        return Err(Error::Unsupported);
    }
    if bad_v4_source(ip.src_addr()) {
        return Err(Error::Suppressed);
    }
    {
        let icmp = Icmpv4Packet::new_checked(ip.payload())?;
        if !icmp.verify_checksum() {
            return Err(Error::Checksum);
        }
        if (icmp.msg_type(), icmp.code()) != (icmpv4::msg_type::ECHO_REQUEST, 0) {
            return Err(Error::Unsupported);
        }
    }
    Icmpv4Packet::new_checked(ip.payload_mut())?.set_msg_type(icmpv4::msg_type::ECHO_REPLY);
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    ip.set_src_addr(dst);
    ip.set_dst_addr(src);
    ip.set_ttl(REPLY_TTL);
    ip.fill_checksum();
    Ok(usize::from(ip.total_len()))
}

/// Turns the ICMPv6 echo request `ip_packet` (no extension headers) into its
/// echo reply in place: swaps the addresses, sets the hop limit to
/// [`REPLY_TTL`], changes the type and patches the checksum (the
/// pseudo-header sum does not change when the addresses swap). Requests to
/// a multicast address are [`Error::Unsupported`]: their reply needs a
/// unicast source the caller must choose. Returns the reply's length.
pub fn icmpv6_echo_reply_in_place(ip_packet: &mut [u8]) -> Result<usize> {
    let mut ip = Ipv6Packet::new_checked(ip_packet)?;
    if ip.next_header() != ip_protocol::ICMPV6 || ip.dst_addr().is_multicast() {
        return Err(Error::Unsupported);
    }
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    if src.is_unspecified() || src.is_multicast() {
        return Err(Error::Suppressed);
    }
    {
        let icmp = Icmpv6Packet::new_checked(ip.payload())?;
        if !icmp.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        if (icmp.msg_type(), icmp.code()) != (icmpv6::msg_type::ECHO_REQUEST, 0) {
            return Err(Error::Unsupported);
        }
    }
    Icmpv6Packet::new_checked(ip.payload_mut())?.set_msg_type(icmpv6::msg_type::ECHO_REPLY);
    ip.set_src_addr(dst);
    ip.set_dst_addr(src);
    ip.set_hop_limit(REPLY_TTL);
    Ok(ipv6::HEADER_LEN + usize::from(ip.payload_len()))
}
