//! The ESP engine alone: `OutboundSa::encap_burst` on inner IP packets, or
//! `InboundSa::decap_burst` on outer ESP packets, in mbufs, one burst per
//! call, with the SA the gateway config gives this worker's tunnel: its
//! own copy when the worker alone carries the tunnel, the gateway's (the
//! one `espgw run`'s workers would share) when several workers do.

use std::sync::Arc;

use dpdk::{Burst, Mbuf};
use espgw_esp::{InboundSa, OutboundSa, UdpChecksum, Verdict};
use espgw_wire::checksum::complete_offloaded_udp_at;
use espgw_wire::PacketBuf;

use super::{free_bulk, record_burst, tsc, BurstCycles, Ctx, Step, PEER_CHECK_EVERY};
use crate::gateway;
use crate::generator::{Generator, BURST};
use crate::options::Direction;
use crate::packets::IPV6_LEN;
use crate::sink::{check_esp, check_inner, Invalid, PeerDecrypt};
use crate::stats::Measured;

/// The engine stage of `ctx`'s case.
pub fn stage<'a>(ctx: &'a Ctx<'a>) -> Result<Step<'a>, String> {
    let case = ctx.case;
    let t = case.tunnel;
    let mut pkts: Vec<Mbuf> = Vec::with_capacity(BURST);
    let mut staging: Burst<BURST> = Burst::new();
    let mut verdicts = [Verdict::default(); BURST];
    match case.direction {
        Direction::Encrypt => {
            let sa: Arc<OutboundSa> = if case.shared {
                let tables = &ctx.gateway.tables;
                tables
                    .tunnels()
                    .filter_map(|e| e.out.as_ref())
                    .find(|sa| sa.spi() == gateway::out_spi(t))
                    .cloned()
                    .ok_or("bench gateway: no outbound SA for the shared tunnel")?
            } else {
                Arc::new(OutboundSa::new(&ctx.gateway.outbound(t), 0).map_err(|e| e.to_string())?)
            };
            let mut gen = Generator::new(case.inner.clone()).streaming(ctx.streaming_rx);
            // `--tx-checksum-offload`: ESP in UDP over IPv6 leaves the
            // engine with its UDP checksum seeded, for the NIC.
            let checksum = ctx.gateway.udp_checksum;
            let nic_completes = checksum == UdpChecksum::Device && sa.checksums_payload();
            let mut peer = PeerDecrypt::new(
                &ctx.gateway.peer_inbound(t),
                case.sent_expect.clone(),
                PEER_CHECK_EVERY,
            )?;
            Ok(Box::new(move |m: &mut Measured, record: bool| {
                let f0 = tsc();
                gen.fill(ctx.pool, &mut pkts)?;
                let t0 = tsc();
                sa.encap_burst_with(&mut pkts, &mut verdicts, 0, checksum);
                let t1 = tsc();
                if record {
                    let sample = peer.sample_next_burst();
                    for (p, v) in pkts.iter_mut().zip(&verdicts) {
                        if nic_completes && v.is_forward() {
                            // The NIC's part, outside the measured time.
                            complete_offloaded_udp_at(p.data_mut(), IPV6_LEN);
                        }
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
            let cfg = ctx.gateway.inbound(t);
            // With the fan-out the run keeps the window on (its worker
            // layer has one receiving worker per tunnel), which a shared SA
            // here cannot: each worker's generator sends the same numbers.
            // So each worker decrypts on an SA of its own then, the
            // engine's cost without the sharing.
            let shared = case.shared && ctx.spread.is_none();
            let mut sa: Arc<InboundSa> = if shared {
                // As the data plane shares it: no lock, as many workers as
                // carry the tunnel decrypt with it at once. The
                // shared cases run with the window off (runner::replay_window),
                // so nothing is reset when the packets start over.
                let tables = &ctx.gateway.tables;
                let (_, _, sa) = tables
                    .sad
                    .inbound(gateway::in_spi(t), ctx.gateway.local())
                    .and_then(|i| tables.inbound_sa(i))
                    .ok_or("bench gateway: no inbound SA for the shared tunnel")?;
                Arc::clone(sa)
            } else {
                Arc::new(InboundSa::new(&cfg, 0).map_err(|e| e.to_string())?)
            };
            let mut gen = Generator::new(case.esp.clone()).streaming(ctx.streaming_rx);
            Ok(Box::new(move |m: &mut Measured, record: bool| {
                let f0 = tsc();
                let wrapped = gen.fill(ctx.pool, &mut pkts)?;
                let filled = tsc() - f0;
                if wrapped && !shared {
                    // The same sequence numbers again: a fresh window (not
                    // timed: a real peer's sequence numbers just go on).
                    sa = Arc::new(InboundSa::new(&cfg, 0).map_err(|e| e.to_string())?);
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
