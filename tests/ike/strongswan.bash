# Sourced by the strongSwan interop tests (tests/ike/charon-pair.sh): two
# independent strongSwan 5.9.8 charon daemons, "a" and "b", each in its own
# network namespace, joined by a veth pair. See docs/ike.md, "strongSwan
# test peer", for why it is built this way.
#
# Layout (P is the namespace prefix, default ike-ssw):
#   namespace $P-a: veth ssw-a 192.0.2.1/24, protected subnet 10.1.0.1/32 on lo
#   namespace $P-b: veth ssw-b 192.0.2.2/24, protected subnet 10.2.0.1/32 on lo
# Each charon gets, under $SSW_WORK/NAME/:
#   strongswan.conf   its own (STRONGSWAN_CONF), self-contained: an explicit
#                     plugin list and a file log at the levels that print
#                     the derived keys and every IKE message in clear
#   swanctl/          its own swanctl directory (SWANCTL_DIR)
#   charon.vici       its own vici socket
#   charon.log        the log
# and a private tmpfs on /run (charon's pid file is the compiled-in
# /var/run/charon.pid, and /var/run is /run), mounted in a mount namespace
# of its own (`unshare -m`), so two charons and the host never meet.
#
# Functions: ssw_net_up, ssw_conf NAME, ssw_start NAME, ssw_stop NAME,
# ssw_ctl NAME SWANCTL-ARGS..., ssw_capture_start PCAP, ssw_capture_stop,
# ssw_fail MSG, and ssw_cleanup (installed as the EXIT trap).

set -euo pipefail
SSW_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$SSW_ROOT/scripts/skip.bash"

P=${P:-ike-ssw}
SSW_NS_A=$P-a
SSW_NS_B=$P-b
SSW_CHARON=${SSW_CHARON:-/usr/lib/ipsec/charon}
SSW_WORK=${SSW_WORK:-$(mktemp -d /tmp/espgw-ike-ssw.XXXXXX)}
SSW_LOG_TAIL=${SSW_LOG_TAIL:-40}
declare -A SSW_PID=()
declare -A SSW_ADDR=([a]=192.0.2.1 [b]=192.0.2.2)
declare -A SSW_INNER=([a]=10.1.0.1 [b]=10.2.0.1)
declare -A SSW_NET=([a]=10.1.0.0/24 [b]=10.2.0.0/24)
declare -A SSW_NS=([a]=$SSW_NS_A [b]=$SSW_NS_B)
SSW_CAPTURE_PID=""
SSW_CAPTURE=""
SSW_STRAY_PORT=5000

ssw_fail() {
    echo "FAIL: $*" >&2
    local f
    for f in "$SSW_WORK"/*/charon.log "$SSW_WORK"/*/charon.out; do
        # The last lines that are not hex dumps.
        [ -s "$f" ] && { echo "--- $f (last $SSW_LOG_TAIL lines, no hex dumps)"; grep -Ev '^[0-9:]+ [0-9]+\[[A-Z]+\] +[0-9]+: ' "$f" | tail -n "$SSW_LOG_TAIL"; }
    done >&2
    exit 1
}

# The packages of scripts/setup.sh and a kernel that lets us build the
# namespaces; otherwise the test is skipped (an error where skips are not
# allowed, see scripts/skip.bash).
ssw_require() {
    [ "$(id -u)" -eq 0 ] || skip "needs root"
    [ -x "$SSW_CHARON" ] || skip "no strongSwan charon at $SSW_CHARON (scripts/setup.sh installs it)"
    command -v swanctl >/dev/null || skip "no swanctl (scripts/setup.sh installs strongswan-swanctl)"
    command -v pki >/dev/null || skip "no pki (scripts/setup.sh installs strongswan-pki)"
    local p
    for p in kernel-libipsec openssl gcm curve25519 vici; do
        [ -f "/usr/lib/ipsec/plugins/libstrongswan-$p.so" ] ||
            skip "strongSwan plugin $p missing (scripts/setup.sh installs libcharon-extra-plugins, libstrongswan-*-plugins)"
    done
    [ -c /dev/net/tun ] || skip "no /dev/net/tun (kernel-libipsec needs a TUN device)"
}

ssw_net_up() {
    ip netns del "$SSW_NS_A" 2>/dev/null || true
    ip netns del "$SSW_NS_B" 2>/dev/null || true
    ip netns add "$SSW_NS_A"
    ip netns add "$SSW_NS_B"
    # Created directly inside the namespaces: no name in the root one.
    ip link add ssw-a netns "$SSW_NS_A" type veth peer name ssw-b netns "$SSW_NS_B" ||
        skip "cannot create a veth pair"
    local n
    for n in a b; do
        ip -n "${SSW_NS[$n]}" link set lo up
        ip -n "${SSW_NS[$n]}" addr add "${SSW_ADDR[$n]}/24" dev "ssw-$n"
        ip -n "${SSW_NS[$n]}" link set "ssw-$n" up
        # The protected subnet's address. There is no dummy interface
        # driver in every kernel here, so it lives on lo.
        ip -n "${SSW_NS[$n]}" addr add "${SSW_INNER[$n]}/32" dev lo
    done
    ip netns exec "$SSW_NS_A" ping -c 1 -W 2 "${SSW_ADDR[b]}" >/dev/null ||
        ssw_fail "the veth pair does not pass traffic"
}

# ssw_conf NAME [SETTING...]: writes NAME's strongswan.conf and an empty
# swanctl tree; each SETTING (key=value) goes into its charon section.
ssw_conf() {
    local n=$1 d=$SSW_WORK/$1 extra="" kv
    shift
    for kv in "$@"; do extra+="    ${kv%%=*} = ${kv#*=}"$'\n'; done
    mkdir -p "$d"/swanctl/{conf.d,x509,x509ca,private,rsa,ecdsa,pkcs8}
    cat >"$d/strongswan.conf" <<EOF
# charon "$n" of tests/ike/strongswan.bash. Self-contained: nothing from
# /etc/strongswan.d is included, the plugins are listed explicitly.
charon {
    # openssl does DH/ECDH/RSA/ECDSA/AES; gcm, curve25519, gmp and kdf
    # complete it; kernel-libipsec is user-space ESP (this kernel has no
    # XFRM), kernel-netlink its routes; vici is swanctl's interface.
    load = random nonce openssl pem pkcs1 pkcs8 x509 pubkey constraints revocation gcm aes sha1 sha2 hmac kdf gmp curve25519 kernel-libipsec kernel-netlink socket-default vici
    plugins {
        vici {
            socket = unix://$d/charon.vici
        }
    }
    # IKE_SA_INIT retransmits after 1 s, not 4 s: a lost first packet
    # (the veth was just created) must not stall the test.
    retransmit_timeout = 1.0
    retransmit_tries = 3
$extra    filelog {
        main {
            path = $d/charon.log
            time_format = %H:%M:%S
            append = no
            flush_line = yes
            default = 1
            # ike 4: DH secret, SKEYSEED, SK_*, AUTH octets, NAT-D hashes.
            # enc 4: every message's fields, and for SK payloads the IV,
            #        plaintext, padding, ICV and associated data.
            # net 4: each received datagram in hex.
            # chd 4: CHILD_SA seed and keys.
            ike = 4
            enc = 4
            net = 4
            chd = 4
            cfg = 2
            knl = 2
            esp = 2
        }
    }
    syslog {
        daemon {
            default = -1
        }
    }
}
EOF
}

# ssw_start NAME: charon NAME in its namespace; returns once swanctl can
# reach its vici socket.
ssw_start() {
    local n=$1 d=$SSW_WORK/$1
    rm -f "$d/charon.vici"
    ip netns exec "${SSW_NS[$n]}" unshare -m sh -c \
        "mount -t tmpfs -o mode=0755 ssw-run /run && STRONGSWAN_CONF='$d/strongswan.conf' exec '$SSW_CHARON'" \
        >"$d/charon.out" 2>&1 &
    SSW_PID[$n]=$!
    local i
    for i in $(seq 1 100); do
        if [ -S "$d/charon.vici" ] && ssw_ctl "$n" --stats >/dev/null 2>&1; then return 0; fi
        kill -0 "${SSW_PID[$n]}" 2>/dev/null || ssw_fail "charon $n exited at start"
        sleep 0.1
    done
    ssw_fail "charon $n did not open its vici socket"
}

ssw_stop() {
    local n=$1 pid=${SSW_PID[$1]:-}
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    local i
    for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    SSW_PID[$n]=""
}

# ssw_ctl NAME ARGS...: swanctl against charon NAME, with NAME's swanctl
# directory (SWANCTL_DIR) and vici socket (--uri).
ssw_ctl() {
    local n=$1
    shift
    local cmd=$1
    shift
    SWANCTL_DIR=$SSW_WORK/$n/swanctl STRONGSWAN_CONF=$SSW_WORK/$n/strongswan.conf \
        swanctl "$cmd" --uri "unix://$SSW_WORK/$n/charon.vici" "$@"
}

# ssw_capture_start PCAP: every UDP datagram between a and b on a's veth
# (IKE on 500 and 4500, ESP-in-UDP on 4500) into PCAP, except those of port
# SSW_STRAY_PORT (a test's own stray messages); returns once tcpdump listens.
ssw_capture_start() {
    SSW_CAPTURE=$1
    ip netns exec "$SSW_NS_A" tcpdump -i ssw-a -nn -U --immediate-mode -s 0 -w "$SSW_CAPTURE" \
        "udp and host ${SSW_ADDR[a]} and host ${SSW_ADDR[b]} and not port $SSW_STRAY_PORT" \
        >/dev/null 2>"$SSW_CAPTURE.stats" &
    SSW_CAPTURE_PID=$!
    local i
    for i in $(seq 1 50); do grep -q 'listening on' "$SSW_CAPTURE.stats" && return 0; sleep 0.1; done
    ssw_fail "tcpdump did not start: $(cat "$SSW_CAPTURE.stats")"
}

# ssw_capture_stop: ends the capture; fails unless it is whole: nothing
# dropped by the kernel, and every packet the filter took written out
# (tcpdump runs in immediate mode: without it, packets still in the
# kernel's ring buffer block when it is interrupted are counted but lost).
ssw_capture_stop() {
    [ -n "$SSW_CAPTURE_PID" ] || return 0
    sleep 0.2
    kill -INT "$SSW_CAPTURE_PID" 2>/dev/null || true
    wait "$SSW_CAPTURE_PID" 2>/dev/null || true
    SSW_CAPTURE_PID=""
    local captured filtered i
    # Its statistics are its last words.
    for i in $(seq 1 50); do grep -q 'dropped by kernel' "$SSW_CAPTURE.stats" && break; sleep 0.1; done
    captured=$(sed -n 's/^\([0-9]*\) packets\{0,1\} captured.*/\1/p' "$SSW_CAPTURE.stats")
    filtered=$(sed -n 's/^\([0-9]*\) packets\{0,1\} received by filter.*/\1/p' "$SSW_CAPTURE.stats")
    grep -q '^0 packets dropped by kernel' "$SSW_CAPTURE.stats" && [ -n "$captured" ] && [ "$captured" = "$filtered" ] ||
        ssw_fail "capture $SSW_CAPTURE incomplete: $(cat "$SSW_CAPTURE.stats")"
}

ssw_cleanup() {
    set +e
    [ -z "$SSW_CAPTURE_PID" ] || { kill -INT "$SSW_CAPTURE_PID" 2>/dev/null; wait "$SSW_CAPTURE_PID" 2>/dev/null; }
    ssw_stop a
    ssw_stop b
    ip netns del "$SSW_NS_A" 2>/dev/null
    ip netns del "$SSW_NS_B" 2>/dev/null
    [ -n "${KEEP:-}" ] && echo "kept $SSW_WORK" || rm -rf "$SSW_WORK"
}
trap ssw_cleanup EXIT
trap 'exit 130' INT TERM
