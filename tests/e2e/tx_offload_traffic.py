#!/usr/bin/env python3
"""Traffic for tests/e2e/tx_offload.sh, run in the test's namespace, whose
kernel is both the protected host (on tap txop) and the peer gateway's
address fd00:99::2 (on tap txou): it sends UDP over IPv4 and IPv6 into the
tunnel and receives espgw's ESP in UDP over IPv6 on a plain UDP socket
bound to [fd00:99::2]:4500. The kernel delivers to that socket only
datagrams whose UDP checksum verifies (others it counts in
/proc/net/snmp6 as Udp6InCsumErrors), so every packet must come back
whole, and scapy's ESP (independent of espgw's) must decrypt each to the
packet that was sent.

  tx_offload_traffic.py COUNT
"""
import socket
import sys
import time

from scapy.all import UDP, Raw
from scapy.layers.inet import IP
from scapy.layers.inet6 import IPv6
from scapy.layers.ipsec import ESP, SecurityAssociation

KEY_OUT = bytes.fromhex("bef3215147135cd554e9156cae70f5a899331a52")
LOCAL, PEER = "fd00:99::1", "fd00:99::2"


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def csum_errors():
    for line in open("/proc/net/snmp6"):
        name, value = line.split()
        if name == "Udp6InCsumErrors":
            return int(value)
    fail("no Udp6InCsumErrors in /proc/net/snmp6")


def main():
    count = int(sys.argv[1])
    esp_in = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    # Room for every datagram of the run: they are read after the last is
    # sent (SO_RCVBUFFORCE, root: past net.core.rmem_max).
    esp_in.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 8 << 20)
    esp_in.bind((PEER, 4500))
    esp_in.settimeout(0.5)
    out4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    out6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    # Counted from before the first packet: those that wait for espgw's
    # ND of the peer are completed in software on their way out.
    before = csum_errors()
    # Until the neighbors on both sides are known (ARP/ND through espgw,
    # ND by espgw for the peer): the first packets may wait or be dropped.
    deadline = time.time() + 10
    warm = set()
    while len(warm) < 2:
        if time.time() > deadline:
            fail(f"no ESP came back while warming up (families seen: {sorted(warm)})")
        out4.sendto(b"warm", ("10.2.0.5", 5001))
        out6.sendto(b"warm", ("fd00:2::5", 5001))
        try:
            while True:
                data, src = esp_in.recvfrom(65535)
                inner = decrypt(data)
                warm.add(4 if IP in inner and not isinstance(inner, IPv6) else 6)
        except socket.timeout:
            pass
    # Lengths of both parities, short to near the MTU; a tag in each.
    sent = {}
    for i in range(count):
        tag = b"espgw-tx-offload-%05d:" % i
        length = (i * 37) % 1300 + len(tag) + 1
        payload = tag + bytes((i + k) % 251 for k in range(length - len(tag)))
        if i % 2:
            out6.sendto(payload, ("fd00:2::5", 5001))
        else:
            out4.sendto(payload, ("10.2.0.5", 5001))
        sent[tag] = (i % 2, payload)
        time.sleep(0.002)
    got = {}
    deadline = time.time() + 5
    while len(got) < count and time.time() < deadline:
        try:
            data, src = esp_in.recvfrom(65535)
        except socket.timeout:
            continue
        if src[0] != LOCAL or src[1] != 4500:
            fail(f"ESP from {src}, not [{LOCAL}]:4500")
        inner = decrypt(data)
        payload = bytes(inner[UDP].payload)
        tag = payload[: payload.find(b":") + 1]
        if tag in sent:
            got[tag] = (0 if isinstance(inner, IP) and not isinstance(inner, IPv6) else 1, payload)
    errors = csum_errors() - before
    if errors:
        fail(f"the kernel counted {errors} UDP checksum error(s) on espgw's ESP in UDP")
    missing = [t for t in sent if t not in got]
    if missing:
        fail(f"{len(missing)} of {count} packets never came back as ESP, e.g. {missing[:3]}")
    for tag, (family, payload) in sent.items():
        if got[tag] != (family, payload):
            fail(f"{tag}: decrypted to another packet")
    print(f"{count} packets (IPv4 and IPv6 inside, {min(len(p) for _, p in sent.values())}-"
          f"{max(len(p) for _, p in sent.values())} bytes of payload) came back as ESP in UDP "
          f"over IPv6 that the kernel's UDP checksum check passed and scapy decrypted; "
          f"Udp6InCsumErrors +0")


def decrypt(esp_bytes):
    """scapy's ESP: the datagram's payload as the ESP of an IPv6 packet."""
    sa = SecurityAssociation(ESP, spi=0xA001, crypt_algo="AES-GCM", crypt_key=KEY_OUT,
                             tunnel_header=IPv6(src=LOCAL, dst=PEER))
    pkt = IPv6(bytes(IPv6(src=LOCAL, dst=PEER, nh=50) / Raw(esp_bytes)))
    return sa.decrypt(pkt)


if __name__ == "__main__":
    main()
