#!/usr/bin/env python3
"""Simulated nodes for the local control plane: KWOK plays their kubelets.

A GPU node looks like a real 8-GPU server (8 `nvidia.com/gpu`, 128 CPUs, 1 TiB of memory, the NVIDIA NoSchedule
taint, amd64 labels); a CPU node has no GPUs and no taint. `--model NAME` marks a model Ready on every GPU node, as
OME's model agent does after a download. The tests build the same objects through `node_manifest`.

    python3 hack/sim/nodes.py --gpu 2 --cpu 1 --model qwen3-0-6b | kubectl apply -f -
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from typing import Any

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
SIM_LABEL = "sim.omenative.io/node"
GPU_RESOURCE = "nvidia.com/gpu"


def model_label(model: str) -> str:
    """The node label OME's model agent sets for a ClusterBaseModel that is Ready on the node."""
    return f"models.ome.io/clusterbasemodel.{model}"


def node_ip(name: str) -> str:
    """A stable address per node name; pods on the node's network (hostNetwork) get it, as on real nodes."""
    digest = hashlib.sha256(name.encode()).digest()
    return f"10.{200 + digest[0] % 50}.{digest[1]}.{1 + digest[2] % 254}"


def node_manifest(
    name: str,
    *,
    gpus: int = 8,
    cpus: int = 128,
    memory: str = "1Ti",
    models: tuple[str, ...] = (),
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    kind = "gpu" if gpus else "cpu"
    node_labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": name,
        "node.kubernetes.io/instance-type": f"sim-{kind}",
        "type": "kwok",
        SIM_LABEL: kind,
    }
    if gpus:
        node_labels |= {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(gpus)}
    node_labels |= {model_label(m): "Ready" for m in models}
    node_labels |= labels or {}
    resources = {"cpu": str(cpus), "memory": memory, "pods": "110", "ephemeral-storage": "1Ti"}
    if gpus:
        resources[GPU_RESOURCE] = str(gpus)
    taints = [{"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}] if gpus else []
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": node_labels,
            # KWOK's controller manages only nodes with this annotation.
            "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"taints": taints},
        "status": {
            "capacity": resources,
            "allocatable": dict(resources),
            "addresses": [{"type": "InternalIP", "address": node_ip(name)}, {"type": "Hostname", "address": name}],
        },
    }


def manifests(gpu: int, cpu: int, models: tuple[str, ...]) -> list[dict[str, Any]]:
    nodes = [node_manifest(f"gpu-node-{i}", models=models) for i in range(1, gpu + 1)]
    nodes += [node_manifest(f"cpu-node-{i}", gpus=0, cpus=32, memory="128Gi") for i in range(1, cpu + 1)]
    return nodes


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=2, help="number of GPU nodes (gpu-node-1..N)")
    parser.add_argument("--cpu", type=int, default=1, help="number of CPU nodes (cpu-node-1..N)")
    parser.add_argument("--model", action="append", default=[], help="ClusterBaseModel Ready on every GPU node")
    args = parser.parse_args(argv)
    json.dump({"apiVersion": "v1", "kind": "List", "items": manifests(args.gpu, args.cpu, tuple(args.model))},
              sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
