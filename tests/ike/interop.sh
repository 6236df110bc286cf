#!/usr/bin/env bash
# espgw's IKEv2 engine (crates/ike) against the real strongSwan: the test
# driver crates/ike/examples/ike_interop.rs runs the engine over kernel UDP
# sockets (ports 500 and 4500) in namespace $P-a on 192.0.2.1, charon "b" of
# tests/ike/strongswan.bash runs in $P-b on 192.0.2.2 (no charon a). PSK,
# aes128gcm16-prfsha256-x25519, ESP aes128gcm16, 10.1.0.0/24 <-> 10.2.0.0/24.
#
# Twice: the engine initiates, then charon initiates and the engine
# responds. Each time the initiating side then rekeys the CHILD_SA (x25519
# PFS), the IKE SA, and the CHILD_SA again (its keys come from the new IKE
# SA's SK_d, so they check the IKE SA rekey too). Each CHILD_SA checked
# (the engine's last one when it initiates, every one when charon does) must
# have the SPIs
# `swanctl --list-sas --raw` reports (crosswise) and the keys charon logged
# ("encryption initiator/responder key", read with kat_extract.py's log
# parser), and be UDP-encapsulated (charon with kernel-libipsec fakes NAT).
#
# Then the other proposal families, and certificates (ECDSA and RSA, RFC
# 7427 signatures, each side initiating; an untrusted one refused).
#
# usage: tests/ike/interop.sh        (root; KEEP=1 keeps logs)
# The namespaces are $P-a and $P-b (P=ike-ssw by default, as in
# charon-pair.sh): give another P when a charon-pair run may be going on,
# or its clean-up deletes this run's namespaces (P=ike-h12 tests/ike/...).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/strongswan.bash"
cd "$SSW_ROOT"
ssw_require

cargo build -q --locked -p espgw-ike --example ike_interop
TARGET=$(cargo metadata -q --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
DRIVER=$TARGET/debug/examples/ike_interop
PSK="espgw-strongswan-test-psk-0123456789"

ssw_net_up
ssw_conf b
# b_conf: b's swanctl.conf with $PROPOSALS and $ESP (loaded when b runs);
# with CERTS=DIR, certificate authentication with DIR's ca.crt, b.crt, b.key
# instead of the PSK.
b_conf() {
    local s=$SSW_WORK/b/swanctl local_auth="auth = psk" remote_auth=psk
    rm -f "$s"/x509/* "$s"/x509ca/* "$s"/private/*
    if [ -n "${CERTS:-}" ]; then
        cp "$CERTS/ca.crt" "$s/x509ca/ca.crt"
        cp "$CERTS/b.crt" "$s/x509/b.crt"
        cp "$CERTS/b.key" "$s/private/b.key"
        local_auth="auth = pubkey
            certs = b.crt"
        remote_auth=pubkey
    fi
    cat >"$SSW_WORK/b/swanctl/swanctl.conf" <<EOF
connections {
    ike {
        version = 2
        local_addrs = 192.0.2.2
        remote_addrs = 192.0.2.1
        proposals = ${PROPOSALS:-aes128gcm16-prfsha256-x25519}
        rekey_time = 0
        reauth_time = 0
        mobike = no
        local {
            $local_auth
            id = b.example
        }
        remote {
            auth = $remote_auth
            id = a.example
        }
        children {
            net {
                local_ts = 10.2.0.0/24
                remote_ts = 10.1.0.0/24
                esp_proposals = ${ESP:-aes128gcm16-x25519}
                rekey_time = 0
                start_action = none
            }
        }
    }
}
secrets {
    ike-test {
        id-a = a.example
        id-b = b.example
        secret = "$PSK"
    }
}
EOF
    [ -z "${SSW_PID[b]:-}" ] || ssw_ctl b --load-all >/dev/null 2>&1
}
PROPOSALS=aes128gcm16-prfsha256-x25519
ESP=aes128gcm16-x25519
b_conf
ssw_start b
ssw_ctl b --load-all >/dev/null

child_field() { # KEY: KEY of b's INSTALLED CHILD_SA
    ssw_ctl b --list-sas --raw | grep -o 'net-[0-9]* {[^}]*}' | grep 'state=INSTALLED' |
        grep -o " $1=[^ }]*" | sed "s/^ $1=//" | head -1
}
ours() { sed -n "s/^$2=//p" "$1"; }

# check_keys MODE OUT: the engine's CHILD_SA keys (OUT) equal the last ones
# charon logged (its "initiator" is whoever initiated the exchange).
check_keys() {
    python3 - "$SSW_WORK/b/charon.log" "$2" "$1" <<'PY' || ssw_fail "$1: keys differ from charon's log"
import sys
sys.path.insert(0, "tests/ike")
import kat_extract
log, out, mode = sys.argv[1:]
child = kat_extract.log_facts(kat_extract.read_log(log))[1][-1]
ours = dict(line.split("=", 1) if "=" in line and not line.endswith("=") else (line.rstrip("="), "")
            for line in open(out).read().split())
outbound, inbound = ("i", "r") if mode == "initiate" else ("r", "i")
ok = child["encr_" + outbound].hex() == ours["outbound_key"] and child["encr_" + inbound].hex() == ours["inbound_key"]
if ours["outbound_auth_key"] or "integ_i" in child:
    ok = ok and child.get("integ_" + outbound, b"").hex() == ours["outbound_auth_key"]
    ok = ok and child.get("integ_" + inbound, b"").hex() == ours["inbound_auth_key"]
print(f"{mode}: CHILD_SA {ours['inbound_spi']}/{ours['outbound_spi']} keys {'equal' if ok else 'DIFFER'} to charon's")
sys.exit(0 if ok else 1)
PY
}

# check MODE OUT: the engine's CHILD_SA (OUT) against b's view of it.
check() {
    local mode=$1 out=$2 i
    for i in $(seq 1 50); do [ -n "$(child_field spi-in)" ] && break; sleep 0.1; done
    [ -n "$(child_field spi-in)" ] || ssw_fail "$mode: charon has no INSTALLED CHILD_SA"
    [ "$(child_field spi-in)" = "$(ours "$out" outbound_spi)" ] &&
        [ "$(child_field spi-out)" = "$(ours "$out" inbound_spi)" ] ||
        ssw_fail "$mode: SPIs differ: charon in/out $(child_field spi-in)/$(child_field spi-out), engine $(cat "$out")"
    [ "$(child_field encr-alg)" = AES_GCM_16 ] && [ "$(child_field encr-keysize)" = 128 ] ||
        ssw_fail "$mode: charon's CHILD_SA is not AES_GCM_16/128"
    [ "$(ours "$out" suite)" = aes128gcm16 ] && [ "$(ours "$out" udp_encap)" = true ] ||
        ssw_fail "$mode: engine suite/encapsulation: $(cat "$out")"
    check_keys "$mode" "$out"
}
# wait_child_spi SPI: until b's INSTALLED CHILD_SA has inbound SPI SPI
# (a rekey's old SA is deleted right after the new one is installed).
wait_child_spi() {
    local i
    for i in $(seq 1 50); do [ "$(child_field spi-in)" = "$1" ] && return 0; sleep 0.1; done
    ssw_fail "charon's CHILD_SA is not the rekeyed one ($1): $(ssw_ctl b --list-sas)"
}
terminate() {
    ssw_ctl b --terminate --ike ike --force --timeout 2 >/dev/null 2>&1 || true
    for i in $(seq 1 50); do [ -z "$(child_field spi-in)" ] && break; sleep 0.1; done
}

ike_spi() { ssw_ctl b --list-sas --raw | grep -o ' initiator-spi=[0-9a-f]*' | head -1; }
wait_file() {
    local i
    for i in $(seq 1 100); do [ -s "$1" ] && return 0; sleep 0.1; done
    ssw_fail "the engine did not write $1"
}

# 1. The engine initiates, rekeys the CHILD_SA, the IKE SA, the CHILD_SA.
ip netns exec "$SSW_NS_A" "$DRIVER" initiate 192.0.2.1 192.0.2.2 "$SSW_WORK/initiate.out" rekey ||
    ssw_fail "engine as initiator: no CHILD_SA or a rekey failed"
wait_child_spi "$(ours "$SSW_WORK/initiate.out.rekey2" outbound_spi)"
check initiate "$SSW_WORK/initiate.out.rekey2"
terminate

# 2. charon initiates, the engine responds; charon rekeys the CHILD_SA, the
# IKE SA, the CHILD_SA.
ip netns exec "$SSW_NS_A" "$DRIVER" respond 192.0.2.1 192.0.2.2 "$SSW_WORK/respond.out" rekey &
DRIVER_PID=$!
sleep 0.3
ssw_ctl b --initiate --child net --timeout 10 >/dev/null || ssw_fail "charon could not initiate to the engine"
check respond "$SSW_WORK/respond.out"
ssw_ctl b --rekey --child net >/dev/null || ssw_fail "charon could not rekey the CHILD_SA"
wait_file "$SSW_WORK/respond.out.rekey"
wait_child_spi "$(ours "$SSW_WORK/respond.out.rekey" outbound_spi)"
check respond "$SSW_WORK/respond.out.rekey"
old=$(ike_spi)
ssw_ctl b --rekey --ike ike >/dev/null || ssw_fail "charon could not rekey the IKE SA"
for i in $(seq 1 50); do [ -n "$(ike_spi)" ] && [ "$(ike_spi)" != "$old" ] && break; sleep 0.1; done
[ "$(ike_spi)" != "$old" ] || ssw_fail "charon's IKE SA was not rekeyed: $(ssw_ctl b --list-sas)"
ssw_ctl b --rekey --child net >/dev/null || ssw_fail "charon could not rekey the CHILD_SA on the new IKE SA"
wait "$DRIVER_PID" || ssw_fail "engine as responder: no CHILD_SA or a rekey failed"
wait_child_spi "$(ours "$SSW_WORK/respond.out.rekey2" outbound_spi)"
check respond "$SSW_WORK/respond.out.rekey2"
terminate

# 3. A wrong PSK, each way: AUTHENTICATION_FAILED, and the engine's log line
# names the peer and not the key.
IKE_INTEROP_PSK=not-the-right-key ip netns exec "$SSW_NS_A" "$DRIVER" initiate 192.0.2.1 192.0.2.2 "$SSW_WORK/wrong.out" \
    >"$SSW_WORK/wrong-i.log" 2>&1 && ssw_fail "engine as initiator: up with a wrong PSK"
grep -q "authentication of peer 192.0.2.2:4500 (id none) failed: RejectedByPeer" "$SSW_WORK/wrong-i.log" ||
    ssw_fail "engine as initiator, wrong PSK: $(cat "$SSW_WORK/wrong-i.log")"
IKE_INTEROP_PSK=not-the-right-key ip netns exec "$SSW_NS_A" "$DRIVER" respond 192.0.2.1 192.0.2.2 "$SSW_WORK/wrong.out" \
    >"$SSW_WORK/wrong-r.log" 2>&1 &
DRIVER_PID=$!
sleep 0.3
ssw_ctl b --initiate --child net --timeout 5 >/dev/null 2>&1 && ssw_fail "charon: up with a wrong PSK"
wait "$DRIVER_PID" && ssw_fail "engine as responder: up with a wrong PSK"
grep -q "authentication of peer 192.0.2.2:4500 (id b.example) failed: BadAuth" "$SSW_WORK/wrong-r.log" ||
    ssw_fail "engine as responder, wrong PSK: $(cat "$SSW_WORK/wrong-r.log")"
! grep -q -e not-the-right-key -e "$PSK" "$SSW_WORK/wrong-i.log" "$SSW_WORK/wrong-r.log" || ssw_fail "a key in the log"
terminate

# 4. The other proposal families, the engine initiating (no rekeys).
for fam in "aes256-sha256-prfsha256-modp2048|aes256-sha256" "aes256gcm16-prfsha384-ecp384|aes256gcm16" \
    "chacha20poly1305-prfsha512-ecp256|chacha20poly1305" "aes128-sha256-prfsha256-x25519|aes128-sha256"; do
    PROPOSALS=${fam%|*} ESP=${fam#*|}
    b_conf
    IKE_INTEROP_PROPOSALS=$PROPOSALS IKE_INTEROP_ESP=$ESP ip netns exec "$SSW_NS_A" "$DRIVER" initiate \
        192.0.2.1 192.0.2.2 "$SSW_WORK/$PROPOSALS.out" >/dev/null || ssw_fail "$PROPOSALS/$ESP: no CHILD_SA"
    wait_child_spi "$(ours "$SSW_WORK/$PROPOSALS.out" outbound_spi)"
    [ "$(child_field spi-out)" = "$(ours "$SSW_WORK/$PROPOSALS.out" inbound_spi)" ] || ssw_fail "$PROPOSALS: SPIs differ"
    echo -n "$PROPOSALS / $ESP: "
    check_keys initiate "$SSW_WORK/$PROPOSALS.out"
    terminate
done
# 5. Certificates (RFC 7427 signatures, CERT/CERTREQ, IKE fragmentation of
# the RSA IKE_AUTH), ECDSA P-256 and RSA 2048: the engine initiates, then
# charon does; as initiator the engine also rekeys the CHILD_SA, the IKE SA
# and the CHILD_SA again over the certificate-authenticated SA. The certificates are the recorded runs' (pki-made, valid
# from 2026-12-02 for 20 years; the engine checks them at the wall clock).
PROPOSALS=aes128gcm16-prfsha256-x25519 ESP=aes128gcm16-x25519
for kind in ecdsa-aes128gcm16-prfsha256-ecp256 rsa-chacha20poly1305-prfsha512-x25519; do
    CERTS=$SSW_ROOT/crates/ike/testdata/strongswan/$kind
    b_conf
    ssw_ctl b --load-all >/dev/null 2>&1 || ssw_fail "${kind%%-*}: charon did not load the certificates"
    certenv=(IKE_INTEROP_CERT="$CERTS/a.crt" IKE_INTEROP_KEY="$CERTS/a.key" IKE_INTEROP_CACERT="$CERTS/ca.crt")
    env "${certenv[@]}" ip netns exec "$SSW_NS_A" "$DRIVER" initiate 192.0.2.1 192.0.2.2 "$SSW_WORK/cert-i.out" \
        rekey >"$SSW_WORK/cert-i.log" 2>&1 || ssw_fail "${kind%%-*} certificates, engine as initiator: $(cat "$SSW_WORK/cert-i.log")"
    wait_child_spi "$(ours "$SSW_WORK/cert-i.out.rekey2" outbound_spi)"
    echo -n "${kind%%-*} certificates, after CHILD_SA, IKE SA and CHILD_SA rekeys: "
    check initiate "$SSW_WORK/cert-i.out.rekey2"
    terminate
    env "${certenv[@]}" ip netns exec "$SSW_NS_A" "$DRIVER" respond 192.0.2.1 192.0.2.2 "$SSW_WORK/cert-r.out" \
        >"$SSW_WORK/cert-r.log" 2>&1 &
    DRIVER_PID=$!
    sleep 0.3
    ssw_ctl b --initiate --child net --timeout 10 >/dev/null || ssw_fail "${kind%%-*}: charon could not initiate to the engine"
    wait "$DRIVER_PID" || ssw_fail "${kind%%-*} certificates, engine as responder: $(cat "$SSW_WORK/cert-r.log")"
    echo -n "${kind%%-*} certificates, "
    check respond "$SSW_WORK/cert-r.out"
    grep -q "authentication of 'a.example' with RSA_EMSA_PKCS1_SHA2_256 successful\|authentication of 'a.example' with ECDSA_WITH_SHA256_DER successful" \
        "$SSW_WORK/b/charon.log" || ssw_fail "${kind%%-*}: charon did not log a signature check of a.example"
    terminate
done
grep -q "received fragment #2 of 2, reassembled fragmented IKE message" "$SSW_WORK/b/charon.log" ||
    ssw_fail "the engine's RSA IKE_AUTH was not fragmented"
# charon's certificate from a CA the engine does not trust (charon trusts
# both CAs): the engine as initiator refuses it, naming charon's address
# and identity.
CERTS=$SSW_ROOT/crates/ike/testdata/strongswan/rsa-chacha20poly1305-prfsha512-x25519
OTHER=$SSW_ROOT/crates/ike/testdata/strongswan/ecdsa-aes128gcm16-prfsha256-ecp256
b_conf
cp "$OTHER/ca.crt" "$SSW_WORK/b/swanctl/x509ca/other.crt"
ssw_ctl b --load-all >/dev/null 2>&1 || ssw_fail "charon did not load the CAs"
IKE_INTEROP_CERT=$OTHER/a.crt IKE_INTEROP_KEY=$OTHER/a.key IKE_INTEROP_CACERT=$OTHER/ca.crt \
    ip netns exec "$SSW_NS_A" "$DRIVER" initiate 192.0.2.1 192.0.2.2 "$SSW_WORK/cert-bad.out" \
    >"$SSW_WORK/cert-bad.log" 2>&1 && ssw_fail "engine as initiator: up with an untrusted certificate"
grep -q "authentication of peer 192.0.2.2:4500 (id b.example) failed: Certificate(UntrustedIssuer)" "$SSW_WORK/cert-bad.log" ||
    ssw_fail "untrusted certificate: $(cat "$SSW_WORK/cert-bad.log")"
terminate
# 6. Timed rekeys (lifetimes): charon's own rekey_time (CHILD_SA 6 s, IKE SA
# 9 s, with its jitter) against the engine as responder; then the engine's
# lifetimes (the same times, its jitter) against charon with rekey_time = 0.
# Each run waits for three CHILD_SAs and an IKE SA rekey and checks the third
# CHILD_SA as above (the engine's is keyed from the rekeyed IKE SA's SK_d;
# charon's timers may rekey the CHILD_SA twice before the IKE SA).
PROPOSALS=aes128gcm16-prfsha256-x25519 ESP=aes128gcm16-x25519
unset CERTS # PSK again (b_conf writes certificate authentication while CERTS is set)
rm -f "$SSW_WORK/b/swanctl/x509ca/other.crt"
b_conf
# charon's own derived hard limits (10 %) round to whole seconds: explicit
# ones, or it deletes the SAs as it rekeys them.
sed -i -e 's/^        rekey_time = 0$/        rekey_time = 9s\n        over_time = 30s\n        rand_time = 1s/' \
    -e 's/^                rekey_time = 0$/                rekey_time = 6s\n                life_time = 30s\n                rand_time = 1s/' \
    "$SSW_WORK/b/swanctl/swanctl.conf"
ssw_ctl b --load-all >/dev/null
ip netns exec "$SSW_NS_A" "$DRIVER" respond 192.0.2.1 192.0.2.2 "$SSW_WORK/timed-r.out" rekey \
    >"$SSW_WORK/timed-r.log" 2>&1 &
DRIVER_PID=$!
sleep 0.3
ssw_ctl b --initiate --child net --timeout 10 >/dev/null || ssw_fail "timed: charon could not initiate"
wait "$DRIVER_PID" || ssw_fail "timed: charon's timed rekeys not all answered: $(cat "$SSW_WORK/timed-r.log")"
wait_child_spi "$(ours "$SSW_WORK/timed-r.out.rekey2" outbound_spi)"
check respond "$SSW_WORK/timed-r.out.rekey2"
terminate
b_conf
IKE_INTEROP_CHILD_REKEY_MS=6000 IKE_INTEROP_IKE_REKEY_MS=9000 ip netns exec "$SSW_NS_A" "$DRIVER" initiate \
    192.0.2.1 192.0.2.2 "$SSW_WORK/timed-i.out" timed >"$SSW_WORK/timed-i.log" 2>&1 ||
    ssw_fail "timed: the engine's timed rekeys did not complete: $(cat "$SSW_WORK/timed-i.log")"
wait_child_spi "$(ours "$SSW_WORK/timed-i.out.rekey2" outbound_spi)"
check initiate "$SSW_WORK/timed-i.out.rekey2"
terminate
echo "PASS: engine <-> charon, initiator and responder; CHILD_SA, IKE SA, CHILD_SA rekeys each way; DPD answered by charon; wrong PSK each way; 5 proposal families; ECDSA and RSA certificates each way (rekeys as initiator); an untrusted certificate refused; timed rekeys each way"
