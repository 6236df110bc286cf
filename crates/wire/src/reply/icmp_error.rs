//! ICMP errors the gateway originates: IPv4 fragmentation needed and time
//! exceeded (RFC 792, RFC 1191, RFC 1812), ICMPv6 Packet Too Big and Time
//! Exceeded (RFC 4443).
//!
//! Each comes in two forms: `emit_*` writes the error into a separate
//! buffer, and `*_in_buf` turns the [`PacketBuf`] holding the offending
//! packet into the error that quotes it, prepending the new headers into
//! headroom so nothing is copied.

use super::REPLY_TTL;
use crate::icmpv4;
use crate::icmpv6::{self, Icmpv6Packet};
use crate::ipv4::{self, Ipv4Packet, Ipv4Repr};
use crate::ipv6::{self, Ipv6Packet, Ipv6Repr};
use crate::{checksum, ip_protocol, Error, PacketBuf, Result};
use core::net::{Ipv4Addr, Ipv6Addr};

/// Largest IPv4 ICMP error the gateway sends (RFC 1812 4.3.2.3).
pub const ICMPV4_ERROR_MAX_LEN: usize = 576;
/// Bytes an IPv4 ICMP error puts before the quoted packet.
pub const ICMPV4_ERROR_OVERHEAD: usize = ipv4::MIN_HEADER_LEN + icmpv4::HEADER_LEN;
/// Bytes an ICMPv6 error puts before the quoted packet.
pub const ICMPV6_ERROR_OVERHEAD: usize = ipv6::HEADER_LEN + icmpv6::HEADER_LEN;

/// True for an IPv4 address no error or reply may be sent to.
pub(super) fn bad_v4_source(a: Ipv4Addr) -> bool {
    a.is_unspecified() || a.is_broadcast() || a.is_multicast() || a.is_loopback()
}

/// The ICMP type, code and 4 type-specific bytes of one error.
#[derive(Clone, Copy)]
struct IcmpHeader {
    msg_type: u8,
    code: u8,
    rest: [u8; 4],
}

impl IcmpHeader {
    fn frag_needed(mtu: u16) -> Self {
        let m = mtu.to_be_bytes();
        IcmpHeader {
            msg_type: icmpv4::msg_type::DST_UNREACHABLE,
            code: icmpv4::CODE_FRAG_NEEDED,
            rest: [0, 0, m[0], m[1]],
        }
    }
    fn time_exceeded_v4() -> Self {
        IcmpHeader {
            msg_type: icmpv4::msg_type::TIME_EXCEEDED,
            code: icmpv4::CODE_TTL_EXCEEDED,
            rest: [0; 4],
        }
    }
    fn packet_too_big(mtu: u32) -> Self {
        IcmpHeader {
            msg_type: icmpv6::msg_type::PACKET_TOO_BIG,
            code: 0,
            rest: mtu.to_be_bytes(),
        }
    }
    fn time_exceeded_v6() -> Self {
        IcmpHeader {
            msg_type: icmpv6::msg_type::TIME_EXCEEDED,
            code: 0,
            rest: [0; 4],
        }
    }
    /// Writes the 8-byte header (checksum zero) at the start of `m`.
    fn write(&self, m: &mut [u8]) {
        m[0] = self.msg_type;
        m[1] = self.code;
        m[2..4].copy_from_slice(&[0, 0]);
        m[4..8].copy_from_slice(&self.rest);
    }
}

/// What an allowed error looks like: who gets it and how much is quoted.
struct Plan<A> {
    to: A,
    quote_len: usize,
}

/// Checks RFC 1812 4.3.2.7 (no error about an ICMP error, a non-first
/// fragment, a broadcast/multicast destination or a bad source) and picks
/// the quote: as much as fits in `max_len` (itself capped at 576), at least
/// the original header + 8 bytes (RFC 792).
fn plan_v4(orig: &[u8], max_len: usize) -> Result<Plan<Ipv4Addr>> {
    let orig = Ipv4Packet::new_checked(orig)?;
    if !orig.verify_checksum() {
        return Err(Error::Checksum);
    }
    let dst = orig.dst_addr();
    if orig.frag_offset() != 0
        || bad_v4_source(orig.src_addr())
        || dst.is_broadcast()
        || dst.is_multicast()
    {
        return Err(Error::Suppressed);
    }
    if orig.protocol() == ip_protocol::ICMP {
        // An unreadable ICMP header might be an error: stay quiet.
        let t = *orig.payload().first().ok_or(Error::Suppressed)?;
        if icmpv4::is_error_type(t) {
            return Err(Error::Suppressed);
        }
    }
    let whole = orig.packet().len();
    let room = max_len
        .min(ICMPV4_ERROR_MAX_LEN)
        .saturating_sub(ICMPV4_ERROR_OVERHEAD);
    if room < whole.min(orig.header_len() + 8) {
        return Err(Error::NoRoom);
    }
    Ok(Plan {
        to: orig.src_addr(),
        quote_len: whole.min(room),
    })
}

/// Checks RFC 4443 2.4 (e) (no error about an ICMPv6 error or redirect, or
/// to an unspecified/multicast source; only Packet Too Big about a packet
/// sent to multicast) and picks the quote: as much as fits in `max_len`
/// (itself capped at 1280), at least the fixed header.
fn plan_v6(orig: &[u8], max_len: usize, multicast_ok: bool) -> Result<Plan<Ipv6Addr>> {
    let orig = Ipv6Packet::new_checked(orig)?;
    let to = orig.src_addr();
    if to.is_unspecified() || to.is_multicast() || (orig.dst_addr().is_multicast() && !multicast_ok)
    {
        return Err(Error::Suppressed);
    }
    // If the chain cannot be read we cannot tell whether it is an ICMPv6
    // error, so stay quiet.
    let (next, offset) = orig.upper_layer().map_err(|_| Error::Suppressed)?;
    if next == ip_protocol::ICMPV6 {
        let t = *orig.packet().get(offset).ok_or(Error::Suppressed)?;
        if t < 128 || t == icmpv6::msg_type::REDIRECT {
            return Err(Error::Suppressed);
        }
    }
    let room = max_len
        .min(icmpv6::MIN_MTU)
        .saturating_sub(ICMPV6_ERROR_OVERHEAD);
    if room < ipv6::HEADER_LEN {
        return Err(Error::NoRoom);
    }
    Ok(Plan {
        to,
        quote_len: orig.packet().len().min(room),
    })
}

/// Fills the IPv4 and ICMP headers of `msg`, whose bytes after
/// [`ICMPV4_ERROR_OVERHEAD`] already hold the quote.
fn finish_v4(msg: &mut [u8], icmp: IcmpHeader, src: Ipv4Addr, to: Ipv4Addr) -> Result<usize> {
    let ip = Ipv4Repr {
        src_addr: src,
        dst_addr: to,
        protocol: ip_protocol::ICMP,
        payload_len: (msg.len() - ipv4::MIN_HEADER_LEN) as u16,
        ttl: REPLY_TTL,
        dscp_ecn: 0,
        ident: 0,
        dont_frag: false,
    };
    let h = ip.emit(msg)?;
    icmp.write(&mut msg[h..]);
    let c = checksum::checksum(&msg[h..]);
    msg[h + 2..h + 4].copy_from_slice(&c.to_be_bytes());
    Ok(msg.len())
}

/// Fills the IPv6 and ICMPv6 headers of `msg`, whose bytes after
/// [`ICMPV6_ERROR_OVERHEAD`] already hold the quote.
fn finish_v6(msg: &mut [u8], icmp: IcmpHeader, src: Ipv6Addr, to: Ipv6Addr) -> Result<usize> {
    let ip = Ipv6Repr {
        src_addr: src,
        dst_addr: to,
        next_header: ip_protocol::ICMPV6,
        payload_len: (msg.len() - ipv6::HEADER_LEN) as u16,
        hop_limit: REPLY_TTL,
        traffic_class: 0,
        flow_label: 0,
    };
    let h = ip.emit(msg)?;
    icmp.write(&mut msg[h..]);
    Icmpv6Packet::new_checked(&mut msg[h..])?.fill_checksum(src, to);
    Ok(msg.len())
}

fn emit_v4(orig: &[u8], icmp: IcmpHeader, src: Ipv4Addr, out: &mut [u8]) -> Result<usize> {
    let plan = plan_v4(orig, out.len())?;
    let end = ICMPV4_ERROR_OVERHEAD + plan.quote_len;
    out[ICMPV4_ERROR_OVERHEAD..end].copy_from_slice(&orig[..plan.quote_len]);
    finish_v4(&mut out[..end], icmp, src, plan.to)
}

fn emit_v6(
    orig: &[u8],
    icmp: IcmpHeader,
    multicast_ok: bool,
    src: Ipv6Addr,
    out: &mut [u8],
) -> Result<usize> {
    let plan = plan_v6(orig, out.len(), multicast_ok)?;
    let end = ICMPV6_ERROR_OVERHEAD + plan.quote_len;
    out[ICMPV6_ERROR_OVERHEAD..end].copy_from_slice(&orig[..plan.quote_len]);
    finish_v6(&mut out[..end], icmp, src, plan.to)
}

/// Prepends room for the headers, trims the quote and fills the headers.
/// Leaves `buf` untouched on error.
fn in_buf<B: PacketBuf + ?Sized>(
    buf: &mut B,
    overhead: usize,
    quote_len: usize,
    finish: impl FnOnce(&mut [u8]) -> Result<usize>,
) -> Result<()> {
    if buf.headroom() < overhead {
        return Err(Error::NoRoom);
    }
    let excess = buf.len() - quote_len;
    buf.prepend(overhead).map_err(|_| Error::NoRoom)?;
    buf.trim(excess).map_err(|_| Error::NoRoom)?;
    finish(buf.data_mut()).map(|_| ())
}

/// Writes into `out` the IPv4 packet "destination unreachable,
/// fragmentation needed" (type 3 code 4) with next-hop `mtu` (RFC 1191),
/// from `src` back to the sender of `orig_ip_packet`. Quotes as much of the
/// original as fits in `out` and in 576 bytes, and at least its header + 8
/// bytes ([`Error::NoRoom`] otherwise). Returns the length written.
/// [`Error::Suppressed`] when RFC 1812 4.3.2.7 forbids the error.
pub fn emit_icmpv4_frag_needed(
    orig_ip_packet: &[u8],
    mtu: u16,
    src: Ipv4Addr,
    out: &mut [u8],
) -> Result<usize> {
    emit_v4(orig_ip_packet, IcmpHeader::frag_needed(mtu), src, out)
}

/// Writes into `out` the IPv4 packet "time exceeded, TTL exceeded in
/// transit" about `orig_ip_packet` (as received, before any TTL change).
/// Same quoting and suppression rules as [`emit_icmpv4_frag_needed`].
pub fn emit_icmpv4_time_exceeded(
    orig_ip_packet: &[u8],
    src: Ipv4Addr,
    out: &mut [u8],
) -> Result<usize> {
    emit_v4(orig_ip_packet, IcmpHeader::time_exceeded_v4(), src, out)
}

/// Writes into `out` the ICMPv6 Packet Too Big with `mtu` about
/// `orig_ip_packet`, from `src` back to its sender, quoting as much of the
/// original as fits in `out` and in 1280 bytes. Returns the length written.
pub fn emit_icmpv6_packet_too_big(
    orig_ip_packet: &[u8],
    mtu: u32,
    src: Ipv6Addr,
    out: &mut [u8],
) -> Result<usize> {
    emit_v6(
        orig_ip_packet,
        IcmpHeader::packet_too_big(mtu),
        true,
        src,
        out,
    )
}

/// Writes into `out` the ICMPv6 Time Exceeded (hop limit exceeded in
/// transit) about `orig_ip_packet`. Same rules as
/// [`emit_icmpv6_packet_too_big`], except that none is sent about a packet
/// to a multicast address.
pub fn emit_icmpv6_time_exceeded(
    orig_ip_packet: &[u8],
    src: Ipv6Addr,
    out: &mut [u8],
) -> Result<usize> {
    emit_v6(
        orig_ip_packet,
        IcmpHeader::time_exceeded_v6(),
        false,
        src,
        out,
    )
}

/// Turns `buf`, holding an IPv4 packet (from its IP header on), into the
/// "fragmentation needed" error about it, in place: the 28 header bytes go
/// into headroom and the quote is trimmed to fit 576 bytes. Same rules as
/// [`emit_icmpv4_frag_needed`]; `buf` is unchanged on error.
pub fn icmpv4_frag_needed_in_buf<B: PacketBuf + ?Sized>(
    buf: &mut B,
    mtu: u16,
    src: Ipv4Addr,
) -> Result<()> {
    let plan = plan_v4(buf.data(), ICMPV4_ERROR_MAX_LEN)?;
    let icmp = IcmpHeader::frag_needed(mtu);
    in_buf(buf, ICMPV4_ERROR_OVERHEAD, plan.quote_len, |m| {
        finish_v4(m, icmp, src, plan.to)
    })
}

/// Like [`icmpv4_frag_needed_in_buf`] for "time exceeded".
pub fn icmpv4_time_exceeded_in_buf<B: PacketBuf + ?Sized>(
    buf: &mut B,
    src: Ipv4Addr,
) -> Result<()> {
    let plan = plan_v4(buf.data(), ICMPV4_ERROR_MAX_LEN)?;
    let icmp = IcmpHeader::time_exceeded_v4();
    in_buf(buf, ICMPV4_ERROR_OVERHEAD, plan.quote_len, |m| {
        finish_v4(m, icmp, src, plan.to)
    })
}

/// Turns `buf`, holding an IPv6 packet, into the Packet Too Big error about
/// it, in place (48 header bytes into headroom, quote trimmed to fit 1280
/// bytes). Same rules as [`emit_icmpv6_packet_too_big`]; `buf` is unchanged
/// on error.
pub fn icmpv6_packet_too_big_in_buf<B: PacketBuf + ?Sized>(
    buf: &mut B,
    mtu: u32,
    src: Ipv6Addr,
) -> Result<()> {
    let plan = plan_v6(buf.data(), icmpv6::MIN_MTU, true)?;
    let icmp = IcmpHeader::packet_too_big(mtu);
    in_buf(buf, ICMPV6_ERROR_OVERHEAD, plan.quote_len, |m| {
        finish_v6(m, icmp, src, plan.to)
    })
}

/// Like [`icmpv6_packet_too_big_in_buf`] for Time Exceeded.
pub fn icmpv6_time_exceeded_in_buf<B: PacketBuf + ?Sized>(
    buf: &mut B,
    src: Ipv6Addr,
) -> Result<()> {
    let plan = plan_v6(buf.data(), icmpv6::MIN_MTU, false)?;
    let icmp = IcmpHeader::time_exceeded_v6();
    in_buf(buf, ICMPV6_ERROR_OVERHEAD, plan.quote_len, |m| {
        finish_v6(m, icmp, src, plan.to)
    })
}
