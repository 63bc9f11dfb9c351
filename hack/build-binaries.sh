#!/usr/bin/env bash
# Builds the local control plane's binaries from their Go modules into a cache outside the repository.
# A second run reuses what is there. KUBEBUILDER_ASSETS (envtest's convention) may point at a folder of official
# binaries: any binary found there is linked instead of built.
#
#   hack/build-binaries.sh              the control plane
#   hack/build-binaries.sh --real-node  also kubelet, kube-proxy, CoreDNS and the stand-in (hack/cluster.sh --real-node)
#   hack/build-binaries.sh --kueue      also Kueue's manager (hack/cluster.sh --kueue)
#   hack/build-binaries.sh --keda       also KEDA's operator and metrics adapter (hack/cluster.sh --keda)
#   hack/build-binaries.sh --traefik    also Traefik, the Gateway API gateway (hack/cluster.sh --gateway); flags combine
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/versions.sh
source "$here/lib/versions.sh"

bin="$OMENATIVE_BIN_DIR"
mkdir -p "$bin"
log() { printf '[build-binaries %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# component-base reports this version; kwokctl picks each binary's flags from it, so it must be the real one.
major="${K8S_VERSION#v}"; major="${major%%.*}"
minor="${K8S_VERSION#v}"; minor="${minor#*.}"; minor="${minor%%.*}"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
ldflags+=" -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor"

missing() { [[ ! -x "$bin/$1" ]]; }

from_assets() {
  local name=$1
  if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/$name" ]]; then
    ln -sf "$KUBEBUILDER_ASSETS/$name" "$bin/$name"
    log "$name: using $KUBEBUILDER_ASSETS/$name"
    return 0
  fi
  return 1
}

timed_build() {  # name, then the command that builds it
  local name=$1; shift
  local start=$SECONDS
  log "$name: building (this can take minutes)"
  "$@"
  log "$name: built in $((SECONDS - start))s"
}

build_kubernetes() {
  local names=(kube-apiserver kube-controller-manager kube-scheduler kubectl "$@") n
  for n in "${names[@]}"; do
    missing "$n" || continue
    from_assets "$n" && continue
    timed_build "$n" bash -c "cd '$here/gomod/kubernetes' && go build -trimpath -ldflags '$ldflags' -o '$bin/$n.tmp' 'k8s.io/kubernetes/cmd/$n' && mv '$bin/$n.tmp' '$bin/$n'"
  done
}

build_etcd() {
  missing etcd || return 0
  from_assets etcd && return 0
  timed_build etcd bash -c "cd '$here/gomod/etcd' && go build -trimpath -ldflags '-s -w' -o '$bin/etcd.tmp' go.etcd.io/etcd/server/v3 && mv '$bin/etcd.tmp' '$bin/etcd'"
}

build_scheduler_plugins() {
  missing coscheduling-scheduler || missing podgroup-controller || return 0
  local src work
  # scheduler-plugins' go.mod carries its own replace block, which `go install` refuses; build in a writable copy.
  src=$(go mod download -json "sigs.k8s.io/scheduler-plugins@$SCHEDULER_PLUGINS_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  work="$OMENATIVE_CACHE_DIR/src/scheduler-plugins-$SCHEDULER_PLUGINS_VERSION"
  if [[ ! -f "$work/go.mod" ]]; then
    rm -rf "$work"; mkdir -p "$(dirname "$work")"
    cp -r "$src" "$work"; chmod -R u+w "$work"
  fi
  missing coscheduling-scheduler && timed_build coscheduling-scheduler bash -c \
    "cd '$work' && go build -trimpath -ldflags '$ldflags' -o '$bin/coscheduling-scheduler.tmp' ./cmd/scheduler && mv '$bin/coscheduling-scheduler.tmp' '$bin/coscheduling-scheduler'"
  missing podgroup-controller && timed_build podgroup-controller bash -c \
    "cd '$work' && go build -trimpath -ldflags '-s -w' -o '$bin/podgroup-controller.tmp' ./cmd/controller && mv '$bin/podgroup-controller.tmp' '$bin/podgroup-controller'"
  return 0
}

build_kwok() {
  missing kwokctl && timed_build kwokctl env GOBIN="$bin" go install -trimpath -ldflags '-s -w' "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
  # The simulated kubelet carries one patch (hack/sim/kwok-pod-delete-uid.patch): it deletes a pod with a UID
  # precondition, as the kubelet does. Without it, a delete job KWOK queued for a pod already gone removes the
  # controller's new pod of the same name (a chaos run in CI saw a restarted Instance's leader deleted so).
  build_patched kwok "sigs.k8s.io/kwok@$KWOK_VERSION" "$here/sim/kwok-pod-delete-uid.patch" ./cmd/kwok
}

# A binary built from a copy of its Go module with one of our patches applied; rebuilt whenever the patch changes.
build_patched() {  # name, module@version, patch, package
  local name=$1 module=$2 patch=$3 package=$4 src work
  if ! missing "$name" && cmp -s "$patch" "$bin/$name.patch"; then return 0; fi
  src=$(go mod download -json "$module" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  work="$OMENATIVE_CACHE_DIR/src/${module//[\/@]/-}-patched"
  rm -rf "$work"; mkdir -p "$(dirname "$work")"
  cp -r "$src" "$work"; chmod -R u+w "$work"
  (cd "$work" && patch -p1 --quiet < "$patch")
  timed_build "$name" bash -c "cd '$work' && go build -trimpath -ldflags '-s -w' -o '$bin/$name.tmp' $package && mv '$bin/$name.tmp' '$bin/$name'"
  cp "$patch" "$bin/$name.patch"
}

build_coredns() {
  missing coredns || return 0
  timed_build coredns bash -c "cd '$here/gomod/coredns' && go build -trimpath -ldflags '-s -w' -o '$bin/coredns.tmp' . && mv '$bin/coredns.tmp' '$bin/coredns'"
}

build_standin() {  # rebuilt whenever its source is newer than the binary
  if missing standin || [[ "$here/realnode/standin/main.go" -nt "$bin/standin" ]]; then
    timed_build standin bash -c "cd '$here/realnode/standin' && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o '$bin/standin.tmp' . && mv '$bin/standin.tmp' '$bin/standin'"
  fi
}

build_kueue() {  # optional (hack/cluster.sh up --kueue): Kueue's manager, from its Go module
  # With one patch (hack/sim/kueue-metrics-cert-dir.patch): without its internal certificates, Kueue reads its
  # metrics certificate from /etc/kueue/metrics/certs only; KUEUE_METRICS_CERT_DIR moves it into the cluster's state,
  # so that nothing is written to the host's /etc.
  build_patched kueue "sigs.k8s.io/kueue@$KUEUE_VERSION" "$here/sim/kueue-metrics-cert-dir.patch" ./cmd/kueue
}

build_keda() {  # optional (hack/cluster.sh up --keda): KEDA's operator and its external-metrics adapter
  local src work name package
  src=$(go mod download -json "github.com/kedacore/keda/v2@$KEDA_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  for name in keda-operator keda-adapter; do
    missing "$name" || continue
    package=./cmd/operator; [[ $name == keda-adapter ]] && package=./cmd/adapter
    timed_build "$name" bash -c "cd '$src' && go build -trimpath -ldflags '-s -w' -o '$bin/$name.tmp' $package && mv '$bin/$name.tmp' '$bin/$name'"
  done
}

build_traefik() {  # optional (hack/cluster.sh up --gateway): built inside its module, so its own replaces apply
  local src
  missing traefik || return 0
  src=$(go mod download -json "github.com/traefik/traefik/v3@$TRAEFIK_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  timed_build traefik bash -c "cd '$src' && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o '$bin/traefik.tmp' ./cmd/traefik && mv '$bin/traefik.tmp' '$bin/traefik'"
}

real_node=false
kueue=false
keda=false
traefik=false
for arg in "$@"; do
  case "$arg" in
    --real-node) real_node=true ;;
    --kueue) kueue=true ;;
    --keda) keda=true ;;
    --traefik) traefik=true ;;
    *) log "unknown argument: $arg"; exit 2 ;;
  esac
done

command -v go >/dev/null || { log "go is not on PATH: install Go 1.25 or later, or set KUBEBUILDER_ASSETS"; exit 1; }
start=$SECONDS
build_kwok
build_etcd
build_scheduler_plugins
wanted=("${CONTROL_PLANE_BINARIES[@]}")
if [[ $real_node == true ]]; then
  build_kubernetes kubelet kube-proxy
  build_coredns
  build_standin
  wanted+=("${REAL_NODE_BINARIES[@]}")
else
  build_kubernetes
fi
if [[ $kueue == true ]]; then
  build_kueue
  wanted+=(kueue)
fi
if [[ $keda == true ]]; then
  build_keda
  wanted+=(keda-operator keda-adapter)
fi
if [[ $traefik == true ]]; then
  build_traefik
  wanted+=(traefik)
fi
for n in "${wanted[@]}"; do
  [[ -x "$bin/$n" ]] || { log "missing after build: $bin/$n"; exit 1; }
done
log "all binaries ready in $bin ($((SECONDS - start))s)"
