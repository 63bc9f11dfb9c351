"""End-to-end fixtures: omenative's CRDs on the local control plane, `omenative run` with its webhook, and a
stand-in for OME's model agent."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml
from kubernetes_asyncio import client

from tests.conftest import NodeFactory
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.nodes import model_label
from tests.support.omenative import install_crds, start_controller, stop_controller
from tests.support.wait import wait_for


@pytest_asyncio.fixture(scope="package")
async def omenative(control_plane: ControlPlane) -> AsyncIterator[ControllerProcess]:
    """omenative with its webhook, for the end-to-end tests (stopped after them, so other tests run their own)."""
    await install_crds(control_plane)
    process = await start_controller(control_plane)
    yield process
    await stop_controller(control_plane, process)


def write_yaml(folder: Path, name: str, obj: dict[str, Any]) -> str:
    path = folder / name
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    return str(path)


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


@pytest_asyncio.fixture
async def model_agent(api: client.ApiClient) -> ModelAgent:
    return ModelAgent(api)


async def gpu_nodes(sim_nodes: NodeFactory, count: int) -> list[str]:
    return [await sim_nodes("gpu") for _ in range(count)]


async def wait_gone(control_plane: ControlPlane, namespace: str, kinds: str, selector: str,
                    timeout: float = 120) -> None:
    async def none_left() -> bool:
        out = await control_plane.kubectl("get", kinds, "-n", namespace, "-l", selector, "-o", "name")
        return out.stdout.strip() == ""

    await wait_for(none_left, timeout=timeout, what=f"no {kinds} left with {selector}")
