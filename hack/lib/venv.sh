# shellcheck shell=bash
# The project's Python environment (.venv), created and kept current by hack/test.sh and hack/sandbox.sh.
ensure_venv() {  # repo folder, extras (such as "test,lint")
  local repo=$1 extras=$2 stamp
  if [[ ! -x "$repo/.venv/bin/python" ]]; then
    python3 -m venv "$repo/.venv" || return 1
  fi
  # Reinstall only when the package's metadata changed.
  stamp="$repo/.venv/.installed-$(sha1sum "$repo/pyproject.toml" | cut -c1-12)-${extras//,/_}"
  if [[ ! -f "$stamp" ]]; then
    "$repo/.venv/bin/python" -m pip install --quiet --upgrade pip >/dev/null || return 1
    "$repo/.venv/bin/python" -m pip install --quiet -e "$repo${extras:+[$extras]}" || return 1
    touch "$stamp"
  fi
}
