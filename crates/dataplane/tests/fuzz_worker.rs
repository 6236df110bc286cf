//! The worker fuzz target's body on stable Rust: the checked-in seed corpus
//! (fuzz/corpus/worker) plus random and mutated inputs, so CI exercises the
//! whole `Worker::process_burst` (both ports, IPv4/IPv6 outer, plain and
//! UDP-encapsulated ESP) without nightly or cargo-fuzz. The same body runs
//! under libFuzzer in crates/dataplane/fuzz (docs/fuzzing.md).
//!
//! Regenerate the seed corpus with
//! `cargo test -p espgw-dataplane --test fuzz_worker -- --ignored write_seed_corpus`.

mod fuzz_worker_body;

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use espgw_wire::checksum;
use espgw_wire::MacAddr;
use fuzz_worker_body as body;
use fuzz_worker_body::{Gateway, END_BURST, FAN_OUT, HELPER, LATE_SEND, PROT, SHORT, TICK, UNPROT};

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/worker")
}

fn corpus() -> Vec<Vec<u8>> {
    let mut entries: Vec<_> = std::fs::read_dir(corpus_dir())
        .expect("seed corpus directory")
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    entries.sort();
    entries
}

// ---------------------------------------------------------------------
// Frames as hosts and the peer gateway send them
// ---------------------------------------------------------------------

fn eth(dst: MacAddr, src: MacAddr, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut p = vec![0x45, 0, 0, 0, 0, 7, 0x40, 0, ttl, proto, 0, 0];
    p[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    let c = checksum::checksum(&p);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(l4);
    p
}

fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, hops: u8, next: u8, l4: &[u8]) -> Vec<u8> {
    let mut p = vec![0x60, 0, 0, 0];
    p.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    p.extend_from_slice(&[next, hops]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(l4);
    p
}

/// `l4` with its checksum (at `at`) filled in for IPv4 or IPv6.
fn with_l4_checksum(mut l4: Vec<u8>, at: usize, pseudo: u16) -> Vec<u8> {
    let c = checksum::finish(checksum::add(pseudo, checksum::sum(&l4)));
    l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
    l4
}

fn udp_body(data_len: usize) -> Vec<u8> {
    let mut u = vec![0x9c, 0x40, 0x14, 0x51, 0, 0, 0, 0];
    u[4..6].copy_from_slice(&((8 + data_len) as u16).to_be_bytes());
    u.extend((0..data_len).map(|i| i as u8));
    u
}

fn udp4(src: &str, dst: &str, ttl: u8, data_len: usize) -> Vec<u8> {
    let (s, d) = (src.parse().unwrap(), dst.parse().unwrap());
    let u = udp_body(data_len);
    let u = with_l4_checksum(
        u.clone(),
        6,
        checksum::pseudo_header_v4(s, d, 17, u.len() as u16),
    );
    ipv4(s, d, ttl, 17, &u)
}

fn udp6(src: &str, dst: &str, hops: u8, data_len: usize) -> Vec<u8> {
    let (s, d) = (src.parse().unwrap(), dst.parse().unwrap());
    let u = udp_body(data_len);
    let u = with_l4_checksum(
        u.clone(),
        6,
        checksum::pseudo_header_v6(s, d, 17, u.len() as u32),
    );
    ipv6(s, d, hops, 17, &u)
}

/// A TCP SYN with an MSS option of 1460 (to reach MSS clamping).
fn tcp_syn4(src: &str, dst: &str) -> Vec<u8> {
    let (s, d) = (src.parse().unwrap(), dst.parse().unwrap());
    let mut t = vec![
        0x9c, 0x41, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x60, 0x02, 0xff, 0xff, 0, 0, 0, 0,
    ];
    t.extend_from_slice(&[2, 4, 0x05, 0xb4]);
    let t = with_l4_checksum(
        t.clone(),
        16,
        checksum::pseudo_header_v4(s, d, 6, t.len() as u16),
    );
    ipv4(s, d, 64, 6, &t)
}

fn tcp_syn6(src: &str, dst: &str) -> Vec<u8> {
    let (s, d) = (src.parse().unwrap(), dst.parse().unwrap());
    let mut t = vec![
        0x9c, 0x41, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x60, 0x02, 0xff, 0xff, 0, 0, 0, 0,
    ];
    t.extend_from_slice(&[2, 4, 0x05, 0xb4]);
    let t = with_l4_checksum(
        t.clone(),
        16,
        checksum::pseudo_header_v6(s, d, 6, t.len() as u32),
    );
    ipv6(s, d, 64, 6, &t)
}

fn echo4(src: &str, dst: &str) -> Vec<u8> {
    let mut i = vec![8, 0, 0, 0, 0x42, 0x42, 0, 7];
    i.extend_from_slice(b"espgw-fuzz");
    let c = checksum::checksum(&i);
    i[2..4].copy_from_slice(&c.to_be_bytes());
    ipv4(src.parse().unwrap(), dst.parse().unwrap(), 64, 1, &i)
}

fn echo6(src: &str, dst: &str) -> Vec<u8> {
    let (s, d) = (src.parse().unwrap(), dst.parse().unwrap());
    let mut i = vec![128, 0, 0, 0, 0x42, 0x42, 0, 7];
    i.extend_from_slice(b"espgw-fuzz");
    let i = with_l4_checksum(
        i.clone(),
        2,
        checksum::pseudo_header_v6(s, d, 58, i.len() as u32),
    );
    ipv6(s, d, 64, 58, &i)
}

/// A neighbor solicitation for `target` from `src` (with its MAC option).
fn ns6(src: &str, target: &str, mac: MacAddr) -> Vec<u8> {
    let t: Ipv6Addr = target.parse().unwrap();
    let o = t.octets();
    let dst = Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    );
    let s: Ipv6Addr = src.parse().unwrap();
    let mut i = vec![135, 0, 0, 0, 0, 0, 0, 0];
    i.extend_from_slice(&o);
    i.extend_from_slice(&[1, 1]);
    i.extend_from_slice(&mac);
    let i = with_l4_checksum(
        i.clone(),
        2,
        checksum::pseudo_header_v6(s, dst, 58, i.len() as u32),
    );
    ipv6(s, dst, 255, 58, &i)
}

fn arp_request(mac: MacAddr, ip: &str, target: &str) -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4, 0, 1];
    a.extend_from_slice(&mac);
    a.extend_from_slice(&ip.parse::<Ipv4Addr>().unwrap().octets());
    a.extend_from_slice(&[0; 6]);
    a.extend_from_slice(&target.parse::<Ipv4Addr>().unwrap().octets());
    a.extend_from_slice(&[0; 18]);
    eth([0xff; 6], mac, 0x0806, &a)
}

fn from_host_b(ip: Vec<u8>) -> Vec<u8> {
    let t = if ip[0] >> 4 == 6 { 0x86dd } else { 0x0800 };
    eth(body::B_PROT_MAC, body::HOST_B_MAC, t, &ip)
}

fn from_peer(ip: Vec<u8>) -> Vec<u8> {
    let t = if ip[0] >> 4 == 6 { 0x86dd } else { 0x0800 };
    eth(body::B_UNPROT_MAC, body::A_UNPROT_MAC, t, &ip)
}

/// Inner packets host A sends to host B (and B's protected addresses).
fn host_a_traffic() -> Vec<Vec<u8>> {
    vec![
        udp4("10.1.0.10", "10.2.0.10", 64, 100),
        tcp_syn4("10.1.0.10", "10.2.0.10"),
        echo4("10.1.0.10", "10.2.0.1"),
        udp4("10.1.0.10", "10.2.0.10", 2, 20),
        udp6("fd00:1::10", "fd00:2::10", 64, 60),
        tcp_syn6("fd00:1::10", "fd00:2::10"),
        echo6("fd00:1::10", "fd00:2::1"),
        udp4("10.1.0.10", "10.2.0.20", 64, 30),
    ]
}

/// The ESP frames gateway A sends to B for `inner`, made by A's own worker.
fn esp_from_a(selector: u8, inner: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let cfg = body::parsed_config(false, selector);
    let mut a = Gateway::new(body::tables(&cfg, [body::A_PROT_MAC, body::A_UNPROT_MAC]));
    let frames: Vec<Vec<u8>> = inner
        .iter()
        .map(|ip| {
            let t = if ip[0] >> 4 == 6 { 0x86dd } else { 0x0800 };
            eth(body::A_PROT_MAC, body::HOST_A_MAC, t, ip)
        })
        .collect();
    let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
    let out = a.burst(PROT, &refs);
    assert_eq!(
        out[UNPROT].len(),
        inner.len(),
        "selector {selector}: A encapsulates every inner packet: {:?}",
        a.w.counters()
    );
    out[UNPROT].clone()
}

/// Real inputs for every config: ESP from the peer (with a replayed copy),
/// plaintext from the protected hosts, and the gateway's own traffic on
/// both ports.
fn seed_inputs() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for selector in 0..body::CONFIGS {
        let esp = esp_from_a(selector, &host_a_traffic());
        let mut frames: Vec<(u8, Vec<u8>)> = esp.iter().map(|f| (1, f.clone())).collect();
        frames.push((1 | END_BURST, esp[0].clone())); // replayed
        frames.push((1 | TICK, esp[1].clone()));
        out.push(body::encode(selector, &frames));

        let prot = vec![
            (0, from_host_b(udp4("10.2.0.10", "10.1.0.10", 64, 200))),
            (0, from_host_b(tcp_syn4("10.2.0.10", "10.1.0.10"))),
            (0, from_host_b(udp6("fd00:2::10", "fd00:1::10", 64, 80))),
            (0, from_host_b(echo4("10.2.0.10", "10.2.0.1"))),
            (0, from_host_b(echo6("fd00:2::10", "fd00:2::1"))),
            (0, from_host_b(udp4("10.2.0.10", "198.51.100.7", 64, 40))),
            (0, from_host_b(udp4("10.2.0.10", "10.1.0.10", 1, 20))),
            (0, from_host_b(udp4("10.2.0.10", "10.1.0.10", 64, 1472))),
            (0, from_host_b(udp4("10.2.0.10", "10.9.0.10", 64, 20))),
            (
                END_BURST,
                eth(
                    [0x33, 0x33, 0xff, 0, 0, 1],
                    body::HOST_B_MAC,
                    0x86dd,
                    &ns6("fd00:2::10", "fd00:2::1", body::HOST_B_MAC),
                ),
            ),
            (TICK, arp_request(body::HOST_B_MAC, "10.2.0.10", "10.2.0.1")),
            (0, from_host_b(udp4("10.2.0.10", "10.2.0.20", 64, 20))),
        ];
        out.push(body::encode(selector, &prot));

        let own = vec![
            (1, arp_request(body::A_UNPROT_MAC, "192.0.2.1", "192.0.2.2")),
            (1, from_peer(echo4("192.0.2.1", "192.0.2.2"))),
            (1, from_peer(echo6("2001:db8::1", "2001:db8::2"))),
            (
                1,
                eth(
                    [0x33, 0x33, 0xff, 0, 0, 2],
                    body::A_UNPROT_MAC,
                    0x86dd,
                    &ns6("2001:db8::1", "2001:db8::2", body::A_UNPROT_MAC),
                ),
            ),
            (1, from_peer(udp4("198.51.100.7", "10.2.0.10", 64, 40))),
            (1, from_peer(udp4("10.1.0.10", "10.2.0.10", 64, 40))),
        ];
        out.push(body::encode(selector, &own));
    }
    out
}

/// `n` UDP packets from host A to host B, packet `i` with `20 + i` bytes
/// of data (so its UDP length says which it is).
fn numbered_udp(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| udp4("10.1.0.10", "10.2.0.10", 64, 20 + i))
        .collect()
}

/// Which of [`numbered_udp`]'s packets a frame B sent is, if it is one
/// delivered to host B.
fn number_of(frame: &[u8]) -> Option<usize> {
    let f = frame.get(..40)?;
    let to_host_b = f[..6] == body::HOST_B_MAC
        && f[12..14] == [0x08, 0x00]
        && f[23] == 17
        && f[30..34] == [10, 2, 0, 10];
    let udp_len = usize::from(u16::from_be_bytes([f[38], f[39]]));
    to_host_b.then(|| udp_len.checked_sub(8 + 20)).flatten()
}

/// How a fan-out seed lets its two workers run.
#[derive(Clone, Copy, Debug)]
enum FanOut {
    /// The helper polls after the third, fourth and fifth burst.
    HelperPolls,
    /// It does not; the owner's clock moves 40 µs after those bursts
    /// instead, past the point where it takes back what waits.
    TakenBack,
    /// The same with 300 ms.
    AfterJump,
    /// A part of 16 and one of a single packet to the helper (its inbox
    /// then full), then single packets, the owner's own parts, until its
    /// job boxes run out behind them: it gives the helper's two up.
    BoxesRunOut,
}

/// Frames of a fan-out input from `esp` (A's ESP for
/// `numbered_udp(FAN_OUT_PACKETS)`). Bursts 1 and 2 (16 packets each) fill
/// the helper's inbox; burst 3 (16) becomes the owner's own part; burst 4
/// (12 new, and replays of two packets of the owner's part and two of the
/// helper's) and burst 5 (one new, a replay of one of burst 4) come once
/// the earlier parts are decrypted, so that every original is decrypted
/// before its copy.
fn fan_out_frames(esp: &[Vec<u8>], how: FanOut) -> Vec<(u8, Vec<u8>)> {
    let port = 1;
    let mut frames: Vec<(u8, Vec<u8>)> = Vec::new();
    let burst = |frames: &mut Vec<(u8, Vec<u8>)>, pkts: &[&Vec<u8>], end: u8| {
        for (i, p) in pkts.iter().enumerate() {
            let last = i + 1 == pkts.len();
            frames.push((port | if last { end } else { 0 }, (*p).clone()));
        }
    };
    if let FanOut::BoxesRunOut = how {
        burst(
            &mut frames,
            &esp[..16].iter().collect::<Vec<_>>(),
            END_BURST,
        );
        for p in &esp[16..50] {
            burst(&mut frames, &[p], END_BURST);
        }
        frames.last_mut().unwrap().0 |= HELPER;
        return frames;
    }
    let then = match how {
        FanOut::HelperPolls => END_BURST | HELPER,
        FanOut::TakenBack => END_BURST | SHORT,
        _ => END_BURST | TICK,
    };
    let b4: Vec<&Vec<u8>> = esp[48..60]
        .iter()
        .chain([&esp[40], &esp[33], &esp[5], &esp[20]])
        .collect();
    burst(
        &mut frames,
        &esp[..16].iter().collect::<Vec<_>>(),
        END_BURST,
    );
    burst(
        &mut frames,
        &esp[16..32].iter().collect::<Vec<_>>(),
        END_BURST,
    );
    burst(&mut frames, &esp[32..48].iter().collect::<Vec<_>>(), then);
    burst(&mut frames, &b4, then);
    burst(&mut frames, &[&esp[60], &esp[50]], then);
    frames
}

/// Packets of A behind each fan-out seed.
const FAN_OUT_PACKETS: usize = 61;

const FAN_OUT_KINDS: [FanOut; 4] = [
    FanOut::HelperPolls,
    FanOut::TakenBack,
    FanOut::AfterJump,
    FanOut::BoxesRunOut,
];

fn fan_out_seed_inputs() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for selector in 0..body::CONFIGS {
        let esp = esp_from_a(selector, &numbered_udp(FAN_OUT_PACKETS));
        for how in FAN_OUT_KINDS {
            out.push(body::encode(selector | FAN_OUT, &fan_out_frames(&esp, how)));
        }
        let late = fan_out_frames(&esp, FanOut::BoxesRunOut);
        out.push(body::encode(selector | FAN_OUT | LATE_SEND, &late));
    }
    out
}

#[test]
#[ignore = "writes fuzz/corpus/worker; run by hand"]
fn write_seed_corpus() {
    std::fs::create_dir_all(corpus_dir()).unwrap();
    for (i, input) in seed_inputs().iter().enumerate() {
        std::fs::write(corpus_dir().join(format!("seed-{i:03}")), input).unwrap();
    }
    for (i, input) in fan_out_seed_inputs().iter().enumerate() {
        std::fs::write(corpus_dir().join(format!("fan-out-{i:03}")), input).unwrap();
    }
}

#[test]
fn seed_corpus_runs() {
    // Byte equality with seed_inputs() is not checked: CBC IVs are random.
    let corpus = corpus();
    assert!(
        corpus.len() >= 3 * usize::from(body::CONFIGS),
        "seed corpus missing"
    );
    for input in &corpus {
        body::run(input);
    }
}

/// The seeds are real traffic: B decrypts what A's own encap made (both
/// outer families, both encapsulations, both suites) and hands every
/// inner packet to its protected side, once, the replayed copy dropped.
#[test]
fn peer_esp_seeds_are_decrypted_by_the_gateway_under_test() {
    for selector in 0..body::CONFIGS {
        let inner = host_a_traffic();
        let esp = esp_from_a(selector, &inner);
        let mut b = Gateway::b(selector);
        let mut frames: Vec<&[u8]> = esp.iter().map(|f| f.as_slice()).collect();
        frames.push(&esp[0]);
        let out = b.burst(UNPROT, &frames);
        // Delivered to host B: the UDP and TCP packets of both families (4);
        // the TTL-1 packet gets time exceeded back through the tunnel, the
        // pings to B's own addresses are answered through it, 10.2.0.20 is
        // held for ARP, and the replayed copy is dropped.
        let to_host_b = |f: &&Vec<u8>| {
            f[..6] == body::HOST_B_MAC
                && match f[12..14] {
                    [0x08, 0x00] => f[30..34] == [10, 2, 0, 10],
                    [0x86, 0xdd] => f[38..54] == "fd00:2::10".parse::<Ipv6Addr>().unwrap().octets(),
                    _ => false,
                }
        };
        let delivered = out[PROT].iter().filter(to_host_b).count();
        assert_eq!(delivered, 4, "selector {selector}");
        let c = b.w.counters();
        assert_eq!(
            c.drops.get(espgw_dataplane::DropReason::Replayed),
            1,
            "selector {selector}"
        );
        assert!(c.balanced());
    }
}

/// Runs `input` through the fuzz body: which of [`numbered_udp`]'s
/// packets reached host B, in the order they left, and the counters.
fn delivered_to_host_b(input: &[u8]) -> (Vec<usize>, body::Ran) {
    let mut delivered = Vec::new();
    let ran = body::run_observed(input, |out| {
        delivered.extend(out[PROT].iter().filter_map(|f| number_of(f)));
    })
    .expect("a non-empty input");
    (delivered, ran)
}

/// The fan-out seeds are real fan-out traffic, for every config: the
/// packets reach host B in order, each once, the four replays of burst 4
/// (caught by the helper against the window the owner and the helper
/// updated) and the one of burst 5 (caught by the owner against the
/// helper's) are the only drops; the helper decrypted the three parts
/// handed to it, or none when the owner took them back. When the job boxes
/// run out, the parts given up come back late and are dropped
/// (`reorder_late`), the rest still in order; or, with `spread_late =
/// "send"`, sent then, behind the packets that overtook them, none lost.
#[test]
fn fan_out_seeds_deliver_every_packet_once_in_order() {
    use espgw_dataplane::DropReason;
    for selector in 0..body::CONFIGS {
        let esp = esp_from_a(selector, &numbered_udp(FAN_OUT_PACKETS));
        // With `spread_late = "send"`, the 17 packets given up are sent
        // when they come back, after the ones that overtook them.
        let input = body::encode(
            selector | FAN_OUT | LATE_SEND,
            &fan_out_frames(&esp, FanOut::BoxesRunOut),
        );
        let (delivered, ran) = delivered_to_host_b(&input);
        let what = format!("selector {selector}, late parts sent: {:?}", ran.owner);
        assert_eq!(
            delivered,
            (17..50).chain(0..17).collect::<Vec<_>>(),
            "{what}"
        );
        assert_eq!(ran.owner.reorder_late_sent, 17, "{what}");
        assert_eq!(ran.owner.drops.total(), 0, "{what}");
        for how in FAN_OUT_KINDS {
            let input = body::encode(selector | FAN_OUT, &fan_out_frames(&esp, how));
            let (delivered, ran) = delivered_to_host_b(&input);
            let (c, helper) = (ran.owner, ran.helper.unwrap());
            let what = format!("selector {selector}, {how:?}: {c:?}");
            if let FanOut::BoxesRunOut = how {
                // The first single packet still finds room in the helper's
                // inbox: both parts there are given up.
                assert_eq!(delivered, (17..50).collect::<Vec<_>>(), "{what}");
                assert_eq!(c.drops.get(DropReason::ReorderLate), 17, "{what}");
                assert_eq!(c.drops.total(), 17, "{what}");
                assert_eq!(helper.spread_in, 17, "{what}");
                continue;
            }
            assert_eq!(
                delivered,
                (0..FAN_OUT_PACKETS).collect::<Vec<_>>(),
                "host B gets every packet once, in order; {what}"
            );
            assert_eq!(c.drops.get(DropReason::Replayed), 5, "{what}");
            assert_eq!(c.drops.total(), 5, "{what}");
            let decrypted_by_helper = match how {
                FanOut::HelperPolls => 48,
                _ => 0,
            };
            assert_eq!(helper.spread_in, decrypted_by_helper, "{what}");
            assert_eq!(c.spread_out, decrypted_by_helper, "{what}");
        }
    }
}

struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    for _ in 0..=rng.next_u64() % 6 {
        let r = rng.next_u64();
        let len = input.len().max(1);
        let i = (r >> 8) as usize % len;
        match r % 5 {
            0 => {
                if let Some(b) = input.get_mut(i) {
                    *b ^= 1 << (r >> 40 & 7);
                }
            }
            1 => {
                if let Some(b) = input.get_mut(i) {
                    *b = (r >> 32) as u8;
                }
            }
            2 => input.truncate(i.max(1)),
            3 => {
                let extra = rng.bytes((r >> 16) as usize % 32);
                input.splice(i.min(input.len())..i.min(input.len()), extra);
            }
            _ => {
                if let Some(b) = input.get_mut(i) {
                    *b = b.wrapping_add((r >> 24) as u8 % 5).wrapping_sub(2);
                }
            }
        }
    }
}

#[test]
fn random_and_mutated_inputs_never_panic() {
    let iterations: usize = std::env::var("ESPGW_FUZZ_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3_000);
    let corpus = corpus();
    let mut rng = Rng(0x5EED_F022_0B57);
    for i in 0..iterations {
        let mut input = if i % 8 == 0 {
            let n = (rng.next_u64() % 400) as usize;
            rng.bytes(n)
        } else {
            corpus[i % corpus.len()].clone()
        };
        mutate(&mut rng, &mut input);
        body::run(&input);
    }
}
