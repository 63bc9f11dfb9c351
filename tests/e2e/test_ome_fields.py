"""Fields of OME's API that omenative honors as OME documents them, on the multi-node guide's example:
`rollingUpdate.partition` holds the lowest-indexed Instances on their revision with the `Staged` reason until it is
lifted; `ome.io/revision-history-limit` prunes idle ControllerRevisions, never one in use; `topologyKey` keeps each
worker in its leader's domain; `topologySpread` spreads Instances across zones ("Spread Instances across fault
domains"), with the scheduler's placement checked on nodes labelled by domain."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from omenative.api import constants as c
from omenative.api.instance_status import decode_rows
from tests.conftest import NodeFactory, describe_namespace
from tests.e2e.conftest import ModelAgent, write_yaml
from tests.e2e.test_lifecycle import Deployment, deploy  # noqa: F401  (the fixture)
from tests.support.catalog import CATALOG, MULTI_NODE_SEED, seed_yaml_blocks
from tests.support.cluster import REPO, ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.model_agent import QWEN3_LEARNED
from tests.support.wait import wait_for

IMAGES = [f"docker.io/lmsysorg/sglang:v0.5.{n}-cu129-amd64" for n in (6, 7, 8)]
Obj = dict[str, Any]


async def staged_on_new_revision(d: Deployment, before: str) -> Obj:
    """Waits until the replica moved what the partition allows onto a revision other than `before`, and the
    Instances it replaced have drained (a surge leaves the old Instance's pods until then)."""
    async def staged() -> Obj | None:
        status = (await d.replica()).get("status") or {}
        ready = next((x for x in status.get("conditions") or [] if x["type"] == "Ready"), {})
        drained = all(row.phase != "Deleting" for row in decode_rows(status))
        if status.get("updateRevision") != before and ready.get("reason") == "Staged" and drained:
            return status
        return None

    return await wait_for(staged, timeout=180, what="the update staged at the partition", describe=d.describe)


async def images_by_index(d: Deployment) -> dict[int, set[str]]:
    pods = json.loads((await d.kubectl("get", "pods", "-n", d.namespace, "-l", f"{c.LABEL_ISVC}={d.name}", "-o",
                                       "json")).stdout)["items"]
    out: dict[int, set[str]] = {}
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        index = int(pod["metadata"]["labels"][c.LABEL_INSTANCE_INDEX])
        out.setdefault(index, set()).update(x["image"] for x in pod["spec"]["containers"])
    return out


async def revisions(d: Deployment) -> set[str]:
    out = await d.kubectl("get", "controllerrevisions", "-n", d.namespace, "-l", f"{c.LABEL_ISVC}={d.name}", "-o",
                          "jsonpath={.items[*].metadata.name}")
    return set(out.stdout.split())


async def test_a_partition_stages_an_update_and_idle_revisions_are_pruned_past_the_limit(
    omenative: ControllerProcess, deploy: Callable[..., Awaitable[Deployment]],  # noqa: F811
) -> None:
    d = await deploy("staged")
    first = str(((await d.replica())["status"])["updateRevision"])
    old_image = d.runtime["spec"]["engineConfig"]["leader"]["runner"]["image"]
    d.isvc["metadata"]["annotations"] = {c.ANN_REVISION_HISTORY_LIMIT: "1"}
    d.isvc["spec"]["engine"]["lifecycle"]["updateStrategy"]["rollingUpdate"]["partition"] = 1
    await d.apply()
    out = await d.kubectl("get", "inferencereplica", f"{d.name}-engine", "-n", d.namespace, "-o",
                          "jsonpath={.spec.revisionHistoryLimit}")
    assert out.stdout == "1"

    # Each new image moves one Instance and holds instance 0, the lowest index, on the first revision.
    seen = [first]
    for image in IMAGES:
        await d.set_image(image)
        status = await staged_on_new_revision(d, seen[-1])
        seen.append(str(status["updateRevision"]))
        ready = await d.kubectl("get", "inferencereplica", f"{d.name}-engine", "-n", d.namespace, "-o",
                                'jsonpath={.status.conditions[?(@.type=="Ready")].message}')
        assert ready.stdout == (f"Staged at partition 1: 1/2 Instances on {seen[-1]}, 1 held on the prior "
                                "revision")
        images = await images_by_index(d)
        assert images[0] == {old_image}, images
        assert [v for k, v in images.items() if k != 0] == [{image}], images
    # Kept: the first revision (instance 0 still runs it, though it is the oldest), the update revision, and one
    # idle revision, the newest; the idle one before it was deleted.
    await wait_for(lambda: _equal(revisions(d), {seen[0], seen[2], seen[3]}), timeout=30,
                   what="the history pruned to one idle revision", describe=d.describe)

    # Lifting the partition finishes the rollout; then the first revision is idle and older than the one kept.
    d.isvc["spec"]["engine"]["lifecycle"]["updateStrategy"]["rollingUpdate"]["partition"] = 0
    await d.apply()
    await d.rolled_out(IMAGES[-1])
    out = await d.kubectl("wait", "--for=condition=Ready", f"inferencereplica/{d.name}-engine", "-n", d.namespace,
                          "--timeout=60s", check=False)
    assert out.returncode == 0, out.output
    await wait_for(lambda: _equal(revisions(d), {seen[2], seen[3]}), timeout=30,
                   what="the first revision pruned once idle", describe=d.describe)
    # A pruned revision's Services go with it (their owner is its ControllerRevision).
    await wait_for(lambda: _equal(revision_services(d), {f"{d.name}-engine-rev-{r.rsplit('-', 1)[1]}{suffix}"
                                                         for r in (seen[2], seen[3]) for suffix in ("", "-headless")}),
                   timeout=30, what="only the kept revisions' Services", describe=d.describe)


async def revision_services(d: Deployment) -> set[str]:
    out = await d.kubectl("get", "services", "-n", d.namespace, "-l", f"ome.io/inferenceservice={d.name},"
                          "ome.io/revision-hash", "-o", "jsonpath={.items[*].metadata.name}")
    return set(out.stdout.split())


async def _equal(got: Awaitable[set[str]], want: set[str]) -> bool:
    return await got == want


CLIQUE, ZONE = "nvidia.com/gpu.clique", "topology.kubernetes.io/zone"


def single_pod_runtime(name: str) -> Obj:
    """The multi-node guide's runtime with its leader's container as a single pod's."""
    runtime, _, _ = copy.deepcopy(seed_yaml_blocks(MULTI_NODE_SEED))
    engine = runtime["spec"]["engineConfig"]
    engine["runner"] = engine.pop("leader")["runner"]
    engine.pop("worker")
    runtime["metadata"]["name"] = name
    return dict(runtime)


def single_pod_isvc(name: str, namespace: str, runtime: str, **engine: Any) -> Obj:
    """An OMENative InferenceService of qwen3-0-6b on `runtime`, with these engine fields."""
    return {"apiVersion": c.API_VERSION, "kind": "InferenceService", "metadata": {"name": name, "namespace": namespace},
            "spec": {"deploymentMode": "OMENative", "model": {"name": "qwen3-0-6b"}, "runtime": {"name": runtime},
                     "engine": engine}}


async def remove(control_plane: ControlPlane, namespace: str, isvc: str, runtime: str) -> None:
    await control_plane.kubectl("delete", "inferenceservice", isvc, "-n", namespace, "--wait=false", check=False)
    await control_plane.kubectl("delete", "clusterservingruntime", runtime, "--ignore-not-found")


async def model_on(control_plane: ControlPlane, model_agent: ModelAgent, nodes: list[str]) -> None:
    """qwen3-0-6b Ready on exactly these nodes (the pods select them by the model's label)."""
    await control_plane.kubectl("apply", "-f", str(CATALOG / "models" / "Qwen" / "Qwen3-0.6B.yaml"))
    await model_agent.downloaded("qwen3-0-6b", nodes, QWEN3_LEARNED)


async def placement(control_plane: ControlPlane, namespace: str, isvc: str) -> list[Obj]:
    """The service's pods that are not going away, each with its node's labels (`node_labels`; {} while Pending)."""
    pods = json.loads((await control_plane.kubectl("get", "pods", "-n", namespace, "-l", f"{c.LABEL_ISVC}={isvc}",
                                                   "-o", "json")).stdout)["items"]
    nodes = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in json.loads(
        (await control_plane.kubectl("get", "nodes", "-o", "json")).stdout)["items"]}
    out = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    for pod in out:
        pod["node_labels"] = nodes.get(pod["spec"].get("nodeName") or "", {})
    return out


async def test_a_topology_key_keeps_every_worker_in_its_leaders_domain(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    model_agent: ModelAgent, namespace: str, tmp_path: Path,
) -> None:
    kubectl = control_plane.kubectl
    # Two cliques of two nodes. The leaders are pinned to clique a; clique b's nodes stay empty, so a scheduler
    # left to itself would spread the workers there (the least allocated nodes).
    nodes = [await sim_nodes("gpu", labels={CLIQUE: clique}) for clique in ("a", "a", "b", "b")]
    await model_on(control_plane, model_agent, nodes)
    runtime, _, isvc = copy.deepcopy(seed_yaml_blocks(MULTI_NODE_SEED))
    runtime["metadata"]["name"] = "srt-clique"
    isvc["metadata"] = {"name": "clique", "namespace": namespace}
    isvc["spec"]["runtime"]["name"] = "srt-clique"
    isvc["spec"]["engine"]["topologyKey"] = CLIQUE
    isvc["spec"]["engine"]["leader"] = {"nodeSelector": {CLIQUE: "a"}}
    try:
        await kubectl("apply", "-f", write_yaml(tmp_path, "rt.yaml", runtime))
        await kubectl("apply", "-f", write_yaml(tmp_path, "isvc.yaml", isvc))
        out = await kubectl("wait", "--for=condition=Ready", "inferenceservice/clique", "-n", namespace,
                            "--timeout=120s", check=False)
        assert out.returncode == 0, out.output + await describe_namespace(api, namespace)
        out = await kubectl("get", "inferencereplica", "clique-engine", "-n", namespace, "-o",
                            "jsonpath={.spec.topologyKey}")
        assert out.stdout == CLIQUE
        pods = await placement(control_plane, namespace, "clique")
        by_index: dict[str, dict[str, str]] = {}
        for pod in pods:
            labels = pod["metadata"]["labels"]
            by_index.setdefault(labels[c.LABEL_INSTANCE_INDEX], {})[labels[c.LABEL_RUNNER]] = \
                pod["node_labels"].get(CLIQUE, "")
            if labels[c.LABEL_RUNNER] == c.RUNNER_WORKER:
                term = pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
                assert term["topologyKey"] == CLIQUE
                assert term["matchLabelKeys"] == [c.LABEL_INSTANCE_INDEX, c.LABEL_INCARNATION]
        assert by_index == {"0": {"leader": "a", "worker": "a"}, "1": {"leader": "a", "worker": "a"}}, by_index
        group = await kubectl("get", "podgroup", "clique-engine-0", "-n", namespace, "-o",
                              "jsonpath={.metadata.annotations.ome\\.io/topology-key}")
        assert group.stdout == CLIQUE
    finally:
        await remove(control_plane, namespace, "clique", "srt-clique")


async def test_a_required_spread_puts_the_instances_in_different_zones_and_waits_for_room(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    model_agent: ModelAgent, namespace: str, tmp_path: Path,
) -> None:
    """The guide's single-pod engine of two Instances with `topologySpread: Required` on the zone label. Zone b
    first has only a node without a GPU: the second Instance waits Pending rather than join zone a, and takes
    zone b once a GPU node appears there."""
    kubectl = control_plane.kubectl
    describe = lambda: describe_namespace(api, namespace)  # noqa: E731
    zone_a = [await sim_nodes("gpu", labels={ZONE: "zone-a"}), await sim_nodes("gpu", labels={ZONE: "zone-a"})]
    no_gpu = await sim_nodes("cpu", gpus=0, labels={ZONE: "zone-b"})
    await model_on(control_plane, model_agent, [*zone_a, no_gpu])
    runtime = single_pod_runtime("srt-spread")
    isvc = single_pod_isvc("spread", namespace, "srt-spread", minReplicas=2, maxReplicas=2, topologySpread="Required",
                           topologySpreadKey=ZONE)
    try:
        await kubectl("apply", "-f", write_yaml(tmp_path, "rt.yaml", runtime))
        await kubectl("apply", "-f", write_yaml(tmp_path, "isvc.yaml", isvc))
        out = await kubectl("get", "inferencereplica", "spread-engine", "-n", namespace, "-o",
                            "custom-columns=SPREAD:.spec.topologySpread,SPREAD-KEY:.spec.topologySpreadKey,"
                            "TOPOLOGY-KEY:.spec.topologyKey", "--no-headers")
        assert out.stdout.split() == ["Required", ZONE, "<none>"]

        async def one_waits_for_the_spread() -> list[Obj] | None:
            pods = await placement(control_plane, namespace, "spread")
            placed = [p for p in pods if p["spec"].get("nodeName")]
            waiting = [p for p in pods if not p["spec"].get("nodeName")]
            if len(placed) != 1 or len(waiting) != 1:
                return None
            events = await kubectl("get", "events", "-n", namespace, "--field-selector",
                                   f"involvedObject.name={waiting[0]['metadata']['name']},reason=FailedScheduling",
                                   "-o", "jsonpath={.items[*].message}")
            return pods if "didn't match pod topology spread constraints" in events.stdout else None

        pods = await wait_for(one_waits_for_the_spread, timeout=60, what="the second Instance held by the spread",
                              describe=describe)
        assert [p["node_labels"][ZONE] for p in pods if p["spec"].get("nodeName")] == ["zone-a"]
        zone_b = await sim_nodes("gpu", labels={ZONE: "zone-b"})
        await model_on(control_plane, model_agent, [*zone_a, no_gpu, zone_b])
        out = await kubectl("wait", "--for=condition=Ready", "inferenceservice/spread", "-n", namespace,
                            "--timeout=120s", check=False)
        assert out.returncode == 0, out.output + await describe()
        pods = await placement(control_plane, namespace, "spread")
        assert sorted(p["node_labels"][ZONE] for p in pods) == ["zone-a", "zone-b"]
        out = await kubectl("get", "pods", "-n", namespace, "-l", f"{c.LABEL_ISVC}=spread", "--no-headers", "-o",
                            "custom-columns=SPREAD-KEY:.spec.topologySpreadConstraints[*].topologyKey,"
                            "WHEN:.spec.topologySpreadConstraints[*].whenUnsatisfiable")
        assert [line.split() for line in out.stdout.splitlines()] == [[ZONE, "DoNotSchedule"]] * 2
    finally:
        await remove(control_plane, namespace, "spread", "srt-spread")


async def test_the_model_reference_kind_decides_where_the_model_is_looked_up(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, namespace: str,
    tmp_path: Path,
) -> None:
    """OME's InferenceService page: `spec.model.kind` defaults to ClusterBaseModel, needed even when a BaseModel in
    the namespace has the name; `kind: BaseModel` serves the one in the namespace."""
    kubectl = control_plane.kubectl
    ready = 'jsonpath={.status.conditions[?(@.type=="Ready")].reason}:{.status.conditions[?(@.type=="Ready")].message}'
    runtime, _, isvc = copy.deepcopy(seed_yaml_blocks(MULTI_NODE_SEED))
    runtime["metadata"]["name"] = "srt-kind"
    model = {"apiVersion": c.API_VERSION, "kind": "BaseModel", "metadata": {"name": "local-qwen3",
                                                                           "namespace": namespace},
             "spec": {"vendor": "qwen", "modelFormat": {"name": "safetensors", "version": "1.0.0"},
                      "storage": {"storageUri": "hf://Qwen/Qwen3-0.6B", "path": "/raid/models/qwen3"}}}
    isvc["metadata"] = {"name": "kind", "namespace": namespace}
    isvc["spec"]["runtime"]["name"] = "srt-kind"
    isvc["spec"]["model"] = {"name": "local-qwen3"}
    try:
        await kubectl("apply", "-f", write_yaml(tmp_path, "rt.yaml", runtime))
        await kubectl("apply", "-f", write_yaml(tmp_path, "model.yaml", model))
        await kubectl("apply", "-f", write_yaml(tmp_path, "isvc.yaml", isvc))

        async def reason(want: str) -> str | None:
            out = await kubectl("get", "inferenceservice", "kind", "-n", namespace, "-o", ready)
            return out.stdout if out.stdout.startswith(want) else None

        got = await wait_for(lambda: reason("ModelNotFound"), timeout=30, what="ModelNotFound",
                             describe=lambda: describe_namespace(api, namespace))
        assert got == (f'ModelNotFound:model "local-qwen3" not found: no ClusterBaseModel of that name (a BaseModel '
                       f"in namespace {namespace} has it: set spec.model.kind: BaseModel)")
        isvc["spec"]["model"]["kind"] = "BaseModel"
        await kubectl("apply", "-f", write_yaml(tmp_path, "isvc.yaml", isvc))

        async def found() -> str | None:
            out = await kubectl("get", "inferenceservice", "kind", "-n", namespace, "-o", ready)
            return out.stdout if out.stdout and not out.stdout.startswith("ModelNotFound") else None

        await wait_for(found, timeout=30, what="the BaseModel found", describe=lambda: describe_namespace(api,
                                                                                                        namespace))
        out = await kubectl("get", "inferencereplica", "kind-engine", "-n", namespace, "-o", "name")
        assert out.stdout.strip() == "inferencereplica.ome.io/kind-engine"
    finally:
        await remove(control_plane, namespace, "kind", "srt-kind")


async def engine_pods(control_plane: ControlPlane, namespace: str, isvc: str) -> dict[str, Obj]:
    pods = json.loads((await control_plane.kubectl("get", "pods", "-n", namespace, "-l", f"{c.LABEL_ISVC}={isvc}",
                                                   "-o", "json")).stdout)["items"]
    return {p["metadata"]["name"]: p for p in pods if not p["metadata"].get("deletionTimestamp")}


async def test_in_place_updates_keep_the_pods_for_image_changes_only(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    model_agent: ModelAgent, namespace: str, tmp_path: Path,
) -> None:
    """OME's update strategies: under InPlaceIfPossible a new image is set on the running pods (same names, UIDs and
    nodes; the container restarted by the kubelet), one Instance at a time with maxUnavailable 1, each out of
    rotation meanwhile; another change recreates them; InPlaceOnly refuses it with InPlaceUpdateNotPossible."""
    kubectl = control_plane.kubectl
    describe = lambda: describe_namespace(api, namespace)  # noqa: E731
    nodes = [await sim_nodes("gpu"), await sim_nodes("gpu")]
    await model_on(control_plane, model_agent, nodes)
    runtime = single_pod_runtime("srt-inplace")
    isvc = single_pod_isvc("inplace", namespace, "srt-inplace", minReplicas=2, maxReplicas=2, lifecycle={
        "updateStrategy": {"type": "InPlaceIfPossible", "rollingUpdate": {"maxUnavailable": 1}}})
    runner = runtime["spec"]["engineConfig"]["runner"]

    async def apply_runtime() -> None:
        await kubectl("apply", "-f", write_yaml(tmp_path, "rt.yaml", runtime))

    async def settled(image: str, revision_not: str) -> Obj:
        async def done() -> Obj | None:
            status = json.loads((await kubectl("get", "inferencereplica", "inplace-engine", "-n", namespace, "-o",
                                               "json")).stdout).get("status") or {}
            pods = await engine_pods(control_plane, namespace, "inplace")
            if status.get("updateRevision") != revision_not and status.get("currentRevision") == \
                    status.get("updateRevision") and status.get("readyReplicas") == 2 and len(pods) == 2 and \
                    {x["image"] for p in pods.values() for x in p["spec"]["containers"]} == {image}:
                return status
            return None

        return await wait_for(done, timeout=120, what=f"both Instances on {image}", describe=describe)

    try:
        await apply_runtime()
        await kubectl("apply", "-f", write_yaml(tmp_path, "isvc.yaml", isvc))
        out = await kubectl("wait", "--for=condition=Ready", "inferenceservice/inplace", "-n", namespace,
                            "--timeout=120s", check=False)
        assert out.returncode == 0, out.output + await describe()
        before = await engine_pods(control_plane, namespace, "inplace")
        first = json.loads((await kubectl("get", "inferencereplica", "inplace-engine", "-n", namespace, "-o",
                                          "json")).stdout)["status"]["updateRevision"]

        # 1. A new image: the same pods, restarted on it.
        new_image = "docker.io/lmsysorg/sglang:v0.5.6-cu129-amd64"
        runner["image"] = new_image
        await apply_runtime()
        second = (await settled(new_image, first))["updateRevision"]
        after = await engine_pods(control_plane, namespace, "inplace")
        assert sorted(after) == sorted(before)
        for name, pod in after.items():
            assert pod["metadata"]["uid"] == before[name]["metadata"]["uid"], name
            assert pod["spec"]["nodeName"] == before[name]["spec"]["nodeName"], name
            assert pod["metadata"]["labels"][c.LABEL_REVISION_HASH] == str(second).rsplit("-", 1)[1]
            statuses = pod["status"]["containerStatuses"]
            assert [(s["image"], s["restartCount"]) for s in statuses] == [(new_image, 1)], statuses
            serving = next(x for x in pod["status"]["conditions"] if x["type"] == c.SERVING_GATE)
            assert serving["status"] == "True" and serving["reason"] == "InstanceReady"
        # It left rotation for the change (the gate's last transition is its return), one Instance at a time.
        assert all(next(x for x in p["status"]["conditions"] if x["type"] == c.SERVING_GATE)["lastTransitionTime"]
                   > next(x for x in before[n]["status"]["conditions"] if x["type"] == c.SERVING_GATE)[
                       "lastTransitionTime"] for n, p in after.items())

        # 2. Any other change recreates the pods under InPlaceIfPossible.
        runner.setdefault("env", []).append({"name": "OMENATIVE_TEST", "value": "1"})
        await apply_runtime()
        await settled(new_image, second)
        recreated = await engine_pods(control_plane, namespace, "inplace")
        assert {p["metadata"]["uid"] for p in recreated.values()}.isdisjoint(
            {p["metadata"]["uid"] for p in after.values()})

        # 3. InPlaceOnly refuses a change beyond the images, as OME's page shows.
        isvc["spec"]["engine"]["lifecycle"]["updateStrategy"]["type"] = "InPlaceOnly"
        await kubectl("apply", "-f", write_yaml(tmp_path, "isvc.yaml", isvc))
        runner["env"][-1]["value"] = "2"
        await apply_runtime()

        async def refusals() -> list[str] | None:
            out = await kubectl("get", "events", "-n", namespace, "--field-selector",
                                "reason=InPlaceUpdateNotPossible", "-o",
                                "custom-columns=KIND:.involvedObject.kind,NAME:.involvedObject.name,"
                                "MESSAGE:.message", "--no-headers")
            lines = sorted(line.split(None, 2)[2] for line in out.stdout.splitlines() if line.strip())
            return lines if len(lines) == 2 else None

        lines = await wait_for(refusals, timeout=60, what="two InPlaceUpdateNotPossible events", describe=describe)
        assert lines == [f"OMENative component=engine instance={i} rejected update: InPlaceOnly strategy but diff "
                         "exceeds container images" for i in (0, 1)]
        assert {p["metadata"]["uid"] for p in (await engine_pods(control_plane, namespace, "inplace")).values()} \
            == {p["metadata"]["uid"] for p in recreated.values()}
    finally:
        await remove(control_plane, namespace, "inplace", "srt-inplace")


async def test_an_instance_failing_on_a_bad_node_is_relocated_off_it(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    model_agent: ModelAgent, namespace: str, tmp_path: Path,
) -> None:
    """OME's automatic relocation: the only node at first is a bad one (the simulated kubelet crash-loops every pod on
    a node named `*-broken-*`, as a broken GPU would); the Instance fails there, and its rebuild leaves that node for
    the healthy one added meanwhile, with a Relocated record and an AutoMigrationTriggered event."""
    kubectl = control_plane.kubectl
    describe = lambda: describe_namespace(api, namespace)  # noqa: E731
    bad = await sim_nodes("broken")
    await model_on(control_plane, model_agent, [bad])
    runtime = single_pod_runtime("srt-relocate")
    isvc = single_pod_isvc("relocate", namespace, "srt-relocate", minReplicas=1, maxReplicas=1)
    try:
        await kubectl("apply", "-f", write_yaml(tmp_path, "rt.yaml", runtime))
        await kubectl("apply", "-f", write_yaml(tmp_path, "isvc.yaml", isvc))

        async def crash_looping() -> bool:
            pods = await engine_pods(control_plane, namespace, "relocate")
            return any(p["spec"].get("nodeName") == bad and any(
                ((s.get("state") or {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff"
                for s in (p.get("status") or {}).get("containerStatuses") or []) for p in pods.values())

        await wait_for(crash_looping, timeout=60, what="the pod crash-looping on the bad node", describe=describe)
        good = await sim_nodes("gpu")
        await model_on(control_plane, model_agent, [bad, good])
        out = await kubectl("wait", "--for=condition=Ready", "inferenceservice/relocate", "-n", namespace,
                            "--timeout=180s", check=False)
        assert out.returncode == 0, out.output + await describe()
        pods = await engine_pods(control_plane, namespace, "relocate")
        assert [p["spec"]["nodeName"] for p in pods.values()] == [good]
        terms = next(iter(pods.values()))["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert all({"key": "metadata.name", "operator": "NotIn", "values": [bad]} in t["matchFields"] for t in terms)

        async def settled() -> list[Obj] | None:
            status = json.loads((await kubectl("get", "inferencereplica", "relocate-engine", "-n", namespace, "-o",
                                               "json")).stdout).get("status") or {}
            records = [m for m in status.get("migrations") or [] if m.get("trigger") == "Auto"]
            return records if records and all(m.get("succeeded") for m in records) else None

        records = await wait_for(settled, timeout=30, what="the relocation settled", describe=describe)
        assert [(m["phase"], m["fromNode"], m["attempt"], m["sourceInstance"]) for m in records] == [
            ("Relocated", bad, 1, 0)]
        messages = await control_plane.event_messages(namespace, "AutoMigrationTriggered")
        assert messages == [f"OMENative component=engine instance=0 relocated off node {bad}: its attempt failed "
                            f"there ({records[0]['reason']}); relocation 1 of 3"]
    finally:
        await remove(control_plane, namespace, "relocate", "srt-relocate")


async def test_a_single_pod_surge_keeps_the_index_and_alternates_the_ordinal(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    model_agent: ModelAgent, namespace: str, tmp_path: Path,
) -> None:
    """OME's SurgeThenDrain for a single pod: the new pod takes the Instance's other ordinal
    (`...-engine-0-default-1` replaces `...-engine-0-default-0`), the Instance keeps its index and incarnation, and
    `activeOrdinal` records the slot; the next update moves it back."""
    kubectl = control_plane.kubectl
    describe = lambda: describe_namespace(api, namespace)  # noqa: E731
    nodes = [await sim_nodes("gpu"), await sim_nodes("gpu"), await sim_nodes("gpu")]
    await model_on(control_plane, model_agent, nodes)
    runtime = single_pod_runtime("srt-slots")
    isvc = single_pod_isvc("slots", namespace, "srt-slots", minReplicas=2, maxReplicas=2, lifecycle={
        "updateStrategy": {"type": "SurgeThenDrain", "rollingUpdate": {"maxSurge": 1}}})
    runner = runtime["spec"]["engineConfig"]["runner"]

    async def moved_to(image: str, ordinal: int) -> dict[str, Obj]:
        async def done() -> dict[str, Obj] | None:
            pods = await engine_pods(control_plane, namespace, "slots")
            status = json.loads((await kubectl("get", "inferencereplica", "slots-engine", "-n", namespace, "-o",
                                               "json")).stdout).get("status") or {}
            if sorted(pods) == [f"slots-engine-{i}-default-{ordinal}" for i in (0, 1)] and \
                    {x["image"] for p in pods.values() for x in p["spec"]["containers"]} == {image} and \
                    status.get("readyReplicas") == 2 and status.get("currentRevision") == status.get("updateRevision"):
                return pods
            return None

        return await wait_for(done, timeout=120, what=f"both pods in slot {ordinal} on {image}", describe=describe)

    async def slot_of(index: int) -> str:
        out = await kubectl("ome", "instance", "status", "slots", str(index), "--component", "engine", "-n",
                            namespace)
        return next(line.split(None, 1)[1] for line in out.stdout.splitlines() if line.startswith("lifecycle"))

    try:
        await kubectl("apply", "-f", write_yaml(tmp_path, "rt.yaml", runtime))
        await kubectl("apply", "-f", write_yaml(tmp_path, "isvc.yaml", isvc))
        first = await moved_to(runner["image"], 0)
        assert (await slot_of(0)).startswith("activeOrdinal=0 ")

        # 1. A new image: each Instance's new pod comes up in slot 1, then its old pod drains.
        runner["image"] = "docker.io/lmsysorg/sglang:v0.5.6-cu129-amd64"
        await kubectl("apply", "-f", write_yaml(tmp_path, "rt.yaml", runtime))
        second = await moved_to(runner["image"], 1)
        for index in (0, 1):
            labels = second[f"slots-engine-{index}-default-1"]["metadata"]["labels"]
            assert (labels[c.LABEL_INSTANCE_INDEX], labels[c.LABEL_INCARNATION], labels[c.LABEL_POD_ORDINAL]) == (
                str(index), "1", "1")
            assert (await slot_of(index)).startswith("activeOrdinal=1 ")
        assert not set(first) & set(second)
        rows = await kubectl("get", "inferencereplica", "slots-engine", "-n", namespace, "-o",
                             "jsonpath={range .status.instanceStatuses[*]}{.index}:{.activeOrdinal}:"
                             "{.incarnation} {end}")
        assert rows.stdout.split() == ["0:1:1", "1:1:1"], rows.stdout
        events = await kubectl("get", "events", "-n", namespace, "--field-selector", "reason=InstanceReplaced",
                               "-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}")
        assert sorted(events.stdout.splitlines()) == [
            f"OMENative component=engine instance={i} pod slots-engine-{i}-default-0 replaced by "
            f"slots-engine-{i}-default-1 (revision={second[f'slots-engine-{i}-default-1']['metadata']['labels'][c.LABEL_REVISION_HASH]})"  # noqa: E501
            for i in (0, 1)], events.stdout

        # 2. The next update moves them back to slot 0; the index never changes.
        runner["image"] = "docker.io/lmsysorg/sglang:v0.5.7-cu129-amd64"
        await kubectl("apply", "-f", write_yaml(tmp_path, "rt.yaml", runtime))
        await moved_to(runner["image"], 0)
        assert (await slot_of(1)).startswith("activeOrdinal=0 ")
        rows = await kubectl("get", "inferencereplica", "slots-engine", "-n", namespace, "-o",
                             "jsonpath={.status.instanceStatuses[*].index}")
        assert rows.stdout.split() == ["0", "1"]
    finally:
        await remove(control_plane, namespace, "slots", "srt-slots")


def keda_crd() -> Path:
    """KEDA's ScaledObject CRD, from the Go module hack/build-binaries.sh --keda builds KEDA from."""
    version = subprocess.run(["bash", "-c", f"source {REPO}/hack/lib/versions.sh && echo $KEDA_VERSION"],
                             check=True, capture_output=True, text=True).stdout.strip()
    out = subprocess.run(["go", "mod", "download", "-json", f"github.com/kedacore/keda/v2@{version}"],
                         check=True, capture_output=True, text=True, cwd="/")
    return Path(json.loads(out.stdout)["Dir"]) / "config" / "crd" / "bases" / "keda.sh_scaledobjects.yaml"


async def test_class_keda_without_keda_is_said_and_the_scaled_object_follows_the_crd(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, namespace: str,
    tmp_path: Path,
) -> None:
    """Without KEDA's CRD nothing can scale a class-KEDA component: the InferenceService says so (condition, event,
    the component's autoscaler status) instead of OME's frozen status. Once the CRD is installed, the ScaledObject
    is written without a restart; a switch to External deletes it."""
    kubectl = control_plane.kubectl
    describe = lambda: describe_namespace(api, namespace)  # noqa: E731
    trigger = {"type": "prometheus", "metadata": {"serverAddress": "http://prometheus:9090", "query": "sum(q)",
                                                  "threshold": "5"}}
    isvc = {"apiVersion": c.API_VERSION, "kind": "InferenceService", "metadata": {"name": "kq", "namespace": namespace},
            "spec": {"deploymentMode": "OMENative", "engine": {
                "minReplicas": 1, "maxReplicas": 2, "runner": {"name": "ome-container", "image": "example.invalid/s:1"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "autoscaler": {"class": "KEDA", "keda": {"triggers": [trigger]}}}}}
    crd = keda_crd()
    try:
        await kubectl("apply", "-f", write_yaml(tmp_path, "kq.yaml", isvc))

        async def said() -> str | None:
            out = await kubectl("get", "inferenceservice", "kq", "-n", namespace, "-o",
                                "jsonpath={.status.conditions[?(@.type==\"AutoscalerReady\")].reason} "
                                "{.status.components.engine.autoscaler.conditions[0].reason}", check=False)
            return out.stdout if out.stdout == "KEDANotInstalled KEDANotInstalled" else None

        await wait_for(said, timeout=30, what="AutoscalerReady=False KEDANotInstalled", describe=describe)
        events = await kubectl("get", "events", "-n", namespace, "--field-selector",
                               "reason=KEDANotInstalled,involvedObject.name=kq", "-o",
                               "jsonpath={.items[*].message}")
        assert events.stdout.startswith("engine: autoscaler class KEDA needs KEDA's ScaledObject CRD "
                                        "(scaledobjects.keda.sh), which is not installed"), events.stdout
        hpa = await kubectl("get", "hpa", "-n", namespace, "-o", "name")
        assert "kq-engine" not in hpa.stdout  # nothing else scales it either

        # KEDA's CRD arrives: the ScaledObject follows, with no restart, and the condition goes.
        await kubectl("apply", "--server-side", "-f", str(crd))

        async def written() -> bool:
            so = await kubectl("get", "scaledobject", "scaledobject-kq-engine", "-n", namespace, "-o",
                               "jsonpath={.spec.scaleTargetRef.name} {.spec.triggers[0].type}", check=False)
            cond = await kubectl("get", "inferenceservice", "kq", "-n", namespace, "-o",
                                 "jsonpath={.status.conditions[?(@.type==\"AutoscalerReady\")].reason}")
            return so.stdout == "kq-engine prometheus" and cond.stdout == ""

        await wait_for(written, timeout=60, what="the ScaledObject once KEDA's CRD is installed", describe=describe)

        # External: omenative deletes its ScaledObject.
        isvc["spec"]["engine"]["autoscaler"] = {"class": "External"}
        await kubectl("apply", "-f", write_yaml(tmp_path, "kq.yaml", isvc))

        async def deleted() -> bool:
            so = await kubectl("get", "scaledobject", "scaledobject-kq-engine", "-n", namespace, check=False)
            return "NotFound" in so.output

        await wait_for(deleted, timeout=30, what="the ScaledObject deleted", describe=describe)

        # The user's own ScaledObject under omenative's name (OME's "Bring your own autoscaler"): a switch back to
        # KEDA does not take it over. The refusal is said (OME's words) and the user's object stays as written.
        mine = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                "metadata": {"name": "scaledobject-kq-engine", "namespace": namespace},
                "spec": {"scaleTargetRef": {"apiVersion": c.API_VERSION, "kind": "InferenceReplica",
                                            "name": "kq-engine"}, "minReplicaCount": 1, "maxReplicaCount": 5,
                         "triggers": [{"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}}]}}
        await kubectl("apply", "-f", write_yaml(tmp_path, "mine.yaml", mine))
        isvc["spec"]["engine"]["autoscaler"] = {"class": "KEDA", "keda": {"triggers": [trigger]}}
        await kubectl("apply", "-f", write_yaml(tmp_path, "kq.yaml", isvc))

        async def refused() -> str | None:
            out = await kubectl("get", "inferenceservice", "kq", "-n", namespace, "-o",
                                "jsonpath={.status.conditions[?(@.type==\"Reconciled\")].message}")
            return out.stdout if "is not controlled by expected owner" in out.stdout else None

        message = await wait_for(refused, timeout=30, what="Reconciled=False naming the user's ScaledObject",
                                 describe=describe)
        assert f"ScaledObject {namespace}/scaledobject-kq-engine is not controlled by expected owner " \
            "InferenceService kq" in message, message
        events = await kubectl("get", "events", "-n", namespace, "--field-selector",
                               "reason=FailedCreate,involvedObject.name=kq-engine", "-o",
                               "jsonpath={.items[*].message}")
        assert "is not controlled by expected owner" in events.stdout, events.stdout
        kept = await kubectl("get", "scaledobject", "scaledobject-kq-engine", "-n", namespace, "-o",
                             "jsonpath={.spec.triggers[0].type} {.metadata.ownerReferences}")
        assert kept.stdout == "cpu ", kept.stdout  # the user's triggers, and no owner added
        # Deleted by its user: omenative creates its own on its next attempt.
        await kubectl("delete", "scaledobject", "scaledobject-kq-engine", "-n", namespace)
        await wait_for(written, timeout=45, what="omenative's ScaledObject once the user's is gone",
                       describe=describe)
    finally:
        await kubectl("delete", "inferenceservice", "kq", "-n", namespace, "--wait=false", check=False)
        await kubectl("delete", "-f", str(crd), "--ignore-not-found", "--wait=false", check=False)
