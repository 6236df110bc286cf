"""Writes a pcap of ESP tunnel packets, one per SA given on the command line.

Usage: esp_packets.py OUT.pcap SRC/DST/SPI/CRYPT_ALGO/KEY_HEX/AUTH_ALGO/AUTH_KEY_HEX ...
Each packet carries an ICMP echo whose payload is b"espgw-sa-<SPI in hex>",
encrypted by scapy's independent ESP implementation.
"""
import sys

from scapy.all import ICMP, IP, IPv6, Ether, Raw, wrpcap
from scapy.layers.ipsec import ESP, SecurityAssociation

out, *specs = sys.argv[1:]
packets = []
for spec in specs:
    src, dst, spi, crypt, key, auth, auth_key = spec.split("/")
    sa = SecurityAssociation(
        ESP,
        spi=int(spi, 0),
        crypt_algo=crypt,
        crypt_key=bytes.fromhex(key),
        auth_algo=auth or None,
        auth_key=bytes.fromhex(auth_key) if auth_key else None,
        tunnel_header=IPv6(src=src, dst=dst) if ":" in src else IP(src=src, dst=dst),
    )
    inner = IP(src="10.1.0.5", dst="10.2.0.5") / ICMP() / Raw(b"espgw-sa-%x" % int(spi, 0))
    packets.append(Ether() / sa.encrypt(inner))
wrpcap(out, packets)
