//! The Internet checksum (RFC 1071), pseudo-header sums and incremental
//! update (RFC 1624).
//!
//! Sums here are ones' complement sums folded to 16 bits and *not* inverted;
//! [`finish`] inverts a sum into the value written on the wire. A received
//! header (checksum field included) verifies when its sum is `0xFFFF`.

use core::net::{Ipv4Addr, Ipv6Addr};

/// Ones' complement sum of `data` as big-endian 16-bit words, folded to 16
/// bits (odd trailing byte padded with zero, so only the last piece of a
/// multi-part sum may have odd length).
///
/// From [`WIDE_MIN`] bytes on, the 16-byte-aligned front goes through
/// [`sum_wide`] (four carry-free lanes; the UDP checksum of an ESP-in-UDP
/// over IPv6 packet covers the whole ciphertext, issue 14) and the rest
/// through [`sum_words`]; shorter input (headers) through `sum_words` alone.
pub fn sum(data: &[u8]) -> u16 {
    if data.len() < WIDE_MIN {
        return sum_words(data);
    }
    let split = data.len() & !15;
    add(sum_wide(&data[..split]), sum_words(&data[split..]))
}

/// Where [`sum_wide`] takes over. examples/checksum_speed.rs on the Zen 5
/// build machine (bench/results/epyc-zen5-2vcpu-2026-12-03-udp6-csum.txt):
/// the wide loop 2.6-3.1x the old one's GB/s at 576, 1500 and 9000 B. At
/// 64 B a wide-only version was within that shared machine's run-to-run
/// noise of the old loop (two runs while choosing, not recorded); 128 B
/// was not measured, so the threshold is a choice between the two.
const WIDE_MIN: usize = 128;

/// The sum of `data` (a multiple of 16 bytes long) in native byte order:
/// 32-bit words added into four u64 lanes, which cannot overflow below
/// 2^32 words, so no add depends on another's carry and the loop
/// vectorizes; folded and turned to big-endian once at the end (the ones'
/// complement sum commutes with swapping bytes, RFC 1071 section 2(B)).
fn sum_wide(data: &[u8]) -> u16 {
    debug_assert_eq!(data.len() % 16, 0);
    let mut lanes = [0u64; 4];
    for chunk in data.chunks_exact(16) {
        for (i, lane) in lanes.iter_mut().enumerate() {
            let word = [
                chunk[4 * i],
                chunk[4 * i + 1],
                chunk[4 * i + 2],
                chunk[4 * i + 3],
            ];
            *lane += u64::from(u32::from_ne_bytes(word));
        }
    }
    // Each lane is below 2^62 for any slice that fits in memory.
    let mut total = lanes.iter().sum::<u64>();
    while total > 0xffff {
        total = (total >> 16) + (total & 0xffff);
    }
    u16::from_be(total as u16)
}

/// [`sum`] for short input: 8-byte big-endian words into a u64 with
/// end-around carry, which is the same ones' complement sum because 2^64 =
/// 1 (mod 2^16 - 1); the tail (under 8 bytes) goes in as one zero-padded
/// word. Measured on the build machine (examples/checksum_speed.rs) this
/// beat both a 32-bit-word loop and a per-word loop on headers.
fn sum_words(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        acc = add_carry(acc, u64::from_be_bytes(word));
    }
    // The tail as one zero-padded big-endian word, built byte by byte: a
    // variable-length copy into an array would cost a memcpy call, which
    // dominates for 20-byte IPv4 headers.
    let mut tail: u64 = 0;
    for (i, b) in chunks.remainder().iter().enumerate() {
        tail |= u64::from(*b) << (56 - 8 * i);
    }
    acc = add_carry(acc, tail);
    let mut folded = (acc >> 32) + (acc & 0xffff_ffff);
    while folded > 0xffff {
        folded = (folded >> 16) + (folded & 0xffff);
    }
    folded as u16
}

/// 64-bit ones' complement addition: the carry out comes back in at bit 0.
fn add_carry(a: u64, b: u64) -> u64 {
    let (s, carry) = a.overflowing_add(b);
    s + u64::from(carry)
}

/// Ones' complement addition of two folded sums.
pub fn add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xffff) + (s >> 16)) as u16
}

/// The checksum field value for a folded sum: its ones' complement.
pub fn finish(sum: u16) -> u16 {
    !sum
}

/// The Internet checksum of `data` (RFC 1071): the value to write into a
/// zeroed checksum field.
pub fn checksum(data: &[u8]) -> u16 {
    finish(sum(data))
}

/// Sum of the IPv4 pseudo-header (RFC 768 / RFC 793): addresses, protocol and
/// the upper-layer length.
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u16) -> u16 {
    let s = sum(&src.octets());
    let s = add(s, sum(&dst.octets()));
    add(s, add(u16::from(protocol), length))
}

/// Sum of the IPv6 pseudo-header (RFC 8200 section 8.1): addresses, the
/// upper-layer length (32 bits) and the next header value.
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, length: u32) -> u16 {
    let s = add(sum(&src.octets()), sum(&dst.octets()));
    let s = add(s, add((length >> 16) as u16, length as u16));
    add(s, u16::from(next_header))
}

/// What a NIC's transmit checksum offload does with a UDP datagram whose
/// sender left the checksum to it (the convention of Intel's NICs, virtio
/// and Linux's CHECKSUM_PARTIAL; DPDK's `rte_net_intel_cksum_prepare`):
/// the checksum field of `segment` (the UDP header and payload) holds the
/// pseudo-header sum, not inverted ([`offload_seed`]); the device sums the
/// whole segment, seed included, and writes the inverse, 0 sent as 0xFFFF
/// (RFC 768). The software fallback where a port cannot do it, and the
/// model of a NIC in tests. Does nothing to a segment shorter than a UDP
/// header.
pub fn complete_offloaded_udp(segment: &mut [u8]) {
    if segment.len() < crate::udp::HEADER_LEN {
        return;
    }
    let mut csum = finish(sum(segment));
    if csum == 0 {
        csum = 0xFFFF;
    }
    segment[6..8].copy_from_slice(&csum.to_be_bytes());
}

/// [`complete_offloaded_udp`] of the UDP datagram that starts `at` bytes
/// into `frame` (past its IP header, and its Ethernet header if any);
/// nothing when the frame is shorter.
pub fn complete_offloaded_udp_at(frame: &mut [u8], at: usize) {
    if let Some(segment) = frame.get_mut(at..) {
        complete_offloaded_udp(segment);
    }
}

/// The value a sender writes into a UDP checksum field that the device is
/// to complete ([`complete_offloaded_udp`]): the pseudo-header sum of
/// `pseudo` (addresses and next header, from [`pseudo_header_v4`] /
/// [`pseudo_header_v6`] with length 0) plus the UDP length, not inverted.
pub fn offload_seed(pseudo: u16, udp_len: u16) -> u16 {
    add(pseudo, udp_len)
}

/// New checksum after one 16-bit word of the covered data changed from `old`
/// to `new` (RFC 1624 eqn. 3: `HC' = ~(~HC + ~m + m')`), without touching
/// the rest of the data.
pub fn update16(checksum: u16, old: u16, new: u16) -> u16 {
    !add(add(!checksum, !old), new)
}

/// Like [`update16`] for a 32-bit field (e.g. an IPv4 address).
pub fn update32(checksum: u16, old: u32, new: u32) -> u16 {
    let c = update16(checksum, (old >> 16) as u16, (new >> 16) as u16);
    update16(c, old as u16, new as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Straightforward RFC 1071 reference: 16-bit words into a u32.
    fn reference_sum(data: &[u8]) -> u16 {
        let mut acc: u32 = 0;
        for pair in data.chunks(2) {
            let word = u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]);
            acc += u32::from(word);
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    /// A seeded datagram completed as a NIC would is the datagram with
    /// its checksum computed in software, for every length around the wide
    /// loop's threshold and odd lengths (the device sums the seed with the
    /// rest; a computed 0 goes out as 0xFFFF either way).
    #[test]
    fn offloaded_udp_checksum_completes_to_the_computed_one() {
        let src: Ipv6Addr = "fd00:99::1".parse().unwrap();
        let dst: Ipv6Addr = "fd00:99::2".parse().unwrap();
        for len in (8..300).chain([1000, 1451, 1500]) {
            let mut udp: Vec<u8> = (0..len).map(|i| (i * 31 + len) as u8).collect();
            udp[4..6].copy_from_slice(&(len as u16).to_be_bytes());
            udp[6..8].copy_from_slice(&[0, 0]);
            let pseudo = pseudo_header_v6(src, dst, 17, len as u32);
            let mut want = finish(add(pseudo, sum(&udp)));
            if want == 0 {
                want = 0xFFFF;
            }
            let seed = offload_seed(pseudo_header_v6(src, dst, 17, 0), len as u16);
            udp[6..8].copy_from_slice(&seed.to_be_bytes());
            complete_offloaded_udp(&mut udp);
            assert_eq!(u16::from_be_bytes([udp[6], udp[7]]), want, "length {len}");
            // And the result verifies as any receiver checks it.
            assert_eq!(add(pseudo, sum(&udp)), 0xFFFF, "length {len}");
        }
        // Shorter than a UDP header: left alone.
        let mut short = [1u8, 2, 3];
        complete_offloaded_udp(&mut short);
        assert_eq!(short, [1, 2, 3]);
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
        assert_eq!(
            sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0xddf2
        );
    }

    #[test]
    fn ipv4_header_known_answer() {
        // A well-known sample IPv4 header whose checksum is 0xb861; with the
        // checksum in place the header sums to 0xFFFF.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0xb861);
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(sum(&h), 0xffff);
    }

    #[test]
    fn odd_tail_pads_with_zero() {
        assert_eq!(sum(&[0xab]), 0xab00);
        assert_eq!(sum(&[1, 2, 3, 4, 5]), 0x0406 + 0x0500);
    }

    #[test]
    fn matches_scapy_checksum() {
        // scapy: checksum(bytes(range(1, 38))) == 0x95a8 (odd length, tools/gen_vectors.py)
        let odd: Vec<u8> = (1..38).collect();
        assert_eq!(checksum(&odd), 0x95a8);
        // scapy: checksum(bytes((i*7+3)&0xff for i in range(1500))) == 0x66e1
        let long: Vec<u8> = (0..1500u32).map(|i| ((i * 7 + 3) & 0xff) as u8).collect();
        assert_eq!(checksum(&long), 0x66e1);
    }

    #[test]
    fn all_ones_words_do_not_lose_carries() {
        let data = [0xffu8; 64];
        assert_eq!(sum(&data), reference_sum(&data));
        let data = [0xffu8; 63];
        assert_eq!(sum(&data), reference_sum(&data));
        // Through the wide lanes too, at and around their threshold.
        for n in [WIDE_MIN - 1, WIDE_MIN, WIDE_MIN + 15, 1500, 9001] {
            let data = vec![0xffu8; n];
            assert_eq!(sum(&data), reference_sum(&data), "{n} bytes");
        }
    }

    proptest::proptest! {
        #[test]
        fn fast_sum_equals_reference(data in proptest::collection::vec(proptest::num::u8::ANY, 0..2000)) {
            // Equal as ones' complement values: 0x0000 and 0xffff are both zero.
            let (a, b) = (sum(&data), reference_sum(&data));
            proptest::prop_assert!(a == b || (a % 0xffff == b % 0xffff));
        }

        #[test]
        fn incremental_update_verifies(data in proptest::collection::vec(proptest::num::u8::ANY, 20..21),
                                       idx in 0usize..9, new in proptest::num::u16::ANY) {
            // Word 5 holds the checksum; change another word and update incrementally.
            let mut d = data.clone();
            d[10] = 0; d[11] = 0;
            let c = checksum(&d);
            d[10..12].copy_from_slice(&c.to_be_bytes());
            let i = if idx >= 5 { idx + 1 } else { idx } * 2;
            let old = u16::from_be_bytes([d[i], d[i + 1]]);
            d[i..i + 2].copy_from_slice(&new.to_be_bytes());
            let c2 = update16(c, old, new);
            d[10..12].copy_from_slice(&c2.to_be_bytes());
            let s = sum(&d);
            proptest::prop_assert!(s == 0xffff || (s == 0 && d.iter().all(|&b| b == 0)));
        }
    }
}
