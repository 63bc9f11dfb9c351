"""What the InferenceService controller caches and what wakes it.

For: InferenceServices. Owns: its InferenceReplicas (their creation is expected; any change wakes the parent),
Services, autoscalers, PodDisruptionBudgets, RBAC and PodMonitors (an update that changed nothing cached wakes no
one). Reads: the replicas' ControllerRevisions (each gets its pair of revision Services). Watches: runtimes and
models (the services that name them, or pick a runtime automatically).
"""

from __future__ import annotations

from collections.abc import Iterable

from omenative.api.config import ControllerConfig
from omenative.api.constants import LABEL_ISVC
from omenative.controllers.watches import (
    BY_ISVC,
    BY_MODEL,
    BY_RUNTIME,
    CacheSpec,
    Declaration,
    ReplicasOf,
    Wiring,
    isvc_label_index,
    parent_key_of,
)
from omenative.kube import resources as k
from omenative.kube.cache import ChangedOnly, FuncHandler, Handler, object_key, without_status
from omenative.kube.resources import Resource
from omenative.obj import Obj
from omenative.ome_resources import (
    BASE_MODELS,
    CLUSTER_BASE_MODELS,
    CLUSTER_SERVING_RUNTIMES,
    HTTPROUTES,
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    PODMONITORS,
    SCALED_OBJECTS,
    SERVING_RUNTIMES,
)


def creations_key(namespace: str, isvc: str) -> ReplicasOf:
    """The expectations key of the InferenceReplicas an InferenceService creates (observed by the replica cache)."""
    return ReplicasOf(f"{namespace}/{isvc}")


def runtime_index(obj: Obj) -> list[str]:
    return [((obj.get("spec") or {}).get("runtime") or {}).get("name") or ""]


def model_index(obj: Obj) -> list[str]:
    name = ((obj.get("spec") or {}).get("model") or {}).get("name")
    return [name] if name else []


def caches(config: ControllerConfig) -> Iterable[CacheSpec]:
    yield CacheSpec(resource=INFERENCE_SERVICES, indexers={BY_RUNTIME: runtime_index, BY_MODEL: model_index})
    yield CacheSpec(resource=INFERENCE_REPLICAS, indexers={BY_ISVC: isvc_label_index})
    for resource in (k.SERVICES, k.HPAS, k.PDBS):
        yield CacheSpec(resource=resource, label_selector=LABEL_ISVC, transform=without_status,
                        indexers={BY_ISVC: isvc_label_index})
    for resource in (k.SERVICE_ACCOUNTS, k.ROLES, k.ROLE_BINDINGS, k.CONTROLLER_REVISIONS):
        yield CacheSpec(resource=resource, label_selector=LABEL_ISVC, indexers={BY_ISVC: isvc_label_index})
    for resource in (SERVING_RUNTIMES, CLUSTER_SERVING_RUNTIMES, BASE_MODELS, CLUSTER_BASE_MODELS):
        yield CacheSpec(resource=resource)
    yield CacheSpec(resource=PODMONITORS, label_selector=LABEL_ISVC, start=False, indexers={BY_ISVC: isvc_label_index})
    # The HTTPRoute's status is kept: it is where the Gateway says whether it accepted the route (IngressReady).
    yield CacheSpec(resource=HTTPROUTES, label_selector=LABEL_ISVC, start=False, indexers={BY_ISVC: isvc_label_index})
    # KEDA writes a ScaledObject's status at every poll while a trigger is active: not cached, so it wakes nothing.
    yield CacheSpec(resource=SCALED_OBJECTS, label_selector=LABEL_ISVC, start=False, transform=without_status,
                    indexers={BY_ISVC: isvc_label_index})


class OwnedReplicaEvents:
    """An InferenceReplica's creation is observed under its parent's key; any event wakes the parent."""

    def __init__(self, wiring: Wiring) -> None:
        self.w = wiring

    def _wake(self, replica: Obj) -> None:
        parent = parent_key_of(replica)
        if parent:
            self.w.queues.isvc.add(parent)

    def on_add(self, obj: Obj, initial: bool) -> None:
        parent = ((obj.get("spec") or {}).get("parentRef") or {}).get("name")
        if parent:
            self.w.expectations.creation_observed(creations_key(obj["metadata"]["namespace"], parent),
                                                  obj["metadata"]["name"])
        self._wake(obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        self._wake(new)

    def on_delete(self, obj: Obj) -> None:
        self._wake(obj)


def watches(w: Wiring) -> Iterable[tuple[Resource, Handler]]:
    isvcs = w.queues.isvc
    yield INFERENCE_SERVICES, FuncHandler(lambda o: isvcs.add(object_key(o)))
    yield INFERENCE_REPLICAS, OwnedReplicaEvents(w)

    def by_isvc_label(obj: Obj) -> None:
        for key in isvc_label_index(obj):
            isvcs.add(key)

    # Their status is not cached, so a status update arrives as an update that changed nothing: not passed on.
    for resource in (k.SERVICES, k.HPAS, k.PDBS, k.SERVICE_ACCOUNTS, k.ROLES, k.ROLE_BINDINGS, PODMONITORS,
                     SCALED_OBJECTS, HTTPROUTES):
        yield resource, ChangedOnly(FuncHandler(by_isvc_label))

    # A new revision gets its pair of revision Services, and a pruned one takes its pair with it (owner references).
    yield k.CONTROLLER_REVISIONS, ChangedOnly(FuncHandler(by_isvc_label))

    def runtime_changed(obj: Obj) -> None:
        store = w.caches.store(INFERENCE_SERVICES)
        for isvc in store.by_index(BY_RUNTIME, obj["metadata"]["name"]) + store.by_index(BY_RUNTIME, ""):
            isvcs.add(object_key(isvc))

    def model_changed(obj: Obj) -> None:
        for isvc in w.caches.store(INFERENCE_SERVICES).by_index(BY_MODEL, obj["metadata"]["name"]):
            isvcs.add(object_key(isvc))

    for resource in (SERVING_RUNTIMES, CLUSTER_SERVING_RUNTIMES):
        yield resource, FuncHandler(runtime_changed)
    for resource in (BASE_MODELS, CLUSTER_BASE_MODELS):
        yield resource, FuncHandler(model_changed)


DECLARATION = Declaration(name="inferenceservice", caches=caches, watches=watches)
