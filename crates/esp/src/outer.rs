//! The outer IP (+UDP) headers: a per-SA template for encap, and the parser
//! that finds the ESP header in a received packet.
//!
//! Outer IPv4 choices (fixed, documented in docs): DF set, TTL 64, DSCP and
//! ECN copied from the inner packet (RFC 6040 normal mode, see `ecn`),
//! IP id = low 16 bits of the ESP sequence number. With DF set the datagram is
//! atomic (RFC 6864), so the id needs no uniqueness and costs no shared
//! counter; and an ESP packet is never fragmented on the way, which matters
//! because the peer would have to reassemble before it can authenticate. The
//! data plane instead answers oversize inner packets with ICMP "fragmentation
//! needed" / "packet too big" (its PMTU handling). Outer IPv6: traffic
//! class copied likewise, flow label 0, hop limit 64.

use std::net::IpAddr;

use espgw_wire::{checksum, classify_udp_encap, ip_protocol, EspPacket, UdpEncapKind};

use crate::config::Encap;
use crate::verdict::DropReason;

// The numbers and lengths are wire's (one definition per format).
const IPPROTO_UDP: u8 = ip_protocol::UDP;
const IPPROTO_ESP: u8 = ip_protocol::ESP;
const IPV4_HEADER: usize = espgw_wire::ipv4::MIN_HEADER_LEN;
const IPV6_HEADER: usize = espgw_wire::ipv6::HEADER_LEN;
const UDP_HEADER: usize = espgw_wire::udp::HEADER_LEN;
const TTL: u8 = 64;
/// Longest template: IPv6 + UDP.
const MAX_TEMPLATE: usize = IPV6_HEADER + UDP_HEADER;

/// Precomputed outer headers of an outbound SA.
#[derive(Debug, Clone)]
pub(crate) struct OuterTemplate {
    bytes: [u8; MAX_TEMPLATE],
    len: usize,
    ipv6: bool,
    udp: bool,
    /// Folded ones' complement sum of the fixed fields, precomputed once:
    /// IPv4, the header with total length, id and checksum zero; IPv6 + UDP,
    /// the pseudo-header's addresses and next header plus the UDP ports.
    /// Ones' complement addition is associative, so each packet only `add`s
    /// its own fields (lengths, id, payload) to it.
    partial_sum: u16,
    /// IPv6 + UDP: the pseudo-header's addresses and next header alone,
    /// for the seed of a checksum the NIC completes ([`UdpChecksum::Device`]).
    pseudo_sum: u16,
}

/// Who computes the UDP checksum of ESP in UDP over IPv6, the one outer
/// form whose checksum covers the ciphertext (RFC 8200 section 8.1: IPv6
/// requires it; over IPv4 RFC 3948 sends 0). The other forms ignore it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UdpChecksum {
    /// The engine sums the whole packet after sealing it.
    #[default]
    Compute,
    /// The engine writes the pseudo-header sum into the field
    /// (`espgw_wire::checksum::offload_seed`) and the sender asks the NIC
    /// to complete it (`PacketBuf::offload_udp_checksum`, on a port with
    /// TX UDP checksum offload), saving the sum over the packet.
    Device,
}

impl OuterTemplate {
    /// Headers from `local` to `remote`. The addresses must be one family
    /// (checked by `SaConfig::validate`; if not, `remote` is mapped to `local`'s family).
    pub(crate) fn new(local: IpAddr, remote: IpAddr, encap: Encap) -> Self {
        let mut t = OuterTemplate {
            bytes: [0; MAX_TEMPLATE],
            len: 0,
            ipv6: local.is_ipv6(),
            udp: matches!(encap, Encap::Udp { .. }),
            partial_sum: 0,
            pseudo_sum: 0,
        };
        let proto = if t.udp { IPPROTO_UDP } else { IPPROTO_ESP };
        let ip_len = match (local, remote) {
            (IpAddr::V4(src), remote) => {
                let dst = match remote {
                    IpAddr::V4(d) => d,
                    IpAddr::V6(d) => d
                        .to_ipv4_mapped()
                        .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED),
                };
                let h = &mut t.bytes[..IPV4_HEADER];
                h[0] = 0x45;
                h[6] = 0x40; // DF
                h[8] = TTL;
                h[9] = proto;
                h[12..16].copy_from_slice(&src.octets());
                h[16..20].copy_from_slice(&dst.octets());
                t.partial_sum = checksum::sum(h);
                IPV4_HEADER
            }
            (IpAddr::V6(src), remote) => {
                let dst = match remote {
                    IpAddr::V6(d) => d,
                    IpAddr::V4(d) => d.to_ipv6_mapped(),
                };
                let h = &mut t.bytes[..IPV6_HEADER];
                h[0] = 0x60;
                h[6] = proto;
                h[7] = TTL;
                h[8..24].copy_from_slice(&src.octets());
                h[24..40].copy_from_slice(&dst.octets());
                t.pseudo_sum = checksum::add(checksum::sum(&h[8..40]), u16::from(IPPROTO_UDP));
                t.partial_sum = t.pseudo_sum;
                IPV6_HEADER
            }
        };
        t.len = ip_len;
        if let Encap::Udp {
            local_port,
            remote_port,
        } = encap
        {
            let u = &mut t.bytes[ip_len..ip_len + UDP_HEADER];
            u[0..2].copy_from_slice(&local_port.to_be_bytes());
            u[2..4].copy_from_slice(&remote_port.to_be_bytes());
            if t.ipv6 {
                t.partial_sum =
                    checksum::add(t.partial_sum, checksum::add(local_port, remote_port));
            }
            t.len += UDP_HEADER;
        }
        t
    }

    /// The UDP destination port (ESP in UDP), `None` for plain ESP.
    pub(crate) fn udp_remote_port(&self) -> Option<u16> {
        let at = if self.ipv6 { IPV6_HEADER } else { IPV4_HEADER };
        self.udp
            .then(|| u16::from_be_bytes([self.bytes[at + 2], self.bytes[at + 3]]))
    }

    /// Bytes of outer headers this template writes.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Longest outer packet the length fields can describe.
    pub(crate) fn max_packet(&self) -> usize {
        if self.ipv6 {
            IPV6_HEADER + 0xFFFF
        } else {
            0xFFFF
        }
    }

    /// Writes the headers for an outer packet of `total` bytes (headers
    /// included) into `out[..self.len()]`. `total` must be at most
    /// [`Self::max_packet`].
    /// `ds` is the DS field (DSCP and ECN) the outer header carries.
    /// Forced inline: called once per packet from `encap_burst`, where
    /// `#[inline]` alone left a call (issue 14, docs/benchmarks.md).
    #[inline(always)]
    pub(crate) fn write(&self, out: &mut [u8], total: usize, ip_id: u16, ds: u8) {
        let out = &mut out[..self.len];
        // One fixed-size copy per layout (20, 28, 40 or 48 bytes) instead of
        // a call to memcpy for a length only known at run time.
        match self.len {
            20 => out.copy_from_slice(&self.bytes[..20]),
            28 => out.copy_from_slice(&self.bytes[..28]),
            40 => out.copy_from_slice(&self.bytes[..40]),
            48 => out.copy_from_slice(&self.bytes[..48]),
            n => out.copy_from_slice(&self.bytes[..n]),
        }
        if self.ipv6 {
            let payload = (total - IPV6_HEADER) as u16;
            // Traffic class across the version/flow-label nibbles (the
            // template's flow label is 0). Not in the UDP pseudo-header.
            out[0] = 0x60 | (ds >> 4);
            out[1] = ds << 4;
            out[4..6].copy_from_slice(&payload.to_be_bytes());
            if self.udp {
                out[IPV6_HEADER + 4..IPV6_HEADER + 6].copy_from_slice(&payload.to_be_bytes());
            }
        } else {
            let total16 = total as u16;
            out[1] = ds;
            out[2..4].copy_from_slice(&total16.to_be_bytes());
            out[4..6].copy_from_slice(&ip_id.to_be_bytes());
            // The template summed the DS byte as 0: it is the low byte of
            // the header's first word. Four 16-bit terms in 32 bits, folded
            // twice (what three `checksum::add`s do, in fewer steps).
            let sum =
                u32::from(self.partial_sum) + u32::from(total16) + u32::from(ip_id) + u32::from(ds);
            let sum = (sum & 0xffff) + (sum >> 16);
            let sum = ((sum & 0xffff) + (sum >> 16)) as u16;
            out[10..12].copy_from_slice(&checksum::finish(sum).to_be_bytes());
            if self.udp {
                // RFC 3948 §2.1: the UDP checksum SHOULD be zero over IPv4.
                let udp_len = (total - IPV4_HEADER) as u16;
                out[IPV4_HEADER + 4..IPV4_HEADER + 6].copy_from_slice(&udp_len.to_be_bytes());
            }
        }
    }

    /// True when [`Self::finish`] has work to do.
    #[inline]
    pub(crate) fn needs_finish(&self) -> bool {
        self.ipv6 && self.udp
    }

    /// After sealing: the UDP checksum, which IPv6 requires (RFC 8200 §8.1)
    /// and which covers the ciphertext, so it can only come last; with
    /// [`UdpChecksum::Device`] only its seed, for the NIC.
    pub(crate) fn finish(&self, packet: &mut [u8], checksum: UdpChecksum) {
        if !self.needs_finish() {
            return;
        }
        let udp = &mut packet[IPV6_HEADER..];
        // At most 0xFFFF: `max_packet` bounds what `write` was given.
        let udp_len = udp.len() as u16;
        let csum = match checksum {
            UdpChecksum::Device => checksum::offload_seed(self.pseudo_sum, udp_len),
            UdpChecksum::Compute => {
                // Pseudo-header length plus the UDP length field: the same
                // number twice.
                let lengths = checksum::add(udp_len, udp_len);
                let sum = checksum::add(self.partial_sum, lengths);
                match checksum::finish(checksum::add(sum, checksum::sum(&udp[UDP_HEADER..]))) {
                    0 => 0xFFFF,
                    c => c,
                }
            }
        };
        udp[6..8].copy_from_slice(&csum.to_be_bytes());
    }
}

/// Where the ESP header (SPI) sits in a received outer packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EspLocation {
    /// Offset of the SPI from the start of the packet.
    pub offset: usize,
    /// Bytes from the SPI to the end of the ICV (link-layer padding excluded).
    pub len: usize,
    /// The SPI, for the SA lookup.
    pub spi: u32,
    /// The outer header's DS field (DSCP and ECN), for RFC 6040 decapsulation.
    pub outer_ds: u8,
}

/// Finds the ESP packet inside an outer IPv4/IPv6 packet (no Ethernet header)
/// as an SA with `encap` expects it: plain ESP for [`Encap::None`], ESP in
/// UDP to `local_port` for [`Encap::Udp`]. The data plane can call this to
/// get the SPI for its SA lookup.
///
/// Outer checksums (IPv4 header, UDP) are not verified here: the ICV covers
/// everything past them that matters, and NICs check them in hardware.
pub fn locate_esp(packet: &[u8], encap: Encap) -> Result<EspLocation, DropReason> {
    let first = *packet.first().ok_or(DropReason::Truncated)?;
    let (header_len, end, proto) = match first >> 4 {
        4 => {
            if packet.len() < IPV4_HEADER {
                return Err(DropReason::Truncated);
            }
            let ihl = usize::from(first & 0x0F) * 4;
            if ihl < IPV4_HEADER {
                return Err(DropReason::NotEsp);
            }
            let total = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
            if total < ihl || total > packet.len() {
                return Err(DropReason::Truncated);
            }
            // Fragments would need reassembly first: MF set or an offset.
            if u16::from_be_bytes([packet[6], packet[7]]) & 0x3FFF != 0 {
                return Err(DropReason::NotEsp);
            }
            (ihl, total, packet[9])
        }
        6 => {
            if packet.len() < IPV6_HEADER {
                return Err(DropReason::Truncated);
            }
            let total = IPV6_HEADER + usize::from(u16::from_be_bytes([packet[4], packet[5]]));
            if total > packet.len() {
                return Err(DropReason::Truncated);
            }
            (IPV6_HEADER, total, packet[6])
        }
        _ => return Err(DropReason::NotEsp),
    };
    let (offset, end) = match (proto, encap) {
        (IPPROTO_ESP, Encap::None) => (header_len, end),
        (IPPROTO_UDP, Encap::Udp { local_port, .. }) => {
            let udp = &packet[header_len..end];
            if udp.len() < UDP_HEADER {
                return Err(DropReason::Truncated);
            }
            if u16::from_be_bytes([udp[2], udp[3]]) != local_port {
                return Err(DropReason::NotEsp);
            }
            let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
            if udp_len < UDP_HEADER || udp_len > udp.len() {
                return Err(DropReason::Truncated);
            }
            // RFC 3948 §2.2/§2.3: a NAT keepalive (one 0xFF byte) or an IKE
            // packet (non-ESP marker: four zero bytes where the SPI would be)
            // is not for an SA; too short to be ESP is truncated ESP.
            match classify_udp_encap(&udp[UDP_HEADER..udp_len]) {
                UdpEncapKind::Esp => {}
                UdpEncapKind::Ike | UdpEncapKind::Keepalive => return Err(DropReason::NotEsp),
                UdpEncapKind::Invalid => return Err(DropReason::Truncated),
            }
            (header_len + UDP_HEADER, header_len + udp_len)
        }
        _ => return Err(DropReason::NotEsp),
    };
    let esp = match EspPacket::new_checked(&packet[offset..end]) {
        Ok(esp) => esp,
        // SPI 0 is reserved (RFC 4303 §2.1): no SA has it.
        Err(espgw_wire::Error::Malformed) => return Err(DropReason::UnknownSpi),
        Err(_) => return Err(DropReason::Truncated),
    };
    Ok(EspLocation {
        offset,
        len: end - offset,
        spi: esp.spi(),
        outer_ds: crate::ecn::ds_field(packet),
    })
}

/// [`locate_esp`] of the common inbound cases, inlined into the SA's
/// decryption: ESP with its 8-byte header and a non-zero SPI, right after
/// an unfragmented IPv4 header or an IPv6 fixed header (no extension
/// headers), bare or in UDP to the SA's local port (RFC 3948; what
/// strongSwan's kernel-libipsec always sends). `None` for anything else
/// (another version, a fragment, a keepalive or IKE packet in the UDP, a
/// short or malformed packet), which `locate_esp` then decides, with its
/// drop reason; when this gives a location, `locate_esp` gives the same
/// one (property test `locate_esp_fast_agrees_with_locate_esp`).
#[inline(always)]
pub(crate) fn locate_esp_fast(packet: &[u8], encap: Encap) -> Option<EspLocation> {
    let (header_len, end, proto, outer_ds) = match *packet.first()? >> 4 {
        4 => {
            let h = packet.first_chunk::<IPV4_HEADER>()?;
            let ihl = usize::from(h[0] & 0x0F) * 4;
            let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
            let frag = u16::from_be_bytes([h[6], h[7]]) & 0x3FFF;
            if ihl < IPV4_HEADER || frag != 0 || total > packet.len() || total < ihl {
                return None;
            }
            (ihl, total, h[9], h[1])
        }
        6 => {
            let h = packet.first_chunk::<IPV6_HEADER>()?;
            let total = IPV6_HEADER + usize::from(u16::from_be_bytes([h[4], h[5]]));
            if total > packet.len() {
                return None;
            }
            (IPV6_HEADER, total, h[6], (h[0] << 4) | (h[1] >> 4))
        }
        _ => return None,
    };
    let (offset, end) = match encap {
        Encap::None if proto == IPPROTO_ESP => (header_len, end),
        Encap::Udp { local_port, .. } if proto == IPPROTO_UDP => {
            let udp = packet.get(header_len..end)?.first_chunk::<UDP_HEADER>()?;
            let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
            // Shorter than an ESP header in the UDP is a keepalive or
            // truncated: `locate_esp` says which.
            if u16::from_be_bytes([udp[2], udp[3]]) != local_port
                || udp_len < UDP_HEADER + 8
                || header_len + udp_len > end
            {
                return None;
            }
            (header_len + UDP_HEADER, header_len + udp_len)
        }
        _ => return None,
    };
    if end < offset + 8 {
        return None;
    }
    let spi = u32::from_be_bytes(*packet[offset..].first_chunk::<4>()?);
    // SPI 0 is reserved, and in UDP it is the non-ESP marker (IKE).
    (spi != 0).then_some(EspLocation {
        offset,
        len: end - offset,
        spi,
        outer_ds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4() -> (IpAddr, IpAddr) {
        (
            "192.0.2.1".parse().unwrap(),
            "198.51.100.7".parse().unwrap(),
        )
    }
    fn v6() -> (IpAddr, IpAddr) {
        (
            "2001:db8::1".parse().unwrap(),
            "2001:db8:ffff::2".parse().unwrap(),
        )
    }

    fn packet_with(t: &OuterTemplate, esp: &[u8], id: u16) -> Vec<u8> {
        let mut p = vec![0u8; t.len() + esp.len()];
        p[t.len()..].copy_from_slice(esp);
        let total = p.len();
        t.write(&mut p, total, id, 0);
        t.finish(&mut p, UdpChecksum::Compute);
        p
    }

    /// What the UDP payload and the ESP header say decides the reason
    /// (RFC 3948: keepalive and non-ESP marker are not ESP; SPI 0 is
    /// reserved), through wire's classifier and ESP view.
    #[test]
    fn payload_kinds_map_to_their_reasons() {
        let (l, r) = v4();
        let udp = Encap::udp_4500();
        let t = OuterTemplate::new(l, r, udp);
        let bare = OuterTemplate::new(l, r, Encap::None);
        let at_peer = Encap::Udp {
            local_port: 4500,
            remote_port: 4500,
        };
        let esp = [0, 0, 0x10, 1, 0, 0, 0, 1, 0xaa, 0xbb];
        let found = locate_esp(&packet_with(&t, &esp, 1), at_peer).unwrap();
        assert_eq!((found.spi, found.len), (0x1001, esp.len()));
        for (payload, want) in [
            (&[0xFFu8][..], DropReason::NotEsp),
            (
                &[0, 0, 0, 0, 0x21, 0x20, 0x22, 0x08][..],
                DropReason::NotEsp,
            ),
            (&[0, 0, 0x10][..], DropReason::Truncated),
            (&[0, 0, 0x10, 1, 0, 0, 0][..], DropReason::Truncated),
        ] {
            let got = locate_esp(&packet_with(&t, payload, 1), at_peer);
            assert_eq!(got.map(|l| l.spi), Err(want), "{payload:02x?}");
        }
        let spi0 = [0, 0, 0, 0, 0, 0, 0, 1, 0xaa];
        assert_eq!(
            locate_esp(&packet_with(&bare, &spi0, 1), Encap::None).map(|l| l.spi),
            Err(DropReason::UnknownSpi)
        );
    }

    /// The port a template sends to is the one it was built with (a NAT's
    /// mapping of the peer's 4500 too), read back from the header bytes
    /// it writes; none without UDP.
    #[test]
    fn udp_remote_port_is_what_the_header_carries() {
        for (local, remote) in [v4(), v6()] {
            for port in [4500u16, 40_001, 1] {
                let encap = Encap::Udp {
                    local_port: 4500,
                    remote_port: port,
                };
                let t = OuterTemplate::new(local, remote, encap);
                assert_eq!(t.udp_remote_port(), Some(port));
                let p = packet_with(&t, &[0x11; 24], 1);
                let at = if local.is_ipv6() {
                    IPV6_HEADER
                } else {
                    IPV4_HEADER
                };
                assert_eq!(u16::from_be_bytes([p[at + 2], p[at + 3]]), port);
            }
            assert_eq!(
                OuterTemplate::new(local, remote, Encap::None).udp_remote_port(),
                None
            );
        }
    }

    #[test]
    fn ipv4_header_checksum_verifies_and_fields_are_set() {
        let (l, r) = v4();
        let t = OuterTemplate::new(l, r, Encap::None);
        for id in [0u16, 1, 0xFFFF, 0x1234] {
            let p = packet_with(&t, &[0xAA; 100], id);
            assert_eq!(checksum::sum(&p[..20]), 0xFFFF);
            assert_eq!(&p[2..4], &120u16.to_be_bytes());
            assert_eq!(&p[4..6], &id.to_be_bytes());
            assert_eq!(p[6] & 0x40, 0x40, "DF");
            assert_eq!((p[8], p[9]), (64, IPPROTO_ESP));
            assert_eq!(&p[16..20], &[198, 51, 100, 7]);
        }
    }

    #[test]
    fn ipv4_udp_has_zero_checksum_and_right_length() {
        let (l, r) = v4();
        let t = OuterTemplate::new(l, r, Encap::udp_4500());
        let p = packet_with(&t, &[1; 33], 9);
        assert_eq!(p[9], IPPROTO_UDP);
        assert_eq!(&p[20..28], &[0x11, 0x94, 0x11, 0x94, 0, 41, 0, 0]);
        assert_eq!(checksum::sum(&p[..20]), 0xFFFF);
    }

    #[test]
    fn ipv6_udp_checksum_verifies() {
        let (l, r) = v6();
        let t = OuterTemplate::new(
            l,
            r,
            Encap::Udp {
                local_port: 4500,
                remote_port: 34567,
            },
        );
        for n in [9usize, 10, 100, 1401] {
            let esp: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
            let p = packet_with(&t, &esp, 0);
            assert_eq!(&p[4..6], &((8 + n) as u16).to_be_bytes());
            assert_eq!(p[6], IPPROTO_UDP);
            // Verify as a receiver would: pseudo-header + UDP datagram sums to 0xFFFF.
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&p[8..40]);
            pseudo.extend_from_slice(&((8 + n) as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, 17]);
            let sum = checksum::add(checksum::sum(&pseudo), checksum::sum(&p[40..]));
            assert_eq!(sum, 0xFFFF);
            assert_ne!(&p[46..48], &[0, 0]);
        }
    }

    #[test]
    fn locate_finds_esp_in_every_framing() {
        let esp = [0, 0, 0x12, 0x34, 0, 0, 0, 1, 9, 9];
        for (l, r) in [v4(), v6()] {
            for encap in [Encap::None, Encap::udp_4500()] {
                let t = OuterTemplate::new(l, r, encap);
                let mut p = packet_with(&t, &esp, 1);
                p.extend_from_slice(&[0xEE; 6]); // link-layer padding
                let loc = locate_esp(&p, encap).unwrap();
                assert_eq!(loc.offset, t.len());
                assert_eq!(loc.len, esp.len());
                assert_eq!(loc.spi, 0x1234);
                let other = match encap {
                    Encap::None => Encap::udp_4500(),
                    _ => Encap::None,
                };
                assert_eq!(locate_esp(&p, other), Err(DropReason::NotEsp));
            }
        }
    }

    /// The inlined cases agree with `locate_esp`: whenever the fast
    /// locator gives a location, `locate_esp` gives the same one, and for
    /// the shapes it covers (ESP bare or in UDP to the local port, after
    /// an unfragmented IPv4 or a bare IPv6 header) whatever `locate_esp`
    /// finds, it finds too. Random headers with the version, protocol,
    /// header, total and UDP lengths, fragment bits, ports and SPI drawn
    /// around their edges, short packets, link padding, both framings.
    #[test]
    fn locate_esp_fast_agrees_with_locate_esp() {
        use proptest::prelude::*;
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        // Found fast, per [v4 bare, v4 UDP, v6 bare, v6 UDP].
        static FOUND: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];
        let packets = (
            any::<[u8; 96]>(),
            prop_oneof![0usize..96, 48usize..96],
            prop::sample::select(vec![4u8, 4, 4, 6, 6, 6, 5]),
            prop::sample::select(vec![5u8, 5, 5, 6, 15, 4, 0]),
            // Total (IPv4) or payload (IPv6) length; 1000 + n: the
            // packet's length less n bytes of link padding.
            prop_oneof![0usize..100, (0usize..4).prop_map(|pad| 1000 + pad)],
            prop::sample::select(vec![0u16, 0, 0x4000, 0x2000, 0x0001, 0x8000]),
            prop::sample::select(vec![50u8, 50, 17, 17, 6, 60]),
            prop::sample::select(vec![false, false, false, true]),
            prop::sample::select(vec![false, true]),
            // UDP: destination port, and its length as an offset from
            // what the packet holds (0: exact; below: short; above: over).
            prop::sample::select(vec![4500u16, 4500, 4500, 500, 4501]),
            prop::sample::select(vec![0i32, 0, 0, -1, -4, 1, 8, -1000]),
        );
        let config = ProptestConfig::with_cases(4096);
        proptest!(config, |((bytes, len, version, ihl, total, frag, proto, zero_spi, udp, dport, udp_off) in packets)| {
            let mut p = bytes[..len].to_vec();
            let hl = if version == 6 { IPV6_HEADER } else { usize::from(ihl) * 4 };
            let fixed = if version == 6 { IPV6_HEADER } else { IPV4_HEADER };
            // The IP length field's value for `total` bytes of packet.
            let total = if total >= 1000 { len.saturating_sub(total - 1000) } else { total };
            if let Some(b) = p.get_mut(0) {
                *b = if version == 6 { (6 << 4) | (*b & 0x0f) } else { version << 4 | ihl };
            }
            if p.len() >= fixed {
                if version == 6 {
                    let payload = total.saturating_sub(IPV6_HEADER) as u16;
                    p[4..6].copy_from_slice(&payload.to_be_bytes());
                    p[6] = proto;
                } else {
                    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
                    p[6..8].copy_from_slice(&frag.to_be_bytes());
                    p[9] = proto;
                }
                let esp_at = if proto == 17 { hl + UDP_HEADER } else { hl };
                if proto == 17 && p.len() >= hl + UDP_HEADER {
                    p[hl + 2..hl + 4].copy_from_slice(&dport.to_be_bytes());
                    let udp_len = (total as i32 - hl as i32 + udp_off).clamp(0, 0xffff) as u16;
                    p[hl + 4..hl + 6].copy_from_slice(&udp_len.to_be_bytes());
                }
                if zero_spi && p.len() >= esp_at + 4 {
                    p[esp_at..esp_at + 4].copy_from_slice(&[0; 4]);
                }
            }
            let encap = if udp { Encap::udp_4500() } else { Encap::None };
            let full = locate_esp(&p, encap);
            match locate_esp_fast(&p, encap) {
                Some(loc) => {
                    prop_assert_eq!(Ok(loc), full);
                    let shape = usize::from(version == 6) * 2 + usize::from(udp);
                    FOUND[shape].fetch_add(1, Relaxed);
                }
                None => {
                    // A shape it covers that `locate_esp` takes is never
                    // left to it (the fast path would be a slow path).
                    let covered = (version == 6 || frag & 0x3fff == 0)
                        && proto == if udp { 17 } else { 50 };
                    prop_assert!(!covered || full.is_err(), "{:?}", full);
                }
            }
        });
        // Each shape was found, not only refused.
        for (shape, found) in FOUND.iter().enumerate() {
            assert!(found.load(Relaxed) > 5, "shape {shape}: {found:?}");
        }
    }

    #[test]
    fn locate_rejects_malformed() {
        let (l, r) = v4();
        let t = OuterTemplate::new(l, r, Encap::udp_4500());
        let good = packet_with(&t, &[0, 0, 1, 0, 0, 0, 0, 1], 1);
        assert!(locate_esp(&good, Encap::udp_4500()).is_ok());
        assert_eq!(locate_esp(&[], Encap::None), Err(DropReason::Truncated));
        assert_eq!(
            locate_esp(&good[..19], Encap::udp_4500()),
            Err(DropReason::Truncated)
        );
        assert_eq!(
            locate_esp(&good[..35], Encap::udp_4500()),
            Err(DropReason::Truncated)
        );
        let mut frag = good.clone();
        frag[6] |= 0x20; // MF
        assert_eq!(
            locate_esp(&frag, Encap::udp_4500()),
            Err(DropReason::NotEsp)
        );
        let wrong_port = Encap::Udp {
            local_port: 4501,
            remote_port: 4500,
        };
        assert_eq!(locate_esp(&good, wrong_port), Err(DropReason::NotEsp));
        let ike = packet_with(&t, &[0, 0, 0, 0, 1, 2, 3, 4, 5], 1);
        assert_eq!(locate_esp(&ike, Encap::udp_4500()), Err(DropReason::NotEsp));
        let keepalive = packet_with(&t, &[0xFF], 1);
        assert_eq!(
            locate_esp(&keepalive, Encap::udp_4500()),
            Err(DropReason::NotEsp)
        );
        assert_eq!(
            locate_esp(&[0x20; 40], Encap::None),
            Err(DropReason::NotEsp)
        );
        let mut bad_ihl = good.clone();
        bad_ihl[0] = 0x44;
        assert_eq!(
            locate_esp(&bad_ihl, Encap::udp_4500()),
            Err(DropReason::NotEsp)
        );
    }
}
