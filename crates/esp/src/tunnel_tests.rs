//! Engine tests over both directions with the toy cipher (the real ciphers
//! are exercised by tests/ once the crypto backends exist).

use std::net::IpAddr;

use espgw_wire::{PacketBuf, VecBuf};

use crate::config::{Encap, Lifetimes, Limit, SaConfig};
use crate::crypto::EspCipher;
use crate::test_cipher::ToyCipher;
use crate::{DropReason, Expiry, InboundSa, OutboundSa, Suite, Verdict};

const SPI: u32 = 0x0102_0304;

fn config(suite: Suite, outer_v6: bool, encap: Encap, esn: bool) -> SaConfig {
    let (local, remote): (IpAddr, IpAddr) = if outer_v6 {
        (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        )
    } else {
        ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap())
    };
    SaConfig {
        suite,
        spi: SPI,
        key: vec![7; suite.key_len()].into(),
        auth_key: vec![9; suite.auth_key_len()].into(),
        esn,
        replay_window: 64,
        encap,
        local,
        remote,
        lifetimes: Lifetimes::default(),
    }
}

fn toy(suite: Suite) -> Box<dyn EspCipher> {
    Box::new(ToyCipher(suite))
}

fn pair(cfg: &SaConfig) -> (OutboundSa, InboundSa) {
    // The inbound SA sees the same addresses from the other end.
    let mut back = cfg.clone();
    std::mem::swap(&mut back.local, &mut back.remote);
    if let Encap::Udp {
        local_port,
        remote_port,
    } = cfg.encap
    {
        back.encap = Encap::Udp {
            local_port: remote_port,
            remote_port: local_port,
        };
    }
    (
        OutboundSa::with_cipher(cfg, toy(cfg.suite), 0).unwrap(),
        InboundSa::with_cipher(&back, toy(cfg.suite), 0).unwrap(),
    )
}

pub(crate) fn ipv4_packet(payload: usize, seed: u8) -> Vec<u8> {
    let mut p = vec![0u8; 20 + payload];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&((20 + payload) as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 0, 1, 1]);
    for (i, b) in p[20..].iter_mut().enumerate() {
        *b = seed.wrapping_add(i as u8);
    }
    p
}

pub(crate) fn ipv6_packet(payload: usize, seed: u8) -> Vec<u8> {
    let mut p = vec![0u8; 40 + payload];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&(payload as u16).to_be_bytes());
    p[6] = 17;
    p[7] = 64;
    p[8] = 0xfd;
    p[24] = 0xfd;
    p[39] = 1;
    for (i, b) in p[40..].iter_mut().enumerate() {
        *b = seed.wrapping_add(i as u8);
    }
    p
}

fn encap(sa: &OutboundSa, packets: &[Vec<u8>], now: u64) -> (Vec<VecBuf>, Vec<Verdict>) {
    let mut bufs: Vec<VecBuf> = packets.iter().map(|p| VecBuf::from_packet(p)).collect();
    let mut verdicts = vec![Verdict::default(); bufs.len()];
    sa.encap_burst(&mut bufs, &mut verdicts, now);
    (bufs, verdicts)
}

fn decap(sa: &mut InboundSa, bufs: &mut [VecBuf], now: u64) -> Vec<Verdict> {
    let mut verdicts = vec![Verdict::default(); bufs.len()];
    sa.decap_burst(bufs, &mut verdicts, now);
    verdicts
}

/// Re-seals an encapped packet after `edit` changed its plaintext
/// (payload || pad || pad length || next header), keeping a valid ICV.
fn reseal(sa_cfg: &SaConfig, buf: &mut VecBuf, seq: u64, edit: impl FnOnce(&mut [u8])) {
    let suite = sa_cfg.suite;
    let at = crate::locate_esp(buf.data(), sa_cfg.encap).unwrap().offset;
    let cipher = ToyCipher(suite);
    let esp = &mut buf.data_mut()[at..];
    cipher.open(esp, seq, sa_cfg.esn).unwrap();
    let n = esp.len();
    edit(&mut esp[8 + suite.iv_len()..n - suite.icv_len()]);
    cipher.seal(esp, seq, sa_cfg.esn);
}

/// The length of the outer packet RFC 4303 gives for an inner packet of
/// `inner_len` bytes, worked out from the RFCs rather than from the
/// engine's own `overhead()` or `Suite` accessors (so an off-by-one in
/// either shows up here): outer IP header (20 for IPv4, 40 for IPv6), the
/// UDP header with NAT-T encapsulation (8, RFC 3948), ESP header (SPI and
/// sequence number, 8), the IV, the inner packet plus 2 trailer bytes (pad
/// length, next header) padded up to the cipher's block size (at least 4
/// bytes, RFC 4303 §2.4), and the ICV.
fn rfc4303_outer_len(suite: Suite, outer_v6: bool, udp: bool, inner_len: usize) -> usize {
    // (IV, block to pad to, ICV) per suite.
    let (iv, block, icv) = match suite {
        // RFC 4106 §3.1 / §6: 8-byte IV, no block alignment beyond
        // RFC 4303's 4 bytes, 16-byte ICV.
        Suite::Aes128Gcm16 | Suite::Aes256Gcm16 => (8, 4, 16),
        // RFC 7634 §2 / §3: 8-byte IV, 4-byte alignment, 16-byte tag.
        Suite::Chacha20Poly1305 => (8, 4, 16),
        // RFC 3602 §3: 16-byte IV and block; RFC 4868 §2.3: 16-byte ICV.
        Suite::Aes128Sha256 | Suite::Aes256Sha256 => (16, 16, 16),
        // RFC 3602; RFC 2404 §2: HMAC-SHA1-96, a 12-byte ICV.
        Suite::Aes128Sha1 => (16, 16, 12),
    };
    let outer_ip = if outer_v6 { 40 } else { 20 };
    let udp = if udp { 8 } else { 0 };
    let padded = (inner_len + 2).div_ceil(block) * block;
    outer_ip + udp + 8 + iv + padded + icv
}

#[test]
fn rfc4303_oracle_by_hand() {
    // Worked examples, so the oracle itself is checked against arithmetic
    // done on paper: AES-GCM over IPv4, 1446 + 2 = 1448 is a multiple of
    // 4: 20 + 8 + 8 + 1448 + 16 = 1500 (the inner MTU of docs/config.md).
    assert_eq!(
        rfc4303_outer_len(Suite::Aes128Gcm16, false, false, 1446),
        1500
    );
    assert_eq!(
        rfc4303_outer_len(Suite::Aes128Gcm16, false, false, 1447),
        1504
    );
    // CBC-SHA1 over IPv6 with UDP: 28 + 2 = 30 -> 32; 40 + 8 + 8 + 16 + 32 + 12.
    assert_eq!(rfc4303_outer_len(Suite::Aes128Sha1, true, true, 28), 116);
}

#[test]
fn round_trip_every_suite_family_and_encap() {
    for suite in Suite::ALL {
        for outer_v6 in [false, true] {
            for encap_kind in [Encap::None, Encap::udp_4500()] {
                for esn in [false, true] {
                    let cfg = config(suite, outer_v6, encap_kind, esn);
                    let (out, mut inb) = pair(&cfg);
                    let inner: Vec<Vec<u8>> = [0usize, 1, 15, 16, 17, 100, 1400]
                        .iter()
                        .enumerate()
                        .flat_map(|(i, &n)| [ipv4_packet(n, i as u8), ipv6_packet(n, i as u8)])
                        .collect();
                    let (mut bufs, v) = encap(&out, &inner, 0);
                    assert!(v.iter().all(|v| v.is_forward()), "{suite} {v:?}");
                    for (i, b) in bufs.iter().enumerate() {
                        let loc = crate::locate_esp(b.data(), cfg.encap).unwrap();
                        assert_eq!(loc.spi, SPI);
                        let esp = &b.data()[loc.offset..];
                        assert_eq!(&esp[4..8], &(i as u32 + 1).to_be_bytes());
                        assert_eq!(b.data()[0] >> 4, if outer_v6 { 6 } else { 4 });
                        // The length from RFC 4303 arithmetic, and what the
                        // engine promises the MTU check: the same number.
                        let udp = encap_kind != Encap::None;
                        let expected = rfc4303_outer_len(suite, outer_v6, udp, inner[i].len());
                        assert_eq!(b.len(), expected, "{suite} inner {}", inner[i].len());
                        assert_eq!(inner[i].len() + out.overhead(inner[i].len()), expected);
                    }
                    let v = decap(&mut inb, &mut bufs, 0);
                    assert!(v.iter().all(|v| v.is_forward()), "{suite} {v:?}");
                    for (b, p) in bufs.iter().zip(&inner) {
                        assert_eq!(b.data(), &p[..]);
                    }
                    assert_eq!(inb.stats().packets, inner.len() as u64);
                    assert_eq!(out.stats().packets, inner.len() as u64);
                    let bytes: usize = inner.iter().map(Vec::len).sum();
                    assert_eq!(out.stats().bytes, bytes as u64);
                    assert_eq!(inb.stats().bytes, bytes as u64);
                }
            }
        }
    }
}

/// With the UDP checksum left to the NIC (`UdpChecksum::Device`), an ESP
/// in UDP over IPv6 packet completed the way a NIC completes it
/// (`complete_offloaded_udp`) is byte for byte the packet the engine
/// computes itself, for inner IPv4 and IPv6 packets of many lengths (odd
/// ones, both seal paths: pairs and the last single); the other forms
/// ignore the choice.
#[test]
fn udp_checksum_left_to_the_device_completes_to_the_computed_packet() {
    use crate::UdpChecksum;
    use espgw_wire::checksum::complete_offloaded_udp;
    for (outer_v6, encap_kind) in [
        (true, Encap::udp_4500()),
        (true, Encap::None),
        (false, Encap::udp_4500()),
        (false, Encap::None),
    ] {
        let cfg = config(Suite::Aes128Gcm16, outer_v6, encap_kind, false);
        let computed = OutboundSa::with_cipher(&cfg, toy(cfg.suite), 0).unwrap();
        let seeded = OutboundSa::with_cipher(&cfg, toy(cfg.suite), 0).unwrap();
        assert_eq!(
            seeded.checksums_payload(),
            outer_v6 && encap_kind != Encap::None
        );
        let packets: Vec<Vec<u8>> = (0..37)
            .map(|i| match i % 2 {
                0 => ipv4_packet(i * 41 % 1400, i as u8),
                _ => ipv6_packet(i * 37 % 1400 + 1, i as u8),
            })
            .collect();
        let (want, _) = encap(&computed, &packets, 0);
        let mut got: Vec<VecBuf> = packets.iter().map(|p| VecBuf::from_packet(p)).collect();
        let mut verdicts = vec![Verdict::default(); got.len()];
        let sent = seeded.encap_burst_with(&mut got, &mut verdicts, 0, UdpChecksum::Device);
        assert_eq!(sent, packets.len());
        for (g, w) in got.iter_mut().zip(&want) {
            if seeded.checksums_payload() {
                assert_ne!(g.data(), w.data(), "a seed, not the checksum");
                complete_offloaded_udp(&mut g.data_mut()[40..]);
            }
            assert_eq!(g.data(), w.data());
        }
    }
}

#[test]
fn link_padding_is_trimmed_before_encap() {
    let cfg = config(Suite::Aes128Gcm16, false, Encap::None, false);
    let (out, mut inb) = pair(&cfg);
    let inner = ipv4_packet(6, 1);
    let mut padded = inner.clone();
    padded.extend_from_slice(&[0; 20]);
    let (mut bufs, _) = encap(&out, &[padded], 0);
    assert_eq!(decap(&mut inb, &mut bufs, 0), [Verdict::Forward]);
    assert_eq!(bufs[0].data(), &inner[..]);
}

#[test]
fn bad_inner_packets_and_missing_room_burn_no_sequence_number() {
    let cfg = config(Suite::Aes128Sha256, true, Encap::None, false);
    let (out, _) = pair(&cfg);
    let good = ipv4_packet(10, 0);
    let mut bufs = vec![
        VecBuf::from_packet(&[0x50; 30]),
        VecBuf::from_packet(&good),
        VecBuf::with_room(&good, 10, 128),
        VecBuf::with_room(&good, 128, 3),
        VecBuf::from_packet(&good[..25]),
        VecBuf::from_packet(&good),
    ];
    let mut v = vec![Verdict::default(); bufs.len()];
    assert_eq!(out.encap_burst(&mut bufs, &mut v, 0), 2);
    use DropReason::*;
    assert_eq!(
        v,
        [
            Verdict::Drop(BadInnerPacket),
            Verdict::Forward,
            Verdict::Drop(NoRoom),
            Verdict::Drop(NoRoom),
            Verdict::Drop(BadInnerPacket),
            Verdict::Forward
        ]
    );
    assert_eq!(out.last_sequence(), 2);
    assert_eq!(out.stats().drops.get(NoRoom), 2);
    assert_eq!(out.stats().drops.get(BadInnerPacket), 2);
    // A dropped packet is untouched apart from trimmed link padding.
    assert_eq!(bufs[2].data(), &good[..]);
}

#[test]
fn replayed_and_tampered_packets_are_dropped() {
    let cfg = config(Suite::Aes256Gcm16, false, Encap::None, false);
    let (out, mut inb) = pair(&cfg);
    let inner: Vec<_> = (0..3).map(|i| ipv4_packet(40, i)).collect();
    let (bufs, _) = encap(&out, &inner, 0);
    let mut tampered = bufs[1].clone();
    let n = tampered.len();
    tampered.data_mut()[n - 20] ^= 1;
    let mut burst = vec![
        bufs[0].clone(),
        tampered,
        bufs[0].clone(),
        bufs[2].clone(),
        bufs[1].clone(),
    ];
    let v = decap(&mut inb, &mut burst, 0);
    use DropReason::*;
    assert_eq!(
        v,
        [
            Verdict::Forward,
            Verdict::Drop(IcvMismatch),
            Verdict::Drop(Replayed),
            Verdict::Forward,
            // The forgery did not mark 2 as seen.
            Verdict::Forward
        ]
    );
    assert_eq!(inb.replay_window().top(), 3);
}

#[test]
fn wrong_spi_truncation_and_non_esp() {
    let cfg = config(Suite::Chacha20Poly1305, false, Encap::None, false);
    let (out, mut inb) = pair(&cfg);
    let (bufs, _) = encap(&out, &[ipv4_packet(40, 0)], 0);
    let mut wrong_spi = bufs[0].clone();
    wrong_spi.data_mut()[23] ^= 0xFF;
    let mut short = bufs[0].clone();
    short.data_mut()[2..4].copy_from_slice(&40u16.to_be_bytes());
    let mut misaligned = bufs[0].clone();
    let len = misaligned.len() as u16 - 1;
    misaligned.data_mut()[2..4].copy_from_slice(&len.to_be_bytes());
    let mut not_esp = bufs[0].clone();
    not_esp.data_mut()[9] = 6;
    let mut burst = vec![
        wrong_spi,
        short,
        misaligned,
        not_esp,
        VecBuf::from_packet(&[]),
    ];
    use DropReason::*;
    assert_eq!(
        decap(&mut inb, &mut burst, 0),
        [UnknownSpi, Truncated, Truncated, NotEsp, Truncated].map(Verdict::Drop)
    );
    assert_eq!(inb.stats().drops.total(), 5);
}

#[test]
fn bad_padding_and_bad_inner_after_decrypt() {
    let cfg = config(Suite::Aes128Sha1, false, Encap::None, false);
    use DropReason::*;
    type Edit = fn(&mut [u8]);
    let cases: [(Edit, DropReason); 5] = [
        // A pad byte that is not the RFC 4303 sequence.
        (|p| p[p.len() - 3] ^= 0x40, BadPadding),
        // Pad length larger than the plaintext.
        (|p| p[p.len() - 2] = 250, BadPadding),
        // Next header says IPv6 for an IPv4 packet.
        (|p| p[p.len() - 1] = 41, BadInnerPacket),
        // Dummy packet (next header 59): its own reason.
        (|p| p[p.len() - 1] = 59, Dummy),
        // Inner total length longer than what was carried.
        (
            |p| p[2..4].copy_from_slice(&1000u16.to_be_bytes()),
            BadInnerPacket,
        ),
    ];
    for (edit, reason) in cases {
        let (out, mut inb) = pair(&cfg);
        let (mut bufs, _) = encap(&out, &[ipv4_packet(5, 0)], 0);
        reseal(&cfg, &mut bufs[0], 1, edit);
        assert_eq!(decap(&mut inb, &mut bufs, 0), [Verdict::Drop(reason)]);
        // Authenticated, so the window moved even though the packet was dropped.
        assert_eq!(inb.replay_window().top(), 1);
    }
}

#[test]
fn tfc_padding_after_the_inner_packet_is_removed() {
    let cfg = config(Suite::Aes128Gcm16, false, Encap::None, false);
    let (out, mut inb) = pair(&cfg);
    let inner = ipv4_packet(3, 0);
    // Encap a longer packet, then shrink its inner length field: the rest is
    // TFC padding (RFC 4303 §2.7) the receiver must drop.
    let mut longer = ipv4_packet(3 + 12, 0);
    longer[2..4].copy_from_slice(&((20 + 3 + 12) as u16).to_be_bytes());
    let (mut bufs, _) = encap(&out, &[longer], 0);
    reseal(&cfg, &mut bufs[0], 1, |p| {
        p[2..4].copy_from_slice(&23u16.to_be_bytes())
    });
    assert_eq!(decap(&mut inb, &mut bufs, 0), [Verdict::Forward]);
    assert_eq!(bufs[0].data(), &inner[..]);
}

#[test]
fn sequence_numbers_run_out_without_wrapping() {
    for esn in [false, true] {
        let cfg = config(Suite::Aes128Gcm16, false, Encap::None, esn);
        let end = if esn { u64::MAX } else { u64::from(u32::MAX) };
        let out = OutboundSa::with_cipher(&cfg, toy(cfg.suite), 0)
            .unwrap()
            .starting_after(end - 2);
        let inner = vec![ipv4_packet(1, 0); 5];
        let (bufs, v) = encap(&out, &inner, 0);
        use DropReason::SaExpired;
        assert_eq!(
            v,
            [
                Verdict::Forward,
                Verdict::Forward,
                Verdict::Drop(SaExpired),
                Verdict::Drop(SaExpired),
                Verdict::Drop(SaExpired)
            ]
        );
        assert_eq!(&bufs[1].data()[24..28], &(end as u32).to_be_bytes());
        assert_eq!(out.last_sequence(), end);
        assert!(out.expiry(0).contains(Expiry::SEQUENCE_EXHAUSTED));
        let (_, v) = encap(&out, &inner[..1], 0);
        assert_eq!(v, [Verdict::Drop(SaExpired)]);
        assert_eq!(out.last_sequence(), end);
        assert_eq!(out.stats().drops.get(SaExpired), 4);
    }
}

#[test]
fn esn_decap_across_the_32_bit_boundary() {
    let cfg = config(Suite::Aes256Sha256, true, Encap::udp_4500(), true);
    let (out, mut inb) = pair(&cfg);
    let start = u64::from(u32::MAX) - 3;
    let out = out.starting_after(start);
    // The receiver has already seen the numbers up to `start`.
    inb.window.update(start).unwrap();
    let inner: Vec<_> = (0..8).map(|i| ipv6_packet(30, i)).collect();
    let (mut bufs, _) = encap(&out, &inner, 0);
    // Deliver out of order across the boundary.
    bufs.swap(1, 5);
    let v = decap(&mut inb, &mut bufs, 0);
    assert!(v.iter().all(|v| v.is_forward()), "{v:?}");
    assert_eq!(inb.replay_window().top(), start + 8);
}

#[test]
fn packet_and_byte_lifetimes() {
    let mut cfg = config(Suite::Aes128Gcm16, false, Encap::None, false);
    cfg.lifetimes.packets = Limit::new(2, 3);
    let (out, mut inb) = pair(&cfg);
    let inner = vec![ipv4_packet(10, 0); 5];
    let (mut bufs, v) = encap(&out, &inner, 0);
    assert_eq!(v.iter().filter(|v| v.is_forward()).count(), 3);
    let e = out.expiry(0);
    assert!(
        e.contains(Expiry::SOFT_PACKETS | Expiry::HARD_PACKETS),
        "{e:?}"
    );
    assert!(!e.contains(Expiry::SEQUENCE_EXHAUSTED));
    let v = decap(&mut inb, &mut bufs[..3], 0);
    assert!(v.iter().all(|v| v.is_forward()));
    assert!(inb.expiry(0).contains(Expiry::HARD_PACKETS));

    let mut cfg = config(Suite::Aes128Gcm16, false, Encap::None, false);
    cfg.lifetimes.bytes = Limit::new(40, 90); // 30-byte packets: 3 fit.
    let (out, mut inb) = pair(&cfg);
    let (mut bufs, v) = encap(&out, &inner, 0);
    assert_eq!(
        v[..4],
        [
            Verdict::Forward,
            Verdict::Forward,
            Verdict::Forward,
            Verdict::Drop(DropReason::SaExpired)
        ]
    );
    assert!(out
        .expiry(0)
        .contains(Expiry::SOFT_BYTES | Expiry::HARD_BYTES));
    assert_eq!(out.stats().bytes, 90);
    let v = decap(&mut inb, &mut bufs[..3], 0);
    assert!(v.iter().all(|v| v.is_forward()));
    assert!(inb.expiry(0).is_hard());
}

#[test]
fn seconds_lifetimes_follow_the_callers_clock() {
    let mut cfg = config(Suite::Aes128Gcm16, false, Encap::None, false);
    cfg.lifetimes.seconds = Limit::new(100, 200);
    let out = OutboundSa::with_cipher(&cfg, toy(cfg.suite), 1000).unwrap();
    let inb = &mut InboundSa::with_cipher(&cfg, toy(cfg.suite), 1000).unwrap();
    assert_eq!(out.expiry(1099), Expiry::NONE);
    assert_eq!(out.expiry(1100), Expiry::SOFT_SECONDS);
    let (mut bufs, v) = encap(&out, &[ipv4_packet(1, 0)], 1199);
    assert_eq!(v, [Verdict::Forward]);
    let (_, v) = encap(&out, &[ipv4_packet(1, 0)], 1200);
    assert_eq!(v, [Verdict::Drop(DropReason::SaExpired)]);
    // Once hard, always hard, even if a later clock reading were smaller.
    assert!(out.expiry(0).is_hard());
    assert_eq!(
        decap(inb, &mut bufs, 1200),
        [Verdict::Drop(DropReason::SaExpired)]
    );
}

#[test]
fn one_sa_shared_by_threads_never_repeats_a_sequence_number() {
    let cfg = config(Suite::Aes128Gcm16, false, Encap::None, false);
    let out = OutboundSa::with_cipher(&cfg, toy(cfg.suite), 0).unwrap();
    let seqs = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..4 {
            let (out, seqs) = (&out, &seqs);
            s.spawn(move || {
                let inner = vec![ipv4_packet(8, t); 32];
                for _ in 0..50 {
                    let (bufs, _) = encap(out, &inner, 0);
                    let mut seqs = seqs.lock().unwrap();
                    seqs.extend(
                        bufs.iter()
                            .map(|b| u32::from_be_bytes(b.data()[24..28].try_into().unwrap())),
                    );
                }
            });
        }
    });
    let mut seqs = seqs.into_inner().unwrap();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=4 * 50 * 32).collect::<Vec<u32>>());
    assert_eq!(out.stats().packets, 4 * 50 * 32);
}

#[test]
fn replay_window_off_accepts_duplicates() {
    let mut cfg = config(Suite::Aes128Gcm16, false, Encap::None, true);
    cfg.replay_window = 0;
    let (out, mut inb) = pair(&cfg);
    let (bufs, _) = encap(&out, &[ipv4_packet(4, 0)], 0);
    let mut burst = vec![bufs[0].clone(), bufs[0].clone()];
    assert_eq!(
        decap(&mut inb, &mut burst, 0),
        [Verdict::Forward, Verdict::Forward]
    );
}

#[test]
fn sas_can_be_shared_or_moved_between_cores() {
    fn shared<T: Send + Sync>() {}
    fn moved<T: Send>() {}
    shared::<OutboundSa>();
    moved::<InboundSa>();
}

/// RFC 6040 normal mode through the engine: the outer header carries the
/// inner DSCP and ECN (IPv4 and IPv6 outer, checksum valid), and on the way
/// in an outer CE marks an ECN-capable inner packet CE and drops a
/// not-ECN-capable one. (Every cell of the decapsulation table: ecn.rs.)
#[test]
fn dscp_and_ecn_cross_the_tunnel_as_rfc6040_says() {
    use espgw_wire::checksum;
    for outer_v6 in [false, true] {
        for (inner_v6, ds) in [(false, 0xb8 | 0b10), (true, 0x28 | 0b01), (false, 0)] {
            let cfg = config(Suite::Aes128Gcm16, outer_v6, Encap::None, false);
            let (out, mut inb) = pair(&cfg);
            let mut packet = if inner_v6 {
                ipv6_packet(30, 1)
            } else {
                ipv4_packet(30, 1)
            };
            if !inner_v6 {
                let sum = !checksum::sum(&packet[..20]);
                packet[10..12].copy_from_slice(&sum.to_be_bytes());
            }
            crate::ecn::tests_support::set_ds(&mut packet, ds);
            let (bufs, verdicts) = encap(&out, &[packet], 0);
            assert_eq!(verdicts, [Verdict::Forward]);
            let outer = bufs[0].data().to_vec();
            assert_eq!(crate::ecn::ds_field(&outer), ds, "outer v6 {outer_v6}");
            if !outer_v6 {
                assert_eq!(checksum::sum(&outer[..20]), 0xffff, "outer IPv4 checksum");
            }
            // A router between the gateways marks congestion (the outer
            // header is not authenticated: no re-seal needed).
            let mut marked = outer.clone();
            let new_outer_ds = ds | 0b11;
            crate::ecn::tests_support::set_ds(&mut marked, new_outer_ds);
            let mut bufs = vec![VecBuf::from_packet(&marked)];
            let verdicts = decap(&mut inb, &mut bufs, 0);
            if ds & 0b11 == 0 {
                assert_eq!(verdicts, [Verdict::Drop(DropReason::CeOnNotEct)]);
            } else {
                assert_eq!(verdicts, [Verdict::Forward]);
                let inner = bufs[0].data();
                assert_eq!(crate::ecn::ds_field(inner), (ds & !0b11) | 0b11);
                if !inner_v6 {
                    assert_eq!(checksum::sum(&inner[..20]), 0xffff, "inner IPv4 checksum");
                }
            }
        }
    }
}
