//! Stage 3, [`EspOut`] and [`EspIn`]: one ESP engine call per SA group per
//! burst, once [`Classify`](super::classify::Classify) has staged the
//! burst's packets by SA.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use espgw_control::config::SpreadLate;
use espgw_control::tables::{SaIndex, Tables, TunnelEntry, TunnelId};
use espgw_esp::{UdpChecksum, Verdict};
use espgw_wire::{checksum, ethernet, ip_protocol, ipv6, reply, PacketBuf};

use super::egress::{Egress, FrameHeads};
use super::icmp::{Icmp, IcmpError};
use super::mss::clamp_mss;
use super::spread::{sa_key, Job, Outcome, Spread, LATE_SEND_MAX_NS, MIN_PART};
use super::{Core, EgressPolicy, Origin, Stage, ORIGINATED};
use crate::ip::{decrement_ttl, parse_ip, parse_v4_fast, parse_v6_fast, IpMeta};
use crate::pool::BufPool;
use crate::ports::PortIdx;
use crate::reason::DropReason;
use crate::reorder::Refused;
use crate::tx::TxQueues;

/// The outer IPv6 header of ESP in UDP over IPv6 (no extension headers).
const IPV6_HEADER: usize = ipv6::HEADER_LEN;

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
    /// tunnel id `tunnel`. Forced inline: once per packet (issue 14).
    #[inline(always)]
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
            // ESP in UDP over IPv6 to a port whose NIC computes UDP
            // checksums: the engine only seeds the checksum and the NIC
            // sums the packet (docs/dataplane.md, "TX checksum offload").
            // Decided per group, and the group's code chosen by a constant,
            // so that the other forms run the code they ran before.
            let sa = tables.outbound_sa_for(id, core.worker).map(|sa| &**sa);
            let device_checksum = sa.is_some_and(|out| out.checksums_payload())
                && (core.net.routes.lookup(tunnel.remote))
                    .is_some_and(|h| core.net.ports[h.port].tx_udp_checksum);
            if device_checksum {
                self.seal_and_send::<true, P>(core, icmp, egress, tx, &mut stage, tunnel, sa);
            } else {
                self.seal_and_send::<false, P>(core, icmp, egress, tx, &mut stage, tunnel, sa);
            }
            self.groups[t] = stage;
        }
    }

    /// One tunnel group: sealed by its outbound SA `sa` (none: dropped)
    /// and sent to the tunnel's next hop. `DEVICE_CHECKSUM`: the SA's ESP
    /// in UDP over IPv6 leaves its UDP checksum to that hop's port
    /// (`UdpChecksum::Device`), which the caller checked has the offload.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn seal_and_send<const DEVICE_CHECKSUM: bool, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
        stage: &mut Stage<B>,
        tunnel: &TunnelEntry,
        sa: Option<&espgw_esp::OutboundSa>,
    ) {
        self.verdicts.clear();
        match sa {
            Some(out) => {
                let checksum = if DEVICE_CHECKSUM {
                    UdpChecksum::Device
                } else {
                    UdpChecksum::Compute
                };
                self.verdicts.resize(stage.pkts.len(), Verdict::default());
                let now = core.now.secs();
                out.encap_burst_with(&mut stage.pkts, &mut self.verdicts, now, checksum);
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
        // And one port entry read, one pair of Ethernet headers built.
        let resolved = hop.and_then(|h| {
            let mac = core.neighbors.lookup(h.port, h.addr)?;
            let out = &core.net.ports[h.port];
            Some((h.port, out.mtu, FrameHeads::new(mac, out.mac)))
        });
        for (i, (mut pkt, port)) in stage.pkts.drain(..).zip(stage.ports.drain(..)).enumerate() {
            let port = (port != ORIGINATED).then_some(port);
            match (self.verdicts[i], &resolved) {
                (Verdict::Forward, Some((out, mtu, heads))) if pkt.len() <= *mtu => {
                    Egress::send_with::<DEVICE_CHECKSUM, _, _>(core, *out, heads, pkt, port, tx)
                }
                (Verdict::Forward, _) => {
                    if DEVICE_CHECKSUM {
                        // Too big for the port, or its next hop not
                        // resolved: the general path (an ICMP error, a
                        // drop, a wait for the neighbor) may never meet the
                        // NIC that was to finish it, so it is done here.
                        checksum::complete_offloaded_udp_at(pkt.data_mut(), IPV6_HEADER);
                    }
                    let policy = EgressPolicy::Trusted;
                    egress.route(core, icmp, self, tx, pkt, tunnel.remote, policy, port)
                }
                (Verdict::Drop(r), _) => core.drop_pkt(pkt, DropReason::from_esp(r), port),
            }
        }
    }
}

/// Inbound: ESP staged per inbound SA (by SAD index), decrypted, checked
/// against the tunnel's selectors, forwarded to the protected side. With
/// the decrypt fan-out on ([`Spread`]), an SA's groups are decrypted by
/// every worker and leave through the SA's reorder stage.
pub(super) struct EspIn<B> {
    groups: Vec<Stage<B>>,
    verdicts: Vec<Verdict>,
    burst: usize,
    pub(super) spread: Option<Spread<B>>,
}

/// The inbound selector check of the last address pair, per family: a
/// burst of one SA is mostly one or a few host pairs, and the prefix scans
/// per packet showed in the profile (docs/benchmarks.md, "Where the cycles
/// go"). Used by the owner's path ([`Forward`]) and a fan-out helper's
/// (spread.rs), one per burst or part.
#[derive(Default)]
pub(super) struct SelectorMemo {
    /// IPv4 (the fast path), on integers.
    v4: Option<(u32, u32, bool)>,
    /// IPv6, likewise.
    v6: Option<(u128, u128, bool)>,
}

impl SelectorMemo {
    /// Does the IPv4 pair `src -> dst` lie inside `tunnel`'s selectors?
    #[inline]
    pub(super) fn inside_v4(&mut self, tunnel: &TunnelEntry, src: u32, dst: u32) -> bool {
        match self.v4 {
            Some((s, d, inside)) if s == src && d == dst => inside,
            _ => {
                let inside = tunnel.inbound_matches(
                    IpAddr::from(Ipv4Addr::from(src)),
                    IpAddr::from(Ipv4Addr::from(dst)),
                );
                self.v4 = Some((src, dst, inside));
                inside
            }
        }
    }

    /// The same for the IPv6 pair `src -> dst`.
    #[inline]
    pub(super) fn inside_v6(&mut self, tunnel: &TunnelEntry, src: u128, dst: u128) -> bool {
        match self.v6 {
            Some((s, d, inside)) if s == src && d == dst => inside,
            _ => {
                let inside = tunnel.inbound_matches(
                    IpAddr::from(Ipv6Addr::from(src)),
                    IpAddr::from(Ipv6Addr::from(dst)),
                );
                self.v6 = Some((src, dst, inside));
                inside
            }
        }
    }

    /// The same for a pair of any family.
    #[inline]
    pub(super) fn inside(&mut self, tunnel: &TunnelEntry, src: IpAddr, dst: IpAddr) -> bool {
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => self.inside_v4(tunnel, s.into(), d.into()),
            (IpAddr::V6(s), IpAddr::V6(d)) => self.inside_v6(tunnel, s.into(), d.into()),
            // A mixed pair, which no packet has.
            _ => tunnel.inbound_matches(src, dst),
        }
    }
}

/// The selector check and forwarding of one decrypted packet.
struct Forward<'a> {
    tunnel: &'a TunnelEntry,
    memo: SelectorMemo,
}

impl<'a> Forward<'a> {
    #[inline]
    fn new(tunnel: &'a TunnelEntry) -> Self {
        Forward {
            tunnel,
            memo: SelectorMemo::default(),
        }
    }

    // Inlined into both callers, as the loop body it was before the fan-out
    // needed it twice: it is the whole per-packet path after decryption.
    // IPv4 (what `parse_ip` takes for IPv4: anything but version 6) on its
    // `V4Meta`; an IPv4 packet to us or at its last hop, and IPv6, through
    // `Self::general`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn packet<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        esp_out: &mut EspOut<B>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
        mut pkt: B,
        port: PortIdx,
    ) {
        if pkt.data().first().is_some_and(|b| b >> 4 == 6) {
            return self.v6(core, esp_out, icmp, egress, tx, pkt, port);
        }
        let tunnel = self.tunnel;
        let v = match parse_v4_fast(&mut pkt) {
            Ok(v) => v,
            Err(r) => {
                core.drop_pkt(pkt, r, Some(port));
                return;
            }
        };
        let inside = self.memo.inside_v4(tunnel, v.src, v.dst);
        let ours_or_last = v.ttl <= 1 || core.net.is_local_v4(v.dst);
        let (dst, meta) = (v.dst_addr(), || v.meta());
        Self::parsed(
            core,
            esp_out,
            icmp,
            egress,
            tx,
            pkt,
            port,
            tunnel,
            inside,
            ours_or_last,
            dst,
            false,
            meta,
        );
    }

    /// A decrypted packet's steps after its parse, for every path:
    /// outside the tunnel's selectors (`inside` false) a counted policy
    /// mismatch; for us or at its last hop (`ours_or_last`) to
    /// [`Self::inside`]; else (the fast paths' common case) clamped where
    /// the tunnel clamps, TTL or hop limit (`v6`) lowered and routed to
    /// `dst`. `meta` builds the `IpMeta` only where a step needs one.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn parsed<B: PacketBuf, P: BufPool<B>>(
        core: &mut Core<B, P>,
        esp_out: &mut EspOut<B>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
        mut pkt: B,
        port: PortIdx,
        tunnel: &TunnelEntry,
        inside: bool,
        ours_or_last: bool,
        dst: IpAddr,
        v6: bool,
        meta: impl Fn() -> IpMeta,
    ) {
        if !inside {
            core.counters.tunnel(tunnel.id.0).in_policy_mismatch += 1;
            core.drop_pkt(pkt, DropReason::PolicyMismatch, Some(port));
            return;
        }
        if ours_or_last {
            return Self::inside(core, esp_out, icmp, egress, tx, pkt, port, meta(), tunnel);
        }
        if tunnel.mss_clamp.is_some() {
            clamp_mss(&mut core.counters, &mut pkt, &meta(), tunnel.mss_clamp);
        }
        decrement_ttl(&mut pkt, v6);
        let policy = EgressPolicy::ProtectedOnly;
        egress.route(core, icmp, esp_out, tx, pkt, dst, policy, Some(port));
    }

    /// [`Self::packet`] of an IPv6 packet: TCP or UDP straight after the
    /// fixed header on its [`V6Meta`] (the IPv6 fast path, the same steps
    /// as IPv4's), anything else, or to us, or at its last hop, through
    /// [`Self::inside`] with the `IpMeta` of `parse_v6`.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn v6<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        esp_out: &mut EspOut<B>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
        mut pkt: B,
        port: PortIdx,
    ) {
        let tunnel = self.tunnel;
        if let Some(v) = parse_v6_fast(&mut pkt) {
            let inside = self.memo.inside_v6(tunnel, v.src, v.dst);
            let ours_or_last = v.hop_limit <= 1 || core.net.is_local_v6(v.dst);
            let (dst, meta) = (v.dst_addr(), || v.meta());
            return Self::parsed(
                core,
                esp_out,
                icmp,
                egress,
                tx,
                pkt,
                port,
                tunnel,
                inside,
                ours_or_last,
                dst,
                true,
                meta,
            );
        }
        let m = match parse_ip(&mut pkt) {
            Ok(m) => m,
            Err(r) => {
                core.drop_pkt(pkt, r, Some(port));
                return;
            }
        };
        // The general path: `inside` decides everything after the
        // selectors (to us, last hop, clamp, TTL, route).
        let inside = self.memo.inside(tunnel, m.src, m.dst);
        Self::parsed(
            core,
            esp_out,
            icmp,
            egress,
            tx,
            pkt,
            port,
            tunnel,
            inside,
            true,
            m.dst,
            m.v6,
            || m,
        );
    }

    /// A decrypted packet within the tunnel's selectors: answered if it is
    /// for us, time exceeded at its last hop, else clamped, TTL lowered
    /// and routed.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn inside<B: PacketBuf, P: BufPool<B>>(
        core: &mut Core<B, P>,
        esp_out: &mut EspOut<B>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
        mut pkt: B,
        port: PortIdx,
        m: IpMeta,
        tunnel: &TunnelEntry,
    ) {
        if core.net.is_local(m.dst) {
            // A ping through the tunnel to one of our protected
            // addresses: answered, back through the tunnel.
            let answered = m.proto == ip_protocol::ICMP
                && reply::icmpv4_echo_reply_in_place(pkt.data_mut()).is_ok()
                || m.proto == ip_protocol::ICMPV6
                    && reply::icmpv6_echo_reply_in_place(pkt.data_mut()).is_ok();
            if !answered {
                core.drop_pkt(pkt, DropReason::LocalUnsupported, Some(port));
                return;
            }
            core.counters.local += 1;
            core.counters.generated += 1;
            icmp.originate(core, esp_out, egress, tx, pkt, Origin::Decrypted);
            return;
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
            return;
        }
        // The far side's SYN-ACK (or SYN) is clamped on its way out
        // of the tunnel too: the peer gateway may not clamp.
        clamp_mss(&mut core.counters, &mut pkt, &m, tunnel.mss_clamp);
        decrement_ttl(&mut pkt, m.v6);
        let policy = EgressPolicy::ProtectedOnly;
        egress.route(core, icmp, esp_out, tx, pkt, m.dst, policy, Some(port));
    }
}

impl<B: PacketBuf> EspIn<B> {
    pub(super) fn new(tables: &Tables, burst: usize) -> EspIn<B> {
        EspIn {
            groups: (0..tables.sad.sas().len())
                .map(|_| Stage::new(burst))
                .collect(),
            verdicts: Vec::with_capacity(burst),
            burst,
            spread: None,
        }
    }

    /// One group per SA of `tables` (between bursts: nothing staged).
    pub(super) fn resize(&mut self, tables: &Tables) {
        let burst = self.burst;
        self.groups
            .resize_with(tables.sad.sas().len(), || Stage::new(burst));
    }

    pub(super) fn burst(&self) -> usize {
        self.burst
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
            let slot = SaIndex(t as u32);
            // Staged only for an inbound SA of a tunnel of this snapshot.
            let Some((sa, tunnel)) = tables
                .inbound_sa(slot)
                .and_then(|(_, id, sa)| Some((sa, tables.tunnel(id)?)))
            else {
                for (pkt, port) in stage.pkts.drain(..).zip(stage.ports.drain(..)) {
                    core.drop_pkt(pkt, DropReason::UnknownSpi, Some(port));
                }
                self.groups[t] = stage;
                continue;
            };
            if let Some(spread) = &mut self.spread {
                // A per-CPU SA's groups go whole to the worker of its lane
                // (the handoff, `Spread::lane_worker`), or stay here, below:
                // this worker's own lanes, or when the lane's worker cannot
                // take the group and nothing of the SA is queued there. Not
                // while parts of the SA are still out in the fan-out (it
                // just became per-CPU): those go first, through it. And
                // while groups of it are out at a worker, whatever the
                // snapshot now says of its lane, to that worker.
                let key = sa_key(sa);
                let pending = spread.handed_to(key);
                let outstanding = spread.outstanding(slot, key);
                let lane = (spread.hands_off() && outstanding == 0 && pending.is_none())
                    .then(|| tables.inbound_lane(slot))
                    .flatten();
                // Otherwise the fan-out: a group worth splitting is spread
                // while this worker needs help; and once an SA has tickets
                // out, every group of it goes through its reorder stage, or
                // a small group would overtake them.
                let worth = stage.pkts.len() >= 2 * MIN_PART;
                if pending.is_some() || lane.is_some() {
                    let to = pending.or_else(|| lane.and_then(|l| spread.lane_worker(l)));
                    if let Some(to) = to {
                        if hand_off(spread, core, to, slot, key, tunnel.id, &mut stage) {
                            self.groups[t] = stage;
                            continue;
                        }
                    } else if !spread.behind() {
                        core.counters.spread_unneeded += stage.pkts.len() as u64;
                    }
                    // (A per-CPU SA of this worker's own lane through the
                    // fan-out instead, to take load off this worker, which
                    // also classifies every packet: tried in session 15,
                    // the two mechanisms' back-pressures fought and lost
                    // packets; docs/multicore.md.)
                } else if outstanding != 0 || (worth && spread.wants_help()) {
                    if spread_group(
                        spread, core, esp_out, icmp, egress, tx, slot, key, &mut stage,
                    ) {
                        self.groups[t] = stage;
                        continue;
                    }
                } else if worth && spread.held_back() {
                    // Behind, but the live check has the fan-out off.
                    core.counters.spread_solo += stage.pkts.len() as u64;
                } else if worth {
                    // Keeping up alone: the direct path.
                    core.counters.spread_unneeded += stage.pkts.len() as u64;
                }
            }
            self.verdicts.clear();
            self.verdicts.resize(stage.pkts.len(), Verdict::default());
            // No lock: any number of workers decrypt for one SA at once.
            sa.decap_burst(&mut stage.pkts, &mut self.verdicts, core.now.secs());
            let mut fwd = Forward::new(tunnel);
            for (i, (pkt, port)) in stage.pkts.drain(..).zip(stage.ports.drain(..)).enumerate() {
                if let Verdict::Drop(r) = self.verdicts[i] {
                    core.drop_pkt(pkt, DropReason::from_esp(r), Some(port));
                    continue;
                }
                fwd.packet(core, esp_out, icmp, egress, tx, pkt, port);
            }
            self.groups[t] = stage;
        }
        self.poll_spread(core, esp_out, icmp, egress, tx);
    }

    /// The fan-out's periodic work (every burst and every poll): decrypts
    /// and finishes the jobs other workers handed to this one, completes
    /// the tickets of the jobs that came back, and releases what is in
    /// order. Returns the packets it moved (for the poll loop's idle
    /// detection).
    pub(super) fn poll_spread<P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        esp_out: &mut EspOut<B>,
        icmp: &mut Icmp,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
    ) -> usize {
        let Some(spread) = &mut self.spread else {
            return 0;
        };
        let mut work = 0;
        // Per-CPU SAs' groups handed to this worker: decrypted, forwarded
        // and counted here, the empty box back to its owner at the next
        // poll (what it became sent by then). Bounded per poll, like the
        // fan-out's jobs below.
        spread.return_finished();
        for _ in 0..2 * spread.workers() {
            let Some(mut job) = spread.take_handoff_of(spread.me) else {
                break;
            };
            work += job.pkts.len();
            finish_handoff(core, esp_out, icmp, egress, tx, &mut job);
            spread.finished(job);
        }
        // A bounded number per poll, so that this worker's own RX is not
        // starved by others' work.
        for _ in 0..2 * spread.workers() {
            let Some(mut job) = spread.take_work() else {
                break;
            };
            job.process(&core.net, &mut core.neighbors, &mut spread.hop);
            work += job.pkts.len();
            core.counters.spread_in += job.pkts.len() as u64;
            spread.give_back(job);
        }
        while let Some(job) = spread.take_done() {
            if job.handoff {
                spread.handoff_back(job);
                continue;
            }
            work += job.pkts.len();
            core.counters
                .spread_came_back(core.now.ns.saturating_sub(job.cut_ns));
            complete(spread, core, esp_out, icmp, egress, tx, job);
        }
        if core.counters.spreading == 0 {
            return work;
        }
        if spread.overdue(core.now.ns) {
            // A part is late: take back what waits, not yet started, in
            // the other workers' inboxes (theirs or another owner's), so
            // that only the part in a slow worker's hands can run late.
            for from in 0..spread.workers() {
                for _ in 0..2 * spread.workers() {
                    let Some(mut job) = spread.steal(from) else {
                        break;
                    };
                    job.process(&core.net, &mut core.neighbors, &mut spread.hop);
                    let n = job.pkts.len();
                    work += n;
                    if job.owner == spread.me {
                        // Decrypted here after all: not by another worker.
                        core.counters.spread_out -= n as u64;
                        complete(spread, core, esp_out, icmp, egress, tx, job);
                    } else {
                        core.counters.spread_in += n as u64;
                        spread.give_back(job);
                    }
                }
            }
        }
        for p in 0..spread.stages.len() {
            work += release(spread, core, esp_out, icmp, egress, tx, p);
        }
        work
    }
}

/// Hands SA group `stage` (of a per-CPU SA whose worker is `to`) whole to
/// that worker, which decrypts, forwards and counts it
/// ([`finish_handoff`]). True when it went (or, see below, was dropped);
/// false, the group untouched, when this worker is to decrypt it itself:
/// the handoff's budget was spent (`Spread::handoff_job`) or
/// `to`'s handoff ring was full, and nothing of SA `sa` ([`sa_key`]) is
/// queued there (counted as `sa_handoff_kept`). With something of
/// the SA queued there, decrypting the group here would let it overtake:
/// it is dropped (`sa_handoff_full`), as a full handoff queue drops in VPP.
fn hand_off<B: PacketBuf, P: BufPool<B>>(
    spread: &mut Spread<B>,
    core: &mut Core<B, P>,
    to: usize,
    slot: SaIndex,
    sa: usize,
    tunnel: TunnelId,
    stage: &mut Stage<B>,
) -> bool {
    let n = stage.pkts.len() as u64;
    if let Some(mut j) = spread.handoff_job(stage.pkts.len()) {
        j.slot = slot;
        j.tunnel = tunnel;
        j.tables = Some(Arc::clone(&core.tables));
        j.now = core.now.secs();
        j.cut_ns = core.now.ns;
        // The vectors change places (both keep a burst's capacity): no
        // copy, no allocation.
        std::mem::swap(&mut j.pkts, &mut stage.pkts);
        std::mem::swap(&mut j.ports, &mut stage.ports);
        match spread.hand_off(to, sa, j) {
            Ok(()) => {
                core.counters.sa_handoff_out += n;
                return true;
            }
            Err(mut j) => {
                std::mem::swap(&mut j.pkts, &mut stage.pkts);
                std::mem::swap(&mut j.ports, &mut stage.ports);
                spread.recycle(j);
            }
        }
    }
    if spread.handed_to(sa).is_none() {
        core.counters.sa_handoff_kept += n;
        return false;
    }
    for (pkt, port) in stage.pkts.drain(..).zip(stage.ports.drain(..)) {
        core.drop_pkt(pkt, DropReason::SaHandoffFull, Some(port));
    }
    true
}

/// Decrypts and forwards a per-CPU SA's group another worker handed to
/// this one ([`hand_off`]), as that worker's direct path would, with the
/// SA and tunnel of the snapshot it was classified with; this worker
/// counts every packet from here (`sa_handoff_in`, then sent or dropped).
/// Leaves the box empty, for its owner.
fn finish_handoff<B: PacketBuf, P: BufPool<B>>(
    core: &mut Core<B, P>,
    esp_out: &mut EspOut<B>,
    icmp: &mut Icmp,
    egress: &mut Egress,
    tx: &mut TxQueues<B>,
    job: &mut Job<B>,
) {
    core.counters.sa_handoff_in += job.pkts.len() as u64;
    // Kept in the box until its owner recycles it: the SA stays allocated
    // while the owner's bookkeeping (by the SA's address) names it.
    let tables = job.tables.clone();
    let found = tables.as_deref().and_then(|t| {
        let (_, _, sa) = t.inbound_sa(job.slot)?;
        Some((sa, t.tunnel(job.tunnel)?))
    });
    let Some((sa, tunnel)) = found else {
        // Classified with this snapshot, so both exist; dropped, not trusted.
        for (pkt, port) in job.pkts.drain(..).zip(job.ports.drain(..)) {
            core.drop_pkt(pkt, DropReason::UnknownSpi, Some(port));
        }
        return;
    };
    job.verdicts.clear();
    job.verdicts.resize(job.pkts.len(), Verdict::default());
    sa.decap_burst(&mut job.pkts, &mut job.verdicts, job.now);
    let mut fwd = Forward::new(tunnel);
    for (i, (pkt, port)) in job.pkts.drain(..).zip(job.ports.drain(..)).enumerate() {
        if let Verdict::Drop(r) = job.verdicts[i] {
            core.drop_pkt(pkt, DropReason::from_esp(r), Some(port));
            continue;
        }
        fwd.packet(core, esp_out, icmp, egress, tx, pkt, port);
    }
}

/// Cuts SA group `stage` into parts, one per other worker with room in
/// its inbox and not busy with its own traffic (at least [`MIN_PART`]
/// packets each, at most the rings' `max_parts` parts), or, when none is
/// free, one part this worker does itself; tickets in arrival order. A part kept here (or refused by a
/// full inbox) is decrypted and finished at once and waits for its turn
/// like the others. False (the group untouched, for the caller to decrypt
/// directly) when no other worker is free and nothing of the SA is
/// outstanding (counted as `spread_kept`), or when no job box is free even
/// after giving up this SA's outstanding parts (the SA has nothing
/// outstanding by then): either way nothing is overtaken.
#[allow(clippy::too_many_arguments)]
fn spread_group<B: PacketBuf, P: BufPool<B>>(
    spread: &mut Spread<B>,
    core: &mut Core<B, P>,
    esp_out: &mut EspOut<B>,
    icmp: &mut Icmp,
    egress: &mut Egress,
    tx: &mut TxQueues<B>,
    slot: SaIndex,
    sa: usize,
    stage: &mut Stage<B>,
) -> bool {
    let n = stage.pkts.len();
    let secs = core.now.secs();
    let now = core.now.ns;
    let Some((_, tunnel, _)) = core.tables.inbound_sa(slot) else {
        return false;
    };
    let mut targets = std::mem::take(&mut spread.targets);
    targets.clear();
    // A worker that keeps up alone (`"auto"`) hands out nothing more; a
    // group that comes while its earlier parts are still out becomes its
    // own ticketed part below, so it does not overtake them, and the SA's
    // outstanding parts drain.
    if spread.wants_help() {
        let max_helpers = (n / MIN_PART)
            .clamp(1, spread.workers() - 1)
            .min(spread.max_parts());
        spread.helpers_with_room(max_helpers, &mut targets);
    }
    if targets.is_empty() && spread.outstanding(slot, sa) == 0 {
        // Every other worker is busy with its own traffic or has a full
        // inbox, and nothing of this SA is out to be overtaken: the
        // direct path, without a ticket or a job box.
        spread.targets = targets;
        core.counters.spread_kept += n as u64;
        return false;
    }
    // `None`: this worker's own part. Kept only when no other worker has
    // room: when this worker is the bottleneck (it also classifies and
    // transmits every packet), it decrypts only what the others cannot.
    let mut dests: Vec<Option<usize>> = std::mem::take(&mut spread.dests);
    dests.clear();
    // (An even split, this worker keeping a part of every group, was
    // measured slower: docs/multicore.md.)
    if targets.is_empty() {
        dests.push(None);
    }
    dests.extend(targets.iter().copied().map(Some));
    spread.targets = targets;
    let mut staged = std::mem::take(&mut spread.staged);
    staged.clear();
    for &dest in &dests {
        let j = match spread.job() {
            Some(j) => Some(j),
            None => make_room(spread, core, esp_out, icmp, egress, tx, slot, sa),
        };
        let Some(mut j) = j else { break };
        j.slot = slot;
        j.tunnel = tunnel;
        j.tables = Some(Arc::clone(&core.tables));
        j.now = secs;
        j.cut_ns = core.now.ns;
        staged.push((dest, j));
    }
    spread.dests = dests;
    if staged.is_empty() {
        spread.staged = staged;
        return false;
    }
    // The SA's stage: made now if it has none (its position stays the
    // same until the next snapshot switch).
    let p = spread.stage_for(slot, sa);
    let stage_id = spread.stage_id(p);
    let part_len = n.div_ceil(staged.len());
    for (i, (pkt, port)) in stage.pkts.drain(..).zip(stage.ports.drain(..)).enumerate() {
        let j = &mut staged[i / part_len].1;
        j.pkts.push(pkt);
        j.ports.push(port);
    }
    core.counters.spreading += n as u64;
    for (dest, mut j) in staged.drain(..) {
        if j.pkts.is_empty() {
            spread.recycle(j);
            continue;
        }
        let Some(ticket) = spread.stages[p].reorder.ticket(now) else {
            // Not with a stage that holds every box (its capacity is the
            // owner's boxes); counted, not trusted.
            core.counters.spreading -= j.pkts.len() as u64;
            for (pkt, port) in j.pkts.drain(..).zip(j.ports.drain(..)) {
                core.drop_pkt(pkt, DropReason::ReorderFull, Some(port));
            }
            spread.recycle(j);
            continue;
        };
        j.ticket = ticket;
        j.sa = sa;
        j.stage = stage_id;
        let handed = j.pkts.len() as u64;
        if let Some(to) = dest {
            match spread.send(to, j) {
                Ok(()) => {
                    core.counters.spread_out += handed;
                    continue;
                }
                Err(back) => j = back,
            }
        }
        j.process(&core.net, &mut core.neighbors, &mut spread.hop);
        complete(spread, core, esp_out, icmp, egress, tx, j);
    }
    spread.staged = staged;
    release(spread, core, esp_out, icmp, egress, tx, p);
    true
}

/// A job box when every box is out or waiting: releases what is in order,
/// then gives up this SA's oldest part still out (as its bound would) and
/// releases what waited behind it, until a box is free or nothing of the
/// SA is outstanding.
#[allow(clippy::too_many_arguments)]
fn make_room<B: PacketBuf, P: BufPool<B>>(
    spread: &mut Spread<B>,
    core: &mut Core<B, P>,
    esp_out: &mut EspOut<B>,
    icmp: &mut Icmp,
    egress: &mut Egress,
    tx: &mut TxQueues<B>,
    slot: SaIndex,
    sa: usize,
) -> Option<Box<Job<B>>> {
    loop {
        let p = spread.stage_of(slot, sa)?;
        release(spread, core, esp_out, icmp, egress, tx, p);
        if let Some(j) = spread.job() {
            return Some(j);
        }
        if !spread.stages[p].reorder.give_up_oldest() {
            return None;
        }
    }
}

/// Completes the ticket of a finished job. A job whose ticket was given up
/// meanwhile (the bounded wait) is late: with [`SpreadLate::Drop`] its
/// packets are dropped (`reorder_late`, counted here by the worker that
/// received them), with [`SpreadLate::Send`] they are delivered now, out of
/// arrival order (`reorder_late_sent`), unless the part is older than
/// [`LATE_SEND_MAX_NS`]. A result the stage calls bogus (never issued or
/// completed twice: a bug) is dropped the same way. Either way its box is
/// recycled.
#[allow(clippy::too_many_arguments)]
fn complete<B: PacketBuf, P: BufPool<B>>(
    spread: &mut Spread<B>,
    core: &mut Core<B, P>,
    esp_out: &mut EspOut<B>,
    icmp: &mut Icmp,
    egress: &mut Egress,
    tx: &mut TxQueues<B>,
    job: Box<Job<B>>,
) {
    let ticket = job.ticket;
    // A part whose stage is gone (dropped at a switch once nothing of it
    // was outstanding: this part had been given up) is late.
    let done = match spread.stage_of_job(&job) {
        Some(p) => spread.stages[p].reorder.complete(ticket, Some(job)),
        None => Err((Refused::Late, Some(job))),
    };
    let Err((refused, Some(mut job))) = done else {
        return;
    };
    let send = refused == Refused::Late
        && spread.late() == SpreadLate::Send
        && core.now.ns.saturating_sub(job.cut_ns) <= LATE_SEND_MAX_NS;
    if send {
        core.counters.reorder_late_sent += job.pkts.len() as u64;
        deliver(core, esp_out, icmp, egress, tx, &mut job);
    } else {
        core.counters.spreading -= job.pkts.len() as u64;
        for (pkt, port) in job.pkts.drain(..).zip(job.ports.drain(..)) {
            core.drop_pkt(pkt, DropReason::ReorderLate, Some(port));
        }
    }
    spread.recycle(job);
}

/// Releases the jobs of the SA stage at position `p` that are in ticket
/// order; returns the packets moved.
#[allow(clippy::too_many_arguments)]
fn release<B: PacketBuf, P: BufPool<B>>(
    spread: &mut Spread<B>,
    core: &mut Core<B, P>,
    esp_out: &mut EspOut<B>,
    icmp: &mut Icmp,
    egress: &mut Egress,
    tx: &mut TxQueues<B>,
    p: usize,
) -> usize {
    let now = core.now.ns;
    let mut moved = 0;
    loop {
        let Some(reorder) = spread.stages.get_mut(p).map(|s| &mut s.reorder) else {
            return moved;
        };
        if reorder.outstanding() == 0 {
            return moved;
        }
        let Some(mut job) = reorder.pop(now) else {
            return moved;
        };
        moved += job.pkts.len();
        deliver(core, esp_out, icmp, egress, tx, &mut job);
        spread.recycle(job);
    }
}

/// Sends a finished job's packets on, in order: ready frames onto this
/// worker's TX queues, drops counted with the finishing worker's reason,
/// unfinished packets through the full [`Forward`] path with the tunnel as
/// this worker's current snapshot has it. Ready frames decided under a
/// snapshot this worker has left are checked again first ([`recheck`]).
fn deliver<B: PacketBuf, P: BufPool<B>>(
    core: &mut Core<B, P>,
    esp_out: &mut EspOut<B>,
    icmp: &mut Icmp,
    egress: &mut Egress,
    tx: &mut TxQueues<B>,
    job: &mut Job<B>,
) {
    core.counters.spreading -= job.pkts.len() as u64;
    let same = job
        .tables
        .as_ref()
        .is_some_and(|t| Arc::ptr_eq(t, &core.tables));
    let id = job.tunnel;
    // Looked up only when a packet needs it (the tunnel may be gone).
    let tables = Arc::clone(&core.tables);
    let mut fwd: Option<Option<Forward<'_>>> = None;
    for ((pkt, port), o) in job
        .pkts
        .drain(..)
        .zip(job.ports.drain(..))
        .zip(job.outcomes.iter())
    {
        match *o {
            Outcome::Tx(out) if same => tx.push(out, pkt),
            Outcome::Tx(out) => match recheck(tables.tunnel(id), pkt) {
                Ok(pkt) => tx.push(out, pkt),
                Err((pkt, r)) => {
                    if r == DropReason::PolicyMismatch {
                        core.counters.tunnel(id.0).in_policy_mismatch += 1;
                    }
                    core.drop_pkt(pkt, r, Some(port));
                }
            },
            Outcome::Drop(r) => {
                if r == DropReason::PolicyMismatch {
                    core.counters.tunnel(id.0).in_policy_mismatch += 1;
                }
                core.drop_pkt(pkt, r, Some(port));
            }
            Outcome::Unfinished => {
                match fwd.get_or_insert_with(|| tables.tunnel(id).map(Forward::new)) {
                    Some(f) => f.packet(core, esp_out, icmp, egress, tx, pkt, port),
                    // The tunnel left the tables while its packets were out.
                    None => core.drop_pkt(pkt, DropReason::UnknownSpi, Some(port)),
                }
            }
        }
    }
}

/// A ready frame (Ethernet header on) finished under an older snapshot:
/// its tunnel as the current snapshot has it must still exist and its
/// selectors still cover the inner addresses (the check the owner's own
/// path would make now); the frame is handed back unchanged if so.
fn recheck<B: PacketBuf>(tunnel: Option<&TunnelEntry>, mut frame: B) -> Result<B, (B, DropReason)> {
    let Some(tunnel) = tunnel else {
        return Err((frame, DropReason::UnknownSpi));
    };
    if frame.adj(ethernet::HEADER_LEN).is_err() {
        return Err((frame, DropReason::Malformed));
    }
    let inside = parse_ip(&mut frame).is_ok_and(|m| tunnel.inbound_matches(m.src, m.dst));
    // The header's bytes are still in front: prepending only moves back.
    if frame.prepend(ethernet::HEADER_LEN).is_err() {
        return Err((frame, DropReason::NoRoom));
    }
    if inside {
        Ok(frame)
    } else {
        Err((frame, DropReason::PolicyMismatch))
    }
}
