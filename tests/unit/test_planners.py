"""Table tests of the two planners: the InferenceReplica's Instance lifecycle and an Instance's pod actions."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from omenative.api.config import ControllerConfig
from omenative.api.times import format_time
from omenative.api.types import InstanceOperation, InstanceStatus, LastFailure
from omenative.controllers.inferencereplica import plan as replica
from omenative.controllers.instance import plan as instance
from omenative.observe.pods import PodFacts, pod_facts
from omenative.render.pods import InstanceRef

NOW = 1_800_000_000.0
Obj = dict[str, Any]


def pod(name: str, *, incarnation: int = 1, runner: str = "default", ordinal: int = 0, containers_ready: bool = True,
        gate: bool | None = True, phase: str = "Running", restarts: int = 0, reason: str = "OOMKilled",
        wedged: str | None = None, created: float = NOW - 3600, deleting: bool = False,
        unschedulable_since: float | None = None, index: int = 0) -> Obj:
    conditions = [{"type": "ContainersReady", "status": "True" if containers_ready else "False"},
                  {"type": "Ready", "status": "True" if containers_ready and gate else "False",
                   "lastTransitionTime": format_time(NOW - 600)}]
    if gate is not None:
        conditions.append({"type": "ome.io/serving", "status": "True" if gate else "False"})
    if unschedulable_since is not None:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                           "message": "0/4 nodes are available",
                           "lastTransitionTime": format_time(unschedulable_since)})
    container: Obj = {"name": "ome-container", "restartCount": restarts,
                      "state": {"running": {}} if wedged is None else {"waiting": {"reason": wedged}}}
    if restarts:
        container["lastState"] = {"terminated": {"reason": reason, "exitCode": 137}}
    status: Obj = {"phase": phase, "conditions": conditions, "containerStatuses": [container],
              "podIP": "10.0.0.1" if phase == "Running" else None}
    meta: Obj = {"name": name, "uid": f"uid-{name}-{incarnation}", "creationTimestamp": format_time(created),
                 "labels": {"ome.io/instance-incarnation": str(incarnation), "ome.io/runner": runner,
                            "ome.io/pod-ordinal": str(ordinal), "ome.io/instance-index": str(index),
                            "ome.io/revision-hash": "rev1"}}
    if deleting:
        meta["deletionTimestamp"] = format_time(NOW)
    return {"metadata": meta, "spec": {"nodeName": "n1"}, "status": status}


def gang(index: int = 0, incarnation: int = 1, **overrides: Any) -> list[PodFacts]:
    leader = pod(f"s-engine-{index}-leader-0", incarnation=incarnation, runner="leader", index=index)
    worker = pod(f"s-engine-{index}-worker-0", incarnation=incarnation, runner="worker", index=index, **overrides)
    return [pod_facts(leader), pod_facts(worker)]


def row(index: int, phase: str, incarnation: int = 1, **fields: Any) -> InstanceStatus:
    return InstanceStatus(index=index, phase=phase, incarnation=incarnation, target_revision="rev1",
                          running_revision="rev1" if phase != "Creating" else None, **fields)


def view(rows: list[InstanceStatus], pods: dict[int, list[PodFacts]], *, replicas: int = 1, multi: bool = True,
         policy: str | None = None, **fields: Any) -> replica.ReplicaView:
    base: dict[str, Any] = {
        "component": "engine", "replicas": replicas, "pods_per_instance": 2 if multi else 1,
        "update_revision": "rev1", "restart_policy": policy or (replica.RECREATE if multi else "None"),
        "ready_timeout": 1800.0, "min_ready_seconds": 0, "max_unavailable": None, "multi_pod": multi,
        "podgroup_crd": True, "rows": rows, "pods": pods, "now": NOW, "revision_prefix": "s-engine-",
        "who": "InferenceReplica ns/s-engine component=engine",
        "config": ControllerConfig(stuck_pod_grace_period="60s", unschedulable_grace_period="15m")}
    base.update(fields)
    return replica.ReplicaView(**base)


def phases(plan: replica.ReplicaPlan) -> dict[int, tuple[str, int]]:
    return {r.index or 0: (r.phase or "", r.incarnation or 0) for r in plan.rows}


@pytest.mark.parametrize(
    ("rows", "pods", "replicas", "expected"),
    [
        ([], {}, 3, {0: ("Creating", 1), 1: ("Creating", 1), 2: ("Creating", 1)}),
        ([row(1, "Ready")], {1: gang(1)}, 2, {0: ("Creating", 1), 1: ("Ready", 1)}),  # the lowest free index
        ([row(0, "Creating")], {0: gang(0)}, 1, {0: ("Ready", 1)}),  # every pod serving
        ([row(0, "Creating")], {0: gang(0, gate=False)}, 1, {0: ("Creating", 1)}),  # not in rotation yet
        ([row(0, "Ready"), row(1, "Ready"), row(2, "Creating")], {0: gang(0), 1: gang(1), 2: []}, 2,
         {0: ("Ready", 1), 1: ("Ready", 1), 2: ("Deleting", 1)}),  # scale-down takes what is not Ready first
        ([row(0, "Ready"), row(1, "Ready"), row(2, "Ready")], {0: gang(0), 1: gang(1), 2: gang(2)}, 2,
         {0: ("Ready", 1), 1: ("Ready", 1), 2: ("Deleting", 1)}),  # then the highest index
        ([row(0, "Deleting")], {}, 0, {}),  # drained and gone
        ([], {4: gang(4, incarnation=3)}, 1, {4: ("Ready", 3)}),  # pods without a row are adopted, never orphaned
    ],
)
def test_scale_and_lifecycle(rows: list[InstanceStatus], pods: dict[int, list[PodFacts]], replicas: int,
                             expected: dict[int, tuple[str, int]]) -> None:
    assert phases(replica.plan(view(rows, pods, replicas=replicas))) == expected


@pytest.mark.parametrize(
    ("pods", "message"),
    [
        (gang(0, restarts=1), "pod s-engine-0-worker-0 container ome-container restarted after Ready: OOMKilled "
                              "(exit 137)"),
        (gang(0, phase="Failed"), "pod s-engine-0-worker-0 failed: PodFailed"),
        (gang(0)[:1], "gang member lost: 1 of 2 pods present"),
        (gang(0, wedged="CrashLoopBackOff"), "pod s-engine-0-worker-0 container ome-container wedged in "
                                             "CrashLoopBackOff past the stuck-pod grace"),
    ],
)
def test_a_ready_gang_restarts_whole_with_the_cause_in_the_event(pods: list[PodFacts], message: str) -> None:
    plan = replica.plan(view([row(0, "Ready")], {0: pods}))
    assert phases(plan) == {0: ("Restarting", 2)}
    assert [(e.reason, e.message) for e in plan.events] == [(
        "RestartTriggered", f"OMENative component=engine instance=0 restart triggered: {message} (incarnation=2)")]
    assert plan.rows[0].operation is not None and plan.rows[0].operation.type == "Restart"


def test_restarts_counted_before_ready_do_not_trigger_a_restart() -> None:
    ready = row(0, "Ready", restart_baseline={"s-engine-0-worker-0": 2})
    assert phases(replica.plan(view([ready], {0: gang(0, restarts=2)}))) == {0: ("Ready", 1)}
    assert phases(replica.plan(view([ready], {0: gang(0, restarts=3)}))) == {0: ("Restarting", 2)}


def test_restart_completes_at_the_new_incarnation() -> None:
    restarting = row(0, "Restarting", incarnation=2)
    pods = [*gang(0, incarnation=2), pod_facts(pod("s-engine-0-worker-0", incarnation=1, deleting=True))]
    plan = replica.plan(view([restarting], {0: pods}))
    assert phases(plan) == {0: ("Ready", 2)}
    assert [e.reason for e in plan.events] == ["RestartCompleted"]


def test_single_pod_instance_under_none_goes_pending_then_creating() -> None:
    single = view([row(0, "Ready")], {0: []}, multi=False)
    assert phases(replica.plan(single)) == {0: ("Pending", 1)}
    pending = view([row(0, "Pending")], {}, multi=False)
    assert phases(replica.plan(pending)) == {0: ("Creating", 1)}


@pytest.mark.parametrize(
    ("pods", "operation", "reason"),
    [
        (gang(0, wedged="ImagePullBackOff", gate=False), None, "ImagePullBackOff"),
        ([pod_facts(pod("s-engine-0-leader-0", gate=None, containers_ready=False, phase="Pending",
                        unschedulable_since=NOW - 16 * 60))], None, "Unschedulable"),
        (gang(0, gate=False), InstanceOperation(type="Create", step="CreatePods", deadline=format_time(NOW - 1)),
         "ReadinessGateNotSatisfied"),
        (gang(0, gate=False, containers_ready=False),
         InstanceOperation(type="Create", step="CreatePods", deadline=format_time(NOW - 1)), "ContainersNotReady"),
        (gang(0)[:1], InstanceOperation(type="Create", step="CreatePods", deadline=format_time(NOW - 1)),
         "DeadlineExceeded"),
    ],
)
def test_an_instance_that_cannot_come_up_fails(pods: list[PodFacts], operation: InstanceOperation | None,
                                                reason: str) -> None:
    creating = row(0, "Creating", operation=operation)
    plan = replica.plan(view([creating], {0: pods}))
    assert phases(plan) == {0: ("Failed", 1)}
    assert plan.rows[0].last_failure is not None and plan.rows[0].last_failure.reason == reason
    assert [e.reason for e in plan.events] == ["InstanceFailed"]
    ready = next(c for c in plan.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("False", "InstanceFailed")


def test_a_failed_instance_is_rebuilt_after_its_backoff() -> None:
    failed = row(0, "Failed", last_failure=LastFailure(reason="OOMKilled", time=format_time(NOW - 30)),
                 operation=InstanceOperation(type="Create", retry_count=1))
    waiting = replica.plan(view([failed], {0: gang(0, gate=False)}))
    assert phases(waiting) == {0: ("Failed", 1)}
    assert waiting.wake_in == pytest.approx(30.0)
    later = replica.plan(attrs.evolve(view([failed], {0: gang(0, gate=False)}), now=NOW + 31))
    assert phases(later) == {0: ("Creating", 2)}


@pytest.mark.parametrize(
    ("serving", "desired", "max_unavailable", "status", "reason"),
    [
        (2, 2, None, "True", "AllInstancesReady"),
        (1, 2, 1, "True", "MinimumAvailable"),
        (1, 2, None, "False", "ReplicaCountMismatch"),
    ],
)
def test_ready_condition(serving: int, desired: int, max_unavailable: int | None, status: str, reason: str) -> None:
    rows = [row(i, "Ready") for i in range(desired)]
    pods = {i: gang(i, gate=i < serving) for i in range(desired)}
    plan = replica.plan(view(rows, pods, replicas=desired, max_unavailable=max_unavailable))
    ready = next(c for c in plan.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == (status, reason)


def test_gang_scheduling_condition_follows_the_crd() -> None:
    with_crd = replica.plan(view([], {}, replicas=0))
    without = replica.plan(view([], {}, replicas=0, podgroup_crd=False))
    find = lambda plan: next(c for c in plan.conditions if c.type == "GangSchedulingUnavailable")  # noqa: E731
    assert (find(with_crd).status, find(with_crd).reason) == ("False", "GangSchedulingAvailable")
    assert (find(without).status, find(without).reason) == ("True", "PodGroupCRDNotInstalled")


# -- the Instance planner

RUNNERS = [{"name": "leader", "size": 1, "template": {"metadata": {"labels": {"app": "x"}}, "spec": {
    "containers": [{"name": "ome-container", "image": "i"}]}}},
    {"name": "worker", "size": 1, "template": {"metadata": {}, "spec": {
        "containers": [{"name": "ome-container", "image": "i"}]}}}]
REF = InstanceRef(isvc="s", namespace="ns", component="engine", index=0, incarnation=1, revision="rev1", replicas=1,
                  podgroup="s-engine-0")
PODGROUP_INTENT = {"metadata": {"name": "s-engine-0"}, "spec": {"minMember": 2}}
OURS = {"metadata": {"name": "s-engine-0", "ownerReferences": [{"uid": "ir-uid"}]}, "status": {"phase": "Running"}}


def instance_view(phase: str, pods: list[Obj], *, podgroup: Obj | None = OURS, incarnation: int = 1,
                  scheduler: str | None = "scheduler-plugins-scheduler") -> instance.InstanceView:
    return instance.InstanceView(ref=attrs.evolve(REF, incarnation=incarnation), phase=phase, runners=RUNNERS,
                                 pods=pods, podgroup=podgroup, podgroup_intent=PODGROUP_INTENT, owner_uid="ir-uid",
                                 scheduler_name=scheduler)


def names(objs: tuple[Obj, ...]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


def test_the_podgroup_comes_before_the_pods() -> None:
    first = instance.plan(instance_view("Creating", [], podgroup=None))
    assert first.apply_podgroup == PODGROUP_INTENT and first.create_pods == ()
    then = instance.plan(instance_view("Creating", []))
    assert names(then.create_pods) == ["s-engine-0-leader-0", "s-engine-0-worker-0"]
    assert then.create_pods[1]["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "s-engine-0"


def test_the_default_scheduler_gets_the_maybe_no_gang_scheduler_warning_once_per_podgroup() -> None:
    actions = instance.plan(instance_view("Creating", [], podgroup=None, scheduler=""))
    assert [e.reason for e in actions.events] == ["MaybeNoGangScheduler"]
    assert 'spec.schedulerName is ""' in actions.events[0].message
    assert instance.plan(instance_view("Creating", [], scheduler="")).events == ()


def test_the_gang_enters_rotation_together() -> None:
    half = [pod("s-engine-0-leader-0", runner="leader", gate=None),
            pod("s-engine-0-worker-0", runner="worker", gate=None, containers_ready=False)]
    assert instance.plan(instance_view("Creating", half)).gates == ()
    ready = [pod("s-engine-0-leader-0", runner="leader", gate=None),
             pod("s-engine-0-worker-0", runner="worker", gate=None)]
    gates = instance.plan(instance_view("Creating", ready)).gates
    assert [(p["metadata"]["name"], value) for p, value, _ in gates] == [
        ("s-engine-0-leader-0", True), ("s-engine-0-worker-0", True)]


def test_old_incarnation_pods_drain_before_they_are_deleted_and_new_ones_wait_for_the_names() -> None:
    serving = [pod("s-engine-0-leader-0", runner="leader"), pod("s-engine-0-worker-0", runner="worker", gate=False)]
    actions = instance.plan(instance_view("Restarting", serving, incarnation=2))
    assert [(p["metadata"]["name"], value) for p, value, _ in actions.gates] == [("s-engine-0-leader-0", False)]
    assert names(actions.delete_pods) == ["s-engine-0-worker-0"]
    assert actions.create_pods == ()  # both names are still taken


def test_a_deleting_instance_drains_then_gives_up_its_podgroup() -> None:
    actions = instance.plan(instance_view("Deleting", [pod("s-engine-0-leader-0", runner="leader")]))
    assert [value for _, value, _ in actions.gates] == [False] and actions.delete_pods == ()
    gone = instance.plan(instance_view("Deleting", []))
    assert gone.delete_podgroup == OURS


def test_an_ended_pod_is_recycled_while_creating() -> None:
    pods = [pod("s-engine-0-leader-0", runner="leader"), pod("s-engine-0-worker-0", runner="worker", phase="Failed")]
    actions = instance.plan(instance_view("Creating", pods))
    assert names(actions.delete_pods) == ["s-engine-0-worker-0"]
    assert [e.reason for e in actions.events] == ["TerminalPodRecycled"]


def test_a_podgroup_of_another_owner_blocks_the_instance() -> None:
    theirs = {"metadata": {"name": "s-engine-0", "ownerReferences": [{"uid": "someone-else"}]}}
    actions = instance.plan(instance_view("Creating", [], podgroup=theirs))
    assert actions.create_pods == () and actions.apply_podgroup is None
    assert "PodGroupOwnershipConflict" in actions.events[0].message
    assert actions.conflict == "s-engine-0"  # the controller records it, and the replica fails the Instance


def test_a_failed_podgroup_is_replaced_while_restarting() -> None:
    failed = {**OURS, "status": {"phase": "Failed"}}
    actions = instance.plan(instance_view("Restarting", [], podgroup=failed, incarnation=2))
    assert actions.delete_podgroup == failed and actions.create_pods == ()
    assert [e.reason for e in actions.events] == ["PodGroupReset"]


# -- updates

def outdated(index: int) -> InstanceStatus:
    return InstanceStatus(index=index, phase="Ready", incarnation=1, target_revision="rev0", running_revision="rev0")


def test_surge_then_drain_brings_a_whole_new_instance_up_before_the_old_one_drains() -> None:
    rows = [outdated(0), outdated(1)]
    pods = {0: gang(0), 1: gang(1)}
    started = replica.plan(view(rows, pods, replicas=2, max_surge=1))
    assert phases(started) == {0: ("Updating", 1), 1: ("Ready", 1), 2: ("Creating", 1)}
    by_index = {r.index: r for r in started.rows}
    assert by_index[0].operation is not None and by_index[0].operation.surge_index == 2
    assert by_index[2].target_revision == "rev1" and by_index[2].operation is not None
    assert by_index[2].operation.step == "GangSurgeTarget"
    ready = next(c for c in started.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("Unknown", "RolloutInProgress")

    # The replacement serves: its source drains, and holds its surge slot until its pods are gone...
    up = replica.plan(view(started.rows, {**pods, 2: gang(2)}, replicas=2, max_surge=1))
    assert phases(up) == {0: ("Deleting", 1), 1: ("Ready", 1), 2: ("Ready", 1)}
    assert [e.reason for e in up.events] == ["InstanceReplaced"]
    assert up.rollout_hold is not None and up.rollout_hold.gate == "Budget"
    assert up.rollout_hold.reason == ("per-Component surge budget 1 exhausted (would become 2); extra pod "
                                      "s-engine-0-leader-0 holds a surge slot until its drain completes")
    # ...then the next outdated Instance starts its own surge.
    next_ = replica.plan(view(up.rows, {1: gang(1), 2: gang(2)}, replicas=2, max_surge=1))
    assert phases(next_) == {0: ("Creating", 1), 1: ("Updating", 1), 2: ("Ready", 1)}  # the lowest free index
    assert next_.rollout_hold is None


def test_a_failed_surge_is_abandoned_and_the_source_keeps_serving() -> None:
    source = attrs.evolve(outdated(0), phase="Updating", operation=InstanceOperation(
        type="Update", step="Surge", surge_index=1))
    target = InstanceStatus(index=1, phase="Creating", incarnation=1, target_revision="rev1",
                            operation=InstanceOperation(type="Update", step="GangSurgeTarget"))
    wedged = gang(1, wedged="ImagePullBackOff", gate=False, created=NOW - 120)
    plan = replica.plan(view([source, target], {0: gang(0), 1: wedged}, replicas=1, max_surge=1))
    assert phases(plan) == {0: ("Ready", 1), 1: ("Deleting", 1)}
    assert [e.reason for e in plan.events] == ["InstanceFailed", "GangSurgeAbandoned"]
    # The image cannot be pulled: a failure of the revision itself, recorded in its retry block.
    assert [(b.target_revision, b.state, b.attempts_started) for b in plan.retry_blocks] == [
        ("s-engine-rev1", "Backoff", 1)]
    # ...the replacement's pods go, and the source waits out the block's backoff before surging again.
    again = replica.plan(view(plan.rows, {0: gang(0)}, replicas=1, max_surge=1, retry_blocks=plan.retry_blocks))
    assert phases(again) == {0: ("Ready", 1)}
    assert again.wake_in is not None and again.wake_in <= 60
    assert again.rollout_hold is not None and again.rollout_hold.gate == "RetryBlock"


def test_recreate_pod_replaces_pods_in_place_paced_by_max_unavailable() -> None:
    rows = [outdated(i) for i in range(3)]
    pods = {i: gang(i) for i in range(3)}
    plan = replica.plan(view(rows, pods, replicas=3, update_strategy="RecreatePod", max_unavailable=1))
    assert phases(plan) == {0: ("Updating", 2), 1: ("Ready", 1), 2: ("Ready", 1)}
    assert {r.index: r.target_revision for r in plan.rows} == {0: "rev1", 1: "rev0", 2: "rev0"}


def test_in_place_strategies_recreate_a_leader_and_its_workers() -> None:
    # OME: a multi-pod Instance always moves as a whole, and the in-place strategies recreate its pods.
    for strategy in ("InPlaceOnly", "InPlaceIfPossible"):
        plan = replica.plan(view([outdated(0)], {0: gang(0)}, update_strategy=strategy, in_place_from={"rev0"}))
        assert phases(plan) == {0: ("Updating", 2)} and plan.events == []


def test_a_large_scale_up_starts_slowly_and_doubles_as_pods_appear() -> None:
    """1 -> 100 Instances: 16 at first; while their pods are not created nothing more is added (a refused create
    stalls 16 Instances, not 99); once they have pods the batch doubles."""
    first = replica.plan(view([row(0, "Ready")], {0: gang(0)}, replicas=100))
    assert len(first.rows) == 17
    creating = [r for r in first.rows if r.phase == "Creating"]
    stalled = replica.plan(view(list(first.rows), {0: gang(0)}, replicas=100))
    assert len(stalled.rows) == 17
    grown = replica.plan(view(list(first.rows), {0: gang(0)} | {r.index or 0: gang(r.index or 0) for r in creating},
                              replicas=100))
    assert len(grown.rows) == 34
    small = replica.plan(view([], {}, replicas=16))
    assert len(small.rows) == 16  # a fleet of up to 16 starts at once


def test_an_instance_that_recovered_from_a_restart_is_updated_at_once() -> None:
    """Its last failure (one of its own pods, OOM-killed a minute ago) is not a failed surge: no backoff holds it.
    A failure of a surge's replacement pod does."""
    def failed(pod_name: str) -> InstanceStatus:
        return attrs.evolve(outdated(0), last_failure=LastFailure(
            pod_name=pod_name, reason="OOMKilled", exit_code=137, time=format_time(NOW - 10)))

    restarted = replica.plan(view([failed("s-engine-0-worker-0")], {0: gang(0)}, max_surge=1))
    assert phases(restarted) == {0: ("Updating", 1), 1: ("Creating", 1)}
    surge_failed = replica.plan(view([failed("s-engine-1-worker-0")], {0: gang(0)}, max_surge=1))
    assert phases(surge_failed) == {0: ("Ready", 1)}
    assert surge_failed.rollout_hold is not None and surge_failed.rollout_hold.gate == "RetryBlock"


def test_a_new_replica_is_ready_only_with_every_instance_and_later_tolerates_max_unavailable() -> None:
    """minimum-available (maxUnavailable 1 of 2) keeps a replica Ready through the loss of an Instance, but never
    makes a new replica Ready with 1 of its 2 Instances."""
    from omenative.api.readiness import Serving, replica_ready
    assert replica_ready(Serving(desired=2, total=2, ready=1, serving=1, max_unavailable=1,
                                 established=False))[0] == "False"
    assert replica_ready(Serving(desired=2, total=2, ready=1, serving=1, max_unavailable=1))[:2] == (
        "True", "MinimumAvailable")
    new = replica.plan(view([row(0, "Ready"), row(1, "Creating")], {0: gang(0)}, replicas=2, max_unavailable=1,
                            was_ready=False))
    assert next(c for c in new.conditions if c.type == "Ready").status == "False"


@pytest.mark.parametrize(("running", "update", "current"), [
    (["rev1", "rev2"], "rev2", "rev1"),  # a tie: the revision being replaced stays current
    (["rev2", "rev1"], "rev2", "rev1"),
    (["rev1", "rev2", "rev2"], "rev2", "rev2"),  # the update has more Instances
    (["rev3", "rev1"], "rev2", "rev1"),  # between older revisions, the lowest name
    (["rev1", "rev3", "rev3"], "rev2", "rev3"),
])
def test_the_current_revision_is_the_one_most_instances_run_and_a_tie_never_depends_on_set_order(
        running: list[str], update: str, current: str) -> None:
    rows = [attrs.evolve(row(i, "Ready"), target_revision=rev, running_revision=rev) for i, rev in enumerate(running)]
    pods = {i: gang(i) for i in range(len(running))}
    out = replica.plan(view(rows, pods, replicas=len(running), update_revision=update, paused=True))
    assert out.current_revision == current
