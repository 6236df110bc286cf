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
use espgw_dataplane::worker::spread_consts::MAX_JOBS_PER_WORKER;
use espgw_dataplane::{BufPool, GatewayDropCounts, Now, TxQueues, Worker};
use espgw_esp::UdpChecksum;
use espgw_wire::checksum::complete_offloaded_udp_at;
use espgw_wire::PacketBuf;

use super::{
    free_bulk, record_burst, record_counts, tsc, BurstCycles, Bytes, Ctx, Step, PEER_CHECK_EVERY,
};
use crate::gateway::{self, PROTECTED, UNPROTECTED};
use crate::generator::{Generator, Template, BURST};
use crate::options::Direction;
use crate::sink::{
    check_esp, check_ethernet_of, check_inner, check_inner_header, BurstSample, Invalid,
    PeerDecrypt,
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

/// Ticks the receiving worker while `busy` says so, collecting what it
/// releases into `sent`: until none of its fan-out packets is out or in a
/// reorder stage and every group it handed off is back (the drain before
/// a window reset), or until fewer than [`handoff_pace`] groups are out
/// (the handoff's pacing). Bounded: a part that never comes back is a
/// bench failure, not a hang.
fn tick_while(
    busy: impl Fn(&Worker<Mbuf, PoolSource>) -> bool,
    worker: &mut Worker<Mbuf, PoolSource>,
    txq: &mut TxQueues<Mbuf>,
    sent: &mut Vec<(usize, Mbuf)>,
    ports: usize,
    started: Instant,
) -> Result<(), String> {
    let deadline = Instant::now() + std::time::Duration::from_secs(2);
    while busy(worker) {
        if Instant::now() > deadline {
            return Err(format!(
                "fan-out: {} packets and {} handed-off groups still out after 2 s",
                worker.counters().spreading,
                worker.handed_off()
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

/// Whether a fan-out's receiving worker still has anything out.
fn anything_out(worker: &Worker<Mbuf, PoolSource>) -> bool {
    worker.counters().spreading != 0 || worker.handed_off() != 0
}

/// The per-CPU SA handoff: the receiving worker generates its next burst
/// only while fewer of the groups it handed off than this are still out.
/// The generator plays a NIC that receives at whatever rate it is given,
/// while the gateway drops (`sa_handoff_full`) what a worker it hands to
/// cannot take: unpaced, the rows would count packets generated but
/// dropped. Paced, the loop rate is what the workers together sustain.
/// The limit: the job boxes the receiving worker has, less one group per
/// other worker (what one burst can hand off), so that the gateway never
/// runs out of boxes (and drops) because of the generator.
fn handoff_pace(workers: usize) -> u64 {
    (MAX_JOBS_PER_WORKER * workers)
        .saturating_sub(workers)
        .max(1) as u64
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
        // The per-CPU SA handoff: this worker forwards its SA's packets
        // itself, so the sink checks them here, and this worker counts
        // them (the receiving worker counts the rest: what it generated
        // less what it handed off).
        let handoff = ctx.gateway.is_per_cpu();
        let out_port = PROTECTED;
        let mut sent: Vec<Mbuf> = Vec::with_capacity(4 * BURST);
        let mut staging: Burst<BURST> = Burst::new();
        let mut drops_before = worker.counters().drops;
        let mut handed_in_before = worker.counters().sa_handoff_in;
        // Decrypted payloads compared byte for byte in one burst in
        // PEER_CHECK_EVERY; every header field of every packet
        // (`check_inner_header`).
        let mut payloads = BurstSample::new(PEER_CHECK_EVERY);
        return Ok(Box::new(move |m: &mut Measured, record: bool| {
            let now = Now {
                ns: started.elapsed().as_nanos() as u64,
            };
            let t0 = tsc();
            worker.tick(&mut txq, now);
            let ticked = tsc() - t0;
            if !handoff {
                // Nothing leaves a fan-out helper (the receiving worker
                // forwards).
                for port in 0..ports {
                    txq.drain(port).for_each(drop);
                }
                return Ok(());
            }
            let t1 = tsc();
            let mut out = Bytes::default();
            // Counted in bursts that brought frames, not in idle ticks.
            let payload = !txq.is_empty() && payloads.next_burst();
            for port in 0..ports {
                for frame in txq.drain(port) {
                    if record {
                        m.tally
                            .record(check_frame(case, port, out_port, &frame, None, payload));
                        out.add(case, inner_len(&frame));
                    }
                    sent.push(frame);
                }
            }
            let drained = tsc() - t1;
            let counters = worker.counters();
            // The packets handed to this worker: its to forward, and to
            // count (the receiving worker counts the others).
            let handed_in = counters.sa_handoff_in - handed_in_before;
            handed_in_before = counters.sa_handoff_in;
            let drops_now = counters.drops;
            if record {
                record_drops(m, &drops_now, &drops_before);
            }
            drops_before = drops_now;
            let freed = free_bulk(&mut sent, &mut staging);
            if record && handed_in > 0 {
                // Ticks with nothing to do are the idle loop, not work.
                // No latency: the generation time is the other worker's.
                let cycles = BurstCycles {
                    stage: ticked,
                    io: ticked + drained + freed,
                    latency: 0,
                };
                record_counts(m, handed_in, &out, cycles, 0, ctx.tsc_hz);
            }
            Ok(())
        }));
    }
    let mut pkts: Vec<Mbuf> = Vec::with_capacity(BURST);
    // What the worker queued, with the port it queued it for.
    let mut sent: Vec<(usize, Mbuf)> = Vec::with_capacity(4 * BURST);
    let mut staging: Burst<BURST> = Burst::new();
    // With the per-CPU SA handoff, every SA pair's ESP, one packet of each
    // in turn (the finest interleaving: each SA's group of a burst is the
    // smallest it can be).
    let mut gen = Generator::new(interleave(case, ctx.lanes)).streaming(ctx.streaming_rx);
    let tables = &ctx.gateway.tables;
    let inbound_of = |t: usize| {
        tables
            .sad
            .inbound(gateway::in_spi(t), ctx.gateway.local())
            .and_then(|i| tables.inbound_sa(i))
            .map(|(_, _, sa)| std::sync::Arc::clone(sa))
            .ok_or("bench gateway: no inbound SA for the worker's SPI")
    };
    // This worker's SA, and those of the lanes it receives for.
    let inbound = std::iter::once(t)
        .chain(ctx.lanes.iter().map(|l| l.tunnel))
        .map(inbound_of)
        .collect::<Result<Vec<_>, _>>()?;
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
    let mut spread_before = worker.counters().spread_out + worker.counters().sa_handoff_out;
    let mut handed_before = worker.counters().sa_handoff_out;
    // Its live check's counts (`--spread-recheck-ms`).
    let mut trials_before = (
        worker.counters().spread_solo,
        worker.counters().spread_trials,
    );
    // Its drop counters then, so that a row says why packets were lost.
    let mut drops_before = worker.counters().drops;
    let pace = !ctx.lanes.is_empty();
    let pace_limit = handoff_pace(ctx.lanes.len() + 1);
    let mut payloads = BurstSample::new(PEER_CHECK_EVERY);
    Ok(Box::new(move |m: &mut Measured, record: bool| {
        if pace {
            let pacing = |w: &Worker<Mbuf, PoolSource>| w.handed_off() >= pace_limit;
            tick_while(pacing, &mut worker, &mut txq, &mut sent, ports, started)?;
        }
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
                tick_while(
                    anything_out,
                    &mut worker,
                    &mut txq,
                    &mut sent,
                    ports,
                    started,
                )?;
                if record {
                    m.untimed_ns += drain.elapsed().as_nanos() as u64;
                }
            }
            for sa in &inbound {
                sa.reset_replay_window_for_bench();
            }
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
        let mut out = Bytes::default();
        // What a NIC with TX UDP checksum offload does to the frames that
        // ask for it (`--tx-checksum-offload`), outside the measured time;
        // without the flag no frame asks, and none is looked at.
        let offloading = ctx.gateway.udp_checksum == UdpChecksum::Device;
        for (_, frame) in sent.iter_mut().filter(|_| offloading) {
            if let Some((l2, l3, _)) = frame.udp_checksum_offload() {
                complete_offloaded_udp_at(frame.data_mut(), l2 + l3);
                frame.clear_udp_checksum_offload();
            }
        }
        if record {
            let sample = case.direction == Direction::Encrypt && peer.sample_next_burst();
            let payload = payloads.next_burst();
            for (port, frame) in &sent {
                let peer = if sample { Some(&mut peer) } else { None };
                m.tally
                    .record(check_frame(case, *port, out_port, frame, peer, payload));
                if pace {
                    out.add(case, inner_len(frame));
                }
            }
        }
        pkts.extend(sent.drain(..).map(|(_, frame)| frame));
        let counters = worker.counters();
        // Signed: a part taken back from a helper's inbox is un-counted
        // (`spread_out` goes down).
        // (With the per-CPU SA handoff, the groups handed off count too.)
        let spread_now = counters.spread_out + counters.sa_handoff_out;
        if record {
            let delta = spread_now as i64 - spread_before as i64;
            m.spread_out = m.spread_out.saturating_add_signed(delta);
        }
        spread_before = spread_now;
        let trials_now = (counters.spread_solo, counters.spread_trials);
        if record && trials_now != trials_before {
            m.spread_solo += trials_now.0 - trials_before.0;
            for (k, n) in m.spread_trials.iter_mut().enumerate() {
                *n += trials_now.1[k] - trials_before.1[k];
            }
            // (At most one trial ends per burst: a trial is 60 ms.)
            if trials_now.1 != trials_before.1 {
                m.spread_trial_pps.push(counters.spread_trial_pps);
            }
        }
        trials_before = trials_now;
        let drops_now = counters.drops;
        if record {
            record_drops(m, &drops_now, &drops_before);
        }
        drops_before = drops_now;
        let freed = free_bulk(&mut pkts, &mut staging);
        let handed = worker.counters().sa_handoff_out - handed_before;
        handed_before += handed;
        if record {
            let cycles = BurstCycles {
                stage: t1 - t0,
                io: filled + (t2 - t0) + drained + freed,
                latency: t2 - t0,
            };
            if pace {
                // The handoff: the packets handed off are the other
                // workers' to count; this one counts the rest (what it
                // sent or dropped) and the bytes it sent.
                let own = gen.slots.len() as u64 - handed;
                record_counts(m, own, &out, cycles, out.packets, ctx.tsc_hz);
            } else {
                record_burst(m, case, &gen.slots, cycles, ctx.tsc_hz);
            }
        }
        Ok(())
    }))
}

/// A decrypted frame's inner packet bytes (Ethernet and the inner packet).
fn inner_len(frame: &Mbuf) -> usize {
    frame.len().saturating_sub(crate::packets::ETH_LEN)
}

/// Adds the drops between two copies of a worker's drop counters to `m`,
/// by reason.
fn record_drops(m: &mut Measured, now: &GatewayDropCounts, before: &GatewayDropCounts) {
    if now == before {
        return;
    }
    for ((reason, now), (_, before)) in now.iter().zip(before.iter()) {
        if now > before {
            *m.drops.entry(reason.name()).or_default() += now - before;
        }
    }
}

/// `case`'s frames, or with `lanes` (the per-CPU SA handoff) every lane's
/// in turn, one packet each: a pass is every lane's pass (whole bursts, as
/// each lane's is).
fn interleave(case: &crate::case::CaseData, lanes: &[crate::case::CaseData]) -> Vec<Template> {
    let all: Vec<Vec<Template>> = std::iter::once(case)
        .chain(lanes)
        .map(|c| c.frames())
        .collect();
    let len = all.iter().map(Vec::len).min().unwrap_or(0);
    (0..len)
        .flat_map(|i| all.iter().map(move |f| f[i].clone()))
        .collect()
}

fn check_frame(
    case: &crate::case::CaseData,
    port: usize,
    expected_port: usize,
    frame: &Mbuf,
    peer: Option<&mut PeerDecrypt>,
    payload: bool,
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
            let ip = check_ethernet_of(
                frame.data(),
                gateway::GW_PROT_MAC,
                gateway::HOST_MAC,
                case.inner_expect.inner.ipv6(),
            )?;
            if payload {
                check_inner(ip, &case.forwarded_expect)
            } else {
                check_inner_header(ip, &case.forwarded_expect)
            }
        }
    }
}
