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
tunnels_gen suites
tunnel_hosts "$N" a

peer_start
gateway_start a "$WORK/gw-a.toml"
gateways_wait_ping -I 10.1.1.10 10.2.1.10 >"$WORK/up.log" 2>&1 || fail "no echo reply through the first tunnel"

# Every tunnel, both inner families, three sizes; 16 series at a time
# (scapy answers one packet at a time, so a generous deadline: -w, since
# with -W ping waits only two round trips once a first reply came).
ping_series() {
    local k=$1 fam=$2 src dst size
    if [ "$fam" = 4 ]; then src=10.1.$k.10 dst=10.2.$k.10; else src=fd00:1:$k::10 dst=fd00:2:$k::10; fi
    for size in 16 500 1300; do
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
echo "ping: $N tunnels (6 suites x ESN x outer IPv4/IPv6 x UDP encap) x IPv4/IPv6 inner x 16/500/1300 bytes, every ping answered by scapy"

peer_stop
gateways_stop || fail "gateway A did not exit with status 0 on SIGINT"
python3 - "$WORK/tunnels.json" "$WORK/peer.json" <<'PY' || fail "the scapy peer's view"
import json, sys
tunnels = json.load(open(sys.argv[1]))
s = json.load(open(sys.argv[2]))
if s["problems"]:
    print("\n".join(s["problems"][:20]))
    sys.exit(1)
low = {n: c for n, c in s["counts"].items() if c["decrypted"] < 12 or c["answered"] != c["decrypted"]}
if low:
    print("tunnels scapy heard too little on:", low)
    sys.exit(1)
print("scapy:", sum(c["decrypted"] for c in s["counts"].values()), "ESP packets from espgw decrypted and answered, no problem")
PY
python3 tests/e2e/sastats.py "$WORK/tunnels.json" 12 "$WORK/a.json" || fail "gateway A's per-SA counters"
echo "PASS: espgw <-> scapy ESP, $N tunnels (every suite x ESN x outer IPv4/IPv6 x UDP encap), in $(( $(date +%s) - start ))s"
