#!/usr/bin/env bash
# The whole test suite, as CI runs it: set-up, formatting, lints, unit and
# integration tests of every crate, then the end-to-end suite (netns + the
# real binary + real traffic), which needs root.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n=== %s\n' "$*"; }
start=$(date +%s)

if [ "$(id -u)" -eq 0 ]; then
    step "set-up (scripts/setup.sh)"
    scripts/setup.sh
else
    echo "not root: skipping scripts/setup.sh; DPDK and netns tests will report skips"
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings denied)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test (workspace)"
cargo test --workspace --locked

step "end-to-end suite (tests/e2e)"
if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: the end-to-end suite needs root (network namespaces, DPDK); run: sudo scripts/test.sh"
elif ls tests/e2e/*.sh >/dev/null 2>&1; then
    cargo build --release --locked -p espgw
    # The binary under test, wherever the target directory is (CARGO_TARGET_DIR).
    ESPGW="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/espgw"
    export ESPGW
    for t in tests/e2e/*.sh; do
        step "e2e: $t"
        "$t"
    done
else
    echo "no end-to-end tests yet"
fi

step "all tests passed in $(( $(date +%s) - start ))s"
