//! Receive steering of inbound SAs to workers by SPI (`[dataplane]
//! steer_esp`): which NIC flow rule each inbound SA should have, and keeping
//! the rules a port holds equal to that as snapshots change.
//!
//! RSS hashes outer addresses and ports, so every SA between one pair of
//! gateways lands on one RX queue, one worker: RFC 9611 per-CPU SAs
//! included, and several tunnels between the same two gateways. A NIC that
//! matches the ESP header in its flow director can do better: one rule per
//! inbound SA, `ESP spi=X -> queue Q`. Worker k owns queue k of every port
//! (run-to-completion), so the rule picks the worker that decrypts the SA:
//!
//! - a per-CPU SA (`lane` L) goes to queue `L % workers`: the SA's own
//!   worker, the one that also encrypts on that lane (what the fan-out's
//!   handoff does in software, without the extra core hop);
//! - any other SA goes where its tunnel's other SA already is (the SA a
//!   rekey replaces drains there while the new one takes over: the switch
//!   reorders nothing), else to the queue with the fewest steered SAs of
//!   the port so far (ties: the lowest); it stays there while it lives, so
//!   a new SA never moves an old one (a move could reorder the packets in
//!   flight).
//!
//! The SPI alone is matched (with the outer IP version and, for ESP in UDP,
//! the destination port): we chose our inbound SPIs, so it names the SA;
//! two SAs with one SPI on different local addresses share a rule, the
//! first one's. Every worker can decrypt every SA (lock-free replay
//! window), so a missing or refused rule only costs spreading, never
//! correctness: the port's packets then go by RSS, as without steering.
//!
//! The NIC side is behind [`FlowRules`] (the runtime's is DPDK's rte_flow,
//! `dpdk::flow`); the planning and bookkeeping here are tested against a
//! model of it. A port whose driver refuses its first rule (other than for
//! want of room) is given up on once (one log line); any other failure is
//! retried at the next change of the tables.

use std::collections::BTreeMap;
use std::net::IpAddr;

use espgw_control::tables::{LiveSa, Tables};
use espgw_esp::Encap;

/// One rule: the ESP an inbound SA receives on a port, and the RX queue
/// (worker) it should go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SteerKey {
    /// Index of the port (config order) the SA's tunnel uses.
    pub port: usize,
    /// IPv6 outer header.
    pub v6: bool,
    /// ESP in UDP to this local port; `None`: IP protocol 50.
    pub udp_dst_port: Option<u16>,
    pub spi: u32,
}

/// What an inbound SA brings to the choice of its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want {
    /// Its RFC 9611 per-CPU lane, if its tunnel has per-CPU SAs.
    pub lane: Option<u32>,
    /// Its tunnel's id.
    pub tunnel: u32,
}

/// What the tables want steered: every inbound SA's key, with its lane and
/// tunnel.
pub fn wanted(tables: &Tables<LiveSa>) -> BTreeMap<SteerKey, Want> {
    let mut want = BTreeMap::new();
    for sa in tables.sad.sas() {
        let LiveSa::Inbound {
            spi,
            tunnel,
            lane,
            sa,
            ..
        } = &**sa
        else {
            continue;
        };
        let Some(t) = tables.tunnel(*tunnel) else {
            continue;
        };
        let key = SteerKey {
            port: t.port,
            v6: matches!(t.local, IpAddr::V6(_)),
            udp_dst_port: match sa.encap() {
                Encap::None => None,
                Encap::Udp { local_port, .. } => Some(local_port),
            },
            spi: *spi,
        };
        // Two SAs on one key (one SPI on two local addresses): the first.
        want.entry(key).or_insert(Want {
            lane: *lane,
            tunnel: tunnel.0,
        });
    }
    want
}

/// Why a NIC did not take a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SteerError {
    /// The positive errno the driver gave.
    pub errno: i32,
    pub text: String,
}

impl SteerError {
    /// Whether asking again could succeed: the driver is out of room or
    /// busy (ENOMEM, ENOSPC, EAGAIN, EBUSY). Anything else (ENOSYS: no
    /// flow API; ENOTSUP: valid but not supported; EINVAL: what several
    /// drivers answer to an item they do not parse) will be answered the
    /// same way next time.
    pub fn transient(&self) -> bool {
        const EAGAIN: i32 = 11;
        const ENOMEM: i32 = 12;
        const EBUSY: i32 = 16;
        const ENOSPC: i32 = 28;
        matches!(self.errno, EAGAIN | ENOMEM | EBUSY | ENOSPC)
    }
}

/// The NIC side: install a rule on a port, remove one.
pub trait FlowRules {
    /// What the NIC hands back for an installed rule.
    type Rule;
    fn create(&mut self, key: &SteerKey, queue: u16) -> Result<Self::Rule, SteerError>;
    fn destroy(&mut self, port: usize, rule: Self::Rule) -> Result<(), SteerError>;
}

/// What one [`EspSteering::apply`] did, for the log.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    pub created: usize,
    pub destroyed: usize,
    /// Ports given up on in this call: (port, the driver's answer).
    pub refused: Vec<(usize, String)>,
    /// Rules the NIC did not take for another reason (retried at the next
    /// change): (key, the driver's answer).
    pub failed: Vec<(SteerKey, String)>,
}

/// What a port does about steering, for `espgw ctl`/stats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortSteering {
    /// Rules are installed as SAs come and go (this many now).
    Steering(usize),
    /// The driver refused: the port's ESP goes by RSS.
    Refused(String),
}

/// The rules installed on the NICs, by key, kept equal to [`wanted`].
pub struct EspSteering<R> {
    /// Worker count = RX queues per port in run-to-completion mode.
    queues: u16,
    /// By key: the queue, the SA's tunnel, the NIC's handle.
    installed: BTreeMap<SteerKey, (u16, u32, R)>,
    /// Ports whose driver refused steering as unsupported: never asked again.
    refused: BTreeMap<usize, String>,
    /// Rules that failed for another reason since the last success.
    pub failures: u64,
}

impl<R> EspSteering<R> {
    /// Steering over `queues` RX queues per port (one per worker).
    pub fn new(queues: u16) -> EspSteering<R> {
        EspSteering {
            queues: queues.max(1),
            installed: BTreeMap::new(),
            refused: BTreeMap::new(),
            failures: 0,
        }
    }

    /// The queue an SA of `key` goes to, given what is already installed.
    fn queue_for(&self, key: &SteerKey, want: Want) -> u16 {
        if let Some(l) = want.lane {
            return (l % u32::from(self.queues)) as u16;
        }
        let mut load = vec![0usize; usize::from(self.queues)];
        for (k, (q, tunnel, _)) in &self.installed {
            if k.port != key.port {
                continue;
            }
            if *tunnel == want.tunnel {
                // The SA it replaces (or a sibling): the same worker.
                return *q;
            }
            load[usize::from(*q)] += 1;
        }
        // The least loaded, the lowest on a tie.
        let (q, _) = load
            .iter()
            .enumerate()
            .min_by_key(|&(q, n)| (*n, q))
            .unwrap_or((0, &0));
        q as u16
    }

    /// Makes the installed rules match `want`: removes the rules of SAs
    /// that are gone, adds rules for new ones (on ports not refused).
    pub fn apply<F: FlowRules<Rule = R>>(
        &mut self,
        want: &BTreeMap<SteerKey, Want>,
        nic: &mut F,
    ) -> Applied {
        let mut done = Applied::default();
        let gone: Vec<SteerKey> = self
            .installed
            .keys()
            .filter(|k| !want.contains_key(k))
            .copied()
            .collect();
        for key in gone {
            if let Some((_, _, rule)) = self.installed.remove(&key) {
                match nic.destroy(key.port, rule) {
                    Ok(()) => done.destroyed += 1,
                    // The handle is spent either way; the SA is gone, so a
                    // rule left behind steers nothing that exists.
                    Err(e) => done.failed.push((key, e.text)),
                }
            }
        }
        for (key, &w) in want {
            if self.installed.contains_key(key) || self.refused.contains_key(&key.port) {
                continue;
            }
            let queue = self.queue_for(key, w);
            match nic.create(key, queue) {
                Ok(rule) => {
                    self.installed.insert(*key, (queue, w.tunnel, rule));
                    done.created += 1;
                }
                // Refused on a port with no rule yet, and not for want of
                // room: the port is given up on. (With rules in place the
                // driver took this pattern before: retried.)
                Err(e) if !e.transient() && !self.has_rules(key.port) => {
                    self.refused.insert(key.port, e.text.clone());
                    done.refused.push((key.port, e.text));
                }
                Err(e) => {
                    self.failures += 1;
                    done.failed.push((*key, e.text));
                }
            }
        }
        done
    }

    fn has_rules(&self, port: usize) -> bool {
        self.installed.keys().any(|k| k.port == port)
    }

    /// The queue the rule of `key` sends to, if one is installed.
    pub fn queue_of(&self, key: &SteerKey) -> Option<u16> {
        self.installed.get(key).map(|(q, _, _)| *q)
    }

    /// What port `port` does about steering.
    pub fn port_state(&self, port: usize) -> PortSteering {
        match self.refused.get(&port) {
            Some(why) => PortSteering::Refused(why.clone()),
            None => {
                PortSteering::Steering(self.installed.keys().filter(|k| k.port == port).count())
            }
        }
    }

    /// Forgets every rule (after the ports' rules were flushed at stop).
    pub fn forget(&mut self) {
        self.installed.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// A NIC model: rules by handle, refusing what it is told to.
    #[derive(Default)]
    struct Nic {
        next: u64,
        rules: BTreeMap<u64, (SteerKey, u16)>,
        /// Ports whose driver has no flow API.
        no_flow_api: BTreeSet<usize>,
        /// SPIs the NIC refuses with ENOSPC (a full table).
        full_for: BTreeSet<u32>,
    }

    impl FlowRules for Nic {
        type Rule = u64;
        fn create(&mut self, key: &SteerKey, queue: u16) -> Result<u64, SteerError> {
            if self.no_flow_api.contains(&key.port) {
                return Err(SteerError {
                    errno: 38,
                    text: "rte_flow_create(net_null0): Function not implemented".into(),
                });
            }
            if self.full_for.contains(&key.spi) {
                return Err(SteerError {
                    errno: 28,
                    text: "no space".into(),
                });
            }
            self.next += 1;
            self.rules.insert(self.next, (*key, queue));
            Ok(self.next)
        }
        fn destroy(&mut self, port: usize, rule: u64) -> Result<(), SteerError> {
            match self.rules.remove(&rule) {
                Some((k, _)) if k.port == port => Ok(()),
                _ => Err(SteerError {
                    errno: 22,
                    text: "no such rule".into(),
                }),
            }
        }
    }

    impl Nic {
        /// The queue the NIC sends `spi` to on `port`, if any rule matches.
        fn queue(&self, port: usize, spi: u32) -> Option<u16> {
            self.rules
                .values()
                .find(|(k, _)| k.port == port && k.spi == spi)
                .map(|&(_, q)| q)
        }
    }

    /// An SA of a tunnel of its own (the SPI), no lane.
    fn own(k: SteerKey) -> (SteerKey, Want) {
        (
            k,
            Want {
                lane: None,
                tunnel: k.spi,
            },
        )
    }

    fn key(port: usize, spi: u32) -> SteerKey {
        SteerKey {
            port,
            v6: false,
            udp_dst_port: None,
            spi,
        }
    }

    #[test]
    fn per_cpu_sas_go_to_their_lanes_worker() {
        let mut nic = Nic::default();
        let mut s = EspSteering::new(4);
        let want: BTreeMap<_, _> = (0..6u32)
            .map(|l| {
                let w = Want {
                    lane: Some(l),
                    tunnel: 7,
                };
                (key(1, 0x100 + l), w)
            })
            .collect();
        let done = s.apply(&want, &mut nic);
        assert_eq!(done.created, 6);
        for l in 0..6u32 {
            assert_eq!(nic.queue(1, 0x100 + l), Some((l % 4) as u16), "lane {l}");
        }
        assert_eq!(s.port_state(1), PortSteering::Steering(6));
    }

    #[test]
    fn other_sas_spread_evenly_and_never_move() {
        let mut nic = Nic::default();
        let mut s = EspSteering::new(3);
        let mut want: BTreeMap<_, _> = (0..3u32).map(|i| own(key(0, 10 + i))).collect();
        s.apply(&want, &mut nic);
        let mut queues: Vec<u16> = (0..3).map(|i| nic.queue(0, 10 + i).unwrap()).collect();
        queues.sort();
        assert_eq!(queues, [0, 1, 2], "one SA per queue");
        // A rekey: SA 11 goes, its successor 20 comes; the others stay.
        let before = [10, 12].map(|spi| nic.queue(0, spi));
        want.remove(&key(0, 11));
        want.extend([own(key(0, 20))]);
        let done = s.apply(&want, &mut nic);
        assert_eq!((done.created, done.destroyed), (1, 1));
        assert_eq!([10, 12].map(|spi| nic.queue(0, spi)), before);
        assert_eq!(nic.queue(0, 11), None, "the old SA's rule is gone");
        // The freed queue is the least loaded: the successor takes it.
        let mut queues: Vec<u16> = [10, 12, 20].map(|spi| nic.queue(0, spi).unwrap()).into();
        queues.sort();
        assert_eq!(queues, [0, 1, 2]);
        assert_eq!(nic.rules.len(), 3, "no rule leaked");
    }

    /// A rekey's new SA goes where the SA it replaces is (both decrypt
    /// while the old one drains: on one worker they reorder nothing), even
    /// when another queue is less loaded.
    #[test]
    fn a_rekeyed_sa_joins_its_tunnels_queue() {
        let mut nic = Nic::default();
        let mut s = EspSteering::new(2);
        let sa = |spi: u32, tunnel: u32| (key(0, spi), Want { lane: None, tunnel });
        let mut want: BTreeMap<_, _> = [sa(1, 100), sa(2, 200), sa(3, 200)].into_iter().collect();
        s.apply(&want, &mut nic);
        // Tunnel 200's two SAs share a queue; tunnel 100 has the other.
        assert_eq!(nic.queue(0, 2), nic.queue(0, 3));
        assert_ne!(nic.queue(0, 1), nic.queue(0, 2));
        // Tunnel 100 rekeys: the new SA joins SA 1 (one SA there against
        // two on the other queue would have drawn it anyway), and tunnel
        // 200's rekey joins 200 although its queue holds more.
        want.extend([sa(4, 100), sa(5, 200)]);
        s.apply(&want, &mut nic);
        assert_eq!(nic.queue(0, 4), nic.queue(0, 1));
        assert_eq!(nic.queue(0, 5), nic.queue(0, 2));
    }

    #[test]
    fn each_port_balances_its_own_rules() {
        let mut nic = Nic::default();
        let mut s = EspSteering::new(2);
        let want: BTreeMap<_, _> = [key(0, 1), key(1, 2), key(0, 3), key(1, 4)]
            .into_iter()
            .map(own)
            .collect();
        s.apply(&want, &mut nic);
        assert_ne!(nic.queue(0, 1), nic.queue(0, 3));
        assert_ne!(nic.queue(1, 2), nic.queue(1, 4));
    }

    #[test]
    fn a_port_without_a_flow_api_is_given_up_once() {
        let mut nic = Nic::default();
        nic.no_flow_api.insert(0);
        let mut s = EspSteering::new(2);
        let want: BTreeMap<_, _> = [key(0, 1), key(0, 2), key(1, 3)]
            .into_iter()
            .map(own)
            .collect();
        let done = s.apply(&want, &mut nic);
        assert_eq!(done.refused.len(), 1, "one answer for the port: {done:?}");
        assert_eq!(done.refused[0].0, 0);
        assert!(done.failed.is_empty());
        assert_eq!(done.created, 1, "port 1 steers");
        assert!(
            matches!(s.port_state(0), PortSteering::Refused(ref t) if t.contains("not implemented"))
        );
        // Not asked again at the next change.
        let again = s.apply(&want, &mut nic);
        assert_eq!(again, Applied::default());
        assert_eq!(s.port_state(1), PortSteering::Steering(1));
    }

    /// A driver with a flow API that does not parse the ESP item answers
    /// EINVAL (ixgbe's flow director does): given up on like no flow API.
    #[test]
    fn a_driver_that_rejects_the_pattern_is_given_up_once() {
        struct Rejects(usize);
        impl FlowRules for Rejects {
            type Rule = ();
            fn create(&mut self, _: &SteerKey, _: u16) -> Result<(), SteerError> {
                self.0 += 1;
                Err(SteerError {
                    errno: 22,
                    text: "Not supported by fdir filter".into(),
                })
            }
            fn destroy(&mut self, _: usize, _: ()) -> Result<(), SteerError> {
                Ok(())
            }
        }
        let mut nic = Rejects(0);
        let mut s = EspSteering::new(2);
        let want: BTreeMap<_, _> = [key(0, 1), key(0, 2)].into_iter().map(own).collect();
        let done = s.apply(&want, &mut nic);
        assert_eq!(done.refused.len(), 1);
        s.apply(&want, &mut nic);
        assert_eq!(nic.0, 1, "asked once");
    }

    #[test]
    fn other_failures_are_counted_and_retried() {
        let mut nic = Nic::default();
        nic.full_for.insert(2);
        let mut s = EspSteering::new(2);
        let want: BTreeMap<_, _> = [key(0, 1), key(0, 2)].into_iter().map(own).collect();
        let done = s.apply(&want, &mut nic);
        assert_eq!(done.created, 1);
        assert_eq!(done.failed, vec![(key(0, 2), "no space".to_string())]);
        assert_eq!(s.failures, 1);
        assert_eq!(s.port_state(0), PortSteering::Steering(1), "not given up");
        nic.full_for.clear();
        let done = s.apply(&want, &mut nic);
        assert_eq!(done.created, 1, "retried at the next change");
        assert!(nic.queue(0, 2).is_some());
    }

    #[test]
    fn forget_leaves_nothing_to_destroy() {
        let mut nic = Nic::default();
        let mut s = EspSteering::new(2);
        let want: BTreeMap<_, _> = [own(key(0, 1))].into_iter().collect();
        s.apply(&want, &mut nic);
        s.forget();
        let done = s.apply(&BTreeMap::new(), &mut nic);
        assert_eq!(done, Applied::default());
        assert_eq!(s.queue_of(&key(0, 1)), None);
    }
}
