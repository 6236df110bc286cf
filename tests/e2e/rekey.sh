#!/usr/bin/env bash
# End to end: a make-before-break rekey of both gateways with `espgw ctl`
# while host A pings host B through the tunnel every 50 ms. No ping may be
# lost, the new SPI must carry the traffic afterwards, and the old inbound
# SA must be draining (still decrypting) on gateway B.
#
# Needs root. ESPGW overrides the binary (default target/release/espgw).
P=e2erekey
LOG_TAIL=1000
. "$(dirname "$0")/common.bash"
CTL=${ESPGW_CTL:-$ESPGW}

gateways_up >"$WORK/up.log" 2>&1 || fail "the tunnel did not come up: $(cat "$WORK/up.log")"
for s in a b; do [ -S "$WORK/$s.sock" ] || fail "gateway $s has no control socket"; done

ip netns exec $P-hosta ping -c 80 -i 0.05 -W 1 10.2.0.10 >"$WORK/ping.log" 2>&1 &
PING=$!
sleep 1
KEY=00112233445566778899aabbccddeeff01020304
# Step 1 on the receiver (new inbound SA next to the old one), step 2 on the sender.
"$CTL" ctl --socket "$WORK/b.sock" sa rekey to-gw-a --in-spi 0xa002 --in-key $KEY >"$WORK/rekey-b.log" 2>&1 || fail "rekey step 1"
"$CTL" ctl --socket "$WORK/a.sock" sa rekey to-gw-b --out-spi 0xa002 --out-key $KEY >"$WORK/rekey-a.log" 2>&1 || fail "rekey step 2"
wait $PING || fail "pings lost during the rekey: $(tail -2 "$WORK/ping.log")"
"$CTL" ctl --socket "$WORK/b.sock" sa list >"$WORK/sa-b.log" 2>&1
grep -Eq '^to-gw-a +in +0x0000a002 .* active +[1-9]' "$WORK/sa-b.log" || fail "new inbound SA 0xa002 carries no traffic on B"
grep -Eq '^to-gw-a +in +0x0000a001 .* draining' "$WORK/sa-b.log" || fail "old inbound SA not draining on B"

gateways_stop || fail "a gateway did not exit with status 0 on SIGINT"
python3 - "$WORK/b.json" <<'PY' || fail "stats JSON"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["totals"]["balanced"], s["totals"]
ins = {sa["spi"]: sa for sa in s["sas"] if sa["dir"] == "in"}
assert ins[0xA002]["packets"] > 0, ins
bad = {k: v for k, v in s["drops"].items() if v and k in ("icv_mismatch", "replayed", "unknown_spi")}
assert not bad, bad
PY
echo "PASS: rekey under traffic, $(grep -o '[0-9]* received' "$WORK/ping.log"), new SPI in use, old one draining"
