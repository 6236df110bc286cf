//! The real worker: `Worker::process_burst` exactly as `espgw run` calls
//! it after an RX burst, over the bench gateway's tables. The generator
//! plays the RX queue (Ethernet frames into the protected port for
//! encrypt, ESP frames into the unprotected port for decrypt); the sink
//! plays the TX queues (takes every frame the worker queued, checks it,
//! then frees them in bulk as a PMD's TX does; taking and freeing count
//! towards the I/O-inclusive cycles, checking does not). Latency: from the end of generation of a burst to the sink taking
//! it, i.e. the time each packet of the burst spends inside the worker.

use std::time::Instant;

use dpdk::{Burst, Mbuf, Mempool};
use espgw_dataplane::neighbor::SharedNeighbors;
use espgw_dataplane::{BufPool, Now, TxQueues, Worker};
use espgw_wire::PacketBuf;

use super::{free_bulk, record_burst, tsc, BurstCycles, Ctx, Step, PEER_CHECK_EVERY};
use crate::gateway::{self, PROTECTED, UNPROTECTED};
use crate::generator::{Generator, BURST};
use crate::options::Direction;
use crate::sink::{
    check_esp, check_ethernet, check_ethernet_of, check_inner, Invalid, PeerDecrypt,
};
use crate::stats::Measured;

/// The worker's buffer source for packets it originates (ARP/ND; none in
/// the bench, whose neighbors are static).
#[derive(Clone)]
pub struct PoolSource(pub Mempool);

impl BufPool<Mbuf> for PoolSource {
    fn alloc(&self) -> Option<Mbuf> {
        self.0.alloc()
    }
}

/// Ticks the receiving worker of a fan-out until none of its packets is
/// out at another worker or waiting in its reorder stage, collecting what
/// it releases into `sent`. Bounded: a part that never comes back is a
/// bench failure, not a hang.
fn drain_fan_out(
    worker: &mut Worker<Mbuf, PoolSource>,
    txq: &mut TxQueues<Mbuf>,
    sent: &mut Vec<(usize, Mbuf)>,
    ports: usize,
    started: Instant,
) -> Result<(), String> {
    let deadline = Instant::now() + std::time::Duration::from_secs(2);
    while worker.counters().spreading != 0 {
        if Instant::now() > deadline {
            return Err(format!(
                "fan-out: {} packets still out 2 s after the generator's pass ended",
                worker.counters().spreading
            ));
        }
        let now = Now {
            ns: started.elapsed().as_nanos() as u64,
        };
        worker.tick(txq, now);
        for port in 0..ports {
            sent.extend(txq.drain(port).map(|frame| (port, frame)));
        }
        std::hint::spin_loop();
    }
    Ok(())
}

/// The worker stage of `ctx`'s case.
pub fn stage<'a>(ctx: &'a Ctx<'a>) -> Result<Step<'a>, String> {
    let case = ctx.case;
    let w = case.worker;
    let t = case.tunnel;
    let tables = std::sync::Arc::clone(&ctx.gateway.tables);
    let ports = ctx.gateway.net.ports.len();
    let mut worker = Worker::new(
        w,
        std::sync::Arc::clone(&ctx.gateway.net),
        tables,
        PoolSource(ctx.pool.clone()),
        BURST,
        SharedNeighbors::default(),
    );
    if let Some(rings) = ctx.spread {
        worker.set_spread(std::sync::Arc::clone(rings));
    }
    // With the decrypt fan-out, the first `tunnels` workers receive their
    // tunnel's ESP (worker 0 alone with one tunnel, as RSS puts it on one
    // queue) and spread it; the others only decrypt parts (and count no
    // packets).
    let helper = ctx.spread.is_some() && w >= case.tunnels && case.direction == Direction::Decrypt;
    // Released packets come in the ticks after the burst that brought
    // them, up to several bursts at once.
    let txq_depth = if ctx.spread.is_some() { 64 } else { 2 } * BURST;
    let mut txq: TxQueues<Mbuf> = TxQueues::new(ports, txq_depth);
    if helper {
        let started = Instant::now();
        return Ok(Box::new(move |_m: &mut Measured, _record: bool| {
            let now = Now {
                ns: started.elapsed().as_nanos() as u64,
            };
            worker.tick(&mut txq, now);
            // Nothing leaves a helper (the receiving worker forwards).
            for port in 0..ports {
                txq.drain(port).for_each(drop);
            }
            Ok(())
        }));
    }
    let mut pkts: Vec<Mbuf> = Vec::with_capacity(BURST);
    // What the worker queued, with the port it queued it for.
    let mut sent: Vec<(usize, Mbuf)> = Vec::with_capacity(4 * BURST);
    let mut staging: Burst<BURST> = Burst::new();
    let mut gen = Generator::new(case.frames());
    let tables = &ctx.gateway.tables;
    let (_, _, inbound) = tables
        .sad
        .inbound(gateway::in_spi(t), ctx.gateway.local())
        .and_then(|i| tables.inbound_sa(i))
        .ok_or("bench gateway: no inbound SA for the worker's SPI")?;
    let inbound = std::sync::Arc::clone(inbound);
    let (in_port, out_port) = match case.direction {
        Direction::Encrypt => (PROTECTED, UNPROTECTED),
        Direction::Decrypt => (UNPROTECTED, PROTECTED),
    };
    let mut peer = PeerDecrypt::new(
        &ctx.gateway.peer_inbound(t),
        case.sent_forwarded_expect.clone(),
        PEER_CHECK_EVERY,
    )?;
    let started = Instant::now();
    // The worker's fan-out counter when the last burst ended.
    let mut spread_before = worker.counters().spread_out;
    // Its drop counters then, so that a row says why packets were lost.
    let mut drops_before = worker.counters().drops;
    Ok(Box::new(move |m: &mut Measured, record: bool| {
        let f0 = tsc();
        let wrapped = gen.fill(ctx.pool, &mut pkts)?;
        let filled = tsc() - f0;
        // (With the fan-out each tunnel has one receiving worker: this one.)
        let own_window = !case.shared || ctx.spread.is_some();
        if wrapped && case.direction == Direction::Decrypt && own_window {
            // The same sequence numbers again: a fresh window for this
            // worker's own tunnel. Not timed: a real peer's sequence numbers
            // just go on. With the fan-out the other workers update this
            // window too, so first every part of the last pass comes back
            // (nothing out, nothing waiting in the reorder stage): a part
            // decrypted after the reset would mark the next pass's numbers
            // as seen. A tunnel received by several workers runs with the
            // window off instead (runner::replay_window).
            if ctx.spread.is_some() {
                let drain = Instant::now();
                drain_fan_out(&mut worker, &mut txq, &mut sent, ports, started)?;
                if record {
                    m.untimed_ns += drain.elapsed().as_nanos() as u64;
                }
            }
            inbound.reset_replay_window_for_bench();
        }
        let now = Now {
            ns: started.elapsed().as_nanos() as u64,
        };
        let t0 = tsc();
        worker.process_burst(in_port, &mut pkts, &mut txq, now);
        let t1 = tsc();
        worker.tick(&mut txq, now);
        let t2 = tsc();
        for port in 0..ports {
            sent.extend(txq.drain(port).map(|frame| (port, frame)));
        }
        let drained = tsc() - t2;
        if record {
            let sample = case.direction == Direction::Encrypt && peer.sample_next_burst();
            for (port, frame) in &sent {
                let peer = if sample { Some(&mut peer) } else { None };
                m.tally
                    .record(check_frame(case, *port, out_port, frame, peer));
            }
        }
        pkts.extend(sent.drain(..).map(|(_, frame)| frame));
        let counters = worker.counters();
        // Signed: a part taken back from a helper's inbox is un-counted
        // (`spread_out` goes down).
        let spread_now = counters.spread_out;
        if record {
            let delta = spread_now as i64 - spread_before as i64;
            m.spread_out = m.spread_out.saturating_add_signed(delta);
        }
        spread_before = spread_now;
        let drops_now = counters.drops;
        if record && drops_now != drops_before {
            for ((reason, now), (_, before)) in drops_now.iter().zip(drops_before.iter()) {
                if now > before {
                    *m.drops.entry(reason.name()).or_default() += now - before;
                }
            }
        }
        drops_before = drops_now;
        let freed = free_bulk(&mut pkts, &mut staging);
        if record {
            let cycles = BurstCycles {
                stage: t1 - t0,
                io: filled + (t2 - t0) + drained + freed,
                latency: t2 - t0,
            };
            record_burst(m, case, &gen.slots, cycles, ctx.tsc_hz);
        }
        Ok(())
    }))
}

fn check_frame(
    case: &crate::case::CaseData,
    port: usize,
    expected_port: usize,
    frame: &Mbuf,
    peer: Option<&mut PeerDecrypt>,
) -> Result<(), Invalid> {
    if port != expected_port {
        return Err(Invalid::WrongPort);
    }
    match case.direction {
        Direction::Encrypt => {
            let ip = check_ethernet_of(
                frame.data(),
                gateway::GW_UNPROT_MAC,
                gateway::PEER_MAC,
                case.esp_expect.outer.ipv6(),
            )?;
            check_esp(ip, &case.esp_expect)?;
            peer.map_or(Ok(()), |p| p.check(ip))
        }
        Direction::Decrypt => {
            let ip = check_ethernet(frame.data(), gateway::GW_PROT_MAC, gateway::HOST_MAC)?;
            check_inner(ip, &case.forwarded_expect)
        }
    }
}
