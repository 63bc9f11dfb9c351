#!/usr/bin/env bash
# Crash safety, shown: runs each lifecycle operation (create, restart, update, scale-down, teardown) many times on
# a local control plane of its own, SIGKILLs omenative at a random moment of each, starts it again, and checks the
# invariants (no orphan, no duplicate, nothing done twice, converges). Prints runs, kills, invariant violations and
# the time to converge after the restart (p50/p99), writes them to .work/chaos.json, and exits non-zero on any
# violation.
#
#   hack/chaos.sh                       30 runs of each operation
#   hack/chaos.sh --runs 5 --scenarios update,teardown --seed 7
#   hack/chaos.sh down                  remove the chaos control plane
set -euo pipefail
# shellcheck source=lib/tool.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/tool.sh"
run_tool "${OMENATIVE_CHAOS_CLUSTER:-omenative-chaos}" tests.support.chaos "$@"
