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
