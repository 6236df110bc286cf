#!/usr/bin/env bash
# espgw against DPDK's ipsec-secgw example, measured the same way on both
# sides: the same capture of protected-side frames (64 UDP flows, SIZE-byte
# inner IPv4 packets, as bench/run-vs-bench.sh replays) looped by a
# net_pcap port (infinite_rx=1) into one core, which encrypts them with
# aes128gcm16 (AES-128-GCM, 16-byte ICV, IPv4 tunnel) out of a net_null
# port (no-rx=1). Same EAL memory for both (hugepages when 128 are free,
# else 4 KiB pages), one lcore each, the two run one after the other,
# alternating, ROUNDS times.
#
#   espgw:  `espgw run` with one busy-polling worker; rate = the null
#           port's DPDK ethdev TX counter (--stats-json) / the run's time.
#   secgw:  ipsec-secgw built from /usr/share/dpdk/examples (dpdk-doc)
#           against the system's libdpdk, poll mode, default (legacy) path,
#           lookaside crypto through crypto_aesni_mb (intel-ipsec-mb);
#           rate = its "Total packets sent" (packets rte_eth_tx_burst took)
#           between its per-second statistics prints, the first print left
#           out as warm-up. One change to the example: its default port
#           configuration asks for RX checksum offload, which net_pcap does
#           not offer (the example exits); the patch drops that request
#           (nothing on its path reads the RX checksum flags).
#
# Both rates are also divided by the CPU time the busiest thread of the
# process (the polling core) got, because the machine is shared.
# Not the same work on both sides: espgw validates every inner IPv4 header
# (checksum included), decrements the TTL (dropping at zero) and checks the
# path MTU; secgw's legacy path does an ACL SPD lookup and an LPM route
# lookup, decrements the inner TTL without a check (ipip.h) and validates
# nothing.
#
# DIRECTION decrypt (5th argument, or the DIRECTION variable): the other
# way through the same tunnel. The capture holds ESP frames instead
# (SPI 0x2001, the tunnel's inbound key, 192.0.2.2 -> 192.0.2.1, sequence
# numbers 1..64), each the IPv4 tunnel-mode encapsulation of one of 64 UDP
# flows of SIZE-byte inner packets 10.2.0.10 -> 10.1.0.10, made by scapy's
# IPsec layer and checked here before use by an ESP decapsulation written
# out below (only the AES-GCM primitive from python3-cryptography): every
# frame must decrypt to its inner packet. It loops into the unprotected
# port, and the decrypted packets leave by the protected (null) port.
# Since the loop repeats sequence numbers, anti-replay is off on both:
# espgw's tunnel gets replay_window = 0 (no window check or update; the
# encrypt configuration is unchanged), and secgw's legacy path
# has no anti-replay at all (its -w only configures librte_ipsec, -l, not
# used here). secgw: -u 0x1 marks port 0 (the pcap) unprotected, and the
# routes send 10.1.0.0/24 to port 1.
# Every round records both sides' RX and TX counts (a gateway that drops
# instead of decrypting shows TX < RX), espgw's non-zero drop counters and
# secgw's "dropped" total.
#
# CHECK=1: no benchmark; each gateway gets one pass of the capture (no
# loop) and writes its output to a pcap (net_pcap tx_pcap instead of
# net_null), and every output frame is checked: decrypt, the inner packet
# with the TTL one lower and a valid header checksum; encrypt, an ESP frame
# that the decapsulation below opens with the tunnel's outbound key to the
# same.
#
#   sudo bench/secgw-vs-run.sh [SIZE] [SECONDS] [ROUNDS] [JSON] [DIRECTION]
#   sudo ESPGW=target/release/espgw bench/secgw-vs-run.sh 64 5 3 out.json
#   sudo ESPGW=target/release/espgw bench/secgw-vs-run.sh 1420 5 5 out.json decrypt
#   sudo CHECK=1 ESPGW=target/release/espgw bench/secgw-vs-run.sh 64 5 1 "" decrypt
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-64} SECS=${2:-5} ROUNDS=${3:-3} JSON=${4:-} DIRECTION=${5:-${DIRECTION:-encrypt}}
CHECK=${CHECK:-0}
case "$DIRECTION" in encrypt | decrypt) ;; *) echo "DIRECTION is encrypt or decrypt, not $DIRECTION" >&2; exit 1 ;; esac
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
EXAMPLE=/usr/share/dpdk/examples/ipsec-secgw
[ -d "$EXAMPLE" ] || { echo "no $EXAMPLE: apt-get install dpdk-doc" >&2; exit 1; }
WORK=$(mktemp -d /tmp/espgw-svr.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
if [ -z "${ESPGW:-}" ]; then
    cargo build --release --locked -q -p espgw
    ESPGW="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/espgw"
fi

# ipsec-secgw, built once into target/ipsec-secgw.
SECGW_DIR=target/ipsec-secgw
if [ ! -x "$SECGW_DIR/build/ipsec-secgw" ]; then
    rm -rf "$SECGW_DIR" && mkdir -p target && cp -r "$EXAMPLE" "$SECGW_DIR"
    cp -r /usr/share/dpdk/examples/common target/ 2>/dev/null || true
    sed -i 's|^\t\t.offloads = RTE_ETH_RX_OFFLOAD_CHECKSUM,$|\t\t.offloads = 0, /* virtual ports: no RX checksum offload */|' \
        "$SECGW_DIR/ipsec-secgw.c"
    grep -q 'virtual ports: no RX checksum offload' "$SECGW_DIR/ipsec-secgw.c" || { echo "patch did not apply" >&2; exit 1; }
    make -C "$SECGW_DIR" -s >"$WORK/secgw-build.log" 2>&1 || { cat "$WORK/secgw-build.log"; exit 1; }
fi
SECGW=$SECGW_DIR/build/ipsec-secgw

PROT_MAC=02:00:00:00:01:01 UNPROT_MAC=02:00:00:00:01:02
# The ESP decapsulation (RFC 4303 tunnel mode, RFC 4106 AES-GCM nonce and
# AAD) that checks the decrypt capture and CHECK=1's encrypt output,
# written out here rather than scapy's, so that it checks scapy's ESP
# (and the gateways') against a second implementation.
cat >"$WORK/espcheck.py" <<'PY'
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

def open_esp(frame, key, spi, src, dst):
    """The inner packet of one Ethernet/IPv4/ESP frame; raises on any fault."""
    assert frame[12:14] == b"\x08\x00", "not IPv4"
    ip = frame[14:]
    ihl = (ip[0] & 15) * 4
    assert ip[0] >> 4 == 4 and ip[9] == 50, "not ESP"
    assert ip[12:16] == bytes(map(int, src.split("."))), "outer source"
    assert ip[16:20] == bytes(map(int, dst.split("."))), "outer destination"
    assert int.from_bytes(ip[2:4], "big") == len(ip), "outer length"
    esp = ip[ihl:]
    assert int.from_bytes(esp[0:4], "big") == spi, "SPI"
    iv, ct = esp[8:16], esp[16:]
    assert (len(ct) - 16) % 4 == 0, "ESP payload not 4-byte aligned"
    pt = AESGCM(key[:16]).decrypt(key[16:] + iv, ct, esp[0:8])
    pad, nh = pt[-2], pt[-1]
    assert nh == 4, "next header %d, not IPv4" % nh
    assert pt[-2 - pad:-2] == bytes(range(1, pad + 1)), "padding"
    return int.from_bytes(esp[4:8], "big"), pt[:-2 - pad]
PY
if [ "$DIRECTION" = encrypt ]; then
python3 - "$WORK/in.pcap" "$SIZE" "$PROT_MAC" <<'PY'
import sys
from scapy.all import Ether, IP, UDP, Raw, wrpcap
path, size, mac = sys.argv[1], int(sys.argv[2]), sys.argv[3]
frames = [Ether(src="02:00:00:00:00:0a", dst=mac) / IP(src="10.1.0.10", dst="10.2.0.10", flags="DF")
          / UDP(sport=10000 + i, dport=5201) / Raw(b"x" * (size - 28)) for i in range(64)]
wrpcap(path, frames)
PY
else
python3 - "$WORK/in.pcap" "$SIZE" "$UNPROT_MAC" "$WORK" <<'PY'
import sys
sys.path.insert(0, sys.argv[4])
from scapy.all import Ether, IP, UDP, Raw, wrpcap, rdpcap
from scapy.layers.ipsec import SecurityAssociation, ESP
from espcheck import open_esp
path, size, mac = sys.argv[1], int(sys.argv[2]), sys.argv[3]
key = bytes(range(0x20, 0x34))  # the tunnel's inbound key: 16 bytes AES, 4 bytes salt
inner = [IP(src="10.2.0.10", dst="10.1.0.10", flags="DF") / UDP(sport=10000 + i, dport=5201)
         / Raw(b"x" * (size - 28)) for i in range(64)]
sa = SecurityAssociation(ESP, spi=0x2001, seq_num=1, crypt_algo="AES-GCM", crypt_key=key,
                         tunnel_header=IP(src="192.0.2.2", dst="192.0.2.1"))
wrpcap(path, [Ether(src="02:00:00:00:02:02", dst=mac) / sa.encrypt(p) for p in inner])
for i, (f, p) in enumerate(zip(rdpcap(path), inner)):
    seq, pt = open_esp(bytes(f), key, 0x2001, "192.0.2.2", "192.0.2.1")
    assert seq == i + 1 and pt == bytes(p), "frame %d does not decrypt to its inner packet" % i
print("decrypt capture: %d ESP frames of %d bytes, each decrypts to its inner packet" % (len(inner), len(f)))
PY
fi

if [ "$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages 2>/dev/null || echo 0)" -ge 128 ]; then
    EAL_TOML='"--in-memory", "--no-pci"' EAL_CLI="--in-memory --no-pci" MEMORY=hugepages
else
    EAL_TOML='"--no-huge", "--no-shconf", "-m", "512", "--no-pci"' EAL_CLI="--no-huge --no-shconf -m 512 --no-pci"
    MEMORY="4 KiB pages"
fi

# Same tunnel on both: SPI 0x1001 out (0x2001 in), the same keys (the
# last 4 bytes are the GCM salt on both sides), 192.0.2.1 -> 192.0.2.2.
# CHECK=1: the capture once (no loop), the output into a pcap.
LOOP=",infinite_rx=1" ESPGW_SINK="net_null0,no-rx=1" SECGW_SINK="net_null0,no-rx=1"
if [ "$CHECK" = 1 ]; then
    LOOP="" ESPGW_SINK="net_pcap1,tx_pcap=$WORK/out-espgw.pcap" SECGW_SINK="net_pcap1,tx_pcap=$WORK/out-secgw.pcap"
fi
if [ "$DIRECTION" = encrypt ]; then
cat >"$WORK/gw.toml" <<T
[gateway]
name = "svr"
control_socket = "$WORK/ctl.sock"
# Per run (as bench/run-vs-bench.sh): a shared /var/lib/espgw/svr kept
# the outbound sequence across runs, and the fixed benchmark SA would
# reach 2^32 and expire after a few hundred runs. The keys are the
# benchmark's own, on synthetic traffic that never leaves the machine.
state_dir = "$WORK/state"
[dataplane]
workers = 1
poll = "busy"
mtu = 1500
eal = [$EAL_TOML]
[[port]]
name = "prot"
side = "protected"
device = "net_pcap0,rx_pcap=$WORK/in.pcap$LOOP"
address = "10.1.0.1/24"
mac = "$PROT_MAC"
[[port]]
name = "unprot"
side = "unprotected"
device = "$ESPGW_SINK"
address = "192.0.2.1/24"
[[neighbor]]
address = "192.0.2.2"
mac = "02:00:00:00:02:02"
port = "unprot"
[[tunnel]]
name = "t"
local = "192.0.2.1"
remote = "192.0.2.2"
local_ts = ["10.1.0.0/24"]
remote_ts = ["10.2.0.0/24"]
esp = "aes128gcm16"
out = { spi = 0x1001, key = "000102030405060708090a0b0c0d0e0f10111213" }
in = { spi = 0x2001, key = "202122232425262728292a2b2c2d2e2f30313233" }
T
chmod 600 "$WORK/gw.toml"
cat >"$WORK/secgw.cfg" <<'C'
sp ipv4 out esp protect 4097 pri 1 dst 10.2.0.0/24 sport 0:65535 dport 0:65535
sp ipv4 in esp protect 8193 pri 1 dst 10.1.0.0/24 sport 0:65535 dport 0:65535
sa out 4097 aead_algo aes-128-gcm aead_key 00:01:02:03:04:05:06:07:08:09:0a:0b:0c:0d:0e:0f:10:11:12:13 mode ipv4-tunnel src 192.0.2.1 dst 192.0.2.2
sa in 8193 aead_algo aes-128-gcm aead_key 20:21:22:23:24:25:26:27:28:29:2a:2b:2c:2d:2e:2f:30:31:32:33 mode ipv4-tunnel src 192.0.2.2 dst 192.0.2.1
rt ipv4 dst 192.0.2.2/32 port 1
rt ipv4 dst 10.1.0.0/24 port 0
C
UNPROT_MASK=0x2
else
# Decrypt: the capture (ESP) into the unprotected port, the decrypted
# packets out of the protected one to the host 10.1.0.10 behind it.
cat >"$WORK/gw.toml" <<T
[gateway]
name = "svr"
control_socket = "$WORK/ctl.sock"
# Per run (as bench/run-vs-bench.sh): a shared /var/lib/espgw/svr kept
# the outbound sequence across runs, and the fixed benchmark SA would
# reach 2^32 and expire after a few hundred runs. The keys are the
# benchmark's own, on synthetic traffic that never leaves the machine.
state_dir = "$WORK/state"
[dataplane]
workers = 1
poll = "busy"
mtu = 1500
eal = [$EAL_TOML]
[[port]]
name = "prot"
side = "protected"
device = "$ESPGW_SINK"
address = "10.1.0.1/24"
mac = "$PROT_MAC"
[[port]]
name = "unprot"
side = "unprotected"
device = "net_pcap0,rx_pcap=$WORK/in.pcap$LOOP"
address = "192.0.2.1/24"
mac = "$UNPROT_MAC"
[[neighbor]]
address = "192.0.2.2"
mac = "02:00:00:00:02:02"
port = "unprot"
[[neighbor]]
address = "10.1.0.10"
mac = "02:00:00:00:00:0a"
port = "prot"
[[tunnel]]
name = "t"
local = "192.0.2.1"
remote = "192.0.2.2"
local_ts = ["10.1.0.0/24"]
remote_ts = ["10.2.0.0/24"]
esp = "aes128gcm16"
replay_window = 0
out = { spi = 0x1001, key = "000102030405060708090a0b0c0d0e0f10111213" }
in = { spi = 0x2001, key = "202122232425262728292a2b2c2d2e2f30313233" }
T
chmod 600 "$WORK/gw.toml"
# Port 0 is the pcap (unprotected: -u 0x1), port 1 the null port.
cat >"$WORK/secgw.cfg" <<'C'
sp ipv4 out esp protect 4097 pri 1 dst 10.2.0.0/24 sport 0:65535 dport 0:65535
sp ipv4 in esp protect 8193 pri 1 dst 10.1.0.0/24 sport 0:65535 dport 0:65535
sa out 4097 aead_algo aes-128-gcm aead_key 00:01:02:03:04:05:06:07:08:09:0a:0b:0c:0d:0e:0f:10:11:12:13 mode ipv4-tunnel src 192.0.2.1 dst 192.0.2.2
sa in 8193 aead_algo aes-128-gcm aead_key 20:21:22:23:24:25:26:27:28:29:2a:2b:2c:2d:2e:2f:30:31:32:33 mode ipv4-tunnel src 192.0.2.2 dst 192.0.2.1
rt ipv4 dst 192.0.2.2/32 port 0
rt ipv4 dst 10.1.0.0/24 port 1
C
UNPROT_MASK=0x1
fi
SECGW_CMD="$SECGW -l 0 -n 1 $EAL_CLI --vdev net_pcap0,rx_pcap=$WORK/in.pcap$LOOP --vdev $SECGW_SINK --vdev crypto_aesni_mb0 -- -p 0x3 -P -u $UNPROT_MASK --config (0,0,0),(1,0,0) -f $WORK/secgw.cfg -t 1"
ESPGW_CMD="$ESPGW run --config $WORK/gw.toml --duration $SECS --stats-json $WORK/stats.json --log warn"

python3 - "$SIZE" "$SECS" "$ROUNDS" "$JSON" "$MEMORY" "$ESPGW_CMD" "$SECGW_CMD" "$WORK" "$*" "$DIRECTION" "$CHECK" <<'PY'
import json, os, re, subprocess, sys, time
size, secs, rounds, out_json, memory, espgw_cmd, secgw_cmd, work, args, direction, check = sys.argv[1:]
size, secs, rounds = int(size), float(secs), int(rounds)
hz = os.sysconf("SC_CLK_TCK")
# espgw's port names: the capture's and the null port's.
rx_port, tx_port = ("prot", "unprot") if direction == "encrypt" else ("unprot", "prot")

def busiest_ticks(pid):
    best = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            f = open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        best = max(best, int(f[11]) + int(f[12]))
    return best

def run_espgw():
    p = subprocess.Popen(espgw_cmd.split(), stdout=subprocess.DEVNULL, stderr=open(f"{work}/run.log", "w"))
    ticks = 0
    while p.poll() is None:
        try:
            ticks = max(ticks, busiest_ticks(p.pid))
        except OSError:
            pass
        time.sleep(0.05)
    if p.returncode != 0:
        sys.exit("espgw run failed:\n" + open(f"{work}/run.log").read())
    st = json.load(open(f"{work}/stats.json"))
    ports = {q["name"]: q for q in st["ports"]}
    tx = ports[tx_port]["nic"]["tx_packets"]
    rx = ports[rx_port]["nic"]["rx_packets"]
    drops = {k: v for k, v in st["drops"].items() if v}
    return {"packets": tx, "seconds": st["seconds"], "cpu_seconds": ticks / hz,
            "mpps": tx / st["seconds"] / 1e6, "mpps_per_cpu_s": tx / (ticks / hz) / 1e6, "drops": drops,
            "rx_packets": rx}

def run_secgw():
    p = subprocess.Popen(["stdbuf", "-oL"] + secgw_cmd.split(), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    samples, log, start, rx = [], [], time.monotonic(), 0
    for line in p.stdout:
        log.append(line)
        m = re.match(r"Total packets (received|sent|dropped):\s+(\d+)", line)
        if m and m.group(1) == "received":
            rx = int(m.group(2))
        elif m and m.group(1) == "sent":
            samples.append([time.monotonic(), int(m.group(2)), busiest_ticks(p.pid), 0, rx])
        elif m and samples:
            samples[-1][3] = int(m.group(2))
        if time.monotonic() - start > secs + 2.5 and len(samples) >= 3:
            break
    p.terminate()
    p.wait()
    if len(samples) < 3:
        sys.exit("ipsec-secgw gave no statistics:\n" + "".join(log[-40:]))
    (t0, n0, c0, _, _), (t1, n1, c1, d1, r1) = samples[1], samples[-1]
    return {"packets": n1 - n0, "seconds": t1 - t0, "cpu_seconds": (c1 - c0) / hz,
            "mpps": (n1 - n0) / (t1 - t0) / 1e6,
            "mpps_per_cpu_s": (n1 - n0) / ((c1 - c0) / hz) / 1e6 if c1 > c0 else None,
            "dropped_total": d1, "rx_total": r1, "tx_total": n1}

def check_outputs():
    """CHECK=1: one pass of the capture through each, every output frame checked."""
    sys.path.insert(0, work)
    from espcheck import open_esp
    from scapy.all import rdpcap

    def lower_ttl(ip):
        # The inner packet as both gateways forward it: TTL one lower, header
        # checksum recomputed from scratch (not incrementally).
        h = bytearray(ip[:20])
        h[8] -= 1
        h[10:12] = b"\0\0"
        s = sum(int.from_bytes(h[i:i + 2], "big") for i in range(0, 20, 2))
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        h[10:12] = (~s & 0xFFFF).to_bytes(2, "big")
        return bytes(h) + ip[20:]

    frames = [bytes(f) for f in rdpcap(f"{work}/in.pcap")]
    if direction == "encrypt":
        inner = [f[14:] for f in frames]
    else:
        inner = [open_esp(f, bytes(range(0x20, 0x34)), 0x2001, "192.0.2.2", "192.0.2.1")[1] for f in frames]
    want = sorted(lower_ttl(p) for p in inner)
    ok = True
    for name in ("espgw", "secgw"):
        if name == "espgw":
            subprocess.run(espgw_cmd.split(), check=True, stdout=subprocess.DEVNULL,
                           stderr=open(f"{work}/run.log", "w"))
            print("espgw:", open(f"{work}/run.log").read().strip().splitlines()[-1])
        else:
            p = subprocess.Popen(["stdbuf", "-oL"] + secgw_cmd.split(), stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
            totals, prints = [], 0
            for line in p.stdout:
                m = re.match(r"Total packets (received|sent|dropped):\s+(\d+)", line)
                if m:
                    totals.append(line.strip())
                    prints += m.group(1) == "dropped"
                if prints >= 3:
                    break
            p.terminate()
            p.wait()
            print("secgw:", ", ".join(totals[-3:]))
        out = [bytes(f) for f in rdpcap(f"{work}/out-{name}.pcap")]
        got = []
        for f in out:
            if direction == "encrypt":
                got.append(open_esp(f, bytes(range(0x14)), 0x1001, "192.0.2.1", "192.0.2.2")[1])
            else:
                assert f[12:14] == b"\x08\x00", "not IPv4"
                got.append(f[14:14 + int.from_bytes(f[16:18], "big")])
        good = sorted(got) == want
        ok &= good
        print("%s: %d frames in, %d out, %s; first out frame %s" % (
            name, len(frames), len(out),
            "each the inner packet of one input frame, TTL one lower" if good else "NOT the expected packets",
            out[0][:64].hex() if out else "-"))
    sys.exit(0 if ok else 1)

if check == "1":
    check_outputs()

def flags():
    want = {"aes", "vaes", "pclmulqdq", "vpclmulqdq", "avx2", "sha_ni"}
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            f = set(line.split(":")[1].split())
            return sorted(x for x in f if x in want or x.startswith("avx512"))
    return []

def model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()

def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""

rows = []
for r in range(rounds):
    e = run_espgw()
    s = run_secgw()
    load = open("/proc/loadavg").read().split()[:3]
    row = {"round": r + 1, "espgw": e, "secgw": s, "loadavg": load,
           "ratio_wall": e["mpps"] / s["mpps"],
           "ratio_per_cpu_s": e["mpps_per_cpu_s"] / s["mpps_per_cpu_s"] if s["mpps_per_cpu_s"] else None}
    rows.append(row)
    print("round %d, load %s: espgw %.2f Mpps (%.2f per CPU s, %.2f s CPU in %.2f s)   "
          "secgw %.2f Mpps (%.2f per CPU s, %.2f s CPU in %.2f s)   espgw/secgw %.2f wall, %.2f per CPU s" % (
              r + 1, " ".join(load), e["mpps"], e["mpps_per_cpu_s"], e["cpu_seconds"], e["seconds"],
              s["mpps"], s["mpps_per_cpu_s"] or 0, s["cpu_seconds"], s["seconds"],
              row["ratio_wall"], row["ratio_per_cpu_s"] or 0), flush=True)
    print("         espgw rx %d tx %d drops %s   secgw rx %d tx %d dropped %d (totals since start)" % (
        e["rx_packets"], e["packets"], e["drops"] or "none", s["rx_total"], s["tx_total"], s["dropped_total"]),
        flush=True)

doc = {
    "tool": "bench/secgw-vs-run.sh",
    "command": "bench/secgw-vs-run.sh " + args,
    "size_inner_bytes": size, "seconds": secs, "suite": "aes128gcm16", "direction": direction,
    "flows": 64, "memory": memory,
    "espgw_command": espgw_cmd.replace(work, "$WORK"),
    "secgw_command": secgw_cmd.replace(work, "$WORK"),
    "secgw_patch": "ipsec-secgw.c port_conf.rxmode.offloads: RTE_ETH_RX_OFFLOAD_CHECKSUM -> 0",
    "anti_replay": "not applicable (outbound)" if direction == "encrypt" else
        "off on both: espgw tunnel replay_window = 0; secgw legacy path has none",
    "machine": {"cpu_model": model(), "cpu_flags": flags(), "logical_cpus": os.cpu_count(),
                "kernel": os.uname().release,
                "dpdk": sh("pkg-config --modversion libdpdk"),
                "intel_ipsec_mb": sh("dpkg-query -W -f='${Version}' libipsec-mb1")},
    "commit": sh("git rev-parse HEAD"), "git_dirty": bool(sh("git status --porcelain --untracked-files=no")),
    "rounds": rows,
}
ratios = sorted(r["ratio_wall"] for r in rows)
pcpu = sorted(r["ratio_per_cpu_s"] for r in rows if r["ratio_per_cpu_s"])
doc["summary"] = {"ratio_wall_min": ratios[0], "ratio_wall_max": ratios[-1],
                  "ratio_per_cpu_s_min": pcpu[0] if pcpu else None,
                  "ratio_per_cpu_s_max": pcpu[-1] if pcpu else None}
print("espgw / secgw over %d rounds: %.2f-%.2f wall clock, %.2f-%.2f per CPU second" % (
    rounds, ratios[0], ratios[-1], pcpu[0] if pcpu else 0, pcpu[-1] if pcpu else 0))
if out_json:
    json.dump(doc, open(out_json, "w"), indent=1)
    print("wrote", out_json)
PY
