"""What the InferenceReplica controller caches and what wakes it.

For: InferenceReplicas (each event also observes the resourceVersion of our last status write). Owns: pods (a
failure wakes the replica at once, routine progress after the status batch period, so a burst makes one status
write), ControllerRevisions, PodGroups (only their deletion wakes it: a teardown waits for them to be gone).
Reads: the runtimes and models standalone replicas render from (a change wakes the replicas that use them).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from omenative.api.config import ControllerConfig
from omenative.api.constants import LABEL_ISVC
from omenative.api.standalone import projected
from omenative.api.units import parse_duration
from omenative.controllers.watches import (
    BY_ISVC,
    BY_REPLICA,
    MANAGED,
    CacheSpec,
    Declaration,
    OnDelete,
    Wiring,
    add,
    by_replica,
    force_delete_on,
    isvc_label_index,
    replica_key_of,
    replica_status,
    slim_podgroup,
)
from omenative.kube import resources as k
from omenative.kube.cache import FuncHandler, Handler, object_key
from omenative.kube.resources import Resource
from omenative.obj import Obj
from omenative.observe.pods import pod_got_worse, slim_pod
from omenative.ome_resources import (
    BASE_MODELS,
    CLUSTER_BASE_MODELS,
    CLUSTER_SERVING_RUNTIMES,
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    PODGROUPS,
    SERVING_RUNTIMES,
)

BY_REFERENCE = "by-reference"


def reference_index(replica: Obj) -> list[str]:
    """What a standalone replica renders from: `runtime/<name>` for a named runtime, `runtime/` for any runtime (a
    model whose runtime is selected: a new or changed runtime can change the choice), `model/<name>`."""
    spec = replica.get("spec") or {}
    if projected(replica) or spec.get("runners"):
        return []
    model, runtime = spec.get("modelRef"), spec.get("runtimeRef")
    keys = []
    if isinstance(runtime, dict):
        keys.append(f"runtime/{runtime.get('name') or ''}")
    if isinstance(model, dict):
        keys.append(f"model/{model.get('name') or ''}")
        if not isinstance(runtime, dict):
            keys.append("runtime/")
    return keys


def caches(config: ControllerConfig) -> Iterable[CacheSpec]:
    yield CacheSpec(resource=INFERENCE_REPLICAS, indexers={BY_ISVC: isvc_label_index, BY_REFERENCE: reference_index})
    yield CacheSpec(resource=INFERENCE_SERVICES)  # the parent, for events and the audit's owner
    yield CacheSpec(resource=k.PODS, label_selector=MANAGED, transform=slim_pod, indexers={BY_REPLICA: by_replica})
    if force_delete_on(config):
        yield CacheSpec(resource=k.NODES)  # whether the node of a pod that must be replaced still reports
    yield CacheSpec(resource=k.CONTROLLER_REVISIONS, label_selector=LABEL_ISVC, indexers={BY_ISVC: isvc_label_index})
    yield CacheSpec(resource=PODGROUPS, label_selector=MANAGED, start=False, transform=slim_podgroup,
                    indexers={BY_REPLICA: by_replica})
    # The runtimes and models a standalone replica renders from (spec.runtimeRef, spec.modelRef): a change rolls it.
    for resource in (SERVING_RUNTIMES, CLUSTER_SERVING_RUNTIMES, BASE_MODELS, CLUSTER_BASE_MODELS):
        yield CacheSpec(resource=resource)


class ReplicaEvents:
    """Any event of an InferenceReplica wakes it, once the resourceVersion it carries is observed (the controller
    does not write status over a cache older than its last write)."""

    def __init__(self, wiring: Wiring) -> None:
        self.w = wiring

    def _wake(self, obj: Obj) -> None:
        key = object_key(obj)
        self.w.written.observed(replica_status(key), obj["metadata"].get("resourceVersion"))
        self.w.queues.replica.add(key)

    def on_add(self, obj: Obj, initial: bool) -> None:
        self._wake(obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        self._wake(new)

    def on_delete(self, obj: Obj) -> None:
        self._wake(obj)


class PodEvents:
    """A pod's failure wakes its InferenceReplica at once; routine progress after the batch period."""

    def __init__(self, wiring: Wiring) -> None:
        self.w = wiring
        self.batch_period = parse_duration(wiring.config.status_batch_period or "0")

    def _wake(self, pod: Obj, urgent: bool) -> None:
        replica = replica_key_of(pod)
        if replica:
            if urgent or self.batch_period <= 0:
                self.w.queues.replica.add(replica)
            else:
                self.w.queues.replica.add_after(replica, self.batch_period)

    def on_add(self, obj: Obj, initial: bool) -> None:
        self._wake(obj, urgent=False)

    def on_update(self, old: Obj, new: Obj) -> None:
        self._wake(new, urgent=pod_got_worse(old, new))

    def on_delete(self, obj: Obj) -> None:
        self._wake(obj, urgent=True)


def watches(w: Wiring) -> Iterable[tuple[Resource, Handler]]:
    replicas = w.queues.replica
    yield INFERENCE_REPLICAS, ReplicaEvents(w)
    yield k.PODS, PodEvents(w)
    yield k.CONTROLLER_REVISIONS, FuncHandler(lambda o: add(replicas, replica_key_of(o)))
    yield PODGROUPS, OnDelete(lambda o: add(replicas, replica_key_of(o)))

    def referenced(kind: str, obj: Obj) -> None:
        """Wake the standalone replicas that render from it (a namespaced runtime or model serves only its own
        namespace's replicas)."""
        name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace")
        store = w.caches.store(INFERENCE_REPLICAS)
        keys = [f"{kind}/{name}"] + (["runtime/"] if kind == "runtime" else [])
        for replica in (r for key in keys for r in store.by_index(BY_REFERENCE, key)):
            if namespace is None or replica["metadata"].get("namespace") == namespace:
                replicas.add(object_key(replica))

    for resource in (SERVING_RUNTIMES, CLUSTER_SERVING_RUNTIMES):
        yield resource, FuncHandler(partial(referenced, "runtime"))
    for resource in (BASE_MODELS, CLUSTER_BASE_MODELS):
        yield resource, FuncHandler(partial(referenced, "model"))


DECLARATION = Declaration(name="inferencereplica", caches=caches, watches=watches)
