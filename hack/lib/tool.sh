# A measurement tool of tests/support run on a local control plane of its own:
#   run_tool CLUSTER_NAME PYTHON_MODULE [args...]    (the argument `down` removes that control plane)
# $TOOL_EXTRAS names the package extras the tool needs beyond `test`.
# shellcheck shell=bash
run_tool() {
  local name=$1 module=$2 here repo
  shift 2
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  repo="$(cd "$here/.." && pwd)"
  cd "$repo"
  if [[ "${1:-}" == down ]]; then
    exec "$here/cluster.sh" down --name "$name"
  fi
  # shellcheck source=venv.sh
  source "$here/lib/venv.sh"
  ensure_venv "$repo" "test${TOOL_EXTRAS:+,$TOOL_EXTRAS}" >&2
  "$here/build-binaries.sh" >&2
  export PATH="$repo/.venv/bin:$PATH"
  exec python -m "$module" --cluster "$name" "$@"
}
