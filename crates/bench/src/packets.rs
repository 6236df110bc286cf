//! The packets the generator sends: Ethernet + IPv4 + UDP with a payload
//! pattern the sink can check byte for byte.
//!
//! Sizes are inner IP packet bytes (what the protected side sends, without
//! Ethernet): a "64-byte" case is a 64-byte IPv4 packet in a 78-byte frame.

use std::net::{Ipv4Addr, Ipv6Addr};

use espgw_wire::MacAddr;

use crate::flows::DST_PORT;
use crate::options::Inner;

pub const ETH_LEN: usize = 14;
pub const IPV4_LEN: usize = 20;
pub const IPV6_LEN: usize = 40;
pub const UDP_LEN: usize = 8;
/// Preamble + start delimiter (8), FCS (4) and inter-frame gap (12): what a
/// frame costs on an Ethernet link beyond its header and payload.
pub const L1_OVERHEAD: usize = 24;

/// Addresses of one Ethernet + IPv4 + UDP frame.
#[derive(Debug, Clone, Copy)]
pub struct FrameAddrs {
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
}

/// Payload byte at `offset` (from the start of the UDP payload) of a packet
/// of `ip_len` bytes: depends on both, so a packet truncated, shifted or
/// swapped with one of another size does not pass the sink.
#[inline]
pub fn payload_byte(ip_len: usize, offset: usize) -> u8 {
    (offset.wrapping_mul(31) ^ ip_len.wrapping_mul(7) ^ (offset >> 8)) as u8
}

/// The Internet checksum (RFC 1071) of `bytes`.
pub fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for pair in bytes.chunks(2) {
        let word = if pair.len() == 2 {
            u16::from_be_bytes([pair[0], pair[1]])
        } else {
            u16::from_be_bytes([pair[0], 0])
        };
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The Internet checksum of `parts` as if they were one byte string, 32
/// bits at a time and without copying them together: what the sink checks
/// the UDP checksum of ESP in UDP over IPv6 with (a pseudo-header and the
/// whole packet, for every packet). Every part but the last must have an
/// even length.
pub fn checksum_parts(parts: &[&[u8]]) -> u16 {
    // 2^16 = 1 (mod 0xffff): big-endian 32-bit words add up to the same
    // ones' complement sum as their two 16-bit halves.
    let mut sum: u64 = 0;
    for part in parts {
        let mut words = part.chunks_exact(4);
        for w in &mut words {
            sum += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
        }
        let rest = words.remainder();
        if rest.len() >= 2 {
            sum += u64::from(u16::from_be_bytes([rest[0], rest[1]]));
        }
        if rest.len() % 2 == 1 {
            sum += u64::from(rest[rest.len() - 1]) << 8;
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An IPv4 + UDP packet of exactly `ip_len` bytes (no Ethernet), TTL 64,
/// from UDP port `sport` to [`DST_PORT`], UDP checksum 0 (allowed over IPv4).
pub fn ipv4_udp(ip_len: usize, src: Ipv4Addr, dst: Ipv4Addr, sport: u16) -> Vec<u8> {
    assert!(
        ip_len >= IPV4_LEN + UDP_LEN,
        "inner packet too small: {ip_len}"
    );
    let mut p = vec![0u8; ip_len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    p[6] = 0x40; // DF: what a PMTU-aware host sends
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.octets());
    let sum = checksum(&p[..IPV4_LEN]);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    let udp = &mut p[IPV4_LEN..];
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&DST_PORT.to_be_bytes());
    udp[4..6].copy_from_slice(&((ip_len - IPV4_LEN) as u16).to_be_bytes());
    for (i, b) in p[IPV4_LEN + UDP_LEN..].iter_mut().enumerate() {
        *b = payload_byte(ip_len, i);
    }
    p
}

/// The IPv6 address `--inner ipv6` gives the host or network of IPv4
/// address `a`: `a` in the low 32 bits of fd00:ee::/96 (a unique local
/// prefix), so that every IPv4 prefix /n of the bench is the IPv6 prefix
/// /(96 + n) and the flows' sources stay apart as they are.
pub fn v6_of(a: Ipv4Addr) -> Ipv6Addr {
    Ipv6Addr::from((0xfd00_00ee_u128 << 96) | u128::from(u32::from(a)))
}

/// The IPv4 address [`v6_of`] mapped, if `a` is one of its addresses.
pub fn v4_of(a: Ipv6Addr) -> Option<Ipv4Addr> {
    let bits = u128::from(a);
    (bits >> 32 == 0xfd00_00ee_u128 << 64).then(|| Ipv4Addr::from(bits as u32))
}

/// An IPv6 + UDP packet of exactly `ip_len` bytes (no Ethernet), hop limit
/// 64, from UDP port `sport` to [`DST_PORT`], the UDP checksum computed
/// (IPv6 has no zero checksum for UDP, RFC 8200 section 8.1); the payload
/// pattern that of [`ipv4_udp`] for the same length.
pub fn ipv6_udp(ip_len: usize, src: Ipv6Addr, dst: Ipv6Addr, sport: u16) -> Vec<u8> {
    assert!(
        ip_len >= IPV6_LEN + UDP_LEN,
        "inner packet too small: {ip_len}"
    );
    let mut p = vec![0u8; ip_len];
    p[0] = 0x60;
    let udp_len = (ip_len - IPV6_LEN) as u16;
    p[4..6].copy_from_slice(&udp_len.to_be_bytes());
    p[6] = 17;
    p[7] = 64;
    p[8..24].copy_from_slice(&src.octets());
    p[24..40].copy_from_slice(&dst.octets());
    for (i, b) in p[IPV6_LEN + UDP_LEN..].iter_mut().enumerate() {
        *b = payload_byte(ip_len, i);
    }
    let udp = &mut p[IPV6_LEN..];
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&DST_PORT.to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    fill_udp_checksum_v6(&mut p);
    p
}

/// The Internet checksum over the IPv6 pseudo-header (addresses, UDP
/// length, next header 17) and the datagram of the IPv6 + UDP packet `ip`,
/// its checksum field counted as it is.
fn udp_sum_v6(ip: &[u8]) -> u16 {
    let len = (ip.len() - IPV6_LEN) as u32;
    let pseudo = [&len.to_be_bytes()[..], &[0, 0, 0, 17]].concat();
    checksum_parts(&[&ip[8..40], &pseudo, &ip[IPV6_LEN..]])
}

/// Writes the UDP checksum of the IPv6 + UDP packet `ip`; one that comes
/// out 0 is sent as 0xffff (0 means "none", which IPv6 does not allow).
pub fn fill_udp_checksum_v6(ip: &mut [u8]) {
    ip[IPV6_LEN + 6..IPV6_LEN + 8].fill(0);
    let sum = match udp_sum_v6(ip) {
        0 => 0xffff,
        s => s,
    };
    ip[IPV6_LEN + 6..IPV6_LEN + 8].copy_from_slice(&sum.to_be_bytes());
}

/// True when the UDP checksum of the IPv6 + UDP packet `ip` verifies: not
/// 0 (none), and the sum over pseudo-header and datagram with it all ones.
pub fn udp_checksum_v6_ok(ip: &[u8]) -> bool {
    ip[IPV6_LEN + 6..IPV6_LEN + 8] != [0, 0] && udp_sum_v6(ip) == 0
}

/// The inner packet of `inner`'s family: [`ipv4_udp`], or [`ipv6_udp`]
/// between the addresses [`v6_of`] maps `src` and `dst` to.
pub fn inner_udp(inner: Inner, ip_len: usize, src: Ipv4Addr, dst: Ipv4Addr, sport: u16) -> Vec<u8> {
    match inner {
        Inner::Ipv4 => ipv4_udp(ip_len, src, dst, sport),
        Inner::Ipv6 => ipv6_udp(ip_len, v6_of(src), v6_of(dst), sport),
    }
}

/// `ip` behind an Ethernet header: the IPv6 ethertype for an IPv6 packet
/// (the outer forms esp6, udp6), else IPv4's.
pub fn ethernet(addrs: &FrameAddrs, ip: &[u8]) -> Vec<u8> {
    let ethertype: u16 = if ip.first().is_some_and(|b| b >> 4 == 6) {
        0x86dd
    } else {
        0x0800
    };
    let mut f = Vec::with_capacity(ETH_LEN + ip.len());
    f.extend_from_slice(&addrs.dst_mac);
    f.extend_from_slice(&addrs.src_mac);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(ip);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_matches_rfc1071_example() {
        // RFC 1071 section 3 example: the ones' complement sum is 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn checksum_of_parts_is_the_checksum_of_their_concatenation() {
        let data: Vec<u8> = (0..1500u32).map(|i| (i * 7919 % 251) as u8).collect();
        for len in [0, 1, 2, 3, 5, 40, 41, 63, 1420, 1499] {
            for cut in [0, 2, 16, 40] {
                if cut > len {
                    continue;
                }
                let (a, b) = data[..len].split_at(cut);
                assert_eq!(
                    checksum_parts(&[a, &data[..0], b]),
                    checksum(&data[..len]),
                    "{len} bytes cut at {cut}"
                );
            }
        }
        assert_eq!(checksum_parts(&[&[0xff; 64]]), 0);
    }

    #[test]
    fn ipv4_header_checksums_to_zero_and_lengths_agree() {
        let p = ipv4_udp(
            64,
            Ipv4Addr::new(10, 1, 0, 10),
            Ipv4Addr::new(10, 2, 0, 10),
            10007,
        );
        assert_eq!(p.len(), 64);
        assert_eq!(checksum(&p[..IPV4_LEN]), 0, "a valid header sums to 0xffff");
        assert_eq!(u16::from_be_bytes([p[2], p[3]]), 64);
        assert_eq!(u16::from_be_bytes([p[20], p[21]]), 10007);
        assert_eq!(u16::from_be_bytes([p[22], p[23]]), DST_PORT);
        assert_eq!(u16::from_be_bytes([p[24], p[25]]), 44);
        assert_eq!(p[28], payload_byte(64, 0));
    }

    /// The IPv6 packet: lengths, next header, hop limit, addresses, ports,
    /// the payload pattern of the IPv4 packet of the same size, and a UDP
    /// checksum that verifies (to 0) and changes with the source port.
    #[test]
    fn ipv6_packet_is_well_formed_and_its_udp_checksum_verifies() {
        let (src, dst) = (Ipv4Addr::new(10, 1, 0, 10), Ipv4Addr::new(10, 2, 0, 10));
        let p = inner_udp(Inner::Ipv6, 64, src, dst, 10007);
        assert_eq!(p.len(), 64);
        assert_eq!((p[0] >> 4, p[6], p[7]), (6, 17, 64));
        assert_eq!(u16::from_be_bytes([p[4], p[5]]), 24);
        assert_eq!(p[8..24], v6_of(src).octets());
        assert_eq!(p[24..40], v6_of(dst).octets());
        assert_eq!(v6_of(src).to_string(), "fd00:ee::a01:a");
        assert_eq!(
            (v4_of(v6_of(src)), v4_of(Ipv6Addr::LOCALHOST)),
            (Some(src), None)
        );
        assert_eq!(u16::from_be_bytes([p[40], p[41]]), 10007);
        assert_eq!(u16::from_be_bytes([p[42], p[43]]), DST_PORT);
        assert_eq!(u16::from_be_bytes([p[44], p[45]]), 24);
        assert_eq!(p[48..], ipv4_udp(64, src, dst, 10007)[28..44]);
        assert!(udp_checksum_v6_ok(&p), "verifies");
        let q = inner_udp(Inner::Ipv6, 64, src, dst, 10008);
        assert_ne!(p[46..48], q[46..48]);
        assert!(udp_checksum_v6_ok(&q));
        let mut bad = p.clone();
        bad[50] ^= 1;
        assert!(!udp_checksum_v6_ok(&bad));
        let mut none = p.clone();
        none[46..48].fill(0);
        assert!(!udp_checksum_v6_ok(&none), "0 is no checksum");
        // The source port whose checksum computes to 0 (the ports cover
        // every residue) is sent as 0xffff, which verifies.
        let zero = (0..=u16::MAX)
            .map(|sport| inner_udp(Inner::Ipv6, 64, src, dst, sport))
            .find(|p| p[46..48] == [0xff, 0xff])
            .expect("a port whose checksum is 0");
        assert!(udp_checksum_v6_ok(&zero));
        assert_eq!(
            inner_udp(Inner::Ipv4, 64, src, dst, 1),
            ipv4_udp(64, src, dst, 1)
        );
    }

    #[test]
    fn payload_differs_between_sizes() {
        let a: Vec<u8> = (0..36).map(|i| payload_byte(64, i)).collect();
        let b: Vec<u8> = (0..36).map(|i| payload_byte(570, i)).collect();
        assert_ne!(a, b);
    }
}
