"""In-place updates (OME's update-strategies page): a single-pod Instance whose revisions differ only in container
images keeps its pod under InPlaceIfPossible and InPlaceOnly: out of rotation, new images set on it, back in
rotation once the kubelet restarted its containers on them. Any other change is recreated (InPlaceIfPossible) or
refused with InPlaceUpdateNotPossible (InPlaceOnly)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from omenative.api import constants as c
from omenative.api.times import format_time
from omenative.api.types import InstanceStatus
from omenative.controllers.inferencereplica import plan as replica
from omenative.controllers.instance import plan as instance
from omenative.observe.pods import images_current, normalized_image, pod_facts, slim_pod
from omenative.render.in_place import IN_PLACE_STEP, image_patch, images_only, mark_not_ready
from omenative.render.pods import InstanceRef
from tests.unit.test_planners import NOW, outdated, phases, pod, view

Obj = dict[str, Any]
OLD, NEW = "sglang:v1", "sglang:v2"


def runners(image: str = OLD, **spec: Any) -> list[Obj]:
    container = {"name": "ome-container", "image": image, "args": ["--port", "8080"]}
    return [{"name": "default", "size": 1, "template": {
        "metadata": {"labels": {"app": "x"}}, "spec": {"containers": [container], **spec}}}]


@pytest.mark.parametrize(("old", "new", "possible"), [
    (runners(OLD), runners(NEW), True),
    (runners(OLD), runners(OLD), True),  # a label-only change keeps the pod (the label waits for a recreate)
    (runners(OLD), runners(NEW, initContainers=[{"name": "fetch", "image": "x"}]), False),
    (runners(OLD, initContainers=[{"name": "fetch", "image": "a"}]),
     runners(OLD, initContainers=[{"name": "fetch", "image": "b"}]), False),  # an init container's image
    (runners(OLD), runners(NEW, nodeSelector={"a": "b"}), False),
    (None, runners(NEW), False),  # the old revision is not known
])
def test_only_images_of_regular_containers_may_change(old: list[Obj] | None, new: list[Obj], possible: bool) -> None:
    if old is not None and new is not None and old == new:
        new = copy.deepcopy(new)
        new[0]["template"]["metadata"]["labels"]["app"] = "y"
    assert images_only(old, new) is possible


def test_a_leader_and_workers_never_move_in_place() -> None:
    gang = [{"name": "leader", "size": 1, "template": runners()[0]["template"]},
            {"name": "worker", "size": 1, "template": runners()[0]["template"]}]
    assert not images_only(gang, gang)


def test_the_patch_sets_changed_images_and_the_revision_and_pins_the_uid() -> None:
    have = {"metadata": {"uid": "u1", "labels": {c.LABEL_REVISION_HASH: "rev0"}},
            "spec": {"containers": [{"name": "ome-container", "image": OLD}, {"name": "side", "image": "s:1"}]}}
    want = {"spec": {"containers": [{"name": "ome-container", "image": NEW}, {"name": "side", "image": "s:1"}]}}
    assert image_patch(have, want, "rev1") == {
        "metadata": {"uid": "u1", "labels": {c.LABEL_REVISION_HASH: "rev1"}},
        "spec": {"containers": [{"name": "ome-container", "image": NEW}]}}
    moved = {"metadata": {"uid": "u1", "labels": {c.LABEL_REVISION_HASH: "rev1"}}, "spec": want["spec"]}
    assert image_patch(moved, want, "rev1") is None


@pytest.mark.parametrize(("spec", "status", "current"), [
    ("nginx:1.25", "docker.io/library/nginx:1.25", True),  # as the kubelet reports it
    ("lmsysorg/sglang:v2", "docker.io/lmsysorg/sglang:v2", True),
    ("registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.9", True),
    ("nginx", "docker.io/library/nginx:latest", True),
    ("sglang:v2", "docker.io/library/sglang:v1", False),
    ("sglang:v2", None, False),  # not reported yet
])
def test_a_container_runs_its_spec_image_once_the_kubelet_reports_it(spec: str, status: str | None,
                                                                    current: bool) -> None:
    statuses = [{"name": "c", "image": status}] if status else []
    assert images_current({"spec": {"containers": [{"name": "c", "image": spec}]},
                           "status": {"containerStatuses": statuses}}) is current
    assert normalized_image(spec) == normalized_image(normalized_image(spec))


def test_the_cached_pod_keeps_the_images() -> None:
    got = slim_pod({"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": NEW, "env": [{"name": "A", "value": "1"}]}], "nodeName": "n"},
        "status": {"containerStatuses": [{"name": "c", "image": NEW, "imageID": "sha", "restartCount": 1}]}})
    assert got["spec"] == {"nodeName": "n", "containers": [{"name": "c", "image": NEW}]}
    assert got["status"]["containerStatuses"] == [{"name": "c", "restartCount": 1, "image": NEW}]


def test_mark_not_ready_defaults_to_true() -> None:
    assert mark_not_ready({}) is True
    assert mark_not_ready({"lifecycle": {"updateStrategy": {"inPlaceUpdateStrategy": {}}}}) is True
    assert mark_not_ready({"lifecycle": {"updateStrategy": {"inPlaceUpdateStrategy": {
        "markNotReadyDuringLifecycle": False}}}}) is False


# -- the InferenceReplica planner

def single(index: int, image: str = OLD, revision: str = "rev0", **fields: Any) -> Obj:
    out = pod(f"s-engine-{index}-default-0", index=index, **fields)
    out["metadata"]["labels"][c.LABEL_REVISION_HASH] = revision
    out["spec"]["containers"] = [{"name": "ome-container", "image": image}]
    out["status"]["containerStatuses"][0]["image"] = image
    return out


def single_view(rows: list[InstanceStatus], pods: dict[int, list[Obj]], **fields: Any) -> replica.ReplicaView:
    return view(rows, {i: [pod_facts(p) for p in ps] for i, ps in pods.items()}, multi=False,
                replicas=len(rows), **fields)


@pytest.mark.parametrize("strategy", ["InPlaceIfPossible", "InPlaceOnly"])
def test_an_image_change_keeps_the_pod_paced_by_max_unavailable(strategy: str) -> None:
    rows, pods = [outdated(0), outdated(1)], {0: [single(0)], 1: [single(1)]}
    plan = replica.plan(single_view(rows, pods, update_strategy=strategy, max_unavailable=1,
                                    in_place_from=frozenset({"rev0"})))
    assert phases(plan) == {0: ("Updating", 1), 1: ("Ready", 1)}  # the same incarnation: the pod is kept
    moving = next(r for r in plan.rows if r.index == 0)
    assert moving.operation is not None and moving.operation.step == IN_PLACE_STEP
    assert (moving.target_revision, moving.running_revision) == ("rev1", "rev0")
    assert plan.events == []

    # Still serving its old images: not done. Patched, but the kubelet has not restarted it: not done either.
    still = replica.plan(single_view(plan.rows, pods, update_strategy=strategy, max_unavailable=1,
                                     in_place_from=frozenset({"rev0"})))
    assert phases(still) == {0: ("Updating", 1), 1: ("Ready", 1)}
    patched = single(0, image=OLD, revision="rev1", gate=False)
    patched["spec"]["containers"][0]["image"] = NEW
    waiting = replica.plan(single_view(plan.rows, {0: [patched], 1: [single(1)]}, update_strategy=strategy,
                                       max_unavailable=1, in_place_from=frozenset({"rev0"})))
    assert phases(waiting)[0] == ("Updating", 1)
    # On the new image and back in rotation: Ready on the new revision, and the next Instance moves.
    done = replica.plan(single_view(plan.rows, {0: [single(0, image=NEW, revision="rev1")], 1: [single(1)]},
                                    update_strategy=strategy, max_unavailable=1, in_place_from=frozenset({"rev0"})))
    assert phases(done) == {0: ("Ready", 1), 1: ("Updating", 1)}
    moved = next(r for r in done.rows if r.index == 0)
    assert moved.running_revision == "rev1"
    assert moved.ready_since == format_time(NOW)  # when it last became Ready (kubectl ome instance status)


def test_in_place_if_possible_recreates_any_other_change() -> None:
    plan = replica.plan(single_view([outdated(0)], {0: [single(0)]}, update_strategy="InPlaceIfPossible"))
    assert phases(plan) == {0: ("Updating", 2)}  # a new incarnation: new pods


def test_in_place_only_refuses_any_other_change_once_in_omes_words() -> None:
    plan = replica.plan(single_view([outdated(0)], {0: [single(0)]}, update_strategy="InPlaceOnly"))
    assert phases(plan) == {0: ("Ready", 1)}
    assert [(e.reason, e.message) for e in plan.events] == [(
        "InPlaceUpdateNotPossible",
        "OMENative component=engine instance=0 rejected update: InPlaceOnly strategy but diff exceeds container "
        "images")]
    assert plan.rollout_hold is not None and plan.rollout_hold.gate == "Budget"
    again = replica.plan(single_view(plan.rows, {0: [single(0)]}, update_strategy="InPlaceOnly"))
    assert again.events == []


# -- the Instance planner

REF = InstanceRef(isvc="s", namespace="ns", component="engine", index=0, incarnation=1, revision="rev1",
                  replicas=1)


def in_place_view(p: Obj, **fields: Any) -> instance.InstanceView:
    base: dict[str, Any] = {"ref": REF, "phase": "Updating", "runners": runners(NEW), "pods": [p],
                            "podgroup": None, "podgroup_intent": None, "owner_uid": "u", "now": NOW,
                            "in_place": True, "drain_deadline": NOW + 600}
    return instance.InstanceView(**{**base, **fields})


def test_the_pod_leaves_rotation_then_takes_the_new_images() -> None:
    serving = single(0)
    out = instance.plan(in_place_view(serving))
    assert [(g[0]["metadata"]["name"], g[1], g[2]) for g in out.gates] == [("s-engine-0-default-0", False,
                                                                            "InPlaceUpdate")]
    assert out.patch_pods == () and out.delete_pods == () and out.create_pods == ()
    drained = single(0, gate=False)
    routed = instance.plan(in_place_view(drained, routed=frozenset({"s-engine-0-default-0"})))
    assert routed.patch_pods == () and routed.wake_in == pytest.approx(600)
    out = instance.plan(in_place_view(drained))
    assert [patch for _, patch in out.patch_pods] == [{
        "metadata": {"uid": "uid-s-engine-0-default-0-1", "labels": {c.LABEL_REVISION_HASH: "rev1"}},
        "spec": {"containers": [{"name": "ome-container", "image": NEW}]}}]
    assert out.gates == ()


def test_the_pod_returns_to_rotation_only_on_its_new_images() -> None:
    patched = single(0, image=OLD, revision="rev1", gate=False)
    patched["spec"]["containers"][0]["image"] = NEW  # the kubelet has not restarted it yet
    assert instance.plan(in_place_view(patched)).gates == ()
    restarted = single(0, image=NEW, revision="rev1", gate=False)
    out = instance.plan(in_place_view(restarted))
    assert [(g[1], g[2]) for g in out.gates] == [(True, "InstanceReady")] and out.patch_pods == ()


def test_without_mark_not_ready_the_pod_is_patched_while_it_serves() -> None:
    out = instance.plan(in_place_view(single(0), mark_not_ready=False))
    assert out.gates == () and len(out.patch_pods) == 1
