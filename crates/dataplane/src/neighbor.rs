//! Next-hop MAC resolution: static entries from the config, entries learned
//! from ARP / neighbor discovery, and a bounded wait queue for packets whose
//! next hop is being resolved.
//!
//! Each worker owns one `Neighbors` (no locks on lookup). What one worker
//! learns is also posted to a [`SharedNeighbors`] board that the others
//! consult on a miss, before they send a request of their own: ARP replies
//! arrive on whichever queue RSS picks.

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use espgw_wire::MacAddr;

use crate::ports::PortIdx;

/// Packets held per unresolved next hop; more are dropped (counted as
/// `neighbor_queue_full`). Linux holds about 100 (`unres_qlen`); with 8,
/// the first burst to a next hop not yet resolved (a gateway coming up
/// with tens of tunnels to one peer, ND on IPv6 taking a few
/// milliseconds on a busy host) lost everything past its eighth packet
/// (tests/e2e/suites.sh saw 10 such drops on a loaded machine).
pub const MAX_HELD_PER_HOP: usize = 64;
/// Packets one worker holds for all its unresolved next hops together;
/// more are dropped (counted as `neighbor_queue_full`): held packets are
/// mbufs the receive path cannot use (the default pool has 4095).
pub const MAX_HELD_PER_WORKER: usize = 512;
/// Next hops being resolved at once; more are dropped (counted).
pub const MAX_PENDING_HOPS: usize = 256;
/// Time between two requests for the same next hop.
pub const RETRY_NS: u64 = 1_000_000_000;
/// Requests sent before the held packets are dropped.
pub const MAX_REQUESTS: u32 = 3;

type Key = (PortIdx, IpAddr);

/// Learned entries shared between the workers of one gateway. Locked only
/// on a per-worker miss and when an entry is learned: never per forwarded packet.
#[derive(Debug, Default, Clone)]
pub struct SharedNeighbors(Arc<Mutex<HashMap<Key, MacAddr>>>);

impl SharedNeighbors {
    fn get(&self, key: &Key) -> Option<MacAddr> {
        self.0.lock().ok()?.get(key).copied()
    }
    fn post(&self, key: Key, mac: MacAddr) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(key, mac);
        }
    }
}

struct Pending<B> {
    held: Vec<B>,
    last_request_ns: u64,
    requests: u32,
}

/// What [`Neighbors::hold`] did with a packet.
#[derive(Debug)]
pub enum Held<B> {
    /// Queued; send a request now when `request` is true (first packet).
    Queued { request: bool },
    /// Not queued: the queue (or the table of pending hops) is full.
    Full(B),
}

/// The result of a periodic [`Neighbors::tick`].
pub struct Tick<B> {
    /// Next hops to send another request for.
    pub retry: Vec<Key>,
    /// Packets whose next hop never answered.
    pub expired: Vec<B>,
    /// Next hops another worker resolved meanwhile, with the packets
    /// that waited for them here.
    pub resolved: Vec<(Key, MacAddr, Vec<B>)>,
}

/// One worker's neighbor cache and wait queues. Fx hashing: keys are
/// only addresses on the gateway's own subnets (nothing else is learned),
/// so a remote sender cannot pick colliding keys.
pub struct Neighbors<B> {
    entries: FxHashMap<Key, MacAddr>,
    pending: FxHashMap<Key, Pending<B>>,
    shared: SharedNeighbors,
    held_count: usize,
    generation: u64,
}

impl<B> Neighbors<B> {
    /// A cache preloaded with `static_entries`.
    pub fn new(static_entries: &[(PortIdx, IpAddr, MacAddr)], shared: SharedNeighbors) -> Self {
        let entries = static_entries
            .iter()
            .map(|&(p, ip, mac)| ((p, ip), mac))
            .collect();
        Neighbors {
            entries,
            pending: FxHashMap::default(),
            shared,
            held_count: 0,
            generation: 0,
        }
    }

    /// Changes whenever an entry is added or changed: a cache of lookups
    /// is valid while this stays the same.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The MAC of `ip` on `port`, if known here or learned by another worker.
    #[inline]
    pub fn lookup(&mut self, port: PortIdx, ip: IpAddr) -> Option<MacAddr> {
        if let Some(mac) = self.entries.get(&(port, ip)) {
            return Some(*mac);
        }
        let mac = self.shared.get(&(port, ip))?;
        self.entries.insert((port, ip), mac);
        Some(mac)
    }

    /// Records `ip` at `mac` on `port`; returns the packets that waited for
    /// it (the caller sends them).
    pub fn learn(&mut self, port: PortIdx, ip: IpAddr, mac: MacAddr) -> Vec<B> {
        let key = (port, ip);
        if self.entries.insert(key, mac) != Some(mac) {
            self.generation += 1;
            self.shared.post(key, mac);
        }
        match self.pending.remove(&key) {
            Some(p) => {
                self.held_count -= p.held.len();
                p.held
            }
            None => Vec::new(),
        }
    }

    /// True when `ip` on `port` is in the cache or awaited: such an
    /// address's ARP traffic refreshes the cache (RFC 826 "merge").
    pub fn knows(&self, port: PortIdx, ip: IpAddr) -> bool {
        self.entries.contains_key(&(port, ip)) || self.pending.contains_key(&(port, ip))
    }

    /// Queues `pkt` until `ip` on `port` resolves.
    pub fn hold(&mut self, port: PortIdx, ip: IpAddr, pkt: B, now_ns: u64) -> Held<B> {
        let key = (port, ip);
        if self.held_count >= MAX_HELD_PER_WORKER {
            return Held::Full(pkt);
        }
        if let Some(p) = self.pending.get_mut(&key) {
            if p.held.len() >= MAX_HELD_PER_HOP {
                return Held::Full(pkt);
            }
            p.held.push(pkt);
            self.held_count += 1;
            return Held::Queued { request: false };
        }
        if self.pending.len() >= MAX_PENDING_HOPS {
            return Held::Full(pkt);
        }
        // Room for a typical first burst; grows up to MAX_HELD_PER_HOP.
        let mut held = Vec::with_capacity(8);
        held.push(pkt);
        self.pending.insert(
            key,
            Pending {
                held,
                last_request_ns: now_ns,
                requests: 1,
            },
        );
        self.held_count += 1;
        Held::Queued { request: true }
    }

    /// Packets waiting for resolution now.
    pub fn held(&self) -> usize {
        self.held_count
    }

    /// Retries and expiries due at `now_ns`.
    pub fn tick(&mut self, now_ns: u64) -> Tick<B> {
        let mut tick = Tick {
            retry: Vec::new(),
            expired: Vec::new(),
            resolved: Vec::new(),
        };
        // The answer may have reached another worker's queue.
        let found: Vec<(Key, MacAddr)> = self
            .pending
            .keys()
            .filter_map(|k| self.shared.get(k).map(|mac| (*k, mac)))
            .collect();
        for (key, mac) in found {
            self.entries.insert(key, mac);
            self.generation += 1;
            if let Some(p) = self.pending.remove(&key) {
                self.held_count -= p.held.len();
                tick.resolved.push((key, mac, p.held));
            }
        }
        let mut dead = Vec::new();
        for (key, p) in self.pending.iter_mut() {
            if now_ns.saturating_sub(p.last_request_ns) < RETRY_NS {
                continue;
            }
            if p.requests >= MAX_REQUESTS {
                dead.push(*key);
            } else {
                p.requests += 1;
                p.last_request_ns = now_ns;
                tick.retry.push(*key);
            }
        }
        for key in dead {
            if let Some(p) = self.pending.remove(&key) {
                self.held_count -= p.held.len();
                tick.expired.extend(p.held);
            }
        }
        tick
    }

    /// Takes every held packet (at shutdown).
    pub fn drain_held(&mut self) -> Vec<B> {
        self.held_count = 0;
        self.pending.drain().flat_map(|(_, p)| p.held).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: MacAddr = [2, 0, 0, 0, 0, 9];

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn holds_until_learned_then_releases_in_order() {
        let mut n: Neighbors<u32> = Neighbors::new(&[], SharedNeighbors::default());
        assert!(n.lookup(0, ip("10.1.0.10")).is_none());
        assert!(matches!(
            n.hold(0, ip("10.1.0.10"), 1, 0),
            Held::Queued { request: true }
        ));
        assert!(matches!(
            n.hold(0, ip("10.1.0.10"), 2, 0),
            Held::Queued { request: false }
        ));
        assert_eq!(n.held(), 2);
        assert_eq!(n.learn(0, ip("10.1.0.10"), MAC), vec![1, 2]);
        assert_eq!(n.held(), 0);
        assert_eq!(n.lookup(0, ip("10.1.0.10")), Some(MAC));
        // Another port is another link.
        assert_eq!(n.lookup(1, ip("10.1.0.10")), None);
    }

    #[test]
    fn queue_is_bounded() {
        let mut n: Neighbors<usize> = Neighbors::new(&[], SharedNeighbors::default());
        for i in 0..MAX_HELD_PER_HOP {
            assert!(matches!(
                n.hold(0, ip("10.1.0.10"), i, 0),
                Held::Queued { .. }
            ));
        }
        assert!(matches!(n.hold(0, ip("10.1.0.10"), 99, 0), Held::Full(99)));
    }

    #[test]
    fn all_held_packets_of_a_worker_are_bounded_too() {
        let mut n: Neighbors<usize> = Neighbors::new(&[], SharedNeighbors::default());
        let hops = MAX_HELD_PER_WORKER.div_ceil(MAX_HELD_PER_HOP) + 1;
        assert!(
            hops <= MAX_PENDING_HOPS,
            "the per-worker bound is the one reached"
        );
        let mut queued = 0;
        for h in 0..hops {
            let hop = ip(&format!("10.1.{}.{}", h / 200, h % 200 + 1));
            for i in 0..MAX_HELD_PER_HOP {
                if matches!(n.hold(0, hop, i, 0), Held::Queued { .. }) {
                    queued += 1;
                }
            }
        }
        assert_eq!(queued, MAX_HELD_PER_WORKER);
        assert_eq!(n.held(), MAX_HELD_PER_WORKER);
        assert!(matches!(n.hold(0, ip("10.9.9.9"), 7, 0), Held::Full(7)));
    }

    #[test]
    fn retries_then_expires() {
        let mut n: Neighbors<u8> = Neighbors::new(&[], SharedNeighbors::default());
        let _ = n.hold(0, ip("10.1.0.10"), 7, 0);
        assert!(n.tick(RETRY_NS / 2).retry.is_empty());
        assert_eq!(n.tick(RETRY_NS).retry.len(), 1);
        assert_eq!(n.tick(2 * RETRY_NS).retry.len(), 1);
        let t = n.tick(3 * RETRY_NS);
        assert!(t.retry.is_empty());
        assert_eq!(t.expired, vec![7]);
        assert_eq!(n.held(), 0);
    }

    #[test]
    fn workers_share_what_they_learn() {
        let shared = SharedNeighbors::default();
        let mut a: Neighbors<u8> = Neighbors::new(&[], shared.clone());
        let mut b: Neighbors<u8> = Neighbors::new(&[], shared);
        // b waits for a next hop whose answer reaches a.
        let _ = b.hold(0, ip("10.1.0.20"), 5, 0);
        a.learn(0, ip("10.1.0.20"), MAC);
        let t = b.tick(1);
        assert_eq!(t.resolved.len(), 1);
        assert_eq!(t.resolved[0].2, vec![5]);
        assert_eq!(b.held(), 0);
        a.learn(0, ip("10.1.0.10"), MAC);
        assert_eq!(b.lookup(0, ip("10.1.0.10")), Some(MAC));
        let mut s: Neighbors<u8> =
            Neighbors::new(&[(1, ip("192.0.2.2"), MAC)], SharedNeighbors::default());
        assert_eq!(s.lookup(1, ip("192.0.2.2")), Some(MAC));
    }
}
