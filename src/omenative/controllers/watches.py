"""How a controller says what it needs cached and what wakes it, as controller-runtime's builder does (For, Owns,
Watches): each controller package has a `watches.py` that returns a `Declaration`, and the manager only wires what
they declare (it merges the caches, registers the handlers, in the controllers' order).

A handler here does two things only, both synchronous and cheap: it marks expectations observed (the Instance
controller must not create a pod twice, the InferenceService controller an InferenceReplica, and a status write must
not be made over a cache that has not seen the last one) and it adds keys to queues. It never reads the API.

Also here: the cache index names and the functions that map an object to the key of the object it belongs to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

import attrs

from omenative.api import constants as c
from omenative.api import naming
from omenative.api.config import ControllerConfig
from omenative.api.types import InstanceStatus
from omenative.kube.cache import Handler, IndexFunc, Transform
from omenative.kube.expectations import Expectations, WriteExpectations
from omenative.kube.informers import Caches
from omenative.kube.queue import WorkQueue
from omenative.kube.resources import Resource
from omenative.obj import Obj, strip_server_fields

# Cache index names.
BY_REPLICA = "replica"  # pods: "{namespace}/{isvc}-{component}" (the InferenceReplica's key)
BY_INSTANCE = "instance"  # pods: "{namespace}/{isvc}-{component}/{index}" (the Instance's key)
BY_ISVC = "isvc"  # namespaced children: "{namespace}/{isvc}"
BY_RUNTIME = "runtime"  # InferenceServices: the runtime name they name, or "" to auto-select
BY_MODEL = "model"  # InferenceServices: the model name they name
BY_NODE = "node"  # pods: the node they are bound to
BY_ROUTED_POD = "routed-pod"  # EndpointSlices: "{namespace}/{pod}" of each ready or serving endpoint
SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # set by the EndpointSlice controller on each slice
HEADLESS_LABEL = "service.kubernetes.io/headless"  # ...and this one on the slices of a headless Service
MANAGED = f"{c.LABEL_MANAGED_BY}={c.MANAGED_BY_OMENATIVE}"  # the selector of the pods and PodGroups we make


def routed_pod_index(endpoint_slice: Obj) -> list[str]:
    """EndpointSlices by the pods they route to ("{namespace}/{pod}"), listing only endpoints that are ready or
    serving, and no headless Service's slices (they list every pod with an address). An index, so that an Instance
    asks about its own pods instead of reading every slice of its InferenceService."""
    meta = endpoint_slice.get("metadata") or {}
    labels = meta.get("labels") or {}
    isvc = labels.get(c.LABEL_ISVC)
    if HEADLESS_LABEL in labels or not isvc or labels.get(SERVICE_NAME_LABEL) in {
            naming.headless_service_name(isvc, component) for component in c.COMPONENTS}:
        return []
    out = []
    for endpoint in endpoint_slice.get("endpoints") or []:
        ref = endpoint.get("targetRef") or {}
        conditions = endpoint.get("conditions") or {}
        if ref.get("kind") == "Pod" and ref.get("name") and (conditions.get("ready") or conditions.get("serving")):
            out.append(f"{meta.get('namespace')}/{ref['name']}")
    return out


def replica_key_of(obj: Obj) -> str | None:
    """The InferenceReplica a child belongs to (pods, PodGroups, ControllerRevisions): its controller, else its
    labels. A standalone replica's children carry its own name as `ome.io/inferenceservice`, so only the owner
    reference names it."""
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("kind") == "InferenceReplica" and ref.get("controller"):
            return f"{meta.get('namespace')}/{ref.get('name')}"
    labels = meta.get("labels") or {}
    isvc, component = labels.get(c.LABEL_ISVC), labels.get(c.LABEL_COMPONENT)
    if not isvc or not component:
        return None
    return f"{meta.get('namespace')}/{naming.replica_name(isvc, component)}"


def instance_key_of(obj: Obj) -> str | None:
    """The Instance a pod or PodGroup belongs to, from its labels."""
    replica = replica_key_of(obj)
    index = ((obj.get("metadata") or {}).get("labels") or {}).get(c.LABEL_INSTANCE_INDEX)
    return f"{replica}/{index}" if replica and index is not None else None


def isvc_label_index(obj: Obj) -> list[str]:
    """The InferenceService a child belongs to ("{namespace}/{isvc}"), from its label."""
    meta = obj.get("metadata") or {}
    isvc = (meta.get("labels") or {}).get(c.LABEL_ISVC)
    return [f"{meta.get('namespace')}/{isvc}"] if isvc else []


def key_index(func: Callable[[Obj], str | None]) -> IndexFunc:
    """An index from a function that gives at most one key."""
    def index(obj: Obj) -> list[str]:
        key = func(obj)
        return [key] if key else []

    return index


def parent_key_of(replica: Obj) -> str | None:
    """The InferenceService an InferenceReplica belongs to, from its parentRef."""
    parent = ((replica.get("spec") or {}).get("parentRef") or {}).get("name")
    return f"{replica['metadata']['namespace']}/{parent}" if parent else None


# Expectation keys, typed: what a controller waits to see in its cache before it writes again.
@attrs.frozen
class PodsOf:
    """The pods and PodGroup an Instance's controller created or deleted (observed by the pod and PodGroup events)."""

    instance: str  # "{namespace}/{replica}/{index}", the Instance's queue key


@attrs.frozen
class ReplicasOf:
    """The InferenceReplicas an InferenceService created (observed by the InferenceReplica events)."""

    isvc: str  # "{namespace}/{name}"


@attrs.frozen
class RevisionNamed:
    """A ControllerRevision the InferenceReplica controller created (observed once a pass finds it cached)."""

    namespace: str
    name: str


@attrs.frozen
class StatusOf:
    """The status an InferenceReplica's controller wrote, or the rollout status of an InferenceService (write
    expectations: the next reconcile waits for the cache to hold the version the write produced)."""

    kind: str  # "InferenceReplica" or "InferenceService.rollout"
    key: str  # the object's "{namespace}/{name}"


def replica_status(key: str) -> StatusOf:
    return StatusOf("InferenceReplica", key)


class RowsOf(Protocol):
    """The decoded status rows of an InferenceReplica, by Instance index (shared, computed once per version)."""

    def of(self, obj: Obj) -> Mapping[int, InstanceStatus]: ...


@attrs.frozen(kw_only=True)
class Queues:
    isvc: WorkQueue[str]
    replica: WorkQueue[str]
    instance: WorkQueue[str]

    def all(self) -> tuple[WorkQueue[str], ...]:
        return self.isvc, self.replica, self.instance


def add(queue: WorkQueue[str], key: str | None) -> None:
    if key:
        queue.add(key)


@attrs.frozen(kw_only=True)
class Wiring:
    """What the handlers may touch: the queues, the expectations they observe, the shared rows, the caches (to map
    an object to others' keys) and the configuration."""

    queues: Queues
    expectations: Expectations
    written: WriteExpectations  # InferenceReplica status writes, observed by their watch events
    rows: RowsOf
    caches: Caches
    config: ControllerConfig


@attrs.frozen(kw_only=True)
class CacheSpec:
    """A cache a controller reads: merged with other controllers' specs of the same resource (the indexes are
    united; the selector, transform and start must agree)."""

    resource: Resource
    label_selector: str | None = None
    transform: Transform | None = strip_server_fields
    indexers: Mapping[str, IndexFunc] = attrs.field(factory=dict)
    start: bool = True  # False: prepared only, started when its CRD is installed


@attrs.frozen(kw_only=True)
class Declaration:
    """One controller's caches and watches."""

    name: str
    caches: Callable[[ControllerConfig], Iterable[CacheSpec]]
    watches: Callable[[Wiring], Iterable[tuple[Resource, Handler]]]


def merge_caches(declarations: Iterable[Declaration], config: ControllerConfig) -> list[CacheSpec]:
    """The caches to register, one per resource, in the order first declared."""
    merged: dict[Resource, CacheSpec] = {}
    for declaration in declarations:
        for spec in declaration.caches(config):
            known = merged.get(spec.resource)
            if known is None:
                merged[spec.resource] = spec
                continue
            if (known.label_selector, known.transform, known.start) != \
                    (spec.label_selector, spec.transform, spec.start):
                raise ValueError(f"{declaration.name} declares the {spec.resource} cache differently from another "
                                 "controller")
            clash = {name for name in known.indexers.keys() & spec.indexers.keys()
                     if known.indexers[name] is not spec.indexers[name]}
            if clash:
                raise ValueError(f"{declaration.name} declares the index {sorted(clash)} of {spec.resource} "
                                 "with another function")
            merged[spec.resource] = attrs.evolve(known, indexers={**known.indexers, **spec.indexers})
    return list(merged.values())


@attrs.frozen
class OnDelete:
    """Calls `func` when an object is deleted (or deleted and created again under one name)."""

    func: Callable[[Obj], None]

    def on_add(self, obj: Obj, initial: bool) -> None:
        pass

    def on_update(self, old: Obj, new: Obj) -> None:
        if old.get("metadata", {}).get("uid") != new.get("metadata", {}).get("uid"):
            self.func(old)  # deleted and created again under one name

    def on_delete(self, obj: Obj) -> None:
        self.func(obj)


# The indexes shared by several controllers, as single functions (merged caches compare them by identity).
by_replica = key_index(replica_key_of)
by_instance = key_index(instance_key_of)
by_node = key_index(lambda pod: (pod.get("spec") or {}).get("nodeName"))


def force_delete_on(config: ControllerConfig) -> bool:
    """The force-delete escalation is configured (it judges whether a stuck pod's node is dead: nodes are cached)."""
    return bool(config.force_delete_overdue_slack and config.force_delete_node_unreachable_threshold)


# The PodGroups' and EndpointSlices' cache transforms: only what the controllers read (an Instance acts on whether its
# gang failed; a drain waits until no slice routes to a pod).
def slim_podgroup(obj: Obj) -> Obj:
    """The PodGroups' transform: of the status only whether the gang failed (the one thing an Instance acts on). The
    PodGroup controller rewrites the counts and phase as each pod is scheduled and runs."""
    strip_server_fields(obj)
    status = obj.get("status")
    obj["status"] = {"phase": "Failed"} if isinstance(status, dict) and status.get("phase") == "Failed" else {}
    return obj


ENDPOINT_READ = {"targetRef": ("kind", "name"), "conditions": ("ready", "serving", "terminating")}


def slim_endpoint_slice(obj: Obj) -> Obj:
    """The EndpointSlices' transform: of each endpoint the controllers read only which pod it routes to and whether
    it is ready or serving. Addresses, node names, zones, hints and ports were a fifth of the heap at 10,000 pods."""
    strip_server_fields(obj)
    obj.pop("ports", None)
    endpoints = obj.get("endpoints")
    if isinstance(endpoints, list):
        obj["endpoints"] = [
            {field: {k: part[k] for k in keep if k in part}
             for field, keep in ENDPOINT_READ.items() if isinstance(part := endpoint.get(field), dict)}
            for endpoint in endpoints if isinstance(endpoint, dict)]
    return obj
