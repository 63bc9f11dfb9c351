"""Test harness: one local control plane per run, a fresh namespace per test, async clients, and markers.

Tests under tests/unit are marked `unit` and never touch a cluster. Tests under tests/integration and tests/e2e are
marked `integration` and `e2e` and share the control plane that hack/cluster.sh runs (started here if it is not up;
hack/test.sh stops it at the end of the run). OMENATIVE_CLUSTER names the cluster to use.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio import client, config

from omenative.kube.client import KubeClient
from tests.support.cluster import ControlPlane
from tests.support.nodes import node_manifest

TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).resolve().relative_to(TESTS).parts
        if parts and parts[0] in ("unit", "integration", "e2e"):
            item.add_marker(getattr(pytest.mark, parts[0]))


@pytest.fixture(scope="session")
def control_plane() -> ControlPlane:
    return ControlPlane.up(os.environ.get("OMENATIVE_CLUSTER", "omenative"))


@pytest.fixture(autouse=True)
def control_plane_survives(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails the test during which a control-plane component died, and starts it again.

    Nothing else restarts a component, and without one (the controller-manager, say) every later test fails for a
    reason of its own; this names the component and the test it died in, and keeps the rest of the run meaningful.
    """
    # The real-node tests run on a control plane of their own (tests/realnode/conftest.py).
    if not any(request.node.get_closest_marker(kind) for kind in ("integration", "e2e")) or \
            "realnode" in Path(str(request.node.fspath)).parts:
        yield
        return
    control_plane: ControlPlane = request.getfixturevalue("control_plane")
    yield
    dead = control_plane.dead_components()
    if dead:
        control_plane.start_stopped_components()
        pytest.fail("control-plane components died during this test (started again): "
                    + "; ".join(f"{name}, its log ending:\n{tail}" for name, tail in dead.items()))


async def api_client_for(kubeconfig: Path) -> client.ApiClient:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return client.ApiClient(configuration=configuration)


@pytest_asyncio.fixture(scope="session")
async def api(control_plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    api_client = await api_client_for(control_plane.kubeconfig)
    async with api_client:
        yield api_client


@pytest_asyncio.fixture(scope="session")
async def kube(control_plane: ControlPlane) -> AsyncIterator[KubeClient]:
    """omenative's own client (plain dicts) against the control plane."""
    kube_client = await KubeClient.connect(str(control_plane.kubeconfig))
    async with kube_client:
        yield kube_client


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def _dns_label(text: str, limit: int) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:limit].strip("-")


@pytest_asyncio.fixture
async def namespace(request: pytest.FixtureRequest, core: client.CoreV1Api) -> AsyncIterator[str]:
    """A fresh namespace named after the test, deleted afterwards."""
    name = f"t-{_dns_label(request.node.name, 40)}-{uuid.uuid4().hex[:5]}"
    await core.create_namespace({"metadata": {"name": name, "labels": {"omenative.io/test": "true"}}})
    yield name
    await core.delete_namespace(name, propagation_policy="Background")


NodeFactory = Callable[..., Awaitable[str]]


def node_factory(core: client.CoreV1Api, created: list[str]) -> NodeFactory:
    """Makes simulated nodes with a random suffix on `core`'s cluster, noting their names in `created`."""
    async def make(prefix: str = "gpu", **kwargs: Any) -> str:
        name = f"t-{prefix}-{uuid.uuid4().hex[:6]}"
        await core.create_node(node_manifest(name, **kwargs))
        created.append(name)
        return name

    return make


@pytest_asyncio.fixture
async def sim_nodes(core: client.CoreV1Api) -> AsyncIterator[NodeFactory]:
    """Creates simulated nodes for one test (`await sim_nodes("gpu", gpus=1, labels={...})`), removed afterwards.

    Node names carry a random suffix, so a test's pods can be pinned to its own nodes with a label selector.
    """
    created: list[str] = []
    yield node_factory(core, created)
    for name in created:
        try:
            await core.delete_node(name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise


async def describe_namespace(api: client.ApiClient, namespace: str) -> str:
    """The pods (with their conditions) and events of a namespace, for a failing wait to print."""
    core = client.CoreV1Api(api)
    lines = [f"--- namespace {namespace}"]
    for pod in (await core.list_namespaced_pod(namespace)).items:
        conditions = {c.type: f"{c.status}/{c.reason or ''}" for c in pod.status.conditions or []}
        lines.append(f"pod {pod.metadata.name} phase={pod.status.phase} node={pod.spec.node_name} {conditions}")
    for event in (await core.list_namespaced_event(namespace)).items:
        lines.append(f"event {event.involved_object.kind}/{event.involved_object.name} {event.reason}: {event.message}")
    return "\n".join(lines)


def dump(obj: Any) -> str:
    return json.dumps(client.ApiClient().sanitize_for_serialization(obj), indent=1, default=str)
