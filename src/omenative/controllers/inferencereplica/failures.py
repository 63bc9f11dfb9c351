"""When an Instance's operation cannot finish: the clock stops while the cause is not the Instance's own (a pause,
Kueue's admission, a refused create that clears by itself, a PodGroup still going, a node that stopped reporting, a
pod the scheduler cannot place), and the Instance fails on a lasting refusal, a wedged or unschedulable pod past its
grace, or its deadline; why a Ready Instance must be rebuilt under RecreateInstanceOnPodRestart. Pure."""

from __future__ import annotations

import attrs

from omenative.api.phases import FAILED
from omenative.api.times import format_time, parse_time
from omenative.api.types import Condition, InstanceOperation, InstanceStatus, LastFailure
from omenative.api.units import optional_duration
from omenative.controllers.inferencereplica.facts import InstanceFacts
from omenative.controllers.inferencereplica.model import (
    NODE_UNKNOWN,
    PAUSED,
    PODGROUP_TERMINATING,
    REFUSED_WAITS,
    UNSCHEDULABLE,
)
from omenative.controllers.inferencereplica.planner import ReplicaPlanner, new_failure
from omenative.controllers.inferencereplica.retry import counts
from omenative.observe.pods import PodFacts
from omenative.observe.refusals import QUOTA_EXCEEDED


def restart_cause(planner: ReplicaPlanner, row: InstanceStatus, facts: InstanceFacts) -> tuple[str, LastFailure] | None:
    """Why a Ready Instance must be recreated under RecreateInstanceOnPodRestart, if it must."""
    now = planner.view.now
    for pod in facts.ended:
        reason = pod.reason or ("PodFailed" if pod.phase == "Failed" else pod.phase)
        message = f"pod {pod.name} failed: {reason}"
        return message, new_failure(pod, None, "PodFailed", None, pod.message or message, now)
    for pod in facts.pods:
        restart = pod.main_restarts()
        baseline = (row.restart_baseline or {}).get(pod.name, 0)
        if restart is not None and restart.restarts > baseline:
            exit_code = f" (exit {restart.exit_code})" if restart.exit_code is not None else ""
            message = (f"pod {pod.name} container {restart.container} restarted after Ready: "
                       f"{restart.reason}{exit_code}")
            return message, new_failure(pod, restart.container, restart.reason, restart.exit_code, message, now)
    if facts.present < facts.desired:
        message = (f"gang member lost: {facts.present} of {facts.desired} pods present" if planner.view.multi_pod
                   else f"pod count {facts.present} below desired {facts.desired}")
        return message, new_failure(None, None, "PodMissing", None, message, now)
    return None


def wedged(planner: ReplicaPlanner, facts: InstanceFacts) -> tuple[str, LastFailure] | None:
    """A pod stuck waiting (CrashLoopBackOff, ImagePullBackOff, ...) longer than the stuck-pod grace: the
    message and the failure to record."""
    grace = optional_duration(planner.view.config.stuck_pod_grace_period)
    if grace is None:
        return None
    for pod in facts.pods:
        if pod.wedged is None:
            continue
        since = pod.created if pod.created is not None else planner.view.now
        if planner.view.now - since >= grace:
            container, reason, detail = pod.wedged
            message = f"pod {pod.name} container {container} wedged in {reason} past the stuck-pod grace"
            return message, new_failure(pod, container, reason, None, detail or message, planner.view.now)
        planner.wake_at(since + grace)
    return None


def unschedulable(planner: ReplicaPlanner, facts: InstanceFacts) -> PodFacts | None:
    grace = optional_duration(planner.view.config.unschedulable_grace_period)
    for pod in facts.pods:
        if pod.unschedulable_since is None:
            continue
        if grace is not None and planner.view.now - pod.unschedulable_since >= grace:
            return pod
        if grace is not None:
            planner.wake_at(pod.unschedulable_since + grace)
    return None


def fail(planner: ReplicaPlanner, row: InstanceStatus, failure: LastFailure, message: str,
         announce: bool = True) -> InstanceStatus:
    if announce:  # a single pod's surge that fails is abandoned, not the Instance: its caller says so instead
        planner.event("Warning", "InstanceFailed", f"{planner.prefix(row)} failed: {message}")
    if counts(failure.reason) and row.target_revision:
        planner.blocks.record_failure(planner.view.revision_name(row.target_revision), failure.reason or "")
    retries = (row.operation.retry_count or 0) + 1 if row.operation else 1
    operation = attrs.evolve(row.operation, retry_count=retries) if row.operation else None
    return attrs.evolve(row, phase=FAILED, last_failure=failure, operation=operation,
                        conditions=[Condition(type="Failed", status="True", reason=failure.reason,
                                              message=message[:512],
                                              last_transition_time=format_time(planner.view.now))])


def stop_clock(planner: ReplicaPlanner, row: InstanceStatus, op: InstanceOperation,
               waiting: str) -> InstanceStatus | None:
    """The operation waits on `waiting` with no deadline (None when it already does)."""
    if op.waiting == waiting and op.deadline is None:
        return None
    return attrs.evolve(row, operation=attrs.evolve(op, waiting=waiting, deadline=None))


def wait_refused(planner: ReplicaPlanner, row: InstanceStatus, op: InstanceOperation, waiting: str,
                 refused_at: str) -> InstanceStatus | None:
    """The API server refuses the operation's pods for a cause that clears by itself: the clock stops, and the
    row records when the last refusal came (None when it already says so)."""
    capacity = refused_at if waiting == QUOTA_EXCEEDED else op.capacity_refused_at
    if op.waiting == waiting and op.deadline is None and op.capacity_refused_at == capacity:
        return None
    return attrs.evolve(row, operation=attrs.evolve(op, waiting=waiting, deadline=None,
                                                    capacity_refused_at=capacity))


def restart_clock(planner: ReplicaPlanner, row: InstanceStatus, op: InstanceOperation) -> InstanceStatus:
    """The wait is over: the operation gets a full readiness window again."""
    timeout = planner.view.ready_timeout
    return attrs.evolve(row, operation=attrs.evolve(
        op, waiting=None, capacity_refused_at=None,
        deadline=format_time(planner.view.now + timeout) if timeout else None))


def check_failure(planner: ReplicaPlanner, row: InstanceStatus, facts: InstanceFacts,
                  announce: bool = True) -> InstanceStatus | None:
    """Fails an Instance that is being created, restarted or updated when it cannot finish. While the scheduler
    cannot place a pod, the operation waits with its clock stopped (`waiting: Unschedulable`, no deadline);
    when the hold ends it gets a full window again. Returns the changed row, or None."""
    now = planner.view.now
    if facts.serving():
        return None  # an Instance serving at full count is never failed
    op = row.operation
    if planner.view.paused and op is not None:
        return stop_clock(planner, row, op, PAUSED)  # a pause stops the readiness deadline too
    if op is not None and op.waiting == PAUSED:
        return restart_clock(planner, row, op)
    if op is not None and any(p.gates for p in facts.pods):
        # A scheduling gate holds a pod (Kueue, until it admits the Instance's workload): the clock stops, as
        # OME documents, and the row says the Instance is not admitted.
        if op.deadline is None and row.admitted is False:
            return None
        return attrs.evolve(row, admitted=False, operation=attrs.evolve(op, deadline=None))
    if op is not None and row.admitted is False:
        return attrs.evolve(restart_clock(planner, row, op), admitted=None)  # admitted: a full window from now
    refusal = planner.view.refusals.get(row.index or 0)
    if refusal is not None and refusal.incarnation == (row.incarnation or 1):
        if refusal.lasting:  # only a new revision (or the namespace's return) helps: fail now, not at the deadline
            message = refusal.summary()
            return fail(planner, row, new_failure(None, None, refusal.cause, None, message, now), message, announce)
        if op is not None:
            # When the refusals began, not the latest one: a quota that stays full must not rewrite the status
            # at every retry.
            return wait_refused(planner, row, op, refusal.cause, format_time(refusal.since))
    elif op is not None and op.waiting in REFUSED_WAITS:
        return restart_clock(planner, row, op)  # the pods are accepted again: a full window from now
    if op is not None and (row.index or 0) in planner.view.podgroups_terminating:
        return stop_clock(planner, row, op, PODGROUP_TERMINATING)
    if op is not None and op.waiting == PODGROUP_TERMINATING:
        return restart_clock(planner, row, op)
    if op is not None and any(p.node in planner.view.unknown_nodes for p in facts.stale if p.node):
        # The pod it must replace cannot go until its node reports again (or the node is removed): its name,
        # and so the new pod, wait. Not the Instance's fault: the clock stops.
        return stop_clock(planner, row, op, NODE_UNKNOWN)
    if op is not None and op.waiting == NODE_UNKNOWN:
        return restart_clock(planner, row, op)
    stuck = wedged(planner, facts)
    if stuck is not None:
        message, failure = stuck
        return fail(planner, row, failure, message, announce)
    refused = unschedulable(planner, facts)
    if refused is not None:
        message = f"pod {refused.name} unschedulable: {refused.unschedulable_message or 'no node fits'}"
        return fail(planner, row, new_failure(refused, None, "Unschedulable", None, message, now), message, announce)
    if op is not None and any(p.unschedulable_since is not None for p in facts.pods):
        return stop_clock(planner, row, op, UNSCHEDULABLE)
    if op is not None and op.waiting == UNSCHEDULABLE:
        return restart_clock(planner, row, op)
    deadline = parse_time(op.deadline) if op else None
    if deadline is not None:
        if now >= deadline:
            reason = "ContainersNotReady" if facts.present >= facts.desired and not facts.ready() else \
                "ReadinessGateNotSatisfied" if facts.present >= facts.desired else "DeadlineExceeded"
            message = f"not ready within the instanceReadyTimeout ({facts.present}/{facts.desired} pods present)"
            return fail(planner, row, new_failure(None, None, reason, None, message, now), message, announce)
        planner.wake_at(deadline)
    return None
