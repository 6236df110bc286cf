//! Stage 4, [`Icmp`]: ICMP errors (time exceeded, fragmentation needed,
//! packet too big) and sending what the gateway itself originates.

use espgw_control::config::Side;
use espgw_control::tables::Action;
use espgw_wire::{icmpv6, reply, PacketBuf};

use super::egress::Egress;
use super::esp::EspOut;
use super::ORIGINATED;
use super::{overwrite, Core, EgressPolicy, Origin, ICMP_ERRORS_PER_SEC, ICMP_ERROR_BURST};
use crate::ip::{parse_ip, IpMeta};
use crate::pool::BufPool;
use crate::ports::PortIdx;
use crate::ratelimit::TokenBucket;
use crate::reason::DropReason;
use crate::tx::TxQueues;

/// Why the gateway answers a packet with an ICMP error, and from where.
#[derive(Debug, Clone, Copy)]
pub(super) struct IcmpError {
    /// The port the packet came in on (its drop is counted there).
    pub port: PortIdx,
    /// The port whose address is the error's source: the port facing the
    /// packet's sender, so that an error about decrypted traffic goes
    /// back through the tunnel from an address inside its selectors.
    pub src_port: PortIdx,
    /// `TtlExceeded`, or `MtuExceeded` with `mtu`.
    pub reason: DropReason,
    pub mtu: usize,
    /// Where the packet came from (the error quotes it).
    pub origin: Origin,
}

/// The ICMP stage: its rate limit.
pub(super) struct Icmp {
    limit: TokenBucket,
}

impl Icmp {
    pub(super) fn new() -> Icmp {
        Icmp {
            limit: TokenBucket::new(ICMP_ERRORS_PER_SEC, ICMP_ERROR_BURST),
        }
    }

    /// Time exceeded for a packet received on `port`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn time_exceeded<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        esp_out: &mut EspOut<B>,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
        port: PortIdx,
        pkt: B,
        m: IpMeta,
    ) {
        let e = IcmpError {
            port,
            src_port: port,
            reason: DropReason::TtlExceeded,
            mtu: 0,
            origin: core.origin_of(port),
        };
        self.error(core, esp_out, egress, tx, pkt, m, e);
    }

    /// Fragmentation needed / packet too big (`mtu`) for a packet received
    /// on `port`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn too_big<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        esp_out: &mut EspOut<B>,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
        port: PortIdx,
        pkt: B,
        m: IpMeta,
        mtu: usize,
    ) {
        let e = IcmpError {
            port,
            src_port: port,
            reason: DropReason::MtuExceeded,
            mtu,
            origin: core.origin_of(port),
        };
        self.error(core, esp_out, egress, tx, pkt, m, e);
    }

    /// Drops `pkt` (IP header `m`) for `e.reason` and, where RFC 1812 /
    /// 4443 allow, sends the matching ICMP error back to its source, built
    /// in the same buffer.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn error<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        esp_out: &mut EspOut<B>,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
        mut pkt: B,
        m: IpMeta,
        e: IcmpError,
    ) {
        let IcmpError {
            port,
            src_port,
            reason,
            mtu,
            origin,
        } = e;
        core.counters.drop(reason, Some(port));
        if !self.limit.take(core.now.ns) {
            core.counters.icmp_rate_limited += 1;
            return;
        }
        let p = &core.net.ports[src_port];
        let scratch = &mut core.scratch[..];
        let built = match (m.v6, reason) {
            (false, DropReason::TtlExceeded) => p
                .first_v4()
                .map(|src| reply::emit_icmpv4_time_exceeded(pkt.data(), src, scratch)),
            (false, _) => p.first_v4().map(|src| {
                let mtu = mtu.min(usize::from(u16::MAX)) as u16;
                reply::emit_icmpv4_frag_needed(pkt.data(), mtu, src, scratch)
            }),
            (true, DropReason::TtlExceeded) => p
                .first_v6()
                .map(|src| reply::emit_icmpv6_time_exceeded(pkt.data(), src, scratch)),
            (true, _) => p.first_v6().map(|src| {
                reply::emit_icmpv6_packet_too_big(
                    pkt.data(),
                    mtu.max(icmpv6::MIN_MTU) as u32,
                    src,
                    scratch,
                )
            }),
        };
        let Some(Ok(n)) = built else {
            return;
        };
        if overwrite(&mut pkt, &core.scratch[..n]).is_err() {
            return;
        }
        core.counters.generated += 1;
        self.originate(core, esp_out, egress, tx, pkt, origin);
    }

    /// Sends an IP packet the gateway made (echo reply, ICMP error)
    /// through the SPD like any other packet (RFC 4301 5.1): into a tunnel
    /// when one protects its addresses (so the far side's hosts can ping
    /// and traceroute us through the tunnel). Otherwise it quotes or echoes
    /// a packet that came from `origin`, and may leave only as that packet
    /// could have:
    ///
    /// - from an unprotected port in the clear: routed in the clear;
    /// - from a protected port: in the clear out of an unprotected port
    ///   only where a bypass policy allows it;
    /// - out of a tunnel: never in the clear out of an unprotected port
    ///   (as the decrypted traffic itself).
    ///
    /// What may not leave is dropped as `local_not_protected` (typically a
    /// tunnel whose `local_ts` does not cover the gateway's protected
    /// address, the error's source; `espgw check` warns about it).
    pub(super) fn originate<B: PacketBuf, P: BufPool<B>>(
        &mut self,
        core: &mut Core<B, P>,
        esp_out: &mut EspOut<B>,
        egress: &mut Egress,
        tx: &mut TxQueues<B>,
        mut pkt: B,
        origin: Origin,
    ) {
        let Ok(m) = parse_ip(&mut pkt) else {
            return core.drop_pkt(pkt, DropReason::Malformed, None);
        };
        let tables = &core.tables;
        let action = match tables.spd.lookup(&m.outbound_flow()) {
            // A tunnel the snapshot lacks discards, as a rule would.
            Action::Protect(id) if tables.tunnel(id).is_none() => Action::Discard,
            a => a,
        };
        let policy = match (action, origin) {
            (Action::Protect(id), _) => {
                let Some(tunnel) = tables.tunnel(id) else {
                    return core.drop_pkt(pkt, DropReason::PolicyDiscard, None);
                };
                let len = pkt.len();
                let Some(out) = tables.outbound_sa(id) else {
                    return core.drop_pkt(pkt, DropReason::SaExpired, None);
                };
                if len + out.overhead(len) > core.net.ports[tunnel.port].mtu {
                    return core.drop_pkt(pkt, DropReason::MtuExceeded, None);
                }
                return esp_out.push(id.0 as usize, pkt, ORIGINATED);
            }
            (_, Origin::Unprotected) | (Action::Bypass, Origin::Protected) => EgressPolicy::Trusted,
            (Action::Bypass | Action::Discard, Origin::Protected | Origin::Decrypted) => {
                EgressPolicy::ProtectedOnly
            }
        };
        if policy == EgressPolicy::ProtectedOnly {
            // Its own reason rather than the route's plaintext_blocked: the
            // fix is in the config (local_ts), not a routing problem.
            let hop = core.net.routes.lookup(m.dst);
            if hop.is_some_and(|h| core.net.ports[h.port].side == Side::Unprotected) {
                return core.drop_pkt(pkt, DropReason::LocalNotProtected, None);
            }
        }
        egress.route(core, self, esp_out, tx, pkt, m.dst, policy, None);
    }
}
