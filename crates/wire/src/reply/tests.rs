//! The reply builders against packets scapy builds (tools/gen_vectors.py).

use super::*;
use crate::testutil::hex;
use crate::{ip_protocol, Error, MacAddr, PacketBuf, VecBuf};
use crate::{Icmpv4Packet, Icmpv6Packet, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr};
use core::net::{Ipv4Addr, Ipv6Addr};

fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}
fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

// scapy: IP(src="192.0.2.1", dst="198.51.100.7", id=1, flags="DF")/UDP(sport=1111, dport=2222)/(b"y"*30)
// (tools/gen_vectors.py inner4)
const INNER4: &str = "4500003a0001400040114e76c0000201c6336407045708ae0026e842797979797979797979797979797979797979797979797979797979797979";
// scapy: IP(src="192.0.2.254", dst="192.0.2.1", ttl=64, id=0)/ICMP(type=3, code=4, nexthopmtu=1400)/bytes(inner4)[:28]
// (ipv4_icmp_frag_needed)
const FRAG_NEEDED_28: &str = "45000038000000004001f5c5c00002fec000020103040216000005784500003a0001400040114e76c0000201c6336407045708ae0026e842";
// scapy: the same quoting all of inner4 (ipv4_frag_needed_full_quote)
const FRAG_NEEDED_FULL: &str = "45000056000000004001f5a7c00002fec00002010304e3f7000005784500003a0001400040114e76c0000201c6336407045708ae0026e842797979797979797979797979797979797979797979797979797979797979";
// scapy: same as FRAG_NEEDED_28 with ICMP(type=11, code=0) (ipv4_icmp_time_exceeded)
const TIME_EXCEEDED_28: &str = "45000038000000004001f5c5c00002fec00002010b00ff91000000004500003a0001400040114e76c0000201c6336407045708ae0026e842";
// scapy: IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=1, dport=2)/(b"x"*20) (inner6)
const INNER6: &str = "60000000001c114020010db800000000000000000000000120010db800000000000000000000000200010002001cef897878787878787878787878787878787878787878";
// scapy: IPv6(src="2001:db8::fe", dst="2001:db8::1", hlim=64)/ICMPv6PacketTooBig(mtu=1400)/inner6 (ipv6_icmpv6_ptb)
const PTB: &str = "60000000004c3a4020010db80000000000000000000000fe20010db800000000000000000000000102002a610000057860000000001c114020010db800000000000000000000000120010db800000000000000000000000200010002001cef897878787878787878787878787878787878787878";
// scapy: same with ICMPv6TimeExceeded(code=0) (ipv6_icmpv6_time_exceeded)
const TIME_EXCEEDED6: &str = "60000000004c3a4020010db80000000000000000000000fe20010db800000000000000000000000103002ed90000000060000000001c114020010db800000000000000000000000120010db800000000000000000000000200010002001cef897878787878787878787878787878787878787878";
// scapy: echo request (eth_ipv4_icmp_echo, IPv4 part) and the reply scapy builds (ipv4_echo_reply)
const ECHO4: &str = "45000026123440004001a49fc0000201c0000202080089dd4242000765737067772d70696e67";
const ECHO4_REPLY: &str =
    "45000026123440004001a49fc0000202c0000201000091dd4242000765737067772d70696e67";
// scapy: ipv6_icmpv6_echo and ipv6_echo_reply
const ECHO6: &str = "60000000000d3a40fe800000000000000000000000000001fe80000000000000000000000000000280006d680077000370696e6736";
const ECHO6_REPLY: &str = "60000000000d3a40fe800000000000000000000000000002fe80000000000000000000000000000181006c680077000370696e6736";
// scapy: DAD probe IPv6(src="::", dst="ff02::1:ff00:2", hlim=255)/ICMPv6ND_NS(tgt="fe80::2") (ipv6_dad_ns)
// and the answer IPv6(src="fe80::2", dst="ff02::1", hlim=255)/ICMPv6ND_NA(tgt="fe80::2", S=0, O=1)/TLLA (ipv6_dad_na)
const DAD_NS: &str = "6000000000183aff00000000000000000000000000000000ff0200000000000000000001ff00000287007c2300000000fe800000000000000000000000000002";
const DAD_NA: &str = "6000000000203afffe800000000000000000000000000002ff0200000000000000000000000000018800579820000000fe8000000000000000000000000000020201020000000002";
// scapy: ARP request/reply (arp_request, arp_reply) inside Ether(dst=broadcast / 02:..:01)
const ARP_REQ: &str = "0001080006040001020000000001c0000201000000000000c0000202";
const ARP_REPLY: &str = "0001080006040002020000000002c0000202020000000001c0000201";
const MAC2: MacAddr = [2, 0, 0, 0, 0, 2];

#[test]
fn frag_needed_matches_scapy() {
    let orig = hex(INNER4);
    // Room for exactly header + 8 bytes: RFC 792 quoting.
    let mut out = [0u8; 56];
    let n = emit_icmpv4_frag_needed(&orig, 1400, v4("192.0.2.254"), &mut out).unwrap();
    assert_eq!(out[..n].to_vec(), hex(FRAG_NEEDED_28));
    // Plenty of room: RFC 1812 quotes the whole (short) original.
    let mut out = [0u8; 1500];
    let n = emit_icmpv4_frag_needed(&orig, 1400, v4("192.0.2.254"), &mut out).unwrap();
    assert_eq!(out[..n].to_vec(), hex(FRAG_NEEDED_FULL));
    // Too little room for header + 8 bytes.
    assert_eq!(
        emit_icmpv4_frag_needed(&orig, 1400, v4("192.0.2.254"), &mut out[..55]),
        Err(Error::NoRoom)
    );
}

#[test]
fn icmpv4_error_capped_at_576_bytes() {
    let mut big = vec![0u8; 1400];
    Ipv4Repr {
        src_addr: v4("192.0.2.1"),
        dst_addr: v4("198.51.100.7"),
        protocol: ip_protocol::UDP,
        payload_len: 1380,
        ttl: 1,
        dscp_ecn: 0,
        ident: 9,
        dont_frag: true,
    }
    .emit(&mut big)
    .unwrap();
    let mut out = [0u8; 1500];
    let n = emit_icmpv4_time_exceeded(&big, v4("192.0.2.254"), &mut out).unwrap();
    assert_eq!(n, 576);
    let ip = Ipv4Packet::new_checked(&out[..n]).unwrap();
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert!(ip.verify_checksum() && icmp.verify_checksum());
    assert_eq!(icmp.data(), &big[..548]);
}

#[test]
fn time_exceeded_matches_scapy() {
    let mut out = [0u8; 56];
    let n = emit_icmpv4_time_exceeded(&hex(INNER4), v4("192.0.2.254"), &mut out).unwrap();
    assert_eq!(out[..n].to_vec(), hex(TIME_EXCEEDED_28));
}

#[test]
fn icmpv4_errors_suppressed_when_rfc1812_says_so() {
    let src = v4("192.0.2.254");
    let mut out = [0u8; 600];
    // About an ICMP error.
    let icmp_err = hex(TIME_EXCEEDED_28);
    assert_eq!(
        emit_icmpv4_time_exceeded(&icmp_err, src, &mut out),
        Err(Error::Suppressed)
    );
    // About an echo request: allowed.
    assert!(emit_icmpv4_time_exceeded(&hex(ECHO4), src, &mut out).is_ok());
    // Non-first fragment, multicast destination, broadcast source.
    let patches: [fn(&mut Ipv4Packet<&mut [u8]>); 4] = [
        |p| p.set_ident(1), // control: still allowed
        |p| p.set_dst_addr(Ipv4Addr::new(224, 0, 0, 5)),
        |p| p.set_src_addr(Ipv4Addr::BROADCAST),
        |p| p.set_frag(false, false, 8),
    ];
    for (i, patch) in patches.iter().enumerate() {
        let mut orig = hex(INNER4);
        let mut p = Ipv4Packet::new_checked(&mut orig[..]).unwrap();
        patch(&mut p);
        p.fill_checksum();
        let r = emit_icmpv4_time_exceeded(&orig, src, &mut out);
        assert_eq!(r.is_ok(), i == 0, "case {i}: {r:?}");
    }
}

#[test]
fn packet_too_big_matches_scapy() {
    let mut out = [0u8; 1500];
    let n = emit_icmpv6_packet_too_big(&hex(INNER6), 1400, v6("2001:db8::fe"), &mut out).unwrap();
    assert_eq!(out[..n].to_vec(), hex(PTB));
    let n = emit_icmpv6_time_exceeded(&hex(INNER6), v6("2001:db8::fe"), &mut out).unwrap();
    assert_eq!(out[..n].to_vec(), hex(TIME_EXCEEDED6));
}

#[test]
fn packet_too_big_fits_in_1280() {
    let mut big = vec![0x77u8; 1500];
    Ipv6Repr {
        src_addr: v6("2001:db8::1"),
        dst_addr: v6("ff0e::1"),
        next_header: ip_protocol::UDP,
        payload_len: 1460,
        hop_limit: 1,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut big)
    .unwrap();
    let mut out = [0u8; 2000];
    let n = emit_icmpv6_packet_too_big(&big, 1400, v6("2001:db8::fe"), &mut out).unwrap();
    assert_eq!(n, 1280);
    let ip = Ipv6Packet::new_checked(&out[..n]).unwrap();
    let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum(ip.src_addr(), ip.dst_addr()));
    assert_eq!(icmp.mtu(), 1400);
    assert_eq!(icmp.data(), &big[..1232]);
    // Multicast destination: PTB allowed, time exceeded not.
    assert_eq!(
        emit_icmpv6_time_exceeded(&big, v6("2001:db8::fe"), &mut out),
        Err(Error::Suppressed)
    );
    // Never about an ICMPv6 error.
    assert_eq!(
        emit_icmpv6_time_exceeded(&hex(PTB), v6("2001:db8::fe"), &mut out),
        Err(Error::Suppressed)
    );
}

#[test]
fn echo_replies_in_place_match_scapy() {
    let mut p = hex(ECHO4);
    assert_eq!(icmpv4_echo_reply_in_place(&mut p), Ok(p.len()));
    assert_eq!(p, hex(ECHO4_REPLY));
    // A reply is not answered.
    assert_eq!(icmpv4_echo_reply_in_place(&mut p), Err(Error::Unsupported));

    let mut p = hex(ECHO6);
    assert_eq!(icmpv6_echo_reply_in_place(&mut p), Ok(p.len()));
    assert_eq!(p, hex(ECHO6_REPLY));
    assert_eq!(icmpv6_echo_reply_in_place(&mut p), Err(Error::Unsupported));
}

#[test]
fn echo_reply_rejects_corrupt_request() {
    let mut p = hex(ECHO4);
    p[30] ^= 1;
    assert_eq!(icmpv4_echo_reply_in_place(&mut p), Err(Error::Checksum));
    let mut p = hex(ECHO6);
    p[50] ^= 1;
    assert_eq!(icmpv6_echo_reply_in_place(&mut p), Err(Error::Checksum));
}

#[test]
fn neighbor_advert_answers_scapy_ns() {
    let mut out = [0u8; 100];
    let ns = hex(crate::icmpv6::tests::NS);
    let n = neighbor_advert_reply(&ns, v6("fe80::2"), MAC2, &mut out).unwrap();
    assert_eq!(out[..n].to_vec(), hex(crate::icmpv6::tests::NA));
    assert_eq!(
        neighbor_advert_reply(&ns, v6("fe80::3"), MAC2, &mut out),
        Err(Error::Suppressed)
    );
    let n = neighbor_advert_reply(&hex(DAD_NS), v6("fe80::2"), MAC2, &mut out).unwrap();
    assert_eq!(out[..n].to_vec(), hex(DAD_NA));
    // Hop limit other than 255: forged off-link, ignored (RFC 4861 7.1.1).
    let mut off_link = ns.clone();
    off_link[7] = 254;
    assert_eq!(
        neighbor_advert_reply(&off_link, v6("fe80::2"), MAC2, &mut out),
        Err(Error::Malformed)
    );
    assert_eq!(
        neighbor_advert_reply(&ns, v6("fe80::2"), MAC2, &mut out[..71]),
        Err(Error::NoRoom)
    );
}

#[test]
fn neighbor_solicit_matches_scapy() {
    let mut out = [0u8; 100];
    let n =
        emit_neighbor_solicit(v6("fe80::1"), v6("fe80::2"), [2, 0, 0, 0, 0, 1], &mut out).unwrap();
    assert_eq!(out[..n].to_vec(), hex(crate::icmpv6::tests::NS));
}

#[test]
fn arp_reply_in_place_rewrites_frame() {
    let eth = |dst: &str, src: &str, body: &str| hex(&format!("{dst}{src}0806{body}"));
    let mut frame = eth("ffffffffffff", "020000000001", ARP_REQ);
    let our_ip = v4("192.0.2.2");
    assert_eq!(arp_reply_in_place(&mut frame, our_ip, MAC2), Ok(42));
    assert_eq!(frame, eth("020000000001", "020000000002", ARP_REPLY));
    // Padded far past the body: the reply is a minimum-size frame.
    let mut padded = eth("ffffffffffff", "020000000001", ARP_REQ);
    padded.resize(1886, 0);
    assert_eq!(arp_reply_in_place(&mut padded, our_ip, MAC2), Ok(60));
    assert_eq!(
        padded[..42],
        eth("020000000001", "020000000002", ARP_REPLY)[..]
    );
    let mut other = eth("ffffffffffff", "020000000001", ARP_REQ);
    assert_eq!(
        arp_reply_in_place(&mut other, v4("192.0.2.9"), MAC2),
        Err(Error::Suppressed)
    );
}

#[test]
fn errors_built_in_buf_match_scapy() {
    // The PacketBuf forms: the offending packet becomes the error quoting it.
    let mut buf = VecBuf::from_packet(&hex(INNER4));
    icmpv4_frag_needed_in_buf(&mut buf, 1400, v4("192.0.2.254")).unwrap();
    assert_eq!(buf.data(), &hex(FRAG_NEEDED_FULL)[..]);

    let mut buf = VecBuf::from_packet(&hex(INNER4));
    icmpv4_time_exceeded_in_buf(&mut buf, v4("192.0.2.254")).unwrap();
    let mut out = [0u8; 1500];
    let n = emit_icmpv4_time_exceeded(&hex(INNER4), v4("192.0.2.254"), &mut out).unwrap();
    assert_eq!(buf.data(), &out[..n]);

    let mut buf = VecBuf::from_packet(&hex(INNER6));
    icmpv6_packet_too_big_in_buf(&mut buf, 1400, v6("2001:db8::fe")).unwrap();
    assert_eq!(buf.data(), &hex(PTB)[..]);

    let mut buf = VecBuf::from_packet(&hex(INNER6));
    icmpv6_time_exceeded_in_buf(&mut buf, v6("2001:db8::fe")).unwrap();
    assert_eq!(buf.data(), &hex(TIME_EXCEEDED6)[..]);
}

#[test]
fn in_buf_trims_to_limits_and_leaves_buf_alone_on_error() {
    // 1500-byte IPv6 packet: the error must be exactly 1280 bytes.
    let mut big = vec![0x55u8; 1500];
    Ipv6Repr {
        src_addr: v6("2001:db8::1"),
        dst_addr: v6("2001:db8::2"),
        next_header: ip_protocol::UDP,
        payload_len: 1460,
        hop_limit: 1,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut big)
    .unwrap();
    let mut buf = VecBuf::from_packet(&big);
    icmpv6_packet_too_big_in_buf(&mut buf, 1280, v6("2001:db8::fe")).unwrap();
    assert_eq!(buf.len(), 1280);
    assert_eq!(&buf.data()[48..], &big[..1232]);

    // No headroom: NoRoom, and the packet is as it was.
    let mut tight = VecBuf::with_room(&hex(INNER4), 27, 0);
    assert_eq!(
        icmpv4_frag_needed_in_buf(&mut tight, 1400, v4("192.0.2.254")),
        Err(Error::NoRoom)
    );
    assert_eq!(tight.data(), &hex(INNER4)[..]);
    // Suppressed: about an ICMP error.
    let mut err = VecBuf::from_packet(&hex(TIME_EXCEEDED_28));
    assert_eq!(
        icmpv4_time_exceeded_in_buf(&mut err, v4("192.0.2.254")),
        Err(Error::Suppressed)
    );
    assert_eq!(err.data(), &hex(TIME_EXCEEDED_28)[..]);
}

#[test]
fn neighbor_advert_in_buf_matches_scapy() {
    // NS with source link-layer option: same length as the NA.
    let mut buf = VecBuf::from_packet(&hex(crate::icmpv6::tests::NS));
    neighbor_advert_in_buf(&mut buf, v6("fe80::2"), MAC2).unwrap();
    assert_eq!(buf.data(), &hex(crate::icmpv6::tests::NA)[..]);
    // DAD probe is 8 bytes shorter than its answer: the buffer grows.
    let mut buf = VecBuf::from_packet(&hex(DAD_NS));
    neighbor_advert_in_buf(&mut buf, v6("fe80::2"), MAC2).unwrap();
    assert_eq!(buf.data(), &hex(DAD_NA)[..]);
    // No tailroom to grow: NoRoom, untouched.
    let mut tight = VecBuf::with_room(&hex(DAD_NS), 0, 7);
    assert_eq!(
        neighbor_advert_in_buf(&mut tight, v6("fe80::2"), MAC2),
        Err(Error::NoRoom)
    );
    assert_eq!(tight.data(), &hex(DAD_NS)[..]);
}
