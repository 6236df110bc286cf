//! Internet checksum (RFC 1071) pieces: sums are kept unfolded in a `u64`
//! so precomputed partial sums can be added to per-packet ones.

/// Adds `data` as big-endian 16-bit words (odd tail padded with zero) to `sum`.
#[inline]
pub(crate) fn add_bytes(mut sum: u64, data: &[u8]) -> u64 {
    // 32-bit big-endian words fold to the same ones' complement sum as
    // 16-bit ones and halve the loop count; a u64 cannot overflow here.
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        sum += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    let rest = chunks.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    sum + u64::from(u32::from_be_bytes(tail))
}

/// Folds `sum` to 16 bits (not complemented).
#[inline]
pub(crate) fn fold(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum as u16
}

/// The checksum field value for a folded sum that excluded the field.
#[inline]
pub(crate) fn finish(sum: u64) -> u16 {
    !fold(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: 00 01 f2 03 f4 f5 f6 f7 sums to 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(add_bytes(0, &data)), 0xddf2);
    }

    #[test]
    fn ipv4_header_checksum() {
        // A well-known sample header whose checksum is 0xb861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(finish(add_bytes(0, &h)), 0xb861);
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(fold(add_bytes(0, &h)), 0xffff);
    }

    #[test]
    fn odd_lengths_pad_with_zero() {
        assert_eq!(fold(add_bytes(0, &[0xab])), 0xab00);
        assert_eq!(fold(add_bytes(0, &[1, 2, 3, 4, 5])), 0x0406 + 0x0500);
    }
}
