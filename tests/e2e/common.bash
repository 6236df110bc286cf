# Sourced by the end-to-end tests after they set P (their namespace prefix).
# Gives them: ROOT (the repo, also the working directory), ESPGW (the
# binary; the environment may override it), WORK (a scratch directory,
# kept when KEEP is set), scripts/gateways.sh, BG (pids of background
# processes started with `ip netns exec ... &`, killed on exit), `fail MSG`
# (prints the logs in WORK, LOG_TAIL lines each, and exits 1), clean-up of
# namespaces and gateways on any exit, and `skip REASON` (used when not
# root: recorded for scripts/test.sh's summary, an error where skips are
# not allowed, see scripts/skip.bash).
#
# Optional hooks a test defines: on_cleanup (stop its own helpers; runs on
# failure and on exit, must be idempotent) and on_fail (extra diagnostics).
#
# Also: `tunnels_gen SET` (tests/e2e/tunnels.py's configs for SET into
# WORK, and N = how many tunnels), `peer_start` / `peer_stop` (scapy as
# gateway B: tests/e2e/interop_peer.py on gwb-unprot over WORK/tunnels.json,
# its answers in WORK/peer.json, peer_start's arguments passed on to it;
# stopped on exit too), `pings_answered LOG
# COUNT` (every echo request of `ping -c COUNT` answered, by icmp_seq) and
# `capture_start` / `captures_stop` (tcpdump captures that fail the test if
# tcpdump itself dropped packets: an incomplete capture proves nothing).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
ESPGW=${ESPGW:-$ROOT/target/release/espgw}
WORK=$(mktemp -d "/tmp/espgw-$P.XXXXXX")
LOG_TAIL=${LOG_TAIL:-20}
BG=()
. scripts/gateways.sh
. scripts/skip.bash

PEER=""

tunnels_gen() {
    python3 tests/e2e/tunnels.py gen "$1" "$WORK"
    N=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$WORK/tunnels.json")
}

peer_start() {
    ip netns exec "$P-gwb" python3 tests/e2e/interop_peer.py gwb-unprot "$WORK/tunnels.json" \
        "$WORK/peer.ready" "$WORK/peer.json" "$@" >"$WORK/peer.log" 2>&1 &
    PEER=$!
    for _ in $(seq 1 100); do [ -f "$WORK/peer.ready" ] && break; sleep 0.1; done
    [ -f "$WORK/peer.ready" ] || fail "the scapy peer did not start: $(cat "$WORK/peer.log")"
}

peer_stop() {
    [ -n "$PEER" ] || return 0
    kill -TERM "$PEER" 2>/dev/null; wait "$PEER" 2>/dev/null
    PEER=""
}

# pings_answered LOG COUNT: the requests 1..COUNT of the ping whose output
# is LOG were all answered. ping's own exit status is no proof: without -w
# it is 0 as soon as one reply came.
pings_answered() { python3 tests/e2e/pings.py "$1" "$2"; }

# capture_start NS IFACE PCAP [TCPDUMP ARGS...]: tcpdump on IFACE in
# namespace NS into PCAP, in the background; returns once it listens.
CAPTURES=()
capture_start() {
    local ns=$1 iface=$2 pcap=$3
    shift 3
    # A 32 MiB buffer: the captures of iperf3 runs must not overflow.
    ip netns exec "$ns" tcpdump -i "$iface" -nn -U -B 32768 -w "$pcap" "$@" >/dev/null 2>"$pcap.stats" &
    CAPTURES+=("$!:$pcap")
    BG+=($!)
    for _ in $(seq 1 50); do grep -q 'listening on' "$pcap.stats" && return 0; sleep 0.1; done
    fail "tcpdump on $iface did not start: $(cat "$pcap.stats")"
}

# captures_stop: stops every capture_start capture; fails unless tcpdump
# reports that the kernel dropped none of the packets it should have
# captured (a capture used as proof of "nothing in clear" must be whole).
captures_stop() {
    local c pid pcap lost
    for c in "${CAPTURES[@]}"; do kill -INT "${c%%:*}" 2>/dev/null || true; done
    for c in "${CAPTURES[@]}"; do
        pid=${c%%:*} pcap=${c#*:}
        wait "$pid" 2>/dev/null || true
        grep -q 'packets dropped by kernel' "$pcap.stats" || fail "no statistics from tcpdump for $pcap: $(cat "$pcap.stats")"
        # "N packets dropped by kernel", and on some versions "... by interface".
        lost=$(grep -E 'packets dropped by' "$pcap.stats" | grep -Ev '^0 packets' || true)
        [ -z "$lost" ] || fail "the capture $pcap is incomplete: $lost"
        echo "capture ${pcap##*/}: $(grep 'packets captured' "$pcap.stats"), 0 dropped by the kernel"
    done
    CAPTURES=()
}

fail() {
    echo "FAIL: $*" >&2
    peer_stop
    if declare -F on_cleanup >/dev/null; then on_cleanup; fi
    gateways_stop >/dev/null 2>&1 || true
    for f in "$WORK"/*.log; do
        [ -f "$f" ] && { echo "--- $f"; tail -n "$LOG_TAIL" "$f"; }
    done >&2
    if declare -F on_fail >/dev/null; then on_fail >&2; fi
    exit 1
}

e2e_cleanup() {
    set +e
    peer_stop
    if declare -F on_cleanup >/dev/null; then on_cleanup; fi
    for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done
    gateways_down
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap e2e_cleanup EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" -eq 0 ] || skip "needs root"
[ -x "$ESPGW" ] || fail "no binary at $ESPGW (cargo build --release -p espgw)"
