#!/usr/bin/env bash
# Plays OME's model agent for a ClusterBaseModel on the simulated GPU nodes: fills in what the agent reads from the
# model's config.json (JSON given as the second argument), labels the nodes where the model is Ready, and marks it
# Ready. Uses $KUBECONFIG.
#
#   hack/sim/model-agent.sh qwen3-0-6b '{"modelFormat":{"name":"safetensors","version":"1.0.0"}, ...}'
set -euo pipefail
model=$1 learned=${2:-'{}'}
selector=${NODE_SELECTOR:-sim.omenative.io/node=gpu}
kubectl patch clusterbasemodel "$model" --type merge -p "{\"spec\": $learned}" >/dev/null
nodes=$(kubectl get nodes -l "$selector" -o jsonpath='{.items[*].metadata.name}')
# shellcheck disable=SC2086
kubectl label nodes $nodes "models.ome.io/clusterbasemodel.$model=Ready" --overwrite >/dev/null
ready=$(printf '"%s",' $nodes); ready="[${ready%,}]"
kubectl patch clusterbasemodel "$model" --subresource=status --type merge \
  -p "{\"status\":{\"state\":\"Ready\",\"lifecycle\":\"Ready\",\"nodesReady\":$ready}}" >/dev/null
echo "clusterbasemodel.ome.io/$model Ready on $nodes"
