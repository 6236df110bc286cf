//! DSCP and ECN across the tunnel: RFC 6040's normal mode, the way Linux
//! XFRM and most gateways do it.
//!
//! * Encap: the outer header takes the inner packet's whole DS field (DSCP
//!   and ECN). The DSCP keeps its per-hop behaviour between the gateways
//!   (RFC 2983, uniform model for the outer header), and with the ECN copied
//!   a congested router between the gateways can mark CE instead of
//!   dropping (RFC 6040 §4.1, normal mode: CE is copied as CE).
//! * Decap: the inner DSCP is left as it is (pipe model: the sender's
//!   marking survives the transit network's re-marking); the inner ECN is
//!   combined with the outer one as in RFC 6040 §4.2, figure 4: outer CE
//!   over ECT(0)/ECT(1) becomes CE, outer ECT(1) over ECT(0) becomes
//!   ECT(1), outer CE over Not-ECT is dropped (the sender cannot react to
//!   it), everything else leaves the inner ECN as it is.

use espgw_wire::checksum;

use crate::verdict::DropReason;

/// ECN codepoints (RFC 3168 §5), the low two bits of the DS field.
const NOT_ECT: u8 = 0b00;
const ECT1: u8 = 0b01;
const ECT0: u8 = 0b10;
const CE: u8 = 0b11;

/// The DS field (DSCP << 2 | ECN) of the IPv4 or IPv6 packet at the start of
/// `packet`; 0 if it is too short or neither.
#[inline]
pub(crate) fn ds_field(packet: &[u8]) -> u8 {
    version_and_ds(packet).map_or(0, |(_, ds)| ds)
}

/// The IP version (4 or 6) and DS field of the packet at the start of
/// `packet`, in one look (the encap path needs both).
#[inline]
pub(crate) fn version_and_ds(packet: &[u8]) -> Option<(u8, u8)> {
    match packet {
        [b0, b1, ..] if b0 >> 4 == 4 => Some((4, *b1)),
        [b0, b1, ..] if b0 >> 4 == 6 => Some((6, (b0 << 4) | (b1 >> 4))),
        _ => None,
    }
}

/// Applies RFC 6040's decapsulation to the inner IPv4/IPv6 packet at the
/// start of `inner`, given the outer header's DS field: rewrites its ECN
/// (patching the IPv4 header checksum), or refuses it.
#[inline]
pub(crate) fn decapsulate(outer_ds: u8, inner: &mut [u8]) -> Result<(), DropReason> {
    // Only ECT(1) (01) and CE (11) on the outer header change anything:
    // the common case is one bit test.
    if outer_ds & ECT1 == 0 {
        return Ok(());
    }
    mark(outer_ds & CE, inner)
}

/// The rest of [`decapsulate`], out of line: outer ECT(1) or CE.
#[inline(never)]
fn mark(outer: u8, inner: &mut [u8]) -> Result<(), DropReason> {
    let ds = ds_field(inner);
    let new_ecn = match (outer, ds & CE) {
        (CE, NOT_ECT) => return Err(DropReason::CeOnNotEct),
        (CE, _) => CE,
        (ECT1, ECT0) => ECT1,
        _ => return Ok(()),
    };
    let new_ds = (ds & !CE) | new_ecn;
    if new_ds != ds {
        set_ds_field(inner, new_ds);
    }
    Ok(())
}

/// Writes the DS field of the IPv4/IPv6 packet at the start of `packet`
/// (IPv4: the header checksum patched incrementally, RFC 1624).
fn set_ds_field(packet: &mut [u8], ds: u8) {
    match packet.first().map(|b| b >> 4) {
        Some(4) if packet.len() >= 20 => {
            let old = u16::from_be_bytes([packet[0], packet[1]]);
            let new = u16::from_be_bytes([packet[0], ds]);
            let sum = u16::from_be_bytes([packet[10], packet[11]]);
            packet[1] = ds;
            packet[10..12].copy_from_slice(&checksum::update16(sum, old, new).to_be_bytes());
        }
        Some(6) if packet.len() >= 2 => {
            packet[0] = 0x60 | (ds >> 4);
            packet[1] = (ds << 4) | (packet[1] & 0x0F);
        }
        _ => {}
    }
}

/// For the engine's tests: set a packet's DS field the way a router would.
#[cfg(test)]
pub(crate) mod tests_support {
    pub(crate) fn set_ds(packet: &mut [u8], ds: u8) {
        super::set_ds_field(packet, ds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 header (20 bytes, valid checksum) with DS field `ds`.
    fn v4(ds: u8) -> Vec<u8> {
        let mut p = vec![
            0x45, ds, 0, 20, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 10, 1, 0, 10, 10, 2, 0, 10,
        ];
        let sum = !checksum::sum(&p);
        p[10..12].copy_from_slice(&sum.to_be_bytes());
        p
    }

    /// An IPv6 header with traffic class `tc` and flow label 0xabcde.
    fn v6(tc: u8) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x60 | (tc >> 4);
        p[1] = (tc << 4) | 0x0a;
        p[2] = 0xbc;
        p[3] = 0xde;
        p
    }

    #[test]
    fn ds_field_reads_ipv4_tos_and_ipv6_traffic_class() {
        assert_eq!(ds_field(&v4(0xb9)), 0xb9);
        assert_eq!(ds_field(&v6(0xb9)), 0xb9);
        assert_eq!(ds_field(&[0x45]), 0);
        assert_eq!(ds_field(&[0x00, 0xff]), 0);
    }

    /// RFC 6040 figure 4 (normal mode), every cell, for both families; the
    /// DSCP and the IPv6 flow label are never touched, the IPv4 checksum
    /// stays valid.
    #[test]
    fn decapsulation_follows_rfc6040_figure_4() {
        // want[outer][inner]: Some(resulting inner ECN) or None for drop.
        let want: [[Option<u8>; 4]; 4] = [
            // outer Not-ECT: inner unchanged
            [Some(NOT_ECT), Some(ECT1), Some(ECT0), Some(CE)],
            // outer ECT(1)
            [Some(NOT_ECT), Some(ECT1), Some(ECT1), Some(CE)],
            // outer ECT(0)
            [Some(NOT_ECT), Some(ECT1), Some(ECT0), Some(CE)],
            // outer CE
            [None, Some(CE), Some(CE), Some(CE)],
        ];
        let dscp = 0b101110 << 2; // EF
        for outer in 0..4u8 {
            for inner in 0..4u8 {
                for mut p in [v4(dscp | inner), v6(dscp | inner)] {
                    let got = decapsulate(0b001010 << 2 | outer, &mut p);
                    match want[outer as usize][inner as usize] {
                        None => assert_eq!(got, Err(DropReason::CeOnNotEct)),
                        Some(ecn) => {
                            assert_eq!(got, Ok(()), "outer {outer} inner {inner}");
                            assert_eq!(ds_field(&p), dscp | ecn, "outer {outer} inner {inner}");
                            if p[0] >> 4 == 4 {
                                assert_eq!(checksum::sum(&p), 0xffff, "checksum");
                            } else {
                                assert_eq!((p[1] & 0x0f, p[2], p[3]), (0x0a, 0xbc, 0xde));
                            }
                        }
                    }
                }
            }
        }
    }
}
