#!/usr/bin/env bash
# Empties a node of OMENative Instances before maintenance, with no dip in serving: cordons it, then asks for one
# migration (kubectl ome migration start) per Instance that has a pod there. omenative moves them by surge, one
# Instance of a component at a time, oldest request first; each replacement starts off this node and the old Instance
# drains only once it serves. Unlike `kubectl drain`, nothing stops serving first.
#
#   hack/migrate-node.sh NODE [--wait] [--timeout 30m] [--no-cordon] [--context C]
#
#   --wait        block until no pod of those Instances is left on the node (exit 1 at the timeout)
#   --timeout     how long --wait waits (a Go duration: 90s, 30m; default 30m)
#   --no-cordon   leave the node schedulable (new Instances may then land there)
#
# Needs kubectl and the kubectl-ome plugin (pip install 'omenative[plugin]'; `hack/sandbox.sh env` puts it on PATH)
# and the plugin's RBAC (kubectl-ome-reader and kubectl-ome-actor in deploy/base), plus cordon rights on nodes.
set -euo pipefail

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
[[ $# -ge 1 && $1 != -* ]] || usage 1
node=$1; shift
wait=""; timeout=30m; cordon=yes; ctx=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --wait) wait=yes ;;
    --timeout) timeout=$2; shift ;;
    --no-cordon) cordon="" ;;
    --context) ctx=(--context "$2"); shift ;;
    -h|--help) usage ;;
    *) echo "migrate-node: unknown flag $1" >&2; usage 1 ;;
  esac
  shift
done
seconds() {  # a Go-style duration (1h30m, 90s, 45m) in seconds
  local d=$1 total=0 n
  while [[ $d =~ ^([0-9]+)(h|m|s)(.*)$ ]]; do
    n=${BASH_REMATCH[1]}
    case ${BASH_REMATCH[2]} in h) total=$((total + n * 3600)) ;; m) total=$((total + n * 60)) ;; s) total=$((total + n)) ;; esac
    d=${BASH_REMATCH[3]}
  done
  [[ -z $d ]] || { echo "migrate-node: bad duration $1" >&2; exit 1; }
  echo "$total"
}
limit=$(seconds "$timeout")

selector="ome.io/managed-by=OMENative"
columns='custom-columns=NS:.metadata.namespace,ISVC:.metadata.labels.ome\.io/inferenceservice,COMP:.metadata.labels.component,IDX:.metadata.labels.ome\.io/instance-index'
instances() {
  kubectl "${ctx[@]}" get pods -A -l "$selector" --field-selector "spec.nodeName=$node" -o "$columns" --no-headers \
    | sort -u
}

if [[ -n $cordon ]]; then
  kubectl "${ctx[@]}" cordon "$node"
fi
mapfile -t found < <(instances)
if [[ ${#found[@]} -eq 0 ]]; then
  echo "migrate-node: no OMENative Instance has a pod on $node"
  exit 0
fi
echo "migrate-node: ${#found[@]} Instance(s) on $node"
failed=0
for line in "${found[@]}"; do
  read -r ns isvc comp idx <<<"$line"
  for attempt in $(seq 1 20); do
    # Exit 3: something changed between the plugin's reads (the controller writes status often while Instances
    # move), or the Instance is busy; read again and retry.
    if out=$(kubectl "${ctx[@]}" ome migration start "$isvc" -n "$ns" --component "$comp" --instance "$idx" \
        --from-node "$node" --reason "migrate-node $node" --requested-by migrate-node --yes -o json 2>&1); then
      id=$(sed -n 's/.*"requestID": "\([^"]*\)".*/\1/p' <<<"$out")
      echo "migrate-node: $ns/$isvc $comp instance $idx: requested ($id)"
      break
    else
      rc=$?
    fi
    if [[ $rc -ne 3 || $attempt -eq 20 ]]; then
      echo "migrate-node: $ns/$isvc $comp instance $idx: not requested: $(grep '^error:' <<<"$out" | tail -1)" >&2
      failed=1
      break
    fi
    sleep 1
  done
done
[[ $failed -eq 0 ]] || exit 1
[[ -n $wait ]] || exit 0
for _ in $(seq 1 "$limit"); do
  if [[ -z $(instances) ]]; then
    echo "migrate-node: $node holds no OMENative pod"
    exit 0
  fi
  sleep 1
done
echo "migrate-node: pods still on $node after $timeout:" >&2
instances >&2
exit 1
