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
# Writes OUT/<check>/... and OUT/diagnose.txt (the summary lines).
set -uo pipefail
cd "$(dirname "$0")/.."
dir=$(cd "$1" && pwd)
out=$2
max=${3:-$(nproc)}
mkdir -p "$out"
log="$out/diagnose.txt"
steal() { awk '/^cpu / {print "steal ticks: " $9}' /proc/stat; }
{
    echo "machine: $(nproc) CPUs,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), commit $(cat "$dir/COMMIT")"
    steal
} | tee "$log"

ws=()
for n in 2 4 8; do [ "$n" -lt "$max" ] && ws+=("$n"); done
ws+=("$max")
echo "== 1. fan-out and handoff, decrypt, ${ws[*]} workers" | tee -a "$log"
SPREAD=1 TUNNELS=1 DIRECTION=decrypt bash bench/scaling.sh run "$dir" "$out/fan-out" "${ws[@]}" >/dev/null 2>&1
grep -hE '^(worker|FAILED)' "$out/fan-out/one-tunnel.txt" | sed 's/^/fan-out  /' | tee -a "$log"
PER_CPU_SAS=1 SPREAD=1 TUNNELS=1 DIRECTION=decrypt bash bench/scaling.sh run "$dir" "$out/handoff" "${ws[@]}" >/dev/null 2>&1
grep -hE '^(worker|FAILED)' "$out/handoff/one-tunnel.txt" | sed 's/^/handoff  /' | tee -a "$log"

echo "== 2. fan-out with --streaming-rx, 2 and $max workers" | tee -a "$log"
BENCH_ARGS=--streaming-rx SPREAD=1 TUNNELS=1 DIRECTION=decrypt \
    bash bench/scaling.sh run "$dir" "$out/fan-out-streaming" 2 "$max" >/dev/null 2>&1
grep -hE '^(worker|FAILED)' "$out/fan-out-streaming/one-tunnel.txt" | sed 's/^/streaming  /' | tee -a "$log"

loader=$(ls "$dir"/lib/ld-linux-x86-64.so.* | head -1)
espgw=("$loader" --library-path "$dir/lib" "$dir/espgw")
# One `espgw bench` at 1420 B encrypt, a tunnel per worker: its name, the
# CPUs it may use, its options; prints the cipher and worker rows.
at_1420() {
    local name=$1 cpus=$2
    shift 2
    mkdir -p "$out/$name"
    taskset -c "$cpus" "${espgw[@]}" bench --suite aes128gcm16 --sizes 1420 --direction encrypt \
        --seconds 0.5 "$@" --json "$out/$name/bench.json" >"$out/$name/bench.txt" 2>&1
    grep -E '^aes.* (cipher|worker) ' "$out/$name/bench.txt" | sed "s/^/$name  /" | tee -a "$log"
}
last=$((max - 1))
echo "== 3. 1420 B on $max workers, 512- and 256-bit vectors" | tee -a "$log"
at_1420 simd512 "0-$last" --workers "$max"
at_1420 simd256 "0-$last" --workers "$max" --max-simd-bitwidth 256
half=$((max / 2))
echo "== 4. 1420 B on $half workers: CPUs 0-$((half - 1)) against every other CPU" | tee -a "$log"
at_1420 first-half "0-$((half - 1))" --workers "$half"
at_1420 every-other "$(seq -s, 0 2 "$last")" --workers "$half"
steal | tee -a "$log"
