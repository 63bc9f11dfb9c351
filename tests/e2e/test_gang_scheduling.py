"""Gang-scheduling signals (OME's gang-scheduling page and the multi-node guide's troubleshooting):
with the PodGroup CRD and a gang-aware scheduler, Instances get PodGroups and no warning; with the default scheduler,
a MaybeNoGangScheduler warning (checked in the multi-node guide's test); without the CRD,
GangSchedulingUnavailable=True/PodGroupCRDNotInstalled; and when the CRD is installed later, omenative notices
without a restart."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
from kubernetes_asyncio import client

from tests.conftest import NodeFactory, api_client_for, describe_namespace
from tests.e2e.conftest import ModelAgent, qwen3_ready, write_yaml
from tests.support.catalog import CATALOG, MULTI_NODE_SEED, seed_yaml_blocks
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.omenative import install_crds, start_controller, stop_controller
from tests.support.wait import wait_for

CONDITION = ('jsonpath={.status.components.engine.lifecycle.conditions[?(@.type=="GangSchedulingUnavailable")]'
             '.reason}')


def seed(name: str, namespace: str, **engine: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    runtime, isvc, _ = copy.deepcopy(seed_yaml_blocks(MULTI_NODE_SEED))
    isvc["metadata"] = {"name": name, "namespace": namespace}
    isvc["spec"]["engine"].update(engine)
    return runtime, isvc


async def test_a_gang_aware_scheduler_gets_podgroups_and_no_warning(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    model_agent: ModelAgent, namespace: str, tmp_path: Path,
) -> None:
    kubectl = control_plane.kubectl
    await qwen3_ready(control_plane, sim_nodes, model_agent)
    runtime, isvc = seed("gang", namespace, schedulerName="scheduler-plugins-scheduler")
    await kubectl("apply", "-f", write_yaml(tmp_path, "rt.yaml", runtime))
    await kubectl("apply", "-f", write_yaml(tmp_path, "isvc.yaml", isvc))
    out = await kubectl("wait", "--for=condition=Ready", "inferenceservice/gang", "-n", namespace, "--timeout=120s",
                        check=False)
    assert out.returncode == 0, out.output + await describe_namespace(api, namespace)
    pods = json.loads((await kubectl("get", "pods", "-n", namespace, "-o", "json")).stdout)["items"]
    assert {p["spec"]["schedulerName"] for p in pods} == {"scheduler-plugins-scheduler"}
    assert {p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] for p in pods} == {"gang-engine-0"}
    group = json.loads((await kubectl("get", "podgroup", "gang-engine-0", "-n", namespace, "-o", "json")).stdout)
    assert group["spec"]["minMember"] == 2
    assert group["metadata"]["labels"] == {"component": "engine", "ome.io/inferenceservice": "gang",
                                           "ome.io/instance-index": "0", "ome.io/managed-by": "OMENative"}

    async def running() -> bool:
        got = await kubectl("get", "podgroup", "gang-engine-0", "-n", namespace, "-o", "jsonpath={.status.phase}")
        return got.stdout == "Running"

    await wait_for(running, timeout=60, what="the PodGroup controller to see the gang Running")
    assert await control_plane.event_messages(namespace, "MaybeNoGangScheduler") == []
    out = await kubectl("get", "inferenceservice", "gang", "-n", namespace, "-o", CONDITION)
    assert out.stdout == "GangSchedulingAvailable"
    await kubectl("delete", "inferenceservice", "gang", "-n", namespace)
    await kubectl("delete", "clusterservingruntime", "srt-qwen3-0-6b-multi-node")


@pytest_asyncio.fixture(scope="module")
async def stock_plane() -> AsyncIterator[ControlPlane]:
    """A second control plane with the stock kube-scheduler and no PodGroup CRD (the coscheduling scheduler would
    schedule nothing without it)."""
    ControlPlane.discard("omenative-stock")  # a fresh one: no PodGroup CRD left by an earlier run
    plane = ControlPlane.up("omenative-stock", "--profile", "stock", "--gpu-nodes", "2", "--cpu-nodes", "0",
                            "--model", "qwen3-0-6b")
    yield plane
    plane.down()


async def test_without_the_podgroup_crd_gang_scheduling_is_unavailable_until_it_is_installed(
    stock_plane: ControlPlane, tmp_path: Path,
) -> None:
    kubectl = stock_plane.kubectl
    await install_crds(stock_plane)
    process = await start_controller(stock_plane)
    api = await api_client_for(stock_plane.kubeconfig)
    try:
        await kubectl("apply", "-f", str(CATALOG / "models" / "Qwen" / "Qwen3-0.6B.yaml"))
        await kubectl("create", "namespace", "qwen3-multi-node")
        runtime, isvc = seed("qwen3-multi-node", "qwen3-multi-node")
        await kubectl("apply", "-f", write_yaml(tmp_path, "rt.yaml", runtime))
        await kubectl("apply", "-f", write_yaml(tmp_path, "isvc.yaml", isvc))
        out = await kubectl("wait", "--for=condition=Ready", "inferenceservice/qwen3-multi-node", "-n",
                            "qwen3-multi-node", "--timeout=120s", check=False)
        assert out.returncode == 0, out.output + await describe_namespace(api, "qwen3-multi-node")
        # The guide's command and output.
        out = await kubectl("get", "inferenceservice", "qwen3-multi-node", "-n", "qwen3-multi-node", "-o", CONDITION)
        assert out.stdout == "PodGroupCRDNotInstalled"
        out = await kubectl("get", "--raw", "/apis/scheduling.x-k8s.io/v1alpha1", check=False)
        assert out.returncode != 0 and "NotFound" in out.stderr
        pods = json.loads((await kubectl("get", "pods", "-n", "qwen3-multi-node", "-o", "json")).stdout)["items"]
        assert len(pods) == 2 and all("scheduling.x-k8s.io/pod-group" not in p["metadata"]["labels"] for p in pods)

        # Installed later: noticed without a restart.
        await kubectl("apply", "--server-side", "-f", str(stock_plane.podgroup_crd_path()))

        async def available() -> bool:
            got = await kubectl("get", "inferenceservice", "qwen3-multi-node", "-n", "qwen3-multi-node", "-o",
                                CONDITION)
            group = await kubectl("get", "podgroup", "qwen3-multi-node-engine-0", "-n", "qwen3-multi-node",
                                  check=False)
            return got.stdout == "GangSchedulingAvailable" and group.returncode == 0

        await wait_for(available, timeout=60, what="omenative to notice the PodGroup CRD",
                       describe=lambda: describe_namespace(api, "qwen3-multi-node"))
        assert process.process is not None and process.process.returncode is None  # same process, no restart
        warnings = await stock_plane.event_messages("qwen3-multi-node", "MaybeNoGangScheduler")
        assert warnings and "spec.schedulerName is \"\"" in warnings[0]
    finally:
        await api.close()
        await stop_controller(stock_plane, process)
