#!/usr/bin/env bash
# The demo: host A - espgw A - ESP link - espgw B - host B, all in network
# namespaces on veth pairs (net_af_packet). Shows ping through the tunnel,
# iperf3 through the tunnel next to the direct link, that only ESP crosses
# the middle link, and the gateways' per-SA counters. Cleans up on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

if [ "$(id -u)" -ne 0 ]; then
    echo "the demo needs root (network namespaces, DPDK): sudo scripts/demo.sh" >&2
    exit 1
fi

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
T0=$(date +%s)
WORK=$(mktemp -d /tmp/espgw-demo.XXXXXX)
P=${ESPGW_NS_PREFIX:-eg}
ESPGW=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/espgw
. scripts/gateways.sh

cleanup() {
    set +e
    gateways_down
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "set-up"
scripts/setup.sh
cargo build --release --locked -p espgw 2>&1 | tail -n 2

say "topology: hosta - gwa ==ESP== gwb - hostb (plus a direct hosta-hostb link); starting both gateways"

gateways_up

say "ping host B (10.2.0.10) from host A through the tunnel"
in_a ping -c 5 -i 0.2 10.2.0.10 | tail -n 2

say "what crosses the middle link during ping + a short TCP run (tcpdump on gwa-unprot)"
in_b iperf3 -s -D -1 >/dev/null
ip netns exec $P-gwa timeout 4 tcpdump -i gwa-unprot -nn -q -c 2000 -w "$WORK/mid.pcap" 2>/dev/null &
TCPDUMP=$!
sleep 0.5
in_a ping -c 3 -i 0.2 10.2.0.10 >/dev/null
in_a iperf3 -c 10.2.0.10 -t 2 >/dev/null 2>&1 || true
wait $TCPDUMP 2>/dev/null || true
total=$(tcpdump -r "$WORK/mid.pcap" -nn 2>/dev/null | wc -l)
esp=$(tcpdump -r "$WORK/mid.pcap" -nn 'esp or (udp port 4500)' 2>/dev/null | wc -l)
arp=$(tcpdump -r "$WORK/mid.pcap" -nn 'arp' 2>/dev/null | wc -l)
echo "frames captured: $total   ESP: $esp   ARP: $arp   other: $((total - esp - arp))"
tcpdump -r "$WORK/mid.pcap" -nn -c 4 2>/dev/null

say "iperf3 TCP, 4 s each: direct link vs. through the tunnel"
tput() { python3 -c 'import json,sys; d=json.load(sys.stdin); e=d["end"]; s=e.get("sum_received") or e["sum"]; print("%.0f" % (s["bits_per_second"]/1e6))'; }
in_b iperf3 -s -D -1 >/dev/null; sleep 0.3
direct=$(in_a iperf3 -c 10.9.0.2 -t 4 -J | tput)
in_b iperf3 -s -D -1 >/dev/null; sleep 0.3
tunnel=$(in_a iperf3 -c 10.2.0.10 -t 4 -J | tput)
printf '%-28s %8s Mbit/s\n' "direct (veth)" "$direct" "through espgw (aes128gcm16)" "$tunnel"
python3 -c "print('ratio tunnel/direct: %.2f' % ($tunnel / max($direct, 1)))"

say "iperf3 UDP 1350-byte datagrams at 500 Mbit/s offered, through the tunnel"
in_b iperf3 -s -D -1 >/dev/null; sleep 0.3
in_a iperf3 -c 10.2.0.10 -u -b 500M -l 1350 -t 3 | grep -E 'receiver' || true

say "gateway counters"
if [ -S "$WORK/a.sock" ]; then
    "$ESPGW" ctl --socket "$WORK/a.sock" sa list || true
fi
gateways_stop
for g in a b; do
    echo "-- gateway $g (final counters, --stats-json)"
    python3 - "$WORK/$g.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for sa in s.get("sas", []):
    print("  SA %-10s %-3s spi=0x%08x packets=%-9d bytes=%-11d drops=%s" % (
        sa.get("tunnel", "?"), sa.get("dir", "?"), sa.get("spi", 0), sa.get("packets", 0),
        sa.get("bytes", 0), {k: v for k, v in sa.get("drops", {}).items() if v}))
for port in s.get("ports", []):
    print("  port %-10s rx=%-9d tx=%-9d" % (port.get("name", "?"), port.get("rx_packets", 0), port.get("tx_packets", 0)))
drops = {k: v for k, v in s.get("drops", {}).items() if v}
print("  drops by reason:", drops or "none")
PY
done

say "done in $(( $(date +%s) - T0 ))s"
