"""The guide "Serve a multi-node model" (../shared/seeds/000_8502d896559d33e7.txt), step by step, with its commands.

Step 4 (port-forward and a chat completion) needs a real model server; here the engine Service's EndpointSlice is
checked instead: it lists the leader, and only the leader, which is where the forwarded port would go.
"""

from __future__ import annotations

import json
from pathlib import Path

from kubernetes_asyncio import client

from tests.conftest import NodeFactory, describe_namespace
from tests.e2e.conftest import ModelAgent, qwen3_ready, wait_gone, write_yaml
from tests.support import faults
from tests.support.catalog import MULTI_NODE_SEED, seed_yaml_blocks
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.wait import wait_for

NS = "qwen3-multi-node"
ISVC = "qwen3-multi-node"


def table(output: str) -> list[dict[str, str]]:
    """Rows of kubectl's column output, keyed by header."""
    lines = [line for line in output.splitlines() if line.strip()]
    header = lines[0].split()
    return [dict(zip(header, line.split(), strict=False)) for line in lines[1:]]


async def test_serve_a_multi_node_model(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    model_agent: ModelAgent, tmp_path: Path,
) -> None:
    kubectl = control_plane.kubectl
    core = client.CoreV1Api(api)
    # A clean slate: the guide creates these.
    await kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true", "--timeout=120s")
    await kubectl("delete", "clusterservingruntime", "srt-qwen3-0-6b-multi-node", "--ignore-not-found")
    runtime, isvc, isvc_with_lifecycle = seed_yaml_blocks(MULTI_NODE_SEED)
    describe = lambda: describe_namespace(api, NS)  # noqa: E731

    # Before you begin: qwen3-0-6b downloaded and Ready on two amd64 nodes with free NVIDIA GPUs.
    nodes = await qwen3_ready(control_plane, sim_nodes, model_agent)
    ready_nodes = await kubectl("get", "nodes", "-l", "models.ome.io/clusterbasemodel.qwen3-0-6b=Ready", "-o", "name")
    assert sorted(ready_nodes.stdout.split()) == sorted(f"node/{n}" for n in nodes)

    try:
        # Step 1: the multi-node runtime.
        out = await kubectl("apply", "-f", write_yaml(tmp_path, "srt-qwen3-0-6b-multi-node.yaml", runtime))
        assert out.stdout.strip() == "clusterservingruntime.ome.io/srt-qwen3-0-6b-multi-node created"

        # Step 2: the namespace and the InferenceService (admitted without a warning).
        out = await kubectl("create", "namespace", NS)
        assert out.stdout.strip() == f"namespace/{NS} created"
        out = await kubectl("apply", "-f", write_yaml(tmp_path, "qwen3-multi-node-isvc.yaml", isvc))
        assert out.stdout.strip() == f"inferenceservice.ome.io/{ISVC} created"
        assert "Warning" not in out.stderr

        # Step 3: the Instance.
        out = await kubectl("wait", "--for=condition=Ready", f"inferenceservice/{ISVC}", "-n", NS, "--timeout=180s",
                            check=False)
        assert out.returncode == 0, out.output + await describe()
        assert out.stdout.strip() == f"inferenceservice.ome.io/{ISVC} condition met"

        out = await kubectl("get", "inferencereplica", f"{ISVC}-engine", "-n", NS)
        assert out.stdout.split("\n")[0].split() == ["NAME", "COMPONENT", "DESIRED", "CURRENT", "READY", "AVAILABLE",
                                                     "AGE"]
        row = table(out.stdout)[0]
        assert (row["NAME"], row["COMPONENT"], row["DESIRED"], row["CURRENT"], row["READY"], row["AVAILABLE"]) == \
            (f"{ISVC}-engine", "engine", "1", "1", "1", "1")

        out = await kubectl(
            "get", "pods", "-n", NS, "-l", f"ome.io/inferenceservice={ISVC}", "-o",
            'custom-columns=NAME:.metadata.name,RANK:.spec.containers[0].env[?(@.name=="OME_INSTANCE_POD_RANK")]'
            '.value,NODE:.spec.nodeName,READY:.status.conditions[?(@.type=="Ready")].status')
        pods = {r["NAME"]: r for r in table(out.stdout)}
        leader, worker = pods[f"{ISVC}-engine-0-leader-0"], pods[f"{ISVC}-engine-0-worker-0"]
        assert (leader["RANK"], worker["RANK"]) == ("0", "1")
        assert (leader["READY"], worker["READY"]) == ("True", "True")
        assert leader["NODE"] != worker["NODE"] and {leader["NODE"], worker["NODE"]} == set(nodes)

        out = await kubectl("get", "podgroup", f"{ISVC}-engine-0", "-n", NS, "-o",
                            "custom-columns=NAME:.metadata.name,MIN-MEMBER:.spec.minMember")
        assert table(out.stdout) == [{"NAME": f"{ISVC}-engine-0", "MIN-MEMBER": "2"}]
        out = await kubectl("get", "pods", "-n", NS, "-l", f"scheduling.x-k8s.io/pod-group={ISVC}-engine-0",
                            "-o", "name")
        assert sorted(out.stdout.split()) == [f"pod/{ISVC}-engine-0-leader-0", f"pod/{ISVC}-engine-0-worker-0"]

        # Step 4: the engine Service sends requests to the leader only. The EndpointSlice controller lists a pod a
        # moment after it turns Ready: wait for the slice to list a ready endpoint, then check which.
        async def ready_targets() -> set[str]:
            slices = await client.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
                NS, label_selector=f"kubernetes.io/service-name={ISVC}-engine")
            return {e.target_ref.name for s in slices.items for e in s.endpoints or [] if e.conditions.ready}

        targets = await wait_for(ready_targets, timeout=60, what="the engine's EndpointSlice listing a ready pod",
                                 describe=describe)
        assert targets == {f"{ISVC}-engine-0-leader-0"}

        # Troubleshooting: the worker's leader address, and the gang-scheduling warning (default scheduler).
        out = await kubectl("get", "pod", f"{ISVC}-engine-0-worker-0", "-n", NS, "-o",
                            'jsonpath={.spec.containers[0].env[?(@.name=="OME_LEADER_ADDRESS")].value}')
        assert out.stdout == f"{ISVC}-engine-0-leader-0.{ISVC}-engine-headless"
        assert await control_plane.event_messages(NS, "MaybeNoGangScheduler") == [
            'OMENative component=engine created scheduler-plugins PodGroup objects but pod template\'s '
            'spec.schedulerName is "" (default kube-scheduler does not enforce PodGroup gang); set '
            "runtime.spec.schedulerName to a gang-aware scheduler (e.g. scheduler-plugins-scheduler) or install "
            "scheduler-plugins as a plugin in the default scheduler"]

        # Control how Instances update and recover: two Instances, an explicit lifecycle.
        out = await kubectl("apply", "-f", write_yaml(tmp_path, "qwen3-multi-node-isvc.yaml", isvc_with_lifecycle))
        assert out.stdout.strip() == f"inferenceservice.ome.io/{ISVC} configured"
        out = await kubectl("wait", "--for=jsonpath={.status.readyReplicas}=2", f"inferencereplica/{ISVC}-engine",
                            "-n", NS, "--timeout=120s", check=False)
        assert out.returncode == 0, out.output + await describe()
        group = json.loads((await kubectl("get", "podgroup", f"{ISVC}-engine-1", "-n", NS, "-o", "json")).stdout)
        assert group["spec"] == {"minMember": 2, "scheduleTimeoutSeconds": 600}  # 45m clamped to the 600s maximum

        # The whole Instance restarts when a pod's container is OOM-killed after Ready.
        await faults.oom_kill(core, NS, f"{ISVC}-engine-0-worker-0")

        async def rebuilt(index: int, incarnation: int, message: str) -> None:
            """The Instance is rebuilt whole at that incarnation, with the troubleshooting table's event text."""
            expected = (f"OMENative component=engine instance={index} restart triggered: {message} "
                        f"(incarnation={incarnation})")

            async def restart_event() -> bool:
                return expected in await control_plane.event_messages(NS, "RestartTriggered")

            await wait_for(restart_event, timeout=60, what=f"the RestartTriggered event {expected!r}",
                           describe=describe)

            async def restarted() -> bool:
                got = await kubectl("get", "pods", "-n", NS, "-l", f"ome.io/instance-index={index}", "-o",
                                    "jsonpath={.items[*].metadata.labels.ome\\.io/instance-incarnation}")
                ready = await kubectl("get", "inferencereplica", f"{ISVC}-engine", "-n", NS, "-o",
                                      "jsonpath={.status.readyReplicas}")
                return got.stdout.split() == [str(incarnation)] * 2 and ready.stdout == "2"

            await wait_for(restarted, timeout=90, what=f"Instance {index} back at incarnation {incarnation}",
                           describe=describe)

        await rebuilt(0, 2, f"pod {ISVC}-engine-0-worker-0 container ome-container restarted after Ready: OOMKilled "
                            "(exit 137)")
        # ...and when a worker fails, or goes missing.
        await faults.fail_pod(core, NS, f"{ISVC}-engine-1-worker-0")
        await rebuilt(1, 2, f"pod {ISVC}-engine-1-worker-0 failed: Error")
        await kubectl("delete", "pod", f"{ISVC}-engine-0-worker-0", "-n", NS, "--wait=false")
        await rebuilt(0, 3, "gang member lost: 1 of 2 pods present")

        # Clean up.
        out = await kubectl("delete", "inferenceservice", ISVC, "-n", NS)
        assert out.stdout.startswith(f'inferenceservice.ome.io "{ISVC}" deleted')
        await wait_gone(control_plane, NS, "pods,services,podgroups,inferencereplicas,hpa,pdb",
                        f"ome.io/inferenceservice={ISVC}")
        out = await kubectl("delete", "namespace", NS)
        assert out.stdout.startswith(f'namespace "{NS}" deleted')
        out = await kubectl("delete", "clusterservingruntime", "srt-qwen3-0-6b-multi-node")
        assert out.stdout.startswith('clusterservingruntime.ome.io "srt-qwen3-0-6b-multi-node" deleted')
        out = await kubectl("get", "clusterbasemodel", "qwen3-0-6b", "-o", "name")
        assert out.stdout.strip() == "clusterbasemodel.ome.io/qwen3-0-6b"  # the model stays
    finally:
        await kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=false")
        await kubectl("delete", "clusterservingruntime", "srt-qwen3-0-6b-multi-node", "--ignore-not-found")
        await kubectl("delete", "clusterbasemodel", "qwen3-0-6b", "--ignore-not-found")
