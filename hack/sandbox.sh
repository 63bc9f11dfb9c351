#!/usr/bin/env bash
# A local sandbox: the control plane with simulated GPU nodes, omenative running against it from the local
# kubeconfig (with its admission webhook), and the two guides' examples, Ready.
#
#   hack/sandbox.sh            start it, print the commands to try next, and stay until Ctrl-C (which tears it down)
#   hack/sandbox.sh --detach   start it and exit 0 once the examples are Ready (non-zero with the reason if not)
#   hack/sandbox.sh env        print `export KUBECONFIG=... PATH=...` for a shell to eval (kubectl, kubectl ome)
#   hack/sandbox.sh down       tear a detached sandbox down
#
# Options (before or after --detach):
#   --real-node    add a real node (hack/cluster.sh --real-node, docs/real-node.md); the multi-node example runs on it
#                  as real processes, so step 4's port-forward and curl get an answer
#   --in-cluster   with --real-node: omenative runs as pods from deploy/overlays/dev (image built without a
#                  daemon) instead of a local process
#   --with-prometheus  also run a Prometheus server (Debian's package, installed when missing) that scrapes
#                  omenative, and print its URL and a query to try
#   --kueue        also run Kueue (hack/cluster.sh --kueue) with a ClusterQueue `gpus` of 8 GPUs and a LocalQueue
#                  `gpu-queue` in the examples' namespaces: label an InferenceService kueue.x-k8s.io/queue-name=gpu-queue
#
# The prefill-decode example uses OME's catalog runtime and model, read from $OME_CATALOG (a clone's config/
# folder; default ../shared/thirdparty/ome/config); without it, the project's own, written from the guide
# (examples/prefill-decode/).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
# shellcheck source=lib/venv.sh
source "$here/lib/venv.sh"
# shellcheck source=realnode/lib.sh
source "$here/realnode/lib.sh"

name="${OMENATIVE_SANDBOX:-omenative-sandbox}"
state_dir="${OMENATIVE_STATE_DIR:-$repo/.work}"
sandbox="$state_dir/sandbox-$name"
catalog="${OME_CATALOG:-${OMENATIVE_SHARED:-$repo/../shared}/thirdparty/ome/config}"
timeout="${SANDBOX_READY_TIMEOUT:-300s}"
export OMENATIVE_STATE_DIR="$state_dir"

log() { printf '[sandbox %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

cluster() { "$here/cluster.sh" "$@" --name "$name"; }

stop_controller() {
  local pid
  [[ -f "$sandbox/omenative.pid" ]] || return 0
  pid=$(cat "$sandbox/omenative.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$sandbox/omenative.pid"
}

stop_prometheus() {
  local pid
  [[ -f "$sandbox/prometheus.pid" ]] || return 0
  pid=$(cat "$sandbox/prometheus.pid")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$sandbox/prometheus.pid"
}

down() {
  stop_prometheus
  stop_controller
  cluster down >/dev/null 2>&1 || true
  rm -rf "$sandbox"
  log "sandbox $name is down"
}

# The folder of the binaries hack/build-binaries.sh made (kubectl among them).
bin_dir() { bash -c "source '$here/lib/versions.sh' && echo \$OMENATIVE_BIN_DIR"; }

# KUBECONFIG, and a PATH that finds the kubectl built here first and kubectl-ome (in .venv/bin, last, so the venv's
# python does not shadow the user's), so `kubectl ome` works in the shell that evals it.
shell_env() {
  local kubeconfig bin
  kubeconfig=$(cluster env) || return 1
  bin=$(bin_dir)
  printf '%s PATH=%s:$PATH:%s\n' "$kubeconfig" "$bin" "$repo/.venv/bin"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_ready() {  # kind/name namespace
  kubectl wait --for=condition=Ready "$1" -n "$2" --timeout="$timeout" >&2 || {
    log "$1 in $2 is not Ready after $timeout; last state:"
    kubectl get inferencereplicas,pods -n "$2" -o wide >&2 || true
    return 1
  }
}

start_local() {
  local metrics health webhook
  metrics=$(free_port); health=$(free_port); webhook=$(free_port)
  log "starting omenative (log: $sandbox/omenative.log)"
  nohup setsid "$repo/.venv/bin/omenative" run --kubeconfig "$KUBECONFIG" --log-format json \
    --metrics-bind-address "127.0.0.1:$metrics" --health-probe-bind-address "127.0.0.1:$health" \
    --webhook-bind-address "127.0.0.1:$webhook" --webhook-url "https://127.0.0.1:$webhook" \
    --migration-max-per-window 10 --migration-window 1h --migration-max-in-flight 3 \
    >"$sandbox/omenative.log" 2>&1 < /dev/null &
  echo $! > "$sandbox/omenative.pid"
  echo "$metrics" > "$sandbox/metrics.port"
  for _ in $(seq 1 150); do
    curl -sf "http://127.0.0.1:$health/readyz" >/dev/null 2>&1 && break
    kill -0 "$(cat "$sandbox/omenative.pid")" 2>/dev/null || die "omenative exited: $(tail -5 "$sandbox/omenative.log")"
    sleep 0.2
  done
  curl -sf "http://127.0.0.1:$health/readyz" >/dev/null || die "omenative is not ready: see $sandbox/omenative.log"
}

# omenative as pods on the real node, from deploy/overlays/dev, with an image built here and loaded into the node.
start_in_cluster() {
  log "building omenative's image and running it from deploy/overlays/dev (log: kubectl logs -n omenative-system deploy/omenative)"
  "$here/realnode/controller-image.sh" "$sandbox/omenative.tar" || return 1
  "$here/realnode/node.sh" load "$(dirname "$KUBECONFIG")" "$sandbox/omenative.tar" || return 1
  rm -f "$sandbox/omenative.tar"
  kubectl apply --server-side -k "$repo/deploy/overlays/dev" >/dev/null
  # On the real node: KWOK would report the pods Running on a simulated node without running anything.
  kubectl patch deployment omenative -n omenative-system --type merge \
    -p "{\"spec\":{\"template\":{\"spec\":{\"nodeSelector\":{\"$REAL_NODE_LABEL\":\"true\"}}}}}" >/dev/null
  kubectl rollout status deployment/omenative -n omenative-system --timeout="$timeout" >&2 || return 1
  # The status returns while the pods of the template before the patch may still be terminating: wait until they are
  # gone, so that what lists the controller's pods (Prometheus's targets below) finds only the ones that serve.
  local want pods
  want=$(kubectl get deployment omenative -n omenative-system -o jsonpath='{.spec.replicas}')
  for _ in $(seq 1 600); do
    pods=$(kubectl get pods -n omenative-system -l app.kubernetes.io/name=omenative -o name | wc -l)
    [[ "$pods" -le "$want" ]] && break
    sleep 0.2
  done
  [[ "$pods" -le "$want" ]] || { log "omenative's replaced pods are still terminating after 120s"; return 1; }
  echo in-cluster > "$sandbox/mode"
}

# Prometheus scraping omenative as job omenative-metrics (the job the production ServiceMonitor gives): the local
# process at its metrics port, or the in-cluster pods found through the API (their addresses route from the host).
start_prometheus() {
  local port config="$sandbox/prometheus.yml"
  # shellcheck source=lib/prometheus.sh
  source "$here/lib/prometheus.sh"
  ensure_prometheus || die "could not install Debian's prometheus package"
  port=$(free_port)
  if [[ -n "$in_cluster" ]]; then
    # Debian builds Prometheus without Kubernetes discovery: the pods' addresses as the sandbox started them (their
    # metrics port; pod addresses route from the host).
    local targets
    targets=$(kubectl get pods -n omenative-system -l app.kubernetes.io/name=omenative \
      -o jsonpath='{range .items[*]}"{.status.podIP}:8080",{end}')
    cat > "$config" <<EOF
global: {scrape_interval: 5s, evaluation_interval: 5s}
scrape_configs:
- job_name: omenative-metrics
  static_configs:
  - targets: [${targets%,}]
EOF
  else
    cat > "$config" <<EOF
global: {scrape_interval: 5s, evaluation_interval: 5s}
scrape_configs:
- job_name: omenative-metrics
  static_configs:
  - targets: ["127.0.0.1:$(cat "$sandbox/metrics.port")"]
EOF
  fi
  log "starting Prometheus on 127.0.0.1:$port (log: $sandbox/prometheus.log)"
  nohup setsid prometheus --config.file="$config" --storage.tsdb.path="$sandbox/prometheus-data" \
    --web.listen-address="127.0.0.1:$port" >"$sandbox/prometheus.log" 2>&1 < /dev/null &
  echo $! > "$sandbox/prometheus.pid"
  echo "$port" > "$sandbox/prometheus.port"
  for _ in $(seq 1 150); do
    curl -sf "http://127.0.0.1:$port/api/v1/targets" 2>/dev/null | grep -q '"health":"up"' && return 0
    sleep 0.2
  done
  die "Prometheus does not scrape omenative: see $sandbox/prometheus.log and http://127.0.0.1:$port/targets"
}

start() {
  local detach=$1 start=$SECONDS
  mkdir -p "$sandbox"
  log "python environment (.venv)"
  ensure_venv "$repo" "plugin" || die "could not install the package into .venv"
  log "control plane (the first run builds it from source, which takes a while)"
  cluster up --gpu-nodes 4 --cpu-nodes 1 ${real_node:+--real-node} ${kueue:+--kueue} \
    || die "the control plane did not come up"
  eval "$(cluster env)"
  export KUBECONFIG
  PATH="$(bin_dir):$PATH"
  export PATH
  kubectl apply --server-side --force-conflicts -f "$repo/manifests/crds" >/dev/null
  kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null

  stop_controller
  if [[ -n "$in_cluster" ]]; then
    start_in_cluster || return 1
  else
    start_local || return 1
  fi
  [[ -z "$with_prometheus" ]] || start_prometheus

  log "serve a multi-node model: qwen3-0-6b on a leader and a worker"
  if [[ -f "$catalog/models/Qwen/Qwen3-0.6B.yaml" ]]; then
    kubectl apply -f "$catalog/models/Qwen/Qwen3-0.6B.yaml" >/dev/null
  else
    kubectl apply -f "$repo/examples/models/qwen3-0-6b.yaml" >/dev/null
  fi
  # With a real node, the model is Ready there only, so the example runs as real processes.
  NODE_SELECTOR=${real_node:+$REAL_NODE_LABEL=true} "$here/sim/model-agent.sh" qwen3-0-6b '{"modelFormat":{"name":"safetensors","version":"1.0.0"},
    "modelFramework":{"name":"transformers","version":"4.51.0"},"modelArchitecture":"Qwen3ForCausalLM",
    "modelParameterSize":"0.6B"}' >&2
  kubectl apply -f "$repo/examples/multi-node/srt-qwen3-0-6b-multi-node.yaml" >&2
  kubectl create namespace qwen3-multi-node --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl apply -f "$repo/examples/multi-node/qwen3-multi-node-isvc.yaml" >&2

  local pd=1
  log "serve a prefill-decode model: llama-3-2-1b-instruct as engine, decoder and router"
  if [[ -f "$catalog/runtimes/srt/meta/llama-3-2-1b-instruct-pd-rt.yaml" ]]; then
    kubectl apply -f "$catalog/models/meta/Llama-3.2-1B-Instruct.yaml" \
      -f "$catalog/runtimes/srt/meta/llama-3-2-1b-instruct-pd-rt.yaml" >&2
  else
    # No OME catalog beside this clone: the project's own model and runtime, written from the guide.
    log "no OME catalog at $catalog: using examples/prefill-decode's model and runtime (set OME_CATALOG for OME's)"
    kubectl apply -f "$repo/examples/prefill-decode/llama-3-2-1b-instruct-model.yaml" \
      -f "$repo/examples/prefill-decode/srt-llama-3-2-1b-instruct-pd.yaml" >&2
  fi
  "$here/sim/model-agent.sh" llama-3-2-1b-instruct '{"modelFormat":{"name":"safetensors","version":"1.0.0"},
    "modelFramework":{"name":"transformers","version":"4.45.0.dev0"},"modelArchitecture":"LlamaForCausalLM",
    "modelParameterSize":"1.24B"}' >&2
  kubectl create namespace llama-demo --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl apply -f "$repo/examples/prefill-decode/llama-pd.yaml" >&2

  if [[ -n "$kueue" ]]; then
    # A queue to try Kueue with: 8 GPUs for the examples' namespaces; the examples themselves name no queue.
    printf '%s\n' \
      'apiVersion: kueue.x-k8s.io/v1beta2' 'kind: ResourceFlavor' 'metadata: {name: gpu}' '---' \
      'apiVersion: kueue.x-k8s.io/v1beta2' 'kind: ClusterQueue' 'metadata: {name: gpus}' 'spec:' \
      '  namespaceSelector: {}' '  resourceGroups:' '  - coveredResources: [cpu, memory, nvidia.com/gpu]' \
      '    flavors:' '    - name: gpu' '      resources:' '      - {name: cpu, nominalQuota: "512"}' \
      '      - {name: memory, nominalQuota: 4Ti}' '      - {name: nvidia.com/gpu, nominalQuota: "8"}' \
      | kubectl apply -f - >&2
    local ns
    for ns in qwen3-multi-node llama-demo; do
      kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
      printf '%s\n' 'apiVersion: kueue.x-k8s.io/v1beta2' 'kind: LocalQueue' \
        "metadata: {name: gpu-queue, namespace: $ns}" 'spec: {clusterQueue: gpus}' | kubectl apply -f - >&2
    done
  fi

  log "waiting for the examples to be Ready (up to $timeout)"
  wait_ready inferenceservice/qwen3-multi-node qwen3-multi-node || return 1
  if [[ $pd == 1 ]]; then
    wait_ready inferenceservice/llama-pd llama-demo || return 1
    kubectl wait --for=condition=DecoderReady inferenceservice/llama-pd -n llama-demo --timeout="$timeout" >&2
    kubectl wait --for=condition=RouterReady inferenceservice/llama-pd -n llama-demo --timeout="$timeout" >&2
  fi
  log "sandbox $name is Ready in $((SECONDS - start))s"
  {
    echo
    echo "Try next (kubectl and kubectl-ome from the sandbox):"
    echo "  $(shell_env)"
    echo "  kubectl get inferencereplica qwen3-multi-node-engine -n qwen3-multi-node"
    echo "  kubectl get pods -n qwen3-multi-node -l ome.io/inferenceservice=qwen3-multi-node -o 'custom-columns=NAME:.metadata.name,RANK:.spec.containers[0].env[?(@.name==\"OME_INSTANCE_POD_RANK\")].value,NODE:.spec.nodeName,READY:.status.conditions[?(@.type==\"Ready\")].status'"
    echo "  kubectl get podgroup qwen3-multi-node-engine-0 -n qwen3-multi-node -o custom-columns=NAME:.metadata.name,MIN-MEMBER:.spec.minMember"
    if [[ $pd == 1 ]]; then
      echo "  kubectl get inferencereplicas -n llama-demo"
      echo "  kubectl get pods -n llama-demo -l ome.io/inferenceservice=llama-pd -o 'custom-columns=NAME:.metadata.name,COMPONENT:.metadata.labels.component,SERVING:.status.conditions[?(@.type==\"ome.io/serving\")].status'"
      echo "  kubectl ome instance list llama-pd -n llama-demo"
      echo "  kubectl patch inferenceservice llama-pd -n llama-demo --type merge -p '{\"spec\":{\"engine\":{\"minReplicas\":3,\"maxReplicas\":3}}}'"
      echo "  kubectl wait --for=jsonpath='{.status.readyReplicas}'=3 inferencereplica/llama-pd-engine -n llama-demo --timeout=5m"
    fi
    if [[ -n "$with_prometheus" ]]; then
      echo "  # Prometheus: http://127.0.0.1:$(cat "$sandbox/prometheus.port") (Ready engine Instances, by PromQL)"
      echo "  curl -s http://127.0.0.1:$(cat "$sandbox/prometheus.port")/api/v1/query --data-urlencode 'query=sum by (component) (omenative_instances{job=\"omenative-metrics\",phase=\"Ready\"})'"
    fi
    if [[ -n "$kueue" ]]; then
      echo "  # Kueue: put the multi-node example in the queue (its new pods wait for Kueue to admit them)"
      echo "  kubectl label inferenceservice qwen3-multi-node -n qwen3-multi-node kueue.x-k8s.io/queue-name=gpu-queue"
      echo "  kubectl get workloads,clusterqueues -A"
    fi
    echo "  hack/sandbox.sh down"
    echo
  }
  if [[ $detach == 1 ]]; then
    return 0
  fi
  log "running; Ctrl-C tears the sandbox down"
  trap 'down; exit 0' INT TERM
  if [[ -n "$in_cluster" ]]; then
    while true; do sleep 1; done
  fi
  while kill -0 "$(cat "$sandbox/omenative.pid")" 2>/dev/null; do sleep 1; done
  log "omenative exited: $(tail -3 "$sandbox/omenative.log")"
  down
  return 1
}

real_node="" in_cluster="" with_prometheus="" kueue="" action=""
for arg in "$@"; do
  case "$arg" in
    --real-node) real_node=1 ;;
    --in-cluster) in_cluster=1 ;;
    --with-prometheus) with_prometheus=1 ;;
    --kueue) kueue=1 ;;
    *) [[ -z "$action" ]] || die "one of --detach, env or down"; action=$arg ;;
  esac
done
[[ -z "$in_cluster" || -n "$real_node" ]] || die "--in-cluster needs --real-node (the controller's pods run there)"

case "$action" in
  "") start 0 || { log "the sandbox did not become Ready; tearing it down"; down; exit 1; } ;;
  --detach) start 1 || { log "the sandbox is not Ready; it stays up for inspection (hack/sandbox.sh down)"; exit 1; } ;;
  env) shell_env ;;
  down) down ;;
  -h|--help) sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' ;;
  *) die "unknown argument: $1 (use --detach, env or down)" ;;
esac
