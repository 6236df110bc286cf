//! What one engine fuzz input exercises; shared by the libFuzzer target
//! (fuzz_targets/engine.rs) and the stable smoke test
//! (crates/ike/tests/engine_smoke.rs).
//!
//! Two engines, `a` (initiator) and `b` (responder), exchange their real
//! datagrams through a queue the input controls, so the fuzzer reaches every
//! state (established, rekeying, lingering) and can then corrupt, drop,
//! duplicate, reorder or forge datagrams, move the clock and call the API.
//!
//! Input: a config byte (bit 0: small fragments; bits 1-2: cookies; bit 3:
//! a NAT in front of a; bit 4: short lifetimes, bit 5 with reauthentication;
//! bit 6: INVALID_KE_PAYLOAD; bit 7: ML-KEM-768 as an RFC 9370 additional
//! key exchange for the IKE SA and the CHILD_SAs, so IKE_INTERMEDIATE and,
//! on IKE SA and CHILD_SA rekeys, IKE_FOLLOWUP_KE), a seed byte, then operations (one byte each, some
//! followed by parameters; a missing parameter reads as 0):
//! - 0: deliver the queue's first datagram;
//! - 1: drop it;
//! - 2: duplicate it (deliver, keep a copy at the back);
//! - 3: defer it (move it to the back);
//! - 4 `pos:u16 xor:u8`: flip bits in it, then deliver;
//! - 5 `to:u8 len:u8 bytes`: forge a datagram to a or b (port 500 or 4500,
//!   from the peer's address or another);
//! - 6 `ms:u16`: advance the clock by ms * 16 and run both engines' timers;
//! - 7 `which:u8 what:u8 n:u32`: an API call on one of that engine's IKE SAs
//!   (rekey, delete, liveness, CHILD_SA rekey/delete/usage, initiate);
//! - 8 `at:u8 len:u8 bytes`: splice forged bytes into the first datagram
//!   and deliver it.
//!
//! Invariants besides "no panic": after `handle_timeout(now)` nothing is
//! due at or before `now` (no busy loop); the engines hold a bounded number
//! of IKE SAs; and at the end, with the network cut, two days of timers
//! leave no IKE SA behind on either side (every SA either times out,
//! expires or lingers and goes: no leak), in a bounded number of steps.

use std::collections::VecDeque;
use std::net::SocketAddr;

use espgw_ike::crypto::{CryptoError, RandomSource};
use espgw_ike::engine::{Connection, Engine, EngineConfig, Lifetimes, Transmit};
use espgw_ike::message::Identification;

/// splitmix64 seeded from the input: reproducible crashes.
pub struct FuzzRng(pub u64);

impl RandomSource for FuzzRng {
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

const A: &str = "192.0.2.1:500";
const B: &str = "192.0.2.2:500";
const NAT: &str = "198.51.100.7:500";
/// Most operations one input runs (longer inputs are cut).
const MAX_OPS: usize = 400;
/// Datagrams held in flight at most (the oldest are dropped beyond).
const MAX_QUEUE: usize = 256;

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("constant address")
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.0.len());
        let (b, rest) = self.0.split_at(n);
        self.0 = rest;
        b.to_vec()
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn connections(config: u8) -> (Connection, Connection) {
    // Bit 7: ML-KEM-768 as an additional key exchange on both sides, IKE
    // and ESP (RFC 9370: IKE_INTERMEDIATE when the IKE SA is made,
    // IKE_FOLLOWUP_KE when it is rekeyed and when a CHILD_SA is rekeyed).
    let mlkem = config & 0x80 != 0;
    let ike_a = if mlkem {
        "aes128gcm16-prfsha256-x25519-ecp256-ke1_mlkem768"
    } else {
        "aes128gcm16-prfsha256-x25519-ecp256"
    };
    let ike_b = match (config & 0x40 != 0, mlkem) {
        // a's first group is x25519: IKE_SA_INIT and rekeys go through
        // INVALID_KE_PAYLOAD.
        (true, false) => "aes128gcm16-prfsha256-ecp256",
        (true, true) => "aes128gcm16-prfsha256-ecp256-ke1_mlkem768",
        (false, false) => "aes128gcm16-prfsha256-x25519-ecp256",
        (false, true) => "aes128gcm16-prfsha256-x25519-ecp256-ke1_mlkem768",
    };
    let esp_a = if mlkem {
        "aes128gcm16-x25519-ecp256-ke1_mlkem768"
    } else {
        "aes128gcm16-x25519-ecp256"
    };
    let esp_b = match (config & 0x40 != 0, mlkem) {
        (true, false) => "aes128gcm16-ecp256",
        (true, true) => "aes128gcm16-ecp256-ke1_mlkem768",
        (false, false) => "aes128gcm16-x25519-ecp256",
        (false, true) => "aes128gcm16-x25519-ecp256-ke1_mlkem768",
    };
    let mut a = Connection::new(
        "a",
        addr(A),
        addr(B),
        Identification::fqdn("a.example"),
        Some(Identification::fqdn("b.example")),
        b"fuzz psk",
        ike_a,
        esp_a,
        &["10.1.0.0/24"],
        &["10.2.0.0/16"],
    )
    .expect("valid connection");
    let mut b = Connection::new(
        "b",
        addr(B),
        // With a NAT in front of a, b accepts any peer.
        if config & 0x08 != 0 {
            addr("0.0.0.0:500")
        } else {
            addr(A)
        },
        Identification::fqdn("b.example"),
        Some(Identification::fqdn("a.example")),
        b"fuzz psk",
        ike_b,
        esp_b,
        &["10.2.0.0/24"],
        &["10.1.0.0/24"],
    )
    .expect("valid connection");
    if config & 0x10 != 0 {
        // Short lifetimes, so rekeys, expiries and reauthentication happen
        // within a few clock operations.
        let l = Lifetimes {
            ike_rekey_time_ms: 8_000,
            ike_reauth_time_ms: if config & 0x20 != 0 { 12_000 } else { 0 },
            child_rekey_time_ms: 5_000,
            child_rekey_bytes: 10_000,
            child_rekey_packets: 100,
            ..Lifetimes::default()
        };
        a.lifetimes = l.clone();
        b.lifetimes = l;
    }
    (a, b)
}

fn engine_config(config: u8) -> EngineConfig {
    EngineConfig {
        retransmit_base_ms: 100,
        retransmit_max_ms: 1_000,
        max_retransmits: 3,
        half_open_timeout_ms: 5_000,
        max_half_open: 16,
        linger_ms: 2_000,
        cookie_threshold: match (config >> 1) & 3 {
            1 => 0,
            2 => 1,
            _ => usize::MAX,
        },
        fragment_size: if config & 1 != 0 { 200 } else { 1232 },
        keepalive_ms: 3_000,
        ..EngineConfig::default()
    }
}

struct World {
    a: Engine<FuzzRng>,
    b: Engine<FuzzRng>,
    now: u64,
    queue: VecDeque<Transmit>,
    nat: bool,
}

impl World {
    fn collect(&mut self) {
        while let Some(mut t) = self.a.poll_transmit() {
            if self.nat {
                t.src = SocketAddr::new(addr(NAT).ip(), t.src.port());
            }
            self.queue.push_back(t);
        }
        while let Some(t) = self.b.poll_transmit() {
            self.queue.push_back(t);
        }
        while self.a.poll_event().is_some() {}
        while self.b.poll_event().is_some() {}
        while self.queue.len() > MAX_QUEUE {
            self.queue.pop_front();
        }
    }

    fn deliver(&mut self, t: &Transmit) {
        if t.dst.ip() == addr(B).ip() {
            self.b.handle_datagram(self.now, t.src, t.dst, &t.payload);
        } else {
            let dst = SocketAddr::new(addr(A).ip(), t.dst.port());
            self.a.handle_datagram(self.now, t.src, dst, &t.payload);
        }
    }

    fn timers(&mut self) {
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
        for e in [&self.a, &self.b] {
            if let Some(t) = e.poll_timeout() {
                assert!(t > self.now, "timer at {t} still due at {}", self.now);
            }
        }
    }

    fn api(&mut self, r: &mut Reader) {
        let which = r.u8();
        let what = r.u8();
        let n = r.u32();
        let now = self.now;
        let e = if which & 1 == 0 {
            &mut self.a
        } else {
            &mut self.b
        };
        let mut ids = e.ike_sa_ids();
        ids.sort_unstable();
        let Some(&sa) = ids.get(usize::from(which >> 1) % ids.len().max(1)) else {
            if what % 9 == 8 {
                let _ = e.initiate(now, 0);
            }
            return;
        };
        // Errors (no such SA, not established) are answers, not failures.
        let _ = match what % 9 {
            0 => e.rekey_ike_sa(now, sa),
            1 => e.delete_ike_sa(now, sa),
            2 => e.check_liveness(now, sa),
            3 => e.rekey_child_sa(now, sa, n),
            4 => e.delete_child_sa(now, sa, n),
            5 => e.child_sa_usage(now, sa, n, u64::from(n) * 4, u64::from(n >> 8)),
            6 => {
                // A CHILD_SA the engine really has: usage past its limits.
                let spi = ids.len() as u32 ^ n;
                e.child_sa_usage(now, sa, spi, 1 << 20, 1 << 12)
            }
            7 => e
                .ike_sa_lifetimes(sa)
                .map(|_| ())
                .ok_or(espgw_ike::engine::EngineError::Protocol("no lifetimes yet")),
            _ => e.initiate(now, 0).map(|_| ()),
        };
    }
}

/// Runs one fuzz input.
pub fn run(data: &[u8]) {
    let mut r = Reader(data);
    let config = r.u8();
    let seed = u64::from(r.u8());
    let (ca, cb) = connections(config);
    let cfg = engine_config(config);
    let mut w = World {
        a: Engine::new(cfg.clone(), FuzzRng(seed)),
        b: Engine::new(cfg, FuzzRng(seed ^ 0xb)),
        now: 0,
        queue: VecDeque::new(),
        nat: config & 0x08 != 0,
    };
    w.a.add_connection(ca);
    w.b.add_connection(cb);
    let _ = w.a.initiate(0, 0);
    let mut ops = 0usize;
    while !r.is_empty() && ops < MAX_OPS {
        ops += 1;
        w.collect();
        match r.u8() % 9 {
            0 => {
                if let Some(t) = w.queue.pop_front() {
                    w.deliver(&t);
                }
            }
            1 => {
                w.queue.pop_front();
            }
            2 => {
                if let Some(t) = w.queue.pop_front() {
                    w.deliver(&t);
                    w.queue.push_back(t);
                }
            }
            3 => {
                if let Some(t) = w.queue.pop_front() {
                    w.queue.push_back(t);
                }
            }
            4 => {
                let pos = usize::from(r.u16());
                let x = r.u8();
                if let Some(mut t) = w.queue.pop_front() {
                    if !t.payload.is_empty() {
                        let i = pos % t.payload.len();
                        t.payload[i] ^= x;
                    }
                    w.deliver(&t);
                }
            }
            5 => {
                let to = r.u8();
                let len = usize::from(r.u8());
                let payload = r.bytes(len);
                let port = if to & 2 == 0 { 500 } else { 4500 };
                let (src, dst) = if to & 1 == 0 {
                    (addr(A), SocketAddr::new(addr(B).ip(), port))
                } else {
                    (addr(B), SocketAddr::new(addr(A).ip(), port))
                };
                let src = if to & 4 != 0 {
                    SocketAddr::new(addr("203.0.113.9:500").ip(), port)
                } else {
                    SocketAddr::new(src.ip(), port)
                };
                w.deliver(&Transmit { src, dst, payload });
            }
            6 => {
                w.now += u64::from(r.u16()) * 16;
                w.timers();
            }
            7 => w.api(&mut r),
            _ => {
                let at = usize::from(r.u8());
                let len = usize::from(r.u8() % 64);
                let bytes = r.bytes(len);
                if let Some(mut t) = w.queue.pop_front() {
                    let at = at.min(t.payload.len());
                    let end = (at + bytes.len()).min(t.payload.len());
                    t.payload.splice(at..end, bytes);
                    w.deliver(&t);
                }
            }
        }
        // Each operation creates at most a few SAs (an initiate, a rekey's
        // new SA, a reauthentication): linear in the operations, whatever
        // the input.
        let held = w.a.ike_sa_count() + w.b.ike_sa_count();
        assert!(held <= 4 + 4 * ops, "{held} IKE SAs after {ops} operations");
    }
    // The network goes away: every SA must go within two days of timers
    // (rekeys and liveness time out, dead SAs linger and go), in a bounded
    // number of steps.
    let end = w.now + 2 * 86_400_000;
    let mut steps = 0;
    loop {
        w.collect();
        w.queue.clear();
        let next = [w.a.poll_timeout(), w.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(t) if t <= end => {
                w.now = w.now.max(t);
                w.timers();
            }
            _ => break,
        }
        steps += 1;
        assert!(steps < 100_000, "timers never settle");
    }
    assert_eq!(
        (w.a.ike_sa_count(), w.b.ike_sa_count()),
        (0, 0),
        "IKE SAs left after two days without a network"
    );
}

/// Seed inputs: for several configs, the exchange delivered in full, then
/// the clock moved on (lifetimes, keepalives), API calls, and some faults.
pub fn seeds() -> Vec<Vec<u8>> {
    let deliver_all = [0u8; 24];
    let mut out = Vec::new();
    for config in [
        0x00u8, 0x01, 0x02, 0x04, 0x08, 0x10, 0x30, 0x40, 0x19, 0x5b, 0x80, 0x90, 0x91, 0xd0,
    ] {
        let mut s = vec![config, config.wrapping_mul(7)];
        s.extend(deliver_all);
        // API calls on each side: CHILD_SA rekey by usage, IKE rekey,
        // liveness, each delivered.
        for (which, what) in [(0u8, 6u8), (1, 0), (0, 2), (1, 3), (0, 8)] {
            s.extend([7, which, what, 0, 0, 0, 0]);
            s.extend(deliver_all);
        }
        // The clock: 0xffff * 16 ms (about 17 minutes) a few times, each
        // followed by delivery.
        for _ in 0..4 {
            s.extend([6, 0x01, 0x00]);
            s.extend(deliver_all);
            s.extend([6, 0xff, 0xff]);
            s.extend(deliver_all);
        }
        // Faults: drop, duplicate, defer, a flipped byte, a forged datagram.
        s.extend([
            1, 2, 3, 4, 0, 40, 0x80, 5, 2, 8, 0xff, 0, 0, 0, 0, 0, 0, 0, 0,
        ]);
        s.extend(deliver_all);
        out.push(s);
    }
    out
}
