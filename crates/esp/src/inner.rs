//! Sanity checks of the inner IP packet, on both sides of the tunnel.

use crate::verdict::DropReason;
use espgw_wire::ip_protocol::{IPV4 as IPPROTO_IPIP, IPV6 as IPPROTO_IPV6};

/// ESP next header of a dummy packet (RFC 4303 §2.6): "no next header".
const IPPROTO_NONE: u8 = espgw_wire::ip_protocol::NO_NEXT_HEADER;

/// The ESP next header for `packet` (4 for IPv4, 41 for IPv6) and the length
/// its header claims, which may be shorter than `packet` (link-layer padding
/// on encap, TFC padding on decap) but never longer.
#[inline]
pub(crate) fn classify(packet: &[u8]) -> Result<(u8, usize), DropReason> {
    let first = *packet.first().ok_or(DropReason::BadInnerPacket)?;
    let (next_header, len) = match first >> 4 {
        4 => {
            if packet.len() < 20 {
                return Err(DropReason::BadInnerPacket);
            }
            let ihl = usize::from(first & 0x0F) * 4;
            let total = usize::from(u16::from_be_bytes([packet[2], packet[3]]));
            if ihl < 20 || total < ihl {
                return Err(DropReason::BadInnerPacket);
            }
            (IPPROTO_IPIP, total)
        }
        6 => {
            if packet.len() < 40 {
                return Err(DropReason::BadInnerPacket);
            }
            let payload = usize::from(u16::from_be_bytes([packet[4], packet[5]]));
            (IPPROTO_IPV6, 40 + payload)
        }
        _ => return Err(DropReason::BadInnerPacket),
    };
    if len > packet.len() {
        return Err(DropReason::BadInnerPacket);
    }
    Ok((next_header, len))
}

/// The length of the inner packet that decrypted to `payload` with ESP next
/// header `next_header`: the version must match the next header. RFC 4303
/// dummy packets (next header 59) are refused as [`DropReason::Dummy`]
/// whatever they contain.
#[inline]
pub(crate) fn checked_len(payload: &[u8], next_header: u8) -> Result<usize, DropReason> {
    if next_header == IPPROTO_NONE {
        return Err(DropReason::Dummy);
    }
    let (actual, len) = classify(payload)?;
    if actual != next_header {
        return Err(DropReason::BadInnerPacket);
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4(total: u16, buffer: usize) -> Vec<u8> {
        let mut p = vec![0u8; buffer];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p
    }

    fn ipv6(payload: u16, buffer: usize) -> Vec<u8> {
        let mut p = vec![0u8; buffer];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&payload.to_be_bytes());
        p
    }

    #[test]
    fn accepts_sane_packets_and_reports_claimed_length() {
        assert_eq!(classify(&ipv4(20, 20)), Ok((4, 20)));
        assert_eq!(classify(&ipv4(28, 46)), Ok((4, 28)));
        assert_eq!(classify(&ipv6(0, 40)), Ok((41, 40)));
        assert_eq!(classify(&ipv6(8, 60)), Ok((41, 48)));
    }

    #[test]
    fn rejects_insane_packets() {
        let bad = Err(DropReason::BadInnerPacket);
        assert_eq!(classify(&[]), bad);
        assert_eq!(classify(&ipv4(20, 19)), bad);
        assert_eq!(classify(&ipv4(21, 20)), bad);
        assert_eq!(classify(&ipv4(19, 20)), bad);
        let mut small_ihl = ipv4(20, 20);
        small_ihl[0] = 0x44;
        assert_eq!(classify(&small_ihl), bad);
        assert_eq!(classify(&ipv6(1, 40)), bad);
        assert_eq!(classify(&ipv6(0, 39)), bad);
        assert_eq!(classify(&[0x50; 64]), bad);
    }

    #[test]
    fn version_must_match_next_header() {
        assert_eq!(checked_len(&ipv4(20, 20), 4), Ok(20));
        assert_eq!(
            checked_len(&ipv4(20, 20), 41),
            Err(DropReason::BadInnerPacket)
        );
        assert_eq!(
            checked_len(&ipv6(0, 40), 4),
            Err(DropReason::BadInnerPacket)
        );
        assert_eq!(checked_len(&ipv6(0, 40), 59), Err(DropReason::Dummy));
        assert_eq!(checked_len(&[0xde, 0xad], 59), Err(DropReason::Dummy));
    }
}
