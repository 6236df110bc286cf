# Sourced by scripts/test.sh and tests/e2e/common.bash: what happens when a
# test cannot run here (not root, no veth). A skip is printed and appended
# to $ESPGW_SKIP_LOG when that is set (scripts/test.sh lists the skips in
# its summary), and it is an error where skips are not allowed:
# ESPGW_NO_SKIP=1 (.ci/run sets it), or CI=true unless ESPGW_NO_SKIP=0.
# The Rust tests that need root (dpdk/dpdk/tests/eal_suite.rs,
# crates/bench/tests/tiny_bench.rs) follow the same rule.

skips_allowed() {
    case "${ESPGW_NO_SKIP:-}" in
        1) return 1 ;;
        0) return 0 ;;
    esac
    [ "${CI:-}" != true ]
}

# skip_record WHAT REASON: prints and records the skip of WHAT; returns 1
# where skips are not allowed.
skip_record() {
    echo "SKIP: $1: $2"
    [ -z "${ESPGW_SKIP_LOG:-}" ] || echo "$1: $2" >>"$ESPGW_SKIP_LOG"
    skips_allowed && return 0
    echo "FAIL: $1 skipped ($2), and skips are not allowed here (ESPGW_NO_SKIP=1 or CI=true)" >&2
    return 1
}

# skip REASON: the running script is skipped; exits 0, or 1 where skips
# are not allowed.
skip() {
    skip_record "${0#./}" "$1" || exit 1
    exit 0
}
