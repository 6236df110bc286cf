#!/usr/bin/env bash
# End to end, path MTU through the tunnel (two espgw gateways, MTU 1500 on
# every link). Two tunnels with different overheads, configs from
# tunnels.py; their inner MTUs are worked out here from RFC 4303/4106/3948
# sizes, independently of espgw:
#   1: aes128gcm16, outer IPv4: 1500 - 20 IP - 8 ESP - 8 IV - 16 ICV = 1448,
#      payload + 2-byte trailer padded to 4 -> largest inner 1446
#   2: aes128-sha1, outer IPv6, UDP 4500: 1500 - 40 - 8 UDP - 8 ESP - 16 IV
#      - 12 ICV = 1416 for the CBC ciphertext, whole 16-byte blocks: 1408,
#      less the 2-byte trailer -> largest inner 1406
# For each tunnel and inner family: a DF / IPv6 ping one byte too big gets
# ICMP fragmentation needed / packet too big from gateway A naming that
# MTU; host A's route cache then holds it (`ip route get`); a ping of
# exactly that size passes. Then 4 MiB of TCP through each tunnel (IPv4
# through 1, IPv6 through 2) arrives intact, and a capture on host B's
# link shows full segments of exactly the tunnel's MTU (never larger).
#
# Needs root. ESPGW overrides the binary (default target/release/espgw).
P=e2epmtu
LOG_TAIL=8
. "$(dirname "$0")/common.bash"
start=$(date +%s)

scripts/netns.sh up "$P"
tunnels_gen pmtu
tunnel_hosts 2 ab

gateway_start a "$WORK/gw-a.toml"
gateway_start b "$WORK/gw-b.toml"
gateways_wait_ping -I 10.1.1.10 10.2.1.10 >"$WORK/up.log" 2>&1 || fail "tunnel 1 did not come up"
gateways_wait_ping -I 10.1.2.10 10.2.2.10 >>"$WORK/up.log" 2>&1 || fail "tunnel 2 did not come up"

declare -A MTU=([1]=1446 [2]=1406)
for k in 1 2; do
    m=${MTU[$k]}
    # IPv4: ICMP payload = MTU - 20 - 8.
    out=$(in_a ping -4 -M do -c 1 -w 3 -s $((m - 28 + 1)) -I 10.1.$k.10 10.2.$k.10 2>&1 || true)
    echo "$out" | grep -q "From 10.1.0.1 .*Frag needed and DF set (mtu = $m)" \
        || fail "tunnel $k IPv4: no ICMP frag needed with mtu $m from gateway A: $out"
    in_a ip route get 10.2.$k.10 from 10.1.$k.10 | grep -q "mtu $m" \
        || fail "tunnel $k: host A's route cache has no mtu $m: $(in_a ip route get 10.2.$k.10 from 10.1.$k.10)"
    in_a ping -4 -M do -c 2 -i 0.2 -w 5 -s $((m - 28)) -I 10.1.$k.10 10.2.$k.10 >/dev/null \
        || fail "tunnel $k IPv4: a ping of exactly $m bytes failed"
    # IPv6: ICMPv6 payload = MTU - 40 - 8.
    out=$(in_a ping -6 -M do -c 1 -w 3 -s $((m - 48 + 1)) -I fd00:1:$k::10 fd00:2:$k::10 2>&1 || true)
    echo "$out" | grep -Eq "From fd00:1::1 .*Packet too big: mtu=$m" \
        || fail "tunnel $k IPv6: no ICMPv6 packet too big with mtu $m from gateway A: $out"
    in_a ip -6 route get fd00:2:$k::10 from fd00:1:$k::10 | grep -q "mtu $m" \
        || fail "tunnel $k: host A's IPv6 route cache has no mtu $m: $(in_a ip -6 route get fd00:2:$k::10 from fd00:1:$k::10)"
    in_a ping -6 -M do -c 2 -i 0.2 -w 5 -s $((m - 48)) -I fd00:1:$k::10 fd00:2:$k::10 >/dev/null \
        || fail "tunnel $k IPv6: a ping of exactly $m bytes failed"
    echo "tunnel $k: ICMP frag needed / packet too big with mtu $m, learned by host A, $m-byte pings pass (IPv4 and IPv6)"
done

# TCP with fresh path MTU state (the route cache learned above is flushed):
# the first full segments bounce off gateway A and TCP settles on the MTU.
in_a ip route flush cache
in_a ip -6 route flush cache
capture_start $P-hostb hb0 "$WORK/hostb.pcap" -s 96 tcp
ip netns exec $P-hostb python3 tests/e2e/xfer.py serve 10.2.1.10 5001 >"$WORK/xfer-1.recv" 2>&1 &
S1=$!
ip netns exec $P-hostb python3 tests/e2e/xfer.py serve fd00:2:2::10 5001 >"$WORK/xfer-2.recv" 2>&1 &
S2=$!
BG+=($S1 $S2)
in_a timeout 60 python3 tests/e2e/xfer.py send 10.1.1.10 10.2.1.10 5001 4194304 >"$WORK/xfer-1.sent" 2>&1 \
    || fail "TCP through tunnel 1: $(cat "$WORK/xfer-1.sent")"
in_a timeout 60 python3 tests/e2e/xfer.py send fd00:1:2::10 fd00:2:2::10 5001 4194304 >"$WORK/xfer-2.sent" 2>&1 \
    || fail "TCP through tunnel 2: $(cat "$WORK/xfer-2.sent")"
wait $S1 $S2 || fail "a TCP receiver failed"
for k in 1 2; do
    [ "$(cat "$WORK/xfer-$k.sent")" = "$(cat "$WORK/xfer-$k.recv")" ] \
        || fail "TCP through tunnel $k: sent $(cat "$WORK/xfer-$k.sent"), received $(cat "$WORK/xfer-$k.recv")"
done
sleep 0.5
captures_stop

python3 - "$WORK/hostb.pcap" <<'PY' || fail "TCP segment sizes on host B's link"
import struct, sys
sys.path.insert(0, "tests/e2e")
from midlink import frames
# (family, source) -> IP lengths of data segments
flows = {4: [], 6: []}
for fr in frames(sys.argv[1]):
    et = struct.unpack("!H", fr[12:14])[0]
    if et == 0x0800 and fr[26:30] == bytes([10, 1, 1, 10]):
        ihl = (fr[14] & 15) * 4
        total = struct.unpack("!H", fr[16:18])[0]
        doff = (fr[14 + ihl + 12] >> 4) * 4
        if total - ihl - doff > 0:
            flows[4].append(total)
    elif et == 0x86DD and fr[22:38].hex().startswith("fd000001000200"):
        plen = struct.unpack("!H", fr[18:20])[0]
        doff = (fr[54 + 12] >> 4) * 4
        if plen - doff > 0:
            flows[6].append(plen + 40)
ok = True
for fam, want in ((4, 1446), (6, 1406)):
    sizes = flows[fam]
    full = sum(1 for s in sizes if s == want)
    print(f"IPv{fam} through tunnel {1 if fam == 4 else 2}: {len(sizes)} data segments, largest {max(sizes, default=0)} bytes, "
          f"{full} of exactly {want}")
    if not sizes or max(sizes) != want or full < 0.9 * len(sizes):
        print(f"FAIL: want (nearly) all segments of exactly {want} bytes and none larger")
        ok = False
sys.exit(0 if ok else 1)
PY
gateways_stop || fail "a gateway did not exit with status 0 on SIGINT"
python3 - "$WORK/a.json" <<'PY' || fail "gateway A's counters"
import json, sys
s = json.load(open(sys.argv[1]))
d = s["drops"]
assert s["totals"]["balanced"], s["totals"]
assert d["mtu_exceeded"] >= 6, d   # 4 pings, then TCP's first full segments
bad = {k: v for k, v in d.items() if v and k in ("icv_mismatch", "replayed", "unknown_spi", "truncated", "policy_mismatch", "icmp_rate_limited")}
assert not bad, bad
print("gateway A: mtu_exceeded", d["mtu_exceeded"], "(each answered with ICMP), no ESP drops")
PY
echo "PASS: path MTU through the tunnel (ICMP, route cache, full-size TCP segments), in $(( $(date +%s) - start ))s"
