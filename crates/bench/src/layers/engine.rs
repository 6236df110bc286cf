//! The ESP engine alone: `OutboundSa::encap_burst` on inner IP packets, or
//! `InboundSa::decap_burst` on outer ESP packets, in mbufs, one burst per
//! call, with the SA the gateway config gives this worker's tunnel.

use dpdk::{Burst, Mbuf};
use espgw_esp::{InboundSa, OutboundSa, Verdict};
use espgw_wire::PacketBuf;

use super::{free_bulk, record_burst, tsc, BurstCycles, Ctx, Step, PEER_CHECK_EVERY};
use crate::generator::{Generator, BURST};
use crate::options::Direction;
use crate::sink::{check_esp, check_inner, Invalid, PeerDecrypt};
use crate::stats::Measured;

/// The engine stage of `ctx`'s case.
pub fn stage<'a>(ctx: &'a Ctx<'a>) -> Result<Step<'a>, String> {
    let case = ctx.case;
    let w = case.worker;
    let mut pkts: Vec<Mbuf> = Vec::with_capacity(BURST);
    let mut staging: Burst<BURST> = Burst::new();
    let mut verdicts = [Verdict::default(); BURST];
    match case.direction {
        Direction::Encrypt => {
            let sa = OutboundSa::new(&ctx.gateway.outbound(w), 0).map_err(|e| e.to_string())?;
            let mut gen = Generator::new(case.inner.clone());
            let mut peer = PeerDecrypt::new(
                &ctx.gateway.peer_inbound(w),
                case.sent_expect.clone(),
                PEER_CHECK_EVERY,
            )?;
            Ok(Box::new(move |m: &mut Measured, record: bool| {
                let f0 = tsc();
                gen.fill(ctx.pool, &mut pkts)?;
                let t0 = tsc();
                sa.encap_burst(&mut pkts, &mut verdicts, 0);
                let t1 = tsc();
                if record {
                    let sample = peer.sample_next_burst();
                    for (p, v) in pkts.iter().zip(&verdicts) {
                        m.tally.record(if v.is_forward() {
                            check_esp(p.data(), &case.esp_expect).and_then(|()| {
                                if sample {
                                    peer.check(p.data())
                                } else {
                                    Ok(())
                                }
                            })
                        } else {
                            Err(Invalid::Rejected)
                        });
                    }
                }
                let freed = free_bulk(&mut pkts, &mut staging);
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
        Direction::Decrypt => {
            let cfg = ctx.gateway.inbound(w);
            let mut sa = InboundSa::new(&cfg, 0).map_err(|e| e.to_string())?;
            let mut gen = Generator::new(case.esp.clone());
            Ok(Box::new(move |m: &mut Measured, record: bool| {
                let f0 = tsc();
                let wrapped = gen.fill(ctx.pool, &mut pkts)?;
                let filled = tsc() - f0;
                if wrapped {
                    // The same sequence numbers again: a fresh window (not
                    // timed: a real peer's sequence numbers just go on).
                    sa = InboundSa::new(&cfg, 0).map_err(|e| e.to_string())?;
                }
                let t0 = tsc();
                sa.decap_burst(&mut pkts, &mut verdicts, 0);
                let t1 = tsc();
                if record {
                    for (p, v) in pkts.iter().zip(&verdicts) {
                        m.tally.record(if v.is_forward() {
                            check_inner(p.data(), &case.inner_expect)
                        } else {
                            Err(Invalid::Rejected)
                        });
                    }
                }
                let freed = free_bulk(&mut pkts, &mut staging);
                if record {
                    let cycles = BurstCycles {
                        stage: t1 - t0,
                        io: filled + (t1 - t0) + freed,
                        latency: t1 - t0,
                    };
                    record_burst(m, case, &gen.slots, cycles, ctx.tsc_hz);
                }
                Ok(())
            }))
        }
    }
}
