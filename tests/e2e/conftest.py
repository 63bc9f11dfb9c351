"""End-to-end fixtures: omenative's CRDs on the local control plane, `omenative run` with its webhook, and a
stand-in for OME's model agent."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml
from kubernetes_asyncio import client

from tests.conftest import NodeFactory
from tests.support import rbac
from tests.support.catalog import CATALOG
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.model_agent import QWEN3_LEARNED, ModelAgent
from tests.support.omenative import installed_and_running
from tests.support.wait import wait_for


@pytest_asyncio.fixture(scope="package")
async def omenative(control_plane: ControlPlane) -> AsyncIterator[ControllerProcess]:
    """omenative with its webhook, for the end-to-end tests (stopped after them, so other tests run their own).

    It runs as deployed: under the ServiceAccount of deploy/base with its RBAC (a token of the account), with
    leader election in omenative-system. Afterwards, its requests (the audit log) are checked against the rules:
    none refused, and, when the whole suite ran (hack/test.sh without arguments), every rule used.
    """
    kubeconfig = await rbac.service_account_kubeconfig(control_plane)
    # A Lease left by an earlier run would spare this one its create: start as a fresh install does.
    await control_plane.kubectl("delete", "lease", "omenative-leader", "-n", rbac.NAMESPACE, "--ignore-not-found")
    offset = rbac.audit_offset(control_plane)
    # The force-delete escalation is on (with thresholds no test reaches), as production would run it: it watches
    # Nodes.
    async with installed_and_running(control_plane, "--leader-elect", "--leader-election-namespace",
                                     rbac.NAMESPACE, "--force-delete-overdue-slack", "1h",
                                     "--force-delete-node-unreachable-threshold", "1h",
                                     kubeconfig=kubeconfig) as process:
        yield process
    requests = rbac.requests_since(control_plane, offset)
    assert requests, "the audit log shows no request of the ServiceAccount"
    grants = rbac.grants("ClusterRole") + rbac.grants("Role")
    assert rbac.denied(requests) == [], "RBAC refused requests of the deployed ServiceAccount"
    assert rbac.not_granted(requests, grants) == []
    if os.environ.get("OMENATIVE_FULL_RUN") == "1":
        assert rbac.unused(requests, grants) == [], "deploy/base/rbac.yaml grants what the controller never asked for"


def write_yaml(folder: Path, name: str, obj: dict[str, Any]) -> str:
    path = folder / name
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    return str(path)


@pytest_asyncio.fixture
async def model_agent(api: client.ApiClient) -> ModelAgent:
    return ModelAgent(api)



async def qwen3_ready(control_plane: ControlPlane, sim_nodes: NodeFactory, model_agent: ModelAgent) -> list[str]:
    """The guide's prerequisite: the catalog's qwen3-0-6b downloaded and Ready on two new GPU nodes."""
    nodes = [await sim_nodes("gpu"), await sim_nodes("gpu")]
    await control_plane.kubectl("apply", "-f", str(CATALOG / "models" / "Qwen" / "Qwen3-0.6B.yaml"))
    await model_agent.downloaded("qwen3-0-6b", nodes, QWEN3_LEARNED)
    return nodes


async def wait_gone(control_plane: ControlPlane, namespace: str, kinds: str, selector: str,
                    timeout: float = 120) -> None:
    async def none_left() -> bool:
        out = await control_plane.kubectl("get", kinds, "-n", namespace, "-l", selector, "-o", "name")
        return out.stdout.strip() == ""

    await wait_for(none_left, timeout=timeout, what=f"no {kinds} left with {selector}")
