#!/usr/bin/env bash
# The demo / end-to-end topology, in network namespaces joined by veth pairs:
#
#   [hosta] ha0 ---- gwa-prot [gwa] gwa-unprot ---- gwb-unprot [gwb] gwb-prot ---- hb0 [hostb]
#   10.1.0.10/24      (espgw A: 10.1.0.1, 192.0.2.1)  (espgw B: 192.0.2.2, 10.2.0.1)  10.2.0.10/24
#
#   [hosta] hd0 ------------------------------------------------------------------ hd1 [hostb]
#   10.9.0.1/24                      direct link, the baseline                      10.9.0.2/24
#
# The gateways' interfaces carry no kernel address: espgw owns them through
# net_af_packet and answers ARP for its own addresses.
#
# Usage: [MTU=9000] scripts/netns.sh up [PREFIX] | down [PREFIX]
# PREFIX (default "eg") prefixes namespace names so parallel runs don't collide:
# namespaces PREFIX-hosta, PREFIX-gwa, PREFIX-gwb, PREFIX-hostb. Interface
# names are the same in every run (they live inside the namespaces).
set -euo pipefail

cmd=${1:-}
P=${2:-eg}
HA=$P-hosta GA=$P-gwa GB=$P-gwb HB=$P-hostb

# Checksum/segmentation offloads off: af_packet would otherwise hand the
# gateway packets with unfilled checksums and 64 KiB GSO super-frames.
no_offload() { ip netns exec "$1" ethtool -K "$2" rx off tx off tso off gso off gro off >/dev/null 2>&1 || true; }

down() {
    for ns in "$HA" "$GA" "$GB" "$HB"; do
        ip netns del "$ns" 2>/dev/null || true
    done
}

up() {
    down
    for ns in "$HA" "$GA" "$GB" "$HB"; do
        ip netns add "$ns"
        ip -n "$ns" link set lo up
    done
    ip link add ha0 netns "$HA" type veth peer name gwa-prot netns "$GA"
    ip link add gwa-unprot netns "$GA" type veth peer name gwb-unprot netns "$GB"
    ip link add gwb-prot netns "$GB" type veth peer name hb0 netns "$HB"
    ip link add hd0 netns "$HA" type veth peer name hd1 netns "$HB"

    ip -n "$HA" addr add 10.1.0.10/24 dev ha0
    ip -n "$HA" -6 addr add fd00:1::10/64 dev ha0 nodad
    ip -n "$HB" addr add 10.2.0.10/24 dev hb0
    ip -n "$HB" -6 addr add fd00:2::10/64 dev hb0 nodad
    ip -n "$HA" addr add 10.9.0.1/24 dev hd0
    ip -n "$HB" addr add 10.9.0.2/24 dev hd1

    for pair in "$HA ha0" "$HA hd0" "$GA gwa-prot" "$GA gwa-unprot" "$GB gwb-unprot" "$GB gwb-prot" "$HB hb0" "$HB hd1"; do
        set -- $pair
        no_offload "$1" "$2"
        ip -n "$1" link set "$2" mtu "${MTU:-1500}" up
    done

    # The gateways' kernels stay off the links espgw owns: no IPv6 autoconf
    # chatter (MLD, router solicitations) from them.
    for ns in "$GA" "$GB"; do
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    done

    ip -n "$HA" route add 10.2.0.0/24 via 10.1.0.1
    ip -n "$HA" -6 route add fd00:2::/64 via fd00:1::1
    ip -n "$HB" route add 10.1.0.0/24 via 10.2.0.1
    ip -n "$HB" -6 route add fd00:1::/64 via fd00:2::1
}

case "$cmd" in
    up) up ;;
    down) down ;;
    *) echo "usage: $0 up|down [PREFIX]" >&2; exit 2 ;;
esac
