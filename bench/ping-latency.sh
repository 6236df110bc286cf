#!/usr/bin/env bash
# Round-trip time through the tunnel next to the direct link, on the demo
# topology (scripts/netns.sh, configs/static-a.toml and configs/static-b.toml, manual SAs),
# for an A/B of two builds:
#
#   sudo bench/ping-latency.sh [ESPGW_BINARY] [COUNT]   (default: this tree's release build, 100)
#
# Prints ping's summary line for host A -> host B through the tunnel and
# over the direct link, twice each, alternating; then the CPU each gateway
# process used over IDLE_SECONDS (default 5) of no traffic, the price of
# adaptive polling's short sleeps. IDLE_SLEEP_US=N sets both gateways'
# `[dataplane] idle_sleep_us` (scripts/gateways.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
if [ -n "${1:-}" ]; then
    ESPGW=$1
else
    cargo build --release --locked -q -p espgw
    ESPGW="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/espgw"
fi
COUNT=${2:-100}
export P=${ESPGW_NS_PREFIX:-eping} ESPGW
WORK=$(mktemp -d /tmp/espgw-ping.XXXXXX)
export WORK
GW_PIDS=()
# shellcheck source=../scripts/gateways.sh
source scripts/gateways.sh
trap 'gateways_down >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
gateways_up >/dev/null
for _ in 1 2; do
    printf 'tunnel  '; in_a ping -q -c "$COUNT" -i 0.02 -s 56 10.2.0.10 | tail -1
    printf 'direct  '; in_a ping -q -c "$COUNT" -i 0.02 -s 56 10.9.0.2 | tail -1
done
# utime + stime of each gateway process, in clock ticks.
cpu_ticks() { for p in "${GW_PIDS[@]}"; do awk '{print $14 + $15}' "/proc/$p/stat"; done; }
IDLE_SECONDS=${IDLE_SECONDS:-5}
before=($(cpu_ticks))
sleep "$IDLE_SECONDS"
after=($(cpu_ticks))
hz=$(getconf CLK_TCK)
for i in "${!after[@]}"; do
    echo "idle    gateway $i: $(( (after[i] - before[i]) * 100 / (hz * IDLE_SECONDS) )) % of a core over ${IDLE_SECONDS} s"
done
