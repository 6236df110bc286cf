#!/usr/bin/env bash
# The demo: host A - espgw A - ESP link - espgw B - host B, all in network
# namespaces on veth pairs (net_af_packet). The gateways (gateway.toml,
# configs/gateway-b.toml) key their tunnel with IKEv2 and a pre-shared key
# (configs/demo.psk): no ESP key is written anywhere. Shows the negotiated
# proposals, ping through the tunnel, that only IKE and ESP cross the
# middle link, iperf3 through the tunnel next to the direct link with a
# CHILD_SA rekey in the middle of it (SPIs before and after, a ping running
# across it), and the gateways' per-SA counters. Cleans up on exit.
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
ESPGW=${ESPGW:-$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/espgw}
# The IKEv2 pair (scripts/gateways.sh defaults to the manual-SA pair).
GW_CONFIG_A=gateway.toml
GW_CONFIG_B=configs/gateway-b.toml
. scripts/gateways.sh
ctl() { "$ESPGW" ctl --socket "$WORK/$1.sock" "${@:2}"; }
# child_spis SIDE: "in 0x... out 0x..." of the CHILD_SA in SIDE's ike list.
child_spis() {
    ctl "$1" ike list --json | python3 -c 'import json,sys
c = [c for s in json.load(sys.stdin)["sas"] for c in s["children"]]
print(" ".join("in %#010x out %#010x" % (x["in_spi"], x["out_spi"]) for x in c) or "none")'
}

cleanup() {
    set +e
    gateways_down
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "set-up"
scripts/setup.sh
if [ -z "${ESPGW_NO_BUILD:-}" ]; then cargo build --release --locked -p espgw 2>&1 | tail -n 2; fi

say "topology: hosta - gwa ==ESP== gwb - hostb (plus a direct hosta-hostb link); starting both gateways"
echo "gateway A initiates IKEv2 (start_action \"start\"), gateway B answers (\"none\"); PSK from configs/demo.psk"

gateways_up

say "negotiated by IKEv2 (espgw ctl ike list)"
for g in a b; do
    echo "-- gateway $g"
    ctl $g ike list
done
ctl a ike list --json | python3 -c 'import json,sys
for s in json.load(sys.stdin)["sas"]:
    for c in s["children"]:
        print("IKE proposal: %s   ESP: %s (tunnel %s)" % (s["proposal"], c["suite"], c["tunnel"]))'

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
ike=$(tcpdump -r "$WORK/mid.pcap" -nn 'udp port 500' 2>/dev/null | wc -l)
arp=$(tcpdump -r "$WORK/mid.pcap" -nn 'arp' 2>/dev/null | wc -l)
echo "frames captured: $total   ESP (and UDP 4500): $esp   IKE (UDP 500): $ike   ARP: $arp   other: $((total - esp - ike - arp))"
tcpdump -r "$WORK/mid.pcap" -nn -c 4 2>/dev/null

say "iperf3 TCP, 4 s each: direct link vs. through the tunnel, rekeying the CHILD_SA 2 s into it"
tput() { python3 -c 'import json,sys; d=json.load(sys.stdin); e=d["end"]; s=e.get("sum_received") or e["sum"]; print("%.0f" % (s["bits_per_second"]/1e6))'; }
in_b iperf3 -s -D -1 >/dev/null; sleep 0.3
direct=$(in_a iperf3 -c 10.9.0.2 -t 4 -J | tput)
in_b iperf3 -s -D -1 >/dev/null; sleep 0.3
before=$(child_spis a)
in_a iperf3 -c 10.2.0.10 -t 4 -J >"$WORK/iperf-tunnel.json" &
IPERF=$!
in_a ping -c 30 -i 0.1 -W 1 10.2.0.10 >"$WORK/ping-rekey.log" 2>&1 &
PING=$!
sleep 2
echo "CHILD_SA on A before: $before"
ctl a ike rekey to-gw-b --child net
after=$before
for _ in $(seq 1 30); do
    after=$(child_spis a)
    [ "$after" != "$before" ] && break
    sleep 0.1
done
echo "CHILD_SA on A after:  $after   (on B: $(child_spis b))"
wait $IPERF || true
wait $PING || true
tunnel=$(tput <"$WORK/iperf-tunnel.json")
printf '%-28s %8s Mbit/s\n' "direct (veth)" "$direct" "through espgw (aes128gcm16)" "$tunnel"
python3 -c "print('ratio tunnel/direct: %.2f' % ($tunnel / max($direct, 1)))"
echo "the tunnel's transfer second by second (the rekey came at about 2 s):"
python3 - "$WORK/iperf-tunnel.json" <<'PY'
import json, sys
for i in json.load(open(sys.argv[1]))["intervals"]:
    s = i["sum"]
    print("  %4.1f-%4.1f s  %6.0f Mbit/s  retransmits %s" % (s["start"], s["end"], s["bits_per_second"] / 1e6, s.get("retransmits", "-")))
PY
echo "ping across the rekey (every 0.1 s): $(grep -E 'packets transmitted' "$WORK/ping-rekey.log")"

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
if not s.get("sas"):
    print("  no SA left: on SIGINT the gateway deleted its IKE SA and CHILD_SA (IKE Delete to the peer)")
for sa in s.get("sas", []):
    print("  SA %-14s %-3s spi=0x%08x packets=%-9d bytes=%-11d drops=%s" % (
        sa.get("tunnel", "?"), sa.get("dir", "?"), sa.get("spi", 0), sa.get("packets", 0),
        sa.get("bytes", 0), {k: v for k, v in sa.get("drops", {}).items() if v}))
for port in s.get("ports", []):
    print("  port %-10s rx=%-9d tx=%-9d" % (port.get("name", "?"), port.get("rx_packets", 0), port.get("tx_packets", 0)))
t = s.get("totals", {})
print("  IKE datagrams: %d punted to the control plane, %d sent" % (t.get("ike_punted", 0), t.get("ike_sent", 0)))
drops = {k: v for k, v in s.get("drops", {}).items() if v}
print("  drops by reason:", drops or "none")
PY
done

say "done in $(( $(date +%s) - T0 ))s"
