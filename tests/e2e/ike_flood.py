#!/usr/bin/env python3
"""An IKE_SA_INIT flood with malformed IKE mixed in, and a sampler of
espgw's forwarding rate, for tests/e2e/ike_strongswan.sh (step 2d).

  ike_flood.py SRC DST SECONDS RATE OUT_JSON
  ike_flood.py sample ESPGW SOCKET TUNNEL OUT STOPFILE

From SRC (an address espgw has a [[connection]] for, so that the engine
treats the requests as possible peers: half-open SAs first, then cookies)
to DST:500, RATE datagrams a second for SECONDS, each from a fresh random
SPI with a fresh random nonce and X25519 public value (any 32 bytes are a
valid X25519 input), proposing what espgw accepts
(aes128gcm16-prfsha256-x25519): the expensive kind, as far as a flood
without a valid cookie can make it. One datagram in 8 is malformed
instead, cycling through: a truncated header, a length field larger than
the datagram, a payload chain that runs past the end, an unknown critical
payload, random bytes, and on UDP 4500 the non-ESP marker followed by
garbage. Answers are read from the same socket (and a second one for
4500) and sorted: an IKE_SA_INIT response with an SA payload (a half-open
SA was made), one with only N(COOKIE), anything else.

Writes OUT_JSON: {"start", "end" (wall clock, seconds), "sent",
"malformed", "seconds", "rate", "answers": {"sa", "cookie", "other"}} and
prints it.

sample: every 0.25 s, `ESPGW ctl --socket SOCKET stats --json`, appending
"WALL_CLOCK PACKETS STARTED" to OUT, PACKETS the inbound packets of TUNNEL
over all its SAs, STARTED 1 once they grew by 50 since the first sample
(the stream runs); until STOPFILE exists.
"""
import json
import os
import socket
import struct
import subprocess
import sys
import time


def payload(next_type, body, critical=False):
    return struct.pack(">BBH", next_type, 0x80 if critical else 0, 4 + len(body)) + body


def transform(last, ttype, tid, attrs=b""):
    return struct.pack(">BBHBBH", 0 if last else 3, 0, 8 + len(attrs), ttype, 0, tid) + attrs


TRANSFORMS = (transform(False, 1, 20, struct.pack(">HH", 0x800E, 128))  # ENCR_AES_GCM_16, 128 bits
              + transform(False, 2, 5)                                  # PRF_HMAC_SHA2_256
              + transform(True, 4, 31))                                 # CURVE_25519
SA = payload(34, struct.pack(">BBHBBBB", 0, 0, 8 + len(TRANSFORMS), 1, 1, 0, 3) + TRANSFORMS)


def header(spi_i, first, length):
    return spi_i + bytes(8) + struct.pack(">BBBBII", first, 0x20, 34, 0x08, 0, length)


def ike_sa_init():
    body = SA + payload(40, struct.pack(">HH", 31, 0) + os.urandom(32)) + payload(0, os.urandom(32))
    return header(os.urandom(8), 33, 28 + len(body)) + body


def malformed(i):
    """(port, datagram) of kind i % 6."""
    k = i % 6
    good = ike_sa_init()
    if k == 0:
        return 500, good[:20]                                    # truncated header
    if k == 1:
        return 500, good[:24] + struct.pack(">I", len(good) + 100) + good[28:]  # length past the end
    if k == 2:
        return 500, good[:28] + struct.pack(">BBH", 34, 0, 4000) + good[32:]    # SA payload runs past the end
    if k == 3:
        body = SA + payload(0, os.urandom(16), critical=True)
        # SA's next payload rewritten to an unknown type (200), critical.
        body = bytes([200]) + body[1:]
        return 500, header(os.urandom(8), 33, 28 + len(body)) + body
    if k == 4:
        return 500, os.urandom(64)                               # random bytes
    return 4500, bytes(4) + os.urandom(60)                       # non-ESP marker, then garbage


def classify(d, answers):
    # IKE header: first payload at 16, flags at 19 (0x20 = response).
    if len(d) >= 28 and d[:4] == bytes(4):
        d = d[4:]  # non-ESP marker (an answer on 4500)
    if len(d) < 28 or not d[19] & 0x20:
        answers["other"] += 1
    elif d[16] == 33:
        answers["sa"] += 1
    elif d[16] == 41 and len(d) >= 36 and struct.unpack(">H", d[34:36])[0] == 16390:
        answers["cookie"] += 1  # N(COOKIE)
    else:
        answers["other"] += 1


def main():
    src, dst, seconds, rate, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    socks = {}
    for port in (500, 4500):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((src, 0))
        s.setblocking(False)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        socks[port] = s
    answers = {"sa": 0, "cookie": 0, "other": 0}
    sent = bad = 0
    wall_start = time.time()
    start = time.monotonic()
    tick = 0.002  # a burst every 2 ms
    per_tick = max(1, round(rate * tick))
    n = 0
    while True:
        now = time.monotonic()
        if now - start >= seconds:
            break
        for _ in range(per_tick):
            n += 1
            is_bad = n % 8 == 0
            port, d = malformed(bad) if is_bad else (500, ike_sa_init())
            try:
                socks[port].sendto(d, (dst, port))
                sent += 1
                bad += is_bad
            except BlockingIOError:
                pass
        for s in socks.values():
            while True:
                try:
                    classify(s.recv(4096), answers)
                except BlockingIOError:
                    break
        n_due = (time.monotonic() - start) / tick
        ahead = n / per_tick - n_due
        if ahead > 0:
            time.sleep(ahead * tick)
    wall_end = time.time()
    time.sleep(0.5)  # the last answers
    for s in socks.values():
        while True:
            try:
                classify(s.recv(4096), answers)
            except BlockingIOError:
                break
    elapsed = wall_end - wall_start
    res = {"start": wall_start, "end": wall_end, "sent": sent, "malformed": bad, "seconds": round(elapsed, 2), "rate": round(sent / elapsed),
           "answers": answers}
    json.dump(res, open(out, "w"))
    print(json.dumps(res), flush=True)


def sample(espgw, sock, tunnel, out, stop):
    first = None
    with open(out, "w") as f:
        while not os.path.exists(stop):
            t = time.time()
            r = subprocess.run([espgw, "ctl", "--socket", sock, "stats", "--json"], capture_output=True, text=True)
            t = (t + time.time()) / 2  # when the counters were read, about
            if r.returncode == 0:
                n = sum(x["packets"] for x in json.loads(r.stdout)["tunnels"] if x["tunnel"] == tunnel and x["dir"] == "in")
                first = n if first is None else first
                f.write(f"{t:.4f} {n} {int(n - first >= 50)}\n")
                f.flush()
            time.sleep(max(0.0, 0.25 - (time.time() - t)))
            if r.returncode != 0:
                sys.exit(f"ctl stats: {r.stderr}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["sample"]:
        sample(*sys.argv[2:7])
    else:
        main()
