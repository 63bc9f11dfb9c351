"""A single pod's SurgeThenDrain update keeps its Instance and alternates the pod's name slot (OME's activeOrdinal):
the replica planner's steps, the Instance planner's pods, and the slot in the status encodings."""

from __future__ import annotations

from typing import Any

import attrs

from omenative.api import instance_status
from omenative.api.types import InstanceOperation, InstanceStatus
from omenative.controllers.inferencereplica import plan as replica
from omenative.controllers.instance import plan as instance
from omenative.observe.pods import pod_facts
from omenative.render.pods import InstanceRef
from tests.unit.test_planners import NOW, Obj, names, phases, pod, view

SINGLE = [{"name": "default", "template": {"metadata": {}, "spec": {
    "containers": [{"name": "ome-container", "image": "i:2"}]}}}]


def single(index: int = 0, ordinal: int = 0, **overrides: Any) -> Obj:
    return pod(f"s-engine-{index}-default-{ordinal}", ordinal=ordinal, index=index, **overrides)


def outdated(index: int = 0, active: int = 0) -> InstanceStatus:
    return InstanceStatus(index=index, phase="Ready", incarnation=1, target_revision="rev0", running_revision="rev0",
                          active_ordinal=active or None)


def plan(rows: list[InstanceStatus], pods: dict[int, list[Obj]], **fields: Any) -> replica.ReplicaPlan:
    facts = {i: [pod_facts(p) for p in ps] for i, ps in pods.items()}
    return replica.plan(view(rows, facts, multi=False, **{"replicas": len(rows), "max_surge": 1, **fields}))


def only(p: replica.ReplicaPlan, index: int = 0) -> InstanceStatus:
    return next(r for r in p.rows if r.index == index)


def test_the_new_pod_takes_the_other_slot_and_the_instance_keeps_its_index() -> None:
    started = plan([outdated()], {0: [single()]})
    assert phases(started) == {0: ("Updating", 1)}  # no second Instance
    row = only(started)
    assert row.operation is not None and (row.operation.step, row.operation.surge_index) == ("Surge", None)
    assert row.operation.reason == "surge to s-engine-0-default-1"
    assert (row.running_revision, row.target_revision, row.active_ordinal) == ("rev0", "rev1", None)

    # Not up yet: both stay as they are, the old pod counts as the Instance (serving).
    waiting = plan([row], {0: [single(), single(ordinal=1, gate=None, containers_ready=False)]})
    assert only(waiting).operation.step == "Surge" and only(waiting).serving_pod_count == 1  # type: ignore[union-attr]

    # The new pod serves: the old one is drained next, and still holds the surge slot.
    up = plan([row], {0: [single(), single(ordinal=1)]})
    drain = only(up)
    assert drain.phase == "Updating" and drain.operation is not None and drain.operation.step == "SurgeDrain"
    assert drain.operation.reason == "drain s-engine-0-default-0"

    # The old pod is going: the slot moves, and the Instance is Ready on the new revision, same index and incarnation.
    done = plan([drain], {0: [single(deleting=True), single(ordinal=1)]})
    final = only(done)
    assert (final.phase, final.index, final.incarnation) == ("Ready", 0, 1)
    assert (final.running_revision, final.target_revision, final.active_ordinal) == ("rev1", "rev1", 1)
    assert [(e.reason, e.message) for e in done.events] == [("InstanceReplaced", (
        "OMENative component=engine instance=0 pod s-engine-0-default-0 replaced by s-engine-0-default-1 "
        "(revision=rev1)"))]


def test_the_next_update_alternates_back_to_slot_zero() -> None:
    started = plan([outdated(active=1)], {0: [single(ordinal=1)]})
    assert only(started).operation.reason == "surge to s-engine-0-default-0"  # type: ignore[union-attr]
    drain = only(plan([only(started)], {0: [single(ordinal=1), single()]}))
    final = only(plan([drain], {0: [single()]}))
    assert (final.phase, final.running_revision, final.active_ordinal) == ("Ready", "rev1", None)


def test_a_failed_new_pod_is_abandoned_and_the_old_one_keeps_serving() -> None:
    row = only(plan([outdated()], {0: [single()]}))
    wedged = single(ordinal=1, wedged="ImagePullBackOff", gate=False, created=NOW - 120)
    abandoned = plan([row], {0: [single(), wedged]})
    back = only(abandoned)
    assert (back.phase, back.running_revision, back.target_revision, back.operation) == ("Ready", "rev0", "rev0", None)
    assert back.last_failure is not None and back.last_failure.pod_name == "s-engine-0-default-1"
    assert [e.reason for e in abandoned.events] == ["SurgeAbandoned"]  # not InstanceFailed: it never stopped serving
    assert abandoned.events[0].message == (
        "OMENative component=engine instance=0 abandoned the surge to pod s-engine-0-default-1 (ImagePullBackOff); "
        "s-engine-0-default-0 keeps serving revision rev0")
    assert [(b.target_revision, b.state) for b in abandoned.retry_blocks] == [("s-engine-rev1", "Backoff")]
    # The new pod is drained (it is in neither slot now), and the next attempt waits out the backoff.
    again = plan([back], {0: [single()]}, retry_blocks=abandoned.retry_blocks)
    assert phases(again) == {0: ("Ready", 1)}
    assert again.rollout_hold is not None and again.rollout_hold.gate == "RetryBlock"


def test_a_draining_old_pod_holds_the_surge_budget() -> None:
    first = plan([outdated(0), outdated(1)], {0: [single()], 1: [single(1)]})
    assert phases(first) == {0: ("Updating", 1), 1: ("Ready", 1)}  # maxSurge 1: one at a time
    drain = only(plan(list(first.rows), {0: [single(), single(ordinal=1)], 1: [single(1)]}))
    held = plan([drain, outdated(1)], {0: [single(), single(ordinal=1)], 1: [single(1)]})
    assert held.rollout_hold is not None and held.rollout_hold.reason == (
        "per-Component surge budget 1 exhausted (would become 2); extra pod s-engine-0-default-0 holds a surge slot "
        "until its drain completes")


def test_a_superseded_surge_returns_to_the_old_pod() -> None:
    row = only(plan([outdated()], {0: [single()]}))
    rollback = plan([row], {0: [single(), single(ordinal=1, gate=None, containers_ready=False)]},
                    update_revision="rev0")
    back = only(rollback)
    assert (back.phase, back.target_revision, back.active_ordinal) == ("Ready", "rev0", None)
    assert [e.reason for e in rollback.events] == ["SurgeAbandoned"]


# -- the Instance planner

REF = InstanceRef(isvc="s", namespace="ns", component="engine", index=0, incarnation=1, revision="rev1", replicas=1)


def instance_view(pods: list[Obj], *, ordinal: int, keep: int | None, **fields: Any) -> instance.InstanceView:
    return instance.InstanceView(ref=attrs.evolve(REF, ordinal=ordinal), phase="Updating", runners=SINGLE, pods=pods,
                                 podgroup=None, podgroup_intent=None, owner_uid="ir-uid", keep_ordinal=keep,
                                 **fields)


def test_the_surge_creates_the_other_slot_and_leaves_the_old_pod_serving() -> None:
    actions = instance.plan(instance_view([single()], ordinal=1, keep=0))
    assert names(actions.create_pods) == ["s-engine-0-default-1"]
    assert actions.create_pods[0]["metadata"]["labels"]["ome.io/pod-ordinal"] == "1"
    assert actions.create_pods[0]["spec"]["hostname"] == "s-engine-0-default-1"
    assert actions.gates == () and actions.delete_pods == ()
    # Its containers are ready: the new pod enters rotation on its own, beside the old one.
    ready = instance.plan(instance_view([single(), single(ordinal=1, gate=None)], ordinal=1, keep=0))
    assert [(p["metadata"]["name"], value) for p, value, _ in ready.gates] == [("s-engine-0-default-1", True)]


def test_surge_drain_takes_the_old_pod_out_of_rotation_then_deletes_it() -> None:
    actions = instance.plan(instance_view([single(), single(ordinal=1)], ordinal=1, keep=None))
    assert [(p["metadata"]["name"], value) for p, value, _ in actions.gates] == [("s-engine-0-default-0", False)]
    unrouted = instance.plan(instance_view([single(gate=False), single(ordinal=1)], ordinal=1, keep=None))
    assert names(unrouted.delete_pods) == ["s-engine-0-default-0"] and unrouted.create_pods == ()
    routed = instance.plan(instance_view([single(gate=False), single(ordinal=1)], ordinal=1, keep=None,
                                         routed=frozenset({"s-engine-0-default-0"}), drain_deadline=NOW + 60,
                                         now=NOW))
    assert routed.delete_pods == () and routed.wake_in == 60  # still listed by an EndpointSlice: it waits


def test_a_leftover_pod_in_the_other_slot_is_drained_when_no_surge_runs() -> None:
    actions = instance.plan(instance.InstanceView(
        ref=REF, phase="Ready", runners=SINGLE, pods=[single(), single(ordinal=1, gate=False)], podgroup=None,
        podgroup_intent=None, owner_uid="ir-uid"))
    assert names(actions.delete_pods) == ["s-engine-0-default-1"] and actions.create_pods == ()


# -- the status encodings

def test_the_slot_is_kept_in_both_encodings() -> None:
    rows = [InstanceStatus(index=i, phase="Ready", incarnation=1, active_ordinal=1 if i in (3, 4, 7) else None)
            for i in range(9)]
    columns = instance_status.encode_columnar(rows)
    assert columns["activeOrdinalOne"] == "3-4,7"
    assert "entries" not in columns  # the slot is not a per-Instance entry
    assert [r.active_ordinal for r in instance_status.decode_columnar(columns)] == [
        None, None, None, 1, 1, None, None, 1, None]
    assert InstanceStatus.from_dict(rows[3].to_dict()).active_ordinal == 1


def test_a_restart_keeps_the_slot() -> None:
    surging = InstanceStatus(index=0, phase="Ready", incarnation=1, target_revision="rev1", running_revision="rev1",
                             active_ordinal=1)
    lost = plan([surging], {0: [single(ordinal=1, phase="Failed", reason="Evicted")]}, update_revision="rev1",
                restart_policy="RecreateInstanceOnPodRestart")
    row = only(lost)
    assert (row.phase, row.incarnation, row.active_ordinal) == ("Restarting", 2, 1)
    assert row.operation == InstanceOperation(type="Restart", step="Drain", started_at=row.operation.started_at,
                                              target_revision="rev1", reason=row.operation.reason,
                                              deadline=row.operation.deadline)
