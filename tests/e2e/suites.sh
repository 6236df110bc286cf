#!/usr/bin/env bash
# End to end: every ESP suite (aes128gcm16, aes256gcm16, chacha20poly1305,
# aes128-sha256, aes256-sha256, aes128-sha1) x ESN on/off x outer IPv4/IPv6
# x UDP encapsulation on/off: 48 tunnels between ONE pair of espgw
# gateways (configs made by tunnels.py), each carrying IPv4 and IPv6 inner
# traffic between its own pair of host addresses. Gateway B runs with
# `max_simd_bitwidth = 256`: on a CPU with AVX-512 and VAES the two
# gateways then seal and open with different code (A: intel-ipsec-mb and
# espgw-aesgcm's 512-bit path; B: the 128-bit path and ring, what an
# AVX2-only CPU runs), checked with `espgw check` and B's log.
#
# Per tunnel and inner family: pings of 30, 500 and 1300 bytes carrying a
# marker ("espgwclear"; ping lays the pattern at the data offset modulo its
# length after a 16-byte timestamp, so 30 bytes is the smallest ping that
# holds a whole marker: a 16-byte one held none), all answered. On four
# tunnels (both outer families, both encapsulations, GCM, ChaCha20,
# CBC+SHA-256, CBC+SHA-1) a 1 MiB TCP transfer arrives with
# the same sha256. Afterwards: every SA of every tunnel carried packets on
# both gateways, no ESP/policy drop anywhere, counters balance; the middle
# link carried only ARP/ND, ESP and ESP-in-UDP-4500, each SPI in its
# tunnel's outer family and encapsulation, and never a plaintext marker
# (which host A's own link does show: the positive control), on captures
# tcpdump reports whole.
#
# Needs root. ESPGW overrides the binary (default target/release/espgw).
P=e2esuites
PATTERN=6573706777636c656172   # "espgwclear": must never be seen on the middle link
LOG_TAIL=5
. "$(dirname "$0")/common.bash"
on_fail() {
    for f in "$WORK"/a.json "$WORK"/b.json; do
        [ -f "$f" ] && python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(sys.argv[1], "drops", {k: v for k, v in s["drops"].items() if v})' "$f"
    done
    return 0
}
start=$(date +%s)

scripts/netns.sh up "$P"
tunnels_gen suites

tunnel_hosts "$N" ab

gateway_start a "$WORK/gw-a.toml"
gateway_start b "$WORK/gw-b.toml"
gateways_wait_ping -I 10.1.1.10 10.2.1.10 >"$WORK/up.log" 2>&1 || fail "the first tunnel did not come up"
# Gateway B is held to 256-bit vectors (max_simd_bitwidth, tests/e2e/tunnels.py):
# on a CPU with AVX-512 and VAES, A runs intel-ipsec-mb and espgw-aesgcm's
# 512-bit path, B what an AVX2-only CPU runs, so every AEAD tunnel below
# crosses between the two implementations.
a_gcm=$("$ESPGW" check --config "$WORK/gw-a.toml" 2>/dev/null | grep '^cipher aes128gcm16') || fail "espgw check gw-a.toml"
b_gcm=$("$ESPGW" check --config "$WORK/gw-b.toml" 2>/dev/null | grep '^cipher aes128gcm16') || fail "espgw check gw-b.toml"
case $b_gcm in *ipsec-mb*|*AVX-512*) fail "gateway B (max_simd_bitwidth = 256) would run: $b_gcm" ;; esac
CROSS=""
case $a_gcm in
    *ipsec-mb*)
        grep -q 'max_simd_bitwidth = 256' "$WORK/b.log" || fail "gateway B did not say it runs no 512-bit code: $(tail -5 "$WORK/b.log")"
        CROSS=", gateway A on 512-bit code and B held to 256 bits" ;;
esac
echo "ciphers: A $a_gcm; B $b_gcm"

# Capture the middle link (espgw's af_packet ports do not bypass the qdisc,
# so one end sees both directions), and host A's link, where the markers
# are in clear (the positive control of the middle link's check).
capture_start $P-gwa gwa-unprot "$WORK/mid.pcap"
capture_start $P-gwa gwa-prot "$WORK/prot-a.pcap"

# Warm-up: one ping per tunnel and family resolves every neighbor (loss allowed).
for k in $(seq 1 "$N"); do
    in_a ping -c1 -W2 -I 10.1.$k.10 10.2.$k.10 >/dev/null 2>&1 &
    in_a ping -6 -c1 -W2 -I fd00:1:$k::10 fd00:2:$k::10 >/dev/null 2>&1 &
done
wait_all() { local p rc=0; for p in "$@"; do wait "$p" || rc=1; done; return $rc; }
sleep 2.5

ping_series() {  # k family: three sizes, 2 pings each, the summary lines
    local k=$1 fam=$2 src dst size
    if [ "$fam" = 4 ]; then src=10.1.$k.10 dst=10.2.$k.10; else src=fd00:1:$k::10 dst=fd00:2:$k::10; fi
    for size in 30 500 1300; do
        echo "size $size"
        in_a ping -"$fam" -c 2 -i 0.2 -w 8 -s $size -p $PATTERN -I $src $dst 2>&1 | grep -Ev '^(PING|--- | *$|rtt|round-trip)' | grep -Ev 'bytes from .* time=[0-9.]+ ms$' || true
    done
}
series_ok() { [ "$(grep -c ' 2 received' "$1" || true)" -eq 3 ]; }
# The test: every tunnel and family, three sizes, 16 series at a time;
# each ping's summary line is checked (2 of 2 received). -w, not -W: once
# one reply came, ping -W waits only two round trips for the rest, and on
# 2 busy cores a round trip varies more than that.
PINGS=()
for k in $(seq 1 "$N"); do
    for fam in 4 6; do
        ping_series $k $fam >"$WORK/ping-$k-$fam.out" &
        PINGS+=($!)
    done
    if [ $((k % 8)) -eq 0 ]; then wait_all "${PINGS[@]}" || true; PINGS=(); fi
done
wait_all "${PINGS[@]}" || true
bad=0
for k in $(seq 1 "$N"); do
    for fam in 4 6; do
        series_ok "$WORK/ping-$k-$fam.out" && continue
        bad=$((bad + 1))
        echo "tunnel $k ($(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[int(sys.argv[2])-1]["name"])' "$WORK/tunnels.json" "$k")) IPv$fam inner:" >&2
        cat "$WORK/ping-$k-$fam.out" >&2
    done
done
[ $bad -eq 0 ] || fail "$bad of $((2 * N)) tunnel/family ping series lost packets"
echo "ping: $N tunnels x IPv4/IPv6 inner x 30/500/1300 bytes, every ping answered"

# TCP transfers through four tunnels, sha256 compared end to end.
# k:inner family. 2: aes128gcm16 outer IPv4 UDP; 24: chacha20poly1305 ESN outer IPv6 UDP;
# 33: aes256-sha256 outer IPv4; 47: aes128-sha1 ESN outer IPv6.
XFER="2:6 24:6 33:4 47:4"
SERVERS=()
for x in $XFER; do
    k=${x%%:*}
    case $x in *:6) src=fd00:1:$k::10 dst=fd00:2:$k::10 ;; *) src=10.1.$k.10 dst=10.2.$k.10 ;; esac
    ip netns exec $P-hostb python3 tests/e2e/xfer.py serve $dst 5001 >"$WORK/xfer-$k.recv" 2>&1 &
    SERVERS+=($!)
    BG+=($!)
done
for x in $XFER; do
    k=${x%%:*}
    case $x in *:6) src=fd00:1:$k::10 dst=fd00:2:$k::10 ;; *) src=10.1.$k.10 dst=10.2.$k.10 ;; esac
    in_a timeout 60 python3 tests/e2e/xfer.py send $src $dst 5001 1048576 >"$WORK/xfer-$k.sent" 2>&1 \
        || fail "TCP transfer through tunnel $k: $(cat "$WORK/xfer-$k.sent")"
done
wait_all "${SERVERS[@]}" || fail "a TCP receiver failed: $(cat "$WORK"/xfer-*.recv)"
for x in $XFER; do
    k=${x%%:*}
    [ "$(cat "$WORK/xfer-$k.sent")" = "$(cat "$WORK/xfer-$k.recv")" ] \
        || fail "TCP transfer through tunnel $k: sent $(cat "$WORK/xfer-$k.sent"), received $(cat "$WORK/xfer-$k.recv")"
done
echo "TCP: 1 MiB through each of tunnels 2, 24, 33, 47 arrived intact"

sleep 0.5
captures_stop
gateways_stop || fail "a gateway did not exit with status 0 on SIGINT"
python3 tests/e2e/sastats.py "$WORK/tunnels.json" 12 "$WORK/a.json" "$WORK/b.json" || fail "per-SA counters"
python3 tests/e2e/midlink.py --positive "$WORK/prot-a.pcap" "$WORK/tunnels.json" espgwclear,espgw-xfer-clear "$WORK/mid.pcap" \
    || fail "middle link"
echo "PASS: $N tunnels (6 suites x ESN x outer IPv4/IPv6 x UDP encap), IPv4+IPv6 inner$CROSS, in $(( $(date +%s) - start ))s"
