#!/usr/bin/env python3
"""Known-answer vectors for espgw-wire's tests, built by scapy (an independent
implementation). Run: python3 crates/wire/tools/gen_vectors.py
Each test in src/ quotes the hex printed here with the name of the vector."""
from scapy.all import *
from scapy.layers.inet6 import *
from scapy.layers.ipsec import ESP

M1 = "02:00:00:00:00:01"
M2 = "02:00:00:00:00:02"

def show(name, pkt):
    b = bytes(pkt)
    print(f"{name} ({len(b)} bytes): {b.hex()}")

# Ethernet + IPv4 + ICMP echo request, IHL=5
show("eth_ipv4_icmp_echo", Ether(dst=M2, src=M1)/IP(src="192.0.2.1", dst="192.0.2.2", id=0x1234, ttl=64, flags="DF")/ICMP(type=8, id=0x4242, seq=7)/b"espgw-ping")
# Ethernet + 802.1Q + IPv4 UDP
show("eth_vlan_ipv4_udp", Ether(dst=M2, src=M1)/Dot1Q(vlan=100, prio=3)/IP(src="10.0.0.1", dst="10.0.0.2", ttl=17)/UDP(sport=1234, dport=5678)/b"hello")
# IPv4 with options (record route, 3 slots) -> IHL > 5, and MF + frag offset
show("ipv4_options_udp", IP(src="198.51.100.1", dst="203.0.113.9", id=0xbeef, ttl=5, flags="MF", frag=100, options=[IPOption_RR(routers=["0.0.0.0"]*3)])/UDP(sport=53, dport=40000)/b"abcdefgh")
# ARP request and reply
show("arp_request", ARP(op=1, hwsrc=M1, psrc="192.0.2.1", hwdst="00:00:00:00:00:00", pdst="192.0.2.2"))
show("arp_reply", ARP(op=2, hwsrc=M2, psrc="192.0.2.2", hwdst=M1, pdst="192.0.2.1"))
# IPv6 UDP
show("ipv6_udp", IPv6(src="2001:db8::1", dst="2001:db8::2", hlim=64, fl=0x12345, tc=0xb8)/UDP(sport=4500, dport=4500)/b"\x00\x00\x00\x00ike")
# IPv6 with ext chain: HBH(8) -> DestOpt(16) -> Routing(type0 1 addr, 24) -> Frag(8, offset 0) -> AH(payload len per 4-byte units) -> ESP
show("ipv6_ext_chain_esp", IPv6(src="2001:db8::1", dst="2001:db8::2")/IPv6ExtHdrHopByHop()/IPv6ExtHdrDestOpt(options=[PadN(optdata=b"\x00"*10)])/IPv6ExtHdrRouting(addresses=["2001:db8::99"])/IPv6ExtHdrFragment(offset=0, m=1, id=7)/AH(nh=50, payloadlen=4, spi=0x100, seq=1, icv=b"\x11"*12)/ESP(spi=0xdeadbeef, seq=9, data=b"\x99"*16))
# IPv6 non-first fragment
show("ipv6_frag_nonfirst", IPv6(src="2001:db8::1", dst="2001:db8::2")/IPv6ExtHdrFragment(offset=10, m=0, id=7, nh=17)/Raw(b"\x55"*16))
# ICMPv6 echo request
show("ipv6_icmpv6_echo", IPv6(src="fe80::1", dst="fe80::2", hlim=64)/ICMPv6EchoRequest(id=0x77, seq=3, data=b"ping6"))
# ICMPv6 NS with source LL addr, and NA with target LL addr
show("ipv6_ns", IPv6(src="fe80::1", dst="ff02::1:ff00:2", hlim=255)/ICMPv6ND_NS(tgt="fe80::2")/ICMPv6NDOptSrcLLAddr(lladdr=M1))
show("ipv6_na", IPv6(src="fe80::2", dst="fe80::1", hlim=255)/ICMPv6ND_NA(tgt="fe80::2", R=0, S=1, O=1)/ICMPv6NDOptDstLLAddr(lladdr=M2))
# ICMPv6 packet too big and time exceeded quoting an ipv6 udp packet
inner6 = IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=1, dport=2)/(b"x"*20)
show("ipv6_icmpv6_ptb", IPv6(src="2001:db8::fe", dst="2001:db8::1", hlim=64)/ICMPv6PacketTooBig(mtu=1400)/bytes(inner6))
show("ipv6_icmpv6_time_exceeded", IPv6(src="2001:db8::fe", dst="2001:db8::1", hlim=64)/ICMPv6TimeExceeded(code=0)/bytes(inner6))
# ICMPv4 frag needed (RFC 1191 next-hop MTU) and time exceeded quoting an ipv4 udp packet
inner4 = IP(src="192.0.2.1", dst="198.51.100.7", id=1, flags="DF")/UDP(sport=1111, dport=2222)/(b"y"*30)
show("ipv4_icmp_frag_needed", IP(src="192.0.2.254", dst="192.0.2.1", ttl=64, id=0)/ICMP(type=3, code=4, nexthopmtu=1400)/bytes(inner4)[:28])
show("ipv4_icmp_time_exceeded", IP(src="192.0.2.254", dst="192.0.2.1", ttl=64, id=0)/ICMP(type=11, code=0)/bytes(inner4)[:28])
show("inner4", inner4)
show("inner6", inner6)
# ESP in IPv4 and UDP-encapsulated ESP (RFC 3948)
show("ipv4_esp", IP(src="192.0.2.1", dst="192.0.2.2", proto=50)/ESP(spi=0x01020304, seq=0x0a0b0c0d, data=b"\xab"*24))
show("ipv4_udp_esp", IP(src="192.0.2.1", dst="192.0.2.2")/UDP(sport=4500, dport=4500)/ESP(spi=0x01020304, seq=1, data=b"\xcd"*24))
show("ipv4_udp_keepalive", IP(src="192.0.2.1", dst="192.0.2.2")/UDP(sport=4500, dport=4500)/b"\xff")
# checksum of odd-length data
d = bytes(range(1, 38))
print("checksum(range(1,38)) =", hex(checksum(d)))
d = bytes((i * 7 + 3) & 0xff for i in range(1500))
print("checksum(1500 bytes i*7+3) =", hex(checksum(d)))
# Expected outputs of the reply builders (src/reply.rs)
show("ipv4_echo_reply", IP(src="192.0.2.2", dst="192.0.2.1", id=0x1234, ttl=64, flags="DF")/ICMP(type=0, id=0x4242, seq=7)/b"espgw-ping")
show("ipv6_echo_reply", IPv6(src="fe80::2", dst="fe80::1", hlim=64)/ICMPv6EchoReply(id=0x77, seq=3, data=b"ping6"))
show("ipv4_frag_needed_full_quote", IP(src="192.0.2.254", dst="192.0.2.1", ttl=64, id=0)/ICMP(type=3, code=4, nexthopmtu=1400)/bytes(inner4))
show("ipv6_dad_ns", IPv6(src="::", dst="ff02::1:ff00:2", hlim=255)/ICMPv6ND_NS(tgt="fe80::2"))
show("ipv6_dad_na", IPv6(src="fe80::2", dst="ff02::1", hlim=255)/ICMPv6ND_NA(tgt="fe80::2", R=0, S=0, O=1)/ICMPv6NDOptDstLLAddr(lladdr=M2))
