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
//! - a per-CPU SA (`lane` L) goes to queue `L % workers`, where the
//!   fan-out's handoff would hand it in software (with as many pairs as
//!   workers, the worker that encrypts on pair L);
//! - any other SA goes where its tunnel's other SA already is (the SA a
//!   rekey replaces drains there while the new one takes over), else to
//!   the queue with the fewest steered SAs of the port so far (ties: the
//!   lowest); it stays there while it lives, so a new SA never moves an
//!   old one (a move could reorder the packets in flight).
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
//! model of it. A form of rule (ESP or ESP in UDP, IPv4 or IPv6) whose
//! first rule on a port the driver refuses (other than for want of room) is
//! given up on there (one log line); any other failure is retried at every
//! change of the tables and reported once.

use std::collections::{BTreeMap, BTreeSet};
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

/// The NIC side: install a rule on a port, remove one, remove all of a
/// port's.
pub trait FlowRules {
    /// What the NIC hands back for an installed rule.
    type Rule;
    fn create(&mut self, key: &SteerKey, queue: u16) -> Result<Self::Rule, SteerError>;
    fn destroy(&mut self, port: usize, rule: Self::Rule) -> Result<(), SteerError>;
    /// Removes every rule of `port` (the handles of its rules are spent).
    fn flush(&mut self, port: usize) -> Result<(), SteerError>;
}

/// The shape of a rule: outer IP version, ESP in UDP or not. Drivers take
/// or refuse a shape, not a single SPI, so refusals are kept by shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Form {
    Esp4,
    Esp6,
    Udp4,
    Udp6,
}

impl Form {
    pub fn of(key: &SteerKey) -> Form {
        match (key.v6, key.udp_dst_port.is_some()) {
            (false, false) => Form::Esp4,
            (true, false) => Form::Esp6,
            (false, true) => Form::Udp4,
            (true, true) => Form::Udp6,
        }
    }

    /// As `espgw bench --outer` names it.
    pub fn name(self) -> &'static str {
        match self {
            Form::Esp4 => "esp4",
            Form::Esp6 => "esp6",
            Form::Udp4 => "udp4",
            Form::Udp6 => "udp6",
        }
    }
}

/// What one [`EspSteering::apply`] did, for the log: each refusal and
/// each failing rule is reported once, not at every change.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    pub created: usize,
    pub destroyed: usize,
    /// Shapes given up on in this call: (port, shape, the driver's answer).
    pub refused: Vec<(usize, Form, String)>,
    /// Rules the NIC did not take for another reason, the first time
    /// (retried at every change until taken): (key, the driver's answer).
    pub failed: Vec<(SteerKey, String)>,
    /// Rules the NIC would not remove (left in it, flushed at stop; they
    /// match only SPIs of SAs that are gone): (port, the driver's answer).
    pub not_removed: Vec<(usize, String)>,
}

/// What a port does about steering, for the stats JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortSteering {
    /// Rules installed now.
    pub rules: usize,
    /// Shapes the driver refused, with its answer: their SAs go by RSS.
    pub refused: Vec<(Form, String)>,
}

impl PortSteering {
    /// `"steering"` (rules in), `"refused"` (none in, some shape refused) or
    /// `"idle"` (nothing asked of this port: it receives no ESP).
    pub fn state(&self) -> &'static str {
        match (self.rules, self.refused.is_empty()) {
            (0, true) => "idle",
            (0, false) => "refused",
            _ => "steering",
        }
    }
}

/// The rules installed on the NICs, by key, kept equal to [`wanted`].
pub struct EspSteering<R> {
    /// Worker count = RX queues per port in run-to-completion mode.
    queues: u16,
    /// By key: the queue, the SA's tunnel, the NIC's handle.
    installed: BTreeMap<SteerKey, (u16, u32, R)>,
    /// Shapes per port whose driver refused their first rule (not for want
    /// of room): never asked again.
    refused: BTreeMap<(usize, Form), String>,
    /// Keys whose failure was reported (not again until they succeed).
    reported: BTreeSet<SteerKey>,
    /// Ports holding a rule whose removal failed: flushed at stop.
    dirty: BTreeSet<usize>,
    /// Failed tries to install a rule, in all (retries included).
    pub failed_tries: u64,
}

impl<R> EspSteering<R> {
    /// Steering over `queues` RX queues per port (one per worker).
    pub fn new(queues: u16) -> EspSteering<R> {
        EspSteering {
            queues: queues.max(1),
            installed: BTreeMap::new(),
            refused: BTreeMap::new(),
            reported: BTreeSet::new(),
            dirty: BTreeSet::new(),
            failed_tries: 0,
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

    /// Makes the installed rules match `want`: adds rules for new SAs (on
    /// shapes not refused), then removes the rules of SAs that are gone.
    /// Adding first lets a rekey's new SA find the one it replaces even
    /// when the old one is gone by the same change.
    pub fn apply<F: FlowRules<Rule = R>>(
        &mut self,
        want: &BTreeMap<SteerKey, Want>,
        nic: &mut F,
    ) -> Applied {
        let mut done = Applied::default();
        for (key, &w) in want {
            let form = Form::of(key);
            if self.installed.contains_key(key) || self.refused.contains_key(&(key.port, form)) {
                continue;
            }
            let queue = self.queue_for(key, w);
            match nic.create(key, queue) {
                Ok(rule) => {
                    self.installed.insert(*key, (queue, w.tunnel, rule));
                    self.reported.remove(key);
                    done.created += 1;
                }
                // Refused for a shape the port has no rule of yet, and not
                // for want of room: the shape is given up on. (With rules
                // of that shape in place the driver took it before: a
                // failure, retried.)
                Err(e) if !e.transient() && !self.has_rules(key.port, form) => {
                    self.failed_tries += 1;
                    self.refused.insert((key.port, form), e.text.clone());
                    done.refused.push((key.port, form, e.text));
                }
                Err(e) => {
                    self.failed_tries += 1;
                    if self.reported.insert(*key) {
                        done.failed.push((*key, e.text));
                    }
                }
            }
        }
        self.reported.retain(|k| want.contains_key(k));
        let gone: Vec<SteerKey> = self
            .installed
            .keys()
            .filter(|k| !want.contains_key(k))
            .copied()
            .collect();
        for key in gone {
            let Some((_, _, rule)) = self.installed.remove(&key) else {
                continue;
            };
            match nic.destroy(key.port, rule) {
                Ok(()) => done.destroyed += 1,
                // The handle went into the call; the SA is gone, so a rule
                // left in the NIC matches nothing that exists. The port's
                // flush at stop takes it.
                Err(e) => {
                    self.dirty.insert(key.port);
                    done.not_removed.push((key.port, e.text));
                }
            }
        }
        done
    }

    fn has_rules(&self, port: usize, form: Form) -> bool {
        self.installed
            .keys()
            .any(|k| k.port == port && Form::of(k) == form)
    }

    /// The queue the rule of `key` sends to, if one is installed.
    pub fn queue_of(&self, key: &SteerKey) -> Option<u16> {
        self.installed.get(key).map(|(q, _, _)| *q)
    }

    /// What port `port` does about steering.
    pub fn port_state(&self, port: usize) -> PortSteering {
        PortSteering {
            rules: self.installed.keys().filter(|k| k.port == port).count(),
            refused: self
                .refused
                .iter()
                .filter(|((p, _), _)| *p == port)
                .map(|((_, form), why)| (*form, why.clone()))
                .collect(),
        }
    }

    /// Removes every rule at stop: each port that holds ours is flushed
    /// (cheaper than one call per rule, and it also takes rules whose
    /// removal failed), and every handle is dropped. Returns the ports
    /// whose flush failed, with the driver's answer.
    pub fn remove_all<F: FlowRules<Rule = R>>(&mut self, nic: &mut F) -> Vec<(usize, String)> {
        let ports: BTreeSet<usize> = self
            .installed
            .keys()
            .map(|k| k.port)
            .chain(self.dirty.iter().copied())
            .collect();
        self.installed.clear();
        self.dirty.clear();
        ports
            .into_iter()
            .filter_map(|port| nic.flush(port).err().map(|e| (port, e.text)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENOSYS: i32 = 38;
    const EINVAL: i32 = 22;
    const ENOSPC: i32 = 28;

    /// A NIC model: rules by handle, refusing what it is told to.
    #[derive(Default)]
    struct Nic {
        next: u64,
        rules: BTreeMap<u64, (SteerKey, u16)>,
        /// Ports whose driver has no flow API.
        no_flow_api: BTreeSet<usize>,
        /// Shapes the driver does not parse (EINVAL).
        no_parser_for: BTreeSet<Form>,
        /// SPIs the NIC refuses with ENOSPC (a full table).
        full_for: BTreeSet<u32>,
        /// Removals fail.
        sticky: bool,
        creates: usize,
        flushed: Vec<usize>,
    }

    fn err(errno: i32, text: &str) -> SteerError {
        SteerError {
            errno,
            text: text.into(),
        }
    }

    impl FlowRules for Nic {
        type Rule = u64;
        fn create(&mut self, key: &SteerKey, queue: u16) -> Result<u64, SteerError> {
            self.creates += 1;
            if self.no_flow_api.contains(&key.port) {
                return Err(err(
                    ENOSYS,
                    "rte_flow_create(net_null0): Function not implemented",
                ));
            }
            if self.no_parser_for.contains(&Form::of(key)) {
                return Err(err(EINVAL, "Not supported by fdir filter"));
            }
            if self.full_for.contains(&key.spi) {
                return Err(err(ENOSPC, "no space"));
            }
            self.next += 1;
            self.rules.insert(self.next, (*key, queue));
            Ok(self.next)
        }
        fn destroy(&mut self, port: usize, rule: u64) -> Result<(), SteerError> {
            if self.sticky {
                return Err(err(EINVAL, "busy rule"));
            }
            match self.rules.remove(&rule) {
                Some((k, _)) if k.port == port => Ok(()),
                _ => Err(err(EINVAL, "no such rule")),
            }
        }
        fn flush(&mut self, port: usize) -> Result<(), SteerError> {
            self.flushed.push(port);
            self.rules.retain(|_, (k, _)| k.port != port);
            Ok(())
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

    /// An SA of tunnel `tunnel`, no lane.
    fn of_tunnel(k: SteerKey, tunnel: u32) -> (SteerKey, Want) {
        (k, Want { lane: None, tunnel })
    }

    fn key(port: usize, spi: u32) -> SteerKey {
        SteerKey {
            port,
            v6: false,
            udp_dst_port: None,
            spi,
        }
    }

    fn udp_key(port: usize, spi: u32) -> SteerKey {
        SteerKey {
            udp_dst_port: Some(4500),
            ..key(port, spi)
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
        assert_eq!(s.port_state(1).rules, 6);
        assert_eq!(s.port_state(1).state(), "steering");
        assert_eq!(s.port_state(0).state(), "idle", "nothing asked of port 0");
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
        // SA 11's tunnel goes, tunnel 20 comes; the others stay.
        let before = [10, 12].map(|spi| nic.queue(0, spi));
        want.remove(&key(0, 11));
        want.extend([own(key(0, 20))]);
        let done = s.apply(&want, &mut nic);
        assert_eq!((done.created, done.destroyed), (1, 1));
        assert_eq!([10, 12].map(|spi| nic.queue(0, spi)), before);
        assert_eq!(nic.queue(0, 11), None, "the old SA's rule is gone");
        assert_eq!(nic.rules.len(), 3, "no rule leaked");
    }

    /// A rekey's new SA goes where the SA it replaces is (both decrypt
    /// while the old one drains: on one worker they reorder nothing), even
    /// when another queue is less loaded, and even when the old SA is gone
    /// by the same change (rules are added before others are removed).
    #[test]
    fn a_rekeyed_sa_joins_its_tunnels_queue() {
        let mut nic = Nic::default();
        let mut s = EspSteering::new(2);
        let mut want: BTreeMap<_, _> = [
            of_tunnel(key(0, 1), 100),
            of_tunnel(key(0, 2), 200),
            of_tunnel(key(0, 3), 200),
        ]
        .into_iter()
        .collect();
        s.apply(&want, &mut nic);
        assert_eq!(nic.queue(0, 2), nic.queue(0, 3));
        assert_ne!(nic.queue(0, 1), nic.queue(0, 2));
        // Tunnel 200 rekeys: its new SA joins it although its queue holds
        // more.
        want.extend([of_tunnel(key(0, 5), 200)]);
        s.apply(&want, &mut nic);
        assert_eq!(nic.queue(0, 5), nic.queue(0, 2));
        // Tunnel 100 rekeys and its old SA is gone in the same change.
        let q1 = nic.queue(0, 1);
        want.remove(&key(0, 1));
        want.extend([of_tunnel(key(0, 4), 100)]);
        let done = s.apply(&want, &mut nic);
        assert_eq!((done.created, done.destroyed), (1, 1));
        assert_eq!(nic.queue(0, 4), q1);
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
        assert_eq!(done.refused.len(), 1, "one answer for the shape: {done:?}");
        assert_eq!((done.refused[0].0, done.refused[0].1), (0, Form::Esp4));
        assert!(done.failed.is_empty());
        assert_eq!(done.created, 1, "port 1 steers");
        let state = s.port_state(0);
        assert_eq!(state.state(), "refused");
        assert!(state.refused[0].1.contains("not implemented"), "{state:?}");
        // Not asked again at the next change.
        let creates = nic.creates;
        let again = s.apply(&want, &mut nic);
        assert_eq!(again, Applied::default());
        assert_eq!(nic.creates, creates);
        assert_eq!(s.port_state(1).rules, 1);
    }

    /// A driver with a flow API that does not parse one shape (EINVAL, as
    /// ixgbe's flow director answers an ESP item without its security
    /// action, or a driver that wants the NAT-T pattern's UDP item without
    /// a spec) loses only that shape: the port's other SAs are steered.
    #[test]
    fn a_shape_the_driver_rejects_is_given_up_alone() {
        let mut nic = Nic::default();
        nic.no_parser_for.insert(Form::Udp4);
        let mut s = EspSteering::new(2);
        let want: BTreeMap<_, _> = [udp_key(0, 1), udp_key(0, 2), key(0, 3)]
            .into_iter()
            .map(own)
            .collect();
        let done = s.apply(&want, &mut nic);
        assert_eq!(done.created, 1, "ESP over IPv4 steered");
        assert_eq!(done.refused.len(), 1);
        assert_eq!(done.refused[0].1, Form::Udp4);
        let creates = nic.creates;
        s.apply(&want, &mut nic);
        assert_eq!(nic.creates, creates, "the refused shape is not asked again");
        let state = s.port_state(0);
        assert_eq!((state.state(), state.rules), ("steering", 1));
        assert_eq!(state.refused.len(), 1);
    }

    #[test]
    fn other_failures_are_retried_and_reported_once() {
        let mut nic = Nic::default();
        nic.full_for.insert(2);
        let mut s = EspSteering::new(2);
        let want: BTreeMap<_, _> = [key(0, 1), key(0, 2)].into_iter().map(own).collect();
        let done = s.apply(&want, &mut nic);
        assert_eq!(done.created, 1);
        assert_eq!(done.failed, vec![(key(0, 2), "no space".to_string())]);
        let again = s.apply(&want, &mut nic);
        assert!(again.failed.is_empty(), "said once: {again:?}");
        assert_eq!(s.failed_tries, 2, "but tried each time");
        assert_eq!(s.port_state(0).state(), "steering", "not given up");
        nic.full_for.clear();
        let done = s.apply(&want, &mut nic);
        assert_eq!(done.created, 1, "retried at the next change");
        assert!(nic.queue(0, 2).is_some());
        // A room refusal of a port's first rule is not a refusal either.
        let mut nic = Nic::default();
        nic.full_for.insert(7);
        let mut s = EspSteering::new(2);
        let want: BTreeMap<_, _> = [own(key(0, 7))].into_iter().collect();
        let done = s.apply(&want, &mut nic);
        assert!(
            done.refused.is_empty() && done.failed.len() == 1,
            "{done:?}"
        );
    }

    /// A rule the NIC will not remove is reported, and the port is flushed
    /// at stop with every other port holding rules; nothing is left.
    #[test]
    fn remove_all_flushes_every_port_with_rules() {
        let mut nic = Nic::default();
        let mut s = EspSteering::new(2);
        let want: BTreeMap<_, _> = [key(0, 1), key(1, 2), key(1, 3)]
            .into_iter()
            .map(own)
            .collect();
        s.apply(&want, &mut nic);
        nic.sticky = true;
        let fewer: BTreeMap<_, _> = [own(key(1, 2)), own(key(1, 3))].into_iter().collect();
        let done = s.apply(&fewer, &mut nic);
        assert_eq!(done.not_removed.len(), 1);
        assert_eq!(s.port_state(0).rules, 0);
        let failed = s.remove_all(&mut nic);
        assert!(failed.is_empty());
        assert_eq!(nic.flushed, [0, 1], "port 0 (a rule left) and port 1");
        assert!(nic.rules.is_empty());
        assert_eq!(s.port_state(1).rules, 0);
        // Nothing left to do after.
        assert_eq!(s.apply(&BTreeMap::new(), &mut nic), Applied::default());
    }
}
