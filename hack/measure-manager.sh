#!/usr/bin/env bash
# Measures how long a standby takes over a SIGKILLed leader, and how long a SIGTERMed controller takes to stop, on
# a local control plane of its own; prints the figures and writes them to .work/measure-manager.json (the figures
# in docs/operations.md come from here; tests wait on these with generous deadlines instead of asserting them).
#
#   hack/measure-manager.sh [--runs 5]
#   hack/measure-manager.sh down      remove its control plane
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cd "$repo"
# shellcheck source=lib/venv.sh
source "$here/lib/venv.sh"
name="${OMENATIVE_MEASURE_CLUSTER:-omenative-measure}"
if [[ "${1:-}" == down ]]; then
  exec "$here/cluster.sh" down --name "$name"
fi
ensure_venv "$repo" "test" >&2
"$here/build-binaries.sh" >&2
export PATH="$repo/.venv/bin:$PATH"
exec python -m tests.support.measure_manager --cluster "$name" "$@"
