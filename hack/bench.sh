#!/usr/bin/env bash
# Performance, measured side by side: N copies of the multi-node guide's two-Instance InferenceService (four pods
# each), first written by a bare client (the raw-write floor), then converged by omenative, each on a fresh local
# control plane with QPS limits lifted and an audit log of writes (hack/cluster.sh up --bench). Then omenative's
# writes in an idle period, its repair of OOM-killed workers and a rollout of a new image; then, on a fresh control
# plane, one component scaled to 10 single-pod Instances per service and on to 20 (its status size, omenative's
# RSS). Writes one JSON of every figure and PNG plots (Ready pods over time beside the floor; omenative's RSS), and
# prints the ratios to the floor.
#
#   hack/bench.sh                              N = 500, every phase (about 45 minutes on 2 cores)
#   hack/bench.sh --services 500 --profile     ...with py-spy sampling omenative (profile-PHASE.raw)
#   hack/bench.sh --services 5 --idle-seconds 10   the CI smoke run
#   hack/bench.sh --phases floor,converge --output docs/bench/n500
#   hack/bench.sh down                         remove the bench control plane
set -euo pipefail
# shellcheck source=lib/tool.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/tool.sh"
TOOL_EXTRAS=bench run_tool "${OMENATIVE_BENCH_CLUSTER:-omenative-bench}" tests.support.bench "$@"
