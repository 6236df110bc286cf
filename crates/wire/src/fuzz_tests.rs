//! Property tests: arbitrary bytes never panic a constructor, accessor,
//! parser or builder. (They can fail: any panic fails the test.)

use crate::*;
use core::net::{Ipv4Addr, Ipv6Addr};
use proptest::prelude::*;

const V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 254);
const V6: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2);

fn poke_all(b: &[u8]) {
    if let Ok(f) = EthernetFrame::new_checked(b) {
        let _ = (
            f.dst_addr(),
            f.src_addr(),
            f.vlan_id(),
            f.ethertype(),
            f.payload().len(),
        );
        let _ = EthernetRepr::parse(&f);
    }
    if let Ok(p) = ArpPacket::new_checked(b) {
        let _ = (
            p.operation(),
            p.sender_mac(),
            p.sender_ip(),
            p.target_mac(),
            p.target_ip(),
        );
        let _ = ArpRepr::parse(&p);
    }
    if let Ok(p) = Ipv4Packet::new_checked(b) {
        let _ = (
            p.header_len(),
            p.total_len(),
            p.ident(),
            p.dont_frag(),
            p.more_frags(),
        );
        let _ = (
            p.frag_offset(),
            p.ttl(),
            p.protocol(),
            p.src_addr(),
            p.dst_addr(),
        );
        let _ = (p.options().len(), p.payload().len(), p.verify_checksum());
        let _ = Ipv4Repr::parse(&p);
    }
    if let Ok(p) = Ipv6Packet::new_checked(b) {
        let _ = (
            p.traffic_class(),
            p.flow_label(),
            p.payload_len(),
            p.next_header(),
        );
        let _ = (p.hop_limit(), p.src_addr(), p.dst_addr(), p.payload().len());
        let _ = Ipv6Repr::parse(&p);
        if let Ok((_, off)) = p.upper_layer() {
            assert!(off <= p.packet().len());
        }
    }
    let _ = ipv6::upper_layer(b);
    if let Ok(p) = UdpPacket::new_checked(b) {
        let _ = (p.src_port(), p.dst_port(), p.len(), p.payload().len());
        let _ = (p.verify_checksum_v4(V4, V4), p.verify_checksum_v6(V6, V6));
        let _ = UdpRepr::parse(&p);
    }
    if let Ok(p) = Icmpv4Packet::new_checked(b) {
        let _ = (
            p.msg_type(),
            p.code(),
            p.echo_ident(),
            p.echo_seq(),
            p.next_hop_mtu(),
        );
        let _ = Icmpv4Repr::parse(&p);
    }
    if let Ok(p) = Icmpv6Packet::new_checked(b) {
        let _ = (
            p.msg_type(),
            p.code(),
            p.mtu(),
            p.na_flags(),
            p.target_addr(),
        );
        let _ = Icmpv6Repr::parse(&p, V6, V6);
    }
    if let Ok(p) = EspPacket::new_checked(b) {
        let _ = (p.spi(), p.seq(), p.payload().len());
    }
    let _ = classify_udp_encap(b);
}

fn build_all(b: &[u8]) {
    for out_len in [0usize, 30, 56, 200, 1500] {
        let mut out = vec![0u8; out_len];
        if let Ok(n) = reply::emit_icmpv4_frag_needed(b, 1400, V4, &mut out) {
            let ip = Ipv4Packet::new_checked(&out[..n]).unwrap();
            assert!(ip.verify_checksum() && n <= reply::ICMPV4_ERROR_MAX_LEN);
        }
        let _ = reply::emit_icmpv4_time_exceeded(b, V4, &mut out);
        if let Ok(n) = reply::emit_icmpv6_packet_too_big(b, 1280, V6, &mut out) {
            assert!(n <= icmpv6::MIN_MTU);
        }
        let _ = reply::emit_icmpv6_time_exceeded(b, V6, &mut out);
        let _ = reply::neighbor_advert_reply(b, V6, [2; 6], &mut out);
    }
    for headroom in [0usize, 47, 48, 128] {
        let mut buf = VecBuf::with_room(b, headroom, 0);
        if reply::icmpv4_frag_needed_in_buf(&mut buf, 1400, V4).is_ok() {
            assert!(buf.len() <= reply::ICMPV4_ERROR_MAX_LEN);
        } else {
            assert_eq!(buf.data(), b, "unchanged on error");
        }
        let mut buf = VecBuf::with_room(b, headroom, 0);
        if reply::icmpv6_packet_too_big_in_buf(&mut buf, 1280, V6).is_ok() {
            assert!(buf.len() <= icmpv6::MIN_MTU);
        } else {
            assert_eq!(buf.data(), b, "unchanged on error");
        }
        let _ = reply::icmpv4_time_exceeded_in_buf(&mut VecBuf::with_room(b, headroom, 0), V4);
        let _ = reply::icmpv6_time_exceeded_in_buf(&mut VecBuf::with_room(b, headroom, 0), V6);
        let mut buf = VecBuf::with_room(b, 0, headroom);
        if reply::neighbor_advert_in_buf(&mut buf, V6, [2; 6]).is_err() {
            assert_eq!(buf.data(), b, "unchanged on error");
        }
    }
    let _ = reply::icmpv4_echo_reply_in_place(&mut b.to_vec());
    let _ = reply::icmpv6_echo_reply_in_place(&mut b.to_vec());
    let _ = reply::arp_reply_in_place(&mut b.to_vec(), V4, [2; 6]);
}

/// Bytes that often start with a plausible IPv4 or IPv6 header, so the
/// deeper code paths get exercised too.
fn packetish() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(vec![0x45u8, 0x46, 0x4f, 0x60, 0x00, 0xff]),
        prop::collection::vec(any::<u8>(), 0..200),
    )
        .prop_map(|(first, mut rest)| {
            rest.insert(0, first);
            rest
        })
}

/// Setters that change length fields must not make later accessors panic.
fn bad_setters(b: &[u8], v: u16) {
    let mut b = b.to_vec();
    if let Ok(mut p) = Ipv4Packet::new_checked(&mut b[..]) {
        p.set_total_len(v);
        let _ = (p.payload().len(), p.payload_mut().len(), p.packet().len());
    }
    if let Ok(mut p) = Ipv6Packet::new_checked(&mut b[..]) {
        p.set_payload_len(v);
        let _ = (p.payload().len(), p.payload_mut().len(), p.upper_layer());
    }
    if let Ok(mut p) = Icmpv6Packet::new_checked(&mut b[..]) {
        p.set_msg_type(icmpv6::msg_type::NEIGHBOR_SOLICIT);
        let _ = p.target_addr();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..200)) {
        poke_all(&b);
        build_all(&b);
    }

    #[test]
    fn packetish_bytes_never_panic(b in packetish()) {
        poke_all(&b);
        poke_all(b.get(20..).unwrap_or(&[]));
        poke_all(b.get(40..).unwrap_or(&[]));
        build_all(&b);
    }

    #[test]
    fn length_setters_never_break_accessors(b in packetish(), v in any::<u16>()) {
        bad_setters(&b, v);
    }
}
