# shellcheck shell=bash
# The real node's names and addresses, its packages, and its teardown (shared by node.sh and tests' checks).

# Real nodes are real-node-1 .. real-node-N (at most MAX_REAL_NODES). Each has a network namespace of its own (its
# own port 8080 for host-network pods, its own iptables and kubelet port; the host's ports stay free for
# `kubectl port-forward`), joined to the host's bridge by a veth at 10.244.0.(K+1), with its pods on a bridge inside
# it at 10.244.K.0/24; the host routes each node's pod range to it. The host keeps 10.244.0.1: the API server and
# CoreDNS answer there.
REAL_NODE_LABEL=omenative.io/real-node
MAX_REAL_NODES=8
BRIDGE=omenative0
NODE_CIDR=10.244.0.0/24
CLUSTER_CIDR=10.244.0.0/16
BRIDGE_IP=10.244.0.1
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1           # the `kubernetes` Service: in the API server's certificate
BRIDGE_NF=/proc/sys/net/bridge/bridge-nf-call-iptables
# Unix socket paths are limited to 107 bytes and the state folder can be deep (a test's temporary folder): the
# node's sockets live here instead. One node per machine, so one fixed folder.
SOCKET_DIR=/run/omenative-node
CONTAINERD_SOCK=$SOCKET_DIR/containerd.sock
# Which cluster's real nodes these are (its state folder): a second cluster must not start nodes over them, nor
# take them down with its own.
OWNER_FILE=$SOCKET_DIR/owner
CGROUP_ROOT=omenative          # every node's pod cgroups live under /omenative/node-K in each hierarchy
CNI_BIN_DIR=/usr/lib/cni       # Debian's containernetworking-plugins
GPU_RESOURCE=nvidia.com/gpu
NODE_GPUS=8
NODE_CPUS=128                  # kubelet sees the simulated GPU nodes' shape (node.sh write_machine)
NODE_MEMORY_KIB=$((1024 * 1024 * 1024))
PAUSE_IMAGE=omenative.local/pause:standin
# The stand-in answers under the exact image names of the guides' runtimes (docs/real-node.md).
STANDIN_TAGS=(
  docker.io/lmsysorg/sglang:v0.5.5.post3-cu129-amd64
  fra.ocir.io/idqj093njucb/smg:v0.2.4.post1-dev
)
NODE_LABELS=()
for _model in ${REAL_NODE_MODELS:-}; do NODE_LABELS+=("models.ome.io/clusterbasemodel.$_model=Ready"); done
REAL_NODE_PACKAGES=(containerd runc containernetworking-plugins iptables nftables conntrack iproute2 openssl)

node_name() { echo "real-node-$1"; }
node_ip() { echo "10.244.0.$(($1 + 1))"; }
node_netns() { echo "omenative-node-$1"; }
node_pod_cidr() { echo "10.244.$1.0/24"; }
node_pod_gateway() { echo "10.244.$1.1"; }
node_socket_dir() { echo "$SOCKET_DIR/node-$1"; }

ensure_packages() {
  local missing=() p
  for p in containerd runc ctr iptables nft conntrack ip openssl; do command -v "$p" >/dev/null || missing+=("$p"); done
  [[ -x "$CNI_BIN_DIR/bridge" && -x "$CNI_BIN_DIR/portmap" ]] || missing+=(cni-plugins)
  [[ ${#missing[@]} -eq 0 ]] && return 0
  printf '[real-node] installing %s (missing: %s)\n' "${REAL_NODE_PACKAGES[*]}" "${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${REAL_NODE_PACKAGES[@]}" >&2
}

# Whether this machine can run a real node at all: root, a writable network stack, cgroups.
realnode_supported() {
  [[ $(id -u) == 0 ]] || { echo "not root"; return 1; }
  [[ -w /proc/sys/net/ipv4/ip_forward ]] || { echo "/proc/sys/net/ipv4/ip_forward is not writable"; return 1; }
  [[ -d /sys/fs/cgroup ]] || { echo "no /sys/fs/cgroup"; return 1; }
  ip link add omenative-probe type bridge 2>/dev/null || { echo "cannot create network links"; return 1; }
  ip link del omenative-probe
}

make_cgroups() {  # node number: kubelet wants its cgroup root to exist in every hierarchy
  local dir
  for dir in /sys/fs/cgroup/*/; do
    [[ -f "$dir/cgroup.procs" && ! -L "${dir%/}" ]] && mkdir -p "$dir/$CGROUP_ROOT/node-$1"
  done
  return 0
}

_kill_tree_of_cgroups() {  # every process in our cgroups, in every hierarchy
  local dir
  for dir in /sys/fs/cgroup/*/"$CGROUP_ROOT" /sys/fs/cgroup/"$CGROUP_ROOT"; do
    [[ -d "$dir" ]] || continue
    find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  done
}

_remove_cgroups() {
  local dir
  for dir in /sys/fs/cgroup/*/"$CGROUP_ROOT" /sys/fs/cgroup/"$CGROUP_ROOT"; do
    [[ -d "$dir" ]] || continue
    find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [[ -d "$dir" ]] && printf '[real-node] cgroup %s is still there\n' "$dir" >&2
  done
  return 0
}

_chains_of() {  # table: the KUBE-* and CNI-* chains in it
  iptables -t "$1" -S 2>/dev/null | awk '$1 == "-N" && ($2 ~ /^KUBE-/ || $2 ~ /^CNI-/) {print $2}'
}

_remove_iptables() {
  local table chain rule
  for table in filter nat mangle; do
    # First the rules that jump to our chains (from built-in chains too), then the chains themselves.
    for chain in $(_chains_of "$table"); do
      while read -r rule; do
        [[ -n "$rule" ]] && eval "iptables -t $table ${rule/-A/-D}" 2>/dev/null || true
      done < <(iptables -t "$table" -S 2>/dev/null | grep -- "-j $chain\b" || true)
    done
    for chain in $(_chains_of "$table"); do iptables -t "$table" -F "$chain" 2>/dev/null || true; done
    for chain in $(_chains_of "$table"); do iptables -t "$table" -X "$chain" 2>/dev/null || true; done
  done
}

# iptables (the nf_tables backend) leaves a table behind once a rule was in it; those that were not there before
# `up` are deleted whole.
_remove_new_nft_tables() {
  local state=$1 table
  [[ -f "$state/nft.before" ]] || return 0
  while read -r table; do
    [[ -n "$table" ]] && ! grep -qxF "$table" "$state/nft.before" && nft delete $table 2>/dev/null || true
  done < <(nft list tables 2>/dev/null)
  return 0
}

# The state folder of the cluster whose real nodes these are, alive or not; fails when there is none.
realnode_owner() { cat "$OWNER_FILE" 2>/dev/null; }

# The state folder of another cluster whose real nodes still run on this machine; fails when there is none.
realnode_other_owner() {
  local state=$1 owner pidfile
  owner=$(realnode_owner) && [[ "$owner" != "$state" ]] || return 1
  for pidfile in "$owner"/pids/*.pid; do
    [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null && { echo "$owner"; return 0; }
  done
  return 1
}

# Stops everything the node started and removes what it put on the host. Safe to run twice, and after a crash.
realnode_down() {
  local state=$1 pidfile pid left i mnt ns other
  [[ -d "$state" ]] || return 0
  # The bridge, the nodes' namespaces and the cgroups are the machine's, and another cluster's nodes hold them.
  if other=$(realnode_other_owner "$state"); then
    printf '[real-node] the real nodes on this machine belong to %s: left running\n' "$other" >&2
    rm -rf "$state"
    return 0
  fi
  # kubelet first, so that nothing restarts what goes next; then the containers (by cgroup), then the rest.
  for pidfile in "$state"/pids/kubelet*.pid "$state"/pids/kube-proxy*.pid "$state"/pids/coredns.pid; do
    [[ -f "$pidfile" ]] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  _kill_tree_of_cgroups
  for pidfile in "$state"/pids/containerd*.pid; do
    [[ -f "$pidfile" ]] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  for i in $(seq 1 50); do
    left=$(pgrep -f -- "$state/|$SOCKET_DIR/" || true)
    [[ -z "$left" ]] && break
    [[ $i == 25 ]] && kill -9 $left 2>/dev/null || true
    sleep 0.2
  done
  _kill_tree_of_cgroups
  # The nodes' network namespaces (their veths, routes and iptables go with them), the pods' network namespaces,
  # then every mount under the state folder (volumes, rootfs, shm), deepest first.
  for ns in /run/netns/omenative-node-*; do
    [[ -e "$ns" ]] && ip netns del "$(basename "$ns")" 2>/dev/null || true
  done
  for ns in /run/netns/cni-*; do
    [[ -e "$ns" ]] || continue
    grep -qx "$(basename "$ns")" "$state/netns.before" 2>/dev/null && continue  # not ours
    umount "$ns" 2>/dev/null || true
    rm -f "$ns"
  done
  # `ip netns add` makes /run/netns a mount point of its own the first time.
  if [[ -f "$state/run-netns.unmounted" ]] && mountpoint -q /run/netns; then umount /run/netns 2>/dev/null || true; fi
  while read -r mnt; do
    umount -l "$mnt" 2>/dev/null || true
  done < <(awk -v s="$state/" 'index($5, s) == 1 {print $5}' /proc/self/mountinfo | sort -r)
  # kubelet links every container's log into /var/log/containers (a fixed folder); the links into our folder go.
  find /var/log/containers -maxdepth 1 -type l -lname "$state/*" -delete 2>/dev/null || true
  _remove_cgroups
  _remove_iptables
  _remove_new_nft_tables "$state"
  ip link del "$BRIDGE" 2>/dev/null || true
  ip route del "$SERVICE_CIDR" 2>/dev/null || true
  rm -rf "$SOCKET_DIR"
  # containerd keeps its shims' sockets and runc's container state under /run/containerd whatever its config says.
  if [[ -f "$state/run-containerd.absent" ]]; then rm -rf /run/containerd; fi
  if [[ -f "$state/ip_forward.before" ]]; then cat "$state/ip_forward.before" > /proc/sys/net/ipv4/ip_forward; fi
  if [[ -f "$state/bridge-nf.before" ]]; then cat "$state/bridge-nf.before" > "$BRIDGE_NF" 2>/dev/null || true; fi
  rm -rf "$state"
}
