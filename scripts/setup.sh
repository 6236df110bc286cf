#!/usr/bin/env bash
# Idempotent set-up of a fresh Debian 12 machine for building, testing and
# running espgw. Run as root. Safe to run again: it only installs what is
# missing and only raises the hugepage count.
set -euo pipefail

log() { printf '[setup] %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/setup.sh must run as root (it installs packages and reserves hugepages)" >&2
    exit 1
fi

# Build: DPDK 22.11 headers + shared libraries and PMDs, libclang for bindgen,
# pkg-config to find DPDK, libpcap for net_pcap, cmake for crypto crates,
# libipsec-mb-dev (intel-ipsec-mb, DPDK pulls it in too) for dpdk/ipsec-mb.
# Run/test: iproute2 (netns, veth), iperf3 and tcpdump/tshark for real traffic
# and wire checks, python3 + scapy as the independent ESP peer.
# IKE interop (tests/ike/): strongSwan 5.9.8's charon, swanctl and pki; the
# standard and extra plugins bring AES-GCM, x25519 and the openssl crypto,
# libcharon-extra-plugins kernel-libipsec (user-space ESP: the kernels here
# have no XFRM); nftables for the NAT in front of charon (step 8).
# Packaging (scripts/package.sh, tests/e2e/package.sh): dpkg-dev for
# dpkg-shlibdeps, binutils for objcopy/readelf, systemd for
# `systemd-analyze verify` of the unit (it works offline, without a
# running systemd).
# strongSwan 6 (tests/e2e/ike_strongswan6.sh): debootstrap makes the
# Debian testing root it runs from (scripts/setup-strongswan6.sh, which
# scripts/test.sh runs; the demo does not need it).
# Benchmarks: dpdk-doc holds DPDK's example sources, from which
# bench/secgw-vs-run.sh builds ipsec-secgw (the comparison of issue 14).
PACKAGES=(
    libdpdk-dev dpdk-dev pkg-config clang libclang-dev cmake libipsec-mb-dev
    libpcap-dev iproute2 ethtool iperf3 tcpdump tshark iputils-ping nftables
    python3 python3-pip
    dpkg-dev binutils systemd
    dpdk-doc debootstrap
)
STRONGSWAN_PACKAGES=(
    strongswan-charon strongswan-swanctl strongswan-pki libcharon-extra-plugins
    libstrongswan-standard-plugins libstrongswan-extra-plugins
)
missing=()
for p in "${PACKAGES[@]}" "${STRONGSWAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # tshark asks whether non-root users may capture; answer no, we run as root.
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    # strongswan-charon pulls in strongswan-starter, whose service would
    # start a system charon holding UDP 500/4500 in the root namespace. A
    # policy-rc.d that refuses every start keeps it down during the install
    # (only ours: one that exists already is left alone).
    own_policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\n# scripts/setup.sh: no service starts during its install\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        own_policy=1
    fi
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
        { [ -z "$own_policy" ] || rm -f /usr/sbin/policy-rc.d; exit 1; }
    [ -z "$own_policy" ] || rm -f /usr/sbin/policy-rc.d
else
    log "Debian packages present"
fi

# The tests run their own charons (tests/ike/strongswan.bash); a system one
# must neither run nor start at boot. Idempotent: harmless when none runs.
for svc in strongswan-starter strongswan; do
    if [ -d /run/systemd/system ] && systemctl list-unit-files "$svc.service" >/dev/null 2>&1; then
        systemctl disable --now "$svc.service" >/dev/null 2>&1 || true
    elif [ -x "/etc/init.d/$svc" ]; then
        "/etc/init.d/$svc" stop >/dev/null 2>&1 || true
        update-rc.d "$svc" disable >/dev/null 2>&1 || true
    fi
done
if [ -f /run/charon.pid ] && kill -0 "$(cat /run/charon.pid)" 2>/dev/null; then
    log "stopping the system charon ($(cat /run/charon.pid)): it holds UDP 500/4500"
    kill -TERM "$(cat /run/charon.pid)" || true
fi

# The Python used by the tests is the first python3 on PATH (it may be a
# pyenv interpreter rather than Debian's), so install scapy into that one.
PY=$(command -v python3)
if ! "$PY" -c 'import scapy, cryptography' 2>/dev/null; then
    log "installing scapy + cryptography for $PY"
    "$PY" -m pip install --quiet --disable-pip-version-check \
        --break-system-packages 'scapy>=2.5' cryptography 2>/dev/null ||
        "$PY" -m pip install --quiet --disable-pip-version-check 'scapy>=2.5' cryptography
else
    log "scapy present for $PY"
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo not found: install the Rust toolchain (https://rustup.rs) and run again" >&2
    exit 1
fi

# Hugepages are optional (the configs fall back to --no-huge --in-memory),
# but faster; reserve 512 x 2 MiB when the kernel lets us.
if [ -w /proc/sys/vm/nr_hugepages ]; then
    cur=$(cat /proc/sys/vm/nr_hugepages)
    if [ "$cur" -lt 512 ]; then
        echo 512 >/proc/sys/vm/nr_hugepages 2>/dev/null || true
    fi
    log "hugepages: $(cat /proc/sys/vm/nr_hugepages) x 2 MiB"
else
    log "hugepages not available; DPDK runs with --no-huge --in-memory"
fi

log "done"
