#!/usr/bin/env python3
"""Counter checks shared by the two-gateway end-to-end tests.

  counters.py drops [--expect REASON=N]... STATS_JSON...
      Every drop reason in each `espgw run --stats-json` file is zero,
      gateway-wide and on every SA listed there, except each REASON, which
      must be exactly N gateway-wide (and may appear on SAs). A reason the
      gateway does not know is an error, so a typo cannot pass.

  counters.py tunnels A_CTL_JSON B_CTL_JSON TUNNEL_A:TUNNEL_B...
      From `espgw ctl stats --json` of gateway A and B, taken once the
      traffic stopped: the tunnel totals (every SA the tunnel ever had,
      replaced ones included, so they span rekeys). For each named tunnel
      pair: the ESP packets A's tunnel encrypted == those B's decrypted,
      and the other way round; and no ESP drop on any of them.
"""
import json
import sys


def nonzero(d):
    return {k: v for k, v in d.items() if v}


def drops(args):
    expect = {}
    while args and args[0] == "--expect":
        reason, _, n = args[1].partition("=")
        expect[reason] = int(n)
        args = args[2:]
    errors = []
    for path in args:
        s = json.load(open(path))
        name = path.rsplit("/", 1)[-1]
        for reason in expect:
            if reason not in s["drops"]:
                errors.append(f"{name}: no drop reason {reason!r}")
        gw = nonzero(s["drops"])
        for reason, v in gw.items():
            if expect.get(reason) is None:
                errors.append(f"{name}: drops[{reason}] = {v}, want 0")
        for reason, want in expect.items():
            if s["drops"].get(reason, 0) != want:
                errors.append(f"{name}: drops[{reason}] = {s['drops'].get(reason, 0)}, want {want}")
        for sa in s["sas"]:
            for reason, v in nonzero(sa.get("drops", {})).items():
                if reason not in expect:
                    errors.append(f"{name}: {sa['tunnel']} {sa['dir']} SA {sa['spi']:#x}: drops[{reason}] = {v}, want 0")
        if not s["totals"]["balanced"]:
            errors.append(f"{name}: counters do not balance: {s['totals']}")
        print(f"{name}: drops {gw or 'none'}" + (f" (expected {expect})" if expect else ""))
    return errors


def tunnels(args):
    a, b = (json.load(open(p)) for p in args[:2])
    errors = []

    def totals(s, gw):
        t = {(x["tunnel"], x["dir"]): x for x in s["tunnels"]}
        for x in s["tunnels"]:
            for reason, v in nonzero(x["drops"]).items():
                errors.append(f"{gw} {x['tunnel']} {x['dir']}: drops[{reason}] = {v} over its SAs")
        return t

    ta, tb = totals(a, "A"), totals(b, "B")
    for pair in args[2:]:
        na, nb = pair.split(":")
        for tx, ntx, rx, nrx, what in ((ta, na, tb, nb, "A->B"), (tb, nb, ta, na, "B->A")):
            sent = tx.get((ntx, "out"), {}).get("packets")
            got = rx.get((nrx, "in"), {}).get("packets")
            print(f"{what}: {sent} ESP packets encrypted by {ntx}, {got} decrypted by {nrx} (every SA, rekeys included)")
            if sent is None or got is None or sent != got or sent == 0:
                errors.append(f"{what}: {sent} ESP packets sent, {got} decrypted")
    return errors


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("drops", "tunnels"):
        raise SystemExit(__doc__)
    errors = (drops if sys.argv[1] == "drops" else tunnels)(sys.argv[2:])
    for e in errors:
        print("FAIL:", e)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
