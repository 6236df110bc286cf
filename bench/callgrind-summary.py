#!/usr/bin/env python3
"""Instructions per call of the functions that matter in an espgw bench
callgrind profile, and where they go.

    ESPGW_BENCH_NO_HUGEPAGES=1 valgrind --tool=callgrind --callgrind-out-file=cg.out \
        target/release/espgw bench --suite aes128gcm16 --sizes 64 --direction encrypt --seconds 2
    bench/callgrind-summary.py cg.out [FUNCTION_SUBSTRING ...]

Reads `callgrind_annotate --inclusive=yes --tree=both`: for each function
whose name contains one of the substrings, prints its inclusive
instructions per call (calls = the sum over its callers) and its callees'
instructions per call of it. `Worker::process_burst` is inlined into the
bench's stage closure (`.../crates/dataplane/src/worker...:...worker::stage`): that
block has no call count, so it is divided by its callees' largest call
count, the packets.
"""

import re
import subprocess
import sys

DEFAULT = [
    "EspCipher>::seal",
    "EspCipher>::open",
    "OutboundSa::encap_burst",
    "InboundSa::decap_burst",
    ":espgw_bench::layers::worker::stage",
    "Worker<B,P>::run_outbound",
    "Worker<B,P>::protected_transit",
    "Worker<B,P>::route_out",
]

LINE = re.compile(r"^\s*([\d,]+) \([\s\d.]+%\)\s+([<>*])\s+(.*?)(?: \((\d[\d,]*)x\))?(?: \[.*\])?$")


def num(s):
    return int(s.replace(",", ""))


def blocks(text):
    """Yields (name, inclusive, callers, callees) per function block."""
    block = []
    for line in text.splitlines() + [""]:
        if line.strip():
            block.append(line)
            continue
        if not block:
            continue
        name, incl, callers, callees = None, 0, [], []
        for b in block:
            m = LINE.match(b)
            if not m:
                continue
            ir, kind, fn, calls = num(m.group(1)), m.group(2), m.group(3), m.group(4)
            calls = num(calls) if calls else 0
            if kind == "*":
                name, incl = fn, ir
            elif kind == "<":
                callers.append((fn, ir, calls))
            else:
                callees.append((fn, ir, calls))
        if name:
            yield name, incl, callers, callees
        block = []


def short(fn):
    fn = fn.split(":", 1)[-1] if fn.startswith("/") else fn
    return fn[:110]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    wanted = sys.argv[2:] or DEFAULT
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--tree=both", sys.argv[1]],
        capture_output=True, text=True, check=True,
    ).stdout
    for name, incl, callers, callees in blocks(text):
        if not any(w in name for w in wanted):
            continue
        calls = sum(c for _, _, c in callers)
        if "/crates/bench/" in name:
            continue  # the bench's own loop (generator and sink included)
        if calls == 0:
            # Code inlined into its caller (e.g. process_burst into the
            # bench's stage closure): no call count of its own. Divide by
            # the packets instead: the largest per-packet callee count.
            calls = max((c for _, _, c in callees), default=0)
            if calls == 0 or "worker::stage" not in name:
                continue
            print(f"{incl / calls:10.0f} Ir/packet {calls:>9} packets  {short(name)} (inlined)")
        else:
            print(f"{incl / calls:10.0f} Ir/call  {calls:>9} calls  {short(name)}")
        for fn, ir, c in sorted(callees, key=lambda x: -x[1])[:12]:
            if ir * 100 < incl:
                continue
            print(f"{ir / calls:10.0f}     of it  {c:>9} calls  {short(fn)}")
        print()


if __name__ == "__main__":
    main()
