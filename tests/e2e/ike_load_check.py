#!/usr/bin/env python3
"""The verdict of tests/e2e/ike_strongswan.sh's load phase (step 2c).

  ike_load_check.py WORK "SPI SPI ..."

WORK holds what the phase left: stats-load0.json / stats-load1.json
(`espgw ctl stats --json` before and after), load-udp.pcap (ESP from
charon of an encrypted iperf3 datagram's size, on the middle link),
load-udp-a.pcap (iperf3's datagrams at host A), xfer-N.sent / xfer-N.recv
(tests/e2e/xfer.py: "LEN SHA256" of each transfer at each end), iperf-udp.json (iperf3 -u client with the server's
output), iperf-tcp.json (iperf3 TCP across the IKE SA rekey) and load.pcap
(the middle link, everything but ARP and UDP 500/4500). The second
argument: the CHILD_SA's inbound SPIs before and after each rekey.

Fails (exit status 1, every failed check listed) unless:
- every transfer completed with the same length and sha256 at both ends,
  and there was at least one;
- the inbound SPIs are all different (each rekey made a new CHILD_SA);
- espgw's drop counters did not grow for a reason that would mean a packet
  lost or sent wrongly across a rekey (LOST below), the tunnel's own totals
  (over all its SAs, both directions) have no drops and counted packets;
- iperf3 UDP and TCP ran (the TCP one across the IKE SA rekey sent data),
  and every UDP datagram that reached espgw encrypted (load-udp.pcap) left
  it for host A (load-udp-a.pcap);
- the capture is empty: nothing but IKE, ESP in UDP and ARP on the link.
Prints the measurements: transfers, UDP loss as iperf3 sees it (charon's
kernel-libipsec included), TCP rate and retransmits, espgw's counters.
"""
import glob
import json
import os
import subprocess
import sys

# Drops that would be espgw losing or misrouting tunnel traffic across a
# rekey: an ESP packet for an SPI no longer (or not yet) installed, an
# outbound packet without an SA, an SA used past its life, keys not
# matching, and its own queues overflowing.
LOST = ("unknown_spi", "sa_expired", "no_policy", "policy_discard", "policy_mismatch", "icv_mismatch",
        "replayed", "bad_padding", "bad_inner_packet", "tx_full", "ring_full", "no_room",
        "neighbor_queue_full", "neighbor_unresolved", "unprotected_plaintext", "plaintext_blocked")


def drops(s):
    return s.get("drops") or s.get("dataplane", {}).get("drops", {})


def count(pcap):
    """Packets that matched the capture's filter: tcpdump's own count,
    which includes those its reader fell behind on (common.bash's
    captures_stop already failed the test if the kernel dropped any)."""
    for line in open(pcap + ".stats"):
        if line.strip().endswith("packets received by filter"):
            return int(line.split()[0])
    sys.exit(f"no tcpdump statistics for {pcap}")


def main():
    work, spis = sys.argv[1], sys.argv[2].split()
    errors, notes = [], []

    # Transfers.
    done = 0
    for sent in sorted(glob.glob(os.path.join(work, "xfer-*.sent"))):
        recv = sent[:-5] + ".recv"
        a = open(sent).read().split()
        b = open(recv).read().split() if os.path.exists(recv) else []
        # Each transfer ran to its end (the loop waits for the last one):
        # one that broke off at either end is a failure too.
        if len(a) == 2 and len(b) == 2 and a == b:
            done += 1
        else:
            errors.append(f"{os.path.basename(sent)}: sent {a[:4]} received {b[:4]}")
    if done == 0:
        errors.append("no TCP transfer completed")
    notes.append(f"TCP transfers: {done} x 4000000 bytes, sha256 equal at both ends")

    # Rekeys.
    if len(set(spis)) != len(spis):
        errors.append(f"inbound SPIs repeat: {spis}")
    notes.append(f"CHILD_SAs (inbound SPIs): {' '.join(f'{int(s):08x}' for s in spis)}")

    # espgw's counters.
    s0 = json.load(open(os.path.join(work, "stats-load0.json")))
    s1 = json.load(open(os.path.join(work, "stats-load1.json")))
    d0, d1 = drops(s0), drops(s1)
    grown = {k: d1.get(k, 0) - d0.get(k, 0) for k in d1 if d1.get(k, 0) != d0.get(k, 0)}
    for k in LOST:
        if grown.get(k, 0):
            errors.append(f"espgw dropped {grown[k]} packets as {k} during the load phase")
    notes.append(f"espgw drops during the phase (all reasons): {grown or 'none'}")
    tun0 = {(t["tunnel"], t["dir"]): t for t in s0.get("tunnels", [])}
    tun1 = {(t["tunnel"], t["dir"]): t for t in s1.get("tunnels", [])}
    for d in ("in", "out"):
        t, t0 = tun1.get(("ssw/net", d)), tun0.get(("ssw/net", d))
        if t is None or t0 is None:
            errors.append(f"ctl stats has no totals for ssw/net {d}: {s1.get('tunnels')}")
            continue
        lost = {k: v - t0["drops"].get(k, 0) for k, v in t["drops"].items() if v != t0["drops"].get(k, 0)}
        if lost:
            errors.append(f"tunnel ssw/net {d}: drops {lost}")
        n = t["packets"] - t0["packets"]
        if n <= 0:
            errors.append(f"tunnel ssw/net {d}: no packets")
        notes.append(f"espgw tunnel ssw/net {d} (all its SAs): {n} packets, drops {lost or 'none'}")

    # iperf3.
    u = json.load(open(os.path.join(work, "iperf-udp.json")))
    if "error" in u:
        errors.append(f"iperf3 UDP: {u['error']}")
    else:
        srv = u.get("server_output_json", {}).get("end", {}).get("sum", {})
        cli = u["end"]["sum"]
        if not srv:
            errors.append("iperf3 UDP: no server report")
        else:
            notes.append(f"UDP host B -> host A: sent {cli.get('packets')} datagrams at "
                         f"{cli['bits_per_second'] / 1e6:.1f} Mbit/s, received {srv['packets'] - srv['lost_packets']}, "
                         f"lost {srv['lost_packets']} ({srv['lost_percent']:.2f} %), "
                         f"out of order {srv.get('out_of_order', 0)} (iperf3's count: charon's kernel-libipsec included)")
            got = srv["packets"] - srv["lost_packets"]
            if got <= 0:
                errors.append("iperf3 UDP: nothing received")
            # Where the loss happened: the datagrams that reached espgw
            # (ESP from charon of an encrypted iperf3 datagram's size).
            seen = count(os.path.join(work, "load-udp.pcap"))
            delivered = count(os.path.join(work, "load-udp-a.pcap"))
            notes.append(f"  {seen} reached espgw encrypted ({cli['packets'] - seen} lost before: in charon's "
                         f"kernel-libipsec or on the link), {delivered} reached host A's interface "
                         f"({seen - delivered} lost in espgw), {got} were counted by the iperf3 server "
                         f"({delivered - got} not: host A's socket, or sent after the server's count ended)")
            if delivered < seen:
                errors.append(f"iperf3 UDP: {seen} datagrams reached espgw, {delivered} left it for host A")
    t = json.load(open(os.path.join(work, "iperf-tcp.json")))
    if "error" in t:
        errors.append(f"iperf3 TCP: {t['error']}")
    else:
        e = t["end"]
        rx = e["sum_received"]["bytes"]
        if rx <= 0:
            errors.append("iperf3 TCP: nothing received")
        notes.append(f"TCP host A -> host B across the IKE SA rekey: {e['sum_received']['bits_per_second'] / 1e6:.1f} Mbit/s, "
                     f"{rx} bytes, {e['sum_sent'].get('retransmits', '?')} retransmits")

    # The middle link.
    out = subprocess.run(["tcpdump", "-r", os.path.join(work, "load.pcap"), "-nn"], capture_output=True, text=True).stdout
    lines = [l for l in out.splitlines() if l.strip()]
    if lines:
        errors.append(f"{len(lines)} packets on the middle link that are neither IKE nor ESP in UDP nor ARP:\n" +
                      "\n".join(lines[:10]))
    notes.append("middle link: only IKE / ESP in UDP (500, 4500) and ARP")

    print("\n".join(notes))
    if errors:
        print("\n".join(errors))
        sys.exit(1)


if __name__ == "__main__":
    main()
