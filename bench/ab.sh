#!/usr/bin/env bash
# Two builds of espgw against each other, the way every before/after in
# docs/crypto.md and docs/benchmarks.md since session 10 was measured:
# `espgw bench` runs of build A and build B taken in turn (A B A B ...),
# so that the shared machine's slow and quiet phases fall on both alike,
# then per case and layer the median over the runs of each build's p50
# cycles per packet (`cycles_per_packet_p50`: the median burst, so a
# preempted burst does not move it) and of its "x ceil" (layer cycles
# against the cipher layer of the same run, which the phases move least).
# Every run's JSON stays in OUT for bench/results.
#
#   sudo bench/ab.sh A_BINARY B_BINARY OUT RUNS [espgw bench options...]
#   e.g. cp target/release/espgw /tmp/espgw-before   (build, change, build)
#        sudo bench/ab.sh /tmp/espgw-before target/release/espgw /tmp/ab 8 \
#            --suite aes128gcm16 --sizes 64,1420 --seconds 0.7
#
# Prints one line per case and layer: the two medians, B - A, and the
# per-run values in run order (look at them: on this machine a run in a
# noisy phase moves every layer of both builds by 20-30 %, which the
# alternation spreads over both but a median of few runs may still
# show). Build B is "better" only where the difference repeats in the
# quiet runs; docs record the runs, not only the medians.
set -euo pipefail

if [ $# -lt 4 ]; then
    sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
a=$1 b=$2 out=$3 runs=$4
shift 4
for bin in "$a" "$b"; do
    [ -x "$bin" ] || { echo "bench/ab.sh: $bin is not an executable" >&2; exit 2; }
done
case $runs in '' | *[!0-9]*) echo "bench/ab.sh: RUNS must be a number, not '$runs'" >&2; exit 2 ;; esac
mkdir -p "$out"
grep -o -m1 '^flags.*' /proc/cpuinfo | tr ' ' '\n' |
    grep -xE 'aes|avx2|avx512f|avx512bw|avx512vl|vaes|vpclmulqdq|sha_ni' | tr '\n' ' ' |
    sed 's/^/cpu flags: /; s/$/\n/'
for i in $(seq 1 "$runs"); do
    for side in a b; do
        bin=$a
        [ $side = b ] && bin=$b
        "$bin" bench "$@" --json "$out/$side-$i.json" > "$out/$side-$i.txt" 2>&1 || {
            echo "bench/ab.sh: run $i of $bin failed (see $out/$side-$i.txt)" >&2
            exit 1
        }
    done
done
python3 - "$out" "$runs" "$a" "$b" <<'PY'
import json
import statistics
import sys

out, runs, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = {}
for side in ("a", "b"):
    for i in range(1, runs + 1):
        for r in json.load(open("%s/%s-%d.json" % (out, side, i)))["results"]:
            key = (r["suite"], r["size"], r["direction"], r["workers"], r["layer"])
            rows.setdefault(key, {"a": [], "b": []})[side].append(
                (r["cycles_per_packet_p50"], r["ratio_to_ceiling"]))
print("A = %s, B = %s, %d runs each, alternating" % (a, b, runs))
print("%-12s %5s %-7s %2s %-6s | %8s %8s %7s | %6s %6s | p50 per run, A then B"
      % ("suite", "size", "dir", "W", "layer", "A p50", "B p50", "B - A", "A ceil", "B ceil"))
for key in sorted(rows, key=lambda k: (k[0], str(k[1]), k[2], k[3], k[4])):
    va, vb = rows[key]["a"], rows[key]["b"]
    ma = statistics.median(x[0] for x in va)
    mb = statistics.median(x[0] for x in vb)
    ca = statistics.median(x[1] for x in va)
    cb = statistics.median(x[1] for x in vb)
    print("%-12s %5s %-7s %2d %-6s | %8.1f %8.1f %+7.1f | %6.3f %6.3f | %s / %s" % (
        key + (ma, mb, mb - ma, ca, cb,
               " ".join("%.0f" % x[0] for x in va), " ".join("%.0f" % x[0] for x in vb))))
PY
