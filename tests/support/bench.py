"""hack/bench.sh: omenative beside the raw-write floor, each phase on a fresh local control plane tuned for load
(`hack/cluster.sh up --bench`: QPS limits off, an audit log of writes). Figures count only side by side in one run,
as ratios to the floor; nothing here asserts a time.

Phases (N copies of the multi-node guide's two-Instance InferenceService, four pods each):
- floor:    a bare client writes every object omenative leaves in the API for N services, with the same owner
            references: per service (once its InferenceService is created, as in converge) the InferenceReplica
            with its initial count, its ControllerRevision, HorizontalPodAutoscaler and PodDisruptionBudget, 3
            Services, the revision's 2 Services (owned by its ControllerRevision), a PodGroup per Instance and the
            pods, 64 creates at a time; the `ome.io/serving` condition as each pod runs (64 at a time beside the
            creates); and once every pod of a service is Ready, the final status of its InferenceReplica and
            InferenceService. Time to all pods Ready and to every InferenceService Ready. The targets are ratios to
            this floor.
- floor-pods: the floor issue 11 first measured: only the Services, PodGroups, pods and serving conditions, no
            owner references (no autoscaler or disruption budget acts on them): for comparison with earlier runs.
- converge: omenative runs; N InferenceServices are created at once: time to all pods Ready and to every
            InferenceService Ready, omenative's writes by verb and resource (audit log), peak RSS, CPU seconds of
            omenative and of every control-plane component.
- idle:     after converge, omenative's writes and CPU over `--idle-seconds`.
- repair:   after idle, a worker of 20 random Instances is OOM-killed: time from the OOM kill as the simulated
            kubelet reports it (its status write, from the API server's audit log) to omenative's `RestartTriggered`
            event (its create, same log); also from the bench's fault request and to `RestartCompleted`.
- rollout:  after repair, the runtime's image changes: time until every Instance runs the new revision and is
            Ready, and omenative's writes for it.
- scale:    on a fresh control plane, one component of single-pod Instances (the catalog's single-node runtime
            for the model, asking for 0.1 CPU instead of a GPU) is scaled from 1 to `--scale-instances` (10 per
            service: 5,000 at N = 500):
            time to Ready, its InferenceReplica's status size in bytes, omenative's RSS.
- memory:   the same component scaled on to `--memory-pods` (20 per service: 10,000 at N = 500): omenative's RSS
            with that many pods cached.

Each phase that runs omenative also reports what its caches hold, by resource (objects, JSON bytes, heap bytes
decoded and transformed as the manager does); `--profile` samples omenative with py-spy during converge.

    python -m tests.support.bench [--services 500] [--phases floor-pods,floor,converge,idle,repair,rollout,scale,memory]
                                  [--scale-instances 5000] [--memory-pods 10000] [--profile] [--output DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import datetime
import json
import logging
import os
import platform
import random
import re
import shutil
import signal
import socket
import statistics
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import structlog

from omenative.api import naming
from omenative.api.config import ControllerConfig
from omenative.api.constants import LABEL_COMPONENT
from omenative.api.instance_status import encode_rows
from omenative.api.types import BaseModelSpec, InstanceStatus
from omenative.controllers.inferenceservice import desired
from omenative.kube import sharing
from omenative.kube.cache import Store, object_key
from omenative.kube.client import ApiError, KubeClient
from omenative.kube.reflector import Informer
from omenative.kube.resources import CONTROLLER_REVISIONS, EVENTS, HPAS, PDBS, PODS, SERVICES, Resource
from omenative.manager import Manager, Options
from omenative.obj import strip_server_fields
from omenative.observe.pods import is_true
from omenative.ome_resources import INFERENCE_REPLICAS, INFERENCE_SERVICES, PODGROUPS
from omenative.render import objects
from omenative.render.pods import InstanceRef, render_instance
from omenative.render.templates import ModelInfo
from tests.support import faults
from tests.support.catalog import CATALOG, MULTI_NODE_SEED, load, seed_yaml_blocks
from tests.support.cluster import REPO, ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.model_agent import QWEN3_LEARNED
from tests.support.nodes import node_manifest
from tests.support.omenative import install_crds

Obj = dict[str, Any]
PHASES = ("floor-pods", "floor", "converge", "idle", "repair", "rollout", "scale", "memory")
NAMESPACE = "bench"
MODEL = "qwen3-0-6b"
CONCURRENCY = 64
REQUEST_TIMEOUT = 120.0  # a loaded API server is slow, not down
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
FLOOR_AGENT = "omenative-bench-floor"
CLIENT_AGENT = "omenative-bench-client"
SERVING = "ome.io/serving"
PODS_PER_SERVICE = 4  # two Instances of a leader and a worker, one GPU each
GPUS_PER_NODE = 8


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- the workload -------------------------------------------------------------------------------------------------
def guide_objects() -> tuple[Obj, Obj]:
    """The multi-node guide's runtime and its two-Instance InferenceService (the lifecycle example)."""
    runtime, _, isvc = seed_yaml_blocks(MULTI_NODE_SEED)
    return runtime, isvc


SCALE_RUNTIME = "srt-qwen3-0-6b"  # the catalog's single-node runtime for the guide's model
PODS_PER_NODE = 110  # a simulated node's pod capacity


def single_pod_objects() -> tuple[Obj, Obj]:
    """The catalog's single-node runtime for the guide's model, asking for a tenth of a CPU instead of a GPU so
    that 10,000 pods fit on a hundred simulated nodes, and an InferenceService of one single-pod Instance."""
    runtime = load("runtimes/srt/Qwen/qwen3-0-6b-rt.yaml")
    small = {"cpu": "100m", "memory": "256Mi"}
    runner = runtime["spec"]["engineConfig"]["runner"]
    runner["resources"] = {"requests": dict(small), "limits": dict(small)}
    isvc = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "scale", "namespace": NAMESPACE},
            "spec": {"model": {"name": MODEL}, "runtime": {"name": SCALE_RUNTIME},
                     # A single-pod engine is OME's RawDeployment unless it asks for OMENative.
                     "engine": {"annotations": {"ome.io/deploymentMode": "OMENative"},
                                "minReplicas": 1, "maxReplicas": 20000}}}
    return runtime, isvc


def _replace_images(obj: Any, change: Callable[[str], str]) -> int:
    """Changes every container image in a runtime; returns how many it changed."""
    changed = 0
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key == "image" and isinstance(value, str):
                obj[key] = change(value)
                changed += 1
            else:
                changed += _replace_images(value, change)
    elif isinstance(obj, list):
        changed += sum(_replace_images(v, change) for v in obj)
    return changed

def service_name(i: int) -> str:
    return f"svc-{i:04d}"


def inference_service(template: Obj, i: int) -> Obj:
    isvc = copy.deepcopy(template)
    isvc["metadata"] = {"name": service_name(i), "namespace": NAMESPACE}
    return isvc


@attrs.frozen
class FloorService:
    """What a bare client writes for one InferenceService: every object omenative leaves in the API for it."""

    isvc: Obj  # created by the bench's own client, as in converge (not a floor write)
    replicas: list[Obj]  # the InferenceReplicas, with their initial count
    # Owned by the InferenceService (HPAs, PDBs) and by an InferenceReplica (ControllerRevisions), as omenative's are
    owned: list[tuple[Resource, Obj]]
    services: list[Obj]
    revision_services: dict[str, list[Obj]]  # per component: its revision's pair, owned by the ControllerRevision
    podgroups: list[Obj]
    pods: list[Obj]
    replica_status: dict[str, Obj]  # InferenceReplica name -> its status once every pod is Ready
    isvc_status: Obj


def floor_objects(runtime: Obj, isvc: Obj, model: Obj) -> FloorService:
    """What omenative writes for one InferenceService, from its own pure renderers: its InferenceReplicas,
    ControllerRevisions, HorizontalPodAutoscalers and PodDisruptionBudgets, its Services, a PodGroup per Instance,
    the pods, and the final status of the InferenceReplicas and of the InferenceService."""
    created = copy.deepcopy(isvc)
    isvc = copy.deepcopy(isvc)
    isvc["metadata"] |= {"uid": "floor", "generation": 1}  # owner references are dropped below
    inputs = desired.Inputs(
        isvc=isvc, runtime=desired.RuntimeInfo(name=runtime["metadata"]["name"], namespaced=False,
                                               spec=runtime["spec"]),
        model=ModelInfo(name=MODEL, namespaced=False, namespace=NAMESPACE,
                        spec=BaseModelSpec.from_dict(model.get("spec") or {})),
        config=ControllerConfig())
    plan = desired.build(inputs)
    services: list[Obj] = [s for c in plan.components for s in c.services] + ([plan.entry] if plan.entry else [])
    owned: list[tuple[Resource, Obj]] = []
    replicas: list[Obj] = []
    podgroups: list[Obj] = []
    pods: list[Obj] = []
    replica_status: dict[str, Obj] = {}
    revision_services: dict[str, list[Obj]] = {}
    name = isvc["metadata"]["name"]
    for component in plan.components:
        revision = objects.revision_hash(component.runners)
        replica = copy.deepcopy(component.replica)
        replica["spec"]["replicas"] = component.min_replicas
        replicas.append(replica)
        owned.append((CONTROLLER_REVISIONS, objects.controller_revision(
            isvc=name, namespace=NAMESPACE, component=component.name, owner={}, revision=revision, number=1,
            runners=component.runners)))
        revision_services[component.name] = objects.revision_services(
            isvc=name, namespace=NAMESPACE, component=component.name, revision=revision, owner={},
            ports=component.ports, multi_pod=component.multi_pod,
            app_protocols=component.component.get("servicePortAppProtocols"))
        owned += [(HPAS, component.hpa)] if component.hpa else []
        owned.append((PDBS, component.pdb))
        per_instance = len(render_instance(_ref(name, component, 0, revision, None), component.runners))
        rows = []
        for index in range(component.min_replicas):
            podgroup = objects.pod_group(isvc=name, namespace=NAMESPACE, component=component.name, index=index,
                                         owner={}, min_member=per_instance, schedule_timeout=None, topology_key=None)
            podgroups.append(podgroup)
            pods += render_instance(_ref(name, component, index, revision, podgroup["metadata"]["name"]),
                                    component.runners)
            rows.append(InstanceStatus(index=index, incarnation=1, phase="Ready", running_revision=revision,
                                       target_revision=revision, pod_count=per_instance,
                                       serving_pod_count=per_instance, available_pod_count=per_instance))
        revision_name = naming.revision_name(name, component.name, revision)
        replica_status[replica["metadata"]["name"]] = {
            "observedGeneration": 1, "replicas": component.min_replicas, "readyReplicas": component.min_replicas,
            "servingReplicas": component.min_replicas, "availableReplicas": component.min_replicas,
            "updatedReplicas": component.min_replicas, "updatedReadyReplicas": component.min_replicas,
            "currentRevision": revision_name, "updateRevision": revision_name,
            "labelSelector": objects.label_selector_string(objects.pod_selector(name, component.name)),
            "conditions": [_condition("Ready", "AllInstancesReady")], **encode_rows(rows),
            "traffic": [{"revisionName": naming.revision_service_name(name, component.name, revision),
                         "percent": 100, "tag": "latest", "latestRevision": True}]}
    # Owner references name UIDs the API server gives: the floor sets them as it writes (`owned_by`).
    for obj in (*replicas, *(o for _, o in owned), *services, *(s for pair in revision_services.values() for s in pair),
                *podgroups, *pods):
        obj["metadata"].pop("ownerReferences", None)
    return FloorService(isvc=created, replicas=replicas, owned=owned, services=services,
                        revision_services=revision_services, podgroups=podgroups,
                        pods=pods,
                        replica_status=replica_status,
                        isvc_status={"observedGeneration": 1, "conditions": [_condition("Ready", "ComponentsReady")]})


def owned_by(owner: Obj, resource: Resource) -> Callable[[Obj], Obj]:
    """Gives an object (a copy) the owner reference omenative gives it."""
    reference = objects.owner_reference({"apiVersion": resource.api_version, "kind": resource.kind, **owner},
                                        block_owner_deletion=resource is not CONTROLLER_REVISIONS)

    def give(obj: Obj) -> Obj:
        return {**obj, "metadata": {**obj["metadata"], "ownerReferences": [reference]}}

    return give


def _condition(kind: str, reason: str) -> Obj:
    return {"type": kind, "status": "True", "reason": reason,
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _ref(name: str, component: desired.ComponentPlan, index: int, revision: str, podgroup: str | None) -> InstanceRef:
    return InstanceRef(isvc=name, namespace=NAMESPACE, component=component.name, index=index, incarnation=1,
                       revision=revision, replicas=component.min_replicas, podgroup=podgroup, owner=None)


# -- what the bench watches ---------------------------------------------------------------------------------------
class Tracker:
    """Counts Ready pods and Ready InferenceServices over time from informers (the bench's own watches)."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.started = time.monotonic()
        self.pods = Store(PODS)
        self.isvcs = Store(INFERENCE_SERVICES)
        self.irs = Store(INFERENCE_REPLICAS)
        self.ready_pods: set[str] = set()
        self.ready_isvcs: set[str] = set()
        self.pod_timeline: list[tuple[float, int]] = [(0.0, 0)]
        self.on_pod: Callable[[Obj], None] | None = None
        self.informers = [Informer(kube, self.pods, namespaces=[NAMESPACE]),
                          Informer(kube, self.isvcs, namespaces=[NAMESPACE]),
                          Informer(kube, self.irs, namespaces=[NAMESPACE])]
        self.pods.add_handler(_Handler(self._pod))
        self.isvcs.add_handler(_Handler(self._isvc))

    def _pod(self, pod: Obj, gone: bool) -> None:
        name = pod["metadata"]["name"]
        ready = not gone and is_true(pod, "Ready")
        before = len(self.ready_pods)
        (self.ready_pods.add if ready else self.ready_pods.discard)(name)
        if len(self.ready_pods) != before:
            self.pod_timeline.append((round(time.monotonic() - self.started, 2), len(self.ready_pods)))
        if self.on_pod is not None and not gone:
            self.on_pod(pod)

    def _isvc(self, isvc: Obj, gone: bool) -> None:
        name = isvc["metadata"]["name"]
        (self.ready_isvcs.add if not gone and is_true(isvc, "Ready") else self.ready_isvcs.discard)(name)

    async def start(self) -> None:
        for informer in self.informers:
            informer.start()
        for informer in self.informers:
            await informer.wait_synced(timeout=120)

    async def stop(self) -> None:
        for informer in self.informers:
            await informer.stop()

    def elapsed(self) -> float:
        return time.monotonic() - self.started


@attrs.define
class _Handler:
    """A cache handler that hands each object to one function (deleted: True on delete)."""

    fn: Callable[[Obj, bool], None]

    def on_add(self, obj: Obj, initial: bool) -> None:
        self.fn(obj, False)

    def on_update(self, old: Obj, new: Obj) -> None:
        self.fn(new, False)

    def on_delete(self, obj: Obj) -> None:
        self.fn(obj, True)


async def until(probe: Callable[[], bool], timeout: float, what: str, interval: float = 0.25) -> float:
    started = time.monotonic()
    while not probe():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{what} did not happen within {timeout:.0f}s")
        await asyncio.sleep(interval)
    return time.monotonic() - started


async def retried(request: Callable[[], Awaitable[Any]], *, created: bool = False) -> Any:
    """A write as any client makes it under load: a timeout, a 429 or a 5xx is tried again (after a create that
    timed out but went through, the repeat finds it there: done)."""
    for attempt in range(5):
        try:
            return await request()
        except ApiError as exc:
            if created and exc.already_exists:
                return None
            if attempt == 4 or not (exc.status in (0, 429) or exc.status >= 500):
                raise
            await asyncio.sleep(0.5 * 2 ** attempt)
    return None


async def limited(coros: Iterable[Awaitable[Any]], limit: int = CONCURRENCY) -> list[Any]:
    sem = asyncio.Semaphore(limit)

    async def run(coro: Awaitable[Any]) -> Any:
        async with sem:
            return await coro

    return await asyncio.gather(*(run(c) for c in coros))


# -- process and audit figures ------------------------------------------------------------------------------------
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


def memory_kib(pid: int, field: str) -> int:
    """VmRSS (now) or VmHWM (peak) of a process, in KiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


@attrs.define
class _Registration:
    resource: Resource
    label_selector: str | None
    field_selector: str | None
    transform: Any
    indexers: Any


class _RecordingCaches:
    """Stands in for the manager's caches to learn what it registers (resource, selectors, transform)."""

    def __init__(self) -> None:
        self.registered: list[_Registration] = []

    def add(self, resource: Resource, *, label_selector: str | None = None, field_selector: str | None = None,
            transform: Any = strip_server_fields, indexers: Any = None, **_: Any) -> None:
        self.registered.append(_Registration(resource, label_selector, field_selector, transform, indexers))


def cache_registrations() -> list[_Registration]:
    """The caches the manager registers: resource, selectors, transform and indexers."""
    recorder = _RecordingCaches()
    Manager(Options())._register_caches(recorder)  # type: ignore[arg-type]
    return recorder.registered


def measure_caches(items: dict[str, list[Obj]]) -> Obj:
    """The Python heap that each resource's objects (by plural) take once decoded and transformed exactly as the
    manager's caches do (tracemalloc, in this process), and the table that shares their repeated parts.

    The parts are shared through a table of this measurement's own, not the process's: the bench's own watches
    (its pod and InferenceService trackers) fill the process's table with the same parts, and a resource whose
    parts were already held would look smaller than it is. The table's own growth is counted once, as
    `(shared parts table)`, not in whichever resource happened to make it grow."""
    shared, sharing.SHARED = sharing.SHARED, sharing.SharedSubtrees()
    out: Obj = {}
    stores = []  # all held to the end, as the manager holds them: a store let go would free parts the next one counts
    tracemalloc.start()
    try:
        for reg in cache_registrations():
            if reg.resource.plural not in items:
                continue
            raw = [json.dumps(item).encode() for item in items[reg.resource.plural]]
            store = Store(reg.resource, transform=reg.transform, indexers=reg.indexers)
            table = sys.getsizeof(sharing.SHARED._table)
            before = tracemalloc.get_traced_memory()[0]
            for b in raw:
                store.upsert(json.loads(b))
            heap = tracemalloc.get_traced_memory()[0] - before - (sys.getsizeof(sharing.SHARED._table) - table)
            out[reg.resource.plural] = {"objects": len(store), "json_bytes": sum(len(b) for b in raw),
                                        "heap_bytes": heap}
            stores.append(store)
        out["(shared parts table)"] = {"objects": len(sharing.SHARED), "json_bytes": 0,
                                       "heap_bytes": sys.getsizeof(sharing.SHARED._table)}
    finally:
        tracemalloc.stop()
        sharing.SHARED = shared
        del stores
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["heap_bytes"]))


async def cache_breakdown(kube: KubeClient) -> Obj:
    """What omenative's caches hold, by resource: objects, their JSON bytes as served, and their heap
    (`measure_caches`)."""
    items: dict[str, list[Obj]] = {}
    for reg in cache_registrations():
        try:
            items[reg.resource.plural], _ = await kube.list_all(reg.resource, label_selector=reg.label_selector,
                                                                field_selector=reg.field_selector)
        except ApiError as exc:
            if exc.status == 404:
                continue  # a kind whose CRD is not installed (PodMonitors, say): the manager holds none either
            raise
    return measure_caches(items)


class Profiler:
    """py-spy sampling the controller by pid (no change to how it runs), summarised by function."""

    def __init__(self, pid: int, out: Path) -> None:
        self.pid, self.path = pid, out
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
        if spy is None:
            log("py-spy is not installed (pip install -e .[bench]): no profile")
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.process = await asyncio.create_subprocess_exec(
            spy, "record", "--pid", str(self.pid), "--format", "raw", "--rate", "50", "--nonblocking",
            "--output", str(self.path), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)

    async def stop(self, top: int = 25) -> Obj:
        if self.process is None:
            return {}
        self.process.send_signal(signal.SIGINT)  # py-spy writes its samples on SIGINT
        await self.process.wait()
        return summarise_profile(self.path.read_text() if self.path.exists() else "", top)


def summarise_profile(raw: str, top: int = 25) -> Obj:
    """py-spy's raw (collapsed) stacks -> the functions with the most samples, on-CPU (self) and inclusive."""
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]  # a function, not a line
        own[frames[-1]] = own.get(frames[-1], 0) + n
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + n

    def share(counts: dict[str, int]) -> list[list[Any]]:
        return [[f, round(100 * n / total, 1)] for f, n in sorted(counts.items(), key=lambda kv: -kv[1])[:top]]

    return {"samples": total, "self_percent": share(own) if total else [],
            "inclusive_percent": share(inclusive) if total else []}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def reconcile_counts(port: int) -> Obj:
    """Reconciles by controller and result, and work queue adds, from omenative's /metrics."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
    text = (await reader.read()).decode()
    writer.close()
    out: Obj = {}
    for line in text.splitlines():
        match = re.match(r'(controller_runtime_reconcile_total|workqueue_adds_total)\{(.*)\} ([0-9.e+]+)$', line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
            key = f"{labels.get('controller')} {labels.get('result', 'adds')}"
            if float(match.group(3)):
                out[key] = int(float(match.group(3)))
    return dict(sorted(out.items()))


def component_pids(control_plane: ControlPlane) -> dict[str, int]:
    return {p.stem: int(p.read_text().strip()) for p in (control_plane.workdir / "pids").glob("*.pid")}


class Audit:
    """The control plane's audit log of writes (one Metadata line per request), read from an offset on."""

    def __init__(self, control_plane: ControlPlane) -> None:
        self.path = control_plane.log_dir / "audit.log"

    def offset(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def entries(self, since: int = 0) -> Iterable[Obj]:
        """Every complete write the log holds from `since` on."""
        with self.path.open() as f:
            f.seek(since)
            for line in f:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # a line still being written
                if event.get("stage") == "ResponseComplete" and event.get("verb") in WRITE_VERBS:
                    yield event

    def writes_by_agent(self, since: int = 0) -> dict[str, int]:
        """Every client's writes, by user agent (its program name): the API server's whole write load."""
        counts: dict[str, int] = {}
        for event in self.entries(since):
            agent = str(event.get("userAgent", "?")).split("/")[0].split(" ")[0]
            counts[agent] = counts.get(agent, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: -kv[1]))

    def writes(self, agent: str, since: int = 0) -> dict[str, int]:
        """Writes by a client (user-agent prefix), keyed `verb resource[/subresource]`, with the response code when
        the API server refused the write (a refused write costs it too)."""
        counts: dict[str, int] = {}
        if since > self.path.stat().st_size:
            raise AssertionError(f"{self.path} was rotated after offset {since}: its writes cannot be counted")
        for event in self.entries(since):
            if str(event.get("userAgent", "")).startswith(agent):
                ref = event.get("objectRef") or {}
                resource = ref.get("resource", "?") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
                code = int((event.get("responseStatus") or {}).get("code") or 0)
                key = f"{event['verb']} {resource}" + ("" if 200 <= code < 300 else f" ({code})")
                counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items()))


# -- the bench ----------------------------------------------------------------------------------------------------
@attrs.define
class Bench:
    services: int
    cluster: str
    nodes: int
    idle_seconds: float
    repairs: int
    timeout: float
    workers: int | None
    output: Path
    profile: bool = False
    scale_instances: int = 5000
    memory_pods: int = 10000
    figures: Obj = attrs.field(factory=dict)
    runtime: Obj = attrs.field(factory=dict)
    isvc: Obj = attrs.field(factory=dict)
    model: Obj = attrs.field(factory=dict)

    @property
    def pods(self) -> int:
        return self.services * PODS_PER_SERVICE

    async def fresh_cluster(self, nodes: int | None = None, runtime: Obj | None = None
                            ) -> tuple[ControlPlane, KubeClient]:
        ControlPlane.discard(self.cluster)
        control_plane = ControlPlane.up(self.cluster, "--bench", "--gpu-nodes", str(nodes or self.nodes),
                                        "--cpu-nodes", "0", "--model", MODEL)
        kube = await KubeClient.connect(str(control_plane.kubeconfig), timeout=REQUEST_TIMEOUT)
        kube.api_client.user_agent = CLIENT_AGENT
        await install_crds(control_plane)
        await control_plane.kubectl("create", "namespace", NAMESPACE)
        await control_plane.kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(runtime or self.runtime))
        await control_plane.kubectl("apply", "--server-side", "-f",
                                    str(CATALOG / "models" / "Qwen" / "Qwen3-0.6B.yaml"))
        await control_plane.kubectl("patch", "clusterbasemodel", MODEL, "--type", "merge",
                                    "-p", json.dumps({"spec": QWEN3_LEARNED}))
        await control_plane.kubectl("patch", "clusterbasemodel", MODEL, "--subresource", "status", "--type", "merge",
                                    "-p", json.dumps({"status": {"state": "Ready", "lifecycle": "Ready"}}))
        got = await control_plane.kubectl("get", "clusterbasemodel", MODEL, "-o", "json")
        self.model = json.loads(got.stdout)
        # The API server holds the first writes of a kind for about 2 s after its CRD is established. A dry run of
        # each kind written against the clock takes that wait before it starts, in every phase alike (converge
        # started its controller meanwhile; the floor began at once and paid it inside its time).
        for resource, obj in ((INFERENCE_SERVICES, inference_service(self.isvc, 0)),
                              (INFERENCE_REPLICAS, objects.inference_replica_bootstrap(
                                  isvc="warm", namespace=NAMESPACE, component="engine", owner={}, replicas=1))):
            obj["metadata"].pop("ownerReferences", None)
            await retried(partial(kube.request, "POST", resource.path(NAMESPACE), body=obj, query={"dryRun": "All"}))
        return control_plane, kube

    async def floor(self, full: bool = True) -> None:
        """The raw-write floor: a bare client writes what omenative would for N services, as fast as the API server
        takes it. `full`: every object omenative leaves in the API (the phase `floor`); else only the Services,
        PodGroups, pods and the serving condition (the phase `floor-pods`, the floor issue 11 first measured)."""
        phase = "floor" if full else "floor-pods"
        control_plane, kube = await self.fresh_cluster()
        floor_kube = await KubeClient.connect(str(control_plane.kubeconfig), timeout=REQUEST_TIMEOUT)
        floor_kube.api_client.user_agent = FLOOR_AGENT
        tracker = Tracker(kube)
        served: set[str] = set()
        finished: set[str] = set()
        pending: set[asyncio.Task[None]] = set()
        sem = asyncio.Semaphore(CONCURRENCY)
        # The serving condition has 64 requests of its own, so a pod that runs is never queued behind creates.
        serving = asyncio.Semaphore(CONCURRENCY)
        per_service = {service_name(i): floor_objects(self.runtime, inference_service(self.isvc, i), self.model)
                       for i in range(self.services)}
        service_of = {p["metadata"]["name"]: name for name, objs in per_service.items() for p in objs.pods}

        async def serve(pod: Obj) -> None:
            meta = pod["metadata"]
            body = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": meta["name"], "namespace": NAMESPACE, "uid": meta["uid"]},
                    "status": {"conditions": [{"type": SERVING, "status": "True", "reason": "InstanceReady"}]}}
            async with serving:
                await retried(lambda: floor_kube.apply(PODS, body, field_manager="bench-floor", subresource="status",
                                                       force=True))

        async def finish(name: str) -> None:  # every pod of the service Ready: its status, written once
            objs = per_service[name]
            async with serving:
                await asyncio.gather(*(retried(partial(
                    floor_kube.apply, INFERENCE_REPLICAS, {"apiVersion": INFERENCE_REPLICAS.api_version,
                                                           "kind": INFERENCE_REPLICAS.kind,
                                                           "metadata": {"name": replica, "namespace": NAMESPACE},
                                                           "status": status},
                    field_manager="bench-floor", subresource="status", force=True))
                    for replica, status in objs.replica_status.items()))
                await retried(partial(floor_kube.apply, INFERENCE_SERVICES, {
                    "apiVersion": INFERENCE_SERVICES.api_version, "kind": INFERENCE_SERVICES.kind,
                    "metadata": {"name": name, "namespace": NAMESPACE}, "status": objs.isvc_status},
                    field_manager="bench-floor", subresource="status", force=True))

        def later(coro: Awaitable[None]) -> None:
            task = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
            pending.add(task)
            task.add_done_callback(pending.discard)

        def on_pod(pod: Obj) -> None:  # the serving condition as each pod runs
            name = pod["metadata"]["name"]
            if name not in served and is_true(pod, "ContainersReady"):
                served.add(name)
                later(serve(pod))
            service = service_of.get(name)
            if full and service is not None and service not in finished and all(
                    p["metadata"]["name"] in tracker.ready_pods for p in per_service[service].pods):
                finished.add(service)
                later(finish(service))

        tracker.on_pod = on_pod
        await tracker.start()
        audit = Audit(control_plane)
        offset = audit.offset()
        components = component_pids(control_plane)
        cpu_before = {name: cpu_seconds(p) for name, p in components.items()} | {"floor client": cpu_seconds(
            os.getpid())}
        started = time.monotonic()
        tracker.started = started

        async def write(resource: Resource, obj: Obj, client: KubeClient = floor_kube) -> Obj:
            async with sem:
                made = await retried(lambda: client.create(resource, obj, NAMESPACE), created=True)
                if made is None:  # a create that timed out but went through: what it made
                    made = await retried(lambda: client.get(resource, obj["metadata"]["name"], NAMESPACE))
                return dict(made)

        async def one(objs: FloorService) -> None:
            if not full:
                await asyncio.gather(*(write(SERVICES, s) for s in objs.services),
                                     *(write(PODGROUPS, g) for g in objs.podgroups))
                await asyncio.gather(*(write(PODS, p) for p in objs.pods))
                return
            # As omenative owns them: the InferenceService owns its InferenceReplicas, Services, HPAs and PDBs, an
            # InferenceReplica its ControllerRevision, PodGroups and pods (the garbage collector and the disruption
            # controller act on them as they do on omenative's).
            isvc = await write(INFERENCE_SERVICES, objs.isvc, kube)  # the user's create, as in converge
            by_isvc = owned_by(isvc, INFERENCE_SERVICES)
            made = await asyncio.gather(*(write(INFERENCE_REPLICAS, by_isvc(r)) for r in objs.replicas),
                                        *(write(r, by_isvc(o)) for r, o in objs.owned if r is not CONTROLLER_REVISIONS),
                                        *(write(SERVICES, by_isvc(s)) for s in objs.services))
            replicas = {ir["metadata"]["labels"][LABEL_COMPONENT]: owned_by(ir, INFERENCE_REPLICAS)
                        for ir in made[:len(objs.replicas)]}

            def by_replica(obj: Obj) -> Obj:
                return replicas[obj["metadata"]["labels"][LABEL_COMPONENT]](obj)

            async def revision_services(revision: Obj) -> None:  # each revision's pair, owned by its revision
                made = await write(CONTROLLER_REVISIONS, by_replica(revision))
                await asyncio.gather(*(write(SERVICES, owned_by(made, CONTROLLER_REVISIONS)(s))
                                       for s in objs.revision_services[made["metadata"]["labels"][LABEL_COMPONENT]]))

            async def pods() -> None:  # after their PodGroups; beside the revision Services, which nothing waits for
                await asyncio.gather(*(write(PODGROUPS, by_replica(g)) for g in objs.podgroups))
                await asyncio.gather(*(write(PODS, by_replica(p)) for p in objs.pods))

            await asyncio.gather(*(revision_services(o) for r, o in objs.owned if r is CONTROLLER_REVISIONS),
                                 pods())

        log(f"{phase}: writing {self.services} services' objects, {CONCURRENCY} at a time")
        await asyncio.gather(*(one(objs) for objs in per_service.values()))
        written = time.monotonic() - started
        ready = written + await until(lambda: len(tracker.ready_pods) >= self.pods, self.timeout, "all pods Ready")
        isvcs_ready = ready
        if full:
            isvcs_ready = ready + await until(lambda: len(tracker.ready_isvcs) >= self.services, self.timeout,
                                              "every InferenceService Ready")
        await asyncio.gather(*pending)
        cpu_after = {name: cpu_seconds(p) for name, p in components.items()} | {"floor client": cpu_seconds(
            os.getpid())}
        await asyncio.sleep(2)  # let the last writes land in the audit log
        writes = audit.writes(FLOOR_AGENT, offset)
        log(f"{phase}: all {self.pods} pods Ready in {ready:.1f}s" + (
            f", every InferenceService Ready in {isvcs_ready:.1f}s" if full else "") + f" ({sum(writes.values())} "
            f"writes)")
        self.figures[phase] = {"pods_ready_s": round(ready, 2), "isvcs_ready_s": round(isvcs_ready, 2),
                               "objects_written_s": round(written, 2), "writes": sum(writes.values()),
                               "writes_per_pod": round(sum(writes.values()) / self.pods, 2),
                               "writes_by_verb_resource": writes,
                               "all_writes_by_client": audit.writes_by_agent(offset),
                               "cpu_seconds": {k: round(cpu_after[k] - cpu_before[k], 1) for k in cpu_after},
                               "ready_pods_over_time": tracker.pod_timeline}
        if not full:
            del self.figures[phase]["isvcs_ready_s"]
        await tracker.stop()
        await floor_kube.close()
        await kube.close()
        control_plane.down()

    async def converge(self, phases: list[str]) -> None:
        control_plane, kube = await self.fresh_cluster()
        tracker = Tracker(kube)
        await tracker.start()
        audit = Audit(control_plane)
        components = component_pids(control_plane)
        metrics_port = free_port()
        args = ["--metrics-bind-address", f"127.0.0.1:{metrics_port}", "--log-level", "warning"]
        if self.workers is not None:
            args += ["--workers", str(self.workers)]
        process = await ControllerProcess(control_plane, *args, name="bench", check_cache=False).start()
        assert process.process is not None
        pid = process.process.pid
        rss: list[tuple[float, float]] = []
        sampling = True

        async def sample() -> None:
            while sampling:
                rss.append((round(tracker.elapsed(), 2), memory_kib(pid, "VmRSS") / 1024))
                await asyncio.sleep(1.0)

        sampler = asyncio.create_task(sample())
        profiler = Profiler(pid, self.output / "profile-converge.raw")
        if self.profile:
            await profiler.start()
        cpu_before = {name: cpu_seconds(p) for name, p in components.items()} | {"omenative": cpu_seconds(pid)}
        offset = audit.offset()
        started = time.monotonic()
        tracker.started = started
        log(f"converge: creating {self.services} InferenceServices, {CONCURRENCY} at a time")
        await limited(retried(partial(kube.create, INFERENCE_SERVICES, inference_service(self.isvc, i), NAMESPACE),
                              created=True)
                      for i in range(self.services))
        pods_ready = await until(lambda: len(tracker.ready_pods) >= self.pods, self.timeout, "all pods Ready")
        isvcs_ready = pods_ready + await until(lambda: len(tracker.ready_isvcs) >= self.services, self.timeout,
                                               "every InferenceService Ready")
        profile = await profiler.stop()
        await asyncio.sleep(2)  # let the last status writes land in the audit log
        cpu_after = {name: cpu_seconds(p) for name, p in components.items()} | {"omenative": cpu_seconds(pid)}
        writes = audit.writes("omenative/", offset)
        total = sum(writes.values())
        log(f"converge: all pods Ready in {pods_ready:.1f}s, every InferenceService Ready in {isvcs_ready:.1f}s, "
            f"{total} writes, peak RSS {memory_kib(pid, 'VmHWM') / 1024:.0f} MiB")
        self.figures["converge"] = {
            "pods_ready_s": round(pods_ready, 2), "isvcs_ready_s": round(isvcs_ready, 2),
            "writes": total, "writes_per_pod": round(total / self.pods, 2),
            "writes_by_verb_resource": writes,
            "all_writes_by_client": audit.writes_by_agent(offset),
            "status_patches_per_replica": round(sum(v for k, v in writes.items() if k.endswith(
                "inferencereplicas/status")) / self.services, 2),
            "serving_patches": writes.get("patch pods/status", 0),
            "controller_peak_rss_mib": round(memory_kib(pid, "VmHWM") / 1024, 1),
            "cpu_seconds": {k: round(cpu_after[k] - cpu_before[k], 1) for k in cpu_after},
            "ready_pods_over_time": list(tracker.pod_timeline), "rss_mib_over_time": rss,
            "cache_by_resource": await cache_breakdown(kube),
            "reconciles": await reconcile_counts(metrics_port),
        }
        if profile:
            self.figures["converge"]["profile"] = profile
        try:
            if "idle" in phases:
                await self.idle(audit, pid)
            if "repair" in phases:
                await self.repair(kube, tracker, audit)
            if "rollout" in phases:
                await self.rollout(control_plane, kube, tracker, audit)
        finally:
            sampling = False
            await sampler
            self.figures["converge"]["rss_mib_over_time"] = rss
            self.figures["converge"]["controller_peak_rss_mib_all_phases"] = round(
                memory_kib(pid, "VmHWM") / 1024, 1)
            await process.stop()
            await tracker.stop()
            await kube.close()
            control_plane.down()

    async def idle(self, audit: Audit, pid: int) -> None:
        log(f"idle: watching omenative's writes for {self.idle_seconds:.0f}s")
        offset, cpu = audit.offset(), cpu_seconds(pid)
        await asyncio.sleep(self.idle_seconds)
        writes = audit.writes("omenative/", offset)
        self.figures["idle"] = {"seconds": self.idle_seconds, "writes": sum(writes.values()),
                                "writes_by_verb_resource": writes, "cpu_seconds": round(cpu_seconds(pid) - cpu, 2)}
        log(f"idle: {sum(writes.values())} writes in {self.idle_seconds:.0f}s")

    async def repair(self, kube: KubeClient, tracker: Tracker, audit: Audit) -> None:
        """A worker of `repairs` random Instances OOM-killed: how soon omenative restarts each Instance.

        The headline figure is timed on the API server's own clock, from its audit log: from the OOM kill as the
        simulated kubelet reports it (its status write of the pod with the container's restart) to omenative's
        create of the `RestartTriggered` event. No kubelet reports a kill sooner, and nothing of the bench's own
        watches is in it. Also given: from the bench's fault request (the annotation the simulated kubelet acts on,
        so its queue under load is in it) and from the restart showing on the bench's watch, to the event arriving
        on the bench's watch; and to `RestartCompleted`."""
        count = min(self.repairs, self.services * 2)
        chosen = random.Random(1).sample([(i, index) for i in range(self.services) for index in range(2)], count)
        events = Store(EVENTS)
        arrived: dict[tuple[str, str], float] = {}
        event_names: dict[str, str] = {}  # RestartTriggered event name -> Instance

        def on_event(event: Obj, gone: bool) -> None:
            reason = event.get("reason")
            if gone or reason not in ("RestartTriggered", "RestartCompleted"):
                return
            name = (event.get("involvedObject") or {}).get("name", "")
            message = str(event.get("message", ""))
            for i, index in chosen:
                if name == service_name(i) and f"instance={index} " in message:
                    arrived.setdefault((f"{name}/{index}", str(reason)), time.monotonic())
                    if reason == "RestartTriggered":
                        event_names.setdefault(event["metadata"]["name"], f"{name}/{index}")

        events.add_handler(_Handler(on_event))
        informer = Informer(kube, events, namespaces=[NAMESPACE])
        informer.start()
        await informer.wait_synced(timeout=60)
        killed: dict[str, float] = {}
        # When the simulated kubelet's restart shows on a watch: from there on the time is omenative's own.
        restarts_before: dict[str, tuple[str, int]] = {}
        seen: dict[str, float] = {}

        def on_pod(pod: Obj) -> None:
            target = restarts_before.get(pod["metadata"]["name"])
            statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
            if target and target[0] not in seen and int(statuses[0].get("restartCount") or 0) > target[1]:
                seen[target[0]] = time.monotonic()

        tracker.on_pod = on_pod
        offset = audit.offset()
        log(f"repair: OOM-killing a worker of {count} Instances")
        for i, index in chosen:
            pod = f"{service_name(i)}-engine-{index}-worker-0"
            statuses = ((await kube.get(PODS, pod, NAMESPACE)).get("status") or {}).get("containerStatuses") or [{}]
            restarts = int(statuses[0].get("restartCount") or 0)
            restarts_before[pod] = (f"{service_name(i)}/{index}", restarts)
            killed[f"{service_name(i)}/{index}"] = time.monotonic()
            await kube.patch(PODS, pod, {"metadata": {"annotations": {faults.OOM_KILLS: str(restarts + 1)}}},
                             NAMESPACE)
        try:
            await until(lambda: sum(1 for k in arrived if k[1] == "RestartCompleted") >= count, self.timeout,
                        "every restart completed")
        finally:
            await informer.stop()
        await asyncio.sleep(2)  # the last writes reach the audit log
        timings = audit_repair_times(audit.entries(offset), {p: k for p, (k, _) in restarts_before.items()},
                                     event_names)
        from_kill = [t["created"] - t["reported"] for t in timings.values() if "created" in t and "reported" in t]
        triggered = [arrived[(k, "RestartTriggered")] - t for k, t in killed.items()
                     if (k, "RestartTriggered") in arrived]
        completed = [arrived[(k, "RestartCompleted")] - t for k, t in killed.items()
                     if (k, "RestartCompleted") in arrived]
        reaction = [arrived[(k, "RestartTriggered")] - t for k, t in seen.items()
                    if (k, "RestartTriggered") in arrived]
        self.figures["repair"] = {"instances": count, "kill_to_restart_triggered_s": _spread(from_kill),
                                  "request_to_restart_triggered_s": _spread(triggered),
                                  "restart_seen_to_triggered_s": _spread(reaction),
                                  "request_to_ready_s": _spread(completed),
                                  "per_instance": per_instance(timings, arrived)}
        log(f"repair: RestartTriggered p50 {_spread(from_kill)['p50']}s p99 {_spread(from_kill)['p99']}s after the "
            f"OOM kill (audit log); p50 {_spread(triggered)['p50']}s p99 {_spread(triggered)['p99']}s after the fault "
            f"request; RestartCompleted p50 {_spread(completed)['p50']}s p99 {_spread(completed)['p99']}s")

    async def rollout(self, control_plane: ControlPlane, kube: KubeClient, tracker: Tracker, audit: Audit) -> None:
        """An image change of the runtime every InferenceService uses: time until every Instance runs the new
        revision and is Ready again, and omenative's writes for it."""
        before = {object_key(ir): (ir.get("status") or {}).get("updateRevision") for ir in tracker.irs.objects()}
        # SurgeThenDrain needs room for the surge: one extra Instance per replica at once (maxSurge 1 of 2). The
        # guide's pods use the default scheduler, which places gang members one by one (the MaybeNoGangScheduler
        # warning says so): without the room, surge pods bind half a gang each on the few free GPUs and no surge
        # ever completes, a deadlock of the scheduler, not a measure of omenative.
        surge_gpus = len(before) * PODS_PER_SERVICE // 2
        extra = -(-surge_gpus * 11 // (10 * GPUS_PER_NODE))
        room = [node_manifest(f"gpu-node-surge-{i}", gpus=GPUS_PER_NODE, models=(MODEL,)) for i in range(1, extra + 1)]
        await control_plane.kubectl("apply", "--server-side", "-f", "-",
                                    stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": room}))
        log(f"rollout: added {extra} GPU nodes for one surge Instance per replica")
        runtime = copy.deepcopy(self.runtime)
        images = _replace_images(runtime, lambda image: image + "-rollout")
        offset = audit.offset()
        started = time.monotonic()
        log(f"rollout: changing the runtime's image ({images} runners) under {len(before)} InferenceReplicas")
        await control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                                    stdin=json.dumps(runtime))

        def rolled(key: str) -> bool:
            ir = tracker.irs.get(key)
            if ir is None:
                return False
            status, replicas = ir.get("status") or {}, (ir.get("spec") or {}).get("replicas")
            return (status.get("updateRevision") not in (None, before[key])
                    and status.get("currentRevision") == status.get("updateRevision")
                    and status.get("updatedReadyReplicas") == replicas == status.get("readyReplicas"))

        done = await until(lambda: all(rolled(k) for k in before), self.timeout,
                           "every Instance on the new revision and Ready")
        await asyncio.sleep(2)  # the last writes reach the audit log
        writes = audit.writes("omenative/", offset)
        instances = sum(int((tracker.irs.get(k) or {}).get("spec", {}).get("replicas") or 0) for k in before)
        self.figures["rollout"] = {"surge_nodes_added": extra, "instances": instances,
                                   "all_on_new_revision_s": round(done, 2), "since_first_write_s":
                                       round(time.monotonic() - started - 2, 2),
                                   "writes": sum(writes.values()), "writes_by_verb_resource": writes}
        log(f"rollout: every Instance on the new revision and Ready in {done:.1f}s ({sum(writes.values())} writes)")

    async def scale(self, phases: list[str]) -> None:
        """One component of single-pod Instances scaled to `scale_instances` (then to `memory_pods`): time to Ready,
        the InferenceReplica's status size, omenative's RSS with that many pods cached."""
        targets = [n for phase, n in (("scale", self.scale_instances), ("memory", self.memory_pods))
                   if phase in phases]
        nodes = max(2, -(-max(targets) * 11 // (10 * PODS_PER_NODE)))
        runtime, isvc = single_pod_objects()
        control_plane, kube = await self.fresh_cluster(nodes=nodes, runtime=runtime)
        tracker = Tracker(kube)
        await tracker.start()
        audit = Audit(control_plane)
        process = await ControllerProcess(control_plane, "--metrics-bind-address", "0", "--log-level", "warning",
                                          *(["--workers", str(self.workers)] if self.workers else []),
                                          name="bench-scale", check_cache=False).start()
        assert process.process is not None
        pid = process.process.pid
        name = isvc["metadata"]["name"]
        replica = f"{name}-engine"
        try:
            await kube.create(INFERENCE_SERVICES, isvc, NAMESPACE)
            await until(lambda: name in tracker.ready_isvcs, self.timeout, "the single-pod InferenceService Ready")
            for phase, target in zip([p for p in ("scale", "memory") if p in phases], targets, strict=True):
                offset = audit.offset()
                profiler = Profiler(pid, self.output / f"profile-{phase}.raw")
                if self.profile:
                    await profiler.start()
                log(f"{phase}: scaling {replica} to {target} single-pod Instances on {nodes} nodes")
                await kube.patch(INFERENCE_REPLICAS, replica, {"spec": {"replicas": target}}, NAMESPACE,
                                 subresource="scale")

                def ready(target: int = target) -> bool:
                    status = (tracker.irs.get(f"{NAMESPACE}/{replica}") or {}).get("status") or {}
                    return status.get("readyReplicas") == target and len(tracker.ready_pods) >= target

                took = await until(ready, self.timeout, f"{target} Instances Ready", interval=1.0)
                isvc_ready = took + await until(lambda: name in tracker.ready_isvcs, self.timeout,
                                                "the InferenceService Ready")
                profile = await profiler.stop()
                await asyncio.sleep(2)
                ir = await kube.get(INFERENCE_REPLICAS, replica, NAMESPACE)
                writes = audit.writes("omenative/", offset)
                figure = {"instances": target, "pods_cached": len(tracker.pods), "nodes": nodes,
                          "ready_s": round(took, 2), "isvc_ready_s": round(isvc_ready, 2),
                          "status_bytes": len(json.dumps(ir.get("status") or {}, separators=(",", ":"))),
                          "status_encoding": "instanceStatusColumns" if "instanceStatusColumns" in (
                              ir.get("status") or {}) else "instanceStatuses",
                          "controller_rss_mib": round(memory_kib(pid, "VmRSS") / 1024, 1),
                          "controller_peak_rss_mib": round(memory_kib(pid, "VmHWM") / 1024, 1),
                          "writes": sum(writes.values()), "writes_by_verb_resource": writes,
                          "cache_by_resource": await cache_breakdown(kube)}
                if profile:
                    figure["profile"] = profile
                self.figures[phase] = figure
                log(f"{phase}: {target} Instances Ready in {took:.1f}s, status {figure['status_bytes']} bytes, "
                    f"RSS {figure['controller_rss_mib']} MiB (peak {figure['controller_peak_rss_mib']})")
        finally:
            await process.stop()
            await tracker.stop()
            await kube.close()
            control_plane.down()

def audit_repair_times(entries: Iterable[Obj], instance_of_pod: dict[str, str], event_names: dict[str, str]
                       ) -> dict[str, Obj]:
    """From audit entries, per Instance, on the API server's clock (seconds): `requested`, the bench's fault request
    (the annotation); `reported`, the OOM kill as the simulated kubelet reports it (its first status write of the
    pod, by a client that is neither the bench nor omenative, received after the request was); `sent` and
    `created`, when omenative's create of the `RestartTriggered` event was received and done. Entries are in the
    order their responses completed, which under load need not be the order the requests came in: each is placed
    by when it was received."""
    requested: dict[str, float] = {}
    status_writes: list[tuple[float, str]] = []
    out: dict[str, Obj] = {}

    def seconds(entry: Obj, stage: str) -> float:
        return datetime.datetime.fromisoformat(str(entry[stage])).timestamp()

    for entry in entries:
        ref = entry.get("objectRef") or {}
        agent = str(entry.get("userAgent", ""))
        code = int((entry.get("responseStatus") or {}).get("code") or 0)
        if not 200 <= code < 300:
            continue
        name = str(ref.get("name", ""))
        if ref.get("resource") == "pods" and name in instance_of_pod:
            if not ref.get("subresource") and agent.startswith(CLIENT_AGENT):
                requested.setdefault(name, seconds(entry, "requestReceivedTimestamp"))
            elif ref.get("subresource") == "status" and not agent.startswith("omenative"):
                status_writes.append((seconds(entry, "requestReceivedTimestamp"), name))
        elif ref.get("resource") == "events" and entry.get("verb") == "create" and name in event_names:
            row = out.setdefault(event_names[name], {})
            if "created" not in row:
                row["sent"] = seconds(entry, "requestReceivedTimestamp")
                row["created"] = seconds(entry, "stageTimestamp")
    for pod, at in requested.items():
        out.setdefault(instance_of_pod[pod], {})["requested"] = at
    for received, pod in sorted(status_writes):
        row = out.setdefault(instance_of_pod[pod], {})
        if "requested" in row and received > row["requested"] and "reported" not in row:
            row["reported"] = received
    return out


def per_instance(timings: dict[str, Obj], arrived: dict[tuple[str, str], float]) -> list[Obj]:
    """Each repaired Instance's instants (API server clock, seconds after the first fault request), for reading an
    outlier: requested, reported (the kill), sent and created (omenative's RestartTriggered)."""
    start = min((t["requested"] for t in timings.values() if "requested" in t), default=0.0)
    return [{"instance": key, **{k: round(v - start, 3) for k, v in sorted(t.items())}}
            for key, t in sorted(timings.items())]


def _spread(values: list[float]) -> Obj:
    if not values:
        return {"n": 0, "p50": None, "p99": None}
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"n": len(values), "p50": round(statistics.median(ordered), 3), "p99": round(p99, 3),
            "max": round(ordered[-1], 3)}


def ratios(figures: Obj) -> Obj:
    """omenative's figures over the floor's, from one run: to the full floor (every object omenative leaves in the
    API, the targets' reference), and, when that phase ran, to `floor-pods` (Services, PodGroups, pods and the
    serving condition only)."""
    converge = figures.get("converge")
    if not converge:
        return {}
    out: Obj = {}
    floor = figures.get("floor")
    if floor:
        out = {"pods_ready": round(converge["pods_ready_s"] / floor["pods_ready_s"], 2),
               "isvcs_ready": round(converge["isvcs_ready_s"] / floor["isvcs_ready_s"], 2),
               "writes": round(converge["writes"] / floor["writes"], 2)}
    narrow = figures.get("floor-pods")
    if narrow:
        out["to_floor_pods"] = {"pods_ready": round(converge["pods_ready_s"] / narrow["pods_ready_s"], 2),
                                "isvcs_ready": round(converge["isvcs_ready_s"] / narrow["pods_ready_s"], 2),
                                "writes": round(converge["writes"] / narrow["writes"], 2)}
    return out


def plot(figures: Obj, out: Path) -> list[str]:
    """PNG plots: Ready pods over time (floor and omenative on the same axes) and omenative's RSS over time."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed (pip install -e .[bench]): no plots")
        return []
    written: list[str] = []
    if not any(phase in figures for phase in ("floor-pods", "floor", "converge")):
        return written  # a scale or memory run has no Ready-pods race to plot
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for phase, label in (("floor-pods", "floor-pods: Services, PodGroups, pods only"),
                         ("floor", "raw-write floor: every object omenative writes"), ("converge", "omenative")):
        if phase in figures:
            t, n = zip(*figures[phase]["ready_pods_over_time"], strict=True)
            ax.step(t, n, where="post", label=label)
    ax.set_xlabel("seconds since the first write")
    ax.set_ylabel("Ready pods")
    ax.set_title(f"{figures['services']} InferenceServices, {figures['pods']} pods")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "ready-pods.png", dpi=100)
    written.append(str(out / "ready-pods.png"))
    plt.close(fig)
    if "converge" in figures and figures["converge"].get("rss_mib_over_time"):
        fig, ax = plt.subplots(figsize=(8, 3.5))
        t, m = zip(*figures["converge"]["rss_mib_over_time"], strict=True)
        ax.plot(t, m)
        ax.set_xlabel("seconds since the first InferenceService was created")
        ax.set_ylabel("omenative RSS (MiB)")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / "rss.png", dpi=100)
        written.append(str(out / "rss.png"))
        plt.close(fig)
    return written


async def main(argv: list[str] | None = None) -> int:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))  # the informers' own
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--services", type=int, default=500)
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--cluster", default="omenative-bench")
    parser.add_argument("--nodes", type=int, default=None,
                        help="simulated 8-GPU nodes (default: enough for every pod plus 10%%)")
    parser.add_argument("--idle-seconds", type=float, default=300)
    parser.add_argument("--repairs", type=int, default=20)
    parser.add_argument("--scale-instances", type=int, default=None,
                        help="the scale phase's single-pod Instances in one component (default: 10 per service, "
                             "5,000 at N = 500)")
    parser.add_argument("--memory-pods", type=int, default=None,
                        help="the memory phase scales the same component on to this many pods (default: 20 per "
                             "service, 10,000 at N = 500)")
    parser.add_argument("--workers", type=int, default=None, help="omenative's --workers (default: its own)")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--output", default=str(REPO / ".work" / "bench"))
    parser.add_argument("--profile", action="store_true",
                        help="sample omenative with py-spy during converge, scale and memory (profile-PHASE.raw, top "
                             "functions in the JSON)")
    args = parser.parse_args(argv)
    phases = [p for p in args.phases.split(",") if p]
    unknown = set(phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases: {', '.join(sorted(unknown))}")
    nodes = args.nodes or max(2, -(-args.services * PODS_PER_SERVICE * 11 // (10 * GPUS_PER_NODE)))
    bench = Bench(services=args.services, cluster=args.cluster, nodes=nodes, idle_seconds=args.idle_seconds,
                  repairs=args.repairs, timeout=args.timeout, workers=args.workers,
                  output=Path(args.output), profile=args.profile,
                  scale_instances=args.scale_instances or 10 * args.services,
                  memory_pods=args.memory_pods or 20 * args.services)
    bench.runtime, bench.isvc = guide_objects()
    figures: Obj = {"services": args.services, "pods": bench.pods, "nodes": nodes, "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "command": " ".join(["hack/bench.sh", *(argv if argv is not None else sys.argv[1:])]),
                    "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    bench.figures = figures
    try:
        if "floor-pods" in phases:
            await bench.floor(full=False)
        if "floor" in phases:
            await bench.floor()
        if any(p in phases for p in ("converge", "idle", "repair", "rollout")):
            await bench.converge(phases)
        if any(p in phases for p in ("scale", "memory")):
            await bench.scale(phases)
    except (TimeoutError, ApiError) as exc:
        log(f"failed: {exc}")
        figures["error"] = str(exc)
        return_code = 1
    else:
        return_code = 0
    finally:
        ControlPlane.discard(args.cluster)
    figures["ratios_to_floor"] = ratios(figures)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(figures, indent=2) + "\n")
    plots = plot(figures, out)
    log(f"figures: {out / 'bench.json'}" + (f"; plots: {', '.join(plots)}" if plots else ""))
    if figures["ratios_to_floor"]:
        log(f"ratios to the floor: {figures['ratios_to_floor']}")
    return return_code


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
