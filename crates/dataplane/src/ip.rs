//! The summary of an IPv4/IPv6 header the pipeline decides on, read once
//! per packet, and the in-place TTL / hop-limit decrement.

use std::net::IpAddr;

use espgw_wire::{ip_protocol, ipv6, Ipv4Packet, Ipv6Packet, PacketBuf};

use crate::reason::Drop;

/// What the pipeline needs to know about an IP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpMeta {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// Upper-layer protocol (after IPv6 extension headers).
    pub proto: u8,
    /// TTL or hop limit.
    pub ttl: u8,
    /// IPv4 DF flag (IPv6 never fragments on the way: always true).
    pub dont_frag: bool,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    /// Offset of the upper-layer header from the start of the packet.
    pub l4_offset: usize,
    pub v6: bool,
}

fn ports(proto: u8, l4: &[u8]) -> (Option<u16>, Option<u16>) {
    let has_ports = matches!(proto, ip_protocol::TCP | ip_protocol::UDP | 132);
    match l4.get(..4) {
        Some(p) if has_ports => (
            Some(u16::from_be_bytes([p[0], p[1]])),
            Some(u16::from_be_bytes([p[2], p[3]])),
        ),
        _ => (None, None),
    }
}

/// Parses the IPv4 packet at the start of `pkt`, verifies the header
/// checksum and trims link-layer padding after its total length.
pub fn parse_v4<B: PacketBuf>(pkt: &mut B) -> Result<IpMeta, Drop> {
    let ip = Ipv4Packet::new_checked(pkt.data()).map_err(|_| Drop::Malformed)?;
    if !ip.verify_checksum() {
        return Err(Drop::BadChecksum);
    }
    let hl = ip.header_len();
    let first_fragment = ip.frag_offset() == 0;
    let (sport, dport) = if first_fragment {
        ports(ip.protocol(), ip.payload())
    } else {
        (None, None)
    };
    let meta = IpMeta {
        src: ip.src_addr().into(),
        dst: ip.dst_addr().into(),
        proto: ip.protocol(),
        ttl: ip.ttl(),
        dont_frag: ip.dont_frag(),
        sport,
        dport,
        l4_offset: hl,
        v6: false,
    };
    let extra = pkt.len() - usize::from(ip.total_len());
    pkt.trim(extra).map_err(|_| Drop::Malformed)?;
    Ok(meta)
}

/// Parses the IPv6 packet at the start of `pkt` (walking extension
/// headers) and trims link-layer padding after its payload length.
pub fn parse_v6<B: PacketBuf>(pkt: &mut B) -> Result<IpMeta, Drop> {
    let ip = Ipv6Packet::new_checked(pkt.data()).map_err(|_| Drop::Malformed)?;
    let packet = ip.packet();
    let (proto, l4_offset) = ipv6::upper_layer(packet).map_err(|_| Drop::Malformed)?;
    let (sport, dport) = ports(proto, packet.get(l4_offset..).unwrap_or(&[]));
    let meta = IpMeta {
        src: ip.src_addr().into(),
        dst: ip.dst_addr().into(),
        proto,
        ttl: ip.hop_limit(),
        dont_frag: true,
        sport,
        dport,
        l4_offset,
        v6: true,
    };
    let extra = pkt.len() - packet.len();
    pkt.trim(extra).map_err(|_| Drop::Malformed)?;
    Ok(meta)
}

/// Decrements the TTL / hop limit of the packet at the start of `pkt`
/// (checksum patched for IPv4). The caller checked that it is above 1.
#[inline]
pub fn decrement_ttl<B: PacketBuf>(pkt: &mut B, v6: bool) {
    let d = pkt.data_mut();
    if v6 {
        if let Some(hop_limit) = d.get_mut(7) {
            *hop_limit = hop_limit.saturating_sub(1);
        }
        return;
    }
    if d.len() < 20 || d[8] == 0 {
        return;
    }
    d[8] -= 1;
    // The TTL is the high byte of header word 4: lowering it by one raises
    // the ones' complement checksum by 0x0100, with the end-around carry
    // (RFC 1141; what Linux's ip_decrease_ttl does). A dozen instructions
    // instead of a general RFC 1624 update (~55 with the header view).
    let sum = u32::from(u16::from_be_bytes([d[10], d[11]])) + 0x0100;
    let check = (sum + (sum >> 16)) as u16;
    d[10..12].copy_from_slice(&check.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use espgw_wire::VecBuf;

    use espgw_wire::{Ipv4Repr, UdpRepr};

    /// IPv4/UDP 10.1.0.10:1234 -> 10.2.0.10:53, TTL 5, DF, payload "hi".
    fn udp4() -> Vec<u8> {
        let mut p = vec![0u8; 30];
        Ipv4Repr {
            src_addr: [10, 1, 0, 10].into(),
            dst_addr: [10, 2, 0, 10].into(),
            protocol: ip_protocol::UDP,
            payload_len: 10,
            ttl: 5,
            dscp_ecn: 0,
            ident: 1,
            dont_frag: true,
        }
        .emit(&mut p)
        .unwrap();
        UdpRepr {
            src_port: 1234,
            dst_port: 53,
            payload_len: 2,
        }
        .emit(&mut p[20..])
        .unwrap();
        p[28..].copy_from_slice(b"hi");
        p
    }

    #[test]
    fn reads_ports_and_trims_padding() {
        let mut bytes = udp4();
        bytes.extend_from_slice(&[0; 10]);
        let mut pkt = VecBuf::from_packet(&bytes);
        let m = parse_v4(&mut pkt).unwrap();
        assert_eq!(
            (m.sport, m.dport, m.proto, m.ttl),
            (Some(1234), Some(53), 17, 5)
        );
        assert!(m.dont_frag);
        assert_eq!(pkt.len(), 30);
        decrement_ttl(&mut pkt, false);
        let ip = Ipv4Packet::new_checked(pkt.data()).unwrap();
        assert_eq!(ip.ttl(), 4);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn bad_checksum_is_counted_as_such() {
        let mut bytes = udp4();
        bytes[10] ^= 0xff;
        assert_eq!(
            parse_v4(&mut VecBuf::from_packet(&bytes)),
            Err(Drop::BadChecksum)
        );
        assert_eq!(
            parse_v4(&mut VecBuf::from_packet(&bytes[..15])),
            Err(Drop::Malformed)
        );
    }

    /// After the decrement the header checksum still verifies, for any
    /// header (options, any TTL above 1, any other field values).
    #[test]
    fn ttl_decrement_keeps_the_checksum_valid() {
        use proptest::prelude::*;
        proptest!(|(mut header in proptest::collection::vec(any::<u8>(), 20..=60), ttl in 2u8..=255)| {
            let hl = header.len() / 4 * 4;
            header.truncate(hl);
            header[0] = 0x40 | (hl / 4) as u8;
            header[2..4].copy_from_slice(&(hl as u16).to_be_bytes());
            header[8] = ttl;
            header[10..12].copy_from_slice(&[0, 0]);
            let sum = espgw_wire::checksum::sum(&header);
            header[10..12].copy_from_slice(&(!sum).to_be_bytes());
            let mut pkt = VecBuf::from_packet(&header);
            decrement_ttl(&mut pkt, false);
            let ip = Ipv4Packet::new_checked(pkt.data()).unwrap();
            prop_assert_eq!(ip.ttl(), ttl - 1);
            prop_assert!(ip.verify_checksum());
        });
    }
}
