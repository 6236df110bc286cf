//! Where the fields of an ESP packet lie (RFC 4303 §2), and the AEAD AAD.
//!
//! Every backend splits the packet the same way, so the offsets live here once.

/// The fields of one ESP packet, borrowed from the packet buffer.
pub struct EspParts<'a> {
    /// SPI (4 bytes) followed by the low 32 bits of the sequence number.
    pub header: &'a mut [u8; 8],
    /// The IV carried in the packet.
    pub iv: &'a mut [u8],
    /// payload || padding || pad length || next header (encrypted on the wire).
    pub payload: &'a mut [u8],
    /// The integrity check value.
    pub icv: &'a mut [u8],
}

/// Splits `esp` (SPI .. ICV) into its fields; `None` if it is too short to
/// hold the header, the IV and the ICV.
pub fn split_esp(esp: &mut [u8], iv_len: usize, icv_len: usize) -> Option<EspParts<'_>> {
    let min = 8usize.checked_add(iv_len)?.checked_add(icv_len)?;
    if esp.len() < min {
        return None;
    }
    let (header, rest) = esp.split_at_mut(8);
    let (iv, rest) = rest.split_at_mut(iv_len);
    let payload_len = rest.len() - icv_len;
    let (payload, icv) = rest.split_at_mut(payload_len);
    let header: &mut [u8; 8] = header.try_into().ok()?;
    Some(EspParts {
        header,
        iv,
        payload,
        icv,
    })
}

/// The AEAD additional data: SPI || seq-lo (8 bytes), or with ESN
/// SPI || seq-hi || seq-lo (12 bytes) (RFC 4106 §5, RFC 7634 §3).
/// Returns the buffer and how many of its bytes are the AAD.
pub fn aead_aad(header: &[u8; 8], seq: u64, esn: bool) -> ([u8; 12], usize) {
    let mut aad = [0u8; 12];
    aad[..4].copy_from_slice(&header[..4]);
    if esn {
        // seq-lo is taken from the wire, like the SPI: the AAD authenticates
        // what was sent plus the inferred high bits.
        aad[4..8].copy_from_slice(&((seq >> 32) as u32).to_be_bytes());
        aad[8..].copy_from_slice(&header[4..8]);
        (aad, 12)
    } else {
        aad[4..8].copy_from_slice(&header[4..8]);
        (aad, 8)
    }
}

/// The high 32 bits of the sequence number as they are appended to the HMAC
/// input under ESN (RFC 4303 §2.2.1); empty without ESN.
pub fn esn_high_bits(seq: u64, esn: bool) -> ([u8; 4], usize) {
    (((seq >> 32) as u32).to_be_bytes(), if esn { 4 } else { 0 })
}

/// Writes the low 32 bits of `seq` into the header (the SPI is the engine's).
pub fn write_seq_lo(header: &mut [u8; 8], seq: u64) {
    header[4..].copy_from_slice(&(seq as u32).to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_fields_at_their_offsets() {
        let mut esp: Vec<u8> = (0u8..40).collect();
        let parts = split_esp(&mut esp, 8, 16).unwrap();
        assert_eq!(parts.header, &[0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(parts.iv, &[8, 9, 10, 11, 12, 13, 14, 15]);
        assert_eq!(parts.payload, &[16, 17, 18, 19, 20, 21, 22, 23]);
        assert_eq!(parts.icv[0], 24);
        assert_eq!(parts.icv.len(), 16);
    }

    #[test]
    fn too_short_packets_do_not_split() {
        let mut esp = [0u8; 31];
        assert!(split_esp(&mut esp, 8, 16).is_none());
        assert!(split_esp(&mut esp, usize::MAX, 16).is_none());
    }

    #[test]
    fn aad_carries_esn_high_bits_only_with_esn() {
        let header = [1, 2, 3, 4, 0xaa, 0xbb, 0xcc, 0xdd];
        let (aad, n) = aead_aad(&header, 0x1122_3344_aabb_ccdd, false);
        assert_eq!(&aad[..n], &header);
        let (aad, n) = aead_aad(&header, 0x1122_3344_aabb_ccdd, true);
        assert_eq!(
            &aad[..n],
            &[1, 2, 3, 4, 0x11, 0x22, 0x33, 0x44, 0xaa, 0xbb, 0xcc, 0xdd]
        );
    }
}
