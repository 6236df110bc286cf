//! Unit tests of the worker core with `VecBuf`: two gateways (A and B, the
//! netns demo's mirror-image configs) talk to each other in memory, and
//! every frame is checked field by field. A's encap and B's decap are the
//! same crates (espgw-esp, this worker): a round trip here shows the two
//! directions agree with each other and that headers, counters and drops
//! are right, not that the ESP is what another implementation would accept.
//! The independent peers are elsewhere: published vectors and Wycheproof
//! (crates/esp/tests), scapy and tshark (tests/e2e).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::Arc;

use espgw_control::HostFacts;
use espgw_wire::{
    arp, ethertype, icmpv4, icmpv6, ip_protocol, ArpPacket, ArpRepr, EthernetFrame, EthernetRepr,
    Icmpv4Packet, Icmpv4Repr, Icmpv6Packet, Icmpv6Repr, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr,
    MacAddr, PacketBuf, UdpRepr, VecBuf,
};

use crate::neighbor::SharedNeighbors;
use crate::network::Network;
use crate::pool::VecBufPool;
use crate::reason::DropReason;
use crate::tx::TxQueues;
use crate::worker::{Now, Worker};
use espgw_control::tables::{Tables, TunnelId};

const A_PROT_MAC: MacAddr = [2, 0xaa, 0, 0, 0, 1];
const A_UNPROT_MAC: MacAddr = [2, 0xaa, 0, 0, 0, 2];
const B_UNPROT_MAC: MacAddr = [2, 0xbb, 0, 0, 0, 2];
const B_PROT_MAC: MacAddr = [2, 0xbb, 0, 0, 0, 1];
const HOST_A_MAC: MacAddr = [2, 0, 0, 0, 0x0a, 0x0a];
const HOST_B_MAC: MacAddr = [2, 0, 0, 0, 0x0b, 0x0b];
const PROT: usize = 0;
const UNPROT: usize = 1;

fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}
fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// The SA keys of A and B (distinct: the config refuses a key used twice).
const KEY_A_TO_B: &str = "bef3215147135cd554e9156cae70f5a899331a52";
const KEY_B_TO_A: &str = "9b890a06962125b8925af8d8f76eac664799f983";

/// The demo pair's gateway (espgw_control::fixtures) on ring devices:
/// A (`b_side` false) or B, its tunnel "t" keyed with `KEY_A_TO_B` and
/// `KEY_B_TO_A`.
fn demo_gateway(b_side: bool) -> espgw_control::fixtures::GatewayToml {
    let (me, name, out_key, in_key) = if b_side {
        (2, "gw-b", KEY_B_TO_A, KEY_A_TO_B)
    } else {
        (1, "gw-a", KEY_A_TO_B, KEY_B_TO_A)
    };
    espgw_control::fixtures::GatewayToml::demo(me)
        .name(name)
        .mtu(1500)
        .devices("net_ring0", "net_ring1")
        .map_tunnels(|t| t.keys(out_key, in_key))
}

/// Gateway A (or B, mirrored) as in configs/static-a.toml / static-b.toml,
/// plus an IPv6 address on the protected port and the given extra text;
/// A protects `local_ts_a`.
fn config_text(b_side: bool, local_ts_a: &str, extra: &str) -> String {
    let me = if b_side { 2 } else { 1 };
    demo_gateway(b_side)
        .default_action("discard")
        .prot_address(&format!("fd00:{me}::1/64"))
        .map_tunnels(|mut t| {
            if !b_side {
                t.local_ts = vec![local_ts_a.to_string()];
            }
            t.replay_window(64)
        })
        .extra(extra)
        .render()
}

/// What a worker reads: the network and the control plane's snapshot.
type Snapshot = (Arc<Network>, Arc<Tables>);

fn config_of(text: String) -> espgw_control::config::Config {
    let host = HostFacts::assumed(2);
    match espgw_control::parse_str(Path::new("test.toml"), text, &host) {
        Ok((c, _)) => c,
        Err(d) => panic!("config: {d:?}"),
    }
}

fn tables_from(text: String, macs: [MacAddr; 2]) -> Snapshot {
    let config = config_of(text);
    (
        Arc::new(Network::from_config(&config, &macs).unwrap()),
        Arc::new(Tables::from_config(&config, 0).unwrap()),
    )
}

type TestWorker = Worker<VecBuf, VecBufPool>;

struct Gw {
    w: TestWorker,
    tx: TxQueues<VecBuf>,
    now: Now,
    /// Per port, the UDP checksum offload each frame of the last
    /// [`Gw::take`] asked of the NIC (`VecBuf::udp_checksum_offload`).
    offloads: [Vec<Option<(usize, usize, bool)>>; 2],
}

impl Gw {
    fn new((net, tables): Snapshot) -> Gw {
        let ports = net.ports.len();
        Gw {
            w: Worker::new(0, net, tables, VecBufPool, 32, SharedNeighbors::default()),
            tx: TxQueues::new(ports, 64),
            now: Now { ns: 1 },
            offloads: [Vec::new(), Vec::new()],
        }
    }
    fn a() -> Gw {
        Gw::new(tables_from(
            config_text(false, "10.1.0.0/24", ""),
            [A_PROT_MAC, A_UNPROT_MAC],
        ))
    }
    fn b() -> Gw {
        Gw::new(tables_from(
            config_text(true, "", ""),
            [B_PROT_MAC, B_UNPROT_MAC],
        ))
    }
    /// Feeds `frames` as one burst on `port`; returns what left each port.
    fn rx(&mut self, port: usize, frames: &[Vec<u8>]) -> [Vec<Vec<u8>>; 2] {
        let mut burst: Vec<VecBuf> = frames.iter().map(|f| VecBuf::from_packet(f)).collect();
        self.w
            .process_burst(port, &mut burst, &mut self.tx, self.now);
        self.take()
    }
    fn take(&mut self) -> [Vec<Vec<u8>>; 2] {
        let mut out: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
        for (p, o) in out.iter_mut().enumerate() {
            let frames: Vec<VecBuf> = self.tx.drain(p).collect();
            let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum();
            self.w.count_tx(p, frames.len() as u64, bytes, 0);
            *o = frames.iter().map(|f| f.data().to_vec()).collect();
            self.offloads[p] = frames.iter().map(VecBuf::udp_checksum_offload).collect();
        }
        assert!(self.w.counters().balanced(), "{:?}", self.w.counters());
        out
    }
    fn drops(&self, r: DropReason) -> u64 {
        self.w.counters().drops.get(r)
    }
    /// Teaches the gateway a neighbor the way a host does: by ARPing for it.
    fn learn_by_arp(&mut self, port: usize, host_ip: &str, host_mac: MacAddr, our_ip: &str) {
        let out = self.rx(port, &[arp_request(host_mac, v4(host_ip), v4(our_ip))]);
        assert_eq!(out[port].len(), 1, "ARP answered");
    }
}

fn eth(dst: MacAddr, src: MacAddr, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14];
    EthernetRepr {
        src_addr: src,
        dst_addr: dst,
        vlan_tci: None,
        ethertype,
    }
    .emit(&mut f)
    .unwrap();
    f.extend_from_slice(payload);
    f
}

fn arp_request(mac: MacAddr, ip: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let mut body = vec![0u8; 28];
    ArpRepr::request(mac, ip, target).emit(&mut body).unwrap();
    // Ethernet minimum frame: 18 bytes of padding after the ARP body.
    body.extend_from_slice(&[0; 18]);
    eth([0xff; 6], mac, ethertype::ARP, &body)
}

fn ipv4_packet(src: &str, dst: &str, ttl: u8, df: bool, proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 20];
    Ipv4Repr {
        src_addr: v4(src),
        dst_addr: v4(dst),
        protocol: proto,
        payload_len: payload.len() as u16,
        ttl,
        dscp_ecn: 0,
        ident: 7,
        dont_frag: df,
    }
    .emit(&mut p)
    .unwrap();
    p.extend_from_slice(payload);
    p
}

fn udp4(src: &str, dst: &str, ttl: u8, df: bool, data_len: usize) -> Vec<u8> {
    let data: Vec<u8> = (0..data_len).map(|i| i as u8).collect();
    let mut u = vec![0u8; 8 + data.len()];
    UdpRepr {
        src_port: 40000,
        dst_port: 5201,
        payload_len: data.len() as u16,
    }
    .emit(&mut u)
    .unwrap();
    u[8..].copy_from_slice(&data);
    ipv4_packet(src, dst, ttl, df, ip_protocol::UDP, &u)
}

fn echo4(src: &str, dst: &str) -> Vec<u8> {
    let icmp = Icmpv4Repr::EchoRequest {
        ident: 0x4242,
        seq_no: 7,
        data: b"espgw-ping",
    };
    let mut b = vec![0u8; icmp.buffer_len()];
    icmp.emit(&mut b).unwrap();
    ipv4_packet(src, dst, 64, true, ip_protocol::ICMP, &b)
}

fn from_host_a(ip: &[u8]) -> Vec<u8> {
    eth(A_PROT_MAC, HOST_A_MAC, ethertype::IPV4, ip)
}

/// The IPv4 packet inside an Ethernet frame, checked.
fn l3(frame: &[u8]) -> (EthernetRepr, Vec<u8>) {
    let f = EthernetFrame::new_checked(frame).unwrap();
    (EthernetRepr::parse(&f), f.payload().to_vec())
}

/// Gateway A's tables (for tests elsewhere in the crate).
pub(crate) fn gateway_a_tables() -> Arc<Tables> {
    Arc::new(Tables::from_config(&config_of(config_text(false, "10.1.0.0/24", "")), 0).unwrap())
}

/// Gateway A's ports and routes (those of [`gateway_a_tables`]).
pub(crate) fn gateway_a_net() -> Network {
    let config = config_of(config_text(false, "10.1.0.0/24", ""));
    Network::from_config(&config, &[A_PROT_MAC, A_UNPROT_MAC]).unwrap()
}

/// Gateway A's ports and routes with an IPv6 address on its unprotected
/// port (the config of [`ipv6_outer_with_udp_encapsulation_round_trips`]).
pub(crate) fn v6_gateway_net() -> Network {
    let config = config_of(v6_udp_config(false));
    Network::from_config(&config, &[A_PROT_MAC, A_UNPROT_MAC]).unwrap()
}

/// Gateway A with host A and gateway B known, ready to protect traffic.
fn ready_a() -> Gw {
    let mut a = Gw::a();
    a.learn_by_arp(PROT, "10.1.0.10", HOST_A_MAC, "10.1.0.1");
    a.learn_by_arp(UNPROT, "192.0.2.2", B_UNPROT_MAC, "192.0.2.1");
    a
}

fn ready_b() -> Gw {
    let mut b = Gw::b();
    b.learn_by_arp(PROT, "10.2.0.10", HOST_B_MAC, "10.2.0.1");
    b.learn_by_arp(UNPROT, "192.0.2.1", A_UNPROT_MAC, "192.0.2.2");
    b
}

#[test]
fn arp_request_for_our_address_gets_a_reply() {
    let mut a = Gw::a();
    let out = a.rx(
        PROT,
        &[arp_request(HOST_A_MAC, v4("10.1.0.10"), v4("10.1.0.1"))],
    );
    assert_eq!(out[PROT].len(), 1);
    assert!(out[UNPROT].is_empty());
    let (e, body) = l3(&out[PROT][0]);
    assert_eq!(
        (e.dst_addr, e.src_addr, e.ethertype),
        (HOST_A_MAC, A_PROT_MAC, ethertype::ARP)
    );
    let r = ArpRepr::parse(&ArpPacket::new_checked(&body[..]).unwrap()).unwrap();
    assert_eq!(r.operation, arp::operation::REPLY);
    assert_eq!((r.sender_mac, r.sender_ip), (A_PROT_MAC, v4("10.1.0.1")));
    assert_eq!((r.target_mac, r.target_ip), (HOST_A_MAC, v4("10.1.0.10")));
    assert_eq!(a.w.counters().local, 1);
    // For someone else's address: not answered, counted.
    let out = a.rx(
        PROT,
        &[arp_request(HOST_A_MAC, v4("10.1.0.10"), v4("10.1.0.99"))],
    );
    assert!(out[PROT].is_empty());
    assert_eq!(a.drops(DropReason::ArpIgnored), 1);
    // Asking for our unprotected address on the protected port: not ours there.
    let out = a.rx(
        PROT,
        &[arp_request(HOST_A_MAC, v4("10.1.0.10"), v4("192.0.2.1"))],
    );
    assert!(out[PROT].is_empty());
}

#[test]
fn ping_to_our_address_is_answered() {
    let mut a = Gw::a();
    a.learn_by_arp(PROT, "10.1.0.10", HOST_A_MAC, "10.1.0.1");
    let req = echo4("10.1.0.10", "10.1.0.1");
    let out = a.rx(PROT, &[from_host_a(&req)]);
    assert_eq!(out[PROT].len(), 1);
    let (e, ip) = l3(&out[PROT][0]);
    assert_eq!((e.dst_addr, e.src_addr), (HOST_A_MAC, A_PROT_MAC));
    let ip = Ipv4Packet::new_checked(&ip[..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(
        (ip.src_addr(), ip.dst_addr()),
        (v4("10.1.0.1"), v4("10.1.0.10"))
    );
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum());
    assert_eq!(
        Icmpv4Repr::parse(&icmp).unwrap(),
        Icmpv4Repr::EchoReply {
            ident: 0x4242,
            seq_no: 7,
            data: b"espgw-ping"
        }
    );
}

#[test]
fn a_neighbor_that_changes_mac_is_followed() {
    let mut a = Gw::a();
    a.learn_by_arp(PROT, "10.1.0.10", HOST_A_MAC, "10.1.0.1");
    let out = a.rx(PROT, &[from_host_a(&echo4("10.1.0.10", "10.1.0.1"))]);
    assert_eq!(l3(&out[PROT][0]).0.dst_addr, HOST_A_MAC);
    let new_mac = [2, 0, 0, 0, 0x0a, 0xff];
    a.learn_by_arp(PROT, "10.1.0.10", new_mac, "10.1.0.1");
    let out = a.rx(PROT, &[from_host_a(&echo4("10.1.0.10", "10.1.0.1"))]);
    assert_eq!(l3(&out[PROT][0]).0.dst_addr, new_mac);
}

#[test]
fn unresolved_next_hop_is_arped_and_the_packet_held_then_sent() {
    let mut a = Gw::a();
    let out = a.rx(PROT, &[from_host_a(&echo4("10.1.0.10", "10.1.0.1"))]);
    // The reply waits for host A's MAC: an ARP request goes out instead.
    assert_eq!(out[PROT].len(), 1);
    let (e, body) = l3(&out[PROT][0]);
    assert_eq!((e.dst_addr, e.ethertype), ([0xff; 6], ethertype::ARP));
    let r = ArpRepr::parse(&ArpPacket::new_checked(&body[..]).unwrap()).unwrap();
    assert_eq!(
        r,
        ArpRepr::request(A_PROT_MAC, v4("10.1.0.1"), v4("10.1.0.10"))
    );
    assert_eq!(a.w.counters().held, 1);
    // Host A answers: the held echo reply goes out.
    let mut reply = vec![0u8; 28];
    ArpRepr {
        operation: arp::operation::REPLY,
        sender_mac: HOST_A_MAC,
        sender_ip: v4("10.1.0.10"),
        target_mac: A_PROT_MAC,
        target_ip: v4("10.1.0.1"),
    }
    .emit(&mut reply)
    .unwrap();
    let out = a.rx(PROT, &[eth(A_PROT_MAC, HOST_A_MAC, ethertype::ARP, &reply)]);
    assert_eq!(out[PROT].len(), 1);
    let (e, ip) = l3(&out[PROT][0]);
    assert_eq!((e.dst_addr, e.ethertype), (HOST_A_MAC, ethertype::IPV4));
    assert_eq!(
        Ipv4Packet::new_checked(&ip[..]).unwrap().dst_addr(),
        v4("10.1.0.10")
    );
    assert_eq!(a.w.counters().held, 0);
}

#[test]
fn protected_packet_leaves_as_esp_and_the_peer_decrypts_it() {
    let mut a = ready_a();
    let mut b = ready_b();
    let inner = udp4("10.1.0.10", "10.2.0.10", 64, true, 100);
    let out = a.rx(PROT, &[from_host_a(&inner)]);
    assert!(out[PROT].is_empty());
    assert_eq!(out[UNPROT].len(), 1);
    let (e, outer) = l3(&out[UNPROT][0]);
    assert_eq!(
        (e.dst_addr, e.src_addr, e.ethertype),
        (B_UNPROT_MAC, A_UNPROT_MAC, ethertype::IPV4)
    );
    let ip = Ipv4Packet::new_checked(&outer[..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(
        (ip.src_addr(), ip.dst_addr(), ip.protocol()),
        (v4("192.0.2.1"), v4("192.0.2.2"), ip_protocol::ESP)
    );
    assert_eq!(&ip.payload()[..4], &0xa001u32.to_be_bytes());
    assert_eq!(&ip.payload()[4..8], &1u32.to_be_bytes());
    // The plaintext is nowhere in the ESP packet.
    let needle = &inner[28..60];
    assert!(!outer.windows(needle.len()).any(|w| w == needle));

    // Gateway B decrypts it and forwards the inner packet to host B.
    let out = b.rx(UNPROT, &[out[UNPROT][0].clone()]);
    assert_eq!(out[PROT].len(), 1);
    assert!(out[UNPROT].is_empty());
    let (e, got) = l3(&out[PROT][0]);
    assert_eq!((e.dst_addr, e.src_addr), (HOST_B_MAC, B_PROT_MAC));
    // Identical but for the TTL, decremented once per gateway.
    let mut expect = inner.clone();
    {
        let mut p = Ipv4Packet::new_checked(&mut expect[..]).unwrap();
        p.set_ttl(62);
        p.fill_checksum();
    }
    assert_eq!(got, expect);
    let (_, _, sa) = b.w.tables().inbound_sas()[0];
    assert_eq!(sa.stats().packets, 1);
    let out = a.w.tables().outbound_sa(TunnelId(0)).unwrap();
    assert_eq!(out.stats().packets, 1);
}

#[test]
fn ping_and_traceroute_through_the_tunnel_to_the_far_gateway() {
    let mut a = ready_a();
    let mut b = ready_b();
    // Host A pings gateway B's protected address: the request and the
    // reply both travel as ESP.
    let req = echo4("10.1.0.10", "10.2.0.1");
    let esp = a.rx(PROT, &[from_host_a(&req)]);
    let back = b.rx(UNPROT, &esp[UNPROT]);
    assert!(back[PROT].is_empty());
    assert_eq!(back[UNPROT].len(), 1);
    let (_, outer) = l3(&back[UNPROT][0]);
    assert_eq!(
        Ipv4Packet::new_checked(&outer[..]).unwrap().protocol(),
        ip_protocol::ESP
    );
    let out = a.rx(UNPROT, &back[UNPROT]);
    assert_eq!(out[PROT].len(), 1);
    let (_, ip) = l3(&out[PROT][0]);
    let ip = Ipv4Packet::new_checked(&ip[..]).unwrap();
    assert_eq!(
        (ip.src_addr(), ip.dst_addr()),
        (v4("10.2.0.1"), v4("10.1.0.10"))
    );
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert_eq!(icmp.msg_type(), icmpv4::msg_type::ECHO_REPLY);

    // TTL 2 from host A: 1 after gateway A, so gateway B answers with
    // time exceeded from 10.2.0.1, through the tunnel.
    let esp = a.rx(
        PROT,
        &[from_host_a(&udp4("10.1.0.10", "10.2.0.10", 2, true, 20))],
    );
    let back = b.rx(UNPROT, &esp[UNPROT]);
    assert_eq!(b.drops(DropReason::TtlExceeded), 1);
    assert!(back[PROT].is_empty());
    let out = a.rx(UNPROT, &back[UNPROT]);
    let (_, ip) = l3(&out[PROT][0]);
    let ip = Ipv4Packet::new_checked(&ip[..]).unwrap();
    assert_eq!(ip.src_addr(), v4("10.2.0.1"));
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert_eq!(icmp.msg_type(), icmpv4::msg_type::TIME_EXCEEDED);
}

#[test]
fn too_big_for_the_far_side_gets_frag_needed_back_through_the_tunnel() {
    // A's outer path allows 9000 bytes, B's links 1500: a 2000-byte DF
    // packet crosses the tunnel, then B answers with B's MTU via the tunnel.
    let big_a = config_text(false, "10.1.0.0/24", "").replace("mtu = 1500", "mtu = 9000");
    let mut a = Gw::new(tables_from(big_a, [A_PROT_MAC, A_UNPROT_MAC]));
    a.learn_by_arp(PROT, "10.1.0.10", HOST_A_MAC, "10.1.0.1");
    a.learn_by_arp(UNPROT, "192.0.2.2", B_UNPROT_MAC, "192.0.2.1");
    let mut b = ready_b();
    let esp = a.rx(
        PROT,
        &[from_host_a(&udp4(
            "10.1.0.10",
            "10.2.0.10",
            64,
            true,
            2000 - 28,
        ))],
    );
    assert_eq!(esp[UNPROT].len(), 1);
    let back = b.rx(UNPROT, &esp[UNPROT]);
    assert_eq!(b.drops(DropReason::MtuExceeded), 1);
    assert!(back[PROT].is_empty());
    let out = a.rx(UNPROT, &back[UNPROT]);
    let (_, ip) = l3(&out[PROT][0]);
    let ip = Ipv4Packet::new_checked(&ip[..]).unwrap();
    assert_eq!(
        (ip.src_addr(), ip.dst_addr()),
        (v4("10.2.0.1"), v4("10.1.0.10"))
    );
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert_eq!(
        (icmp.msg_type(), icmp.code()),
        (icmpv4::msg_type::DST_UNREACHABLE, icmpv4::CODE_FRAG_NEEDED)
    );
    assert_eq!(icmp.next_hop_mtu(), 1500);
}

/// The egress stage's cached next hop (worker/egress.rs, `route`'s inlined
/// case) keeps the port's MTU check: after a packet that fits has warmed
/// it for the destination, an oversize one to the same destination still
/// gets "fragmentation needed" back through the tunnel, in the same burst
/// and in the next.
#[test]
fn a_warm_next_hop_still_checks_the_mtu() {
    let big_a = config_text(false, "10.1.0.0/24", "").replace("mtu = 1500", "mtu = 9000");
    let mut a = Gw::new(tables_from(big_a, [A_PROT_MAC, A_UNPROT_MAC]));
    a.learn_by_arp(PROT, "10.1.0.10", HOST_A_MAC, "10.1.0.1");
    a.learn_by_arp(UNPROT, "192.0.2.2", B_UNPROT_MAC, "192.0.2.1");
    let mut b = ready_b();
    let small = from_host_a(&udp4("10.1.0.10", "10.2.0.10", 64, true, 100));
    let big = from_host_a(&udp4("10.1.0.10", "10.2.0.10", 64, true, 2000 - 28));
    let esp = a.rx(PROT, &[small.clone(), big.clone()]);
    assert_eq!(esp[UNPROT].len(), 2);
    let out = b.rx(UNPROT, &esp[UNPROT]);
    assert_eq!(out[PROT].len(), 1, "the small one forwarded");
    assert_eq!(out[UNPROT].len(), 1, "frag needed for the big one");
    assert_eq!(b.drops(DropReason::MtuExceeded), 1);
    let esp = a.rx(PROT, &[big, small]);
    let out = b.rx(UNPROT, &esp[UNPROT]);
    assert_eq!((out[PROT].len(), out[UNPROT].len()), (1, 1));
    assert_eq!(b.drops(DropReason::MtuExceeded), 2);
}

/// Gateway B whose tunnel protects only 10.2.0.128/25, so that its own
/// protected address (10.2.0.1, the source of its ICMP errors) is outside
/// `local_ts`, with a default route out of the unprotected port and
/// `mtu` as its links' MTU.
fn b_with_own_address_outside_local_ts(mtu: u16) -> Gw {
    let route = "[[route]]\ndest = \"0.0.0.0/0\"\nvia = \"192.0.2.1\"\nport = \"unprot\"\n";
    let text = config_text(true, "", route)
        .replace(
            r#"local_ts = ["10.2.0.0/24"]"#,
            r#"local_ts = ["10.2.0.128/25"]"#,
        )
        .replace("mtu = 1500", &format!("mtu = {mtu}"));
    assert!(text.contains("10.2.0.128/25") && text.contains(&format!("mtu = {mtu}")));
    let mut b = Gw::new(tables_from(text, [B_PROT_MAC, B_UNPROT_MAC]));
    b.learn_by_arp(PROT, "10.2.0.200", HOST_B_MAC, "10.2.0.1");
    b.learn_by_arp(UNPROT, "192.0.2.1", A_UNPROT_MAC, "192.0.2.2");
    b
}

/// True when `frame` is an IPv4 packet carrying ESP.
fn is_esp(frame: &[u8]) -> bool {
    let (_, ip) = l3(frame);
    Ipv4Packet::new_checked(&ip[..]).is_ok_and(|p| p.protocol() == ip_protocol::ESP)
}

/// RFC 4301: what the gateway originates goes through the SPD. An ICMP
/// error about decrypted traffic quotes the decrypted bytes; when no
/// tunnel protects its source (the gateway's protected address is outside
/// `local_ts`), it is dropped and counted, never routed out of the
/// unprotected port in the clear.
#[test]
fn icmp_errors_about_decrypted_traffic_never_leave_in_the_clear() {
    // A's outer path allows 9000 bytes, B's links 1500.
    let big_a = config_text(false, "10.1.0.0/24", "").replace("mtu = 1500", "mtu = 9000");
    let mut a = Gw::new(tables_from(big_a, [A_PROT_MAC, A_UNPROT_MAC]));
    a.learn_by_arp(PROT, "10.1.0.10", HOST_A_MAC, "10.1.0.1");
    a.learn_by_arp(UNPROT, "192.0.2.2", B_UNPROT_MAC, "192.0.2.1");
    let mut b = b_with_own_address_outside_local_ts(1500);

    // Time exceeded: TTL 2 from host A is 1 after gateway A.
    let inner = udp4("10.1.0.10", "10.2.0.200", 2, true, 64);
    let esp = a.rx(PROT, &[from_host_a(&inner)]);
    assert_eq!(esp[UNPROT].len(), 1);
    let out = b.rx(UNPROT, &esp[UNPROT]);
    assert_eq!(b.drops(DropReason::TtlExceeded), 1);

    // Fragmentation needed: the decrypted 2000-byte DF packet does not
    // fit B's protected link.
    let big = udp4("10.1.0.10", "10.2.0.200", 64, true, 2000 - 28);
    let esp = a.rx(PROT, &[from_host_a(&big)]);
    assert_eq!(esp[UNPROT].len(), 1);
    let out2 = b.rx(UNPROT, &esp[UNPROT]);
    assert_eq!(b.drops(DropReason::MtuExceeded), 1);

    for (what, quoted, out) in [
        ("time exceeded", &inner, &out),
        ("frag needed", &big, &out2),
    ] {
        assert!(
            out[PROT].is_empty(),
            "{what}: nothing for the protected side"
        );
        // Only ESP may leave the unprotected port, and the quoted inner
        // bytes appear in no frame there.
        let needle = &quoted[28..60];
        for f in &out[UNPROT] {
            assert!(
                is_esp(f),
                "{what}: plaintext left the unprotected port: {f:02x?}"
            );
            assert!(!f.windows(needle.len()).any(|w| w == needle));
        }
        assert!(
            out[UNPROT].is_empty(),
            "{what}: no tunnel protects 10.2.0.1"
        );
    }
    assert_eq!(b.drops(DropReason::LocalNotProtected), 2);
    assert_eq!(b.w.counters().generated, 2 + 2); // two ARP replies, two errors
}

/// A host on the protected side cannot make the gateway send its bytes in
/// the clear past a discard default by sending TTL 1 packets with a far
/// source: the time exceeded quoting them is dropped, not routed out.
#[test]
fn icmp_errors_about_protected_traffic_never_leave_in_the_clear() {
    let route = "[[route]]\ndest = \"0.0.0.0/0\"\nvia = \"192.0.2.2\"\nport = \"unprot\"\n";
    let mut a = Gw::new(tables_from(
        config_text(false, "10.1.0.0/24", route),
        [A_PROT_MAC, A_UNPROT_MAC],
    ));
    a.learn_by_arp(PROT, "10.1.0.10", HOST_A_MAC, "10.1.0.1");
    a.learn_by_arp(UNPROT, "192.0.2.2", B_UNPROT_MAC, "192.0.2.1");
    let spoofed = udp4("198.51.100.7", "10.2.0.10", 1, true, 64);
    let out = a.rx(PROT, &[from_host_a(&spoofed)]);
    assert!(out[PROT].is_empty() && out[UNPROT].is_empty(), "{out:02x?}");
    assert_eq!(a.drops(DropReason::TtlExceeded), 1);
    assert_eq!(a.drops(DropReason::LocalNotProtected), 1);
    // A protected host's own traceroute still gets its answer.
    let out = a.rx(
        PROT,
        &[from_host_a(&udp4("10.1.0.10", "10.2.0.10", 1, true, 10))],
    );
    assert_eq!(out[PROT].len(), 1);
}

#[test]
fn no_policy_or_discard_never_leaks_plaintext() {
    let policy = r#"
[[policy]]
action = "discard"
src = "10.1.0.0/24"
dst = "10.3.0.0/24"
"#;
    let mut a = Gw::new(tables_from(
        config_text(false, "10.1.0.0/24", policy),
        [A_PROT_MAC, A_UNPROT_MAC],
    ));
    a.learn_by_arp(UNPROT, "192.0.2.2", B_UNPROT_MAC, "192.0.2.1");
    let frames = [
        // No tunnel, no policy: default discard.
        from_host_a(&udp4("10.1.0.10", "10.4.0.10", 64, true, 10)),
        // To the unprotected subnet in the clear: also no policy.
        from_host_a(&udp4("10.1.0.10", "192.0.2.2", 64, true, 10)),
        // Explicit discard.
        from_host_a(&udp4("10.1.0.10", "10.3.0.10", 64, true, 10)),
    ];
    let out = a.rx(PROT, &frames);
    assert!(out[UNPROT].is_empty() && out[PROT].is_empty());
    assert_eq!(a.drops(DropReason::NoPolicy), 2);
    assert_eq!(a.drops(DropReason::PolicyDiscard), 1);
}

#[test]
fn bad_esp_is_counted_by_reason() {
    let mut a = ready_a();
    let mut b = ready_b();
    let esp = a.rx(
        PROT,
        &[from_host_a(&udp4("10.1.0.10", "10.2.0.10", 64, true, 64))],
    )[UNPROT][0]
        .clone();
    // Tampered ciphertext.
    let mut tampered = esp.clone();
    let n = tampered.len();
    tampered[n - 20] ^= 1;
    // Unknown SPI (IPv4 header checksum does not cover the payload).
    let mut unknown = esp.clone();
    unknown[14 + 20..14 + 24].copy_from_slice(&0xdead_beefu32.to_be_bytes());
    // Truncated ESP: cut inside the ICV, with the IP length fixed up.
    let mut short = esp[..14 + 20 + 12].to_vec();
    short[14 + 2..14 + 4].copy_from_slice(&32u16.to_be_bytes());
    {
        let mut ip = Ipv4Packet::new_checked(&mut short[14..]).unwrap();
        ip.fill_checksum();
    }
    let out = b.rx(UNPROT, &[tampered, unknown, short, esp.clone(), esp]);
    // Only the genuine packet, once: the copy is a replay.
    assert_eq!(out[PROT].len(), 1);
    assert_eq!(b.drops(DropReason::IcvMismatch), 1);
    assert_eq!(b.drops(DropReason::UnknownSpi), 1);
    assert_eq!(b.drops(DropReason::Truncated), 1);
    assert_eq!(b.drops(DropReason::Replayed), 1);
    let stats = b.w.tables().inbound_sas()[0].2.stats();
    assert_eq!(stats.drops.get(espgw_esp::DropReason::Replayed), 1);
}

#[test]
fn garbage_is_counted_never_forwarded() {
    let mut b = ready_b();
    let frames = vec![
        vec![],
        vec![0xff; 5],
        eth(B_UNPROT_MAC, A_UNPROT_MAC, 0x88b5, &[1, 2, 3]),
        eth(B_UNPROT_MAC, A_UNPROT_MAC, ethertype::IPV4, &[0x45, 0, 0]),
        eth(
            [2, 9, 9, 9, 9, 9],
            A_UNPROT_MAC,
            ethertype::IPV4,
            &echo4("192.0.2.1", "192.0.2.2"),
        ),
        {
            let mut ip = echo4("192.0.2.1", "192.0.2.2");
            ip[10] ^= 0xff;
            eth(B_UNPROT_MAC, A_UNPROT_MAC, ethertype::IPV4, &ip)
        },
        // Plaintext for the protected subnet arriving on the unprotected side.
        eth(
            B_UNPROT_MAC,
            A_UNPROT_MAC,
            ethertype::IPV4,
            &udp4("10.1.0.10", "10.2.0.10", 64, true, 20),
        ),
    ];
    let out = b.rx(UNPROT, &frames);
    assert!(out[PROT].is_empty() && out[UNPROT].is_empty());
    assert_eq!(b.drops(DropReason::Malformed), 3);
    assert_eq!(b.drops(DropReason::UnsupportedEthertype), 1);
    assert_eq!(b.drops(DropReason::NotOurMac), 1);
    assert_eq!(b.drops(DropReason::BadChecksum), 1);
    assert_eq!(b.drops(DropReason::UnprotectedPlaintext), 1);
}

#[test]
fn oversize_df_gets_frag_needed_with_the_inner_mtu() {
    let mut a = ready_a();
    // AES-GCM: 20 (IP) + 8 (ESP) + 8 (IV) + 16 (ICV) + 2 (trailer), padded
    // to 4 bytes: the largest inner packet for a 1500-byte path is 1446.
    let fits = udp4("10.1.0.10", "10.2.0.10", 64, true, 1446 - 28);
    let out = a.rx(PROT, &[from_host_a(&fits)]);
    assert_eq!(out[UNPROT].len(), 1);
    assert_eq!(out[UNPROT][0].len(), 14 + 1500);
    let big = udp4("10.1.0.10", "10.2.0.10", 64, true, 1447 - 28);
    let out = a.rx(PROT, &[from_host_a(&big)]);
    assert!(out[UNPROT].is_empty());
    assert_eq!(out[PROT].len(), 1);
    let (e, ip) = l3(&out[PROT][0]);
    assert_eq!(e.dst_addr, HOST_A_MAC);
    let ip = Ipv4Packet::new_checked(&ip[..]).unwrap();
    assert_eq!(
        (ip.src_addr(), ip.dst_addr()),
        (v4("10.1.0.1"), v4("10.1.0.10"))
    );
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum());
    assert_eq!(
        (icmp.msg_type(), icmp.code()),
        (icmpv4::msg_type::DST_UNREACHABLE, icmpv4::CODE_FRAG_NEEDED)
    );
    assert_eq!(icmp.next_hop_mtu(), 1446);
    // The quote starts with the original header, TTL untouched.
    assert_eq!(&icmp.data()[..20], &big[..20]);
    assert_eq!(a.drops(DropReason::MtuExceeded), 1);
    // Without DF: fragmented before encryption, two ESP packets that
    // gateway B decrypts into the two fragments.
    let plain = udp4("10.1.0.10", "10.2.0.10", 64, false, 1447 - 28);
    let out = a.rx(PROT, &[from_host_a(&plain)]);
    assert!(out[PROT].is_empty());
    assert_eq!(out[UNPROT].len(), 2);
    assert!(out[UNPROT].iter().all(|f| f.len() <= 14 + 1500));
    let mut b = ready_b();
    let out = b.rx(UNPROT, &out[UNPROT]);
    assert_eq!(out[PROT].len(), 2);
    let mut payload = Vec::new();
    for (i, f) in out[PROT].iter().enumerate() {
        let (_, ip) = l3(f);
        let ip = Ipv4Packet::new_checked(&ip[..]).unwrap();
        assert_eq!(
            (ip.more_frags(), usize::from(ip.frag_offset())),
            (i == 0, i * 1424)
        );
        payload.extend_from_slice(ip.payload());
    }
    assert_eq!(payload, plain[20..]);
    assert_eq!(a.drops(DropReason::FragmentationNeeded), 0);
    // Per tunnel: one DF packet refused, one packet fragmented (not a drop).
    let t = a.w.counters().tunnels[0];
    assert_eq!((t.out_mtu_exceeded, t.out_fragmented), (1, 1));
}

#[test]
fn ttl_one_gets_time_exceeded() {
    let mut a = ready_a();
    let pkt = udp4("10.1.0.10", "10.2.0.10", 1, true, 10);
    let out = a.rx(PROT, &[from_host_a(&pkt)]);
    assert!(out[UNPROT].is_empty());
    assert_eq!(out[PROT].len(), 1);
    let (_, ip) = l3(&out[PROT][0]);
    let ip = Ipv4Packet::new_checked(&ip[..]).unwrap();
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert_eq!(
        (icmp.msg_type(), icmp.code()),
        (icmpv4::msg_type::TIME_EXCEEDED, 0)
    );
    assert_eq!(&icmp.data()[..pkt.len()], &pkt[..]);
    assert_eq!(a.drops(DropReason::TtlExceeded), 1);
}

#[test]
fn icmp_errors_are_rate_limited() {
    let mut a = ready_a();
    let flood: Vec<Vec<u8>> = (0..150)
        .map(|_| from_host_a(&udp4("10.1.0.10", "10.2.0.10", 1, true, 10)))
        .collect();
    let out = a.rx(PROT, &flood);
    let burst = crate::worker::ICMP_ERROR_BURST as usize;
    assert_eq!(out[PROT].len(), burst);
    assert_eq!(a.drops(DropReason::TtlExceeded), 150);
    assert_eq!(a.w.counters().icmp_rate_limited, 150 - burst as u64);
    // A second later the bucket has refilled.
    a.now.ns += 1_000_000_000;
    let out = a.rx(PROT, &flood[..1]);
    assert_eq!(out[PROT].len(), 1);
}

#[test]
fn decrypted_packet_outside_the_selectors_is_dropped() {
    // A protects 10.1.0.0/16, but B only accepts 10.1.0.0/24 from it.
    let mut a = Gw::new(tables_from(
        config_text(false, "10.1.0.0/16", ""),
        [A_PROT_MAC, A_UNPROT_MAC],
    ));
    a.learn_by_arp(UNPROT, "192.0.2.2", B_UNPROT_MAC, "192.0.2.1");
    let mut b = ready_b();
    let out = a.rx(
        PROT,
        &[from_host_a(&udp4("10.1.5.5", "10.2.0.10", 64, true, 10))],
    );
    let out = b.rx(UNPROT, &out[UNPROT]);
    assert!(out[PROT].is_empty() && out[UNPROT].is_empty());
    assert_eq!(b.drops(DropReason::PolicyMismatch), 1);
    assert_eq!(b.w.counters().tunnels[0].in_policy_mismatch, 1);
}

/// An IPv6 packet carrying the neighbor discovery message `nd` from `src`
/// to `dst` (hop limit 255, as RFC 4861 requires).
fn nd_packet(src: Ipv6Addr, dst: Ipv6Addr, nd: &Icmpv6Repr) -> Vec<u8> {
    let mut ip = vec![0u8; 40 + nd.buffer_len()];
    Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: ip_protocol::ICMPV6,
        payload_len: nd.buffer_len() as u16,
        hop_limit: 255,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut ip)
    .unwrap();
    nd.emit(src, dst, &mut ip[40..]).unwrap();
    ip
}

#[test]
fn neighbor_solicitation_for_our_address_gets_an_advert() {
    let mut a = Gw::a();
    let host = v6("fd00:1::10");
    let ours = v6("fd00:1::1");
    let ns = Icmpv6Repr::NeighborSolicit {
        target_addr: ours,
        source_lladdr: Some(HOST_A_MAC),
    };
    let dst = icmpv6::solicited_node_multicast(ours);
    let ip = nd_packet(host, dst, &ns);
    let out = a.rx(
        PROT,
        &[eth(
            icmpv6::multicast_mac(dst),
            HOST_A_MAC,
            ethertype::IPV6,
            &ip,
        )],
    );
    assert_eq!(out[PROT].len(), 1);
    let (e, ip) = l3(&out[PROT][0]);
    assert_eq!(
        (e.dst_addr, e.src_addr, e.ethertype),
        (HOST_A_MAC, A_PROT_MAC, ethertype::IPV6)
    );
    let ip = Ipv6Packet::new_checked(&ip[..]).unwrap();
    let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    match Icmpv6Repr::parse(&icmp, ip.src_addr(), ip.dst_addr()).unwrap() {
        Icmpv6Repr::NeighborAdvert {
            solicited,
            target_addr,
            target_lladdr,
            ..
        } => {
            assert!(solicited);
            assert_eq!((target_addr, target_lladdr), (ours, Some(A_PROT_MAC)));
        }
        other => panic!("not an NA: {other:?}"),
    }
    // The solicitor was learned: a ping from it is answered directly.
    assert_eq!(a.w.counters().generated, 1);
    let _ = IpAddr::from(host);
}

#[test]
fn mixed_burst_balances_the_accounting_identity() {
    let mut a = Gw::a();
    let frames = vec![
        arp_request(HOST_A_MAC, v4("10.1.0.10"), v4("10.1.0.1")),
        from_host_a(&echo4("10.1.0.10", "10.1.0.1")),
        from_host_a(&udp4("10.1.0.10", "10.2.0.10", 64, true, 100)),
        from_host_a(&udp4("10.1.0.10", "10.2.0.10", 64, true, 1470)),
        from_host_a(&udp4("10.1.0.10", "10.2.0.10", 1, true, 10)),
        from_host_a(&udp4("10.1.0.10", "10.9.0.10", 64, true, 10)),
        vec![1, 2, 3],
        eth(A_PROT_MAC, HOST_A_MAC, ethertype::IPV6, &[0x60; 10]),
    ];
    a.rx(PROT, &frames); // `take` asserts the identity
    let c = a.w.counters().clone();
    assert_eq!(c.rx, frames.len() as u64);
    // The ESP packet waits for gateway B's MAC.
    assert_eq!(c.held, 1);
    a.w.shutdown();
    assert_eq!(a.drops(DropReason::Shutdown), 1);
    assert!(a.w.counters().balanced());
}

/// A and B over an IPv6 outer network with UDP-encapsulated ESP (NAT-T),
/// peers known statically.
fn v6_udp_config(b_side: bool) -> String {
    let (local, remote, peer_mac) = if b_side {
        ("2001:db8::2", "2001:db8::1", "02:aa:00:00:00:02")
    } else {
        ("2001:db8::1", "2001:db8::2", "02:bb:00:00:00:02")
    };
    let mut gw = demo_gateway(b_side).workers(None).section(&format!(
        "[[neighbor]]\naddress = \"{remote}\"\nmac = \"{peer_mac}\"\nport = \"unprot\""
    ));
    gw.unprot_address = format!("{local}/64");
    gw.map_tunnels(|mut t| {
        t.name = "t6".into();
        t.local = local.into();
        t.remote = remote.into();
        t.encap = Some("udp".into());
        t
    })
    .render()
}

/// `steer_esp` over ESP in UDP over IPv6: the rule matches IPv6, UDP to
/// the SA's local port and the SPI; a tunnel of one SA pair has no lane.
#[test]
fn steering_key_of_esp_in_udp_over_ipv6() {
    let (_, tables) = tables_from(v6_udp_config(true), [B_PROT_MAC, B_UNPROT_MAC]);
    let want = crate::esp_steering::wanted(&tables);
    let keys: Vec<_> = want.into_iter().collect();
    assert_eq!(
        keys,
        [(
            crate::esp_steering::SteerKey {
                port: UNPROT,
                v6: true,
                udp_dst_port: Some(4500),
                spi: 0xa001
            },
            crate::esp_steering::Want {
                lane: None,
                tunnel: 0
            }
        )]
    );
}

#[test]
fn ipv6_outer_with_udp_encapsulation_round_trips() {
    let mut a = Gw::new(tables_from(
        v6_udp_config(false),
        [A_PROT_MAC, A_UNPROT_MAC],
    ));
    let mut b = Gw::new(tables_from(v6_udp_config(true), [B_PROT_MAC, B_UNPROT_MAC]));
    a.learn_by_arp(PROT, "10.1.0.10", HOST_A_MAC, "10.1.0.1");
    b.learn_by_arp(PROT, "10.2.0.10", HOST_B_MAC, "10.2.0.1");
    let inner = udp4("10.1.0.10", "10.2.0.10", 64, true, 200);
    let out = a.rx(PROT, &[from_host_a(&inner)]);
    assert_eq!(out[UNPROT].len(), 1);
    let (e, outer) = l3(&out[UNPROT][0]);
    assert_eq!((e.dst_addr, e.ethertype), (B_UNPROT_MAC, ethertype::IPV6));
    let ip = Ipv6Packet::new_checked(&outer[..]).unwrap();
    assert_eq!(
        (ip.src_addr(), ip.dst_addr(), ip.next_header()),
        (v6("2001:db8::1"), v6("2001:db8::2"), ip_protocol::UDP)
    );
    let udp = espgw_wire::UdpPacket::new_checked(ip.payload()).unwrap();
    assert_eq!((udp.src_port(), udp.dst_port()), (4500, 4500));
    assert!(udp.verify_checksum_v6(ip.src_addr(), ip.dst_addr()));
    assert_eq!(&udp.payload()[..4], &0xa001u32.to_be_bytes());
    let out = b.rx(UNPROT, &out[UNPROT]);
    assert_eq!(out[PROT].len(), 1);
    let (e, got) = l3(&out[PROT][0]);
    assert_eq!(e.dst_addr, HOST_B_MAC);
    assert_eq!(
        Ipv4Packet::new_checked(&got[..]).unwrap().payload(),
        &inner[20..]
    );
    // The inner MTU shrinks by the IPv6 and UDP headers: 1500 - 40 - 8 - 8
    // - 8 - 16 - 2 = 1418, already a multiple of 4 with the trailer.
    let out = a.rx(
        PROT,
        &[from_host_a(&udp4(
            "10.1.0.10",
            "10.2.0.10",
            64,
            true,
            1500 - 28,
        ))],
    );
    let (_, ip) = l3(&out[PROT][0]);
    let ip = Ipv4Packet::new_checked(&ip[..]).unwrap();
    assert_eq!(
        Icmpv4Packet::new_checked(ip.payload())
            .unwrap()
            .next_hop_mtu(),
        1418
    );
}

/// The forms a tunnel's ESP takes on the wire between A and B: ESP over
/// IPv4 (the demo's), ESP in UDP 4500 over IPv4 (NAT-T, RFC 3948), the
/// same with the source port rewritten on the way to B (a NAT in front of
/// A; the sender and its config are those of `Udp4`), ESP over IPv6, ESP
/// in UDP over IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outer {
    Esp4,
    Udp4,
    Nat4,
    Esp6,
    Udp6,
}

impl Outer {
    const ALL: [Outer; 5] = [
        Outer::Esp4,
        Outer::Udp4,
        Outer::Nat4,
        Outer::Esp6,
        Outer::Udp6,
    ];

    fn v6(self) -> bool {
        matches!(self, Outer::Esp6 | Outer::Udp6)
    }

    fn udp(self) -> bool {
        matches!(self, Outer::Udp4 | Outer::Nat4 | Outer::Udp6)
    }

    /// What reaches B of A's ESP `frame`: for `Nat4`, the UDP source port
    /// rewritten by a NAT, one of four mappings by `i` (the UDP checksum
    /// cleared, which IPv4 allows; B takes ESP on its port 4500 from any
    /// source port); unchanged otherwise.
    fn on_the_way(self, mut frame: Vec<u8>, i: usize) -> Vec<u8> {
        if self == Outer::Nat4 {
            // Ethernet, a 20-byte IPv4 header, then the UDP header.
            let udp = 14 + 20;
            let sport = 61000 + (i % 4) as u16;
            frame[udp..udp + 2].copy_from_slice(&sport.to_be_bytes());
            frame[udp + 6..udp + 8].fill(0);
        }
        frame
    }

    /// Gateway A's (or B's) outer address.
    fn addr(self, b_side: bool) -> &'static str {
        match (self.v6(), b_side) {
            (false, false) => "192.0.2.1",
            (false, true) => "192.0.2.2",
            (true, false) => "2001:db8::1",
            (true, true) => "2001:db8::2",
        }
    }

    /// `gw` (A's or B's demo config) with its tunnel's ESP in this form:
    /// over IPv6, the unprotected port gets an IPv6 address and the peer
    /// is a static neighbor (no ARP); in UDP, `encap = "udp"`.
    fn apply(
        self,
        mut gw: espgw_control::fixtures::GatewayToml,
        b_side: bool,
    ) -> espgw_control::fixtures::GatewayToml {
        let (local, remote) = (self.addr(b_side), self.addr(!b_side));
        if self.v6() {
            let peer_mac = if b_side {
                "02:aa:00:00:00:02"
            } else {
                "02:bb:00:00:00:02"
            };
            gw = gw.section(&format!(
                "[[neighbor]]\naddress = \"{remote}\"\nmac = \"{peer_mac}\"\nport = \"unprot\""
            ));
            gw.unprot_address = format!("{local}/64");
        }
        let udp = self.udp();
        gw.map_tunnels(move |mut t| {
            t.local = local.into();
            t.remote = remote.into();
            if udp {
                t.encap = Some("udp".into());
            }
            t
        })
    }

    /// Teaches `gw` (A or B, by `b_side`) the peer gateway's MAC where it
    /// is not a static neighbor (IPv4: by ARP).
    fn learn_peer(self, gw: &mut Gw, b_side: bool) {
        if !self.v6() {
            let (peer_mac, peer) = if b_side {
                (A_UNPROT_MAC, self.addr(false))
            } else {
                (B_UNPROT_MAC, self.addr(true))
            };
            gw.learn_by_arp(UNPROT, peer, peer_mac, self.addr(b_side));
        }
    }

    /// Checks that `frame` is ESP in this form from `from_b`'s side to the
    /// other (Ethernet to the peer's MAC, outer addresses, protocol, UDP
    /// ports 4500 and a valid UDP checksum); returns `(spi, seq)`.
    fn check_esp(self, frame: &[u8], from_b: bool) -> (u32, u32) {
        let (e, ip) = l3(frame);
        let dst_mac = if from_b { A_UNPROT_MAC } else { B_UNPROT_MAC };
        assert_eq!(e.dst_addr, dst_mac, "{self:?}");
        let (src, dst) = (self.addr(from_b), self.addr(!from_b));
        let proto = if self.udp() {
            ip_protocol::UDP
        } else {
            ip_protocol::ESP
        };
        let payload = if self.v6() {
            assert_eq!(e.ethertype, ethertype::IPV6, "{self:?}");
            let p = Ipv6Packet::new_checked(&ip[..]).unwrap();
            assert_eq!(
                (p.src_addr(), p.dst_addr(), p.next_header()),
                (v6(src), v6(dst), proto),
                "{self:?}"
            );
            if self.udp() {
                let u = espgw_wire::UdpPacket::new_checked(p.payload()).unwrap();
                assert!(u.verify_checksum_v6(p.src_addr(), p.dst_addr()), "{self:?}");
            }
            p.payload().to_vec()
        } else {
            assert_eq!(e.ethertype, ethertype::IPV4, "{self:?}");
            let p = Ipv4Packet::new_checked(&ip[..]).unwrap();
            assert!(p.verify_checksum());
            assert_eq!(
                (p.src_addr(), p.dst_addr(), p.protocol()),
                (v4(src), v4(dst), proto),
                "{self:?}"
            );
            if self.udp() {
                let u = espgw_wire::UdpPacket::new_checked(p.payload()).unwrap();
                assert!(u.verify_checksum_v4(p.src_addr(), p.dst_addr()), "{self:?}");
            }
            p.payload().to_vec()
        };
        let esp = if self.udp() {
            let u = espgw_wire::UdpPacket::new_checked(&payload[..]).unwrap();
            assert_eq!((u.src_port(), u.dst_port()), (4500, 4500), "{self:?}");
            u.payload().to_vec()
        } else {
            payload
        };
        (
            u32::from_be_bytes(esp[..4].try_into().unwrap()),
            u32::from_be_bytes(esp[4..8].try_into().unwrap()),
        )
    }
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Any bytes on any port: no panic, identity holds.
        #[test]
        fn random_frames_never_panic_and_balance(
            frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..16),
            port in 0usize..2,
            prefix in any::<bool>(),
        ) {
            let mut b = ready_b();
            let frames: Vec<Vec<u8>> = frames
                .into_iter()
                .map(|f| if prefix {
                    // Make them reach the IP/ESP paths more often.
                    let mut ip = ipv4_packet("192.0.2.1", "192.0.2.2", 64, true, ip_protocol::ESP, &f);
                    if f.len() > 1 { ip[20..22].copy_from_slice(&f[..2]); }
                    eth(B_UNPROT_MAC, A_UNPROT_MAC, ethertype::IPV4, &ip)
                } else { f })
                .collect();
            b.rx(port, &frames);
            prop_assert!(b.w.counters().balanced());
        }

        /// Frames shaped for the fast reads of session 22, with random
        /// tails, length fields and link padding, to a gateway with an
        /// IPv6 outer address and ESP in UDP: ESP and UDP (to 4500 or
        /// not) right after an IPv6 header to it, TCP and UDP through it,
        /// and ESP in UDP 4500 over IPv4. Nothing panics, and the
        /// identity holds.
        #[test]
        fn random_ipv6_and_nat_t_frames_never_panic_and_balance(
            frames in proptest::collection::vec(
                (0u8..5, proptest::collection::vec(any::<u8>(), 0..120), any::<u16>(), 0usize..4, any::<bool>()),
                1..16,
            ),
        ) {
            let mut b = Gw::new(tables_from(v6_udp_config(true), [B_PROT_MAC, B_UNPROT_MAC]));
            let mut by_port: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
            for (shape, tail, len_field, pad, exact) in frames {
                let (port, ip) = if shape == 4 {
                    // ESP in UDP 4500 over IPv4, to the gateway's IPv4
                    // address on the protected port.
                    let mut udp = vec![0x11, 0x94, 0x11, 0x94, 0, 0, 0, 0];
                    udp.extend_from_slice(&tail);
                    let len = if exact { udp.len() as u16 } else { len_field };
                    udp[4..6].copy_from_slice(&len.to_be_bytes());
                    let ip = ipv4_packet("10.2.0.10", "10.2.0.1", 64, true, ip_protocol::UDP, &udp);
                    (PROT, ip)
                } else {
                    let (nh, dst) = match shape {
                        0 => (ip_protocol::ESP, "2001:db8::2"),
                        1 | 2 => (ip_protocol::UDP, "2001:db8::2"),
                        _ => (ip_protocol::TCP, "fd00:9::1"),
                    };
                    let mut l4 = Vec::new();
                    if shape == 1 {
                        // UDP to port 4500 (shape 2: to the tail's port).
                        l4.extend_from_slice(&[0x11, 0x94, 0x11, 0x94, 0, 0, 0, 0]);
                        let len = if exact { (8 + tail.len()) as u16 } else { len_field };
                        l4[4..6].copy_from_slice(&len.to_be_bytes());
                    }
                    l4.extend_from_slice(&tail);
                    let payload = if exact { l4.len() as u16 } else { len_field };
                    let mut ip = vec![0x60, 0, 0, 0, 0, 0, nh, 64];
                    ip[4..6].copy_from_slice(&payload.to_be_bytes());
                    ip.extend_from_slice(&v6("2001:db8::1").octets());
                    ip.extend_from_slice(&v6(dst).octets());
                    ip.extend_from_slice(&l4);
                    (UNPROT, ip)
                };
                let (mac, et) = if port == PROT {
                    (B_PROT_MAC, ethertype::IPV4)
                } else {
                    (B_UNPROT_MAC, ethertype::IPV6)
                };
                let mut f = eth(mac, A_UNPROT_MAC, et, &ip);
                f.extend(std::iter::repeat_n(0xee, pad));
                by_port[port].push(f);
            }
            for port in [PROT, UNPROT] {
                if !by_port[port].is_empty() {
                    b.rx(port, &by_port[port]);
                }
            }
            prop_assert!(b.w.counters().balanced());
        }

        /// Gateway A sealing ESP in UDP over IPv6 through a port that
        /// offloads UDP checksums, fed IPv4 and IPv6 packets of any size,
        /// TTL and DF (fragmented, too big, answered, dropped, sealed):
        /// nothing panics, the identity holds, and every frame A sends
        /// the peer carries a UDP checksum that verifies (the test buffer
        /// completes an offloaded one as the NIC would), the offload
        /// having been asked for each ESP frame and for nothing else.
        #[test]
        fn offloaded_udp_checksums_verify_whatever_the_protected_side_sends(
            packets in proptest::collection::vec(
                (any::<bool>(), 0usize..1600, 0u8..3, any::<bool>(), any::<u8>()),
                1..12,
            ),
        ) {
            let outer = Outer::Udp6;
            let config = outer.apply(demo_gateway(false).default_action("discard"), false);
            let (net, tables) = tables_from(config.render(), [A_PROT_MAC, A_UNPROT_MAC]);
            let mut net = Arc::try_unwrap(net).ok().unwrap();
            net.ports[UNPROT].tx_udp_checksum = true;
            let mut a = Gw::new((Arc::new(net), tables));
            a.learn_by_arp(PROT, "10.1.0.10", HOST_A_MAC, "10.1.0.1");
            let frames: Vec<Vec<u8>> = packets
                .iter()
                .map(|&(ipv6, len, ttl, df, seed)| {
                    let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_add(seed)).collect();
                    if ipv6 {
                        let mut ip = vec![0x60, 0, 0, 0, 0, 0, ip_protocol::UDP, ttl];
                        ip[4..6].copy_from_slice(&((8 + len) as u16).to_be_bytes());
                        ip.extend_from_slice(&v6("fd00:1::10").octets());
                        ip.extend_from_slice(&v6("fd00:2::10").octets());
                        ip.extend_from_slice(&[0x9c, 0x40, 0x14, 0x51]);
                        ip.extend_from_slice(&((8 + len) as u16).to_be_bytes());
                        ip.extend_from_slice(&[0, 0]);
                        ip.extend_from_slice(&data);
                        eth(A_PROT_MAC, HOST_A_MAC, ethertype::IPV6, &ip)
                    } else {
                        let udp = udp4("10.1.0.10", "10.2.0.10", ttl, df, len);
                        from_host_a(&udp)
                    }
                })
                .collect();
            let out = a.rx(PROT, &frames);
            prop_assert!(a.w.counters().balanced());
            for (frame, asked) in out[UNPROT].iter().zip(&a.offloads[UNPROT]) {
                let (e, ip) = l3(frame);
                prop_assert_eq!(e.ethertype, ethertype::IPV6);
                let p = Ipv6Packet::new_checked(&ip[..]).unwrap();
                let esp = p.next_header() == ip_protocol::UDP;
                prop_assert_eq!(*asked, esp.then_some((14, 40, true)));
                if esp {
                    let u = espgw_wire::UdpPacket::new_checked(p.payload()).unwrap();
                    prop_assert!(u.verify_checksum_v6(p.src_addr(), p.dst_addr()));
                }
            }
        }

        /// IPv4 headers with arbitrary flags, TTLs, lengths and payloads from
        /// the protected side, towards the tunnel: fragmenting, PMTU, SPD
        /// and encap never panic, and the identity holds.
        #[test]
        fn random_protected_traffic_never_panics_and_balances(
            pkts in proptest::collection::vec(
                (any::<u8>(), any::<bool>(), 0usize..1600, any::<u8>(), any::<u16>(), 0u8..3),
                1..12,
            ),
        ) {
            let mut a = ready_a();
            let frames: Vec<Vec<u8>> = pkts
                .into_iter()
                .map(|(ttl, df, len, proto, frag, dst)| {
                    let dst = ["10.2.0.10", "10.1.0.1", "10.7.7.7"][usize::from(dst)];
                    let payload: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(proto)).collect();
                    let mut ip = ipv4_packet("10.1.0.10", dst, ttl, df, proto, &payload);
                    ip[6..8].copy_from_slice(&(frag & 0x3fff | u16::from(df) << 14).to_be_bytes());
                    Ipv4Packet::new_checked(&mut ip[..]).unwrap().fill_checksum();
                    from_host_a(&ip)
                })
                .collect();
            a.rx(PROT, &frames);
            prop_assert!(a.w.counters().balanced());
        }
    }
}

mod live {
    //! The tables as the control plane publishes them: a rekey while
    //! traffic flows, picked up by the workers between bursts.
    use super::*;
    use crate::worker::SpreadWhen;
    use espgw_control::config::{SaKeys, SecretBytes as KeyBytes, SpreadLate};
    use espgw_control::live::SaManager;

    fn manager(text: String, macs: [MacAddr; 2]) -> (Arc<Network>, SaManager<Arc<Tables>>) {
        let config = config_of(text);
        let net = Arc::new(Network::from_config(&config, &macs).unwrap());
        let mtu = usize::from(config.dataplane.mtu);
        let manager = SaManager::new(
            &config,
            0,
            Box::new(move |view| Arc::new(Tables::from_view(view, mtu))),
        )
        .unwrap();
        (net, manager)
    }

    #[test]
    fn rekey_make_before_break_while_traffic_flows() {
        let (net_a, mut ma) = manager(
            config_text(false, "10.1.0.0/24", ""),
            [A_PROT_MAC, A_UNPROT_MAC],
        );
        let (net_b, mut mb) = manager(config_text(true, "", ""), [B_PROT_MAC, B_UNPROT_MAC]);
        let (mut ra, mut rb) = (ma.reader(), mb.reader());
        let mut a = Gw::new((net_a, Arc::clone(ra.get())));
        let mut b = Gw::new((net_b, Arc::clone(rb.get())));
        a.learn_by_arp(PROT, "10.1.0.10", HOST_A_MAC, "10.1.0.1");
        a.learn_by_arp(UNPROT, "192.0.2.2", B_UNPROT_MAC, "192.0.2.1");
        b.learn_by_arp(PROT, "10.2.0.10", HOST_B_MAC, "10.2.0.1");
        let send = |a: &mut Gw, b: &mut Gw| {
            let esp = a.rx(
                PROT,
                &[from_host_a(&udp4("10.1.0.10", "10.2.0.10", 64, true, 40))],
            );
            let (_, outer) = l3(&esp[UNPROT][0]);
            let spi = u32::from_be_bytes(outer[20..24].try_into().unwrap());
            let out = b.rx(UNPROT, &esp[UNPROT]);
            (spi, out[PROT].len())
        };
        assert_eq!(send(&mut a, &mut b), (0xa001, 1));
        let key = |hex: &str| SaKeys {
            spi: 0xa002,
            key: KeyBytes::from_hex(hex).unwrap(),
            auth_key: None,
        };
        let new_key = "00112233445566778899aabbccddeeff01020304";
        // B installs the new inbound SA first, then A switches over.
        mb.rekey("t", None, Some(key(new_key)), 1).unwrap();
        ma.rekey("t", Some(key(new_key)), None, 1).unwrap();
        for (gw, r) in [(&mut a, &mut ra), (&mut b, &mut rb)] {
            r.quiescent();
            gw.w.set_tables(Arc::clone(r.get()));
        }
        assert_eq!(send(&mut a, &mut b), (0xa002, 1));
        // B still has the old SA draining: its in-flight packets decrypt.
        assert!(b.w.tables().inbound_sas().iter().any(|s| s.0 == 0xa001));
        assert_eq!(b.drops(DropReason::UnknownSpi), 0);
        assert_eq!(b.drops(DropReason::IcvMismatch), 0);
    }

    /// RFC 9611 per-CPU SAs: a tunnel with a second SA pair. Worker 0
    /// encrypts with the tunnel's own outbound SA, worker 1 with the
    /// other one (each its own sequence counter); the peer's one worker
    /// decrypts both into the same tunnel.
    #[test]
    fn two_workers_encrypt_one_tunnel_with_different_per_cpu_sas() {
        let (net_a, mut ma) = manager(
            config_text(false, "10.1.0.0/24", ""),
            [A_PROT_MAC, A_UNPROT_MAC],
        );
        let (net_b, mut mb) = manager(config_text(true, "", ""), [B_PROT_MAC, B_UNPROT_MAC]);
        let keys = |spi: u32, hex: &str| SaKeys {
            spi,
            key: KeyBytes::from_hex(hex).unwrap(),
            auth_key: None,
        };
        let (a_to_b, b_to_a) = (
            "00112233445566778899aabbccddeeff01020304",
            "ffeeddccbbaa99887766554433221100a0b0c0d0",
        );
        ma.add_extra_pair("t", keys(0xa003, a_to_b), keys(0xb003, b_to_a), 1)
            .unwrap();
        mb.add_extra_pair("t", keys(0xb003, b_to_a), keys(0xa003, a_to_b), 1)
            .unwrap();
        let tables_a = Arc::clone(ma.reader().get());
        let worker = |id: usize| {
            let ports = net_a.ports.len();
            let mut g = Gw {
                w: Worker::new(
                    id,
                    Arc::clone(&net_a),
                    Arc::clone(&tables_a),
                    VecBufPool,
                    32,
                    SharedNeighbors::default(),
                ),
                tx: TxQueues::new(ports, 64),
                now: Now { ns: 1 },
                offloads: [Vec::new(), Vec::new()],
            };
            g.learn_by_arp(PROT, "10.1.0.10", HOST_A_MAC, "10.1.0.1");
            g.learn_by_arp(UNPROT, "192.0.2.2", B_UNPROT_MAC, "192.0.2.1");
            g
        };
        let mut b = Gw::new((net_b, Arc::clone(mb.reader().get())));
        b.learn_by_arp(PROT, "10.2.0.10", HOST_B_MAC, "10.2.0.1");
        let mut spis = Vec::new();
        for id in [0, 1, 2, 3] {
            let mut a = worker(id);
            let esp = a.rx(
                PROT,
                &[from_host_a(&udp4("10.1.0.10", "10.2.0.10", 64, true, 40))],
            );
            let (_, outer) = l3(&esp[UNPROT][0]);
            spis.push(u32::from_be_bytes(outer[20..24].try_into().unwrap()));
            let out = b.rx(UNPROT, &esp[UNPROT]);
            assert_eq!(out[PROT].len(), 1, "worker {id}'s packet decrypted");
        }
        // Worker w on SA w % 2.
        assert_eq!(spis, vec![0xa001, 0xa003, 0xa001, 0xa003]);
        let t = tables_a.tunnel(TunnelId(0)).unwrap();
        let (own, extra) = (t.out.as_ref().unwrap(), &t.extra_out[0]);
        assert_eq!((own.stats().packets, extra.stats().packets), (2, 2));
        assert!(!Arc::ptr_eq(own, extra));
        // `--stats-json` lists both outbound SAs with their own counters.
        let stats = crate::stats::Stats {
            seconds: 1.0,
            workers: Vec::new(),
            nic: vec![None, None],
        };
        let j = stats.to_json(&net_a, &tables_a);
        let outs: Vec<_> = j["sas"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["dir"] == "out")
            .map(|s| {
                (
                    s["spi"].as_u64(),
                    s["packets"].as_u64(),
                    s["per_cpu"].as_bool(),
                )
            })
            .collect();
        assert_eq!(
            outs,
            vec![
                (Some(0xa001), Some(2), None),
                (Some(0xa003), Some(2), Some(true))
            ]
        );
        // B took both into the one tunnel, on two inbound SAs.
        let inb = b.w.tables().inbound_sas();
        let count = |spi: u32| inb.iter().find(|s| s.0 == spi).unwrap().2.stats().packets;
        assert_eq!((count(0xa001), count(0xa003)), (2, 2));
        assert!(inb.iter().all(|s| s.1 == TunnelId(0)));
        // Without the second pair, every worker is on the one SA again.
        ma.remove_extra_pair("t", 0xb003, 2).unwrap();
        let t = Arc::clone(ma.reader().get());
        for w in 0..4 {
            assert_eq!(t.outbound_sa_for(TunnelId(0), w).unwrap().spi(), 0xa001);
        }
    }

    /// Gateways A and B with a tunnel of four RFC 9611 per-CPU SA pairs
    /// (the tunnel's own and three extra); A's four workers, each sealing
    /// on its own SA (worker k on lane k); B's snapshot and manager.
    fn per_cpu_pair() -> (Vec<Gw>, Snapshot, SaManager<Arc<Tables>>) {
        let (net_a, mut ma) = manager(
            config_text(false, "10.1.0.0/24", ""),
            [A_PROT_MAC, A_UNPROT_MAC],
        );
        let (net_b, mut mb) = manager(config_text(true, "", ""), [B_PROT_MAC, B_UNPROT_MAC]);
        let keys = |spi: u32, hex: String| SaKeys {
            spi,
            key: KeyBytes::from_hex(&hex).unwrap(),
            auth_key: None,
        };
        for k in 3..6u32 {
            let a_to_b = format!("00112233445566778899aabbccddeeff0102030{k}");
            let b_to_a = format!("ffeeddccbbaa99887766554433221100a0b0c0d{k}");
            ma.add_extra_pair(
                "t",
                keys(0xa000 + k, a_to_b.clone()),
                keys(0xb000 + k, b_to_a.clone()),
                1,
            )
            .unwrap();
            mb.add_extra_pair("t", keys(0xb000 + k, b_to_a), keys(0xa000 + k, a_to_b), 1)
                .unwrap();
        }
        let tables_a = Arc::clone(ma.reader().get());
        let a = (0..4)
            .map(|id| {
                let ports = net_a.ports.len();
                let mut g = Gw {
                    w: Worker::new(
                        id,
                        Arc::clone(&net_a),
                        Arc::clone(&tables_a),
                        VecBufPool,
                        32,
                        SharedNeighbors::default(),
                    ),
                    tx: TxQueues::new(ports, 64),
                    now: Now { ns: 1 },
                    offloads: [Vec::new(), Vec::new()],
                };
                for f in 0..4 {
                    g.learn_by_arp(PROT, &format!("10.1.0.{}", 20 + f), HOST_A_MAC, "10.1.0.1");
                }
                g.learn_by_arp(UNPROT, "192.0.2.2", B_UNPROT_MAC, "192.0.2.1");
                g
            })
            .collect();
        let tables_b = Arc::clone(mb.reader().get());
        (a, (net_b, tables_b), mb)
    }

    /// `steer_esp`: B's four per-CPU inbound SAs each want a rule on the
    /// port the tunnel uses, with its lane; over two queues lanes 0 and 2
    /// go to worker 0, 1 and 3 to worker 1 (lane % workers, as the
    /// handoff hands them). After a rekey of the tunnel's own pair the draining
    /// SA keeps its rule until it goes, and the new one gets lane 0's queue.
    #[test]
    fn steering_wants_a_rule_per_inbound_sa_on_its_lanes_queue() {
        use crate::esp_steering::{self, EspSteering, FlowRules, SteerError, SteerKey};
        struct Nic(Vec<(SteerKey, u16)>);
        impl FlowRules for Nic {
            type Rule = SteerKey;
            fn create(&mut self, key: &SteerKey, queue: u16) -> Result<SteerKey, SteerError> {
                self.0.push((*key, queue));
                Ok(*key)
            }
            fn destroy(&mut self, _: usize, rule: SteerKey) -> Result<(), SteerError> {
                self.0.retain(|(k, _)| *k != rule);
                Ok(())
            }
            fn flush(&mut self, port: usize) -> Result<(), SteerError> {
                self.0.retain(|(k, _)| k.port != port);
                Ok(())
            }
        }
        let (_, (_, tables_b), mut mb) = per_cpu_pair();
        let want = esp_steering::wanted(&tables_b);
        let lanes: Vec<(u32, Option<u32>)> = want.iter().map(|(k, w)| (k.spi, w.lane)).collect();
        assert_eq!(
            lanes,
            [
                (0xa001, Some(0)),
                (0xa003, Some(1)),
                (0xa004, Some(2)),
                (0xa005, Some(3))
            ]
        );
        assert!(want
            .keys()
            .all(|k| k.port == UNPROT && !k.v6 && k.udp_dst_port.is_none()));
        let mut nic = Nic(Vec::new());
        let mut steering = EspSteering::new(2);
        steering.apply(&want, &mut nic);
        let queues: Vec<(u32, u16)> = nic.0.iter().map(|(k, q)| (k.spi, *q)).collect();
        assert_eq!(queues, [(0xa001, 0), (0xa003, 1), (0xa004, 0), (0xa005, 1)]);

        let keys = SaKeys {
            spi: 0xa011,
            key: KeyBytes::from_hex("0102030405060708090a0b0c0d0e0f1011121314").unwrap(),
            auth_key: None,
        };
        let back = SaKeys {
            spi: 0xb011,
            key: KeyBytes::from_hex("1102030405060708090a0b0c0d0e0f1011121314").unwrap(),
            auth_key: None,
        };
        mb.rekey("t", Some(back), Some(keys), 1).unwrap();
        let tables = Arc::clone(mb.reader().get());
        let want = esp_steering::wanted(&tables);
        let new = want
            .iter()
            .find(|(k, _)| k.spi == 0xa011)
            .map(|(_, w)| w.lane);
        assert_eq!(new, Some(Some(0)), "the new SA has lane 0");
        assert!(
            want.keys().any(|k| k.spi == 0xa001),
            "the draining SA still wants its rule"
        );
        let done = steering.apply(&want, &mut nic);
        assert_eq!((done.created, done.destroyed), (1, 0));
        assert_eq!(
            steering.queue_of(want.keys().find(|k| k.spi == 0xa011).unwrap()),
            Some(0)
        );
    }

    /// B's worker `k` of two, sharing `rings` (the decrypt fan-out on).
    fn b_worker(
        k: usize,
        (net, tables): &Snapshot,
        rings: &Arc<crate::worker::SpreadRings<VecBuf>>,
    ) -> Gw {
        let ports = net.ports.len();
        let mut w = Worker::new(
            k,
            Arc::clone(net),
            Arc::clone(tables),
            VecBufPool,
            32,
            SharedNeighbors::default(),
        );
        w.set_spread(Arc::clone(rings));
        let mut g = Gw {
            w,
            tx: TxQueues::new(ports, 1 << 12),
            now: Now { ns: 1 },
            offloads: [Vec::new(), Vec::new()],
        };
        g.learn_by_arp(PROT, "10.2.0.10", HOST_B_MAC, "10.2.0.1");
        g
    }

    /// Two workers' fan-out rings with the per-CPU SA handoff on
    /// (`per_cpu_handoff = true`).
    fn handoff_rings(when: SpreadWhen) -> Arc<crate::worker::SpreadRings<VecBuf>> {
        crate::worker::SpreadRings::with_handoff(2, SpreadLate::Drop, when, true)
    }

    /// A's worker `k` seals `n` packets of its own flow (source 10.1.0.2k,
    /// each carrying its sequence number) on its per-CPU SA.
    fn sealed_by(a: &mut Gw, k: u32, from: u32, n: u32) -> Vec<Vec<u8>> {
        let frames: Vec<Vec<u8>> = (from..from + n)
            .map(|seq| {
                let mut p = udp4(&format!("10.1.0.{}", 20 + k), "10.2.0.10", 64, true, 16);
                p[28..32].copy_from_slice(&k.to_be_bytes());
                p[32..36].copy_from_slice(&seq.to_be_bytes());
                from_host_a(&p)
            })
            .collect();
        let mut esp = Vec::new();
        for chunk in frames.chunks(32) {
            esp.extend(a.rx(PROT, chunk)[UNPROT].iter().cloned());
        }
        assert_eq!(esp.len(), n as usize);
        esp
    }

    /// One poll of `gw` without a receive (its handoff and fan-out work):
    /// what it sent to the protected side.
    fn poll(gw: &mut Gw) -> Vec<Vec<u8>> {
        gw.w.tick(&mut gw.tx, gw.now);
        std::mem::take(&mut gw.take()[PROT])
    }

    /// [`flows`] of `frames`, each marked with the worker that sent it.
    fn sent_by(worker: usize, frames: &[Vec<u8>]) -> Vec<(usize, (u32, u32))> {
        flows(frames).into_iter().map(|f| (worker, f)).collect()
    }

    /// (flow, sequence) of what left B's protected port.
    fn flows(frames: &[Vec<u8>]) -> Vec<(u32, u32)> {
        frames
            .iter()
            .map(|f| {
                let (_, ip) = l3(f);
                (
                    u32::from_be_bytes(ip[28..32].try_into().unwrap()),
                    u32::from_be_bytes(ip[32..36].try_into().unwrap()),
                )
            })
            .collect()
    }

    /// The per-CPU SA handoff: B's worker 0 receives all of a per-CPU
    /// tunnel's ESP (one RX queue: RSS cannot tell its SAs apart) and
    /// hands the groups of lanes 1 and 3 whole to worker 1 (their home:
    /// lane % 2), which decrypts, forwards and counts them; lanes 0 and 2
    /// it decrypts itself. Each SA's packets leave in arrival order, from
    /// their lane's worker, nothing is lost.
    #[test]
    fn per_cpu_sas_are_handed_whole_to_their_lanes_worker_in_order() {
        let (mut a, b_snap, _) = per_cpu_pair();
        let lanes: Vec<_> = b_snap
            .1
            .inbound_sas()
            .iter()
            .map(|(spi, _, _)| {
                let slot = b_snap.1.sad.inbound(*spi, v4("192.0.2.2").into());
                (*spi, slot.and_then(|i| b_snap.1.inbound_lane(i)))
            })
            .collect();
        assert_eq!(
            lanes,
            vec![
                (0xa001, Some(0)),
                (0xa003, Some(1)),
                (0xa004, Some(2)),
                (0xa005, Some(3))
            ]
        );
        let rings = handoff_rings(SpreadWhen::Always);
        let mut b0 = b_worker(0, &b_snap, &rings);
        let mut b1 = b_worker(1, &b_snap, &rings);
        // 120 packets per A worker, interleaved in runs of 5, 13 and 7
        // (so that bursts mix the SAs in varying shares).
        let n = 120u32;
        let esp: Vec<Vec<Vec<u8>>> = (0..4)
            .map(|k| sealed_by(&mut a[k as usize], k, 0, n))
            .collect();
        let mut arrivals = Vec::new();
        let mut next = [0usize; 4];
        let runs = [5usize, 13, 7];
        let mut r = 0;
        while next.iter().any(|&i| i < n as usize) {
            for k in 0..4 {
                let take = runs[r % 3].min(n as usize - next[k]);
                arrivals.extend(esp[k][next[k]..next[k] + take].iter().cloned());
                next[k] += take;
                r += 1;
            }
        }
        // What left, by worker, in the order it left: worker 1 runs once
        // after each of worker 0's bursts, before worker 0 takes its boxes
        // back.
        let mut out: Vec<(usize, (u32, u32))> = Vec::new();
        for burst in arrivals.chunks(32) {
            out.extend(sent_by(0, &b0.rx(UNPROT, burst)[PROT]));
            out.extend(sent_by(1, &poll(&mut b1)));
            out.extend(sent_by(0, &poll(&mut b0)));
        }
        // Worker 1 returns the boxes of what it sent at its next poll.
        assert!(poll(&mut b1).is_empty() && poll(&mut b0).is_empty());
        for k in 0..4 {
            let seqs: Vec<u32> = out.iter().filter(|o| o.1 .0 == k).map(|o| o.1 .1).collect();
            assert_eq!(
                seqs,
                (0..n).collect::<Vec<_>>(),
                "lane {k}: every packet, in order"
            );
        }
        let by = |w: usize, k: u32| out.iter().filter(|o| o.0 == w && o.1 .0 == k).count();
        for (w, k) in [(1, 1), (1, 3), (0, 0), (0, 2)] {
            assert_eq!(by(w, k), n as usize, "lane {k} on worker {w}");
        }
        let (c0, c1) = (b0.w.counters(), b1.w.counters());
        assert_eq!(c0.sa_handoff_out, 2 * u64::from(n));
        assert_eq!(c1.sa_handoff_in, c0.sa_handoff_out);
        assert_eq!((c0.sa_handoff_kept, c0.spread_out, c0.spreading), (0, 0, 0));
        assert_eq!((c0.drops.total(), c1.drops.total()), (0, 0));
        assert!(c0.balanced() && c1.balanced());
        assert_eq!(b0.w.handed_off(), 0, "every box back");
    }

    /// The handoff's bookkeeping follows the SA, not its place in the
    /// snapshot: with a group of pair 3's SA out at worker 1, B's pair 2
    /// goes (a Delete), so in the next snapshot that SA has another SAD
    /// index and lane 2, whose worker is worker 0; its next group still
    /// goes to worker 1, behind the first, and only once both are back
    /// does worker 0 decrypt the SA's groups itself. In order throughout.
    #[test]
    fn a_snapshot_change_does_not_let_a_group_overtake_its_handed_ones() {
        let (mut a, b_snap, mut mb) = per_cpu_pair();
        let rings = handoff_rings(SpreadWhen::Always);
        let mut b0 = b_worker(0, &b_snap, &rings);
        let mut b1 = b_worker(1, &b_snap, &rings);
        let esp = sealed_by(&mut a[3], 3, 0, 48);
        let mut out: Vec<(usize, (u32, u32))> = Vec::new();
        out.extend(sent_by(0, &b0.rx(UNPROT, &esp[..16])[PROT]));
        assert_eq!(b0.w.handed_off(), 1, "pair 3's group at worker 1");
        let slot = |t: &Tables| t.sad.inbound(0xa005, v4("192.0.2.2").into()).unwrap();
        let before = slot(&b_snap.1);
        mb.remove_extra_pair("t", 0xa004, 2).unwrap();
        let now = Arc::clone(mb.reader().get());
        assert_ne!(slot(&now), before, "the SA moved in the SAD");
        assert_eq!(now.inbound_lane(slot(&now)), Some(2));
        b0.w.set_tables(Arc::clone(&now));
        b1.w.set_tables(Arc::clone(&now));
        out.extend(sent_by(0, &b0.rx(UNPROT, &esp[16..32])[PROT]));
        assert_eq!(b0.w.handed_off(), 2, "behind the first, at worker 1");
        while b0.w.handed_off() != 0 {
            out.extend(sent_by(1, &poll(&mut b1)));
            assert!(poll(&mut b0).is_empty());
        }
        out.extend(sent_by(0, &b0.rx(UNPROT, &esp[32..])[PROT]));
        assert_eq!(
            b0.w.counters().sa_handoff_out,
            32,
            "the last group decrypted by worker 0"
        );
        let seqs: Vec<u32> = out.iter().map(|o| o.1 .1).collect();
        assert_eq!(seqs, (0..48).collect::<Vec<_>>(), "{out:?}");
        assert!(out[..32].iter().all(|o| o.0 == 1) && out[32..].iter().all(|o| o.0 == 0));
    }

    /// A per-CPU pair's inbound SA replaced by a rekey keeps its pair's
    /// lane while it drains (before, a draining SA was lane 0): what the
    /// peer still sends on it is handed to the worker its pair's traffic
    /// went to, as is what comes on the new SA. Once the extra pairs are
    /// gone, nothing has a lane.
    #[test]
    fn a_draining_per_cpu_sa_keeps_its_lane() {
        let (mut a, (net_b, _), mut mb) = per_cpu_pair();
        let new_keys = SaKeys {
            spi: 0xa105,
            key: KeyBytes::from_hex("00112233445566778899aabbccddeeff01020315").unwrap(),
            auth_key: None,
        };
        mb.rekey_extra_inbound("t", 0xa005, new_keys, 1).unwrap();
        let now = Arc::clone(mb.reader().get());
        let lane = |spi: u32| {
            let slot = now.sad.inbound(spi, v4("192.0.2.2").into()).unwrap();
            now.inbound_lane(slot)
        };
        assert_eq!((lane(0xa005), lane(0xa105)), (Some(3), Some(3)));
        assert_eq!(
            (lane(0xa001), lane(0xa003), lane(0xa004)),
            (Some(0), Some(1), Some(2))
        );
        // A still sends on the old SA: worker 1 (lane 3 of 2 workers) gets it.
        let rings = handoff_rings(SpreadWhen::Always);
        let b_snap = (net_b, now);
        let mut b0 = b_worker(0, &b_snap, &rings);
        let mut b1 = b_worker(1, &b_snap, &rings);
        let esp = sealed_by(&mut a[3], 3, 0, 16);
        assert!(b0.rx(UNPROT, &esp)[PROT].is_empty());
        let out = sent_by(1, &poll(&mut b1));
        assert_eq!(out, (0..16).map(|s| (1, (3, s))).collect::<Vec<_>>());
        // Every extra pair gone: the tunnel is not per-CPU any more, its
        // draining SA's old pair number notwithstanding.
        for spi in [0xa003, 0xa004, 0xa105] {
            mb.remove_extra_pair("t", spi, 2).unwrap();
        }
        let now = Arc::clone(mb.reader().get());
        let lane = |spi: u32| {
            let slot = now.sad.inbound(spi, v4("192.0.2.2").into()).unwrap();
            now.inbound_lane(slot)
        };
        assert_eq!((lane(0xa001), lane(0xa005)), (None, None));
    }

    /// The fan-out's reorder stages follow the SA, not its SAD index:
    /// with two parts of pair 3's SA out at worker 1 (its inbox full), B's
    /// pair 2 goes (a Delete), so in the next snapshot the SA has another
    /// SAD index. Its next group, which worker 0 decrypts itself (no
    /// worker has room), still waits behind the two parts in the SA's
    /// stage. (Kept by SAD index, the group found a stage with nothing
    /// outstanding, took the direct path and left first.)
    #[test]
    fn a_snapshot_change_does_not_let_a_group_overtake_its_parts_out() {
        let (mut a, b_snap, mut mb) = per_cpu_pair();
        let rings = crate::worker::SpreadRings::new(2);
        let mut b0 = b_worker(0, &b_snap, &rings);
        let mut b1 = b_worker(1, &b_snap, &rings);
        let esp = sealed_by(&mut a[3], 3, 0, 48);
        let mut out = Vec::new();
        out.extend(b0.rx(UNPROT, &esp[..16])[PROT].iter().cloned());
        out.extend(b0.rx(UNPROT, &esp[16..32])[PROT].iter().cloned());
        assert_eq!(b0.w.counters().spread_out, 32, "two parts at worker 1");
        let slot = |t: &Tables| t.sad.inbound(0xa005, v4("192.0.2.2").into()).unwrap();
        let before = slot(&b_snap.1);
        mb.remove_extra_pair("t", 0xa004, 2).unwrap();
        let now = Arc::clone(mb.reader().get());
        assert_ne!(slot(&now), before, "the SA moved in the SAD");
        b0.w.set_tables(Arc::clone(&now));
        b1.w.set_tables(now);
        out.extend(b0.rx(UNPROT, &esp[32..])[PROT].iter().cloned());
        assert!(out.is_empty(), "the third group waits for the first two");
        assert_eq!(b0.w.counters().spread_kept, 0);
        while b0.w.counters().spreading != 0 {
            assert!(poll(&mut b1).is_empty());
            out.extend(poll(&mut b0));
        }
        assert_eq!(flows(&out), (0..48).map(|s| (3, s)).collect::<Vec<_>>());
        let c = b0.w.counters();
        assert_eq!((c.spread_out, b1.w.counters().spread_in), (32, 32));
        assert!(c.balanced() && c.drops.total() == 0, "{c:?}");
    }

    /// A part given up (its bound passed) whose SA's stage is dropped at a
    /// switch (nothing outstanding in it any more) and that comes back
    /// after the SA's next part got a new stage whose tickets start at 0
    /// (a new one: the dropped stage went to another SA spread first):
    /// late (dropped as `reorder_late`), not taken for the new stage's
    /// ticket 0, whose own part leaves.
    #[test]
    fn a_part_back_after_its_stage_was_dropped_is_late() {
        use crate::worker::spread_consts::MAX_WAIT_NS;
        let (mut a, b_snap, mut mb) = per_cpu_pair();
        let rings = crate::worker::SpreadRings::new(2);
        let mut b0 = b_worker(0, &b_snap, &rings);
        let mut b1 = b_worker(1, &b_snap, &rings);
        let esp = sealed_by(&mut a[3], 3, 0, 64);
        let other = sealed_by(&mut a[1], 1, 0, 32);
        assert!(b0.rx(UNPROT, &esp[..32])[PROT].is_empty());
        // Worker 1 takes the part and stalls past the bound.
        let stalled = rings.seize(1);
        b0.now = Now {
            ns: b0.now.ns + MAX_WAIT_NS + 1,
        };
        assert!(poll(&mut b0).is_empty());
        assert_eq!(b0.w.counters().spreading, 32, "given up, not back");
        mb.remove_extra_pair("t", 0xa004, 2).unwrap();
        let now = Arc::clone(mb.reader().get());
        b0.w.set_tables(Arc::clone(&now));
        b1.w.set_tables(now);
        // Pair 1's SA is spread first and reuses the dropped stage.
        assert!(b0.rx(UNPROT, &other)[PROT].is_empty());
        assert!(poll(&mut b1).is_empty());
        let out = poll(&mut b0);
        assert_eq!(flows(&out), (0..32).map(|s| (1, s)).collect::<Vec<_>>());
        // Worker 1 resumes: the old part is ahead of pair 3's next one.
        rings.unseize(1, stalled);
        assert!(b0.rx(UNPROT, &esp[32..])[PROT].is_empty());
        assert_eq!(b0.w.counters().spread_out, 96);
        assert!(poll(&mut b1).is_empty());
        let out = poll(&mut b0);
        assert_eq!(flows(&out), (32..64).map(|s| (3, s)).collect::<Vec<_>>());
        let c = b0.w.counters();
        assert_eq!(c.drops.get(DropReason::ReorderLate), 32);
        assert_eq!(c.drops.total(), 32, "{:?}", c.drops);
        assert!(c.balanced() && c.spreading == 0, "{c:?}");
    }

    /// Without `per_cpu_handoff` a per-CPU SA is spread like any SA: its
    /// groups cut into parts for the other workers, through its reorder
    /// stage, nothing handed off whole.
    #[test]
    fn without_the_handoff_per_cpu_sas_go_through_the_fan_out() {
        let (mut a, b_snap, _) = per_cpu_pair();
        let rings = crate::worker::SpreadRings::new(2);
        let mut b0 = b_worker(0, &b_snap, &rings);
        let mut b1 = b_worker(1, &b_snap, &rings);
        let esp = sealed_by(&mut a[1], 1, 0, 64);
        let mut out = Vec::new();
        for burst in esp.chunks(32) {
            out.extend(b0.rx(UNPROT, burst)[PROT].iter().cloned());
            assert!(
                poll(&mut b1).is_empty(),
                "worker 0 sends what the fan-out decrypts"
            );
            out.extend(poll(&mut b0));
        }
        assert_eq!(flows(&out), (0..64).map(|s| (1, s)).collect::<Vec<_>>());
        let (c0, c1) = (b0.w.counters(), b1.w.counters());
        assert_eq!((c0.sa_handoff_out, c1.sa_handoff_in), (0, 0));
        assert_eq!((c0.spread_out, c1.spread_in), (64, 64));
    }

    /// With `spread_decrypt = "auto"`, a receiving worker that keeps up
    /// alone (no receive fills a burst) hands nothing off: it decrypts
    /// every lane itself (counted as `spread_unneeded`).
    #[test]
    fn a_receiver_that_keeps_up_hands_nothing_off() {
        let (mut a, b_snap, _) = per_cpu_pair();
        let rings = handoff_rings(SpreadWhen::Behind);
        let mut b0 = b_worker(0, &b_snap, &rings);
        let esp = sealed_by(&mut a[1], 1, 0, 40);
        let mut out = Vec::new();
        for burst in esp.chunks(8) {
            out.extend(b0.rx(UNPROT, burst)[PROT].iter().cloned());
            b0.w.tick(&mut b0.tx, b0.now);
        }
        assert_eq!(flows(&out), (0..40).map(|s| (1, s)).collect::<Vec<_>>());
        let c = b0.w.counters();
        assert_eq!((c.sa_handoff_out, c.spread_unneeded), (0, 40));
    }

    /// A full handoff: while B's worker 1 does not run, worker 0 hands
    /// lane 1's groups (whole bursts) on until the handoff's budget is
    /// spent; the next group
    /// of lane 1 is dropped (`sa_handoff_full`: decrypting it here would
    /// overtake the queued ones), one of lane 3 (worker 1's too, nothing
    /// of it queued) is decrypted by worker 0 itself (`sa_handoff_kept`).
    /// Once worker 1 runs, everything queued leaves in order and lane 1
    /// is handed off again.
    #[test]
    fn a_full_handoff_drops_only_what_would_overtake() {
        let (mut a, b_snap, _) = per_cpu_pair();
        let rings = handoff_rings(SpreadWhen::Always);
        let mut b0 = b_worker(0, &b_snap, &rings);
        let mut b1 = b_worker(1, &b_snap, &rings);
        // Whole bursts: the handoff's budget is as many packets as the
        // fan-out may hold, its job boxes' worth of bursts.
        let g = 32u32;
        let boxes = crate::worker::spread_consts::MAX_JOBS_PER_WORKER * 2;
        let lane1 = sealed_by(&mut a[1], 1, 0, g * (boxes as u32 + 2));
        let lane3 = sealed_by(&mut a[3], 3, 0, 4);
        let mut out0 = Vec::new();
        let chunks: Vec<&[Vec<u8>]> = lane1.chunks(g as usize).collect();
        for c in &chunks[..boxes] {
            out0.extend(b0.rx(UNPROT, c)[PROT].iter().cloned());
            b0.w.tick(&mut b0.tx, b0.now);
        }
        assert_eq!(b0.w.handed_off(), boxes as u64);
        // No box left for it: lane 1's next group would overtake, lane 3's
        // would not.
        out0.extend(b0.rx(UNPROT, chunks[boxes])[PROT].iter().cloned());
        assert_eq!(b0.drops(DropReason::SaHandoffFull), u64::from(g));
        out0.extend(b0.rx(UNPROT, &lane3)[PROT].iter().cloned());
        assert_eq!(b0.w.counters().sa_handoff_kept, 4);
        assert_eq!(flows(&out0), (0..4).map(|s| (3, s)).collect::<Vec<_>>());
        let mut out1 = Vec::new();
        while b0.w.handed_off() != 0 {
            out1.extend(poll(&mut b1));
            assert!(poll(&mut b0).is_empty());
        }
        // The last group goes to worker 1 again.
        b0.rx(UNPROT, chunks[boxes + 1]);
        out1.extend(poll(&mut b1));
        let lost = g * boxes as u32..g * (boxes as u32 + 1);
        let expect: Vec<(u32, u32)> = (0..g * (boxes as u32 + 2))
            .filter(|s| !lost.contains(s))
            .map(|s| (1, s))
            .collect();
        assert_eq!(flows(&out1), expect);
        let (c0, c1) = (b0.w.counters(), b1.w.counters());
        assert_eq!(
            (c0.sa_handoff_out, c1.sa_handoff_in),
            (
                u64::from(g) * (boxes as u64 + 1),
                u64::from(g) * (boxes as u64 + 1)
            )
        );
        assert!(c0.balanced() && c1.balanced(), "{c0:?} {c1:?}");
    }
}

/// The receive counters, added once per burst: every packet of it and its
/// bytes, the runt and a dropped one included.
#[test]
fn receive_counters_cover_the_whole_burst() {
    let mut a = ready_a();
    let before = a.w.counters().clone();
    let frames = vec![
        from_host_a(&udp4("10.1.0.10", "10.2.0.10", 64, true, 100)),
        vec![1, 2, 3],
        from_host_a(&udp4("10.1.0.10", "10.2.0.10", 64, true, 300)),
        from_host_a(&udp4("10.1.0.10", "10.2.0.10", 1, true, 10)),
    ];
    let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum();
    a.rx(PROT, &frames);
    let c = a.w.counters();
    assert_eq!(c.rx - before.rx, 4);
    assert_eq!(c.ports[PROT].rx_packets - before.ports[PROT].rx_packets, 4);
    assert_eq!(c.ports[PROT].rx_bytes - before.ports[PROT].rx_bytes, bytes);
    assert_eq!(c.ports[UNPROT].rx_packets, before.ports[UNPROT].rx_packets);
    // An empty burst counts nothing.
    a.rx(PROT, &[]);
    assert_eq!(
        a.w.counters().ports[PROT].rx_bytes - before.ports[PROT].rx_bytes,
        bytes
    );
}

#[test]
fn stats_json_has_the_contract_keys() {
    let mut a = ready_a();
    a.rx(
        PROT,
        &[
            from_host_a(&udp4("10.1.0.10", "10.2.0.10", 64, true, 100)),
            vec![1, 2, 3],
        ],
    );
    let stats = crate::stats::Stats {
        seconds: 1.5,
        workers: vec![a.w.counters().clone()],
        nic: vec![None, None],
    };
    let j = stats.to_json(a.w.net(), a.w.tables());
    let ports = j["ports"].as_array().unwrap();
    assert_eq!(ports[0]["name"], "prot");
    assert_eq!(ports[0]["rx_packets"], 3); // an ARP request, the packet, the runt
    assert_eq!(ports[0]["rx_dropped"], 1);
    assert_eq!(ports[1]["tx_packets"], 2); // the ARP reply and the ESP packet
    let sas = j["sas"].as_array().unwrap();
    assert_eq!(sas.len(), 2);
    assert_eq!(
        (sas[0]["dir"].as_str(), sas[0]["spi"].as_u64()),
        (Some("out"), Some(0xa001))
    );
    assert_eq!(sas[0]["packets"], 1);
    assert_eq!(sas[1]["dir"], "in");
    assert_eq!(j["drops"]["malformed"], 1);
    assert_eq!(j["drops"].as_object().unwrap().len(), DropReason::COUNT);
    assert_eq!(j["totals"]["balanced"], true);
    assert_eq!(j["workers"][0]["rx"], 4);
    assert_eq!(j["workers"][0]["panics"], 0);
    assert_eq!(j["totals"]["worker_panics"], 0);
}

/// `mss_clamp`: SYNs are clamped entering the tunnel at A and leaving it
/// at A; B (no clamp) decrypts what A sent, so the clamp is read after a
/// full encap/decap round trip (B runs the same ESP and worker code as A:
/// a consistency check, not an independent one). The expected values are
/// RFC 4303 arithmetic written out here, not the clamp's own `inner_mtu`.
mod mss_clamp {
    use super::*;
    use espgw_control::config::MssClamp;
    use espgw_wire::{tcp, TcpPacket};

    use espgw_control::live::mss_limits;
    use espgw_control::tables::{MssLimits, TunnelId};

    /// The largest inner packet an aes128gcm16 tunnel over IPv4 without
    /// UDP encapsulation (the test configs' tunnel) carries at outer MTU
    /// `mtu`, from RFC 4303 rather than from the code under test: the outer
    /// packet is 20 (IPv4) + 8 (ESP header) + 8 (IV, RFC 4106) + the inner
    /// packet and 2 trailer bytes padded to a multiple of 4 + 16 (ICV), so
    /// inner + 2 is the largest multiple of 4 within mtu - 52.
    fn gcm_v4_inner_mtu(mtu: usize) -> usize {
        (mtu - 20 - 8 - 8 - 16) / 4 * 4 - 2
    }

    #[test]
    fn inner_mtu_oracle_by_hand() {
        // docs/config.md's worked example: 1446 at 1500, 8946 at 9000.
        assert_eq!(gcm_v4_inner_mtu(1500), 1446);
        assert_eq!(gcm_v4_inner_mtu(9000), 8946);
        // 1501..=1503 leave a padding step unused.
        assert_eq!(gcm_v4_inner_mtu(1503), 1446);
        assert_eq!(gcm_v4_inner_mtu(1504), 1450);
    }

    /// Gateway A with `mss_clamp = <clamp>` in its tunnel, hosts known.
    fn ready_a_with(clamp: &str) -> Gw {
        let mut a = Gw::new(tables_from(
            config_text(false, "10.1.0.0/24", &format!("mss_clamp = {clamp}")),
            [A_PROT_MAC, A_UNPROT_MAC],
        ));
        a.learn_by_arp(PROT, "10.1.0.10", HOST_A_MAC, "10.1.0.1");
        a.learn_by_arp(UNPROT, "192.0.2.2", B_UNPROT_MAC, "192.0.2.1");
        a
    }

    /// IPv4/TCP with `flags` and, if given, an MSS option after a NOP (the
    /// value at an odd offset) then SAckOK, NOP, NOP; checksum filled.
    pub(super) fn tcp4(src: &str, dst: &str, flags: u8, mss: Option<u16>) -> Vec<u8> {
        let mut seg = vec![0u8; 20];
        seg[0..2].copy_from_slice(&40000u16.to_be_bytes());
        seg[2..4].copy_from_slice(&5201u16.to_be_bytes());
        seg[4..8].copy_from_slice(&0x0102_0304u32.to_be_bytes());
        seg[13] = flags;
        seg[14..16].copy_from_slice(&64240u16.to_be_bytes());
        if let Some(m) = mss {
            let [hi, lo] = m.to_be_bytes();
            seg.extend_from_slice(&[1, 2, 4, hi, lo, 4, 2, 1]);
        }
        seg[12] = ((seg.len() / 4) as u8) << 4;
        TcpPacket::new_checked(&mut seg[..])
            .unwrap()
            .fill_checksum_v4(v4(src), v4(dst));
        ipv4_packet(src, dst, 64, true, ip_protocol::TCP, &seg)
    }

    /// The MSS option of the IPv4/TCP packet in `frame`, after checking
    /// its TCP checksum.
    pub(super) fn delivered_mss(frame: &[u8]) -> Option<u16> {
        let (_, ip) = l3(frame);
        let ip = Ipv4Packet::new_checked(&ip[..]).unwrap();
        let t = TcpPacket::new_checked(ip.payload()).unwrap();
        assert!(t.verify_checksum_v4(ip.src_addr(), ip.dst_addr()));
        t.mss()
    }

    /// The inner packet B delivers to host B for `inner` sent by host A.
    fn through_a_and_b(a: &mut Gw, b: &mut Gw, inner: &[u8]) -> Vec<u8> {
        let out = a.rx(PROT, &[from_host_a(inner)]);
        assert_eq!(out[UNPROT].len(), 1, "ESP out of A");
        let out = b.rx(UNPROT, &out[UNPROT]);
        assert_eq!(out[PROT].len(), 1, "B delivers");
        out[PROT][0].clone()
    }

    #[test]
    fn syn_into_the_tunnel_leaves_clamped_to_auto() {
        let mut a = ready_a_with("\"auto\"");
        let mut b = ready_b();
        // "auto": the tunnel's inner MTU at the outer MTU of 1500, less 40
        // bytes of IPv4 and TCP headers (1406).
        let auto = (gcm_v4_inner_mtu(1500) - 40) as u16;
        assert_eq!(
            a.w.tables().tunnel(TunnelId(0)).unwrap().mss_clamp,
            Some(MssLimits {
                v4: auto,
                v6: auto - 20
            })
        );

        let syn = tcp4("10.1.0.10", "10.2.0.10", tcp::flags::SYN, Some(1460));
        let got = through_a_and_b(&mut a, &mut b, &syn);
        assert_eq!(delivered_mss(&got), Some(auto));
        assert_eq!(a.w.counters().mss_clamped, 1);
        assert_eq!(b.w.counters().mss_clamped, 0);
        // Only the MSS value and the TCP checksum changed (and the TTL).
        let (_, got_ip) = l3(&got);
        let diff: Vec<usize> = (0..syn.len()).filter(|&i| syn[i] != got_ip[i]).collect();
        assert!(
            diff.iter()
                .all(|&i| matches!(i, 8 | 10 | 11 | 36 | 37 | 43 | 44)),
            "{diff:?}"
        );

        // In the stats JSON.
        let stats = crate::stats::Stats {
            seconds: 1.0,
            workers: vec![a.w.counters().clone()],
            nic: vec![None, None],
        };
        let j = stats.to_json(a.w.net(), a.w.tables());
        assert_eq!(j["totals"]["mss_clamped"], 1);
        assert_eq!(j["workers"][0]["mss_clamped"], 1);
    }

    #[test]
    fn non_syn_and_small_mss_pass_unchanged() {
        let mut a = ready_a_with("\"auto\"");
        let mut b = ready_b();
        let ttl_minus_two = |p: &[u8]| {
            let mut p = p.to_vec();
            let mut ip = Ipv4Packet::new_checked(&mut p[..]).unwrap();
            ip.set_ttl(62);
            ip.fill_checksum();
            p
        };
        for inner in [
            // An ACK (which no stack sends with an MSS option): not a SYN.
            tcp4("10.1.0.10", "10.2.0.10", tcp::flags::ACK, Some(1460)),
            tcp4("10.1.0.10", "10.2.0.10", tcp::flags::SYN, Some(1200)),
            tcp4("10.1.0.10", "10.2.0.10", tcp::flags::SYN, None),
            udp4("10.1.0.10", "10.2.0.10", 64, true, 100),
        ] {
            let got = through_a_and_b(&mut a, &mut b, &inner);
            assert_eq!(l3(&got).1, ttl_minus_two(&inner));
        }
        assert_eq!(a.w.counters().mss_clamped, 0);
    }

    #[test]
    fn syn_ack_out_of_the_tunnel_is_clamped_too() {
        // B does not clamp; A clamps the far side's SYN-ACK after decap.
        let mut a = ready_a_with("1300");
        let mut b = ready_b();
        let synack = tcp4(
            "10.2.0.10",
            "10.1.0.10",
            tcp::flags::SYN | tcp::flags::ACK,
            Some(8960),
        );
        let out = b.rx(
            PROT,
            &[eth(B_PROT_MAC, HOST_B_MAC, ethertype::IPV4, &synack)],
        );
        assert_eq!(out[UNPROT].len(), 1, "ESP out of B");
        let esp = out[UNPROT][0].clone();
        let out = a.rx(UNPROT, &[esp]);
        assert_eq!(out[PROT].len(), 1, "A delivers");
        assert_eq!(delivered_mss(&out[PROT][0]), Some(1300));
        assert_eq!(a.w.counters().mss_clamped, 1);
    }

    /// `text` with IPv6 prefixes added to its tunnel's selectors.
    fn with_v6_selectors(text: String, local: (&str, &str), remote: (&str, &str)) -> String {
        let add = |t: String, key: &str, (v4, v6): (&str, &str)| {
            with_replaced(
                &t,
                &format!("{key} = [\"{v4}\"]"),
                &format!("{key} = [\"{v4}\", \"{v6}\"]"),
            )
        };
        add(add(text, "local_ts", local), "remote_ts", remote)
    }

    fn with_replaced(text: &str, from: &str, to: &str) -> String {
        assert!(text.contains(from), "{from:?} not in config");
        text.replacen(from, to, 1)
    }

    #[test]
    fn ipv6_syn_is_clamped_to_auto_less_60() {
        let a_text = with_v6_selectors(
            config_text(false, "10.1.0.0/24", "mss_clamp = \"auto\""),
            ("10.1.0.0/24", "fd00:1::/64"),
            ("10.2.0.0/24", "fd00:2::/64"),
        );
        // B knows host B statically (no ND in this test).
        let b_text = with_v6_selectors(
            config_text(
                true,
                "",
                "[[neighbor]]\naddress = \"fd00:2::10\"\nmac = \"02:00:00:00:0b:0b\"\nport = \"prot\"",
            ),
            ("10.2.0.0/24", "fd00:2::/64"),
            ("10.1.0.0/24", "fd00:1::/64"),
        );
        let mut a = Gw::new(tables_from(a_text, [A_PROT_MAC, A_UNPROT_MAC]));
        a.learn_by_arp(UNPROT, "192.0.2.2", B_UNPROT_MAC, "192.0.2.1");
        let mut b = Gw::new(tables_from(b_text, [B_PROT_MAC, B_UNPROT_MAC]));
        b.learn_by_arp(UNPROT, "192.0.2.1", A_UNPROT_MAC, "192.0.2.2");

        let (src, dst) = (v6("fd00:1::10"), v6("fd00:2::10"));
        let mut seg = vec![0u8; 20];
        seg[13] = tcp::flags::SYN;
        seg.extend_from_slice(&[2, 4, 0x23, 0x28]); // MSS 9000
        seg[12] = 6 << 4;
        TcpPacket::new_checked(&mut seg[..])
            .unwrap()
            .fill_checksum_v6(src, dst);
        let mut ip6 = vec![0x60, 0, 0, 0, 0, seg.len() as u8, ip_protocol::TCP, 64];
        ip6.extend_from_slice(&src.octets());
        ip6.extend_from_slice(&dst.octets());
        ip6.extend_from_slice(&seg);

        let out = a.rx(PROT, &[eth(A_PROT_MAC, HOST_A_MAC, ethertype::IPV6, &ip6)]);
        assert_eq!(out[UNPROT].len(), 1, "ESP out of A");
        let out = b.rx(UNPROT, &out[UNPROT]);
        assert_eq!(out[PROT].len(), 1, "B delivers");
        let f = EthernetFrame::new_checked(&out[PROT][0][..]).unwrap();
        assert_eq!(f.dst_addr(), HOST_B_MAC);
        let ip = Ipv6Packet::new_checked(f.payload()).unwrap();
        let t = TcpPacket::new_checked(ip.payload()).unwrap();
        assert!(t.verify_checksum_v6(src, dst));
        // The inner MTU less 40 bytes of IPv6 and 20 of TCP (1386).
        assert_eq!(t.mss(), Some((gcm_v4_inner_mtu(1500) - 60) as u16));
        assert_eq!(a.w.counters().mss_clamped, 1);
    }

    #[test]
    fn limits_follow_the_config() {
        assert_eq!(
            mss_limits(MssClamp::Fixed(1200), None, 1500),
            Some(MssLimits { v4: 1200, v6: 1200 })
        );
        // "auto" needs the outbound SA's overhead.
        assert_eq!(mss_limits(MssClamp::Auto, None, 1500), None);
        let a = ready_a_with("\"auto\"");
        let out = a.w.tables().outbound_sa(TunnelId(0)).cloned().unwrap();
        let at_9000 = mss_limits(MssClamp::Auto, Some(&out), 9000).unwrap();
        let at_1500 = mss_limits(MssClamp::Auto, Some(&out), 1500).unwrap();
        assert_eq!(usize::from(at_1500.v4), gcm_v4_inner_mtu(1500) - 40);
        assert_eq!(usize::from(at_1500.v6), gcm_v4_inner_mtu(1500) - 60);
        assert_eq!(usize::from(at_9000.v4), gcm_v4_inner_mtu(9000) - 40);
        assert_eq!(usize::from(at_9000.v6), gcm_v4_inner_mtu(9000) - 60);
        // Without mss_clamp nothing is clamped.
        assert_eq!(
            ready_a().w.tables().tunnel(TunnelId(0)).unwrap().mss_clamp,
            None
        );
    }
}

/// An ARP request padded far past its body is answered with a minimum-size
/// frame, not one as long as the request (the worker fuzz target found
/// replies of 1886 bytes, above the port's MTU).
#[test]
fn a_padded_arp_request_gets_a_minimum_size_reply() {
    let mut a = Gw::a();
    let mut req = arp_request(HOST_A_MAC, v4("10.1.0.10"), v4("10.1.0.1"));
    req.resize(1886, 0);
    let out = a.rx(PROT, &[req]);
    assert_eq!(out[PROT].len(), 1);
    assert_eq!(out[PROT][0].len(), 60);
    let (_, body) = l3(&out[PROT][0]);
    let r = ArpRepr::parse(&ArpPacket::new_checked(&body[..]).unwrap()).unwrap();
    assert_eq!((r.sender_mac, r.sender_ip), (A_PROT_MAC, v4("10.1.0.1")));
}

/// The SPD names tunnels by id; a snapshot without that tunnel (not one
/// `Tables::from_view` builds, which has every tunnel its SPD names)
/// discards its traffic as a policy would, never in the clear.
#[test]
fn protect_to_a_tunnel_the_snapshot_lacks_is_a_policy_discard() {
    let mut a = ready_a();
    let t = Arc::clone(a.w.tables());
    let without = Tables::new(Arc::clone(&t.spd), t.sad.to_builder().build(), Vec::new());
    a.w.set_tables(Arc::new(without));
    let out = a.rx(
        PROT,
        &[from_host_a(&udp4("10.1.0.10", "10.2.0.10", 64, true, 40))],
    );
    assert!(out.iter().all(Vec::is_empty));
    assert_eq!(a.drops(DropReason::PolicyDiscard), 1);
    assert_eq!(a.drops(DropReason::NoPolicy), 0);
}

/// The punt stage (worker/punt.rs): IKE for our addresses to the control
/// thread's ring, NAT-T keepalives dropped, ESP in UDP unchanged, and
/// what the control thread queues sent as IP/UDP to the peer.
mod punt {
    use super::*;
    use espgw_control::ike::{PuntRings, Transmit};
    use espgw_wire::UdpPacket;
    use std::net::SocketAddr;

    fn udp_frame(
        dst_mac: MacAddr,
        src: &str,
        dst: &str,
        ports: (u16, u16),
        data: &[u8],
    ) -> Vec<u8> {
        let mut u = vec![0u8; 8 + data.len()];
        UdpRepr {
            src_port: ports.0,
            dst_port: ports.1,
            payload_len: data.len() as u16,
        }
        .emit(&mut u)
        .unwrap();
        u[8..].copy_from_slice(data);
        UdpPacket::new_checked(&mut u[..])
            .unwrap()
            .fill_checksum_v4(v4(src), v4(dst));
        eth(
            dst_mac,
            B_UNPROT_MAC,
            ethertype::IPV4,
            &ipv4_packet(src, dst, 64, false, ip_protocol::UDP, &u),
        )
    }

    fn sock(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn ike(ports: (u16, u16), data: &[u8]) -> Vec<u8> {
        udp_frame(A_UNPROT_MAC, "192.0.2.2", "192.0.2.1", ports, data)
    }

    #[test]
    fn ike_on_500_and_4500_is_punted_keepalives_dropped_a_full_ring_counted() {
        let mut a = ready_a();
        let rings = PuntRings::new(2);
        a.w.set_punt(Arc::clone(&rings));
        let init = b"IKE_SA_INIT, as far as the worker cares";
        let mut marked = vec![0u8; 4];
        marked.extend_from_slice(b"IKE_AUTH");
        let out = a.rx(UNPROT, &[ike((500, 500), init), ike((4500, 4500), &marked)]);
        assert!(out.iter().all(|o| o.is_empty()), "IKE is not forwarded");
        let d = rings.receive().unwrap();
        assert_eq!(
            (d.src, d.dst, d.payload()),
            (sock("192.0.2.2:500"), sock("192.0.2.1:500"), &init[..])
        );
        let d = rings.receive().unwrap();
        assert_eq!(
            (d.src, d.dst, d.payload()),
            (sock("192.0.2.2:4500"), sock("192.0.2.1:4500"), &marked[..])
        );
        assert!(rings.receive().is_none());
        assert_eq!(a.w.counters().ike_punted, 2);
        // RFC 3948 2.2: a keepalive is ignored (counted).
        a.rx(UNPROT, &[ike((4500, 4500), &[0xff])]);
        assert_eq!(a.drops(DropReason::NatKeepalive), 1);
        assert!(rings.receive().is_none());
        // A flood: the ring takes two, the rest is dropped and counted.
        let flood: Vec<Vec<u8>> = (0..5).map(|_| ike((500, 500), init)).collect();
        a.rx(UNPROT, &flood);
        assert_eq!(a.drops(DropReason::PuntFull), 3);
        // IKE on the protected port is not the control plane's business.
        let from_host = udp_frame(A_PROT_MAC, "10.1.0.10", "10.1.0.1", (500, 500), init);
        let unsupported = a.drops(DropReason::LocalUnsupported);
        a.rx(PROT, &[from_host]);
        assert_eq!(a.drops(DropReason::LocalUnsupported), unsupported + 1);
        // A truncated UDP header length: malformed, not punted.
        while rings.receive().is_some() {}
        let mut bad = ike((500, 500), init);
        bad[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&4u16.to_be_bytes());
        let malformed = a.drops(DropReason::Malformed);
        a.rx(UNPROT, &[bad]);
        assert_eq!(a.drops(DropReason::Malformed), malformed + 1);
        assert!(rings.receive().is_none());
    }

    /// A punted datagram's UDP checksum is verified: a damaged one is
    /// counted, not punted; none at all (0) is allowed over IPv4.
    #[test]
    fn ike_with_a_wrong_udp_checksum_is_dropped_and_counted() {
        let mut a = ready_a();
        let rings = PuntRings::new(4);
        a.w.set_punt(Arc::clone(&rings));
        let good = ike((500, 500), b"IKE_SA_INIT");
        let ck = 14 + 20 + 6;
        let mut bad = good.clone();
        bad[ck] ^= 0x40;
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        let mut none = good.clone();
        none[ck..ck + 2].copy_from_slice(&[0, 0]);
        let mut marked = vec![0u8; 4];
        marked.extend_from_slice(b"IKE_AUTH");
        let mut bad4500 = ike((4500, 4500), &marked);
        bad4500[ck + 1] ^= 1;
        a.rx(UNPROT, &[bad, flipped, bad4500]);
        assert_eq!(a.drops(DropReason::PuntBadChecksum), 3);
        assert!(rings.receive().is_none());
        a.rx(UNPROT, &[good, none]);
        assert_eq!(a.w.counters().ike_punted, 2);
        assert_eq!(a.drops(DropReason::PuntBadChecksum), 3);
    }

    #[test]
    fn without_an_ike_driver_ike_is_local_unsupported() {
        let mut a = ready_a();
        a.rx(UNPROT, &[ike((500, 500), b"x")]);
        assert_eq!(a.drops(DropReason::LocalUnsupported), 1);
        assert_eq!(a.w.counters().ike_punted, 0);
    }

    #[test]
    fn queued_transmits_leave_the_unprotected_port_as_udp_v4() {
        let mut a = ready_a();
        let rings = PuntRings::new(4);
        a.w.set_punt(Arc::clone(&rings));
        let payload = [0u8, 0, 0, 0, 1, 2, 3, 4, 5];
        assert!(rings.send(&Transmit {
            src: sock("192.0.2.1:4500"),
            dst: sock("192.0.2.2:4500"),
            payload: payload.to_vec(),
        }));
        a.now = Now { ns: 2 };
        a.w.tick(&mut a.tx, a.now);
        let out = a.take();
        assert_eq!(out[UNPROT].len(), 1);
        let (e, ip) = l3(&out[UNPROT][0]);
        assert_eq!(
            (e.src_addr, e.dst_addr, e.ethertype),
            (A_UNPROT_MAC, B_UNPROT_MAC, ethertype::IPV4)
        );
        let ip = Ipv4Packet::new_checked(&ip[..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(
            (ip.src_addr(), ip.dst_addr(), ip.protocol()),
            (v4("192.0.2.1"), v4("192.0.2.2"), ip_protocol::UDP)
        );
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        assert!(udp.verify_checksum_v4(ip.src_addr(), ip.dst_addr()));
        assert_eq!((udp.src_port(), udp.dst_port()), (4500, 4500));
        assert_eq!(udp.payload(), &payload);
        assert_eq!(a.w.counters().ike_sent, 1);
        assert_eq!(rings.transmit_pending(), 0);
    }

    #[test]
    fn v6_transmit_and_esp_in_udp_still_on_the_fast_path_with_punt_on() {
        let mut a = Gw::new(tables_from(
            v6_udp_config(false),
            [A_PROT_MAC, A_UNPROT_MAC],
        ));
        let mut b = Gw::new(tables_from(v6_udp_config(true), [B_PROT_MAC, B_UNPROT_MAC]));
        let (ra, rb) = (PuntRings::new(4), PuntRings::new(4));
        a.w.set_punt(Arc::clone(&ra));
        b.w.set_punt(Arc::clone(&rb));
        a.learn_by_arp(PROT, "10.1.0.10", HOST_A_MAC, "10.1.0.1");
        b.learn_by_arp(PROT, "10.2.0.10", HOST_B_MAC, "10.2.0.1");
        // ESP in UDP 4500 over IPv6: decrypted by B, nothing punted.
        let inner = udp4("10.1.0.10", "10.2.0.10", 64, true, 200);
        let out = a.rx(PROT, &[from_host_a(&inner)]);
        let out = b.rx(UNPROT, &out[UNPROT]);
        assert_eq!(out[PROT].len(), 1);
        assert!(rb.receive().is_none());
        // A's IKE message to B, over A's transmit ring and B's punt ring.
        let msg = [0u8, 0, 0, 0, 0x21, 0x20];
        ra.send(&Transmit {
            src: sock("[2001:db8::1]:4500"),
            dst: sock("[2001:db8::2]:4500"),
            payload: msg.to_vec(),
        });
        a.w.tick(&mut a.tx, a.now);
        let out = a.take();
        let (e, ip) = l3(&out[UNPROT][0]);
        assert_eq!(e.ethertype, ethertype::IPV6);
        let ip6 = Ipv6Packet::new_checked(&ip[..]).unwrap();
        let udp = UdpPacket::new_checked(ip6.payload()).unwrap();
        assert!(udp.verify_checksum_v6(ip6.src_addr(), ip6.dst_addr()));
        b.rx(UNPROT, &out[UNPROT]);
        let d = rb.receive().unwrap();
        assert_eq!(
            (d.src, d.dst, d.payload()),
            (
                sock("[2001:db8::1]:4500"),
                sock("[2001:db8::2]:4500"),
                &msg[..]
            )
        );
    }
}

mod punt_neighbor {
    use super::*;
    use espgw_control::ike::{PuntRings, Transmit};

    /// An IKE datagram to a peer whose MAC is unknown waits for ARP like
    /// any packet the gateway sends, and leaves once the peer answers.
    #[test]
    fn a_transmit_to_an_unresolved_peer_waits_for_arp() {
        let mut a = Gw::a();
        let rings = PuntRings::new(4);
        a.w.set_punt(Arc::clone(&rings));
        rings.send(&Transmit {
            src: "192.0.2.1:500".parse().unwrap(),
            dst: "192.0.2.2:500".parse().unwrap(),
            payload: vec![7; 40],
        });
        a.w.tick(&mut a.tx, a.now);
        let out = a.take();
        assert_eq!(out[UNPROT].len(), 1);
        let (e, _) = l3(&out[UNPROT][0]);
        assert_eq!(
            e.ethertype,
            ethertype::ARP,
            "an ARP request, not the datagram"
        );
        assert_eq!(a.w.counters().held, 1);
        // B's ARP request for A teaches A B's MAC: the datagram leaves.
        let out = a.rx(
            UNPROT,
            &[arp_request(B_UNPROT_MAC, v4("192.0.2.2"), v4("192.0.2.1"))],
        );
        let ip: Vec<Vec<u8>> = out[UNPROT]
            .iter()
            .filter(|f| l3(f).0.ethertype == ethertype::IPV4)
            .cloned()
            .collect();
        assert_eq!(ip.len(), 1, "{out:?}");
        let (e, ip) = l3(&ip[0]);
        assert_eq!(e.dst_addr, B_UNPROT_MAC);
        let ip = Ipv4Packet::new_checked(&ip[..]).unwrap();
        let udp = espgw_wire::UdpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!((udp.dst_port(), udp.payload()), (500, &[7u8; 40][..]));
    }
}

/// Acquires (IKE `start_action = "trap"`, worker/acquire.rs): a packet
/// for a trapped tunnel (policy, no SA yet) is dropped as `acquire`, never
/// sent, and raises one acquire per tunnel and interval; a tunnel whose SA
/// hard-expired stays `sa_expired` and raises none.
mod acquire {
    use super::*;
    use espgw_control::ike::PuntRings;
    use espgw_control::tables::TunnelEntry;

    /// Gateway A with its tunnel's outbound SA gone; `trap`: never had one.
    fn a_without_sa(trap: bool) -> Gw {
        without_sa(ready_a(), trap)
    }

    /// `a` switched to a snapshot where its tunnel has no outbound SA.
    fn without_sa(mut a: Gw, trap: bool) -> Gw {
        let t = Arc::clone(a.w.tables());
        let e = t.tunnel(TunnelId(0)).unwrap();
        let entry = TunnelEntry {
            id: e.id,
            name: e.name.clone(),
            local: e.local,
            remote: e.remote,
            port: e.port,
            local_ts: e.local_ts.clone(),
            remote_ts: e.remote_ts.clone(),
            udp_encap: e.udp_encap,
            mss_clamp: None,
            out: None,
            extra_out: Vec::new(),
            trap,
        };
        let tables = Tables::new(Arc::clone(&t.spd), t.sad.to_builder().build(), vec![entry]);
        a.w.set_tables(Arc::new(tables));
        a
    }

    fn from_a(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| from_host_a(&udp4("10.1.0.10", "10.2.0.10", 64, true, 40 + i)))
            .collect()
    }

    #[test]
    fn a_trapped_tunnel_drops_and_raises_one_acquire_per_interval() {
        let mut a = a_without_sa(true);
        let rings = PuntRings::new(4);
        a.w.set_punt(Arc::clone(&rings));
        let out = a.rx(PROT, &from_a(5));
        assert!(
            out.iter().all(Vec::is_empty),
            "nothing leaves, in clear or not"
        );
        assert_eq!(a.drops(DropReason::Acquire), 5);
        assert_eq!(a.drops(DropReason::SaExpired), 0);
        let got = rings.next_acquire().expect("one acquire");
        assert_eq!(got.tunnel, 0);
        assert_eq!(
            (got.src, got.dst, got.proto),
            (
                IpAddr::V4(v4("10.1.0.10")),
                IpAddr::V4(v4("10.2.0.10")),
                ip_protocol::UDP
            )
        );
        assert!(rings.next_acquire().is_none(), "rate-limited");
        assert_eq!(
            (
                a.w.counters().acquires_raised,
                a.w.counters().acquires_suppressed
            ),
            (1, 4)
        );
        // A second later: one more.
        a.now.ns += 1_000_000_000;
        a.rx(PROT, &from_a(3));
        assert!(rings.next_acquire().is_some());
        assert!(rings.next_acquire().is_none());
        assert_eq!(a.drops(DropReason::Acquire), 8);
        assert_eq!(rings.stats().acquires_raised, 2);
    }

    #[test]
    fn a_hard_expired_tunnel_is_sa_expired_and_raises_nothing() {
        let mut a = a_without_sa(false);
        let rings = PuntRings::new(4);
        a.w.set_punt(Arc::clone(&rings));
        let out = a.rx(PROT, &from_a(2));
        assert!(out.iter().all(Vec::is_empty));
        assert_eq!(a.drops(DropReason::SaExpired), 2);
        assert_eq!(a.drops(DropReason::Acquire), 0);
        assert!(rings.next_acquire().is_none());
    }

    /// The classifier keeps what the protect path needs of a tunnel for
    /// one snapshot (worker/classify.rs, `Protected`): once traffic has
    /// used the tunnel, a snapshot where it is a trap without an SA must
    /// not reuse it (the packets are `acquire` drops, not staged for an SA
    /// that is gone, which `EspOut` would count as `sa_expired`).
    #[test]
    fn a_tunnel_that_loses_its_sa_after_traffic_takes_the_full_path() {
        let mut a = ready_a();
        let out = a.rx(PROT, &from_a(2));
        assert_eq!(out[UNPROT].len(), 2);
        let mut a = without_sa(a, true);
        let out = a.rx(PROT, &from_a(3));
        assert!(out.iter().all(Vec::is_empty));
        assert_eq!(a.drops(DropReason::Acquire), 3);
        assert_eq!(a.drops(DropReason::SaExpired), 0);
    }

    #[test]
    fn without_an_ike_driver_a_trap_still_drops() {
        let mut a = a_without_sa(true);
        let out = a.rx(PROT, &from_a(2));
        assert!(out.iter().all(Vec::is_empty));
        assert_eq!(a.drops(DropReason::Acquire), 2);
        assert_eq!(a.w.counters().acquires_raised, 0);
    }
}

/// The decrypt fan-out (worker/spread.rs, docs/multicore.md): gateway B's
/// one inbound SA decrypted by several workers at once, its packets
/// leaving worker 0 (which received them) in arrival order.
mod spread {
    use super::*;
    use crate::worker::{SpreadRings, SpreadWhen};
    use espgw_control::config::SpreadLate;
    use std::sync::atomic::{AtomicBool, Ordering};

    const FLOWS: u32 = 4;

    /// What gateway A sealed: its ESP frames, and the inner packets as
    /// host A sent them (the same index).
    struct Stream {
        esp: Vec<Vec<u8>>,
        inner: Vec<Vec<u8>>,
        /// The UDP checksum offload each ESP frame asked of A's NIC.
        offloads: Vec<Option<(usize, usize, bool)>>,
    }

    impl Stream {
        /// The frames B sends host B, in arrival order, when every packet
        /// of the stream gets through: each inner packet with A's hop and
        /// B's taken from its TTL, from B's MAC to host B's.
        fn delivered(&self) -> Vec<Vec<u8>> {
            self.inner
                .iter()
                .map(|p| {
                    let mut ip = p.clone();
                    if ip[0] >> 4 == 6 {
                        // The hop limit; IPv6 has no header checksum.
                        ip[7] -= 2;
                        return eth(HOST_B_MAC, B_PROT_MAC, ethertype::IPV6, &ip);
                    }
                    let mut h = Ipv4Packet::new_checked(&mut ip[..]).unwrap();
                    h.set_ttl(h.ttl() - 2);
                    h.fill_checksum();
                    eth(HOST_B_MAC, B_PROT_MAC, ethertype::IPV4, &ip)
                })
                .collect()
        }
    }

    /// Gateway A with its tunnel's ESP in form `outer`, gateway B known.
    fn gateway_a(outer: Outer) -> Gw {
        let config = outer.apply(demo_gateway(false).default_action("discard"), false);
        let mut a = Gw::new(tables_from(config.render(), [A_PROT_MAC, A_UNPROT_MAC]));
        outer.learn_peer(&mut a, false);
        a
    }

    /// A's ESP (in form `outer`) for `n` UDP packets of `FLOWS` inner
    /// flows (by source address), each packet carrying (flow, sequence in
    /// flow).
    fn esp_stream(outer: Outer, n: u32) -> Stream {
        esp_stream_ttl(outer, n, |_| 64)
    }

    /// [`esp_stream`] with packet `i` sent by its host with TTL `ttl(i)`.
    fn esp_stream_ttl(outer: Outer, n: u32, ttl: impl Fn(u32) -> u8) -> Stream {
        esp_stream_from(gateway_a(outer), outer, n, ttl)
    }

    /// [`esp_stream_ttl`] sealed by `a`, gateway A as built for `outer`.
    fn esp_stream_from(mut a: Gw, outer: Outer, n: u32, ttl: impl Fn(u32) -> u8) -> Stream {
        for f in 0..FLOWS {
            a.learn_by_arp(PROT, &format!("10.1.0.{}", 20 + f), HOST_A_MAC, "10.1.0.1");
        }
        let mut esp = Vec::new();
        let mut offloads = Vec::new();
        let mut next = [0u32; FLOWS as usize];
        let inner: Vec<Vec<u8>> = (0..n)
            .map(|i| {
                let f = (i * 7 + i / 3) % FLOWS;
                let mut p = udp4(&format!("10.1.0.{}", 20 + f), "10.2.0.10", ttl(i), true, 16);
                p[28..32].copy_from_slice(&f.to_be_bytes());
                p[32..36].copy_from_slice(&next[f as usize].to_be_bytes());
                next[f as usize] += 1;
                // The UDP checksum is not checked on the way; the IPv4
                // header's is unchanged (addresses and length only).
                p
            })
            .collect();
        let frames: Vec<Vec<u8>> = inner.iter().map(|p| from_host_a(p)).collect();
        for chunk in frames.chunks(32) {
            let out = a.rx(PROT, chunk);
            esp.extend(out[UNPROT].iter().cloned());
            offloads.extend(a.offloads[UNPROT].iter().copied());
        }
        assert_eq!(esp.len(), n as usize, "A sealed every packet");
        for (i, frame) in esp.iter().enumerate() {
            assert_eq!(outer.check_esp(frame, false), (0xa001, i as u32 + 1));
        }
        let esp = esp
            .into_iter()
            .enumerate()
            .map(|(i, f)| outer.on_the_way(f, i))
            .collect();
        Stream {
            esp,
            inner,
            offloads,
        }
    }

    /// (flow, sequence) of a decrypted frame leaving B.
    fn flow_seq(frame: &[u8]) -> (u32, u32) {
        let (_, ip) = l3(frame);
        // After the IPv4 (20 bytes) or IPv6 (40) and the UDP header.
        let at = if ip[0] >> 4 == 6 { 48 } else { 28 };
        (
            u32::from_be_bytes(ip[at..at + 4].try_into().unwrap()),
            u32::from_be_bytes(ip[at + 4..at + 8].try_into().unwrap()),
        )
    }

    struct B {
        outer: Outer,
        snap: Snapshot,
        rings: Arc<SpreadRings<VecBuf>>,
    }

    /// B's snapshot with its tunnel's ESP in form `outer`; `remote_ts`
    /// narrows what its tunnel lets in (A's side, 10.1.0.0/24 otherwise).
    fn b_snapshot(outer: Outer, remote_ts: Option<&str>) -> Snapshot {
        // The window spans what the owner may run ahead of a slow helper
        // (docs/multicore.md): the owner does not wait for results before
        // its next burst.
        let config = demo_gateway(true)
            .default_action("discard")
            .map_tunnels(|mut t| {
                if let Some(ts) = remote_ts {
                    t.remote_ts = vec![ts.to_string()];
                }
                t.replay_window(4096)
            });
        tables_from(
            outer.apply(config, true).render(),
            [B_PROT_MAC, B_UNPROT_MAC],
        )
    }

    impl B {
        fn new(outer: Outer, workers: usize) -> B {
            B::with(outer, workers, None)
        }
        fn with(outer: Outer, workers: usize, remote_ts: Option<&str>) -> B {
            B {
                outer,
                snap: b_snapshot(outer, remote_ts),
                rings: SpreadRings::new(workers),
            }
        }
        /// B whose fan-out meets late parts with `late`.
        fn late(outer: Outer, workers: usize, late: SpreadLate) -> B {
            B {
                rings: SpreadRings::with_late(workers, late),
                ..B::new(outer, workers)
            }
        }
        fn worker(&self, k: usize, shared: &SharedNeighbors) -> Gw {
            let (net, tables) = (Arc::clone(&self.snap.0), Arc::clone(&self.snap.1));
            let ports = net.ports.len();
            let mut w = Worker::new(k, net, tables, VecBufPool, 32, shared.clone());
            w.set_spread(Arc::clone(&self.rings));
            Gw {
                w,
                tx: TxQueues::new(ports, 1 << 16),
                now: Now { ns: 1 },
                offloads: [Vec::new(), Vec::new()],
            }
        }
        /// Worker 0, the one that receives the tunnel's ESP, with host B
        /// and gateway A known.
        fn owner(&self, shared: &SharedNeighbors) -> Gw {
            let mut w0 = self.worker(0, shared);
            w0.learn_by_arp(PROT, "10.2.0.10", HOST_B_MAC, "10.2.0.1");
            self.outer.learn_peer(&mut w0, true);
            w0
        }
    }

    /// Worker 0 receives everything; `helpers` other workers only decrypt
    /// for it, on their own threads. Returns what left B's protected port
    /// and the helpers' counters.
    fn run_spread(
        outer: Outer,
        helpers: usize,
        arrivals: &[Vec<u8>],
        max_in_flight: u64,
    ) -> (Vec<Vec<u8>>, Gw, Vec<crate::WorkerCounters>) {
        run_spread_on(B::new(outer, helpers + 1), helpers, arrivals, max_in_flight)
    }

    fn run_spread_on(
        b: B,
        helpers: usize,
        arrivals: &[Vec<u8>],
        max_in_flight: u64,
    ) -> (Vec<Vec<u8>>, Gw, Vec<crate::WorkerCounters>) {
        let shared = SharedNeighbors::default();
        let mut w0 = b.owner(&shared);
        let stop = AtomicBool::new(false);
        let mut out = Vec::new();
        let helper_counters = std::thread::scope(|s| {
            let handles: Vec<_> = (1..=helpers)
                .map(|k| {
                    let (b, shared, stop) = (&b, &shared, &stop);
                    s.spawn(move || {
                        let mut g = b.worker(k, shared);
                        while !stop.load(Ordering::Acquire) {
                            g.w.tick(&mut g.tx, g.now);
                            std::thread::yield_now();
                        }
                        g.w.counters().clone()
                    })
                })
                .collect();
            for burst in arrivals.chunks(32) {
                let o = w0.rx(UNPROT, burst);
                out.extend(o[PROT].iter().cloned());
                // Results come back in worker 0's next polls; with a
                // bound, it polls until the helpers have caught up.
                loop {
                    w0.w.tick(&mut w0.tx, w0.now);
                    out.extend(w0.take()[PROT].iter().cloned());
                    if w0.w.counters().spreading <= max_in_flight {
                        break;
                    }
                    std::thread::yield_now();
                }
            }
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while w0.w.counters().spreading != 0 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "packets never came back"
                );
                w0.w.tick(&mut w0.tx, w0.now);
                out.extend(w0.take()[PROT].iter().cloned());
                std::thread::yield_now();
            }
            stop.store(true, Ordering::Release);
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        });
        (out, w0, helper_counters)
    }

    /// Arrivals: the stream with copies of some packets right after the
    /// original (`near`, same burst: maybe another worker's part), and
    /// copies `gap` packets after it. Returns them and the copies' count.
    fn with_replays(esp: &[Vec<u8>], gap: usize) -> (Vec<Vec<u8>>, u64) {
        let mut arrivals = Vec::new();
        let mut replays = 0u64;
        for (i, f) in esp.iter().enumerate() {
            arrivals.push(f.clone());
            if i % 37 == 5 {
                arrivals.push(f.clone());
                replays += 1;
            }
            if i >= gap && i % 53 == 0 {
                arrivals.push(esp[i - gap].clone());
                replays += 1;
            }
        }
        (arrivals, replays)
    }

    fn check_counts(
        n: u32,
        replays: u64,
        helpers: usize,
        w0: &Gw,
        helper_counters: &[crate::WorkerCounters],
    ) {
        let c = w0.w.counters();
        assert_eq!(
            c.drops.get(DropReason::Replayed),
            replays,
            "each replay once"
        );
        assert_eq!(c.drops.total(), replays, "{:?}", c.drops);
        assert!(c.balanced() && c.spreading == 0, "{c:?}");
        let decrypted_by_others: u64 = helper_counters.iter().map(|h| h.spread_in).sum();
        assert_eq!(decrypted_by_others, c.spread_out);
        if helpers > 0 {
            assert!(
                c.spread_out > u64::from(n) / 4,
                "spread {} of {n}",
                c.spread_out
            );
        }
        for h in helper_counters {
            assert_eq!((h.rx, h.tx, h.drops.total()), (0, 0, 0));
        }
        // The SA's own counters: every packet and replay, once.
        let sa = w0.w.tables().inbound_sas()[0].2.stats();
        assert_eq!(sa.packets, u64::from(n));
        assert_eq!(sa.drops.get(espgw_esp::DropReason::Replayed), replays);
    }

    /// A's ESP `frame` in form `outer` with its ESP (everything after the
    /// outer IP and UDP headers) replaced by `esp`: lengths, the IPv4
    /// header checksum and the UDP checksum made right for it.
    fn reframe(outer: Outer, frame: &[u8], esp: &[u8]) -> Vec<u8> {
        let ip_len = if outer.v6() { 40 } else { 20 };
        let at = 14 + ip_len + if outer.udp() { 8 } else { 0 };
        let mut f = frame[..at].to_vec();
        f.extend_from_slice(esp);
        let l3 = f.len() - 14;
        if outer.v6() {
            f[18..20].copy_from_slice(&((l3 - 40) as u16).to_be_bytes());
        } else {
            f[16..18].copy_from_slice(&(l3 as u16).to_be_bytes());
            Ipv4Packet::new_checked(&mut f[14..])
                .unwrap()
                .fill_checksum();
        }
        if outer.udp() {
            let u = 14 + ip_len;
            f[u + 4..u + 6].copy_from_slice(&((l3 - ip_len) as u16).to_be_bytes());
            let (src, dst) = (outer.addr(false), outer.addr(true));
            let mut udp = espgw_wire::UdpPacket::new_checked(&mut f[u..]).unwrap();
            if outer.v6() {
                udp.fill_checksum_v6(v6(src), v6(dst));
            } else {
                udp.fill_checksum_v4(v4(src), v4(dst));
            }
        }
        f
    }

    /// Every form of the tunnel's ESP (bare and in UDP 4500, IPv4 and
    /// IPv6 outer: the classifier's and the engine's fast locators cover
    /// all of them, the general path what they leave): the genuine packets
    /// delivered in order, one with link padding after it included, and
    /// each bad one dropped for its own reason: a wrong ICV, an unknown
    /// SPI, a replay, ESP cut to its SPI, and in UDP a NAT keepalive.
    #[test]
    fn every_outer_form_delivers_its_esp_and_counts_bad_packets_by_reason() {
        for outer in Outer::ALL {
            let stream = esp_stream(outer, 3);
            let expected = stream.delivered();
            let esp_at = 14 + if outer.v6() { 40 } else { 20 } + if outer.udp() { 8 } else { 0 };
            let esp_of = |i: usize| stream.esp[i][esp_at..].to_vec();
            let mut padded = stream.esp[0].clone();
            padded.extend_from_slice(&[0xee; 6]);
            let mut tampered = esp_of(1);
            *tampered.last_mut().unwrap() ^= 1;
            let mut unknown = esp_of(1);
            unknown[..4].copy_from_slice(&0xdead_beefu32.to_be_bytes());
            let mut frames = vec![
                padded,
                reframe(outer, &stream.esp[1], &tampered),
                reframe(outer, &stream.esp[1], &unknown),
                reframe(outer, &stream.esp[1], &esp_of(1)[..4]),
                stream.esp[1].clone(),
                stream.esp[1].clone(),
            ];
            if outer.udp() {
                frames.push(reframe(outer, &stream.esp[1], &[0xff]));
            }
            frames.push(stream.esp[2].clone());
            let mut b = Gw::new(b_snapshot(outer, None));
            b.learn_by_arp(PROT, "10.2.0.10", HOST_B_MAC, "10.2.0.1");
            outer.learn_peer(&mut b, true);
            let out = b.rx(UNPROT, &frames);
            assert_eq!(out[PROT], expected, "{outer:?}");
            for r in [
                DropReason::IcvMismatch,
                DropReason::UnknownSpi,
                DropReason::Truncated,
                DropReason::Replayed,
            ] {
                assert_eq!(b.drops(r), 1, "{outer:?} {r:?}");
            }
            let keepalives = u64::from(outer.udp());
            assert_eq!(b.drops(DropReason::NatKeepalive), keepalives, "{outer:?}");
            let c = b.w.counters();
            assert_eq!(c.drops.total(), 4 + keepalives, "{outer:?} {:?}", c.drops);
            assert!(c.balanced(), "{outer:?}");
        }
    }

    /// TX UDP checksum offload: through an unprotected port whose NIC
    /// computes UDP checksums (`PortInfo::tx_udp_checksum`), A's ESP in
    /// UDP over IPv6 leaves with its checksum asked of the NIC (Ethernet
    /// 14, IPv6 40 bytes) and only seeded by the engine; completed as a
    /// NIC completes it (the test buffer does), every frame verifies
    /// (`check_esp`) and B delivers the stream in order. No other form
    /// asks (their checksums cover no payload), nor any form through a
    /// port without the offload.
    #[test]
    fn udp_checksum_left_to_a_nic_that_computes_it() {
        for outer in Outer::ALL {
            for offload in [false, true] {
                let config = outer.apply(demo_gateway(false).default_action("discard"), false);
                let (net, tables) = tables_from(config.render(), [A_PROT_MAC, A_UNPROT_MAC]);
                let mut net = Arc::try_unwrap(net).ok().unwrap();
                net.ports[UNPROT].tx_udp_checksum = offload;
                let mut a = Gw::new((Arc::new(net), tables));
                outer.learn_peer(&mut a, false);
                // Inner lengths of both parities (the checksum's odd tail).
                let stream = esp_stream_from(a, outer, 64, |_| 64);
                let asked = (offload && outer == Outer::Udp6).then_some((14, 40, true));
                assert!(
                    stream.offloads.iter().all(|o| *o == asked),
                    "{outer:?} offload {offload}: {:?}",
                    stream.offloads
                );
                let mut b = Gw::new(b_snapshot(outer, None));
                b.learn_by_arp(PROT, "10.2.0.10", HOST_B_MAC, "10.2.0.1");
                outer.learn_peer(&mut b, true);
                let mut delivered = Vec::new();
                for chunk in stream.esp.chunks(32) {
                    delivered.extend(b.rx(UNPROT, chunk)[PROT].iter().cloned());
                }
                assert_eq!(delivered, stream.delivered(), "{outer:?} offload {offload}");
            }
        }
    }

    /// The offload's fallback: A seals for an offloading port before it
    /// knows the peer's MAC (no static neighbor: ND), so the sealed packets
    /// wait for the neighbor and leave by the general send, which has no
    /// offload request: their checksums are completed in software first
    /// and verify. Once the peer answered, the next packets ask the NIC.
    #[test]
    fn packets_held_for_the_peer_leave_with_their_checksum_completed() {
        let outer = Outer::Udp6;
        let mut config = outer.apply(demo_gateway(false).default_action("discard"), false);
        config.sections.clear(); // the peer's static neighbor entry
        let (net, tables) = tables_from(config.render(), [A_PROT_MAC, A_UNPROT_MAC]);
        let mut net = Arc::try_unwrap(net).ok().unwrap();
        net.ports[UNPROT].tx_udp_checksum = true;
        let mut a = Gw::new((Arc::new(net), tables));
        a.learn_by_arp(PROT, "10.1.0.10", HOST_A_MAC, "10.1.0.1");
        let inner: Vec<Vec<u8>> = (0..3)
            .map(|i| from_host_a(&udp4("10.1.0.10", "10.2.0.10", 64, true, 100 + 51 * i)))
            .collect();
        let out = a.rx(PROT, &inner);
        // A solicitation for the peer, the packets held (one per
        // neighbor queue slot: all of them here).
        assert!(out[UNPROT].iter().all(|f| {
            let (_, ip) = l3(f);
            Ipv6Packet::new_checked(&ip[..]).unwrap().next_header() == ip_protocol::ICMPV6
        }));
        assert_eq!(a.w.counters().held, 3);
        // The peer's advert releases them.
        let (peer, ours) = (v6(outer.addr(true)), v6(outer.addr(false)));
        let na = Icmpv6Repr::NeighborAdvert {
            router: false,
            solicited: true,
            override_: true,
            target_addr: peer,
            target_lladdr: Some(B_UNPROT_MAC),
        };
        let ip = nd_packet(peer, ours, &na);
        let out = a.rx(
            UNPROT,
            &[eth(A_UNPROT_MAC, B_UNPROT_MAC, ethertype::IPV6, &ip)],
        );
        assert_eq!(out[UNPROT].len(), 3, "the held packets leave");
        for (i, frame) in out[UNPROT].iter().enumerate() {
            assert_eq!(outer.check_esp(frame, false), (0xa001, i as u32 + 1));
        }
        assert!(
            a.offloads[UNPROT].iter().all(Option::is_none),
            "no request on the general send"
        );
        // Known now: the next packets go the fast way, asking the NIC.
        let out = a.rx(PROT, &inner);
        assert_eq!(out[UNPROT].len(), 3);
        for (i, frame) in out[UNPROT].iter().enumerate() {
            assert_eq!(outer.check_esp(frame, false), (0xa001, i as u32 + 4));
        }
        assert!(a.offloads[UNPROT]
            .iter()
            .all(|o| *o == Some((14, 40, true))));
    }

    /// MSS clamping through the fan-out: B's tunnel clamps (`mss_clamp =
    /// 1200`), A's does not, and A's TCP SYNs (MSS 1460) reach B as ESP
    /// that worker 0 spreads to a helper. A helper leaves a SYN of a
    /// clamping tunnel to the owner (`finish_parsed`), so every SYN leaves
    /// B clamped, whichever worker decrypted it.
    #[test]
    fn syns_through_the_fan_out_leave_clamped() {
        use super::mss_clamp::{delivered_mss, tcp4};
        let outer = Outer::Esp4;
        let mut a = gateway_a(outer);
        a.learn_by_arp(PROT, "10.1.0.10", HOST_A_MAC, "10.1.0.1");
        let syn = tcp4(
            "10.1.0.10",
            "10.2.0.10",
            espgw_wire::tcp::flags::SYN,
            Some(1460),
        );
        let mut esp = Vec::new();
        for _ in 0..4 {
            let frames = vec![from_host_a(&syn); 32];
            esp.extend(a.rx(PROT, &frames)[UNPROT].iter().cloned());
        }
        assert_eq!(esp.len(), 128, "A sealed every SYN");
        let config = demo_gateway(true)
            .default_action("discard")
            .map_tunnels(|mut t| {
                t.lines.push("mss_clamp = 1200".into());
                t.replay_window(4096)
            });
        let b = B {
            outer,
            snap: tables_from(
                outer.apply(config, true).render(),
                [B_PROT_MAC, B_UNPROT_MAC],
            ),
            rings: SpreadRings::new(2),
        };
        let (out, w0, helpers) = run_spread_on(b, 1, &esp, 0);
        assert_eq!(out.len(), esp.len(), "every SYN delivered");
        assert!(out.iter().all(|f| delivered_mss(f) == Some(1200)));
        assert!(helpers[0].spread_in > 0, "the helper decrypted parts");
        assert_eq!(w0.w.counters().mss_clamped, esp.len() as u64);
    }

    /// `SpreadRings::set_max_parts`: with three helpers idle, a burst of 32
    /// is cut into three parts by default (one per helper, at least
    /// `MIN_PART` each), but with a limit of 1 each burst goes whole to one
    /// helper, the next burst to the next helper.
    /// The stream leaves whole and in order either way.
    #[test]
    fn max_parts_caps_how_many_helpers_share_a_burst() {
        let outer = Outer::Esp4;
        let stream = esp_stream(outer, 96);
        let expected = stream.delivered();
        for max_parts in [None, Some(1)] {
            let b = B::new(outer, 4);
            if let Some(n) = max_parts {
                b.rings.set_max_parts(n);
            }
            let shared = SharedNeighbors::default();
            let mut w0 = b.owner(&shared);
            let mut helpers: Vec<Gw> = (1..4).map(|k| b.worker(k, &shared)).collect();
            let mut out = Vec::new();
            let mut jobs_per_burst = Vec::new();
            for burst in stream.esp.chunks(32) {
                out.extend(w0.rx(UNPROT, burst)[PROT].iter().cloned());
                // The jobs now queued at the helpers: parts of this burst.
                jobs_per_burst.push((1..4).map(|k| b.rings.queued_for(k)).sum::<usize>());
                for h in helpers.iter_mut() {
                    h.w.tick(&mut h.tx, h.now);
                }
                while w0.w.counters().spreading != 0 {
                    w0.w.tick(&mut w0.tx, w0.now);
                    out.extend(w0.take()[PROT].iter().cloned());
                }
            }
            let spread_in: Vec<u64> = helpers.iter().map(|h| h.w.counters().spread_in).collect();
            match max_parts {
                None => {
                    assert_eq!(
                        jobs_per_burst,
                        [3, 3, 3],
                        "parts of at least 8, one per helper"
                    );
                    assert_eq!(spread_in.iter().sum::<u64>(), 96);
                }
                Some(_) => {
                    assert_eq!(jobs_per_burst, [1, 1, 1], "each burst whole");
                    assert_eq!(spread_in, [32, 32, 32], "round robin over the helpers");
                }
            }
            assert_eq!(out, expected);
            let c = w0.w.counters();
            assert!(c.balanced() && c.drops.total() == 0, "{c:?}");
        }
    }

    /// A worker whose own receive fills whole bursts (saturated by its own
    /// traffic, as every worker is when RSS spreads many tunnels) is handed
    /// no part: the owner decrypts its groups itself on the direct path,
    /// counted as `spread_kept`, with no ticket and no job. Once that
    /// worker's receive falls below a burst, it gets parts again. What
    /// leaves is the same either way, in order.
    #[test]
    fn a_worker_busy_with_its_own_traffic_gets_no_parts() {
        let outer = Outer::Esp4;
        let stream = esp_stream(outer, 256);
        let expected = stream.delivered();
        let b = B::new(outer, 2);
        let shared = SharedNeighbors::default();
        let mut w0 = b.owner(&shared);
        let mut w1 = b.worker(1, &shared);
        // Worker 1's own traffic: a whole burst of frames it drops.
        let own: Vec<Vec<u8>> = (0..32)
            .map(|_| eth(B_UNPROT_MAC, A_UNPROT_MAC, 0x88b5, &[0u8; 46]))
            .collect();
        let (busy_part, idle_part) = stream.esp.split_at(128);
        let mut out = Vec::new();
        for burst in busy_part.chunks(32) {
            w1.rx(UNPROT, &own);
            w1.w.tick(&mut w1.tx, w1.now);
            assert!(b.rings.is_busy(1));
            out.extend(w0.rx(UNPROT, burst)[PROT].iter().cloned());
            w0.w.tick(&mut w0.tx, w0.now);
            out.extend(w0.take()[PROT].iter().cloned());
        }
        let c = w0.w.counters();
        assert_eq!((c.spread_out, c.spread_kept, c.spreading), (0, 128, 0));
        assert_eq!(
            c.spread_unneeded, 0,
            "it wanted help: behind on whole bursts"
        );
        assert_eq!(out.len(), 128, "decrypted directly, at once");
        assert_eq!(w1.w.counters().spread_in, 0);
        // A poll of worker 1 with less than a burst: free again.
        w1.w.tick(&mut w1.tx, w1.now);
        assert!(!b.rings.is_busy(1));
        for burst in idle_part.chunks(32) {
            out.extend(w0.rx(UNPROT, burst)[PROT].iter().cloned());
            w1.w.tick(&mut w1.tx, w1.now);
            while w0.w.counters().spreading != 0 {
                w0.w.tick(&mut w0.tx, w0.now);
                out.extend(w0.take()[PROT].iter().cloned());
            }
        }
        let c = w0.w.counters();
        assert!(c.spread_out >= 64, "spread {} of 128", c.spread_out);
        assert_eq!(c.spread_kept, 128);
        assert_eq!(w1.w.counters().spread_in, c.spread_out);
        assert_eq!(out, expected);
        assert!(c.balanced() && c.drops.total() == 0, "{c:?}");
        assert_eq!(w1.w.counters().drops.total(), 4 * 32, "its own frames");
    }

    /// One poll of the owner `w0` as the runtime makes it (receive
    /// `burst`, then one tick), its helper `w1` serving the parts in
    /// between; the clock moves by what `cost` says of a poll that
    /// handed parts out (true) or not.
    fn poll_owner(
        w0: &mut Gw,
        w1: &mut Gw,
        burst: &[Vec<u8>],
        out: &mut Vec<Vec<u8>>,
        cost: fn(bool) -> u64,
    ) {
        let before = w0.w.counters().spread_out;
        out.extend(w0.rx(UNPROT, burst)[PROT].iter().cloned());
        w1.w.tick(&mut w1.tx, w1.now);
        w0.w.tick(&mut w0.tx, w0.now);
        out.extend(w0.take()[PROT].iter().cloned());
        let spread = w0.w.counters().spread_out > before;
        w0.now.ns += cost(spread);
        w1.now.ns = w0.now.ns;
    }

    /// Over the start-up probe's limit with the live check on, the
    /// fan-out starts off (`SpreadRings::set_starts_off`): the owner's
    /// first full burst is decrypted alone (`spread_solo`, the counters
    /// saying off), and the first trial, finding the fan-out faster, turns
    /// it on; the stream leaves whole and in order.
    #[test]
    fn a_fan_out_that_starts_off_is_turned_on_by_a_trial_that_finds_it_faster() {
        let outer = Outer::Esp4;
        let stream = esp_stream(outer, 1600);
        let expected = stream.delivered();
        let b = B {
            rings: SpreadRings::with_options(2, SpreadLate::Drop, SpreadWhen::Behind),
            ..B::new(outer, 2)
        };
        b.rings.set_recheck_ns(100_000_000);
        b.rings.set_starts_off(true);
        let shared = SharedNeighbors::default();
        let mut w0 = b.owner(&shared);
        let mut w1 = b.worker(1, &shared);
        assert_eq!(w0.w.counters().spread_off, 1, "off before any trial");
        let mut out = Vec::new();
        let mut bursts = stream.esp.chunks(32);
        let faster: fn(bool) -> u64 = |spread| if spread { 1_000_000 } else { 2_000_000 };
        poll_owner(&mut w0, &mut w1, bursts.next().unwrap(), &mut out, faster);
        let c = w0.w.counters().clone();
        assert_eq!((c.spread_out, c.spread_solo), (0, 32), "{c:?}");
        while w0.w.counters().spread_trials == [0; 4] {
            let burst = bursts.next().expect("no trial ended");
            poll_owner(&mut w0, &mut w1, burst, &mut out, faster);
        }
        let c = w0.w.counters().clone();
        assert_eq!((c.spread_trials, c.spread_off), ([1, 0, 0, 0], 0), "{c:?}");
        let handed = c.spread_out;
        for burst in bursts {
            poll_owner(&mut w0, &mut w1, burst, &mut out, faster);
        }
        while w0.w.counters().spreading != 0 {
            w1.w.tick(&mut w1.tx, w1.now);
            w0.w.tick(&mut w0.tx, w0.now);
            out.extend(w0.take()[PROT].iter().cloned());
        }
        let c = w0.w.counters();
        assert!(c.spread_out > handed, "spreading after the trial");
        assert_eq!(out, expected);
        assert!(c.balanced() && c.drops.total() == 0, "{c:?}");
    }

    /// The live check (`spread_recheck_ms`, `crate::spread_trial`) on the
    /// worker itself, its clock the test's: while the polls that hand out
    /// parts take 8 ms and those that do not 2 ms (a fan-out that makes
    /// the owner slower), the first trial turns the fan-out off and the
    /// owner then decrypts its full bursts itself (`spread_solo`, nothing
    /// handed out); once spreading makes its polls faster (1 ms against
    /// 2 ms), the next trial, after the recheck time, turns it on again.
    /// Throughout, the stream leaves whole and in order, and the counters
    /// say what the trials decided.
    #[test]
    fn the_live_check_turns_a_slower_fan_out_off_and_a_faster_one_on() {
        let outer = Outer::Esp4;
        let stream = esp_stream(outer, 6400);
        let expected = stream.delivered();
        let b = B {
            rings: SpreadRings::with_options(2, SpreadLate::Drop, SpreadWhen::Behind),
            ..B::new(outer, 2)
        };
        b.rings.set_recheck_ns(100_000_000);
        let shared = SharedNeighbors::default();
        let mut w0 = b.owner(&shared);
        let mut w1 = b.worker(1, &shared);
        let mut out = Vec::new();
        let mut bursts = stream.esp.chunks(32);
        let mut poll = |w0: &mut Gw, w1: &mut Gw, out: &mut Vec<Vec<u8>>, cost: fn(bool) -> u64| {
            bursts
                .next()
                .map(|burst| poll_owner(w0, w1, burst, out, cost))
                .is_some()
        };
        let slower: fn(bool) -> u64 = |spread| if spread { 8_000_000 } else { 2_000_000 };
        while w0.w.counters().spread_trials == [0; 4] {
            assert!(poll(&mut w0, &mut w1, &mut out, slower), "no trial ended");
        }
        let c = w0.w.counters().clone();
        assert_eq!(c.spread_trials, [0, 1, 0, 0], "{c:?}");
        assert_eq!(c.spread_off, 1);
        let [with, without] = c.spread_trial_pps;
        assert!(
            (3_500..=4_500).contains(&with) && (15_000..=17_000).contains(&without),
            "32 packets per 8 ms with, per 2 ms without: {with} / {without}"
        );
        // Off: 40 full bursts (80 ms, within the recheck time), none handed
        // out, all counted as solo.
        for _ in 0..40 {
            assert!(poll(&mut w0, &mut w1, &mut out, slower));
        }
        let c2 = w0.w.counters().clone();
        assert_eq!(c2.spread_out, c.spread_out, "nothing handed out while off");
        assert_eq!(c2.spread_solo - c.spread_solo, 40 * 32);
        // Faster now: after the recheck time (100 ms) and a trial, the
        // fan-out is on again.
        let faster: fn(bool) -> u64 = |spread| if spread { 1_000_000 } else { 2_000_000 };
        while w0.w.counters().spread_trials[0] == 0 {
            assert!(poll(&mut w0, &mut w1, &mut out, faster), "no second trial");
        }
        let c3 = w0.w.counters().clone();
        assert_eq!(
            (c3.spread_trials, c3.spread_off),
            ([1, 1, 0, 0], 0),
            "{c3:?}"
        );
        let solo_until = c3.spread_solo;
        while poll(&mut w0, &mut w1, &mut out, faster) {}
        while w0.w.counters().spreading != 0 {
            w1.w.tick(&mut w1.tx, w1.now);
            w0.w.tick(&mut w0.tx, w0.now);
            out.extend(w0.take()[PROT].iter().cloned());
        }
        let c4 = w0.w.counters();
        assert!(c4.spread_out > c3.spread_out, "spreading again");
        assert_eq!(c4.spread_solo, solo_until, "not held back while on");
        assert_eq!(out, expected);
        assert!(c4.balanced() && c4.drops.total() == 0, "{c4:?}");
    }

    /// `spread_decrypt = "auto"` ([`SpreadWhen::Behind`]): an owner whose
    /// receive does not fill a burst keeps up alone and decrypts its groups
    /// itself (counted as `spread_unneeded`, not as `spread_kept`, which
    /// counts help wanted but not found; nothing handed out, every packet
    /// out at once); once its receives fill whole bursts it spreads. With
    /// `"always"` the same short bursts are spread (the control: the gate,
    /// not the group size, kept them). A short burst that comes while a
    /// part is still out is not handed out under `"auto"` either (it is
    /// the owner's own part, behind the one out). Either way the stream
    /// leaves whole and in order.
    #[test]
    fn an_owner_that_keeps_up_spreads_nothing_under_auto() {
        let outer = Outer::Esp4;
        let stream = esp_stream(outer, 304);
        let expected = stream.delivered();
        for when in [SpreadWhen::Behind, SpreadWhen::Always] {
            let b = B {
                rings: SpreadRings::with_options(2, SpreadLate::Drop, when),
                ..B::new(outer, 2)
            };
            let shared = SharedNeighbors::default();
            let mut w0 = b.owner(&shared);
            let mut w1 = b.worker(1, &shared);
            let (short, rest) = stream.esp.split_at(120);
            let (full, rest) = rest.split_at(128);
            let (behind, after) = rest.split_at(32);
            let mut out = Vec::new();
            let step = |w0: &mut Gw, w1: &mut Gw, burst: &[Vec<u8>], out: &mut Vec<Vec<u8>>| {
                out.extend(w0.rx(UNPROT, burst)[PROT].iter().cloned());
                w0.w.tick(&mut w0.tx, w0.now);
                loop {
                    w1.w.tick(&mut w1.tx, w1.now);
                    w0.w.tick(&mut w0.tx, w0.now);
                    out.extend(w0.take()[PROT].iter().cloned());
                    if w0.w.counters().spreading == 0 {
                        break;
                    }
                }
            };
            // Bursts of 24: worth splitting (16 or more), but less than
            // the worker's burst of 32.
            for burst in short.chunks(24) {
                step(&mut w0, &mut w1, burst, &mut out);
            }
            let c = w0.w.counters().clone();
            match when {
                SpreadWhen::Behind => {
                    assert_eq!(
                        (c.spread_out, c.spread_unneeded, c.spread_kept),
                        (0, 120, 0),
                        "{when:?}"
                    );
                    assert_eq!(w1.w.counters().spread_in, 0);
                }
                SpreadWhen::Always => {
                    assert!(c.spread_out > 0, "{when:?}: {c:?}");
                    assert_eq!((c.spread_kept, c.spread_unneeded), (0, 0), "{when:?}");
                }
            }
            assert_eq!(out.len(), 120, "{when:?}: every packet out");
            // Whole bursts: behind, so the group is spread in both modes.
            for burst in full.chunks(32) {
                step(&mut w0, &mut w1, burst, &mut out);
            }
            let c2 = w0.w.counters().clone();
            assert!(c2.spread_out >= c.spread_out + 64, "{when:?}: {c2:?}");
            assert_eq!(w1.w.counters().spread_in, c2.spread_out);
            // A whole burst handed to worker 1, which does not run yet,
            // then a short burst while that part is still out: under
            // "auto" the owner keeps it (a ticketed part of its own, in
            // order behind the one out), under "always" it hands it out too.
            out.extend(w0.rx(UNPROT, behind)[PROT].iter().cloned());
            w0.w.tick(&mut w0.tx, w0.now);
            let c3 = w0.w.counters().clone();
            assert_eq!(c3.spread_out, c2.spread_out + 32, "{when:?}");
            out.extend(w0.rx(UNPROT, after)[PROT].iter().cloned());
            w0.w.tick(&mut w0.tx, w0.now);
            let c4 = w0.w.counters().clone();
            let handed = c4.spread_out - c3.spread_out;
            match when {
                SpreadWhen::Behind => assert_eq!(handed, 0, "kept while keeping up"),
                SpreadWhen::Always => assert_eq!(handed, 24),
            }
            assert!(out.len() <= 248, "nothing overtook the part still out");
            while w0.w.counters().spreading != 0 {
                w1.w.tick(&mut w1.tx, w1.now);
                w0.w.tick(&mut w0.tx, w0.now);
                out.extend(w0.take()[PROT].iter().cloned());
            }
            let c5 = w0.w.counters();
            assert_eq!(w1.w.counters().spread_in, c5.spread_out);
            assert_eq!(out, expected, "{when:?}");
            assert!(c5.balanced() && c5.drops.total() == 0, "{c5:?}");
        }
    }

    /// Every packet of every flow leaves once and in order; the other
    /// workers did decrypt part of it; replays (in one burst, maybe on two
    /// workers, and long after the original) are each dropped once as
    /// `replayed`. Worker 0 runs at most two bursts ahead of the helpers
    /// here, so the late copies arrive after their original was decrypted
    /// (see the next test for copies racing their original).
    ///
    /// What leaves is, byte for byte and in arrival order, what host A
    /// sent (less the two hops' TTL), from B's MAC to host B's: the same
    /// with no helper (worker 0 alone, its own `Forward` path) as with 1
    /// to 3 (finished by the helpers). In every outer form: ESP over IPv4,
    /// in UDP 4500 over IPv4 (also through a NAT that rewrites the source
    /// port), over IPv6, in UDP over IPv6.
    #[test]
    fn one_sa_on_several_workers_keeps_every_flow_in_order() {
        let n = 2000u32;
        for outer in Outer::ALL {
            let stream = esp_stream(outer, n);
            let expected = stream.delivered();
            let (arrivals, replays) = with_replays(&stream.esp, 500);
            for helpers in [0usize, 1, 2, 3] {
                let (out, w0, helper_counters) = run_spread(outer, helpers, &arrivals, 64);
                let mut next = [0u32; FLOWS as usize];
                for frame in &out {
                    let (f, seq) = flow_seq(frame);
                    assert_eq!(
                        seq, next[f as usize],
                        "flow {f} out of order ({outer:?}, {helpers} helpers)"
                    );
                    next[f as usize] += 1;
                }
                assert_eq!(out.len(), n as usize, "every packet once ({outer:?})");
                assert!(
                    out == expected,
                    "{outer:?}, {helpers} helpers: not what host A sent, in order"
                );
                check_counts(n, replays, helpers, &w0, &helper_counters);
            }
        }
    }

    /// A copy that arrives while its original is still out at another
    /// worker: whichever is authenticated first is taken, the other is a
    /// replay, counted once. Every packet leaves exactly once (in the
    /// position of the copy that won, which can be the later one), as
    /// host A sent it. In every outer form.
    /// (Unbounded, worker 0 would fill its reorder stage and give up
    /// tickets: `reorder_late`, by design.)
    #[test]
    fn copies_racing_their_original_on_other_workers_are_taken_once() {
        let n = 2000u32;
        for outer in Outer::ALL {
            let stream = esp_stream(outer, n);
            let expected: std::collections::HashMap<(u32, u32), Vec<u8>> = stream
                .delivered()
                .into_iter()
                .map(|f| (flow_seq(&f), f))
                .collect();
            let (arrivals, replays) = with_replays(&stream.esp, 40);
            for helpers in [1usize, 3] {
                // Worker 0 up to 8 bursts ahead: copies 40 packets on still
                // race their original, and the stage's bounds (jobs out,
                // tickets) are not what is tested here.
                let (out, w0, helper_counters) = run_spread(outer, helpers, &arrivals, 256);
                let mut seen = vec![std::collections::BTreeSet::new(); FLOWS as usize];
                for frame in &out {
                    let (f, seq) = flow_seq(frame);
                    assert!(seen[f as usize].insert(seq), "flow {f} seq {seq} twice");
                    assert!(
                        frame == &expected[&(f, seq)],
                        "{outer:?}: flow {f} seq {seq}"
                    );
                }
                assert_eq!(out.len(), n as usize, "every packet once ({outer:?})");
                check_counts(n, replays, helpers, &w0, &helper_counters);
            }
        }
    }

    /// A worker that never returns the parts it took (stuck) holds the SA
    /// up for the reorder stage's bound only: later packets leave after
    /// them. The stuck parts, when they finally come back, are dropped as
    /// `reorder_late`, counted once (`spread_late = "drop"`, the default),
    /// or sent on then, behind the later packets, counted in
    /// `reorder_late_sent` (`"send"`: nothing lost). A part still queued in
    /// its inbox when the oldest part is overdue is taken back by the
    /// receiving worker and done there (not lost); a part handed out after
    /// all that comes back and leaves in order. In every outer form.
    #[test]
    fn a_part_that_never_comes_back_holds_the_sa_for_the_bound_only() {
        for outer in Outer::ALL {
            a_part_that_never_comes_back(outer, SpreadLate::Drop, false);
        }
    }

    #[test]
    fn a_late_part_is_sent_out_of_order_with_spread_late_send() {
        for outer in Outer::ALL {
            a_part_that_never_comes_back(outer, SpreadLate::Send, false);
        }
    }

    /// With `"send"`, a part back more than `LATE_SEND_MAX_NS` after it
    /// was cut is dropped as `reorder_late` all the same.
    #[test]
    fn a_late_part_past_the_age_cap_is_dropped_even_with_send() {
        a_part_that_never_comes_back(Outer::Esp4, SpreadLate::Send, true);
    }

    /// `[dataplane] spread_wait_us`: a helper stalled with a part for
    /// more than the default bound (100 µs) but less than the configured
    /// one (400 µs) holds the SA up without losing the part: it comes
    /// back, in order, nothing dropped. With the default bound the same
    /// stall drops it (`reorder_late`). A longer bound gets more job boxes
    /// (else they would run out first).
    #[test]
    fn a_longer_spread_wait_keeps_a_part_the_default_gives_up() {
        use crate::worker::spread_consts::{MAX_JOBS_PER_WORKER, MAX_WAIT_NS};
        let stream = esp_stream(Outer::Esp4, 32);
        for (wait, late) in [(MAX_WAIT_NS, 32), (4 * MAX_WAIT_NS, 0)] {
            let b = B {
                rings: SpreadRings::with_wait(2, SpreadLate::Drop, SpreadWhen::Always, false, wait),
                ..B::new(Outer::Esp4, 2)
            };
            let boxes = MAX_JOBS_PER_WORKER * 2 * (wait / MAX_WAIT_NS) as usize;
            assert_eq!((b.rings.max_wait_ns(), b.rings.max_jobs()), (wait, boxes));
            let shared = SharedNeighbors::default();
            let mut w0 = b.owner(&shared);
            let mut w1 = b.worker(1, &shared);
            assert!(w0.rx(UNPROT, &stream.esp)[PROT].is_empty());
            assert_eq!(w0.w.counters().spread_out, 32);
            let stalled = b.rings.seize(1);
            // Stalled for 1.5 x the default bound.
            w0.now = Now {
                ns: w0.now.ns + MAX_WAIT_NS * 3 / 2,
            };
            w0.w.tick(&mut w0.tx, w0.now);
            b.rings.unseize(1, stalled);
            w1.w.tick(&mut w1.tx, w1.now);
            w0.w.tick(&mut w0.tx, w0.now);
            let out = w0.take()[PROT].clone();
            let c = w0.w.counters();
            assert_eq!(c.drops.get(DropReason::ReorderLate), late, "wait {wait}");
            assert_eq!(out.len() as u64, 32 - late, "wait {wait}");
            // Back after 150 µs, late or not: each part counted once, in
            // the bucket over 100 up to 200 µs, with its time.
            let parts: u64 = c.spread_back.iter().sum();
            assert!(parts >= 1, "{:?}", c.spread_back);
            assert_eq!(c.spread_back[4], parts, "{:?}", c.spread_back);
            assert_eq!(c.spread_back_ns, parts * MAX_WAIT_NS * 3 / 2);
            assert_eq!(
                w1.w.counters().spread_back,
                [0; 8],
                "a helper hands nothing out"
            );
            if late == 0 {
                assert_eq!(out, stream.delivered());
            }
            assert!(c.balanced() && c.spreading == 0, "{c:?}");
        }
    }

    fn a_part_that_never_comes_back(outer: Outer, late: SpreadLate, stale: bool) {
        use crate::worker::spread_consts::{LATE_SEND_MAX_NS, MAX_WAIT_NS, STEAL_AFTER_NS};
        let stream = esp_stream(outer, 128);
        let (esp, delivered) = (&stream.esp, stream.delivered());
        let b = B::late(outer, 2, late);
        let shared = SharedNeighbors::default();
        let mut w0 = b.owner(&shared);
        let mut w1 = b.worker(1, &shared);
        // Worker 1 has room: the first two bursts go to it, whole, and it
        // takes them and gets stuck.
        assert_eq!(w0.rx(UNPROT, &esp[..32])[PROT].len(), 0);
        assert_eq!(w0.rx(UNPROT, &esp[32..64])[PROT].len(), 0);
        assert_eq!(w0.w.counters().spread_out, 64);
        let stuck = b.rings.seize(1);
        // The third goes to its inbox too, and waits behind the stuck
        // parts...
        w0.now = Now {
            ns: 1 + STEAL_AFTER_NS - 1,
        };
        assert_eq!(w0.rx(UNPROT, &esp[64..96])[PROT].len(), 0);
        assert_eq!(w0.w.counters().spread_out, 96);
        // ...where worker 0 takes it back once the oldest part is
        // overdue, and does it itself; it still waits its turn.
        w0.now = Now {
            ns: 1 + STEAL_AFTER_NS,
        };
        w0.w.tick(&mut w0.tx, w0.now);
        assert_eq!(
            w0.take()[PROT].len(),
            0,
            "nothing may overtake the missing parts"
        );
        assert_eq!(w0.w.counters().spread_out, 64, "taken back");
        assert_eq!(w0.w.counters().spreading, 96);
        // At the bound the stuck parts are given up, and it leaves.
        w0.now = Now {
            ns: 1 + MAX_WAIT_NS,
        };
        w0.w.tick(&mut w0.tx, w0.now);
        let mut released = w0.take()[PROT].clone();
        assert_eq!(released.len(), 32, "the third burst");
        // The stuck worker wakes up: both its parts come back late (cut
        // at 1 ns; with `stale`, past the age cap).
        if stale {
            w0.now = Now {
                ns: 2 + LATE_SEND_MAX_NS,
            };
        }
        b.rings.unseize(1, stuck);
        w1.w.tick(&mut w1.tx, w1.now);
        w0.w.tick(&mut w0.tx, w0.now);
        let late_out = w0.take()[PROT].clone();
        let lost = match late {
            SpreadLate::Drop => {
                assert_eq!(late_out.len(), 0);
                64
            }
            SpreadLate::Send if stale => {
                assert_eq!(late_out.len(), 0, "too old to send");
                64
            }
            SpreadLate::Send => {
                // Both parts, as host A sent them, after the third burst.
                assert!(late_out == delivered[..64], "{outer:?}");
                0
            }
        };
        assert_eq!(w0.drops(DropReason::ReorderLate), lost);
        // A part handed out now comes back inside its bound and leaves.
        assert_eq!(w0.rx(UNPROT, &esp[96..128])[PROT].len(), 0);
        w1.w.tick(&mut w1.tx, w1.now);
        w0.w.tick(&mut w0.tx, w0.now);
        released.extend(w0.take()[PROT].iter().cloned());
        assert_eq!(released.len(), 64);
        let seqs: Vec<(u32, u32)> = released.iter().map(|f| flow_seq(f)).collect();
        for f in 0..FLOWS {
            let s: Vec<u32> = seqs.iter().filter(|x| x.0 == f).map(|x| x.1).collect();
            assert!(s.windows(2).all(|w| w[0] < w[1]), "flow {f}: {s:?}");
        }
        // The third and the fourth burst, as host A sent them, in order.
        assert!(released[..32] == delivered[64..96], "{outer:?}");
        assert!(released[32..] == delivered[96..128], "{outer:?}");
        let c = w0.w.counters();
        assert_eq!(c.drops.get(DropReason::ReorderLate), lost, "{:?}", c.drops);
        assert_eq!(c.drops.total(), lost, "{:?}", c.drops);
        assert_eq!(c.reorder_late_sent, 64 - lost);
        assert_eq!(c.tx - c.generated, 128 - lost, "{c:?}");
        assert_eq!(c.spreading, 0);
        assert!(c.balanced(), "{c:?}");
        assert_eq!(c.spread_out, 96);
        assert_eq!(w1.w.counters().spread_in, 96);
    }

    /// What the finishing worker leaves unfinished goes through the
    /// receiving worker's full path, in its place: packets that arrive
    /// with TTL 1 (A's hop took one) are answered with a time exceeded
    /// back through the tunnel by worker 0 (counted there: `ttl_exceeded`,
    /// `generated`), sealed in the tunnel's outer form; the others leave
    /// in order, finished by the helper. In every outer form.
    #[test]
    fn what_a_helper_leaves_unfinished_takes_the_receivers_full_path() {
        for outer in Outer::ALL {
            what_a_helper_leaves_unfinished(outer);
        }
    }

    fn what_a_helper_leaves_unfinished(outer: Outer) {
        let stream = esp_stream_ttl(outer, 32, |i| if i % 4 == 1 { 2 } else { 64 });
        let b = B::new(outer, 2);
        let shared = SharedNeighbors::default();
        let mut w0 = b.owner(&shared);
        let mut w1 = b.worker(1, &shared);
        // (The ARP answers above count as generated.)
        let generated = w0.w.counters().generated;
        assert_eq!(w0.rx(UNPROT, &stream.esp)[PROT].len(), 0);
        assert_eq!(w0.w.counters().spread_out, 32, "handed out whole");
        w1.w.tick(&mut w1.tx, w1.now);
        w0.w.tick(&mut w0.tx, w0.now);
        let out = w0.take();
        // The packets that had TTL left, as host A sent them, in order.
        let through: Vec<Vec<u8>> = stream
            .delivered()
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % 4 != 1)
            .map(|(_, f)| f)
            .collect();
        assert_eq!(out[PROT].len(), 24);
        assert!(out[PROT] == through, "{outer:?}");
        // The answers: ESP to A in the tunnel's form, one per TTL-1
        // packet, numbered by B's outbound SA.
        assert_eq!(out[UNPROT].len(), 8);
        for (i, frame) in out[UNPROT].iter().enumerate() {
            assert_eq!(outer.check_esp(frame, true), (0xb001, i as u32 + 1));
        }
        let c = w0.w.counters();
        assert_eq!(c.drops.get(DropReason::TtlExceeded), 8, "{:?}", c.drops);
        assert_eq!(c.generated - generated, 8);
        assert!(c.balanced() && c.spreading == 0, "{c:?}");
        let h = w1.w.counters();
        assert_eq!((h.spread_in, h.generated, h.drops.total()), (32, 0, 0));
    }

    /// Packets outside the tunnel's selectors, decided on a helper: the
    /// receiving worker counts each as `policy_mismatch` (and in the
    /// tunnel's counter), the helper counts nothing, and the rest leaves
    /// in order.
    #[test]
    fn a_selector_mismatch_decided_on_a_helper_is_counted_by_the_receiver() {
        let n = 1000u32;
        let esp = esp_stream(Outer::Esp4, n).esp;
        // B lets in flow 0 (10.1.0.20) only.
        let b = B::with(Outer::Esp4, 2, Some("10.1.0.20/32"));
        let (out, w0, helpers) = run_spread_on(b, 1, &esp, 64);
        for (next, frame) in out.iter().enumerate() {
            assert_eq!(flow_seq(frame), (0, next as u32), "only flow 0, in order");
        }
        let outside = u64::from(n) - out.len() as u64;
        assert!(outside > u64::from(n) / 2, "{outside}");
        let c = w0.w.counters();
        assert_eq!(c.drops.get(DropReason::PolicyMismatch), outside);
        assert_eq!(c.drops.total(), outside, "{:?}", c.drops);
        assert_eq!(c.tunnels[0].in_policy_mismatch, outside);
        assert!(c.balanced() && c.spreading == 0, "{c:?}");
        assert!(c.spread_out > u64::from(n) / 4, "{}", c.spread_out);
        assert_eq!(helpers[0].spread_in, c.spread_out);
        assert_eq!(
            (helpers[0].rx, helpers[0].tx, helpers[0].drops.total()),
            (0, 0, 0)
        );
    }

    /// The receiving worker switches snapshots while a part is out: the
    /// helper finishes it against the snapshot the part was cut from, and
    /// at release the ready frames are checked again against the tunnel
    /// of the current one. Narrower selectors there: what they no longer
    /// let in is dropped (`policy_mismatch`); the same tunnel in a new
    /// snapshot: everything leaves.
    #[test]
    fn a_snapshot_change_between_ticket_and_release_checks_the_frames_again() {
        let esp = esp_stream(Outer::Esp4, 64).esp;
        let flow0 = esp
            .iter()
            .take(32)
            .enumerate()
            .filter(|(i, _)| (i * 7 + i / 3) % FLOWS as usize == 0)
            .count() as u64;
        for (narrow, left) in [(true, flow0), (false, 32)] {
            let b = B::new(Outer::Esp4, 2);
            let shared = SharedNeighbors::default();
            let mut w0 = b.owner(&shared);
            let mut w1 = b.worker(1, &shared);
            assert_eq!(w0.rx(UNPROT, &esp[..32])[PROT].len(), 0);
            assert_eq!(w0.w.counters().spread_out, 32, "handed out whole");
            let next = b_snapshot(Outer::Esp4, narrow.then_some("10.1.0.20/32")).1;
            w0.w.set_tables(next);
            // Worker 1 finishes the part under the old snapshot (every
            // packet matched there).
            w1.w.tick(&mut w1.tx, w1.now);
            w0.w.tick(&mut w0.tx, w0.now);
            let out = w0.take()[PROT].clone();
            assert_eq!(out.len() as u64, left, "narrow {narrow}");
            if narrow {
                assert!(out.iter().all(|f| flow_seq(f).0 == 0));
            }
            let c = w0.w.counters();
            assert_eq!(c.drops.get(DropReason::PolicyMismatch), 32 - left);
            assert_eq!(c.drops.total(), 32 - left, "{:?}", c.drops);
            assert_eq!(c.tunnels[0].in_policy_mismatch, 32 - left);
            assert!(c.balanced() && c.spreading == 0, "{c:?}");
            assert_eq!(w1.w.counters().drops.total(), 0);
        }
    }

    /// Both ends with IPv6 inner traffic as well: a protected IPv6 address
    /// and prefix, B's host B known statically.
    fn with_ipv6_inside(
        gw: espgw_control::fixtures::GatewayToml,
        b_side: bool,
    ) -> espgw_control::fixtures::GatewayToml {
        let (me, peer) = if b_side { (2, 1) } else { (1, 2) };
        let mut gw = gw
            .prot_address(&format!("fd00:{me}::1/64"))
            .map_tunnels(|mut t| {
                t.local_ts.push(format!("fd00:{me}::/64"));
                t.remote_ts.push(format!("fd00:{peer}::/64"));
                t
            });
        if b_side {
            gw = gw.section(
                "[[neighbor]]\naddress = \"fd00:2::10\"\nmac = \"02:00:00:00:0b:0b\"\nport = \"prot\"",
            );
        }
        gw
    }

    /// An IPv6 UDP packet with `data_len` bytes of payload (the UDP
    /// checksum left 0: nothing on the way checks it).
    fn udp6(src: &str, dst: &str, hop_limit: u8, data_len: usize) -> Vec<u8> {
        let mut p = vec![0u8; 48 + data_len];
        Ipv6Repr {
            src_addr: v6(src),
            dst_addr: v6(dst),
            next_header: ip_protocol::UDP,
            payload_len: (8 + data_len) as u16,
            hop_limit,
            traffic_class: 0,
            flow_label: 0,
        }
        .emit(&mut p)
        .unwrap();
        UdpRepr {
            src_port: 40000,
            dst_port: 5201,
            payload_len: data_len as u16,
        }
        .emit(&mut p[40..])
        .unwrap();
        for (i, b) in p[48..].iter_mut().enumerate() {
            *b = i as u8;
        }
        p
    }

    /// IPv6 inside the tunnel, its fast path (TCP or UDP right after the
    /// fixed header, on a `V6Meta`) and what it leaves to the general one:
    /// A seals plain UDP, the same with link padding after it, and UDP
    /// behind a hop-by-hop header; drops a multicast destination, one no
    /// policy covers and UDP to its own address, each for its reason, and
    /// answers a hop limit of 1 with time exceeded. B delivers the three
    /// as sent, hop limits less two; a B whose selectors leave A's host
    /// out drops each as a policy mismatch.
    #[test]
    fn ipv6_inside_fast_path_and_its_exceptions() {
        // Host A a static neighbor: the time exceeded leaves at once.
        let host_a = HOST_A_MAC.map(|b| format!("{b:02x}")).join(":");
        let config = with_ipv6_inside(demo_gateway(false).default_action("discard"), false)
            .section(&format!(
                "[[neighbor]]\naddress = \"fd00:1::20\"\nmac = \"{host_a}\"\nport = \"prot\""
            ));
        let mut a = Gw::new(tables_from(config.render(), [A_PROT_MAC, A_UNPROT_MAC]));
        Outer::Esp4.learn_peer(&mut a, false);
        let frame = |p: &[u8]| eth(A_PROT_MAC, HOST_A_MAC, ethertype::IPV6, p);
        let plain = udp6("fd00:1::20", "fd00:2::10", 64, 16);
        let padded_inner = udp6("fd00:1::21", "fd00:2::10", 64, 16);
        let mut padded = frame(&padded_inner);
        padded.extend_from_slice(&[0xee; 6]);
        // A hop-by-hop header (PadN) before the UDP header.
        let mut hbh = udp6("fd00:1::22", "fd00:2::10", 64, 16);
        hbh.splice(40..40, [ip_protocol::UDP, 0, 1, 4, 0, 0, 0, 0]);
        hbh[6] = 0;
        let len = u16::from_be_bytes([hbh[4], hbh[5]]) + 8;
        hbh[4..6].copy_from_slice(&len.to_be_bytes());
        let frames = [
            frame(&plain),
            padded,
            frame(&udp6("fd00:1::20", "ff02::1", 64, 16)),
            frame(&udp6("fd00:1::20", "fd00:9::1", 64, 16)),
            frame(&udp6("fd00:1::20", "fd00:2::10", 1, 16)),
            frame(&udp6("fd00:1::20", "fd00:1::1", 64, 16)),
            frame(&hbh),
        ];
        let out = a.rx(PROT, &frames);
        assert_eq!(out[UNPROT].len(), 3, "sealed: plain, padded, hop-by-hop");
        assert_eq!(a.drops(DropReason::Multicast), 1);
        assert_eq!(a.drops(DropReason::NoPolicy), 1);
        assert_eq!(a.drops(DropReason::LocalUnsupported), 1);
        assert_eq!(out[PROT].len(), 1, "time exceeded to host A");
        let (e, icmp) = l3(&out[PROT][0]);
        assert_eq!((e.dst_addr, e.ethertype), (HOST_A_MAC, ethertype::IPV6));
        assert_eq!(
            (icmp[6], icmp[40]),
            (ip_protocol::ICMPV6, 3),
            "time exceeded"
        );
        assert!(a.w.counters().balanced());

        let b_config = |remote: &str| {
            with_ipv6_inside(demo_gateway(true).default_action("discard"), true)
                .map_tunnels(|mut t| {
                    let last = t.remote_ts.len() - 1;
                    t.remote_ts[last] = remote.to_string();
                    t
                })
                .render()
        };
        let mut b = Gw::new(tables_from(
            b_config("fd00:1::/64"),
            [B_PROT_MAC, B_UNPROT_MAC],
        ));
        Outer::Esp4.learn_peer(&mut b, true);
        let delivered = b.rx(UNPROT, &out[UNPROT]);
        let expected: Vec<Vec<u8>> = [plain, padded_inner, hbh]
            .into_iter()
            .map(|mut p| {
                p[7] -= 2;
                eth(HOST_B_MAC, B_PROT_MAC, ethertype::IPV6, &p)
            })
            .collect();
        assert_eq!(delivered[PROT], expected);
        assert!(b.w.counters().balanced());

        let mut narrow = Gw::new(tables_from(
            b_config("fd00:1::99/128"),
            [B_PROT_MAC, B_UNPROT_MAC],
        ));
        Outer::Esp4.learn_peer(&mut narrow, true);
        let none = narrow.rx(UNPROT, &out[UNPROT]);
        assert!(none[PROT].is_empty());
        assert_eq!(narrow.drops(DropReason::PolicyMismatch), 3);
    }

    /// IPv6 packets inside the tunnel, beside IPv4 ones: the helper
    /// finishes them as B's own path does (hop limit less one per gateway,
    /// the IPv6 ethertype, host B's MAC), and every flow of both families
    /// leaves in arrival order, as host A sent it, each copy one
    /// `replayed`. In every outer form (IPv6 in IPv4, IPv6 in IPv6, in
    /// UDP or not).
    #[test]
    fn ipv6_inside_the_tunnel_leaves_in_order_as_sent() {
        const FLOWS: u32 = 6;
        let n = 1200u32;
        for outer in Outer::ALL {
            let config = outer.apply(
                with_ipv6_inside(demo_gateway(false).default_action("discard"), false),
                false,
            );
            let mut a = Gw::new(tables_from(config.render(), [A_PROT_MAC, A_UNPROT_MAC]));
            outer.learn_peer(&mut a, false);
            // Flows 0 to 3 IPv4, 4 and 5 IPv6.
            let mut next = [0u32; FLOWS as usize];
            let inner: Vec<Vec<u8>> = (0..n)
                .map(|i| {
                    let f = (i * 7 + i / 3) % FLOWS;
                    let (mut p, at) = if f < 4 {
                        let src = format!("10.1.0.{}", 20 + f);
                        (udp4(&src, "10.2.0.10", 64, true, 16), 28)
                    } else {
                        let src = format!("fd00:1::{}", 20 + f);
                        (udp6(&src, "fd00:2::10", 64, 16), 48)
                    };
                    p[at..at + 4].copy_from_slice(&f.to_be_bytes());
                    p[at + 4..at + 8].copy_from_slice(&next[f as usize].to_be_bytes());
                    next[f as usize] += 1;
                    p
                })
                .collect();
            let mut esp = Vec::new();
            for chunk in inner.chunks(32) {
                let frames: Vec<Vec<u8>> = chunk
                    .iter()
                    .map(|p| {
                        let et = if p[0] >> 4 == 6 {
                            ethertype::IPV6
                        } else {
                            ethertype::IPV4
                        };
                        eth(A_PROT_MAC, HOST_A_MAC, et, p)
                    })
                    .collect();
                esp.extend(a.rx(PROT, &frames)[UNPROT].iter().cloned());
            }
            assert_eq!(esp.len(), n as usize, "{outer:?}: A sealed every packet");
            for (i, frame) in esp.iter().enumerate() {
                assert_eq!(outer.check_esp(frame, false), (0xa001, i as u32 + 1));
            }
            let esp: Vec<Vec<u8>> = esp
                .into_iter()
                .enumerate()
                .map(|(i, f)| outer.on_the_way(f, i))
                .collect();
            let offloads = vec![None; esp.len()];
            let stream = Stream {
                esp,
                inner,
                offloads,
            };
            let expected = stream.delivered();
            let (arrivals, replays) = with_replays(&stream.esp, 500);
            let b_config = demo_gateway(true)
                .default_action("discard")
                .map_tunnels(|t| t.replay_window(4096));
            let b_config = outer.apply(with_ipv6_inside(b_config, true), true);
            for helpers in [0usize, 1, 3] {
                let b = B {
                    outer,
                    snap: tables_from(b_config.render(), [B_PROT_MAC, B_UNPROT_MAC]),
                    rings: SpreadRings::new(helpers + 1),
                };
                let (out, w0, helper_counters) = run_spread_on(b, helpers, &arrivals, 64);
                let mut next = [0u32; FLOWS as usize];
                for frame in &out {
                    let (f, seq) = flow_seq(frame);
                    assert_eq!(
                        seq, next[f as usize],
                        "flow {f} out of order ({outer:?}, {helpers} helpers)"
                    );
                    next[f as usize] += 1;
                }
                assert!(next[4] > 0 && next[5] > 0, "IPv6 flows left");
                assert_eq!(out.len(), n as usize, "every packet once ({outer:?})");
                assert!(
                    out == expected,
                    "{outer:?}, {helpers} helpers: not what host A sent, in order"
                );
                check_counts(n, replays, helpers, &w0, &helper_counters);
            }
        }
    }

    /// The encrypt side: A's one outbound SA sealed by two workers at
    /// once, on their own threads, each with its own bursts of host A's
    /// packets. Every number from 1 to the total is used exactly once
    /// (each worker's increasing), every frame is ESP in the tunnel's
    /// outer form, and every packet decrypts, to what host A sent, at a
    /// receiver built from the key alone (espgw-esp's `InboundSa`, not B's
    /// tables or worker), which then refuses each again as a replay. In
    /// every outer form.
    #[test]
    fn one_outbound_sa_on_two_workers_numbers_every_packet_once() {
        // (`Nat4` only changes what B receives: the sender is `Udp4`.)
        for outer in Outer::ALL.into_iter().filter(|&o| o != Outer::Nat4) {
            one_outbound_sa_on_two_workers(outer);
        }
    }

    fn one_outbound_sa_on_two_workers(outer: Outer) {
        const WORKERS: u32 = 2;
        const BURSTS: u32 = 40;
        const BURST: u32 = 32;
        let config = outer.apply(demo_gateway(false).default_action("discard"), false);
        let (net, tables) = tables_from(config.render(), [A_PROT_MAC, A_UNPROT_MAC]);
        let shared = SharedNeighbors::default();
        let barrier = std::sync::Barrier::new(WORKERS as usize);
        // Per worker: what host A sent through it, and the ESP it sealed.
        type Sealed = (Vec<Vec<u8>>, Vec<Vec<u8>>);
        let per_worker: Vec<Sealed> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..WORKERS)
                .map(|k| {
                    let (net, tables) = (Arc::clone(&net), Arc::clone(&tables));
                    let (shared, barrier) = (&shared, &barrier);
                    s.spawn(move || {
                        let ports = net.ports.len();
                        let w =
                            Worker::new(k as usize, net, tables, VecBufPool, 32, shared.clone());
                        let mut a = Gw {
                            w,
                            tx: TxQueues::new(ports, 1 << 12),
                            now: Now { ns: 1 },
                            offloads: [Vec::new(), Vec::new()],
                        };
                        a.learn_by_arp(PROT, "10.1.0.10", HOST_A_MAC, "10.1.0.1");
                        outer.learn_peer(&mut a, false);
                        barrier.wait();
                        let (mut sent, mut esp) = (Vec::new(), Vec::new());
                        for b in 0..BURSTS {
                            let burst: Vec<Vec<u8>> = (0..BURST)
                                .map(|i| {
                                    let mut p = udp4("10.1.0.10", "10.2.0.10", 64, true, 16);
                                    p[28..32].copy_from_slice(&k.to_be_bytes());
                                    p[32..36].copy_from_slice(&(b * BURST + i).to_be_bytes());
                                    p
                                })
                                .collect();
                            let frames: Vec<Vec<u8>> =
                                burst.iter().map(|p| from_host_a(p)).collect();
                            let out = a.rx(PROT, &frames);
                            assert!(out[PROT].is_empty());
                            esp.extend(out[UNPROT].iter().cloned());
                            sent.extend(burst);
                            std::thread::yield_now();
                        }
                        (sent, esp)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let total = WORKERS * BURSTS * BURST;
        let mut numbers = Vec::new();
        for (k, (sent, esp)) in per_worker.iter().enumerate() {
            assert_eq!(esp.len(), sent.len(), "{outer:?}: worker {k} sealed all");
            let seqs: Vec<u32> = esp
                .iter()
                .map(|f| {
                    let (spi, seq) = outer.check_esp(f, false);
                    assert_eq!(spi, 0xa001);
                    seq
                })
                .collect();
            assert!(
                seqs.windows(2).all(|w| w[0] < w[1]),
                "{outer:?}: worker {k} not increasing"
            );
            numbers.extend(seqs);
        }
        numbers.sort_unstable();
        assert!(
            numbers.iter().copied().eq(1..=total),
            "{outer:?}: not every number from 1 to {total} once"
        );
        let sa = tables.outbound_sa(TunnelId(0)).unwrap();
        assert_eq!(sa.stats().packets, u64::from(total));

        // The receiver: B's end of the SA from its config values alone.
        let suite = espgw_esp::Suite::Aes128Gcm16;
        let rx = espgw_esp::InboundSa::new(
            &espgw_esp::SaConfig {
                suite,
                spi: 0xa001,
                key: espgw_esp::SecretBytes::from_hex(KEY_A_TO_B).unwrap(),
                auth_key: espgw_esp::SecretBytes::new(Vec::new()),
                esn: false,
                replay_window: 4096,
                encap: if outer.udp() {
                    espgw_esp::Encap::udp_4500()
                } else {
                    espgw_esp::Encap::None
                },
                local: outer.addr(true).parse().unwrap(),
                remote: outer.addr(false).parse().unwrap(),
                lifetimes: espgw_esp::Lifetimes::default(),
            },
            0,
        )
        .unwrap();
        // Worker 1's packets first, then worker 0's: every packet of one
        // worker overtaken by the other's (inside the window).
        for first in [true, false] {
            for (sent, esp) in per_worker.iter().rev() {
                for (sent, esp) in sent.chunks(32).zip(esp.chunks(32)) {
                    let mut pkts: Vec<VecBuf> =
                        esp.iter().map(|f| VecBuf::from_packet(&f[14..])).collect();
                    let mut verdicts = vec![espgw_esp::Verdict::default(); pkts.len()];
                    rx.decap_burst(&mut pkts, &mut verdicts, 0);
                    for ((p, v), inner) in pkts.iter().zip(&verdicts).zip(sent) {
                        if first {
                            assert_eq!(*v, espgw_esp::Verdict::Forward, "{outer:?}");
                            // A's hop took one from the TTL.
                            let mut expect = inner.clone();
                            let mut h = Ipv4Packet::new_checked(&mut expect[..]).unwrap();
                            h.set_ttl(63);
                            h.fill_checksum();
                            assert!(p.data() == &expect[..], "{outer:?}: not what A sent");
                        } else {
                            assert_eq!(
                                *v,
                                espgw_esp::Verdict::Drop(espgw_esp::DropReason::Replayed),
                                "{outer:?}"
                            );
                        }
                    }
                }
            }
        }
        let stats = rx.stats();
        assert_eq!(stats.packets, u64::from(total));
        assert_eq!(
            stats.drops.get(espgw_esp::DropReason::Replayed),
            u64::from(total)
        );
    }
}

/// `espgw check`'s replay-window and mbufs lints (espgw-control's
/// `config::fan_out_reach`) count what the rings really give a receiving
/// worker: its job boxes x a burst, the bound given in nanoseconds here
/// and in microseconds there.
#[test]
fn the_fan_outs_reach_is_what_the_config_lint_assumes() {
    use espgw_control::config::{fan_out_reach, SpreadDecrypt, SpreadLate};
    let mut dp = config_of(config_text(true, "", "")).dataplane;
    dp.spread_decrypt = SpreadDecrypt::Auto;
    for (workers, wait_us) in [(2, 100), (3, 150), (4, 400), (16, 1000)] {
        dp.workers = workers;
        dp.spread_wait_us = wait_us;
        let rings = crate::worker::SpreadRings::<VecBuf>::with_wait(
            workers,
            SpreadLate::Drop,
            crate::worker::SpreadWhen::Behind,
            false,
            u64::from(wait_us) * 1000,
        );
        let boxes = (rings.max_jobs() * usize::from(dp.burst)) as u64;
        assert_eq!(
            fan_out_reach(&dp),
            boxes.min(65536),
            "{workers} workers, {wait_us} us"
        );
    }
}
