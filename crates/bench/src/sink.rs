//! What the sink checks on every packet that comes out of the measured
//! stage, and its tally. A benchmark that counts packets it never looked at
//! can measure a bug at full speed; every output is checked here (outside
//! the timed region).
//!
//! * ESP out (encrypt): Ethernet to the peer, the outer form the case asked
//!   for (`--outer`: the ethertype, IPv4 or IPv6, protocol 50 or UDP from
//!   4500 to 4500 with the checksum the form calls for: 0 over IPv4, valid
//!   over IPv6), from our address to the peer's, the expected SPI, an outer
//!   length that one of the case's inner sizes encapsulates to. A frame in
//!   another form than the case's fails with `wrong_outer_form`.
//! * Plaintext out (decrypt): Ethernet to the host, the inner IPv4 header as
//!   sent (addresses, length, TTL as expected, identification, flags,
//!   protocol, valid checksum), a source address and UDP source port that
//!   are one of the case's flows, the rest of the UDP header, and the
//!   payload byte for byte.

use std::net::{IpAddr, Ipv4Addr};

use espgw_esp::{InboundSa, SaConfig, Verdict};
use espgw_wire::{MacAddr, PacketBuf, VecBuf};

use crate::flows::Flows;
use crate::options::{Inner, Outer};
use crate::packets::{
    checksum, checksum_parts, udp_checksum_v6_ok, v4_of, v6_of, ETH_LEN, IPV4_LEN, IPV6_LEN,
    UDP_LEN,
};

/// Why a packet failed the sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    Truncated,
    WrongMac,
    NotIpv4,
    WrongAddress,
    NotEsp,
    WrongSpi,
    WrongLength,
    BadChecksum,
    WrongTtl,
    PayloadMismatch,
    WrongPort,
    WrongHeader,
    UnknownFlow,
    Rejected,
    PeerCannotDecrypt,
    /// ESP, but not in the case's outer form (IPv4 for IPv6, ESP in UDP
    /// for plain ESP or the reverse).
    WrongOuter,
    /// An inner packet of the other IP version than the case's.
    WrongVersion,
}

impl Invalid {
    pub fn name(self) -> &'static str {
        match self {
            Invalid::Truncated => "truncated",
            Invalid::WrongMac => "wrong_mac",
            Invalid::NotIpv4 => "not_ipv4",
            Invalid::WrongAddress => "wrong_address",
            Invalid::NotEsp => "not_esp",
            Invalid::WrongSpi => "wrong_spi",
            Invalid::WrongLength => "wrong_length",
            Invalid::BadChecksum => "bad_checksum",
            Invalid::WrongTtl => "wrong_ttl",
            Invalid::PayloadMismatch => "payload_mismatch",
            Invalid::WrongPort => "wrong_port",
            Invalid::WrongHeader => "wrong_header",
            Invalid::UnknownFlow => "unknown_flow",
            Invalid::Rejected => "rejected_by_stage",
            Invalid::PeerCannotDecrypt => "peer_cannot_decrypt",
            Invalid::WrongOuter => "wrong_outer_form",
            Invalid::WrongVersion => "wrong_ip_version",
        }
    }
}

const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
const ETHERTYPE_IPV6: [u8; 2] = [0x86, 0xdd];

/// Strips an Ethernet header after checking its MACs and IPv4 ethertype.
pub fn check_ethernet(frame: &[u8], src: MacAddr, dst: MacAddr) -> Result<&[u8], Invalid> {
    check_ethernet_of(frame, src, dst, false)
}

/// Strips an Ethernet header after checking its MACs and the ethertype of
/// IPv6 (`ipv6`) or IPv4; the other IP version's is the wrong outer form.
pub fn check_ethernet_of(
    frame: &[u8],
    src: MacAddr,
    dst: MacAddr,
    ipv6: bool,
) -> Result<&[u8], Invalid> {
    if frame.len() < ETH_LEN {
        return Err(Invalid::Truncated);
    }
    if frame[0..6] != dst || frame[6..12] != src {
        return Err(Invalid::WrongMac);
    }
    let (want, other) = if ipv6 {
        (ETHERTYPE_IPV6, ETHERTYPE_IPV4)
    } else {
        (ETHERTYPE_IPV4, ETHERTYPE_IPV6)
    };
    if frame[12..14] == other {
        return Err(Invalid::WrongOuter);
    }
    if frame[12..14] != want {
        return Err(Invalid::NotIpv4);
    }
    Ok(&frame[ETH_LEN..])
}

/// Checks the common IPv4 header fields, the source address when `src`
/// is given (else it is the caller's to check); returns the total length.
fn check_ipv4(ip: &[u8], src: Option<Ipv4Addr>, dst: Ipv4Addr) -> Result<usize, Invalid> {
    if ip.len() < IPV4_LEN {
        return Err(Invalid::Truncated);
    }
    if ip[0] != 0x45 {
        return Err(Invalid::NotIpv4);
    }
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if total != ip.len() {
        return Err(Invalid::WrongLength);
    }
    if ip[16..20] != dst.octets() || src.is_some_and(|s| ip[12..16] != s.octets()) {
        return Err(Invalid::WrongAddress);
    }
    if checksum(&ip[..IPV4_LEN]) != 0 {
        return Err(Invalid::BadChecksum);
    }
    Ok(total)
}

/// What an ESP packet out of the gateway must look like.
#[derive(Debug, Clone)]
pub struct EspExpect {
    pub spi: u32,
    /// The outer form: IP version and ESP or ESP in UDP.
    pub outer: Outer,
    /// Outer source and destination, of `outer`'s family.
    pub src: IpAddr,
    pub dst: IpAddr,
    /// Outer IP lengths the case's inner sizes encapsulate to.
    pub outer_lens: Vec<usize>,
}

const IPPROTO_ESP: u8 = 50;
const IPPROTO_UDP: u8 = 17;
/// RFC 3948: ESP in UDP from and to the NAT-T port (the bench tunnels'
/// `encap = "udp"`).
const NAT_T_PORT: u16 = 4500;

/// Checks an outer ESP packet (no Ethernet) in the form `e.outer` says.
pub fn check_esp(ip: &[u8], e: &EspExpect) -> Result<(), Invalid> {
    let version = ip.first().ok_or(Invalid::Truncated)? >> 4;
    if version != if e.outer.ipv6() { 6 } else { 4 } {
        return Err(if version == 4 || version == 6 {
            Invalid::WrongOuter
        } else {
            Invalid::NotIpv4
        });
    }
    let (total, protocol, ip_len) = match (e.src, e.dst) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => (check_ipv4(ip, Some(src), dst)?, ip[9], IPV4_LEN),
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            if ip.len() < IPV6_LEN {
                return Err(Invalid::Truncated);
            }
            let total = IPV6_LEN + usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            if total != ip.len() {
                return Err(Invalid::WrongLength);
            }
            if ip[8..24] != src.octets() || ip[24..40] != dst.octets() {
                return Err(Invalid::WrongAddress);
            }
            (total, ip[6], IPV6_LEN)
        }
        _ => return Err(Invalid::WrongAddress),
    };
    let want = if e.outer.udp() {
        IPPROTO_UDP
    } else {
        IPPROTO_ESP
    };
    if protocol != want {
        return Err(if protocol == IPPROTO_UDP || protocol == IPPROTO_ESP {
            Invalid::WrongOuter
        } else {
            Invalid::NotEsp
        });
    }
    if e.outer.udp() {
        check_nat_t(ip, ip_len, e)?;
    }
    let at = e.outer.header_len();
    if ip.len() < at + 8 {
        return Err(Invalid::Truncated);
    }
    let spi = u32::from_be_bytes([ip[at], ip[at + 1], ip[at + 2], ip[at + 3]]);
    if spi != e.spi {
        return Err(Invalid::WrongSpi);
    }
    if !e.outer_lens.contains(&total) {
        return Err(Invalid::WrongLength);
    }
    Ok(())
}

/// The UDP header of ESP in UDP at `ip[at..]`: 4500 to 4500, the length to
/// the end of the packet, checksum 0 over IPv4 (RFC 3948 §2.1, what the
/// gateway sends) and valid over IPv6 (RFC 8200 §8.1).
fn check_nat_t(ip: &[u8], at: usize, e: &EspExpect) -> Result<(), Invalid> {
    if ip.len() < at + UDP_LEN {
        return Err(Invalid::Truncated);
    }
    let udp = &ip[at..];
    let port = |i: usize| u16::from_be_bytes([udp[i], udp[i + 1]]);
    if port(0) != NAT_T_PORT || port(2) != NAT_T_PORT {
        return Err(Invalid::NotEsp);
    }
    if usize::from(port(4)) != udp.len() {
        return Err(Invalid::WrongLength);
    }
    let ok = match (e.src, e.dst) {
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            // Pseudo-header (RFC 8200 §8.1) + UDP header and payload sum to
            // 0xffff when the checksum is right; 0 is not allowed.
            let len = (udp.len() as u32).to_be_bytes();
            let next = [0, 0, 0, IPPROTO_UDP];
            let parts: [&[u8]; 5] = [&src.octets(), &dst.octets(), &len, &next, udp];
            port(6) != 0 && checksum_parts(&parts) == 0
        }
        _ => port(6) == 0,
    };
    if !ok {
        return Err(Invalid::BadChecksum);
    }
    Ok(())
}

/// What a plaintext packet out of the gateway must look like: one of the
/// packets the sender sent, of one of its flows, restored.
#[derive(Debug, Clone)]
pub struct InnerExpect {
    /// The packets' family: with IPv6, the addresses are those
    /// [`crate::packets::v6_of`] maps `dst` and the flows' sources to.
    pub inner: Inner,
    /// The flows the packets may belong to (source address and port).
    pub flows: Flows,
    pub dst: Ipv4Addr,
    pub ttl: u8,
    /// The packet of each size as flow 0 sent it (a handful: a linear
    /// search beats hashing). Other flows differ from it only in the
    /// source address, the UDP source port and the header checksum (over
    /// IPv6: the UDP checksum).
    pub originals: Vec<Vec<u8>>,
}

impl InnerExpect {
    pub fn new(
        flows: Flows,
        dst: Ipv4Addr,
        ttl: u8,
        originals: impl IntoIterator<Item = Vec<u8>>,
    ) -> Self {
        InnerExpect {
            inner: Inner::Ipv4,
            flows,
            dst,
            ttl,
            originals: originals.into_iter().collect(),
        }
    }
}

impl InnerExpect {
    /// The same expectation for packets of `inner`'s family (whose
    /// `originals` are of that family).
    pub fn of(self, inner: Inner) -> Self {
        InnerExpect { inner, ..self }
    }
}

/// Checks a restored inner packet (no Ethernet).
pub fn check_inner(ip: &[u8], e: &InnerExpect) -> Result<(), Invalid> {
    check_inner_parts(ip, e, true)
}

/// [`check_inner`] without the payload: every header field, the length
/// and the flow, reading only the packet's first bytes. The worker layer's
/// sink checks the payload of one burst in [`crate::layers::PEER_CHECK_EVERY`]
/// and the headers of every packet: with the decrypt fan-out, reading every
/// byte on the receiving worker would move each packet a second time
/// between cores, a cost of the sink, not of the gateway.
pub fn check_inner_header(ip: &[u8], e: &InnerExpect) -> Result<(), Invalid> {
    check_inner_parts(ip, e, false)
}

fn check_inner_parts(ip: &[u8], e: &InnerExpect, payload: bool) -> Result<(), Invalid> {
    if e.inner.ipv6() {
        return check_inner_v6(ip, e, payload);
    }
    let total = check_ipv4(ip, None, e.dst)?;
    let original = e
        .originals
        .iter()
        .find(|p| p.len() == total)
        .ok_or(Invalid::WrongLength)?;
    if total < IPV4_LEN + UDP_LEN {
        return Err(Invalid::Truncated);
    }
    if ip[8] != e.ttl {
        return Err(Invalid::WrongTtl);
    }
    // Identification, flags and fragment offset, protocol.
    if ip[4..8] != original[4..8] || ip[9] != original[9] {
        return Err(Invalid::WrongHeader);
    }
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let sport = u16::from_be_bytes([ip[IPV4_LEN], ip[IPV4_LEN + 1]]);
    if e.flows.index_of(src, sport).is_none() {
        return Err(Invalid::UnknownFlow);
    }
    // Destination port, UDP length and checksum: the same for every flow.
    if ip[IPV4_LEN + 2..IPV4_LEN + UDP_LEN] != original[IPV4_LEN + 2..IPV4_LEN + UDP_LEN] {
        return Err(Invalid::WrongHeader);
    }
    if payload && ip[IPV4_LEN + UDP_LEN..] != original[IPV4_LEN + UDP_LEN..] {
        return Err(Invalid::PayloadMismatch);
    }
    Ok(())
}

/// [`check_inner_parts`] of an IPv6 packet: every header field, the
/// length and the flow; with `payload` the payload byte for byte and the
/// UDP checksum (which differs between flows, so it is checked by
/// computing it, with the payload it covers).
fn check_inner_v6(ip: &[u8], e: &InnerExpect, payload: bool) -> Result<(), Invalid> {
    if ip.len() < IPV6_LEN + UDP_LEN {
        return Err(Invalid::Truncated);
    }
    if ip[0] >> 4 != 6 {
        return Err(Invalid::WrongVersion);
    }
    let total = IPV6_LEN + usize::from(u16::from_be_bytes([ip[4], ip[5]]));
    if total != ip.len() {
        return Err(Invalid::WrongLength);
    }
    if ip[24..40] != v6_of(e.dst).octets() {
        return Err(Invalid::WrongAddress);
    }
    let original = e
        .originals
        .iter()
        .find(|p| p.len() == total)
        .ok_or(Invalid::WrongLength)?;
    if ip[7] != e.ttl {
        return Err(Invalid::WrongTtl);
    }
    // Version, traffic class, flow label, payload length, next header.
    if ip[..7] != original[..7] {
        return Err(Invalid::WrongHeader);
    }
    let src: [u8; 16] = ip[8..24].try_into().map_err(|_| Invalid::Truncated)?;
    let sport = u16::from_be_bytes([ip[IPV6_LEN], ip[IPV6_LEN + 1]]);
    let flow = v4_of(src.into()).and_then(|src| e.flows.index_of(src, sport));
    if flow.is_none() {
        return Err(Invalid::UnknownFlow);
    }
    // Destination port and UDP length: the same for every flow.
    if ip[IPV6_LEN + 2..IPV6_LEN + 6] != original[IPV6_LEN + 2..IPV6_LEN + 6] {
        return Err(Invalid::WrongHeader);
    }
    if payload {
        if ip[IPV6_LEN + UDP_LEN..] != original[IPV6_LEN + UDP_LEN..] {
            return Err(Invalid::PayloadMismatch);
        }
        if !udp_checksum_v6_ok(ip) {
            return Err(Invalid::BadChecksum);
        }
    }
    Ok(())
}

/// One burst in `every`, the first included: which bursts the sink checks
/// the expensive way (a peer's decryption, a payload compared byte for
/// byte). Call [`BurstSample::next_burst`] once per burst.
#[derive(Debug, Clone, Copy)]
pub struct BurstSample {
    every: u64,
    bursts: u64,
}

impl BurstSample {
    pub fn new(every: u64) -> Self {
        BurstSample {
            every: every.max(1),
            bursts: 0,
        }
    }

    /// True for the bursts to sample.
    pub fn next_burst(&mut self) -> bool {
        self.bursts += 1;
        (self.bursts - 1).is_multiple_of(self.every)
    }
}

/// The peer gateway's inbound SA: decrypts a sample of the ESP the stage
/// produced and compares it with what was sent, so an encrypt case proves
/// its output is real ESP, not just ESP-shaped.
pub struct PeerDecrypt {
    sa: InboundSa,
    /// The packets as the peer must restore them.
    pub expect: InnerExpect,
    /// Which bursts to check (decryption costs the sink time).
    sample: BurstSample,
}

impl PeerDecrypt {
    pub fn new(cfg: &SaConfig, expect: InnerExpect, every: u64) -> Result<Self, String> {
        Ok(PeerDecrypt {
            sa: InboundSa::new(cfg, 0).map_err(|e| e.to_string())?,
            expect,
            sample: BurstSample::new(every),
        })
    }

    /// True for the bursts to sample (call once per burst).
    pub fn sample_next_burst(&mut self) -> bool {
        self.sample.next_burst()
    }

    /// Decrypts a copy of the outer IP packet `ip` and checks the result.
    pub fn check(&mut self, ip: &[u8]) -> Result<(), Invalid> {
        let mut buf = [VecBuf::with_room(ip, VecBuf::DEFAULT_HEADROOM, 0)];
        let mut verdict = [Verdict::default()];
        self.sa.decap_burst(&mut buf, &mut verdict, 0);
        if !verdict[0].is_forward() {
            return Err(Invalid::PeerCannotDecrypt);
        }
        check_inner(buf[0].data(), &self.expect)
    }
}

/// The sink's tally for one measurement.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    pub valid: u64,
    pub invalid: u64,
    /// The first reason seen, to say what went wrong.
    pub first_invalid: Option<&'static str>,
}

impl Tally {
    #[inline]
    pub fn record(&mut self, result: Result<(), Invalid>) {
        match result {
            Ok(()) => self.valid += 1,
            Err(why) => {
                self.invalid += 1;
                self.first_invalid.get_or_insert(why.name());
            }
        }
    }

    pub fn merge(&mut self, other: &Tally) {
        self.valid += other.valid;
        self.invalid += other.invalid;
        if self.first_invalid.is_none() {
            self.first_invalid = other.first_invalid;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::FIRST_PORT;
    use crate::packets::{ethernet, ipv4_udp, FrameAddrs};

    const A: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 10);
    const B: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 10);

    fn esp_packet(spi: u32, total: usize) -> Vec<u8> {
        let mut p = ipv4_udp(
            total,
            Ipv4Addr::new(192, 0, 2, 1),
            Ipv4Addr::new(192, 0, 2, 2),
            FIRST_PORT,
        );
        p[9] = 50;
        p[10] = 0;
        p[11] = 0;
        let sum = checksum(&p[..20]);
        p[10..12].copy_from_slice(&sum.to_be_bytes());
        p[20..24].copy_from_slice(&spi.to_be_bytes());
        p
    }

    fn esp_expect() -> EspExpect {
        EspExpect {
            spi: 0x1000,
            outer: Outer::Esp4,
            src: Ipv4Addr::new(192, 0, 2, 1).into(),
            dst: Ipv4Addr::new(192, 0, 2, 2).into(),
            outer_lens: vec![120],
        }
    }

    #[test]
    fn esp_check_accepts_the_expected_and_rejects_each_wrong_field() {
        let e = esp_expect();
        assert_eq!(check_esp(&esp_packet(0x1000, 120), &e), Ok(()));
        assert_eq!(
            check_esp(&esp_packet(0x1001, 120), &e),
            Err(Invalid::WrongSpi)
        );
        assert_eq!(
            check_esp(&esp_packet(0x1000, 136), &e),
            Err(Invalid::WrongLength)
        );
        let mut tcp = esp_packet(0x1000, 120);
        tcp[9] = 6;
        tcp[10..12].fill(0);
        let sum = checksum(&tcp[..20]);
        tcp[10..12].copy_from_slice(&sum.to_be_bytes());
        assert_eq!(check_esp(&tcp, &e), Err(Invalid::NotEsp));
        // UDP where the case sends plain ESP: the other outer form.
        let mut udp = esp_packet(0x1000, 120);
        udp[9] = 17;
        udp[10..12].fill(0);
        let sum = checksum(&udp[..20]);
        udp[10..12].copy_from_slice(&sum.to_be_bytes());
        assert_eq!(check_esp(&udp, &e), Err(Invalid::WrongOuter));
        let mut bad = esp_packet(0x1000, 120);
        bad[15] ^= 1;
        assert_eq!(check_esp(&bad, &e), Err(Invalid::WrongAddress));
        assert_eq!(check_esp(&bad[..10], &e), Err(Invalid::Truncated));
    }

    /// `p` as the worker forwards it: TTL 63, header checksum redone.
    fn forwarded(mut p: Vec<u8>) -> Vec<u8> {
        p[8] = 63;
        reseal(&mut p);
        p
    }

    /// Recomputes the IPv4 header checksum of `p` after a header edit, so
    /// that only the edited field is wrong.
    fn reseal(p: &mut [u8]) {
        p[10..12].fill(0);
        let sum = checksum(&p[..20]);
        p[10..12].copy_from_slice(&sum.to_be_bytes());
    }

    /// Four flows from A (ports FIRST_PORT..+3) to B, sizes 128 and 64.
    fn four_flows() -> InnerExpect {
        let flows = Flows::new(4, A).unwrap();
        InnerExpect::new(
            flows,
            B,
            63,
            [
                ipv4_udp(128, A, B, FIRST_PORT),
                ipv4_udp(64, A, B, FIRST_PORT),
            ],
        )
    }

    /// One burst in `every`, the first included; 0 and 1 sample them all.
    #[test]
    fn a_burst_sample_takes_the_first_and_every_nth_after() {
        let taken = |every: u64| {
            let mut s = BurstSample::new(every);
            (1..=40u64).filter(|_| s.next_burst()).collect::<Vec<_>>()
        };
        assert_eq!(taken(16), [1, 17, 33]);
        assert_eq!(taken(1), (1..=40).collect::<Vec<_>>());
        assert_eq!(taken(0), taken(1));
    }

    #[test]
    fn inner_check_rejects_a_corrupted_payload_byte_anywhere() {
        let e = four_flows();
        let original = ipv4_udp(128, A, B, FIRST_PORT);
        let restored = forwarded(original.clone());
        assert_eq!(check_inner(&restored, &e), Ok(()));
        for at in [28, 100, 127] {
            let mut corrupt = restored.clone();
            corrupt[at] ^= 0x80;
            assert_eq!(
                check_inner(&corrupt, &e),
                Err(Invalid::PayloadMismatch),
                "byte {at}"
            );
            // The header-only check reads no payload (byte 28 on).
            assert_eq!(check_inner_header(&corrupt, &e), Ok(()), "byte {at}");
        }
        // Untouched TTL (the worker must decrement it) and a broken header.
        assert_eq!(check_inner(&original, &e), Err(Invalid::WrongTtl));
        assert_eq!(check_inner_header(&original, &e), Err(Invalid::WrongTtl));
        let mut bad_sum = restored.clone();
        bad_sum[10] ^= 1;
        assert_eq!(check_inner(&bad_sum, &e), Err(Invalid::BadChecksum));
        // A size the case never sent.
        let other = forwarded(ipv4_udp(256, A, B, FIRST_PORT));
        assert_eq!(check_inner(&other, &e), Err(Invalid::WrongLength));
        // A truncated packet whose header still claims the full length.
        assert_eq!(check_inner(&restored[..100], &e), Err(Invalid::WrongLength));
    }

    #[test]
    fn inner_check_accepts_every_flow_of_the_set_and_no_other() {
        let e = four_flows();
        for port in FIRST_PORT..FIRST_PORT + 4 {
            for size in [64, 128] {
                let p = forwarded(ipv4_udp(size, A, B, port));
                assert_eq!(check_inner(&p, &e), Ok(()), "port {port}, {size} B");
            }
        }
        // One port past the set, a port far outside it, the next address.
        let past = forwarded(ipv4_udp(128, A, B, FIRST_PORT + 4));
        assert_eq!(check_inner(&past, &e), Err(Invalid::UnknownFlow));
        let far = forwarded(ipv4_udp(128, A, B, 40000));
        assert_eq!(check_inner(&far, &e), Err(Invalid::UnknownFlow));
        let next_host = Ipv4Addr::new(10, 2, 0, 11);
        let stranger = forwarded(ipv4_udp(128, next_host, B, FIRST_PORT));
        assert_eq!(check_inner(&stranger, &e), Err(Invalid::UnknownFlow));
        // To another host.
        let elsewhere = forwarded(ipv4_udp(128, A, next_host, FIRST_PORT));
        assert_eq!(check_inner(&elsewhere, &e), Err(Invalid::WrongAddress));
    }

    /// [`four_flows`] over IPv6 (`--inner ipv6`): the same flows and
    /// sizes between the mapped addresses.
    fn four_flows_v6() -> InnerExpect {
        let flows = Flows::new(4, A).unwrap();
        let v6 = |n| crate::packets::inner_udp(Inner::Ipv6, n, A, B, FIRST_PORT);
        InnerExpect::new(flows, B, 63, [v6(128), v6(64)]).of(Inner::Ipv6)
    }

    /// An IPv6 packet from `src` port `sport` to `dst` as the worker
    /// forwards it (hop limit 63; IPv6 has no header checksum).
    fn forwarded_v6(n: usize, src: Ipv4Addr, dst: Ipv4Addr, sport: u16) -> Vec<u8> {
        let mut p = crate::packets::inner_udp(Inner::Ipv6, n, src, dst, sport);
        p[7] = 63;
        p
    }

    /// The IPv6 check takes every flow's packets, whole and in order of
    /// their fields, and refuses each thing that can go wrong: a payload
    /// byte (with the payload check only), the UDP checksum (likewise), the
    /// hop limit, each fixed header field, the destination, a source or
    /// port outside the flows, a length never sent, an IPv4 packet.
    #[test]
    fn inner_check_of_ipv6_takes_every_flow_and_refuses_each_fault() {
        let e = four_flows_v6();
        for port in FIRST_PORT..FIRST_PORT + 4 {
            for size in [64, 128] {
                let p = forwarded_v6(size, A, B, port);
                assert_eq!(check_inner(&p, &e), Ok(()), "port {port}, {size} B");
            }
        }
        let good = forwarded_v6(128, A, B, FIRST_PORT + 1);
        for at in [48, 100, 127] {
            let mut corrupt = good.clone();
            corrupt[at] ^= 0x80;
            assert_eq!(
                check_inner(&corrupt, &e),
                Err(Invalid::PayloadMismatch),
                "byte {at}"
            );
            assert_eq!(check_inner_header(&corrupt, &e), Ok(()), "byte {at}");
        }
        let mut sum = good.clone();
        sum[46] ^= 1;
        assert_eq!(check_inner(&sum, &e), Err(Invalid::BadChecksum));
        assert_eq!(check_inner_header(&sum, &e), Ok(()));
        let sent = crate::packets::inner_udp(Inner::Ipv6, 128, A, B, FIRST_PORT);
        assert_eq!(check_inner(&sent, &e), Err(Invalid::WrongTtl));
        // Traffic class, flow label, next header.
        for at in [1, 3, 6] {
            let mut bad = good.clone();
            bad[at] ^= 0x01;
            assert_eq!(
                check_inner_header(&bad, &e),
                Err(Invalid::WrongHeader),
                "byte {at}"
            );
        }
        // Destination port, UDP length.
        for at in [43, 45] {
            let mut bad = good.clone();
            bad[at] ^= 0x01;
            assert_eq!(
                check_inner_header(&bad, &e),
                Err(Invalid::WrongHeader),
                "byte {at}"
            );
        }
        let mut version = good.clone();
        version[0] = 0x45;
        assert_eq!(check_inner(&version, &e), Err(Invalid::WrongVersion));
        let next_host = Ipv4Addr::new(10, 2, 0, 11);
        let stranger = forwarded_v6(128, next_host, B, FIRST_PORT);
        assert_eq!(check_inner(&stranger, &e), Err(Invalid::UnknownFlow));
        let past = forwarded_v6(128, A, B, FIRST_PORT + 4);
        assert_eq!(check_inner(&past, &e), Err(Invalid::UnknownFlow));
        let mut unmapped = good.clone();
        unmapped[8] ^= 0x01;
        assert_eq!(check_inner_header(&unmapped, &e), Err(Invalid::UnknownFlow));
        let elsewhere = forwarded_v6(128, A, next_host, FIRST_PORT);
        assert_eq!(check_inner(&elsewhere, &e), Err(Invalid::WrongAddress));
        let other = forwarded_v6(256, A, B, FIRST_PORT);
        assert_eq!(check_inner(&other, &e), Err(Invalid::WrongLength));
        assert_eq!(check_inner(&good[..100], &e), Err(Invalid::WrongLength));
        // An IPv4 packet of the flows is not what an IPv6 case sends.
        assert_eq!(
            check_inner(&forwarded(ipv4_udp(128, A, B, FIRST_PORT)), &e),
            Err(Invalid::WrongVersion)
        );
    }

    #[test]
    fn inner_check_rejects_each_corrupted_header_field() {
        let e = four_flows();
        let good = forwarded(ipv4_udp(128, A, B, FIRST_PORT + 2));
        // IPv4 identification, flags (DF cleared), protocol: checksum
        // redone so only the field itself is wrong.
        for at in [4, 6, 9] {
            let mut p = good.clone();
            p[at] ^= 0x40;
            reseal(&mut p);
            assert_eq!(check_inner(&p, &e), Err(Invalid::WrongHeader), "byte {at}");
        }
        // UDP destination port, length, checksum.
        for at in [22, 23, 24, 25, 26, 27] {
            let mut p = good.clone();
            p[at] ^= 0x01;
            assert_eq!(check_inner(&p, &e), Err(Invalid::WrongHeader), "byte {at}");
        }
        // The source port's high byte moves it out of the set.
        let mut p = good.clone();
        p[20] ^= 0x01;
        assert_eq!(check_inner(&p, &e), Err(Invalid::UnknownFlow));
    }

    #[test]
    fn ethernet_check_wants_both_macs_and_ipv4() {
        let addrs = FrameAddrs {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: A,
            dst_ip: B,
        };
        let f = ethernet(&addrs, &ipv4_udp(64, A, B, FIRST_PORT));
        assert_eq!(
            check_ethernet(&f, addrs.src_mac, addrs.dst_mac).map(<[u8]>::len),
            Ok(64)
        );
        assert_eq!(
            check_ethernet(&f, addrs.dst_mac, addrs.src_mac),
            Err(Invalid::WrongMac)
        );
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(
            check_ethernet(&arp, addrs.src_mac, addrs.dst_mac),
            Err(Invalid::NotIpv4)
        );
        assert_eq!(
            check_ethernet(&f[..6], addrs.src_mac, addrs.dst_mac),
            Err(Invalid::Truncated)
        );
    }

    #[test]
    fn tally_keeps_the_first_reason() {
        let mut t = Tally::default();
        t.record(Ok(()));
        t.record(Err(Invalid::WrongSpi));
        t.record(Err(Invalid::WrongLength));
        assert_eq!(
            (t.valid, t.invalid, t.first_invalid),
            (1, 2, Some("wrong_spi"))
        );
    }
}
