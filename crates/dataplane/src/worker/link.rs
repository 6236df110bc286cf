//! Stage 2, [`Link`]: ARP and IPv6 neighbor discovery: answering for our
//! addresses, learning neighbors, asking for unresolved next hops.

use std::net::{IpAddr, Ipv4Addr};

use espgw_wire::{
    arp, ethernet, ethertype, icmpv6, reply, ArpPacket, ArpRepr, EthernetFrame, EthernetRepr,
    Icmpv6Packet, Icmpv6Repr, Ipv6Packet, MacAddr, PacketBuf,
};

use super::egress::Egress;
use super::{overwrite, Core};
use crate::ip::IpMeta;
use crate::pool::BufPool;
use crate::ports::PortIdx;
use crate::reason::DropReason;
use crate::tx::TxQueues;

/// All-nodes multicast MAC (ff02::1), for answers to DAD probes.
const ALL_NODES_MAC: MacAddr = [0x33, 0x33, 0, 0, 0, 1];

/// The link stage. It keeps no state of its own: the neighbor cache is
/// the worker's ([`Core`]), since egress reads it too.
pub(super) struct Link;

impl Link {
    /// An ARP packet (with its Ethernet header) received on `port`.
    pub(super) fn arp_input<B: PacketBuf, P: BufPool<B>>(
        core: &mut Core<B, P>,
        port: PortIdx,
        mut pkt: B,
        tx: &mut TxQueues<B>,
    ) {
        let parsed = EthernetFrame::new_checked(pkt.data()).ok().and_then(|f| {
            ArpPacket::new_checked(f.payload())
                .ok()
                .map(|a| ArpRepr::parse(&a))
        });
        let a = match parsed {
            Some(Ok(a)) => a,
            Some(Err(_)) => return core.drop_pkt(pkt, DropReason::ArpIgnored, Some(port)),
            None => return core.drop_pkt(pkt, DropReason::Malformed, Some(port)),
        };
        let p = &core.net.ports[port];
        let (our_mac, for_us) = (p.mac, p.owns(a.target_ip.into()));
        let sender: IpAddr = a.sender_ip.into();
        // RFC 826: update a known sender, add one that talks to us. Only
        // senders on our subnets: anything else is not a next hop of ours.
        let valid_sender =
            !a.sender_ip.is_unspecified() && p.on_link_v4(a.sender_ip) && a.sender_mac[0] & 1 == 0;
        if valid_sender && (for_us || core.neighbors.knows(port, sender)) {
            Self::learned(core, port, sender, a.sender_mac, tx);
        }
        if !for_us {
            return core.drop_pkt(pkt, DropReason::ArpIgnored, Some(port));
        }
        match a.operation {
            arp::operation::REQUEST => {
                let Ok(reply_len) = reply::arp_reply_in_place(pkt.data_mut(), a.target_ip, our_mac)
                else {
                    return core.drop_pkt(pkt, DropReason::ArpIgnored, Some(port));
                };
                let excess = pkt.len() - reply_len;
                if excess > 0 && pkt.trim(excess).is_err() {
                    return core.drop_pkt(pkt, DropReason::ArpIgnored, Some(port));
                }
                core.counters.local += 1;
                core.counters.generated += 1;
                tx.push(port, pkt);
            }
            _ => {
                // A reply to us: learned above.
                core.counters.local += 1;
                drop(pkt);
            }
        }
    }

    /// An ICMPv6 neighbor solicitation or advertisement (IP header `m`)
    /// received on `port` from `eth_src`.
    pub(super) fn nd_input<B: PacketBuf, P: BufPool<B>>(
        core: &mut Core<B, P>,
        port: PortIdx,
        mut pkt: B,
        m: IpMeta,
        eth_src: MacAddr,
        tx: &mut TxQueues<B>,
    ) {
        let (IpAddr::V6(src), IpAddr::V6(dst)) = (m.src, m.dst) else {
            return core.drop_pkt(pkt, DropReason::NdIgnored, Some(port));
        };
        let repr = Ipv6Packet::new_checked(pkt.data())
            .ok()
            .filter(|ip| ip.hop_limit() == 255)
            .and_then(|ip| {
                let icmp = Icmpv6Packet::new_checked(ip.payload()).ok()?;
                match Icmpv6Repr::parse(&icmp, src, dst).ok()? {
                    Icmpv6Repr::NeighborSolicit {
                        target_addr,
                        source_lladdr,
                    } => Some((true, target_addr, source_lladdr)),
                    Icmpv6Repr::NeighborAdvert {
                        target_addr,
                        target_lladdr,
                        ..
                    } => Some((false, target_addr, target_lladdr)),
                    _ => None,
                }
            });
        let Some((solicit, target, lladdr)) = repr else {
            return core.drop_pkt(pkt, DropReason::NdIgnored, Some(port));
        };
        let p = &core.net.ports[port];
        let our_mac = p.mac;
        let for_us = p.owns(target.into());
        if !solicit {
            // An advertisement: learn it if we asked or know it.
            let mac = lladdr.unwrap_or(eth_src);
            if core.neighbors.knows(port, target.into()) || for_us {
                Self::learned(core, port, target.into(), mac, tx);
                core.counters.local += 1;
                return drop(pkt);
            }
            return core.drop_pkt(pkt, DropReason::NdIgnored, Some(port));
        }
        if !for_us {
            return core.drop_pkt(pkt, DropReason::NdIgnored, Some(port));
        }
        let dad = src.is_unspecified();
        if let (false, Some(mac)) = (dad, lladdr) {
            Self::learned(core, port, src.into(), mac, tx);
        }
        let n = match reply::neighbor_advert_reply(pkt.data(), target, our_mac, &mut core.scratch) {
            Ok(n) => n,
            Err(_) => return core.drop_pkt(pkt, DropReason::NdIgnored, Some(port)),
        };
        if overwrite(&mut pkt, &core.scratch[..n]).is_err() {
            return core.drop_pkt(pkt, DropReason::NoRoom, Some(port));
        }
        core.counters.local += 1;
        core.counters.generated += 1;
        let dst_mac = if dad {
            ALL_NODES_MAC
        } else {
            lladdr.unwrap_or(eth_src)
        };
        Egress::send_frame(core, port, dst_mac, pkt, None, tx);
    }

    /// Records a neighbor and sends what waited for it.
    fn learned<B: PacketBuf, P: BufPool<B>>(
        core: &mut Core<B, P>,
        port: PortIdx,
        ip: IpAddr,
        mac: MacAddr,
        tx: &mut TxQueues<B>,
    ) {
        let released = core.neighbors.learn(port, ip, mac);
        core.counters.held = core.neighbors.held() as u64;
        for pkt in released {
            Egress::send_frame(core, port, mac, pkt, None, tx);
        }
    }

    /// Sends an ARP request (IPv4) or neighbor solicitation (IPv6) for `ip` on `port`.
    pub(super) fn solicit<B: PacketBuf, P: BufPool<B>>(
        core: &mut Core<B, P>,
        port: PortIdx,
        ip: IpAddr,
        tx: &mut TxQueues<B>,
    ) {
        let Some(mut buf) = core.pool.alloc() else {
            core.counters.alloc_failures += 1;
            return;
        };
        let p = &core.net.ports[port];
        let built = match ip {
            IpAddr::V4(target) => {
                let src = p.first_v4().unwrap_or(Ipv4Addr::UNSPECIFIED);
                let len = ethernet::HEADER_LEN + arp::PACKET_LEN;
                buf.append(len.max(60)).ok().map(|_| {
                    let d = buf.data_mut();
                    d.fill(0);
                    let eth = EthernetRepr {
                        src_addr: p.mac,
                        dst_addr: ethernet::BROADCAST_MAC,
                        vlan_tci: None,
                        ethertype: ethertype::ARP,
                    };
                    let h = eth.emit(d).unwrap_or(0);
                    ArpRepr::request(p.mac, src, target)
                        .emit(&mut d[h..])
                        .is_ok()
                })
            }
            IpAddr::V6(target) => p.first_v6().and_then(|src| {
                let n = reply::emit_neighbor_solicit(src, target, p.mac, &mut core.scratch).ok()?;
                buf.append(ethernet::HEADER_LEN + n).ok()?;
                let eth = EthernetRepr {
                    src_addr: p.mac,
                    dst_addr: icmpv6::multicast_mac(icmpv6::solicited_node_multicast(target)),
                    vlan_tci: None,
                    ethertype: ethertype::IPV6,
                };
                let d = buf.data_mut();
                let h = eth.emit(d).ok()?;
                d[h..].copy_from_slice(&core.scratch[..n]);
                Some(true)
            }),
        };
        if built == Some(true) {
            core.counters.generated += 1;
            tx.push(port, buf);
        } else {
            core.counters.alloc_failures += 1;
        }
    }
}
