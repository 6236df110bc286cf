#!/usr/bin/env bash
# End to end: two espgw gateways on the netns demo topology (net_af_packet
# on veth). Host A pings host B through the ESP tunnel and pings the
# gateway itself; ARP is resolved dynamically in both directions (the
# configs have no static neighbors); only ESP and ARP cross the middle
# link; the final counters balance and show the tunnel's traffic.
#
# Needs root. ESPGW overrides the binary (default target/release/espgw).
P=e2eping
PATTERN=6573706777636c656172   # "espgwclear": must never be seen on the middle link
LOG_TAIL=1000
. "$(dirname "$0")/common.bash"

grep -q '^\[\[neighbor\]\]' gateway.toml configs/gateway-b.toml && fail "configs have static neighbors: ARP would not be tested"
gateways_up >"$WORK/up.log" 2>&1 || fail "the tunnel did not come up: $(cat "$WORK/up.log")"

# Capture the middle link while pinging through the tunnel and the gateway.
# At both ends: af_packet sends with qdisc bypass, so a capture sees only
# what arrives on its side of the veth pair.
ip netns exec $P-gwa tcpdump -i gwa-unprot -nn -U -w "$WORK/mid-a.pcap" >/dev/null 2>&1 &
TCPDUMPS=($!)
ip netns exec $P-gwb tcpdump -i gwb-unprot -nn -U -w "$WORK/mid-b.pcap" >/dev/null 2>&1 &
TCPDUMPS+=($!)
sleep 1
in_a ping -c 5 -i 0.2 -W 1 -p "$PATTERN" 10.2.0.10 >"$WORK/ping-tunnel.log" || fail "ping through the tunnel lost packets"
in_a ping -c 3 -i 0.2 -W 1 10.1.0.1 >"$WORK/ping-gw.log" || fail "ping to the gateway's own address failed"
in_a ping -c 3 -i 0.2 -W 1 -s 1400 10.2.0.10 >/dev/null || fail "1400-byte ping through the tunnel failed"
ip netns exec $P-hostb ping -c 3 -i 0.2 -W 1 10.1.0.10 >/dev/null || fail "ping from host B to host A failed"
# The far gateway's protected address answers through the tunnel.
in_a ping -c 2 -i 0.2 -W 1 10.2.0.1 >/dev/null || fail "ping to gateway B's protected address through the tunnel failed"
sleep 1
kill -INT "${TCPDUMPS[@]}"; wait "${TCPDUMPS[@]}" 2>/dev/null || true
mergecap -w "$WORK/mid.pcap" "$WORK/mid-a.pcap" "$WORK/mid-b.pcap" 2>/dev/null \
    || cat "$WORK/mid-a.pcap" >"$WORK/mid.pcap"

# ARP: host A learned the gateway's MAC from the gateway's answer.
gw_mac=$(ip netns exec $P-gwa cat /sys/class/net/gwa-prot/address)
in_a ip neigh show 10.1.0.1 dev ha0 | grep -qi "$gw_mac" || fail "host A has no ARP entry for 10.1.0.1 -> $gw_mac"

# Only ESP and ARP on the middle link, and some ESP.
total=$(tcpdump -r "$WORK/mid.pcap" -nn 2>/dev/null | wc -l)
esp=$(tcpdump -r "$WORK/mid.pcap" -nn 'esp' 2>/dev/null | wc -l)
arp=$(tcpdump -r "$WORK/mid.pcap" -nn 'arp' 2>/dev/null | wc -l)
echo "middle link: $total frames, $esp ESP, $arp ARP"
[ "$esp" -ge 20 ] || fail "expected at least 20 ESP frames on the middle link, saw $esp"
[ $((total - esp - arp)) -eq 0 ] || { tcpdump -r "$WORK/mid.pcap" -nn 'not esp and not arp' 2>/dev/null | head; fail "non-ESP traffic on the middle link"; }
tcpdump -r "$WORK/mid.pcap" -nn -A 2>/dev/null | grep -q 'espgwclear' && fail "ping payload visible in clear on the middle link"

# Clean stop on SIGINT, counters written and balanced.
gateways_stop || fail "a gateway did not exit with status 0 on SIGINT"
python3 - "$WORK/a.json" "$WORK/b.json" <<'PY' || fail "stats JSON check"
import json, sys
for path in sys.argv[1:]:
    s = json.load(open(path))
    t = s["totals"]
    assert t["balanced"], (path, t)
    assert t["rx"] == sum(p["rx_packets"] for p in s["ports"]), (path, t)
    sas = {sa["dir"]: sa for sa in s["sas"]}
    assert sas["out"]["packets"] >= 11 and sas["in"]["packets"] >= 11, (path, sas)
    bad = {k: v for k, v in s["drops"].items() if v and k in ("icv_mismatch", "replayed", "unknown_spi", "policy_mismatch", "plaintext_blocked")}
    assert not bad, (path, bad)
    print(path.rsplit("/", 1)[-1], "rx", t["rx"], "tx", t["tx"], "ESP out", sas["out"]["packets"], "in", sas["in"]["packets"], "drops", {k: v for k, v in s["drops"].items() if v})
PY
echo "PASS: ping through the tunnel, to the gateway, ARP dynamic, only ESP+ARP on the wire"
