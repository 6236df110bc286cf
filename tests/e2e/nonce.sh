#!/usr/bin/env bash
# End to end: a manually keyed AES-GCM SA never sends a sequence number (its
# AEAD nonce) twice across restarts, and never accepts again what it
# received before one (issue 10). Through the real EAL with net_pcap ports:
#
#   1. two `espgw run`s of the same config over the same input pcaps: the
#      ESP of the second run decrypts with scapy and none of its sequence
#      numbers / IVs was sent by the first run;
#   2. the peer's ESP the first run accepted (seq 1..10), replayed into the
#      second run, is counted as `replayed`, every packet;
#   3. a state directory that cannot be created refuses the AEAD tunnel:
#      `espgw run` exits non-zero naming the tunnel, the directory and why;
#      `espgw check` explains the rule.
#
# Needs root. ESPGW overrides the binary (default target/release/espgw).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
ESPGW=${ESPGW:-$ROOT/target/release/espgw}
WORK=$(mktemp -d /tmp/espgw-e2e-nonce.XXXXXX)
cleanup() { [ -n "${KEEP:-}" ] || rm -rf "$WORK"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$WORK"/*/run.log; do [ -f "$f" ] && { echo "--- $f"; tail -20 "$f"; }; done; exit 1; }

[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root"; exit 0; }
[ -x "$ESPGW" ] || fail "no binary at $ESPGW (cargo build --release -p espgw)"

python3 tests/e2e/nonce_traffic.py gen "$WORK"

config() { # config DIR STATE_DIR
    cat >"$1/gw.toml" <<TOML
default_action = "discard"
[gateway]
name = "gw-nonce"
state_dir = "$2"
[dataplane]
workers = 1
mtu = 1500
poll = "adaptive"
eal = ["--no-huge", "--no-shconf", "--no-pci", "-m", "256", "--log-level=lib.eal:warning"]
[[port]]
name = "prot"
side = "protected"
device = "net_pcap0,rx_pcap=$WORK/prot_in.pcap,tx_pcap=$1/prot_out.pcap"
address = "10.1.0.1/24"
mac = "02:00:00:00:01:01"
[[port]]
name = "unprot"
side = "unprotected"
device = "net_pcap1,rx_pcap=$WORK/unprot_in.pcap,tx_pcap=$1/unprot_out.pcap"
address = "192.0.2.1/24"
mac = "02:00:00:00:01:02"
[[neighbor]]
address = "10.1.0.10"
mac = "02:00:00:00:0a:0a"
port = "prot"
[[neighbor]]
address = "192.0.2.2"
mac = "02:00:00:00:0b:02"
port = "unprot"
[[tunnel]]
name = "to-gw-b"
local = "192.0.2.1"
remote = "192.0.2.2"
local_ts = ["10.1.0.0/24"]
remote_ts = ["10.2.0.0/24"]
esp = "aes128gcm16"
replay_window = 1024
out = { spi = 0x0000a001, key = "0xbef3215147135cd554e9156cae70f5a899331a52" }
in = { spi = 0x0000b001, key = "0x9b890a06962125b8925af8d8f76eac664799f983" }
TOML
    chmod 600 "$1/gw.toml"
}

STATE="$WORK/state"
for run in run1 run2; do
    mkdir -p "$WORK/$run"
    config "$WORK/$run" "$STATE"
    "$ESPGW" run --config "$WORK/$run/gw.toml" --duration 2 --stats-json "$WORK/$run/stats.json" \
        >"$WORK/$run/run.log" 2>&1 || fail "$run: espgw run exited with $?"
done
[ "$(stat -c %a "$STATE")" = 700 ] || fail "state directory mode $(stat -c %a "$STATE"), want 700"
if grep -rq "bef3215147135cd5\|9b890a06962125b8" "$STATE"; then fail "a key is in the state directory"; fi
python3 tests/e2e/nonce_traffic.py check "$WORK/run1" "$WORK/run2" || fail "sequence numbers"
python3 tests/e2e/nonce_traffic.py drops "$WORK/run1/stats.json" replayed 0 || fail "run 1 inbound"
python3 tests/e2e/nonce_traffic.py drops "$WORK/run2/stats.json" replayed 10 || fail "replays after the restart"

# A state directory that cannot exist (its parent is a regular file): the
# AEAD tunnel is refused, loudly, whoever runs it (root included).
mkdir -p "$WORK/bad"
touch "$WORK/blocker"
config "$WORK/bad" "$WORK/blocker/gw-nonce"
if "$ESPGW" run --config "$WORK/bad/gw.toml" --duration 1 >"$WORK/bad/run.log" 2>&1; then
    fail "espgw run started an AEAD tunnel without a usable state directory"
fi
for want in 'to-gw-b' "$WORK/blocker/gw-nonce" 'state_dir' 'nonce'; do
    grep -qF -- "$want" "$WORK/bad/run.log" || fail "refusal does not mention '$want': $(cat "$WORK/bad/run.log")"
done
[ ! -s "$WORK/bad/unprot_out.pcap" ] || python3 - "$WORK/bad/unprot_out.pcap" <<'PY' || fail "ESP sent although refused"
import sys
from scapy.all import rdpcap
from scapy.layers.ipsec import ESP
sys.exit(1 if any(ESP in f for f in rdpcap(sys.argv[1])) else 0)
PY
"$ESPGW" check --config "$WORK/run1/gw.toml" >"$WORK/check.log" 2>&1 || fail "espgw check: $(cat "$WORK/check.log")"
grep -q "state_dir" "$WORK/check.log" || fail "espgw check does not explain the state directory: $(cat "$WORK/check.log")"
echo "PASS: two runs, disjoint sequence numbers; 10/10 pre-restart packets replayed; unusable state dir refused"
