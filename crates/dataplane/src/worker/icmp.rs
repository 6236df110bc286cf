//! ICMP errors (time exceeded, fragmentation needed, packet too big) and
//! sending what the gateway itself originates.

use espgw_control::config::Side;
use espgw_wire::{icmpv6, reply, PacketBuf};

use crate::ip::{parse_ip, IpMeta};
use crate::pool::BufPool;
use crate::ports::PortIdx;
use crate::reason::DropReason;
use crate::tx::TxQueues;
use espgw_control::tables::Action;

use super::*;

impl<B: PacketBuf, P: BufPool<B>> Worker<B, P> {
    pub(super) fn time_exceeded(
        &mut self,
        port: PortIdx,
        pkt: B,
        m: IpMeta,
        tx: &mut TxQueues<B>,
        now: Now,
    ) {
        let origin = self.origin_of(port);
        self.icmp_error(
            port,
            port,
            pkt,
            m,
            DropReason::TtlExceeded,
            0,
            origin,
            tx,
            now,
        );
    }

    pub(super) fn too_big(
        &mut self,
        port: PortIdx,
        pkt: B,
        m: IpMeta,
        mtu: usize,
        tx: &mut TxQueues<B>,
        now: Now,
    ) {
        let origin = self.origin_of(port);
        self.icmp_error(
            port,
            port,
            pkt,
            m,
            DropReason::MtuExceeded,
            mtu,
            origin,
            tx,
            now,
        );
    }

    /// Drops `pkt` for `reason` and, where RFC 1812 / 4443 allow, sends
    /// the matching ICMP error back to its source, built in the same buffer.
    /// The error's source address is that of `src_port`: the port facing
    /// the packet's sender, so that an error about decrypted traffic goes
    /// back through the tunnel from an address inside its selectors.
    /// `origin`: where `pkt` came from (the error quotes it).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn icmp_error(
        &mut self,
        port: PortIdx,
        src_port: PortIdx,
        mut pkt: B,
        m: IpMeta,
        reason: DropReason,
        mtu: usize,
        origin: Origin,
        tx: &mut TxQueues<B>,
        now: Now,
    ) {
        self.counters.drop(reason, Some(port));
        if !self.icmp_limit.take(now.ns) {
            self.counters.icmp_rate_limited += 1;
            return;
        }
        let p = &self.net.ports[src_port];
        let scratch = &mut self.scratch[..];
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
        if overwrite(&mut pkt, &self.scratch[..n]).is_err() {
            return;
        }
        self.counters.generated += 1;
        self.originate(pkt, origin, tx, now);
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
    pub(super) fn originate(&mut self, mut pkt: B, origin: Origin, tx: &mut TxQueues<B>, now: Now) {
        let Ok(m) = parse_ip(&mut pkt) else {
            return self.drop_pkt(pkt, DropReason::Malformed, None);
        };
        let action = match self.tables.spd.lookup(&m.outbound_flow()) {
            // A tunnel the snapshot lacks discards, as a rule would.
            Action::Protect(id) if self.tables.tunnel(id).is_none() => Action::Discard,
            a => a,
        };
        let egress = match (action, origin) {
            (Action::Protect(id), _) => {
                let Some(tunnel) = self.tables.tunnel(id) else {
                    return self.drop_pkt(pkt, DropReason::PolicyDiscard, None);
                };
                let len = pkt.len();
                let Some(out) = self.tables.outbound_sa(id) else {
                    return self.drop_pkt(pkt, DropReason::SaExpired, None);
                };
                if len + out.overhead(len) > self.net.ports[tunnel.port].mtu {
                    return self.drop_pkt(pkt, DropReason::MtuExceeded, None);
                }
                return self.out_stage[id.0 as usize].push(pkt, ORIGINATED);
            }
            (_, Origin::Unprotected) | (Action::Bypass, Origin::Protected) => Egress::Trusted,
            (Action::Bypass | Action::Discard, Origin::Protected | Origin::Decrypted) => {
                Egress::ProtectedOnly
            }
        };
        if egress == Egress::ProtectedOnly {
            // Its own reason rather than route_out's plaintext_blocked: the
            // fix is in the config (local_ts), not a routing problem.
            let hop = self.net.routes.lookup(m.dst);
            if hop.is_some_and(|h| self.net.ports[h.port].side == Side::Unprotected) {
                return self.drop_pkt(pkt, DropReason::LocalNotProtected, None);
            }
        }
        self.route_out(pkt, m.dst, egress, None, tx, now);
    }
}
