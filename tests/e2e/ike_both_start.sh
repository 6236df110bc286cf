#!/usr/bin/env bash
# End to end: two espgw gateways that both `start` the connection at the
# same moment (each side's IKE_SA_INIT lost while the link between them is
# down, the retransmissions through once it is up): two IKE SAs come up on
# each side and one, the same on both, is left with its CHILD_SAs (the
# lowest-nonce rule of docs/ike.md "Both sides at once"); then the per-CPU
# test's steps 1-4 (traffic, handoff, a CHILD_SA rekey, clean exit) run on
# it. tests/e2e/ike_percpu.sh with BOTH_START=1 and its own namespaces.
# Needs root. ESPGW overrides the binary.
export BOTH_START=1 P=bs
exec bash "$(dirname "$0")/ike_percpu.sh" "$@"
