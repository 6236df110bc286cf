#!/usr/bin/env bash
# End to end: IKEv2 between espgw and strongSwan 5.9.8 (issue 13).
#
#   [iks-hosta] -- espgw (net_af_packet on veths) -- link -- [iks-gwb] charon -- [iks-hostb]
#   10.1.0.10        10.1.0.1 | 192.0.2.1         192.0.2.2 | 10.2.0.1       10.2.0.10
#
# charon (kernel-libipsec: user-space ESP, always in UDP 4500; run as in
# tests/ike/strongswan.bash, in the namespace with a private /run) replaces
# gateway B of scripts/netns.sh. PSK, certificates in step 7. In order, each
# step failing the test:
#  1. espgw initiates (start_action "start"): IKE SA and CHILD_SA up, pings
#     both ways all answered (by icmp_seq), and the SPIs of `swanctl
#     --list-sas` equal those of `espgw ctl ike list` and `sa list`; a
#     manual [[tunnel]] in the same config encrypts beside it; espgw's
#     child has per_cpu_sas = 2 (RFC 9611), which charon ignores: one
#     CHILD_SA on each side all the same (step 1c);
#  2. a CHILD_SA rekey started by espgw, then one started by charon, each
#     with a ping running across it, every echo answered, SPIs compared;
#     then an IKE SA rekey started by espgw, then one by charon (new IKE
#     SPIs agree, pings);
#  2c. under load (sha256-checked TCP transfers A -> B, iperf3 UDP B -> A):
#     CHILD_SA rekeys every 2.5 s by espgw and charon in turn, then an IKE
#     SA rekey under iperf3 TCP; espgw's counters show nothing lost by it,
#     the middle link carries only IKE and ESP in UDP, every checksum holds
#     (tests/e2e/ike_load_check.py);
#  2d. an IKE_SA_INIT flood with malformed IKE (tests/e2e/ike_flood.py)
#     against espgw's UDP 500 while iperf3 UDP runs through the tunnel:
#     espgw's inbound rate before and during (medians), the flood counted
#     (engine, punt_full, cookies), the tunnel's SAs unchanged
#     (tests/e2e/ike_flood_check.py);
#  3a. `ike terminate ssw --child net`: the CHILD_SA goes on both sides,
#     both keep the IKE SA; `ike initiate ssw` then asks charon for a new
#     CHILD_SA on it (CREATE_CHILD_SA): pings both ways, SPIs agree;
#  3. `ike terminate`, then charon initiates: espgw asks it for a cookie
#     (the flood's half-open SAs are still there), then up again, pings,
#     SPIs;
#  4. charon killed (no Delete): espgw's DPD removes the SAs; pings then
#     are dropped and counted, and nothing leaves in clear; charon started
#     again: espgw ("start") re-initiates and the tunnel comes back.
#  5. SIGTERM: espgw deletes its IKE SA (charon has none left) and exits 0.
#  6. espgw again with the connection over IPv6 (outer and inner), in
#     pipeline mode with two workers: up, pings both ways, SPIs.
#  7. espgw with auth = "pubkey" (certificates made here with pki) against
#     charon's certificates: espgw initiates, then charon; pings both ways,
#     SPIs; then charon's certificate from a CA espgw does not trust, and
#     an expired one: refused, counted in espgw_ike_auth_failures_total,
#     the reason logged, no SA up.
#  8. charon behind a NAT (nftables) that maps its port 4500 to 40500
#     initiates: espgw's IKE SA and its ESP in UDP go to 40500 (nothing to
#     4500: counted by the NAT's drop rule), pings both ways, SPIs.
#
# BOTH_START=1 (by hand, not in CI) runs only a step 1 in which charon
# starts its side too (start_action = start), both while the link is down
# for 2 s: two IKE SAs come up, one is left on both sides (docs/ike.md
# "Both sides at once"; charon keeps both by itself, espgw deletes one).
# Needs root, strongSwan (scripts/setup.sh), iperf3, nft. ESPGW overrides
# the binary; LOAD_* and FLOOD_* (below) the load and the flood.
P=iks
LOG_TAIL=60
. "$(dirname "$0")/common.bash"

CHARON=${SSW_CHARON:-/usr/lib/ipsec/charon}
[ -x "$CHARON" ] || skip "no strongSwan charon at $CHARON (scripts/setup.sh installs it)"
command -v swanctl >/dev/null || skip "no swanctl (scripts/setup.sh installs strongswan-swanctl)"
command -v pki >/dev/null || skip "no pki (scripts/setup.sh installs strongswan-pki)"
command -v iperf3 >/dev/null || skip "no iperf3 (scripts/setup.sh installs it)"
for p in kernel-libipsec openssl gcm curve25519 vici; do
    [ -f "/usr/lib/ipsec/plugins/libstrongswan-$p.so" ] || skip "strongSwan plugin $p missing"
done
[ -c /dev/net/tun ] || skip "no /dev/net/tun (kernel-libipsec needs a TUN device)"

PSK="espgw-strongswan-e2e-psk-0123456789"
GB=$P-gwb
SSW=$WORK/ssw
CHARON_PID=""
ctl() { "$ESPGW" ctl --socket "$WORK/a.sock" "$@"; }
sw() {
    local cmd=$1
    shift
    SWANCTL_DIR=$SSW/swanctl STRONGSWAN_CONF=$SSW/strongswan.conf swanctl "$cmd" --uri "unix://$SSW/charon.vici" "$@"
}

charon_start() {
    rm -f "$SSW/charon.vici"
    ip netns exec "$GB" unshare -m sh -c \
        "mount -t tmpfs -o mode=0755 iks-run /run && STRONGSWAN_CONF='$SSW/strongswan.conf' exec '$CHARON'" \
        >>"$SSW/charon.out" 2>&1 &
    CHARON_PID=$!
    BG+=("$CHARON_PID")
    for _ in $(seq 1 100); do
        if [ -S "$SSW/charon.vici" ] && sw --stats >/dev/null 2>&1; then
            sw --load-all >"$WORK/load.log" 2>&1 || fail "swanctl --load-all: $(cat "$WORK/load.log")"
            return 0
        fi
        kill -0 "$CHARON_PID" 2>/dev/null || fail "charon exited at start: $(cat "$SSW/charon.out")"
        sleep 0.1
    done
    fail "charon did not open its vici socket"
}
charon_stop() {  # SIGNAL
    [ -n "$CHARON_PID" ] || return 0
    kill "-$1" "$CHARON_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$CHARON_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$CHARON_PID" 2>/dev/null || true
    wait "$CHARON_PID" 2>/dev/null || true
    CHARON_PID=""
}
on_cleanup() { charon_stop TERM; }
on_fail() {
    echo "--- charon.log (last 60 lines)"
    tail -n 60 "$SSW/charon.log" 2>/dev/null
    echo "--- ctl ike list"
    ctl ike list 2>&1 || true
}

# The topology; gateway B's namespace is charon's: kernel addresses there.
scripts/netns.sh up "$P"
ip -n "$GB" addr add 192.0.2.2/24 dev gwb-unprot
ip -n "$GB" addr add 192.0.2.3/24 dev gwb-unprot
# charon's certificate connections of step 7.
for a in 4 5 6; do ip -n "$GB" addr add "192.0.2.$a/24" dev gwb-unprot; done
in_a ip addr add 10.1.5.10/32 dev ha0
in_a ip route add 10.3.0.0/24 via 10.1.0.1
ip -n "$GB" addr add 10.2.0.1/24 dev gwb-prot
ip netns exec "$GB" sysctl -qw net.ipv4.ip_forward=1
# IPv6 for phase 6 (scripts/netns.sh turns it off in the gateways).
ip netns exec "$GB" sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.default.disable_ipv6=0 \
    net.ipv6.conf.gwb-unprot.disable_ipv6=0 net.ipv6.conf.gwb-prot.disable_ipv6=0 net.ipv6.conf.all.forwarding=1
ip -n "$GB" addr add 2001:db8::2/64 dev gwb-unprot nodad
ip -n "$GB" addr add fd00:2::1/64 dev gwb-prot nodad

# espgw: configs/static-a.toml (gateway A, manual SAs) with a [[connection]] instead of its manual tunnel.
sed '/^\[\[tunnel\]\]/,$d' configs/static-a.toml >"$WORK/a.toml"
# Metrics on the loopback of espgw's namespace (the IKE counters are there only).
sed -i "s#^control_socket = .*#control_socket = \"$WORK/a.sock\"#; s#^metrics = .*#metrics = \"127.0.0.1:9301\"#" "$WORK/a.toml"
sed -i "/^\[gateway\]/a state_dir = \"$WORK/state-a\"" "$WORK/a.toml"
# DPD gives up after 0.5 + 1 + 2 s without an answer (the default, 4 s
# doubling 5 times, would take minutes).
sed -i "/^\[gateway\]/a ike_retransmit_ms = 500\nike_retransmit_tries = 2" "$WORK/a.toml"
cp "$WORK/a.toml" "$WORK/a-base.toml"
{
    echo '[[connection]]'
    echo 'name = "ssw"'
    echo 'local = "192.0.2.1"'
    echo 'remote = "192.0.2.2"'
    echo 'local_id = "gw-a.example"'
    echo 'remote_id = "gw-b.example"'
    echo "psk = \"$PSK\""
    echo 'proposals = ["aes128gcm16-prfsha256-x25519"]'
    echo 'dpd_delay = 1'
    echo 'start_action = "start"'
    echo
    echo '[[connection.child]]'
    echo 'name = "net"'
    echo 'local_ts = ["10.1.0.0/24"]'
    echo 'remote_ts = ["10.2.0.0/24"]'
    # ESPGW_ESP: espgw's ESP proposal (e.g. ML-KEM optional,
    # `aes128gcm16-x25519-ke1_mlkem768-ke1_none`, which espgw offers with
    # and without it, so that this peer without RFC 9370 takes the latter).
    echo "esp_proposals = [\"${ESPGW_ESP:-aes128gcm16-x25519}\"]"
    # RFC 9611 per-CPU CHILD_SAs asked for: charon 5.9.8 ignores the
    # SA_RESOURCE_INFO notify, so one CHILD_SA all the same (step 1c).
    echo 'per_cpu_sas = 2'
} >>"$WORK/a.toml"
# The IPv6 phase's config starts from this one, without the manual tunnel.
cp "$WORK/a.toml" "$WORK/a-conn.toml"
# A manual tunnel beside the connection, to 192.0.2.3 (an address of
# charon's namespace, whose kernel only answers ARP for it and drops the ESP).
{
    echo
    echo '[[tunnel]]'
    echo 'name = "manual"'
    echo 'local = "192.0.2.1"'
    echo 'remote = "192.0.2.3"'
    echo 'local_ts = ["10.1.5.0/24"]'
    echo 'remote_ts = ["10.3.0.0/24"]'
    echo 'esp = "aes128gcm16"'
    echo 'out = { spi = 0x00005001, key = "0xbef3215147135cd554e9156cae70f5a899331a52" }'
    echo 'in = { spi = 0x00005002, key = "0x9b890a06962125b8925af8d8f76eac664799f983" }'
} >>"$WORK/a.toml"
chmod 600 "$WORK/a.toml"
"$ESPGW" check --config "$WORK/a.toml" >"$WORK/check.log" 2>&1 || fail "espgw check: $(cat "$WORK/check.log")"

mkdir -p "$SSW"/swanctl/conf.d "$SSW"/swanctl/x509 "$SSW"/swanctl/x509ca "$SSW"/swanctl/private
# Certificates for step 7 (ECDSA P-256, made here: nothing to expire in the
# repository): a CA, espgw's (a) and charon's (b) from it, charon's u from a
# second CA espgw does not trust, charon's x from the first CA but expired.
PKI=$WORK/pki
mkdir -p "$PKI"
pki_() { pki "$@" 2>>"$PKI/pki.err"; }
for k in ca ca2 a b u; do pki_ --gen --type ecdsa --size 256 --outform pem >"$PKI/$k.key"; done
pki_ --self --ca --in "$PKI/ca.key" --type ecdsa --dn "C=CH, O=espgw e2e, CN=CA" --lifetime 2 --outform pem >"$PKI/ca.crt"
pki_ --self --ca --in "$PKI/ca2.key" --type ecdsa --dn "C=CH, O=espgw e2e, CN=other CA" --lifetime 2 --outform pem >"$PKI/ca2.crt"
issue() {  # CA KEY NAME [pki options]
    local ca=$1 key=$2 name=$3
    shift 3
    pki_ --issue --cacert "$PKI/$ca.crt" --cakey "$PKI/$ca.key" --type priv --in "$PKI/$key.key" \
        --dn "C=CH, O=espgw e2e, CN=$name" --san "$name" --outform pem "$@"
}
issue ca a gw-a.example --lifetime 2 >"$PKI/a.crt"
issue ca b gw-b.example --lifetime 2 >"$PKI/b.crt"
issue ca2 u gw-u.example --lifetime 2 >"$PKI/u.crt"
issue ca b gw-x.example --not-before "01.01.20 00:00:00" --not-after "02.01.20 00:00:00" >"$PKI/x.crt"
for f in ca ca2 a b u x; do [ -s "$PKI/$f.crt" ] || fail "pki did not make $f.crt: $(cat "$PKI/pki.err")"; done
chmod 600 "$PKI"/*.key
cp "$PKI/b.crt" "$PKI/u.crt" "$PKI/x.crt" "$SSW/swanctl/x509/"
cp "$PKI/b.key" "$PKI/u.key" "$SSW/swanctl/private/"
cp "$PKI/ca.crt" "$SSW/swanctl/x509ca/"
cp tests/e2e/ike_strongswan.conf "$SSW/strongswan.conf"
sed -i "s#@SSW@#$SSW#g" "$SSW/strongswan.conf"
sed "s#@PSK@#$PSK#" tests/e2e/ike_strongswan.swanctl.conf >"$SSW/swanctl/swanctl.conf"
if [ "${BOTH_START:-}" = 1 ]; then
    # charon's connection "espgw" (the first) starts too; the link is down.
    sed -i '0,/start_action = none/s//start_action = start/' "$SSW/swanctl/swanctl.conf"
    ip -n "$GB" link set gwb-unprot down
fi
chmod 600 "$SSW/swanctl/swanctl.conf"
charon_start

gateway_start a "$WORK/a.toml"
GW=${GW_PIDS[0]}

if [ "${BOTH_START:-}" = 1 ]; then
    sleep 2
    ip -n "$GB" link set gwb-unprot up
    ok=""
    for _ in $(seq 1 150); do
        n_e=$(ctl ike list --json 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["sas"]))' 2>/dev/null || echo 0)
        n_s=$(sw --list-sas --ike espgw 2>/dev/null | grep -c "ESTABLISHED" || true)
        ups=$(grep -cE "IKE SA [0-9a-f]{16} with [^ ]+ established" "$WORK/a.log" || true)
        if [ "$n_e" = 1 ] && [ "$n_s" = 1 ] && [ "$ups" -ge 2 ]; then ok=1; break; fi
        sleep 0.2
    done
    [ -n "$ok" ] || fail "both start: espgw $n_e IKE SA(s), charon $n_s, espgw saw $ups come up"
    grep -E "IKE SA [0-9a-f]{16} with [^ ]+ established" "$WORK/a.log" | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-120
    grep -E "IKE_SA espgw\[[0-9]+\] established|deleting IKE_SA|received DELETE for IKE_SA" "$SSW/charon.log" | cut -c1-160 || true
fi

# wait_up WHAT: an established IKE SA with its CHILD_SA in espgw and an
# INSTALLED CHILD_SA in charon, within 20 s.
wait_up() {
    for _ in $(seq 1 100); do
        if ctl ike list --json 2>/dev/null | grep -q '"in_spi"' &&
            sw --list-sas 2>/dev/null | grep -q INSTALLED; then
            return 0
        fi
        kill -0 "$GW" 2>/dev/null || fail "espgw exited"
        sleep 0.2
    done
    fail "$1: the tunnel did not come up"
}

# ping_all WHAT COUNT PING-COMMAND...: every echo request answered.
ping_all() {
    local what=$1 count=$2 log="$WORK/ping-$1.log"
    shift 2
    "$@" -c "$count" -i 0.2 -W 1 >"$log" 2>&1 || true
    pings_answered "$log" "$count" || fail "$what: not every ping answered: $(tail -2 "$log")"
}

# spis WHAT [CHARON-CONNECTION]: espgw's SPIs (ike list, sa list) equal
# charon's (of its connection "espgw", or the one named).
spis() {
    ctl ike list --json >"$WORK/ike-$1.json" || fail "ctl ike list"
    ctl sa list --json >"$WORK/sa-$1.json" || fail "ctl sa list"
    sw --list-sas --ike "${2:-espgw}" >"$WORK/ssw-$1.txt" || fail "swanctl --list-sas"
    python3 tests/e2e/ike_spis.py "$WORK/ike-$1.json" "$WORK/sa-$1.json" "$WORK/ssw-$1.txt" >"$WORK/spis-$1.log" 2>&1 ||
        fail "$1: SPIs differ: $(cat "$WORK/spis-$1.log")"
    echo "$1: $(cat "$WORK/spis-$1.log")"
}

child_in_spi() { ctl ike list --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["sas"][0]["children"][0]["in_spi"])'; }

# The first ping may be lost to ARP: retried until one answers.
wait_ping() {
    for _ in $(seq 1 20); do in_a ping -c1 -W1 10.2.0.10 >/dev/null 2>&1 && return 0; done
    fail "$1: no ping through the tunnel"
}

# 1. espgw initiates.
wait_up "espgw initiates"
wait_ping "espgw initiates"
ping_all a-to-b 5 in_a ping 10.2.0.10
ping_all b-to-a 5 in_b ping 10.1.0.10
spis initiator
echo "step 1 ok: espgw initiated, pings both ways, SPIs agree"
if [ "${BOTH_START:-}" = 1 ]; then
    echo "PASS: both start against strongSwan: one IKE SA left on both sides, pings both ways, SPIs agree"
    exit 0
fi

# The manual tunnel works beside the connection: host A's packets to
# 10.3.0.0/24 leave as ESP with its SPI to 192.0.2.3.
capture_start "$P-gwa" gwa-unprot "$WORK/manual.pcap" host 192.0.2.3 and esp
in_a ping -c 3 -i 0.2 -W 1 -I 10.1.5.10 10.3.0.10 >/dev/null 2>&1 || true
sleep 0.3
captures_stop
manual=$(tcpdump -r "$WORK/manual.pcap" -nn 2>/dev/null | grep -c 'ESP(spi=0x00005001' || true)
[ "$manual" -ge 3 ] || fail "manual tunnel: $manual ESP packets with SPI 0x5001 to 192.0.2.3, want 3"
echo "step 1b ok: the manual tunnel encrypts beside the IKE one ($manual ESP packets)"

# 1c. per_cpu_sas = 2 against a peer without RFC 9611: charon does not
# echo SA_RESOURCE_INFO, so espgw asks for no second CHILD_SA: exactly one
# on both sides (after a wait that would have let one come), traffic flows.
sleep 2
n_esp=$(ctl ike list --json | python3 -c 'import json,sys; print(sum(len(s["children"]) for s in json.load(sys.stdin)["sas"]))')
n_out=$(ctl sa list --json | python3 -c 'import json,sys; print(sum(1 for x in json.load(sys.stdin)["sas"] if x["tunnel"] == "ssw/net" and x["dir"] == "out"))')
n_ssw=$(sw --list-sas | grep -c INSTALLED || true)
[ "$n_esp" = 1 ] && [ "$n_out" = 1 ] && [ "$n_ssw" = 1 ] ||
    fail "step 1c: per_cpu_sas against charon: espgw has $n_esp CHILD_SAs ($n_out outbound SAs), charon $n_ssw, want 1 each"
# The notify did reach charon, which logs it by number (unknown to it).
grep -q 'parsed IKE_AUTH request 1 \[.* N((16444)) ' "$SSW/charon.log" ||
    fail "step 1c: charon's log shows no SA_RESOURCE_INFO (16444) in espgw's IKE_AUTH"
ping_all per-cpu 5 in_a ping 10.2.0.10
echo "step 1c ok: per_cpu_sas = 2, charon ignores SA_RESOURCE_INFO: one CHILD_SA on each side, pings answered"

# 2. CHILD_SA rekeys, from each side, with pings running across them.
rekey() {  # WHAT COMMAND...
    local what=$1 before after pinger
    shift
    before=$(child_in_spi)
    in_a ping -c 25 -i 0.1 -W 1 10.2.0.10 >"$WORK/ping-rekey-$what.log" 2>&1 &
    pinger=$!
    sleep 0.5
    "$@" >"$WORK/rekey-$what.log" 2>&1 || fail "rekey by $what: $(cat "$WORK/rekey-$what.log")"
    after=$before
    for _ in $(seq 1 50); do
        after=$(child_in_spi 2>/dev/null || echo "$before")
        [ "$after" != "$before" ] && break
        sleep 0.1
    done
    [ "$after" != "$before" ] || fail "rekey by $what: the CHILD_SA kept SPI $before"
    wait "$pinger" || true
    pings_answered "$WORK/ping-rekey-$what.log" 25 || fail "rekey by $what: pings lost: $(tail -2 "$WORK/ping-rekey-$what.log")"
    # charon removes its old CHILD_SA when the rekey completes.
    for _ in $(seq 1 30); do [ "$(sw --list-sas | grep -c INSTALLED)" = 1 ] && break; sleep 0.1; done
    spis "rekey-$what"
}
rekey espgw ctl ike rekey ssw --child net
rekey charon sw --rekey --child net
echo "step 2 ok: CHILD_SA rekeyed by each side, no ping lost"

# 2b. IKE SA rekey started by espgw: a new IKE SPI on both sides, the
# CHILD_SA moved over to it, traffic unaffected.
ike_spi() { ctl ike list --json | python3 -c 'import json,sys; print(" ".join(s["ike_sa"] for s in json.load(sys.stdin)["sas"]))'; }
before=$(ike_spi)
ctl ike rekey ssw >"$WORK/rekey-ike.log" 2>&1 || fail "ike rekey: $(cat "$WORK/rekey-ike.log")"
for _ in $(seq 1 50); do
    now=$(ike_spi)
    if [ -n "$now" ] && [ "$now" != "$before" ] && [ "$(echo "$now" | wc -w)" = 1 ] &&
        [ "$(sw --list-sas | grep -c ESTABLISHED)" = 1 ]; then break; fi
    sleep 0.1
done
[ "$now" != "$before" ] || fail "IKE SA rekey: espgw kept IKE SA $before"
ping_all a-to-b-ike-rekey 5 in_a ping 10.2.0.10
spis ike-rekey
echo "step 2b ok: IKE SA rekeyed ($before -> $now), CHILD_SA kept, pings"
# And one started by charon.
before=$now
sw --rekey --ike espgw >"$WORK/rekey-ike-charon.log" 2>&1 || fail "swanctl --rekey --ike: $(cat "$WORK/rekey-ike-charon.log")"
for _ in $(seq 1 50); do
    now=$(ike_spi)
    if [ -n "$now" ] && [ "$now" != "$before" ] && [ "$(echo "$now" | wc -w)" = 1 ] &&
        [ "$(sw --list-sas | grep -c ESTABLISHED)" = 1 ]; then break; fi
    sleep 0.1
done
[ "$now" != "$before" ] || fail "IKE SA rekey by charon: espgw kept IKE SA $before"
ping_all a-to-b-ike-rekey-charon 5 in_a ping 10.2.0.10
spis ike-rekey-charon
echo "step 2b ok: IKE SA rekeyed by charon ($before -> $now), CHILD_SA kept, pings"

# 2c. Under load: sha256-checked TCP transfers host A -> host B (espgw
# encrypts, charon decrypts) one after another and an iperf3 UDP stream
# host B -> host A (charon encrypts, espgw decrypts) while the CHILD_SA is
# rekeyed every LOAD_REKEY_S seconds, by espgw and charon in turn; then an
# IKE SA rekey while iperf3 TCP runs. espgw's counters must show nothing
# lost by it: no unknown_spi (the old inbound SA still decrypts after the
# switch), no sa_expired / no_policy / policy_discard (no moment without an
# outbound SA), no icv_mismatch / replayed, no tx or ring overflow, no
# drop at all in the tunnel's totals over its SAs (step 5 checks that the
# exit stats balance), and every UDP datagram that reached espgw left it.
# A capture of the middle link must hold nothing but IKE and ESP in UDP
# (500/4500) and ARP. kernel-libipsec (charon's user-space data plane) may
# drop UDP under load itself: its loss is measured and printed, not
# asserted.
LOAD_REKEYS=${LOAD_REKEYS:-4}
LOAD_REKEY_S=${LOAD_REKEY_S:-2.5}
LOAD_UDP_RATE=${LOAD_UDP_RATE:-20M}
udp_secs=$(python3 -c "print(int($LOAD_REKEYS * $LOAD_REKEY_S + 3))")
ctl stats --json >"$WORK/stats-load0.json" || fail "ctl stats"
capture_start "$P-gwa" gwa-unprot "$WORK/load.pcap" not arp and not udp port 500 and not udp port 4500
# The iperf3 datagrams that reached espgw: ESP in UDP from charon as long
# as an encrypted 1200-byte datagram (TCP's packets that way are ACKs).
capture_start "$P-gwa" gwa-unprot "$WORK/load-udp.pcap" -s 64 src host 192.0.2.2 and udp src port 4500 and greater 1250
# And those espgw delivered: what reached host A's interface (the same
# size: not iperf3's 4-byte greeting).
capture_start "$P-hosta" ha0 "$WORK/load-udp-a.pcap" -s 64 udp dst port 5301 and greater 1200
in_a iperf3 -s -1 -B 10.1.0.10 -p 5301 --json >"$WORK/iperf-udp-server.out" 2>&1 &
BG+=($!)
sleep 0.3
in_b iperf3 -u -c 10.1.0.10 -B 10.2.0.10 -p 5301 -b "$LOAD_UDP_RATE" -l 1200 -t "$udp_secs" --get-server-output --json \
    >"$WORK/iperf-udp.json" 2>"$WORK/iperf-udp.err" &
udp_pid=$!
BG+=("$udp_pid")
# The transfers, back to back until the rekeys are done (WORK/load.done).
(
    i=0
    while [ ! -f "$WORK/load.done" ]; do
        i=$((i + 1))
        in_b python3 tests/e2e/xfer.py serve 10.2.0.10 $((6000 + i)) >"$WORK/xfer-$i.recv" 2>&1 &
        srv=$!
        in_a python3 tests/e2e/xfer.py send 10.1.0.10 10.2.0.10 $((6000 + i)) 4000000 >"$WORK/xfer-$i.sent" 2>&1 || true
        wait "$srv" || true
    done
) &
xfer_loop=$!
BG+=("$xfer_loop")
sleep 1
spis_seen=$(child_in_spi)
for r in $(seq 1 "$LOAD_REKEYS"); do
    before=$(child_in_spi)
    if [ $((r % 2)) = 1 ]; then
        who=espgw
        ctl ike rekey ssw --child net >"$WORK/rekey-load-$r.log" 2>&1 || fail "load rekey $r by espgw: $(cat "$WORK/rekey-load-$r.log")"
    else
        who=charon
        sw --rekey --child net >"$WORK/rekey-load-$r.log" 2>&1 || fail "load rekey $r by charon: $(cat "$WORK/rekey-load-$r.log")"
    fi
    for _ in $(seq 1 50); do
        after=$(child_in_spi 2>/dev/null || echo "$before")
        [ "$after" != "$before" ] && break
        sleep 0.1
    done
    [ "$after" != "$before" ] || fail "load rekey $r by $who: the CHILD_SA kept SPI $before"
    spis_seen="$spis_seen $after"
    sleep "$LOAD_REKEY_S"
done
touch "$WORK/load.done"
wait "$xfer_loop" || true
wait "$udp_pid" || fail "iperf3 UDP: $(cat "$WORK/iperf-udp.err") $(tail -5 "$WORK/iperf-udp.json")"
# The IKE SA rekey under iperf3 TCP (host A -> host B).
in_b iperf3 -s -1 -B 10.2.0.10 -p 5302 >"$WORK/iperf-tcp-server.out" 2>&1 &
BG+=($!)
sleep 0.3
# At 300 Mbit/s: unlimited, TCP overran charon's kernel-libipsec (500-600
# Mbit/s with ~20k retransmits), and once (session 14's CI) no answer came
# to any of the rekey's three tries (0.5 + 1 + 2 s, this test's short DPD
# timers; espgw counted no punt or transmit drop, so most likely lost at
# charon, behind the ESP on its UDP 4500 socket): the IKE SA failed and
# was set up anew. The rekey under load is the point, not the rate.
in_a iperf3 -c 10.2.0.10 -B 10.1.0.10 -p 5302 -t 4 -b 300M --json >"$WORK/iperf-tcp.json" 2>"$WORK/iperf-tcp.err" &
tcp_pid=$!
BG+=("$tcp_pid")
sleep 1.5
before=$(ike_spi)
ctl ike rekey ssw >"$WORK/rekey-ike-load.log" 2>&1 || fail "ike rekey under load: $(cat "$WORK/rekey-ike-load.log")"
for _ in $(seq 1 50); do
    now=$(ike_spi)
    [ -n "$now" ] && [ "$now" != "$before" ] && [ "$(echo "$now" | wc -w)" = 1 ] && break
    sleep 0.1
done
[ "$now" != "$before" ] || fail "IKE SA rekey under load: espgw kept IKE SA $before"
wait "$tcp_pid" || fail "iperf3 TCP across the IKE SA rekey: $(cat "$WORK/iperf-tcp.err") $(tail -5 "$WORK/iperf-tcp.json")"
sleep 0.5
captures_stop
ctl stats --json >"$WORK/stats-load1.json" || fail "ctl stats"
for _ in $(seq 1 30); do [ "$(sw --list-sas | grep -c INSTALLED)" = 1 ] && break; sleep 0.1; done
spis load
python3 tests/e2e/ike_load_check.py "$WORK" "$spis_seen" >"$WORK/load-check.log" 2>&1 ||
    fail "under load: $(cat "$WORK/load-check.log")"
cat "$WORK/load-check.log"
echo "step 2c ok: $LOAD_REKEYS CHILD_SA rekeys (both sides) and an IKE SA rekey under TCP and UDP load, nothing lost by espgw, nothing in clear"

# 2d. Bad input against the forwarding rate: an iperf3 UDP stream host B ->
# host A (espgw decrypts, on the port the flood arrives on) with 0.5 s
# intervals; after FLOOD_AT s, for FLOOD_S s, tests/e2e/ike_flood.py sends
# IKE_SA_INIT requests with random SPIs (and 1 in 8 malformed datagrams) at
# FLOOD_RATE a second to espgw's UDP 500 from charon's address (spoofing the
# peer is what makes the engine take them as possible IKE SAs: half-open
# SAs up to the cookie threshold, then cookies). Medians of the received
# rate before and during the flood; the flood counted (punted or
# punt_full, engine's received/dropped counters, cookies on the wire); the
# tunnel the same SAs before and after, nothing of it dropped by espgw.
FLOOD_RATE=${FLOOD_RATE:-5000}
FLOOD_AT=${FLOOD_AT:-2.5}
FLOOD_S=${FLOOD_S:-4}
FLOOD_UDP_RATE=${FLOOD_UDP_RATE:-20M}
prom() {
    ip netns exec "$P-gwa" python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:9301/metrics", timeout=3).read().decode())' \
        >"$1" 2>"$1.err" || fail "metrics endpoint: $(cat "$1.err")"
}
flood_ike=$(ike_spi)
flood_child=$(child_in_spi)
ctl stats --json >"$WORK/stats-flood0.json" || fail "ctl stats"
prom "$WORK/prom-flood0.txt"
in_a iperf3 -s -1 -B 10.1.0.10 -p 5303 --json >"$WORK/iperf-flood-server.out" 2>&1 &
BG+=($!)
# espgw's forwarding rate: its tunnel's inbound packet counter, sampled
# (iperf3's intervals have no wall clock to line them up with the flood,
# and a capture at host A loses packets to the CPU the flood takes).
python3 tests/e2e/ike_flood.py sample "$ESPGW" "$WORK/a.sock" ssw/net "$WORK/flood-samples.txt" "$WORK/flood.stop" \
    >"$WORK/flood-sample.log" 2>&1 &
sampler=$!
BG+=("$sampler")
sleep 0.3
flood_total=$(python3 -c "print(int($FLOOD_AT + $FLOOD_S + 2))")
in_b iperf3 -u -c 10.1.0.10 -B 10.2.0.10 -p 5303 -b "$FLOOD_UDP_RATE" -l 1200 -t "$flood_total" \
    --get-server-output --json >"$WORK/iperf-flood.json" 2>"$WORK/iperf-flood.err" &
udp_pid=$!
BG+=("$udp_pid")
# The flood starts FLOOD_AT s after the stream's first datagrams went through.
for _ in $(seq 1 50); do [ "$(tail -1 "$WORK/flood-samples.txt" 2>/dev/null | cut -d' ' -f3)" = 1 ] && break; sleep 0.1; done
sleep "$FLOOD_AT"
ip netns exec "$GB" python3 tests/e2e/ike_flood.py 192.0.2.2 192.0.2.1 "$FLOOD_S" "$FLOOD_RATE" "$WORK/flood.json" \
    >"$WORK/flood.log" 2>&1 || fail "the flood sender: $(cat "$WORK/flood.log")"
wait "$udp_pid" || fail "iperf3 UDP under the flood: $(cat "$WORK/iperf-flood.err") $(tail -5 "$WORK/iperf-flood.json")"
touch "$WORK/flood.stop"
wait "$sampler" || fail "the rate sampler: $(cat "$WORK/flood-sample.log")"
ctl stats --json >"$WORK/stats-flood1.json" || fail "ctl stats"
prom "$WORK/prom-flood1.txt"
[ "$(ike_spi)" = "$flood_ike" ] || fail "flood: the IKE SA changed ($flood_ike -> $(ike_spi))"
[ "$(child_in_spi)" = "$flood_child" ] || fail "flood: the CHILD_SA changed"
python3 tests/e2e/ike_flood_check.py "$WORK" >"$WORK/flood-check.log" 2>&1 || fail "flood: $(cat "$WORK/flood-check.log")"
cat "$WORK/flood-check.log"
ping_all a-to-b-flood 5 in_a ping 10.2.0.10
echo "step 2d ok: IKE_SA_INIT flood and malformed IKE counted, the tunnel kept its SAs and its rate"

# 3a. The CHILD_SA alone: `ike terminate ssw --child net` deletes it on
# both sides (charon keeps the IKE SA with no CHILD_SA installed), espgw's
# IKE SA stays with the same SPIs.
child_ike=$(ike_spi)
ctl ike terminate ssw --child net >"$WORK/terminate-child.log" 2>&1 || fail "ike terminate --child: $(cat "$WORK/terminate-child.log")"
for _ in $(seq 1 50); do sw --list-sas | grep -q INSTALLED || break; sleep 0.1; done
sw --list-sas >"$WORK/sas-childless.txt"
grep -q INSTALLED "$WORK/sas-childless.txt" && fail "charon still has the CHILD_SA after espgw's terminate --child: $(cat "$WORK/sas-childless.txt")"
grep -q ESTABLISHED "$WORK/sas-childless.txt" || fail "charon lost the IKE SA on a CHILD_SA delete: $(cat "$WORK/sas-childless.txt")"
[ "$(ike_spi)" = "$child_ike" ] || fail "terminate --child: espgw's IKE SA changed ($child_ike -> $(ike_spi))"
ctl ike list --json | grep -q '"in_spi"' && fail "terminate --child: espgw still lists a CHILD_SA"
# `ike initiate` now asks charon for a new CHILD_SA on that IKE SA
# (CREATE_CHILD_SA without REKEY_SA), not for a second IKE SA.
ctl ike initiate ssw >"$WORK/initiate-child.log" 2>&1 || fail "ike initiate (childless): $(cat "$WORK/initiate-child.log")"
wait_up "a new CHILD_SA on the IKE SA"
[ "$(ike_spi)" = "$child_ike" ] || fail "ike initiate (childless): espgw's IKE SA changed ($child_ike -> $(ike_spi))"
[ "$(sw --list-sas | grep -c ESTABLISHED)" -eq 1 ] || fail "charon has a second IKE SA: $(sw --list-sas)"
# A CREATE_CHILD_SA without REKEY_SA, with SA_RESOURCE_INFO (16444; the
# child has per_cpu_sas = 2), which charon ignores as in step 1c.
grep -Eq 'parsed CREATE_CHILD_SA request [0-9]+ \[ N\(\(16444\)\) SA No KE TSi TSr \]' "$SSW/charon.log" ||
    fail "ike initiate (childless): no new-CHILD_SA request in charon's log: $(grep 'CREATE_CHILD_SA request' "$SSW/charon.log" | tail -3)"
wait_ping "a new CHILD_SA"
ping_all a-to-b-child 5 in_a ping 10.2.0.10
ping_all b-to-a-child 5 in_b ping 10.1.0.10
spis new-child
echo "step 3a ok: ike terminate --child deleted the CHILD_SA on both sides, the IKE SA stayed; ike initiate added a new CHILD_SA to it (pings, SPIs)"

# 3. charon initiates.
ctl ike terminate ssw >"$WORK/terminate.log" 2>&1 || fail "ike terminate: $(cat "$WORK/terminate.log")"
for _ in $(seq 1 50); do sw --list-sas | grep -q ESTABLISHED || break; sleep 0.1; done
sw --list-sas | grep -q ESTABLISHED && fail "charon still has the IKE SA after espgw's terminate"
sw --initiate --child net >"$WORK/initiate.log" 2>&1 || fail "swanctl --initiate: $(tail -5 "$WORK/initiate.log")"
wait_up "charon initiates"
wait_ping "charon initiates"
ping_all a-to-b-2 5 in_a ping 10.2.0.10
ping_all b-to-a-2 5 in_b ping 10.1.0.10
spis responder
# The flood of step 2d left 100 half-open SAs from charon's address (for
# the engine's 30 s half-open timeout): espgw answered charon's IKE_SA_INIT
# with a COOKIE, and charon's retry with it was accepted.
grep -q 'received COOKIE notify' "$SSW/charon.log" ||
    fail "charon initiated within the half-open timeout after the flood but was not asked for a cookie"
echo "step 3 ok: charon initiated (asked for a cookie first), pings both ways, SPIs agree"

# 4. Dead peer: charon killed (no Delete); espgw's DPD removes the SAs.
charon_stop KILL
for _ in $(seq 1 150); do
    ctl ike list --json | grep -q '"in_spi"' || break
    sleep 0.2
done
ctl ike list --json | grep -q '"in_spi"' && fail "DPD: espgw still has the CHILD_SA 30 s after charon died"
ctl sa list --json >"$WORK/sa-dead.json"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["sas"]; sys.exit(1 if any(x["tunnel"].startswith("ssw/") and x["dir"]=="out" for x in s) else 0)' "$WORK/sa-dead.json" ||
    fail "DPD: an outbound SA is left: $(cat "$WORK/sa-dead.json")"
ctl stats --json >"$WORK/stats-dead0.json"
# Anything with the hosts' addresses in clear on the middle link (charon's
# kernel answers espgw's DPD checks with ICMP port unreachable: not ours).
capture_start "$P-gwa" gwa-unprot "$WORK/dead.pcap" net 10.0.0.0/8
in_a ping -c 3 -i 0.2 -W 1 10.2.0.10 >"$WORK/ping-dead.log" 2>&1 && fail "DPD: a ping got through with no SA"
sleep 0.3
captures_stop
leaked=$(tcpdump -r "$WORK/dead.pcap" -nn 2>/dev/null | wc -l)
[ "$leaked" -eq 0 ] || fail "DPD: $leaked packets of the hosts left espgw in clear with the SAs gone"
ctl stats --json >"$WORK/stats-dead1.json"
python3 - "$WORK/stats-dead0.json" "$WORK/stats-dead1.json" <<'PY' || fail "DPD: the dropped pings are not counted"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
def drops(s):
    d = s.get("drops") or s.get("dataplane", {}).get("drops", {})
    return sum(v for k, v in d.items() if k in ("no_policy", "sa_expired", "policy_discard"))
n = drops(b) - drops(a)
assert n >= 3, (drops(a), drops(b), b)
print("dropped with the SAs gone:", n)
PY
echo "step 4a ok: DPD removed the SAs, traffic dropped and counted, none in clear"
charon_start
wait_up "after charon's restart"
wait_ping "after charon's restart"
ping_all a-to-b-3 5 in_a ping 10.2.0.10
spis restarted
echo "step 4b ok: the tunnel came back by itself"

# SIGTERM: espgw deletes its IKE SA before it exits.
kill -TERM "$GW"
wait "$GW" || fail "espgw did not exit with status 0 on SIGTERM"
GW_PIDS=()
for _ in $(seq 1 30); do sw --list-sas | grep -q ESTABLISHED || break; sleep 0.1; done
sw --list-sas | grep -q ESTABLISHED && fail "SIGTERM: charon still has the IKE SA (no Delete from espgw)"
python3 - "$WORK/a.json" "$(cat "$WORK/flood-punt_full")" <<'PY' || fail "stats JSON"
import json, sys
s = json.load(open(sys.argv[1]))
flood_full = int(sys.argv[2])
t = s["totals"]
assert t["balanced"], t
assert t["ike_punted"] > 0 and t["ike_sent"] > 0, t
sas = {(x["tunnel"], x["dir"]): x for x in s["sas"]}
assert sas[("manual", "out")]["spi"] == 0x5001 and sas[("manual", "out")]["packets"] >= 3, sas
# punt_full: only the flood of step 2d (counted there).
assert s["drops"].get("punt_full", 0) == flood_full, ("punt_full", flood_full, s["drops"])
assert s["drops"].get("punt_too_big", 0) == 0, s["drops"]
print("espgw: ike_punted", t["ike_punted"], "ike_sent", t["ike_sent"], "drops", {k: v for k, v in s["drops"].items() if v})
PY
echo "step 5 ok: Delete on SIGTERM, counters"

# 6. IPv6 outer (and inner): espgw again, with a connection over IPv6, in
# pipeline mode (an I/O lcore steering to two workers, which punt and send).
sed -e 's#^address = "192.0.2.1/24"#address = "2001:db8::1/64"#' \
    -e 's#^address = "10.1.0.1/24"#address = ["10.1.0.1/24", "fd00:1::1/64"]#' \
    -e 's#^local = "192.0.2.1"#local = "2001:db8::1"#' -e 's#^remote = "192.0.2.2"#remote = "2001:db8::2"#' \
    -e 's#^local_ts = \["10.1.0.0/24"\]#local_ts = ["fd00:1::/64"]#' -e 's#^remote_ts = \["10.2.0.0/24"\]#remote_ts = ["fd00:2::/64"]#' \
    -e 's#^name = "net"#name = "net6"#' -e "s#state-a#state-a6#" \
    -e 's#^workers = 1 .*#workers = 2#' -e 's#^mode = "run-to-completion"#mode = "pipeline"#' "$WORK/a-conn.toml" >"$WORK/a6.toml"
chmod 600 "$WORK/a6.toml"
grep -q '2001:db8::1/64' "$WORK/a6.toml" && grep -q 'fd00:2::/64' "$WORK/a6.toml" && grep -q '^mode = "pipeline"' "$WORK/a6.toml" || fail "IPv6 config not derived: $(cat "$WORK/a6.toml")"
"$ESPGW" check --config "$WORK/a6.toml" >"$WORK/check6.log" 2>&1 || fail "espgw check (IPv6): $(cat "$WORK/check6.log")"
ip netns exec "$P-gwa" "$ESPGW" run --config "$WORK/a6.toml" --stats-json "$WORK/a6.json" >"$WORK/a6.log" 2>&1 &
GW_PIDS+=($!)
GW=${GW_PIDS[0]}
wait_up "IPv6"
for _ in $(seq 1 20); do in_a ping -6 -c1 -W1 fd00:2::10 >/dev/null 2>&1 && break; done
ping_all a-to-b-6 5 in_a ping -6 fd00:2::10
ping_all b-to-a-6 5 in_b ping -6 fd00:1::10
spis ipv6 espgw6
grep -q 'udp_encap=True' "$WORK/spis-ipv6.log" || fail "IPv6: the CHILD_SA is not in UDP (kernel-libipsec needs it)"
kill -TERM "$GW"
wait "$GW" || fail "espgw (IPv6) did not exit with status 0 on SIGTERM"
GW_PIDS=()
python3 - "$WORK/a6.json" <<'PY' || fail "stats JSON (IPv6, pipeline)"
import json, sys
s = json.load(open(sys.argv[1]))
t = s["totals"]
assert t["balanced"] and t["ike_punted"] > 0 and t["ike_sent"] > 0, t
assert len(s["workers"]) >= 3, ("pipeline: two workers and the I/O lcore", len(s["workers"]))
print("espgw (IPv6, pipeline):", len(s["workers"]), "lcores, ike_punted", t["ike_punted"], "ike_sent", t["ike_sent"])
PY
echo "step 6 ok: IPv6 outer, pipeline mode, pings both ways, SPIs agree"
# 7. Certificates (auth = "pubkey" against charon's certificates): espgw
# initiates, then charon; pings both ways, SPIs. Then charon shows a
# certificate from a CA espgw does not trust, and one expired: espgw refuses
# each, counts it in espgw_ike_auth_failures_total and has no CHILD_SA.
cert_conn() {  # NAME REMOTE REMOTE_ID REMOTE_TS
    echo
    echo '[[connection]]'
    echo "name = \"$1\""
    echo 'local = "192.0.2.1"'
    echo "remote = \"$2\""
    echo 'local_id = "gw-a.example"'
    echo "remote_id = \"$3\""
    echo 'auth = "pubkey"'
    echo "cert = \"$PKI/a.crt\""
    echo "key = \"$PKI/a.key\""
    echo "cacerts = [\"$PKI/ca.crt\"]"
    echo 'proposals = ["aes128gcm16-prfsha256-x25519"]'
    echo 'start_action = "none"'
    echo
    echo '[[connection.child]]'
    echo "name = \"net\""
    echo 'local_ts = ["10.1.0.0/24"]'
    echo "remote_ts = [\"$4\"]"
    echo 'esp_proposals = ["aes128gcm16-x25519"]'
}
{
    cat "$WORK/a-base.toml"
    cert_conn sswc 192.0.2.4 gw-b.example 10.2.0.0/24
    cert_conn sswu 192.0.2.5 gw-u.example 10.6.0.0/24
    cert_conn sswx 192.0.2.6 gw-x.example 10.7.0.0/24
} | sed "s#state-a\"#state-ac\"#" >"$WORK/ac.toml"
chmod 600 "$WORK/ac.toml"
"$ESPGW" check --config "$WORK/ac.toml" >"$WORK/checkc.log" 2>&1 || fail "espgw check (certificates): $(cat "$WORK/checkc.log")"
ip netns exec "$P-gwa" "$ESPGW" run --config "$WORK/ac.toml" --stats-json "$WORK/ac.json" >"$WORK/ac.log" 2>&1 &
GW_PIDS+=($!)
GW=${GW_PIDS[0]}
for _ in $(seq 1 50); do ctl ike list >/dev/null 2>&1 && break; sleep 0.1; done
ctl ike initiate sswc >"$WORK/initiate-c.log" 2>&1 || fail "ike initiate sswc: $(cat "$WORK/initiate-c.log")"
wait_up "certificates, espgw initiates"
wait_ping "certificates, espgw initiates"
ping_all a-to-b-cert 5 in_a ping 10.2.0.10
ping_all b-to-a-cert 5 in_b ping 10.1.0.10
spis cert-initiator espgwc
ctl ike terminate sswc >"$WORK/terminate-c.log" 2>&1 || fail "ike terminate sswc: $(cat "$WORK/terminate-c.log")"
for _ in $(seq 1 50); do sw --list-sas | grep -q ESTABLISHED || break; sleep 0.1; done
sw --list-sas | grep -q ESTABLISHED && fail "certificates: charon still has the IKE SA after espgw's terminate"
sw --initiate --child netc >"$WORK/initiate-cc.log" 2>&1 || fail "swanctl --initiate (certificates): $(tail -5 "$WORK/initiate-cc.log")"
wait_up "certificates, charon initiates"
wait_ping "certificates, charon initiates"
ping_all a-to-b-cert2 5 in_a ping 10.2.0.10
ping_all b-to-a-cert2 5 in_b ping 10.1.0.10
spis cert-responder espgwc
echo "step 7a ok: certificates, espgw as initiator and as responder, pings both ways, SPIs agree"
prom "$WORK/prom-cert0.txt"
for c in sswu sswx; do
    ctl ike initiate "$c" >"$WORK/initiate-$c.log" 2>&1 || fail "ike initiate $c: $(cat "$WORK/initiate-$c.log")"
done
for _ in $(seq 1 50); do
    prom "$WORK/prom-cert1.txt"
    fails=$(( $(sed -n 's/^espgw_ike_auth_failures_total{.*} //p' "$WORK/prom-cert1.txt") - $(sed -n 's/^espgw_ike_auth_failures_total{.*} //p' "$WORK/prom-cert0.txt") ))
    [ "$fails" -ge 2 ] && break
    sleep 0.1
done
[ "$fails" -ge 2 ] || fail "certificates: $fails authentication failures counted for the untrusted and the expired certificate, want 2"
ctl ike list --json >"$WORK/ike-certbad.json"
python3 - "$WORK/ike-certbad.json" <<'PY' || fail "certificates: an IKE SA or CHILD_SA with a refused certificate"
import json, sys
sas = json.load(open(sys.argv[1]))["sas"]
bad = [s for s in sas if s["connection"] in ("sswu", "sswx") and (s["children"] or s["state"] == "established")]
assert not bad, bad
print("ike list:", [(s["connection"], s["state"], len(s["children"])) for s in sas])
PY
ping_all a-to-b-cert3 5 in_a ping 10.2.0.10
kill -TERM "$GW"
wait "$GW" || fail "espgw (certificates) did not exit with status 0 on SIGTERM"
GW_PIDS=()
# The reasons, from espgw's log (complete once it exited).
sed 's/\x1b\[[0-9;]*m//g' "$WORK/ac.log" >"$WORK/ac-plain.txt"
for r in "192.0.2.5:4500 (id gw-u.example) failed: Certificate(UntrustedIssuer)" \
    "192.0.2.6:4500 (id gw-x.example) failed: Certificate(Expired)"; do
    grep -F "authentication of peer $r" "$WORK/ac-plain.txt" || fail "certificates: espgw did not log \"$r\""
done
echo "step 7b ok: an untrusted and an expired certificate refused, $fails authentication failures counted, the good tunnel kept"
# 8. charon behind a NAT that maps its port 4500 to 40500 (nftables in its
# namespace: SNAT of what it sends from 4500, and a drop of anything sent
# to its 4500 that is not the NAT's reply traffic, as a NAT in front of it
# would have nowhere to send that): charon initiates; espgw must send its
# IKE and its ESP in UDP to 40500, the port charon's messages came from.
# Fails with ESP sent to 4500 (pings lost, the drop counted).
command -v nft >/dev/null || fail "no nft (scripts/setup.sh installs nftables)"
sed -e 's#^start_action = "start"#start_action = "none"#' -e 's#state-a"#state-an"#' "$WORK/a-conn.toml" >"$WORK/an.toml"
chmod 600 "$WORK/an.toml"
grep -q '^start_action = "none"' "$WORK/an.toml" || fail "NAT step: config not derived"
ip netns exec "$GB" nft -f - <<'NFT' || fail "NAT step: nft rules"
table ip natt {
    chain pre { type nat hook prerouting priority dstnat; }
    chain post {
        type nat hook postrouting priority srcnat;
        ip daddr 192.0.2.1 udp sport 4500 snat to 192.0.2.2:40500
    }
    chain in {
        type filter hook input priority filter;
        ip saddr 192.0.2.1 udp dport 4500 ct direction original counter drop
    }
}
NFT
ip netns exec "$P-gwa" "$ESPGW" run --config "$WORK/an.toml" --stats-json "$WORK/an.json" >"$WORK/an.log" 2>&1 &
GW_PIDS+=($!)
GW=${GW_PIDS[0]}
for _ in $(seq 1 50); do ctl ike list >/dev/null 2>&1 && break; sleep 0.1; done
sw --initiate --child net >"$WORK/initiate-nat.log" 2>&1 || fail "swanctl --initiate (NAT): $(tail -5 "$WORK/initiate-nat.log")"
wait_up "behind a NAT"
wait_ping "behind a NAT"
ping_all a-to-b-nat 5 in_a ping 10.2.0.10
ping_all b-to-a-nat 5 in_b ping 10.1.0.10
spis nat
ctl ike list --json >"$WORK/ike-nat.json"
python3 - "$WORK/ike-nat.json" <<'PY' || fail "NAT step: espgw's IKE SA is not with charon's mapped port"
import json, sys
sa = json.load(open(sys.argv[1]))["sas"][0]
assert sa["remote"] == "192.0.2.2:40500", sa["remote"]
assert sa["children"][0]["udp_encap"], sa["children"][0]
print("NAT: espgw's IKE SA with", sa["remote"], "CHILD_SA in UDP")
PY
dropped=$(ip netns exec "$GB" nft list chain ip natt in | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
[ "$dropped" = 0 ] || fail "NAT step: espgw sent $dropped packets to charon's 4500 past the NAT mapping"
kill -TERM "$GW"
wait "$GW" || fail "espgw (NAT) did not exit with status 0 on SIGTERM"
GW_PIDS=()
ip netns exec "$GB" nft delete table ip natt
echo "step 8 ok: charon behind a NAT mapping 4500 to 40500: espgw's IKE and ESP went to 40500 (none to 4500), pings both ways, SPIs agree"
echo "PASS: IKEv2 with strongSwan: both initiators, rekeys both ways (also under load), flood and malformed IKE, DPD and recovery, Delete on SIGTERM, IPv6 outer, certificates, behind a port-mapping NAT"
