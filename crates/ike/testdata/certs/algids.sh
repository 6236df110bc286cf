#!/bin/sh
# Writes algids.txt: the DER signatureAlgorithm that OpenSSL puts on a
# certificate for each RFC 7427 scheme espgw implements (the same
# AlgorithmIdentifiers RFC 7427 Appendix A lists), as an independent known
# answer for crypto::signature::SignatureScheme. Needs a.key, b.key and rsa.key
# (make.sh) and python3. Also signatures by OpenSSL (openssl-*.sig) over the
# message 'espgw RFC 7427 known answer'.
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
one() { # NAME KEY OPENSSL-ARGS...
    name=$1 key=$2
    shift 2
    openssl req -x509 -new -key "$key" -subj /CN=algid -days 1 "$@" -outform der -out "$tmp/c.der" 2>/dev/null
    python3 - "$tmp/c.der" "$name" <<'PY'
import sys
d = open(sys.argv[1], "rb").read()
def tlv(b, i):
    n = b[i + 1]
    if n < 0x80:
        return i + 2, n
    k = n & 0x7f
    return i + 2 + k, int.from_bytes(b[i + 2:i + 2 + k], "big")
start, _ = tlv(d, 0)            # Certificate SEQUENCE
c, n = tlv(d, start)            # tbsCertificate
alg = c + n                     # signatureAlgorithm follows it
c2, n2 = tlv(d, alg)
print(sys.argv[2], d[alg:c2 + n2].hex())
PY
}
{
    one EcdsaSha256 a.key -sha256
    one EcdsaSha384 a.key -sha384
    one EcdsaSha512 a.key -sha512
    one RsaPkcs1Sha256 rsa.key -sha256
    one RsaPkcs1Sha384 rsa.key -sha384
    one RsaPkcs1Sha512 rsa.key -sha512
    one RsaPssSha256 rsa.key -sha256 -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:32 -sigopt rsa_mgf1_md:sha256
} >algids.txt
# Signatures by OpenSSL over a fixed message, for the verification side.
printf 'espgw RFC 7427 known answer' >"$tmp/msg"
openssl dgst -sha256 -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:32 -sigopt rsa_mgf1_md:sha256 \
    -sign rsa.key -out openssl-rsa-pss-sha256.sig "$tmp/msg"
openssl dgst -sha384 -sign b.key -out openssl-b-ecdsa-sha384.sig "$tmp/msg"
openssl dgst -sha512 -sign rsa.key -out openssl-rsa-sha512.sig "$tmp/msg"
