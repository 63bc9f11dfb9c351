"""The multi-node guide (../shared/seeds/000_8502d896559d33e7.txt) on a real node: step 4's port-forward and curl
answered by the stand-in engine, whose worker found the leader through OME_LEADER_ADDRESS and cluster DNS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import write_yaml
from tests.realnode.conftest import REAL_NODES
from tests.realnode.forward import FORWARDING, content, curl, ingress_on, port_forward, through_gateway
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
REQUEST: dict[str, object] = {
    "model": "Qwen/Qwen3-0.6B",
    "messages": [{"role": "user", "content": "What is Kubernetes? Answer in one sentence."}], "max_tokens": 100,
    "chat_template_kwargs": {"enable_thinking": False}}


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
    assert ready_nodes.stdout.split() == [f"node/real-node-{i}" for i in range(1, REAL_NODES + 1)]

    # Steps 1-3, as the guide writes them.
    await kubectl("apply", "-f", write_yaml(tmp_path, "srt-qwen3-0-6b-multi-node.yaml", runtime))
    await kubectl("create", "namespace", NS)
    await kubectl("apply", "-f", write_yaml(tmp_path, "qwen3-multi-node-isvc.yaml", isvc))
    # The runtime's startup probe waits 60 s before its first try.
    out = await kubectl("wait", "--for=condition=Ready", f"inferenceservice/{ISVC}", "-n", NS, "--timeout=300s",
                        check=False)
    assert out.returncode == 0, out.output + (await kubectl("get", "pods", "-n", NS, "-o", "wide")).output

    # Step 4: the request goes to the leader, which serves with its worker connected.
    async with port_forward(real_cluster, f"{ISVC}-engine", NS) as printed:
        assert printed[:2] == FORWARDING
        answer = await curl(real_cluster, REQUEST)
    assert answer["object"] == "chat.completion" and answer["model"] == "Qwen/Qwen3-0.6B"
    assert f"stand-in engine {LEADER} answered (rank 0 of 2; workers connected: {WORKER})" in content(answer)

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
    async with port_forward(real_cluster, f"{ISVC}-engine", NS):
        answer = await curl(real_cluster, REQUEST)
    assert f"workers connected: {WORKER}" in content(answer)
    logs = await kubectl("logs", LEADER, "-n", NS)
    assert f"leader: worker {WORKER} (rank 1) connected" in logs.stdout
    # The same through `kubectl ome logs`: both pods of the service, each line prefixed with its component and pod.
    logs = await kubectl("ome", "logs", ISVC, "-n", NS)
    lines = logs.stdout.splitlines()
    assert any(line.startswith(f"[engine/{LEADER}] ") and f"leader: worker {WORKER} (rank 1) connected" in line
               for line in lines), logs.stdout
    assert any(line.startswith(f"[engine/{WORKER}] ") and "worker: connected to leader" in line for line in lines)
    one = await kubectl("ome", "logs", ISVC, "-n", NS, "-c", "engine", "--instance", "0", "--tail", "1")
    assert len(one.stdout.splitlines()) == 2  # one line from each pod of Instance 0

    # With ingress creation on (OME's annotations on the service), step 4 through the Gateway (Traefik, a real one):
    # the route goes to the engine's leader Service, and the leader answers.
    host = await ingress_on(real_cluster, NS, ISVC)
    route = json.loads((await kubectl("get", "httproute", ISVC, "-n", NS, "-o", "json")).stdout)
    assert [r["name"] for r in route["spec"]["rules"][0]["backendRefs"]] == [f"{ISVC}-engine"]
    answer = await through_gateway(real_cluster, host, REQUEST)
    assert f"stand-in engine {LEADER} answered (rank 0 of 2; workers connected: {WORKER})" in content(answer)
    await kubectl("delete", "namespace", NS, "--wait=true", "--timeout=120s")
