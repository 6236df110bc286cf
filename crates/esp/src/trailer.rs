//! The ESP trailer: Padding (1, 2, 3, ...), Pad Length, Next Header
//! (RFC 4303 §2.4-2.6).

use crate::verdict::DropReason;

/// RFC 4303's default pad contents: byte i (from 1) has value i.
const PAD_PATTERN: [u8; 255] = {
    let mut p = [0u8; 255];
    let mut i = 0;
    while i < 255 {
        p[i] = (i + 1) as u8;
        i += 1;
    }
    p
};

/// Pad bytes needed after `payload_len` so that payload + pad + 2 is a
/// multiple of `align` (a power of two, at most 256).
#[inline]
pub(crate) fn pad_len(payload_len: usize, align: usize) -> usize {
    debug_assert!(align.is_power_of_two() && align <= 256);
    // A mask, not `%`: with `align` only known at run time `%` compiles to
    // 64-bit `div` instructions (two here; slow, latency-bound ones on
    // x86), and this runs up to three times per packet (the path-MTU
    // check, prepare, encap).
    (payload_len + 2).wrapping_neg() & (align - 1)
}

/// Writes padding, pad length and next header into `tail`, which is exactly
/// `pad_len + 2` bytes.
#[inline]
pub(crate) fn write(tail: &mut [u8], next_header: u8) {
    let pad = tail.len() - 2;
    // At most 15 bytes here (align 16): a byte loop beats the call to
    // memcpy a variable-length copy_from_slice becomes.
    for (b, p) in tail[..pad].iter_mut().zip(PAD_PATTERN.iter()) {
        *b = *p;
    }
    tail[pad] = pad as u8;
    tail[pad + 1] = next_header;
}

/// Checks the trailer at the end of decrypted `plain` (payload || pad ||
/// pad length || next header) and returns (payload length, next header).
#[inline]
pub(crate) fn parse(plain: &[u8]) -> Result<(usize, u8), DropReason> {
    let n = plain.len();
    if n < 2 {
        return Err(DropReason::BadPadding);
    }
    let next_header = plain[n - 1];
    let pad = usize::from(plain[n - 2]);
    let payload_len = (n - 2).checked_sub(pad).ok_or(DropReason::BadPadding)?;
    // Usually 0-3 bytes: a loop, not a call to bcmp.
    let pads = &plain[payload_len..n - 2];
    if !pads.iter().zip(PAD_PATTERN.iter()).all(|(b, p)| b == p) {
        return Err(DropReason::BadPadding);
    }
    Ok((payload_len, next_header))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pad_lengths() {
        assert_eq!(pad_len(0, 4), 2);
        assert_eq!(pad_len(2, 4), 0);
        assert_eq!(pad_len(3, 4), 3);
        assert_eq!(pad_len(14, 16), 0);
        assert_eq!(pad_len(15, 16), 15);
        assert_eq!(pad_len(0, 16), 14);
        for len in 0..100 {
            for align in [1, 4, 8, 16] {
                let p = pad_len(len, align);
                assert!(p < align.max(1));
                assert_eq!((len + p + 2) % align, 0);
            }
        }
    }

    #[test]
    fn write_then_parse() {
        for pad in 0..16 {
            let mut buf = vec![0xAB; 5 + pad + 2];
            write(&mut buf[5..], 41);
            assert_eq!(&buf[5..5 + pad], &PAD_PATTERN[..pad]);
            assert_eq!(parse(&buf), Ok((5, 41)));
        }
    }

    #[test]
    fn bad_pad_bytes_or_length_are_rejected() {
        assert_eq!(parse(&[4]), Err(DropReason::BadPadding));
        // Pad length longer than the packet.
        assert_eq!(parse(&[1, 2, 3, 4]), Err(DropReason::BadPadding));
        // Pad bytes not 1, 2, 3.
        assert_eq!(parse(&[9, 1, 2, 4, 3, 4]), Err(DropReason::BadPadding));
        assert_eq!(parse(&[9, 1, 2, 3, 3, 4]), Ok((1, 4)));
        // Zero pad, empty payload.
        assert_eq!(parse(&[0, 4]), Ok((0, 4)));
        // Maximum pad length 255.
        let mut max = PAD_PATTERN.to_vec();
        max.extend_from_slice(&[255, 41]);
        assert_eq!(parse(&max), Ok((0, 41)));
    }
}
