//! The worker fuzz body, shared by the cargo-fuzz target
//! (fuzz/fuzz_targets/worker.rs) and the stable test tests/fuzz_worker.rs.
//!
//! The gateway under test is gateway B of the netns demo (configs/static-b.toml),
//! extended so that one input can reach every path of `Worker::process_burst`:
//! IPv4 and IPv6 addresses on both ports, IPv4 and IPv6 inner selectors,
//! MSS clamping, a bypass policy, static and unresolved neighbors. The
//! selector byte picks the tunnel's outer family (IPv4/IPv6), its encapsulation
//! (plain ESP / UDP 4500) and its suite (AES-GCM / AES-CBC+HMAC-SHA256): eight
//! configs. Its peer, gateway A ([`config_text`] with `b_side = false`), makes
//! the ESP in the seed corpus with espgw's own encap. Selector bit 3
//! ([`FAN_OUT`]; bit 4, [`LATE_SEND`]: with late parts sent on, not
//! dropped) runs B with two workers and the decrypt fan-out
//! (`spread_decrypt`, docs/multicore.md): worker 0 receives every frame
//! and spreads its ESP groups; worker 1 only decrypts and finishes the
//! parts handed to it, when the input lets it poll ([`HELPER`]). Both run
//! on the fuzzer's thread, so the input decides the interleaving: parts
//! decrypted by the helper or waiting in its inbox until the owner takes
//! them back, the owner's own parts once the helper's inbox is full,
//! replayed copies in parts of both workers, and parts given up when the
//! owner runs out of job boxes behind a part the helper has not done
//! (they come back late).
//!
//! Input: one selector byte, then frames, each `[flags][len: u16 BE][bytes]`:
//! * flags bit 0: port (0 protected, 1 unprotected);
//! * flags bit 1: the burst ends after this frame (a port change ends it too);
//! * flags bit 2: after this burst the clock moves 300 ms and the worker
//!   ticks (neighbor retries, expiry of held packets);
//! * flags bit 3 ([`HELPER`]): after this burst the helper polls once (with
//!   the fan-out: its parts decrypted and handed back), then the owner;
//! * flags bit 4 ([`SHORT`]): after this burst the clock moves 40 µs and
//!   the owner ticks (with the fan-out: past the 25 µs after which the
//!   owner takes back the parts still waiting in the helper's inbox).
//!
//! (Before session 17 bits 3 and 4 meant nothing and did not end a burst;
//! they now do in every config.)
//!
//! Invariants checked after every burst: no panic; every packet is accounted
//! for (`WorkerCounters::balanced`); every frame sent has the port's MAC as
//! source; every IP packet leaving the unprotected port comes from one of
//! that port's own addresses (ESP, ESP-in-UDP, the gateway's own ICMP/ND)
//! or is the bypass policy's traffic: no plaintext of the protected side
//! ever leaves in the clear. With the fan-out: only the owner transmits
//! and counts (the helper's queues stay empty, its receive, transmit and
//! drop counts zero), and at the end nothing is still out or waiting in a
//! reorder stage and every packet the owner handed out (and did not take
//! back) is one the helper decrypted.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use espgw_control::config::SpreadLate;
use espgw_control::tables::Tables;
use espgw_control::{Config, HostFacts};
use espgw_dataplane::neighbor::SharedNeighbors;
use espgw_dataplane::ports::{PortIdx, PortInfo};
use espgw_dataplane::worker::SpreadRings;
use espgw_dataplane::{Network, Now, TxQueues, VecBufPool, Worker};
use espgw_wire::{MacAddr, PacketBuf, VecBuf};

pub const A_UNPROT_MAC: MacAddr = [2, 0xaa, 0, 0, 0, 2];
pub const B_PROT_MAC: MacAddr = [2, 0xbb, 0, 0, 0, 1];
pub const B_UNPROT_MAC: MacAddr = [2, 0xbb, 0, 0, 0, 2];
pub const A_PROT_MAC: MacAddr = [2, 0xaa, 0, 0, 0, 1];
pub const HOST_A_MAC: MacAddr = [2, 0, 0, 0, 0x0a, 0x0a];
pub const HOST_B_MAC: MacAddr = [2, 0, 0, 0, 0x0b, 0x0b];
pub const PROT: usize = 0;
pub const UNPROT: usize = 1;

pub const PORT_BIT: u8 = 0x01;
pub const END_BURST: u8 = 0x02;
pub const TICK: u8 = 0x04;
pub const HELPER: u8 = 0x08;
pub const SHORT: u8 = 0x10;

/// Selector bit: two workers and the decrypt fan-out.
pub const FAN_OUT: u8 = 0x08;
/// Selector bit, with [`FAN_OUT`]: late parts sent on (`spread_late =
/// "send"`, counted in `reorder_late_sent`) instead of dropped.
pub const LATE_SEND: u8 = 0x10;

/// At most this many frames per input (a DPDK burst is 32; the fan-out's
/// seeds need four bursts of 16 or more, and its job boxes, 32 with two
/// workers, run out only after 32 groups).
const MAX_FRAMES: usize = 128;

/// Longest frame a port configured at the configs' MTU (1500) receives:
/// longer ones are left out, as the device drops them. (The worker answers
/// ARP and echo requests in place, so an oversize request that a device
/// did accept gets an equally oversize answer: see docs/fuzzing.md.)
const MAX_RX_FRAME: usize = 14 + 1500;

/// Number of configs a selector byte chooses from.
pub const CONFIGS: u8 = 8;

/// The tunnel variant a selector stands for.
#[derive(Debug, Clone, Copy)]
pub struct Variant {
    pub outer_v6: bool,
    pub udp: bool,
    pub cbc: bool,
}

impl Variant {
    pub fn of(selector: u8) -> Variant {
        Variant {
            outer_v6: selector & 1 != 0,
            udp: selector & 2 != 0,
            cbc: selector & 4 != 0,
        }
    }
}

/// Gateway B's config (`b_side`) or its peer A's, for one variant.
pub fn config_text(b_side: bool, v: Variant) -> String {
    let (name, prot, prot6, unprot, unprot6, peer_mac) = if b_side {
        (
            "gw-b",
            "10.2.0.1/24",
            "fd00:2::1/64",
            "192.0.2.2/24",
            "2001:db8::2/64",
            "02:aa:00:00:00:02",
        )
    } else {
        (
            "gw-a",
            "10.1.0.1/24",
            "fd00:1::1/64",
            "192.0.2.1/24",
            "2001:db8::1/64",
            "02:bb:00:00:00:02",
        )
    };
    let (us, peer) = if b_side { ("2", "1") } else { ("1", "2") };
    let (local, remote) = if v.outer_v6 {
        (format!("2001:db8::{us}"), format!("2001:db8::{peer}"))
    } else {
        (format!("192.0.2.{us}"), format!("192.0.2.{peer}"))
    };
    let host_mac = if b_side {
        "02:00:00:00:0b:0b"
    } else {
        "02:00:00:00:0a:0a"
    };
    // Fixed public test keys; B's out is A's in.
    let (esp, a_key, b_key, auth) = if v.cbc {
        (
            "aes128-sha256",
            "0x000102030405060708090a0b0c0d0e0f",
            "0x101112131415161718191a1b1c1d1e1f",
            true,
        )
    } else {
        (
            "aes128gcm16",
            "0xbef3215147135cd554e9156cae70f5a899331a52",
            "0x9b890a06962125b8925af8d8f76eac664799f983",
            false,
        )
    };
    let sa = |spi: &str, key: &str, auth_byte: &str| {
        if auth {
            format!(
                "{{ spi = {spi}, key = \"{key}\", auth_key = \"0x{}\" }}",
                auth_byte.repeat(32)
            )
        } else {
            format!("{{ spi = {spi}, key = \"{key}\" }}")
        }
    };
    let a_sa = sa("0xa001", a_key, "a5");
    let b_sa = sa("0xb001", b_key, "b5");
    let (out, inn) = if b_side { (b_sa, a_sa) } else { (a_sa, b_sa) };
    let (lnet, lnet6, rnet, rnet6) = if b_side {
        ("10.2.0.0/24", "fd00:2::/64", "10.1.0.0/24", "fd00:1::/64")
    } else {
        ("10.1.0.0/24", "fd00:1::/64", "10.2.0.0/24", "fd00:2::/64")
    };
    let encap = if v.udp { "udp" } else { "none" };
    format!(
        r#"
default_action = "discard"
[gateway]
name = "{name}"
[dataplane]
workers = 1
mtu = 1500
[[port]]
name = "prot"
side = "protected"
device = "net_ring0"
address = ["{prot}", "{prot6}"]
[[port]]
name = "unprot"
side = "unprotected"
device = "net_ring1"
address = ["{unprot}", "{unprot6}"]
[[neighbor]]
address = "{remote}"
mac = "{peer_mac}"
port = "unprot"
[[neighbor]]
address = "{host}"
mac = "{host_mac}"
port = "prot"
[[neighbor]]
address = "{host6}"
mac = "{host_mac}"
port = "prot"
[[route]]
dest = "198.51.100.0/24"
via = "192.0.2.{peer}"
port = "unprot"
[[tunnel]]
name = "t"
local = "{local}"
remote = "{remote}"
local_ts = ["{lnet}", "{lnet6}"]
remote_ts = ["{rnet}", "{rnet6}"]
esp = "{esp}"
encap = "{encap}"
replay_window = 64
mss_clamp = "auto"
out = {out}
in = {inn}
[[policy]]
action = "bypass"
src = "{lnet}"
dst = "198.51.100.0/24"
proto = "udp"
"#,
        host = if b_side { "10.2.0.10" } else { "10.1.0.10" },
        host6 = if b_side { "fd00:2::10" } else { "fd00:1::10" },
    )
}

fn parse(text: String) -> Config {
    let host = HostFacts::assumed(2);
    match espgw_control::parse_str(Path::new("fuzz.toml"), text, &host) {
        Ok((c, _)) => c,
        Err(d) => panic!("fuzz config does not parse: {d:?}"),
    }
}

/// Gateway B's configs, parsed once.
fn b_configs() -> &'static [Config] {
    static CONFIGS_B: OnceLock<Vec<Config>> = OnceLock::new();
    CONFIGS_B.get_or_init(|| {
        (0..CONFIGS)
            .map(|s| parse(config_text(true, Variant::of(s))))
            .collect()
    })
}

/// A config of gateway `b_side` for `selector`, parsed (uncached: seeds only).
pub fn parsed_config(b_side: bool, selector: u8) -> Config {
    parse(config_text(b_side, Variant::of(selector % CONFIGS)))
}

/// What a worker reads: its network and the control plane's snapshot.
pub type Snapshot = (Arc<Network>, Arc<Tables>);

/// Fresh tables (fresh SAs: sequence numbers and replay windows start over,
/// so every input runs from the same state).
pub fn tables(config: &Config, macs: [MacAddr; 2]) -> Snapshot {
    (
        Arc::new(Network::from_config(config, &macs).expect("fuzz network")),
        Arc::new(Tables::from_config(config, 0).expect("fuzz tables")),
    )
}

pub type FuzzWorker = Worker<VecBuf, VecBufPool>;

/// A worker with its TX queues and clock; with the fan-out, the helper
/// worker and its queues too.
pub struct Gateway {
    pub w: FuzzWorker,
    pub tx: TxQueues<VecBuf>,
    pub now: Now,
    pub helper: Option<(FuzzWorker, TxQueues<VecBuf>)>,
}

/// TX queue depth per port: with the fan-out, the owner releases what
/// came back of several bursts at once.
const TXQ_DEPTH: usize = 256;

impl Gateway {
    pub fn new((net, tables): Snapshot) -> Gateway {
        let ports = net.ports.len();
        Gateway {
            w: Worker::new(0, net, tables, VecBufPool, 32, SharedNeighbors::default()),
            tx: TxQueues::new(ports, TXQ_DEPTH),
            now: Now { ns: 1 },
            helper: None,
        }
    }

    /// Two workers sharing the snapshot and the neighbor board, worker 0
    /// spreading every ESP group worth it over both (`spread_decrypt =
    /// "on"`, the default 100 µs bound), late parts met with `late`.
    pub fn fan_out((net, tables): Snapshot, late: SpreadLate) -> Gateway {
        let ports = net.ports.len();
        let shared = SharedNeighbors::default();
        let rings = SpreadRings::with_late(2, late);
        let mut w = Worker::new(
            0,
            Arc::clone(&net),
            Arc::clone(&tables),
            VecBufPool,
            32,
            shared.clone(),
        );
        w.set_spread(Arc::clone(&rings));
        let mut h = Worker::new(1, net, tables, VecBufPool, 32, shared);
        h.set_spread(rings);
        Gateway {
            w,
            tx: TxQueues::new(ports, TXQ_DEPTH),
            now: Now { ns: 1 },
            helper: Some((h, TxQueues::new(ports, TXQ_DEPTH))),
        }
    }

    /// Gateway B (the one under test) for `selector`.
    pub fn b(selector: u8) -> Gateway {
        let cfg = &b_configs()[usize::from(selector % CONFIGS)];
        let snapshot = tables(cfg, [B_PROT_MAC, B_UNPROT_MAC]);
        if selector & FAN_OUT != 0 {
            let late = if selector & LATE_SEND != 0 {
                SpreadLate::Send
            } else {
                SpreadLate::Drop
            };
            Gateway::fan_out(snapshot, late)
        } else {
            Gateway::new(snapshot)
        }
    }

    /// The helper polls once (takes its parts, decrypts and finishes
    /// them, hands them back), then the owner (releases what is in order).
    pub fn helper_poll(&mut self) -> [Vec<Vec<u8>>; 2] {
        if let Some((h, htx)) = &mut self.helper {
            h.tick(htx, self.now);
        }
        self.w.tick(&mut self.tx, self.now);
        self.drain()
    }

    /// Feeds one burst on `port`; returns the frames sent per port after
    /// checking them.
    pub fn burst(&mut self, port: PortIdx, frames: &[&[u8]]) -> [Vec<Vec<u8>>; 2] {
        let mut burst: Vec<VecBuf> = frames.iter().map(|f| VecBuf::from_packet(f)).collect();
        self.w
            .process_burst(port, &mut burst, &mut self.tx, self.now);
        assert!(burst.is_empty(), "process_burst left packets behind");
        self.drain()
    }

    /// Moves the clock by `ns` and runs the periodic work.
    pub fn tick(&mut self, ns: u64) -> [Vec<Vec<u8>>; 2] {
        self.now.ns += ns;
        self.w.tick(&mut self.tx, self.now);
        self.drain()
    }

    /// Takes the TX queues (the helper's too), checks every frame, counts
    /// them as sent by the worker that queued them.
    pub fn drain(&mut self) -> [Vec<Vec<u8>>; 2] {
        let mut out: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
        take_sent(&mut self.w, &mut self.tx, &mut out);
        if let Some((h, htx)) = &mut self.helper {
            // Only the owner transmits (and counts what it drops): the
            // helper hands every part back, finished or not.
            assert!(
                htx.drain(PROT).next().is_none() && htx.drain(UNPROT).next().is_none(),
                "the fan-out's helper queued a frame itself"
            );
            let c = h.counters();
            assert!(
                c.rx == 0 && c.tx == 0 && c.drops.total() == 0 && c.balanced(),
                "helper: {c:?}"
            );
        }
        for (p, frames) in out.iter().enumerate() {
            for f in frames {
                check_sent(&self.w.net().ports[p], p, f);
            }
        }
        assert!(self.w.counters().balanced(), "{:?}", self.w.counters());
        out
    }

    /// Stops both workers, once nothing is in flight between them.
    pub fn shutdown(&mut self) {
        if let Some((h, _)) = &mut self.helper {
            let c = self.w.counters();
            assert_eq!(c.spreading, 0, "fan-out parts still out at the end: {c:?}");
            assert_eq!(
                c.spread_out,
                h.counters().spread_in,
                "what the owner handed out and did not take back is what the helper decrypted"
            );
            h.shutdown();
            assert!(h.counters().balanced(), "helper: {:?}", h.counters());
        }
        self.w.shutdown();
        assert!(self.w.counters().balanced(), "{:?}", self.w.counters());
    }
}

/// Moves what `w` queued into `out`, counted as `w`'s TX.
fn take_sent(w: &mut FuzzWorker, tx: &mut TxQueues<VecBuf>, out: &mut [Vec<Vec<u8>>; 2]) {
    for (p, o) in out.iter_mut().enumerate() {
        let frames: Vec<VecBuf> = tx.drain(p).collect();
        let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum();
        w.count_tx(p, frames.len() as u64, bytes, 0);
        o.extend(frames.iter().map(|f| f.data().to_vec()));
    }
}

/// What may leave a port (see the module docs).
fn check_sent(port: &PortInfo, p: usize, f: &[u8]) {
    assert!(f.len() >= 14, "runt frame sent on port {p}");
    assert_eq!(f[6..12], port.mac, "frame sent with a foreign source MAC");
    assert!(
        f.len() <= 14 + port.mtu,
        "frame of {} bytes over the MTU sent on port {p}",
        f.len()
    );
    if p != UNPROT {
        return;
    }
    let ip = &f[14..];
    let (src, dst, proto): (IpAddr, IpAddr, u8) = match u16::from_be_bytes([f[12], f[13]]) {
        0x0806 => return, // ARP
        0x0800 => {
            assert!(ip.len() >= 20, "short IPv4 sent");
            let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
            (src.into(), dst.into(), ip[9])
        }
        0x86dd => {
            assert!(ip.len() >= 40, "short IPv6 sent");
            let src = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).unwrap());
            let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[24..40]).unwrap());
            (src.into(), dst.into(), ip[6])
        }
        t => panic!("ethertype {t:#06x} sent on the unprotected port"),
    };
    let ours = port.owns(src) || matches!(src, IpAddr::V6(a) if a.segments()[0] & 0xffc0 == 0xfe80);
    let bypass = proto == 17
        && matches!((src, dst), (IpAddr::V4(s), IpAddr::V4(d))
            if s.octets()[..3] == [10, 2, 0] && d.octets()[..3] == [198, 51, 100]);
    assert!(
        ours || bypass,
        "plaintext leaked on the unprotected port: {src} -> {dst} proto {proto}"
    );
}

/// One fuzz input.
pub fn run(data: &[u8]) {
    run_observed(data, |_| {});
}

/// What a run leaves: the owner's counters and, with the fan-out, the
/// helper's, after shutdown.
pub struct Ran {
    pub owner: espgw_dataplane::WorkerCounters,
    pub helper: Option<espgw_dataplane::WorkerCounters>,
}

/// [`run`], handing `observe` every step's frames sent (per port, checked);
/// `None` for an empty input.
pub fn run_observed(data: &[u8], mut observe: impl FnMut(&[Vec<Vec<u8>>; 2])) -> Option<Ran> {
    let (&selector, mut rest) = data.split_first()?;
    let mut gw = Gateway::b(selector);
    let mut burst: Vec<&[u8]> = Vec::new();
    let mut burst_port = PROT;
    let mut frames = 0;
    while rest.len() >= 3 && frames < MAX_FRAMES {
        let flags = rest[0];
        let len = usize::from(u16::from_be_bytes([rest[1], rest[2]])).min(rest.len() - 3);
        let frame = &rest[3..3 + len];
        rest = &rest[3 + len..];
        frames += 1;
        if frame.len() > MAX_RX_FRAME {
            continue;
        }
        let port = usize::from(flags & PORT_BIT);
        if port != burst_port && !burst.is_empty() {
            observe(&gw.burst(burst_port, &burst));
            burst.clear();
        }
        burst_port = port;
        burst.push(frame);
        if flags & (END_BURST | TICK | HELPER | SHORT) != 0 {
            observe(&gw.burst(burst_port, &burst));
            burst.clear();
        }
        if flags & HELPER != 0 {
            observe(&gw.helper_poll());
        }
        if flags & SHORT != 0 {
            observe(&gw.tick(40_000));
        }
        if flags & TICK != 0 {
            observe(&gw.tick(300_000_000));
        }
    }
    if !burst.is_empty() {
        observe(&gw.burst(burst_port, &burst));
    }
    // Let held packets resolve or expire and the helper hand back what it
    // holds, then stop: the identity must hold with nothing left in flight.
    for _ in 0..20 {
        observe(&gw.helper_poll());
        observe(&gw.tick(300_000_000));
    }
    gw.shutdown();
    Some(Ran {
        owner: gw.w.counters().clone(),
        helper: gw.helper.as_ref().map(|(h, _)| h.counters().clone()),
    })
}

/// Encodes frames as one input (the inverse of [`run`]'s reader).
pub fn encode(selector: u8, frames: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut out = vec![selector];
    for (flags, f) in frames {
        out.push(*flags);
        out.extend_from_slice(&(f.len() as u16).to_be_bytes());
        out.extend_from_slice(f);
    }
    out
}
