# Sourced by scripts/demo.sh and scripts/bench-e2e.sh: starts the netns
# topology of scripts/netns.sh with espgw A and B on it, and stops it all.
#
# Set before sourcing: P (namespace prefix), WORK (scratch dir), ESPGW (binary).
# Optional: GW_CONFIG_A, GW_CONFIG_B (the two gateways' configs; default the
# manual-SA pair configs/static-a.toml and configs/static-b.toml; the demo
# sets gateway.toml and configs/gateway-b.toml, the IKEv2 pair), MTU (outer MTU of every link, default 1500), IDLE_SLEEP_US
# (`[dataplane] idle_sleep_us` of both gateways, default theirs),
# HOSTS_IPV4_ONLY (IPv6 off on hosts A and B before the gateways start:
# their kernels then send the gateways no MLD reports or router
# solicitations, so an IPv4-only test can require every drop to be zero).

GW_PIDS=()

in_a() { ip netns exec "$P-hosta" "$@"; }
in_b() { ip netns exec "$P-hostb" "$@"; }

# af_packet_jumbo MTU FILES...: give every net_af_packet device in the
# config FILES a ring whose frames carry MTU (framesz: the frame + 56 bytes
# of ring header and two VLAN tags, rounded up to 1 KiB; four frames a
# block, so blocks are whole pages), and fewer of them, since each frame is
# 4.5x bigger: 2048 frames carry more bytes than 4096 of 2 KiB.
# espgw refuses an MTU the ring cannot carry and names these values.
af_packet_jumbo() {
    local mtu=$1; shift
    local framesz=$(( (mtu + 56 + 1023) / 1024 * 1024 ))
    sed -i "s#^\(device = \"net_af_packet[0-9]*,[^\"]*\)\"#\1,framesz=$framesz,blocksz=$((4 * framesz)),framecnt=2048\"#" "$@"
}

# gateways_up: topology + both gateways, returns once host A reaches host B
# through the tunnel (or fails with the gateway logs).
gateways_up() {
    local mtu=${MTU:-1500}
    MTU=$mtu scripts/netns.sh up "$P"
    if [ -n "${HOSTS_IPV4_ONLY:-}" ]; then
        hosts_ipv4_only
    fi
    # Configs with keys should be readable by root only: copy them 0600.
    gateway_config a "${GW_CONFIG_A:-configs/static-a.toml}"
    gateway_config b "${GW_CONFIG_B:-configs/static-b.toml}"
    sed -i "s#^control_socket = .*#control_socket = \"$WORK/a.sock\"#" "$WORK/gateway-a.toml"
    sed -i "s#^control_socket = .*#control_socket = \"$WORK/b.sock\"#" "$WORK/gateway-b.toml"
    sed -i "s#^mtu = 1500#mtu = $mtu#" "$WORK"/gateway-*.toml
    if [ "$mtu" -gt 1500 ]; then
        af_packet_jumbo "$mtu" "$WORK"/gateway-*.toml
    fi
    if [ -n "${IDLE_SLEEP_US:-}" ]; then
        sed -i "/^poll = /a idle_sleep_us = $IDLE_SLEEP_US" "$WORK"/gateway-*.toml
    fi
    # Metrics ports are per gateway; two demos at once would clash, so drop them.
    sed -i '/^metrics = /d' "$WORK"/gateway-*.toml
    # SA state (persisted sequence numbers, key records) per run: tests reuse
    # fixed rekey keys, which a kept state would refuse as used before.
    if [ -z "${KEEP_STATE:-}" ]; then
        for s in a b; do
            sed -i "/^\[gateway\]/a state_dir = \"$WORK/state-$s\"" "$WORK/gateway-$s.toml"
        done
    fi

    # B first: with an IKEv2 pair, A's first IKE_SA_INIT then finds B
    # listening rather than waiting for a retransmission.
    gateway_start b "$WORK/gateway-b.toml"
    gateway_start a "$WORK/gateway-a.toml"
    gateways_wait_ping 10.2.0.10
}

# gateway_config SIDE CONFIG: CONFIG copied to $WORK/gateway-SIDE.toml
# (mode 600), and the file its `psk_file` names (relative to CONFIG's
# directory, as espgw reads it) to $WORK/SIDE.psk, also 600, the copy's
# psk_file pointing there.
gateway_config() {
    local side=$1 src=$2 dst="$WORK/gateway-$1.toml" psk
    install -m 600 "$src" "$dst"
    psk=$(sed -n 's/^psk_file = "\([^"]*\)".*/\1/p' "$src" | head -n 1)
    if [ -n "$psk" ]; then
        case "$psk" in /*) ;; *) psk="$(dirname "$src")/$psk" ;; esac
        install -m 600 "$psk" "$WORK/$side.psk"
        sed -i "s#^psk_file = \"[^\"]*\"#psk_file = \"$WORK/$side.psk\"#" "$dst"
    fi
}

# hosts_ipv4_only: IPv6 off in hosts A and B (see HOSTS_IPV4_ONLY above).
hosts_ipv4_only() {
    in_a sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    in_b sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
}

# gateways_stop: SIGINT both gateways (they write --stats-json) and wait;
# fails if either did not exit with status 0.
gateways_stop() {
    local p rc=0
    for p in "${GW_PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    for p in "${GW_PIDS[@]}"; do wait "$p" 2>/dev/null || rc=1; done
    GW_PIDS=()
    return $rc
}

# gateways_down: stop the gateways and remove the namespaces.
gateways_down() {
    gateways_stop || true
    scripts/netns.sh down "$P"
}

# gateway_start SIDE CONFIG: start espgw for gateway SIDE (a or b) with
# CONFIG on a topology that is already up (scripts/netns.sh up "$P");
# its log is $WORK/SIDE.log, its counters $WORK/SIDE.json on stop.
gateway_start() {
    ip netns exec "$P-gw$1" "$ESPGW" run --config "$2" --stats-json "$WORK/$1.json" >"$WORK/$1.log" 2>&1 &
    GW_PIDS+=($!)
}

# gateways_wait_ping ARGS...: retry `ping -c1 -W1 ARGS` in host A (e.g.
# `-I 10.1.1.10 10.2.1.10`) until it answers (60 tries); fails with the
# gateway logs if it never does or a gateway exits.
gateways_wait_ping() {
    local p
    for _ in $(seq 1 60); do
        if in_a ping -c1 -W1 "$@" >/dev/null 2>&1; then return 0; fi
        for p in "${GW_PIDS[@]}"; do
            kill -0 "$p" 2>/dev/null || { echo "a gateway exited:"; cat "$WORK"/*.log; return 1; }
        done
    done
    echo "no answer to ping $*; gateway logs:"
    cat "$WORK"/*.log
    return 1
}

# tunnel_hosts N SIDES: the host side of tests/e2e/tunnels.py's configs.
# For k in 1..N, host A gets 10.1.k.10 and fd00:1:k::10 (SIDES has "a"),
# host B 10.2.k.10 and fd00:2:k::10 (SIDES has "b"), with routes to the
# far side's 10.x.0.0/16 and fd00:x::/32 through the gateways.
tunnel_hosts() {
    local n=$1 sides=$2 k
    if [[ $sides == *a* ]]; then
        for k in $(seq 1 "$n"); do
            echo "addr add 10.1.$k.10/32 dev ha0"
            echo "addr add fd00:1:$k::10/128 dev ha0 nodad"
        done | in_a ip -batch -
        in_a ip route add 10.2.0.0/16 via 10.1.0.1
        in_a ip -6 route add fd00:2::/32 via fd00:1::1
    fi
    if [[ $sides == *b* ]]; then
        for k in $(seq 1 "$n"); do
            echo "addr add 10.2.$k.10/32 dev hb0"
            echo "addr add fd00:2:$k::10/128 dev hb0 nodad"
        done | in_b ip -batch -
        in_b ip route add 10.1.0.0/16 via 10.2.0.1
        in_b ip -6 route add fd00:1::/32 via fd00:2::1
    fi
}
