"""Which cache events wake a controller: an update that changed only what a cache drops (the status of a Service,
an autoscaler, a disruption budget; a PodGroup's counts) wakes nothing, and an EndpointSlice change wakes only the
Instances whose pods' routing changed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from omenative.controllers.instance.watches import SliceEvents
from omenative.controllers.watches import OnDelete, PodsOf, slim_podgroup
from omenative.kube.cache import ChangedOnly, Store, same_content, without_status
from omenative.kube.resources import PDBS
from omenative.manager import DECLARATIONS, Manager, Options
from omenative.ome_resources import PODGROUPS

pytestmark = pytest.mark.unit
Obj = dict[str, Any]


class Recorder:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_add(self, obj: Obj, initial: bool) -> None:
        self.seen.append("add")

    def on_update(self, old: Obj, new: Obj) -> None:
        self.seen.append("update")

    def on_delete(self, obj: Obj) -> None:
        self.seen.append("delete")


def budget(version: str, **status: Any) -> Obj:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "svc-engine", "namespace": "ns", "uid": "u1", "resourceVersion": version,
                         "labels": {"ome.io/inferenceservice": "svc"}},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"component": "engine"}}},
            "status": {"currentHealthy": 0, "desiredHealthy": 1, **status}}


def podgroup(version: str, phase: str, scheduled: int, min_member: int = 2) -> Obj:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "svc-engine-0", "namespace": "ns", "uid": "g1", "resourceVersion": version},
            "spec": {"minMember": min_member}, "status": {"phase": phase, "scheduled": scheduled}}


def delivered(resource: Any, transform: Any, versions: list[Obj]) -> list[str]:
    """What a change-only handler sees when the versions arrive one after another."""
    store = Store(resource, transform=transform)
    recorder = Recorder()
    store.add_handler(ChangedOnly(recorder))
    for obj in versions:
        store.upsert(copy.deepcopy(obj))
    return recorder.seen


@pytest.mark.parametrize(("name", "resource", "transform", "versions", "seen"), [
    ("a budget's status moves with every pod: nothing", PDBS, without_status,
     [budget("1"), budget("2", currentHealthy=1), budget("3", currentHealthy=2, disruptionsAllowed=1)], ["add"]),
    ("a budget's spec changes: woken", PDBS, without_status,
     [budget("1"), {**budget("2"), "spec": {"maxUnavailable": 2}}], ["add", "update"]),
    ("a budget's labels change: woken", PDBS, without_status,
     [budget("1"), {**budget("2"), "metadata": {**budget("2")["metadata"], "labels": {}}}], ["add", "update"]),
    ("a gang is scheduled and runs: nothing", PODGROUPS, slim_podgroup,
     [podgroup("1", "Pending", 0), podgroup("2", "Scheduling", 1), podgroup("3", "Running", 2)], ["add"]),
    ("a gang fails: woken, once", PODGROUPS, slim_podgroup,
     [podgroup("1", "Scheduling", 1), podgroup("2", "Failed", 1), podgroup("3", "Failed", 0)], ["add", "update"]),
    ("a PodGroup's spec changes: woken", PODGROUPS, slim_podgroup,
     [podgroup("1", "Running", 2), podgroup("2", "Running", 2, min_member=3)], ["add", "update"]),
])
def test_an_update_wakes_only_when_something_kept_changed(name: str, resource: Any, transform: Any,
                                                          versions: list[Obj], seen: list[str]) -> None:
    assert delivered(resource, transform, versions) == seen, name


def test_same_content_ignores_only_the_resource_version() -> None:
    a = budget("1")
    assert same_content(a, budget("2"))
    assert not same_content(a, {**budget("2"), "metadata": {**budget("2")["metadata"], "uid": "other"}})
    assert not same_content(a, {**budget("2"), "metadata": {**budget("2")["metadata"],
                                                            "deletionTimestamp": "2026-01-01T00:00:00Z"}})
    assert not same_content(a, {k: v for k, v in budget("2").items() if k != "status"})


def routed(*endpoints: tuple[str, bool]) -> Obj:
    return {"metadata": {"name": "svc-engine-abc", "namespace": "ns"},
            "endpoints": [{"targetRef": {"kind": "Pod", "name": name}, "conditions": {"ready": ready}}
                          for name, ready in endpoints]}


def pod(name: str, index: int) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "labels": {
        "ome.io/inferenceservice": "svc", "component": "engine", "ome.io/instance-index": str(index)}}}


class Pods:
    def __init__(self, *pods: Obj) -> None:
        self.pods = {p["metadata"]["name"]: p for p in pods}

    def has(self, resource: Any) -> bool:
        return False

    def get(self, resource: Any, namespace: str | None, name: str) -> Obj | None:
        return self.pods.get(name)


@pytest.mark.parametrize(("name", "old", "new", "woken"), [
    ("one leader became ready: only its Instance", routed(("l0", True), ("l1", False)),
     routed(("l0", True), ("l1", True)), {"ns/svc-engine/1"}),
    ("one leader left the slice", routed(("l0", True), ("l1", True)), routed(("l1", True)), {"ns/svc-engine/0"}),
    ("a leader joined", routed(("l0", True)), routed(("l0", True), ("l1", False)), {"ns/svc-engine/1"}),
    ("nothing about the pods changed", routed(("l0", True), ("l1", True)), routed(("l1", True), ("l0", True)),
     set()),
])
def test_a_slice_change_wakes_the_instances_whose_routing_changed(name: str, old: Obj, new: Obj,
                                                                  woken: set[str]) -> None:
    manager = Manager(Options())
    events = SliceEvents(manager.wiring(Pods(pod("l0", 0), pod("l1", 1))))  # type: ignore[arg-type]
    events.on_update(old, new)
    queued = set()
    while len(manager.q_instance):
        queued.add(manager.q_instance.get_nowait())
    assert queued == woken, name


def test_a_podgroup_delete_marks_the_instances_delete_observed_and_wakes_its_replica() -> None:
    manager = Manager(Options())
    # What the controllers declare for a PodGroup's deletion: the Instance's observes it, the replica's wakes it.
    handlers = [h for d in DECLARATIONS for resource, h in d.watches(manager.wiring(Pods()))  # type: ignore[arg-type]
                if resource == PODGROUPS and isinstance(h, OnDelete)]

    def gone(obj: Obj) -> None:
        for h in handlers:
            h.func(obj)

    handler = OnDelete(gone)
    group = {**podgroup("1", "Running", 2), "metadata": {**podgroup("1", "Running", 2)["metadata"], "labels": {
        "ome.io/inferenceservice": "svc", "component": "engine", "ome.io/instance-index": "0"}}}
    manager.expectations.expect_deletions(PodsOf("ns/svc-engine/0"), ["g1"])
    handler.on_update(group, {**group, "metadata": {**group["metadata"], "resourceVersion": "2"}})
    assert not manager.expectations.satisfied(PodsOf("ns/svc-engine/0")) and len(manager.q_ir) == 0
    handler.on_delete(group)
    assert manager.expectations.satisfied(PodsOf("ns/svc-engine/0"))
    assert manager.q_ir.get_nowait() == "ns/svc-engine"
