#!/usr/bin/env python3
"""The verdict of tests/e2e/ike_strongswan.sh's flood phase (step 2d).

  ike_flood_check.py WORK

WORK holds: flood-samples.txt (espgw's tunnel inbound packet counter,
sampled: ike_flood.py sample), iperf-flood.json (iperf3 -u client with
the server's report), flood.json (tests/e2e/ike_flood.py's report, with
the flood's start and end), stats-flood0/1.json (`espgw ctl stats --json`
before and after) and prom-flood0/1.txt (the metrics endpoint before and
after).

Prints the measurement: the median rate of the samples before the flood
and inside it, their ratio, and how espgw counted the flood; writes the
punt_full count to WORK/flood-punt_full (step 5 checks the exit stats
against it). Fails (exit status 1, each failure listed) unless:
- the flood is accounted for: espgw_ike_datagrams_received_total (every
  punted datagram is handed to the engine) plus punt_full grew by at least
  the number sent (a datagram lost before espgw's counters, e.g. in the
  kernel's AF_PACKET ring, would be missing and fail the check);
- the engine dropped the malformed ones (espgw_ike_datagrams_dropped_total
  grew by at least 4 in 6 of them: the kinds ike_flood.py sends that get
  no answer);
- the engine kept at most its cookie threshold (100) of half-open SAs and
  answered the rest with cookies (as seen by the sender, when the answers
  made it back through the transmit ring);
- espgw dropped no tunnel traffic: no growth of a reason that would mean
  losing it (LOST of ike_load_check.py), none in the tunnel's totals;
- the median rate during the flood is at least FLOOD_MIN_RATIO (default
  0.5) of the median before it.
"""
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ike_load_check import LOST, drops  # noqa: E402

COOKIE_THRESHOLD = 100


def prom(path):
    out = {}
    for line in open(path):
        m = re.match(r"^(espgw_ike_\w+)\{[^}]*\} (\d+)$", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def main():
    work = sys.argv[1]
    min_ratio = float(os.environ.get("FLOOD_MIN_RATIO", "0.5"))
    errors, notes = [], []
    fl = json.load(open(os.path.join(work, "flood.json")))
    t1, t2 = fl["start"], fl["end"]
    u = json.load(open(os.path.join(work, "iperf-flood.json")))
    if "error" in u:
        sys.exit(f"iperf3: {u['error']}")
    # espgw's forwarding rate into host A: its tunnel's inbound packets
    # between samples (about 0.25 s apart), as Mbit/s of 1200-byte
    # datagrams; before: from the second sample after the stream started
    # to the flood's start; during: from half a second into the flood (the
    # sender's start-up) to its end.
    samples = [tuple(float(x) for x in line.split()) for line in open(os.path.join(work, "flood-samples.txt"))]
    before, during = [], []
    started = [s for s in samples if s[2] == 1]
    for (ta, na, _), (tb, nb, _) in zip(started[1:], started[2:]):
        mbit = (nb - na) * 1200 * 8 / (tb - ta) / 1e6
        if tb <= t1:
            before.append(mbit)
        elif ta >= t1 + 0.5 and tb <= t2:
            during.append(mbit)
    if len(before) < 3 or len(during) < 3:
        errors.append(f"too few samples: {len(before)} before, {len(during)} during the flood")
    else:
        mb, md = statistics.median(before), statistics.median(during)
        ratio = md / mb if mb else 0
        notes.append(f"tunnel UDP host B -> host A (iperf3 -u, offered {u['end']['sum']['bits_per_second'] / 1e6:.1f} Mbit/s, "
                     f"1200-byte datagrams), espgw's inbound rate: median {mb:.1f} Mbit/s before the flood "
                     f"({len(before)} samples), {md:.1f} Mbit/s during it ({len(during)} samples), ratio {ratio:.2f}")
        if ratio < min_ratio:
            errors.append(f"the tunnel's rate fell to {ratio:.2f} of its rate before the flood (at least {min_ratio} wanted)")
    srv = u["server_output_json"]["end"]["sum"]
    notes.append(f"iperf3 over the whole run: sent {u['end']['sum']['packets']}, the server lost {srv['lost_packets']} "
                 f"({srv['lost_percent']:.2f} %; espgw's counters below: what it decrypted and dropped)")

    s0 = json.load(open(os.path.join(work, "stats-flood0.json")))
    s1 = json.load(open(os.path.join(work, "stats-flood1.json")))
    d0, d1 = drops(s0), drops(s1)
    grown = {k: d1.get(k, 0) - d0.get(k, 0) for k in d1 if d1.get(k, 0) != d0.get(k, 0)}
    full = grown.get("punt_full", 0)
    open(os.path.join(work, "flood-punt_full"), "w").write(f"{full}\n")
    p0, p1 = prom(os.path.join(work, "prom-flood0.txt")), prom(os.path.join(work, "prom-flood1.txt"))
    dp = {k: p1.get(k, 0) - p0.get(k, 0) for k in p1 if p1.get(k, 0) != p0.get(k, 0)}
    # Every punted datagram is handed to the engine (the live stats have
    # no ike_punted; the exit stats JSON does).
    recv = dp.get("espgw_ike_datagrams_received_total", 0)
    dropped = dp.get("espgw_ike_datagrams_dropped_total", 0)
    notes.append(f"flood: sent {fl['sent']} datagrams in {fl['seconds']} s ({fl['rate']}/s, {fl['malformed']} malformed); "
                 f"espgw punted and handed to the engine {recv}, punt_full {full}; engine dropped {dropped}; "
                 f"answers seen by the sender {fl['answers']}")
    notes.append(f"espgw drops during the phase: {grown or 'none'}")
    notes.append(f"espgw_ike_* during the phase: {dp}")
    if recv + full < fl["sent"]:
        errors.append(f"{fl['sent'] - recv - full} flood datagrams not accounted for by espgw (engine {recv}, punt_full {full})")
    for k in LOST:
        if grown.get(k, 0):
            errors.append(f"espgw dropped {grown[k]} packets as {k} during the flood")
    tun0 = {(t["tunnel"], t["dir"]): t for t in s0.get("tunnels", [])}
    for t in s1.get("tunnels", []):
        if t["tunnel"] != "ssw/net":
            continue
        t0 = tun0.get((t["tunnel"], t["dir"]), {"drops": {}, "packets": 0})
        lost = {k: v - t0["drops"].get(k, 0) for k, v in t["drops"].items() if v != t0["drops"].get(k, 0)}
        if lost:
            errors.append(f"tunnel ssw/net {t['dir']}: drops {lost} during the flood")
        notes.append(f"espgw tunnel ssw/net {t['dir']}: {t['packets'] - t0['packets']} packets, drops {lost or 'none'}")
    if dropped < fl["malformed"] * 4 // 6:
        errors.append(f"the engine dropped {dropped} datagrams, fewer than the {fl['malformed'] * 4 // 6} malformed ones without an answer")
    a = fl["answers"]
    if a["sa"] > COOKIE_THRESHOLD:
        errors.append(f"{a['sa']} IKE_SA_INIT answers with an SA payload: more half-open SAs than the cookie threshold ({COOKIE_THRESHOLD})")
    if a["cookie"] == 0:
        errors.append("no COOKIE answers: the engine did not ask the flood for cookies")

    print("\n".join(notes))
    if errors:
        print("\n".join(errors))
        sys.exit(1)


if __name__ == "__main__":
    main()
