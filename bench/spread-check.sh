#!/usr/bin/env bash
# The decrypt fan-out with and without its live check
# (`[dataplane] spread_recheck_ms`, crates/dataplane/src/spread_trial.rs),
# taken in turn on the same machine: per round, the cores' cache-line
# round trip (bench/c2c-latency.c, the number the start-up probe reads),
# then `espgw bench --workers 2 --tunnels 1 --spread-decrypt` without the
# check (the fan-out always on while the receiving worker is behind) and
# with it (`--spread-recheck-ms RECHECK`). A hypervisor that moves the
# vCPUs between rounds (this machine's does, every few minutes) shows
# whether the check follows: with the cores apart the fan-out alone runs
# at about 0.57x one worker at 64 B, and the check should bring the row
# back to about one worker (efficiency 0.5); with them close it should
# keep the fan-out's gain.
#
#   sudo bench/spread-check.sh OUT ROUNDS [RECHECK_MS] [espgw bench options...]
#   e.g. sudo ESPGW=target/release/espgw bench/spread-check.sh /tmp/sc 8 200 \
#            --suite aes128gcm16 --sizes 64,1420 --seconds 1
#
# Prints one line per round, size and way (efficiency: the 2-worker loop
# rate over twice the 1-worker's, same run), the trials' verdicts (on,
# off, keeping up, no helper) and their median rates with / without the
# fan-out. Every run's JSON and
# the round trips stay in OUT for bench/results.
set -euo pipefail

if [ $# -lt 2 ]; then
    sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
out=$1 rounds=$2
recheck=${3:-200}
shift 2
[ $# -gt 0 ] && shift
case $rounds in '' | *[!0-9]*) echo "bench/spread-check.sh: ROUNDS must be a number" >&2; exit 2 ;; esac
case $recheck in '' | *[!0-9]*) echo "bench/spread-check.sh: RECHECK_MS must be a number" >&2; exit 2 ;; esac
[ $# -gt 0 ] || set -- --suite aes128gcm16 --sizes 64,1420 --seconds 1
espgw=${ESPGW:-target/release/espgw}
[ -x "$espgw" ] || { echo "bench/spread-check.sh: no $espgw (cargo build --release)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
cc -O2 -pthread -o "$out/c2c" "$here/c2c-latency.c"
grep -o -m1 '^flags.*' /proc/cpuinfo | tr ' ' '\n' |
    grep -xE 'aes|avx2|avx512f|avx512bw|avx512vl|vaes|vpclmulqdq|sha_ni' | tr '\n' ' ' |
    sed 's/^/cpu flags: /; s/$/\n/' | tee "$out/machine.txt"
grep -m1 'model name' /proc/cpuinfo | tee -a "$out/machine.txt"
for i in $(seq 1 "$rounds"); do
    "$out/c2c" 0 1 > "$out/c2c-$i.txt" 2>&1 || true
    for side in off on; do
        extra=()
        [ $side = on ] && extra=(--spread-recheck-ms "$recheck")
        "$espgw" bench "$@" --direction decrypt --workers 2 --tunnels 1 --spread-decrypt \
            "${extra[@]}" --json "$out/$side-$i.json" > "$out/$side-$i.txt" 2>&1 || true
        [ -s "$out/$side-$i.json" ] || {
            echo "bench/spread-check.sh: round $i ($side) wrote no JSON (see $out/$side-$i.txt)" >&2
            exit 1
        }
    done
done
python3 - "$out" "$rounds" <<'PY'
import json
import re
import statistics
import sys

out, rounds = sys.argv[1], int(sys.argv[2])
print("round  c2c_ns  size  check  eff    trials(on/off/up/nh)  with/without Mpps (median)")
for i in range(1, rounds + 1):
    c2c = open("%s/c2c-%d.txt" % (out, i)).read()
    m = re.findall(r"p50 ([0-9.]+) ns", c2c)
    c2c_ns = statistics.median(float(x) for x in m) if m else float("nan")
    for side in ("off", "on"):
        for r in json.load(open("%s/%s-%d.json" % (out, side, i)))["results"]:
            if r["layer"] != "worker" or r["workers"] != 2:
                continue
            t = r.get("spread_trials", {})
            pps = r.get("spread_trial_pps", [])
            rates = "-"
            if pps:
                w = statistics.median(p[0] for p in pps) / 1e6
                wo = statistics.median(p[1] for p in pps) / 1e6
                rates = "%.2f / %.2f" % (w, wo)
            print("%5d  %6.0f  %4s  %5s  %.3f  %d/%d/%d/%d  %s" % (
                i, c2c_ns, r["size"], side, r["efficiency"],
                t.get("on", 0), t.get("off", 0), t.get("keeping_up", 0), t.get("no_helper", 0), rates))
PY
