//! Outbound sequence reservations (the persisted ceiling) and a buffer
//! that refuses to grow: both must end in a counted drop, never a number
//! handed out twice and never a panic.

use std::net::IpAddr;

use espgw_wire::{NoRoom, PacketBuf, VecBuf};

use crate::config::{Encap, Lifetimes, SaConfig};
use crate::test_cipher::ToyCipher;
use crate::tunnel_tests::ipv4_packet;
use crate::{DropReason, InboundSa, OutboundSa, Suite, Verdict};

fn config() -> SaConfig {
    let suite = Suite::Aes128Gcm16;
    SaConfig {
        suite,
        spi: 0x1000,
        key: vec![7; suite.key_len()].into(),
        auth_key: vec![9; suite.auth_key_len()].into(),
        esn: false,
        replay_window: 64,
        encap: Encap::None,
        local: "192.0.2.1".parse::<IpAddr>().unwrap(),
        remote: "192.0.2.2".parse::<IpAddr>().unwrap(),
        lifetimes: Lifetimes::default(),
    }
}

fn outbound() -> OutboundSa {
    let cfg = config();
    OutboundSa::with_cipher(&cfg, Box::new(ToyCipher(cfg.suite)), 0).unwrap()
}

fn burst(n: usize) -> Vec<VecBuf> {
    (0..n)
        .map(|i| VecBuf::with_room(&ipv4_packet(40, i as u8), 128, 128))
        .collect()
}

fn seqs(pkts: &[VecBuf], verdicts: &[Verdict]) -> Vec<u32> {
    pkts.iter()
        .zip(verdicts)
        .filter(|(_, v)| v.is_forward())
        .map(|(p, _)| u32::from_be_bytes(p.data()[24..28].try_into().unwrap()))
        .collect()
}

#[test]
fn ceiling_caps_numbers_and_the_rest_is_counted_as_not_reserved() {
    let out = outbound().with_ceiling(5);
    let mut pkts = burst(8);
    let mut verdicts = vec![Verdict::Forward; 8];
    assert_eq!(out.encap_burst(&mut pkts, &mut verdicts, 0), 5);
    assert_eq!(seqs(&pkts, &verdicts), [1, 2, 3, 4, 5]);
    assert_eq!(
        verdicts[5..],
        [Verdict::Drop(DropReason::SeqNotReserved); 3]
    );
    let stats = out.stats();
    assert_eq!(stats.drops.get(DropReason::SeqNotReserved), 3);
    assert_eq!(stats.drops.get(DropReason::SaExpired), 0);
    // Not an expiry: the SA is fine once the next reservation is durable.
    assert!(!out.expiry(0).is_hard());
    assert_eq!(out.last_sequence(), 5);

    out.raise_ceiling(3); // never lowers
    assert_eq!(out.ceiling(), 5);
    out.raise_ceiling(100);
    let mut pkts = burst(4);
    let mut verdicts = vec![Verdict::Forward; 4];
    assert_eq!(out.encap_burst(&mut pkts, &mut verdicts, 0), 4);
    assert_eq!(seqs(&pkts, &verdicts), [6, 7, 8, 9]);
}

#[test]
fn restart_continues_above_the_reservation() {
    // What the control plane does after a restart: start above the last
    // persisted ceiling, with a new ceiling.
    let out = outbound().starting_after(1000).with_ceiling(2000);
    let mut pkts = burst(3);
    let mut verdicts = vec![Verdict::Forward; 3];
    out.encap_burst(&mut pkts, &mut verdicts, 0);
    assert_eq!(seqs(&pkts, &verdicts), [1001, 1002, 1003]);
}

#[test]
fn end_of_sequence_space_is_still_an_expiry_under_a_ceiling() {
    let out = outbound().starting_after(u64::from(u32::MAX) - 1);
    let mut pkts = burst(3);
    let mut verdicts = vec![Verdict::Forward; 3];
    assert_eq!(out.encap_burst(&mut pkts, &mut verdicts, 0), 1);
    assert_eq!(verdicts[1], Verdict::Drop(DropReason::SaExpired));
    assert_eq!(out.stats().drops.get(DropReason::SeqNotReserved), 0);
}

/// A buffer that reports tailroom but refuses to grow at the back, as a
/// chained mbuf whose last segment is full could.
struct StubbornBuf(VecBuf);

impl PacketBuf for StubbornBuf {
    fn data(&self) -> &[u8] {
        self.0.data()
    }
    fn data_mut(&mut self) -> &mut [u8] {
        self.0.data_mut()
    }
    fn headroom(&self) -> usize {
        self.0.headroom()
    }
    fn tailroom(&self) -> usize {
        self.0.tailroom()
    }
    fn prepend(&mut self, n: usize) -> Result<(), NoRoom> {
        self.0.prepend(n)
    }
    fn append(&mut self, _: usize) -> Result<(), NoRoom> {
        Err(NoRoom)
    }
    fn adj(&mut self, n: usize) -> Result<(), NoRoom> {
        self.0.adj(n)
    }
    fn trim(&mut self, n: usize) -> Result<(), NoRoom> {
        self.0.trim(n)
    }
}

#[test]
fn a_buffer_that_refuses_to_grow_is_a_counted_drop_not_a_panic() {
    let out = outbound();
    let mut pkts: Vec<StubbornBuf> = burst(2).into_iter().map(StubbornBuf).collect();
    let mut verdicts = vec![Verdict::Forward; 2];
    assert_eq!(out.encap_burst(&mut pkts, &mut verdicts, 0), 0);
    assert_eq!(verdicts, [Verdict::Drop(DropReason::NoRoom); 2]);
    let stats = out.stats();
    assert_eq!((stats.packets, stats.drops.get(DropReason::NoRoom)), (0, 2));
}

#[test]
fn inbound_restart_refuses_what_was_received_before_it() {
    let cfg = config();
    let out = outbound();
    let mut back = cfg.clone();
    std::mem::swap(&mut back.local, &mut back.remote);
    let first = InboundSa::with_cipher(&back, Box::new(ToyCipher(cfg.suite)), 0).unwrap();
    // Sent 1..=10, received out of order with 9 missing.
    let mut pkts = burst(10);
    let mut verdicts = vec![Verdict::Forward; 10];
    out.encap_burst(&mut pkts, &mut verdicts, 0);
    let captured: Vec<VecBuf> = pkts.clone();
    let mut order: Vec<VecBuf> = pkts
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 8)
        .map(|(_, p)| p.clone())
        .collect();
    let mut v = vec![Verdict::Forward; order.len()];
    assert_eq!(first.decap_burst(&mut order, &mut v, 0), 9);
    // What other threads see without the SA's lock: the same as the SA.
    let highest = first.counters().highest_seen();
    assert_eq!(highest, 10);
    assert_eq!(first.counters().stats(), first.stats());

    // After a restart from the persisted high-water mark, every captured
    // packet is a replay, the one never received (9) included.
    let second = InboundSa::with_cipher(&back, Box::new(ToyCipher(cfg.suite)), 0)
        .unwrap()
        .starting_after(highest);
    let mut replay = captured;
    let mut v = vec![Verdict::Forward; replay.len()];
    assert_eq!(second.decap_burst(&mut replay, &mut v, 0), 0);
    assert_eq!(second.stats().drops.get(DropReason::Replayed), 10);
    assert_eq!(second.counters().stats(), second.stats());
    // New traffic goes through.
    let mut pkts = burst(2);
    let mut verdicts = vec![Verdict::Forward; 2];
    out.encap_burst(&mut pkts, &mut verdicts, 0);
    let mut v = vec![Verdict::Forward; 2];
    assert_eq!(second.decap_burst(&mut pkts, &mut v, 0), 2);
}

/// One outbound SA served by several workers at once: each burst gets one
/// contiguous reservation, and over all workers every number from 1 to
/// the total is used exactly once (no gap, no number twice).
#[test]
fn workers_sharing_one_outbound_sa_use_every_number_once() {
    const WORKERS: usize = 4;
    const BURSTS: usize = 300;
    const BURST: usize = 32;
    let out = outbound();
    let barrier = std::sync::Barrier::new(WORKERS);
    let per_worker: Vec<Vec<Vec<u32>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..WORKERS)
            .map(|w| {
                let (out, barrier) = (&out, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    (0..BURSTS)
                        .map(|b| {
                            // Bursts of varying size, as a real RX gives.
                            let n = 1 + (b * 7 + w * 3) % BURST;
                            let mut pkts = burst(n);
                            let mut verdicts = vec![Verdict::Forward; n];
                            assert_eq!(out.encap_burst(&mut pkts, &mut verdicts, 0), n);
                            seqs(&pkts, &verdicts)
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all = Vec::new();
    for bursts in &per_worker {
        for b in bursts {
            // One reservation per burst: its numbers are consecutive.
            assert!(b.windows(2).all(|p| p[1] == p[0] + 1), "burst {b:?}");
            all.extend_from_slice(b);
        }
    }
    all.sort_unstable();
    let total = all.len() as u32;
    assert_eq!(all, (1..=total).collect::<Vec<_>>());
    assert_eq!(out.last_sequence(), u64::from(total));
    assert_eq!(out.stats().packets, u64::from(total));
}
