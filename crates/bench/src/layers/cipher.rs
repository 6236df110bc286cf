//! The ceiling: the ESP cipher alone (`EspCipher::seal_two` in pairs /
//! `open` of the
//! suite's backend, the very object the engine calls) over the ESP part of
//! the same packets (SPI to ICV, padded as the engine pads), in mbufs from
//! the same pool. No headers, no lookups, no counters: what the engine and
//! the worker add shows as the distance to this.

use dpdk::{Burst, Mbuf};
use espgw_esp::crypto::{new_cipher, EspCipher};
use espgw_esp::{SaConfig, Suite};
use espgw_wire::PacketBuf;

use super::{free_bulk, record_burst, tsc, BurstCycles, Ctx, Step};
use crate::generator::{Generator, Template, BURST};
use crate::options::Direction;
use crate::sink::{check_inner, Invalid};
use crate::stats::Measured;

fn cipher(cfg: &SaConfig) -> Result<Box<dyn EspCipher>, String> {
    new_cipher(cfg.suite, cfg.key.expose(), cfg.auth_key.expose()).map_err(|e| e.to_string())
}

/// The ESP packet (SPI .. ICV) of `inner` before sealing: padding 1, 2, ...
/// as RFC 4303 says, next header 4 (IPv4), ICV space zeroed.
pub fn esp_plaintext(suite: Suite, spi: u32, inner: &[u8]) -> Vec<u8> {
    let align = suite.block_align();
    let padded = (inner.len() + 2).div_ceil(align) * align;
    let pad = padded - inner.len() - 2;
    let mut p = Vec::with_capacity(8 + suite.iv_len() + padded + suite.icv_len());
    p.extend_from_slice(&spi.to_be_bytes());
    p.extend_from_slice(&[0; 4]);
    p.resize(8 + suite.iv_len(), 0);
    p.extend_from_slice(inner);
    p.extend((1..=pad).map(|b| b as u8));
    p.push(pad as u8);
    // Next header: IPv6 (41) or IPv4 (4) inside, by the version nibble.
    p.push(if inner.first().is_some_and(|b| b >> 4 == 6) {
        41
    } else {
        4
    });
    p.resize(p.len() + suite.icv_len(), 0);
    p
}

/// The cipher stage of `ctx`'s case.
pub fn stage<'a>(ctx: &'a Ctx<'a>) -> Result<Step<'a>, String> {
    let case = ctx.case;
    let gw_cfg_out = ctx.gateway.outbound(case.tunnel);
    let gw_cfg_in = ctx.gateway.inbound(case.tunnel);
    let suite = case.suite;
    let payload_at = 8 + suite.iv_len();
    // The peer's packets in the case's outer form: ESP starts after it.
    let esp_at = case.esp_expect.outer.header_len();
    let (templates, c): (Vec<Template>, Box<dyn EspCipher>) = match case.direction {
        Direction::Encrypt => (
            case.inner
                .iter()
                .map(|t| Template {
                    bytes: esp_plaintext(suite, gw_cfg_out.spi, &t.bytes),
                    ..t.clone()
                })
                .collect(),
            cipher(&gw_cfg_out)?,
        ),
        Direction::Decrypt => (
            case.esp
                .iter()
                .map(|t| Template {
                    bytes: t.bytes[esp_at..].to_vec(),
                    ..t.clone()
                })
                .collect(),
            cipher(&gw_cfg_in)?,
        ),
    };
    let mut gen = Generator::new(templates).streaming(ctx.streaming_rx);
    let mut pkts: Vec<Mbuf> = Vec::with_capacity(BURST);
    let mut staging: Burst<BURST> = Burst::new();
    let mut opened = [true; BURST];
    let mut seq = 0u64;
    let icv = suite.icv_len();
    Ok(Box::new(move |m: &mut Measured, record: bool| {
        let f0 = tsc();
        gen.fill(ctx.pool, &mut pkts)?;
        let t0 = tsc();
        match case.direction {
            // In pairs, as `OutboundSa::encap_burst` hands packets to the
            // cipher (`EspCipher::seal_two`), so the ceiling is the same
            // call the engine makes.
            Direction::Encrypt => {
                let mut pairs = pkts.chunks_exact_mut(2);
                for pair in pairs.by_ref() {
                    if let [a, b] = pair {
                        c.seal_two((a.data_mut(), seq + 1), (b.data_mut(), seq + 2), false);
                        seq += 2;
                    }
                }
                for p in pairs.into_remainder() {
                    seq += 1;
                    c.seal(p.data_mut(), seq, false);
                }
            }
            Direction::Decrypt => {
                for ((p, slot), ok) in pkts.iter_mut().zip(&gen.slots).zip(opened.iter_mut()) {
                    *ok = c.open(p.data_mut(), slot.seq, false).is_ok();
                }
            }
        }
        let t1 = tsc();
        if record {
            for ((p, slot), ok) in pkts.iter().zip(&gen.slots).zip(&opened) {
                let d = p.data();
                let result = match case.direction {
                    // The tag is the part seal must have written.
                    Direction::Encrypt
                        if d.len() >= icv && d[d.len() - icv..].iter().any(|&b| b != 0) =>
                    {
                        Ok(())
                    }
                    Direction::Encrypt => Err(Invalid::Rejected),
                    Direction::Decrypt if !ok => Err(Invalid::Rejected),
                    Direction::Decrypt => d
                        .get(payload_at..payload_at + slot.inner_len)
                        .ok_or(Invalid::Truncated)
                        .and_then(|inner| check_inner(inner, &case.inner_expect)),
                };
                m.tally.record(result);
            }
        }
        let freed = free_bulk(&mut pkts, &mut staging); // back to the pool
        if record {
            let cycles = BurstCycles {
                stage: t1 - t0,
                io: t1 - f0 + freed,
                latency: t1 - t0,
            };
            record_burst(m, case, &gen.slots, cycles, ctx.tsc_hz);
        }
        Ok(())
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cipher layer's decrypt input: the peer's packets with the outer
    /// form's header cut off. Opens with the gateway's inbound key into the
    /// packets the far host sent, in every form.
    #[test]
    fn decrypt_input_opens_after_the_outer_header_of_every_form() {
        use crate::case::CaseData;
        use crate::gateway::Gateway;
        use crate::options::{Outer, Size};
        for outer in Outer::ALL {
            let gw = Gateway::with_outer(Suite::Aes128Gcm16, 1, outer).unwrap();
            let case = CaseData::new(
                &gw,
                Suite::Aes128Gcm16,
                Size::Fixed(64),
                Direction::Decrypt,
                0,
                1,
                4,
            )
            .unwrap();
            let c = cipher(&gw.inbound(0)).unwrap();
            let at = case.esp_expect.outer.header_len();
            let payload_at = 8 + Suite::Aes128Gcm16.iv_len();
            for t in case.esp.iter().take(8) {
                let mut esp = t.bytes[at..].to_vec();
                assert!(c.open(&mut esp, t.seq, false).is_ok(), "{}", outer.name());
                let inner = &esp[payload_at..payload_at + t.inner_len];
                assert_eq!(
                    check_inner(inner, &case.inner_expect),
                    Ok(()),
                    "{}",
                    outer.name()
                );
            }
        }
    }

    #[test]
    fn esp_plaintext_is_aligned_with_rfc4303_padding() {
        let inner = vec![0x45u8; 64];
        let p = esp_plaintext(Suite::Aes128Sha256, 0x1234, &inner);
        // 8 header + 16 IV + (64 + 2 -> 80) + 16 ICV.
        assert_eq!(p.len(), 8 + 16 + 80 + 16);
        let trailer = &p[8 + 16 + 64..8 + 16 + 80];
        assert_eq!(
            &trailer[..14],
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
        );
        assert_eq!(&trailer[14..], &[14, 4]);
        let gcm = esp_plaintext(Suite::Aes128Gcm16, 1, &inner);
        // GCM aligns to 4: 64 + 2 -> 68, 2 bytes of padding.
        assert_eq!(gcm.len(), 8 + 8 + 68 + 16);
    }
}
