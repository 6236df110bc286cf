#!/usr/bin/env bash
# End to end: espgw against espgw over IKEv2 (PSK, psk_file), every ESP
# suite (aes128gcm16, aes256gcm16, chacha20poly1305, aes128-sha256,
# aes256-sha256, aes128-sha1) with ESN on and off over IPv4 outer, four of
# them (GCM, ChaCha20, CBC+SHA-1, CBC+SHA-256) over IPv6 outer, each a
# [[connection]] of ONE pair of gateways (configs and checks:
# tests/e2e/ike_pair.py), each carrying IPv4 and IPv6 inner traffic
# between its own host addresses. Gateway A initiates all of them
# ("start"), B answers ("none"); IKE proposals and PFS groups vary too.
#
# Each step fails the test:
#  1. every tunnel up within 30 s; `ike list` of A and B: the same, expected
#     IKE proposal, the same IKE SPIs, the expected ESP suite, A's outbound
#     SPI = B's inbound SPI and the other way round;
#  2. pings both ways, IPv4 and IPv6 inner, every echo answered (by icmp_seq);
#  3. a 256 KiB TCP transfer per tunnel (IPv4 inner over IPv4 outer, IPv6
#     inner over IPv6 outer) arrives with the sha256 it was sent with;
#  4. a CHILD_SA rekey of every tunnel (odd cases started by A, even by B)
#     under a 10-per-second ping per tunnel: every echo answered, new SPIs,
#     step 1's checks again; then pings both ways again;
#  5. two negative cases: A offers an IKE proposal B has no match for (no
#     IKE SA, NO_PROPOSAL_CHOSEN in A's log, espgw_ike_handshake_failures_total
#     above zero in A's metrics); the IKE proposals agree but the ESP ones
#     do not (the CHILD_SA refused with NO_PROPOSAL_CHOSEN,
#     espgw_ike_child_failures_total above zero); neither has a tunnel on
#     either side, their pings are not answered;
#  6. SIGINT: both exit 0; the stats JSON balances, with no ESP drop
#     (unknown SPI, replay, ICV, padding, expired SA, policy mismatch) and
#     nothing sent in clear.
#
# Needs root. ESPGW overrides the binary (default target/release/espgw).
P=ikp
LOG_TAIL=30
. "$(dirname "$0")/common.bash"
start=$(date +%s)
ctl() { local side=$1; shift; "$ESPGW" ctl --socket "$WORK/$side.sock" "$@"; }
on_fail() {
    for s in a b; do
        echo "--- ike list $s"
        ctl $s ike list 2>&1 || true
    done
}
wait_all() { local p rc=0; for p in "$@"; do wait "$p" || rc=1; done; return $rc; }

python3 tests/e2e/ike_pair.py gen "$WORK"
CASES=$WORK/cases.json
N=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$CASES")
# The last two cases are the negative ones: no common IKE proposal, then
# no common ESP proposal.
NP=$((N - 2)) NEG_IKE=$((N - 1)) NEG_ESP=$N
name() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[int(sys.argv[2]) - 1]["name"])' "$CASES" "$1"; }
outer() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[int(sys.argv[2]) - 1]["outer"])' "$CASES" "$1"; }
for s in a b; do
    "$ESPGW" check --config "$WORK/gw-$s.toml" >"$WORK/check-$s.log" 2>&1 || fail "espgw check gw-$s: $(cat "$WORK/check-$s.log")"
done

scripts/netns.sh up "$P"
tunnel_hosts "$N" ab
gateway_start b "$WORK/gw-b.toml"
gateway_start a "$WORK/gw-a.toml"

# 1. Every positive case up on both sides, then compared.
lists() {  # SUFFIX: both sides' ike list --json into WORK/ike-{a,b}-SUFFIX.json
    ctl a ike list --json >"$WORK/ike-a-$1.json" && ctl b ike list --json >"$WORK/ike-b-$1.json"
}
up=0
for _ in $(seq 1 150); do
    if lists up 2>/dev/null && python3 tests/e2e/ike_pair.py check "$CASES" "$WORK/ike-a-up.json" "$WORK/ike-b-up.json" >/dev/null 2>&1; then
        up=1
        break
    fi
    for p in "${GW_PIDS[@]}"; do kill -0 "$p" 2>/dev/null || fail "a gateway exited"; done
    sleep 0.2
done
python3 tests/e2e/ike_pair.py check "$CASES" "$WORK/ike-a-up.json" "$WORK/ike-b-up.json" >"$WORK/check-up.out" 2>&1 || true
[ $up = 1 ] || fail "not every tunnel came up as configured within 30 s: $(cat "$WORK/check-up.out")"
cat "$WORK/check-up.out"
echo "step 1 ok: $NP tunnels up in $(( $(date +%s) - start ))s; proposals and SPIs agree on both sides"

# The middle link from here to the end: only IKE, ESP and ARP/ND on it.
capture_start $P-gwa gwa-unprot "$WORK/mid.pcap"

# Warm-up: one ping per tunnel and family resolves every neighbor (loss allowed).
WARM=()
for k in $(seq 1 "$N"); do
    in_a ping -c1 -W2 -I 10.1.$k.10 10.2.$k.10 >/dev/null 2>&1 &
    WARM+=($!)
    in_a ping -6 -c1 -W2 -I fd00:1:$k::10 fd00:2:$k::10 >/dev/null 2>&1 &
    WARM+=($!)
done
wait_all "${WARM[@]}" || true

# 2. Pings both ways, both inner families, every tunnel. PING_SFX names the round.
pings() {  # ROUND: 3 pings per tunnel, direction and family; every echo answered
    local k fam pids=() bad=""
    for k in $(seq 1 $NP); do
        for fam in 4 6; do
            if [ $fam = 4 ]; then a=10.1.$k.10 b=10.2.$k.10; else a=fd00:1:$k::10 b=fd00:2:$k::10; fi
            in_a ping -$fam -c 3 -i 0.2 -w 8 -I $a $b >"$WORK/ping-$1-$k-$fam-ab.out" 2>&1 &
            pids+=($!)
            in_b ping -$fam -c 3 -i 0.2 -w 8 -I $b $a >"$WORK/ping-$1-$k-$fam-ba.out" 2>&1 &
            pids+=($!)
        done
    done
    wait_all "${pids[@]}" || true
    for k in $(seq 1 $NP); do
        for f in "$WORK"/ping-$1-$k-*.out; do
            pings_answered "$f" 3 >/dev/null 2>&1 || bad="$bad ${f##*/ping-}"
        done
    done
    [ -z "$bad" ] || fail "$1: pings not all answered:$bad"
}
pings first
echo "step 2 ok: pings both ways, IPv4 and IPv6 inner, through all $NP tunnels"

# 3. TCP through every tunnel, sha256 on both ends.
SERVERS=()
for k in $(seq 1 $NP); do
    if [ "$(outer $k)" = 6 ]; then dst=fd00:2:$k::10; else dst=10.2.$k.10; fi
    ip netns exec $P-hostb python3 tests/e2e/xfer.py serve $dst $((5000 + k)) >"$WORK/xfer-$k.recv" 2>&1 &
    SERVERS+=($!)
    BG+=($!)
done
sleep 0.5
SENDERS=()
for k in $(seq 1 $NP); do
    if [ "$(outer $k)" = 6 ]; then src=fd00:1:$k::10 dst=fd00:2:$k::10; else src=10.1.$k.10 dst=10.2.$k.10; fi
    in_a timeout 60 python3 tests/e2e/xfer.py send $src $dst $((5000 + k)) 262144 >"$WORK/xfer-$k.sent" 2>&1 &
    SENDERS+=($!)
done
wait_all "${SENDERS[@]}" || fail "a TCP sender failed: $(tail -n 3 "$WORK"/xfer-*.sent)"
wait_all "${SERVERS[@]}" || fail "a TCP receiver failed: $(tail -n 3 "$WORK"/xfer-*.recv)"
for k in $(seq 1 $NP); do
    [ -s "$WORK/xfer-$k.sent" ] && [ "$(cat "$WORK/xfer-$k.sent")" = "$(cat "$WORK/xfer-$k.recv")" ] ||
        fail "TCP through $(name $k): sent $(cat "$WORK/xfer-$k.sent"), received $(cat "$WORK/xfer-$k.recv")"
done
echo "step 3 ok: 256 KiB over TCP through each tunnel, sha256 equal on both ends"

# 4. A CHILD_SA rekey of every tunnel under pings: odd cases by A, even by B.
lists before
PINGERS=()
for k in $(seq 1 $NP); do
    in_a ping -c 20 -i 0.1 -w 10 -I 10.1.$k.10 10.2.$k.10 >"$WORK/ping-rekey-$k.out" 2>&1 &
    PINGERS+=($!)
done
sleep 0.5
for k in $(seq 1 $NP); do
    if [ $((k % 2)) = 1 ]; then side=a; else side=b; fi
    ctl $side ike rekey "$(name $k)" --child net >>"$WORK/rekey.log" 2>&1 || fail "ike rekey $(name $k) on $side: $(tail -n 2 "$WORK/rekey.log")"
done
rekeyed=0
for _ in $(seq 1 100); do
    if lists rekeyed 2>/dev/null && python3 tests/e2e/ike_pair.py check "$CASES" "$WORK/ike-a-rekeyed.json" "$WORK/ike-b-rekeyed.json" "$WORK/ike-a-before.json" >/dev/null 2>&1; then
        rekeyed=1
        break
    fi
    sleep 0.1
done
python3 tests/e2e/ike_pair.py check "$CASES" "$WORK/ike-a-rekeyed.json" "$WORK/ike-b-rekeyed.json" "$WORK/ike-a-before.json" >"$WORK/check-rekeyed.out" 2>&1 || true
[ $rekeyed = 1 ] || fail "CHILD_SA rekeys: $(cat "$WORK/check-rekeyed.out")"
wait_all "${PINGERS[@]}" || true
bad=""
for k in $(seq 1 $NP); do
    pings_answered "$WORK/ping-rekey-$k.out" 20 >/dev/null 2>&1 || bad="$bad $(name $k)($(grep -o '[0-9]* received' "$WORK/ping-rekey-$k.out"))"
done
[ -z "$bad" ] || fail "pings lost across the CHILD_SA rekeys:$bad"
cat "$WORK/check-rekeyed.out"
pings second
echo "step 4 ok: every CHILD_SA rekeyed (A and B initiating), new SPIs agree, no ping lost across it, pings both ways after"

# 5. The negative cases. Checked with step 1's lists: neither has a CHILD_SA
# on either side, the first no established IKE SA (ike_pair.py check).
ip netns exec $P-gwa curl -s --max-time 5 http://127.0.0.1:9100/metrics >"$WORK/metrics-a.txt" || fail "A's metrics endpoint"
metric() { sed -n "s/^espgw_ike_$1_total{[^}]*} \([0-9]*\)\$/\1/p" "$WORK/metrics-a.txt"; }
neg_ike=$(name "$NEG_IKE") neg_esp=$(name "$NEG_ESP")
grep -q "failed: PeerNotify(NO_PROPOSAL_CHOSEN)" "$WORK/a.log" || fail "$neg_ike: no IKE SA failure with NO_PROPOSAL_CHOSEN in A's log"
grep -q "first CHILD_SA refused (NO_PROPOSAL_CHOSEN)" "$WORK/a.log" || fail "$neg_esp: no CHILD_SA refusal with NO_PROPOSAL_CHOSEN in A's log"
hf=$(metric handshake_failures) cf=$(metric child_failures)
[ "${hf:-0}" -ge 1 ] || fail "$neg_ike: espgw_ike_handshake_failures_total is ${hf:-absent} on A"
[ "${cf:-0}" -ge 1 ] || fail "$neg_esp: espgw_ike_child_failures_total is ${cf:-absent} on A"
# The responder of the failed IKE_SA_INIT keeps no state, but counts it.
ip netns exec $P-gwb curl -s --max-time 5 http://127.0.0.1:9100/metrics >"$WORK/metrics-b.txt" || fail "B's metrics endpoint"
np=$(sed -n "s/^espgw_ike_init_no_proposal_total{[^}]*} \([0-9]*\)\$/\1/p" "$WORK/metrics-b.txt")
[ "${np:-0}" -ge 1 ] || fail "$neg_ike: espgw_ike_init_no_proposal_total is ${np:-absent} on B (the responder)"
for s in a b; do
    ctl $s sa list --json >"$WORK/sa-$s.json"
    python3 - "$WORK/sa-$s.json" "$neg_ike/net" "$neg_esp/net" <<'PY' || fail "a negative case's tunnel exists on $s"
import json, sys
sas = json.load(open(sys.argv[1]))["sas"]
sys.exit(1 if any(s["tunnel"] in sys.argv[2:] for s in sas) else 0)
PY
done
for k in $NEG_IKE $NEG_ESP; do
    in_a ping -c 2 -i 0.2 -W 1 -I 10.1.$k.10 10.2.$k.10 >"$WORK/ping-neg-$k.out" 2>&1 && fail "$(name $k): a ping was answered with no SA"
done
echo "step 5 ok: $neg_ike and $neg_esp: NO_PROPOSAL_CHOSEN logged ($hf IKE SA, $cf CHILD_SA failure(s) counted on A), no tunnel on either side, no traffic"
grep -h "NO_PROPOSAL_CHOSEN" "$WORK/a.log" | sed 's/\x1b\[[0-9;]*m//g' | sort -u -k4 | head -n 2
echo "B's log: $(grep -c NO_PROPOSAL_CHOSEN "$WORK/b.log" || true) line(s) naming NO_PROPOSAL_CHOSEN"

# 6. Stop; the middle link; counters.
gateways_stop || fail "a gateway did not exit with status 0 on SIGINT"
captures_stop
other=$(tcpdump -r "$WORK/mid.pcap" -nn 'not (esp or udp port 500 or udp port 4500 or arp or (icmp6 and ip6[40] >= 133 and ip6[40] <= 136))' 2>/dev/null | wc -l)
[ "$other" -eq 0 ] || fail "the middle link carried $other frames that are not IKE, ESP or ARP/ND: $(tcpdump -r "$WORK/mid.pcap" -nn 'not (esp or udp port 500 or udp port 4500 or arp or icmp6)' 2>/dev/null | head -n 3)"
python3 - "$WORK/mid.pcap" <<'PY' || fail "plaintext of the TCP transfers on the middle link"
import sys
n = open(sys.argv[1], "rb").read().count(b"espgw-xfer-clear")
sys.exit(f"{n} copies of the transfer marker in clear" if n else 0)
PY
echo "middle link: $(tcpdump -r "$WORK/mid.pcap" -nn esp 2>/dev/null | wc -l) ESP, $(tcpdump -r "$WORK/mid.pcap" -nn 'udp port 500 or udp port 4500' 2>/dev/null | wc -l) IKE frames, nothing else but ARP/ND, no plaintext marker"
python3 - "$WORK/a.json" "$WORK/b.json" <<'PY' || fail "stats JSON"
import json, sys
BAD = ("unknown_spi", "replayed", "icv_mismatch", "bad_padding", "bad_inner_packet", "sa_expired",
       "policy_mismatch", "unprotected_plaintext", "plaintext_blocked", "punt_full", "punt_too_big", "tx_full")
for path in sys.argv[1:]:
    s = json.load(open(path))
    t = s["totals"]
    assert t["balanced"], (path, t)
    assert t["ike_punted"] > 0 and t["ike_sent"] > 0, (path, t)
    bad = {r: s["drops"].get(r, 0) for r in BAD if s["drops"].get(r, 0)}
    assert not bad, (path, bad)
    print(path.rsplit("/", 1)[-1], "ike_punted", t["ike_punted"], "ike_sent", t["ike_sent"],
          "drops", {k: v for k, v in s["drops"].items() if v})
PY
echo "PASS: espgw <-> espgw IKEv2: $NP tunnels (6 ESP suites x ESN over IPv4, 4 over IPv6), TCP, CHILD_SA rekeys both ways, IKE and ESP no-proposal refusals, in $(( $(date +%s) - start ))s"
