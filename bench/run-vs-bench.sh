#!/usr/bin/env bash
# Issue 5's cross-check: the rate `espgw run` reaches with real DPDK ports
# against what `espgw bench` reports for the same case. A net_pcap port
# replays a capture of protected-side frames in a loop (infinite_rx=1) into
# one worker, which encrypts them out of a net_null port (no-rx=1: it would
# otherwise generate empty frames for the worker to drop); the rate is the
# unprotected port's TX count over the run (the --stats-json port counters,
# taken from DPDK's own ethdev stats) divided by the time.
#
#   sudo bench/run-vs-bench.sh [SIZE] [SECONDS]     (default 1420 bytes, 5 s)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-1420} SECS=${2:-5}
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
WORK=$(mktemp -d /tmp/espgw-rvb.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cargo build --release --locked -q -p espgw
ESPGW="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/espgw"
PROT_MAC=02:00:00:00:01:01

# 64 frames of SIZE-byte inner IPv4/UDP packets from host A to host B,
# addressed to the gateway's protected port.
python3 - "$WORK/in.pcap" "$SIZE" "$PROT_MAC" <<'PY'
import sys
from scapy.all import Ether, IP, UDP, Raw, wrpcap
path, size, mac = sys.argv[1], int(sys.argv[2]), sys.argv[3]
frames = [Ether(src="02:00:00:00:00:0a", dst=mac) / IP(src="10.1.0.10", dst="10.2.0.10", flags="DF")
          / UDP(sport=10000 + i, dport=5201) / Raw(b"x" * (size - 28)) for i in range(64)]
wrpcap(path, frames)
PY

cat >"$WORK/gw.toml" <<T
[gateway]
name = "rvb"
control_socket = "$WORK/ctl.sock"
[dataplane]
workers = 1
poll = "busy"
mtu = 1500
eal = ["--no-huge", "--no-shconf", "-m", "512", "--no-pci"]
[[port]]
name = "prot"
side = "protected"
device = "net_pcap0,rx_pcap=$WORK/in.pcap,infinite_rx=1"
address = "10.1.0.1/24"
mac = "$PROT_MAC"
[[port]]
name = "unprot"
side = "unprotected"
device = "net_null0,no-rx=1"
address = "192.0.2.1/24"
[[neighbor]]
address = "192.0.2.2"
mac = "02:00:00:00:02:02"
port = "unprot"
[[tunnel]]
name = "t"
local = "192.0.2.1"
remote = "192.0.2.2"
local_ts = ["10.1.0.0/24"]
remote_ts = ["10.2.0.0/24"]
esp = "aes128gcm16"
out = { spi = 0x1001, key = "000102030405060708090a0b0c0d0e0f10111213" }
in = { spi = 0x2001, key = "202122232425262728292a2b2c2d2e2f30313233" }
T
chmod 600 "$WORK/gw.toml"
"$ESPGW" run --config "$WORK/gw.toml" --duration "$SECS" --stats-json "$WORK/stats.json" --log warn >"$WORK/run.log" 2>&1 \
    || { cat "$WORK/run.log"; exit 1; }
"$ESPGW" bench --suite aes128gcm16 --sizes "$SIZE" --direction encrypt --seconds 1 --json "$WORK/bench.json" >/dev/null 2>&1
python3 - "$WORK/stats.json" "$WORK/bench.json" "$SECS" "$SIZE" <<'PY'
import json, sys
stats, bench, secs, size = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), float(sys.argv[3]), int(sys.argv[4])
ports = {p["name"]: p for p in stats["ports"]}
run_mpps = ports["unprot"]["tx_packets"] / secs / 1e6
rows = bench["rows"] if "rows" in bench else bench["results"]
worker = next(r for r in rows if r.get("layer") == "worker")
loop = worker.get("loop_mpps") or worker.get("loop_rate_mpps")
stage = worker.get("mpps")
print("espgw run (net_pcap -> worker -> net_null), %d B, %.0f s: %.2f Mpps (%.1f Gbit/s inner); drops %s" % (
    size, secs, run_mpps, run_mpps * size * 8 / 1e3, {k: v for k, v in stats["drops"].items() if v}))
print("espgw bench, same case, worker layer: stage %.2f Mpps, whole loop %.2f Mpps" % (stage, loop))
print("run / bench loop: %.2f   run / bench stage: %.2f" % (run_mpps / loop, run_mpps / stage))
PY
