#!/usr/bin/env bash
# End to end, live operations under load (issues 4 and 6): while iperf3 TCP
# and a 100 pps ping run from host A to host B through the tunnel,
#   1. REKEYS make-before-break rekeys (default 1000) of the A->B SA with
#      `espgw ctl` (new inbound SA on B first, then A's outbound), and
#   2. a second tunnel (one host pair, ahead of the first by priority) is
#      added on both gateways, carries traffic, and is deleted again; its
#      traffic then falls back to the first tunnel, never to the clear.
# Pass: no ping lost, iperf3 completes, zero replayed / ICV / unknown-SPI
# drops on either gateway, and the middle link carried only ESP and ARP.
#
# Needs root. ESPGW overrides the binary (default target/release/espgw).
REKEYS=${REKEYS:-1000}
P=e2elive
. "$(dirname "$0")/common.bash"
ctl() { local gw=$1; shift; "$ESPGW" ctl --socket "$WORK/$gw.sock" "$@"; }

gateways_up >"$WORK/up.log" 2>&1 || fail "the tunnel did not come up: $(cat "$WORK/up.log")"
# A second host pair for the tunnel that is added and deleted live.
in_a ip addr add 10.1.0.99/24 dev ha0
in_b ip addr add 10.2.0.99/24 dev hb0

ip netns exec "$P-gwa" tcpdump -i gwa-unprot -nn -U -s 160 -w "$WORK/mid-a.pcap" >/dev/null 2>&1 &
BG+=($!)
ip netns exec "$P-gwb" tcpdump -i gwb-unprot -nn -U -s 160 -w "$WORK/mid-b.pcap" >/dev/null 2>&1 &
BG+=($!)
in_b iperf3 -s -D -1 -B 10.2.0.10 >/dev/null
sleep 1
ip netns exec "$P-hosta" iperf3 -c 10.2.0.10 -t 600 -b 50M -J >"$WORK/iperf.json" 2>"$WORK/iperf.log" &
IPERF=$!
BG+=($IPERF)
ip netns exec "$P-hosta" ping -i 0.01 -W 2 10.2.0.10 >"$WORK/ping.log" 2>&1 &
PING=$!
BG+=($PING)
sleep 1

t0=$(date +%s)
for i in $(seq 1 "$REKEYS"); do
    spi=$(printf '0x%x' $((0x100000 + i)))
    key=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
    ctl b sa rekey to-gw-a --in-spi "$spi" --in-key "$key" >/dev/null 2>>"$WORK/ctl.log" || fail "rekey $i step 1 (B inbound) refused"
    ctl a sa rekey to-gw-b --out-spi "$spi" --out-key "$key" >/dev/null 2>>"$WORK/ctl.log" || fail "rekey $i step 2 (A outbound) refused"
done
echo "$REKEYS rekeys in $(( $(date +%s) - t0 )) s"

# A tunnel added live on both gateways, used, then deleted.
cat >"$WORK/extra-a.toml" <<'T'
name = "extra"
local = "192.0.2.1"
remote = "192.0.2.2"
local_ts = ["10.1.0.99/32"]
remote_ts = ["10.2.0.99/32"]
priority = 10
esp = "chacha20poly1305"
out = { spi = 0x0000c001, key = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1fa0a1a2a3" }
in = { spi = 0x0000d001, key = "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3fb0b1b2b3" }
T
sed 's/192.0.2.1/192.0.2.X/; s/"192.0.2.2"/"192.0.2.1"/; s/192.0.2.X/192.0.2.2/; s#\["10.1.0.99/32"\]#["10.2.0.99/32"]#; s#remote_ts = \["10.2.0.99/32"\]#remote_ts = ["10.1.0.99/32"]#; s/^out = /OUT = /; s/^in = /out = /; s/^OUT = /in = /' \
    "$WORK/extra-a.toml" >"$WORK/extra-b.toml"
# local_ts was rewritten to B's side above, and remote_ts to A's.
chmod 600 "$WORK"/extra-*.toml
ctl b sa add --tunnel-toml "$WORK/extra-b.toml" >/dev/null 2>>"$WORK/ctl.log" || fail "sa add on B refused"
ctl a sa add --tunnel-toml "$WORK/extra-a.toml" >/dev/null 2>>"$WORK/ctl.log" || fail "sa add on A refused"
in_a ping -c 5 -i 0.1 -W 1 -I 10.1.0.99 10.2.0.99 >"$WORK/ping-extra.log" 2>&1 || fail "no traffic through the added tunnel"
ctl a sa list >"$WORK/sa-extra.log" 2>&1
grep -Eq '^extra +out +0x0000c001 .* active +[1-9]' "$WORK/sa-extra.log" || fail "the added tunnel's SA carried no traffic: $(cat "$WORK/sa-extra.log")"
ctl a sa del extra >/dev/null 2>>"$WORK/ctl.log" || fail "sa del on A refused"
ctl b sa del extra >/dev/null 2>>"$WORK/ctl.log" || fail "sa del on B refused"
# After the delete this host pair falls back to the first tunnel: still
# answered, still encrypted (the pattern must never be seen in clear).
in_a ping -c 5 -i 0.1 -W 1 -I 10.1.0.99 -p 6573706777636c656172 10.2.0.99 >/dev/null 2>&1 || fail "host pair of the deleted tunnel not carried by the remaining tunnel"

sleep 2
kill -INT "$PING"; wait "$PING" 2>/dev/null || true
kill -INT "$IPERF"; wait "$IPERF" 2>/dev/null || true
sleep 1
kill -INT "${BG[0]}" "${BG[1]}" 2>/dev/null; wait "${BG[0]}" "${BG[1]}" 2>/dev/null || true
BG=()
gateways_stop || fail "a gateway did not exit with status 0 on SIGINT"

grep -E 'packets transmitted' "$WORK/ping.log" || fail "no ping summary"
# Every echo must be answered, except the one that may have been in flight
# when ping was interrupted: compare sequence numbers, not the summary.
python3 - "$WORK/ping.log" <<'PY' || fail "pings lost during live operations"
import re, sys
text = open(sys.argv[1]).read()
sent = int(re.search(r"(\d+) packets transmitted", text).group(1))
got = {int(n) for n in re.findall(r"icmp_seq=(\d+) ttl=", text)}
missing = sorted(set(range(1, sent)) - got)
print("pings: %d sent, %d answered, missing before the last: %s" % (sent, len(got), missing or "none"))
assert not missing, missing
PY
python3 - "$WORK/iperf.json" <<'PY' || fail "iperf3 did not run through the live operations"
import json, sys
d = json.load(open(sys.argv[1]))
e = d["end"]
# Stopped by SIGINT, iperf3 reports only the sender's side.
s = e["sum_sent"]
print("iperf3 TCP: %.0f Mbit/s over %.1f s, %d retransmits" % (s["bits_per_second"] / 1e6, s["seconds"], s.get("retransmits", 0)))
assert s["bytes"] > 0 and s["seconds"] > 2
PY
python3 - "$WORK/a.json" "$WORK/b.json" <<'PY' || fail "stats JSON check"
import json, sys
for path in sys.argv[1:]:
    s = json.load(open(path))
    assert s["totals"]["balanced"], (path, s["totals"])
    bad = {k: v for k, v in s["drops"].items() if v and k in ("icv_mismatch", "replayed", "unknown_spi", "bad_padding")}
    for sa in s["sas"]:
        bad.update({"%s/%s/%s" % (sa["tunnel"], sa["dir"], k): v for k, v in sa["drops"].items()
                    if v and k in ("icv_mismatch", "replayed", "unknown_spi", "bad_padding")})
    assert not bad, (path, bad)
    print(path.rsplit("/", 1)[-1], "drops:", {k: v for k, v in s["drops"].items() if v})
PY
mergecap -w "$WORK/mid.pcap" "$WORK/mid-a.pcap" "$WORK/mid-b.pcap" 2>/dev/null || cp "$WORK/mid-a.pcap" "$WORK/mid.pcap"
tcpdump -r "$WORK/mid.pcap" -nn 2>/dev/null >"$WORK/mid.txt"
total=$(wc -l <"$WORK/mid.txt")
clear=$(tcpdump -r "$WORK/mid.pcap" -nn 'not esp and not arp' 2>/dev/null | wc -l)
spis=$(grep -o 'spi=0x[0-9a-f]*' "$WORK/mid.txt" | sort -u | wc -l)
echo "middle link: $total frames, $clear not ESP/ARP, $spis distinct SPIs"
[ "$clear" -eq 0 ] || { tcpdump -r "$WORK/mid.pcap" -nn 'not esp and not arp' 2>/dev/null | head -5; fail "non-ESP traffic on the middle link"; }
# The captures keep 160 bytes of each frame: enough for the ping payload.
grep -qa 'espgwclear' "$WORK/mid.pcap" && fail "ping payload seen in clear on the middle link"
grep -q 'spi=0x0000c001' "$WORK/mid.txt" || fail "the added tunnel's SPI never crossed the middle link"
[ "$spis" -ge $((REKEYS / 2)) ] || fail "expected the rekeyed SPIs on the wire, saw $spis distinct SPIs"
echo "PASS: $REKEYS rekeys + tunnel add/del under iperf3 and ping: nothing lost, nothing in clear"
