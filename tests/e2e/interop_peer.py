#!/usr/bin/env python3
"""The far gateway of tests/e2e/interop.sh, made of scapy's ESP (an
implementation independent of espgw's), on the wire:

  interop_peer.py IFACE TUNNELS_JSON READY_FILE SUMMARY_JSON [--misbehave]

On IFACE (gateway B's unprotected link) it answers ARP and neighbor
solicitations for gateway B's outer addresses, takes ESP over IPv4 and
IPv6, bare or in UDP 4500, decrypts the ESP espgw (gateway A) sends with scapy's
SecurityAssociation, checks the inner packet (addresses of the tunnel's
hosts, TTL / hop limit one lower than host A's 64, an echo request), and
answers each echo request with an echo reply that it encrypts with scapy's
SA for the reverse direction and sends back as ESP. It stops on SIGTERM /
SIGINT and writes per-tunnel counts and every problem to SUMMARY_JSON.

With --misbehave (interop.sh), on every tunnel it also replays and
reorders its own ESP: the SA's 4th sequence number is sent after the 5th,
and then both again (espgw must decrypt the reordered one, inside its
window, and count the two copies as `replayed`). On ESN tunnels its
sequence numbers cross 2^32 (see `seq_plan`), so espgw must infer the high
bits (RFC 4303 Appendix A): a wrong guess fails the ICV, which covers them,
and the ping goes unanswered.

espgw's own sequence numbers start at 1. The receiving side here infers
their high bits the same way, from the tunnel's `ab_seq_start` in
tunnels.json (default 1): once espgw can start an outbound SA high
(persisted sequence state), that field makes this peer expect it, and
interop.sh then requires sequence numbers above it to have been decrypted.
"""
import itertools
import json
import signal
import sys

from scapy.all import ARP, ICMP, IP, UDP, Ether, Raw, conf, get_if_hwaddr
from scapy.layers.inet6 import (ICMPv6EchoReply, ICMPv6EchoRequest, ICMPv6ND_NA, ICMPv6ND_NS,
                                ICMPv6NDOptDstLLAddr, IPv6)
from scapy.layers.ipsec import ESP

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from tunnels import OUTER, scapy_sa  # noqa: E402

stop = False
SEQ_LO = 0xFFFFFFFF
# The sequence number (by index, from 1) sent after the next one, then both
# sent again (with --misbehave).
HOLD = 4


def seq_plan(esn):
    """The 64-bit sequence numbers of one of scapy's SAs, in sending order.
    Without ESN: 1, 2, 3, ... With ESN: 2^31 first (a fresh receiver with
    its window at 0 can place a low half only within 2^31 of it: RFC 4303
    Appendix A), then 2^32 - 3, 2^32 - 2, ...: from the 5th on they have
    high bits 1, which never go on the wire; with --misbehave the 4th
    (2^32 - 1) goes after the 5th (2^32), so espgw must also place a low
    half behind a window that spans the boundary."""
    if not esn:
        return itertools.count(1)
    return itertools.chain([1 << 31], itertools.count((1 << 32) - 3))


class Sender:
    """scapy's SA for one tunnel's B -> A direction, along seq_plan."""

    def __init__(self, t, cross_2_32):
        self.sa = scapy_sa(t, "ba")
        self.seqs = seq_plan(t["esn"] and cross_2_32)
        self.sent = 0
        self.max_seq = 0
        self.above_2_32 = 0

    def encrypt(self, pkt):
        seq = next(self.seqs)
        # scapy keeps the low half in seq_num and the high half in esn.
        self.sa.seq_num, self.sa.esn = seq & SEQ_LO, seq >> 32
        esp = self.sa.encrypt(pkt)
        if UDP in esp and isinstance(esp, IPv6):
            # scapy leaves the UDP checksum 0; IPv6 needs one (RFC 8200 8.1).
            del esp[UDP].chksum
            esp = IPv6(bytes(esp))
        self.sent += 1
        self.max_seq = max(self.max_seq, seq)
        self.above_2_32 += seq >> 32 != 0
        return esp


class Receiver:
    """scapy's SA for one tunnel's A -> B direction, inferring the high
    bits of ESN sequence numbers as RFC 4303 Appendix A does (window 64),
    from the top sequence number seen so far (ab_seq_start - 1 at first)."""

    W = 64

    def __init__(self, t):
        self.sa = scapy_sa(t, "ab")
        self.esn = t["esn"]
        self.top = t.get("ab_seq_start", 1) - 1

    def infer(self, lo):
        if not self.esn:
            return lo
        tl, th = self.top & SEQ_LO, self.top >> 32
        if tl >= self.W - 1:
            hi = th if lo >= tl - (self.W - 1) else th + 1
        else:
            hi = th - 1 if lo >= (tl - (self.W - 1)) & SEQ_LO else th
        return (max(hi, 0) << 32) | lo

    def decrypt(self, outer):
        """-> (inner packet, 64-bit seq); raises what scapy raises."""
        seq = self.infer(outer[ESP].seq)
        self.sa.esn = seq >> 32
        inner = self.sa.decrypt(outer)
        if seq <= self.top and self.top:
            raise ValueError(f"espgw sent seq {seq} again or backwards (top {self.top})")
        self.top = max(self.top, seq)
        return inner, seq


def on_signal(*_):
    global stop
    stop = True


def decoy_of(reply):
    """The echo reply with its ICMP identifier flipped: host A's ping
    ignores it (not its identifier), the gateway forwards it all the same."""
    d = reply.copy()
    echo = d[ICMP] if ICMP in d else d[ICMPv6EchoReply]
    echo.id ^= 0xFFFF
    return d


def echo_reply(inner, t):
    """The reply host B would send, or None (with the problem) if `inner`
    is not the echo request host A sent through tunnel t."""
    if isinstance(inner, IP):
        want = (t["a4"], t["b4"])
        if (inner.src, inner.dst) != want:
            return None, f"inner {inner.src} -> {inner.dst}, want {want}"
        if inner.ttl != 63:
            return None, f"inner TTL {inner.ttl}, want 63"
        if ICMP not in inner or inner[ICMP].type != 8:
            return None, f"not an echo request: {inner.summary()}"
        icmp = inner[ICMP]
        return IP(src=inner.dst, dst=inner.src, ttl=64) / ICMP(type=0, id=icmp.id, seq=icmp.seq) / Raw(bytes(icmp.payload)), None
    if isinstance(inner, IPv6):
        want = (t["a6"], t["b6"])
        if (inner.src, inner.dst) != want:
            return None, f"inner {inner.src} -> {inner.dst}, want {want}"
        if inner.hlim != 63:
            return None, f"inner hop limit {inner.hlim}, want 63"
        if ICMPv6EchoRequest not in inner:
            return None, f"not an echo request: {inner.summary()}"
        req = inner[ICMPv6EchoRequest]
        return IPv6(src=inner.dst, dst=inner.src, hlim=64) / ICMPv6EchoReply(id=req.id, seq=req.seq, data=req.data), None
    return None, f"inner neither IPv4 nor IPv6: {inner!r}"


def esp_to_us(fr, me4, me6):
    """The outer IP packet if `fr` is ESP (bare or in UDP 4500) for us."""
    if IP in fr and fr[IP].dst == me4:
        outer = IP(bytes(fr[IP]))
    elif IPv6 in fr and fr[IPv6].dst == me6:
        outer = IPv6(bytes(fr[IPv6]))
    else:
        return None
    if ESP in outer:
        return outer
    return None


def main():
    iface, tunnels_path, ready, summary_path = sys.argv[1:5]
    misbehave = sys.argv[5:] == ["--misbehave"]
    tunnels = json.load(open(tunnels_path))
    by_spi = {t["ab_spi"]: t for t in tunnels}
    sa_in = {t["ab_spi"]: Receiver(t) for t in tunnels}
    sa_out = {t["ab_spi"]: Sender(t, misbehave) for t in tunnels}
    counts = {t["name"]: {"decrypted": 0, "answered": 0, "max_seq_in": 0, "reordered": 0, "replays": 0}
              for t in tunnels}
    problems = []
    mac = get_if_hwaddr(iface)
    me4, me6 = OUTER[4]["b"], OUTER[6]["b"]
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sock = conf.L2socket(iface=iface)
    open(ready, "w").write("ready\n")
    while not stop:
        frames = sock.select([sock], 0.2)
        if not frames:
            continue
        fr = sock.recv()
        if fr is None or Ether not in fr or fr[Ether].src == mac:
            continue
        if ARP in fr:
            a = fr[ARP]
            if a.op == 1 and a.pdst == me4:
                sock.send(Ether(dst=a.hwsrc, src=mac) / ARP(op=2, hwsrc=mac, psrc=me4, hwdst=a.hwsrc, pdst=a.psrc))
            continue
        if ICMPv6ND_NS in fr and fr[ICMPv6ND_NS].tgt == me6:
            ns = fr[IPv6]
            sock.send(Ether(dst=fr[Ether].src, src=mac) / IPv6(src=me6, dst=ns.src, hlim=255)
                      / ICMPv6ND_NA(tgt=me6, R=0, S=1, O=1) / ICMPv6NDOptDstLLAddr(lladdr=mac))
            continue
        outer = esp_to_us(fr, me4, me6)
        if outer is None:
            continue
        spi = outer[ESP].spi
        t = by_spi.get(spi)
        if t is None:
            problems.append(f"ESP with unknown SPI {spi:#x}")
            continue
        encap = "udp" if UDP in outer and outer[UDP].payload and isinstance(outer[UDP].payload, ESP) else "none"
        if (outer.version, encap) != (t["outer"], t["encap"]):
            problems.append(f"{t['name']}: ESP arrived as IPv{outer.version} encap {encap}")
            continue
        c = counts[t["name"]]
        try:
            inner, seq = sa_in[spi].decrypt(outer)
        except Exception as e:  # scapy raises on a bad ICV or padding
            problems.append(f"{t['name']}: scapy could not decrypt seq {outer[ESP].seq}: {e!r}")
            continue
        c["decrypted"] += 1
        c["max_seq_in"] = max(c["max_seq_in"], seq)
        reply, problem = echo_reply(inner, t)
        if problem:
            problems.append(f"{t['name']}: {problem}")
            continue
        out = sa_out[spi]
        l2 = Ether(dst=fr[Ether].src, src=mac)
        if misbehave and out.sent == HOLD - 1:
            # Sequence numbers HOLD and HOLD + 1: the reply goes out at once
            # on HOLD + 1, then a decoy on HOLD, reordered behind the top
            # but inside the window (espgw must decrypt it: interop.sh
            # counts), then both again, byte for byte (replays). The decoy
            # is the reply with another ICMP identifier, which host A's ping
            # ignores: holding the reply back instead would make ping send
            # more requests than it counts.
            decoy = l2 / out.encrypt(decoy_of(reply))
            frame = l2 / out.encrypt(reply)
            for f in (frame, decoy, frame, decoy):
                sock.send(f)
            c["reordered"] += 1
            c["replays"] += 2
        else:
            sock.send(l2 / out.encrypt(reply))
        c["answered"] += 1
    sock.close()
    for t in tunnels:
        o = sa_out[t["ab_spi"]]
        counts[t["name"]].update(esp_sent=o.sent, max_seq_out=o.max_seq, out_above_2_32=o.above_2_32)
    json.dump({"counts": counts, "problems": problems}, open(summary_path, "w"), indent=1)


if __name__ == "__main__":
    main()
