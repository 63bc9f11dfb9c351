#!/usr/bin/env bash
# Measures how long a standby takes over a SIGKILLed leader, and how long a SIGTERMed controller takes to stop, on
# a local control plane of its own; prints the figures and writes them to .work/measure-manager.json (the figures
# in docs/operations.md come from here; tests wait on these with generous deadlines instead of asserting them).
#
#   hack/measure-manager.sh [--runs 5]
#   hack/measure-manager.sh down      remove its control plane
set -euo pipefail
# shellcheck source=lib/tool.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/tool.sh"
run_tool "${OMENATIVE_MEASURE_CLUSTER:-omenative-measure}" tests.support.measure_manager "$@"
