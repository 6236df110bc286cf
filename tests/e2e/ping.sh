#!/usr/bin/env bash
# End to end: two espgw gateways on the netns demo topology (net_af_packet
# on veth). Host A pings host B through the ESP tunnel and pings the
# gateway itself; ARP is resolved dynamically in both directions (the
# configs have no static neighbors); only ESP and ARP cross the middle
# link (checked on captures tcpdump reports whole) and the ping payload's
# marker never appears there; every echo request is answered (counted by
# icmp_seq); the final counters balance, show the tunnel's traffic, and
# every drop reason is zero.
#
# Needs root. ESPGW overrides the binary (default target/release/espgw).
P=e2eping
PATTERN=6573706777636c656172   # "espgwclear": must never be seen on the middle link
LOG_TAIL=1000
. "$(dirname "$0")/common.bash"

grep -q '^\[\[neighbor\]\]' configs/static-a.toml configs/static-b.toml && fail "configs have static neighbors: ARP would not be tested"
HOSTS_IPV4_ONLY=1 gateways_up >"$WORK/up.log" 2>&1 || fail "the tunnel did not come up: $(cat "$WORK/up.log")"

# Capture the middle link while pinging through the tunnel and the gateway,
# at both ends. espgw sends through the kernel's qdisc layer (eal_args sets
# qdisc_bypass=0 on af_packet ports), so each capture sees both directions
# of the link: every frame appears twice once the two are merged, which
# the checks below allow; the two ends are independent observations.
capture_start $P-gwa gwa-unprot "$WORK/mid-a.pcap"
capture_start $P-gwb gwb-unprot "$WORK/mid-b.pcap"
# The positive control: the marker in clear on host A's link.
capture_start $P-gwa gwa-prot "$WORK/prot-a.pcap"
# Every echo request must be answered: counted by icmp_seq (ping's exit
# status is 0 as soon as one reply came). All carry the marker payload.
ping_all() {  # what, then `ping` arguments after -c COUNT
    local what=$1 count=$2 log="$WORK/ping-$1.log"
    shift 2
    "$@" -c "$count" -i 0.2 -W 1 -p "$PATTERN" >"$log" 2>&1 || true
    pings_answered "$log" "$count" || fail "$what: not every ping answered: $(tail -2 "$log")"
}
ping_all tunnel 5 in_a ping 10.2.0.10
ping_all gateway 3 in_a ping 10.1.0.1
ping_all tunnel-1400 3 in_a ping -s 1400 10.2.0.10
ping_all from-b 3 ip netns exec $P-hostb ping 10.1.0.10
# The far gateway's protected address answers through the tunnel.
ping_all gateway-b 2 in_a ping 10.2.0.1
sleep 1
captures_stop
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
grep -qa 'espgwclear' "$WORK/prot-a.pcap" || fail "the ping payload marker is not even in clear on host A's link: the check below would prove nothing"
grep -qa 'espgwclear' "$WORK/mid.pcap" && fail "ping payload visible in clear on the middle link"

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
    print(path.rsplit("/", 1)[-1], "rx", t["rx"], "tx", t["tx"], "ESP out", sas["out"]["packets"], "in", sas["in"]["packets"], "drops", {k: v for k, v in s["drops"].items() if v})
PY
python3 tests/e2e/counters.py drops "$WORK/a.json" "$WORK/b.json" || fail "drops (IPv4-only hosts: every reason must be zero)"
echo "PASS: ping through the tunnel, to the gateway, ARP dynamic, only ESP+ARP on the wire"
