//! IPv4 fragmentation before encryption (RFC 791): an inner packet without
//! DF that would not fit the path once encapsulated is cut into fragments
//! that each fit, and each fragment is encrypted on its own. The far
//! host reassembles; the outer ESP packets are never fragmented.
//!
//! Fragment headers are copies of the original header (options included:
//! RFC 791 allows copying only the "copied" options, but a gateway rarely
//! sees options and copying all of them is harmless for reassembly).

use espgw_wire::{Ipv4Packet, PacketBuf};

use crate::pool::BufPool;

/// Cuts the IPv4 packet `pkt` (not DF) into fragments of at most `mtu`
/// bytes. The first fragment stays in `pkt`; the others are new buffers
/// from `pool`, returned in order. `None` (and `pkt` untouched) when a
/// buffer is missing or `mtu` leaves no room for 8 bytes of payload.
pub fn fragment_v4<B: PacketBuf, P: BufPool<B>>(
    pkt: &mut B,
    mtu: usize,
    pool: &P,
) -> Option<Vec<B>> {
    let (hl, total, base_off, more) = {
        let ip = Ipv4Packet::new_checked(pkt.data()).ok()?;
        (
            ip.header_len(),
            usize::from(ip.total_len()),
            usize::from(ip.frag_offset()),
            ip.more_frags(),
        )
    };
    let chunk = mtu.checked_sub(hl)? & !7;
    if chunk == 0 || total <= mtu {
        return None;
    }
    let payload = total - hl;
    let pieces = payload.div_ceil(chunk);
    // Every buffer first: all fragments or none.
    let mut rest = Vec::with_capacity(pieces - 1);
    for _ in 1..pieces {
        rest.push(pool.alloc()?);
    }
    for (i, frag) in rest.iter_mut().enumerate() {
        let start = hl + (i + 1) * chunk;
        let len = chunk.min(total - start);
        frag.append(hl + len).ok()?;
        let src = pkt.data();
        let d = frag.data_mut();
        d[..hl].copy_from_slice(&src[..hl]);
        d[hl..].copy_from_slice(&src[start..start + len]);
        let last = start + len == total;
        finish(d, hl + len, base_off + (i + 1) * chunk, more || !last)?;
    }
    pkt.trim(pkt.len() - (hl + chunk)).ok()?;
    finish(pkt.data_mut(), hl + chunk, base_off, true)?;
    Some(rest)
}

/// Sets length, flags and offset of a fragment header and its checksum.
fn finish(packet: &mut [u8], len: usize, offset: usize, more: bool) -> Option<()> {
    // The length first: the view checks it against the (shorter) buffer.
    packet
        .get_mut(2..4)?
        .copy_from_slice(&u16::try_from(len).ok()?.to_be_bytes());
    let mut ip = Ipv4Packet::new_checked(packet).ok()?;
    ip.set_frag(false, more, u16::try_from(offset).ok()?);
    ip.fill_checksum();
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::VecBufPool;
    use espgw_wire::{ip_protocol, Ipv4Repr, VecBuf};

    fn packet(payload: usize) -> Vec<u8> {
        let mut p = vec![0u8; 20 + payload];
        Ipv4Repr {
            src_addr: [10, 1, 0, 10].into(),
            dst_addr: [10, 2, 0, 10].into(),
            protocol: ip_protocol::UDP,
            payload_len: payload as u16,
            ttl: 63,
            dscp_ecn: 0,
            ident: 0x1234,
            dont_frag: false,
        }
        .emit(&mut p)
        .unwrap();
        for (i, b) in p[20..].iter_mut().enumerate() {
            *b = i as u8;
        }
        p
    }

    #[test]
    fn fragments_fit_and_reassemble() {
        let orig = packet(3000);
        let mut first = VecBuf::from_packet(&orig);
        let rest = fragment_v4(&mut first, 1446, &VecBufPool).unwrap();
        let frags: Vec<&VecBuf> = std::iter::once(&first).chain(rest.iter()).collect();
        assert_eq!(frags.len(), 3);
        let mut reassembled = vec![0u8; 3000];
        let mut seen = 0;
        for (i, f) in frags.iter().enumerate() {
            let ip = Ipv4Packet::new_checked(f.data()).unwrap();
            assert!(ip.verify_checksum());
            assert!(f.len() <= 1446);
            assert_eq!(ip.ident(), 0x1234);
            assert_eq!(ip.more_frags(), i < 2);
            assert_eq!(ip.frag_offset() % 8, 0);
            let off = usize::from(ip.frag_offset());
            reassembled[off..off + ip.payload().len()].copy_from_slice(ip.payload());
            seen += ip.payload().len();
        }
        assert_eq!(seen, 3000);
        assert_eq!(&reassembled[..], &orig[20..]);
        // 1446 - 20 = 1426, rounded down to 1424: 1424 + 1424 + 152.
        assert_eq!(first.len(), 20 + 1424);
        assert_eq!(rest[1].len(), 20 + 152);
    }

    #[test]
    fn refuses_what_it_cannot_do() {
        let mut small = VecBuf::from_packet(&packet(100));
        assert!(fragment_v4(&mut small, 1500, &VecBufPool).is_none());
        let mut p = VecBuf::from_packet(&packet(100));
        assert!(fragment_v4(&mut p, 27, &VecBufPool).is_none());
        assert_eq!(p.len(), 120);
    }
}
