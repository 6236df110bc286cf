#!/usr/bin/env python3
"""What crossed the middle link (gateway A <-> gateway B), from tcpdump
captures, checked against the tunnels of tunnels.json:

  midlink.py [--positive CLEAR_PCAP] TUNNELS_JSON FORBIDDEN[,FORBIDDEN...] PCAP...

Every frame must be ARP, IPv6 neighbor discovery, ESP, or ESP in UDP 4500;
each tunnel's two SPIs must appear, each only in its tunnel's outer family
and encapsulation; no frame may hold any FORBIDDEN byte string (plaintext
markers the hosts sent). With --positive, each FORBIDDEN string must be
found in CLEAR_PCAP (a capture on a host's link, where the markers are in
clear): the proof that the hosts really sent them, without which their
absence on the middle link would prove nothing. A minimal pcap reader (no scapy) keeps a capture
of thousands of frames fast to check.
"""
import json
import struct
import sys
from collections import Counter


def frames(path):
    with open(path, "rb") as f:
        head = f.read(24)
        endian = "<" if head[:4] == b"\xd4\xc3\xb2\xa1" else ">"
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            _, _, incl, _ = struct.unpack(endian + "IIII", rec)
            yield f.read(incl)


def classify(fr):
    """-> (kind, family, spi) with kind in arp, nd, esp, udp-esp, other."""
    etype = struct.unpack("!H", fr[12:14])[0]
    if etype == 0x0806:
        return "arp", None, None
    if etype == 0x0800:
        ihl = (fr[14] & 15) * 4
        proto, l4, fam = fr[23], fr[14 + ihl:], 4
    elif etype == 0x86DD:
        proto, l4, fam = fr[20], fr[54:], 6
        if proto == 58 and l4[:1] and 133 <= l4[0] <= 137:
            return "nd", 6, None
    else:
        return "other", None, None
    if proto == 50 and len(l4) >= 8:
        return "esp", fam, struct.unpack("!I", l4[:4])[0]
    if proto == 17 and len(l4) >= 16 and struct.unpack("!HH", l4[:4]) == (4500, 4500):
        spi = struct.unpack("!I", l4[8:12])[0]
        if spi:
            return "udp-esp", fam, spi
    return "other", fam, None


def main():
    args = sys.argv[1:]
    positive = None
    if args[:1] == ["--positive"]:
        positive, args = args[1], args[2:]
    tunnels = json.load(open(args[0]))
    forbidden = [s.encode() for s in args[1].split(",") if s]
    errors = []
    if positive:
        clear = Counter()
        for fr in frames(positive):
            for s in forbidden:
                clear[s] += s in fr
        print(f"host link (clear): {', '.join(f'{s.decode()!r} in {clear[s]} frames' for s in forbidden)}")
        errors += [f"{s.decode()!r} never seen even in clear on the host link: its absence proves nothing"
                   for s in forbidden if not clear[s]]
    want = {}
    for t in tunnels:
        kind = "udp-esp" if t["encap"] == "udp" else "esp"
        for spi in (t["ab_spi"], t["ba_spi"]):
            want[spi] = (kind, t["outer"], t["name"])
    seen, kinds = Counter(), Counter()
    for path in args[2:]:
        for fr in frames(path):
            kind, fam, spi = classify(fr)
            kinds[kind] += 1
            for s in forbidden:
                if s in fr:
                    errors.append(f"{s.decode()!r} in clear on the middle link: {fr[:64].hex()}")
            if kind == "other":
                errors.append(f"neither ESP nor ARP/ND on the middle link: {fr[:64].hex()}")
            elif spi is not None:
                if spi not in want:
                    errors.append(f"unknown SPI {spi:#x} on the middle link")
                elif want[spi][:2] != (kind, fam):
                    errors.append(f"SPI {spi:#x} ({want[spi][2]}) seen as {kind} over IPv{fam}, want {want[spi][0]} over IPv{want[spi][1]}")
                seen[spi] += 1
    for spi, (kind, fam, name) in want.items():
        if not seen[spi]:
            errors.append(f"SPI {spi:#x} of {name} never seen on the middle link")
    print(f"middle link: {dict(kinds)}; {len(seen)} of {len(want)} SPIs seen")
    if errors:
        for e in errors[:20]:
            print("FAIL:", e)
        print(f"FAIL: {len(errors)} problems on the middle link")
        sys.exit(1)


if __name__ == "__main__":
    main()
