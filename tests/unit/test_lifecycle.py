"""Table tests of the Instance lifecycle rules of OME v1.3 (instances.md, instance-restart-policy.md, the update
strategies, readiness deadlines, retry blocks, resets and drains), on the pure planners."""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import pytest

from omenative.api.times import format_time
from omenative.api.types import InstanceOperation, InstanceStatus, RetryBlock
from omenative.controllers.inferencereplica import plan as replica
from omenative.controllers.inferencereplica.retry import RetryPolicy
from omenative.controllers.instance import plan as instance
from omenative.observe.nodes import node_health
from omenative.observe.pods import pod_facts
from omenative.render.pods import InstanceRef
from tests.unit.test_planners import NOW, gang, outdated, phases, pod, row, view

WHO = "InferenceReplica ns/s-engine component=engine"


def single(index: int = 0, **overrides: Any) -> list[Any]:
    return [pod_facts(pod(f"s-router-{index}-default-0", index=index, **overrides))]


def events(plan: replica.ReplicaPlan, reason: str) -> list[str]:
    return [e.message for e in plan.events if e.reason == reason]


def condition(plan: replica.ReplicaPlan, kind: str) -> tuple[str, str, str]:
    cond = next(c for c in plan.conditions if c.type == kind)
    return cond.status or "", cond.reason or "", cond.message or ""


# -- restart policy None: the lost pod alone is replaced, the Instance is not Ready meanwhile

@pytest.mark.parametrize("pods", [
    [],  # deleted or evicted
    single(phase="Failed", containers_ready=False, gate=True),  # Failed
], ids=["gone", "failed"])
def test_under_none_a_single_pod_instance_that_lost_its_pod_is_rebuilt_at_the_same_incarnation(pods: list[Any]) -> None:
    lost = replica.plan(view([row(0, "Ready")], {0: pods}, multi=False))
    assert phases(lost) == {0: ("Pending", 1)}
    assert (lost.counts.ready, lost.counts.serving) == (0, 0)
    assert lost.rows[0].pod_count == 0  # a Failed pod is not counted as present
    rebuilding = replica.plan(view(lost.rows, {0: pods}, multi=False))
    assert phases(rebuilding) == {0: ("Creating", 1)}
    assert rebuilding.rows[0].operation is not None and rebuilding.rows[0].operation.type == "Create"
    assert condition(rebuilding, "Ready")[:2] == ("False", "ReplicaCountMismatch")


def test_under_none_a_multi_pod_instance_replaces_only_its_failed_worker() -> None:
    pods = gang(0, phase="Failed", containers_ready=False)
    plan = replica.plan(view([row(0, "Ready")], {0: pods}, policy="None"))
    assert phases(plan) == {0: ("Creating", 1)}
    op = plan.rows[0].operation
    assert op is not None and op.reason == "replace lost pod(s): s-engine-0-worker-0"
    # The Instance controller deletes the Failed pod and makes it again under the same name; the leader stays.
    actions = instance.plan(instance_view("Creating", raw_gang(0, phase="Failed")))
    assert [p["metadata"]["name"] for p in actions.delete_pods] == ["s-engine-0-worker-0"]
    assert [e.reason for e in actions.events] == ["TerminalPodRecycled"]


# -- RecreateInstanceOnPodRestart: every trigger rebuilds the whole Instance one incarnation higher

@pytest.mark.parametrize(("pods", "message"), [
    (gang(0, restarts=1), "pod s-engine-0-worker-0 container ome-container restarted after Ready: OOMKilled "
                          "(exit 137)"),
    (gang(0, phase="Failed", containers_ready=False), "pod s-engine-0-worker-0 failed: PodFailed"),
    (gang(0)[:1], "gang member lost: 1 of 2 pods present"),
], ids=["oom-killed", "failed", "deleted"])
def test_recreate_rebuilds_the_whole_instance(pods: list[Any], message: str) -> None:
    plan = replica.plan(view([row(0, "Ready")], {0: pods}))
    assert phases(plan) == {0: ("Restarting", 2)}
    assert events(plan, "RestartTriggered") == [
        f"OMENative component=engine instance=0 restart triggered: {message} (incarnation=2)"]


# -- the crash-loop repair is paced by maxUnavailable

def test_crash_loop_repairs_wait_for_max_unavailable_with_repair_held() -> None:
    wedged = {i: gang(i, wedged="CrashLoopBackOff", containers_ready=False) for i in (0, 1)}
    rows = [row(0, "Ready"), row(1, "Ready")]
    plan = replica.plan(view(rows, wedged, replicas=2, max_unavailable=1))
    assert phases(plan) == {0: ("Restarting", 2), 1: ("Ready", 1)}
    assert events(plan, "RepairHeld") == [
        "OMENative component=engine instance=1 repair held: pod s-engine-1-worker-0 container ome-container wedged "
        "in CrashLoopBackOff past the stuck-pod grace; gate Budget: per-Component unavailability budget 1 "
        "exhausted (would become 2)"]
    # Announced once per episode, even across passes (and restarts of the controller: it is in the row).
    again = replica.plan(view(plan.rows, {0: [], 1: wedged[1]}, replicas=2, max_unavailable=1))
    assert phases(again)[1] == ("Ready", 1) and events(again, "RepairHeld") == []
    # Once instance 0 serves again, instance 1's repair starts.
    done = replica.plan(view(again.rows, {0: gang(0, incarnation=2), 1: wedged[1]}, replicas=2, max_unavailable=1))
    assert phases(done) == {0: ("Ready", 2), 1: ("Restarting", 2)}


def test_without_max_unavailable_every_wedged_instance_is_repaired_at_once() -> None:
    wedged = {i: gang(i, wedged="CrashLoopBackOff", containers_ready=False) for i in (0, 1)}
    plan = replica.plan(view([row(0, "Ready"), row(1, "Ready")], wedged, replicas=2))
    assert phases(plan) == {0: ("Restarting", 2), 1: ("Restarting", 2)}


def test_policy_restarts_do_not_wait_for_the_budget() -> None:
    rows = [row(0, "Restarting", 2), row(1, "Ready")]
    plan = replica.plan(view(rows, {0: [], 1: gang(1, restarts=1)}, replicas=2, max_unavailable=1))
    assert phases(plan)[1] == ("Restarting", 2)


# -- minReadySeconds gates Ready, and so the drain of a surge's source

def warming(index: int, since: float) -> list[Any]:
    facts = gang(index)
    return [attrs.evolve(f, ready_since=since) for f in facts]


def test_min_ready_seconds_gates_ready_and_wakes_when_the_window_ends() -> None:
    creating = row(0, "Creating", operation=InstanceOperation(type="Create", step="CreatePods"))
    plan = replica.plan(view([creating], {0: warming(0, NOW - 5)}, min_ready_seconds=20))
    assert phases(plan) == {0: ("Creating", 1)}
    assert plan.counts.available == 0 and plan.counts.serving == 1
    assert plan.wake_in == pytest.approx(15, abs=0.01)
    later = replica.plan(view([creating], {0: warming(0, NOW - 21)}, min_ready_seconds=20))
    assert phases(later) == {0: ("Ready", 1)} and later.counts.available == 1


def test_a_surge_source_keeps_serving_until_its_replacement_passed_min_ready_seconds() -> None:
    source = attrs.evolve(outdated(0), phase="Updating", operation=InstanceOperation(
        type="Update", step="Surge", surge_index=1))
    target = InstanceStatus(index=1, phase="Creating", incarnation=1, target_revision="rev1",
                            operation=InstanceOperation(type="Update", step="GangSurgeTarget"))
    plan = replica.plan(view([source, target], {0: gang(0), 1: warming(1, NOW - 5)}, min_ready_seconds=20))
    assert phases(plan) == {0: ("Updating", 1), 1: ("Creating", 1)}
    later = replica.plan(view([source, target], {0: gang(0), 1: warming(1, NOW - 25)}, min_ready_seconds=20))
    assert phases(later) == {0: ("Deleting", 1), 1: ("Ready", 1)}


# -- budgets: zero stalls with the Budget gate; extra pods hold surge slots

@pytest.mark.parametrize(("strategy", "fields", "reason"), [
    ("SurgeThenDrain", {"max_surge": 0}, "per-Component surge budget 0 exhausted (would become 1)"),
    ("RecreatePod", {"max_unavailable": 0}, "per-Component unavailability budget 0 exhausted (would become 1)"),
])
def test_a_zero_budget_stalls_the_rollout(strategy: str, fields: dict[str, Any], reason: str) -> None:
    plan = replica.plan(view([outdated(0)], {0: gang(0)}, update_strategy=strategy, **fields))
    assert phases(plan) == {0: ("Ready", 1)}
    assert plan.rollout_hold is not None
    assert (plan.rollout_hold.gate, plan.rollout_hold.reason, plan.rollout_hold.target) == (
        "Budget", reason, "s-engine-rev1")
    # `since` is kept while the gate and target stay.
    again = replica.plan(view(plan.rows, {0: gang(0)}, update_strategy=strategy, now=NOW + 30,
                              rollout_hold=plan.rollout_hold, **fields))
    assert again.rollout_hold is not None and again.rollout_hold.since == format_time(NOW)


def test_a_terminating_pod_holds_a_surge_slot_until_its_deletion_grace_elapses() -> None:
    lingering = attrs.evolve(gang(0)[0], name="s-engine-0-leader-0", incarnation=0, terminating=True,
                             deletion_at=NOW + 30)
    plan = replica.plan(view([outdated(0)], {0: [*gang(0), lingering]}, max_surge=1))
    assert phases(plan) == {0: ("Ready", 1)}
    assert plan.rollout_hold is not None and plan.rollout_hold.reason == (
        "per-Component surge budget 1 exhausted (would become 2); Terminating pod s-engine-0-leader-0 still counts "
        "against the surge budget until its deletion grace elapses")
    assert plan.wake_in == pytest.approx(30)
    past = replica.plan(view([outdated(0)], {0: [*gang(0), attrs.evolve(lingering, deletion_at=NOW - 1)]},
                             max_surge=1))
    assert phases(past)[0] == ("Updating", 1)


# -- retry blocks: three attempts on the backoff, then held; a release lets it proceed

def image_pull_failure(plan: replica.ReplicaPlan, at: float, fields: dict[str, Any]) -> replica.ReplicaPlan:
    """The surge target's pods wait in ImagePullBackOff past the stuck-pod grace: the attempt fails."""
    targets = [r.index for r in plan.rows if r.phase == "Creating"]
    assert len(targets) == 1
    pods = {0: gang(0), targets[0]: gang(targets[0], wedged="ImagePullBackOff", gate=False, created=at - 120)}
    return replica.plan(view(plan.rows, pods, now=at, retry_blocks=plan.retry_blocks, **fields))


def test_a_revision_that_keeps_failing_is_held_after_three_attempts_then_released() -> None:
    fields: dict[str, Any] = {"max_surge": 1, "retry_policy": RetryPolicy(attempts=3, backoff=60)}
    plan = replica.plan(view([outdated(0)], {0: gang(0)}, **fields))
    attempts_at = [NOW]
    now = NOW
    for attempt in (1, 2, 3):
        now += 30
        failed = image_pull_failure(plan, now, fields)
        assert phases(failed)[0] == ("Ready", 1)  # the serving Instance keeps serving throughout
        block = failed.retry_blocks[0]
        assert block.attempts_started == attempt
        if attempt < 3:
            assert block.state == "Backoff"
            assert block.next_retry_at == format_time(now + 60 * 2 ** (attempt - 1))  # 1m, then 2m
            waiting = replica.plan(view(failed.rows, {0: gang(0)}, now=now + 1, retry_blocks=failed.retry_blocks,
                                        **fields))
            assert set(phases(waiting)) == {0} and waiting.rollout_hold is not None
            assert waiting.rollout_hold.gate == "RetryBlock"
            now += 60 * 2 ** (attempt - 1)
            plan = replica.plan(view(waiting.rows, {0: gang(0)}, now=now, retry_blocks=waiting.retry_blocks,
                                     **fields))
            assert sorted(phases(plan).values()) == [("Creating", 1), ("Updating", 1)]
            assert plan.retry_blocks[0].state == "RetryInProgress"
            attempts_at.append(now)
        else:
            assert block.state == "Held"
            assert events(failed, "RetryHeld") == [
                f"{WHO} update to revision s-engine-rev1 held after 3 failed attempt(s) (last failure: "
                "ImagePullBackOff); publish a corrected revision or raise lifecycle.updateRetry limits"]
            held = replica.plan(view(failed.rows, {0: gang(0)}, now=now + 3600, retry_blocks=failed.retry_blocks,
                                     **fields))
            assert phases(held) == {0: ("Ready", 1)} and held.rollout_hold is not None
            assert held.rollout_hold.gate == "Held"
            assert condition(held, "RolloutStalled")[:2] == ("True", "InstancesFailing")
    assert [b - a for a, b in itertools.pairwise(attempts_at)] == [90, 150]
    released = replica.plan(view(held.rows, {0: gang(0)}, now=now + 3600, retry_blocks=held.retry_blocks,
                                 release_request="rev1", **fields))
    assert events(released, "RetryBlockReleased") == [
        f"{WHO}: Held retryBlock for revision s-engine-rev1 removed at operator request "
        "(ome.io/release-held-revision annotation)"]
    assert released.answered == ("ome.io/release-held-revision",)
    assert sorted(phases(released).values()) == [("Creating", 1), ("Updating", 1)]  # tried again at once


@pytest.mark.parametrize(("blocks", "message"), [
    ([], 'release requested for revision "abc" but no retryBlock exists for it; nothing to release'),
    ([RetryBlock(target_revision="s-engine-abc", state="Backoff", attempts_started=1)],
     "retryBlock for revision s-engine-abc is Backoff, not Held; nothing to release"),
])
def test_a_release_that_finds_nothing_held_is_skipped(blocks: list[RetryBlock], message: str) -> None:
    plan = replica.plan(view([row(0, "Ready")], {0: gang(0)}, retry_blocks=blocks, release_request="abc",
                             update_revision="abc"))
    assert events(plan, "RetryBlockReleaseSkipped") == [f"{WHO}: {message}"]
    assert plan.answered == ("ome.io/release-held-revision",)


def test_a_crash_loop_never_counts_toward_a_hold() -> None:
    creating = row(0, "Creating", operation=InstanceOperation(type="Create", step="CreatePods"))
    plan = replica.plan(view([creating], {0: gang(0, wedged="CrashLoopBackOff", containers_ready=False)},
                             retry_policy=RetryPolicy(attempts=0, backoff=60)))
    assert phases(plan) == {0: ("Failed", 1)} and plan.retry_blocks == []


# -- resets

def failed_row(index: int, **fields: Any) -> InstanceStatus:
    return row(index, "Failed", **fields)


def test_a_reset_rebuilds_a_failed_instance_and_is_answered_once() -> None:
    restart_op = InstanceOperation(type="Restart", step="Drain")
    rows = [failed_row(0, operation=restart_op), row(1, "Ready")]
    stuck = [attrs.evolve(f, serving_gate=False) for f in gang(0, wedged="CrashLoopBackOff", containers_ready=False)]
    plan = replica.plan(view(rows, {0: stuck, 1: gang(1)}, replicas=2, reset_request="0"))
    assert events(plan, "InstancesReset") == [
        f"{WHO}: reset instance(s) 0 at operator request (ome.io/reset-instances annotation): pods deleted and "
        "preserved operation cleared; the lifecycle passes rebuild them"]
    assert phases(plan)[0] == ("Creating", 3)  # rebuilt: the old pods (incarnation 1) drain and go
    assert plan.answered == ("ome.io/reset-instances",)


def test_a_reset_held_by_a_retry_block_waits_and_a_repeated_request_is_nothing_to_reset() -> None:
    block = RetryBlock(target_revision="s-engine-rev1", state="Held", attempts_started=3, reason="ImagePullBackOff")
    fields: dict[str, Any] = {"retry_blocks": [block], "replicas": 1}
    plan = replica.plan(view([failed_row(0)], {0: []}, reset_request="all", **fields))
    assert phases(plan) == {0: ("Failed", 2)}
    assert plan.rows[0].operation is None
    again = replica.plan(view(plan.rows, {0: []}, reset_request="0", **fields))
    assert events(again, "InstancesResetSkipped") == [f"{WHO}: reset skipped for instance(s) 0 (nothing to reset)"]
    assert phases(again) == {0: ("Failed", 2)}


@pytest.mark.parametrize(("value", "rows", "reason", "message"), [
    ("All", [failed_row(0)], "InstancesResetRejected",
     'ome.io/reset-instances="All" rejected: "All" is not a non-negative instance index; nothing reset'),
    ("0,7", [row(0, "Ready")], "InstancesResetSkipped",
     "reset skipped for instance(s) 0 (Phase=Ready), 7 (no such instance)"),
    ("all", [row(0, "Ready")], "InstancesResetSkipped",
     "reset requested for all instances, but none is Failed; nothing to reset"),
])
def test_reset_refusals_and_skips(value: str, rows: list[InstanceStatus], reason: str, message: str) -> None:
    plan = replica.plan(view(rows, {0: gang(0)}, reset_request=value))
    assert events(plan, reason) == [f"{WHO}: {message}"]
    assert plan.answered == ("ome.io/reset-instances",)


def test_a_reset_skips_an_instance_that_still_serves_or_is_owned_by_an_update() -> None:
    update = InstanceOperation(type="Update", step="Drain")
    plan = replica.plan(view([failed_row(0), failed_row(1, operation=update)], {0: gang(0), 1: []}, replicas=2,
                             reset_request="0,1"))
    assert events(plan, "InstancesResetSkipped") == [
        f"{WHO}: reset skipped for instance(s) 0 (still serving), 1 (owned by Update)"]


# -- drains

def test_a_drain_past_its_deadline_raises_drain_overdue_once() -> None:
    deleting = row(0, "Deleting", operation=InstanceOperation(type="Delete", step="Drain",
                                                              deadline=format_time(NOW - 252)))
    stuck = [attrs.evolve(gang(0)[0], terminating=True)]
    plan = replica.plan(view([deleting], {0: stuck}, replicas=0))
    assert events(plan, "DrainOverdue") == [
        f"OMENative component=engine instance=0: drain overdue by 4m12s (deadline {format_time(NOW - 252)}); "
        "1 pod(s) still Terminating (s-engine-0-leader-0)"]
    assert condition(plan, "DrainOverdue")[:2] == ("True", "DrainsOverdue")
    again = replica.plan(view(plan.rows, {0: stuck}, replicas=0))
    assert events(again, "DrainOverdue") == []


def raw_gang(index: int = 0, **worker: Any) -> list[dict[str, Any]]:
    return [pod(f"s-engine-{index}-leader-0", runner="leader", index=index),
            pod(f"s-engine-{index}-worker-0", runner="worker", index=index, **worker)]


def instance_view(phase: str, pods: list[dict[str, Any]], **fields: Any) -> instance.InstanceView:
    runners = [{"name": "leader", "size": 1, "template": {"spec": {"containers": [{"name": "ome-container"}]}}},
               {"name": "worker", "size": 1, "template": {"spec": {"containers": [{"name": "ome-container"}]}}}]
    ref = InstanceRef(isvc="s", namespace="ns", component="engine", index=0,
                      incarnation=fields.pop("incarnation", 1), revision="rev1", replicas=1, podgroup=None,
                      owner={"uid": "ir-uid"})
    return instance.InstanceView(ref=ref, phase=phase, runners=runners, pods=pods, podgroup=None,
                                 podgroup_intent=None, owner_uid="ir-uid", now=NOW, **fields)


def test_a_drained_pod_is_deleted_only_once_no_service_routes_to_it() -> None:
    drained = [pod(f"s-engine-0-{r}-0", runner=r, gate=False, containers_ready=True) for r in ("leader", "worker")]
    routed = instance.plan(instance_view("Deleting", drained, routed=frozenset({"s-engine-0-leader-0"}),
                                         drain_deadline=NOW + 100))
    assert [p["metadata"]["name"] for p in routed.delete_pods] == ["s-engine-0-worker-0"]
    assert routed.wake_in == pytest.approx(100)
    overdue = instance.plan(instance_view("Deleting", drained, routed=frozenset({"s-engine-0-leader-0"}),
                                          drain_deadline=NOW - 1))
    assert len(overdue.delete_pods) == 2
    # A pod still in rotation has its gate set False first, whatever the slices say.
    serving = instance.plan(instance_view("Deleting", raw_gang()))
    assert serving.delete_pods == () and [(p["metadata"]["name"], v) for p, v, _ in serving.gates] == [
        ("s-engine-0-leader-0", False), ("s-engine-0-worker-0", False)]


def test_a_pod_without_an_incarnation_label_is_an_orphan_that_is_drained() -> None:
    orphan = pod("s-engine-0-worker-0", runner="worker", gate=None)
    del orphan["metadata"]["labels"]["ome.io/instance-incarnation"]
    actions = instance.plan(instance_view("Restarting", [orphan], incarnation=2))
    assert [p["metadata"]["name"] for p in actions.delete_pods] == ["s-engine-0-worker-0"]
    assert [e.reason for e in actions.events] == ["FoundOrphan"]
    assert [p["metadata"]["name"] for p in actions.create_pods] == ["s-engine-0-leader-0"]  # the worker waits


# -- the force-delete escalation (Recover stuck deletions)

def stuck_pod(past: float, *, finalizers: list[str] | None = None, node: str = "n1") -> dict[str, Any]:
    obj = pod("s-engine-0-leader-0", runner="leader")
    obj["metadata"]["deletionTimestamp"] = format_time(NOW - past)
    obj["spec"]["nodeName"] = node
    if finalizers:
        obj["metadata"]["finalizers"] = finalizers
    return obj


def node(ready: str = "True", since: float = NOW - 3600, unreachable_since: float | None = None) -> dict[str, Any]:
    taints = [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
               "timeAdded": format_time(unreachable_since)}] if unreachable_since is not None else []
    return {"spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": format_time(since)}]}}


@pytest.mark.parametrize(("nodes", "evidence"), [
    ({}, "node-gone"),
    ({"n1": node_health(node("Unknown", since=NOW - 30, unreachable_since=NOW - 400))}, "node-unreachable-taint"),
    ({"n1": node_health(node("False", since=NOW - 400))}, "node-not-ready"),
])
def test_a_pod_stuck_terminating_on_a_dead_node_is_force_deleted(nodes: dict[str, Any], evidence: str) -> None:
    actions = instance.plan(instance_view("Deleting", [stuck_pod(161)], force_delete=(120.0, 300.0), nodes=nodes))
    assert [p["metadata"]["name"] for p in actions.force_delete_pods] == ["s-engine-0-leader-0"]
    assert [e.message for e in actions.events if e.reason == "PodForceDeleted"] == [
        "OMENative component=engine instance=0: force-deleted stuck-Terminating pod s-engine-0-leader-0 on node n1 "
        f"(evidence={evidence}, 2m41s past the pod's own deletion deadline)"]


@pytest.mark.parametrize(("pods", "nodes", "fields"), [
    ([stuck_pod(161)], {"n1": node_health(node("True", unreachable_since=NOW - 400))}, {}),  # Ready: never dead
    ([stuck_pod(60)], {}, {}),  # not past the slack yet
    ([stuck_pod(161)], {"n1": node_health(node("Unknown", since=NOW - 30))}, {}),  # not dead for long enough
    ([stuck_pod(161)], {}, {"force_delete": None}),  # the escalation is off
], ids=["ready-node", "within-slack", "below-threshold", "off"])
def test_no_force_delete_without_the_evidence(pods: list[dict[str, Any]], nodes: dict[str, Any],
                                             fields: dict[str, Any]) -> None:
    settings: dict[str, Any] = {"force_delete": (120.0, 300.0), **fields}
    actions = instance.plan(instance_view("Deleting", pods, nodes=nodes, **settings))
    assert actions.force_delete_pods == ()


def test_a_restart_waits_for_its_old_pods_without_the_escalation() -> None:
    actions = instance.plan(instance_view("Restarting", [stuck_pod(161)], incarnation=2, force_delete=(120.0, 300.0)))
    assert actions.force_delete_pods == ()


def test_a_finalizer_of_another_controller_is_never_stripped() -> None:
    actions = instance.plan(instance_view("Deleting", [stuck_pod(185, finalizers=["example.com/cleanup"])],
                                          force_delete=(120.0, 300.0)))
    assert actions.force_delete_pods == ()
    assert [e.message for e in actions.events] == [
        "OMENative component=engine instance=0: pod s-engine-0-leader-0 is 3m5s past its own deletion deadline but "
        "pinned by finalizers [example.com/cleanup]; OME never strips another controller's finalizer — the "
        "finalizer owner must resolve it"]


def test_a_pod_held_in_phase_unknown_on_a_dead_node_is_force_deleted() -> None:
    lost = pod("s-engine-0-leader-0", runner="leader", phase="Unknown")
    actions = instance.plan(instance_view("Creating", [lost], force_delete=(120.0, 300.0)))
    assert [e.message for e in actions.events if e.reason == "PodForceDeleted"] == [
        "OMENative component=engine instance=0: force-deleted pod s-engine-0-leader-0 on node n1 "
        "(evidence=node-gone, held in phase Unknown)"]


def test_an_unschedulable_pod_stops_the_clock_and_its_end_gives_a_full_window() -> None:
    op = InstanceOperation(type="Create", step="CreatePods", deadline=format_time(NOW + 5))
    waiting = [pod_facts(pod("s-engine-0-leader-0", gate=None, containers_ready=False, phase="Pending",
                             unschedulable_since=NOW - 60))]
    held = replica.plan(view([row(0, "Creating", operation=op)], {0: waiting}))
    held_op = held.rows[0].operation
    assert held_op is not None and (held_op.waiting, held_op.deadline) == ("Unschedulable", None)
    # Past the old deadline, still waiting: not failed (until the unschedulable grace, 15 min).
    later = replica.plan(view(held.rows, {0: waiting}, now=NOW + 600))
    assert phases(later) == {0: ("Creating", 1)}
    placed = gang(0, gate=False, containers_ready=False)
    resumed = replica.plan(view(later.rows, {0: placed}, now=NOW + 700))
    op_after = resumed.rows[0].operation
    assert op_after is not None and op_after.waiting is None
    assert op_after.deadline == format_time(NOW + 700 + 1800)  # a full window again


def test_a_failed_restart_replaces_its_lost_pods_and_returns_to_rotation_once_they_are_ready() -> None:
    """OME's instances.md: a failed restart leaves the Instance Failed until its pods are ready, and OME replaces
    lost ones. Any other Failed Instance keeps what it has until it is rebuilt."""
    leader = pod("s-engine-0-leader-0", runner="leader", gate=False, containers_ready=True, incarnation=2)
    lost = instance.plan(instance_view("Failed", [leader], incarnation=2, replace_lost=True))
    assert [p["metadata"]["name"] for p in lost.create_pods] == ["s-engine-0-worker-0"]
    assert instance.plan(instance_view("Failed", [leader], incarnation=2)).create_pods == ()
    worker = pod("s-engine-0-worker-0", runner="worker", gate=False, containers_ready=True, incarnation=2)
    back = instance.plan(instance_view("Failed", [leader, worker], incarnation=2, replace_lost=True))
    assert back.create_pods == () and [(g[0]["metadata"]["name"], g[1]) for g in back.gates] == [
        ("s-engine-0-leader-0", True), ("s-engine-0-worker-0", True)]
