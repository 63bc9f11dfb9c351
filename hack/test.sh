#!/usr/bin/env bash
# Runs every check of the project, as CI does: lint, types, import contracts, unit, integration and end-to-end
# tests against the local control plane. Installs what it needs (.venv, the control-plane binaries) and stops the
# control plane it started, also on failure. Exits non-zero if any step failed.
#
#   hack/test.sh              everything
#   hack/test.sh -k gang      extra arguments go to pytest
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cd "$repo"

log() { printf '\n[test %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
failed=()
step() {  # name, command...
  local name=$1 start=$SECONDS; shift
  log "$name"
  if "$@"; then log "$name: ok ($((SECONDS - start))s)"; else log "$name: FAILED ($((SECONDS - start))s)"; failed+=("$name"); fi
}

total=$SECONDS
log "python environment (.venv)"
# shellcheck source=lib/venv.sh
source "$here/lib/venv.sh"
ensure_venv "$repo" "test,lint,bench,plugin" || exit 1
export PATH="$repo/.venv/bin:$PATH"

log "control-plane binaries"
# The real-node tests (tests/realnode) need kubelet, kube-proxy, CoreDNS and the stand-in too, where the machine
# can run a real node; elsewhere they are skipped with the reason printed. Kueue (tests/e2e/test_kueue.py) and KEDA
# (tests/e2e/test_keda.py) are built here too, and Traefik (the real-node tests' gateway), so that their first build
# shows in this step.
# shellcheck source=realnode/lib.sh
source "$here/realnode/lib.sh"
if reason=$(realnode_supported); then
  "$here/build-binaries.sh" --real-node --kueue --keda --traefik || exit 1
  # Installed before any test runs: the real-node tests read the host's state (nft, iptables) before `up`.
  ensure_packages || exit 1
else
  log "this machine cannot run a real node ($reason): the real-node tests will be skipped"
  "$here/build-binaries.sh" --kueue --keda || exit 1
fi

log "promtool (Debian's prometheus package)"
# shellcheck source=lib/prometheus.sh
source "$here/lib/prometheus.sh"
ensure_prometheus || exit 1

step "ruff" ruff check src tests hack
step "mypy (strict, src/)" mypy
step "import contracts" lint-imports
# The stand-in serving process of the real-node tests (its request and error counters, its erroring mode).
step "stand-in (go vet, go test)" bash -c "cd '$here/realnode/standin' && go vet ./... && go test ./..."

export OMENATIVE_CLUSTER="${OMENATIVE_CLUSTER:-omenative-test}"
cleanup() { log "stopping the control plane"; "$here/cluster.sh" down --name "$OMENATIVE_CLUSTER" >/dev/null 2>&1 || true; }
trap cleanup EXIT
step "control plane up" "$here/cluster.sh" up --name "$OMENATIVE_CLUSTER"
if [[ " ${failed[*]} " != *" control plane up "* ]]; then
  # A full run also checks that the deployed RBAC grants nothing the e2e suite's controller never used.
  [[ $# -eq 0 ]] && export OMENATIVE_FULL_RUN=1
  step "pytest (unit, integration, e2e)" pytest -p no:cacheprovider --durations=25 "$@"
fi
if [[ $# -eq 0 ]]; then
  # The benchmark at a tiny N, on a control plane of its own: it must run; its figures are not judged here.
  step "bench smoke (hack/bench.sh --services 5)" "$here/bench.sh" --services 5 --idle-seconds 10 --repairs 4 \
    --output "$repo/.work/bench-smoke"
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  log "FAILED: ${failed[*]} (total $((SECONDS - total))s)"
  exit 1
fi
log "all checks passed (total $((SECONDS - total))s)"
