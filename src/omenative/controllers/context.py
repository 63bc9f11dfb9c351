"""What the controllers read and write through, as two narrow protocols: `Reads` (the caches and what is derived
from them, the configuration, the wall clock) and `Writes` (the applier, events, expectations, the refusals table,
waking another controller). The manager builds one `Context` that is both; tests hand the controllers fakes of
either (tests/support/fakes.py)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Generic, Protocol, TypeVar

import attrs

from omenative.api import constants as c
from omenative.api import naming
from omenative.api.config import ControllerConfig
from omenative.api.instance_status import decode_rows
from omenative.api.rollout import pairing_of
from omenative.api.selection import Candidate, model_scopes, no_runtime_message, runtime_scopes, select_runtime
from omenative.api.types import BaseModelSpec, InstanceStatus, ServingRuntimeSpec
from omenative.api.units import optional_duration
from omenative.controllers.refusals import Refusals
from omenative.controllers.watches import BY_ROUTED_POD
from omenative.kube.apply import Applier
from omenative.kube.cache import NAMESPACE_INDEX
from omenative.kube.client import KubeClient
from omenative.kube.events import EventRecorder
from omenative.kube.expectations import Expectations, WriteExpectations
from omenative.kube.informers import Caches
from omenative.kube.queue import WorkQueue
from omenative.kube.resources import CONTROLLER_REVISIONS, CRDS, ENDPOINT_SLICES, NODES, Resource
from omenative.obj import Obj
from omenative.observe.nodes import NodeHealth, node_health
from omenative.ome_resources import (
    BASE_MODELS,
    CLUSTER_BASE_MODELS,
    CLUSTER_SERVING_RUNTIMES,
    HTTPROUTES,
    PODGROUPS,
    PODMONITORS,
    SCALED_OBJECTS,
    SERVING_RUNTIMES,
)
from omenative.render import objects
from omenative.render.templates import ModelInfo

T = TypeVar("T")

class PerVersion(Generic[T]):
    """A value derived from a cached object, computed once per version of the object and shared by every reader.

    Only the two newest versions of each object are kept (an update handler compares the old with the new; nobody
    reads older ones), for the `capacity` objects used most recently: a replica of 2,000 Instances whose status
    changed a hundred times must not keep a hundred decodings of 2,000 rows.
    """

    VERSIONS_KEPT = 2

    def __init__(self, derive: Callable[[Obj], T], capacity: int) -> None:
        self.derive = derive
        self.capacity = capacity
        self._memo: OrderedDict[str, list[tuple[str, T]]] = OrderedDict()  # uid -> [(resourceVersion, value)]

    def of(self, obj: Obj) -> T:
        meta = obj.get("metadata") or {}
        uid, version = str(meta.get("uid", "")), str(meta.get("resourceVersion", ""))
        versions = self._memo.get(uid)
        if versions is not None:
            self._memo.move_to_end(uid)
            for known, value in versions:
                if known == version:
                    return value
        value = self.derive(obj)
        if version:  # only what the server versioned can be remembered
            versions = self._memo.setdefault(uid, [])
            versions.append((version, value))
            del versions[:-self.VERSIONS_KEPT]
            if len(self._memo) > self.capacity:
                self._memo.popitem(last=False)
        return value

    def __len__(self) -> int:
        """Versions remembered."""
        return sum(len(v) for v in self._memo.values())


def rows_by_index(replica: Obj) -> Mapping[int, InstanceStatus]:
    return MappingProxyType({r.index: r for r in decode_rows(replica.get("status")) if r.index is not None})


class DecodedRows(PerVersion[Mapping[int, InstanceStatus]]):
    """InferenceReplica status rows by Instance index (read-only; planners evolve copies).

    The InferenceReplica controller, each of its Instances' reconciles and the event handlers all read the same
    rows, and decoding is not cheap (about 45 ms for 1,000 Instances): decoding them in every Instance reconcile
    made a pass over a fleet quadratic.
    """

    def __init__(self, capacity: int = 4096) -> None:
        super().__init__(rows_by_index, capacity)


class ParsedRuntimes(PerVersion[ServingRuntimeSpec]):
    """Runtime specs as models, for runtime selection (parsing OME's 207 catalog runtimes takes about 40 ms, and an
    InferenceService that names no runtime looks at all of them in every reconcile)."""

    def __init__(self, capacity: int = 4096) -> None:
        super().__init__(lambda runtime: ServingRuntimeSpec.from_dict(runtime.get("spec") or {}), capacity)


def current_revision(replica: Obj) -> str:
    """The revision an InferenceReplica's spec describes (its runners' hash)."""
    spec = replica.get("spec") or {}
    return objects.revision_hash(spec.get("runners") or [], spec.get("pairingProtocol"),
                                 int((replica.get("status") or {}).get("collisionCount") or 0))


class CurrentRevisions(PerVersion[str]):
    """InferenceReplicas' current revisions: hashing the runners (kilobytes of JSON, sorted) in every Instance
    reconcile was the largest single cost in a converge profile."""

    def __init__(self, capacity: int = 4096) -> None:
        super().__init__(current_revision, capacity)


class Reads(Protocol):
    """What a controller reads: the caches (never the API), memoized derivations of cached objects, the
    configuration and the wall clock."""

    config: ControllerConfig
    rows: DecodedRows
    runtime_specs: ParsedRuntimes
    revisions: CurrentRevisions

    def wall_clock(self) -> float: ...

    def get(self, resource: Resource, namespace: str | None, name: str) -> Obj | None: ...

    def by_index(self, resource: Resource, index: str, value: str) -> list[Obj]: ...

    def objects(self, resource: Resource) -> list[Obj]: ...

    def has(self, resource: Resource) -> bool: ...

    def runtime_named(self, namespace: str, name: str, kind: str | None = None) -> tuple[Obj, bool] | None: ...

    def model_named(self, namespace: str, name: str, kind: str | None = None) -> tuple[Obj, bool] | None: ...

    def podgroup_crd_installed(self) -> bool: ...

    def podmonitors_cached(self) -> bool: ...
    def scaledobjects_cached(self) -> bool: ...
    def httproutes_cached(self) -> bool: ...

    def podgroups_cached(self) -> bool: ...

    def force_delete(self) -> tuple[float, float] | None: ...

    def node_health(self, names: set[str]) -> dict[str, NodeHealth]: ...

    def routed_pods(self, namespace: str, isvc: str, names: set[str]) -> frozenset[str]: ...


class Writes(Protocol):
    """What a controller writes with: the applier (every write), the event recorder, the expectations it sets and
    clears, the refusals table it shares with the other controllers, and a way to wake one of them."""

    applier: Applier
    events: EventRecorder
    expectations: Expectations
    written: WriteExpectations
    refusals: Refusals

    def wake(self, controller: str, key: str) -> None: ...


@attrs.define
class Context:
    client: KubeClient
    caches: Caches
    applier: Applier
    events: EventRecorder
    expectations: Expectations
    config: ControllerConfig
    queues: dict[str, WorkQueue[str]] = attrs.field(factory=dict)
    written: WriteExpectations = attrs.field(factory=WriteExpectations)  # InferenceReplica status writes
    rows: DecodedRows = attrs.field(factory=DecodedRows)
    runtime_specs: ParsedRuntimes = attrs.field(factory=ParsedRuntimes)
    revisions: CurrentRevisions = attrs.field(factory=CurrentRevisions)
    refusals: Refusals = attrs.field(factory=Refusals)  # refused creates, from the Instance controller to the rows
    wall_clock: Callable[[], float] = time.time

    def wake(self, controller: str, key: str) -> None:
        """Puts `key` on the named controller's queue ("inferenceservice", "inferencereplica", "instance")."""
        self.queues[controller].add(key)

    def objects(self, resource: Resource) -> list[Obj]:
        return self.caches.store(resource).objects()

    def has(self, resource: Resource) -> bool:
        return self.caches.has(resource)

    def get(self, resource: Resource, namespace: str | None, name: str) -> Obj | None:
        return self.caches.get(resource, namespace, name)

    def by_index(self, resource: Resource, index: str, value: str) -> list[Obj]:
        return self.caches.store(resource).by_index(index, value)

    def named(self, namespaced: Resource, cluster: Resource, namespace: str, name: str,
              scopes: tuple[bool, ...]) -> tuple[Obj, bool] | None:
        """The first object of that name in `scopes` (True: the namespace, False: cluster scope), as the reference's
        kind says (api.selection): (object, namespaced) or None."""
        for in_namespace in scopes:
            obj = self.get(namespaced, namespace, name) if in_namespace else self.get(cluster, None, name)
            if obj is not None:
                return obj, in_namespace
        return None

    def runtime_named(self, namespace: str, name: str, kind: str | None = None) -> tuple[Obj, bool] | None:
        return self.named(SERVING_RUNTIMES, CLUSTER_SERVING_RUNTIMES, namespace, name, runtime_scopes(kind))

    def model_named(self, namespace: str, name: str, kind: str | None = None) -> tuple[Obj, bool] | None:
        return self.named(BASE_MODELS, CLUSTER_BASE_MODELS, namespace, name, model_scopes(kind))

    def crd_installed(self, name: str) -> bool:
        crd = self.get(CRDS, None, name)
        if crd is None:
            return False
        conditions = (crd.get("status") or {}).get("conditions") or []
        return any(x.get("type") == "Established" and x.get("status") == "True" for x in conditions) and \
            not crd["metadata"].get("deletionTimestamp")

    def podgroup_crd_installed(self) -> bool:
        return self.crd_installed(c.PODGROUP_CRD)

    def scaledobjects_cached(self) -> bool:
        """ScaledObjects are made while KEDA's CRD is installed and their cache has listed."""
        return self.caches.has(SCALED_OBJECTS) and self.caches.synced(SCALED_OBJECTS) and \
            self.crd_installed(c.SCALEDOBJECT_CRD)

    def httproutes_cached(self) -> bool:
        """HTTPRoutes are made while the Gateway API's CRD is installed and their cache has listed."""
        return self.caches.has(HTTPROUTES) and self.caches.synced(HTTPROUTES) and \
            self.crd_installed(c.HTTPROUTE_CRD)

    def podmonitors_cached(self) -> bool:
        """PodMonitors are made while their CRD is installed and their cache has listed (so the clean-up of a
        removed component sees them)."""
        return self.caches.has(PODMONITORS) and self.caches.synced(PODMONITORS) and \
            self.crd_installed(c.PODMONITOR_CRD)

    def force_delete(self) -> tuple[float, float] | None:
        """(overdueSlack, nodeUnreachableThreshold) when the force-delete escalation is on."""
        slack = optional_duration(self.config.force_delete_overdue_slack)
        threshold = optional_duration(self.config.force_delete_node_unreachable_threshold)
        return (slack, threshold) if slack and threshold else None

    def node_health(self, names: set[str]) -> dict[str, NodeHealth]:
        """The health of the named nodes that exist (a node missing from the result is gone)."""
        found = {name: self.get(NODES, None, name) for name in names}
        return {name: node_health(node) for name, node in found.items() if node is not None}

    def routed_pods(self, namespace: str, isvc: str, names: set[str]) -> frozenset[str]:
        """Those of the named pods that an EndpointSlice of the InferenceService's Services (not the headless ones,
        which list every pod with an address) still lists as ready or serving."""
        if not self.caches.has(ENDPOINT_SLICES) or not names:
            return frozenset()
        store = self.caches.store(ENDPOINT_SLICES)
        return frozenset(name for name in names if store.by_index(BY_ROUTED_POD, f"{namespace}/{name}"))

    def podgroups_cached(self) -> bool:
        return self.caches.synced(PODGROUPS)


def named_runtime(reads: Reads, namespace: str, ref: Obj) -> tuple[Obj | None, bool, tuple[str, str] | None]:
    """The runtime a reference names (`kind` ServingRuntime: the namespace's only; else the namespace's, then the
    cluster's): (the runtime, whether namespaced, None), or OME's RuntimeNotFound or RuntimeDisabled."""
    name = str(ref.get("name") or "")
    found = reads.runtime_named(namespace, name, ref.get("kind")) if name else None
    if found is None:
        where = f"namespace {namespace}" if ref.get("kind") == "ServingRuntime" else \
            f"namespace {namespace} or at cluster scope"
        return None, False, ("RuntimeNotFound", f'runtime "{name}" not found in {where}')
    obj, namespaced = found
    if (obj.get("spec") or {}).get("disabled"):
        scope = "namespace" if namespaced else "cluster"
        return None, namespaced, ("RuntimeDisabled", f"{scope}-scoped runtime {name} is disabled")
    return obj, namespaced, None


def named_model(reads: Reads, namespace: str, ref: Obj, field: str = "spec.model", *, ready: bool = False
                ) -> tuple[ModelInfo | None, tuple[str, str] | None]:
    """The model a reference names (`kind` BaseModel: the namespace's only; else the ClusterBaseModel), or OME's
    ModelNotFound or ModelDisabled. `field`: where the reference is written, for the hint about `kind`; `ready`: a
    model not Ready yet is ModelNotFound too (a standalone replica's rule: its nodes are not known to hold it)."""
    name = str(ref.get("name") or "")
    kind = ref.get("kind")
    found = reads.model_named(namespace, name, kind) if name else None
    if found is None:
        if kind == "BaseModel":
            return None, ("ModelNotFound", f'model "{name}" not found: no BaseModel of that name in namespace '
                                           f"{namespace}")
        hint = f" (a BaseModel in namespace {namespace} has it: set {field}.kind: BaseModel)" if \
            name and reads.model_named(namespace, name, "BaseModel") else ""
        return None, ("ModelNotFound", f'model "{name}" not found: no ClusterBaseModel of that name{hint}')
    obj, namespaced = found
    spec = BaseModelSpec.from_dict(obj.get("spec") or {})
    if spec.disabled:
        return None, ("ModelDisabled", f'model "{name}" is disabled')
    state = (obj.get("status") or {}).get("state")
    if ready and state != "Ready":
        return None, ("ModelNotFound", f'model "{name}" is not ready yet (state: {state or "none"})')
    return ModelInfo(name=name, namespaced=namespaced, namespace=namespace, spec=spec), None


def selected_runtime(reads: Reads, namespace: str, model: ModelInfo
                     ) -> tuple[Obj | None, bool, str | None]:
    """The runtime OME selects for the model among the namespace's and the cluster's (OME's "How runtimes match the
    model"): (the runtime, whether namespaced, None), or (None, False, why none fits)."""
    specs = reads.runtime_specs
    candidates = [Candidate(r["metadata"]["name"], True, specs.of(r))
                  for r in reads.by_index(SERVING_RUNTIMES, NAMESPACE_INDEX, namespace)]
    candidates += [Candidate(r["metadata"]["name"], False, specs.of(r))
                   for r in reads.objects(CLUSTER_SERVING_RUNTIMES)]
    selection = select_runtime(model.spec, candidates)
    if selection.runtime is None:
        return None, False, no_runtime_message(model.name, model.spec, namespace, selection)
    chosen = selection.runtime
    resource = SERVING_RUNTIMES if chosen.namespaced else CLUSTER_SERVING_RUNTIMES
    found = reads.get(resource, namespace if chosen.namespaced else None, chosen.name)
    return found or {"metadata": {"name": chosen.name}}, chosen.namespaced, None


def revision_pairing(reads: Reads, namespace: str, isvc: str, component: str, revision: str | None) -> str | None:
    """The pairing protocol a revision's pods carry, from its ControllerRevision."""
    if not revision:
        return None
    found = reads.get(CONTROLLER_REVISIONS, namespace, naming.revision_name(isvc, component, revision))
    return pairing_of(((found or {}).get("data") or {}).get("runners"))


def revision_runners(reads: Reads, ir: Obj, isvc: str, component: str, revision: str | None) -> list[Obj] | None:
    """A revision's runners: the InferenceReplica's own for its current revision (or none named), else its
    ControllerRevision's; None while unknown."""
    if not revision or revision == reads.revisions.of(ir):
        return list((ir.get("spec") or {}).get("runners") or []) or None
    name = naming.revision_name(isvc, component, revision)
    stored = reads.get(CONTROLLER_REVISIONS, ir["metadata"]["namespace"], name)
    return ((stored or {}).get("data") or {}).get("runners")
