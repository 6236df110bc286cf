//! Stage 3, [`EspOut`] and [`EspIn`]: one ESP engine call per SA group per
//! burst, once [`Classify`](super::classify::Classify) has staged the
//! burst's packets by SA.

use std::net::IpAddr;
use std::sync::Arc;

use espgw_control::tables::{SaIndex, Tables, TunnelId};
use espgw_esp::Verdict;
use espgw_wire::{ip_protocol, reply, PacketBuf};

use super::egress::Egress;
use super::icmp::{Icmp, IcmpError};
use super::mss::clamp_mss;
use super::{Core, EgressPolicy, Origin, Stage, ORIGINATED};
use crate::ip::{decrement_ttl, parse_ip};
use crate::pool::BufPool;
use crate::ports::PortIdx;
use crate::reason::DropReason;
use crate::tx::TxQueues;

/// Outbound: packets staged per tunnel (by tunnel id), encrypted with the
/// tunnel's outbound SA, sent to the peer.
pub(super) struct EspOut<B> {
    groups: Vec<Stage<B>>,
    verdicts: Vec<Verdict>,
    burst: usize,
}

impl<B: PacketBuf> EspOut<B> {
    pub(super) fn new(tables: &Tables, burst: usize) -> EspOut<B> {
        EspOut {
            groups: (0..tables.tunnel_ids())
                .map(|_| Stage::new(burst))
                .collect(),
            verdicts: Vec::with_capacity(burst),
            burst,
        }
    }

    /// One group per tunnel id of `tables` (between bursts: nothing staged).
    pub(super) fn resize(&mut self, tables: &Tables) {
        let burst = self.burst;
        self.groups
            .resize_with(tables.tunnel_ids(), || Stage::new(burst));
    }

    /// Stages `pkt` (an IP packet from `port`, or [`ORIGINATED`]) for
    /// tunnel id `tunnel`.
    pub(super) fn push(&mut self, tunnel: usize, pkt: B, port: PortIdx) {
        self.groups[tunnel].push(pkt, port);
    }

    pub(super) fn has_staged(&self) -> bool {
        self.groups.iter().any(|s| !s.pkts.is_empty())
    }

    /// Encrypts and sends every staged group.
    pub(super) fn run<P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
    ) {
        // One reference for the whole burst (the snapshot does not change
        // within it); held apart from `core` so that it can be borrowed
        // mutably while an SA of it works.
        let tables = Arc::clone(&core.tables);
        for t in 0..self.groups.len() {
            if self.groups[t].pkts.is_empty() {
                continue;
            }
            let mut stage = std::mem::replace(&mut self.groups[t], Stage::new(0));
            let id = TunnelId(t as u32);
            // Staged only for a tunnel of this snapshot, and a snapshot
            // does not change within a burst.
            let Some(tunnel) = tables.tunnel(id) else {
                for (pkt, port) in stage.pkts.drain(..).zip(stage.ports.drain(..)) {
                    let port = (port != ORIGINATED).then_some(port);
                    core.drop_pkt(pkt, DropReason::PolicyDiscard, port);
                }
                self.groups[t] = stage;
                continue;
            };
            self.verdicts.clear();
            match tables.outbound_sa(id).map(|sa| &**sa) {
                Some(out) => {
                    self.verdicts.resize(stage.pkts.len(), Verdict::default());
                    out.encap_burst(&mut stage.pkts, &mut self.verdicts, core.now.secs());
                }
                // Staged only with an SA, and a snapshot does not change
                // within a burst; dropped rather than trusted.
                None => self.verdicts.resize(
                    stage.pkts.len(),
                    Verdict::Drop(espgw_esp::DropReason::SaExpired),
                ),
            }
            // Every packet of the group goes to the same peer: one route
            // and neighbor lookup for all of them.
            let hop = core.net.routes.lookup(tunnel.remote);
            let resolved = hop.and_then(|h| {
                core.neighbors
                    .lookup(h.port, h.addr)
                    .map(|mac| (h.port, mac))
            });
            for (i, (pkt, port)) in stage.pkts.drain(..).zip(stage.ports.drain(..)).enumerate() {
                let port = (port != ORIGINATED).then_some(port);
                match (self.verdicts[i], resolved) {
                    (Verdict::Forward, Some((out, mac)))
                        if pkt.len() <= core.net.ports[out].mtu =>
                    {
                        Egress::send_frame(core, out, mac, pkt, port, tx)
                    }
                    (Verdict::Forward, _) => {
                        let policy = EgressPolicy::Trusted;
                        egress.route(core, icmp, self, tx, pkt, tunnel.remote, policy, port)
                    }
                    (Verdict::Drop(r), _) => core.drop_pkt(pkt, DropReason::from_esp(r), port),
                }
            }
            self.groups[t] = stage;
        }
    }
}

/// Inbound: ESP staged per inbound SA (by SAD index), decrypted, checked
/// against the tunnel's selectors, forwarded to the protected side.
pub(super) struct EspIn<B> {
    groups: Vec<Stage<B>>,
    verdicts: Vec<Verdict>,
    burst: usize,
}

impl<B: PacketBuf> EspIn<B> {
    pub(super) fn new(tables: &Tables, burst: usize) -> EspIn<B> {
        EspIn {
            groups: (0..tables.sad.sas().len())
                .map(|_| Stage::new(burst))
                .collect(),
            verdicts: Vec::with_capacity(burst),
            burst,
        }
    }

    /// One group per SA of `tables` (between bursts: nothing staged).
    pub(super) fn resize(&mut self, tables: &Tables) {
        let burst = self.burst;
        self.groups
            .resize_with(tables.sad.sas().len(), || Stage::new(burst));
    }

    /// Stages ESP packet `pkt` from `port` for the inbound SA at `slot`.
    pub(super) fn push(&mut self, slot: SaIndex, pkt: B, port: PortIdx) {
        self.groups[slot.0 as usize].push(pkt, port);
    }

    /// Decrypts every staged group and sends what passes on; answers to
    /// pings through a tunnel are staged in `esp_out`.
    pub(super) fn run<P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        esp_out: &mut EspOut<B>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
    ) {
        // One reference for the whole burst (the snapshot does not change
        // within it); held apart from `core` so that it can be borrowed
        // mutably while an SA of it works.
        let tables = Arc::clone(&core.tables);
        for t in 0..self.groups.len() {
            if self.groups[t].pkts.is_empty() {
                continue;
            }
            let mut stage = std::mem::replace(&mut self.groups[t], Stage::new(0));
            // Staged only for an inbound SA of a tunnel of this snapshot.
            let Some((sa, tunnel)) = tables
                .inbound_sa(SaIndex(t as u32))
                .and_then(|(_, id, sa)| Some((sa, tables.tunnel(id)?)))
            else {
                for (pkt, port) in stage.pkts.drain(..).zip(stage.ports.drain(..)) {
                    core.drop_pkt(pkt, DropReason::UnknownSpi, Some(port));
                }
                self.groups[t] = stage;
                continue;
            };
            self.verdicts.clear();
            self.verdicts.resize(stage.pkts.len(), Verdict::default());
            // No lock: any number of workers decrypt for one SA at once.
            sa.decap_burst(&mut stage.pkts, &mut self.verdicts, core.now.secs());
            // The selector check of the last address pair: a burst of one
            // SA is mostly one or a few host pairs, and the prefix scans
            // per packet showed in the profile (docs/benchmarks.md, "Where
            // the cycles go").
            let mut last_pair: Option<(IpAddr, IpAddr, bool)> = None;
            for (i, (mut pkt, port)) in stage.pkts.drain(..).zip(stage.ports.drain(..)).enumerate()
            {
                if let Verdict::Drop(r) = self.verdicts[i] {
                    core.drop_pkt(pkt, DropReason::from_esp(r), Some(port));
                    continue;
                }
                let m = match parse_ip(&mut pkt) {
                    Ok(m) => m,
                    Err(r) => {
                        core.drop_pkt(pkt, r, Some(port));
                        continue;
                    }
                };
                let inside = match last_pair {
                    Some((src, dst, inside)) if src == m.src && dst == m.dst => inside,
                    _ => {
                        let inside = tunnel.inbound_matches(m.src, m.dst);
                        last_pair = Some((m.src, m.dst, inside));
                        inside
                    }
                };
                if !inside {
                    core.counters.tunnel(tunnel.id.0).in_policy_mismatch += 1;
                    core.drop_pkt(pkt, DropReason::PolicyMismatch, Some(port));
                    continue;
                }
                if core.net.is_local(m.dst) {
                    // A ping through the tunnel to one of our protected
                    // addresses: answered, back through the tunnel.
                    let answered = m.proto == ip_protocol::ICMP
                        && reply::icmpv4_echo_reply_in_place(pkt.data_mut()).is_ok()
                        || m.proto == ip_protocol::ICMPV6
                            && reply::icmpv6_echo_reply_in_place(pkt.data_mut()).is_ok();
                    if !answered {
                        core.drop_pkt(pkt, DropReason::LocalUnsupported, Some(port));
                        continue;
                    }
                    core.counters.local += 1;
                    core.counters.generated += 1;
                    icmp.originate(core, esp_out, egress, tx, pkt, Origin::Decrypted);
                    continue;
                }
                if m.ttl <= 1 {
                    // Time exceeded from the port facing the destination,
                    // back through the tunnel (traceroute across it).
                    let e = IcmpError {
                        port,
                        src_port: core.net.routes.lookup(m.dst).map_or(port, |h| h.port),
                        reason: DropReason::TtlExceeded,
                        mtu: 0,
                        origin: Origin::Decrypted,
                    };
                    icmp.error(core, esp_out, egress, tx, pkt, m, e);
                    continue;
                }
                // The far side's SYN-ACK (or SYN) is clamped on its way out
                // of the tunnel too: the peer gateway may not clamp.
                clamp_mss(&mut core.counters, &mut pkt, &m, tunnel.mss_clamp);
                decrement_ttl(&mut pkt, m.v6);
                let policy = EgressPolicy::ProtectedOnly;
                egress.route(core, icmp, esp_out, tx, pkt, m.dst, policy, Some(port));
            }
            self.groups[t] = stage;
        }
    }
}
