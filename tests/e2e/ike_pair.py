#!/usr/bin/env python3
"""Configs and checks for tests/e2e/ike_pair.sh: espgw against espgw over
IKEv2 with a pre-shared key, one connection per case, all in ONE pair of
gateways (scripts/netns.sh topology).

  ike_pair.py gen WORK
      WORK/gw-a.toml, WORK/gw-b.toml, WORK/pair.psk (mode 600) and
      WORK/cases.json. Gateway A initiates every connection
      (start_action "start"), B answers ("none").
  ike_pair.py check CASES A_JSON B_JSON [BEFORE_A_JSON]
      A_JSON, B_JSON: `espgw ctl ike list --json` of A and B. For every
      positive case: one established IKE SA on each side with one
      CHILD_SA; both name the same IKE proposal, the expected one; the
      same IKE SPIs (SPIi, SPIr); the expected ESP suite on both; A's
      outbound SPI is B's inbound SPI and the other way round. With
      BEFORE_A_JSON (A's list before a rekey of every CHILD_SA): each
      case's CHILD_SA SPIs are new. The negative cases have no CHILD_SA on
      either side (and the one without a common IKE proposal no
      established IKE SA). Exit 1 with every error; prints one line per case.

Case k (1-based) protects 10.1.k.0/24 + fd00:1:k::/48 behind A and
10.2.k.0/24 + fd00:2:k::/48 behind B (the hosts carry 10.x.k.10 and
fd00:x:k::10, scripts/gateways.sh tunnel_hosts). The ESP proposal of a case
holds one suite and one ESN value only (`-esn` or `-noesn`), on both sides:
a CHILD_SA that comes up has exactly that ESN (`ike list` does not show
ESN; a disagreement would fail every packet's ICV, which the pings check).

IKE_SA_INIT picks the responder's connection by the peer's address alone
(the first that matches; docs/ike.md), IKE_AUTH by the identities: so
every connection of B lists every IKE proposal of the test, and A's
connections each offer one. Two negative cases: one offers an IKE proposal
that none of B's accepts (same cipher as case 1, another PRF and group):
the handshake must fail with NO_PROPOSAL_CHOSEN and no tunnel may appear;
in the other the IKE proposals agree and the ESP proposals do not (A
aes256gcm16, B chacha20poly1305): the CHILD_SA must be refused and no
tunnel may appear.
"""
import json
import os
import sys

from tunnels import HEADER  # the same gateway, ports and addresses

# (ESP suite, esn, IKE proposal, ESP PFS group or "", outer family)
CASES = [
    ("aes128gcm16", False, "aes128gcm16-prfsha256-x25519", "", 4),
    ("aes128gcm16", True, "aes128gcm16-prfsha256-x25519", "x25519", 4),
    ("aes256gcm16", False, "aes256gcm16-prfsha384-ecp384", "ecp384", 4),
    ("aes256gcm16", True, "aes256gcm16-prfsha384-ecp384", "", 4),
    ("chacha20poly1305", False, "chacha20poly1305-prfsha512-x25519", "", 4),
    ("chacha20poly1305", True, "chacha20poly1305-prfsha512-x25519", "x25519", 4),
    ("aes128-sha256", False, "aes128-sha256-ecp256", "ecp256", 4),
    ("aes128-sha256", True, "aes128-sha256-ecp256", "", 4),
    ("aes256-sha256", False, "aes256-sha384-modp2048", "", 4),
    ("aes256-sha256", True, "aes256-sha384-modp2048", "modp2048", 4),
    ("aes128-sha1", False, "aes256-sha512-x25519", "", 4),
    ("aes128-sha1", True, "aes256-sha512-x25519", "ecp256", 4),
    # IPv6 outer (and IPv6 inner beside IPv4 inner): one AEAD, one CBC.
    ("aes256gcm16", True, "aes256gcm16-prfsha384-ecp384", "x25519", 6),
    ("aes128-sha1", False, "aes128-sha256-ecp256", "", 6),
    ("chacha20poly1305", True, "chacha20poly1305-prfsha512-x25519", "", 6),
    ("aes256-sha256", False, "aes256-sha384-modp2048", "ecp384", 6),
]
# No IKE proposal of B accepts this (B's list: every IKE proposal above).
NEGATIVE_IKE = "aes128gcm16-prfsha512-modp2048"

# How `ike list` names an IKE proposal (swanctl --list-sas style).
IKE_NAMES = {
    "aes128gcm16-prfsha256-x25519": "AES_GCM_16-128/PRF_HMAC_SHA2_256/CURVE_25519",
    "aes256gcm16-prfsha384-ecp384": "AES_GCM_16-256/PRF_HMAC_SHA2_384/ECP_384",
    "chacha20poly1305-prfsha512-x25519": "CHACHA20_POLY1305/PRF_HMAC_SHA2_512/CURVE_25519",
    "aes128-sha256-ecp256": "AES_CBC-128/HMAC_SHA2_256_128/PRF_HMAC_SHA2_256/ECP_256",
    "aes256-sha384-modp2048": "AES_CBC-256/HMAC_SHA2_384_192/PRF_HMAC_SHA2_384/MODP_2048",
    "aes256-sha512-x25519": "AES_CBC-256/HMAC_SHA2_512_256/PRF_HMAC_SHA2_512/CURVE_25519",
}

OUTER = {4: ("192.0.2.1", "192.0.2.2"), 6: ("2001:db8::1", "2001:db8::2")}

# [gateway] keys beyond tunnels.py's header: the metrics endpoint and a
# short IKE retransmission time.
GATEWAY_EXTRA = """metrics = "127.0.0.1:9100"
ike_retransmit_ms = 500
"""


def cases():
    out = []
    for k, (esp, esn, ike, pfs, outer) in enumerate(CASES, start=1):
        prop = "-".join(x for x in (esp, pfs, "esn" if esn else "noesn") if x)
        name = f"c{k}-{esp}{'-esn' if esn else ''}-o{outer}"
        out.append(dict(k=k, name=name, esp=esp, esn=esn, ike=ike, ike_name=IKE_NAMES[ike],
                        esp_proposal=prop, outer=outer, negative=False))
    k = len(CASES) + 1
    out.append(dict(k=k, name=f"c{k}-no-ike-proposal", esp="aes128gcm16", esn=False, ike=NEGATIVE_IKE,
                    ike_name=None, esp_proposal="aes128gcm16", outer=4, negative="ike"))
    # IKE proposals agree, ESP proposals do not: A offers aes256gcm16, B
    # takes chacha20poly1305 only (b_esp_proposal).
    k += 1
    out.append(dict(k=k, name=f"c{k}-no-esp-proposal", esp="aes256gcm16", esn=False,
                    ike="aes128gcm16-prfsha256-x25519", ike_name=IKE_NAMES["aes128gcm16-prfsha256-x25519"],
                    esp_proposal="aes256gcm16", b_esp_proposal="chacha20poly1305", outer=4, negative="esp"))
    return out


def config(cs, me, work):
    peer = "b" if me == "a" else "a"
    n, m = (1, 2) if me == "a" else (2, 1)
    text = HEADER.format(name=f"gw-{me}", sock=f"{work}/{me}.sock", state=f"{work}/state-{me}",
                         side=f"gw{me}", n=n, u4=OUTER[4][n - 1], u6=OUTER[6][n - 1],
                         gateway_extra=GATEWAY_EXTRA, dataplane_extra="")
    every_ike = sorted({c["ike"] for c in cs if not c["negative"]})
    for c in cs:
        k = c["k"]
        local, remote = OUTER[c["outer"]][n - 1], OUTER[c["outer"]][m - 1]
        ike = [c["ike"]] if me == "a" else every_ike
        text += f"""
[[connection]]
name = "{c['name']}"
local = "{local}"
remote = "{remote}"
local_id = "{me}{k}.pair.example"
remote_id = "{peer}{k}.pair.example"
psk_file = "pair.psk"
proposals = {json.dumps(ike)}
start_action = "{'start' if me == 'a' else 'none'}"

[[connection.child]]
name = "net"
local_ts = ["10.{n}.{k}.0/24", "fd00:{n}:{k}::/48"]
remote_ts = ["10.{m}.{k}.0/24", "fd00:{m}:{k}::/48"]
esp_proposals = ["{c.get('b_esp_proposal', c['esp_proposal']) if me == 'b' else c['esp_proposal']}"]
replay_window = 128
"""
    return text


def write_private(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def gen(work):
    cs = cases()
    write_private(f"{work}/gw-a.toml", config(cs, "a", work))
    write_private(f"{work}/gw-b.toml", config(cs, "b", work))
    write_private(f"{work}/pair.psk", os.urandom(32).hex() + "\n")
    write_private(f"{work}/cases.json", json.dumps(cs, indent=1))


def by_connection(path):
    sas = {}
    for s in json.load(open(path))["sas"]:
        sas.setdefault(s["connection"], []).append(s)
    return sas


def check(cases_path, a_path, b_path, before_path=None):
    cs = json.load(open(cases_path))
    a, b = by_connection(a_path), by_connection(b_path)
    before = by_connection(before_path) if before_path else None
    errors = []
    for c in cs:
        name = c["name"]
        if c["negative"]:
            # No common IKE proposal: no IKE SA past IKE_SA_INIT. No common
            # ESP proposal: the IKE SA may be up, without a CHILD_SA.
            for side, sas in (("A", a), ("B", b)):
                kids = [ch for s in sas.get(name, []) for ch in s["children"]]
                est = [s for s in sas.get(name, []) if s["state"] == "established"]
                if kids or (est and c["negative"] == "ike"):
                    errors.append(f"{name}: {side} has an IKE SA or CHILD_SA despite no common proposal: {sas[name]}")
            continue
        sides = []
        for side, sas in (("A", a), ("B", b)):
            est = [s for s in sas.get(name, []) if s["state"] == "established"]
            if len(est) != 1 or len(est[0]["children"]) != 1:
                errors.append(f"{name}: {side}: want one established IKE SA with one CHILD_SA, got {sas.get(name)}")
                break
            sides.append(est[0])
        if len(sides) != 2:
            continue
        sa, sb = sides
        ca, cb = sa["children"][0], sb["children"][0]
        if sa["proposal"] != sb["proposal"] or sa["proposal"] != c["ike_name"]:
            errors.append(f"{name}: IKE proposal A {sa['proposal']} B {sb['proposal']}, want {c['ike_name']}")
        if (sa["spi_i"], sa["spi_r"]) != (sb["spi_i"], sb["spi_r"]):
            errors.append(f"{name}: IKE SPIs A {sa['spi_i']}_i {sa['spi_r']}_r B {sb['spi_i']}_i {sb['spi_r']}_r")
        if not sa["initiator"] or sb["initiator"]:
            errors.append(f"{name}: A should be the initiator, B the responder")
        if ca["suite"] != c["esp"] or cb["suite"] != c["esp"]:
            errors.append(f"{name}: ESP suite A {ca['suite']} B {cb['suite']}, want {c['esp']}")
        if ca["out_spi"] != cb["in_spi"] or ca["in_spi"] != cb["out_spi"]:
            errors.append(f"{name}: SPIs not crosswise: A in {ca['in_spi']:08x} out {ca['out_spi']:08x},"
                          f" B in {cb['in_spi']:08x} out {cb['out_spi']:08x}")
        if ca["tunnel"] != f"{name}/net":
            errors.append(f"{name}: tunnel {ca['tunnel']}")
        if before is not None:
            old = [ch for s in before.get(name, []) for ch in s["children"]]
            if any(o["in_spi"] in (ca["in_spi"], ca["out_spi"]) or o["out_spi"] in (ca["in_spi"], ca["out_spi"])
                   for o in old) or not old:
                errors.append(f"{name}: the CHILD_SA was not rekeyed (before {old}, now {ca})")
        print(f"{name:32} IKE {sa['proposal']:55} {sa['spi_i']}_i {sa['spi_r']}_r"
              f"  ESP {c['esp_proposal']:28} A out {ca['out_spi']:08x} = B in {cb['in_spi']:08x},"
              f" B out {cb['out_spi']:08x} = A in {ca['in_spi']:08x}")
    if errors:
        print("\n".join(errors), file=sys.stderr)
        sys.exit(1)


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "gen":
        gen(sys.argv[2])
    elif cmd == "check":
        check(*sys.argv[2:6])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
