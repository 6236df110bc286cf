#!/usr/bin/env bash
# End to end against a foreign ESP implementation on the wire: espgw runs
# gateway A only; in gateway B's namespace a scapy process
# (interop_peer.py) is the far gateway on gwb-unprot. The 48 tunnels of
# suites.sh (configs from tunnels.py): every suite x ESN x outer IPv4/IPv6
# x bare ESP / ESP in UDP 4500. Host A pings, through each
# tunnel, IPv4 and IPv6 addresses that scapy "owns" behind it; scapy
# decrypts espgw's ESP, checks the inner echo request, and answers with an
# echo reply it encrypts itself. Every ping must be answered: espgw
# decrypts scapy's ESP and scapy decrypts espgw's, for every suite; scapy
# also checks each tunnel's ESP arrives in its outer family and
# encapsulation. scapy answers ARP and ND for gateway B's outer addresses.
#
# scapy also misbehaves as a peer may (interop_peer.py --misbehave): on
# every tunnel it sends one ESP packet after the next one (reordered inside
# the window: must be decrypted; espgw's inbound SA count must be exactly
# scapy's send count) and both again (counted as `replayed`: exactly 2 per
# tunnel, per SA and gateway-wide); on the 24 ESN tunnels its sequence
# numbers cross 2^32, so at least 8 ESP packets per tunnel carry high bits
# 1 that espgw must infer (a wrong guess fails the ICV and the ping). The
# other direction too: gateway A's ESN SAs continue from a state directory
# (tunnels.py writes it as an earlier run would) at 2^32 - 3, so espgw's own
# sequence numbers cross 2^32 and scapy must infer their high bits.
# The pings carry a marker never seen on the middle link (captured whole;
# host A's link shows it in clear: the positive control).
#
# Needs root. ESPGW overrides the binary (default target/release/espgw).
P=e2einterop
PATTERN=6573706777636c656172
LOG_TAIL=5
. "$(dirname "$0")/common.bash"
on_fail() {
    [ -f "$WORK/peer.json" ] && { echo "--- scapy peer:"; head -c 3000 "$WORK/peer.json"; }
    return 0
}
start=$(date +%s)

scripts/netns.sh up "$P"
export ESPGW_A_SEQ_START=$(( (1 << 32) - 3 ))
tunnels_gen suites
tunnel_hosts "$N" a

capture_start $P-gwb gwb-unprot "$WORK/mid.pcap"
capture_start $P-gwa gwa-prot "$WORK/prot-a.pcap"
peer_start --misbehave
gateway_start a "$WORK/gw-a.toml"
gateways_wait_ping -I 10.1.1.10 10.2.1.10 >"$WORK/up.log" 2>&1 || fail "no echo reply through the first tunnel"

# Every tunnel, both inner families, three sizes; 16 series at a time
# (scapy answers one packet at a time, so a generous deadline: -w, since
# with -W ping waits only two round trips once a first reply came).
ping_series() {
    local k=$1 fam=$2 src dst size
    if [ "$fam" = 4 ]; then src=10.1.$k.10 dst=10.2.$k.10; else src=fd00:1:$k::10 dst=fd00:2:$k::10; fi
    for size in 30 500 1300; do  # 30: the smallest ping with a whole marker (see suites.sh)
        echo "size $size"
        in_a ping -"$fam" -c 2 -i 0.2 -w 10 -s $size -p $PATTERN -I $src $dst 2>&1 \
            | grep -Ev '^(PING|--- | *$|rtt|round-trip)' | grep -Ev 'bytes from .* time=[0-9.]+ ms$' || true
    done
}
PINGS=()
for k in $(seq 1 "$N"); do
    for fam in 4 6; do
        ping_series $k $fam >"$WORK/ping-$k-$fam.out" &
        PINGS+=($!)
    done
    if [ $((k % 8)) -eq 0 ]; then for p in "${PINGS[@]}"; do wait "$p" || true; done; PINGS=(); fi
done
for p in "${PINGS[@]}"; do wait "$p" || true; done
bad=0
for k in $(seq 1 "$N"); do
    for fam in 4 6; do
        if [ "$(grep -c ' 2 received' "$WORK/ping-$k-$fam.out" || true)" -ne 3 ]; then
            bad=$((bad + 1))
            echo "tunnel $k IPv$fam inner:" >&2; cat "$WORK/ping-$k-$fam.out" >&2
        fi
    done
done
[ $bad -eq 0 ] || fail "$bad of $((2 * N)) tunnel/family ping series were not all answered"
echo "ping: $N tunnels (6 suites x ESN x outer IPv4/IPv6 x UDP encap) x IPv4/IPv6 inner x 30/500/1300 bytes, every ping answered by scapy"

sleep 0.5
peer_stop
gateways_stop || fail "gateway A did not exit with status 0 on SIGINT"
captures_stop
python3 - "$WORK/tunnels.json" "$WORK/peer.json" "$WORK/a.json" <<'PY' || fail "the scapy peer's view"
import json, sys
tunnels = json.load(open(sys.argv[1]))
s = json.load(open(sys.argv[2]))
# espgw decrypted every distinct ESP packet scapy sent (the reordered one
# included), no more: its inbound SA's packet count is scapy's send count.
a_in = {sa["tunnel"]: sa["packets"] for sa in json.load(open(sys.argv[3]))["sas"] if sa["dir"] == "in"}
short = {t["name"]: (s["counts"][t["name"]]["esp_sent"], a_in.get(t["name"])) for t in tunnels
         if a_in.get(t["name"]) != s["counts"][t["name"]]["esp_sent"]}
if short:
    print("tunnels where espgw did not decrypt exactly what scapy sent (sent, decrypted):", short)
    sys.exit(1)
if s["problems"]:
    print("\n".join(s["problems"][:20]))
    sys.exit(1)
low = {n: c for n, c in s["counts"].items() if c["decrypted"] < 12 or c["answered"] != c["decrypted"]}
if low:
    print("tunnels scapy heard too little on:", low)
    sys.exit(1)
# Every tunnel got its reordered answer and two replays; every ESN tunnel's
# answers from the 5th on went above 2^32.
bad = {}
for t in tunnels:
    c = s["counts"][t["name"]]
    if c["reordered"] != 1 or c["replays"] != 2:
        bad[t["name"]] = c
    if t["esn"] and (c["out_above_2_32"] < 8 or c["max_seq_out"] < 2**32 + 7):
        bad[t["name"]] = c
    # espgw -> scapy: continues from its persisted state at ab_seq_start
    # (2^32 - 3 on ESN tunnels), so every answered series went above 2^32.
    if c["max_seq_in"] < t["ab_seq_start"] or (t["esn"] and c["max_seq_in"] < 2**32 + 4):
        bad[t["name"]] = c
if bad:
    print("tunnels where scapy did not send what was planned, or espgw's sequence numbers were not as expected:", bad)
    sys.exit(1)
esn = [s["counts"][t["name"]] for t in tunnels if t["esn"]]
print("scapy:", sum(c["decrypted"] for c in s["counts"].values()), "ESP packets from espgw decrypted and answered, no problem;",
      sum(c["out_above_2_32"] for c in esn), "ESP packets with sequence numbers above 2^32 on", len(esn), "ESN tunnels;",
      len(tunnels), "reordered and", 2 * len(tunnels), "replayed; highest espgw sequence number",
      max(c["max_seq_in"] for c in s["counts"].values()))
PY
# Replays counted as replayed (2 per inbound SA), nothing else dropped by ESP.
python3 tests/e2e/sastats.py --replayed 2 "$WORK/tunnels.json" 12 "$WORK/a.json" || fail "gateway A's per-SA counters"
python3 tests/e2e/midlink.py --positive "$WORK/prot-a.pcap" "$WORK/tunnels.json" espgwclear "$WORK/mid.pcap" \
    || fail "middle link"
echo "PASS: espgw <-> scapy ESP, $N tunnels (every suite x ESN x outer IPv4/IPv6 x UDP encap), in $(( $(date +%s) - start ))s"
