#!/bin/sh
# Regenerates the certificate fixtures of crates/ike/tests/engine_cert.rs
# with strongSwan's pki (an implementation independent of the engine's).
# Test keys only. Validity is fixed (2020 to 2070) so the tests, which pass
# UNIX time 2030-01-01 to the engine, never expire; the expired and
# not-yet-valid certificates have fixed windows around that time.
# Usage: crates/ike/testdata/certs/make.sh (from anywhere; writes beside itself)
set -eu
cd "$(dirname "$0")"
conf=$(mktemp)
trap 'rm -f "$conf"' EXIT
# pki loads every plugin (TPM included) unless told otherwise.
printf 'pki {\n load = pem pkcs1 pkcs8 x509 openssl random nonce sha1 sha2 gmp curve25519\n}\n' >"$conf"
export STRONGSWAN_CONF="$conf"
D='--dateform %Y-%m-%d'
long="--not-before 2020-01-01 --not-after 2070-01-01 $D"
p() { pki "$@" 2>/dev/null; }

key() { # NAME TYPE SIZE
    p --gen --type "$2" --size "$3" --outform pem >"$1.key"
}
pub() { p --pub --in "$1.key" --outform pem; }

# Root CA (P-256), an intermediate CA under it (P-384), an untrusted CA.
key ca ecdsa 256
p --self --in ca.key --dn "C=CH, O=espgw test, CN=espgw test root" --ca $long --outform pem >ca.crt
key int ecdsa 384
pub int | p --issue --cacert ca.crt --cakey ca.key --dn "C=CH, O=espgw test, CN=espgw test intermediate" \
    --ca $long --outform pem >int.crt
key other-ca ecdsa 256
p --self --in other-ca.key --dn "C=CH, O=elsewhere, CN=other root" --ca $long --outform pem >other-ca.crt

issue() { # NAME TYPE SIZE ISSUER DN VALIDITY SAN...
    name=$1 type=$2 size=$3 issuer=$4 dn=$5 validity=$6
    shift 6
    key "$name" "$type" "$size"
    sans=""
    for s in "$@"; do sans="$sans --san $s"; done
    # shellcheck disable=SC2086
    pub "$name" | p --issue --cacert "$issuer.crt" --cakey "$issuer.key" --dn "$dn" $sans \
        $validity --outform pem >"$name.crt"
}

issue a ecdsa 256 ca "C=CH, O=espgw test, CN=a.example" "$long" \
    a.example a@example.com 192.0.2.1 2001:db8::1
issue b ecdsa 384 ca "C=CH, O=espgw test, CN=b.example" "$long" \
    b.example b@example.com 192.0.2.2 2001:db8::2
issue rsa rsa 2048 ca "C=CH, O=espgw test, CN=rsa.example" "$long" rsa.example
issue chained ecdsa 256 int "C=CH, O=espgw test, CN=chained.example" "$long" chained.example
issue expired ecdsa 256 ca "C=CH, O=espgw test, CN=expired.example" \
    "--not-before 2020-01-01 --not-after 2021-01-01 $D" expired.example
issue notyet ecdsa 256 ca "C=CH, O=espgw test, CN=notyet.example" \
    "--not-before 2060-01-01 --not-after 2070-01-01 $D" notyet.example
issue stranger ecdsa 256 other-ca "C=CH, O=elsewhere, CN=stranger.example" "$long" stranger.example
# One key as PKCS#8 too (pki writes SEC1 and PKCS#1).
openssl pkcs8 -topk8 -nocrypt -in b.key -out b.pkcs8.key
rm -f ca.key int.key other-ca.key
# The root's CERTREQ entry as openssl computes it (SHA-1 of the DER SPKI).
openssl x509 -in ca.crt -pubkey -noout | openssl pkey -pubin -outform der | sha1sum | cut -d' ' -f1 >ca.spki.sha1
./algids.sh
