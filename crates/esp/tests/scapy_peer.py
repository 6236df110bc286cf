#!/usr/bin/env python3
"""Independent ESP peer for espgw's interop test, built on scapy's IPsec layer.

Usage: scapy_peer.py REQUEST.json RESPONSE.json

REQUEST: {"encrypt": [task...], "decrypt": [task...]}. Every task carries
the SA: suite (espgw name), spi, key and auth_key (hex; AEAD keys end with
the 4-byte salt), esn (bool), seq (full 64-bit number), udp (bool: RFC 3948
encapsulation on port 4500), outer_src / outer_dst, plus
  encrypt: "inner" (hex of the inner IP packet): scapy encrypts it in tunnel
           mode and answers "outer" (hex of the outer IP packet);
  decrypt: "outer" (hex, made by espgw): scapy checks its outer checksums,
           verifies and decrypts it and answers "inner" (hex of the inner
           IP packet).
RESPONSE: {"encrypt": [result...], "decrypt": [result...]} in task order;
a result is {"outer": hex} / {"inner": hex}, or {"error": text}.

scapy knows the high-order ESN bits only when told: the task's seq >> 32 is
passed as scapy's `esn`, its low 32 bits as the ESP header's sequence number.
"""

import json
import sys

from scapy.compat import raw
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.ipsec import ESP, SecurityAssociation

# espgw suite -> (scapy crypt_algo, scapy auth_algo)
SUITES = {
    "aes128gcm16": ("AES-GCM", None),
    "aes256gcm16": ("AES-GCM", None),
    "chacha20poly1305": ("CHACHA20-POLY1305", None),
    "aes128-sha256": ("AES-CBC", "SHA2-256-128"),
    "aes256-sha256": ("AES-CBC", "SHA2-256-128"),
    "aes128-sha1": ("AES-CBC", "HMAC-SHA1-96"),
}

NAT_T_PORT = 4500


def outer_ip(src, dst):
    return IPv6(src=src, dst=dst) if ":" in src else IP(src=src, dst=dst)


def security_association(task):
    crypt, auth = SUITES[task["suite"]]
    seq = task["seq"]
    kwargs = dict(
        spi=task["spi"],
        seq_num=seq & 0xFFFFFFFF,
        crypt_algo=crypt,
        crypt_key=bytes.fromhex(task["key"]),
        tunnel_header=outer_ip(task["outer_src"], task["outer_dst"]),
        esn_en=task["esn"],
        esn=seq >> 32,
    )
    if auth is not None:
        kwargs.update(auth_algo=auth, auth_key=bytes.fromhex(task["auth_key"]))
    if task["udp"]:
        kwargs["nat_t_header"] = UDP(sport=NAT_T_PORT, dport=NAT_T_PORT)
    return SecurityAssociation(ESP, **kwargs)


def parse_ip(data):
    return IPv6(data) if data[0] >> 4 == 6 else IP(data)


def encrypt(task):
    sa = security_association(task)
    seq = task["seq"]
    inner = parse_ip(bytes.fromhex(task["inner"]))
    outer = sa.encrypt(inner, seq_num=seq & 0xFFFFFFFF, esn_en=task["esn"], esn=seq >> 32)
    return {"outer": raw(outer).hex()}


def checksum_error(outer):
    """espgw's outer checksums as scapy computes them: the IPv4 header
    checksum, and the UDP checksum over IPv6 (zero is allowed over IPv4)."""
    if outer.version == 4:
        fresh = outer.copy()
        del fresh.chksum
        expected = IP(raw(fresh)).chksum
        if outer.chksum != expected:
            return "outer IPv4 checksum %#06x, scapy computes %#06x" % (outer.chksum, expected)
        if outer.haslayer(UDP) and outer[UDP].chksum != 0:
            return "UDP checksum over IPv4 is %#06x, espgw sends 0" % outer[UDP].chksum
    elif outer.haslayer(UDP):
        fresh = outer.copy()
        del fresh[UDP].chksum
        expected = IPv6(raw(fresh))[UDP].chksum
        if outer[UDP].chksum != expected:
            return "UDP checksum %#06x, scapy computes %#06x" % (outer[UDP].chksum, expected)
    return None


def decrypt(task):
    sa = security_association(task)
    seq = task["seq"]
    outer = parse_ip(bytes.fromhex(task["outer"]))
    if not outer.haslayer(ESP):
        return {"error": "scapy did not dissect an ESP layer: " + outer.summary()}
    error = checksum_error(outer)
    if error:
        return {"error": error}
    inner = sa.decrypt(outer, verify=True, esn_en=task["esn"], esn=seq >> 32)
    return {"inner": raw(inner).hex()}


def run_all(tasks, fn):
    results = []
    for task in tasks:
        try:
            results.append(fn(task))
        except Exception as e:  # one bad case must not hide the others
            results.append({"error": "%s: %s" % (type(e).__name__, e)})
    return results


def main():
    with open(sys.argv[1]) as f:
        request = json.load(f)
    response = {
        "encrypt": run_all(request.get("encrypt", []), encrypt),
        "decrypt": run_all(request.get("decrypt", []), decrypt),
    }
    with open(sys.argv[2], "w") as f:
        json.dump(response, f)


if __name__ == "__main__":
    main()
