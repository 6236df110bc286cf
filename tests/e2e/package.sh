#!/usr/bin/env bash
# The Debian package, end to end: scripts/package.sh builds it, `dpkg -i`
# installs it on this machine (its Depends must be satisfiable here), the
# installed example /etc/espgw/gateway.toml (0600, a conffile) passes
# `espgw check`, the unit passes `systemd-analyze verify`, the man page and
# completions are well-formed, `espgw setup --dry-run` reports and changes
# nothing, the installed /usr/bin/espgw carries pings through the netns
# demo topology (namespaces pkg-*), and `dpkg -r` leaves nothing behind
# but the conffile (`dpkg --purge` then removes that too).
#
# Needs root. Refuses to run where espgw is installed already: it installs
# and purges the package.
set -euo pipefail
cd "$(dirname "$0")/../.."
P=pkg
. scripts/skip.bash
[ "$(id -u)" -eq 0 ] || skip "needs root (dpkg -i, network namespaces)"
if dpkg-query -W -f='${Status}' espgw 2>/dev/null | grep -qv 'not-installed'; then
    echo "FAIL: the espgw package is installed on this machine; this test installs and purges it (dpkg --purge espgw first)" >&2
    exit 1
fi

scripts/package.sh
deb=$(ls target/debian/espgw_*.deb)
# The installed binary, not the build tree's (common.bash checks it exists).
INSTALLED=""
SNAP=$(mktemp -d /tmp/espgw-pkg-snap.XXXXXX)
# Purges the package whatever happens (common.bash's exit trap calls it too).
on_cleanup() {
    if [ -n "$INSTALLED" ]; then
        dpkg --purge espgw >/dev/null 2>&1 || true
        INSTALLED=""
    fi
    rm -rf "$SNAP"
}
trap on_cleanup EXIT
ESPGW=/usr/bin/espgw
# What the package ships, and what of it exists before (shared directories).
mapfile -t shipped < <(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's#^\./#/#; s#/$##' | grep -v '^$')
pre_existing=()
for f in "${shipped[@]}"; do if [ -e "$f" ]; then pre_existing+=("$f"); fi; done
# Every path named *espgw* in the static trees (not /var/lib, /run: state
# and runtime files may stay, and other tests write there).
espgw_names() { find /etc /usr /lib -xdev -name '*espgw*' 2>/dev/null | sort || true; }
espgw_names >"$SNAP/before"

dpkg -i "$deb"
INSTALLED=1
. tests/e2e/common.bash

# The conffile: listed, 0600 root, and valid.
dpkg-query --control-show espgw conffiles | grep -qx '/etc/espgw/gateway.toml' || fail "gateway.toml is not a conffile"
[ "$(stat -c '%a %U %G' /etc/espgw/gateway.toml)" = "600 root root" ] || fail "gateway.toml: $(stat -c '%a %U %G' /etc/espgw/gateway.toml), expected 600 root root"
grep -Eiq '^[[:space:]]*key[[:space:]]*=' /etc/espgw/gateway.toml && fail "the example conffile holds a key"
$ESPGW check --config /etc/espgw/gateway.toml >"$WORK/check.log" 2>&1 || fail "espgw check of the installed example: $(cat "$WORK/check.log")"
echo "installed example: $(grep "OK\." "$WORK/check.log")"
# No NIC at 0000:03:00.0 here: check warns about it by name.
grep -q 'port\[0\].device' "$WORK/check.log" || [ -e /sys/bus/pci/devices/0000:03:00.0 ] || fail "espgw check did not warn about the missing PCI device: $(cat "$WORK/check.log")"

# Depends: every DPDK library the installed binary links (its NEEDED
# entries; their own dependencies come with their packages) is one.
deps=$(dpkg-query -W -f='${Depends}' espgw)
needed=$(readelf -d /usr/bin/espgw | sed -n 's/.*Shared library: \[\(librte_[^]]*\)\]/\1/p')
[ -n "$needed" ] || fail "the installed binary links no librte_* library"
for lib in $needed; do
    pkg=$(dpkg -S "*/$lib" | head -1 | cut -d: -f1)
    grep -q "$pkg" <<<"$deps" || fail "$lib ($pkg) is linked but not in Depends: $deps"
done
grep -q 'librte-net-ixgbe' <<<"$deps" || fail "no ixgbe PMD in Depends: $deps"

# The unit: systemd-analyze verifies it offline (no running systemd needed).
if command -v systemd-analyze >/dev/null; then
    systemd-analyze verify --man=no '/lib/systemd/system/espgw@.service' >"$WORK/verify.log" 2>&1 \
        || fail "systemd-analyze verify: $(cat "$WORK/verify.log")"
    [ ! -s "$WORK/verify.log" ] || fail "systemd-analyze verify complained: $(cat "$WORK/verify.log")"
    echo "systemd-analyze verify espgw@.service: clean"
    systemd-analyze security --offline=true '/lib/systemd/system/espgw@.service' 2>/dev/null | tail -1 || true
else
    fail "systemd-analyze missing (apt install systemd)"
fi

# Man pages and completions, generated from the clap definitions.
for page in espgw espgw-run espgw-setup espgw-check; do
    zcat "/usr/share/man/man1/$page.1.gz" | grep -q '^\.TH' || fail "$page.1 is no man page"
done
zcat /usr/share/man/man1/espgw-setup.1.gz | grep -q 'dry\\-run' || fail "espgw-setup.1 does not document --dry-run"
bash -n /usr/share/bash-completion/completions/espgw || fail "the bash completion does not parse"
bash -c '. /usr/share/bash-completion/completions/espgw; COMP_WORDS=(espgw se); COMP_CWORD=1; _espgw espgw se espgw; printf "%s\n" "${COMPREPLY[@]}"' \
    | grep -qx setup || fail "bash completion does not complete 'espgw se' to setup"
grep -q 'setup' /usr/share/zsh/vendor-completions/_espgw /usr/share/fish/vendor_completions.d/espgw.fish || fail "zsh/fish completions lack setup"

# espgw setup --dry-run: the demo topology's config (af_packet, --no-huge) needs no
# change; the example's PCI ports are not on this machine: problems,
# exit 1, nothing changed.
install -m 600 configs/static-a.toml "$WORK/demo.toml"
$ESPGW setup --config "$WORK/demo.toml" --dry-run >"$WORK/setup-demo.log" 2>&1 || fail "setup --dry-run of the demo config: $(cat "$WORK/setup-demo.log")"
grep -q '0 change(s) to make, nothing was changed' "$WORK/setup-demo.log" || fail "setup --dry-run: $(cat "$WORK/setup-demo.log")"
if [ ! -e /sys/bus/pci/devices/0000:03:00.0 ]; then
    rc=0
    $ESPGW setup --config /etc/espgw/gateway.toml --dry-run >"$WORK/setup-example.log" 2>&1 || rc=$?
    [ $rc = 1 ] && grep -q 'no PCI device 0000:03:00.0' "$WORK/setup-example.log" && grep -q 'nothing was changed' "$WORK/setup-example.log" \
        || fail "setup --dry-run of the example (rc $rc): $(cat "$WORK/setup-example.log")"
fi
echo "espgw setup --dry-run: demo config needs nothing; the example's missing NICs are problems"

# The installed binary on the demo topology: pings through the tunnel.
HOSTS_IPV4_ONLY=1 gateways_up >"$WORK/up.log" 2>&1 || fail "the tunnel did not come up with /usr/bin/espgw: $(cat "$WORK/up.log")"
in_a ping -c 5 -i 0.2 -W 1 10.2.0.10 >"$WORK/ping.log" 2>&1 || true
pings_answered "$WORK/ping.log" 5 || fail "not every ping answered: $(tail -2 "$WORK/ping.log")"
gateways_stop || fail "a gateway did not exit with status 0 on SIGINT"
python3 - "$WORK/a.json" "$WORK/b.json" <<'PY' || fail "stats JSON check"
import json, sys
for path in sys.argv[1:]:
    s = json.load(open(path))
    assert s["totals"]["balanced"], (path, s["totals"])
    sas = {sa["dir"]: sa for sa in s["sas"]}
    assert sas["out"]["packets"] >= 5 and sas["in"]["packets"] >= 5, (path, sas)
PY
scripts/netns.sh down "$P"
echo "installed /usr/bin/espgw: 5 of 5 pings through the tunnel"

# dpkg -r: the conffile stays, everything else the package brought goes.
dpkg -r espgw >/dev/null
[ -f /etc/espgw/gateway.toml ] || fail "dpkg -r removed the conffile"
left=()
for f in "${shipped[@]}"; do
    case "$f" in /etc/espgw | /etc/espgw/gateway.toml) continue ;; esac
    [[ " ${pre_existing[*]} " == *" $f "* ]] && continue
    if [ -e "$f" ]; then left+=("$f"); fi
done
[ ${#left[@]} -eq 0 ] || fail "dpkg -r left: ${left[*]}"
espgw_names >"$SNAP/after"
extra=$(comm -13 "$SNAP/before" "$SNAP/after" | grep -vx -e /etc/espgw -e /etc/espgw/gateway.toml || true)
[ -z "$extra" ] || fail "dpkg -r left files: $extra"
echo "dpkg -r: only /etc/espgw/gateway.toml is left"
dpkg --purge espgw >/dev/null
INSTALLED=""
[ ! -e /etc/espgw/gateway.toml ] || fail "dpkg --purge left the conffile"
espgw_names >"$SNAP/after"
cmp -s "$SNAP/before" "$SNAP/after" || fail "dpkg --purge left: $(comm -13 "$SNAP/before" "$SNAP/after")"
echo "PASS: package builds, installs, checks, runs the demo, removes cleanly"
