#!/usr/bin/env python3
"""Traffic for tests/e2e/nonce.sh, made and checked with scapy (an ESP
implementation independent of espgw's).

  nonce_traffic.py gen DIR                 DIR/prot_in.pcap: 20 UDP packets for the tunnel
                                           DIR/unprot_in.pcap: 10 ESP packets from the peer (seq 1..10)
  nonce_traffic.py check RUN1 RUN2         the two runs' ESP: scapy decrypts all of it, and no
                                           sequence number (the AEAD IV) appears in both runs
  nonce_traffic.py drops STATS REASON N    STATS (espgw --stats-json) counted N drops of REASON
                                           and the inbound SA decrypted (10 - N) packets
"""
import json
import sys

from scapy.all import IP, UDP, Ether, Raw, rdpcap, wrpcap
from scapy.layers.ipsec import ESP, SecurityAssociation

GW_PROT = "02:00:00:00:01:01"
GW_UNPROT = "02:00:00:00:01:02"
HOST_A = "02:00:00:00:0a:0a"
PEER = "02:00:00:00:0b:02"
KEY_OUT = bytes.fromhex("bef3215147135cd554e9156cae70f5a899331a52")
KEY_IN = bytes.fromhex("9b890a06962125b8925af8d8f76eac664799f983")
N_OUT, N_IN = 20, 10


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def gen(d):
    prot = [Ether(dst=GW_PROT, src=HOST_A) /
            IP(src="10.1.0.10", dst="10.2.0.10") / UDP(sport=40000, dport=5201) / Raw(b"n%03d" % i)
            for i in range(N_OUT)]
    sa = SecurityAssociation(ESP, spi=0xB001, crypt_algo="AES-GCM", crypt_key=KEY_IN,
                             tunnel_header=IP(src="192.0.2.2", dst="192.0.2.1"))
    unprot = [Ether(dst=GW_UNPROT, src=PEER) /
              sa.encrypt(IP(src="10.2.0.10", dst="10.1.0.10") / UDP(sport=5201, dport=40000) /
                         Raw(b"i%03d" % i), seq_num=i + 1)
              for i in range(N_IN)]
    wrpcap(f"{d}/prot_in.pcap", prot, linktype=1)
    wrpcap(f"{d}/unprot_in.pcap", unprot, linktype=1)


def esp_of(d):
    sa = SecurityAssociation(ESP, spi=0xA001, crypt_algo="AES-GCM", crypt_key=KEY_OUT,
                             tunnel_header=IP(src="192.0.2.1", dst="192.0.2.2"))
    frames = [f for f in rdpcap(f"{d}/unprot_out.pcap") if ESP in f]
    if len(frames) != N_OUT:
        fail(f"{d}: {len(frames)} ESP frames out, want {N_OUT}")
    seqs, ivs = [], []
    for f in frames:
        esp = f[ESP]
        inner = sa.decrypt(f[IP])  # raises on a bad ICV: scapy agrees with the key and nonce
        if Raw not in inner or not bytes(inner[Raw]).startswith(b"n"):
            fail(f"{d}: decrypted to {inner.summary()}")
        seqs.append(esp.seq)
        ivs.append(bytes(esp.data[:8]))
    return seqs, ivs


def check(d1, d2):
    s1, iv1 = esp_of(d1)
    s2, iv2 = esp_of(d2)
    common = set(s1) & set(s2)
    if common:
        fail(f"sequence numbers sent in both runs (nonce reuse): {sorted(common)[:5]}...")
    if set(iv1) & set(iv2):
        fail("an IV was sent in both runs")
    if min(s2) <= max(s1):
        fail(f"second run started at {min(s2)}, not above the first run's {max(s1)}")
    print(f"PASS: run 1 sent seq {min(s1)}..{max(s1)}, run 2 seq {min(s2)}..{max(s2)}: "
          f"disjoint, {len(s1) + len(s2)} ESP packets decrypted by scapy")


def drops(stats, reason, n):
    s = json.load(open(stats))
    got = s["drops"].get(reason, 0)
    if got != int(n):
        fail(f"{stats}: {reason} = {got}, want {n} (drops {s['drops']})")
    sas = {sa["dir"]: sa for sa in s["sas"]}
    want_in = N_IN - int(n)
    if sas["in"]["packets"] != want_in:
        fail(f"{stats}: inbound SA decrypted {sas['in']['packets']}, want {want_in}")
    print(f"ok: {reason} = {got}, inbound decrypted {want_in}")


if __name__ == "__main__":
    {"gen": gen, "check": check, "drops": drops}[sys.argv[1]](*sys.argv[2:])
