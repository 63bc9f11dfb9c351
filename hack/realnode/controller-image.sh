#!/usr/bin/env bash
# Builds omenative's controller image without a daemon or a registry: a Debian minbase root filesystem
# (debootstrap, with python3), the checkout's wheel and its dependencies installed in /opt/omenative, written as a
# docker-archive tagged as deploy/ names it. The real node loads it (hack/realnode/node.sh load-controller).
#
#   hack/realnode/controller-image.sh OUTPUT.tar
#
# The Debian root is built once and cached outside the checkout ($OMENATIVE_CACHE_DIR/image-build); the wheels are
# built from the checkout each time.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=../lib/versions.sh
source "$here/../lib/versions.sh"

out=${1:?usage: controller-image.sh OUTPUT.tar}
work="$OMENATIVE_CACHE_DIR/image-build"
base="$work/debian-bookworm-python3"
log() { printf '[controller-image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
image=$(awk '/image: omenative:/ {print $2; exit}' "$repo/deploy/base/deployment.yaml")
[[ -n "$image" ]] || { log "no omenative image in deploy/base/deployment.yaml"; exit 1; }

mkdir -p "$work"
if [[ ! -x "$base/usr/bin/python3" ]]; then
  command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends debootstrap; } >&2
  log "building the Debian root (debootstrap minbase, python3; a few minutes, once)"
  rm -rf "$base.tmp"
  debootstrap --variant=minbase --include=python3,python3-venv bookworm "$base.tmp" http://deb.debian.org/debian >&2
  # What a container never uses: package caches, documentation.
  rm -rf "$base.tmp"/var/cache/apt/archives/*.deb "$base.tmp"/var/lib/apt/lists/* "$base.tmp"/usr/share/doc \
    "$base.tmp"/usr/share/man "$base.tmp"/usr/share/locale "$base.tmp"/usr/share/info
  mv "$base.tmp" "$base"
fi

root="$work/root"
rm -rf "$root" "$work/wheels"
log "wheels of the checkout and its dependencies"
"$repo/.venv/bin/python" -m pip wheel -q --wheel-dir "$work/wheels" "$repo" >&2
cp -a "$base" "$root"
cp -r "$work/wheels" "$root/tmp/wheels"
env -i PATH=/usr/bin:/bin "$(command -v chroot)" "$root" /bin/sh -c \
  "python3 -m venv /opt/omenative && /opt/omenative/bin/pip install -q --no-index --find-links /tmp/wheels omenative" >&2
rm -rf "$root/tmp/wheels" "$root/root/.cache"
python3 "$here/image.py" --rootfs "$root" --entrypoint /opt/omenative/bin/omenative --entrypoint run \
  --user 65532:65532 --tag "$image" --output "$out"
rm -rf "$root"
log "$image written to $out ($(du -h "$out" | cut -f1))"
