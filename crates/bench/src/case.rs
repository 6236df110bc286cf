//! The packets and expectations of one case for one worker: plaintext
//! packets for encrypt, packets pre-encrypted by the peer's SA for decrypt,
//! and what the sink must see come out.

use espgw_esp::{OutboundSa, Suite, Verdict};
use espgw_wire::{PacketBuf, VecBuf};

use crate::flows::{Flows, FIRST_PORT};
use crate::gateway::{self, Gateway};
use crate::generator::{Template, BURST};
use crate::options::{Direction, Size};
use crate::packets::{self, ETH_LEN, L1_OVERHEAD};
use crate::sink::{EspExpect, InnerExpect};

/// Distinct pre-encrypted packets per decrypt pass (at least that many and
/// every flow: a multiple of the burst and of the size pattern). After a
/// pass the generator starts over with the same sequence numbers, and the
/// stage gets a fresh inbound SA (outside the timed region).
const DECRYPT_PASS: usize = 2048;

/// The most bytes of pre-built packets one worker's case may hold (each
/// layer keeps a copy or two more): many flows of big packets are refused
/// rather than swapping.
const MAX_PACKET_BYTES: usize = 256 << 20;

/// Everything one worker needs for one case.
pub struct CaseData {
    pub suite: Suite,
    pub direction: Direction,
    pub worker: usize,
    /// The SA pair this worker's packets use (SPIs `out_spi(tunnel)`,
    /// `in_spi(tunnel)`): its tunnel's (`worker % tunnels`), or with
    /// per-CPU SAs its own (`worker`).
    pub tunnel: usize,
    /// Whether other workers carry it too (one SA pair shared).
    pub shared: bool,
    /// Tunnels of the run (`--tunnels`, at most the workers).
    pub tunnels: usize,
    /// Distinct flows the packets cycle over.
    pub flows: usize,
    /// Inner IP packets (no Ethernet) our host sends (encrypt cases only):
    /// packet i has the size of pattern slot i and is of flow i, both
    /// cyclically.
    pub inner: Vec<Template>,
    /// Outer IP ESP packets (no Ethernet), sequence 1..=n, of the far
    /// host's flows (decrypt cases only).
    pub esp: Vec<Template>,
    /// Bytes on the encrypted link per inner length (ESP frame + L1 overhead).
    wire_by_len: Vec<(usize, usize)>,
    pub esp_expect: EspExpect,
    /// The inner packets as the engine restores them (TTL as sent).
    pub inner_expect: InnerExpect,
    /// As the worker forwards them (TTL decremented).
    pub forwarded_expect: InnerExpect,
    /// What our host sent, as the peer must find it inside our ESP (the
    /// engine alone; the worker decrements the TTL first).
    pub sent_expect: InnerExpect,
    pub sent_forwarded_expect: InnerExpect,
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: usize, b: usize) -> usize {
    a / gcd(a, b) * b
}

/// Packets in one pass over the templates: at least `at_least`, a whole
/// number of `unit`s. Packet i is of flow i % flows and of pattern slot
/// i % pattern: the sizes keep their exact shares and every flow comes at
/// least once, without the cross product of flows and sizes (which would
/// multiply the memory by the pattern's length).
fn pass_len(at_least: usize, unit: usize) -> usize {
    at_least.div_ceil(unit) * unit
}

/// Refuses a packet set of `count` packets of about `mean_len` bytes that
/// would not fit [`MAX_PACKET_BYTES`].
fn check_memory(count: usize, mean_len: f64, flows: usize) -> Result<(), String> {
    let bytes = count as f64 * (mean_len + 64.0);
    if bytes > MAX_PACKET_BYTES as f64 {
        return Err(format!(
            "--flows {flows}: {count} distinct pre-built packets of about {mean_len:.0} bytes need {:.0} MiB per worker (at most {} MiB); use fewer flows or smaller packets",
            bytes / f64::from(1 << 20),
            MAX_PACKET_BYTES >> 20
        ));
    }
    Ok(())
}

impl CaseData {
    /// Worker `w`'s packets: tunnel `w % tunnels`'s addresses, and its SA
    /// pair, or with a [`Gateway::per_cpu`] gateway the worker's own pair.
    pub fn new(
        gw: &Gateway,
        suite: Suite,
        size: Size,
        direction: Direction,
        w: usize,
        tunnels: usize,
        flows: usize,
    ) -> Result<Self, String> {
        let pattern = size.pattern();
        let tunnels = tunnels.max(1);
        // Worker w's packets are tunnel `net`'s (its addresses) and go
        // through SA pair `t`: the tunnel's, or with per-CPU SAs
        // (`Gateway::per_cpu`, one tunnel) the worker's own pair.
        let net = w % tunnels;
        let t = if gw.is_per_cpu() { w } else { net };
        let our_out = OutboundSa::new(&gw.outbound(t), 0).map_err(|e| e.to_string())?;
        let far = gateway::far_frame(net);
        let near = gateway::protected_frame(net);
        // Each side's flows come from its own network, which the tunnel's
        // traffic selectors cover.
        let near_flows = Flows::new(flows, near.src_ip)?;
        let far_flows = Flows::new(flows, far.src_ip)?;

        // Encrypt: what our host sends into the protected port.
        let mut inner = Vec::new();
        if direction == Direction::Encrypt {
            let count = pass_len(flows, pattern.len());
            check_memory(count, size.mean(), flows)?;
            inner = (0..count)
                .map(|i| {
                    let n = pattern[i % pattern.len()];
                    let (src, sport) = near_flows.source(i);
                    Template {
                        bytes: packets::inner_udp(gw.inner, n, src, near.dst_ip, sport),
                        inner_len: n,
                        seq: 0,
                    }
                })
                .collect();
        }

        // Decrypt: what the far host sends, encrypted by the peer gateway.
        let mut esp = Vec::new();
        if direction == Direction::Decrypt {
            let peer = OutboundSa::new(&gw.peer_outbound(t), 0).map_err(|e| e.to_string())?;
            // Whole bursts: a pass ends where a burst does.
            let count = pass_len(flows.max(DECRYPT_PASS), lcm(BURST, pattern.len()));
            check_memory(count, size.mean(), flows)?;
            esp.reserve(count);
            for i in 0..count {
                let n = pattern[i % pattern.len()];
                let (src, sport) = far_flows.source(i);
                let mut buf = [VecBuf::with_room(
                    &packets::inner_udp(gw.inner, n, src, far.dst_ip, sport),
                    VecBuf::DEFAULT_HEADROOM,
                    256,
                )];
                let mut verdict = [Verdict::default()];
                peer.encap_burst(&mut buf, &mut verdict, 0);
                if !verdict[0].is_forward() {
                    return Err(format!(
                        "peer encap of a {n}-byte packet failed: {verdict:?}"
                    ));
                }
                esp.push(Template {
                    bytes: buf[0].data().to_vec(),
                    inner_len: n,
                    seq: i as u64 + 1,
                });
            }
        }

        let mut sizes: Vec<usize> = Vec::new();
        for &n in &pattern {
            if !sizes.contains(&n) {
                sizes.push(n);
            }
        }
        let wire_by_len = sizes
            .iter()
            .map(|&n| (n, ETH_LEN + n + our_out.overhead(n) + L1_OVERHEAD))
            .collect();
        let (local, remote) = (gw.local(), gateway::outer_remote(gw.outer));
        // Flow 0's packet of each size: the sink's reference.
        let flow0 = |a: &packets::FrameAddrs| {
            sizes
                .iter()
                .map(|&n| packets::inner_udp(gw.inner, n, a.src_ip, a.dst_ip, FIRST_PORT))
                .collect::<Vec<_>>()
        };
        let expect = |f: Flows, a: &packets::FrameAddrs, ttl: u8| {
            InnerExpect::new(f, a.dst_ip, ttl, flow0(a)).of(gw.inner)
        };
        Ok(CaseData {
            suite,
            direction,
            worker: w,
            tunnel: t,
            shared: false,
            tunnels,
            flows,
            inner,
            esp,
            esp_expect: EspExpect {
                spi: gateway::out_spi(t),
                outer: gw.outer,
                src: local,
                dst: remote,
                outer_lens: pattern.iter().map(|&n| n + our_out.overhead(n)).collect(),
            },
            inner_expect: expect(far_flows, &far, 64),
            forwarded_expect: expect(far_flows, &far, 63),
            sent_expect: expect(near_flows, &near, 64),
            sent_forwarded_expect: expect(near_flows, &near, 63),
            wire_by_len,
        })
    }

    /// Bytes a packet of `inner_len` takes on the encrypted link.
    #[inline]
    pub fn wire_bytes(&self, inner_len: usize) -> usize {
        self.wire_by_len
            .iter()
            .find(|(l, _)| *l == inner_len)
            .map_or(0, |(_, w)| *w)
    }

    /// Ethernet frames for the worker: plaintext into the protected port
    /// (encrypt) or ESP into the unprotected port (decrypt).
    pub fn frames(&self) -> Vec<Template> {
        match self.direction {
            Direction::Encrypt => {
                let a = gateway::protected_frame(self.tunnel);
                self.inner
                    .iter()
                    .map(|t| Template {
                        bytes: packets::ethernet(&a, &t.bytes),
                        ..t.clone()
                    })
                    .collect()
            }
            Direction::Decrypt => {
                let a = gateway::far_frame(self.tunnel);
                self.esp
                    .iter()
                    .map(|t| Template {
                        bytes: packets::ethernet(&a, &t.bytes),
                        ..t.clone()
                    })
                    .collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Outer;
    use crate::sink::{check_esp, check_ethernet_of, check_inner, Invalid, PeerDecrypt};
    use espgw_esp::InboundSa;
    use std::collections::HashSet;

    fn encap(gw: &Gateway, w: usize, ip: &[u8]) -> Vec<u8> {
        let sa = OutboundSa::new(&gw.outbound(w), 0).unwrap();
        let mut buf = [VecBuf::with_room(ip, VecBuf::DEFAULT_HEADROOM, 256)];
        let mut v = [Verdict::default()];
        sa.encap_burst(&mut buf, &mut v, 0);
        assert!(v[0].is_forward());
        buf[0].data().to_vec()
    }

    #[test]
    fn our_esp_passes_the_sink_and_the_peer_and_a_flipped_bit_does_not() {
        for suite in Suite::ALL {
            let gw = Gateway::new(suite, 2).unwrap();
            let case = CaseData::new(&gw, suite, Size::Imix, Direction::Encrypt, 1, 8, 64).unwrap();
            let esp = encap(&gw, 1, &case.inner[7].bytes);
            assert_eq!(
                check_esp(&esp, &case.esp_expect),
                Ok(()),
                "{}",
                suite.name()
            );
            let mut peer =
                PeerDecrypt::new(&gw.peer_inbound(1), case.sent_expect.clone(), 1).unwrap();
            assert_eq!(peer.check(&esp), Ok(()), "{}", suite.name());
            let mut flipped = encap(&gw, 1, &case.inner[0].bytes);
            let last = flipped.len() - 20;
            flipped[last] ^= 1;
            assert_eq!(
                peer.check(&flipped),
                Err(Invalid::PeerCannotDecrypt),
                "{}",
                suite.name()
            );
            // Worker 0's SA is not worker 1's: wrong SPI for the sink.
            let other = encap(&gw, 0, &case.inner[0].bytes);
            assert_eq!(check_esp(&other, &case.esp_expect), Err(Invalid::WrongSpi));
        }
    }

    #[test]
    fn decrypt_templates_open_with_the_gateway_sa_in_sequence() {
        let gw = Gateway::new(Suite::Aes256Sha256, 1).unwrap();
        let case = CaseData::new(
            &gw,
            Suite::Aes256Sha256,
            Size::Fixed(100),
            Direction::Decrypt,
            0,
            8,
            64,
        )
        .unwrap();
        assert_eq!(case.esp.len() % BURST, 0);
        assert_eq!(case.esp[5].seq, 6);
        let sa = InboundSa::new(&gw.inbound(0), 0).unwrap();
        for t in case.esp.iter().take(40) {
            let mut buf = [VecBuf::with_room(&t.bytes, VecBuf::DEFAULT_HEADROOM, 0)];
            let mut v = [Verdict::default()];
            sa.decap_burst(&mut buf, &mut v, 0);
            assert!(v[0].is_forward(), "{v:?}");
            assert_eq!(check_inner(buf[0].data(), &case.inner_expect), Ok(()));
        }
        // The wire bytes include the ESP overhead and Ethernet L1 framing.
        assert!(case.wire_bytes(100) > 100 + ETH_LEN + L1_OVERHEAD + 8 + 16 + 12);
    }

    /// Source address and UDP source port of an inner IPv4/UDP packet.
    fn flow_of(ip: &[u8]) -> (std::net::Ipv4Addr, u16) {
        (
            std::net::Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
            u16::from_be_bytes([ip[20], ip[21]]),
        )
    }

    #[test]
    fn encrypt_packets_cycle_over_the_requested_flows() {
        let gw = Gateway::new(Suite::Aes128Gcm16, 1).unwrap();
        for flows in [1, 64, 100] {
            let case = CaseData::new(
                &gw,
                Suite::Aes128Gcm16,
                Size::Imix,
                Direction::Encrypt,
                0,
                8,
                flows,
            )
            .unwrap();
            let seen: HashSet<_> = case.inner.iter().map(|t| flow_of(&t.bytes)).collect();
            assert_eq!(seen.len(), flows, "{flows} flows");
            // Every packet passes the peer's view of what our host sent,
            // and every size of the pattern comes with the flows.
            for t in &case.inner {
                let mut p = t.bytes.clone();
                assert_eq!(check_inner(&p, &case.sent_expect), Ok(()));
                // The same packet from the first port past the set.
                p[20..22].copy_from_slice(&(FIRST_PORT + flows as u16).to_be_bytes());
                assert_eq!(
                    check_inner(&p, &case.sent_expect),
                    Err(Invalid::UnknownFlow)
                );
            }
            // Whole imix patterns, not flows x pattern packets.
            assert_eq!(case.inner.len(), flows.div_ceil(12) * 12);
        }
    }

    #[test]
    fn decrypt_packets_of_many_flows_open_and_pass_the_sink() {
        let gw = Gateway::new(Suite::Aes128Gcm16, 1).unwrap();
        let case = CaseData::new(
            &gw,
            Suite::Aes128Gcm16,
            Size::Fixed(64),
            Direction::Decrypt,
            0,
            8,
            3000,
        )
        .unwrap();
        // A pass covers every flow, in whole bursts.
        assert_eq!(case.esp.len(), 3008, "3000 rounded up to bursts");
        let sa = InboundSa::new(&gw.inbound(0), 0).unwrap();
        let mut seen = HashSet::new();
        for t in &case.esp {
            let mut buf = [VecBuf::with_room(&t.bytes, VecBuf::DEFAULT_HEADROOM, 0)];
            let mut v = [Verdict::default()];
            sa.decap_burst(&mut buf, &mut v, 0);
            assert!(v[0].is_forward(), "{v:?}");
            assert_eq!(check_inner(buf[0].data(), &case.inner_expect), Ok(()));
            seen.insert(flow_of(buf[0].data()));
        }
        assert_eq!(seen.len(), 3000);
    }

    /// `ip` sealed by tunnel `w`'s outbound SA of a gateway whose tunnels
    /// are in the `outer` form (same SPIs and keys in every form).
    fn encap_in(outer: Outer, w: usize, ip: &[u8]) -> Vec<u8> {
        encap(
            &Gateway::with_outer(Suite::Aes128Gcm16, 2, outer).unwrap(),
            w,
            ip,
        )
    }

    /// The form of an outer packet read from its bytes, independently of
    /// the sink: IP version and protocol / next header.
    fn form_of(ip: &[u8]) -> (u8, u8) {
        match ip[0] >> 4 {
            4 => (4, ip[9]),
            6 => (6, ip[6]),
            v => (v, 0),
        }
    }

    fn expected_form(outer: Outer) -> (u8, u8) {
        (
            if outer.ipv6() { 6 } else { 4 },
            if outer.udp() { 17 } else { 50 },
        )
    }

    #[test]
    fn encrypt_output_of_every_outer_form_is_in_that_form_and_passes_the_sink() {
        for outer in Outer::ALL {
            let what = outer.name();
            let gw = Gateway::with_outer(Suite::Aes128Gcm16, 2, outer).unwrap();
            let case = CaseData::new(
                &gw,
                Suite::Aes128Gcm16,
                Size::Imix,
                Direction::Encrypt,
                1,
                8,
                64,
            )
            .unwrap();
            assert_eq!(case.esp_expect.outer, outer, "{what}");
            for t in case.inner.iter().take(12) {
                let esp = encap(&gw, 1, &t.bytes);
                assert_eq!(form_of(&esp), expected_form(outer), "{what}");
                // Where the SA's own parser finds the ESP: after the form's
                // header, 20 or 40 bytes of IP and 8 of UDP.
                let at = espgw_esp::locate_esp(&esp, gw.inbound(1).encap).unwrap();
                assert_eq!(at.offset, outer.header_len(), "{what}");
                assert_eq!(check_esp(&esp, &case.esp_expect), Ok(()), "{what}");
                // The outer length the case expects, and the wire bytes, grow
                // with the form's header: 8 for UDP, 20 more for IPv6.
                let esp4_len =
                    t.inner_len + 8 + 8 + 16 + (t.inner_len + 2).div_ceil(4) * 4 - t.inner_len + 20;
                assert_eq!(esp.len(), esp4_len + outer.header_len() - 20, "{what}");
                let mut peer =
                    PeerDecrypt::new(&gw.peer_inbound(1), case.sent_expect.clone(), 1).unwrap();
                assert_eq!(peer.check(&esp), Ok(()), "{what}");
            }
            // The worker layer's frames: the form's ethertype or nothing.
            let esp = encap(&gw, 1, &case.inner[0].bytes);
            let frame = packets::ethernet(&gateway::far_frame(1), &esp);
            let ethertype = if outer.ipv6() {
                [0x86, 0xdd]
            } else {
                [0x08, 0x00]
            };
            assert_eq!(frame[12..14], ethertype, "{what}");
            let (src, dst) = (
                frame[6..12].try_into().unwrap(),
                frame[0..6].try_into().unwrap(),
            );
            assert_eq!(
                check_ethernet_of(&frame, src, dst, outer.ipv6()).map(<[u8]>::len),
                Ok(esp.len()),
                "{what}"
            );
            assert_eq!(
                check_ethernet_of(&frame, src, dst, !outer.ipv6()),
                Err(Invalid::WrongOuter),
                "{what}: the other IP version's ethertype"
            );
        }
    }

    #[test]
    fn the_sink_refuses_esp_of_the_right_sa_in_another_outer_form() {
        let inner = packets::ipv4_udp(200, gateway::HOST_IP, gateway::far_host(1), FIRST_PORT);
        for outer in Outer::ALL {
            let gw = Gateway::with_outer(Suite::Aes128Gcm16, 2, outer).unwrap();
            let case = CaseData::new(
                &gw,
                Suite::Aes128Gcm16,
                Size::Fixed(200),
                Direction::Encrypt,
                1,
                8,
                1,
            )
            .unwrap();
            for other in Outer::ALL {
                // Same SPI, same key, same inner packet: only the form differs.
                let esp = encap_in(other, 1, &inner);
                let want = if other == outer {
                    Ok(())
                } else {
                    Err(Invalid::WrongOuter)
                };
                assert_eq!(
                    check_esp(&esp, &case.esp_expect),
                    want,
                    "{} expected, {} sent",
                    outer.name(),
                    other.name()
                );
            }
        }
    }

    #[test]
    fn the_sink_checks_the_udp_header_of_esp_in_udp() {
        for outer in [Outer::Udp4, Outer::Udp6] {
            let what = outer.name();
            let gw = Gateway::with_outer(Suite::Aes128Gcm16, 2, outer).unwrap();
            let case = CaseData::new(
                &gw,
                Suite::Aes128Gcm16,
                Size::Fixed(200),
                Direction::Encrypt,
                1,
                8,
                1,
            )
            .unwrap();
            let good = encap(&gw, 1, &case.inner[0].bytes);
            assert_eq!(check_esp(&good, &case.esp_expect), Ok(()), "{what}");
            let udp = if outer.ipv6() { 40 } else { 20 };
            // Over IPv4 the gateway sends checksum 0; over IPv6 a valid one.
            let csum = u16::from_be_bytes([good[udp + 6], good[udp + 7]]);
            assert_eq!(csum == 0, !outer.ipv6(), "{what}: checksum {csum:#x}");
            let mut bad_sum = good.clone();
            bad_sum[udp + 7] ^= 1;
            assert_eq!(
                check_esp(&bad_sum, &case.esp_expect),
                Err(Invalid::BadChecksum),
                "{what}"
            );
            if outer.ipv6() {
                // A payload byte changed: the IPv6 checksum covers it.
                let mut bad_payload = good.clone();
                let last = bad_payload.len() - 1;
                bad_payload[last] ^= 1;
                assert_eq!(
                    check_esp(&bad_payload, &case.esp_expect),
                    Err(Invalid::BadChecksum),
                    "{what}"
                );
            }
            for at in [udp + 1, udp + 3] {
                let mut bad_port = good.clone();
                bad_port[at] ^= 1;
                assert_eq!(
                    check_esp(&bad_port, &case.esp_expect),
                    Err(Invalid::NotEsp),
                    "{what}: port byte {at}"
                );
            }
            let mut bad_len = good.clone();
            bad_len[udp + 5] ^= 4;
            assert_eq!(
                check_esp(&bad_len, &case.esp_expect),
                Err(Invalid::WrongLength),
                "{what}"
            );
        }
    }

    #[test]
    fn decrypt_input_of_every_outer_form_is_in_that_form_and_decrypts() {
        for outer in Outer::ALL {
            let what = outer.name();
            let gw = Gateway::with_outer(Suite::Aes128Gcm16, 2, outer).unwrap();
            let case = CaseData::new(
                &gw,
                Suite::Aes128Gcm16,
                Size::Imix,
                Direction::Decrypt,
                1,
                8,
                64,
            )
            .unwrap();
            let sa = InboundSa::new(&gw.inbound(1), 0).unwrap();
            let frames = case.frames();
            let ethertype = if outer.ipv6() {
                [0x86, 0xdd]
            } else {
                [0x08, 0x00]
            };
            for (t, f) in case.esp.iter().zip(&frames).take(64) {
                assert_eq!(form_of(&t.bytes), expected_form(outer), "{what}");
                assert_eq!(f.bytes[12..14], ethertype, "{what}");
                assert_eq!(f.bytes[ETH_LEN..], t.bytes[..], "{what}");
                // Addressed to our end of the tunnel in the form's family.
                let dst = if outer.ipv6() {
                    &t.bytes[24..40]
                } else {
                    &t.bytes[16..20]
                };
                let local = match gw.local() {
                    std::net::IpAddr::V4(a) => a.octets().to_vec(),
                    std::net::IpAddr::V6(a) => a.octets().to_vec(),
                };
                assert_eq!(dst, &local[..], "{what}");
                let mut buf = [VecBuf::with_room(&t.bytes, VecBuf::DEFAULT_HEADROOM, 0)];
                let mut v = [Verdict::default()];
                sa.decap_burst(&mut buf, &mut v, 0);
                assert!(v[0].is_forward(), "{what}: {v:?}");
                assert_eq!(
                    check_inner(buf[0].data(), &case.inner_expect),
                    Ok(()),
                    "{what}"
                );
            }
            // An SA of another form refuses them: the input is really in
            // this form, not one every SA takes.
            let other = if outer.udp() {
                Outer::Esp4
            } else {
                Outer::Udp4
            };
            let other = if outer.ipv6() {
                if other == Outer::Esp4 {
                    Outer::Esp6
                } else {
                    Outer::Udp6
                }
            } else {
                other
            };
            let gw_other = Gateway::with_outer(Suite::Aes128Gcm16, 2, other).unwrap();
            let sa_other = InboundSa::new(&gw_other.inbound(1), 0).unwrap();
            let mut buf = [VecBuf::with_room(
                &case.esp[0].bytes,
                VecBuf::DEFAULT_HEADROOM,
                0,
            )];
            let mut v = [Verdict::default()];
            sa_other.decap_burst(&mut buf, &mut v, 0);
            assert!(!v[0].is_forward(), "{what} read as {}: {v:?}", other.name());
        }
    }

    #[test]
    fn past_50000_flows_the_next_source_address_is_used() {
        let gw = Gateway::new(Suite::Aes128Gcm16, 1).unwrap();
        let case = CaseData::new(
            &gw,
            Suite::Aes128Gcm16,
            Size::Fixed(64),
            Direction::Encrypt,
            0,
            8,
            50_002,
        )
        .unwrap();
        assert_eq!(case.inner.len(), 50_002);
        let (src0, _) = flow_of(&case.inner[0].bytes);
        let (src_last, port_last) = flow_of(&case.inner[50_001].bytes);
        assert_eq!(u32::from(src_last), u32::from(src0) + 1);
        assert_eq!(port_last, FIRST_PORT + 1);
        assert_eq!(
            check_inner(&case.inner[50_001].bytes, &case.sent_expect),
            Ok(())
        );
    }

    #[test]
    fn too_many_big_packets_are_refused_with_the_reason() {
        let gw = Gateway::new(Suite::Aes128Gcm16, 1).unwrap();
        let err = CaseData::new(
            &gw,
            Suite::Aes128Gcm16,
            Size::Fixed(1420),
            Direction::Encrypt,
            0,
            8,
            1_000_000,
        )
        .err()
        .expect("refused");
        assert!(err.contains("--flows 1000000"), "{err}");
    }
}
