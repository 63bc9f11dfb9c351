"""Kueue for real (hack/cluster.sh up --kueue, Kueue built from its Go module), on a control plane of its own.

A ClusterQueue with room for one two-pod Instance of the multi-node guide (two GPUs). Two InferenceServices of one
Instance each name the queue: the first is admitted (its gang is one Kueue workload, as it is one PodGroup) and
becomes Ready; the second waits behind Kueue's scheduling gate, not admitted and never failed, well past its
instanceReadyTimeout; once the first is deleted, the second is admitted and Ready with no other action.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kubernetes_asyncio import client

from omenative.api.instance_status import decode_rows
from tests.conftest import api_client_for
from tests.e2e.test_serve_multi_node_model import table
from tests.support.catalog import CATALOG, MULTI_NODE_SEED, seed_yaml_blocks
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.model_agent import QWEN3_LEARNED, ModelAgent
from tests.support.omenative import installed_and_running
from tests.support.wait import wait_for

NAME = "omenative-kueue"
NS = "kueue-demo"
QUEUE = "gpu-queue"
TIMEOUT = 15  # the InferenceServices' instanceReadyTimeout, seconds
Obj = dict[str, Any]

KUEUE_OBJECTS = [
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpu"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "gpus"},
     "spec": {"namespaceSelector": {}, "resourceGroups": [{
         "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
         "flavors": [{"name": "gpu", "resources": [
             {"name": "cpu", "nominalQuota": "100"}, {"name": "memory", "nominalQuota": "1Ti"},
             # One Instance of the guide: a leader and a worker of one GPU each.
             {"name": "nvidia.com/gpu", "nominalQuota": "2"}]}]}]}},
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": NS},
     "spec": {"clusterQueue": "gpus"}},
]


@pytest.fixture(scope="module")
def kueue_cluster() -> Iterator[ControlPlane]:
    ControlPlane.discard(NAME)
    control_plane = ControlPlane.up(NAME, "--kueue", "--gpu-nodes", "2", "--cpu-nodes", "0", "--model", "qwen3-0-6b")
    yield control_plane
    control_plane.down()


@pytest_asyncio.fixture(scope="module")
async def kueue_api(kueue_cluster: ControlPlane) -> AsyncIterator[client.ApiClient]:
    api_client = await api_client_for(kueue_cluster.kubeconfig)
    async with api_client:
        yield api_client


@pytest_asyncio.fixture(scope="module")
async def omenative_on_kueue(kueue_cluster: ControlPlane) -> AsyncIterator[ControllerProcess]:
    async with installed_and_running(kueue_cluster) as process:
        yield process


def service(name: str) -> tuple[Obj, Obj]:
    runtime, isvc, _ = copy.deepcopy(seed_yaml_blocks(MULTI_NODE_SEED))
    runtime["metadata"]["name"] = f"srt-{name}"
    isvc["metadata"] = {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}}
    isvc["spec"]["runtime"]["name"] = f"srt-{name}"
    isvc["spec"]["engine"]["lifecycle"] = {"instanceReadyTimeout": f"{TIMEOUT}s"}
    return runtime, isvc


async def test_a_queued_instance_waits_unfailed_and_is_admitted_when_the_first_goes(
    kueue_cluster: ControlPlane, kueue_api: client.ApiClient, omenative_on_kueue: ControllerProcess,
    tmp_path: Path,
) -> None:
    kubectl = kueue_cluster.kubectl
    await kubectl("create", "namespace", NS)
    await kubectl("apply", "-f", str(CATALOG / "models" / "Qwen" / "Qwen3-0.6B.yaml"))
    await ModelAgent(kueue_api).downloaded("qwen3-0-6b", ["gpu-node-1", "gpu-node-2"], QWEN3_LEARNED)
    manifest = tmp_path / "kueue.yaml"
    manifest.write_text(yaml.safe_dump_all(KUEUE_OBJECTS))
    await kubectl("apply", "-f", str(manifest))

    async def describe() -> str:
        out = await kubectl("get", "pods,workloads,podgroups", "-n", NS, "-o", "wide", check=False)
        rows = await kubectl("get", "inferencereplicas", "-n", NS, "-o", "yaml", check=False)
        return out.output + rows.stdout[-4000:]

    first_rt, first = service("first")
    second_rt, second = service("second")
    for obj in (first_rt, first):
        (tmp_path / "o.yaml").write_text(yaml.safe_dump(obj))
        await kubectl("apply", "-f", str(tmp_path / "o.yaml"))
    out = await kubectl("wait", "--for=condition=Ready", "inferenceservice/first", "-n", NS, "--timeout=120s",
                        check=False)
    assert out.returncode == 0, out.output + await describe()

    # The gang is one Kueue workload of both pods, as it is one PodGroup of both.
    workloads = json.loads((await kubectl("get", "workloads", "-n", NS, "-o", "json")).stdout)["items"]
    assert len(workloads) == 1, await describe()
    pods_in_workload = sum(int(p["count"]) for p in workloads[0]["spec"]["podSets"])
    podgroup = json.loads((await kubectl("get", "podgroup", "first-engine-0", "-n", NS, "-o", "json")).stdout)
    assert pods_in_workload == podgroup["spec"]["minMember"] == 2
    assert any(c["type"] == "Admitted" and c["status"] == "True" for c in workloads[0]["status"]["conditions"])

    for obj in (second_rt, second):
        (tmp_path / "o.yaml").write_text(yaml.safe_dump(obj))
        await kubectl("apply", "-f", str(tmp_path / "o.yaml"))
    applied = time.monotonic()

    async def gated() -> bool:
        status = json.loads((await kubectl("get", "inferencereplica", "second-engine", "-n", NS, "-o", "json",
                                           check=False)).stdout or "{}").get("status") or {}
        rows = decode_rows(status)
        return bool(rows) and rows[0].admitted is False and rows[0].pod_count == 2

    await wait_for(gated, timeout=30, what="the second Instance's pods gated by Kueue", describe=describe)
    out = await kubectl("ome", "instance", "list", "second", "-n", NS)
    (row,) = table(out.stdout)
    assert (row["PHASE"], row["AOF"]) == ("Creating", "-O-"), out.stdout  # pods, but not admitted
    out = await kubectl("ome", "instance", "status", "second", "0", "--component", "engine", "-n", NS, "-o", "wide")
    assert "admitted=false" in out.stdout and "deadline=-" in out.stdout, out.stdout

    # Well past its instanceReadyTimeout it still waits, never failed.
    seen: set[tuple[str | None, bool | None]] = set()
    while time.monotonic() < applied + TIMEOUT + 15:
        status = json.loads((await kubectl("get", "inferencereplica", "second-engine", "-n", NS, "-o",
                                           "json")).stdout).get("status") or {}
        (now,) = decode_rows(status)
        seen.add((now.phase, now.admitted))
        await asyncio.sleep(1)
    assert seen == {("Creating", False)}, seen

    # The first goes: Kueue admits the second, which comes up with no other action.
    await kubectl("delete", "inferenceservice", "first", "-n", NS)
    out = await kubectl("wait", "--for=condition=Ready", "inferenceservice/second", "-n", NS, "--timeout=120s",
                        check=False)
    assert out.returncode == 0, out.output + await describe()
    out = await kubectl("ome", "instance", "list", "second", "-n", NS)
    assert [(r["PHASE"], r["AOF"], r["EVIDENCE"]) for r in table(out.stdout)] == [("Ready", "A--", "OK")], out.stdout
    failed = await kubectl("get", "events", "-n", NS, "--field-selector", "reason=InstanceFailed", "-o", "name")
    assert failed.stdout.strip() == ""
