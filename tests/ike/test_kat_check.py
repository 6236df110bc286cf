#!/usr/bin/env python3
"""The committed strongSwan recordings (crates/ike/testdata/strongswan) check
out, and the check catches a wrong key, message, PSK or packet.

Needs no strongSwan and no root: python3 tests/ike/test_kat_check.py
"""
import glob
import json
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kat_extract  # noqa: E402

TESTDATA = os.path.join(HERE, "..", "..", "crates", "ike", "testdata", "strongswan")
RUNS = sorted(glob.glob(os.path.join(TESTDATA, "*", "run.json")))


def flip_hex(s, at=0):
    """s with the low bit of its byte at `at` flipped."""
    b = bytearray(bytes.fromhex(s))
    b[at] ^= 1
    return b.hex()


class RecordingsCheckOut(unittest.TestCase):
    def test_every_recording_checks_out(self):
        self.assertGreaterEqual(len(RUNS), 4, "the strongSwan recordings are missing")
        for run in RUNS:
            with self.subTest(run=os.path.basename(os.path.dirname(run))):
                kat_extract.check_recording(os.path.dirname(run))


class CheckCatchesMutations(unittest.TestCase):
    """Each mutation of one recording must make the check fail."""

    def setUp(self):
        psk_runs = [r for r in RUNS if json.loads(kat_extract.read_text(r))["auth"]["method"] == "psk"]
        self.assertTrue(psk_runs, "no PSK recording")
        self.tmp = tempfile.mkdtemp()
        self.run = os.path.join(self.tmp, "run")
        shutil.copytree(os.path.dirname(psk_runs[0]), self.run)
        self.doc = json.loads(kat_extract.read_text(os.path.join(self.run, "run.json")))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def save(self):
        with open(os.path.join(self.run, "run.json"), "w") as f:
            json.dump(self.doc, f, indent=1)
            f.write("\n")

    def assertCheckFails(self, pattern):
        with self.assertRaisesRegex(kat_extract.Mismatch, pattern):
            kat_extract.check_recording(self.run)

    def test_unmutated_copy_passes(self):
        kat_extract.check_recording(self.run)

    def test_wrong_skeyseed(self):
        self.doc["ike_sas"][0]["skeyseed"] = flip_hex(self.doc["ike_sas"][0]["skeyseed"])
        self.save()
        self.assertCheckFails("SKEYSEED of the first IKE SA")

    def test_wrong_rekeyed_sk_ei(self):
        self.doc["ike_sas"][1]["sk_ei"] = flip_hex(self.doc["ike_sas"][1]["sk_ei"], 5)
        self.save()
        self.assertCheckFails("sk_ei")

    def test_wrong_child_key(self):
        self.doc["child_sas"][2]["encr_r"] = flip_hex(self.doc["child_sas"][2]["encr_r"], 3)
        self.save()
        self.assertCheckFails("CHILD_SA encr_r")

    def test_wrong_psk(self):
        self.doc["auth"]["psk"] += "x"
        self.save()
        self.assertCheckFails("PSK AUTH")

    def test_wrong_plaintext(self):
        m = next(m for m in self.doc["messages"] if "sk" in m)
        m["sk"]["plaintext"] = flip_hex(m["sk"]["plaintext"], 4)
        self.save()
        self.assertCheckFails("decrypts to other bytes")

    def test_message_file_not_the_captured_one(self):
        path = os.path.join(self.run, self.doc["messages"][0]["file"])
        raw = kat_extract.read_text(path).strip()
        kat_extract.write_text(path, flip_hex(raw, 40) + "\n")
        self.assertCheckFails("differs from what its capture and keys give")

    def test_tampered_esp_packet(self):
        path = os.path.join(self.run, "capture.pcap")
        data = bytearray(kat_extract.read_bytes(path))
        # The last frame of the capture is IKE (the delete); the ESP packets
        # come before. Flip a byte near the end of the last ESP frame.
        _, esp = kat_extract.classify(kat_extract.read_pcap(path))
        last = esp[-1]["data"]
        at = bytes(data).rindex(last) + len(last) - 20
        data[at] ^= 0x80
        with open(path, "wb") as f:
            f.write(bytes(data))
        self.assertCheckFails("ESP")


if __name__ == "__main__":
    unittest.main(verbosity=2)
