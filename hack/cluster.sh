#!/usr/bin/env bash
# The local control plane: etcd, kube-apiserver, kube-controller-manager, a scheduler and KWOK (simulated kubelets),
# run by kwokctl's binary runtime from binaries built by hack/build-binaries.sh.
#
#   hack/cluster.sh up   [--name N] [--profile gang|stock] [--gpu-nodes N] [--cpu-nodes N] [--model NAME]... [--bench]
#                        [--real-node | --real-nodes N] [--kueue] [--keda] [--gateway]
#   hack/cluster.sh down [--name N]
#   hack/cluster.sh env  [--name N]      prints `export KUBECONFIG=...` for a shell to eval
#   hack/cluster.sh status [--name N]    exits non-zero unless every component is alive
#
# Profiles:
#   gang  (default) the scheduler-plugins scheduler (profiles `default-scheduler` and `scheduler-plugins-scheduler`,
#         Coscheduling), the PodGroup and ElasticQuota CRDs, and the scheduler-plugins PodGroup controller.
#   stock the stock kube-scheduler and no PodGroup CRD (the coscheduling scheduler schedules nothing without it).
#
# --bench tunes the cluster for load, as KWOK's own benchmark does: API server in-flight limits off, the
#         controller-manager, scheduler and PodGroup controller at 5000 QPS (burst 10000), a /16 Service range, and
#         an audit log of every write at logs/audit.log (hack/bench.sh counts the controller's writes from it).
#         Without it, logs/audit.log holds the requests of omenative's ServiceAccount only (the RBAC check reads them).
# --real-node adds one real node (containerd, kubelet, kube-proxy, CoreDNS; hack/realnode/node.sh) that runs real
#         containers from locally built stand-in images. The API server then listens on every address, so that pods
#         reach it; KWOK manages only the simulated nodes. One per machine: it changes the host's network.
# --real-nodes N adds N of them (up to 8), real-node-1 .. real-node-N, each with its own network (its own port
#         8080 for host-network pods: the prefill-decode guide needs one node per engine and decoder pod).
# --kueue adds Kueue (sigs.k8s.io/kueue, built from its Go module) with its `pod` integration: its CRDs, its manager
#         as a process of the cluster (state in kueue/, log in logs/kueue.log) and its webhooks for pods that name a
#         queue and for its own objects. Given at creation; `up` restarts it when it stopped.
# --keda adds KEDA (github.com/kedacore/keda/v2, its operator and metrics adapter built from its Go module): its
#         CRDs, both as processes of the cluster (state in keda/, logs in logs/keda-*.log), and the adapter
#         registered as the external metrics API (an APIService to a Service whose endpoint is this machine's own
#         address: the API server routes aggregated APIs to endpoints, as there is no kube-proxy). KEDA's HPAs then
#         scale on the triggers' metrics. Given at creation; `up` restarts it when it stopped.
# --gateway adds a Gateway API gateway: the Gateway API's standard CRDs (sigs.k8s.io/gateway-api), Traefik
#         (github.com/traefik/traefik/v3, built from its Go module) as a process of the cluster with its Gateway API
#         provider (log in logs/traefik.log), its GatewayClass `traefik` and the Gateway `omenative-gateway/public`
#         with one HTTP listener on a free port of this machine (the Gateway's status.addresses, and gateway/address
#         in the cluster's folder, name it). Routes reach pods at their addresses, so requests are answered on a real node.
#         Given at creation; `up` restarts it when it stopped.
#
# `up` is idempotent: an existing healthy cluster is kept; a stopped one is started again.
# State lives in $OMENATIVE_STATE_DIR (default: .work/ in the checkout), so two checkouts never share a cluster,
# and kwokctl picks free ports for every component.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
# shellcheck source=lib/versions.sh
source "$here/lib/versions.sh"
# shellcheck source=realnode/lib.sh
source "$here/realnode/lib.sh"

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

cmd="${1:-}"; [[ -n "$cmd" ]] && shift
name="${OMENATIVE_CLUSTER:-omenative}"
profile=gang
gpu_nodes=2
cpu_nodes=1
models=()
bench=false
real_node=false
real_nodes=1
kueue=false
keda=false
gateway=false
while [[ $# -gt 0 ]]; do
  case "$1" in
    --name) name=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --gpu-nodes) gpu_nodes=$2; shift 2 ;;
    --cpu-nodes) cpu_nodes=$2; shift 2 ;;
    --model) models+=("$2"); shift 2 ;;
    --bench) bench=true; shift ;;
    --real-node) real_node=true; shift ;;
    --real-nodes) real_node=true; real_nodes=$2; shift 2 ;;
    --kueue) kueue=true; shift ;;
    --keda) keda=true; shift ;;
    --gateway) gateway=true; shift ;;
    -h|--help) sed -n '2,42p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1" ;;
  esac
done
[[ "$profile" == gang || "$profile" == stock ]] || die "--profile must be gang or stock"

state_dir="${OMENATIVE_STATE_DIR:-$repo/.work}"
export KWOK_WORKDIR="$state_dir/kwok"
cluster_dir="$KWOK_WORKDIR/clusters/$name"
kubeconfig="$cluster_dir/kubeconfig.yaml"
bin="$OMENATIVE_BIN_DIR"
kwokctl() { "$bin/kwokctl" "$@"; }
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

module_dir() { go mod download -json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'; }

# Every component kwokctl started, plus the PodGroup controller, must be running: kwokctl reports a cluster
# ready from /readyz even when the scheduler exited at start (for example over a bad configuration).
# A process that exited but was not reaped yet (a zombie: some container init processes reap late) still answers
# `kill -0`; it counts as dead.
alive() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ -n "$state" && "$state" != Z* ]]
}

components_alive() {
  local pidfile ok=0 n
  [[ -d "$cluster_dir/pids" ]] || return 1
  for pidfile in "$cluster_dir"/pids/*.pid; do
    [[ -e "$pidfile" ]] || return 1
    n=$(basename "$pidfile" .pid)
    if ! alive "$(cat "$pidfile")"; then
      log "component $n is not running (log: $cluster_dir/logs/$n.log)"
      ok=1
    fi
  done
  return $ok
}

api_ready() { kubectl get --raw /readyz >/dev/null 2>&1; }

write_config() {
  local config="$state_dir/$name.kwokctl.yaml" kwok_src node_stages
  kwok_src=$(module_dir "sigs.k8s.io/kwok@$KWOK_VERSION")
  {
    cat <<EOF
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  runtime: binary
  bindAddress: 127.0.0.1
  kubeAuthorization: true
  kubeApiserverBinary: $bin/kube-apiserver
  kubeControllerManagerBinary: $bin/kube-controller-manager
  kubeSchedulerBinary: $bin/$([[ $profile == gang ]] && echo coscheduling-scheduler || echo kube-scheduler)
  kwokControllerBinary: $bin/kwok
  etcdBinary: $bin/etcd
  kubectlBinary: $bin/kubectl
EOF
    if [[ $real_node == true ]]; then
      # Pods reach the API server through the `kubernetes` Service (the first Service address) and the bridge.
      cat <<EOF
  kubeApiserverCertSANs: [$SERVICE_IP, $BRIDGE_IP]
EOF
    fi
    if [[ $bench == true ]]; then
      cat <<EOF
  disableQPSLimits: true
  kubeAuditPolicy: $here/sim/audit-writes.yaml
EOF
    else
      cat <<EOF
  kubeAuditPolicy: $here/sim/audit-omenative.yaml
EOF
    fi
    cat <<EOF
componentsPatches:
- name: kube-apiserver
  extraArgs:
  # As hardened clusters run it: setting blockOwnerDeletion on an owner reference needs update on the owner's
  # finalizers, which deploy/base/rbac.yaml grants omenative for the owners it names.
  - key: enable-admission-plugins
    value: OwnerReferencesPermissionEnforcement
  # Watches of ConfigMaps go to etcd, not the watch cache, so a test can force 410 Gone by compacting etcd.
  - key: watch-cache-sizes
    value: configmaps#0
$(if [[ $bench == true ]]; then
  # The API server rotates its audit log at 100 MB (lumberjack's default), and hack/bench.sh reads writes from an
  # offset in one file: a long phase must not start a new one.
  printf '  - key: audit-log-maxsize\n    value: "100000"\n'
fi)
$(if [[ $bench == true || $real_node == true ]]; then
  # Services for hundreds of InferenceServices do not fit the API server's default /24.
  printf '  - key: service-cluster-ip-range\n    value: %s\n' "$SERVICE_CIDR"
fi)
$(if [[ $keda == true ]]; then
  # Aggregated APIs (KEDA's external metrics) are reached at their Service's endpoints, not its cluster IP.
  printf '  - key: enable-aggregator-routing\n    value: "true"\n'
fi)
$(if [[ $real_node == true ]]; then
  printf '  - key: bind-address\n    value: 0.0.0.0\n  - key: advertise-address\n    value: %s\n' "$BRIDGE_IP"
  # logs, exec and port-forward reach the kubelet at the node's address (its name resolves nowhere).
  printf '  - key: kubelet-preferred-address-types\n    value: InternalIP,Hostname\n'
  # KWOK plays only the simulated nodes' kubelets (they carry this annotation), never the real one.
  printf -- '- name: kwok-controller\n  extraArgs:\n  - key: manage-all-nodes\n    value: "false"\n'
  printf '  - key: manage-nodes-with-annotation-selector\n    value: kwok.x-k8s.io/node=fake\n'
fi)
- name: kube-controller-manager
  extraArgs:
  # One controller-manager runs here and nothing restarts it: with leader election on, a lease renewal that a busy
  # machine delays past its 10 s deadline makes it exit, and the cluster goes on without a garbage collector,
  # ServiceAccounts or EndpointSlices (CI saw 11 later tests fail so, with 403s for the missing default account).
  - key: leader-elect
    value: "false"
EOF
    if [[ $bench != true ]]; then
      # Tests watch the HorizontalPodAutoscaler act; the default 15 s period only makes them slower. A benchmark
      # keeps the defaults: a 2 s period syncs hundreds of autoscalers 7.5 times as often as a real cluster does.
      cat <<EOF
  - key: horizontal-pod-autoscaler-sync-period
    value: 2s
  - key: horizontal-pod-autoscaler-downscale-stabilization
    value: 5s
EOF
    fi
    if [[ $profile == gang ]]; then
      cat <<EOF
components:
- name: podgroup-controller
  binary: $bin/podgroup-controller
  links: [kube-apiserver]
  workDir: $cluster_dir
  args:
  - --kubeconfig=$cluster_dir/kubeconfig.yaml
  - --metricsAddr=0
  - --probeAddr=0
EOF
      if [[ $bench == true ]]; then printf '  - --qps=5000\n  - --burst=10000\n  - --workers=8\n'; fi
    fi
    # Stages in this file replace all of KWOK's defaults, node stages too, so include the module's node stages.
    for node_stages in "$kwok_src/kustomize/stage/node/fast/node-initialize.yaml" \
                       "$kwok_src/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml"; do
      printf -- '---\n'; cat "$node_stages"
    done
    printf -- '---\n'; cat "$here/sim/pod-stages.yaml"
  } > "$config"
  echo "$config"
}

# The gang profile's scheduler configuration; --bench lifts its client's QPS (a config file makes the scheduler
# ignore kwokctl's --kube-api-qps flag).
scheduler_config() {
  if [[ $bench != true ]]; then echo "$here/sim/scheduler-config.yaml"; return; fi
  local out="$state_dir/$name.scheduler-config.yaml"
  { cat "$here/sim/scheduler-config.yaml"; printf 'clientConnection:\n  qps: 5000\n  burst: 10000\n'; } > "$out"
  echo "$out"
}

install_podgroup_crds() {
  local sp
  sp=$(module_dir "sigs.k8s.io/scheduler-plugins@$SCHEDULER_PLUGINS_VERSION")
  # The PodGroup CRD is the one the scheduler is built with; the controller also watches ElasticQuotas.
  kubectl apply --server-side -f "$sp/manifests/coscheduling/crd.yaml" -f "$sp/manifests/capacityscheduling/crd.yaml" >/dev/null
  kubectl wait --for=condition=Established crd/podgroups.scheduling.x-k8s.io crd/elasticquotas.scheduling.x-k8s.io --timeout=30s >/dev/null
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Kueue's manager as a process of the cluster: its CRDs first (it does not start without them), a serving
# certificate for 127.0.0.1 (no Service fronts it), its configuration, then its webhook configurations.
start_kueue() {
  local dir="$cluster_dir/kueue" src port health i
  src=$(module_dir "sigs.k8s.io/kueue@$KUEUE_VERSION")
  mkdir -p "$dir" "$cluster_dir/pids" "$cluster_dir/logs"
  if [[ -f "$cluster_dir/pids/kueue.pid" ]] && alive "$(cat "$cluster_dir/pids/kueue.pid")"; then
    port=$(cat "$dir/port")
  else
    kubectl apply --server-side --force-conflicts -f "$src/config/components/crd/bases" >/dev/null
    for i in $(seq 1 20); do  # kubectl wait fails at once on a CRD the API server has not given conditions yet
      kubectl wait --for=condition=Established --timeout=60s crd/workloads.kueue.x-k8s.io \
        crd/clusterqueues.kueue.x-k8s.io crd/localqueues.kueue.x-k8s.io crd/resourceflavors.kueue.x-k8s.io \
        >/dev/null 2>&1 && break
      [[ $i == 20 ]] && die "Kueue's CRDs were not established"
      sleep 0.5
    done
    kubectl create namespace kueue-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
    if [[ ! -f "$dir/tls.crt" ]]; then
      openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj "/CN=kueue-webhook" \
        -addext "subjectAltName=IP:127.0.0.1" -keyout "$dir/tls.key" -out "$dir/tls.crt" 2>/dev/null
    fi
    port=$(free_port); health=$(free_port)
    echo "$port" > "$dir/port"
    printf '%s\n' \
      "apiVersion: config.kueue.x-k8s.io/v1beta2" "kind: Configuration" "namespace: kueue-system" \
      "health:" "  healthProbeBindAddress: 127.0.0.1:$health" "metrics:" '  bindAddress: "0"' \
      "webhook:" "  host: 127.0.0.1" "  port: $port" "  certDir: $dir" "leaderElection:" "  leaderElect: false" \
      "internalCertManagement:" "  enable: false" "manageJobsWithoutQueueName: false" \
      "integrations:" '  frameworks: ["pod"]' > "$dir/config.yaml"
    # The visibility API server needs an aggregated API registration and certificates of its own: not used here.
    KUEUE_METRICS_CERT_DIR="$dir" "$bin/kueue" --config="$dir/config.yaml" --kubeconfig="$kubeconfig" \
      --feature-gates=VisibilityOnDemand=false >>"$cluster_dir/logs/kueue.log" 2>&1 &
    echo $! > "$cluster_dir/pids/kueue.pid"
    for i in $(seq 1 120); do
      python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$health/readyz', timeout=2)" \
        2>/dev/null && break
      alive "$(cat "$cluster_dir/pids/kueue.pid")" || die "kueue exited at start; see $cluster_dir/logs/kueue.log"
      [[ $i == 120 ]] && die "kueue did not become ready; see $cluster_dir/logs/kueue.log"
      sleep 0.5
    done
  fi
  kubectl create --dry-run=client -o json -f "$src/config/components/webhook/manifests.yaml" \
    | python3 "$here/sim/kueue-webhooks.py" "$port" "$dir/tls.crt" \
    | kubectl apply --server-side --force-conflicts -f - >/dev/null
  log "kueue $KUEUE_VERSION serving (webhooks on 127.0.0.1:$port, log: $cluster_dir/logs/kueue.log)"
}

# This machine's first non-loopback IPv4 address: the endpoint of KEDA's metrics API (an Endpoints address may not
# be a loopback one).
host_address() {
  python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("203.0.113.1", 9)); print(s.getsockname()[0])'
}

wait_http() {  # url, pid file, what
  local i
  for i in $(seq 1 120); do
    python3 -c "import ssl, urllib.request; urllib.request.urlopen('$1', timeout=2, context=ssl._create_unverified_context())" \
      2>/dev/null && return 0
    alive "$(cat "$2")" || die "$3 exited at start; see $cluster_dir/logs"
    sleep 0.5
  done
  die "$3 did not become ready; see $cluster_dir/logs"
}

# KEDA's operator and metrics adapter as processes of the cluster: its CRDs, one CA and certificate for the
# operator's gRPC metrics service and the adapter (as KEDA's own certificate rotation makes them), and the adapter
# registered as v1beta1.external.metrics.k8s.io.
start_keda() {
  local dir="$cluster_dir/keda" src address grpc adapter health metrics i
  src=$(module_dir "github.com/kedacore/keda/v2@$KEDA_VERSION")
  mkdir -p "$dir/certs" "$cluster_dir/pids" "$cluster_dir/logs"
  address=$(host_address)
  if ! { [[ -f "$cluster_dir/pids/keda-operator.pid" ]] && alive "$(cat "$cluster_dir/pids/keda-operator.pid")"; }; then
    kubectl apply --server-side --force-conflicts -f "$src/config/crd/bases" >/dev/null
    for i in $(seq 1 20); do
      kubectl wait --for=condition=Established --timeout=60s crd/scaledobjects.keda.sh \
        crd/triggerauthentications.keda.sh >/dev/null 2>&1 && break
      [[ $i == 20 ]] && die "KEDA's CRDs were not established"
      sleep 0.5
    done
    kubectl create namespace keda --dry-run=client -o yaml | kubectl apply -f - >/dev/null
    if [[ ! -f "$dir/certs/tls.crt" ]]; then
      openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj "/CN=keda-ca" -keyout "$dir/ca.key" \
        -out "$dir/certs/ca.crt" 2>/dev/null
      openssl req -newkey rsa:2048 -nodes -subj "/CN=keda-operator" -keyout "$dir/certs/tls.key" \
        -out "$dir/tls.csr" 2>/dev/null
      printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' \
        "DNS:keda-operator.keda.svc.cluster.local,DNS:keda-metrics-apiserver.keda.svc,DNS:localhost,IP:127.0.0.1,IP:$address" \
        > "$dir/ext.cnf"
      openssl x509 -req -in "$dir/tls.csr" -CA "$dir/certs/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
        -days 365 -extfile "$dir/ext.cnf" -out "$dir/certs/tls.crt" 2>/dev/null
    fi
    grpc=$(free_port); health=$(free_port); metrics=$(free_port); adapter=$(free_port)
    printf '%s %s\n' "$adapter" "$grpc" > "$dir/ports"
    KUBECONFIG="$kubeconfig" POD_NAMESPACE=keda KEDA_CLUSTER_OBJECT_NAMESPACE=keda WATCH_NAMESPACE="" \
      "$bin/keda-operator" --leader-elect=false --metrics-bind-address="127.0.0.1:$metrics" \
      --health-probe-bind-address="127.0.0.1:$health" --metrics-service-bind-address="127.0.0.1:$grpc" \
      --cert-dir="$dir/certs" --enable-cert-rotation=false --enable-webhook-patching=false \
      --enable-apiservice-patching=false --ca-dir="$dir/certs" --zap-log-level=info \
      >>"$cluster_dir/logs/keda-operator.log" 2>&1 &
    echo $! > "$cluster_dir/pids/keda-operator.pid"
    wait_http "http://127.0.0.1:$health/readyz" "$cluster_dir/pids/keda-operator.pid" keda-operator
  fi
  read -r adapter grpc < "$dir/ports"
  if ! { [[ -f "$cluster_dir/pids/keda-adapter.pid" ]] && alive "$(cat "$cluster_dir/pids/keda-adapter.pid")"; }; then
    KUBECONFIG="$kubeconfig" POD_NAMESPACE=keda KEDA_CLUSTER_OBJECT_NAMESPACE=keda WATCH_NAMESPACE="" \
      "$bin/keda-adapter" --secure-port="$adapter" --bind-address="$address" --cert-dir="$dir/certs" \
      --tls-cert-file="$dir/certs/tls.crt" --tls-private-key-file="$dir/certs/tls.key" \
      --metrics-service-address="127.0.0.1:$grpc" --port="$(free_port)" --lister-kubeconfig="$kubeconfig" \
      --authentication-kubeconfig="$kubeconfig" --authorization-kubeconfig="$kubeconfig" \
      >>"$cluster_dir/logs/keda-adapter.log" 2>&1 &
    echo $! > "$cluster_dir/pids/keda-adapter.pid"
    wait_http "https://$address:$adapter/readyz" "$cluster_dir/pids/keda-adapter.pid" keda-adapter
  fi
  kubectl apply --server-side --force-conflicts -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: keda-metrics-apiserver, namespace: keda}
spec:
  ports: [{name: https, port: 443, targetPort: $adapter}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: keda-metrics-apiserver, namespace: keda}
subsets:
- addresses: [{ip: "$address"}]
  ports: [{name: https, port: $adapter}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.external.metrics.k8s.io}
spec:
  service: {name: keda-metrics-apiserver, namespace: keda, port: 443}
  group: external.metrics.k8s.io
  version: v1beta1
  caBundle: $(base64 -w0 < "$dir/certs/ca.crt")
  groupPriorityMinimum: 100
  versionPriority: 100
EOF
  for i in $(seq 1 120); do
    kubectl get --raw /apis/external.metrics.k8s.io/v1beta1 >/dev/null 2>&1 && break
    [[ $i == 120 ]] && die "the external metrics API (KEDA's adapter) is not served; see $cluster_dir/logs/keda-adapter.log"
    sleep 0.5
  done
  log "keda $KEDA_VERSION serving (external metrics from $address:$adapter, logs: $cluster_dir/logs/keda-*.log)"
}

# Traefik as the cluster's Gateway API gateway: the standard CRDs, its GatewayClass and one Gateway whose listener
# port is its web entry point's (Traefik matches the two by port), then the process.
start_gateway() {
  local dir="$cluster_dir/gateway" src port ping address
  src=$(module_dir "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION")
  mkdir -p "$dir" "$cluster_dir/pids" "$cluster_dir/logs"
  [[ -f "$dir/ports" ]] || printf '%s %s\n' "$(free_port)" "$(free_port)" > "$dir/ports"
  read -r port ping < "$dir/ports"
  address=$(host_address)
  if ! { [[ -f "$cluster_dir/pids/traefik.pid" ]] && alive "$(cat "$cluster_dir/pids/traefik.pid")"; }; then
    local crd
    for crd in "$src"/config/crd/standard/gateway.networking.k8s.io_*.yaml; do
      [[ $crd == *vap_* ]] || kubectl apply --server-side --force-conflicts -f "$crd" >/dev/null
    done
    kubectl wait --for=condition=Established --timeout=60s crd/gatewayclasses.gateway.networking.k8s.io \
      crd/gateways.gateway.networking.k8s.io crd/httproutes.gateway.networking.k8s.io >/dev/null
    kubectl create namespace omenative-gateway --dry-run=client -o yaml | kubectl apply -f - >/dev/null
    kubectl apply --server-side --force-conflicts -f - >/dev/null <<EOF
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: traefik}
spec: {controllerName: traefik.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: public, namespace: omenative-gateway}
spec:
  gatewayClassName: traefik
  listeners:
  - {name: web, protocol: HTTP, port: $port, allowedRoutes: {namespaces: {from: All}}}
EOF
    KUBECONFIG="$kubeconfig" "$bin/traefik" --global.checkNewVersion=false --global.sendAnonymousUsage=false \
      --entryPoints.web.address=":$port" --entryPoints.ping.address="127.0.0.1:$ping" --ping=true \
      --ping.entryPoint=ping --providers.kubernetesgateway=true \
      --providers.kubernetesgateway.statusAddress.ip="$address" --log.level=INFO \
      --log.filePath="$cluster_dir/logs/traefik.log" --accessLog.filePath="$cluster_dir/logs/traefik-access.log" \
      >>"$cluster_dir/logs/traefik.out" 2>&1 &
    echo $! > "$cluster_dir/pids/traefik.pid"
    wait_http "http://127.0.0.1:$ping/ping" "$cluster_dir/pids/traefik.pid" traefik
  fi
  printf '%s:%s\n' "$address" "$port" > "$dir/address"
  log "traefik $TRAEFIK_VERSION serving Gateway omenative-gateway/public at $address:$port (log: $cluster_dir/logs/traefik.log)"
}

create_nodes() {
  local args=(--gpu "$gpu_nodes" --cpu "$cpu_nodes") m
  for m in "${models[@]+"${models[@]}"}"; do args+=(--model "$m"); done
  [[ $gpu_nodes == 0 && $cpu_nodes == 0 ]] && return 0
  python3 "$here/sim/nodes.py" "${args[@]}" | kubectl apply --server-side -f - >/dev/null
  # KWOK readies nodes within seconds; on a loaded machine (a test run beside it) it took over a minute.
  kubectl wait --for=condition=Ready node -l sim.omenative.io/node --timeout=180s >/dev/null
}

up() {
  local start=$SECONDS config reason build=()
  [[ $kueue == true || -d "$cluster_dir/kueue" ]] && build+=(--kueue)
  [[ $keda == true || -d "$cluster_dir/keda" ]] && build+=(--keda)
  [[ $gateway == true || -d "$cluster_dir/gateway" ]] && build+=(--traefik)
  if [[ $real_node == true ]]; then
    reason=$(realnode_supported) || die "this machine cannot run a real node: $reason"
    build+=(--real-node)
  fi
  "$here/build-binaries.sh" "${build[@]+"${build[@]}"}"
  if [[ $kueue == true && -f "$kubeconfig" && ! -d "$cluster_dir/kueue" ]]; then
    die "cluster $name was created without --kueue: run hack/cluster.sh down --name $name first"
  fi
  if [[ $keda == true && -f "$kubeconfig" && ! -d "$cluster_dir/keda" ]]; then
    die "cluster $name was created without --keda: run hack/cluster.sh down --name $name first"
  fi
  if [[ -f "$kubeconfig" ]]; then
    if ! api_ready || ! components_alive 2>/dev/null; then
      log "starting the stopped components of cluster $name"
      # kwokctl starts only components whose pid file names no live process; forget the dead ones.
      local pidfile
      for pidfile in "$cluster_dir"/pids/*.pid; do
        alive "$(cat "$pidfile")" || rm -f "$pidfile"
      done
      kwokctl start cluster --name "$name" >&2
    fi
  else
    mkdir -p "$KWOK_WORKDIR/clusters"
    config=$(write_config)
    log "creating cluster $name (profile $profile) in $cluster_dir"
    local args=(create cluster --name "$name" --config "$config" --kubeconfig "" --wait 60s)
    [[ $profile == gang ]] && args+=(--kube-scheduler-config "$(scheduler_config)")
    kwokctl "${args[@]}" >&2
  fi
  for _ in $(seq 1 60); do api_ready && break; sleep 0.5; done
  api_ready || die "kube-apiserver did not become ready; logs in $cluster_dir/logs"
  [[ $profile == gang ]] && install_podgroup_crds
  if [[ $kueue == true || -d "$cluster_dir/kueue" ]]; then start_kueue; fi
  if [[ $keda == true || -d "$cluster_dir/keda" ]]; then start_keda; fi
  if [[ $gateway == true || -d "$cluster_dir/gateway" ]]; then start_gateway; fi
  create_nodes
  if [[ $real_node == true ]]; then
    REAL_NODE_MODELS="${models[*]+"${models[*]}"}" "$here/realnode/node.sh" up "$cluster_dir" "$real_nodes"
  fi
  # A component that dies right after start (the scheduler on a bad configuration) is caught here.
  sleep 1
  components_alive || die "a component is not running; see the logs named above"
  log "cluster $name is up in $((SECONDS - start))s: $(kubectl get nodes --no-headers | wc -l) nodes"
  log "use it with: eval \"\$(hack/cluster.sh env${name:+ --name $name})\""
}

down() {
  # The real node first: its kubelet must not outlive the API server, and its host changes must go.
  if [[ -d "$cluster_dir/realnode" ]]; then
    "$here/realnode/node.sh" down "$cluster_dir"
  fi
  # kwokctl stops only what it started: the gateway is ours to stop.
  if [[ -f "$cluster_dir/pids/traefik.pid" ]]; then
    kill "$(cat "$cluster_dir/pids/traefik.pid")" 2>/dev/null || true
  fi
  if [[ -d "$cluster_dir" ]]; then
    kwokctl delete cluster --name "$name" >&2 || true
  fi
  rm -rf "$cluster_dir" "$state_dir/$name.kwokctl.yaml" "$state_dir/$name.scheduler-config.yaml"
  # Nothing started for this cluster may outlive it: wait for what kwokctl stopped, then kill what is left.
  local left i
  for i in $(seq 1 50); do
    left=$(pgrep -f -- "$cluster_dir/" || true)
    [[ -z "$left" ]] && break
    [[ $i == 20 ]] && { log "terminating leftover processes: $left"; kill $left 2>/dev/null || true; }
    [[ $i == 40 ]] && { log "killing leftover processes: $left"; kill -9 $left 2>/dev/null || true; }
    sleep 0.2
  done
  [[ -z "$left" ]] || die "processes of cluster $name are still running: $left"
  log "cluster $name is down"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  env) [[ -f "$kubeconfig" ]] || die "cluster $name is not up (run hack/cluster.sh up)"; echo "export KUBECONFIG=$kubeconfig" ;;
  status) api_ready && components_alive ;;
  *) sed -n '2,42p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
