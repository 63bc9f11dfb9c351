"""What the Instance controller caches and what wakes it.

For: the rows of InferenceReplicas (an Instance is a row, keyed "{replica}/{index}": a replica's change wakes only the
Instances whose rows changed, or all of them when its spec did). Owns: pods (their creation and deletion are the
expectations that keep a pod from being made twice) and PodGroups (a change wakes the Instance; a deletion is
observed). Watches: EndpointSlices (the Instances of the pods whose routing changed: a drained pod goes once no
slice routes to it), and nodes when the force-delete escalation is on.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from omenative.api.config import ControllerConfig
from omenative.api.constants import LABEL_ISVC
from omenative.controllers.watches import (
    BY_INSTANCE,
    BY_ISVC,
    BY_NODE,
    BY_ROUTED_POD,
    HEADLESS_LABEL,
    MANAGED,
    CacheSpec,
    Declaration,
    OnDelete,
    PodsOf,
    Wiring,
    add,
    by_instance,
    by_node,
    force_delete_on,
    instance_key_of,
    isvc_label_index,
    routed_pod_index,
    slim_endpoint_slice,
    slim_podgroup,
)
from omenative.kube import resources as k
from omenative.kube.cache import ChangedOnly, FuncHandler, Handler, object_key
from omenative.kube.resources import Resource
from omenative.obj import Obj
from omenative.observe.pods import slim_pod
from omenative.ome_resources import INFERENCE_REPLICAS, INFERENCE_SERVICES, PODGROUPS


def caches(config: ControllerConfig) -> Iterable[CacheSpec]:
    yield CacheSpec(resource=INFERENCE_REPLICAS, indexers={BY_ISVC: isvc_label_index})
    yield CacheSpec(resource=INFERENCE_SERVICES)  # the parent, for the pods' owner and events
    yield CacheSpec(resource=k.PODS, label_selector=MANAGED, transform=slim_pod,
                    indexers={BY_INSTANCE: by_instance, BY_NODE: by_node})
    if force_delete_on(config):
        yield CacheSpec(resource=k.NODES)
    yield CacheSpec(resource=k.CONTROLLER_REVISIONS, label_selector=LABEL_ISVC, indexers={BY_ISVC: isvc_label_index})
    # The Services' slices (they carry the Service's labels): a drained pod is deleted once none routes to it. Not
    # the headless Services' slices: they list every pod with an address, nothing reads them, and they were a third
    # of the slices held and of the slice events that woke Instances.
    yield CacheSpec(resource=k.ENDPOINT_SLICES, label_selector=f"{LABEL_ISVC},!{HEADLESS_LABEL}",
                    transform=slim_endpoint_slice,
                    indexers={BY_ISVC: isvc_label_index, BY_ROUTED_POD: routed_pod_index})
    yield CacheSpec(resource=PODGROUPS, label_selector=MANAGED, start=False, transform=slim_podgroup)


class RowEvents:
    """An InferenceReplica's event wakes the Instances whose rows changed (all of them when its spec changed)."""

    def __init__(self, wiring: Wiring) -> None:
        self.w = wiring

    def _wake(self, replica: Obj, indexes: Iterable[int]) -> None:
        key = object_key(replica)
        for index in indexes:
            self.w.queues.instance.add(f"{key}/{index}")

    def on_add(self, obj: Obj, initial: bool) -> None:
        self._wake(obj, set(self.w.rows.of(obj)))

    def on_update(self, old: Obj, new: Obj) -> None:
        old_rows, new_rows = self.w.rows.of(old), self.w.rows.of(new)
        indexes = old_rows.keys() | new_rows.keys()
        if old.get("metadata", {}).get("generation") != new.get("metadata", {}).get("generation"):
            changed = set(indexes)
        else:
            changed = {i for i in indexes if old_rows.get(i) != new_rows.get(i)}
        self._wake(new, changed)

    def on_delete(self, obj: Obj) -> None:
        pass


class PodEvents:
    """A pod's event wakes its Instance at once (it holds the serving gate) and observes its creation or deletion
    (a pod deleted and made again under one name is both)."""

    def __init__(self, wiring: Wiring) -> None:
        self.w = wiring

    def on_add(self, obj: Obj, initial: bool) -> None:
        instance = instance_key_of(obj)
        if instance:
            self.w.expectations.creation_observed(PodsOf(instance), obj["metadata"]["name"])
        add(self.w.queues.instance, instance)

    def on_update(self, old: Obj, new: Obj) -> None:
        instance = instance_key_of(new)
        if instance and new["metadata"].get("deletionTimestamp"):
            self.w.expectations.deletion_observed(PodsOf(instance), new["metadata"].get("uid", ""))
        if old["metadata"].get("uid") != new["metadata"].get("uid") and instance:
            self.w.expectations.deletion_observed(PodsOf(instance), old["metadata"].get("uid", ""))
            self.w.expectations.creation_observed(PodsOf(instance), new["metadata"]["name"])
        add(self.w.queues.instance, instance)

    def on_delete(self, obj: Obj) -> None:
        instance = instance_key_of(obj)
        if instance:
            self.w.expectations.deletion_observed(PodsOf(instance), obj["metadata"].get("uid", ""))
        add(self.w.queues.instance, instance)


class SliceEvents:
    """EndpointSlice events wake the Instances of the pods a slice lists, before and after the change."""

    def __init__(self, wiring: Wiring) -> None:
        self.w = wiring

    @staticmethod
    def _routes(obj: Obj) -> dict[str, Any]:
        """Pod name -> its endpoint (whether it is ready, serving, terminating) in one slice."""
        return {ref["name"]: e.get("conditions") for e in obj.get("endpoints") or []
                if (ref := e.get("targetRef") or {}).get("kind") == "Pod" and ref.get("name")}

    def _wake(self, namespace: str | None, names: Iterable[str]) -> None:
        for name in names:
            pod = self.w.caches.get(k.PODS, namespace, name)
            if pod is not None:
                add(self.w.queues.instance, instance_key_of(pod))

    def on_add(self, obj: Obj, initial: bool) -> None:
        if not initial:
            self._wake(obj["metadata"].get("namespace"), self._routes(obj))

    def on_update(self, old: Obj, new: Obj) -> None:
        # Only the pods whose routing changed: a slice lists every leader of a component, and each one's change
        # would otherwise wake them all.
        before, after = self._routes(old), self._routes(new)
        self._wake(new["metadata"].get("namespace"),
                   {n for n in before.keys() | after.keys() if before.get(n, ()) != after.get(n, ())})

    def on_delete(self, obj: Obj) -> None:
        self._wake(obj["metadata"].get("namespace"), self._routes(obj))


def podgroup_gone(wiring: Wiring, obj: Obj) -> None:
    """The Instance's delete of its PodGroup is observed."""
    instance = instance_key_of(obj)
    if instance:
        wiring.expectations.deletion_observed(PodsOf(instance), obj["metadata"].get("uid", ""))


def watches(w: Wiring) -> Iterable[tuple[Resource, Handler]]:
    instances = w.queues.instance
    yield INFERENCE_REPLICAS, RowEvents(w)
    yield k.PODS, PodEvents(w)
    yield k.ENDPOINT_SLICES, SliceEvents(w)
    if w.caches.has(k.NODES):
        def node_changed(obj: Obj) -> None:
            for pod in w.caches.store(k.PODS).by_index(BY_NODE, obj["metadata"]["name"]):
                add(instances, instance_key_of(pod))

        yield k.NODES, FuncHandler(node_changed)
    yield PODGROUPS, ChangedOnly(FuncHandler(lambda o: add(instances, instance_key_of(o))))
    yield PODGROUPS, OnDelete(lambda o: podgroup_gone(w, o))


DECLARATION = Declaration(name="instance", caches=caches, watches=watches)
