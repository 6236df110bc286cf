//! ARP and IPv6 neighbor discovery: answering for our addresses, learning
//! neighbors, asking for unresolved next hops.

use std::net::{IpAddr, Ipv4Addr};

use espgw_wire::{
    arp, ethernet, ethertype, icmpv6, reply, ArpPacket, ArpRepr, EthernetFrame, EthernetRepr,
    Icmpv6Packet, Icmpv6Repr, Ipv6Packet, MacAddr, PacketBuf,
};

use crate::ip::IpMeta;
use crate::pool::BufPool;
use crate::ports::PortIdx;
use crate::reason::DropReason;
use crate::tx::TxQueues;

use super::*;

impl<B: PacketBuf, P: BufPool<B>> Worker<B, P> {
    pub(super) fn arp_input(&mut self, port: PortIdx, mut pkt: B, tx: &mut TxQueues<B>) {
        let parsed = EthernetFrame::new_checked(pkt.data()).ok().and_then(|f| {
            ArpPacket::new_checked(f.payload())
                .ok()
                .map(|a| ArpRepr::parse(&a))
        });
        let a = match parsed {
            Some(Ok(a)) => a,
            Some(Err(_)) => return self.drop_pkt(pkt, DropReason::ArpIgnored, Some(port)),
            None => return self.drop_pkt(pkt, DropReason::Malformed, Some(port)),
        };
        let p = &self.net.ports[port];
        let (our_mac, for_us) = (p.mac, p.owns(a.target_ip.into()));
        let sender: IpAddr = a.sender_ip.into();
        // RFC 826: update a known sender, add one that talks to us. Only
        // senders on our subnets: anything else is not a next hop of ours.
        let valid_sender =
            !a.sender_ip.is_unspecified() && p.on_link_v4(a.sender_ip) && a.sender_mac[0] & 1 == 0;
        if valid_sender && (for_us || self.neighbors.knows(port, sender)) {
            self.learned(port, sender, a.sender_mac, tx);
        }
        if !for_us {
            return self.drop_pkt(pkt, DropReason::ArpIgnored, Some(port));
        }
        match a.operation {
            arp::operation::REQUEST => {
                let Ok(reply_len) = reply::arp_reply_in_place(pkt.data_mut(), a.target_ip, our_mac)
                else {
                    return self.drop_pkt(pkt, DropReason::ArpIgnored, Some(port));
                };
                let excess = pkt.len() - reply_len;
                if excess > 0 && pkt.trim(excess).is_err() {
                    return self.drop_pkt(pkt, DropReason::ArpIgnored, Some(port));
                }
                self.counters.local += 1;
                self.counters.generated += 1;
                tx.push(port, pkt);
            }
            _ => {
                // A reply to us: learned above.
                self.counters.local += 1;
                drop(pkt);
            }
        }
    }

    pub(super) fn nd_input(
        &mut self,
        port: PortIdx,
        mut pkt: B,
        m: IpMeta,
        eth_src: MacAddr,
        tx: &mut TxQueues<B>,
    ) {
        let (IpAddr::V6(src), IpAddr::V6(dst)) = (m.src, m.dst) else {
            return self.drop_pkt(pkt, DropReason::NdIgnored, Some(port));
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
            return self.drop_pkt(pkt, DropReason::NdIgnored, Some(port));
        };
        let p = &self.net.ports[port];
        let our_mac = p.mac;
        let for_us = p.owns(target.into());
        if !solicit {
            // An advertisement: learn it if we asked or know it.
            let mac = lladdr.unwrap_or(eth_src);
            if self.neighbors.knows(port, target.into()) || for_us {
                self.learned(port, target.into(), mac, tx);
                self.counters.local += 1;
                return drop(pkt);
            }
            return self.drop_pkt(pkt, DropReason::NdIgnored, Some(port));
        }
        if !for_us {
            return self.drop_pkt(pkt, DropReason::NdIgnored, Some(port));
        }
        let dad = src.is_unspecified();
        if let (false, Some(mac)) = (dad, lladdr) {
            self.learned(port, src.into(), mac, tx);
        }
        let n = match reply::neighbor_advert_reply(pkt.data(), target, our_mac, &mut self.scratch) {
            Ok(n) => n,
            Err(_) => return self.drop_pkt(pkt, DropReason::NdIgnored, Some(port)),
        };
        if overwrite(&mut pkt, &self.scratch[..n]).is_err() {
            return self.drop_pkt(pkt, DropReason::NoRoom, Some(port));
        }
        self.counters.local += 1;
        self.counters.generated += 1;
        let dst_mac = if dad {
            ALL_NODES_MAC
        } else {
            lladdr.unwrap_or(eth_src)
        };
        self.send_frame(port, dst_mac, pkt, None, tx);
    }

    /// Records a neighbor and sends what waited for it.
    pub(super) fn learned(
        &mut self,
        port: PortIdx,
        ip: IpAddr,
        mac: MacAddr,
        tx: &mut TxQueues<B>,
    ) {
        let released = self.neighbors.learn(port, ip, mac);
        self.counters.held = self.neighbors.held() as u64;
        for pkt in released {
            self.send_frame(port, mac, pkt, None, tx);
        }
    }

    /// Sends an ARP request (IPv4) or neighbor solicitation (IPv6) for `ip` on `port`.
    pub(super) fn solicit(&mut self, port: PortIdx, ip: IpAddr, tx: &mut TxQueues<B>) {
        let Some(mut buf) = self.pool.alloc() else {
            self.counters.alloc_failures += 1;
            return;
        };
        let p = &self.net.ports[port];
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
                let n = reply::emit_neighbor_solicit(src, target, p.mac, &mut self.scratch).ok()?;
                buf.append(ethernet::HEADER_LEN + n).ok()?;
                let eth = EthernetRepr {
                    src_addr: p.mac,
                    dst_addr: icmpv6::multicast_mac(icmpv6::solicited_node_multicast(target)),
                    vlan_tci: None,
                    ethertype: ethertype::IPV6,
                };
                let d = buf.data_mut();
                let h = eth.emit(d).ok()?;
                d[h..].copy_from_slice(&self.scratch[..n]);
                Some(true)
            }),
        };
        if built == Some(true) {
            self.counters.generated += 1;
            tx.push(port, buf);
        } else {
            self.counters.alloc_failures += 1;
        }
    }
}
