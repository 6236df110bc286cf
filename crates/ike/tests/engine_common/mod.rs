//! Shared pieces of the engine tests: a seeded random source, a pair of
//! connections, and a network between two engines that can lose,
//! duplicate, reorder and translate datagrams.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;

use espgw_ike::crypto::{CryptoError, RandomSource};
use espgw_ike::engine::{ChildSa, Connection, Engine, EngineConfig, Event, Lifetimes, Transmit};
use espgw_ike::message::{ExchangeType, Identification, Message, NON_ESP_MARKER};

/// splitmix64: deterministic, so every run of a test sees the same bytes.
pub struct SeededRng(pub u64);

impl RandomSource for SeededRng {
    fn fill(&mut self, dest: &mut [u8]) -> Result<(), CryptoError> {
        for chunk in dest.chunks_mut(8) {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_be_bytes()[..chunk.len()]);
        }
        Ok(())
    }
}

pub const A: &str = "192.0.2.1:500";
pub const B: &str = "192.0.2.2:500";

pub fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// a (192.0.2.1, a.example, 10.1.0.0/24) and b (192.0.2.2, b.example,
/// 10.2.0.0/24), as in the recorded strongSwan runs.
pub fn connections(
    psk_a: &[u8],
    psk_b: &[u8],
    ike_a: &str,
    ike_b: &str,
    esp_a: &str,
    esp_b: &str,
) -> (Connection, Connection) {
    let a = Connection::new(
        "a",
        addr(A),
        addr(B),
        Identification::fqdn("a.example"),
        Some(Identification::fqdn("b.example")),
        psk_a,
        ike_a,
        esp_a,
        &["10.1.0.0/24"],
        // Wider than b allows: b narrows it to its /24.
        &["10.2.0.0/16"],
    )
    .unwrap();
    let b = Connection::new(
        "b",
        addr(B),
        addr(A),
        Identification::fqdn("b.example"),
        Some(Identification::fqdn("a.example")),
        psk_b,
        ike_b,
        esp_b,
        &["10.2.0.0/24"],
        &["10.1.0.0/24"],
    )
    .unwrap();
    (a, b)
}

pub fn test_config() -> EngineConfig {
    EngineConfig {
        retransmit_base_ms: 100,
        retransmit_max_ms: 1_000,
        max_retransmits: 5,
        half_open_timeout_ms: 600_000,
        max_half_open: 1_000,
        linger_ms: 10_000,
        nat_t_port: 4500,
        ..EngineConfig::default()
    }
}

/// Reauthentication every 30 s exactly (no jitter), no IKE SA or CHILD_SA
/// rekeys, no hard limit in reach: the reauthentication races' lifetimes.
pub fn reauth_every_30s() -> Lifetimes {
    Lifetimes {
        ike_rekey_time_ms: 0,
        ike_reauth_time_ms: 30_000,
        ike_rand_time_ms: Some(0),
        ike_over_time_ms: Some(600_000),
        child_rekey_time_ms: 0,
        ..Lifetimes::default()
    }
}

/// What the network does with one datagram.
#[derive(Clone, Copy, Debug)]
pub enum Fate {
    Deliver,
    Drop,
    Duplicate,
    /// Put at the back of the queue (reordering).
    Defer,
}

pub struct Pair {
    pub a: Engine<SeededRng>,
    pub b: Engine<SeededRng>,
    pub now: u64,
    pub queue: VecDeque<Transmit>,
    pub events_a: Vec<Event>,
    pub events_b: Vec<Event>,
    /// Every datagram either engine sent, in order.
    pub sent: Vec<Transmit>,
    /// A NAT in front of a: a's address as b sees it.
    pub nat_a: Option<SocketAddr>,
}

impl Pair {
    pub fn new(a: Connection, b: Connection, cfg: EngineConfig) -> Pair {
        Pair::with_seeds(a, b, cfg, (1, 2))
    }

    /// As [`Pair::new`], with the engines' random sources seeded with
    /// `seeds` (other SPIs and nonces).
    pub fn with_seeds(a: Connection, b: Connection, cfg: EngineConfig, seeds: (u64, u64)) -> Pair {
        let mut ea = Engine::new(cfg.clone(), SeededRng(seeds.0));
        let mut eb = Engine::new(cfg, SeededRng(seeds.1));
        ea.add_connection(a);
        eb.add_connection(b);
        Pair {
            a: ea,
            b: eb,
            now: 0,
            queue: VecDeque::new(),
            events_a: Vec::new(),
            events_b: Vec::new(),
            sent: Vec::new(),
            nat_a: None,
        }
    }

    pub fn collect(&mut self) {
        while let Some(t) = self.a.poll_transmit() {
            let mut t = t;
            if let Some(public) = self.nat_a {
                // Source NAT: same port mapping, new address.
                t.src = SocketAddr::new(public.ip(), t.src.port());
            }
            self.sent.push(t.clone());
            self.queue.push_back(t);
        }
        while let Some(t) = self.b.poll_transmit() {
            self.sent.push(t.clone());
            self.queue.push_back(t);
        }
        while let Some(e) = self.a.poll_event() {
            self.events_a.push(e);
        }
        while let Some(e) = self.b.poll_event() {
            self.events_b.push(e);
        }
    }

    pub fn deliver(&mut self, t: Transmit) {
        let b_ip = addr(B).ip();
        if t.dst.ip() == b_ip {
            self.b.handle_datagram(self.now, t.src, t.dst, &t.payload);
        } else {
            let mut dst = t.dst;
            if self.nat_a.is_some_and(|p| p.ip() == dst.ip()) {
                dst = SocketAddr::new(addr(A).ip(), dst.port());
            }
            self.a.handle_datagram(self.now, t.src, dst, &t.payload);
        }
    }

    /// Runs until nothing is queued and no timer is armed within
    /// `horizon_ms`, applying `fates` to datagrams in order (then
    /// delivering the rest).
    pub fn run(&mut self, fates: &[Fate], horizon_ms: u64) {
        let mut fates = fates.iter().copied();
        let end = self.now + horizon_ms;
        for _ in 0..10_000 {
            self.collect();
            if let Some(t) = self.queue.pop_front() {
                match fates.next().unwrap_or(Fate::Deliver) {
                    Fate::Deliver => self.deliver(t),
                    Fate::Drop => {}
                    Fate::Duplicate => {
                        self.deliver(t.clone());
                        self.queue.push_back(t);
                    }
                    Fate::Defer => self.queue.push_back(t),
                }
                continue;
            }
            let next = [self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    self.a.handle_timeout(self.now);
                    self.b.handle_timeout(self.now);
                }
                _ => break,
            }
        }
        self.collect();
    }
}

impl Pair {
    /// Runs as [`Pair::run`] until `horizon_ms` (absolute), delivering
    /// each datagram for which `keep(datagram, now)` holds and losing the
    /// others.
    pub fn run_filtered(&mut self, horizon_ms: u64, mut keep: impl FnMut(&Transmit, u64) -> bool) {
        for _ in 0..10_000 {
            self.collect();
            if let Some(t) = self.queue.pop_front() {
                if keep(&t, self.now) {
                    self.deliver(t);
                }
                continue;
            }
            match [self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
            {
                Some(t) if t <= horizon_ms => {
                    self.now = self.now.max(t);
                    self.a.handle_timeout(self.now);
                    self.b.handle_timeout(self.now);
                }
                _ => break,
            }
        }
        self.collect();
    }
}

pub fn children(events: &[Event]) -> Vec<&ChildSa> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ChildSaInstalled(c) => Some(&**c),
            _ => None,
        })
        .collect()
}

/// CHILD_SAs alive after these events: (inbound SPI, outbound SPI, IKE
/// SA), following IKE SA rekeys; an IKE SA that failed took its own.
pub fn alive_children(events: &[Event]) -> Vec<(u32, u32, u64)> {
    let mut alive: Vec<(u32, u32, u64)> = Vec::new();
    for e in events {
        match e {
            Event::ChildSaInstalled(c) => alive.push((c.inbound_spi, c.outbound_spi, c.ike_sa)),
            Event::ChildSaDeleted { inbound_spi, .. } => alive.retain(|(i, _, _)| i != inbound_spi),
            Event::IkeSaRekeyed { old, new } => {
                for c in alive.iter_mut() {
                    if c.2 == *old {
                        c.2 = *new;
                    }
                }
            }
            Event::IkeSaDeleted { ike_sa } | Event::IkeSaFailed { ike_sa, .. } => {
                alive.retain(|c| c.2 != *ike_sa)
            }
            _ => {}
        }
    }
    alive
}

/// IKE SAs up (or made by a rekey) and not deleted, by the events.
pub fn live_ike_sas(events: &[Event]) -> Vec<u64> {
    let mut live: Vec<u64> = Vec::new();
    for e in events {
        match e {
            Event::IkeSaUp { ike_sa, .. } => live.push(*ike_sa),
            Event::IkeSaRekeyed { new, .. } => live.push(*new),
            Event::IkeSaDeleted { ike_sa } | Event::IkeSaFailed { ike_sa, .. } => {
                live.retain(|s| s != ike_sa)
            }
            _ => {}
        }
    }
    live.sort();
    live.dedup();
    live
}

/// Both ends hold the same single CHILD_SA: SPIs crossed, keys crossed.
pub fn assert_same_child(a: &ChildSa, b: &ChildSa) {
    assert_eq!(a.outbound_spi, b.inbound_spi);
    assert_eq!(a.inbound_spi, b.outbound_spi);
    assert_eq!(a.suite, b.suite);
    assert_eq!(a.esn, b.esn);
    assert_eq!(a.outbound.key.expose(), b.inbound.key.expose());
    assert_eq!(a.outbound.auth_key.expose(), b.inbound.auth_key.expose());
    assert_eq!(a.inbound.key.expose(), b.outbound.key.expose());
    assert_eq!(a.inbound.auth_key.expose(), b.outbound.auth_key.expose());
    assert_ne!(a.outbound.key.expose(), a.inbound.key.expose());
    assert_eq!(a.local_ts, b.remote_ts);
    assert_eq!(a.remote_ts, b.local_ts);
}

/// Events that mean something failed: an IKE SA, an authentication, a
/// CHILD_SA request or an IKE SA rekey.
pub fn failures(events: &[Event]) -> Vec<&Event> {
    events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::IkeSaFailed { .. }
                    | Event::AuthFailed { .. }
                    | Event::ChildSaFailed { .. }
                    | Event::IkeRekeyFailed { .. }
            )
        })
        .collect()
}

/// The IKE header of a datagram (marker stripped): (exchange, response,
/// message ID).
pub fn header_of(t: &Transmit) -> (ExchangeType, bool, u32) {
    let bytes = t
        .payload
        .strip_prefix(&NON_ESP_MARKER[..])
        .unwrap_or(&t.payload);
    let (h, _) = Message::parse_raw(bytes).unwrap();
    (h.exchange, h.response, h.message_id)
}

/// The first IKE SA that came up in these events.
pub fn first_up(events: &[Event]) -> u64 {
    events
        .iter()
        .find_map(|e| match e {
            Event::IkeSaUp { ike_sa, .. } => Some(*ike_sa),
            _ => None,
        })
        .unwrap()
}

/// The network's fate for one datagram in the property tests: mostly
/// delivered, often lost, sometimes duplicated or reordered.
pub fn fate() -> impl proptest::strategy::Strategy<Value = Fate> {
    use proptest::prelude::*;
    prop_oneof![
        3 => Just(Fate::Deliver),
        2 => Just(Fate::Drop),
        1 => Just(Fate::Duplicate),
        1 => Just(Fate::Defer),
    ]
}
