#!/usr/bin/env bash
# End to end at MTU 9000: every link of the netns topology has MTU 9000 and
# the gateways run the demo configs with `mtu = 9000` and net_af_packet
# rings of 9216-byte frames (scripts/gateways.sh adds framesz/blocksz).
# The tunnel's inner MTU is worked out here from RFC 4303/4106 sizes,
# independently of espgw: aes128gcm16 over IPv4, 9000 - 20 IP - 8 ESP
# - 8 IV - 16 ICV = 8948 for payload + 2-byte trailer padded to 4, so the
# largest inner packet is 8946.
#   * a DF ping of exactly 8946 bytes crosses the tunnel, one byte more gets
#     ICMP fragmentation needed (mtu = 8946) from gateway A;
#   * 16 MiB of TCP arrive intact (sha256), in segments of exactly 8946
#     bytes on host B's link (the SYN's MSS is clamped to fit the tunnel);
#   * only ESP and ARP on the middle link, ESP packets up to exactly 9000
#     bytes and no plaintext marker;
#   * gateway A says DPDK was configured below MTU 9000 and why, and both
#     gateways' counters balance with no ESP drops.
#
# Needs root. ESPGW overrides the binary (default target/release/espgw).
P=e2ejumbo
LOG_TAIL=20
. "$(dirname "$0")/common.bash"
start=$(date +%s)
INNER=8946

MTU=9000 gateways_up >"$WORK/up.log" 2>&1 || fail "the tunnel did not come up at MTU 9000: $(cat "$WORK/up.log")"
grep -q "net_af_packet advertises max frame 1518; frames up to MTU 9000 are carried via framesz=9216" "$WORK/a.log" \
    || fail "gateway A did not log why DPDK runs below MTU 9000"

# Captures checked whole (tcpdump's own drop count) by captures_stop.
capture_start $P-gwa gwa-unprot "$WORK/mid-a.pcap"
capture_start $P-gwb gwb-unprot "$WORK/mid-b.pcap"
capture_start $P-hostb hb0 "$WORK/hostb.pcap" -s 96 tcp

# ICMP payload = inner MTU - 20 IP - 8 ICMP.
in_a ping -4 -M do -c 3 -i 0.2 -w 5 -s $((INNER - 28)) 10.2.0.10 >"$WORK/ping-fits.log" 2>&1 \
    || fail "a DF ping of exactly $INNER bytes through the tunnel failed: $(cat "$WORK/ping-fits.log")"
out=$(in_a ping -4 -M do -c 1 -w 3 -s $((INNER - 28 + 1)) 10.2.0.10 2>&1 || true)
echo "$out" | grep -q "From 10.1.0.1 .*Frag needed and DF set (mtu = $INNER)" \
    || fail "no ICMP frag needed with mtu $INNER from gateway A for $((INNER + 1)) bytes: $out"
echo "DF ping of $INNER bytes passes; $((INNER + 1)) gets frag needed (mtu = $INNER) from gateway A"

# TCP with the route cache flushed: MSS clamping alone must fit the tunnel.
in_a ip route flush cache
ip netns exec $P-hostb python3 tests/e2e/xfer.py serve 10.2.0.10 5001 >"$WORK/xfer.recv" 2>&1 &
SERVER=$!
BG+=($SERVER)
in_a timeout 40 python3 tests/e2e/xfer.py send 10.1.0.10 10.2.0.10 5001 16777216 >"$WORK/xfer.sent" 2>&1 \
    || fail "TCP through the tunnel: $(cat "$WORK/xfer.sent")"
wait $SERVER || fail "the TCP receiver failed: $(cat "$WORK/xfer.recv")"
[ "$(cat "$WORK/xfer.sent")" = "$(cat "$WORK/xfer.recv")" ] \
    || fail "TCP through the tunnel: sent $(cat "$WORK/xfer.sent"), received $(cat "$WORK/xfer.recv")"
echo "16 MiB of TCP through the tunnel, sha256 intact: $(cat "$WORK/xfer.recv")"
sleep 0.5
captures_stop

python3 - "$INNER" "$WORK/hostb.pcap" "$WORK/mid-a.pcap" "$WORK/mid-b.pcap" <<'PY' || fail "frame sizes / middle link"
import struct, sys
sys.path.insert(0, "tests/e2e")
from midlink import classify, frames
inner = int(sys.argv[1])
ok = True
# Host B's link: IPv4 lengths of TCP data segments from host A.
sizes = []
for fr in frames(sys.argv[2]):
    if fr[12:14] == b"\x08\x00" and fr[26:30] == bytes([10, 1, 0, 10]):
        ihl = (fr[14] & 15) * 4
        total = struct.unpack("!H", fr[16:18])[0]
        doff = (fr[14 + ihl + 12] >> 4) * 4
        if total - ihl - doff > 0:
            sizes.append(total)
full = sum(1 for s in sizes if s == inner)
print(f"host B's link: {len(sizes)} TCP data segments, largest {max(sizes, default=0)} bytes, {full} of exactly {inner}")
if not sizes or max(sizes) != inner or full < 0.9 * len(sizes):
    print(f"FAIL: want (nearly) all segments of exactly {inner} bytes and none larger")
    ok = False
# Middle link: ESP and ARP only, ESP up to the outer MTU, no plaintext.
kinds, esp_sizes = {}, []
for path in sys.argv[3:]:
    for fr in frames(path):
        kind, fam, _ = classify(fr)
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind == "esp":
            esp_sizes.append(struct.unpack("!H", fr[16:18])[0])
        if b"espgw-xfer-clear" in fr:
            print("FAIL: plaintext marker on the middle link")
            ok = False
at_mtu = sum(1 for s in esp_sizes if s == 9000)
print(f"middle link: {kinds}, largest ESP packet {max(esp_sizes, default=0)} bytes, {at_mtu} of exactly 9000")
if set(kinds) - {"esp", "arp"}:
    print("FAIL: non-ESP traffic on the middle link")
    ok = False
if max(esp_sizes, default=0) != 9000 or at_mtu < 1000:
    print("FAIL: want ESP packets of exactly 9000 bytes (full inner packets) and none larger")
    ok = False
sys.exit(0 if ok else 1)
PY

gateways_stop || fail "a gateway did not exit with status 0 on SIGINT"
python3 - "$WORK/a.json" "$WORK/b.json" <<'PY' || fail "gateway counters"
import json, sys
for path in sys.argv[1:]:
    s = json.load(open(path))
    d = s["drops"]
    assert s["totals"]["balanced"], (path, s["totals"])
    bad = {k: v for k, v in d.items() if v and k in ("icv_mismatch", "replayed", "unknown_spi", "truncated", "policy_mismatch")}
    assert not bad, (path, bad)
    print(path.rsplit("/", 1)[-1], "rx", s["totals"]["rx"], "tx", s["totals"]["tx"], "drops", {k: v for k, v in d.items() if v})
assert json.load(open(sys.argv[1]))["drops"]["mtu_exceeded"] >= 1, "gateway A counted no mtu_exceeded"
PY
echo "PASS: MTU 9000 through the tunnel (inner MTU $INNER, PMTU, 16 MiB TCP, ESP-only middle link), in $(( $(date +%s) - start ))s"
