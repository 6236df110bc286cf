//! The packets and expectations of one case for one worker: plaintext
//! packets for encrypt, packets pre-encrypted by the peer's SA for decrypt,
//! and what the sink must see come out.

use espgw_esp::{OutboundSa, Suite, Verdict};
use espgw_wire::{PacketBuf, VecBuf};

use crate::gateway::{self, Gateway};
use crate::generator::{Template, BURST};
use crate::options::{Direction, Size};
use crate::packets::{self, ETH_LEN, L1_OVERHEAD};
use crate::sink::{EspExpect, InnerExpect};

/// Distinct pre-encrypted packets per decrypt pass (about that many: a
/// multiple of the burst and of the size pattern). After a pass the
/// generator starts over with the same sequence numbers, and the stage gets
/// a fresh inbound SA (outside the timed region).
const DECRYPT_PASS: usize = 2048;

/// Everything one worker needs for one case.
pub struct CaseData {
    pub suite: Suite,
    pub direction: Direction,
    pub worker: usize,
    /// Inner IP packets (no Ethernet), one per pattern slot.
    pub inner: Vec<Template>,
    /// Outer IP ESP packets (no Ethernet), sequence 1..=n.
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

impl CaseData {
    pub fn new(
        gw: &Gateway,
        suite: Suite,
        size: Size,
        direction: Direction,
        w: usize,
    ) -> Result<Self, String> {
        let pattern = size.pattern();
        let our_out = OutboundSa::new(&gw.outbound(w), 0).map_err(|e| e.to_string())?;
        let far = gateway::far_frame(w);
        let near = gateway::protected_frame(w);

        // Encrypt: what our host sends into the protected port.
        let inner: Vec<Template> = pattern
            .iter()
            .map(|&n| Template {
                bytes: packets::ipv4_udp(n, near.src_ip, near.dst_ip),
                inner_len: n,
                seq: 0,
            })
            .collect();

        // Decrypt: what the far host sends, encrypted by the peer gateway.
        let mut esp = Vec::new();
        if direction == Direction::Decrypt {
            let peer = OutboundSa::new(&gw.peer_outbound(w), 0).map_err(|e| e.to_string())?;
            let period = BURST * pattern.len();
            let count = DECRYPT_PASS.div_ceil(period) * period;
            for i in 0..count {
                let n = pattern[i % pattern.len()];
                let mut buf = [VecBuf::with_room(
                    &packets::ipv4_udp(n, far.src_ip, far.dst_ip),
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

        let mut wire_by_len: Vec<(usize, usize)> = Vec::new();
        for &n in &pattern {
            if !wire_by_len.iter().any(|(l, _)| *l == n) {
                wire_by_len.push((n, ETH_LEN + n + our_out.overhead(n) + L1_OVERHEAD));
            }
        }
        let (local, remote) = (gateway::GW_UNPROT_IP, gateway::PEER_IP);
        let sent = || inner.iter().map(|t| t.bytes.clone()).collect::<Vec<_>>();
        let sent_expect = InnerExpect::new(near.src_ip, near.dst_ip, 64, sent());
        let sent_forwarded_expect = InnerExpect::new(near.src_ip, near.dst_ip, 63, sent());
        let originals = || {
            pattern
                .iter()
                .map(|&n| packets::ipv4_udp(n, far.src_ip, far.dst_ip))
        };
        Ok(CaseData {
            suite,
            direction,
            worker: w,
            inner,
            esp,
            esp_expect: EspExpect {
                spi: gateway::out_spi(w),
                src: local,
                dst: remote,
                outer_lens: pattern.iter().map(|&n| n + our_out.overhead(n)).collect(),
            },
            inner_expect: InnerExpect::new(far.src_ip, far.dst_ip, 64, originals()),
            forwarded_expect: InnerExpect::new(far.src_ip, far.dst_ip, 63, originals()),
            sent_expect,
            sent_forwarded_expect,
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
                let a = gateway::protected_frame(self.worker);
                self.inner
                    .iter()
                    .map(|t| Template {
                        bytes: packets::ethernet(&a, &t.bytes),
                        ..t.clone()
                    })
                    .collect()
            }
            Direction::Decrypt => {
                let a = gateway::far_frame(self.worker);
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
    use crate::sink::{check_esp, check_inner, Invalid, PeerDecrypt};
    use espgw_esp::InboundSa;

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
            let case = CaseData::new(&gw, suite, Size::Imix, Direction::Encrypt, 1).unwrap();
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
        )
        .unwrap();
        assert_eq!(case.esp.len() % BURST, 0);
        assert_eq!(case.esp[5].seq, 6);
        let mut sa = InboundSa::new(&gw.inbound(0), 0).unwrap();
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
}
