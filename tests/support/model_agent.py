"""A stand-in for OME's model agent (the tests play it; KWOK has no disks to download to)."""

from __future__ import annotations

import copy
from typing import Any

from kubernetes_asyncio import client

from tests.support.nodes import model_label

# What the model agent reads from Qwen3-0.6B's config.json.
QWEN3_LEARNED = {
    "modelFormat": {"name": "safetensors", "version": "1.0.0"},
    "modelFramework": {"name": "transformers", "version": "4.51.0"},
    "modelArchitecture": "Qwen3ForCausalLM",
    "modelParameterSize": "0.6B",
}


class ModelAgent:
    """Plays OME's model agent: after a 'download', it fills in what it read from the model's config.json, labels
    the nodes that have the model Ready, and marks the model Ready."""

    def __init__(self, api: client.ApiClient) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)

    async def downloaded(self, model: str, nodes: list[str], learned: dict[str, Any]) -> None:
        await self.custom.patch_cluster_custom_object("ome.io", "v1beta1", "clusterbasemodels", model,
                                                      {"spec": copy.deepcopy(learned)},
                                                      _content_type="application/merge-patch+json")
        label = model_label(model)
        for node in (await self.core.list_node(label_selector=label)).items:
            if node.metadata.name not in nodes:  # only these nodes have it
                await self.core.patch_node(node.metadata.name, {"metadata": {"labels": {label: None}}})
        for node in nodes:
            await self.core.patch_node(node, {"metadata": {"labels": {label: "Ready"}}})
        await self.custom.patch_cluster_custom_object_status(
            "ome.io", "v1beta1", "clusterbasemodels", model,
            {"status": {"state": "Ready", "lifecycle": "Ready", "nodesReady": sorted(nodes)}},
            _content_type="application/merge-patch+json")
