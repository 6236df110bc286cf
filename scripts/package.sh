#!/usr/bin/env bash
# Builds the Debian package of espgw: target/debian/espgw_VERSION_ARCH.deb.
#
#   scripts/package.sh            # release build (reused when up to date) + package
#   sudo dpkg -i target/debian/espgw_*.deb
#
# A plain `dpkg-deb --build` of a tree staged here, rather than cargo-deb
# or dh-cargo: it needs nothing beyond dpkg-dev (which scripts/setup.sh
# installs with the build tools), compiles no packaging tool on a fresh
# CI machine, and reuses the one `cargo build --release` that the tests
# build anyway. dpkg-shlibdeps derives the Depends on the DPDK libraries
# the binary links; the PMD and bus plugins that the EAL loads at run time
# (dlopen, invisible to shlibdeps) are added at the same ABI version.
#
# What goes in: /usr/bin/espgw (debug info stripped, symbols kept for
# backtraces), /etc/espgw/gateway.toml (conffile, 0600, no keys), the
# systemd unit espgw@.service, man pages and bash/zsh/fish completions
# generated from the clap definitions (`espgw generate`), and the docs.
# docs/install.md describes all of it.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[package] %s\n' "$*"; }
for tool in dpkg-deb dpkg-shlibdeps objcopy gzip python3; do
    command -v "$tool" >/dev/null || {
        echo "scripts/package.sh: $tool missing (apt install dpkg-dev binutils; or run scripts/setup.sh)" >&2
        exit 1
    }
done

cargo build --release --locked -p espgw
meta=$(cargo metadata --format-version 1 --no-deps)
target=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])' <<<"$meta")
version=$(python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "espgw"))' <<<"$meta")
license=$(python3 -c 'import json,sys; print(next(p["license"] or "" for p in json.load(sys.stdin)["packages"] if p["name"] == "espgw"))' <<<"$meta")
arch=$(dpkg --print-architecture)
bin="$target/release/espgw"
# Debian revision 1 of the upstream version; the git commit goes in the
# description so that an installed package names its source.
debversion="$version-1"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

out="$target/debian"
build="$out/build"
# dpkg-shlibdeps wants the package tree under debian/<package>/.
stage="$build/debian/espgw"
rm -rf "$build"
mkdir -p "$stage/DEBIAN"

install -d -m 755 "$stage/usr/bin" "$stage/lib/systemd/system" "$stage/usr/share/man/man1" \
    "$stage/usr/share/doc/espgw" "$stage/usr/share/bash-completion/completions" \
    "$stage/usr/share/zsh/vendor-completions" "$stage/usr/share/fish/vendor_completions.d"
install -d -m 755 "$stage/etc/espgw"
objcopy --strip-debug "$bin" "$stage/usr/bin/espgw"
chmod 755 "$stage/usr/bin/espgw"
install -m 600 packaging/gateway.toml "$stage/etc/espgw/gateway.toml"
install -m 644 'packaging/espgw@.service' "$stage/lib/systemd/system/espgw@.service"

"$bin" generate man --out-dir "$stage/usr/share/man/man1"
gzip -9n "$stage"/usr/share/man/man1/*.1
chmod 644 "$stage"/usr/share/man/man1/*.gz
"$bin" generate completions bash >"$stage/usr/share/bash-completion/completions/espgw"
"$bin" generate completions zsh >"$stage/usr/share/zsh/vendor-completions/_espgw"
"$bin" generate completions fish >"$stage/usr/share/fish/vendor_completions.d/espgw.fish"

install -m 644 README.md docs/*.md "$stage/usr/share/doc/espgw/"
cat >"$stage/usr/share/doc/espgw/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: espgw
Source: git commit $commit

Files: *
License: $license
COPYRIGHT
chmod 644 "$stage/usr/share/doc/espgw/copyright"

printf '/etc/espgw/gateway.toml\n' >"$stage/DEBIAN/conffiles"
cat >"$stage/DEBIAN/postinst" <<'SH'
#!/bin/sh
set -e
# A template unit: nothing is enabled or started here (systemctl enable
# --now espgw@NAME does, for /etc/espgw/NAME.toml).
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
fi
SH
cat >"$stage/DEBIAN/prerm" <<'SH'
#!/bin/sh
set -e
# Stop every running instance before its binary goes away.
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
    for unit in $(systemctl list-units --plain --no-legend 'espgw@*.service' | awk '{print $1}'); do
        systemctl stop "$unit" || true
    done
fi
SH
cat >"$stage/DEBIAN/postrm" <<'SH'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
fi
if [ "$1" = purge ]; then
    # dpkg removes the conffile; an empty /etc/espgw goes too. Configs and
    # key files the administrator wrote stay.
    rmdir /etc/espgw 2>/dev/null || true
    # /var/lib/espgw stays on purpose: it records the sequence numbers each
    # manually keyed SA has used. Deleting it and reinstalling with the same
    # keys would send AES-GCM nonces twice.
    if [ -d /var/lib/espgw ]; then
        echo "espgw: /var/lib/espgw (SA sequence-number state) is kept; remove it only with the keys it protects" >&2
    fi
fi
SH
chmod 755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm" "$stage/DEBIAN/postrm"

# Depends: the DPDK libraries the binary links (with their minimum
# versions), then the EAL plugins at the same ABI: the ring mempool
# driver (every mempool), the PCI and vdev buses, and the PMDs of the
# NICs espgw is deployed on (ixgbe: 82599/X540) and of its af_packet
# test ports. Other NICs need their librte-net-* package installed.
printf 'Source: espgw\n\nPackage: espgw\nArchitecture: any\n' >"$build/debian/control"
shlibs=$(cd "$build" && dpkg-shlibdeps -O debian/espgw/usr/bin/espgw | sed -n 's/^shlibs:Depends=//p')
eal=$(grep -o 'librte-eal[0-9]* ([^)]*)' <<<"$shlibs") || {
    echo "scripts/package.sh: the binary links no librte_eal: $shlibs" >&2
    exit 1
}
abi=$(sed 's/^librte-eal\([0-9]*\) .*/\1/' <<<"$eal")
minver=$(sed 's/^[^(]*(\(.*\))$/\1/' <<<"$eal")
plugins=""
for p in mempool-ring bus-pci bus-vdev net-ixgbe net-af-packet; do
    plugins+=", librte-$p$abi ($minver)"
done
depends="$shlibs$plugins"
rm -f "$build/debian/control"

installed_size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat >"$stage/DEBIAN/control" <<CONTROL
Package: espgw
Version: $debversion
Architecture: $arch
Maintainer: espgw developers <espgw@localhost>
Installed-Size: $installed_size
Depends: $depends
Recommends: dpdk
Section: net
Priority: optional
Description: kernel-bypass IPsec ESP tunnel gateway (DPDK)
 espgw forwards IPsec ESP tunnels (RFC 4303) between DPDK ports: one
 poll-mode RX -> ESP -> TX pipeline per pinned core, configured with one
 TOML file, managed over a control socket (espgw ctl).
 .
 Includes the espgw@.service systemd unit (one instance per
 /etc/espgw/NAME.toml) and "espgw setup", which binds the NICs and
 reserves hugepages through Debian's dpdk package.
 .
 Built from git commit $commit.
CONTROL

deb="$out/espgw_${debversion}_${arch}.deb"
rm -f "$out"/espgw_*.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
log "built $deb ($(du -h "$deb" | cut -f1))"
log "Depends: $depends"
