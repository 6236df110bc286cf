#!/usr/bin/env bash
# End to end: a make-before-break rekey of both gateways with `espgw ctl`
# while host A pings host B through the tunnel every 50 ms. Pass:
#   * every one of the 80 echo requests is answered (counted by icmp_seq:
#     ping's exit status would be 0 with a single reply);
#   * every drop counter of both gateways is zero (sa_expired included: a
#     gap with no outbound SA would be counted there), gateway-wide and per SA;
#   * the ESP packets A's tunnel encrypted (old and new SA together) are
#     exactly those B's decrypted, in each direction;
#   * the new SPI carries the traffic afterwards and the old inbound SA is
#     draining (still decrypting) on gateway B.
#
# Needs root. ESPGW overrides the binary (default target/release/espgw).
P=e2erekey
LOG_TAIL=1000
PINGS=80
. "$(dirname "$0")/common.bash"
CTL=${ESPGW_CTL:-$ESPGW}

# IPv4 only: no IPv6 chatter from the hosts, so every drop must be zero.
HOSTS_IPV4_ONLY=1 gateways_up >"$WORK/up.log" 2>&1 || fail "the tunnel did not come up: $(cat "$WORK/up.log")"
for s in a b; do [ -S "$WORK/$s.sock" ] || fail "gateway $s has no control socket"; done

ip netns exec $P-hosta ping -c $PINGS -i 0.05 -W 1 10.2.0.10 >"$WORK/ping.log" 2>&1 &
PING=$!
sleep 1
KEY=00112233445566778899aabbccddeeff01020304
# Step 1 on the receiver (new inbound SA next to the old one), step 2 on the sender.
"$CTL" ctl --socket "$WORK/b.sock" sa rekey to-gw-a --in-spi 0xa002 --in-key $KEY >"$WORK/rekey-b.log" 2>&1 || fail "rekey step 1"
"$CTL" ctl --socket "$WORK/a.sock" sa rekey to-gw-b --out-spi 0xa002 --out-key $KEY >"$WORK/rekey-a.log" 2>&1 || fail "rekey step 2"
wait $PING || true
pings_answered "$WORK/ping.log" $PINGS || fail "pings lost during the rekey"
"$CTL" ctl --socket "$WORK/b.sock" sa list >"$WORK/sa-b.log" 2>&1
grep -Eq '^to-gw-a +in +0x0000a002 .* active +[1-9]' "$WORK/sa-b.log" || fail "new inbound SA 0xa002 carries no traffic on B"
grep -Eq '^to-gw-a +in +0x0000a001 .* draining' "$WORK/sa-b.log" || fail "old inbound SA not draining on B"
# The tunnels' totals over all their SAs, once the traffic stopped.
for s in a b; do "$CTL" ctl --socket "$WORK/$s.sock" stats --json >"$WORK/ctl-$s.json" 2>&1 || fail "ctl stats on $s"; done
python3 tests/e2e/counters.py tunnels "$WORK/ctl-a.json" "$WORK/ctl-b.json" to-gw-b:to-gw-a \
    || fail "ESP packets lost between the gateways across the rekey"

gateways_stop || fail "a gateway did not exit with status 0 on SIGINT"
python3 tests/e2e/counters.py drops "$WORK/a.json" "$WORK/b.json" || fail "drops during the rekey"
python3 - "$WORK/b.json" <<'PY' || fail "stats JSON"
import json, sys
s = json.load(open(sys.argv[1]))
ins = {sa["spi"]: sa for sa in s["sas"] if sa["dir"] == "in"}
assert ins[0xA002]["packets"] > 0 and ins[0xA001]["packets"] > 0, ins
PY
echo "PASS: rekey under traffic, all $PINGS pings answered, no drop, every ESP packet decrypted, new SPI in use, old one draining"
