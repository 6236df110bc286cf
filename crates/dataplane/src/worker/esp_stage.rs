//! Stages 2 and 3: one ESP engine call per SA group per burst.

use std::net::IpAddr;
use std::sync::Arc;

use espgw_control::tables::{SaIndex, TunnelId};
use espgw_esp::Verdict;
use espgw_wire::{ip_protocol, reply, PacketBuf};

use crate::ip::{decrement_ttl, parse_ip};
use crate::pool::BufPool;
use crate::reason::DropReason;
use crate::tx::TxQueues;

use super::*;

impl<B: PacketBuf, P: BufPool<B>> Worker<B, P> {
    pub(super) fn run_outbound(&mut self, tx: &mut TxQueues<B>, now: Now) {
        // One reference for the whole burst (the snapshot does not change
        // within it); held apart from `self` so the worker can be borrowed
        // mutably while an SA of it works.
        let tables = Arc::clone(&self.tables);
        for t in 0..self.out_stage.len() {
            if self.out_stage[t].pkts.is_empty() {
                continue;
            }
            let mut stage = std::mem::replace(&mut self.out_stage[t], Stage::new(0));
            let id = TunnelId(t as u32);
            // Staged only for a tunnel of this snapshot, and a snapshot
            // does not change within a burst.
            let Some(tunnel) = tables.tunnel(id) else {
                for (pkt, port) in stage.pkts.drain(..).zip(stage.ports.drain(..)) {
                    let port = (port != ORIGINATED).then_some(port);
                    self.drop_pkt(pkt, DropReason::PolicyDiscard, port);
                }
                self.out_stage[t] = stage;
                continue;
            };
            self.verdicts.clear();
            match tables.outbound_sa(id).map(|sa| &**sa) {
                Some(out) => {
                    self.verdicts.resize(stage.pkts.len(), Verdict::default());
                    out.encap_burst(&mut stage.pkts, &mut self.verdicts, now.secs());
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
            let hop = self.net.routes.lookup(tunnel.remote);
            let resolved = hop.and_then(|h| {
                self.neighbors
                    .lookup(h.port, h.addr)
                    .map(|mac| (h.port, mac))
            });
            for (i, (pkt, port)) in stage.pkts.drain(..).zip(stage.ports.drain(..)).enumerate() {
                let port = (port != ORIGINATED).then_some(port);
                match (self.verdicts[i], resolved) {
                    (Verdict::Forward, Some((out, mac)))
                        if pkt.len() <= self.net.ports[out].mtu =>
                    {
                        self.send_frame(out, mac, pkt, port, tx)
                    }
                    (Verdict::Forward, _) => {
                        self.route_out(pkt, tunnel.remote, Egress::Trusted, port, tx, now)
                    }
                    (Verdict::Drop(r), _) => self.drop_pkt(pkt, DropReason::from_esp(r), port),
                }
            }
            self.out_stage[t] = stage;
        }
    }

    pub(super) fn run_inbound(&mut self, tx: &mut TxQueues<B>, now: Now) {
        // One reference for the whole burst (the snapshot does not change
        // within it); held apart from `self` so the worker can be borrowed
        // mutably while an SA of it works.
        let tables = Arc::clone(&self.tables);
        for t in 0..self.in_stage.len() {
            if self.in_stage[t].pkts.is_empty() {
                continue;
            }
            let mut stage = std::mem::replace(&mut self.in_stage[t], Stage::new(0));
            // Staged only for an inbound SA of a tunnel of this snapshot.
            let Some((sa, tunnel)) = tables
                .inbound_sa(SaIndex(t as u32))
                .and_then(|(_, id, sa)| Some((sa, tables.tunnel(id)?)))
            else {
                for (pkt, port) in stage.pkts.drain(..).zip(stage.ports.drain(..)) {
                    self.drop_pkt(pkt, DropReason::UnknownSpi, Some(port));
                }
                self.in_stage[t] = stage;
                continue;
            };
            self.verdicts.clear();
            self.verdicts.resize(stage.pkts.len(), Verdict::default());
            {
                // One lock per SA group per burst; uncontended with one worker.
                let mut sa = sa.lock().unwrap_or_else(|e| e.into_inner());
                sa.decap_burst(&mut stage.pkts, &mut self.verdicts, now.secs());
            }
            // The selector check of the last address pair: a burst of one
            // SA is mostly one or a few host pairs, and the prefix scans
            // per packet showed in the profile (docs/benchmarks.md, "Where
            // the cycles go").
            let mut last_pair: Option<(IpAddr, IpAddr, bool)> = None;
            for (i, (mut pkt, port)) in stage.pkts.drain(..).zip(stage.ports.drain(..)).enumerate()
            {
                if let Verdict::Drop(r) = self.verdicts[i] {
                    self.drop_pkt(pkt, DropReason::from_esp(r), Some(port));
                    continue;
                }
                let m = match parse_ip(&mut pkt) {
                    Ok(m) => m,
                    Err(r) => {
                        self.drop_pkt(pkt, r, Some(port));
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
                    self.counters.tunnel(tunnel.id.0).in_policy_mismatch += 1;
                    self.drop_pkt(pkt, DropReason::PolicyMismatch, Some(port));
                    continue;
                }
                if self.net.is_local(m.dst) {
                    // A ping through the tunnel to one of our protected
                    // addresses: answered, back through the tunnel.
                    let answered = m.proto == ip_protocol::ICMP
                        && reply::icmpv4_echo_reply_in_place(pkt.data_mut()).is_ok()
                        || m.proto == ip_protocol::ICMPV6
                            && reply::icmpv6_echo_reply_in_place(pkt.data_mut()).is_ok();
                    if !answered {
                        self.drop_pkt(pkt, DropReason::LocalUnsupported, Some(port));
                        continue;
                    }
                    self.counters.local += 1;
                    self.counters.generated += 1;
                    self.originate(pkt, Origin::Decrypted, tx, now);
                    continue;
                }
                if m.ttl <= 1 {
                    // Time exceeded from the port facing the destination,
                    // back through the tunnel (traceroute across it).
                    let src_port = self.net.routes.lookup(m.dst).map_or(port, |h| h.port);
                    let (r, origin) = (DropReason::TtlExceeded, Origin::Decrypted);
                    self.icmp_error(port, src_port, pkt, m, r, 0, origin, tx, now);
                    continue;
                }
                // The far side's SYN-ACK (or SYN) is clamped on its way out
                // of the tunnel too: the peer gateway may not clamp.
                self.clamp_mss(&mut pkt, &m, tunnel.mss_clamp);
                decrement_ttl(&mut pkt, m.v6);
                self.route_out(pkt, m.dst, Egress::ProtectedOnly, Some(port), tx, now);
            }
            self.in_stage[t] = stage;
        }
    }
}
