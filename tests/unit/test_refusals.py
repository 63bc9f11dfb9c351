"""A create the API server refuses is named: classified by its answer, recorded for the Instance, announced once per
cause, and turned by the replica's planner into OME's `waiting: QuotaExceeded` (the clock stopped) or an
`InvalidPodSpec` failure that the retry blocks pace."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from omenative.api.times import format_time
from omenative.api.types import InstanceOperation
from omenative.controllers.inferencereplica import plan as replica
from omenative.controllers.instance import plan as instance
from omenative.controllers.instance.controller import InstanceController
from omenative.controllers.refusals import Refusals
from omenative.controllers.watches import PodsOf
from omenative.kube.client import ApiError
from omenative.observe.refusals import (
    FORBIDDEN,
    INVALID_POD_SPEC,
    NAMESPACE_TERMINATING,
    PODGROUP_OWNERSHIP_CONFLICT,
    QUOTA_EXCEEDED,
    Refusal,
    classify,
)
from tests.support.fakes import FakeContext
from tests.unit.test_planners import NOW, REF, gang, instance_view, pod, row, view

pytestmark = pytest.mark.unit
Obj = dict[str, Any]

QUOTA = ('pods "s-engine-0-leader-0" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, '
         'limited: pods=1')
PSA = ('pods "s-engine-0-leader-0" is forbidden: violates PodSecurity "restricted:latest": host namespaces '
       '(hostNetwork=true)')


@pytest.mark.parametrize(("status", "message", "cause"), [
    (403, QUOTA, QUOTA_EXCEEDED),
    (403, 'pods "p" is forbidden: failed quota: q: must specify limits.cpu for: ome-container', INVALID_POD_SPEC),
    (403, PSA, INVALID_POD_SPEC),
    (400, 'admission webhook "deny.example.com" denied the request: no', INVALID_POD_SPEC),
    (403, 'admission webhook "deny.example.com" denied the request: no', INVALID_POD_SPEC),
    (422, 'Pod "p" is invalid: metadata.name: Invalid value: "p": must be no more than 63 characters',
     INVALID_POD_SPEC),
    (403, 'pods "p" is forbidden: unable to create new content in namespace ns because it is being terminated',
     NAMESPACE_TERMINATING),
    (403, 'pods is forbidden: User "system:serviceaccount:x:y" cannot create resource "pods"', FORBIDDEN),
    (429, "too many requests", None),
    (500, "etcdserver: request timed out", None),
    (0, "connection refused", None),
])
def test_an_answer_is_classified_by_what_it_means_for_the_instance(status: int, message: str,
                                                                  cause: str | None) -> None:
    assert classify(status, "", message) == cause


def refusal(cause: str = QUOTA_EXCEEDED, *, at: float = NOW, since: float = NOW, incarnation: int = 1,
            message: str = QUOTA) -> Refusal:
    return Refusal(cause=cause, verb="create", kind="Pod", name="s-engine-0-leader-0", message=message, at=at,
                   since=since, incarnation=incarnation)


def test_the_summary_names_the_rule_without_the_objects_name() -> None:
    assert refusal().summary() == ("pod create refused: exceeded quota: q, requested: pods=1, used: pods=1, "
                                   "limited: pods=1")


def test_a_cause_is_announced_once_per_replica_until_its_refusals_clear() -> None:
    table = Refusals()
    first = table.record("ns/s-engine/0", refusal(at=NOW))
    assert table.announce("ns/s-engine/0", first)
    # The same quota refusing again, with other usage figures and another Instance: no second event.
    again = table.record("ns/s-engine/0", refusal(at=NOW + 5, since=NOW + 5, message=QUOTA.replace("used: pods=1",
                                                                                                   "used: pods=2")))
    assert again.since == NOW  # the refusal has stood since the first one
    assert not table.announce("ns/s-engine/0", again)
    assert not table.announce("ns/s-engine/1", table.record("ns/s-engine/1", refusal()))
    assert table.announce("ns/s-engine/1", table.record("ns/s-engine/1", refusal(INVALID_POD_SPEC, message=PSA)))
    assert set(table.of_replica("ns/s-engine")) == {0, 1}
    assert table.clear("ns/s-engine/0") and not table.clear("ns/s-engine/0")
    assert table.clear("ns/s-engine/1")
    # Once the replica has nothing refused, the quota filling up again is news.
    assert table.announce("ns/s-engine/0", table.record("ns/s-engine/0", refusal()))


def creating(**op: Any) -> Any:
    return row(0, "Creating", operation=InstanceOperation(
        type="Create", step="CreatePods", started_at=format_time(NOW - 60), deadline=format_time(NOW + 1740), **op))


def test_a_quota_refusal_stops_the_clock_and_names_the_quota() -> None:
    plan = replica.plan(view([creating()], {0: gang()[1:]}, refusals={0: refusal(since=NOW - 20)}))
    op = plan.rows[0].operation
    assert plan.rows[0].phase == "Creating" and op is not None
    assert op.waiting == "QuotaExceeded" and op.deadline is None and op.capacity_refused_at == format_time(NOW - 20)
    failure = next(cond for cond in plan.conditions if cond.type == "ReplicaFailure")
    assert failure.status == "True" and failure.reason == "QuotaExceeded"
    assert failure.message is not None and "exceeded quota: q" in failure.message
    # Long past the deadline it would have had, it still waits: nothing fails while the quota is full.
    later = replica.plan(view(plan.rows, {0: gang()[1:]}, now=NOW + 7200, refusals={0: refusal(since=NOW - 20)}))
    assert later.rows[0].phase == "Creating" and later.rows[0].operation == op


def test_the_clock_restarts_with_a_full_window_once_the_pods_are_accepted() -> None:
    held = creating(waiting="QuotaExceeded", capacity_refused_at=format_time(NOW - 600))
    held = attrs.evolve(held, operation=attrs.evolve(held.operation, deadline=None))
    plan = replica.plan(view([held], {0: gang(containers_ready=False, gate=None)}, now=NOW))
    op = plan.rows[0].operation
    assert op is not None and op.waiting is None and op.capacity_refused_at is None
    assert op.deadline == format_time(NOW + 1800)
    assert not any(cond.type == "ReplicaFailure" for cond in plan.conditions)


def test_a_refusal_of_an_earlier_attempt_does_not_hold_this_one() -> None:
    plan = replica.plan(view([creating()], {0: []}, refusals={0: refusal(incarnation=0)}))
    assert plan.rows[0].operation is not None and plan.rows[0].operation.waiting is None
    assert not any(cond.type == "ReplicaFailure" for cond in plan.conditions)


def test_a_pod_security_refusal_fails_the_instance_at_once_and_counts_toward_the_hold() -> None:
    plan = replica.plan(view([creating()], {0: []}, refusals={0: refusal(INVALID_POD_SPEC, message=PSA)}))
    failed = plan.rows[0]
    assert failed.phase == "Failed" and failed.last_failure is not None
    assert failed.last_failure.reason == "InvalidPodSpec"
    assert failed.last_failure.message is not None and "violates PodSecurity" in failed.last_failure.message
    assert [b.state for b in plan.retry_blocks] == ["Backoff"]  # the revision's own fault: it is paced and held
    assert any(e.reason == "InstanceFailed" and "violates PodSecurity" in e.message for e in plan.events)


def test_a_podgroup_of_another_owner_fails_the_instance_without_holding_the_revision() -> None:
    """OME's gang-scheduling page: another owner's PodGroup of the Instance's name fails the Instance, none of whose
    pods is created. It is not the revision's fault: the retry backoff, not the retry block, paces the next try."""
    conflict = Refusal(cause=PODGROUP_OWNERSHIP_CONFLICT, verb="create", kind="PodGroup", name="s-engine-0",
                       message="PodGroup s-engine-0 belongs to another owner", at=NOW, since=NOW, incarnation=1)
    plan = replica.plan(view([creating()], {0: []}, refusals={0: conflict}))
    failed = plan.rows[0]
    assert failed.phase == "Failed" and failed.last_failure is not None
    assert failed.last_failure.reason == "PodGroupOwnershipConflict"
    assert failed.last_failure.message == "podgroup create refused: PodGroup s-engine-0 belongs to another owner"
    assert plan.retry_blocks == []
    assert [(c.reason, c.message) for c in plan.conditions if c.type == "ReplicaFailure"] == [
        ("PodGroupOwnershipConflict", "Instance 0: podgroup create refused: PodGroup s-engine-0 belongs to another "
                                      "owner")]


def test_a_gang_refused_in_part_releases_its_created_members_after_the_gang_timeout() -> None:
    worker = pod("s-engine-0-worker-0", runner="worker", gate=None, containers_ready=False)
    waiting = attrs.evolve(instance_view("Creating", [worker]), now=NOW, refused_since=NOW - 100, gang_timeout=300)
    actions = instance.plan(waiting)
    assert not actions.release_gang and [p["metadata"]["name"] for p in actions.create_pods] == [
        "s-engine-0-leader-0"]  # the refused leader is tried again; the worker stays for now
    released = instance.plan(attrs.evolve(waiting, refused_since=NOW - 301))
    assert released.release_gang and released.create_pods == ()
    assert [p["metadata"]["name"] for p in released.delete_pods] == ["s-engine-0-worker-0"]
    assert [e.reason for e in released.events] == ["GangReleased"]
    # Without a gang timeout (no instanceReadyTimeout anywhere) the gang waits as long as it takes.
    assert not instance.plan(attrs.evolve(waiting, refused_since=NOW - 10_000, gang_timeout=None)).release_gang


# -- the Instance controller records what the API server refused


IR: Obj = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
           "metadata": {"name": "s-engine", "namespace": "ns", "uid": "ir-uid"},
           "spec": {"component": "engine", "parentRef": {"name": "s"}}}
KEY = "ns/s-engine/0"


async def test_a_refused_create_is_recorded_announced_once_and_wakes_the_replica() -> None:
    ctx = FakeContext(now=NOW)
    ctx.applier.refuse["s-engine-0-leader-0"] = ApiError(403, "Forbidden", QUOTA)
    controller = InstanceController(ctx, ctx)  # type: ignore[arg-type]
    actions = instance.plan(attrs.evolve(instance_view("Creating", []), ref=REF))
    refused = await controller.execute(KEY, IR, actions, 1)
    assert refused is not None and refused.cause == QUOTA_EXCEEDED and not refused.lasting
    assert ctx.applier.created == ["s-engine-0-worker-0"]
    assert ctx.events.recorded == [("InferenceReplica", "FailedCreate", f"Error creating: {QUOTA}")]
    assert ctx.woken["inferencereplica"] == ["ns/s-engine"]
    # The refused pod will send no event: only the worker's is awaited.
    assert ctx.expectations.pending(PodsOf(KEY))[0] == {"s-engine-0-worker-0"}
    # Refused again five seconds later: the same cause is not announced again, and it has stood since the first.
    ctx.now += 5
    leader_only = attrs.evolve(actions, create_pods=actions.create_pods[:1])
    again = await controller.execute(KEY, IR, leader_only, 1)
    assert again is not None and again.since == NOW and len(ctx.events.recorded) == 1
    # The quota allows it: the refusal clears and the replica is told.
    del ctx.applier.refuse["s-engine-0-leader-0"]
    assert await controller.execute(KEY, IR, leader_only, 1) is None
    assert ctx.refusals.of(KEY) is None and ctx.woken["inferencereplica"][-1] == "ns/s-engine"


async def test_an_error_that_is_not_a_refusal_is_raised_for_the_queues_backoff() -> None:
    ctx = FakeContext(now=NOW)
    ctx.applier.refuse["s-engine-0-leader-0"] = ApiError(500, "InternalError", "etcdserver: request timed out")
    controller = InstanceController(ctx, ctx)  # type: ignore[arg-type]
    with pytest.raises(ApiError):
        await controller.execute(KEY, IR, instance.plan(instance_view("Creating", [])), 1)
    assert ctx.refusals.of(KEY) is None and ctx.events.recorded == []

