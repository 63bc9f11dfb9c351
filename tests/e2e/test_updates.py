"""An update by SurgeThenDrain, the default: when the runtime changes, each multi-node Instance is replaced by a
whole new Instance that comes up and serves before the old one drains (the multi-node guide's lifecycle section)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from kubernetes_asyncio import client

from tests.conftest import NodeFactory, describe_namespace
from tests.e2e.conftest import ModelAgent, qwen3_ready, write_yaml
from tests.support.catalog import MULTI_NODE_SEED, seed_yaml_blocks
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.wait import wait_for

NEW_IMAGE = "docker.io/lmsysorg/sglang:v0.5.6-cu129-amd64"


async def test_a_runtime_change_rolls_out_instance_by_instance_surging_first(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    model_agent: ModelAgent, namespace: str, tmp_path: Path,
) -> None:
    kubectl = control_plane.kubectl
    await qwen3_ready(control_plane, sim_nodes, model_agent)
    runtime, _, isvc = copy.deepcopy(seed_yaml_blocks(MULTI_NODE_SEED))
    runtime["metadata"]["name"] = "srt-rolling"
    isvc["metadata"] = {"name": "rolling", "namespace": namespace}
    isvc["spec"]["runtime"]["name"] = "srt-rolling"
    describe = lambda: describe_namespace(api, namespace)  # noqa: E731
    try:
        await kubectl("apply", "-f", write_yaml(tmp_path, "rt.yaml", runtime))
        await kubectl("apply", "-f", write_yaml(tmp_path, "isvc.yaml", isvc))
        out = await kubectl("wait", "--for=condition=Ready", "inferenceservice/rolling", "-n", namespace,
                            "--timeout=120s", check=False)
        assert out.returncode == 0, out.output + await describe()
        out = await kubectl("wait", "--for=jsonpath={.status.readyReplicas}=2", "inferencereplica/rolling-engine",
                            "-n", namespace, "--timeout=120s", check=False)
        assert out.returncode == 0, out.output + await describe()
        before = json.loads((await kubectl("get", "inferencereplica", "rolling-engine", "-n", namespace, "-o",
                                           "json")).stdout)["status"]

        runtime["spec"]["engineConfig"]["leader"]["runner"]["image"] = NEW_IMAGE
        runtime["spec"]["engineConfig"]["worker"]["runner"]["image"] = NEW_IMAGE
        await kubectl("apply", "-f", write_yaml(tmp_path, "rt.yaml", runtime))

        async def rolled_out() -> dict[str, object] | None:
            got = json.loads((await kubectl("get", "inferencereplica", "rolling-engine", "-n", namespace, "-o",
                                            "json")).stdout)["status"]
            done = got["updateRevision"] != before["updateRevision"] and \
                got.get("updatedReplicas") == 2 and got.get("readyReplicas") == 2 and got.get("replicas") == 2 and \
                got["currentRevision"] == got["updateRevision"]
            return got if done else None

        after = await wait_for(rolled_out, timeout=180, what="both Instances replaced", describe=describe)
        indexes = sorted(row["index"] for row in after["instanceStatuses"])
        # The first replacement takes index 2; the second waits for the surge slot that instance 0's draining pods
        # hold (maxSurge: 1), and then takes the lowest free index: 0 once those pods are gone, else 3.
        assert indexes in ([0, 2], [2, 3]), indexes
        second = indexes[0] if indexes == [0, 2] else 3
        pods = json.loads((await kubectl("get", "pods", "-n", namespace, "-o", "json")).stdout)["items"]
        assert sorted(p["metadata"]["name"] for p in pods) == sorted(
            f"rolling-engine-{i}-{runner}-0" for i in indexes for runner in ("leader", "worker"))
        assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {NEW_IMAGE}
        replaced = await control_plane.event_messages(namespace, "InstanceReplaced")
        revision = str(after["updateRevision"]).rsplit("-", 1)[1]
        assert sorted(replaced) == [
            f"OMENative component=engine instance=0 replaced by instance=2 (revision={revision})",
            f"OMENative component=engine instance=1 replaced by instance={second} (revision={revision})"]
        out = await kubectl("get", "inferenceservice", "rolling", "-n", namespace, "-o",
                            'jsonpath={.status.conditions[?(@.type=="Ready")].status}')
        assert out.stdout == "True"
    finally:
        await kubectl("delete", "inferenceservice", "rolling", "-n", namespace, "--wait=false")
        await kubectl("delete", "clusterservingruntime", "srt-rolling", "--ignore-not-found")
