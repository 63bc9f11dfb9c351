"""The multi-node guide (../shared/seeds/000_8502d896559d33e7.txt) on a real node: step 4's port-forward and curl
answered by the stand-in engine, whose worker found the leader through OME_LEADER_ADDRESS and cluster DNS."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.e2e.conftest import write_yaml
from tests.support.catalog import CATALOG, MULTI_NODE_SEED, seed_yaml_blocks
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.model_agent import QWEN3_LEARNED
from tests.support.wait import wait_for

pytestmark = pytest.mark.e2e

NS = "qwen3-multi-node"
ISVC = "qwen3-multi-node"
LEADER, WORKER = f"{ISVC}-engine-0-leader-0", f"{ISVC}-engine-0-worker-0"
# Step 4's request, as the guide writes it.
CURL = ["curl", "-s", "http://localhost:8080/v1/chat/completions", "-H", "Content-Type: application/json", "-d",
        '{"model": "Qwen/Qwen3-0.6B", "messages": [{"role": "user", "content": "What is Kubernetes? Answer in one '
        'sentence."}], "max_tokens": 100, "chat_template_kwargs": {"enable_thinking": false}}']


@asynccontextmanager
async def port_forward(control_plane: ControlPlane) -> AsyncIterator[list[str]]:
    """`kubectl port-forward svc/qwen3-multi-node-engine 8080:8080 -n qwen3-multi-node`, left running; yields the
    lines it printed once it forwards."""
    proc = await asyncio.create_subprocess_exec(
        str(control_plane.bin_dir / "kubectl"), "port-forward", f"svc/{ISVC}-engine", "8080:8080", "-n", NS,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=control_plane.env())
    assert proc.stdout is not None
    lines = [(await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip() for _ in range(2)]
    try:
        yield lines
    finally:
        proc.terminate()
        await proc.wait()


async def chat(control_plane: ControlPlane) -> dict[str, object]:
    proc = await asyncio.create_subprocess_exec(*CURL, stdout=asyncio.subprocess.PIPE, env=control_plane.env())
    out, _ = await proc.communicate()
    assert proc.returncode == 0, f"curl exited {proc.returncode}"
    answer: dict[str, object] = json.loads(out)
    return answer


async def test_step_4_is_answered_by_the_leader_with_its_worker_connected(
    real_cluster: ControlPlane, real_omenative: ControllerProcess, tmp_path: Path,
) -> None:
    kubectl = real_cluster.kubectl
    runtime, isvc, _ = seed_yaml_blocks(MULTI_NODE_SEED)
    # Before you begin: the model downloaded and Ready (the node carries its label, as the model agent sets it).
    await kubectl("apply", "--server-side", "-f", str(CATALOG / "models" / "Qwen" / "Qwen3-0.6B.yaml"))
    await kubectl("patch", "clusterbasemodel", "qwen3-0-6b", "--type", "merge", "-p",
                  json.dumps({"spec": QWEN3_LEARNED}))
    await kubectl("patch", "clusterbasemodel", "qwen3-0-6b", "--subresource", "status", "--type", "merge",
                  "-p", json.dumps({"status": {"state": "Ready", "lifecycle": "Ready"}}))
    ready_nodes = await kubectl("get", "nodes", "-l", "models.ome.io/clusterbasemodel.qwen3-0-6b=Ready", "-o", "name")
    assert ready_nodes.stdout.split() == ["node/real-node-1"]

    # Steps 1-3, as the guide writes them.
    await kubectl("apply", "-f", write_yaml(tmp_path, "srt-qwen3-0-6b-multi-node.yaml", runtime))
    await kubectl("create", "namespace", NS)
    await kubectl("apply", "-f", write_yaml(tmp_path, "qwen3-multi-node-isvc.yaml", isvc))
    # The runtime's startup probe waits 60 s before its first try.
    out = await kubectl("wait", "--for=condition=Ready", f"inferenceservice/{ISVC}", "-n", NS, "--timeout=300s",
                        check=False)
    assert out.returncode == 0, out.output + (await kubectl("get", "pods", "-n", NS, "-o", "wide")).output

    # Step 4: the request goes to the leader, which serves with its worker connected.
    async with port_forward(real_cluster) as printed:
        assert printed == ["Forwarding from 127.0.0.1:8080 -> 8080", "Forwarding from [::1]:8080 -> 8080"]
        answer = await chat(real_cluster)
    assert answer["object"] == "chat.completion" and answer["model"] == "Qwen/Qwen3-0.6B"
    content = answer["choices"][0]["message"]["content"]  # type: ignore[index]
    assert f"stand-in engine {LEADER} answered (rank 0 of 2; workers connected: {WORKER})" in content

    # Deleting the worker takes the Instance down (the whole gang restarts) until the new worker reconnects.
    await kubectl("delete", "pod", WORKER, "-n", NS, "--wait=false")

    async def unready() -> bool:
        got = await kubectl("get", "inferencereplica", f"{ISVC}-engine", "-n", NS, "-o",
                            "jsonpath={.status.readyReplicas}")
        return got.stdout in ("", "0")

    await wait_for(unready, timeout=60, what="the engine unready after its worker was deleted")
    out = await kubectl("wait", "--for=condition=Ready", f"inferenceservice/{ISVC}", "-n", NS, "--timeout=300s",
                        check=False)
    assert out.returncode == 0, out.output
    incarnations = await kubectl("get", "pods", "-n", NS, "-l", f"ome.io/inferenceservice={ISVC}", "-o",
                                 "jsonpath={.items[*].metadata.labels.ome\\.io/instance-incarnation}")
    assert incarnations.stdout.split() == ["2", "2"]
    async with port_forward(real_cluster):
        answer = await chat(real_cluster)
    content = answer["choices"][0]["message"]["content"]  # type: ignore[index]
    assert f"workers connected: {WORKER}" in content
    logs = await kubectl("logs", LEADER, "-n", NS)
    assert f"leader: worker {WORKER} (rank 1) connected" in logs.stdout
