//! The ESP header (RFC 4303) and UDP encapsulation of ESP (RFC 3948).

use crate::{Error, Result};

/// Length of the ESP header (SPI and sequence number).
pub const HEADER_LEN: usize = 8;

/// UDP port for IKE and UDP-encapsulated ESP after NAT detection (RFC 3948).
pub const NAT_T_PORT: u16 = 4500;

/// A view of an ESP packet. [`EspPacket::new_checked`] guarantees the 8-byte
/// header is there; what follows (IV, ciphertext, ICV) is opaque here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EspPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EspPacket<T> {
    /// Wraps `buffer` after checking the header is present. SPI 0 is
    /// reserved (RFC 4303 2.1) and rejected as [`Error::Malformed`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let p = EspPacket { buffer };
        if p.spi() == 0 {
            return Err(Error::Malformed);
        }
        Ok(p)
    }
    /// Security Parameters Index.
    pub fn spi(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    /// Sequence number (low 32 bits when ESN is in use).
    pub fn seq(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[4], b[5], b[6], b[7]])
    }
    /// Everything after the header: IV, ciphertext, padding, ICV.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EspPacket<T> {
    /// Sets the SPI.
    pub fn set_spi(&mut self, v: u32) {
        self.buffer.as_mut()[0..4].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the sequence number.
    pub fn set_seq(&mut self, v: u32) {
        self.buffer.as_mut()[4..8].copy_from_slice(&v.to_be_bytes());
    }
}

/// An ESP header's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EspRepr {
    /// Security Parameters Index (non-zero).
    pub spi: u32,
    /// Sequence number (low 32 bits).
    pub seq: u32,
}

impl EspRepr {
    /// Reads a checked packet.
    pub fn parse<T: AsRef<[u8]>>(packet: &EspPacket<T>) -> Self {
        EspRepr {
            spi: packet.spi(),
            seq: packet.seq(),
        }
    }
    /// Writes the 8-byte header at the start of `out`; returns its length.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize> {
        let h = out.get_mut(..HEADER_LEN).ok_or(Error::NoRoom)?;
        h[0..4].copy_from_slice(&self.spi.to_be_bytes());
        h[4..8].copy_from_slice(&self.seq.to_be_bytes());
        Ok(HEADER_LEN)
    }
}

/// What a UDP payload on port 4500 is (RFC 3948 section 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UdpEncapKind {
    /// ESP: the payload starts with a non-zero SPI.
    Esp,
    /// An IKE message behind the 4-byte zero non-ESP marker; the IKE message
    /// starts at offset 4 of the payload.
    Ike,
    /// A NAT-keepalive: exactly one byte, 0xFF.
    Keepalive,
    /// None of the above (too short to be ESP, or junk): drop.
    Invalid,
}

/// Classifies the payload of a UDP datagram received on port 4500.
pub fn classify_udp_encap(payload: &[u8]) -> UdpEncapKind {
    match payload {
        [0xff] => UdpEncapKind::Keepalive,
        [0, 0, 0, 0, ..] => UdpEncapKind::Ike,
        _ if payload.len() >= HEADER_LEN => UdpEncapKind::Esp,
        _ => UdpEncapKind::Invalid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_prefixes_rejected, hex};
    use crate::{ip_protocol, Ipv4Packet, UdpPacket};

    // scapy: IP(src="192.0.2.1", dst="192.0.2.2", proto=50)/ESP(spi=0x01020304, seq=0x0a0b0c0d, data=24 x 0xab)
    // (tools/gen_vectors.py ipv4_esp)
    const ESP4: &str = "45000034000100004032f693c0000201c0000202010203040a0b0c0dabababababababababababababababababababababababab";
    // scapy: IP()/UDP(sport=4500, dport=4500)/ESP(spi=0x01020304, seq=1, data=24 x 0xcd) (ipv4_udp_esp)
    const UDP_ESP: &str = "4500003c000100004011f6acc0000201c0000202119411940028aec50102030400000001cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd";
    // scapy: IP()/UDP(sport=4500, dport=4500)/b"\xff" (ipv4_udp_keepalive)
    const KEEPALIVE: &str = "4500001d000100004011f6cbc0000201c000020211941194000959afff";

    #[test]
    fn parses_scapy_esp() {
        let bytes = hex(ESP4);
        let ip = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(ip.protocol(), ip_protocol::ESP);
        let esp = EspPacket::new_checked(ip.payload()).unwrap();
        let r = EspRepr::parse(&esp);
        assert_eq!(
            r,
            EspRepr {
                spi: 0x0102_0304,
                seq: 0x0a0b_0c0d
            }
        );
        assert_eq!(esp.payload().len(), 24);
        let mut out = [0u8; 8];
        r.emit(&mut out).unwrap();
        assert_eq!(&out[..], &ip.payload()[..8]);
        assert_prefixes_rejected(&ip.payload()[..8], |b| {
            EspPacket::new_checked(b).map(|_| ())
        });
    }

    #[test]
    fn classifies_rfc3948_payloads() {
        for (vector, kind) in [
            (UDP_ESP, UdpEncapKind::Esp),
            (KEEPALIVE, UdpEncapKind::Keepalive),
        ] {
            let bytes = hex(vector);
            let ip = Ipv4Packet::new_checked(&bytes[..]).unwrap();
            let udp = UdpPacket::new_checked(ip.payload()).unwrap();
            assert_eq!(udp.dst_port(), NAT_T_PORT);
            assert!(udp.verify_checksum_v4(ip.src_addr(), ip.dst_addr()));
            assert_eq!(classify_udp_encap(udp.payload()), kind);
        }
        assert_eq!(classify_udp_encap(&[0, 0, 0, 0, 0x20]), UdpEncapKind::Ike);
        assert_eq!(classify_udp_encap(&[0, 0, 0, 0]), UdpEncapKind::Ike);
        assert_eq!(
            classify_udp_encap(&[1, 2, 3, 4, 5, 6, 7]),
            UdpEncapKind::Invalid
        );
        assert_eq!(classify_udp_encap(&[0xff, 0xff]), UdpEncapKind::Invalid);
        assert_eq!(classify_udp_encap(&[]), UdpEncapKind::Invalid);
    }
}
