"""Instance migration and transient scale (OME's concepts/omenative/migration-and-transient-scale.md and the guides
under scale-and-migrate/), against the local control plane: the multi-node seed's Instance moved off its leader's
node with two leaders in the Service at every sample, a move with no room failing at its deadline, a node emptied of
three Instances of two components, and a transient scale of the prefill-decode seed's engine."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from omenative.api.instance_status import decode_rows
from tests.conftest import NodeFactory, describe_namespace
from tests.e2e.conftest import ModelAgent, write_yaml
from tests.e2e.test_kubectl_ome import fields as field_rows
from tests.e2e.test_serve_multi_node_model import table
from tests.e2e.test_serve_prefill_decode_model import LLAMA_LEARNED, MODEL, RUNTIME
from tests.support.catalog import CATALOG, MULTI_NODE_SEED, PD_SEED, seed_yaml_blocks
from tests.support.cluster import REPO, ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.history import recorded
from tests.support.model_agent import QWEN3_LEARNED
from tests.support.omenative import inline_component, inline_service
from tests.support.wait import wait_for

Obj = dict[str, Any]
TERMINAL = ("Completed", "Failed", "Relocated")


def fields(output: str) -> dict[str, str]:
    """The FIELD/VALUE table kubectl-ome prints (a label may hold spaces; columns are 3+ spaces apart)."""
    return dict(field_rows(output))


async def replica(control_plane: ControlPlane, namespace: str, name: str) -> Obj:
    out = await control_plane.kubectl("get", "inferencereplica", name, "-n", namespace, "-o", "json")
    return dict(json.loads(out.stdout))


async def record(control_plane: ControlPlane, namespace: str, name: str, request: str) -> Obj | None:
    migrations = ((await replica(control_plane, namespace, name)).get("status") or {}).get("migrations") or []
    return next((m for m in migrations if m.get("requestUUID") == request), None)


async def start(control_plane: ControlPlane, namespace: str, isvc: str, *args: str) -> str:
    """`kubectl ome migration start ... --yes`; returns the request ID. A conflict (exit 3: the service changed
    between the command's reads, as while the controller writes its status) is run again, as the reference says."""
    async def sent() -> str | None:
        out = await control_plane.kubectl("ome", "migration", "start", isvc, "-n", namespace, *args, "--yes", "-o",
                                          "json", check=False)
        if out.returncode == 3:
            return None
        assert out.returncode == 0, out.output
        result = json.loads(out.stdout)
        assert (result["accepted"], result["applied"]) == (True, True), result
        return str(result["requestID"])

    return await wait_for(sent, timeout=30, what="the migration request sent")


@contextlib.asynccontextmanager
async def leader_samples(api: client.ApiClient, namespace: str, service: str,
                         expected: int) -> AsyncIterator[list[int]]:
    """The number of ready leader endpoints of a Service's EndpointSlices, sampled every 200 ms while the block
    runs. Sampling starts once the slices list `expected` ready leaders: they follow the pods' readiness a moment
    later, so a sample taken before the EndpointSlice controller caught up would not be a gap in serving."""
    discovery = client.DiscoveryV1Api(api)
    samples: list[int] = []
    running = True

    async def ready_leaders() -> int:
        slices = await discovery.list_namespaced_endpoint_slice(
            namespace, label_selector=f"kubernetes.io/service-name={service}")
        return sum(1 for s in slices.items for e in s.endpoints or []
                   if e.conditions.ready and e.target_ref is not None and e.target_ref.name.endswith("-leader-0"))

    async def listed() -> bool:
        return await ready_leaders() == expected

    await wait_for(listed, timeout=60, what=f"{expected} ready leaders in the EndpointSlices of {service}")

    async def sample() -> None:
        while running:
            samples.append(await ready_leaders())
            await asyncio.sleep(0.2)

    task = asyncio.create_task(sample())
    try:
        yield samples
    finally:
        running = False
        await task


async def test_the_multi_node_seed_instance_moves_off_its_leaders_node_with_two_leaders_serving(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    model_agent: ModelAgent, tmp_path: Path,
) -> None:
    kubectl = control_plane.kubectl
    ns, isvc_name = "qwen3-multi-node", "qwen3-multi-node"
    engine = f"{isvc_name}-engine"
    await kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=true", "--timeout=120s")
    runtime, _, isvc = seed_yaml_blocks(MULTI_NODE_SEED)  # the seed's two-Instance InferenceService
    describe = lambda: describe_namespace(api, ns)  # noqa: E731
    # One GPU per node: the two Instances fill the four model nodes, so the surge first waits for room.
    nodes = [await sim_nodes("gpu", gpus=1) for _ in range(4)]
    spare = [await sim_nodes("gpu", gpus=1) for _ in range(2)]
    await kubectl("apply", "-f", str(CATALOG / "models" / "Qwen" / "Qwen3-0.6B.yaml"))
    await model_agent.downloaded("qwen3-0-6b", nodes, QWEN3_LEARNED)
    try:
        await kubectl("apply", "-f", write_yaml(tmp_path, "runtime.yaml", runtime))
        await kubectl("create", "namespace", ns)
        await kubectl("apply", "-f", write_yaml(tmp_path, "isvc.yaml", isvc))
        out = await kubectl("wait", "--for=jsonpath={.status.servingReplicas}=2", f"inferencereplica/{engine}", "-n",
                            ns, "--timeout=180s", check=False)
        assert out.returncode == 0, out.output + await describe()
        pods = json.loads((await kubectl("get", "pods", "-n", ns, "-o", "json")).stdout)["items"]
        source_node = next(p["spec"]["nodeName"] for p in pods if p["metadata"]["name"] == f"{engine}-0-leader-0")
        source_uids = {p["metadata"]["uid"] for p in pods if p["metadata"]["name"].startswith(f"{engine}-0-")}

        async with leader_samples(api, ns, engine, 2) as samples, \
                recorded(api, "inferencereplicas", ns, engine) as history:
            request = await start(control_plane, ns, isvc_name, "--component", "engine", "--instance", "0",
                                  "--from-node", source_node, "--hint-node", spare[0], "--reason", "maintenance")

            async def surge_waiting() -> bool:
                found = await record(control_plane, ns, engine, request)
                if not found or found.get("phase") != "SurgePending":
                    return False
                surge = json.loads((await kubectl("get", "pods", "-n", ns, "-l", "ome.io/instance-index=2", "-o",
                                                  "json")).stdout)["items"]
                return len(surge) == 2 and all(
                    any(c["type"] == "PodScheduled" and c["status"] == "False" for c in
                        (p.get("status") or {}).get("conditions") or []) for p in surge)

            await wait_for(surge_waiting, timeout=60, what="the surge waiting for room", describe=describe)
            # While the surge waits, CURRENT counts it: one over DESIRED.
            out = await kubectl("get", "inferencereplica", engine, "-n", ns)
            row = table(out.stdout)[0]
            assert (row["DESIRED"], row["CURRENT"], row["READY"]) == ("2", "3", "2"), out.stdout
            out = await kubectl("ome", "instance", "list", isvc_name, "-n", ns)
            phases = {r["IDX/INC"].split("/")[0]: r["PHASE"] for r in table(out.stdout) if r["COMP"] == "engine"}
            assert phases == {"0": "Migrating", "1": "Ready", "2": "Creating"}, out.stdout
            out = await kubectl("ome", "migration", "status", isvc_name, "-n", ns)
            lines = out.stdout.splitlines()
            assert lines[0].split() == ["SUBJECT/COMP", "STATUS", "DETAIL"], out.stdout
            assert lines[1].split(None, 2) == [f"{request[:8]}/engine", "SurgePending/Active/Current",
                                               "MSG: surge allocated; w..."], out.stdout
            surge_pod = json.loads((await kubectl("get", "pod", f"{engine}-2-leader-0", "-n", ns, "-o",
                                                  "json")).stdout)
            terms = surge_pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            assert all({"key": "metadata.name", "operator": "NotIn", "values": [source_node]} in t["matchFields"]
                       for t in terms["nodeSelectorTerms"])

            # Room appears: two more nodes get the model.
            await model_agent.downloaded("qwen3-0-6b", nodes + spare, QWEN3_LEARNED)
            out = await kubectl("ome", "wait", isvc_name, "-n", ns, "--for=migration=terminal",
                                f"--request-id={request}", "--timeout=180s", check=False)
            assert out.returncode == 0, out.output + await describe()
            report = fields(out.stdout)
            assert (report["Migration phase"], report["Migration outcome"]) == ("Completed", "Completed"), out.stdout
            async def drained() -> bool:
                left = json.loads((await kubectl("get", "pods", "-n", ns, "-o", "json")).stdout)["items"]
                return not any(p["metadata"]["uid"] in source_uids for p in left)

            await wait_for(drained, timeout=60, what="the source's pods gone", describe=describe)

        done = await record(control_plane, ns, engine, request)
        assert done is not None
        assert (done["phase"], done["message"], done["surgeInstance"], done["fromNode"]) == (
            "Completed", "migrated to instance=2", 2, source_node)
        assert samples and min(samples) >= 2, f"ready leaders per 200 ms sample: {samples}"
        # No version of the replica ever had fewer than two Instances serving.
        serving = history.values(lambda o: (o.get("status") or {}).get("servingReplicas"))
        assert min(v for v in serving if v is not None) >= 2, serving
        after = json.loads((await kubectl("get", "pods", "-n", ns, "-o", "json")).stdout)["items"]
        by_instance: dict[str, list[str]] = {}
        for pod in after:
            index = pod["metadata"]["labels"]["ome.io/instance-index"]
            by_instance.setdefault(index, []).append(pod["spec"]["nodeName"])
        assert sorted(by_instance) == ["1", "2"] and source_node not in by_instance["2"], by_instance
        status = (await replica(control_plane, ns, engine))["status"]
        revision = status["currentRevision"]
        assert await control_plane.event_messages(ns, "MigrationCompleted") == [
            f"OMENative migration uuid={request} complete: component=engine instance=0 -> instance=2 "
            f"(revision={revision})"]
        assert len(await control_plane.event_messages(ns, "MigrationRequestAccepted")) == 1
        annotations = json.loads((await kubectl("get", "inferenceservice", isvc_name, "-n", ns, "-o",
                                                "json")).stdout)["metadata"].get("annotations") or {}
        assert not any(k.startswith("ome.io/migration-request-v1-") for k in annotations), annotations
        audit = json.loads((await kubectl("get", "configmap", f"{isvc_name}-ome-migration-audit", "-n", ns, "-o",
                                          "json")).stdout)
        (entry,) = json.loads(audit["data"]["history.json"])
        assert (entry["id"], entry["phase"], entry["outcome"], entry["replacementInstance"]) == (
            request, "Completed", "migrated", 2)
        assert audit["metadata"]["ownerReferences"][0]["kind"] == "InferenceService"
        out = await kubectl("ome", "migration", "history", isvc_name, "-n", ns)
        evidence = sorted((r["EVID"], r["REQUEST/COMP"], r["PHASE/STATE"]) for r in table(out.stdout))
        assert evidence == [("AUDIT", f"{request[:8]}/E", "Completed/T"), ("AUTH", f"{request[:8]}/E", "Completed/T")]
    finally:
        await kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=true", "--timeout=120s")
        await kubectl("delete", "clusterservingruntime", "srt-qwen3-0-6b-multi-node", "--ignore-not-found")


async def test_a_migration_with_no_room_fails_at_its_deadline_and_the_source_serves_on(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    namespace: str,
) -> None:
    kubectl = control_plane.kubectl
    pool = {"omenative-test/pool": namespace[-12:].strip("-")}
    node = await sim_nodes("gpu", cpus=1, labels=pool)  # room for the one Instance, none for a surge elsewhere
    engine = inline_component(1)
    engine["nodeSelector"] = pool
    engine["lifecycle"] = {"instanceReadyTimeout": "15s"}
    await kubectl("apply", "-f", "-", stdin=json.dumps(inline_service("tight", namespace, engine=engine)))
    out = await kubectl("wait", "--for=jsonpath={.status.servingReplicas}=1", "inferencereplica/tight-engine", "-n",
                        namespace, "--timeout=90s", check=False)
    assert out.returncode == 0, out.output + await describe_namespace(api, namespace)
    before = json.loads((await kubectl("get", "pod", "tight-engine-0-default-0", "-n", namespace, "-o",
                                       "json")).stdout)["metadata"]["uid"]
    # The webhook refuses a malformed request, with a message that starts with "migration request".
    bad = await kubectl("annotate", "inferenceservice", "tight", "-n", namespace,
                        "ome.io/migration-request-v1-3f9c2a1e-7b4d-4c8e-9a6f-2d1b5e8c4a70="
                        '{"schemaVersion":"v1","component":"decoder","instance":0,"from_node":"x"}', check=False)
    assert bad.returncode == 1 and "migration request 3f9c2a1e-7b4d-4c8e-9a6f-2d1b5e8c4a70: the InferenceService " \
        "has no decoder" in bad.stderr, bad.output
    async with recorded(api, "inferencereplicas", namespace, "tight-engine") as history:
        request = await start(control_plane, namespace, "tight", "--component", "engine", "--instance", "0")
        out = await kubectl("ome", "wait", "tight", "-n", namespace, "--for=migration=terminal",
                            f"--request-id={request}", "--timeout=90s", check=False)
        assert out.returncode == 0, out.output
        assert fields(out.stdout)["Migration phase"] == "Failed"

        async def surge_gone() -> bool:
            rows = decode_rows((await replica(control_plane, namespace, "tight-engine")).get("status"))
            return [(r.index, r.phase) for r in rows] == [(0, "Ready")]

        await wait_for(surge_gone, timeout=60, what="the surge removed")
    failed = await record(control_plane, namespace, "tight-engine", request)
    assert failed is not None and failed["phase"] == "Failed"
    assert failed["message"].startswith("deadline exceeded in phase SurgePending: surge instance=1 not ready"), failed
    (expired,) = await control_plane.event_messages(namespace, "MigrationExpired")
    assert expired.startswith(f"OMENative migration uuid={request} failed: deadline exceeded in phase SurgePending")
    pod = json.loads((await kubectl("get", "pod", "tight-engine-0-default-0", "-n", namespace, "-o", "json")).stdout)
    assert pod["metadata"]["uid"] == before and pod["spec"]["nodeName"] == node
    serving = history.values(lambda o: (o.get("status") or {}).get("servingReplicas"))
    assert serving and min(v for v in serving if v is not None) == 1, serving
    phases = history.values(lambda o: [(r.index, r.phase) for r in decode_rows(o.get("status"))])
    assert [(0, "Migrating"), (1, "Creating")] in phases, phases


async def test_a_node_is_emptied_one_instance_of_a_component_at_a_time(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    namespace: str,
) -> None:
    kubectl = control_plane.kubectl
    pool = {"omenative-test/pool": namespace[-12:].strip("-")}
    old = await sim_nodes("gpu", cpus=3, labels=pool)
    engine, decoder = inline_component(2), inline_component(1)
    for part in (engine, decoder):
        part["nodeSelector"] = pool
    await kubectl("apply", "-f", "-", stdin=json.dumps(inline_service("busy", namespace, engine=engine,
                                                                       decoder=decoder)))
    for component, count in (("engine", 2), ("decoder", 1)):
        out = await kubectl("wait", f"--for=jsonpath={{.status.servingReplicas}}={count}",
                            f"inferencereplica/busy-{component}", "-n", namespace, "--timeout=90s", check=False)
        assert out.returncode == 0, out.output + await describe_namespace(api, namespace)
    await sim_nodes("gpu", cpus=3, labels=pool)  # where they go

    async with recorded(api, "inferencereplicas", namespace, "busy-engine") as engine_history, \
            recorded(api, "inferencereplicas", namespace, "busy-decoder") as decoder_history:
        proc = await asyncio.create_subprocess_exec(
            str(REPO / "hack" / "migrate-node.sh"), old, "--wait", "--timeout", "3m", env=control_plane.env(),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        output, _ = await proc.communicate()
        assert proc.returncode == 0, output.decode() + await describe_namespace(api, namespace)
    assert "3 Instance(s) on" in output.decode(), output.decode()
    for history, count in ((engine_history, 2), (decoder_history, 1)):
        moving = history.values(lambda o: sum(r.phase == "Migrating" for r in decode_rows(o.get("status"))))
        assert max(moving) == 1, moving  # never two Instances of a component out at once
        running = history.values(lambda o: sum(m.get("phase") in ("SurgePending", "SurgeReady", "Draining")
                                               for m in (o.get("status") or {}).get("migrations") or []))
        assert max(running) == 1, running
        serving = history.values(lambda o: (o.get("status") or {}).get("servingReplicas"))
        assert min(v for v in serving if v is not None) >= count, serving
        final = history.versions[-1]["status"]
        assert [m["phase"] for m in final["migrations"]] == ["Completed"] * count, final["migrations"]
    pods = json.loads((await kubectl("get", "pods", "-n", namespace, "-o", "json")).stdout)["items"]
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    assert len(live) == 3 and all(p["spec"]["nodeName"] != old for p in live), \
        [(p["metadata"]["name"], p["spec"]["nodeName"]) for p in pods]
    node = json.loads((await kubectl("get", "node", old, "-o", "json")).stdout)
    assert node["spec"].get("unschedulable") is True  # cordoned first


async def test_a_transient_scale_of_the_pd_engine_and_the_hpa_setting_it_back(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    model_agent: ModelAgent, tmp_path: Path,
) -> None:
    kubectl = control_plane.kubectl
    ns = "llama-scale"
    describe = lambda: describe_namespace(api, ns)  # noqa: E731
    await kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=true", "--timeout=120s")
    (seed,) = seed_yaml_blocks(PD_SEED)
    seed["metadata"]["namespace"] = ns
    gpu = [await sim_nodes("gpu") for _ in range(4)]
    await sim_nodes("cpu", gpus=0, cpus=32, memory="128Gi")
    await kubectl("create", "namespace", "ome", check=False)
    await kubectl("apply", "-f", str(CATALOG / "models" / "meta" / "Llama-3.2-1B-Instruct.yaml"))
    await kubectl("apply", "-f", str(CATALOG / "runtimes" / "srt" / "meta" / "llama-3-2-1b-instruct-pd-rt.yaml"))
    await model_agent.downloaded(MODEL, gpu, LLAMA_LEARNED)
    try:
        await kubectl("create", "namespace", ns)
        await kubectl("apply", "-f", write_yaml(tmp_path, "llama-pd.yaml", seed))
        out = await kubectl("wait", "--for=condition=Ready", "inferenceservice/llama-pd", "-n", ns, "--timeout=120s",
                            check=False)
        assert out.returncode == 0, out.output + await describe()
        others_before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in json.loads((await kubectl(
            "get", "pods", "-n", ns, "-l", "component in (decoder,router)", "-o", "json")).stdout)["items"]}
        assert len(others_before) == 2

        # The seed's bounds are 2..2; scale accepts counts within the bounds only, so the service first allows 3.
        refused = await kubectl("ome", "scale", "llama-pd", "-n", ns, "--component", "engine", "--replicas", "3",
                                "--override-autoscaler", "--yes", check=False)
        assert (refused.returncode, refused.stderr.strip()) == (
            1, "error: manual scale replicas must be positive and within verified bounds and partitions")
        await kubectl("patch", "inferenceservice", "llama-pd", "-n", ns, "--type", "merge", "-p",
                      '{"spec":{"engine":{"maxReplicas":3}}}')
        out = await kubectl("wait", "--for=jsonpath={.spec.maxReplicas}=3", "hpa/llama-pd-engine", "-n", ns,
                            "--timeout=60s")
        missing = await kubectl("ome", "scale", "llama-pd", "-n", ns, "--component", "engine", "--replicas", "3",
                                "--yes", check=False)
        assert missing.stderr.strip() == ("error: manual scale is transient and requires --override-autoscaler --yes "
                                          "for every ownership class")

        async def scaled(*extra: str) -> Any:
            out = await kubectl("ome", "scale", "llama-pd", "-n", ns, "--component", "engine", "--replicas", "3",
                                "--override-autoscaler", "--yes", *extra, check=False)
            if out.returncode != 0 and ("stale" in out.stderr or "changed" in out.stderr or out.returncode == 3):
                return None  # the controller was still catching up with the patch: run it again
            assert out.returncode == 0, out.output
            return out

        dry = await wait_for(lambda: scaled("--dry-run", "client"), timeout=30, what="a client dry run")
        preview = fields(dry.stderr.split("\n", 1)[1])
        assert (preview["/scale spec.replicas"], preview["bounds"], preview["verified ownership"]) == (
            "2 -> 3", "2..3", "HPA / ome"), dry.stderr
        assert fields(dry.stdout)["applied"] == "No"
        done = await wait_for(scaled, timeout=30, what="the scale request")
        result = fields(done.stdout)
        assert (result["target"], result["replicas"], result["applied"]) == (
            f"InferenceReplica/{ns}/llama-pd-engine", "2 -> 3", "Yes"), done.stdout

        out = await kubectl("wait", "--for=jsonpath={.status.readyReplicas}=3", "inferencereplica/llama-pd-engine",
                            "-n", ns, "--timeout=90s", check=False)
        assert out.returncode == 0, out.output + await describe()
        out = await kubectl("ome", "autoscale", "status", "llama-pd", "-n", ns, "--live-scale")
        rows = {r[0]: r[1:] for r in (line.split() for line in out.stdout.splitlines()[1:])}
        assert rows["LIVE-SPEC"][1] == "3" and rows["CLASS"][1] == "HPA" and rows["MANAGED-BY"][1] == "ome", \
            out.stdout
        others_after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in json.loads((await kubectl(
            "get", "pods", "-n", ns, "-l", "component in (decoder,router)", "-o", "json")).stdout)["items"]}
        assert others_after == others_before, "the decoder and the router keep their pods"

        # The HPA owns the count. With no metrics to call for another one it keeps 3 (it has seen it); at its next
        # sync after the service's bounds go back to the seed's 2..2, it sets the count back.
        out = await kubectl("wait", "--for=jsonpath={.status.currentReplicas}=3", "hpa/llama-pd-engine", "-n", ns,
                            "--timeout=60s", check=False)
        assert out.returncode == 0, out.output
        await kubectl("apply", "-f", write_yaml(tmp_path, "llama-pd.yaml", seed))

        async def set_back() -> bool:
            messages = await control_plane.event_messages(ns, "SuccessfulRescale")
            got = await replica(control_plane, ns, "llama-pd-engine")
            rows = decode_rows(got.get("status"))
            return any("New size: 2; reason: Current number of replicas above Spec.MaxReplicas" in m
                       for m in messages) and got["spec"]["replicas"] == 2 and \
                sorted(r.index or 0 for r in rows) == [0, 1] and all(r.phase == "Ready" for r in rows)

        await wait_for(set_back, timeout=90, what="the HPA setting the count back to 2", describe=describe)
    finally:
        await kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=true", "--timeout=120s")
        for kind, name in (("clusterbasemodel", MODEL), ("clusterservingruntime", RUNTIME)):
            await kubectl("delete", kind, name, "--ignore-not-found")
