#!/usr/bin/env bash
# What limits the scaling of `espgw bench` on a many-core machine: the
# checks of session 18 on the 16-core device machine (docs/multicore.md,
# "Sixteen cores"), after the first run there showed two limits.
#
#   bench/scaling.sh pack DIR                # here
#   bench/scaling-diagnose.sh DIR OUT [MAX]  # there, as root; MAX workers (default: all CPUs)
#
# 1. The decrypt fan-out and the per-CPU SA handoff, decrypt only, at
#    2 4 8 MAX workers (the sink now compares payloads in one burst of 16,
#    so the receiving worker no longer reads every byte a helper wrote).
# 2. The fan-out again with --streaming-rx (the generator writes packets
#    as a NIC's DMA would, not into lines a helper dirtied).
# 3. 1420-byte AES-GCM on MAX workers, a tunnel each: with 512-bit and
#    with 256-bit vectors (does wide VAES on every core lower the clock?).
# 4. 1420 bytes on MAX/2 workers on every other CPU against the first
#    MAX/2 CPUs (do neighbouring vCPUs share a core?).
# 5. The fan-out with --spread-parts 1 (each burst whole to one helper)
#    at 4 8 MAX workers.
# 6. The fan-out at MAX workers with 256-bit vectors.
# 7. Where 512-bit vectors stop paying: 1420 B on 4 and 8 workers, and
#    64 B and imix on MAX workers, with 512- and 256-bit vectors.
# CHECKS="1 5 7" runs only those (default: all).
# Writes OUT/<check>/... and OUT/diagnose.txt (the summary lines).
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,24p' "$0" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "needs root (DPDK)" >&2; exit 1; }
# DIR: absolute, or relative to the repository's root.
dir=$(cd "$1" && pwd) || exit 1
out=$2
max=${3:-$(nproc)}
[ "$max" -ge 2 ] || { echo "MAX: 2 or more workers" >&2; exit 2; }
mkdir -p "$out"
log="$out/diagnose.txt"
steal() { awk '/^cpu / {print "steal ticks: " $9}' /proc/stat; }
{
    echo "machine: $(nproc) CPUs,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), commit $(cat "$dir/COMMIT")"
    steal
} | tee "$log"

checks=${CHECKS:-1 2 3 4 5 6 7}
want() { [[ " $checks " == *" $1 "* ]]; }
ws=()
for n in 2 4 8; do [ "$n" -lt "$max" ] && ws+=("$n"); done
ws+=("$max")
# One fan-out (or handoff) series: its folder name, the env for
# scaling.sh, the worker counts.
series() {
    local name=$1 setting=$2
    shift 2
    # Only the named setting (one VAR=value word, or none) of the knobs
    # scaling.sh reads, whatever the caller exported.
    local knobs=(-u PER_CPU_SAS -u BENCH_ARGS -u SIZES -u DIRECTION -u SPREAD -u TUNNELS)
    # shellcheck disable=SC2086 # $setting: one word or none
    env "${knobs[@]}" $setting SPREAD=1 TUNNELS=1 DIRECTION=decrypt \
        bash bench/scaling.sh run "$dir" "$out/$name" "$@" >/dev/null 2>&1
    # The rows, and what failed: a case (FAILED), a run without JSON.
    grep -hE '^(worker|FAILED|no JSON|\(exit)' "$out/$name/one-tunnel.txt" | sed "s/^/$name  /" | tee -a "$log"
}
# One `espgw bench`, encrypt, a tunnel per worker: its name, the CPUs it
# may use, its options; prints the cipher and worker rows.
bench_on() {
    local name=$1 cpus=$2
    shift 2
    mkdir -p "$out/$name"
    local status=0
    taskset -c "$cpus" bash bench/scaling.sh espgw "$dir" bench --suite aes128gcm16 --direction encrypt \
        --seconds 0.5 "$@" --json "$out/$name/bench.json" >"$out/$name/bench.txt" 2>&1 || status=$?
    grep -E '^aes.* (cipher|worker) |^FAILED' "$out/$name/bench.txt" | sed "s/^/$name  /" | tee -a "$log"
    [ "$status" -eq 0 ] || echo "$name  (exit $status: see $out/$name/bench.txt)" | tee -a "$log"
}
at_1420() {
    local name=$1 cpus=$2
    shift 2
    bench_on "$name" "$cpus" --sizes 1420 "$@"
}
last=$((max - 1))
half=$((max / 2))
if want 1; then
echo "== 1. fan-out and handoff, decrypt, ${ws[*]} workers" | tee -a "$log"
series fan-out "" "${ws[@]}"
series handoff PER_CPU_SAS=1 "${ws[@]}"
fi
if want 2; then
echo "== 2. fan-out with --streaming-rx, 2 and $max workers" | tee -a "$log"
if [ "$max" -gt 2 ]; then
    series fan-out-streaming BENCH_ARGS=--streaming-rx 2 "$max"
else
    series fan-out-streaming BENCH_ARGS=--streaming-rx 2
fi
fi
if want 3; then
echo "== 3. 1420 B on $max workers, 512- and 256-bit vectors" | tee -a "$log"
at_1420 simd512 "0-$last" --workers "$max"
at_1420 simd256 "0-$last" --workers "$max" --max-simd-bitwidth 256
fi
if want 4 && [ "$half" -ge 2 ]; then
echo "== 4. 1420 B on $half workers: CPUs 0-$((half - 1)) against every other CPU" | tee -a "$log"
at_1420 first-half "0-$((half - 1))" --workers "$half"
at_1420 every-other "$(seq -s, 0 2 "$last")" --workers "$half"
fi
if want 5; then
echo "== 5. fan-out with --spread-parts 1" | tee -a "$log"
ps=()
for n in 4 8; do [ "$n" -lt "$max" ] && ps+=("$n"); done
ps+=("$max")
series fan-out-parts1 "BENCH_ARGS=--spread-parts=1" "${ps[@]}"
fi
if want 6; then
echo "== 6. fan-out on $max workers, 256-bit vectors" | tee -a "$log"
series fan-out-simd256 "BENCH_ARGS=--max-simd-bitwidth=256" "$max"
fi
if want 7; then
echo "== 7. 512- against 256-bit vectors: 1420 B on 4 and 8 workers, 64 B and imix on $max" | tee -a "$log"
for n in 4 8; do
    [ "$n" -lt "$max" ] || continue
    at_1420 "simd512-x$n" "0-$((n - 1))" --workers "$n"
    at_1420 "simd256-x$n" "0-$((n - 1))" --workers "$n" --max-simd-bitwidth 256
done
bench_on "small-simd512" "0-$last" --sizes 64,imix --workers "$max"
bench_on "small-simd256" "0-$last" --sizes 64,imix --workers "$max" --max-simd-bitwidth 256
fi
steal | tee -a "$log"
