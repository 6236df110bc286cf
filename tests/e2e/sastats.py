#!/usr/bin/env python3
"""Per-SA counters of both gateways' --stats-json against tunnels.json:

  sastats.py [--replayed N] TUNNELS_JSON MIN_PACKETS A_JSON [B_JSON]

Every tunnel's outbound and inbound SA carried at least MIN_PACKETS on
each gateway given, the counters balance, and no ESP or policy drop was
counted (per SA or gateway-wide). With two gateways, each tunnel's
outbound SA on one sent exactly what the inbound SA on the other
decrypted. mtu_exceeded is allowed: TCP finds the
tunnel's path MTU through it. --replayed N: each inbound SA must have
counted exactly N replays (interop.sh's peer replays its own ESP), and
the gateway N per tunnel; without it, none.
"""
import json
import sys

BAD = ("truncated", "not_esp", "unknown_spi", "replayed", "icv_mismatch", "bad_padding",
       "bad_inner_packet", "ce_on_not_ect", "sa_expired", "no_room", "policy_mismatch", "plaintext_blocked",
       "unprotected_plaintext", "no_policy", "neighbor_unresolved",
       "neighbor_queue_full", "tx_full", "ring_full", "seq_not_reserved", "local_not_protected")


def main():
    args = sys.argv[1:]
    replayed = 0
    if args[:1] == ["--replayed"]:
        replayed, args = int(args[1]), args[2:]
    tunnels = json.load(open(args[0]))
    least = int(args[1])
    errors, per_gw = [], []
    for path in args[2:]:
        s = json.load(open(path))
        if not s["totals"]["balanced"]:
            errors.append(f"{path}: counters do not balance: {s['totals']}")
        bad = {k: v for k, v in s["drops"].items() if v and k in BAD and k != "replayed"}
        if s["drops"].get("replayed", 0) != replayed * len(tunnels):
            bad["replayed"] = s["drops"].get("replayed", 0)
        if bad:
            errors.append(f"{path}: drops {bad}" + (f" (want replayed {replayed * len(tunnels)})" if replayed else ""))
        sas = {(sa["tunnel"], sa["dir"]): sa for sa in s["sas"]}
        low = []
        for t in tunnels:
            for d in ("out", "in"):
                sa = sas.get((t["name"], d))
                if sa is None:
                    errors.append(f"{path}: no {d} SA for {t['name']}")
                    continue
                if sa["packets"] < least:
                    low.append(f"{t['name']} {d} {sa['packets']}")
                sa_drops = {k: v for k, v in sa.get("drops", {}).items() if v and k != "mtu_exceeded"}
                want = {"replayed": replayed} if d == "in" and replayed else {}
                if sa_drops != want:
                    errors.append(f"{path}: {t['name']} {d} SA drops {sa_drops}, want {want}")
        if low:
            errors.append(f"{path}: SAs with fewer than {least} packets: {', '.join(low)}")
        per_gw.append(sas)
        total = sum(sa["packets"] for sa in s["sas"])
        print(f"{path.rsplit('/', 1)[-1]}: {len(s['sas'])} SAs, {total} ESP packets, rx {s['totals']['rx']} "
              f"tx {s['totals']['tx']}, drops {({k: v for k, v in s['drops'].items() if v})}")
    # Nothing lost between the gateways: what one encrypted, the other decrypted.
    if len(per_gw) == 2:
        a, b = per_gw
        for t in tunnels:
            for tx, rx, what in ((a, b, "A->B"), (b, a, "B->A")):
                sent = tx.get((t["name"], "out"), {}).get("packets")
                got = rx.get((t["name"], "in"), {}).get("packets")
                if sent != got:
                    errors.append(f"{t['name']} {what}: {sent} ESP packets sent, {got} decrypted")
    for e in errors:
        print("FAIL:", e)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
