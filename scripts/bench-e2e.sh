#!/usr/bin/env bash
# End-to-end benchmark, the method of published VPN benchmarks: two hosts,
# first over a direct veth link, then through espgw A -> ESP -> espgw B, in
# the same run, with real processes (iperf3, ping). Prints the ratio table
# (tunnel / direct) and writes JSON.
#
#   sudo scripts/bench-e2e.sh [--mtu 1500|9000] [--seconds S] [--json FILE]
#
# What limits these numbers on a VM with veth: every packet crosses the
# kernel's af_packet path twice per gateway (a syscall-backed copy), and all
# hosts, gateways and iperf3 share the same cores; see docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

MTU=1500 SECS=5 JSON=""
while [ $# -gt 0 ]; do
    case "$1" in
        --mtu) MTU=$2; shift 2 ;;
        --seconds) SECS=$2; shift 2 ;;
        --json) JSON=$2; shift 2 ;;
        *) echo "usage: $0 [--mtu N] [--seconds S] [--json FILE]" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" -eq 0 ] || { echo "needs root: sudo $0" >&2; exit 1; }
# Above 1500, DPDK 22.11's net_af_packet advertises a 1518-byte max frame,
# but its ring carries what framesz says: scripts/gateways.sh sizes the
# ring for MTU and espgw enforces the MTU itself (docs/benchmarks.md).
case "$MTU" in
    ''|*[!0-9]*) echo "--mtu wants a number (1500 or 9000)" >&2; exit 2 ;;
esac

WORK=$(mktemp -d /tmp/espgw-bench-e2e.XXXXXX)
P=${ESPGW_NS_PREFIX:-ebe}
ESPGW=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/espgw
export MTU
. scripts/gateways.sh
cleanup() { set +e; gateways_down; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

scripts/setup.sh >/dev/null
cargo build --release --locked -p espgw 2>&1 | tail -n 1
gateways_up

RESULTS=$WORK/results.jsonl
: >"$RESULTS"
record() { echo "$1" >>"$RESULTS"; }

# iperf3 client run against a one-shot server on host B; prints its JSON.
iperf() {
    local dst=$1; shift
    in_b iperf3 -s -1 -D -B "$dst" >/dev/null 2>&1
    sleep 0.3
    in_a iperf3 -c "$dst" -t "$SECS" -J "$@" 2>/dev/null || echo '{}'
}

measure_iperf() { # name, iperf args...
    local name=$1; shift
    for path in direct tunnel; do
        local dst=10.9.0.2
        [ $path = tunnel ] && dst=10.2.0.10
        iperf "$dst" "$@" | python3 -c '
import json, sys
name, path = sys.argv[1], sys.argv[2]
try:
    e = json.load(sys.stdin)["end"]
except Exception:
    print(json.dumps({"test": name, "path": path, "error": "iperf3 failed"})); sys.exit()
s = e.get("sum_received") or e.get("sum") or {}
out = {"test": name, "path": path, "mbps": s.get("bits_per_second", 0) / 1e6}
if "lost_percent" in s:
    pk = s.get("packets", 0) - s.get("lost_packets", 0)
    out["kpps"] = pk / max(s.get("seconds", 1), 1e-9) / 1e3
    out["lost_percent"] = s["lost_percent"]
print(json.dumps(out))' "$name" "$path" >>"$RESULTS"
        printf '.'
    done
}

measure_ping() { # payload size
    local size=$1
    for path in direct tunnel; do
        local dst=10.9.0.2
        [ $path = tunnel ] && dst=10.2.0.10
        in_a ping -q -c 50 -i 0.02 -s "$size" "$dst" 2>/dev/null | python3 -c '
import json, re, sys
size, path = int(sys.argv[1]), sys.argv[2]
text = sys.stdin.read()
m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", text)
loss = re.search(r"([\d.]+)% packet loss", text)
out = {"test": "ping %d B" % size, "path": path}
if m:
    out.update(rtt_ms=float(m.group(2)), rtt_mdev_ms=float(m.group(4)))
if loss:
    out["lost_percent"] = float(loss.group(1))
print(json.dumps(out))' "$size" "$path" >>"$RESULTS"
        printf '.'
    done
}

printf 'measuring (MTU %s, %ss per iperf3 run) ' "$MTU" "$SECS"
measure_iperf "TCP 1 stream"
measure_iperf "TCP 4 streams" -P 4
# 1470-byte datagrams do not fit the tunnel (inner MTU 1446 for aes128gcm16):
# let host A learn the path MTU first, as an application's first datagram
# would, so iperf3's connected socket does not abort on the ICMP error.
in_a ping -c 2 -W 1 -s 1472 -M do 10.2.0.10 >/dev/null 2>&1 || true
measure_iperf "UDP 1470 B" -u -b 2G -l 1470
measure_iperf "UDP 64 B" -u -b 200M -l 64
for s in 50 500 1400; do measure_ping "$s"; done
echo

python3 - "$RESULTS" "$MTU" "$SECS" "${JSON:-}" <<'PY'
import json, os, platform, subprocess, sys
path, mtu, secs, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rows = [json.loads(l) for l in open(path) if l.strip()]
tests = []
for r in rows:
    if r["test"] not in tests:
        tests.append(r["test"])
get = lambda t, p: next((r for r in rows if r["test"] == t and r["path"] == p), {})
print("\nMTU %d: through espgw (aes128gcm16) vs. direct veth, same run" % mtu)
print("%-16s %14s %14s %8s" % ("test", "direct", "tunnel", "ratio"))
summary = []
for t in tests:
    d, u = get(t, "direct"), get(t, "tunnel")
    if "rtt_ms" in d and "rtt_ms" in u:
        fmt = lambda r: "%.3f±%.3f ms" % (r["rtt_ms"], r["rtt_mdev_ms"])
        added = u["rtt_ms"] - d["rtt_ms"]
        print("%-16s %14s %14s %+7.3f ms added" % (t, fmt(d), fmt(u), added))
        summary.append({"test": t, "direct": d, "tunnel": u, "added_rtt_ms": added})
    elif "mbps" in d and "mbps" in u:
        ratio = u["mbps"] / d["mbps"] if d["mbps"] else 0
        unit = lambda r: ("%.0f kpps" % r["kpps"]) if t.endswith("64 B") and "kpps" in r else "%.0f Mbit/s" % r["mbps"]
        print("%-16s %14s %14s %8.2f" % (t, unit(d), unit(u), ratio))
        summary.append({"test": t, "direct": d, "tunnel": u, "ratio": ratio})
    else:
        print("%-16s %14s" % (t, "failed"))
        summary.append({"test": t, "direct": d, "tunnel": u, "error": "failed"})
if out:
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except Exception:
        commit = "?"
    json.dump({"machine": {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release()},
               "commit": commit, "mtu": mtu, "seconds_per_run": secs,
               "command": "scripts/bench-e2e.sh --mtu %d --seconds %g" % (mtu, secs),
               "results": summary}, open(out, "w"), indent=1)
    print("wrote", out)
PY
