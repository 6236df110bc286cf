#!/usr/bin/env bash
# End to end through the real EAL with net_pcap ports: a pcap of mixed
# traffic made by scapy (ARP, ping, IPv4 and IPv6 for the tunnel, oversize
# with and without DF, TTL 1, no policy, garbage, neighbor solicitation,
# and ESP made by scapy: genuine, replayed, tampered, unknown SPI, outside
# the selectors) goes into `espgw run`; every frame must be accounted for
# in the counters with the expected reason, and the ESP espgw sends must
# decrypt with scapy's independent ESP implementation.
#
# Needs root. ESPGW overrides the binary (default target/release/espgw).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
ESPGW=${ESPGW:-$ROOT/target/release/espgw}
WORK=$(mktemp -d /tmp/espgw-e2e-pcap.XXXXXX)
cleanup() { [ -n "${KEEP:-}" ] || rm -rf "$WORK"; }
trap cleanup EXIT

. scripts/skip.bash
[ "$(id -u)" -eq 0 ] || skip "needs root"
[ -x "$ESPGW" ] || { echo "FAIL: no binary at $ESPGW (cargo build --release -p espgw)"; exit 1; }

# Both modes: run to completion with one worker, and the pipeline (an I/O
# lcore steering flows to two workers over rings).
for mode in run-to-completion:1 pipeline:2; do
MODE=${mode%:*} WORKERS=${mode#*:}
D="$WORK/$MODE"
mkdir -p "$D"
echo "--- mode $MODE, $WORKERS worker(s)"
python3 tests/e2e/pcap_traffic.py gen "$D"

# gateway.toml's tunnel and keys, with pcap ports and static neighbors
# (a pcap cannot answer ARP).
cat >"$D/gw.toml" <<TOML
default_action = "discard"
[gateway]
name = "gw-pcap"
# A fresh state directory per run: the scapy-made ESP starts at sequence 1
# every time (a kept state would count it as replayed, tests/e2e/nonce.sh).
state_dir = "$D/state"
[dataplane]
workers = $WORKERS
mode = "$MODE"
mtu = 1500
poll = "adaptive"
eal = ["--no-huge", "--no-shconf", "--no-pci", "-m", "256", "--log-level=lib.eal:warning"]
[[port]]
name = "prot"
side = "protected"
device = "net_pcap0,rx_pcap=$D/prot_in.pcap,tx_pcap=$D/prot_out.pcap"
address = ["10.1.0.1/24", "fd00:1::1/64"]
mac = "02:00:00:00:01:01"
[[port]]
name = "unprot"
side = "unprotected"
device = "net_pcap1,rx_pcap=$D/unprot_in.pcap,tx_pcap=$D/unprot_out.pcap"
address = "192.0.2.1/24"
mac = "02:00:00:00:01:02"
[[neighbor]]
address = "10.1.0.10"
mac = "02:00:00:00:0a:0a"
port = "prot"
[[neighbor]]
address = "fd00:1::10"
mac = "02:00:00:00:0a:0a"
port = "prot"
[[neighbor]]
address = "192.0.2.2"
mac = "02:00:00:00:0b:02"
port = "unprot"
[[tunnel]]
name = "to-gw-b"
local = "192.0.2.1"
remote = "192.0.2.2"
local_ts = ["10.1.0.0/24", "fd00:1::/64"]
remote_ts = ["10.2.0.0/24", "fd00:2::/64"]
esp = "aes128gcm16"
replay_window = 1024
out = { spi = 0x0000a001, key = "0xbef3215147135cd554e9156cae70f5a899331a52" }
in = { spi = 0x0000b001, key = "0x9b890a06962125b8925af8d8f76eac664799f983" }
TOML
chmod 600 "$D/gw.toml"

# Run to completion runs under `taskset -c` of the last CPU this shell may
# use: the EAL's floating lcores must stay in that mask (before session
# 20 they went to CPU 0 and up, as many as the mask had).
PIN=()
if [ "$MODE" = run-to-completion ] && command -v taskset >/dev/null; then
    LAST=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')
    PIN=(taskset -c "$LAST")
fi
${PIN[@]+"${PIN[@]}"} "$ESPGW" run --config "$D/gw.toml" --duration 3 --stats-json "$D/stats.json" >"$D/run.log" 2>&1 \
    || { rc=$?; cat "$D/run.log"; echo "FAIL: espgw run exited with $rc"; exit 1; }
if [ ${#PIN[@]} -gt 0 ]; then
    grep -q -- "EAL --lcores=(0-1)@($LAST) " "$D/run.log" ||
        { grep EAL "$D/run.log"; echo "FAIL: under taskset -c $LAST the lcores left the mask"; exit 1; }
    echo "under taskset -c $LAST: --lcores=(0-1)@($LAST)"
fi
python3 tests/e2e/pcap_traffic.py check "$D" "$D/stats.json" || { cat "$D/run.log"; exit 1; }
done
