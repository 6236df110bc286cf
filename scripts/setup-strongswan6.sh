#!/usr/bin/env bash
# Makes the strongSwan 6 peer of tests/e2e/ike_strongswan6.sh: a minimal
# Debian testing root with strongSwan (debootstrap; scripts/setup.sh
# installs debootstrap). Run as root, after scripts/setup.sh; scripts/test.sh
# runs it. Idempotent: does nothing when the root has charon 6.1 or later.
set -euo pipefail

log() { printf '[setup-strongswan6] %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/setup-strongswan6.sh must run as root (debootstrap, mknod)" >&2
    exit 1
fi
command -v debootstrap >/dev/null || { echo "no debootstrap: run scripts/setup.sh first" >&2; exit 1; }

# strongSwan 6 for tests/e2e/ike_strongswan6.sh: the RFC 9611 per-CPU
# CHILD_SAs and the ML-KEM exchanges (RFC 9370, IKE_INTERMEDIATE) need a
# peer that has them, and Debian 12 has strongSwan 5.9.8 only. A minimal
# Debian testing root with testing's strongSwan (6.1 when this was
# written) and nothing else; the test runs its charon chrooted there,
# in a network namespace, with kernel-libipsec as with 5.9.8. Made once
# (about a minute and 260 MB), into a temporary directory renamed at the
# end, so an interrupted run leaves none half made; made again when its
# charon is older than 6.1 or missing. ESPGW_SSW6_ROOT moves it.
SSW6_ROOT=${ESPGW_SSW6_ROOT:-/var/lib/espgw-tests/strongswan6}
SSW6_PACKAGES=strongswan-charon,strongswan-swanctl,libcharon-extra-plugins,libstrongswan-standard-plugins,libstrongswan-extra-plugins
ssw6_version() {  # prints charon's version in the root, e.g. 6.1.0
    [ -x "$SSW6_ROOT/usr/lib/ipsec/charon" ] || return 1
    chroot "$SSW6_ROOT" /usr/lib/ipsec/charon --version 2>/dev/null | sed -n 's/^strongSwan \([0-9.]*\).*/\1/p'
}
ssw6_ok() {  # charon 6.1 or later in the root, with a TUN device node
    local v
    v=$(ssw6_version) || return 1
    [ -n "$v" ] && [ -c "$SSW6_ROOT/dev/net/tun" ] &&
        printf '%s\n6.1\n' "$v" | sort -V -C -r
}
if ssw6_ok; then
    log "strongSwan $(ssw6_version) root present ($SSW6_ROOT)"
else
    log "making the strongSwan 6 root $SSW6_ROOT (debootstrap of Debian testing)"
    rm -rf "$SSW6_ROOT.tmp"
    mkdir -p "$(dirname "$SSW6_ROOT")"
    # Twice: a mirror hiccup should not cost the run its strongSwan 6 test.
    ssw6_made=""
    for try in 1 2; do
        rm -rf "$SSW6_ROOT.tmp"
        if debootstrap --variant=minbase --include="$SSW6_PACKAGES" testing "$SSW6_ROOT.tmp" \
            http://deb.debian.org/debian >"$SSW6_ROOT.log" 2>&1; then
            ssw6_made=1
            break
        fi
        log "debootstrap failed (try $try of 2): $(tail -1 "$SSW6_ROOT.log")"
    done
    if [ -n "$ssw6_made" ]; then
        # kernel-libipsec's TUN device (debootstrap makes only the basic nodes).
        mkdir -p "$SSW6_ROOT.tmp/dev/net"
        mknod -m 666 "$SSW6_ROOT.tmp/dev/net/tun" c 10 200
        # Nothing may start a charon of its own in there.
        rm -f "$SSW6_ROOT.tmp"/etc/systemd/system/multi-user.target.wants/strongswan*.service
        rm -rf "$SSW6_ROOT"
        mv "$SSW6_ROOT.tmp" "$SSW6_ROOT"
        if ssw6_ok; then
            log "strongSwan $(ssw6_version) root made"
        else
            log "WARNING: the root has no strongSwan 6.1 or later ($(ssw6_version || echo none)): tests/e2e/ike_strongswan6.sh will skip"
        fi
    else
        log "WARNING: debootstrap failed ($SSW6_ROOT.log): tests/e2e/ike_strongswan6.sh will skip"
        tail -5 "$SSW6_ROOT.log" >&2 || true
        rm -rf "$SSW6_ROOT.tmp"
    fi
fi
