#!/usr/bin/env python3
"""Independent reference values for the crypto_*.rs tests where no
published vector exists (RFC 5282 and RFC 7634 publish none for IKE, RFC
3526 none for MODP, RFC 7296 none for AUTH). Computed with Python's own
big integers and hmac/hashlib and the `cryptography` package (OpenSSL), so
they share no code with espgw-ike's ring/aws-lc/crypto-bigint paths.

Run: python3 crates/ike/tests/crypto_vectors.py  (prints the values the
tests embed; needs python3-cryptography and python3-mpmath).
"""
import hashlib
import hmac

import mpmath
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305


def h(b):
    return b.hex()


def seq(n, start):
    return bytes((start + i) % 256 for i in range(n))


# --- RFC 3526 group 14 prime, from its defining formula -------------------
mpmath.mp.prec = 4000
pi_term = int(mpmath.floor(mpmath.mpf(2) ** 1918 * mpmath.pi))
p = 2**2048 - 2**1984 - 1 + 2**64 * (pi_term + 124476)
print("modp_prime", "%0512x" % p)

# --- MODP-2048 exchange with fixed 256-bit exponents ----------------------
a = int.from_bytes(seq(32, 0x11), "big")
b = int.from_bytes(seq(32, 0x77), "big")
ga, gb = pow(2, a, p), pow(2, b, p)
assert pow(gb, a, p) == pow(ga, b, p)
print("modp_a", "%064x" % a)
print("modp_b", "%064x" % b)
print("modp_ga", "%0512x" % ga)
print("modp_gb", "%0512x" % gb)
print("modp_gab", "%0512x" % pow(gb, a, p))

# --- SK payloads -----------------------------------------------------------
aad = bytes.fromhex("0011223344556677" "8899aabbccddeeff" "2e202308" "00000001") + b"\x00\x00\x00\x00" + bytes.fromhex("21000000")
plain = b"inner payloads: IDi, AUTH, SA, TSi, TSr"  # 39 bytes
print("sk_aad", h(aad))
print("sk_plain", h(plain))

# AES-128-CBC + HMAC-SHA-256-128: pad to 16 with the pad length byte.
key, ikey, iv = seq(16, 0x40), seq(32, 0x80), seq(16, 0xc0)
padlen = (16 - (len(plain) + 1) % 16) % 16
padded = plain + b"\x00" * padlen + bytes([padlen])
enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
ct = enc.update(padded) + enc.finalize()
icv = hmac.new(ikey, aad + iv + ct, hashlib.sha256).digest()[:16]
print("sk_cbc128_sha256", h(iv + ct + icv))

# AES-256-CBC + HMAC-SHA-512-256.
key, ikey = seq(32, 0x40), seq(64, 0x80)
enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
ct = enc.update(padded) + enc.finalize()
icv = hmac.new(ikey, aad + iv + ct, hashlib.sha512).digest()[:32]
print("sk_cbc256_sha512", h(iv + ct + icv))

# AES-256-GCM-16: key | salt from SK_e, nonce = salt | 8-byte IV, pad 0.
key, salt, iv8 = seq(32, 0x40), bytes.fromhex("a1a2a3a4"), seq(8, 0xc0)
ct = AESGCM(key).encrypt(salt + iv8, plain + b"\x00", aad)
print("sk_gcm256", h(iv8 + ct))

# ChaCha20-Poly1305 (RFC 7634): same layout.
ct = ChaCha20Poly1305(key).encrypt(salt + iv8, plain + b"\x00", aad)
print("sk_chacha", h(iv8 + ct))

# --- PSK AUTH (RFC 7296 2.15) with PRF HMAC-SHA-384 ------------------------
msg1 = seq(300, 0x05)
nr = seq(32, 0x99)
sk_pi = seq(48, 0x33)
idi = bytes([2, 0, 0, 0]) + b"gw-a.example.net"  # ID_FQDN
psk = b"correct horse battery staple"
maced = hmac.new(sk_pi, idi, hashlib.sha384).digest()
octets = msg1 + nr + maced
auth = hmac.new(hmac.new(psk, b"Key Pad for IKEv2", hashlib.sha384).digest(), octets, hashlib.sha384).digest()
print("psk_maced_id", h(maced))
print("psk_auth", h(auth))
