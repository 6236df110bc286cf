#!/usr/bin/env python3
"""Traffic for tests/e2e/pcap.sh, made and checked with scapy: an
implementation of ESP independent of espgw's.

  pcap_traffic.py gen DIR          writes DIR/prot_in.pcap, DIR/unprot_in.pcap
  pcap_traffic.py check DIR STATS  checks DIR/*_out.pcap and the stats JSON

The gateway under test is gateway A of the demo (same SAs as
gateway.toml) with pcap ports; "host A" and "gateway B" are static
neighbors. Every input frame has one expected fate, and the check demands
exactly those counters, exactly those output frames, and ESP that scapy
decrypts back to the packets that went in.
"""
import json
import sys

from scapy.all import (ARP, ICMP, IP, UDP, Ether, Raw, rdpcap, wrpcap)
from scapy.layers.inet6 import (ICMPv6DestUnreach, ICMPv6ND_NA, ICMPv6ND_NS,
                                ICMPv6NDOptSrcLLAddr, ICMPv6PacketTooBig, IPv6)
from scapy.layers.ipsec import ESP, SecurityAssociation

GW_PROT = "02:00:00:00:01:01"
GW_UNPROT = "02:00:00:00:01:02"
HOST_A = "02:00:00:00:0a:0a"
PEER = "02:00:00:00:0b:02"
# gateway.toml's SAs: A -> B (out) and B -> A (in); GCM key + 4-byte salt.
KEY_OUT = bytes.fromhex("bef3215147135cd554e9156cae70f5a899331a52")
KEY_IN = bytes.fromhex("9b890a06962125b8925af8d8f76eac664799f983")


def sa_out():
    return SecurityAssociation(ESP, spi=0xA001, crypt_algo="AES-GCM", crypt_key=KEY_OUT,
                               tunnel_header=IP(src="192.0.2.1", dst="192.0.2.2"))


def sa_in():
    return SecurityAssociation(ESP, spi=0xB001, crypt_algo="AES-GCM", crypt_key=KEY_IN,
                               tunnel_header=IP(src="192.0.2.2", dst="192.0.2.1"))


def udp4(src, dst, size, ttl=64, df=True, sport=40000):
    ip = IP(src=src, dst=dst, ttl=ttl, flags="DF" if df else 0, id=7)
    pkt = ip / UDP(sport=sport, dport=5201) / Raw(bytes(i % 251 for i in range(size - 28)))
    return IP(bytes(pkt))


def udp6(src, dst, size, hlim=64):
    pkt = IPv6(src=src, dst=dst, hlim=hlim) / UDP(sport=40000, dport=5201) / Raw(b"6" * (size - 48))
    return IPv6(bytes(pkt))


def bad_checksum():
    raw = bytearray(bytes(udp4("10.1.0.10", "10.2.0.10", 100)))
    raw[10] ^= 0xFF
    return bytes(raw)


def to_gw(l3, mac=GW_PROT, src=HOST_A):
    return Ether(dst=mac, src=src) / l3


# The protected side's inner packets that must come out as ESP, in order.
def tunnel_inner():
    v4 = [udp4("10.1.0.10", "10.2.0.10", s, sport=40000 + s) for s in (64, 100, 500, 1000, 1446)]
    v6 = [udp6("fd00:1::10", "fd00:2::10", s) for s in (80, 1200)]
    return v4 + v6


# Too big for the tunnel and without DF: espgw fragments it before ESP.
NO_DF = udp4("10.1.0.10", "10.2.0.10", 1447, df=False)


def inbound_inner():
    return [udp4("10.2.0.10", "10.1.0.10", s, sport=50000 + s) for s in (64, 300, 1200)]


def gen(d):
    prot = [
        Ether(dst="ff:ff:ff:ff:ff:ff", src=HOST_A) / ARP(op=1, hwsrc=HOST_A, psrc="10.1.0.10", pdst="10.1.0.1"),
        to_gw(IP(src="10.1.0.10", dst="10.1.0.1") / ICMP(id=0x4242, seq=1) / Raw(b"espgw-ping")),
    ]
    prot += [to_gw(p) for p in tunnel_inner()]
    prot += [
        to_gw(udp4("10.1.0.10", "10.2.0.10", 1447)),              # DF, too big: frag needed 1446
        to_gw(NO_DF),                                             # no DF: 2 fragments, then ESP
        to_gw(udp4("10.1.0.10", "10.2.0.10", 100, ttl=1)),        # time exceeded
        to_gw(udp4("10.1.0.10", "10.9.9.9", 100)),                # no policy
        to_gw(udp6("fd00:1::10", "fd00:2::10", 1447)),            # packet too big
        to_gw(IPv6(src="fd00:1::10", dst="ff02::1:ff00:1", hlim=255)
              / ICMPv6ND_NS(tgt="fd00:1::1") / ICMPv6NDOptSrcLLAddr(lladdr=HOST_A),
              mac="33:33:ff:00:00:01"),
        Raw(b"\x01" * 10),                                        # runt: malformed
        Ether(dst=GW_PROT, src=HOST_A, type=0x88B5) / Raw(b"x" * 50),
        Ether(dst=GW_PROT, src=HOST_A, type=0x0800) / Raw(bad_checksum()),
    ]
    sa = sa_in()
    esp = [sa.encrypt(p) for p in inbound_inner()]                 # seq 1..3
    tampered = bytearray(bytes(sa.encrypt(inbound_inner()[0])))    # seq 4
    tampered[-20] ^= 1
    unknown = bytearray(bytes(esp[0]))
    unknown[20:24] = (0xDEAD).to_bytes(4, "big")
    outside = sa.encrypt(udp4("10.7.0.1", "10.1.0.10", 100))       # seq 5: outside the selectors
    v6 = sa.encrypt(udp6("fd00:2::10", "fd00:1::10", 120))          # seq 6: inner IPv6
    unprot = [to_gw(p, GW_UNPROT, PEER) for p in esp]
    unprot += [
        to_gw(esp[0], GW_UNPROT, PEER),                            # replay
        to_gw(IP(bytes(tampered)), GW_UNPROT, PEER),
        to_gw(IP(bytes(unknown)), GW_UNPROT, PEER),
        to_gw(outside, GW_UNPROT, PEER),
        to_gw(v6, GW_UNPROT, PEER),
        to_gw(IP(src="192.0.2.2", dst="192.0.2.1") / ICMP(id=9, seq=1) / Raw(b"peer-ping"), GW_UNPROT, PEER),
        to_gw(udp4("10.2.0.10", "10.1.0.10", 100), GW_UNPROT, PEER),  # plaintext: never forwarded
    ]
    wrpcap(f"{d}/prot_in.pcap", prot, linktype=1)
    wrpcap(f"{d}/unprot_in.pcap", unprot, linktype=1)
    print(f"generated {len(prot)} protected-side and {len(unprot)} unprotected-side frames")


EXPECTED_DROPS = {
    "mtu_exceeded": 2,
    "ttl_exceeded": 1,
    "no_policy": 1,
    "malformed": 1,
    "unsupported_ethertype": 1,
    "bad_checksum": 1,
    "replayed": 1,
    "icv_mismatch": 1,
    "unknown_spi": 1,
    "policy_mismatch": 1,
    "unprotected_plaintext": 1,
}


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def expected_inner(want):
    """`want` as it leaves a gateway: TTL / hop limit one lower."""
    want = want.copy()
    if isinstance(want, IPv6):
        want[IPv6].hlim -= 1
    else:
        want[IP].ttl -= 1
        del want[IP].chksum
    return bytes(want.__class__(bytes(want)))


def match_all(got, wants, what):
    """Every packet of `got` is one of `wants` (TTL-1), each used once.
    Order is not checked: in pipeline mode flows take different workers."""
    left = [expected_inner(w) for w in wants]
    for g in got:
        b = bytes(g)
        if b not in left:
            fail(f"{what}: unexpected {g.summary()}")
        left.remove(b)
    if left:
        fail(f"{what}: {len(left)} expected packets missing")


def check(d, stats_path):
    s = json.load(open(stats_path))
    n_in = len(rdpcap(f"{d}/prot_in.pcap")) + len(rdpcap(f"{d}/unprot_in.pcap"))
    t = s["totals"]
    if t["rx"] != n_in:
        fail(f"gateway received {t['rx']} frames, the pcaps hold {n_in}")
    if not t["balanced"] or t["held"] != 0:
        fail(f"counters do not balance: {t}")
    drops = {k: v for k, v in s["drops"].items() if v}
    if drops != EXPECTED_DROPS:
        fail(f"drops {drops} != expected {EXPECTED_DROPS}")

    unprot_out = rdpcap(f"{d}/unprot_out.pcap")
    prot_out = rdpcap(f"{d}/prot_out.pcap")
    # Unprotected side: the 7 tunnelled packets as ESP, then the peer's echo reply.
    esp = [f for f in unprot_out if IP in f and f[IP].proto == 50]
    if len(esp) != len(tunnel_inner()) + 2 or len(unprot_out) != len(esp) + 1:
        fail(f"unprotected port sent {len(unprot_out)} frames, {len(esp)} ESP")
    sa = sa_out()
    seqs = []
    whole, frags = [], []
    for i, frame in enumerate(esp):
        if frame[Ether].dst != PEER or frame[Ether].src != GW_UNPROT:
            fail(f"ESP {i}: wrong MACs {frame[Ether].src} -> {frame[Ether].dst}")
        outer = frame[IP]
        if (outer.src, outer.dst, outer[ESP].spi) != ("192.0.2.1", "192.0.2.2", 0xA001):
            fail(f"ESP {i}: outer {outer.summary()} spi {outer[ESP].spi:#x}")
        if len(outer) > 1500:
            fail(f"ESP {i}: {len(outer)} bytes exceeds the MTU")
        seqs.append(outer[ESP].seq)
        inner = sa.decrypt(IP(bytes(outer)))
        if IP in inner and not isinstance(inner, IPv6) and (inner.flags.MF or inner.frag):
            frags.append(inner)
        else:
            whole.append(inner)
    if sorted(seqs) != list(range(1, len(esp) + 1)):
        fail(f"ESP sequence numbers {sorted(seqs)}")
    match_all(whole, tunnel_inner(), "ESP decrypted by scapy")
    # NO_DF was fragmented before ESP: the fragments reassemble to it.
    frags.sort(key=lambda f: f.frag)
    if [(f.flags.MF, f.frag) for f in frags] != [(1, 0), (0, 1424 // 8)]:
        fail(f"fragments {[(f.flags, f.frag) for f in frags]}")
    if b"".join(bytes(f.payload) for f in frags) != bytes(NO_DF.payload):
        fail("fragments do not reassemble to the original")
    echo = [f for f in unprot_out if ICMP in f]
    if not echo or echo[0][ICMP].type != 0 or echo[0][IP].dst != "192.0.2.2":
        fail("no echo reply to the peer")

    # Protected side: answers, ICMP errors and the decrypted packets.
    def find(pred, what):
        hits = [f for f in prot_out if pred(f)]
        if len(hits) != 1:
            fail(f"{what}: {len(hits)} frames on the protected port")
        return hits[0]

    arp = find(lambda f: ARP in f, "ARP reply")
    if (arp[ARP].op, arp[ARP].hwsrc, arp[ARP].psrc, arp[Ether].dst) != (2, GW_PROT, "10.1.0.1", HOST_A):
        fail(f"ARP reply {arp.summary()}")
    find(lambda f: ICMP in f and f[ICMP].type == 0 and f[IP].dst == "10.1.0.10", "echo reply")
    fn = find(lambda f: ICMP in f and f[ICMP].type == 3, "fragmentation needed")
    if (fn[ICMP].code, fn[ICMP].nexthopmtu) != (4, 1446):
        fail(f"frag needed code {fn[ICMP].code} mtu {fn[ICMP].nexthopmtu}, want 4 / 1446")
    find(lambda f: ICMP in f and f[ICMP].type == 11, "time exceeded")
    ptb = find(lambda f: ICMPv6PacketTooBig in f, "packet too big")
    if ptb[ICMPv6PacketTooBig].mtu != 1446:
        fail(f"packet too big mtu {ptb[ICMPv6PacketTooBig].mtu}")
    na = find(lambda f: ICMPv6ND_NA in f, "neighbor advertisement")
    if na[ICMPv6ND_NA].tgt != "fd00:1::1" or na[Ether].dst != HOST_A:
        fail(f"NA {na.summary()}")
    if any(ICMPv6DestUnreach in f for f in prot_out):
        fail("unexpected ICMPv6 unreachable")
    plain = [f for f in prot_out if UDP in f and ICMP not in f and ICMPv6PacketTooBig not in f]
    want = inbound_inner() + [udp6("fd00:2::10", "fd00:1::10", 120)]
    if len(plain) != len(want):
        fail(f"{len(plain)} decrypted packets forwarded, want {len(want)}")
    for i, frame in enumerate(plain):
        if frame[Ether].dst != HOST_A or frame[Ether].src != GW_PROT:
            fail(f"decrypted {i}: MACs {frame[Ether].src} -> {frame[Ether].dst}")
    match_all([f.payload for f in plain], want, "decrypted by espgw")
    if len(prot_out) != 6 + len(want):
        fail(f"protected port sent {len(prot_out)} frames, want {6 + len(want)}")
    sas = {sa["dir"]: sa for sa in s["sas"]}
    if sas["out"]["packets"] != 9 or sas["in"]["packets"] != 5:
        fail(f"SA counters {sas}")
    print(f"PASS: {n_in} frames in, every one accounted for; {len(esp)} ESP (2 of them fragments) decrypted by scapy; "
          f"{len(plain)} scapy-made ESP decrypted by espgw; drops {drops}")


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        check(sys.argv[2], sys.argv[3])
