#!/usr/bin/env bash
# End to end: the decrypt fan-out (issue 15, docs/multicore.md). Gateway B
# runs 2 workers with `spread_decrypt = "always"` (SPREAD_MODE=auto for
# the default mode, which spreads only while the receiving worker is behind,
# so on a fast machine it may spread nothing and fail the counter check):
# the ESP of its one tunnel arrives on one af_packet queue (PACKET_FANOUT
# hashes the outer addresses, which one peer never varies), so one worker
# receives it all and hands parts of each SA group to the other worker,
# and the per-SA reorder stage puts the decrypted packets back in arrival
# order.
#
# What must hold, host A -> host B (B decrypts):
#  - four parallel iperf3 UDP streams (each datagram carries iperf3's own
#    sequence number): the receiver counts no datagram out of order in any
#    stream. Loss is reported, not failed on: af_packet rings and host
#    sockets drop under load on a 2-core machine, and a part that waits
#    past the reorder bound is dropped as `reorder_late` by design; what
#    the fan-out must never do is reorder.
#  - a TCP transfer arrives whole (sha256 equal at both ends);
#  - B's counters show the fan-out happened (the receiving worker's
#    `spread_out` and the other's `spread_in` > 0); no ESP drop other than the
#    reorder stage's own (`reorder_late`, `reorder_full`) and none of
#    `replayed`/`icv_mismatch`: each packet decrypted exactly once;
#  - the positive control: the same streams with the fan-out off give
#    `spread_out` == 0 (so the counter proves something); off there by
#    the start-up probe of the cores (`spread_decrypt = "auto"` with
#    `spread_max_round_trip_ns = 1`, a round trip no machine makes, and
#    `spread_recheck_ms = 0`, no live check: B logs the measured round
#    trip and that the fan-out stays off, and its stats JSON says so in
#    `spread_decrypt_gate`; `espgw check --probe-cores` prints the pair's
#    round trip, and for the same config with the live check on (the
#    default) that the fan-out starts off and that "auto" checks it while
#    it runs; every worker's stats carry `spread_trial`, with no trial
#    there or under "always"); and the same limit with the live check on
#    (the default): B logs that the fan-out starts off, its gate says
#    `live_check`, every worker reports the fan-out off and hands nothing
#    out unless a trial ran, the streams in order; both of these runs
#    have `steer_esp = "off"`: no flow call, nothing logged, no
#    `esp_steering` in B's stats, where the first run ("auto", the
#    default) shows af_packet's refusal of the esp4 form on `unprot`;
#  - the same checks (drops, fan-out counted) over three more tunnels
#    between one gateway pair: IPv4 outer in UDP 4500 (ESN), IPv6 outer,
#    IPv6 outer in UDP (ESN), two UDP streams each, every tunnel's inbound
#    SA on B carrying packets (tunnels.py set "spread"); there B runs with
#    `spread_late = "send"` and a 400 µs bound (`spread_wait_us`; `espgw
#    check` says both): a late part is sent,
#    not dropped, so the datagrams out of order may be at most B's
#    `reorder_late_sent`, and none is in order's place otherwise.
#
# Needs root. ESPGW overrides the binary (default target/release/espgw).
SPREAD_MODE=${SPREAD_MODE:-always}
case $SPREAD_MODE in always | auto) ;; *) echo "SPREAD_MODE must be always or auto, not '$SPREAD_MODE'" >&2; exit 2 ;; esac
P=spread
LOG_TAIL=200
. "$(dirname "$0")/common.bash"
command -v iperf3 >/dev/null || fail "iperf3 missing (scripts/setup.sh installs it)"

# B: two workers, fan-out on. Its inbound SA's replay window (1024 in
# configs/static-b.toml) spans the packets in flight, as docs/config.md asks.
make_b() {  # make_b SPREAD OUT [STEER_ESP [MAX_ROUND_TRIP_NS [RECHECK_MS]]]
    sed -e 's/^workers = 1$/workers = 2/' \
        -e "/^mode = /a spread_decrypt = \"$1\"\nsteer_esp = \"${3:-auto}\"${4:+\nspread_max_round_trip_ns = $4}${5:+\nspread_recheck_ms = $5}" \
        configs/static-b.toml >"$2"
    grep -q '^workers = 2$' "$2" || fail "could not set workers = 2 in $2"
    grep -q '^replay_window = 1024$' "$2" || fail "configs/static-b.toml's replay window is no longer 1024"
}

# run_streams TAG: 4 UDP streams A -> B through the tunnel, iperf3 JSON
# in $WORK/udp-TAG.json; then stop the gateways (stats JSON written).
run_streams() {
    local tag=$1
    in_b iperf3 -s -1 -J >"$WORK/udp-$tag.json" 2>&1 &
    local srv=$!
    sleep 0.5
    in_a iperf3 -c 10.2.0.10 -u -b 60M -l 1000 -P 4 -t 4 >"$WORK/udp-$tag-client.log" 2>&1 \
        || fail "iperf3 client ($tag): $(tail -3 "$WORK/udp-$tag-client.log")"
    wait "$srv" || fail "iperf3 server ($tag) failed: $(tail -5 "$WORK/udp-$tag.json")"
}

# --- 1. the fan-out on -------------------------------------------------------
make_b "$SPREAD_MODE" "$WORK/b-spread.toml"
HOSTS_IPV4_ONLY=1 GW_CONFIG_B="$WORK/b-spread.toml" gateways_up >"$WORK/up.log" 2>&1 \
    || fail "the tunnel did not come up: $(cat "$WORK/up.log")"
grep -q 'spread_decrypt' "$WORK/gateway-b.toml" || fail "B's config has no spread_decrypt"

run_streams on

# TCP, whole: sha256 at both ends.
in_b python3 tests/e2e/xfer.py serve 10.2.0.10 5301 >"$WORK/xfer-serve.out" 2>&1 &
SRV=$!
sleep 0.5
in_a python3 tests/e2e/xfer.py send 10.1.0.10 10.2.0.10 5301 8000000 >"$WORK/xfer-send.out" 2>&1 \
    || fail "TCP transfer (send): $(cat "$WORK/xfer-send.out")"
wait $SRV || fail "TCP transfer (serve): $(cat "$WORK/xfer-serve.out")"
[ "$(cat "$WORK/xfer-send.out")" = "$(cat "$WORK/xfer-serve.out")" ] \
    || fail "TCP transfer differs: sent $(cat "$WORK/xfer-send.out"), received $(cat "$WORK/xfer-serve.out")"
echo "TCP through the fan-out: $(cat "$WORK/xfer-serve.out") (length, sha256) equal at both ends"

gateways_stop || fail "a gateway did not exit cleanly: $(tail -5 "$WORK"/b.log)"
cp "$WORK/b.json" "$WORK/b-on.json"

# --- 2. the positive control: fan-out off --------------------------------------
scripts/netns.sh down "$P"
# Off by the cores' probe: "auto" with a limit of 1 ns, which no pair of
# cores meets, and no live check (spread_recheck_ms = 0: with it the
# fan-out would only start off, and a trial could turn it on); and
# steer_esp off: no flow call, no log line, no esp_steering in the JSON.
make_b auto "$WORK/b-checked.toml" off 1
"$ESPGW" check --config "$WORK/b-checked.toml" --probe-cores >"$WORK/check-checked.txt" 2>&1 ||
    fail "espgw check --probe-cores: $(cat "$WORK/check-checked.txt")"
grep -q 'over spread_max_round_trip_ns = 1, the fan-out starts off' "$WORK/check-checked.txt" ||
    fail "with the live check, espgw check --probe-cores did not say the fan-out starts off: $(tail -2 "$WORK/check-checked.txt")"
make_b auto "$WORK/b-off.toml" off 1 0
grep -q '^spread_max_round_trip_ns = 1$' "$WORK/b-off.toml" || fail "could not set spread_max_round_trip_ns in b-off.toml"
grep -q '^spread_recheck_ms = 0$' "$WORK/b-off.toml" || fail "could not set spread_recheck_ms in b-off.toml"
"$ESPGW" check --config "$WORK/b-off.toml" --probe-cores >"$WORK/check-probe.txt" 2>&1 ||
    fail "espgw check --probe-cores: $(cat "$WORK/check-probe.txt")"
grep -Eq '^cores [0-9]+ <-> [0-9]+: round trip ([0-9.]+ ns|no answer within 20 ms)$' "$WORK/check-probe.txt" ||
    fail "espgw check --probe-cores printed no round trip: $(tail -3 "$WORK/check-probe.txt")"
grep -q 'over spread_max_round_trip_ns = 1, the fan-out stays off' "$WORK/check-probe.txt" ||
    fail "espgw check --probe-cores did not say the fan-out stays off: $(tail -2 "$WORK/check-probe.txt")"
grep -q 'checks every 2000 ms (spread_recheck_ms)' "$WORK/check-checked.txt" ||
    fail "espgw check did not say \"auto\" checks the fan-out while it runs: $(grep -i 'auto' "$WORK/check-checked.txt")"
grep -q 'not checked while it runs (spread_recheck_ms = 0)' "$WORK/check-probe.txt" ||
    fail "espgw check did not say spread_recheck_ms = 0 turns the check off: $(grep -i 'auto' "$WORK/check-probe.txt")"
HOSTS_IPV4_ONLY=1 GW_CONFIG_B="$WORK/b-off.toml" gateways_up >"$WORK/up-off.log" 2>&1 \
    || fail "the tunnel did not come up (fan-out off): $(cat "$WORK/up-off.log")"
run_streams off
gateways_stop || fail "a gateway did not exit cleanly (fan-out off)"
cp "$WORK/b.json" "$WORK/b-off.json"
! grep -q "steer_esp" "$WORK/b.log" || fail "steer_esp = \"off\" but B logged: $(grep steer_esp "$WORK/b.log")"
grep -q 'spread_decrypt "auto": a cache line.s round trip between worker cores takes .*over spread_max_round_trip_ns = 1, the fan-out stays off' "$WORK/b.log" ||
    fail "B did not log the cores' probe closing the fan-out: $(grep -i spread "$WORK/b.log" | head -3)"
SPREAD_MODE=$SPREAD_MODE python3 - "$WORK/b-on.json" "$WORK/b-off.json" <<'PY' || fail "steer_esp, the probe or the live check in B's stats"
import json, os, sys
on, off = (json.load(open(p)) for p in sys.argv[1:])
ports = {p["name"]: p for p in on["ports"]}
# "auto" (phase 1): af_packet has no flow API; ESP over IPv4 refused on unprot.
assert ports["unprot"]["esp_steering"]["state"] == "refused", ports["unprot"]
assert list(ports["unprot"]["esp_steering"]["refused"]) == ["esp4"], ports["unprot"]
# "off" (phase 2): nothing asked, nothing said.
assert all("esp_steering" not in p for p in off["ports"]), off["ports"]
assert "esp_steering_failed_tries" not in off
print("steer_esp: auto refused by af_packet (esp4) on unprot; off: not in the stats")
# The cores' probe: not run for "always" (phase 1; with SPREAD_MODE=auto
# it runs at the default limit), closed at 1 ns (phase 2).
if os.environ["SPREAD_MODE"] == "always":
    assert "spread_decrypt_gate" not in on, on.get("spread_decrypt_gate")
else:
    assert on["spread_decrypt_gate"]["limit_ns"] == 120, on["spread_decrypt_gate"]
gate = off["spread_decrypt_gate"]
assert gate["state"] == "off" and gate["probed"] and gate["limit_ns"] == 1, gate
assert gate["live_check"] is False, gate
assert len(gate["pairs"]) == 1 and gate["pairs"][0]["cpus"][0] != gate["pairs"][0]["cpus"][1], gate
assert gate["round_trip_ns"] is None or gate["round_trip_ns"] > 1, gate
print(f"spread_decrypt auto: cores {gate['pairs'][0]['cpus']} round trip {gate['round_trip_ns']} ns > 1: fan-out off")
# The live check (spread_recheck_ms): in every worker's stats; no trial
# where it does not run ("always"; the fan-out closed by the probe).
for run, stats in (("on", on), ("off", off)):
    for w in stats["workers"]:
        t = w["spread_trial"]
        assert set(t) == {"on", "off", "keeping_up", "no_helper", "last_with_pps", "last_without_pps", "fan_out"}, t
        trials = t["on"] + t["off"] + t["keeping_up"] + t["no_helper"]
        assert trials or t["fan_out"] == "on", t
        if run == "off" or os.environ["SPREAD_MODE"] == "always":
            assert trials == 0 and w["spread_solo"] == 0 and t["fan_out"] == "on", (run, w)
        else:
            print(f"live check, worker {w['id']}: {t}, spread_solo {w['spread_solo']}")
print("live check: in every worker's stats; no trial with \"always\" or the fan-out closed")
PY

# --- 2b. over the probe's limit with the live check: the fan-out starts off ---
# The same 1 ns limit with spread_recheck_ms at its default: B builds the
# fan-out but starts it off; only a trial (when its receiving worker is
# behind) may hand parts out. The streams stay in order either way.
scripts/netns.sh down "$P"
HOSTS_IPV4_ONLY=1 GW_CONFIG_B="$WORK/b-checked.toml" gateways_up >"$WORK/up-checked.log" 2>&1 \
    || fail "the tunnel did not come up (fan-out starting off): $(cat "$WORK/up-checked.log")"
run_streams checked
gateways_stop || fail "a gateway did not exit cleanly (fan-out starting off)"
cp "$WORK/b.json" "$WORK/b-checked.json"
grep -q 'spread_decrypt "auto": a cache line.s round trip between worker cores takes .*over spread_max_round_trip_ns = 1, the fan-out starts off' "$WORK/b.log" ||
    fail "B did not log that the fan-out starts off: $(grep -i spread "$WORK/b.log" | head -3)"
python3 - "$WORK/b-checked.json" "$WORK/udp-checked.json" <<'PY' || fail "the fan-out starting off"
import json, sys
b, udp = (json.load(open(p)) for p in sys.argv[1:])
gate = b["spread_decrypt_gate"]
assert gate["state"] == "off" and gate["live_check"] is True, gate
ooo = sum(s["udp"].get("out_of_order", 0) for s in udp["end"]["streams"])
assert ooo == 0, f"{ooo} datagrams out of order"
for w in b["workers"]:
    t = w["spread_trial"]
    trials = t["on"] + t["off"] + t["keeping_up"] + t["no_helper"]
    if trials == 0:
        # No trial: off from the start, nothing handed out.
        assert t["fan_out"] == "off" and w["spread_out"] == 0, w
    elif t["on"] == 0:
        assert t["fan_out"] == "off", w
    print(f"starting off, worker {w['id']}: {trials} trials {t}, spread_out {w['spread_out']}, spread_solo {w['spread_solo']}")
print(f"fan-out starting off: gate {gate['state']} with the live check, {ooo} datagrams out of order")
PY

# --- 3. UDP-encapsulated ESP and IPv6 outer through the fan-out -------------
# tunnels.py's "spread" set: aes128gcm16 IPv4 outer in UDP 4500,
# aes256gcm16 IPv6 outer, chacha20poly1305 IPv6 outer in UDP (ESN on the
# first and last); B again 2 workers with the fan-out and a 1024 window.
scripts/netns.sh down "$P"
scripts/netns.sh up "$P"
tunnels_gen spread
sed -i -e 's/^workers = 1$/workers = 2/' \
    -e "/^mode = /a spread_decrypt = \"$SPREAD_MODE\"\nspread_late = \"send\"\nspread_wait_us = 400" \
    -e 's/^replay_window = 64$/replay_window = 4096/' "$WORK/gw-b.toml"
grep -q "^spread_decrypt = \"$SPREAD_MODE\"" "$WORK/gw-b.toml" || fail "could not turn the fan-out on in tunnels.py's config"
"$ESPGW" check --config "$WORK/gw-b.toml" >"$WORK/check-b.txt" 2>&1 || fail "espgw check of B: $(cat "$WORK/check-b.txt")"
grep -q 'back after the 400 us bound is sent out of order, spread_late = "send"' "$WORK/check-b.txt" ||
    fail "espgw check does not show spread_wait_us = 400 and spread_late = send: $(grep -i 'peer' "$WORK/check-b.txt")"
tunnel_hosts "$N" ab
gateway_start b "$WORK/gw-b.toml"
gateway_start a "$WORK/gw-a.toml"
gateways_wait_ping -I 10.1.1.10 10.2.1.10 >"$WORK/up-tunnels.log" 2>&1 || fail "the first tunnel did not come up"
for k in $(seq 1 "$N"); do
    in_a ping -c1 -W2 -I 10.1.$k.10 10.2.$k.10 >/dev/null 2>&1 || true
done
SRVS=()
for k in $(seq 1 "$N"); do
    in_b iperf3 -s -1 -J -B 10.2.$k.10 -p $((5210 + k)) >"$WORK/udp-t$k.json" 2>&1 &
    SRVS+=($!)
done
sleep 0.5
CLIS=()
for k in $(seq 1 "$N"); do
    in_a iperf3 -c 10.2.$k.10 -B 10.1.$k.10 -p $((5210 + k)) -u -b 40M -l 1000 -P 2 -t 4 \
        >"$WORK/udp-t$k-client.log" 2>&1 &
    CLIS+=($!)
done
for p in "${CLIS[@]}" "${SRVS[@]}"; do wait "$p" || fail "an iperf3 of step 3 failed: $(tail -3 "$WORK"/udp-t*-client.log)"; done
gateways_stop || fail "a gateway did not exit cleanly (step 3)"
cp "$WORK/b.json" "$WORK/b-tunnels.json"

SPREAD_MODE=$SPREAD_MODE python3 - "$WORK/udp-on.json" "$WORK/b-on.json" "$WORK/udp-off.json" "$WORK/b-off.json" "$WORK/b-tunnels.json" "$WORK"/udp-t[0-9]*.json <<'PY' || fail "the checks above failed"
import json, os, sys

# "auto" spreads only while the receiving worker is behind: on a machine
# where it keeps up, it hands out nothing and keeps every group instead.
AUTO = os.environ.get("SPREAD_MODE") == "auto"

def streams(path):
    j = json.load(open(path))
    out = []
    for s in j["end"]["streams"]:
        u = s["udp"]
        out.append((u["packets"], u["lost_packets"], u.get("out_of_order", 0)))
    return out

def workers(path):
    return json.load(open(path))["workers"]

def drops(path):
    return json.load(open(path)).get("drops", {})

ok = True
runs = [("on", [sys.argv[1]], sys.argv[2]), ("off", [sys.argv[3]], sys.argv[4]),
        ("on, UDP-encapsulated and IPv6 outer", sys.argv[6:], sys.argv[5])]
for tag, udps, stats in runs:
    ss = [x for u in udps for x in streams(u)]
    ws = workers(stats)
    d = {k: v for k, v in drops(stats).items() if v}
    total = sum(p for p, _, _ in ss)
    lost = sum(l for _, l, _ in ss)
    ooo = sum(o for _, _, o in ss)
    print(f"fan-out {tag}: {len(ss)} UDP streams, {total} datagrams, {lost} lost, {ooo} out of order; "
          f"B workers spread_out={[w['spread_out'] for w in ws]} spread_in={[w['spread_in'] for w in ws]} "
          f"reorder_late_sent={[w.get('reorder_late_sent', 0) for w in ws]}; "
          f"B drops {d}")
    want = 4 if len(udps) == 1 else 2 * len(udps)
    if len(ss) != want or total == 0 or len(udps) == 0:
        print(f"FAIL ({tag}): expected {want} UDP streams with traffic"); ok = False
    # With spread_late = "send" (the tunnels run) a late part leaves behind
    # later packets: at most that many datagrams out of order.
    sent_late = sum(w.get("reorder_late_sent", 0) for w in ws)
    allowed = sent_late if len(udps) > 1 else 0
    if ooo > allowed:
        print(f"FAIL ({tag}): {ooo} datagrams out of order ({sent_late} sent late)"); ok = False
    if len(udps) > 1 and "reorder_late_sent" not in ws[0]:
        print(f"FAIL ({tag}): B's stats have no reorder_late_sent"); ok = False
    if len(udps) == 1 and sent_late:
        print(f"FAIL ({tag}): {sent_late} sent late with spread_late = drop"); ok = False
    for bad in ("replayed", "icv_mismatch", "unknown_spi", "sa_expired", "no_policy", "policy_mismatch"):
        if d.get(bad):
            print(f"FAIL ({tag}): B dropped {d[bad]} as {bad}"); ok = False
    if tag.startswith("on"):
        # The worker whose queue the ESP hashes to hands parts out; the
        # other decrypts them (which one receives depends on the hash).
        out = [w["spread_out"] for w in ws]
        inn = [w["spread_in"] for w in ws]
        unneeded = sum(w.get("spread_unneeded", 0) for w in ws)
        kept = sum(w.get("spread_kept", 0) for w in ws)
        # Parts other workers decrypted came back, each counted once by
        # how long it took (spread_back_us); none without a part out.
        back = [sum(w["spread_back_us"].values()) for w in ws]
        for w, o, b in zip(ws, out, back):
            if (o > 0) != (b > 0):
                print(f"FAIL ({tag}): worker {w['id']} handed out {o} packets but counts {b} parts back"); ok = False
        if sum(back):
            print(f"{tag}: parts back by time (us): " + ", ".join(
                f"{k}={sum(w['spread_back_us'][k] for w in ws)}"
                for k in sorted(ws[0]["spread_back_us"], key=lambda k: (k.startswith("over"), int(k.split("_")[1])))))
        if not (sum(out) > 0 and sum(inn) > 0) and not (AUTO and unneeded > 0):
            print("FAIL (on): B's workers show no fan-out (spread_out/spread_in zero"
                  + (", none kept as unneeded either" if AUTO else "") + ")"); ok = False
        if not AUTO and unneeded:
            print(f"FAIL (on): {unneeded} packets kept as unneeded under spread_decrypt = always"); ok = False
        if AUTO:
            print(f"auto: B decrypted {unneeded} packets of groups worth spreading itself, keeping up alone")
        if kept:
            print(f"note: B found no free helper for {kept} packets (spread_kept)")
        if d.get("reorder_late") or d.get("reorder_full"):
            print(f"note: the reorder stage dropped {d.get('reorder_late', 0)} late and "
                  f"{d.get('reorder_full', 0)} over its bound (a preempted worker on a shared machine)")
        if len(udps) > 1:
            ins = [(x["tunnel"], x["packets"]) for x in json.load(open(stats))["sas"] if x["dir"] == "in"]
            if len(ins) != len(udps) or not all(n > 0 for _, n in ins):
                print(f"FAIL ({tag}): every tunnel's inbound SA on B must have carried packets: {ins}"); ok = False
    else:
        if any(w["spread_out"] or w["spread_in"] for w in ws):
            print("FAIL (off): fan-out counters moved with the fan-out closed by the cores' probe"); ok = False
sys.exit(0 if ok else 1)
PY
echo "PASS: one tunnel decrypted by 2 workers: 4 UDP streams in order, TCP whole, the fan-out counted (and not without it); the same over UDP-encapsulated and IPv6-outer tunnels with spread_late = send and spread_wait_us = 400 (reordering only as much as was sent late)"
