#!/usr/bin/env python3
"""ESP packets on the wire against what the receiving gateway decrypted:

  wire_esp.py PCAP BEFORE_A AFTER_A BEFORE_B AFTER_B TUNNEL_A:TUNNEL_B [SKIP_SPI...]

PCAP: a whole capture (tcpdump reported no drop) at one end of the middle
link (it sees both directions), running from the BEFORE to the AFTER
`espgw ctl stats --json` snapshots with no tunnel traffic outside it. ESP
from gateway A's outer address (192.0.2.1) must equal what B's TUNNEL_B
decrypted in between over all its SAs, and ESP from B (192.0.2.2) what A's
TUNNEL_A decrypted: nothing lost on the wire or in a receiving gateway,
counted independently of the sending gateway's own counters. SKIP_SPI:
SPIs (hex) of other tunnels on the same outer addresses, left out.
"""
import json
import struct
import sys
from collections import Counter


def esp_by_source(path, skip):
    """Counter of ESP-over-IPv4 frames by outer source address."""
    c = Counter()
    with open(path, "rb") as f:
        head = f.read(24)
        endian = "<" if head[:4] == b"\xd4\xc3\xb2\xa1" else ">"
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                break
            incl = struct.unpack(endian + "IIII", rec)[2]
            fr = f.read(incl)
            if fr[12:14] != b"\x08\x00" or fr[23] != 50:
                continue
            ihl = (fr[14] & 15) * 4
            spi = struct.unpack("!I", fr[14 + ihl:18 + ihl])[0]
            if spi not in skip:
                c[".".join(map(str, fr[26:30]))] += 1
    return c


def decrypted(before, after, tunnel):
    def get(path):
        s = json.load(open(path))
        return next(t["packets"] for t in s["tunnels"] if t["tunnel"] == tunnel and t["dir"] == "in")
    return get(after) - get(before)


def main():
    if len(sys.argv) < 7:
        raise SystemExit(__doc__)
    pcap, a0, a1, b0, b1, pair = sys.argv[1:7]
    skip = {int(s, 16) for s in sys.argv[7:]}
    ta, tb = pair.split(":")
    wire = esp_by_source(pcap, skip)
    ok = True
    for what, src, got in (("A->B", "192.0.2.1", decrypted(b0, b1, tb)),
                           ("B->A", "192.0.2.2", decrypted(a0, a1, ta))):
        print(f"{what}: {wire[src]} ESP packets on the wire, {got} decrypted by the receiving gateway")
        if wire[src] != got or got == 0:
            print(f"FAIL: {what}: {wire[src]} ESP packets on the wire, {got} decrypted")
            ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
