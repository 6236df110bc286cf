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
    [ "$(id -u)" -eq 0 ] || { echo "needs root (DPDK)" >&2; exit 1; }
    dir=$(cd "$dir" && pwd)
    mkdir -p "$out" "$PMD_DIR"
    for p in $PMDS; do
        [ -e "$PMD_DIR/$p" ] || cp "$dir/pmds/$p" "$PMD_DIR/"
    done
    local loader
    loader=$(ls "$dir"/lib/ld-linux-x86-64.so.* | head -1)
    local espgw=("$loader" --library-path "$dir/lib" "$dir/espgw")
    echo "machine: $cpus CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), commit $(cat "$dir/COMMIT")" |
        tee "$out/scaling.txt"
    for n in "${workers[@]}"; do
        echo "== --workers $n" | tee -a "$out/scaling.txt"
        "${espgw[@]}" bench --suite aes128gcm16 --sizes 64,1420,imix --direction both \
            --workers "$n" --seconds 0.5 --json "$out/scaling-$n.json" >"$out/scaling-$n.txt" 2>&1 ||
            { tail -5 "$out/scaling-$n.txt"; exit 1; }
        grep -E ' worker ' "$out/scaling-$n.txt" | tee -a "$out/scaling.txt"
    done
}

case "${1:-}" in
pack) [ $# -eq 2 ] || { echo "usage: $0 pack DIR" >&2; exit 2; }; pack "$2" ;;
run) [ $# -ge 3 ] || { echo "usage: $0 run DIR OUT [WORKERS...]" >&2; exit 2; }; shift; run "$@" ;;
*) sed -n '2,20p' "$0" >&2; exit 2 ;;
esac
