"""What the cluster refuses reaches the user within seconds: a namespace's ResourceQuota with room for one pod of the
multi-node guide's two (QuotaExceeded: the readiness clock stopped, Ready without any other action once the quota is
gone), and a namespace that enforces the `restricted` Pod Security level with the prefill-decode guide's host-network
runtime (InvalidPodSpec at once, the revision held after three attempts, and no hot loop)."""

from __future__ import annotations

import asyncio
import copy
import json
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from omenative.api.instance_status import decode_rows
from tests.conftest import NodeFactory, describe_namespace
from tests.e2e.conftest import ModelAgent, qwen3_ready, write_yaml
from tests.e2e.test_serve_multi_node_model import table
from tests.e2e.test_serve_prefill_decode_model import LLAMA_LEARNED, MODEL, RUNTIME
from tests.support import rbac
from tests.support.catalog import CATALOG, MULTI_NODE_SEED, PD_SEED, seed_yaml_blocks
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.omenative import inline_component, inline_service
from tests.support.wait import wait_for

Obj = dict[str, Any]
WRITES = ("create", "update", "patch", "delete", "deletecollection")


async def replica(control_plane: ControlPlane, namespace: str, name: str) -> Obj:
    out = await control_plane.kubectl("get", "inferencereplica", name, "-n", namespace, "-o", "json", check=False)
    return dict(json.loads(out.stdout)) if out.returncode == 0 else {}


async def warning_events(control_plane: ControlPlane, namespace: str, reason: str) -> list[Obj]:
    out = await control_plane.kubectl("get", "events", "-n", namespace, "--field-selector",
                                      f"reason={reason},type=Warning", "-o", "json")
    return list(json.loads(out.stdout)["items"])


async def test_a_full_quota_holds_the_instance_names_the_quota_and_clears_by_itself(
    omenative: ControllerProcess, api: client.ApiClient, control_plane: ControlPlane, sim_nodes: NodeFactory,
    model_agent: ModelAgent, namespace: str, tmp_path: Path,
) -> None:
    kubectl = control_plane.kubectl
    describe = lambda: describe_namespace(api, namespace)  # noqa: E731
    await qwen3_ready(control_plane, sim_nodes, model_agent)
    await kubectl("create", "quota", "q", "-n", namespace, "--hard=pods=1")
    runtime, isvc, _ = copy.deepcopy(seed_yaml_blocks(MULTI_NODE_SEED))
    runtime["metadata"]["name"] = "srt-quota"
    isvc["metadata"] = {"name": "quota", "namespace": namespace}
    isvc["spec"]["runtime"]["name"] = "srt-quota"
    timeout = 15
    isvc["spec"]["engine"]["lifecycle"] = {"instanceReadyTimeout": f"{timeout}s"}
    await kubectl("apply", "-f", write_yaml(tmp_path, "rt.yaml", runtime))
    try:
        applied = time.monotonic()
        await kubectl("apply", "-f", write_yaml(tmp_path, "isvc.yaml", isvc))

        # Within 10 s: the FailedCreate event on the InferenceReplica, in the API server's words, and the row's hold.
        async def named() -> list[Obj] | None:
            events = await warning_events(control_plane, namespace, "FailedCreate")
            rows = decode_rows((await replica(control_plane, namespace, "quota-engine")).get("status"))
            held = rows and rows[0].operation is not None and rows[0].operation.waiting == "QuotaExceeded"
            return events if events and held else None

        events = await wait_for(named, timeout=10, what="the refusal named within 10 s", describe=describe)
        took = time.monotonic() - applied
        assert len(events) == 1, events
        assert events[0]["involvedObject"]["kind"] == "InferenceReplica"
        assert events[0]["involvedObject"]["name"] == "quota-engine"
        assert "exceeded quota: q" in events[0]["message"] and events[0]["message"].startswith("Error creating: ")
        print(f"FailedCreate and waiting=QuotaExceeded {took:.1f} s after the apply")

        out = await kubectl("ome", "instance", "list", "quota", "-n", namespace)
        (row,) = table(out.stdout.split("\n\n")[0])
        assert (row["COMP"], row["PHASE"], row["EVIDENCE"]) == ("engine", "Creating", "HOLD:QuotaExceeded"), out.stdout
        assert "engine Instance 0: pod create refused: exceeded quota: q, requested: pods=1, used: pods=1, " \
               "limited: pods=1" in out.stdout, out.stdout
        out = await kubectl("ome", "status", "quota", "-n", namespace)
        assert "engine refused" in out.stdout and "exceeded quota: q" in out.stdout, out.stdout
        out = await kubectl("ome", "instance", "status", "quota", "0", "--component", "engine", "-n", namespace)
        assert "waiting=QuotaExceeded" in out.stdout and "capacityRefusedAt=20" in out.stdout, out.stdout

        # The clock is stopped: well past the instanceReadyTimeout the Instance still waits, never failed.
        seen: list[tuple[str | None, str | None]] = []
        until = applied + timeout + 10
        while time.monotonic() < until:
            status = (await replica(control_plane, namespace, "quota-engine")).get("status") or {}
            (row_now,) = decode_rows(status)
            seen.append((row_now.phase, row_now.operation.waiting if row_now.operation else None))
            await asyncio.sleep(1)
        assert set(seen) == {("Creating", "QuotaExceeded")}, seen
        assert await warning_events(control_plane, namespace, "InstanceFailed") == []
        assert len(await warning_events(control_plane, namespace, "FailedCreate")) == 1  # named once, not per retry

        # The quota goes: the service comes up with no other action, with a full window again.
        await kubectl("delete", "quota", "q", "-n", namespace)
        out = await kubectl("wait", "--for=condition=Ready", "inferenceservice/quota", "-n", namespace,
                            "--timeout=90s", check=False)
        assert out.returncode == 0, out.output + await describe()
        final = await replica(control_plane, namespace, "quota-engine")
        assert not any(c["type"] == "ReplicaFailure" for c in final["status"]["conditions"])
        out = await kubectl("ome", "instance", "list", "quota", "-n", namespace)
        assert [r["EVIDENCE"] for r in table(out.stdout)] == ["OK"] and "refused" not in out.stdout
    finally:
        await kubectl("delete", "inferenceservice", "quota", "-n", namespace, "--wait=false", check=False)
        await kubectl("delete", "clusterservingruntime", "srt-quota", "--ignore-not-found")


async def test_a_pod_security_refusal_fails_at_once_is_held_after_three_attempts_and_does_not_loop(
    omenative: ControllerProcess, api: client.ApiClient, control_plane: ControlPlane, sim_nodes: NodeFactory,
    model_agent: ModelAgent, namespace: str, tmp_path: Path,
) -> None:
    kubectl = control_plane.kubectl
    describe = lambda: describe_namespace(api, namespace)  # noqa: E731
    await kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    gpu = [await sim_nodes("gpu") for _ in range(3)]
    await sim_nodes("cpu", gpus=0, cpus=32, memory="128Gi")
    await kubectl("apply", "-f", str(CATALOG / "models" / "meta" / "Llama-3.2-1B-Instruct.yaml"))
    await kubectl("apply", "-f", str(CATALOG / "runtimes" / "srt" / "meta" / "llama-3-2-1b-instruct-pd-rt.yaml"))
    await model_agent.downloaded(MODEL, gpu, LLAMA_LEARNED)
    (isvc,) = copy.deepcopy(seed_yaml_blocks(PD_SEED))
    isvc["metadata"]["namespace"] = namespace
    offset = rbac.audit_offset(control_plane)
    try:
        applied = time.monotonic()
        await kubectl("apply", "-f", write_yaml(tmp_path, "llama-pd.yaml", isvc))

        async def failed() -> list[Obj] | None:
            events = [e for e in await warning_events(control_plane, namespace, "FailedCreate")
                      if "violates PodSecurity" in e["message"]]
            rows = decode_rows((await replica(control_plane, namespace, "llama-pd-engine")).get("status"))
            invalid = any(r.last_failure is not None and r.last_failure.reason == "InvalidPodSpec" for r in rows)
            return events if events and invalid else None

        events = await wait_for(failed, timeout=10, what="InvalidPodSpec within 10 s", describe=describe)
        print(f"InvalidPodSpec and 'violates PodSecurity' {time.monotonic() - applied:.1f} s after the apply")
        assert {e["involvedObject"]["name"] for e in events} <= {"llama-pd-engine", "llama-pd-decoder",
                                                                  "llama-pd-router"}
        out = await kubectl("ome", "instance", "list", "llama-pd", "-n", namespace)
        assert "OK" not in [r["EVIDENCE"] for r in table(out.stdout.split("\n\n")[0])], out.stdout

        # The revision is held after three attempts, with OME's text; then nothing is retried.
        async def held() -> Obj | None:
            status = (await replica(control_plane, namespace, "llama-pd-engine")).get("status") or {}
            blocks = [b for b in status.get("retryBlocks") or [] if b.get("state") == "Held"]
            return blocks[0] if blocks else None

        block = await wait_for(held, timeout=90, what="the engine's revision held", describe=describe)
        assert block["attemptsStarted"] == 3 and block["reason"] == "InvalidPodSpec", block
        messages = [e["message"] for e in await warning_events(control_plane, namespace, "RetryHeld")]
        assert any(m.startswith(f"InferenceReplica {namespace}/llama-pd-engine component=engine update to revision ")
                   and "held after 3 failed attempt(s) (last failure: InvalidPodSpec); publish a corrected revision"
                   in m for m in messages), messages

        # Bounded writes: two minutes from the apply, then count what omenative wrote in the namespace; in the last
        # 30 s, with every revision held, no pod is tried again.
        await asyncio.sleep(max(0.0, applied + 90 - time.monotonic()))
        last = rbac.audit_offset(control_plane)
        await asyncio.sleep(max(0.0, applied + 120 - time.monotonic()))
        late = [r for r in rbac.requests_since(control_plane, last) if r.namespace == namespace and r.verb in WRITES]
        assert not [r for r in late if r.resource == "pods"], late
        writes = [r for r in rbac.requests_since(control_plane, offset)
                  if r.namespace == namespace and r.verb in WRITES]
        by_resource: dict[str, int] = {}
        for r in writes:
            by_resource[r.resource] = by_resource.get(r.resource, 0) + 1
        print(f"omenative's writes in the namespace over 2 minutes: {len(writes)} {sorted(by_resource.items())}")
        pod_creates = by_resource.get("pods", 0)
        assert pod_creates <= 3 * 4, by_resource  # three attempts of at most four pods (engine, decoder, router)
        assert len(writes) <= 150, by_resource
    finally:
        await kubectl("delete", "inferenceservice", "llama-pd", "-n", namespace, "--wait=false", check=False)
        await kubectl("delete", "clusterservingruntime", RUNTIME, "--ignore-not-found")
        await kubectl("delete", "clusterbasemodel", MODEL, "--ignore-not-found")


async def test_a_scale_past_what_the_names_allow_is_refused_with_the_bound(
    omenative: ControllerProcess, api: client.ApiClient, control_plane: ControlPlane, sim_nodes: NodeFactory,
    namespace: str, tmp_path: Path,
) -> None:
    """A 44-character single-pod service: index 9 is its last one-digit index, so 5 Instances fit and 6 do not."""
    kubectl = control_plane.kubectl
    name = "n" * 44
    await sim_nodes("gpu")
    isvc = inline_service(name, namespace, engine=inline_component(1, 5))
    await kubectl("apply", "-f", write_yaml(tmp_path, "isvc.yaml", isvc))
    out = await kubectl("wait", "--for=condition=Ready", f"inferenceservice/{name}", "-n", namespace,
                        "--timeout=90s", check=False)
    assert out.returncode == 0, out.output + await describe_namespace(api, namespace)
    out = await kubectl("scale", "inferencereplica", f"{name}-engine", "-n", namespace, "--replicas=6", check=False)
    assert out.returncode != 0
    assert (f"spec.replicas: 6 Instances of InferenceReplica {name}-engine would give pods names longer than 63 "
            f"characters (such as '{name}-engine-11-default-0'); at most 5 Instances fit") in out.stderr, out.stderr
    out = await kubectl("scale", "inferencereplica", f"{name}-engine", "-n", namespace, "--replicas=2")
    assert out.stdout.strip() == f"inferencereplica.ome.io/{name}-engine scaled"
    await kubectl("delete", "inferenceservice", name, "-n", namespace, "--wait=false")
