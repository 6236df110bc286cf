#!/usr/bin/env python3
"""Known-answer material from a strongSwan run of tests/ike/charon-pair.sh.

Reads the capture (tcpdump on charon a's veth) and both charons' logs (ike,
enc, net and chd at level 4, see tests/ike/strongswan.bash) and checks what
charon printed against the packets, with an independent implementation of
RFC 7296's key derivation written here:

- SKEYSEED = prf(Ni | Nr, g^ir) for the first IKE SA, prf(SK_d old, g^ir |
  Ni | Nr) for each IKE SA rekey, and SK_d .. SK_pr = prf+(SKEYSEED, Ni | Nr
  | SPIi | SPIr), equal to charon's numbers; a's and b's equal;
- each CHILD_SA's KEYMAT = prf+(SK_d, [g^ir] | Ni | Nr) split as RFC 7296
  2.17 says, equal to charon's "encryption/integrity initiator/responder key";
- every encrypted IKE message decrypts (and authenticates) with its IKE SA's
  SK_e/SK_a to the plaintext charon logged when it built the message;
- PSK AUTH payloads equal prf(prf(PSK, "Key Pad for IKEv2"), octets);
  certificate AUTH payloads (RFC 7427) verify with the sender's certificate;
- every ESP packet in the capture decrypts with its CHILD_SA's keys to an
  IPv4 packet between the two protected subnets.

Nonces, KE data and SPIs come from the packets (decrypted where needed), not
from the log. With --out DIR it writes DIR/run.json, DIR/capture.pcap,
DIR/messages/NN-EXCHANGE-request|response-SENDER.hex (each IKE message, without
the non-ESP marker, as one line of hex) and, for certificate runs, the CA and
both peers' certificates and keys. Exit status 1 and a message on any mismatch.
"""
import argparse
import hashlib
import hmac
import json
import os
import re
import shutil
import struct
import sys
import tempfile

from cryptography import x509
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

EXCHANGES = {34: "IKE_SA_INIT", 35: "IKE_AUTH", 36: "CREATE_CHILD_SA", 37: "INFORMATIONAL"}
PL_SA, PL_KE, PL_IDI, PL_IDR, PL_CERT, PL_AUTH, PL_NONCE, PL_N = 33, 34, 35, 36, 37, 39, 40, 41
PL_SK, PL_SKF = 46, 53
PRFS = {5: ("PRF_HMAC_SHA2_256", hashlib.sha256), 6: ("PRF_HMAC_SHA2_384", hashlib.sha384),
        7: ("PRF_HMAC_SHA2_512", hashlib.sha512)}
# integrity transform id: (name, hash, key length, ICV length)
INTEGS = {12: ("AUTH_HMAC_SHA2_256_128", hashlib.sha256, 32, 16),
          13: ("AUTH_HMAC_SHA2_384_192", hashlib.sha384, 48, 24),
          14: ("AUTH_HMAC_SHA2_512_256", hashlib.sha512, 64, 32)}
# encryption transform id: (name, kind, salt length)
ENCRS = {12: ("ENCR_AES_CBC", "cbc", 0), 20: ("ENCR_AES_GCM_16", "gcm", 4),
         28: ("ENCR_CHACHA20_POLY1305", "chacha", 4)}


class Mismatch(Exception):
    pass


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def read_text(path):
    with open(path, errors="replace") as f:
        return f.read()


def write_text(path, text):
    with open(path, "w") as f:
        f.write(text)


def check(cond, what):
    if not cond:
        raise Mismatch(what)


# ---- capture ---------------------------------------------------------------

def read_pcap(path):
    """UDP/IPv4 datagrams of a tcpdump capture (Ethernet link type)."""
    data = read_bytes(path)
    magic = data[:4]
    endian = {b"\xd4\xc3\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">"}.get(magic)
    check(endian is not None, f"{path}: not a microsecond pcap file")
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    check(linktype == 1, f"{path}: link type {linktype}, expected Ethernet")
    out, off, frame = [], 24, 0
    while off + 16 <= len(data):
        ts_s, ts_us, incl, _ = struct.unpack(endian + "IIII", data[off:off + 16])
        pkt = data[off + 16:off + 16 + incl]
        off += 16 + incl
        frame += 1
        if len(pkt) < 14 + 20 + 8 or pkt[12:14] != b"\x08\x00":
            continue
        ip = pkt[14:]
        ihl = (ip[0] & 15) * 4
        if ip[9] != 17:
            continue
        total = struct.unpack(">H", ip[2:4])[0]
        udp = ip[ihl:total]
        sport, dport, ulen = struct.unpack(">HHH", udp[:6])
        check(ulen == len(udp), f"frame {frame}: UDP length {ulen} != {len(udp)}")
        out.append({"frame": frame, "time": ts_s + ts_us / 1e6,
                    "src": ".".join(map(str, ip[12:16])), "dst": ".".join(map(str, ip[16:20])),
                    "sport": sport, "dport": dport, "data": udp[8:]})
    return out


def classify(dgrams):
    """Splits the datagrams into IKE messages and ESP packets (RFC 3948)."""
    ike, esp = [], []
    for d in dgrams:
        p = d["data"]
        if 500 in (d["sport"], d["dport"]):
            ike.append(dict(d, msg=p, marker=False))
        elif 4500 in (d["sport"], d["dport"]):
            if p == b"\xff":
                continue  # NAT-T keepalive
            if p[:4] == b"\0\0\0\0":
                ike.append(dict(d, msg=p[4:], marker=True))
            else:
                esp.append(d)
    return ike, esp


# ---- charon's log ----------------------------------------------------------

LINE = re.compile(r"^\d\d:\d\d:\d\d (\d+)\[(\w+)\] (.*)$")
DUMP = re.compile(r"^(.*?) => (\d+) bytes @ ")
ROW = re.compile(r"^\s+\d+: ")


def read_log(path):
    """charon's file log as entries (thread, group, text, bytes or None,
    truncated). charon cuts a log message at about 8 KiB of text, so a dump
    of more than about 1000 bytes (a certificate exchange) is truncated."""
    lines = read_text(path).splitlines()
    out, i = [], 0
    while i < len(lines):
        m = LINE.match(lines[i])
        i += 1
        if not m:
            continue
        thread, group, text = m.groups()
        d = DUMP.match(text)
        if not d:
            out.append((thread, group, text, None, False))
            continue
        n, buf = int(d.group(2)), bytearray()
        # A dump's rows follow its header at once (charon's file logger
        # writes one message's lines under one lock).
        while len(buf) < n and i < len(lines):
            r = LINE.match(lines[i])
            if not r or r.group(1) != thread or not ROW.match(r.group(3)):
                break
            row = r.group(3).split(":", 1)[1]
            buf += bytes.fromhex("".join(row[:49].split()))
            i += 1
        check(len(buf) <= n, f"{path}: dump '{d.group(1)}' has {len(buf)} of {n} bytes")
        out.append((thread, group, d.group(1).strip(), bytes(buf), len(buf) < n))
    return out


IKE_LABELS = {"Sk_d secret": "sk_d", "Sk_ai secret": "sk_ai", "Sk_ar secret": "sk_ar",
              "Sk_ei secret": "sk_ei", "Sk_er secret": "sk_er", "Sk_pi secret": "sk_pi",
              "Sk_pr secret": "sk_pr"}
CHILD_LABELS = {"encryption initiator key": "encr_i", "encryption responder key": "encr_r",
                "integrity initiator key": "integ_i", "integrity responder key": "integ_r"}
SK_LABELS = {"IV": "iv", "plain": "plain", "padding": "padding", "assoc": "assoc",
             "encrypted": "encrypted", "ICV": "icv"}


def log_facts(entries):
    """What charon printed: IKE SA keys, CHILD_SA keys, SK payload records."""
    ike, child, sk = [], [], []
    last_dh = {}      # thread -> last "shared Diffie Hellman secret" (IKE)
    last_child_dh = {}  # thread -> last "DH secret" (CHD)
    cur_ike, cur_child, cur_sk = {}, {}, {}
    spi_dir = {}
    for thread, group, text, data, truncated in entries:
        if data is not None:
            if truncated and not (group == "ENC" and text in SK_LABELS):
                continue  # whole messages and certificates: not used here
            if group == "IKE" and text == "shared Diffie Hellman secret":
                last_dh[thread] = data
            elif group == "IKE" and text == "SKEYSEED":
                rec = {"skeyseed": data, "shared_secret": last_dh.pop(thread, None)}
                ike.append(rec)
                cur_ike[thread] = rec
            elif group == "IKE" and text in IKE_LABELS and thread in cur_ike:
                cur_ike[thread][IKE_LABELS[text]] = data
            elif group == "CHD" and text == "DH secret":
                last_child_dh[thread] = data
            elif group == "CHD" and text == "seed":
                rec = {"seed": data, "shared_secret": last_child_dh.pop(thread, None)}
                child.append(rec)
                cur_child[thread] = rec
            elif group == "CHD" and text in CHILD_LABELS and thread in cur_child:
                cur_child[thread][CHILD_LABELS[text]] = data
            elif group == "ENC" and text in SK_LABELS and thread in cur_sk:
                cur_sk[thread][SK_LABELS[text]] = data
                if truncated:
                    cur_sk[thread][SK_LABELS[text] + "_truncated"] = True
            continue
        if group == "ENC" and text in ("encrypted payload encryption:", "encrypted payload decryption:",
                                       "encrypted fragment payload encryption:",
                                       "encrypted fragment payload decryption:"):
            rec = {"dir": "encrypt" if text.endswith("encryption:") else "decrypt"}
            sk.append(rec)
            cur_sk[thread] = rec
        elif group == "CHD" and text in ("adding inbound ESP SA", "adding outbound ESP SA"):
            spi_dir[thread] = "spi_in" if "inbound" in text else "spi_out"
        elif group == "CHD" and text.startswith("SPI 0x") and thread in spi_dir and thread in cur_child:
            cur_child[thread][spi_dir.pop(thread)] = bytes.fromhex(text[6:14])
    return ike, child, sk


# ---- IKE messages ----------------------------------------------------------

def header(msg):
    check(len(msg) >= 28, "IKE message shorter than its header")
    spi_i, spi_r, nxt, ver, exch, flags, mid, length = struct.unpack(">8s8sBBBBII", msg[:28])
    check(length == len(msg), f"IKE header length {length} != datagram {len(msg)}")
    check(ver == 0x20, f"IKE version {ver:#x}")
    return {"spi_i": spi_i, "spi_r": spi_r, "next": nxt, "exchange": exch,
            "initiator_flag": bool(flags & 0x08), "response": bool(flags & 0x20),
            "message_id": mid}


def payloads(data, first):
    """(type, body) of a payload chain; SK/SKF is last and kept whole."""
    out, t, off = [], first, 0
    while t != 0:
        check(off + 4 <= len(data), "payload header past the end")
        nxt, length = data[off], struct.unpack(">H", data[off + 2:off + 4])[0]
        check(length >= 4 and off + length <= len(data), f"payload {t} length {length}")
        out.append((t, nxt, data[off + 4:off + length], off))
        if t in (PL_SK, PL_SKF):
            break
        t, off = nxt, off + length
    return out


def proposals(sa_body):
    """[(protocol, spi, {transform type: (id, key length)})] of an SA payload."""
    out, off = [], 0
    while off < len(sa_body):
        last, length, num, proto, spi_size, ntrans = struct.unpack(">BxHBBBB", sa_body[off:off + 8])
        spi = sa_body[off + 8:off + 8 + spi_size]
        toff, trans = off + 8 + spi_size, {}
        for _ in range(ntrans):
            tlen, ttype, tid = struct.unpack(">xxHBxH", sa_body[toff:toff + 8])
            keylen = None
            if tlen >= 12 and sa_body[toff + 8:toff + 10] == b"\x80\x0e":
                keylen = struct.unpack(">H", sa_body[toff + 10:toff + 12])[0]
            trans.setdefault(ttype, (tid, keylen))
            toff += tlen
        out.append((proto, spi, trans))
        off += length
        if last == 0:
            break
    return out


def find(pls, t):
    return [b for (pt, _, b, _) in pls if pt == t]


# ---- crypto (RFC 7296 2.13, 2.14, 2.17; RFC 4106/5282/7634 in IKE) --------

def prf(h, key, data):
    return hmac.new(key, data, h).digest()


def prf_plus(h, key, seed, n):
    out, t, i = b"", b"", 1
    while len(out) < n:
        t = prf(h, key, t + seed + bytes([i]))
        out += t
        i += 1
    return out[:n]


def split(data, lengths):
    out, off = [], 0
    for n in lengths:
        out.append(data[off:off + n])
        off += n
    return out


def ike_decrypt(msg, sk_off, encr, integ, sk_e, sk_a, is_fragment):
    """Plaintext payload chain of the SK/SKF payload at sk_off (header included
    in the associated data), with the padding and pad length removed."""
    kind = ENCRS[encr[0]][1]
    hdr_len = 8 if is_fragment else 4
    body_off = sk_off + hdr_len
    aad = msg[:body_off]
    if kind == "cbc":
        icv_len = INTEGS[integ[0]][3]
        iv, ct, icv = msg[body_off:body_off + 16], msg[body_off + 16:len(msg) - icv_len], msg[len(msg) - icv_len:]
        mac = hmac.new(sk_a, msg[:len(msg) - icv_len], INTEGS[integ[0]][1]).digest()[:icv_len]
        check(hmac.compare_digest(mac, icv), "IKE message integrity check value does not verify")
        d = Cipher(algorithms.AES(sk_e), modes.CBC(iv)).decryptor()
        pt = d.update(ct) + d.finalize()
    else:
        iv, ct = msg[body_off:body_off + 8], msg[body_off + 8:]
        key, salt = sk_e[:-4], sk_e[-4:]
        aead = AESGCM(key) if kind == "gcm" else ChaCha20Poly1305(key)
        try:
            pt = aead.decrypt(salt + iv, ct, aad)
        except InvalidTag:
            raise Mismatch("IKE message does not decrypt with its SK_e")
    padlen = pt[-1]
    return iv, pt[:len(pt) - 1 - padlen]


def esp_decrypt(pkt, encr, integ, key, ikey):
    kind = ENCRS[encr[0]][1]
    if kind == "cbc":
        icv_len = INTEGS[integ[0]][3]
        mac = hmac.new(ikey, pkt[:-icv_len], INTEGS[integ[0]][1]).digest()[:icv_len]
        check(hmac.compare_digest(mac, pkt[-icv_len:]), "ESP ICV does not verify")
        d = Cipher(algorithms.AES(key), modes.CBC(pkt[8:24])).decryptor()
        pt = d.update(pkt[24:-icv_len]) + d.finalize()
    else:
        k, salt = key[:-4], key[-4:]
        aead = AESGCM(k) if kind == "gcm" else ChaCha20Poly1305(k)
        try:
            pt = aead.decrypt(salt + pkt[8:16], pkt[16:], pkt[:8])
        except InvalidTag:
            raise Mismatch("ESP packet does not decrypt with its CHILD_SA's key")
    next_header, padlen = pt[-1], pt[-2]
    return next_header, pt[:len(pt) - 2 - padlen]


def verify_signature(cert_der, auth_body, octets):
    """RFC 7427 (method 14) or plain RSA/ECDSA AUTH data over octets."""
    key = x509.load_der_x509_certificate(cert_der).public_key()
    method = auth_body[0]
    data = auth_body[4:]
    check(method == 14, f"AUTH method {method}, expected 14 (RFC 7427 digital signature)")
    alg_len = data[0]
    alg, sig = data[1:1 + alg_len], data[1 + alg_len:]
    oids = {b"\x2a\x86\x48\xce\x3d\x04\x03\x02": hashes.SHA256(), b"\x2a\x86\x48\xce\x3d\x04\x03\x03": hashes.SHA384(),
            b"\x2a\x86\x48\xce\x3d\x04\x03\x04": hashes.SHA512(),
            b"\x2a\x86\x48\x86\xf7\x0d\x01\x01\x0b": hashes.SHA256(), b"\x2a\x86\x48\x86\xf7\x0d\x01\x01\x0c": hashes.SHA384(),
            b"\x2a\x86\x48\x86\xf7\x0d\x01\x01\x0d": hashes.SHA512()}
    h = next((v for k, v in oids.items() if k in alg), None)
    check(h is not None, f"unknown RFC 7427 signature algorithm {alg.hex()}")
    try:
        if isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(sig, octets, ec.ECDSA(h))
        else:
            key.verify(sig, octets, padding.PKCS1v15(), h)
    except InvalidSignature:
        raise Mismatch("AUTH signature does not verify with the sender's certificate")
    return alg


# ---- putting it together ---------------------------------------------------

def facts_from_json(doc, run_dir):
    """The facts log_facts() finds in charon's logs, as a recorded run.json
    holds them: checking a recording re-derives everything from them."""
    b = bytes.fromhex
    ike = [{"skeyseed": b(sa["skeyseed"]), "shared_secret": b(sa["shared_secret"]),
            **{k: b(sa[k]) for k in IKE_LABELS.values() if k in sa}} for sa in doc["ike_sas"]]
    child = []
    for c in doc["child_sas"]:
        g = b(c["shared_secret"]) if c["shared_secret"] else None
        rec = {"seed": (g or b"") + b(c["nonce_i"]) + b(c["nonce_r"]), "shared_secret": g}
        rec.update({k: b(c[k]) for k in CHILD_LABELS.values() if c.get(k)})
        child.append(rec)
    sk = []
    for m in doc["messages"]:
        if "sk" not in m:
            continue
        raw = b(read_text(os.path.join(run_dir, m["file"])).strip())
        iv = b(m["sk"]["iv"])
        body = raw.index(iv, 28)  # the IV follows the SK/SKF payload header
        rec = {"dir": "encrypt", "assoc": raw[:body], "iv": iv, "plain": b(m["sk"]["plaintext"]),
               "icv": b(m["sk"]["icv"])}
        if m["sk"]["padding"] is not None:
            rec["padding"] = b(m["sk"]["padding"])
        sk.append(rec)
    return {"a": (ike, child, sk), "b": (ike, child, [])}


def analyse(meta, pcap, facts):
    addr_of = {meta["a"]["addr"]: "a", meta["b"]["addr"]: "b"}
    ike_msgs, esp_pkts = classify(read_pcap(pcap))
    check(ike_msgs, "no IKE message in the capture")
    ike_a, child_a, _ = facts["a"]
    ike_b, child_b, _ = facts["b"]
    # Both charons derived the same keys in the same order.
    check(len(ike_a) == len(ike_b) and len(child_a) == len(child_b), "a and b logged a different number of derivations")
    for x, y in zip(ike_a + child_a, ike_b + child_b):
        for k in x:
            if k not in ("spi_in", "spi_out"):
                check(x[k] == y.get(k), f"a and b logged different {k}")

    messages, ike_sas, child_sas = [], [], []
    sk_records = [r for n in "ab" for r in facts[n][2] if r["dir"] == "encrypt"]
    sa_by_spi = {}

    def record_for(msg):
        hits = [r for r in sk_records if "assoc" in r and msg.startswith(r["assoc"])
                and msg[len(r["assoc"]):len(r["assoc"]) + len(r["iv"])] == r["iv"]]
        check(len(hits) == 1, f"{len(hits)} logged encryptions match message {len(messages) + 1}")
        return hits[0]

    # IKE_SA_INIT: the first IKE SA.
    init_req = [m for m in ike_msgs if header(m["msg"])["exchange"] == 34 and not header(m["msg"])["response"]]
    init_resp = [m for m in ike_msgs if header(m["msg"])["exchange"] == 34 and header(m["msg"])["response"]]
    check(init_req and init_resp, "no IKE_SA_INIT exchange")
    req, resp = init_req[-1], init_resp[-1]
    hq, hr = header(req["msg"]), header(resp["msg"])
    pq, pr = payloads(req["msg"][28:], hq["next"]), payloads(resp["msg"][28:], hr["next"])
    (_, _, trans), = proposals(find(pr, PL_SA)[0])
    sa0 = {"spi_i": hr["spi_i"], "spi_r": hr["spi_r"], "nonce_i": find(pq, PL_NONCE)[0],
           "nonce_r": find(pr, PL_NONCE)[0], "ke_i": find(pq, PL_KE)[0], "ke_r": find(pr, PL_KE)[0],
           "trans": trans, "initiator": addr_of[req["src"]], "rekey_of": None,
           "init_req": req["msg"], "init_resp": resp["msg"]}
    ike_sas.append(sa0)
    sa_by_spi[(sa0["spi_i"], sa0["spi_r"])] = sa0
    pending_child = None  # IKE_AUTH / CREATE_CHILD_SA request waiting for its response
    fragments = {}
    auth_checked = []

    for m in ike_msgs:
        h = header(m["msg"])
        sender = addr_of[m["src"]]
        idx = len(messages) + 1
        rec = {"index": idx, "from": sender, "src": f"{m['src']}:{m['sport']}", "dst": f"{m['dst']}:{m['dport']}",
               "non_esp_marker": m["marker"], "exchange": EXCHANGES.get(h["exchange"], str(h["exchange"])),
               "message_id": h["message_id"], "response": h["response"], "initiator_flag": h["initiator_flag"],
               "spi_i": h["spi_i"].hex(), "spi_r": h["spi_r"].hex(), "length": len(m["msg"]), "pcap_frame": m["frame"]}
        pls = payloads(m["msg"][28:], h["next"])
        inner = []
        if pls and pls[-1][0] in (PL_SK, PL_SKF):
            t, first, body, off = pls[-1]
            sa = sa_by_spi.get((h["spi_i"], h["spi_r"]))
            check(sa is not None, f"message {idx}: encrypted under an unknown IKE SA {h['spi_i'].hex()}")
            keys = sa["keys"]
            d = "i" if h["initiator_flag"] else "r"
            iv, plain = ike_decrypt(m["msg"], 28 + off, sa["trans"][1], sa["trans"].get(3),
                                    keys["sk_e" + d], keys.get("sk_a" + d), t == PL_SKF)
            logged = record_for(m["msg"])
            if logged.get("plain_truncated"):
                check(plain.startswith(logged["plain"]), f"message {idx}: decrypts to other bytes than charon encrypted")
            else:
                check(logged["plain"] == plain, f"message {idx}: decrypts to other bytes than charon encrypted")
            rec["ike_sa"] = ike_sas.index(sa)
            rec["sk"] = {"fragment": t == PL_SKF, "first_inner_payload": first, "iv": iv.hex(),
                         "plaintext": plain.hex(), "padding": logged["padding"].hex() if "padding" in logged else None,
                         "icv": logged.get("icv", b"").hex()}
            if t == PL_SKF:
                # RFC 7383: reassemble the plaintexts in fragment order; the
                # first fragment's next payload is the first inner payload.
                num, total = struct.unpack(">HH", body[:4])
                rec["sk"].update(fragment_number=num, total_fragments=total)
                key = (h["spi_i"], h["spi_r"], h["message_id"], h["response"])
                frags = fragments.setdefault(key, {})
                frags[num] = (first, plain)
                if len(frags) < total:
                    messages.append((rec, m["msg"]))
                    continue
                first = frags[1][0]
                plain = b"".join(frags[k][1] for k in sorted(frags))
            inner = payloads(plain, first)
        elif h["exchange"] == 34:
            # Only the last pair makes the IKE SA; those before it were
            # answered with COOKIE or INVALID_KE_PAYLOAD.
            rec["ike_sa"] = 0 if m is req or m is resp else None
        messages.append((rec, m["msg"]))

        # Exchanges that create SAs.
        if h["exchange"] == 34 and h["response"] and m is resp:
            derive_first(sa0, ike_a[0])
        elif h["exchange"] == 35 and not h["response"]:
            pending_child = {"req": inner, "req_index": idx, "initiator": sender, "sa": sa_by_spi[(h["spi_i"], h["spi_r"])]}
        elif h["exchange"] == 35 and h["response"]:
            sa = pending_child["sa"]
            auth_checked += check_auth(meta, sa, pending_child["req"], inner)
            child_sas.append(new_child(pending_child, inner, idx, sa["nonce_i"], sa["nonce_r"], sa["keys"]["sk_d"], None))
            pending_child = None
        elif h["exchange"] == 36 and not h["response"]:
            pending_child = {"req": inner, "req_index": idx, "initiator": sender, "sa": sa_by_spi[(h["spi_i"], h["spi_r"])]}
        elif h["exchange"] == 36 and h["response"]:
            q, p = pending_child["req"], inner
            (proto, spi_q, _), *_ = proposals(find(q, PL_SA)[0])
            (_, spi_p, trans), = proposals(find(p, PL_SA)[0])
            old = pending_child["sa"]
            if proto == 1:  # IKE SA rekey
                new = {"spi_i": spi_q, "spi_r": spi_p, "nonce_i": find(q, PL_NONCE)[0], "nonce_r": find(p, PL_NONCE)[0],
                       "ke_i": find(q, PL_KE)[0], "ke_r": find(p, PL_KE)[0], "trans": trans,
                       "initiator": pending_child["initiator"], "rekey_of": ike_sas.index(old),
                       "created_by": [pending_child["req_index"], idx]}
                check(len(ike_sas) < len(ike_a), "more IKE SAs in the capture than derivations in the log")
                derive_rekey(new, old, ike_a[len(ike_sas)])
                ike_sas.append(new)
                sa_by_spi[(new["spi_i"], new["spi_r"])] = new
            else:
                child_sas.append(new_child(pending_child, p, idx, find(q, PL_NONCE)[0], find(p, PL_NONCE)[0],
                                           old["keys"]["sk_d"], find(q, PL_KE)))
            pending_child = None
    sa0["created_by"] = [messages.index(next(x for x in messages if x[1] == sa0["init_req"])) + 1,
                         messages.index(next(x for x in messages if x[1] == sa0["init_resp"])) + 1]

    check(len(ike_sas) == len(ike_a), f"{len(ike_sas)} IKE SAs in the capture, {len(ike_a)} derivations logged")
    check(len(child_sas) == len(child_a), f"{len(child_sas)} CHILD_SAs in the capture, {len(child_a)} derivations logged")
    for c, logged in zip(child_sas, child_a):
        check_child(c, logged)
    esp_count = check_esp(esp_pkts, child_sas, addr_of)
    return messages, ike_sas, child_sas, auth_checked, esp_count


def lengths(trans):
    h = PRFS[trans[2][0]][1]
    prf_len = h().digest_size
    encr, keybits = trans[1]
    enc_len = (keybits or 256) // 8 + ENCRS[encr][2]  # ChaCha20 has no key length attribute
    integ_len = INTEGS[trans[3][0]][2] if 3 in trans else 0
    return h, prf_len, enc_len, integ_len


def derive_keys(sa, skeyseed, logged):
    h, prf_len, enc_len, integ_len = lengths(sa["trans"])
    names = ["sk_d", "sk_ai", "sk_ar", "sk_ei", "sk_er", "sk_pi", "sk_pr"]
    lens = [prf_len, integ_len, integ_len, enc_len, enc_len, prf_len, prf_len]
    stream = prf_plus(h, skeyseed, sa["nonce_i"] + sa["nonce_r"] + sa["spi_i"] + sa["spi_r"], sum(lens))
    sa["keys"] = {n: v for n, v in zip(names, split(stream, lens)) if v}
    for n, v in sa["keys"].items():
        check(logged.get(n) == v, f"{n}: charon logged {logged.get(n, b'').hex()}, RFC 7296 gives {v.hex()}")
    sa["skeyseed"] = skeyseed
    sa["shared_secret"] = logged["shared_secret"]


def ke_data(ke):
    return struct.unpack(">H", ke[:2])[0], ke[4:]


def derive_first(sa, logged):
    h = PRFS[sa["trans"][2][0]][1]
    check(logged["shared_secret"] is not None, "no shared DH secret logged for the first IKE SA")
    skeyseed = prf(h, sa["nonce_i"] + sa["nonce_r"], logged["shared_secret"])
    check(skeyseed == logged["skeyseed"], "SKEYSEED of the first IKE SA differs from prf(Ni | Nr, g^ir)")
    derive_keys(sa, skeyseed, logged)


def derive_rekey(sa, old, logged):
    h = PRFS[old["trans"][2][0]][1]
    check(logged["shared_secret"] is not None, "no shared DH secret logged for the IKE SA rekey")
    skeyseed = prf(h, old["keys"]["sk_d"], logged["shared_secret"] + sa["nonce_i"] + sa["nonce_r"])
    check(skeyseed == logged["skeyseed"], "SKEYSEED of a rekeyed IKE SA differs from prf(SK_d, g^ir | Ni | Nr)")
    derive_keys(sa, skeyseed, logged)


def new_child(pending, resp_pls, resp_index, ni, nr, sk_d, ke_req):
    (_, spi_i, _), *_ = proposals(find(pending["req"], PL_SA)[0])
    (_, spi_r, trans), = proposals(find(resp_pls, PL_SA)[0])
    return {"initiator": pending["initiator"], "created_by": [pending["req_index"], resp_index],
            "rekey": any(struct.unpack(">H", b[2:4])[0] == 16393 for b in find(pending["req"], PL_N)),  # REKEY_SA
            "spi_i": spi_i, "spi_r": spi_r, "nonce_i": ni, "nonce_r": nr, "trans": trans,
            "ike_sa_prf": pending["sa"]["trans"][2][0], "sk_d": sk_d, "ike_sa_obj": pending["sa"],
            "ke_i": ke_req[0] if ke_req else None, "ke_r": find(resp_pls, PL_KE)[0] if ke_req else None}


def check_child(c, logged):
    h = PRFS[c["ike_sa_prf"]][1]
    g = logged["shared_secret"] or b""
    check((c["ke_i"] is not None) == bool(g), "PFS in the packets and a DH secret in the log disagree")
    seed = g + c["nonce_i"] + c["nonce_r"]
    check(seed == logged["seed"], "CHILD_SA seed charon logged is not [g^ir] | Ni | Nr from the packets")
    encr, keybits = c["trans"][1]
    enc_len = (keybits or 256) // 8 + ENCRS[encr][2]
    integ_len = INTEGS[c["trans"][3][0]][2] if 3 in c["trans"] else 0
    lens = [enc_len, integ_len, enc_len, integ_len]
    keys = split(prf_plus(h, c["sk_d"], seed, sum(lens)), lens)
    for n, v in zip(["encr_i", "integ_i", "encr_r", "integ_r"], keys):
        if v:
            check(logged.get(n) == v, f"CHILD_SA {n}: charon logged {logged.get(n, b'').hex()}, RFC 7296 gives {v.hex()}")
            c[n] = v
    c["shared_secret"] = logged["shared_secret"]


def check_auth(meta, sa, req, resp):
    """AUTH of both sides of an IKE_AUTH exchange, recomputed."""
    h = PRFS[sa["trans"][2][0]][1]
    out = []
    for who, pls, msg, nonce, sk_p, idt in (("i", req, sa["init_req"], sa["nonce_r"], sa["keys"]["sk_pi"], PL_IDI),
                                            ("r", resp, sa["init_resp"], sa["nonce_i"], sa["keys"]["sk_pr"], PL_IDR)):
        octets = msg + nonce + prf(h, sk_p, find(pls, idt)[0])
        auth = find(pls, PL_AUTH)[0]
        if meta["auth"] == "psk":
            check(auth[0] == 2, f"AUTH method {auth[0]}, expected 2 (shared key MIC)")
            want = prf(h, prf(h, meta["psk"].encode(), b"Key Pad for IKEv2"), octets)
            check(auth[4:] == want, f"PSK AUTH of the {who} side differs from prf(prf(PSK, pad), octets)")
            out.append(f"PSK AUTH ({who})")
        else:
            certs = find(pls, PL_CERT)
            check(certs and certs[0][0] == 4, f"no X.509 CERT payload from the {who} side")
            verify_signature(certs[0][1:], auth, octets)
            out.append(f"RFC 7427 signature AUTH ({who})")
    return out


def check_esp(esp_pkts, child_sas, addr_of):
    n = 0
    for d in esp_pkts:
        spi = d["data"][:4]
        c = next((c for c in child_sas if spi in (c["spi_i"], c["spi_r"])), None)
        check(c is not None, f"frame {d['frame']}: ESP SPI {spi.hex()} of no CHILD_SA in the capture")
        # spi_r is the responder's inbound SPI: traffic initiator -> responder.
        d_ = "i" if spi == c["spi_r"] else "r"
        nh, inner = esp_decrypt(d["data"], c["trans"][1], c["trans"].get(3), c["encr_" + d_], c.get("integ_" + d_))
        check(nh == 4 and inner[0] >> 4 == 4, f"frame {d['frame']}: ESP does not carry IPv4")
        src, dst = inner[12:16], inner[16:20]
        check(src[0] == 10 and dst[0] == 10, f"frame {d['frame']}: inner packet not between the protected subnets")
        n += 1
    check(n > 0, "no ESP packet in the capture")
    return n


def trans_names(trans):
    out = {}
    if 1 in trans:
        out["encr"] = ENCRS[trans[1][0]][0]
        out["encr_key_bits"] = trans[1][1]
    if 2 in trans:
        out["prf"] = PRFS[trans[2][0]][0]
    if 3 in trans:
        out["integ"] = INTEGS[trans[3][0]][0]
    if 4 in trans:
        out["dh_group"] = trans[4][0]
    if 5 in trans:
        out["esn"] = bool(trans[5][0])
    return out


def hx(v):
    return v.hex() if isinstance(v, (bytes, bytearray)) else v


def write(out, meta, pcap, messages, ike_sas, child_sas, checked):
    os.makedirs(os.path.join(out, "messages"), exist_ok=True)
    for f in os.listdir(os.path.join(out, "messages")):
        os.unlink(os.path.join(out, "messages", f))
    shutil.copyfile(pcap, os.path.join(out, "capture.pcap"))
    msgs = []
    for rec, raw in messages:
        frag = rec.get("sk", {}).get("fragment_number")
        frag = f"-frag{frag}of{rec['sk']['total_fragments']}" if frag else ""
        name = (f"messages/{rec['index']:02d}-{rec['exchange']}-{'response' if rec['response'] else 'request'}"
                f"{frag}-{rec['from']}.hex")
        write_text(os.path.join(out, name), raw.hex() + "\n")
        msgs.append(dict(rec, file=name))
    auth = {"method": meta["auth"]}
    if meta["auth"] == "psk":
        auth["psk"] = meta["psk"]
    else:
        for f in ("ca.crt", "a.crt", "a.key", "b.crt", "b.key"):
            shutil.copyfile(os.path.join(meta["pki_dir"], f), os.path.join(out, f))
        auth.update({"ca_cert": "ca.crt", "a": {"cert": "a.crt", "key": "a.key"}, "b": {"cert": "b.crt", "key": "b.key"}})
    ikes = []
    for i, sa in enumerate(ike_sas):
        gi, kei = ke_data(sa["ke_i"])
        _, ker = ke_data(sa["ke_r"])
        ikes.append({"index": i, "created_by_messages": sa["created_by"], "initiator": sa["initiator"],
                     "rekey_of": sa["rekey_of"], "transforms": trans_names(sa["trans"]),
                     "spi_i": hx(sa["spi_i"]), "spi_r": hx(sa["spi_r"]), "nonce_i": hx(sa["nonce_i"]),
                     "nonce_r": hx(sa["nonce_r"]), "ke_group": gi, "ke_i": hx(kei), "ke_r": hx(ker),
                     "shared_secret": hx(sa["shared_secret"]), "skeyseed": hx(sa["skeyseed"]),
                     **{k: hx(v) for k, v in sa["keys"].items()}})
    childs = []
    for c in child_sas:
        e = {"created_by_messages": c["created_by"], "ike_sa": ike_sas.index(c["ike_sa_obj"]),
             "initiator": c["initiator"], "rekey": c["rekey"],
             "transforms": trans_names(c["trans"]), "spi_i": hx(c["spi_i"]), "spi_r": hx(c["spi_r"]),
             "nonce_i": hx(c["nonce_i"]), "nonce_r": hx(c["nonce_r"]), "sk_d": hx(c["sk_d"]),
             "ke_i": hx(ke_data(c["ke_i"])[1]) if c["ke_i"] else None,
             "ke_r": hx(ke_data(c["ke_r"])[1]) if c["ke_r"] else None,
             "shared_secret": hx(c["shared_secret"])}
        for k in ("encr_i", "integ_i", "encr_r", "integ_r"):
            e[k] = hx(c.get(k)) if c.get(k) else None
        childs.append(e)
    doc = {"name": meta["name"], "peer": "strongSwan 5.9.8 (Debian 12 package 5.9.8-5+deb12u6), charon + kernel-libipsec",
           "produced_by": f"tests/ike/charon-pair.sh --record crates/ike/testdata/strongswan {meta['name']}",
           "ike_proposal": meta["ike_proposal"], "esp_proposal": meta["esp_proposal"],
           "a": meta["a"], "b": meta["b"], "auth": auth, "checked": checked,
           "messages": msgs, "ike_sas": ikes, "child_sas": childs}
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def check_recording(run_dir):
    """Re-derives a committed recording from its capture and the values in
    its run.json, and compares what that writes with what is committed."""
    doc = json.loads(read_text(os.path.join(run_dir, "run.json")))
    meta = {"name": doc["name"], "ike_proposal": doc["ike_proposal"], "esp_proposal": doc["esp_proposal"],
            "auth": doc["auth"]["method"], "psk": doc["auth"].get("psk"), "pki_dir": run_dir,
            "a": doc["a"], "b": doc["b"]}
    pcap = os.path.join(run_dir, "capture.pcap")
    result = analyse(meta, pcap, facts_from_json(doc, run_dir))
    with tempfile.TemporaryDirectory() as tmp:
        write(tmp, meta, pcap, *result[:3], summary(meta, *result))
        names = sorted(os.path.relpath(os.path.join(d, f), tmp) for d, _, fs in os.walk(tmp) for f in fs)
        have = sorted(os.path.relpath(os.path.join(d, f), run_dir) for d, _, fs in os.walk(run_dir) for f in fs)
        check(names == have, f"{run_dir}: files {sorted(set(names) ^ set(have))} differ from a fresh derivation")
        for n in names:
            check(read_bytes(os.path.join(tmp, n)) == read_bytes(os.path.join(run_dir, n)),
                  f"{run_dir}/{n} differs from what its capture and keys give")
    return meta, result


def summary(meta, messages, ike_sas, child_sas, auth_checked, esp_count):
    return [f"{len(messages)} IKE messages parsed; {sum(1 for r, _ in messages if 'sk' in r)} decrypted to charon's plaintext",
            f"{len(ike_sas)} IKE SAs: SKEYSEED and SK_* recomputed, equal to both charons' logs",
            f"{len(child_sas)} CHILD_SAs: KEYMAT recomputed, equal to both charons' logs"] + auth_checked + \
           [f"{esp_count} ESP packets decrypted with the CHILD_SA keys"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--meta")
    ap.add_argument("--pcap")
    ap.add_argument("--log-a")
    ap.add_argument("--log-b")
    ap.add_argument("--out")
    ap.add_argument("--check", nargs="+", metavar="RUN_DIR",
                    help="check committed recordings (no strongSwan needed) instead of extracting")
    a = ap.parse_args()
    if a.check:
        failed = 0
        for d in a.check:
            try:
                meta, result = check_recording(d)
                print(f"ok: {d}: " + "; ".join(summary(meta, *result)))
            except (Mismatch, OSError, KeyError, ValueError) as e:
                print(f"FAIL: {d}: {e}", file=sys.stderr)
                failed += 1
        print(f"{len(a.check) - failed} passed, {failed} failed")
        return 1 if failed else 0
    if not (a.meta and a.pcap and a.log_a and a.log_b):
        ap.error("--meta, --pcap, --log-a and --log-b are needed (or --check)")
    meta = json.loads(read_text(a.meta))
    try:
        facts = {"a": log_facts(read_log(a.log_a)), "b": log_facts(read_log(a.log_b))}
        result = analyse(meta, a.pcap, facts)
    except Mismatch as e:
        print(f"kat_extract: {meta['name']}: {e}", file=sys.stderr)
        return 1
    checked = summary(meta, *result)
    for c in checked:
        print(f"  {meta['name']}: {c}")
    if a.out:
        write(a.out, meta, a.pcap, *result[:3], checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
