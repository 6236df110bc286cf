//! TCP (RFC 9293) headers: a view with checksums over the IPv4 and IPv6
//! pseudo-headers, and in-place MSS clamping of SYN segments.
//!
//! Only what a gateway needs: read the header, verify or fill the
//! checksum, and lower the MSS option of a SYN / SYN-ACK so that the
//! segments of the connection fit a tunnel (the "MSS clamping" of RFC 4459
//! section 3.2), patching the checksum incrementally (RFC 1624).

use crate::{checksum, ip_protocol};
use crate::{Error, Result};
use core::net::{Ipv4Addr, Ipv6Addr};

/// Length of the TCP header without options.
pub const HEADER_LEN: usize = 20;
/// Largest header: data offset 15 words.
pub const MAX_HEADER_LEN: usize = 60;

/// Flag bits of the 13th header byte.
pub mod flags {
    /// No more data from the sender.
    pub const FIN: u8 = 0x01;
    /// Synchronize sequence numbers (the first segment of each direction).
    pub const SYN: u8 = 0x02;
    /// Reset the connection.
    pub const RST: u8 = 0x04;
    /// Push.
    pub const PSH: u8 = 0x08;
    /// The acknowledgment field is significant.
    pub const ACK: u8 = 0x10;
    /// The urgent pointer is significant.
    pub const URG: u8 = 0x20;
    /// ECN echo (RFC 3168).
    pub const ECE: u8 = 0x40;
    /// Congestion window reduced (RFC 3168).
    pub const CWR: u8 = 0x80;
}

/// TCP option kinds this module understands (IANA).
pub mod option {
    /// End of option list.
    pub const END: u8 = 0;
    /// No-operation (padding between options).
    pub const NOP: u8 = 1;
    /// Maximum segment size: kind, length 4, 16-bit value.
    pub const MSS: u8 = 2;
    /// Length of the MSS option.
    pub const MSS_LEN: usize = 4;
}

/// A view of a TCP segment. [`TcpPacket::new_checked`] guarantees
/// `20 <= data offset * 4 <= buffer length`, so the options lie inside the
/// buffer; the segment is the whole buffer (pass the IP payload, trimmed to
/// the IP length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps `buffer` after validating the data offset.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = usize::from(b[12] >> 4) * 4;
        if header_len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if header_len > b.len() {
            return Err(Error::Truncated);
        }
        Ok(TcpPacket { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    fn u16_at(&self, i: usize) -> u16 {
        u16::from_be_bytes([self.b()[i], self.b()[i + 1]])
    }
    fn u32_at(&self, i: usize) -> u32 {
        u32::from_be_bytes([
            self.b()[i],
            self.b()[i + 1],
            self.b()[i + 2],
            self.b()[i + 3],
        ])
    }
    /// Source port.
    pub fn src_port(&self) -> u16 {
        self.u16_at(0)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        self.u16_at(2)
    }
    /// Sequence number.
    pub fn seq_number(&self) -> u32 {
        self.u32_at(4)
    }
    /// Acknowledgment number.
    pub fn ack_number(&self) -> u32 {
        self.u32_at(8)
    }
    /// Header length in bytes (data offset * 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[12] >> 4) * 4
    }
    /// The flag byte (see [`flags`]).
    pub fn flags(&self) -> u8 {
        self.b()[13]
    }
    /// True when SYN is set (a SYN or a SYN-ACK).
    pub fn syn(&self) -> bool {
        self.flags() & flags::SYN != 0
    }
    /// True when ACK is set.
    pub fn ack(&self) -> bool {
        self.flags() & flags::ACK != 0
    }
    /// True when FIN is set.
    pub fn fin(&self) -> bool {
        self.flags() & flags::FIN != 0
    }
    /// True when RST is set.
    pub fn rst(&self) -> bool {
        self.flags() & flags::RST != 0
    }
    /// Receive window (unscaled).
    pub fn window(&self) -> u16 {
        self.u16_at(14)
    }
    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        self.u16_at(16)
    }
    /// Urgent pointer.
    pub fn urgent(&self) -> u16 {
        self.u16_at(18)
    }
    /// The options: the header after its fixed 20 bytes.
    pub fn options(&self) -> &[u8] {
        &self.b()[HEADER_LEN..self.header_len()]
    }
    /// The payload: everything after the header.
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..]
    }
    /// The MSS option's value, if the options are well formed and hold one.
    pub fn mss(&self) -> Option<u16> {
        let opts = self.options();
        let mut found = None;
        walk_options(opts, |at| {
            found = found.or(Some(u16::from_be_bytes([opts[at], opts[at + 1]])))
        })
        .ok()?;
        found
    }
    /// Length of the segment for the pseudo-header (the whole buffer).
    fn segment_len(&self) -> usize {
        self.b().len()
    }
    /// True when the checksum verifies over the IPv4 pseudo-header. A
    /// segment longer than 65535 bytes cannot be carried by IPv4: false.
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let Ok(len) = u16::try_from(self.segment_len()) else {
            return false;
        };
        let ph = checksum::pseudo_header_v4(src, dst, ip_protocol::TCP, len);
        checksum::add(ph, checksum::sum(self.b())) == 0xffff
    }
    /// True when the checksum verifies over the IPv6 pseudo-header.
    pub fn verify_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        let Ok(len) = u32::try_from(self.segment_len()) else {
            return false;
        };
        let ph = checksum::pseudo_header_v6(src, dst, ip_protocol::TCP, len);
        checksum::add(ph, checksum::sum(self.b())) == 0xffff
    }
}

impl<'a> TcpPacket<&'a [u8]> {
    /// The payload, borrowed for as long as the underlying bytes.
    pub fn into_payload(self) -> &'a [u8] {
        let hl = self.header_len();
        &self.buffer[hl..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Sets the checksum field directly.
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[16..18].copy_from_slice(&v.to_be_bytes());
    }
    fn fill_with(&mut self, pseudo: u16) {
        self.set_checksum(0);
        let c = checksum::finish(checksum::add(pseudo, checksum::sum(self.b())));
        self.set_checksum(c);
    }
    /// Computes and writes the checksum over the IPv4 pseudo-header
    /// (a segment over 65535 bytes, which IPv4 cannot carry, is left as is).
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        if let Ok(len) = u16::try_from(self.segment_len()) {
            self.fill_with(checksum::pseudo_header_v4(src, dst, ip_protocol::TCP, len));
        }
    }
    /// Computes and writes the checksum over the IPv6 pseudo-header.
    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        if let Ok(len) = u32::try_from(self.segment_len()) {
            self.fill_with(checksum::pseudo_header_v6(src, dst, ip_protocol::TCP, len));
        }
    }

    /// Lowers the MSS option of a SYN or SYN-ACK to `max_mss` when it is
    /// above, and patches the checksum incrementally (RFC 1624), so neither
    /// the IP addresses nor the rest of the segment are needed. Returns
    /// `(old, new)` when it changed the segment.
    ///
    /// Leaves the segment untouched (`None`) when SYN is not set, when there
    /// is no MSS option or it is already at or below `max_mss`, and when the
    /// options are malformed (an option length under 2 or past the header,
    /// an MSS option whose length is not 4): a segment we cannot parse is
    /// passed on as it came, rather than edited on a guess. Every MSS option
    /// above the limit is lowered (a sender should have one; a receiver
    /// might honour any of them); the first change is reported.
    pub fn clamp_mss(&mut self, max_mss: u16) -> Option<(u16, u16)> {
        if !self.syn() {
            return None;
        }
        let header_len = self.header_len();
        let mut mss_at = [0usize; MAX_HEADER_LEN / option::MSS_LEN];
        let mut count = 0;
        walk_options(self.options(), |at| {
            // At most 10 four-byte options fit in 40 bytes of options.
            if let Some(slot) = mss_at.get_mut(count) {
                *slot = HEADER_LEN + at;
                count += 1;
            }
        })
        .ok()?;
        let mut changed = None;
        for &at in &mss_at[..count] {
            debug_assert!(at + 2 <= header_len);
            let b = self.buffer.as_mut();
            let old = u16::from_be_bytes([b[at], b[at + 1]]);
            if old <= max_mss {
                continue;
            }
            b[at..at + 2].copy_from_slice(&max_mss.to_be_bytes());
            let c = self.checksum();
            self.set_checksum(update_at(c, at, old, max_mss));
            changed = changed.or(Some((old, max_mss)));
        }
        changed
    }
}

/// The checksum after the 16-bit value at byte offset `at` (from the start
/// of the checksummed data, which starts 16-bit aligned) changed from `old`
/// to `new`.
///
/// The Internet checksum sums 16-bit words starting at even offsets. A
/// value at an odd offset straddles two words: its first byte is the low
/// byte of one, its second the high byte of the next, so it contributes
/// its byte-swapped self to the sum (RFC 1071 section 2(B), byte-order
/// independence). Options are byte-aligned, so an MSS option after an odd
/// number of NOPs puts its value at an odd offset.
fn update_at(checksum: u16, at: usize, old: u16, new: u16) -> u16 {
    if at.is_multiple_of(2) {
        checksum::update16(checksum, old, new)
    } else {
        checksum::update16(checksum, old.swap_bytes(), new.swap_bytes())
    }
}

/// Walks a TCP option list, calling `on_mss` with the offset (within
/// `opts`) of each MSS option's 2-byte value. Stops at End of Option List
/// or the end of the list. `Err(Malformed)` when an option's length is
/// under 2 or runs past the list, or an MSS option's length is not 4.
/// Never reads outside `opts`.
fn walk_options(opts: &[u8], mut on_mss: impl FnMut(usize)) -> Result<()> {
    let mut i = 0;
    while let Some(&kind) = opts.get(i) {
        match kind {
            option::END => break,
            option::NOP => i += 1,
            _ => {
                let len = usize::from(*opts.get(i + 1).ok_or(Error::Malformed)?);
                if len < 2 || i + len > opts.len() {
                    return Err(Error::Malformed);
                }
                if kind == option::MSS {
                    if len != option::MSS_LEN {
                        return Err(Error::Malformed);
                    }
                    on_mss(i + 2);
                }
                i += len;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_prefixes_rejected, hex};
    use crate::{Ipv4Packet, Ipv6Packet};
    use proptest::prelude::*;

    // Made by scapy 2.8 (each pair: the segment as sent, then the same with
    // MSS 1300 and the checksum recomputed by scapy):
    //   def pair(pkt, new):
    //       b = bytes(pkt); p = pkt.__class__(b); t = p[TCP]
    //       t.options = [(k, new if k == 'MSS' else v) for k, v in t.options]
    //       del t.chksum; return b.hex(), bytes(p).hex()
    // IP(src="10.1.0.10", dst="10.2.0.10")/TCP(sport=40000, dport=5201, flags="S", seq=1000, options=[('MSS',1460)])
    const V4_MSS_ONLY: &str =
        "4500002c00010000400666b50a01000a0a02000a9c401451000003e80000000060022000af960000020405b4";
    const V4_MSS_ONLY_1300: &str =
        "4500002c00010000400666b50a01000a0a02000a9c401451000003e80000000060022000b036000002040514";
    // ... TCP(sport=40001, dport=5201, flags="S", seq=0x12345678, window=64240,
    //   options=[('MSS',1460),('SAckOK',b''),('Timestamp',(123456,0)),('NOP',None),('WScale',7)])  (Linux's SYN)
    const V4_LINUX: &str = "4500003c00010000400666a50a01000a0a02000a9c4114511234567800000000a002faf03d780000020405b40402080a0001e2400000000001030307";
    const V4_LINUX_1300: &str = "4500003c00010000400666a50a01000a0a02000a9c4114511234567800000000a002faf03e180000020405140402080a0001e2400000000001030307";
    // ... TCP(sport=40002, dport=80, flags="S", seq=7, options=[('NOP',None),('MSS',8960),('WScale',2)])
    //   (the MSS value at an odd offset)
    const V4_ODD: &str = "4500003000010000400666b10a01000a0a02000a9c420050000000070000000070022000b70000000102042300030302";
    const V4_ODD_1300: &str = "4500003000010000400666b10a01000a0a02000a9c420050000000070000000070022000a31e00000102040514030302";
    // ... TCP(sport=40003, dport=22, flags="S", seq=99,
    //   options=[('Timestamp',(1,2)),('NOP',None),('WScale',3),('SAckOK',b''),('MSS',65535)])  (MSS last)
    const V4_LATE: &str = "4500003c00010000400666a50a01000a0a02000a9c4300160000006300000000a00220007ce20000080a00000001000000020103030304020204ffff";
    const V4_LATE_1300: &str = "4500003c00010000400666a50a01000a0a02000a9c4300160000006300000000a002200077ce0000080a000000010000000201030303040202040514";
    // IPv6(src="2001:db8:2::10", dst="2001:db8:1::10")/TCP(sport=5201, dport=40004, flags="SA", seq=5, ack=1001,
    //   options=[('NOP',None),('NOP',None),('SAckOK',b''),('MSS',1440)])
    const V6_SYNACK: &str = "60000000001c064020010db800020000000000000000001020010db800010000000000000000001014519c4400000005000003e970122000530b000001010402020405a0";
    const V6_SYNACK_1300: &str = "60000000001c064020010db800020000000000000000001020010db800010000000000000000001014519c4400000005000003e970122000539700000101040202040514";
    // IPv6(src="2001:db8:1::10", dst="2001:db8:2::10")/TCP(sport=40005, dport=443, flags="S", seq=0xfffffff0,
    //   options=[('NOP',None)]*3 + [('MSS',9000)])/Raw(b"syn-data")  (odd offset, with payload)
    const V6_ODD: &str = "600000000024064020010db800010000000000000000001020010db80002000000000000000000109c4501bbfffffff000000000700220008dbc0000010101020423280073796e2d64617461";
    const V6_ODD_1300: &str = "600000000024064020010db800010000000000000000001020010db80002000000000000000000109c4501bbfffffff00000000070022000a1da0000010101020405140073796e2d64617461";

    const V4_CASES: [(&str, &str, u16); 4] = [
        (V4_MSS_ONLY, V4_MSS_ONLY_1300, 1460),
        (V4_LINUX, V4_LINUX_1300, 1460),
        (V4_ODD, V4_ODD_1300, 8960),
        (V4_LATE, V4_LATE_1300, 65535),
    ];
    const V6_CASES: [(&str, &str, u16); 2] = [
        (V6_SYNACK, V6_SYNACK_1300, 1440),
        (V6_ODD, V6_ODD_1300, 9000),
    ];

    #[test]
    fn accessors_read_scapys_fields() {
        let bytes = hex(V4_LINUX);
        let ip = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!((tcp.src_port(), tcp.dst_port()), (40001, 5201));
        assert_eq!((tcp.seq_number(), tcp.ack_number()), (0x1234_5678, 0));
        assert_eq!(tcp.header_len(), 40);
        assert_eq!(tcp.flags(), flags::SYN);
        assert!(tcp.syn() && !tcp.ack() && !tcp.fin() && !tcp.rst());
        assert_eq!(
            (tcp.window(), tcp.checksum(), tcp.urgent()),
            (64240, 0x3d78, 0)
        );
        assert_eq!(tcp.options().len(), 20);
        assert_eq!(tcp.mss(), Some(1460));
        assert!(tcp.payload().is_empty());
        assert!(tcp.verify_checksum_v4(ip.src_addr(), ip.dst_addr()));

        let bytes = hex(V6_ODD);
        let ip = Ipv6Packet::new_checked(&bytes[..]).unwrap();
        let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!(tcp.payload(), b"syn-data");
        assert_eq!(tcp.mss(), Some(9000));
        assert!(tcp.verify_checksum_v6(ip.src_addr(), ip.dst_addr()));
        assert!(!tcp.verify_checksum_v6(ip.src_addr(), Ipv6Addr::LOCALHOST));
        let synack = hex(V6_SYNACK);
        let tcp = TcpPacket::new_checked(&synack[40..]).unwrap();
        assert!(tcp.syn() && tcp.ack());
        assert_eq!(tcp.ack_number(), 1001);
    }

    #[test]
    fn fill_checksum_gives_scapys() {
        for (pkt, _, _) in V4_CASES {
            let mut bytes = hex(pkt);
            let ip = Ipv4Packet::new_checked(&bytes[..]).unwrap();
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            let mut tcp = TcpPacket::new_checked(&mut bytes[20..]).unwrap();
            tcp.set_checksum(0x1234);
            assert!(!tcp.verify_checksum_v4(src, dst));
            tcp.fill_checksum_v4(src, dst);
            assert_eq!(bytes, hex(pkt));
        }
        for (pkt, _, _) in V6_CASES {
            let mut bytes = hex(pkt);
            let ip = Ipv6Packet::new_checked(&bytes[..]).unwrap();
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            let mut tcp = TcpPacket::new_checked(&mut bytes[40..]).unwrap();
            tcp.set_checksum(0);
            tcp.fill_checksum_v6(src, dst);
            assert_eq!(bytes, hex(pkt));
        }
    }

    #[test]
    fn clamp_matches_scapy_at_every_option_position() {
        for (ip_len, cases) in [(20, &V4_CASES[..]), (40, &V6_CASES[..])] {
            for &(pkt, clamped, old) in cases {
                let mut bytes = hex(pkt);
                let mut tcp = TcpPacket::new_checked(&mut bytes[ip_len..]).unwrap();
                assert_eq!(tcp.clamp_mss(1300), Some((old, 1300)), "{pkt}");
                assert_eq!(bytes, hex(clamped), "{pkt}");
            }
        }
    }

    #[test]
    fn clamp_leaves_small_mss_and_non_syn_alone() {
        let mut bytes = hex(V4_LINUX);
        for max in [1460, 1461, u16::MAX] {
            assert_eq!(
                TcpPacket::new_checked(&mut bytes[20..])
                    .unwrap()
                    .clamp_mss(max),
                None
            );
        }
        assert_eq!(bytes, hex(V4_LINUX));
        // The same segment without SYN (an ACK carrying an MSS option, which
        // no stack sends): not ours to touch.
        bytes[20 + 13] = flags::ACK;
        let before = bytes.clone();
        assert_eq!(
            TcpPacket::new_checked(&mut bytes[20..])
                .unwrap()
                .clamp_mss(536),
            None
        );
        assert_eq!(bytes, before);
    }

    #[test]
    fn clamp_leaves_malformed_options_alone() {
        // V4_LINUX's options start at byte 40 of the packet: MSS, SAckOK,
        // Timestamp, NOP, WScale. Break them one way at a time.
        let breakages: [(usize, u8); 4] = [
            (40 + 5, 0),   // SAckOK length 0
            (40 + 5, 1),   // SAckOK length 1
            (40 + 7, 200), // Timestamp length past the header
            (40 + 1, 6),   // MSS length not 4
        ];
        for (at, v) in breakages {
            let mut bytes = hex(V4_LINUX);
            bytes[at] = v;
            let before = bytes.clone();
            let mut tcp = TcpPacket::new_checked(&mut bytes[20..]).unwrap();
            assert_eq!(tcp.mss(), None, "byte {at} = {v}");
            assert_eq!(tcp.clamp_mss(536), None, "byte {at} = {v}");
            assert_eq!(bytes, before);
        }
        // The last option cut in half by the header's end: WScale's kind is
        // the header's last byte once its length byte is made a kind.
        let mut bytes = hex(V4_LINUX);
        bytes[57..60].copy_from_slice(&[1, 1, 3]);
        assert_eq!(
            TcpPacket::new_checked(&mut bytes[20..])
                .unwrap()
                .clamp_mss(536),
            None
        );
        // After End of Option List nothing is read: an MSS behind it is not one.
        let mut bytes = hex(V4_ODD);
        bytes[40] = option::END;
        assert_eq!(
            TcpPacket::new_checked(&mut bytes[20..])
                .unwrap()
                .clamp_mss(536),
            None
        );
    }

    #[test]
    fn two_mss_options_are_both_lowered() {
        // V4_LINUX with its Timestamp (10 bytes at option offset 6) replaced
        // by NOP, MSS 9000, NOP x5; checksum filled, then clamped.
        let mut bytes = hex(V4_LINUX);
        bytes[46..56].copy_from_slice(&[1, 2, 4, 0x23, 0x28, 1, 1, 1, 1, 1]);
        let ip = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        TcpPacket::new_checked(&mut bytes[20..])
            .unwrap()
            .fill_checksum_v4(src, dst);
        let mut tcp = TcpPacket::new_checked(&mut bytes[20..]).unwrap();
        assert_eq!(tcp.clamp_mss(1000), Some((1460, 1000)));
        assert!(tcp.verify_checksum_v4(src, dst));
        assert_eq!(&bytes[42..44], &1000u16.to_be_bytes());
        assert_eq!(&bytes[49..51], &1000u16.to_be_bytes());
    }

    #[test]
    fn truncations_rejected() {
        let bytes = hex(V4_LINUX);
        assert_prefixes_rejected(&bytes[20..60], |b| TcpPacket::new_checked(b).map(|_| ()));
        let mut bad = bytes[20..].to_vec();
        bad[12] = 0x40; // data offset 4 words: under the fixed header
        assert_eq!(TcpPacket::new_checked(&bad[..]), Err(Error::Malformed));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..80),
                                       max in any::<u16>()) {
            let mut d = data.clone();
            if let Ok(mut tcp) = TcpPacket::new_checked(&mut d[..]) {
                let _ = (tcp.src_port(), tcp.dst_port(), tcp.seq_number(), tcp.ack_number());
                let _ = (tcp.flags(), tcp.window(), tcp.urgent(), tcp.options().len());
                let _ = (tcp.payload().len(), tcp.mss());
                let _ = tcp.verify_checksum_v4(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST);
                let _ = tcp.verify_checksum_v6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST);
                let _ = tcp.clamp_mss(max);
            }
        }

        /// A valid SYN with arbitrary options and payload: clamping keeps the
        /// checksum valid, and lowers exactly what `mss()` read above `max`.
        #[test]
        fn clamp_keeps_checksum_valid(opts in proptest::collection::vec(any::<u8>(), 0..41),
                                      mss_pos in 0usize..37, mss in any::<u16>(),
                                      payload in proptest::collection::vec(any::<u8>(), 0..9),
                                      max in any::<u16>(), v6 in any::<bool>()) {
            let mut opts = opts;
            opts.truncate(40);
            // Plant a well-formed MSS option somewhere half of the time.
            if mss_pos + 4 <= opts.len() && mss_pos.is_multiple_of(2) {
                opts[mss_pos..mss_pos + 4].copy_from_slice(&[2, 4, (mss >> 8) as u8, mss as u8]);
            }
            while opts.len() % 4 != 0 {
                opts.push(option::NOP);
            }
            let mut seg = hex(V4_MSS_ONLY)[20..40].to_vec();
            seg[12] = (((HEADER_LEN + opts.len()) / 4) as u8) << 4;
            seg.extend_from_slice(&opts);
            seg.extend_from_slice(&payload);
            let (s4, d4) = (Ipv4Addr::new(10, 1, 0, 10), Ipv4Addr::new(10, 2, 0, 10));
            let (s6, d6) = (Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 0x10), Ipv6Addr::LOCALHOST);
            let mut tcp = TcpPacket::new_checked(&mut seg[..]).unwrap();
            if v6 { tcp.fill_checksum_v6(s6, d6) } else { tcp.fill_checksum_v4(s4, d4) }
            let before = tcp.mss();
            let result = tcp.clamp_mss(max);
            let valid = if v6 { tcp.verify_checksum_v6(s6, d6) } else { tcp.verify_checksum_v4(s4, d4) };
            prop_assert!(valid);
            match (before, result) {
                // The first MSS option is at or below max afterwards (a
                // later one may have been the one lowered).
                (Some(_), Some((o, n))) => prop_assert!(o > max && n == max && tcp.mss() <= Some(max)),
                (Some(old), None) => prop_assert!(old <= max && tcp.mss() == Some(old)),
                (None, r) => prop_assert_eq!(r, None),
            }
        }
    }
}
