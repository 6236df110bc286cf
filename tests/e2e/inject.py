#!/usr/bin/env python3
"""Bad input for tests/e2e/badinput.sh, sent on the wire to gateway A's
unprotected port, as gateway B would (its address and MAC), with tunnel
2's B->A SA made by scapy:

  inject.py IFACE TUNNELS_JSON GW_MAC

Prints one line per frame. The expected counters are in badinput.sh.
"""
import json
import os
import sys
import time

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from scapy.all import IP, UDP, Ether, Raw, conf, get_if_hwaddr
from scapy.layers.inet6 import IPv6
from scapy.layers.ipsec import ESP

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from tunnels import scapy_sa  # noqa: E402


def main():
    iface, tunnels_path, gw_mac = sys.argv[1:4]
    t = json.load(open(tunnels_path))[1]
    sa = scapy_sa(t, "ba")
    mac = get_if_hwaddr(iface)
    sock = conf.L2socket(iface=iface)

    def inner(n):
        return IP(src=t["b4"], dst=t["a4"], ttl=64) / UDP(sport=40000 + n, dport=9) / Raw(b"badinput-%d" % n)

    def esp(seq):
        sa.seq_num = seq
        return bytearray(bytes(sa.encrypt(inner(seq))))

    def send(what, l3):
        sock.send(Ether(dst=gw_mac, src=mac, type=0x0800) / Raw(bytes(l3)))
        print(what, flush=True)
        time.sleep(0.02)

    def flip(seq, offset, what):
        """Genuine ESP with one bit of the outer IP payload flipped at offset
        (from the start of ESP; negative: from the end)."""
        p = esp(seq)
        i = 20 + offset if offset >= 0 else len(p) + offset
        p[i] ^= 0x01
        send(what, p)

    sent = {}
    for seq in range(1, 6):
        sent[seq] = esp(seq)
        send(f"genuine seq {seq}", sent[seq])
    send("replay of seq 3 (the same bytes again)", sent[3])
    send("genuine seq 100 (jump ahead)", esp(100))
    sent[90] = esp(90)
    send("genuine seq 90 (reordered, inside the window)", sent[90])
    send("replay of seq 90 (the same bytes again)", sent[90])
    send("genuine seq 20 (behind the window of 64)", esp(20))
    flip(101, 0, "SPI tampered (unknown SPI)")
    p = esp(101)
    p[24:28] = (102).to_bytes(4, "big")  # passes the window, fails the ICV
    send("seq tampered (101 sent as 102)", p)
    flip(103, 8, "IV tampered")
    flip(104, 20, "ciphertext tampered")
    flip(105, -1, "ICV tampered")
    def shortened(seq, keep):
        """Genuine ESP cut to `keep` bytes, in an IP header that says so."""
        p = esp(seq)
        if keep < 0:
            keep += len(p) - 20
        return IP(src="192.0.2.2", dst="192.0.2.1", proto=50) / Raw(bytes(p[20:20 + keep]))

    send("truncated ESP: SPI and seq only", shortened(106, 8))
    send("truncated ESP: header, IV and 10 bytes", shortened(107, 26))
    send("ESP cut inside the ICV (length consistent)", shortened(109, -5))
    send("frame shorter than its IP total length", esp(110)[:-5])
    wrong = esp(108)
    wrong[20:24] = t["ab_spi"].to_bytes(4, "big")
    send("wrong SPI (gateway A's own outbound SPI)", wrong)
    send("genuine seq 102 (after the tampered 102)", esp(102))
    # Hand-built AES-GCM ESP (RFC 4106: nonce = salt || IV, AAD = SPI || seq)
    # for what scapy will not make: a wrong trailer, a bad inner packet.
    key = bytes.fromhex(t["ba_key"])
    gcm, salt = AESGCM(key[:-4]), key[-4:]

    def esp_raw(seq, payload, next_header, pad=None, tos=0):
        if pad is None:
            n = (-(len(payload) + 2)) % 4
            pad = bytes(range(1, n + 1))
        head = t["ba_spi"].to_bytes(4, "big") + seq.to_bytes(4, "big")
        iv = os.urandom(8)
        ct = gcm.encrypt(salt + iv, payload + pad + bytes([len(pad), next_header]), head)
        return IP(src="192.0.2.2", dst="192.0.2.1", proto=50, tos=tos) / Raw(head + iv + ct)

    good = bytes(inner(200))
    send("genuine seq 200, hand-built (checks the builder)", esp_raw(200, good, 4))
    send("bad padding (0xaa bytes instead of 1, 2, 3, ...)", esp_raw(201, good, 4, pad=b"\xaa" * (4 + (-(len(good) + 2)) % 4)))
    send("bad inner packet (garbage, next header 4)", esp_raw(202, b"\x45" + bytes(range(1, 40)), 4))
    send("dummy packet (next header 59, RFC 4303 2.6)", esp_raw(203, os.urandom(40), 59))
    sa.seq_num = 204
    send("inner packet outside the tunnel's selectors", sa.encrypt(IP(src="10.7.0.1", dst=t["a4"]) / UDP(dport=9)))
    # RFC 6040: congestion experienced (CE) on the outer header.
    send("outer CE over a not-ECN-capable inner packet (dropped)", esp_raw(205, good, 4, tos=0x03))
    ect0 = IP(src=t["b4"], dst=t["a4"], ttl=64, tos=0x02) / UDP(sport=40206, dport=9) / Raw(b"badinput-206")
    send("outer CE over an ECT(0) inner packet (delivered as CE)", esp_raw(206, bytes(ect0), 4, tos=0x03))
    send("garbage IPv4 (bad header)", b"\x45" + bytes(range(1, 40)))
    sock.send(Ether(dst=gw_mac, src=mac, type=0x88B5) / Raw(b"not ip" * 10))
    print("non-IP frame (EtherType 0x88b5)")
    # af_packet pads anything shorter than an Ethernet header, so the
    # shortest frame on the wire is a header with a 10-byte IPv4 "packet".
    sock.send(Ether(dst=gw_mac, src=mac, type=0x0800) / Raw(b"\x45" + b"\x00" * 9))
    print("runt IPv4 (10 bytes)")
    # Multicast and broadcast are never routed (badinput.sh: exactly these 3).
    sock.send(Ether(dst="01:00:5e:00:00:fb", src=mac) / IP(src="192.0.2.2", dst="224.0.0.251") / UDP(dport=5353) / Raw(b"m4"))
    print("IPv4 multicast (224.0.0.251)")
    sock.send(Ether(dst="ff:ff:ff:ff:ff:ff", src=mac) / IP(src="192.0.2.2", dst="255.255.255.255") / UDP(dport=9) / Raw(b"bc"))
    print("IPv4 limited broadcast")
    sock.send(Ether(dst="33:33:00:00:00:fb", src=mac) / IPv6(src="2001:db8::2", dst="ff02::fb") / UDP(dport=5353) / Raw(b"m6"))
    print("IPv6 multicast (ff02::fb)")
    sock.close()


if __name__ == "__main__":
    main()
