"""`kubectl ome status`, `wait`, `get` and `version` through the real kubectl binary, on the multi-node guide's
example while one of its Instance's two pods cannot be scheduled, and once it can."""

from __future__ import annotations

import json
from pathlib import Path

from kubernetes_asyncio import client

from tests.conftest import NodeFactory, describe_namespace
from tests.e2e.conftest import ModelAgent, write_yaml
from tests.support.catalog import CATALOG, MULTI_NODE_SEED, seed_yaml_blocks
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.model_agent import QWEN3_LEARNED
from tests.support.wait import wait_for

NS = ISVC = "qwen3-multi-node"
MODEL, RUNTIME = "qwen3-0-6b", "srt-qwen3-0-6b-multi-node"
LEADER, WORKER = f"{ISVC}-engine-0-leader-0", f"{ISVC}-engine-0-worker-0"


def fields(stdout: str) -> list[tuple[str, str]]:
    """The FIELD/VALUE rows of a report table (a label may hold spaces; columns are 3+ spaces apart)."""
    rows = []
    for line in stdout.splitlines()[1:]:
        label, _, value = line.partition("   ")
        rows.append((label.strip(), value.strip()))
    return rows


async def test_status_explains_an_unschedulable_worker_and_wait_returns_the_documented_codes(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    model_agent: ModelAgent, tmp_path: Path,
) -> None:
    kubectl = control_plane.kubectl
    describe = lambda: describe_namespace(api, NS)  # noqa: E731
    await kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true", "--timeout=120s")
    runtime, isvc, _ = seed_yaml_blocks(MULTI_NODE_SEED)
    # The model on one node with a single GPU: the leader takes it, the worker (1 GPU too) has nowhere to go.
    first = await sim_nodes("gpu", gpus=1)
    await kubectl("apply", "-f", str(CATALOG / "models" / "Qwen" / "Qwen3-0.6B.yaml"))
    await model_agent.downloaded(MODEL, [first], QWEN3_LEARNED)
    try:
        await kubectl("apply", "-f", write_yaml(tmp_path, "runtime.yaml", runtime))
        await kubectl("create", "namespace", NS)
        await kubectl("apply", "-f", write_yaml(tmp_path, "isvc.yaml", isvc))

        # One GPU for two pods: the scheduler places the leader or the worker first (either can win), and the other
        # cannot be scheduled.
        async def unschedulable() -> str | None:
            out = await kubectl("get", "events", "-n", NS, "--field-selector", "reason=FailedScheduling", "-o",
                                "jsonpath={.items[*].involvedObject.name}")
            names = set(out.stdout.split()) & {WORKER, LEADER}
            return names.pop() if len(names) == 1 else None

        stuck = await wait_for(unschedulable, timeout=90, what="a pod's FailedScheduling event", describe=describe)
        out = await kubectl("ome", "status", ISVC, "-n", NS, "-o", "wide")
        rows = fields(out.stdout)
        report = dict(rows)
        assert report["Ready"] == "False / Valid", out.stdout
        assert report["engine"].startswith("False / Valid; Ready pods=") and report["engine"].endswith(
            "/2 restarts=0"), out.stdout
        assert report["engine phases"].startswith("R="), out.stdout
        # The pod's FailedScheduling event, and its message, say why.
        index = rows.index(("Warning Pod", f"{stuck} FailedScheduling"))
        assert rows[index + 1][0] == "Event message" and "Insufficient nvidia.com/gpu" in rows[index + 1][1]
        assert report["Pod observation"] == "Reported count=2 truncated=false"

        # Not ready yet: the wait times out with the documented code and message, after its report.
        waited = await kubectl("ome", "wait", ISVC, "-n", NS, "--for=condition=Ready", "--timeout=3s", check=False)
        assert waited.returncode == 2, waited.output
        assert waited.stderr.strip() == "error: RequestedConditionUnmet"
        report = dict(fields(waited.stdout))
        assert (report["Requested"], report["Outcome"], report["Reason"], report["Observed Ready"]) == (
            "Ready=True", "TimedOut", "ConditionNotMatched", "False")
        # Without rollout groups the rollout reports NotConfigured, which never matches.
        unmatched = await kubectl("ome", "wait", ISVC, "-n", NS, "--for=rollout=stable", "--timeout=1s",
                                  check=False)
        assert unmatched.returncode == 2, unmatched.output
        report = dict(fields(unmatched.stdout))
        assert (report["Requested"], report["Reason"], report["Reported rollout"]) == (
            "Rollout=Stable", "RolloutNotMatched", "NotConfigured"), unmatched.stdout
        refused = await kubectl("ome", "wait", ISVC, "-n", NS, "--for=migration=terminal", check=False)
        assert refused.returncode == 1 and refused.stderr.startswith("error: InvalidMigrationWaitFlags")

        # A second GPU node with the model: the worker is placed, and the waits match.
        second = await sim_nodes("gpu", gpus=1)
        await model_agent.downloaded(MODEL, [first, second], QWEN3_LEARNED)
        waited = await kubectl("ome", "wait", ISVC, "-n", NS, "--for=condition=Ready", "--timeout=2m", check=False)
        assert waited.returncode == 0, waited.output + await describe()
        assert dict(fields(waited.stdout))["Outcome"] == "Matched"
        waited = await kubectl("ome", "wait", ISVC, "-n", NS, "--for=replicas=ready", "--component", "engine",
                               "--replicas", "1", "--timeout=30s", "-o", "json", check=False)
        assert waited.returncode == 0, waited.output
        content = json.loads(waited.stdout)["content"]
        assert (content["outcome"], content["reason"], content["readyReplicas"]["readyReplicas"]) == (
            "Matched", "ReplicaReadyMatched", 1)
        status = json.loads((await kubectl("ome", "status", ISVC, "-n", NS, "-o", "json")).stdout)
        assert status["kind"] == "StatusReport"
        assert status["content"]["ready"]["status"] == "True"
        engine = status["content"]["pods"]["components"]["engine"]
        assert (engine["podReady"], engine["podTotal"]) == (2, 2)

        listed = await kubectl("ome", "get", "isvc", "-n", NS)
        head, row = (line.split() for line in listed.stdout.splitlines())
        assert dict(zip(head, row, strict=True)) | {"AGE": "-"} == {
            "NAME": ISVC, "MODEL": MODEL, "RUNTIME": RUNTIME, "READY": "True",
            "URL": f"http://{ISVC}.{NS}.svc.cluster.local:8080", "AGE": "-"}
        replicas = await kubectl("ome", "get", "ir", f"{ISVC}-engine", "-n", NS, "-o", "json")
        assert json.loads(replicas.stdout)["status"]["readyReplicas"] == 1

        # The plugin's version, and the operator's: no omenative Deployment in this cluster, which it says.
        version = await kubectl("ome", "version")
        assert version.stdout.splitlines() == [
            "Client Version: 0.1.0 (commit unknown)",
            "Operator Version: unknown (get deployments.apps omenative-system/omenative: NotFound)"]
        missing = await kubectl("ome", "status", "no-such-service", "-n", NS, check=False)
        assert (missing.returncode, missing.stderr.strip()) == (1, "error: status InferenceService was not found")
    finally:
        await kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=false")
        await kubectl("delete", "clusterservingruntime", RUNTIME, "--ignore-not-found")
        await kubectl("delete", "clusterbasemodel", MODEL, "--ignore-not-found")
