"""Crash safety, shown: each run starts an operation (create, restart, update, scale-down, teardown; a rollout group's
update, a canary promoted, a canary rolled back), SIGKILLs the
controller at a random moment of it, starts it again, and checks that the operation finishes with the invariants
intact. `hack/chaos.sh` runs it at scale and prints the figures; the test suite runs a short version.

Invariants, checked from every pod version a watch delivers during the run and from the state it ends in:
- no duplicate: never two live pods for one rank of one Instance (index, runner, ordinal) at one incarnation, and
  never more live Instances than the operation allows (desired plus its surge budget);
- nothing twice: no Instance restarted or updated twice (a restart raises the incarnation by exactly one, an
  update replaces each Instance once);
- no orphan: at the end every pod belongs to an Instance row of an existing InferenceReplica, each Instance has
  exactly its pods at one incarnation, and a teardown leaves no pod, PodGroup or InferenceReplica;
- converges: the operation's end state is reached within the deadline.

    python -m tests.support.chaos [--runs 30] [--scenarios create,restart,update,scale-down,teardown,group-update,
                                                            canary,canary-rollback,migrate,single-update]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
from kubernetes_asyncio import client, watch

from omenative.api.instance_status import decode_rows
from tests.support import faults
from tests.support.cluster import REPO, ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.history import History, recorded
from tests.support.nodes import node_manifest
from tests.support.omenative import install_crds, start_controller, stop_controller

Obj = dict[str, Any]
LIFECYCLE = ("create", "restart", "update", "scale-down", "teardown")
# Rollouts (issue 14): a blue-green group of engine and decoder, a canary promoted past its manual gate, and a canary
# rolled back from it.
ROLLOUTS = ("group-update", "canary", "canary-rollback")
MIGRATIONS = ("migrate",)
# A single pod's SurgeThenDrain update (issue 28): the Instance keeps its index and its pod moves to the other name
# slot, the slot (activeOrdinal) and the step kept in the API.
SINGLE_POD = ("single-update",)
SCENARIOS = LIFECYCLE + ROLLOUTS + MIGRATIONS + SINGLE_POD
CANARY_STEPS = [{"capacity": "25%", "traffic": 10, "pause": {}}, {"capacity": "100%", "traffic": 100}]
KILL_WINDOW = 1.0  # seconds after the operation starts, when no calibrated window is given
IMAGE = "example.invalid/server:1"
NEW_IMAGE = "example.invalid/server:2"
LABEL = "ome.io/inferenceservice"


def inference_service(name: str, namespace: str, replicas: int, image: str = IMAGE) -> Obj:
    """A multi-pod OMENative InferenceService (a leader and one worker) that carries its own containers."""
    runner = {"name": "ome-container", "image": image, "resources": {"requests": {"cpu": "1"}}}
    toleration = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"deploymentMode": "OMENative", "engine": {
                "minReplicas": replicas, "maxReplicas": replicas, "tolerations": toleration,
                "leader": {"runner": dict(runner)}, "worker": {"size": 1, "runner": dict(runner)},
                "lifecycle": {"updateStrategy": {"type": "SurgeThenDrain", "rollingUpdate": {"maxSurge": 1}}}}}}


def single_pod_service(name: str, namespace: str, replicas: int, image: str = IMAGE) -> Obj:
    """A single-pod OMENative InferenceService updated by SurgeThenDrain, one Instance at a time."""
    toleration = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"deploymentMode": "OMENative", "engine": {
                "minReplicas": replicas, "maxReplicas": replicas, "tolerations": toleration,
                "runner": {"name": "ome-container", "image": image, "resources": {"requests": {"cpu": "1"}}},
                "lifecycle": {"updateStrategy": {"type": "SurgeThenDrain", "rollingUpdate": {"maxSurge": 1}}}}}}


def rollout_service(name: str, namespace: str, scenario: str, image: str = IMAGE) -> Obj:
    """Single-pod components in a rollout group: engine and decoder (two each) blue-green, or four engines in a
    canary that waits for a promote after its first step."""
    toleration = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]

    def component(replicas: int) -> Obj:
        return {"minReplicas": replicas, "maxReplicas": replicas, "tolerations": toleration,
                "runner": {"name": "ome-container", "image": image, "resources": {"requests": {"cpu": "1"}}}}

    if scenario == "group-update":
        spec = {"engine": component(2), "decoder": component(2),
                "rollout": {"groups": [{"components": ["engine", "decoder"]}]}}
    else:
        spec = {"engine": component(4),
                "rollout": {"groups": [{"components": ["engine"], "canary": {"steps": CANARY_STEPS}}]}}
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"deploymentMode": "OMENative", **spec}}


@attrs.define
class Run:
    scenario: str
    kill_after: float
    name: str = ""  # the InferenceService of the run
    converged_after: float | None = None  # seconds from the restart to the end state
    mid_operation: bool = False  # the operation had not finished when the controller was killed
    timeline: list[str] = attrs.field(factory=list)  # the rows of each status version, when a run failed
    pods_created: list[str] = attrs.field(factory=list)  # name@incarnation of each pod seen, when a run failed
    logs: list[str] = attrs.field(factory=list)  # the controller logs of the run, when it failed
    violations: list[str] = attrs.field(factory=list)


class PodWatch:
    """Every pod version of the namespace, checked as it arrives for duplicate ranks."""

    def __init__(self, api: client.ApiClient, namespace: str, isvc: str) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.selector = f"{LABEL}={isvc}"
        self.live: dict[str, Obj] = {}  # name -> pod, not terminating
        self.created: dict[str, str] = {}  # uid -> "name@incarnation", in the order they were first seen
        self.violations: list[str] = []
        self.max_instances = 0
        self.max_pods = 0
        self.initial: set[str] = set()  # uids of the pods there when the watch started
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        listed = await self.core.list_namespaced_pod(self.namespace, label_selector=self.selector)
        for pod in listed.items:
            self.initial.add(pod.metadata.uid)
            self.observe(self.api.sanitize_for_serialization(pod))
        self.task = asyncio.create_task(self.follow(listed.metadata.resource_version))

    async def follow(self, version: str) -> None:
        while True:
            async for event in watch.Watch().stream(self.core.list_namespaced_pod, self.namespace,
                                                    label_selector=self.selector, resource_version=version,
                                                    timeout_seconds=300):
                obj = event["raw_object"]
                version = obj["metadata"]["resourceVersion"]
                if event["type"] == "DELETED":
                    self.live.pop(obj["metadata"]["name"], None)
                else:
                    self.observe(obj)

    def observe(self, pod: Obj) -> None:
        meta = pod["metadata"]
        if meta["uid"] not in self.created:
            incarnation = (meta.get("labels") or {}).get("ome.io/instance-incarnation", "?")
            self.created[meta["uid"]] = f"{meta['name']}@{incarnation}"
        if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
            self.live.pop(meta["name"], None)
            return
        self.live[meta["name"]] = pod
        ranks: dict[tuple[str, str, str, str, str], str] = {}
        instances: set[tuple[str, str]] = set()
        for name, other in self.live.items():
            labels = other["metadata"].get("labels") or {}
            # A single pod's surge runs in its Instance's other name slot (ordinal), beside the pod it replaces.
            slot = (labels.get("component", ""), labels.get("ome.io/instance-index", ""),
                    labels.get("ome.io/instance-incarnation", ""), labels.get("ome.io/runner", ""),
                    labels.get("ome.io/pod-ordinal", ""))
            if slot in ranks:
                found = f"duplicate rank {slot}: {' and '.join(sorted((ranks[slot], name)))}"
                if found not in self.violations:
                    self.violations.append(found)
            ranks[slot] = name
            instances.add((slot[0], slot[1]))
        self.max_instances = max(self.max_instances, len(instances))
        self.max_pods = max(self.max_pods, len(self.live))

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


class Chaos:
    def __init__(self, control_plane: ControlPlane, api: client.ApiClient, namespace: str,
                 log: Callable[[str], None] = print) -> None:
        self.control_plane = control_plane
        self.api = api
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.log = log
        self.process: ControllerProcess | None = None
        # Names differ between invocations: one left deleting by an earlier invocation is never reused.
        self.tag = uuid.uuid4().hex[:4]

    async def kubectl_apply(self, obj: Obj) -> None:
        await self.control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(obj))

    async def controller(self) -> ControllerProcess:
        if self.process is None or self.process.process is None or self.process.process.returncode is not None:
            self.process = await start_controller(self.control_plane, "--namespace", self.namespace,
                                                  "--log-level", "debug", webhook=False, name="chaos")
        return self.process

    async def replica(self, name: str) -> Obj | None:
        try:
            return dict(await self.custom.get_namespaced_custom_object("ome.io", "v1beta1", self.namespace,
                                                                      "inferencereplicas", f"{name}-engine"))
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def pods(self, name: str) -> list[Obj]:
        found = await self.core.list_namespaced_pod(self.namespace, label_selector=f"{LABEL}={name}")
        return [self.api.sanitize_for_serialization(p) for p in found.items]

    async def settled(self, name: str, replicas: int, image: str, incarnations: dict[int, int] | None = None) -> bool:
        """The InferenceService runs exactly `replicas` Ready Instances of its two pods each on `image` (and, when
        given, at those incarnations)."""
        replica = await self.replica(name)
        if replica is None:
            return False
        status = replica.get("status") or {}
        rows = decode_rows(status)
        if incarnations is not None and {r.index or 0: r.incarnation for r in rows} != incarnations:
            return False
        pods = [p for p in await self.pods(name) if not p["metadata"].get("deletionTimestamp")]
        return (status.get("observedGeneration") == replica["metadata"].get("generation")
                and len(rows) == replicas and all(r.phase == "Ready" for r in rows)
                and status.get("readyReplicas") == replicas and len(pods) == 2 * replicas
                and {c["image"] for p in pods for c in p["spec"]["containers"]} == {image}
                and status.get("currentRevision") == status.get("updateRevision"))

    async def gone(self, name: str) -> bool:
        return await self.replica(name) is None and not await self.pods(name)

    async def end_state(self, name: str, replicas: int) -> list[str]:
        """No orphan: each pod belongs to a row, each row has its two pods at its incarnation."""
        replica = await self.replica(name)
        pods = await self.pods(name)
        if replica is None:
            return [f"pod {p['metadata']['name']} without an InferenceReplica" for p in pods]
        rows = {r.index: r for r in decode_rows(replica.get("status"))}
        problems = []
        for pod in pods:
            labels = pod["metadata"]["labels"]
            row = rows.get(int(labels.get("ome.io/instance-index", "-1")))
            if row is None:
                problems.append(f"orphan pod {pod['metadata']['name']}: no Instance row")
            elif labels.get("ome.io/instance-incarnation") != str(row.incarnation):
                problems.append(f"pod {pod['metadata']['name']} of incarnation "
                                f"{labels.get('ome.io/instance-incarnation')} beside row incarnation {row.incarnation}")
        if len(rows) != replicas:
            problems.append(f"{len(rows)} Instances, expected {replicas}")
        return problems

    async def wait(self, probe: Callable[[], Awaitable[bool]], timeout: float) -> float | None:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if await probe():
                return time.monotonic() - started
            await asyncio.sleep(0.25)
        return None

    async def kill_and_restart(self, result: Run, kill_after: float, done: Callable[[], Awaitable[bool]],
                               timeout: float) -> ControllerProcess:
        """SIGKILLs the controller `kill_after` seconds into the operation, starts it again and waits for `done`,
        noting in `result` whether the kill came mid-operation and how long convergence took after the restart.
        Returns the killed process (its log belongs to the run)."""
        await asyncio.sleep(kill_after)
        result.mid_operation = not await done()
        assert self.process is not None
        killed = self.process
        await self.process.kill()
        restarted = time.monotonic()
        await self.controller()
        waited = await self.wait(done, timeout)
        result.converged_after = None if waited is None else time.monotonic() - restarted
        return killed

    async def run(self, scenario: str, index: int, rng: random.Random, timeout: float = 120,
                  window: float | None = KILL_WINDOW) -> Run:
        """One run; with `window` None, no kill: `converged_after` is then the operation's own duration."""
        if scenario in ROLLOUTS:
            return await self.run_rollout(scenario, index, rng, timeout, window)
        if scenario in MIGRATIONS:
            return await self.run_migration(index, rng, timeout, window)
        if scenario in SINGLE_POD:
            return await self.run_single_update(index, rng, timeout, window)
        name = f"{scenario}-{index}-{self.tag}"
        kill_after = rng.uniform(0.0, window) if window is not None else 0.0
        result = Run(scenario=scenario, kill_after=kill_after, name=name)
        await self.controller()
        start_replicas = {"create": 2, "restart": 2, "update": 2, "scale-down": 3, "teardown": 2}[scenario]
        if scenario != "create":
            await self.kubectl_apply(inference_service(name, self.namespace, start_replicas))
            async def set_up() -> bool:  # settled, and no pod of the set-up left terminating
                return await self.settled(name, start_replicas, IMAGE) and not any(
                    p["metadata"].get("deletionTimestamp") for p in await self.pods(name))

            if await self.wait(set_up, timeout) is None:
                result.violations.append("setup did not settle")
                return result
        before = {r.index: r.incarnation for r in decode_rows(((await self.replica(name)) or {}).get("status"))}
        expected: tuple[int, str, dict[int, int] | None] = (start_replicas, IMAGE, None)

        async def operation() -> None:
            nonlocal expected
            if scenario == "create":
                await self.kubectl_apply(inference_service(name, self.namespace, 2))
            elif scenario == "restart":
                await faults.oom_kill(self.core, self.namespace, f"{name}-engine-0-worker-0")
                expected = (2, IMAGE, {0: (before.get(0) or 1) + 1, 1: before.get(1) or 1})
            elif scenario == "update":
                await self.kubectl_apply(inference_service(name, self.namespace, 2, NEW_IMAGE))
                expected = (2, NEW_IMAGE, None)
            elif scenario == "scale-down":
                await self.kubectl_apply(inference_service(name, self.namespace, 1))
                expected = (1, IMAGE, None)
            else:
                await self.control_plane.kubectl("delete", "inferenceservice", name, "-n", self.namespace,
                                                 "--wait=false")

        async def done() -> bool:
            return await self.gone(name) if scenario == "teardown" else await self.settled(name, *expected)

        pods, rows, killed = await self.operated(result, name, operation, done, timeout, window, kill_after)
        if window is None or result.converged_after is None:
            return result
        if scenario != "teardown":
            result.violations += await self.end_state(name, expected[0])
        limit = {"create": 2, "restart": 2, "update": 3, "scale-down": 3, "teardown": 2}[scenario]
        if pods.max_instances > limit:
            result.violations.append(f"{pods.max_instances} Instances at once, at most {limit} allowed")
        after = {r.index: r.incarnation for r in decode_rows(((await self.replica(name)) or {}).get("status"))}
        if scenario == "restart" and after.get(0) != (before.get(0) or 1) + 1:
            result.violations.append(f"instance 0 went from incarnation {before.get(0)} to {after.get(0)}, not +1")
        if scenario == "restart" and after.get(1) != before.get(1):
            result.violations.append("instance 1 restarted too")
        if scenario in ("restart", "scale-down"):
            extra = len(pods.created.keys() - pods.initial) - (2 if scenario == "restart" else 0)
            if extra > 0:
                result.violations.append(f"{extra} more pod(s) created than the operation needs")
        if scenario == "update":
            created = len(pods.created.keys() - pods.initial)
            if created != 4:  # each Instance replaced once: two new Instances of two pods
                result.violations.append(f"{created} pods created by the update, expected 4")
        if scenario != "teardown":
            await self.control_plane.kubectl("delete", "inferenceservice", name, "-n", self.namespace,
                                             "--wait=false")
        if result.violations:
            result.pods_created = list(pods.created.values())
            result.logs = [str(p.log_path) for p in (killed, self.process) if p is not None]
            result.timeline = [" ".join(f"{r.index}:{r.phase}/{r.incarnation}" + (
                f"[{r.operation.step}->{r.operation.surge_index}]" if r.operation and r.operation.surge_index
                is not None else f"[{r.operation.type}]" if r.operation else "") for r in decode_rows(v.get("status")))
                for v in rows.versions]
        return result

    async def operated(self, result: Run, name: str, operation: Callable[[], Awaitable[Any]],
                       done: Callable[[], Awaitable[bool]], timeout: float, window: float | None,
                       kill_after: float) -> tuple[PodWatch, History, ControllerProcess | None]:
        """Starts `operation` with every pod version watched and the engine replica's versions recorded; without a
        kill window waits for `done`, with one SIGKILLs the controller `kill_after` seconds in (`kill_and_restart`).
        Notes the pod watch's violations and a failure to converge in `result`. Returns the pod watch, the recorded
        versions and the killed process."""
        pods = PodWatch(self.api, self.namespace, name)
        await pods.start()
        killed: ControllerProcess | None = None
        async with recorded(self.api, "inferencereplicas", self.namespace, f"{name}-engine") as rows:
            try:
                await operation()
                if window is None:
                    result.converged_after = await self.wait(done, timeout)
                else:
                    killed = await self.kill_and_restart(result, kill_after, done, timeout)
                await asyncio.sleep(0.5)  # let the watches deliver the last versions
            finally:
                await pods.stop()
        result.violations += pods.violations
        if result.converged_after is None:
            result.violations.append(f"did not converge within {timeout:.0f}s")
        return pods, rows, killed

    # -- a single pod's update
    async def run_single_update(self, index: int, rng: random.Random, timeout: float, window: float | None) -> Run:
        """Two single-pod Instances updated under SurgeThenDrain (maxSurge 1), the controller killed at a random
        moment: each Instance must keep its index and incarnation, move its pod to the other slot exactly once (one
        new pod each, activeOrdinal 1), never run more than one extra pod, and leave no pod outside its slot."""
        name = f"single-update-{index}-{self.tag}"
        kill_after = rng.uniform(0.0, window) if window is not None else 0.0
        result = Run(scenario="single-update", kill_after=kill_after, name=name)
        await self.controller()
        await self.kubectl_apply(single_pod_service(name, self.namespace, 2))

        async def set_up() -> bool:
            return await self.component_settled(name, "engine", 2, IMAGE) and not any(
                p["metadata"].get("deletionTimestamp") for p in await self.pods(name))

        if await self.wait(set_up, timeout) is None:
            result.violations.append("setup did not settle")
            return result
        before = {r.index: r.incarnation for r in decode_rows(((await self.replica(name)) or {}).get("status"))}

        async def done() -> bool:
            return await self.component_settled(name, "engine", 2, NEW_IMAGE) and not any(
                p["metadata"].get("deletionTimestamp") for p in await self.pods(name))

        pods, rows, killed = await self.operated(
            result, name, lambda: self.kubectl_apply(single_pod_service(name, self.namespace, 2, NEW_IMAGE)), done,
            timeout, window, kill_after)
        if result.converged_after is not None:
            status = ((await self.replica(name)) or {}).get("status")
            after = decode_rows(status)
            if {r.index: r.incarnation for r in after} != before:
                result.violations.append(f"Instances {before} became {({r.index: r.incarnation for r in after})}: "
                                         "an update of a single pod keeps its index and incarnation")
            slots = {r.index: r.active_ordinal or 0 for r in after}
            if slots != dict.fromkeys(before, 1):
                result.violations.append(f"activeOrdinal {slots}, expected 1 for each (moved exactly once)")
            for pod in await self.pods(name):
                labels = pod["metadata"]["labels"]
                slot = slots.get(int(labels.get("ome.io/instance-index", "-1")))
                if slot is None or labels.get("ome.io/pod-ordinal") != str(slot):
                    result.violations.append(f"pod {pod['metadata']['name']} outside its Instance's slot {slot}")
        created = len(pods.created.keys() - pods.initial)
        if created != 2:  # each Instance's pod replaced once
            result.violations.append(f"{created} pods created by the update, expected 2")
        if pods.max_pods > 3:
            result.violations.append(f"{pods.max_pods} live pods at once, at most 3 allowed (2 and maxSurge 1)")
        if pods.max_instances > 2:
            result.violations.append(f"{pods.max_instances} Instances at once: the update must keep them")
        await self.control_plane.kubectl("delete", "inferenceservice", name, "-n", self.namespace, "--wait=false")
        if result.violations:
            result.pods_created = list(pods.created.values())
            result.logs = [str(p.log_path) for p in (killed, self.process) if p is not None]
            result.timeline = [" ".join(f"{r.index}:{r.phase}/{r.active_ordinal or 0}" + (
                f"[{r.operation.step}]" if r.operation else "") for r in decode_rows(v.get("status")))
                for v in rows.versions]
        return result

    # -- migration
    async def run_migration(self, index: int, rng: random.Random, timeout: float, window: float | None) -> Run:
        """Instance 0 of two (a leader and a worker each) migrated off its leader's node, the controller killed at
        a random moment of the move: it must complete once, with one surge, and leave no pod on that node."""
        name = f"migrate-{index}-{self.tag}"
        kill_after = rng.uniform(0.0, window) if window is not None else 0.0
        result = Run(scenario="migrate", kill_after=kill_after, name=name)
        await self.controller()
        await self.kubectl_apply(inference_service(name, self.namespace, 2))
        if await self.wait(lambda: self.settled(name, 2, IMAGE), timeout) is None:
            result.violations.append("setup did not settle")
            return result
        source = next(p for p in await self.pods(name) if p["metadata"]["name"] == f"{name}-engine-0-leader-0")
        node = source["spec"]["nodeName"]
        request = str(uuid.uuid4())
        value = json.dumps({"schemaVersion": "v1", "component": "engine", "instance": 0, "from_node": node})

        async def done() -> bool:
            replica = await self.replica(name) or {}
            records = (replica.get("status") or {}).get("migrations") or []
            return any(r.get("requestUUID") == request and r.get("phase") == "Completed" for r in records) and \
                await self.settled(name, 2, IMAGE)

        async def request_migration() -> None:
            await self.custom.patch_namespaced_custom_object(
                "ome.io", "v1beta1", self.namespace, "inferenceservices", name,
                {"metadata": {"annotations": {f"ome.io/migration-request-v1-{request}": value}}},
                _content_type="application/merge-patch+json")

        pods, rows, killed = await self.operated(result, name, request_migration, done, timeout, window, kill_after)
        if result.converged_after is not None:
            result.violations += await self.end_state(name, 2)
            replica = await self.replica(name) or {}
            records = [r for r in (replica.get("status") or {}).get("migrations") or []
                       if r.get("requestUUID") == request]
            if len(records) != 1 or records[0].get("surgeInstance") != 2:
                result.violations.append(f"migration records {records}, expected one with surge instance 2")
            indexes = sorted(r.index or 0 for r in decode_rows(replica.get("status")))
            if indexes != [1, 2]:
                result.violations.append(f"Instances {indexes} after the move, expected [1, 2]")
            on_source = [p["metadata"]["name"] for p in await self.pods(name) if p["spec"].get("nodeName") == node]
            if any("-engine-2-" in n for n in on_source):
                result.violations.append(f"the surge runs on the node it left: {on_source}")
            annotations = (await self.custom.get_namespaced_custom_object(
                "ome.io", "v1beta1", self.namespace, "inferenceservices", name))["metadata"].get("annotations") or {}
            if any(k.startswith("ome.io/migration-request-v1-") for k in annotations):
                result.violations.append("the request annotation was left on the InferenceService")
        created = len(pods.created.keys() - pods.initial)
        if created != 2:  # one surge of two pods: none created twice
            result.violations.append(f"{created} pods created by the migration, expected 2")
        if pods.max_instances > 3:
            result.violations.append(f"{pods.max_instances} Instances at once, at most 3 allowed")
        await self.control_plane.kubectl("delete", "inferenceservice", name, "-n", self.namespace, "--wait=false")
        if result.violations:
            result.pods_created = list(pods.created.values())
            result.logs = [str(p.log_path) for p in (killed, self.process) if p is not None]
            result.timeline = [" ".join(f"{r.index}:{r.phase}/{r.incarnation}" for r in decode_rows(v.get("status")))
                               + " " + ",".join(str(m.get("phase")) for m in (v.get("status") or {}).get(
                                   "migrations") or []) for v in rows.versions]
        return result

    # -- rollouts
    async def component_settled(self, name: str, component: str, replicas: int, image: str) -> bool:
        """One single-pod component runs exactly `replicas` Ready Instances on `image`."""
        try:
            replica = dict(await self.custom.get_namespaced_custom_object(
                "ome.io", "v1beta1", self.namespace, "inferencereplicas", f"{name}-{component}"))
        except client.ApiException as exc:
            if exc.status == 404:
                return False
            raise
        status = replica.get("status") or {}
        rows = decode_rows(status)
        pods = [p for p in await self.pods(name) if not p["metadata"].get("deletionTimestamp")
                and p["metadata"]["labels"].get("component") == component]
        return (status.get("observedGeneration") == replica["metadata"].get("generation")
                and len(rows) == replicas and all(r.phase == "Ready" for r in rows)
                and status.get("readyReplicas") == replicas and len(pods) == replicas
                and {c["image"] for p in pods for c in p["spec"]["containers"]} == {image}
                and status.get("currentRevision") == status.get("updateRevision"))

    async def canary_phase(self, name: str) -> tuple[str | None, Obj]:
        isvc = await self.custom.get_namespaced_custom_object("ome.io", "v1beta1", self.namespace,
                                                              "inferenceservices", name)
        engine = ((isvc.get("status") or {}).get("components") or {}).get("engine") or {}
        return engine.get("rolloutPhase"), engine.get("canary") or {}

    async def run_rollout(self, scenario: str, index: int, rng: random.Random, timeout: float,
                          window: float | None) -> Run:
        """A rollout (group update, canary promoted, canary rolled back) with the controller killed at a random
        moment of it: it must end on the right revision with each Instance moved once."""
        name = f"{scenario}-{index}-{self.tag}"
        kill_after = rng.uniform(0.0, window) if window is not None else 0.0
        result = Run(scenario=scenario, kill_after=kill_after, name=name)
        await self.controller()
        sizes = {"engine": 2, "decoder": 2} if scenario == "group-update" else {"engine": 4}
        await self.kubectl_apply(rollout_service(name, self.namespace, scenario))

        async def on(image: str) -> bool:
            return all([await self.component_settled(name, c, n, image) for c, n in sizes.items()])

        if await self.wait(lambda: on(IMAGE), timeout) is None:
            result.violations.append("setup did not settle")
            return result
        pods = PodWatch(self.api, self.namespace, name)
        await pods.start()
        answered: dict[str, int] = {}  # the resourceVersion of the promote or rollback request

        async def operate() -> None:
            await self.kubectl_apply(rollout_service(name, self.namespace, scenario, NEW_IMAGE))
            if scenario == "group-update":
                await self.wait(lambda: on(NEW_IMAGE), timeout)
                return

            async def paused() -> bool:
                phase, canary = await self.canary_phase(name)
                return phase == "Paused" and bool(canary.get("canaryRevisionHash"))

            await self.wait(paused, timeout)
            _, canary = await self.canary_phase(name)
            key, value = ("ome.io/rollout-promote", canary["canaryRevisionHash"]) if scenario == "canary" else \
                ("ome.io/rollout-rollback", "true")
            patched = await self.custom.patch_namespaced_custom_object(
                "ome.io", "v1beta1", self.namespace, "inferenceservices", name,
                {"metadata": {"annotations": {key: value}}}, _content_type="application/merge-patch+json")
            answered["version"] = int(patched["metadata"]["resourceVersion"])
            final = ("Stable", NEW_IMAGE) if scenario == "canary" else ("RolledBack", IMAGE)

            async def finished() -> bool:
                return (await self.canary_phase(name))[0] == final[0] and await on(final[1])

            await self.wait(finished, timeout)

        async def done() -> bool:
            if scenario == "group-update":
                return await on(NEW_IMAGE)
            phase, _ = await self.canary_phase(name)
            return phase == ("Stable" if scenario == "canary" else "RolledBack") and \
                await on(NEW_IMAGE if scenario == "canary" else IMAGE)

        killed: ControllerProcess | None = None
        async with recorded(self.api, "inferencereplicas", self.namespace, f"{name}-engine") as engine_rows:
            try:
                started = time.monotonic()
                task = asyncio.create_task(operate())
                if window is None:
                    await asyncio.wait_for(task, timeout * 3)
                    # The end state is waited for, not sampled once: the InferenceService lifts the group's pacing
                    # once the run is done, and the replica's observedGeneration trails that write for a moment.
                    result.converged_after = time.monotonic() - started \
                        if await self.wait(done, timeout) is not None else None
                    await self.control_plane.kubectl("delete", "inferenceservice", name, "-n", self.namespace,
                                                     "--wait=false")
                    return result
                await asyncio.sleep(kill_after)
                result.mid_operation = not task.done()
                assert self.process is not None
                killed = self.process
                await self.process.kill()
                restarted = time.monotonic()
                await self.controller()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(task, timeout * 3)
                result.converged_after = time.monotonic() - restarted \
                    if await self.wait(done, timeout) is not None else None
                await asyncio.sleep(0.5)  # let the watches deliver the last versions
            finally:
                await pods.stop()
        result.violations += pods.violations
        if result.converged_after is None:
            result.violations.append(f"did not converge within {timeout:.0f}s")
        created = len(pods.created.keys() - pods.initial)
        expected = {"group-update": 4, "canary": 4, "canary-rollback": 2}[scenario]
        if created != expected:  # each Instance moved once (a rollback: the canary's one, and its way back)
            result.violations.append(f"{created} pods created by the rollout, expected {expected}")
        limit = {"group-update": 6, "canary": 5, "canary-rollback": 5}[scenario]
        if pods.max_instances > limit:
            result.violations.append(f"{pods.max_instances} Instances at once, at most {limit} allowed")
        if scenario != "group-update":
            # The canary held at its first step (one new Instance) until the request: no step taken twice or early.
            first = engine_rows.versions[0]["status"]["updateRevision"] if engine_rows.versions else None
            early = [v["metadata"]["resourceVersion"] for v in engine_rows.versions
                     if (v.get("status") or {}).get("updateRevision") != first
                     and int((v.get("status") or {}).get("updatedReplicas") or 0) > 1
                     and int(v["metadata"]["resourceVersion"]) < answered.get("version", 1 << 62)]
            if scenario == "canary" and early:
                result.violations.append(f"the canary moved past its manual gate before the promote: {early[:3]}")
        if result.violations:
            result.pods_created = list(pods.created.values())
            result.logs = [str(p.log_path) for p in (killed, self.process) if p is not None]
            result.timeline = [" ".join(f"{r.index}:{r.phase}/{r.running_revision}"
                                        for r in decode_rows(v.get("status"))) for v in engine_rows.versions]
            with contextlib.suppress(client.ApiException):
                phase, canary = await self.canary_phase(name)
                result.timeline.append(f"rollout phase {phase} canary {json.dumps(canary)}")
                for component in sizes:
                    replica = dict(await self.custom.get_namespaced_custom_object(
                        "ome.io", "v1beta1", self.namespace, "inferencereplicas", f"{name}-{component}"))
                    status = {k: v for k, v in (replica.get("status") or {}).items() if k != "conditions"}
                    result.timeline.append(f"{component} generation {replica['metadata'].get('generation')} "
                                           f"status {json.dumps(status)[:1200]}")
                live = [f"{p['metadata']['name']}:{p['status'].get('phase')}:"
                        f"{p['metadata'].get('deletionTimestamp') or '-'}:{p['spec']['containers'][0]['image']}"
                        for p in await self.pods(name)]
                result.timeline.append(f"pods {' '.join(sorted(live))}")
        await self.control_plane.kubectl("delete", "inferenceservice", name, "-n", self.namespace, "--wait=false")
        return result


def log_excerpt(paths: list[str], name: str, limit: int = 60) -> list[str]:
    """The lines of the controller logs that mention the run's objects, for a failure report."""
    lines: list[str] = []
    for path in paths:
        with contextlib.suppress(OSError):
            lines += [f"{Path(path).name}: {line.rstrip()}" for line in Path(path).read_text().splitlines()
                      if name in line]
    return lines[-limit:]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summary(runs: list[Run]) -> Obj:
    out: Obj = {"runs": len(runs), "kills": len(runs), "kills_mid_operation": sum(r.mid_operation for r in runs),
                "violations": sum(len(r.violations) for r in runs), "scenarios": {}}
    for scenario in sorted({r.scenario for r in runs}):
        mine = [r for r in runs if r.scenario == scenario]
        times = [r.converged_after for r in mine if r.converged_after is not None]
        out["scenarios"][scenario] = {
            "runs": len(mine), "kills_mid_operation": sum(r.mid_operation for r in mine),
            "violations": sum(len(r.violations) for r in mine),
            "converge_p50_s": round(statistics.median(times), 2) if times else None,
            "converge_p99_s": round(percentile(times, 0.99), 2) if times else None,
            "details": [v for r in mine for v in r.violations][:20],
        }
    return out


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30, help="runs per scenario")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--cluster", default="omenative-chaos")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--output", default=str(REPO / ".work" / "chaos.json"))
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    control_plane = ControlPlane.up(args.cluster)
    from tests.conftest import api_client_for

    api = await api_client_for(control_plane.kubeconfig)
    core = client.CoreV1Api(api)
    namespace = "chaos"
    await install_crds(control_plane)
    await control_plane.kubectl("create", "namespace", namespace, check=False)
    for i in range(2):
        with contextlib.suppress(client.ApiException):
            await core.create_node(node_manifest(f"chaos-gpu-{i}"))
    chaos = Chaos(control_plane, api, namespace)
    runs: list[Run] = []
    scenarios = args.scenarios.split(",")
    windows: dict[str, float] = {}
    try:
        # How long each operation takes without a kill (the median of three, so one slow pass does not stretch the
        # window): kills are drawn from that window, so most land mid-operation.
        for scenario in scenarios:
            took = []
            for attempt in range(3):
                calibration = await chaos.run(scenario, 997 + attempt, rng, window=None)
                if calibration.violations or calibration.converged_after is None:
                    print(f"[chaos] {scenario}: the operation fails without any kill: {calibration.violations}")
                    return 1
                took.append(calibration.converged_after)
            windows[scenario] = statistics.median(took)
            print(f"[chaos] {scenario:<10} takes {windows[scenario]:.2f}s without a kill (median of "
                  f"{', '.join(f'{t:.2f}' for t in took)})", flush=True)
        for index in range(args.runs):
            for scenario in scenarios:
                run = await chaos.run(scenario, index, rng, window=windows[scenario])
                runs.append(run)
                state = "ok" if not run.violations else "VIOLATION " + "; ".join(run.violations) + "".join(
                    f"\n    status: {line}" for line in run.timeline) + (
                    f"\n    pods seen: {' '.join(run.pods_created)}\n    logs: {' '.join(run.logs)}"
                    if run.violations else "")
                converged = f"{run.converged_after:.1f}s" if run.converged_after is not None else "-"
                moment = "mid-operation" if run.mid_operation else "after it finished"
                print(f"[chaos] {scenario:<10} run {index + 1:>2}: killed {run.kill_after:.2f}s in ({moment}), "
                      f"converged {converged} after the restart: {state}", flush=True)
    finally:
        if chaos.process is not None:
            await stop_controller(control_plane, chaos.process)
        await api.close()
    report = {"seed": seed, "operation_seconds": {k: round(v, 2) for k, v in windows.items()}, **summary(runs)}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(report, indent=2))
    print(f"[chaos] seed {seed}: {report['runs']} runs, {report['kills']} kills ({report['kills_mid_operation']} "
          f"mid-operation), {report['violations']} invariant violations")
    for scenario, figures in report["scenarios"].items():
        print(f"[chaos] {scenario:<10} {figures['runs']} runs ({figures['kills_mid_operation']} killed mid-operation): "
              f"converged after the restart in p50 {figures['converge_p50_s']}s, p99 {figures['converge_p99_s']}s; "
              f"violations {figures['violations']}")
    print(f"[chaos] report: {args.output}")
    return 0 if report["violations"] == 0 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
