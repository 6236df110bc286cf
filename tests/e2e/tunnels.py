#!/usr/bin/env python3
"""Config generator for the many-tunnel end-to-end tests (suites.sh,
interop.sh, badinput.sh, pmtu.sh, spread.sh): one gateway pair, many tunnels, each with its own
host-address pair so one pair of espgw processes carries every variant.

  tunnels.py gen SET DIR    writes DIR/gw-a.toml, DIR/gw-b.toml (mode 600)
                            and DIR/tunnels.json (what the tests and scapy need)

Tunnel k (1-based) protects 10.1.k.0/24 + fd00:1:k::/48 (behind gateway A)
and 10.2.k.0/24 + fd00:2:k::/48 (behind gateway B); the hosts carry
10.1.k.10 / fd00:1:k::10 and 10.2.k.10 / fd00:2:k::10. The gateways'
protected ports hold 10.x.0.1/16 and fd00:x::1/32 so every host address is
on-link. Keys are fresh random bytes per run.

Each gateway keeps its SA state (persisted sequence numbers, key records)
in DIR/state-a, DIR/state-b: fresh per run.

ESPGW_A_SEQ_START (environment, default 1): gateway A's outbound SAs of
the ESN tunnels start at this sequence number. gen writes A's state
directory as espgw itself would after an earlier run (a secret, and per
SA a reservation record under the keyed hash of its key: the documented
format of crates/control/src/state), so espgw continues above it, and
writes the number to tunnels.json as each tunnel's `ab_seq_start` (1 on
the other tunnels): where the scapy peer of interop.sh expects A's
sequence numbers to start. Above 2^32 - 8 it tests espgw -> scapy with
the high bits set.

SETs:
  suites   every suite x ESN x outer IPv4/IPv6 x encap none/udp (48;
           suites.sh and interop.sh)
  badinput two aes128gcm16 tunnels (badinput.sh: one for pings, one to attack)
  pmtu     aes128gcm16 over IPv4, aes128-sha1 over IPv6 in UDP (pmtu.sh)
  spread   three AEAD tunnels: IPv4 outer in UDP, IPv6 outer, IPv6 outer in
           UDP (spread.sh: the decrypt fan-out beyond plain IPv4 ESP)
"""
import hashlib
import hmac
import itertools
import json
import os
import struct
import sys

# suite -> (key bytes incl. salt, auth key bytes or 0, scapy crypt, scapy auth)
SUITES = {
    "aes128gcm16": (20, 0, "AES-GCM", None),
    "aes256gcm16": (36, 0, "AES-GCM", None),
    "chacha20poly1305": (36, 0, "CHACHA20-POLY1305", None),
    "aes128-sha256": (16, 32, "AES-CBC", "SHA2-256-128"),
    "aes256-sha256": (32, 32, "AES-CBC", "SHA2-256-128"),
    "aes128-sha1": (16, 20, "AES-CBC", "HMAC-SHA1-96"),
}

OUTER = {
    4: {"a": "192.0.2.1", "b": "192.0.2.2"},
    6: {"a": "2001:db8::1", "b": "2001:db8::2"},
}


def variants(name):
    if name == "suites":
        return [dict(esp=s, esn=e, outer=o, encap=c)
                for s, e, o, c in itertools.product(SUITES, (False, True), (4, 6), ("none", "udp"))]
    if name == "pmtu":
        return [dict(esp="aes128gcm16", esn=False, outer=4, encap="none"),
                dict(esp="aes128-sha1", esn=True, outer=6, encap="udp")]
    if name == "badinput":
        return [dict(esp="aes128gcm16", esn=False, outer=4, encap="none")] * 2
    if name == "spread":
        return [dict(esp="aes128gcm16", esn=True, outer=4, encap="udp"),
                dict(esp="aes256gcm16", esn=False, outer=6, encap="none"),
                dict(esp="chacha20poly1305", esn=True, outer=6, encap="udp")]
    raise SystemExit(f"unknown set {name}")


def make_tunnels(name):
    out = []
    for k, v in enumerate(variants(name), start=1):
        klen, alen, _, _ = SUITES[v["esp"]]
        t = dict(v, k=k, name=f"t{k}-{v['esp']}{'-esn' if v['esn'] else ''}-o{v['outer']}-{v['encap']}",
                 a4=f"10.1.{k}.10", b4=f"10.2.{k}.10", a6=f"fd00:1:{k}::10", b6=f"fd00:2:{k}::10",
                 # A -> B and B -> A SAs
                 ab_spi=0x10000 + k, ba_spi=0x20000 + k,
                 ab_seq_start=int(os.environ.get("ESPGW_A_SEQ_START", "1")) if v["esn"] else 1,
                 ab_key=os.urandom(klen).hex(), ba_key=os.urandom(klen).hex(),
                 ab_auth=os.urandom(alen).hex() if alen else None,
                 ba_auth=os.urandom(alen).hex() if alen else None)
        out.append(t)
    return out


# The gateway, its ports and addresses: also ike_pair.py's, which adds
# [gateway] keys through {gateway_extra} (TOML cannot reopen the table).
HEADER = """default_action = "discard"

[gateway]
name = "{name}"
control_socket = "{sock}"
state_dir = "{state}"
{gateway_extra}
[dataplane]
workers = 1
mode = "run-to-completion"
burst = 32
mbufs = 8191
mtu = 1500
poll = "adaptive"
eal = ["--no-huge", "--no-shconf", "-m", "256", "--no-pci"]
{dataplane_extra}
[[port]]
name = "prot"
side = "protected"
device = "net_af_packet0,iface={side}-prot"
address = ["10.{n}.0.1/16", "fd00:{n}::1/32"]

[[port]]
name = "unprot"
side = "unprotected"
device = "net_af_packet1,iface={side}-unprot"
address = ["{u4}/24", "{u6}/64"]
"""


def sa(spi, key, auth):
    s = f'{{ spi = {spi:#x}, key = "0x{key}"'
    if auth:
        s += f', auth_key = "0x{auth}"'
    return s + " }"


# The "suites" set holds gateway B to 256-bit vectors (`max_simd_bitwidth`):
# on a CPU with AVX-512, A seals and opens with intel-ipsec-mb and
# espgw-aesgcm's 512-bit path, B with what an AVX2-only CPU runs (the
# 128-bit path, ring), so every AEAD suite crosses between the two.
DATAPLANE_EXTRA = {"suites": {"b": "max_simd_bitwidth = 256\n"}}


def config(tunnels, me, work, dataplane_extra=""):
    peer = "b" if me == "a" else "a"
    n = 1 if me == "a" else 2
    m = 2 if me == "a" else 1
    text = HEADER.format(name=f"gw-{me}", sock=f"{work}/{me}.sock", state=f"{work}/state-{me}",
                         side=f"gw{me}", n=n,
                         u4=OUTER[4][me], u6=OUTER[6][me], gateway_extra="",
                         dataplane_extra=dataplane_extra)
    for t in tunnels:
        k = t["k"]
        o = OUTER[t["outer"]]
        mine, theirs = (("ab", "ba") if me == "a" else ("ba", "ab"))
        text += f"""
[[tunnel]]
name = "{t['name']}"
local = "{o[me]}"
remote = "{o[peer]}"
local_ts = ["10.{n}.{k}.0/24", "fd00:{n}:{k}::/48"]
remote_ts = ["10.{m}.{k}.0/24", "fd00:{m}:{k}::/48"]
esp = "{t['esp']}"
esn = {str(t['esn']).lower()}
replay_window = 64
encap = "{t['encap']}"
out = {sa(t[mine + '_spi'], t[mine + '_key'], t[mine + '_auth'])}
in = {sa(t[theirs + '_spi'], t[theirs + '_key'], t[theirs + '_auth'])}
"""
    return text


def write_private(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def key_id(secret, suite, key, auth):
    """espgw's KeyId: HMAC-SHA256 under the state directory's secret,
    first 16 bytes (crates/control/src/state, KeyHasher::key_id)."""
    msg = (b"espgw key id v1\0" + suite.encode() + b"\0" + struct.pack(">I", len(key)) + key
           + struct.pack(">I", len(auth)) + auth)
    return hmac.new(secret, msg, hashlib.sha256).digest()[:16].hex()


def seed_state(tunnels, state):
    """Gateway A's state directory as after a run that reserved up to
    ab_seq_start - 1 on every tunnel that starts higher."""
    os.makedirs(state, mode=0o700, exist_ok=True)
    secret = os.urandom(32)
    fd = os.open(f"{state}/secret", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(secret)
    for t in tunnels:
        if t["ab_seq_start"] <= 1:
            continue
        auth = bytes.fromhex(t["ab_auth"]) if t["ab_auth"] else b""
        kid = key_id(secret, t["esp"], bytes.fromhex(t["ab_key"]), auth)
        write_private(f"{state}/out-{t['ab_spi']:08x}-{kid}.seq",
                      f"espgw-seq v1 tunnel={t['name']} value={t['ab_seq_start'] - 1}\n")


def gen(name, work):
    tunnels = make_tunnels(name)
    extra = DATAPLANE_EXTRA.get(name, {})
    write_private(f"{work}/gw-a.toml", config(tunnels, "a", work, extra.get("a", "")))
    write_private(f"{work}/gw-b.toml", config(tunnels, "b", work, extra.get("b", "")))
    write_private(f"{work}/tunnels.json", json.dumps(tunnels, indent=1))
    if any(t["ab_seq_start"] > 1 for t in tunnels):
        seed_state(tunnels, f"{work}/state-a")


def scapy_sa(t, direction, seq_num=1):
    """scapy's SecurityAssociation for one of tunnel t's SAs: direction
    "ab" (gateway A -> B) or "ba"."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.ipsec import ESP, SecurityAssociation
    _, _, crypt, auth = SUITES[t["esp"]]
    o = OUTER[t["outer"]]
    src, dst = (o["a"], o["b"]) if direction == "ab" else (o["b"], o["a"])
    hdr = IP(src=src, dst=dst) if t["outer"] == 4 else IPv6(src=src, dst=dst)
    kw = {}
    if auth:
        kw = dict(auth_algo=auth, auth_key=bytes.fromhex(t[direction + "_auth"]))
    if t["encap"] == "udp":
        kw["nat_t_header"] = UDP(sport=4500, dport=4500)
    return SecurityAssociation(ESP, spi=t[direction + "_spi"], seq_num=seq_num, crypt_algo=crypt,
                               crypt_key=bytes.fromhex(t[direction + "_key"]), tunnel_header=hdr,
                               esn_en=t["esn"], **kw)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "gen":
        raise SystemExit(__doc__)
    gen(sys.argv[2], sys.argv[3])
