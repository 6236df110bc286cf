#!/usr/bin/env python3
"""The far gateway of tests/e2e/interop.sh, made of scapy's ESP (an
implementation independent of espgw's), on the wire:

  interop_peer.py IFACE TUNNELS_JSON READY_FILE SUMMARY_JSON

On IFACE (gateway B's unprotected link) it answers ARP for gateway B's
outer address, decrypts the ESP espgw (gateway A) sends with scapy's
SecurityAssociation, checks the inner packet (addresses of the tunnel's
hosts, TTL / hop limit one lower than host A's 64, an echo request), and
answers each echo request with an echo reply that it encrypts with scapy's
SA for the reverse direction and sends back as ESP. It stops on SIGTERM /
SIGINT and writes per-tunnel counts and every problem to SUMMARY_JSON.
"""
import json
import signal
import sys

from scapy.all import ARP, ICMP, IP, Ether, Raw, conf, get_if_hwaddr
from scapy.layers.inet6 import ICMPv6EchoReply, ICMPv6EchoRequest, IPv6
from scapy.layers.ipsec import ESP

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from tunnels import OUTER, scapy_sa  # noqa: E402

stop = False


def on_signal(*_):
    global stop
    stop = True


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


def main():
    iface, tunnels_path, ready, summary_path = sys.argv[1:5]
    tunnels = json.load(open(tunnels_path))
    by_spi = {t["ab_spi"]: t for t in tunnels}
    sa_in = {t["ab_spi"]: scapy_sa(t, "ab") for t in tunnels}
    sa_out = {t["ab_spi"]: scapy_sa(t, "ba") for t in tunnels}
    counts = {t["name"]: {"decrypted": 0, "answered": 0} for t in tunnels}
    problems = []
    mac = get_if_hwaddr(iface)
    me4 = OUTER[4]["b"]
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
        if IP not in fr or fr[IP].dst != me4 or fr[IP].proto != 50:
            continue
        outer = IP(bytes(fr[IP]))
        spi = outer[ESP].spi
        t = by_spi.get(spi)
        if t is None:
            problems.append(f"ESP with unknown SPI {spi:#x}")
            continue
        try:
            inner = sa_in[spi].decrypt(outer)
        except Exception as e:  # scapy raises on a bad ICV or padding
            problems.append(f"{t['name']}: scapy could not decrypt seq {outer[ESP].seq}: {e!r}")
            continue
        counts[t["name"]]["decrypted"] += 1
        reply, problem = echo_reply(inner, t)
        if problem:
            problems.append(f"{t['name']}: {problem}")
            continue
        esp = sa_out[spi].encrypt(reply)
        sock.send(Ether(dst=fr[Ether].src, src=mac) / esp)
        counts[t["name"]]["answered"] += 1
    sock.close()
    json.dump({"counts": counts, "problems": problems}, open(summary_path, "w"), indent=1)


if __name__ == "__main__":
    main()
