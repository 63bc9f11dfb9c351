#!/usr/bin/env bash
# Real nodes beside the simulated ones: per node containerd + runc, a kubelet and kube-proxy (iptables), and one
# CoreDNS, as host processes; pods on CNI bridges, images loaded from locally built archives. hack/cluster.sh calls it.
#
#   hack/realnode/node.sh up   CLUSTER_DIR [COUNT]  starts COUNT real nodes (default 1) for the kwokctl cluster there
#   hack/realnode/node.sh down CLUSTER_DIR          stops them and removes everything they put on the host
#   hack/realnode/node.sh load CLUSTER_DIR IMAGE.tar   loads an image archive into every node's containerd
#
# Each node runs in a network namespace of its own (lib.sh); the host keeps the bridge, CoreDNS and a kube-proxy.
# The nodes touch the host (a bridge, iptables rules, network namespaces, mounts, cgroups, port 10250), so there is
# one set per machine; `down` removes all of it, also after a crash, from what is recorded in the state folder.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../lib/versions.sh
source "$here/../lib/versions.sh"
# shellcheck source=lib.sh
source "$here/lib.sh"

cmd=${1:-}; cluster_dir=${2:-}
[[ -n "$cmd" && -n "$cluster_dir" ]] || { sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }
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

# Per node K: its folder, name, address, sockets, and how to run a process in its network.
node_vars() {
  k=$1
  dir="$state/node-$k"
  name=$(node_name "$k")
  ip=$(node_ip "$k")
  sockets=$(node_socket_dir "$k")
  sock="$sockets/containerd.sock"
  in_net=(nsenter "--net=/run/netns/$(node_netns "$k")")
  pod_cidr=$(node_pod_cidr "$k") pod_gateway=$(node_pod_gateway "$k")
}

write_containerd_config() {
  mkdir -p "$dir/containerd" "$dir/cni/net.d"
  cat > "$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
[grpc]
  address = "$sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Without CAP_SYS_RESOURCE runc cannot lower a process's oom_score_adj, and every pod sandbox fails to start.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$dir/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
EOF
  cat > "$dir/cni/net.d/10-omenative.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "omenative",
  "plugins": [
    {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr", "gateway": "$pod_gateway"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$dir/cni/ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

# The API server as the nodes reach it: at the bridge address (a node in its own network has its own 127.0.0.1).
write_cluster_kubeconfig() {
  kubectl config view --raw --minify --flatten | sed "s#https://127.0.0.1:#https://$BRIDGE_IP:#" \
    > "$state/cluster.kubeconfig"
}

# A node identity the Node authorizer accepts: CN=system:node:NAME, O=system:nodes, signed by the cluster's CA.
write_node_credentials() {
  local pki="$cluster_dir/pki" server
  mkdir -p "$dir/pki"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$dir/pki/node.key" \
    -subj "/O=system:nodes/CN=system:node:$name" -out "$dir/pki/node.csr" 2>/dev/null
  openssl x509 -req -in "$dir/pki/node.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 30 -out "$dir/pki/node.crt" 2>/dev/null
  server=$("$bin/kubectl" --kubeconfig "$state/cluster.kubeconfig" config view --minify \
    -o jsonpath='{.clusters[0].cluster.server}')
  cat > "$dir/kubelet.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "$server", certificate-authority: "$pki/ca.crt"}}]
users: [{name: node, user: {client-certificate: "$dir/pki/node.crt", client-key: "$dir/pki/node.key"}}]
contexts: [{name: node, context: {cluster: local, user: node}}]
current-context: node
EOF
}

write_kubelet_config() {
  mkdir -p "$dir/kubelet"
  cat > "$dir/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The API server's calls (logs, exec, port-forward) come without a client certificate from kwokctl's API server.
address: $ip
port: 10250
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$sock
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT/node-$k
# This machine runs cgroup v1; kubelet refuses it unless told otherwise.
failCgroupV1: false
failSwapOn: false
# Each node its own pod log folder: a kubelet removes the folders of pods it does not know from a shared one.
podLogsDir: $dir/kubelet/logs
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
}

write_kube_proxy_config() {  # file, node name
  cat > "$1" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: $CLUSTER_CIDR
hostnameOverride: $2
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clientConnection: {kubeconfig: "$state/cluster.kubeconfig"}
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
  # Pods get cluster DNS from kubelet; the nodes themselves resolve nothing outside (no upstream on this machine).
  printf 'nameserver %s\n' "$BRIDGE_IP" > "$state/resolv.conf"
}

build_images() {
  local images="$state/images"
  mkdir -p "$images"
  python3 "$here/image.py" --binary "$bin/standin" --path /pause --tag "$PAUSE_IMAGE" --output "$images/pause.tar"
  python3 "$here/image.py" --binary "$bin/standin" --path /usr/local/bin/python3 \
    "${STANDIN_TAGS[@]/#/--tag=}" --output "$images/standin.tar"
}

load_images() {  # into node K's containerd
  local tar
  for tar in "$state"/images/*.tar; do
    ctr --address "$sock" -n k8s.io images import --no-unpack=false "$tar" >/dev/null
  done
}

# The guides' pods ask for 10 CPUs and 30 GiB each; this machine has 2 cores. kubelet reads its capacity from
# /proc/meminfo and /sys/devices/system/{cpu,node} (cAdvisor), so it runs in a mount namespace of its own where
# those show a GPU server's shape, the shape of the simulated GPU nodes. Its pod folder is a shared mount, so the
# volumes it mounts there are seen by containerd and runc, which run on the host's mounts.
write_machine() {
  local m="$state/machine" i
  if [[ ! -f "$m/meminfo" ]]; then
    mkdir -p "$m/cpu" "$m/node"
    for i in $(seq 0 $((NODE_CPUS - 1))); do mkdir -p "$m/cpu/cpu$i"; done
    for i in online possible present; do echo "0-$((NODE_CPUS - 1))" > "$m/cpu/$i"; done
    awk -v kb="$NODE_MEMORY_KIB" '$1 == "MemTotal:" {printf "MemTotal:       %d kB\n", kb; next} {print}' \
      /proc/meminfo > "$m/meminfo"
  fi
  mkdir -p "$dir/kubelet/root"
  if ! mountpoint -q "$dir/kubelet/root"; then
    mount --bind "$dir/kubelet/root" "$dir/kubelet/root"
    mount --make-shared "$dir/kubelet/root"
  fi
}

start_kubelet() {
  local m="$state/machine"
  start_bg "kubelet-$k" "${in_net[@]}" unshare --mount --propagation unchanged -- bash -c '
    set -e
    mount --bind "$1/meminfo" /proc/meminfo
    mount --bind "$1/cpu" /sys/devices/system/cpu
    mount --bind "$1/node" /sys/devices/system/node
    shift
    exec "$@"' kubelet-machine "$m" "$@"
}

bridge_up() {
  # The bridge exists before the first pod so that the nodes, CoreDNS and the API server's advertised address
  # (pods reach the API there) have an address on it; the CNI bridge plugin takes it as it is.
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
    ip addr add "$BRIDGE_IP/${NODE_CIDR#*/}" dev "$BRIDGE"
  fi
  ip link set "$BRIDGE" up
  # ClusterIPs from the host: kube-proxy rewrites them in OUTPUT; the route makes the kernel send them at all.
  ip route replace "$SERVICE_CIDR" dev "$BRIDGE"
  echo 1 > /proc/sys/net/ipv4/ip_forward
  # Pods reach a Service whose endpoint is on the same bridge only if bridged packets pass iptables.
  if [[ -f "$BRIDGE_NF" ]]; then echo 1 > "$BRIDGE_NF" 2>/dev/null || true; fi
}

# A node's network namespace, joined to the host's bridge by a veth, forwarding for its pods' bridge.
netns_up() {
  local ns veth
  ns=$(node_netns "$k")
  veth="omn-veth$k"
  ip netns add "$ns"
  ip link add "$veth" type veth peer name eth0 netns "$ns"
  ip link set "$veth" master "$BRIDGE" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$ip/${NODE_CIDR#*/}" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" route add default via "$BRIDGE_IP"
  "${in_net[@]}" sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward'
  ip route replace "$pod_cidr" via "$ip" dev "$BRIDGE"
}

register_node() {
  wait_for "node $name registering" 60 kubectl get node "$name"
  # A GPU node in the guides' sense: the GPUs are advertised (no device plugin runs: the stand-ins need none),
  # and the models the cluster knows are Ready on it, as the model agent would label them.
  kubectl patch node "$name" --subresource status --type merge \
    -p "{\"status\":{\"capacity\":{\"$GPU_RESOURCE\":\"$NODE_GPUS\"}}}" >/dev/null
  local label
  for label in "${NODE_LABELS[@]+"${NODE_LABELS[@]}"}"; do
    kubectl label node "$name" --overwrite "$label" >/dev/null
  done
}

node_up() {  # node number
  node_vars "$1"
  mkdir -p "$dir" "$sockets"
  make_cgroups "$k"
  netns_up
  write_containerd_config
  start_bg "containerd-$k" "${in_net[@]}" containerd --config "$dir/containerd/config.toml"
  wait_for "containerd of $name" 30 ctr --address "$sock" version
  load_images
  write_node_credentials
  write_kubelet_config
  write_kube_proxy_config "$dir/kube-proxy.yaml" "$name"
  start_bg "kube-proxy-$k" "${in_net[@]}" "$bin/kube-proxy" --config "$dir/kube-proxy.yaml"
  write_machine
  start_kubelet "$bin/kubelet" --config "$dir/kubelet/config.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
    --root-dir "$dir/kubelet/root" --cert-dir "$dir/kubelet/pki" --hostname-override "$name" \
    --node-ip "$ip" --node-labels "$REAL_NODE_LABEL=true"
}

running() {
  local pidfile k
  [[ -f "$state/count" ]] || return 1
  for pidfile in "$state/pids/coredns.pid" "$state/pids/kube-proxy-host.pid" $(for k in $(seq 1 "$(cat "$state/count")"); do
      echo "$state/pids/containerd-$k.pid" "$state/pids/kubelet-$k.pid" "$state/pids/kube-proxy-$k.pid"; done); do
    [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null || return 1
  done
}

up() {
  local start=$SECONDS count=${1:-1} k
  [[ -f "$kubeconfig" ]] || die "no cluster in $cluster_dir"
  [[ $count -ge 1 && $count -le $MAX_REAL_NODES ]] || die "between 1 and $MAX_REAL_NODES real nodes, not $count"
  if running && [[ $(cat "$state/count") == "$count" ]]; then
    log "$count real node(s) running"
    return 0
  fi
  local other owner
  if other=$(realnode_other_owner "$state"); then
    die "this machine already runs the real nodes of another cluster (state in $other), and it has room for one" \
        "cluster's: stop that one first (hack/cluster.sh down, or hack/sandbox.sh down, with its name)"
  fi
  # Whatever a crash left behind goes first, another cluster's too: half-started nodes start again from scratch.
  owner=$(realnode_owner || true)
  [[ -n "$owner" && "$owner" != "$state" && -d "$owner" ]] && realnode_down "$owner"
  [[ -d "$state" ]] && realnode_down "$state"
  ensure_packages
  mkdir -p "$state"
  # What was there before, so that `down` restores it and removes only what is ours.
  [[ -f "$state/ip_forward.before" ]] || cat /proc/sys/net/ipv4/ip_forward > "$state/ip_forward.before"
  [[ -f "$state/bridge-nf.before" || ! -f "$BRIDGE_NF" ]] || cat "$BRIDGE_NF" > "$state/bridge-nf.before"
  [[ -f "$state/netns.before" ]] || { ls /run/netns 2>/dev/null || true; } > "$state/netns.before"
  [[ -f "$state/nft.before" ]] || nft list tables > "$state/nft.before"
  [[ -e /run/containerd || -f "$state/run-containerd.absent" ]] || touch "$state/run-containerd.absent"
  mountpoint -q /run/netns || [[ -f "$state/run-netns.unmounted" ]] || touch "$state/run-netns.unmounted"
  echo "$count" > "$state/count"
  mkdir -p "$SOCKET_DIR"
  echo "$state" > "$OWNER_FILE"
  bridge_up
  write_cluster_kubeconfig
  write_corefile
  start_bg coredns "$bin/coredns" -conf "$state/Corefile"
  # ClusterIPs from the host too (the API server calls the in-cluster webhook at its Service's address): a
  # kube-proxy in the host's network, as if the host were a node.
  write_kube_proxy_config "$state/kube-proxy-host.yaml" "$(node_name 1)"
  start_bg kube-proxy-host "$bin/kube-proxy" --config "$state/kube-proxy-host.yaml"
  build_images
  for k in $(seq 1 "$count"); do node_up "$k"; done
  for k in $(seq 1 "$count"); do node_vars "$k"; register_node; done
  for k in $(seq 1 "$count"); do
    wait_for "node $(node_name "$k") Ready" 90 kubectl wait --for=condition=Ready "node/$(node_name "$k")" --timeout=1s
  done
  log "$count real node(s) Ready in $((SECONDS - start))s"
}

case "$cmd" in
  up) up "${3:-1}" ;;
  load)  # an image archive (e.g. hack/realnode/controller-image.sh's) into every node's containerd
    [[ -n "${3:-}" ]] || die "usage: node.sh load CLUSTER_DIR IMAGE.tar"
    for k in $(seq 1 "$(cat "$state/count" 2>/dev/null || echo 1)"); do
      node_vars "$k"
      ctr --address "$sock" -n k8s.io images import "$3" >/dev/null
    done
    log "loaded $3" ;;
  down) realnode_down "$state" ;;
  *) die "unknown command: $cmd" ;;
esac
