//! Which worker a received frame goes to in pipeline mode: a hash of its
//! flow, so that one flow always lands on one worker and keeps its order.
//! ESP is hashed on its outer addresses and SPI, so all of an SA's packets
//! meet one worker (no reordering before the replay window, no contention
//! on the SA's lock); anything that is not IP goes to worker 0.

use espgw_wire::{ethertype, ip_protocol};

fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x0100_0000_01b3).rotate_left(29)
}

fn bytes(h: u64, b: &[u8]) -> u64 {
    b.chunks(8).fold(h, |h, c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        mix(h, u64::from_le_bytes(w))
    })
}

/// The worker (`0..workers`) for the Ethernet frame `frame`. Never panics.
pub fn worker_for(frame: &[u8], workers: usize) -> usize {
    if workers <= 1 {
        return 0;
    }
    let h = flow_hash(frame).unwrap_or(0);
    (h % workers as u64) as usize
}

fn flow_hash(frame: &[u8]) -> Option<u64> {
    let et = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let ip = frame.get(14..)?;
    let (addrs, proto, l4) = match et {
        ethertype::IPV4 => {
            let ihl = usize::from(ip.first()? & 0x0f) * 4;
            // Non-first fragments have no ports: hash addresses only, so a
            // datagram's fragments stay together.
            let frag = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]) & 0x3fff != 0;
            (
                ip.get(12..20)?,
                *ip.get(9)?,
                if frag {
                    &[][..]
                } else {
                    ip.get(ihl..).unwrap_or(&[])
                },
            )
        }
        ethertype::IPV6 => (ip.get(8..40)?, *ip.get(6)?, ip.get(40..).unwrap_or(&[])),
        _ => return None,
    };
    let mut h = bytes(0xcbf2_9ce4_8422_2325, addrs);
    h = mix(h, u64::from(proto));
    let key = match proto {
        // The SPI: all packets of an SA together.
        ip_protocol::ESP => l4.get(..4),
        ip_protocol::TCP | ip_protocol::UDP => l4.get(..4),
        _ => None,
    };
    if let Some(k) = key {
        h = bytes(h, k);
    }
    Some(fmix64(h))
}

/// MurmurHash3's finalizer: every input bit reaches the low bits that
/// the modulo keeps.
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(src: [u8; 4], dst: [u8; 4], proto: u8, l4: [u8; 4]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12..14].copy_from_slice(&ethertype::IPV4.to_be_bytes());
        f[14] = 0x45;
        f[14 + 9] = proto;
        f[14 + 12..14 + 16].copy_from_slice(&src);
        f[14 + 16..14 + 20].copy_from_slice(&dst);
        f[34..38].copy_from_slice(&l4);
        f
    }

    #[test]
    fn same_flow_same_worker_and_flows_spread() {
        let a = frame([10, 1, 0, 10], [10, 2, 0, 10], 6, [0x9c, 0x40, 0, 80]);
        assert_eq!(worker_for(&a, 4), worker_for(&a.clone(), 4));
        let mut seen = [false; 4];
        for port in 0..64u8 {
            let f = frame([10, 1, 0, 10], [10, 2, 0, 10], 6, [0x9c, port, 0, 80]);
            seen[worker_for(&f, 4)] = true;
        }
        assert!(seen.iter().all(|s| *s), "64 flows over 4 workers: {seen:?}");
        // Every packet of one SA to one worker, whatever its sequence number.
        let esp = |seq: u8| {
            let mut f = frame([192, 0, 2, 2], [192, 0, 2, 1], 50, [0, 0, 0xb0, 1]);
            f[41] = seq;
            f
        };
        assert!((0..50).all(|s| worker_for(&esp(s), 4) == worker_for(&esp(0), 4)));
        for junk in [
            &[][..],
            &[1, 2, 3],
            &[0; 13],
            &frame([0; 4], [0; 4], 0, [0; 4])[..20],
        ] {
            assert!(worker_for(junk, 3) < 3);
        }
        assert_eq!(worker_for(&a, 1), 0);
    }
}
