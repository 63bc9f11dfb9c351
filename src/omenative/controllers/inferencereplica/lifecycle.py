"""Each Instance's lifecycle for one pass (OME's instances.md and instance-restart-policy.md): Creating, Restarting
and Updating Instances turn Ready once every pod serves for minReadySeconds (or fail, see `failures`); a Ready
Instance is repaired (under `None` a lost pod is replaced alone, under RecreateInstanceOnPodRestart the whole
Instance is rebuilt one incarnation higher; a wedged pod's rebuild is paced by maxUnavailable); a Failed one is
rebuilt when its retry block or backoff allows; a Deleting one reports an overdue drain. Pure."""

from __future__ import annotations

import attrs

from omenative.api import slots
from omenative.api.defaults import RECREATE
from omenative.api.phases import CREATING, DELETING, FAILED, MIGRATING, PENDING, READY, RESTARTING, UPDATING
from omenative.api.times import format_time, parse_time
from omenative.api.types import InstanceStatus, LastFailure
from omenative.api.units import format_duration
from omenative.controllers.inferencereplica import failures, relocation, requests
from omenative.controllers.inferencereplica.facts import InstanceFacts, instance_facts
from omenative.controllers.inferencereplica.model import RETRY_MAX_SECONDS
from omenative.controllers.inferencereplica.planner import ReplicaPlanner, budget_of, new_operation
from omenative.controllers.inferencereplica.retry import HELD, counts
from omenative.render.in_place import IN_PLACE_STEP


def settled(planner: ReplicaPlanner, facts: InstanceFacts) -> bool:
    """Every pod serves and has been Ready for minReadySeconds (the Instance may turn Ready)."""
    view = planner.view
    if not facts.serving():
        return False
    if view.min_ready_seconds <= 0 or facts.available(view.now, view.min_ready_seconds):
        return True
    since = max((p.ready_since for p in facts.pods if p.ready_since is not None), default=view.now)
    planner.wake_at(since + view.min_ready_seconds)
    return False


def ready(planner: ReplicaPlanner, row: InstanceStatus, facts: InstanceFacts, *, restarted: bool) -> InstanceStatus:
    baseline = {p.name: r.restarts for p in facts.pods if (r := p.main_restarts()) is not None}
    if restarted:
        planner.event("Normal", "RestartCompleted",
                      f"{planner.prefix(row)} restart completed (incarnation={row.incarnation})")
    if row.target_revision:
        planner.blocks.succeeded(planner.view.revision_name(row.target_revision))
    announced = [a for a in row.announced or [] if not a.startswith(requests.RESET_MARKER)] or None
    return attrs.evolve(row, phase=READY, operation=None, conditions=None, restart_baseline=baseline or None,
                        running_revision=row.target_revision, announced=announced, admitted=None,
                        ready_since=format_time(planner.view.now))


def restart(planner: ReplicaPlanner, row: InstanceStatus, message: str, failure: LastFailure) -> InstanceStatus:
    incarnation = (row.incarnation or 1) + 1
    planner.event("Warning", "RestartTriggered",
                  f"{planner.prefix(row)} restart triggered: {message} (incarnation={incarnation})")
    planner.out_of_service += 1
    return attrs.evolve(row, phase=RESTARTING, incarnation=incarnation, last_failure=failure, restart_baseline=None,
                        announced=None, operation=new_operation("Restart", "Drain", planner.view.now,
                                                                planner.view.ready_timeout, row.target_revision or "",
                                                                message))


def repair_budget_left(planner: ReplicaPlanner) -> tuple[bool, str]:
    budget = budget_of(planner.view.max_unavailable, max(planner.view.replicas, 1))
    if budget is None or planner.out_of_service < budget:
        return True, ""
    return False, (f"per-Component unavailability budget {budget} exhausted "
                   f"(would become {planner.out_of_service + 1})")


def step_ready(planner: ReplicaPlanner, row: InstanceStatus, facts: InstanceFacts) -> InstanceStatus:
    view, now = planner.view, planner.view.now
    stuck = failures.wedged(planner, facts)  # asked even when another cause wins: it also schedules the next look
    if view.freeze:
        stuck = None  # a frozen rollout starts no repair (the kubelet still restarts containers)
    if view.restart_policy == RECREATE and not view.freeze:
        cause = failures.restart_cause(planner, row, facts)
        if cause is not None:
            return restart(planner, row, *cause)  # restarts the policy starts wait for no budget
    if stuck is not None:
        allowed, why = repair_budget_left(planner)
        if allowed:
            return restart(planner, row, *stuck)
        message, _ = stuck
        return planner.announce_once(row, f"RepairHeld@{row.incarnation or 1}", "Warning", "RepairHeld",
                                     f"{planner.prefix(row)} repair held: {message}; gate Budget: {why}")
    if view.restart_policy != RECREATE and facts.present < facts.desired:
        if facts.present == 0:
            return attrs.evolve(row, phase=PENDING)
        if view.paused:
            return row  # a lost pod is replaced once the pause ends
        lost = [p.name for p in facts.ended] or [f"{facts.desired - facts.present} missing"]
        return attrs.evolve(row, phase=CREATING, operation=new_operation(
            "Create", "CreatePods", now, view.ready_timeout, row.target_revision or view.update_revision,
            f"replace lost pod(s): {', '.join(lost)}"))
    return row


def rebuild(planner: ReplicaPlanner, row: InstanceStatus, reason: str) -> InstanceStatus | None:
    """Starts a Failed Instance over on the update revision when its retry block allows; None while it waits."""
    view = planner.view
    revision = view.update_revision
    name = view.revision_name(revision)
    wait = planner.blocks.wait_until(name)
    if wait is not None:
        planner.held(HELD if planner.blocks.state(name) == HELD else "RetryBlock",
                     f"revision {name} is {planner.blocks.state(name)}")
        planner.wake_at(wait)
        return None
    planner.blocks.start_attempt(name)
    planner.advanced = True
    retries = (row.operation.retry_count or 1) if row.operation else 0
    return attrs.evolve(row, phase=CREATING, incarnation=(row.incarnation or 1) + 1, conditions=None,
                        target_revision=revision, restart_baseline=None,
                        announced=[a for a in row.announced or [] if not a.startswith(requests.RESET_MARKER)]
                        or None,
                        operation=new_operation("Create", "CreatePods", view.now, view.ready_timeout, revision,
                                                reason, retries))


def step_failed(planner: ReplicaPlanner, row: InstanceStatus, facts: InstanceFacts) -> InstanceStatus:
    view, now = planner.view, planner.view.now
    if settled(planner, facts):
        return ready(planner, row, facts, restarted=False)
    if view.paused:
        return row  # a rebuild is a create: it waits for the resume
    if requests.waiting_for_rebuild(row):
        return rebuild(planner, row, "reset at operator request") or row
    op = row.operation
    if row.target_revision != view.update_revision:
        return rebuild(planner, row, "new revision") or row  # a new revision reaches it
    if op is not None and op.type == "Restart":
        return row  # kept for inspection until a reset or a new revision
    if row.last_failure is not None and counts(row.last_failure.reason):
        return rebuild(planner, row, "retry after failure") or row  # the retry block paces it
    retries = (op.retry_count or 1) if op else 1
    failed_at = parse_time(row.last_failure.time) if row.last_failure else now
    backoff = min(view.retry_policy.backoff * 2 ** max(retries - 1, 0), RETRY_MAX_SECONDS)
    retry_at = (failed_at or now) + backoff
    if now < retry_at:
        planner.wake_at(retry_at)
        return row
    rebuilt = rebuild(planner, row, "retry after failure")
    if rebuilt is None:
        return row
    relocation.relocate(planner, row, facts)  # the node its pods all failed on, left behind when OME's rules allow
    return rebuilt


def step_single_surge(planner: ReplicaPlanner, row: InstanceStatus) -> InstanceStatus:
    """A single pod's SurgeThenDrain update (api.slots): once the new pod in the other slot serves for
    minReadySeconds, the old one is drained (step SurgeDrain); once it is going, the slot moves and the Instance is
    Ready on the new revision. A new pod that fails is abandoned: the old one keeps serving its revision, and the
    retry block or backoff paces the next attempt, as a gang's abandoned surge is."""
    view = planner.view
    op = row.operation
    assert op is not None
    pods = view.pods.get(row.index or 0, [])
    new = instance_facts(row, pods, 1, slots.target_ordinal(row))
    if op.step == slots.SURGE_DRAIN:
        old = slots.active(row)
        if any(p.ordinal == old and not p.terminating and p.incarnation == row.incarnation for p in pods):
            return row  # the Instance controller drains it: out of rotation, then deleted once unrouted
        planner.event("Normal", "InstanceReplaced", (
            f"{planner.prefix(row)} pod {view.single_pod(row.index, old)} replaced by "
            f"{view.single_pod(row.index, 1 - old)} (revision={row.target_revision})"))
        return ready(planner, attrs.evolve(row, active_ordinal=(1 - old) or None), new, restarted=False)
    if settled(planner, new):
        if view.paused:
            return row  # paused: old and new pods run side by side until the resume
        draining = view.single_pod(row.index, slots.active(row))
        return attrs.evolve(row, operation=attrs.evolve(op, step=slots.SURGE_DRAIN, reason=f"drain {draining}"))
    superseded = (row.target_revision or "") != view.update_revision and not view.paused
    failed = None if superseded else failures.check_failure(planner, row, new, announce=False)
    if superseded or (failed is not None and failed.phase == FAILED):
        detail = f"its revision {row.target_revision} is no longer the target" if superseded else \
            (failed.last_failure.reason if failed and failed.last_failure else "failed")
        planner.event("Normal" if superseded else "Warning", "SurgeAbandoned", (
            f"{planner.prefix(row)} abandoned the surge to pod "
            f"{view.single_pod(row.index, slots.target_ordinal(row))} ({detail}); "
            f"{view.single_pod(row.index, slots.active(row))} keeps serving revision {row.running_revision}"))
        last = row.last_failure if superseded or failed is None else failed.last_failure
        return attrs.evolve(row, phase=READY, operation=None, conditions=None, target_revision=row.running_revision,
                            last_failure=last)
    return failed or row


def step(planner: ReplicaPlanner, row: InstanceStatus, facts: InstanceFacts) -> InstanceStatus:
    view, now = planner.view, planner.view.now
    phase = row.phase
    if phase == DELETING:
        return check_drain(planner, row, facts)
    if slots.single_surge(row):
        return step_single_surge(planner, row)
    if phase == UPDATING and row.operation is not None and row.operation.step == "Surge":
        return row  # a surge source: settled with its replacement in `settle_surges`
    if phase == MIGRATING or (phase == FAILED and row.index in planner.surges):
        return row  # a migration's source, or its failed surge: the migration settles them
    if phase == CREATING and row.target_revision != view.update_revision and not view.paused and \
            (row.operation is None or row.operation.type == "Create") and not facts.any_serving():
        # Not up yet and already outdated: start it over on the new revision.
        return attrs.evolve(row, incarnation=(row.incarnation or 1) + 1, target_revision=view.update_revision,
                            operation=new_operation("Create", "CreatePods", now, view.ready_timeout,
                                                    view.update_revision, "new revision"))
    if phase == UPDATING and row.operation is not None and row.operation.step == IN_PLACE_STEP and \
            not all(p.revision == row.target_revision and p.images_current for p in facts.pods):
        # The pod still serves its old images until the kubelet restarted its containers on the new ones.
        return failures.check_failure(planner, row, facts) or row
    if phase in (CREATING, RESTARTING, UPDATING):
        if settled(planner, facts):
            if phase != CREATING:
                planner.out_of_service -= 1  # back in service: its place in the budget frees up
            return ready(planner, row, facts, restarted=phase == RESTARTING)
        return failures.check_failure(planner, row, facts) or row
    if phase == READY:
        return step_ready(planner, row, facts)
    if phase == PENDING and not view.paused:
        return attrs.evolve(row, phase=CREATING, operation=new_operation(
            "Create", "CreatePods", now, view.ready_timeout, row.target_revision or view.update_revision,
            "pods lost"))
    if phase == FAILED:
        return step_failed(planner, row, facts)
    return row


def check_drain(planner: ReplicaPlanner, row: InstanceStatus, facts: InstanceFacts) -> InstanceStatus:
    """A Deleting Instance past its drain deadline raises DrainOverdue once; the drain goes on."""
    deadline = parse_time(row.operation.deadline) if row.operation else None
    if deadline is None:
        return row
    if planner.view.now < deadline:
        planner.wake_at(deadline)
        return row
    left = [*facts.pods, *facts.ended, *facts.stale]
    terminating = [p.name for p in left if p.terminating]
    draining = [p.name for p in left if not p.terminating]
    parts = []
    if terminating:
        parts.append(f"{len(terminating)} pod(s) still Terminating ({', '.join(terminating)})")
    if draining:
        parts.append(f"{len(draining)} pod(s) still draining ({', '.join(draining)})")
    message = (f"OMENative component={planner.view.component} instance={row.index}: drain overdue by "
               f"{format_duration(planner.view.now - deadline)} (deadline {format_time(deadline)}); "
               + "; ".join(parts or ["no pod left"]))
    return planner.announce_once(row, f"DrainOverdue@{row.incarnation or 1}", "Warning", "DrainOverdue", message)
