#!/usr/bin/env python3
"""Leaves one half-open IKE SA on a responder: sends it one IKE_SA_INIT
request (aes128gcm16-prfsha256-ecp256, a fresh P-256 key) and never follows
up. With charon's cookie_threshold at 1 the next initiator is then asked for
a COOKIE (RFC 7296 2.6); tests/ike/charon-pair.sh uses it to record that.

usage: half_open.py SRC_ADDR SRC_PORT DST_ADDR
(SRC_ADDR must be one the responder has an IKE config for.)
Exit status 0 once the responder answered with an SA payload (it keeps the
half-open SA until its half_open_timeout), 1 otherwise.
"""
import os
import socket
import struct
import sys

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


def payload(next_type, body):
    return struct.pack(">BBH", next_type, 0, 4 + len(body)) + body


def transform(last, ttype, tid, attrs=b""):
    return struct.pack(">BBHBBH", 0 if last else 3, 0, 8 + len(attrs), ttype, 0, tid) + attrs


def ike_sa_init():
    trans = (transform(False, 1, 20, struct.pack(">HH", 0x800E, 128))  # ENCR_AES_GCM_16, 128 bits
             + transform(False, 2, 5)                                   # PRF_HMAC_SHA2_256
             + transform(True, 4, 19))                                  # ECP_256
    proposal = struct.pack(">BBHBBBB", 0, 0, 8 + len(trans), 1, 1, 0, 3) + trans
    point = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        Encoding.X962, PublicFormat.UncompressedPoint)[1:]  # RFC 5903: x | y
    body = (payload(34, proposal)                                   # SA, next KE
            + payload(40, struct.pack(">HH", 19, 0) + point)         # KE, next Ni
            + payload(0, os.urandom(32)))                           # Ni
    spi_i = os.urandom(8)
    return spi_i + bytes(8) + struct.pack(">BBBBII", 33, 0x20, 34, 0x08, 0, 28 + len(body)) + body


def main():
    src, port, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, port))
    s.settimeout(1.0)
    req = ike_sa_init()
    for _ in range(3):
        s.sendto(req, (dst, 500))
        try:
            resp, _ = s.recvfrom(4096)
        except socket.timeout:
            continue
        if resp[:8] == req[:8] and resp[16] == 33:  # our SPI, first payload SA
            print(f"half-open IKE SA {resp[:8].hex()}_i {resp[8:16].hex()}_r left on {dst}")
            return 0
        print(f"unexpected answer: {resp[:40].hex()}", file=sys.stderr)
        return 1
    print(f"no answer from {dst}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
