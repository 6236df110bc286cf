//! Egress: route, neighbor, Ethernet header, TX queue.

use std::net::IpAddr;

use espgw_control::config::Side;
use espgw_wire::{ethernet, ethertype, MacAddr, PacketBuf};

use crate::ip::parse_ip;
use crate::neighbor::Held;
use crate::pool::BufPool;
use crate::ports::PortIdx;
use crate::reason::DropReason;
use crate::tx::TxQueues;

use super::*;

impl<B: PacketBuf, P: BufPool<B>> Worker<B, P> {
    /// Sends the IP packet `pkt` (no L2 header) towards `dst`.
    pub(super) fn route_out(
        &mut self,
        pkt: B,
        dst: IpAddr,
        egress: Egress,
        in_port: Option<PortIdx>,
        tx: &mut TxQueues<B>,
        now: Now,
    ) {
        let generation = self.neighbors.generation();
        let cached = self
            .hop_cache
            .filter(|c| c.dst == dst && c.generation == generation);
        let (hop, mac) = match cached {
            Some(c) => (c.hop, Some(c.mac)),
            None => {
                let Some(hop) = self.net.routes.lookup(dst) else {
                    return self.drop_pkt(pkt, DropReason::NoRoute, in_port);
                };
                let mac = self.neighbors.lookup(hop.port, hop.addr);
                if let Some(mac) = mac {
                    self.hop_cache = Some(HopCache {
                        dst,
                        hop,
                        mac,
                        generation,
                    });
                }
                (hop, mac)
            }
        };
        let out = &self.net.ports[hop.port];
        if egress == Egress::ProtectedOnly && out.side == Side::Unprotected {
            return self.drop_pkt(pkt, DropReason::PlaintextBlocked, in_port);
        }
        if pkt.len() > out.mtu {
            // Only decrypted or bypassed packets can get here oversize (the
            // peer's path is wider than ours): the sender learns our MTU,
            // through the tunnel when it came through one.
            let (mtu, out_port) = (out.mtu, hop.port);
            let origin = match (egress, in_port) {
                (Egress::ProtectedOnly, _) => Origin::Decrypted,
                (Egress::Bypass, Some(p)) => self.origin_of(p),
                _ => Origin::Unprotected,
            };
            let mut pkt = pkt;
            return match parse_ip(&mut pkt) {
                Ok(m) if m.dont_frag => {
                    let port = in_port.unwrap_or(out_port);
                    let r = DropReason::MtuExceeded;
                    self.icmp_error(port, out_port, pkt, m, r, mtu, origin, tx, now)
                }
                _ => self.drop_pkt(pkt, DropReason::MtuExceeded, in_port),
            };
        }
        if let Some(mac) = mac {
            return self.send_frame(hop.port, mac, pkt, in_port, tx);
        }
        match self.neighbors.hold(hop.port, hop.addr, pkt, now.ns) {
            Held::Queued { request } => {
                self.counters.held = self.neighbors.held() as u64;
                if request {
                    self.solicit(hop.port, hop.addr, tx);
                }
            }
            Held::Full(pkt) => self.drop_pkt(pkt, DropReason::NeighborQueueFull, in_port),
        }
    }

    /// Prepends the Ethernet header to the IP packet `pkt` and queues it.
    /// (Frames already carrying one, like NA answers built from a
    /// stripped packet, come here stripped too.)
    pub(super) fn send_frame(
        &mut self,
        port: PortIdx,
        dst_mac: MacAddr,
        mut pkt: B,
        in_port: Option<PortIdx>,
        tx: &mut TxQueues<B>,
    ) {
        let ethertype = match pkt.data().first().map(|b| b >> 4) {
            Some(4) => ethertype::IPV4,
            Some(6) => ethertype::IPV6,
            _ => return self.drop_pkt(pkt, DropReason::Malformed, in_port),
        };
        if pkt.prepend(ethernet::HEADER_LEN).is_err() {
            return self.drop_pkt(pkt, DropReason::NoRoom, in_port);
        }
        // Written in place: every forwarded packet comes through here.
        let src_mac = self.net.ports[port].mac;
        if let Some(h) = pkt.data_mut().first_chunk_mut::<{ ethernet::HEADER_LEN }>() {
            h[..6].copy_from_slice(&dst_mac);
            h[6..12].copy_from_slice(&src_mac);
            h[12..].copy_from_slice(&ethertype.to_be_bytes());
        }
        tx.push(port, pkt);
    }
}
