"""The Instance lifecycle of OME v1.3 on the multi-node guide's lifecycle example (two Instances of a leader and a
worker, `maxSurge: 1`, `maxUnavailable: 1`): crash-loop repairs paced by the budget, minReadySeconds holding a
surge's drain, a revision that never starts being held and released, the Service never losing its last ready leader
during an update, `kubectl wait` waiting for the new generation, and a child write the API server refuses."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest_asyncio
from kubernetes_asyncio import client

from omenative.api.instance_status import decode_rows
from omenative.observe.pods import is_true
from tests.conftest import NodeFactory, describe_namespace
from tests.e2e.conftest import ModelAgent, qwen3_ready, write_yaml
from tests.e2e.test_serve_multi_node_model import table
from tests.support import faults
from tests.support.catalog import MULTI_NODE_SEED, seed_yaml_blocks
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.history import History, recorded
from tests.support.wait import wait_for

Obj = dict[str, Any]
NEW_IMAGE = "docker.io/lmsysorg/sglang:v0.5.6-cu129-amd64"
UNPULLABLE = "docker.io/lmsysorg/sglang:sim-unpullable"  # the simulated kubelet never pulls this tag


def when(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class Deployment:
    """The lifecycle example under a name of its own, with its own copy of the runtime."""

    def __init__(self, control_plane: ControlPlane, api: client.ApiClient, namespace: str, tmp_path: Path,
                 name: str, **engine: Any) -> None:
        self.kubectl = control_plane.kubectl
        self.control_plane = control_plane
        self.api = api
        self.namespace = namespace
        self.tmp_path = tmp_path
        self.name = name
        runtime, _, isvc = copy.deepcopy(seed_yaml_blocks(MULTI_NODE_SEED))
        runtime["metadata"]["name"] = f"srt-{name}"
        isvc["metadata"] = {"name": name, "namespace": namespace}
        isvc["spec"]["runtime"]["name"] = f"srt-{name}"
        isvc["spec"]["engine"]["lifecycle"].update(engine)
        self.runtime, self.isvc = runtime, isvc

    def describe(self) -> Awaitable[str]:
        return describe_namespace(self.api, self.namespace)

    async def apply(self) -> None:
        await self.kubectl("apply", "-f", write_yaml(self.tmp_path, f"rt-{self.name}.yaml", self.runtime))
        await self.kubectl("apply", "-f", write_yaml(self.tmp_path, f"isvc-{self.name}.yaml", self.isvc))

    async def set_image(self, image: str) -> None:
        self.runtime["spec"]["engineConfig"]["leader"]["runner"]["image"] = image
        self.runtime["spec"]["engineConfig"]["worker"]["runner"]["image"] = image
        await self.kubectl("apply", "-f", write_yaml(self.tmp_path, f"rt-{self.name}.yaml", self.runtime))

    async def replica(self) -> Obj:
        return dict(json.loads((await self.kubectl("get", "inferencereplica", f"{self.name}-engine", "-n",
                                                   self.namespace, "-o", "json")).stdout))

    async def ready(self, instances: int = 2) -> None:
        out = await self.kubectl("wait", "--for=condition=Ready", f"inferenceservice/{self.name}", "-n",
                                 self.namespace, "--timeout=120s", check=False)
        assert out.returncode == 0, out.output + await self.describe()
        out = await self.kubectl("wait", f"--for=jsonpath={{.status.readyReplicas}}={instances}",
                                 f"inferencereplica/{self.name}-engine", "-n", self.namespace, "--timeout=120s",
                                 check=False)
        assert out.returncode == 0, out.output + await self.describe()

    async def rolled_out(self, image: str, timeout: float = 180) -> Obj:
        async def done() -> Obj | None:
            status = (await self.replica()).get("status") or {}
            pods = json.loads((await self.kubectl("get", "pods", "-n", self.namespace, "-l",
                                                  f"ome.io/inferenceservice={self.name}", "-o", "json")).stdout)
            images = {c["image"] for p in pods["items"] for c in p["spec"]["containers"]}
            finished = status.get("currentRevision") == status.get("updateRevision") and \
                status.get("readyReplicas") == 2 and status.get("replicas") == 2 and images == {image}
            return status if finished else None

        return await wait_for(done, timeout=timeout, what=f"every Instance on {image}", describe=self.describe)

    async def delete(self) -> None:
        await self.kubectl("delete", "inferenceservice", self.name, "-n", self.namespace, "--wait=false",
                           check=False)
        await self.kubectl("delete", "clusterservingruntime", f"srt-{self.name}", "--ignore-not-found")


@pytest_asyncio.fixture
async def deploy(control_plane: ControlPlane, api: client.ApiClient, sim_nodes: NodeFactory, model_agent: ModelAgent,
                 namespace: str, tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Deployment]]]:
    made: list[Deployment] = []
    await qwen3_ready(control_plane, sim_nodes, model_agent)

    async def make(name: str, **engine: Any) -> Deployment:
        deployment = Deployment(control_plane, api, namespace, tmp_path, name, **engine)
        made.append(deployment)
        await deployment.apply()
        await deployment.ready()
        return deployment

    yield make
    for deployment in made:
        await deployment.delete()


def phases(history: History) -> list[dict[int, str]]:
    return history.values(lambda o: {r.index or 0: r.phase or "" for r in decode_rows(o.get("status"))})


async def test_crash_loops_are_repaired_one_instance_at_a_time(
    omenative: ControllerProcess, api: client.ApiClient, deploy: Callable[..., Awaitable[Deployment]],
    namespace: str,
) -> None:
    # Under RecreateInstanceOnPodRestart a crash is a restart that the policy acts on at once; the crash-loop
    # repair, which maxUnavailable paces, is what happens under None.
    d = await deploy("crashing", restartPolicy="None")
    core = client.CoreV1Api(api)
    async with recorded(api, "inferencereplicas", namespace, "crashing-engine") as history:
        for index in (0, 1):
            await faults.crash_loop(core, namespace, f"crashing-engine-{index}-worker-0")

        async def both_repaired() -> bool:
            got = await d.kubectl("get", "pods", "-n", namespace, "-l", "ome.io/inferenceservice=crashing", "-o",
                                  "jsonpath={.items[*].metadata.labels.ome\\.io/instance-incarnation}")
            status = (await d.replica()).get("status") or {}
            return got.stdout.split() == ["2"] * 4 and status.get("readyReplicas") == 2

        await wait_for(both_repaired, timeout=180, what="both Instances rebuilt at incarnation 2",
                       describe=d.describe)
    # Never more than maxUnavailable (1) Instance out of service at once.
    seen = phases(history)
    assert all(list(v.values()).count("Restarting") <= 1 for v in seen), seen
    assert {i for v in seen for i, phase in v.items() if phase == "Restarting"} == {0, 1}, seen
    held = await d.control_plane.event_messages(namespace, "RepairHeld")
    assert len(held) == 1, held
    assert held[0].endswith("wedged in CrashLoopBackOff past the stuck-pod grace; gate Budget: per-Component "
                            "unavailability budget 1 exhausted (would become 2)"), held
    restarts = await d.control_plane.event_messages(namespace, "RestartTriggered")
    assert sorted(restarts) == [
        f"OMENative component=engine instance={i} restart triggered: pod crashing-engine-{i}-worker-0 container "
        f"ome-container wedged in CrashLoopBackOff past the stuck-pod grace (incarnation=2)" for i in (0, 1)]


async def test_min_ready_seconds_holds_the_drain_of_a_surge_source(
    omenative: ControllerProcess, api: client.ApiClient, deploy: Callable[..., Awaitable[Deployment]],
    namespace: str,
) -> None:
    d = await deploy("warming", minReadySeconds=20)
    async with recorded(api, "inferencereplicas", namespace, "warming-engine") as history:
        await d.set_image(NEW_IMAGE)
        await d.rolled_out(NEW_IMAGE, timeout=240)
    # For each replacement: the source's drain started at least 20 s after the replacement's pods all served, and
    # until then the replacement was not counted available. Times are the controller's own records: the status
    # write time of each version (managedFields, 1 s resolution) and the drain operation's start.
    serving_at: dict[int, float] = {}
    available_at: dict[int, float] = {}
    drains: dict[int, float] = {}
    for version in history.versions:
        written = max(when(f["time"]) for f in version["metadata"]["managedFields"] if f.get("subresource") == "status")
        rows = decode_rows(version.get("status"))
        for row in rows:
            op = row.operation
            if row.phase == "Deleting" and op is not None and (op.reason or "").startswith("replaced by instance"):
                drains.setdefault(int((op.reason or "").rsplit(" ", 1)[1]), when(op.started_at or ""))
            if row.phase != "Deleting" and row.operation and row.operation.step == "GangSurgeTarget":
                if row.serving_pod_count == 2:
                    serving_at.setdefault(row.index or 0, written)
                if row.available_pod_count:
                    available_at.setdefault(row.index or 0, written)
    timeline = f"serving {serving_at}, available {available_at}, drains {drains}"
    assert len(drains) == 2, timeline
    for target, drained_at in drains.items():
        assert target in serving_at, timeline
        assert drained_at >= serving_at[target] + 20 - 1, timeline  # 1 s resolution
        assert available_at.get(target, drained_at) >= serving_at[target] + 20 - 1, timeline


async def test_a_revision_that_never_starts_is_held_and_the_service_keeps_serving(
    omenative: ControllerProcess, api: client.ApiClient, deploy: Callable[..., Awaitable[Deployment]],
    namespace: str,
) -> None:
    d = await deploy("held")
    slices = SliceSampler(api, namespace, "held-engine")
    sampling = asyncio.create_task(slices.run())
    try:
        await d.set_image(UNPULLABLE)

        async def held_block() -> Obj | None:
            blocks = ((await d.replica()).get("status") or {}).get("retryBlocks") or []
            return blocks[0] if blocks and blocks[0]["state"] == "Held" else None

        block = await wait_for(held_block, timeout=240, what="the revision held after three attempts",
                               describe=d.describe)
        assert block["attemptsStarted"] == 3 and block["reason"] == "ImagePullBackOff"
        revision = block["targetRevision"]
        assert await d.control_plane.event_messages(namespace, "RetryHeld") == [
            f"InferenceReplica {namespace}/held-engine component=engine update to revision {revision} held after 3 "
            "failed attempt(s) (last failure: ImagePullBackOff); publish a corrected revision or raise "
            "lifecycle.updateRetry limits"]
        out = await d.kubectl("ome", "instance", "retry-blocks", "held", "--component", "engine", "-n", namespace)
        rows = table(out.stdout)
        assert [(r["COMP"], r["STATE"], r["ATT"], r["NEXT"], r["REL"], r["REASON"]) for r in rows] == [
            ("engine", "HELD", "3", "-", "YES", "ImagePullB...")]
        hold = ((await d.replica())["status"]).get("rolloutHold") or {}
        assert (hold.get("gate"), hold.get("target")) == ("Held", revision)
        status = (await d.replica())["status"]
        assert status["servingReplicas"] == 2  # the old Instances served throughout (and the slices agree below)

        # Release it: the command checks, sets the annotation; omenative removes the block and tries again.
        out = await d.kubectl("ome", "instance", "release-held", "held", "--component", "engine", "--revision",
                              revision.rsplit("-", 1)[1], "-n", namespace, "--yes", "-o", "json")
        result = json.loads(out.stdout)
        assert (result["accepted"], result["applied"], result["target"]["name"]) == (True, True, "held-engine")
        # kubectl ome wait --for=held-revision=unheld, with the values the release printed, as OME's reference shows.
        out = await d.kubectl("ome", "wait", "held", "--for=held-revision=unheld", "--component=engine",
                              f"--revision={revision}", f"--ir-name={result['target']['name']}",
                              f"--ir-uid={result['target']['uid']}", "--timeout=60s", "-n", namespace, check=False)
        assert out.returncode == 0, out.output
        lines = out.stdout.splitlines()
        column = lines[0].index("VALUE")
        rows = {line[:column].strip(): line[column:].strip() for line in lines[1:] if line.strip()}
        assert (rows["Requested"], rows["Outcome"], rows["Reason"], rows["Target state"], rows["Mailbox"]) == (
            "HeldRevision=Unheld", "Matched", "Unheld", "Absent", "Absent"), out.stdout

        async def released() -> bool:
            return bool(await d.control_plane.event_messages(namespace, "RetryBlockReleased"))

        await wait_for(released, timeout=60, what="the release answered", describe=d.describe)
        assert await d.control_plane.event_messages(namespace, "RetryBlockReleased") == [
            f"InferenceReplica {namespace}/held-engine component=engine: Held retryBlock for revision {revision} "
            "removed at operator request (ome.io/release-held-revision annotation)"]
        replica = await d.replica()
        assert "ome.io/release-held-revision" not in (replica["metadata"].get("annotations") or {})

        async def tried_again() -> bool:
            rows = decode_rows((await d.replica()).get("status"))
            return any(r.operation is not None and r.operation.step == "GangSurgeTarget" for r in rows)

        await wait_for(tried_again, timeout=60, what="a new attempt at the released revision", describe=d.describe)

        # A fixed revision replaces the held one and rolls out, one Instance at a time.
        await d.set_image(NEW_IMAGE)
        await d.rolled_out(NEW_IMAGE, timeout=240)
    finally:
        slices.stop()
        await sampling
    # Every 200 ms sample of the engine Service's slices listed a ready leader, and never a pod whose deletion had
    # been requested before the sample.
    assert slices.samples > 100, slices.samples
    assert slices.without_leader == [], slices.without_leader[:5]
    assert slices.listed_deleted == [], slices.listed_deleted[:5]


class SliceSampler:
    """Reads the engine Service's EndpointSlices and the pods every 200 ms."""

    def __init__(self, api: client.ApiClient, namespace: str, service: str) -> None:
        self.discovery = client.DiscoveryV1Api(api)
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.service = service
        self.samples = 0
        self.without_leader: list[str] = []
        self.listed_deleted: list[str] = []
        self.deleted_at: dict[str, float] = {}  # pod name -> when it was first seen with a deletion timestamp
        self.running = True

    def stop(self) -> None:
        self.running = False

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while self.running:
            started = loop.time()
            pods = await self.core.list_namespaced_pod(self.namespace)
            now = loop.time()
            for pod in pods.items:
                if pod.metadata.deletion_timestamp is not None:
                    self.deleted_at.setdefault(pod.metadata.uid, now)
            found = await self.discovery.list_namespaced_endpoint_slice(
                self.namespace, label_selector=f"kubernetes.io/service-name={self.service}")
            ready = [(e.target_ref.name, e.target_ref.uid) for s in found.items for e in s.endpoints or []
                     if e.conditions is not None and e.conditions.ready and e.target_ref is not None]
            self.samples += 1
            if not any("-leader-" in name for name, _ in ready):
                self.without_leader.append(f"sample {self.samples}: {ready}")
            for name, uid in ready:
                if uid in self.deleted_at and self.deleted_at[uid] < started:
                    self.listed_deleted.append(f"sample {self.samples}: {name}")
            await asyncio.sleep(max(0.2 - (loop.time() - started), 0))


async def test_kubectl_wait_right_after_apply_waits_for_the_new_generation(
    omenative: ControllerProcess, api: client.ApiClient, deploy: Callable[..., Awaitable[Deployment]],
    namespace: str, tmp_path: Path,
) -> None:
    # No maxUnavailable: Ready means every Instance serves (with it, MinimumAvailable would count as Ready).
    d = await deploy("waiting", updateStrategy={"type": "SurgeThenDrain", "rollingUpdate": {"maxSurge": 1}})
    # The engine's count: Ready only once the third Instance serves.
    async def apply_then_wait() -> Obj:
        """`kubectl apply` and, at once, `kubectl wait --for=condition=Ready`; the InferenceService as it was then."""
        out = await d.kubectl("apply", "-f", write_yaml(tmp_path, "isvc-waiting.yaml", d.isvc))
        assert out.returncode == 0
        out = await d.kubectl("wait", "--for=condition=Ready", "inferenceservice/waiting", "-n", namespace,
                              "--timeout=120s", check=False)
        assert out.returncode == 0, out.output + await d.describe()
        got = json.loads((await d.kubectl("get", "inferenceservice", "waiting", "-n", namespace, "-o", "json")).stdout)
        assert got["status"]["observedGeneration"] == got["metadata"]["generation"]
        return dict(got)

    d.isvc["spec"]["engine"].update(minReplicas=3, maxReplicas=3)
    isvc = await apply_then_wait()
    assert isvc["status"]["components"]["engine"]["lifecycle"]["readyReplicas"] == 3

    # An image: the InferenceService's Ready waits for the new generation to be acted on, and the
    # InferenceReplica's Ready (Unknown while the rollout runs) for the whole rollout.
    d.isvc["spec"]["engine"]["leader"] = {"runner": {"image": NEW_IMAGE}}
    d.isvc["spec"]["engine"]["worker"] = {"size": 1, "runner": {"image": NEW_IMAGE}}
    isvc = await apply_then_wait()
    replica = await d.replica()
    assert isvc["status"]["components"]["engine"]["lifecycle"]["updateRevision"] == \
        replica["status"]["updateRevision"]
    out = await d.kubectl("wait", "--for=condition=Ready", "inferencereplica/waiting-engine", "-n", namespace,
                          "--timeout=240s", check=False)
    assert out.returncode == 0, out.output + await d.describe()
    status = (await d.replica())["status"]
    assert status["currentRevision"] == status["updateRevision"] and status["updatedReplicas"] == 3


async def test_a_child_write_the_api_refuses_shows_on_the_inferenceservice(
    omenative: ControllerProcess, api: client.ApiClient, control_plane: ControlPlane, sim_nodes: NodeFactory,
    model_agent: ModelAgent, namespace: str, tmp_path: Path,
) -> None:
    await qwen3_ready(control_plane, sim_nodes, model_agent)
    kubectl = control_plane.kubectl
    await kubectl("create", "quota", "one-service", "-n", namespace, "--hard=services=1")
    d = Deployment(control_plane, api, namespace, tmp_path, "quota")
    try:
        await d.apply()

        async def refused() -> str | None:
            out = await kubectl("get", "inferenceservice", "quota", "-n", namespace, "-o",
                                'jsonpath={.status.conditions[?(@.type=="Reconciled")]}')
            cond = json.loads(out.stdout or "{}")
            return cond.get("message") if cond.get("status") == "False" else None

        message = await wait_for(refused, timeout=60, what="the Reconciled condition False", describe=d.describe)
        assert "exceeded quota: one-service" in message and message.startswith("the API server refused Service quota")
        reason = await kubectl("get", "inferenceservice", "quota", "-n", namespace, "-o",
                               'jsonpath={.status.conditions[?(@.type=="Reconciled")].reason}')
        assert reason.stdout == "ComponentReconcileError"
        # The refused child of the engine is named once on the engine's InferenceReplica, in the API's words.
        events = await control_plane.event_messages(namespace, "FailedCreate")
        assert len(events) == 1 and "exceeded quota: one-service" in events[0], events
        involved = await kubectl("get", "events", "-n", namespace, "--field-selector", "reason=FailedCreate", "-o",
                                 "jsonpath={.items[0].involvedObject.kind}/{.items[0].involvedObject.name}")
        assert involved.stdout == "InferenceReplica/quota-engine"

        await kubectl("delete", "quota", "one-service", "-n", namespace)

        async def cleared() -> bool:
            out = await kubectl("get", "inferenceservice", "quota", "-n", namespace, "-o",
                                'jsonpath={.status.conditions[?(@.type=="Reconciled")].status}')
            return out.stdout == "True"

        await wait_for(cleared, timeout=90, what="the Reconciled condition True once the quota is gone",
                       describe=d.describe)
        await d.ready()
    finally:
        await d.delete()


async def test_a_new_replica_starts_at_min_replicas_and_is_never_ready_with_fewer_serving(
    omenative: ControllerProcess, control_plane: ControlPlane, api: client.ApiClient,
    deploy: Callable[..., Awaitable[Deployment]], namespace: str, tmp_path: Path,
) -> None:
    """The lifecycle example asks for 2 Instances (`minReplicas: 2`, an autoscaler owns the count afterwards): its
    InferenceReplica carries `spec.replicas: 2` from the first version anyone can read, and neither it nor the
    InferenceService is ever Ready with fewer than 2 Instances Ready."""
    d = Deployment(control_plane, api, namespace, tmp_path, "first-read")
    try:
        async with recorded(api, "inferencereplicas", namespace, "first-read-engine") as replicas, \
                recorded(api, "inferenceservices", namespace, "first-read") as services:
            await d.apply()
            await d.ready()
        assert replicas.versions, "no version of the InferenceReplica was recorded"
        assert {v["spec"].get("replicas") for v in replicas.versions} == {2}

        for version in replicas.versions:
            if is_true(version, "Ready"):
                assert version["status"]["readyReplicas"] >= 2, json.dumps(version["status"])
        ready_services = [v for v in services.versions if is_true(v, "Ready")]
        assert ready_services, "the InferenceService was never recorded Ready"
        for version in ready_services:
            assert version["status"]["components"]["engine"]["lifecycle"]["readyReplicas"] >= 2, version["status"]
    finally:
        await d.delete()
