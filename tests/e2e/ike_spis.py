#!/usr/bin/env python3
"""Compares the SAs of espgw and strongSwan (tests/e2e/ike_strongswan.sh).

  ike_spis.py IKE_LIST_JSON SA_LIST_JSON SWANCTL_LIST_SAS_TEXT

IKE_LIST_JSON: `espgw ctl ike list --json`; SA_LIST_JSON: `espgw ctl sa
list --json`; SWANCTL_LIST_SAS_TEXT: `swanctl --list-sas`. Checks, each an
error when it fails: espgw has exactly one established IKE SA with one
CHILD_SA; its IKE SPI is one of the two SPIs of charon's one ESTABLISHED
IKE SA; charon's one INSTALLED CHILD_SA (DELETED ones, left for a moment
after a rekey, are skipped) has in SPI = espgw's out SPI and out
SPI = espgw's in SPI; `sa list` has the same two SPIs as the current SAs of
the child's tunnel. Prints "IKE <spi> CHILD in <x> out <y>" on success.
"""
import json
import re
import sys


def main():
    ike = json.load(open(sys.argv[1]))
    sas = json.load(open(sys.argv[2]))
    ssw = open(sys.argv[3]).read()
    errors = []
    est = [s for s in ike["sas"] if s["state"] == "established"]
    if len(est) != 1 or len(est[0]["children"]) != 1:
        sys.exit(f"espgw: want one established IKE SA with one CHILD_SA, got {ike}")
    sa = est[0]
    child = sa["children"][0]
    # charon: "NAME: #1, ESTABLISHED, IKEv2, 1a2b3c4d5e6f7a8b_i* 0102030405060708_r"
    m = re.search(r"ESTABLISHED, IKEv2, ([0-9a-f]{16})_i\*? ([0-9a-f]{16})_r", ssw)
    if not m:
        sys.exit(f"charon has no established IKE SA:\n{ssw}")
    if sa["ike_sa"].lower() not in (m.group(1), m.group(2)):
        errors.append(f"espgw IKE SPI {sa['ike_sa']} is not one of charon's {m.group(1)} / {m.group(2)}")
    # CHILD_SA blocks: "  net: #2, reqid 1, INSTALLED, ..." then
    # "    in  c1234567, ..." / "    out c7654321, ..."; a rekeyed one stays
    # listed as DELETED for a moment and is skipped.
    blocks = re.split(r"^\s+\S+: #\d+, reqid \d+, ", ssw, flags=re.M)[1:]
    installed = [b for b in blocks if b.startswith("INSTALLED")]
    if len(installed) != 1:
        errors.append(f"charon: want one INSTALLED CHILD_SA, got:\n{ssw}")
    else:
        ins = re.findall(r"^\s+in\s+([0-9a-f]{8})", installed[0], re.M)
        outs = re.findall(r"^\s+out\s+([0-9a-f]{8})", installed[0], re.M)
        if len(ins) != 1 or len(outs) != 1:
            errors.append(f"charon: no in/out SPI in {installed[0]}")
        elif int(ins[0], 16) != child["out_spi"]:
            errors.append(f"charon in {ins[0]} != espgw out {child['out_spi']:08x}")
        elif int(outs[0], 16) != child["in_spi"]:
            errors.append(f"charon out {outs[0]} != espgw in {child['in_spi']:08x}")
    cur = {(s["dir"], s["spi"]) for s in sas["sas"]
           if s["tunnel"] == child["tunnel"] and s["state"] in ("active", "soft-expired")}
    if not {("in", child["in_spi"]), ("out", child["out_spi"])} <= cur:
        errors.append(f"sa list {sas['sas']} lacks the CHILD_SA's SPIs in {child['in_spi']:08x} out {child['out_spi']:08x}")
    if errors:
        sys.exit("\n".join(errors))
    print(f"IKE {sa['ike_sa']} CHILD in {child['in_spi']:08x} out {child['out_spi']:08x} ({child['suite']}, udp_encap={child['udp_encap']})")


if __name__ == "__main__":
    main()
