# shellcheck shell=bash
# Prometheus and promtool from Debian's prometheus package (2.42 on bookworm): the alert tests run promtool, and
# hack/sandbox.sh --with-prometheus runs the server. Installed when missing (as root, through apt).
ensure_prometheus() {
  command -v promtool >/dev/null && command -v prometheus >/dev/null && return 0
  if [[ $(id -u) != 0 ]]; then
    echo "prometheus/promtool are missing; install Debian's prometheus package (apt-get install prometheus)" >&2
    return 1
  fi
  echo "installing Debian's prometheus package (for promtool and the sandbox's Prometheus)" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; } \
    >/dev/null || return 1
  # The package enables a systemd unit; nothing here starts it, and no Prometheus runs unless the sandbox asks.
  command -v promtool >/dev/null
}
