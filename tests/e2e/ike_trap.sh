#!/usr/bin/env bash
# End to end: IKEv2 between two espgw gateways, on demand (issue 13,
# start_action = "trap").
#
#   [ikt-hosta] -- espgw A -- link -- espgw B -- [ikt-hostb]
#   10.1.0.10   10.1.0.1 | 192.0.2.1  192.0.2.2 | 10.2.0.1   10.2.0.10
#
# Both gateways: one [[connection]] (PSK, aes128gcm16-prfsha256-x25519, ESP
# aes128gcm16-x25519), start_action = "trap" on both. In order, each step
# failing the test:
#  1. Before any traffic: no IKE SA on either side, `ctl ike list` shows
#     the connection "trapped", and nothing but ARP crossed the middle link.
#  2. The first ping from host A finds the trap: it is dropped (counted as
#     `acquire`), the acquire initiates, IKE and the CHILD_SA come up; the
#     pings after that are all answered (by icmp_seq). The capture of the
#     middle link holds only UDP 500/4500 and ESP (and ARP): no plaintext.
#  3. `ctl ike terminate` on A: the SAs go on both sides, the policy stays
#     trapped; the next ping re-initiates (a new IKE SA), then all answered.
#  3b. `ctl ike terminate --child` on B (the CHILD_SA alone): A keeps the
#     IKE SA without it, trapped again; the next ping adds a new CHILD_SA
#     to the same IKE SA, then all answered.
#  4. SIGINT: the stats JSON counts the `acquire` drops and the acquires
#     raised, and balances; every punted IKE datagram had a good UDP
#     checksum (none dropped as `punt_bad_checksum`).
#  5. Reauthentication: both gateways again, A with reauth_time = 3; the
#     first ping brings the tunnel up, then a ping every 0.2 s for 10 s
#     across at least two reauthentications (new IKE SA each time):
#     answered.
#
# TRAP_ACTION=none runs the same steps with start_action = "none" (no
# trap): it must fail at step 1 or 2, which shows the test tells.
# Needs root. ESPGW overrides the binary.
P=ikt
LOG_TAIL=60
. "$(dirname "$0")/common.bash"

PSK="espgw-trap-e2e-psk-0123456789abcdef"
ACTION=${TRAP_ACTION:-trap}
ctl() { local side=$1; shift; "$ESPGW" ctl --socket "$WORK/$side.sock" "$@"; }
on_fail() {
    for s in a b; do
        echo "--- ctl ike list ($s)"
        ctl "$s" ike list 2>&1 || true
    done
}

# conf SIDE ME PEER BASE REAUTH: gateway SIDE's config from the demo's
# BASE (ports, addresses, routes) with a [[connection]] instead of its
# tunnels.
conf() {
    local side=$1 me=$2 peer=$3 base=$4 reauth=$5 f="$WORK/$1.toml"
    awk '/^\[\[(tunnel|connection)\]\]/{exit} {print}' "$base" >"$f"
    sed -i "s#^control_socket = .*#control_socket = \"$WORK/$side.sock\"#; /^metrics = /d" "$f"
    sed -i "/^\[gateway\]/a state_dir = \"$WORK/state-$side\"" "$f"
    sed -i "/^\[gateway\]/a ike_retransmit_ms = 500\nike_retransmit_tries = 3" "$f"
    cat >>"$f" <<EOF

[[connection]]
name = "pair"
local = "192.0.2.$me"
remote = "192.0.2.$peer"
local_id = "gw$me.example"
remote_id = "gw$peer.example"
psk = "$PSK"
proposals = ["aes128gcm16-prfsha256-x25519"]
start_action = "$ACTION"
reauth_time = $reauth

[[connection.child]]
name = "net"
local_ts = ["10.$me.0.0/24"]
remote_ts = ["10.$peer.0.0/24"]
esp_proposals = ["aes128gcm16-x25519"]
EOF
    chmod 600 "$f"
    "$ESPGW" check --config "$f" >"$WORK/check-$side.log" 2>&1 || fail "espgw check $side: $(cat "$WORK/check-$side.log")"
}

# ike_json SIDE: `ctl ike list --json` of SIDE (empty object on error).
ike_json() { ctl "$1" ike list --json 2>/dev/null || echo '{}'; }
# ike_field SIDE EXPR: a Python expression over s = the IKE SAs of SIDE.
ike_field() {
    ike_json "$1" | python3 -c "import json,sys; s=json.load(sys.stdin).get('sas', []); print($2)"
}

# wait_socket SIDE: the control socket answers `ike list` (up to 10 s).
wait_socket() {
    for _ in $(seq 1 50); do
        ctl "$1" ike list --json >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    fail "gateway $1: no control socket"
}

# wait_up WHAT: both sides have an established IKE SA with its CHILD_SA.
wait_up() {
    for _ in $(seq 1 75); do
        if ike_json a | grep -q '"in_spi"' && ike_json b | grep -q '"in_spi"'; then
            return 0
        fi
        sleep 0.2
    done
    fail "$1: the tunnel did not come up"
}

# ping_all WHAT COUNT: host A pings host B COUNT times, every echo answered.
ping_all() {
    local log="$WORK/ping-$1.log"
    in_a ping -c "$2" -i 0.2 -W 1 10.2.0.10 >"$log" 2>&1 || true
    pings_answered "$log" "$2" || fail "$1: not every ping answered: $(tail -2 "$log")"
}

# drops SIDE REASON: the data plane's drops of REASON so far (ctl stats).
drops() {
    ctl "$1" stats --json | python3 -c "
import json, sys
s = json.load(sys.stdin)
d = s.get('drops') or s.get('dataplane', {}).get('drops', {})
print(d.get('$2', 0))"
}

# only_ike_and_esp PCAP WHAT: the capture holds IKE (UDP 500/4500) and ESP
# (with ARP) only, and some ESP; no host packet in clear.
only_ike_and_esp() {
    local other esp ike
    other=$(tcpdump -r "$1" -nn 'not (arp or esp or udp port 500 or udp port 4500)' 2>/dev/null | wc -l)
    esp=$(tcpdump -r "$1" -nn 'esp' 2>/dev/null | wc -l)
    ike=$(tcpdump -r "$1" -nn 'udp port 500 or udp port 4500' 2>/dev/null | wc -l)
    [ "$other" -eq 0 ] || fail "$2: $other packets on the middle link are neither IKE nor ESP: $(tcpdump -r "$1" -nn 'not (arp or esp or udp port 500 or udp port 4500)' 2>/dev/null | head -5)"
    [ "$esp" -gt 0 ] || fail "$2: no ESP on the middle link"
    echo "$2: middle link: $ike IKE, $esp ESP, nothing else but ARP"
}

scripts/netns.sh up "$P"
conf a 1 2 gateway.toml 0
conf b 2 1 configs/gateway-b.toml 0

# 1. Trapped, nothing negotiated.
capture_start "$P-gwa" gwa-unprot "$WORK/link1.pcap"
gateway_start a "$WORK/a.toml"
gateway_start b "$WORK/b.toml"
wait_socket a
wait_socket b
sleep 1
for s in a b; do
    got=$(ike_field "$s" "' '.join(x['state'] for x in s)")
    [ "$got" = "trapped" ] || fail "step 1: gateway $s: IKE list before traffic is '$got', want 'trapped'"
done
echo "step 1 ok: both connections trapped, no IKE SA"

# 2. The first ping raises the acquire.
[ "$(drops a acquire)" -eq 0 ] || fail "step 2: acquire drops before any traffic"
in_a ping -c 1 -W 1 10.2.0.10 >"$WORK/ping-first.log" 2>&1 &&
    fail "step 2: the first ping was answered: it cannot have waited for IKE"
wait_up "step 2 (after the first ping)"
first_drops=$(drops a acquire)
[ "$first_drops" -ge 1 ] || fail "step 2: the ping that found the trap is not counted as acquire"
ping_all up 20
[ "$(drops a acquire)" -eq "$first_drops" ] || fail "step 2: acquire drops with the tunnel up"
init=$(ike_field a "[x['initiator'] for x in s]")
[ "$init" = "[True]" ] || fail "step 2: A should be the initiator: $init"
spi1=$(ike_field a "s[0]['ike_sa']")
captures_stop
only_ike_and_esp "$WORK/link1.pcap" "step 2"
echo "step 2 ok: the first ping initiated ($first_drops dropped as acquire), 20 pings answered"

# 3. terminate: trapped again; the next ping re-initiates.
capture_start "$P-gwa" gwa-unprot "$WORK/link2.pcap"
ctl a ike terminate pair >"$WORK/terminate.log" 2>&1 || fail "ctl ike terminate: $(cat "$WORK/terminate.log")"
for _ in $(seq 1 50); do
    [ "$(ike_field a "' '.join(x['state'] for x in s)")" = "trapped" ] &&
        [ "$(ike_field b "' '.join(x['state'] for x in s)")" = "trapped" ] && break
    sleep 0.2
done
for s in a b; do
    got=$(ike_field "$s" "' '.join(x['state'] for x in s)")
    [ "$got" = "trapped" ] || fail "step 3: gateway $s after terminate: '$got', want 'trapped'"
done
in_a ping -c 1 -W 1 10.2.0.10 >"$WORK/ping-again.log" 2>&1 &&
    fail "step 3: a ping was answered right after terminate"
wait_up "step 3 (after terminate)"
ping_all again 10
spi2=$(ike_field a "s[0]['ike_sa']")
[ "$spi2" != "$spi1" ] || fail "step 3: the same IKE SA ($spi1) after terminate"
[ "$(drops a acquire)" -gt "$first_drops" ] || fail "step 3: the re-initiating ping is not counted as acquire"
captures_stop
only_ike_and_esp "$WORK/link2.pcap" "step 3"
echo "step 3 ok: terminate left the trap, the next ping brought a new IKE SA ($spi1 -> $spi2)"

# 3b. The peer deletes the CHILD_SA alone: A keeps its IKE SA without a
# CHILD_SA, trapped again; the next ping's acquire asks for a new CHILD_SA
# on that IKE SA (CREATE_CHILD_SA; it used to wait on the childless IKE
# SA forever).
ctl b ike terminate pair --child net >"$WORK/terminate-child.log" 2>&1 ||
    fail "step 3b: ctl ike terminate --child: $(cat "$WORK/terminate-child.log")"
for _ in $(seq 1 50); do
    ike_json a | grep -q '"in_spi"' || break
    sleep 0.2
done
ike_json a | grep -q '"in_spi"' && fail "step 3b: A still has the CHILD_SA after B deleted it"
[ "$(ike_field a "s[0]['ike_sa']")" = "$spi2" ] || fail "step 3b: A's IKE SA changed on a CHILD_SA delete"
in_a ping -c 1 -W 1 10.2.0.10 >/dev/null 2>&1 || true
wait_up "step 3b (after the CHILD_SA delete)"
ping_all child-again 10
spi3=$(ike_field a "' '.join(x['ike_sa'] for x in s)")
[ "$spi3" = "$spi2" ] || fail "step 3b: want the same single IKE SA ($spi2) with a new CHILD_SA, have '$spi3'"
echo "step 3b ok: the peer's CHILD_SA delete left the trap, the next ping added a new CHILD_SA to the IKE SA ($spi2)"

# 4. Counters at exit.
gateways_stop || fail "a gateway did not exit cleanly"
python3 - "$WORK/a.json" <<'PY' || fail "step 4: stats JSON"
import json, sys
s = json.load(open(sys.argv[1]))
t, d = s["totals"], s["drops"]
assert t["balanced"], t
assert d.get("acquire", 0) >= 2, d
assert t["acquires_raised"] >= 2, t
assert t["acquires_raised"] + t["acquires_suppressed"] <= d["acquire"], (t, d)
assert t["ike_punted"] > 0 and d.get("punt_bad_checksum", 0) == 0, (t, d)
print("step 4 ok: acquire drops", d["acquire"], "raised", t["acquires_raised"],
      "suppressed", t["acquires_suppressed"])
PY

# 5. Reauthentication every 3 s on A, pings across.
rm -f "$WORK"/*.sock
conf a 1 2 gateway.toml 3
gateway_start a "$WORK/a.toml"
gateway_start b "$WORK/b.toml"
wait_socket a
wait_socket b
in_a ping -c 1 -W 1 10.2.0.10 >/dev/null 2>&1 || true
wait_up "step 5"
spi_r1=$(ike_field a "s[0]['ike_sa']")
ping_all reauth 50
spis=$(ike_field a "' '.join(x['ike_sa'] for x in s)")
[ -n "$spis" ] && [[ " $spis " != *" $spi_r1 "* ]] || fail "step 5: no reauthentication in 10 s (IKE SAs: $spis, first $spi_r1)"
ike_json a | grep -q '"in_spi"' || fail "step 5: no CHILD_SA after the reauthentications"
echo "step 5 ok: reauthenticated ($spi_r1 -> $spis), 50 pings across answered"
gateways_stop || fail "a gateway did not exit cleanly"
echo "PASS: ike_trap"
