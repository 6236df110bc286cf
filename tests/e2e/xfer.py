#!/usr/bin/env python3
"""A TCP transfer whose integrity is checked end to end (sha256 of what was
sent against what arrived), for the e2e tests.

  xfer.py serve ADDR PORT        accept one connection, read to EOF, print "LEN SHA256"
  xfer.py send SRC DST PORT SIZE send SIZE bytes from SRC, print "LEN SHA256"

Every 1 KiB chunk starts with the marker b"espgw-xfer-clear" (followed by
random bytes) so a capture of the tunnel's outer side can be searched for
plaintext leaks.
"""
import hashlib
import os
import socket
import sys
import time

MARKER = b"espgw-xfer-clear"


def family(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def serve(addr, port):
    s = socket.socket(family(addr), socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(1)
    s.settimeout(60)
    conn, _ = s.accept()
    conn.settimeout(30)
    h, n = hashlib.sha256(), 0
    while True:
        b = conn.recv(65536)
        if not b:
            break
        h.update(b)
        n += len(b)
    print(n, h.hexdigest(), flush=True)


def send(src, dst, port, size):
    data = b"".join(MARKER + os.urandom(1024 - len(MARKER)) for _ in range((size + 1023) // 1024))[:size]
    deadline = time.time() + 10
    while True:
        s = socket.socket(family(dst), socket.SOCK_STREAM)
        s.bind((src, 0))
        s.settimeout(10)
        try:
            s.connect((dst, port))
            break
        except OSError:
            s.close()
            if time.time() > deadline:
                raise
            time.sleep(0.2)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)  # wait for the server's close: everything was read
    print(len(data), hashlib.sha256(data).hexdigest(), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"] and len(sys.argv) == 4:
        serve(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1:2] == ["send"] and len(sys.argv) == 6:
        send(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        raise SystemExit(__doc__)
