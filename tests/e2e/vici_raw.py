#!/usr/bin/env python3
"""strongSwan's `swanctl --list-sas --raw` read into Python, and the checks
tests/e2e/ike_strongswan6.sh makes with it.

`--raw` prints each vici message on one line:

    list-sa event {espgw {uniqueid=1 state=ESTABLISHED ... ake1=ML_KEM_768
      child-sas {net-1 {name=net spi-in=ab138186 ... cpu=1 ...}}}}
    list-sas reply {}

(sections `name {...}`, key=value pairs, lists `key=[a b]`). Values with
spaces (X.500 identities) would not survive this tokenizer; the test's
identities are FQDNs.

    vici_raw.py json RAW            the IKE SAs of RAW as JSON
    vici_raw.py check ARGS...       see `check` below
"""
import json
import re
import sys

TOKEN = re.compile(r"([^\s{}=\[\]]+)=\[([^\]]*)\]|([^\s{}=\[\]]+)=(\S*?)(?=[\s}]|$)|([^\s{}=]+)\s*\{|(\})")


def parse_section(text, pos):
    """Parses `k=v ... }` from pos; returns (dict, position after the `}`)."""
    out = {}
    while True:
        m = TOKEN.search(text, pos)
        if not m:
            return out, len(text)
        pos = m.end()
        if m.group(1):
            out[m.group(1)] = m.group(2).split()
        elif m.group(3):
            out[m.group(3)] = m.group(4)
        elif m.group(5):
            out[m.group(5)], pos = parse_section(text, pos)
        else:
            return out, pos


def ike_sas(raw):
    """{name: ike_sa dict} of every `list-sa event` line of RAW."""
    sas = {}
    for line in raw.splitlines():
        if line.startswith("list-sa event {"):
            body, _ = parse_section(line, len("list-sa event {"))
            sas.update(body)
    return sas


def installed_children(sa):
    """The INSTALLED CHILD_SAs of an IKE SA dict (a rekeyed one stays
    listed for a moment as REKEYED / DELETING and is left out)."""
    return [c for c in sa.get("child-sas", {}).values() if c.get("state") == "INSTALLED"]


def check(args):
    """check CHARON_RAW IKE_LIST_JSON SA_LIST_JSON [--children N] [--per-cpu] [--ake NAME] [--connection C]

    Errors (exit status 1, each named) unless: charon has one ESTABLISHED
    IKE SA of connection C (default espgw) whose SPIs are espgw's one
    established IKE SA's; its first additional key exchange is NAME
    (`--ake ML_KEM_768`) and espgw's suite names it (`/KE1_ML_KEM_768`);
    both have N INSTALLED CHILD_SAs (default 1), paired by SPIs crosswise
    (charon's in = espgw's out and back), and `ctl sa list` has every
    espgw one's SPIs; with --per-cpu: every one of charon's is marked
    per-cpu-sas, the one paired with espgw's first CHILD_SA (its tunnel's
    own pair) has no CPU (RFC 9611's fallback SA), each other one a CPU ID
    of its own and espgw marks it per-cpu. Prints the pairs as JSON.
    """
    raw, ike_json, sa_json = args[:3]
    opts = args[3:]
    want_children = int(opts[opts.index("--children") + 1]) if "--children" in opts else 1
    per_cpu = "--per-cpu" in opts
    ake = opts[opts.index("--ake") + 1] if "--ake" in opts else None
    conn = opts[opts.index("--connection") + 1] if "--connection" in opts else "espgw"
    errors = []
    sas = ike_sas(open(raw).read())
    ike = json.load(open(ike_json))
    salist = json.load(open(sa_json))
    sa = sas.get(conn)
    if not sa or sa.get("state") != "ESTABLISHED":
        sys.exit(f"charon: no ESTABLISHED IKE SA {conn}: {sas}")
    est = [s for s in ike["sas"] if s["state"] == "established"]
    if len(est) != 1:
        sys.exit(f"espgw: want one established IKE SA, got {ike}")
    mine = est[0]
    if mine["ike_sa"].lower() not in (sa.get("initiator-spi"), sa.get("responder-spi")):
        errors.append(f"espgw's IKE SA {mine['ike_sa']} is not charon's {sa.get('initiator-spi')} / {sa.get('responder-spi')}")
    if ake:
        if sa.get("ake1") != ake:
            errors.append(f"charon's IKE SA has ake1={sa.get('ake1')}, want {ake}")
        if not (mine.get("proposal") or "").endswith(f"/KE1_{ake}"):
            errors.append(f"espgw's proposal {mine.get('proposal')} does not name KE1_{ake}")
    theirs = installed_children(sa)
    ours = mine["children"]
    if len(theirs) != want_children or len(ours) != want_children:
        errors.append(f"want {want_children} CHILD_SAs: charon has {len(theirs)}, espgw {len(ours)}")
    pairs = []
    for i, c in enumerate(ours):
        match = [t for t in theirs if int(t["spi-in"], 16) == c["out_spi"] and int(t["spi-out"], 16) == c["in_spi"]]
        if len(match) != 1:
            errors.append(f"espgw CHILD_SA in {c['in_spi']:#010x} out {c['out_spi']:#010x}: no charon CHILD_SA with the SPIs crosswise")
            continue
        t = match[0]
        pairs.append({"espgw_in": c["in_spi"], "espgw_out": c["out_spi"], "espgw_per_cpu": c.get("per_cpu", False),
                      "charon_id": t["uniqueid"], "cpu": t.get("cpu"), "charon_per_cpu": t.get("per-cpu-sas") == "yes"})
        for spi in (c["in_spi"], c["out_spi"]):
            if not any(x["spi"] == spi for x in salist["sas"]):
                errors.append(f"ctl sa list has no SA {spi:#010x}")
    if per_cpu and len(pairs) == len(ours):
        first = pairs[0]
        if first["espgw_per_cpu"] or first["cpu"] is not None:
            errors.append(f"the tunnel's own pair should be charon's fallback (no CPU) and not per-cpu in espgw: {first}")
        cpus = [p["cpu"] for p in pairs[1:]]
        if any(c is None for c in cpus) or len(set(cpus)) != len(cpus):
            errors.append(f"every other CHILD_SA wants a CPU ID of its own at charon: {cpus}")
        if not all(p["espgw_per_cpu"] for p in pairs[1:]):
            errors.append(f"espgw should mark every other CHILD_SA per-cpu: {pairs}")
        if not all(p["charon_per_cpu"] for p in pairs):
            errors.append(f"charon should mark every CHILD_SA per-cpu-sas: {pairs}")
    if errors:
        sys.exit("\n".join(errors))
    print(json.dumps(pairs))


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "json":
        print(json.dumps(ike_sas(open(sys.argv[2]).read()), indent=1))
    elif len(sys.argv) >= 5 and sys.argv[1] == "check":
        check(sys.argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
