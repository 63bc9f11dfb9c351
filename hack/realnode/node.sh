#!/usr/bin/env bash
# One real node beside the simulated ones: containerd + runc, a kubelet, kube-proxy (iptables) and CoreDNS as host
# processes, pods on a CNI bridge, images loaded from locally built archives. hack/cluster.sh calls it.
#
#   hack/realnode/node.sh up   CLUSTER_DIR   starts the node for the kwokctl cluster in CLUSTER_DIR
#   hack/realnode/node.sh down CLUSTER_DIR   stops it and removes everything it put on the host
#   hack/realnode/node.sh load CLUSTER_DIR IMAGE.tar   loads an image archive into the node's containerd
#
# The node touches the host (a bridge, iptables rules, network namespaces, mounts, cgroups, port 10250), so there
# is one per machine; `down` removes all of it, also after a crash, from what is recorded in the state folder.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../lib/versions.sh
source "$here/../lib/versions.sh"
# shellcheck source=lib.sh
source "$here/lib.sh"

cmd=${1:-}; cluster_dir=${2:-}
[[ -n "$cmd" && -n "$cluster_dir" ]] || { sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }
cluster_dir=$(cd "$cluster_dir" && pwd)
state="$cluster_dir/realnode"
bin="$OMENATIVE_BIN_DIR"
kubeconfig="$cluster_dir/kubeconfig.yaml"
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }
log() { printf '[real-node %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

start_bg() {  # name, command...: runs it in the background with a pid file and a log
  local name=$1; shift
  mkdir -p "$state/pids" "$state/logs"
  setsid "$@" >"$state/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$state/pids/$name.pid"
}

wait_for() {  # description, seconds, command...
  local what=$1 seconds=$2 i; shift 2
  for i in $(seq 1 $((seconds * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  die "$what did not happen within ${seconds}s (logs in $state/logs)"
}

write_containerd_config() {
  mkdir -p "$state/containerd" "$state/cni/net.d"
  cat > "$state/containerd/config.toml" <<EOF
version = 2
root = "$state/containerd/root"
state = "$state/containerd/state"
[grpc]
  address = "$CONTAINERD_SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Without CAP_SYS_RESOURCE runc cannot lower a process's oom_score_adj, and every pod sandbox fails to start.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$state/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
EOF
  cat > "$state/cni/net.d/10-omenative.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "omenative",
  "plugins": [
    {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$BRIDGE_IP"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$state/cni/ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

# A node identity the Node authorizer accepts: CN=system:node:NAME, O=system:nodes, signed by the cluster's CA.
write_node_credentials() {
  local pki="$cluster_dir/pki" server
  mkdir -p "$state/pki"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$state/pki/node.key" \
    -subj "/O=system:nodes/CN=system:node:$NODE_NAME" -out "$state/pki/node.csr" 2>/dev/null
  openssl x509 -req -in "$state/pki/node.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -out "$state/pki/node.crt" 2>/dev/null
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  cat > "$state/kubelet.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "$server", certificate-authority: "$pki/ca.crt"}}]
users: [{name: node, user: {client-certificate: "$state/pki/node.crt", client-key: "$state/pki/node.key"}}]
contexts: [{name: node, context: {cluster: local, user: node}}]
current-context: node
EOF
}

write_kubelet_config() {
  mkdir -p "$state/kubelet"
  cat > "$state/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The API server's calls (logs, exec, port-forward) come without a client certificate from kwokctl's API server.
address: $BRIDGE_IP
port: 10250
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
# This machine runs cgroup v1; kubelet refuses it unless told otherwise.
failCgroupV1: false
failSwapOn: false
clusterDNS: [$BRIDGE_IP]
clusterDomain: cluster.local
resolvConf: $state/resolv.conf
# The machine's disk is shared and often fuller than kubelet's defaults allow; never evict the sandbox's pods.
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
fileCheckFrequency: 5s
volumeStatsAggPeriod: 0s
localStorageCapacityIsolation: false
EOF
  # Pods get cluster DNS from kubelet; the node itself resolves nothing outside (no upstream on this machine).
  printf 'nameserver %s\n' "$BRIDGE_IP" > "$state/resolv.conf"
}

write_kube_proxy_config() {
  cat > "$state/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE_NAME
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clientConnection: {kubeconfig: "$kubeconfig"}
# This container may not write the host's conntrack sysctls; leave them as they are.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

write_corefile() {
  cat > "$state/Corefile" <<EOF
.:53 {
    bind $BRIDGE_IP
    errors
    cache 5
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $kubeconfig
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
}
EOF
}

load_images() {
  local images="$state/images" ctr=(ctr --address "$CONTAINERD_SOCK" -n k8s.io) tar
  mkdir -p "$images"
  python3 "$here/image.py" --binary "$bin/standin" --path /pause --tag "$PAUSE_IMAGE" --output "$images/pause.tar"
  python3 "$here/image.py" --binary "$bin/standin" --path /usr/local/bin/python3 \
    "${STANDIN_TAGS[@]/#/--tag=}" --output "$images/standin.tar"
  for tar in "$images"/*.tar; do
    "${ctr[@]}" images import --no-unpack=false "$tar" >/dev/null
  done
}

# The guides' pods ask for 10 CPUs and 30 GiB each; this machine has 2 cores. kubelet reads its capacity from
# /proc/meminfo and /sys/devices/system/{cpu,node} (cAdvisor), so it runs in a mount namespace of its own where
# those show a GPU server's shape, the shape of the simulated GPU nodes. Its pod folder is a shared mount, so the
# volumes it mounts there are seen by containerd and runc, which run on the host's mounts.
write_machine() {
  local m="$state/machine" i
  mkdir -p "$m/cpu" "$m/node"
  for i in $(seq 0 $((NODE_CPUS - 1))); do mkdir -p "$m/cpu/cpu$i"; done
  for i in online possible present; do echo "0-$((NODE_CPUS - 1))" > "$m/cpu/$i"; done
  awk -v kb="$NODE_MEMORY_KIB" '$1 == "MemTotal:" {printf "MemTotal:       %d kB\n", kb; next} {print}' \
    /proc/meminfo > "$m/meminfo"
  mkdir -p "$state/kubelet/root"
  if ! mountpoint -q "$state/kubelet/root"; then
    mount --bind "$state/kubelet/root" "$state/kubelet/root"
    mount --make-shared "$state/kubelet/root"
  fi
}

start_kubelet() {
  local m="$state/machine"
  start_bg kubelet unshare --mount --propagation unchanged -- bash -c '
    set -e
    mount --bind "$1/meminfo" /proc/meminfo
    mount --bind "$1/cpu" /sys/devices/system/cpu
    mount --bind "$1/node" /sys/devices/system/node
    shift
    exec "$@"' kubelet-machine "$m" "$@"
}

bridge_up() {
  # The bridge exists before the first pod so that the node, CoreDNS and the API server's advertised address
  # (pods reach the API there) have an address on it; the CNI bridge plugin takes it as it is.
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
    ip addr add "$BRIDGE_IP/${POD_CIDR#*/}" dev "$BRIDGE"
  fi
  ip link set "$BRIDGE" up
  # ClusterIPs from the host: kube-proxy rewrites them in OUTPUT; the route makes the kernel send them at all.
  ip route replace "$SERVICE_CIDR" dev "$BRIDGE"
  echo 1 > /proc/sys/net/ipv4/ip_forward
  # Pods reach a Service whose endpoint is on the same bridge only if bridged packets pass iptables.
  if [[ -f "$BRIDGE_NF" ]]; then echo 1 > "$BRIDGE_NF" 2>/dev/null || true; fi
}

register_node() {
  wait_for "node $NODE_NAME registering" 60 kubectl get node "$NODE_NAME"
  # A GPU node in the guides' sense: the GPUs are advertised (no device plugin runs: the stand-ins need none),
  # and the models the cluster knows are Ready on it, as the model agent would label them.
  kubectl patch node "$NODE_NAME" --subresource status --type merge \
    -p "{\"status\":{\"capacity\":{\"$GPU_RESOURCE\":\"$NODE_GPUS\"}}}" >/dev/null
  local label
  for label in "${NODE_LABELS[@]+"${NODE_LABELS[@]}"}"; do
    kubectl label node "$NODE_NAME" --overwrite "$label" >/dev/null
  done
  wait_for "node $NODE_NAME Ready" 90 kubectl wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s
}

running() {
  local name
  for name in containerd kubelet kube-proxy coredns; do
    [[ -f "$state/pids/$name.pid" ]] && kill -0 "$(cat "$state/pids/$name.pid")" 2>/dev/null || return 1
  done
}

up() {
  local start=$SECONDS
  [[ -f "$kubeconfig" ]] || die "no cluster in $cluster_dir"
  if running; then
    log "real node $NODE_NAME is running"
    return 0
  fi
  # Whatever a crash left behind goes first: a half-started node is started again from scratch.
  [[ -d "$state" ]] && realnode_down "$state"
  ensure_packages
  mkdir -p "$state"
  # What was there before, so that `down` restores it and removes only what is ours.
  [[ -f "$state/ip_forward.before" ]] || cat /proc/sys/net/ipv4/ip_forward > "$state/ip_forward.before"
  [[ -f "$state/bridge-nf.before" || ! -f "$BRIDGE_NF" ]] || cat "$BRIDGE_NF" > "$state/bridge-nf.before"
  [[ -f "$state/netns.before" ]] || { ls /run/netns 2>/dev/null || true; } > "$state/netns.before"
  [[ -f "$state/nft.before" ]] || nft list tables > "$state/nft.before"
  [[ -e /run/containerd || -f "$state/run-containerd.absent" ]] || touch "$state/run-containerd.absent"
  mkdir -p "$SOCKET_DIR"
  make_cgroups
  bridge_up
  write_containerd_config
  start_bg containerd containerd --config "$state/containerd/config.toml"
  wait_for "containerd" 30 ctr --address "$CONTAINERD_SOCK" version
  load_images
  write_node_credentials
  write_kubelet_config
  write_kube_proxy_config
  write_corefile
  start_bg coredns "$bin/coredns" -conf "$state/Corefile"
  start_bg kube-proxy "$bin/kube-proxy" --config "$state/kube-proxy.yaml"
  write_machine
  start_kubelet "$bin/kubelet" --config "$state/kubelet/config.yaml" --kubeconfig "$state/kubelet.kubeconfig" \
    --root-dir "$state/kubelet/root" --cert-dir "$state/kubelet/pki" --hostname-override "$NODE_NAME" \
    --node-ip "$BRIDGE_IP" --node-labels "$REAL_NODE_LABEL=true"
  register_node
  log "real node $NODE_NAME is Ready in $((SECONDS - start))s"
}

case "$cmd" in
  up) up ;;
  load)  # an image archive (e.g. hack/realnode/controller-image.sh's) into the node's containerd
    [[ -n "${3:-}" ]] || die "usage: node.sh load CLUSTER_DIR IMAGE.tar"
    ctr --address "$CONTAINERD_SOCK" -n k8s.io images import "$3" >/dev/null
    log "loaded $3" ;;
  down) realnode_down "$state" ;;
  *) die "unknown command: $cmd" ;;
esac
