#!/usr/bin/env bash
# End to end, live operations under load (issues 4 and 6): while iperf3 TCP
# and a 100 pps ping run from host A to host B through the tunnel,
#   1. REKEYS make-before-break rekeys (default 1000) of the A->B SA with
#      `espgw ctl` (new inbound SA on B first, then A's outbound), and
#   2. a second tunnel (one host pair, ahead of the first by priority) is
#      added on both gateways, carries traffic, and is deleted again; its
#      traffic then falls back to the first tunnel, never to the clear.
# Pass:
#   * no ping lost (counted by icmp_seq);
#   * iperf3 ran from before the first rekey to after the last, with data in
#     every 1 s interval (its retransmits are printed, not judged: TCP
#     retransmits for reasons outside the tunnel too);
#   * every drop counter of both gateways is zero (the hosts are IPv4 only,
#     so no IPv6 chatter is dropped): sa_expired, which a gap without an
#     outbound SA would count, ICV, replay, unknown SPI, ring/TX full, ...;
#   * the ESP packets on the wire (a whole capture) are exactly those the
#     receiving gateway decrypted, over all the tunnel's SAs, each direction;
#     and the ESP packets A's tunnel counts as encrypted over all its SAs
#     are those B's decrypted, and the other way round (ctl stats totals);
#   * the middle link carried only ESP and ARP, never the ping marker in
#     clear (on captures tcpdump reports whole), and the rekeyed SPIs.
#
# Needs root. ESPGW overrides the binary (default target/release/espgw).
REKEYS=${REKEYS:-1000}
P=e2elive
. "$(dirname "$0")/common.bash"
ctl() { local gw=$1; shift; "$ESPGW" ctl --socket "$WORK/$gw.sock" "$@"; }

HOSTS_IPV4_ONLY=1 gateways_up >"$WORK/up.log" 2>&1 || fail "the tunnel did not come up: $(cat "$WORK/up.log")"
# A second host pair for the tunnel that is added and deleted live.
in_a ip addr add 10.1.0.99/24 dev ha0
in_b ip addr add 10.2.0.99/24 dev hb0

capture_start "$P-gwa" gwa-unprot "$WORK/mid-a.pcap" -s 160
capture_start "$P-gwb" gwb-unprot "$WORK/mid-b.pcap" -s 160
in_b iperf3 -s -D -1 -B 10.2.0.10 >/dev/null
# The tunnel counters when the captures began (no tunnel traffic yet).
for s in a b; do ctl $s stats --json >"$WORK/ctl0-$s.json" 2>>"$WORK/ctl.log" || fail "ctl stats on $s"; done
sleep 1
ip netns exec "$P-hosta" iperf3 -c 10.2.0.10 -t 600 -b 50M -J >"$WORK/iperf.json" 2>"$WORK/iperf.log" &
IPERF=$!
BG+=($IPERF)
ip netns exec "$P-hosta" ping -i 0.01 -W 2 -p 6573706777636c656172 10.2.0.10 >"$WORK/ping.log" 2>&1 &
PING=$!
BG+=($PING)
sleep 1

t0=$(date +%s.%N)
for i in $(seq 1 "$REKEYS"); do
    spi=$(printf '0x%x' $((0x100000 + i)))
    key=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
    ctl b sa rekey to-gw-a --in-spi "$spi" --in-key "$key" >/dev/null 2>>"$WORK/ctl.log" || fail "rekey $i step 1 (B inbound) refused"
    ctl a sa rekey to-gw-b --out-spi "$spi" --out-key "$key" >/dev/null 2>>"$WORK/ctl.log" || fail "rekey $i step 2 (A outbound) refused"
done
t1=$(date +%s.%N)
echo "$REKEYS rekeys in $(python3 -c "print('%.1f' % ($t1 - $t0))") s"

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
captures_stop
# Where TCP's retransmits may come from outside the gateways: the hosts'
# own links (printed with iperf3's numbers below, not judged).
host_drops=$(for h in "hosta ha0" "hostb hb0"; do set -- $h
    ip -n "$P-$1" -s -j link show "$2" | python3 -c 'import json,sys; l=json.load(sys.stdin)[0]; s=l["stats64"]; print("%s rx dropped %d, tx dropped %d;" % (l["ifname"], s["rx"]["dropped"], s["tx"]["dropped"]))'
done | tr '\n' ' ')
echo "host links: $host_drops"
# The rekeyed tunnel's totals over all its SAs (the added one is gone).
for s in a b; do ctl $s stats --json >"$WORK/ctl-$s.json" 2>>"$WORK/ctl.log" || fail "ctl stats on $s"; done
gateways_stop || fail "a gateway did not exit with status 0 on SIGINT"

# Every echo must be answered, except the one that may have been in flight
# when ping was interrupted: compare sequence numbers, not the summary.
pings_answered "$WORK/ping.log" --interrupted || fail "pings lost during live operations"
python3 - "$WORK/iperf.json" "$t0" "$t1" <<'PY' || fail "iperf3 did not run through the live operations"
import json, sys
d = json.load(open(sys.argv[1]))
t0, t1 = float(sys.argv[2]), float(sys.argv[3])
# Stopped by SIGINT, iperf3 reports only the sender's side.
s = d["end"]["sum_sent"]
began = d["start"]["timestamp"]["timesecs"]  # whole seconds
ends = began + s["seconds"]
rates = [i["sum"]["bits_per_second"] / 1e6 for i in d["intervals"]]
print("iperf3 TCP: %.0f Mbit/s over %.1f s, %d retransmits; 1 s intervals %.1f-%.1f Mbit/s; "
      "rekeys from +%.1f s to +%.1f s of it" % (s["bits_per_second"] / 1e6, s["seconds"], s.get("retransmits", 0),
                                              min(rates), max(rates), t0 - began, t1 - began))
assert began <= int(t0) and ends >= t1, "iperf3 did not span the rekey loop"
stalled = [(i["sum"]["start"], i["sum"]["end"]) for i in d["intervals"] if i["sum"]["bytes"] == 0]
assert not stalled, ("intervals without data", stalled)
PY
python3 tests/e2e/counters.py drops "$WORK/a.json" "$WORK/b.json" || fail "drops during live operations"
# Nothing lost: the ESP on the wire (both directions, the added tunnel's
# SPIs left out) is exactly what the receiving gateway decrypted.
python3 tests/e2e/wire_esp.py "$WORK/mid-a.pcap" "$WORK"/ctl0-a.json "$WORK"/ctl-a.json \
    "$WORK"/ctl0-b.json "$WORK"/ctl-b.json to-gw-b:to-gw-a c001 d001 \
    || fail "ESP packets lost between the gateways across the rekeys"
# And the sending gateway's own tunnel totals (every SA, replaced ones
# included) agree: what A's tunnel encrypted is what B's decrypted.
python3 tests/e2e/counters.py tunnels "$WORK/ctl-a.json" "$WORK/ctl-b.json" to-gw-b:to-gw-a \
    || fail "tunnel totals: the packets A's tunnel counts as encrypted are not those B's decrypted"
mergecap -w "$WORK/mid.pcap" "$WORK/mid-a.pcap" "$WORK/mid-b.pcap" 2>/dev/null || cp "$WORK/mid-a.pcap" "$WORK/mid.pcap"
tcpdump -r "$WORK/mid.pcap" -nn 2>/dev/null >"$WORK/mid.txt"
total=$(wc -l <"$WORK/mid.txt")
clear=$(tcpdump -r "$WORK/mid.pcap" -nn 'not esp and not arp' 2>/dev/null | wc -l)
spis=$(grep -o 'spi=0x[0-9a-f]*' "$WORK/mid.txt" | sort -u | wc -l)
echo "middle link: $total frames, $clear not ESP/ARP, $spis distinct SPIs"
[ "$clear" -eq 0 ] || { tcpdump -r "$WORK/mid.pcap" -nn 'not esp and not arp' 2>/dev/null | head -5; fail "non-ESP traffic on the middle link"; }
# The captures keep 160 bytes of each frame: enough for the ping payload,
# whose marker the pings below would show in clear (a 56-byte payload).
grep -qa 'espgwclear' "$WORK/mid.pcap" && fail "ping payload seen in clear on the middle link"
grep -q 'spi=0x0000c001' "$WORK/mid.txt" || fail "the added tunnel's SPI never crossed the middle link"
[ "$spis" -ge $((REKEYS / 2)) ] || fail "expected the rekeyed SPIs on the wire, saw $spis distinct SPIs"
echo "PASS: $REKEYS rekeys + tunnel add/del under iperf3 and ping: nothing lost, nothing in clear"
