#!/usr/bin/env bash
# Multi-core scaling of `espgw bench` on a machine that has no DPDK, no
# Rust and no network (the 16-core machine the `device` tool lends some
# sessions): build and pack here, carry the pack, run there.
#
#   bench/scaling.sh pack DIR
#       here: builds the release binary and copies it, every shared library
#       it loads (ldd, the dynamic loader included) and DPDK's mempool
#       driver into DIR (about 10 MB; DIR should be git-ignored, e.g.
#       target/scaling-pack, and named in the device tool's `carry`).
#   bench/scaling.sh one-tunnel OUT [WORKERS...]
#       here (or anywhere with ESPGW=path/to/espgw): one tunnel carried by
#       all workers (`espgw bench --tunnels 1`, docs/multicore.md):
#       aes128gcm16 at 64 and 1420 bytes, both directions, one run per N
#       (default: 2 and every power of two up to the CPUs, 16 at most;
#       each run also measures 1 worker, the efficiency's reference).
#       Writes OUT/one-tunnel-N.json and .txt and prints per N the
#       aggregate loop Mpps and the efficiency (N workers / N x 1 worker)
#       of the engine and worker layers. With TUNNELS=1, `run` below does
#       the same on the device machine. With PER_CPU_SAS=1 too, the one
#       tunnel runs on per-CPU SA pairs (`--per-cpu-sas`) instead. With
#       SPREAD=1, `--spread-decrypt` too: worker 0 receives the tunnel's
#       ESP and fans it out (one shared pair) or hands each SA to its
#       worker (PER_CPU_SAS=1: the per-CPU SA handoff). SIZES (default
#       64,1420), DIRECTION (default both) and BENCH_ARGS (more `espgw
#       bench` options, e.g. --streaming-rx or --max-simd-bitwidth 256)
#       change what each run measures.
#   TUNNELS=all bench/scaling.sh run DIR OUT [WORKERS...]
#       there: all four ways of carrying one tunnel, each as TUNNELS=1
#       does, into OUT/one-sa, OUT/fan-out (SPREAD=1), OUT/per-cpu-sas
#       (PER_CPU_SAS=1) and OUT/handoff (both). One mode with 1 2 4 8 16
#       workers and SECONDS_PER_LAYER=0.5 (the default) took 61 s on the
#       2-vCPU build machine (TUNNELS=1 SPREAD=1, session 17): about 4
#       minutes for all four.
#   bench/scaling.sh espgw DIR ARGS...
#       there: the packed espgw with ARGS (e.g. `bench ...`), as the runs
#       below start it.
#   bench/scaling.sh run DIR OUT [WORKERS...]
#       there: one `espgw bench --workers N` per N (default: 2 4 8 and all
#       CPUs), aes128gcm16 at 64, 1420 and imix, both directions; writes
#       OUT/scaling-N.json and OUT/scaling-N.txt and a summary table
#       OUT/scaling.txt. Uses hugepages if the machine has them, else plain
#       memory (the bench decides). Each N takes about 20 s.
#
# Why the loader too: the binary is built against this Debian's glibc; the
# other machine's may be older. Running it through the carried ld.so with
# --library-path makes the pack independent of what is installed there.
set -euo pipefail
cd "$(dirname "$0")/.."

# DPDK looks for its drivers in this compiled-in folder (and loads only
# names ending in .so or .so.23.0 there); the mempool ring driver
# (ring_mp_mc ops) must be there or no mempool can be created.
PMD_DIR=/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0
PMDS="librte_mempool_ring.so librte_bus_vdev.so"

pack() {
    local dir=$1
    cargo build --release --locked -q -p espgw
    local target
    target=$(cargo metadata --format-version 1 --no-deps |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
    rm -rf "$dir"
    mkdir -p "$dir/lib" "$dir/pmds"
    # Stripped: the debug info would be most of the pack.
    strip -o "$dir/espgw" "$target/release/espgw"
    ldd "$target/release/espgw" | awk '/=> \// {print $3} $1 ~ /^\// {print $1}' |
        sort -u | while read -r lib; do cp -L "$lib" "$dir/lib/"; done
    for p in $PMDS; do
        cp -L "$PMD_DIR/$p" "$dir/pmds/"
        # The drivers' own dependencies (librte_*), if not there yet.
        ldd "$PMD_DIR/$p" | awk '/=> \// {print $3}' | while read -r lib; do
            [ -e "$dir/lib/$(basename "$lib")" ] || cp -L "$lib" "$dir/lib/"
        done
    done
    git rev-parse HEAD >"$dir/COMMIT"
    du -sh "$dir"
}

# Runs one `espgw bench` ("$@", its --json being $3) with its output in
# $2, notes to $1 (and the terminal). A run in which some rows lost
# packets (the fan-out's reorder bound on a loaded machine) or a case
# failed exits 1 but writes its JSON all the same: that is part of the
# measurement, so it is noted and the next N still runs (a device run's
# time is scarce). Only a run that left no JSON fails (status 1, after the
# other Ns ran: see NO_JSON).
NO_JSON=0
bench_one() {
    local log=$1 txt=$2 json=$3
    shift 3
    rm -f "$json"
    local rc=0
    "$@" >"$txt" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        {
            echo "(exit $rc: $(grep -cE '\| (LOST|BAD|NO PACKETS)| FAILED: ' "$txt" || true) rows lost, failed or saw no packets, or cases failed; see $txt)"
            grep -E ' FAILED: |^espgw bench: ' "$txt" | tail -3 || true
        } | tee -a "$log"
    fi
    if [ ! -s "$json" ]; then
        { echo "no JSON from: $*"; tail -5 "$txt"; } | tee -a "$log"
        NO_JSON=$((NO_JSON + 1))
        return 1
    fi
}

# Makes the pack in $1 runnable here (root, DPDK's drivers where it looks
# for them) and sets ESPGW_CMD to its espgw run through the carried loader.
use_pack() {
    local dir=$1
    [ "$(id -u)" -eq 0 ] || { echo "needs root (DPDK)" >&2; exit 1; }
    mkdir -p "$PMD_DIR"
    for p in $PMDS; do
        [ -e "$PMD_DIR/$p" ] || cp "$dir/pmds/$p" "$PMD_DIR/"
    done
    local loader
    loader=$(ls "$dir"/lib/ld-linux-x86-64.so.* | head -1)
    ESPGW_CMD=("$loader" --library-path "$dir/lib" "$dir/espgw")
}

run() {
    local dir=$1 out=$2
    shift 2
    local cpus
    cpus=$(nproc)
    local workers=("$@")
    if [ ${#workers[@]} -eq 0 ]; then
        workers=()
        for n in 2 4 8; do [ "$n" -lt "$cpus" ] && workers+=("$n"); done
        workers+=("$cpus")
    fi
    dir=$(cd "$dir" && pwd)
    mkdir -p "$out"
    use_pack "$dir"
    echo "machine: $cpus CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), commit $(cat "$dir/COMMIT")" |
        tee "$out/scaling.txt"
    if [ "${TUNNELS:-}" = all ]; then
        # Every way of carrying one tunnel on N workers, one after the
        # other, each in its own folder: what a device session runs.
        local failed=0
        one_tunnel_mode "$out/one-sa" "" "" "${workers[@]}" || failed=1
        one_tunnel_mode "$out/fan-out" "" 1 "${workers[@]}" || failed=1
        one_tunnel_mode "$out/per-cpu-sas" 1 "" "${workers[@]}" || failed=1
        one_tunnel_mode "$out/handoff" 1 1 "${workers[@]}" || failed=1
        return $failed
    fi
    if [ -n "${TUNNELS:-}" ]; then
        one_tunnel_runs "$out" "${workers[@]}"
        return
    fi
    for n in "${workers[@]}"; do
        echo "== --workers $n" | tee -a "$out/scaling.txt"
        bench_one "$out/scaling.txt" "$out/scaling-$n.txt" "$out/scaling-$n.json" \
            "${ESPGW_CMD[@]}" bench --suite aes128gcm16 --sizes 64,1420,imix --direction both \
            --workers "$n" --seconds 0.5 --json "$out/scaling-$n.json" || continue
        { grep -E ' worker ' "$out/scaling-$n.txt" || true; } | tee -a "$out/scaling.txt"
    done
    [ "$NO_JSON" -eq 0 ]
}

# The summary of one `--tunnels 1` JSON: per layer, size and direction,
# the loop Mpps of 1 and of N workers and the efficiency, and the median
# stage cycles per packet of 1 and of N workers (what sharing the SA costs
# each packet, less disturbed by preemption than the wall-clock rates).
summary() {
    python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rows = r["results"]
for row in rows:
    if row["workers"] == 1 or row["layer"] not in ("engine", "worker"):
        continue
    one = next((x for x in rows if x["workers"] == 1 and all(
        x[k] == row[k] for k in ("suite", "size", "direction", "layer"))), None)
    if one is None:
        continue
    eff = row["efficiency"]
    print(f'{row["layer"]:7} {row["size"]:>5} {row["direction"]:8} tunnels {row["tunnels"]}'
          f' x1 {one["loop_mpps"]:7.3f} Mpps  x{row["workers"]} {row["loop_mpps"]:7.3f} Mpps'
          f'  efficiency {eff if eff is None else f"{eff:.2f}"}'
          f'  cyc/pkt p50 x1 {one["cycles_per_packet_p50"]:.0f} x{row["workers"]} {row["cycles_per_packet_p50"]:.0f}'
          f'  invalid {row["invalid"]}')
for f in r.get("failed_cases", []):
    print(f'FAILED {f["size"]:>5} {f["direction"]:8} x{f["workers"]}: {f["error"]}')
PY
}

one_tunnel_runs() {
    local out=$1
    shift
    mkdir -p "$out"
    local cpus
    cpus=$(nproc)
    local workers=("$@")
    if [ ${#workers[@]} -eq 0 ]; then
        for n in 2 4 8 16; do [ "$n" -le "$cpus" ] && workers+=("$n"); done
        [ ${#workers[@]} -eq 0 ] && workers=(2)
    fi
    local seconds=${SECONDS_PER_LAYER:-0.5}
    {
        echo "machine: $cpus CPUs,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
        echo "flags: $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2- | tr ' ' '\n' |
            grep -E '^(avx2|avx512f|avx512vl|vaes|vpclmulqdq|aes|pclmulqdq|sha_ni|hypervisor)$' | tr '\n' ' ')"
        echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    } | tee -a "$out/one-tunnel.txt"
    # PER_CPU_SAS=1: the tunnel on RFC 9611 per-CPU SA pairs, one per
    # worker (`--per-cpu-sas`), instead of one shared pair.
    local mode=(--tunnels 1)
    [ -n "${PER_CPU_SAS:-}" ] && mode=(--per-cpu-sas)
    # SPREAD=1: one receiving worker, the fan-out or the handoff.
    [ -n "${SPREAD:-}" ] && mode+=(--spread-decrypt)
    for n in "${workers[@]}"; do
        # shellcheck disable=SC2206 # BENCH_ARGS: words on purpose
        local cmd=("${ESPGW_CMD[@]}" bench --suite aes128gcm16 --sizes "${SIZES:-64,1420}"
            --direction "${DIRECTION:-both}" --workers "$n" "${mode[@]}" --seconds "$seconds"
            ${BENCH_ARGS:-} --json "$out/one-tunnel-$n.json")
        echo "== ${cmd[*]}" | tee -a "$out/one-tunnel.txt"
        bench_one "$out/one-tunnel.txt" "$out/one-tunnel-$n.txt" "$out/one-tunnel-$n.json" \
            "${cmd[@]}" || continue
        # The summary is a convenience (it needs python3): the JSON is the
        # measurement, so a machine without python3 still runs every N.
        { summary "$out/one-tunnel-$n.json" || echo "(no summary: python3 failed)"; } |
            tee -a "$out/one-tunnel.txt"
    done
    echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/one-tunnel.txt"
    [ "$NO_JSON" -eq 0 ]
}

# one_tunnel_runs into OUT with PER_CPU_SAS and SPREAD set to $2 and $3
# (empty: unset) for this call only.
one_tunnel_mode() {
    local out=$1 per_cpu=$2 spread=$3
    shift 3
    echo "== mode: $(basename "$out") (PER_CPU_SAS=${per_cpu:-} SPREAD=${spread:-})" | tee -a "$(dirname "$out")/scaling.txt"
    PER_CPU_SAS=$per_cpu SPREAD=$spread one_tunnel_runs "$out" "$@"
}

one_tunnel() {
    local out=$1
    shift
    local bin=${ESPGW:-}
    if [ -z "$bin" ]; then
        cargo build --release --locked -q -p espgw
        bin=$(cargo metadata --format-version 1 --no-deps |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/espgw
    fi
    ESPGW_CMD=("$bin")
    one_tunnel_runs "$out" "$@"
}

case "${1:-}" in
pack) [ $# -eq 2 ] || { echo "usage: $0 pack DIR" >&2; exit 2; }; pack "$2" ;;
one-tunnel) [ $# -ge 2 ] || { echo "usage: $0 one-tunnel OUT [WORKERS...]" >&2; exit 2; }; shift; one_tunnel "$@" ;;
run) [ $# -ge 3 ] || { echo "usage: $0 run DIR OUT [WORKERS...]" >&2; exit 2; }; shift; run "$@" ;;
espgw) [ $# -ge 2 ] || { echo "usage: $0 espgw DIR ARGS..." >&2; exit 2; }
    use_pack "$(cd "$2" && pwd)"; shift 2; exec "${ESPGW_CMD[@]}" "$@" ;;
*) sed -n '2,30p' "$0" >&2; exit 2 ;;
esac
