#!/usr/bin/env bash
# End to end: TX UDP checksum offload. espgw runs with two net_tap ports
# (the virtual device here that offers RTE_ETH_TX_OFFLOAD_UDP_CKSUM; it
# computes the checksum in its TX path, as a NIC does in hardware) in a
# namespace whose kernel is both the protected host and the peer gateway's
# address. The tunnel's ESP goes in UDP over IPv6, whose UDP checksum
# covers the whole packet: with `tx_checksum_offload = "auto"` espgw only
# seeds it and asks the port for it, with `"off"` it computes it itself.
# (And "auto" in pipeline mode, whose I/O lcore transmits what the
# workers hand it.) Either way every packet sent into the tunnel must come back to the
# kernel's UDP socket on [fd00:99::2]:4500 (the kernel drops a datagram
# whose checksum does not verify, and counts it) and decrypt with scapy
# (tests/e2e/tx_offload_traffic.py); espgw's log must say which way it went.
P=txo
. "$(dirname "$0")/common.bash"

NS="$P-gw"
ESPGW_PID=""
on_cleanup() {
    [ -z "$ESPGW_PID" ] || kill "$ESPGW_PID" 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
}

for run in auto:run-to-completion off:run-to-completion auto:pipeline; do
    mode=${run%:*} dpmode=${run#*:}
    echo "--- tx_checksum_offload = \"$mode\", mode = \"$dpmode\""
    ip netns del "$NS" 2>/dev/null || true
    ip netns add "$NS"
    ip netns exec "$NS" ip link set lo up
    cat >"$WORK/gw.toml" <<TOML
default_action = "discard"
[gateway]
name = "gw-txo"
state_dir = "$WORK/state-$mode-$dpmode"
[dataplane]
workers = 1
mode = "$dpmode"
mtu = 1500
poll = "adaptive"
tx_checksum_offload = "$mode"
eal = ["--no-huge", "--no-shconf", "--no-pci", "-m", "256", "--log-level=lib.eal:warning", "--log-level=pmd.net.tap:error"]
[[port]]
name = "prot"
side = "protected"
device = "net_tap0,iface=txop"
address = ["10.1.0.1/24", "fd00:1::1/64"]
mac = "02:00:00:00:77:01"
[[port]]
name = "unprot"
side = "unprotected"
device = "net_tap1,iface=txou"
address = "fd00:99::1/64"
mac = "02:00:00:00:77:02"
[[tunnel]]
name = "to-peer"
local = "fd00:99::1"
remote = "fd00:99::2"
encap = "udp"
local_ts = ["10.1.0.0/24", "fd00:1::/64"]
remote_ts = ["10.2.0.0/24", "fd00:2::/64"]
esp = "aes128gcm16"
out = { spi = 0x0000a001, key = "0xbef3215147135cd554e9156cae70f5a899331a52" }
in = { spi = 0x0000b001, key = "0x9b890a06962125b8925af8d8f76eac664799f983" }
TOML
    chmod 600 "$WORK/gw.toml"
    ip netns exec "$NS" "$ESPGW" run --config "$WORK/gw.toml" --duration 20 \
        --stats-json "$WORK/stats-$mode-$dpmode.json" >"$WORK/gw-$mode-$dpmode.log" 2>&1 &
    ESPGW_PID=$!
    for _ in $(seq 1 100); do
        ip netns exec "$NS" ip link show txou >/dev/null 2>&1 && \
            grep -q 'port unprot: driver' "$WORK/gw-$mode-$dpmode.log" && break
        kill -0 "$ESPGW_PID" 2>/dev/null || fail "espgw exited: $(cat "$WORK/gw-$mode-$dpmode.log")"
        sleep 0.1
    done
    ip netns exec "$NS" ip link show txou >/dev/null 2>&1 || fail "espgw made no tap txou"
    # The kernel's side: host 10.1.0.10 / fd00:1::10 behind the gateway,
    # peer fd00:99::2 in front of it.
    ip netns exec "$NS" sh -e -c '
        ip link set txop up
        ip link set txou up
        ip addr add 10.1.0.10/24 dev txop
        ip -6 addr add fd00:1::10/64 dev txop nodad
        ip -6 addr add fd00:99::2/64 dev txou nodad
        ip route add 10.2.0.0/24 via 10.1.0.1
        ip -6 route add fd00:2::/64 via fd00:1::1'
    ip netns exec "$NS" python3 tests/e2e/tx_offload_traffic.py 200 \
        || fail "traffic through the tap ports (tx_checksum_offload = \"$mode\", $dpmode)"
    grep -Eq 'port prot: driver net_tap, .*TX UDP checksum: (not asked of the device|in software \(tx_checksum_offload = "off"\))' \
        "$WORK/gw-$mode-$dpmode.log" || fail "the protected port: $(grep 'port prot' "$WORK/gw-$mode-$dpmode.log")"
    case $mode in
        auto) want='port unprot: driver net_tap, .*TX UDP checksum: offloaded' ;;
        off) want='port unprot: driver net_tap, .*TX UDP checksum: in software \(tx_checksum_offload = "off"\)' ;;
    esac
    grep -Eq "$want" "$WORK/gw-$mode-$dpmode.log" || fail "espgw's log lacks /$want/: $(grep 'port unprot' "$WORK/gw-$mode-$dpmode.log")"
    grep -E 'port unprot: driver' "$WORK/gw-$mode-$dpmode.log" | sed 's/^/  /'
    kill -INT "$ESPGW_PID" 2>/dev/null || true
    wait "$ESPGW_PID" || true
    ESPGW_PID=""
    # The stats JSON says the same per port, and the books balance.
    want_json=$([ "$mode" = auto ] && echo true || echo false)
    python3 - "$WORK/stats-$mode-$dpmode.json" "$want_json" <<'PY' || fail "stats JSON ($mode, $dpmode)"
import json, sys
s = json.load(open(sys.argv[1]))
want = sys.argv[2] == "true"
ports = {p["name"]: p["tx_udp_checksum"] for p in s["ports"]}
# The protected port is never asked (no ESP leaves by it; on some NICs
# any TX offload slows the whole port).
if ports != {"prot": False, "unprot": want}:
    sys.exit(f"ports' tx_udp_checksum {ports}, want prot false, unprot {want}")
if not s["totals"]["balanced"]:
    sys.exit(f"counters do not balance: {s['totals']}")
PY
    ip netns del "$NS"
done
echo "PASS: ESP in UDP over IPv6 through a port with TX UDP checksum offload, and without"
