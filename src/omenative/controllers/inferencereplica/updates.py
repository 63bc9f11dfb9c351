"""Updates (OME's instances.md): outdated Ready Instances move to the update revision, SurgeThenDrain by a new pod in
a single pod's other name slot (api.slots) or, for a leader and workers, a whole new Instance, either Ready before
the old one drains, RecreatePod by new pods at the next incarnation, and the
in-place strategies by new images on a single pod's running containers; all paced by their budget, the
rollout group's partition and pacing, and the revision's retry block. A surge whose replacement fails or is
superseded is abandoned and the source keeps serving. Pure."""

from __future__ import annotations

import math

import attrs

from omenative.api import slots
from omenative.api.defaults import IN_PLACE_ONLY, IN_PLACE_STRATEGIES, SURGE_THEN_DRAIN
from omenative.api.phases import CREATING, DELETING, FAILED, READY, UPDATING
from omenative.api.times import format_time, parse_time
from omenative.api.types import InstanceStatus
from omenative.controllers.inferencereplica.facts import instance_facts
from omenative.controllers.inferencereplica.model import SOURCE_UNROUTED
from omenative.controllers.inferencereplica.planner import (
    ReplicaPlanner,
    budget_of,
    lowest_free,
    new_failure,
    new_operation,
)
from omenative.controllers.inferencereplica.retry import HELD, counts
from omenative.observe.pods import PodFacts
from omenative.render.in_place import IN_PLACE_STEP


def settle_surges(planner: ReplicaPlanner, rows: dict[int, InstanceStatus]) -> None:
    """A surge source is drained once its replacement is Ready (which waits out minReadySeconds); if the
    replacement fails, the surge is abandoned: the replacement goes and the source keeps serving its revision."""
    now = planner.view.now
    for index, source in list(rows.items()):
        op = source.operation
        if source.phase != UPDATING or op is None or op.step != "Surge" or op.surge_index is None:
            continue
        target = rows.get(op.surge_index)
        # The source left rotation before its drain (its pods stopped serving): named, while the clock runs.
        facts = instance_facts(source, planner.view.pods.get(index, []), planner.view.pods_per_instance)
        unrouted = SOURCE_UNROUTED if not facts.serving() else None
        if op.waiting in (None, SOURCE_UNROUTED) and op.waiting != unrouted:
            source = rows[index] = attrs.evolve(source, operation=attrs.evolve(op, waiting=unrouted))
        if target is not None and target.phase == READY and planner.view.paused:
            continue  # paused: old and new pods run side by side until the resume
        if target is not None and target.phase == READY:
            planner.event("Normal", "InstanceReplaced", f"{planner.prefix(source)} replaced by instance="
                                                        f"{target.index} (revision={target.target_revision})")
            rows[index] = planner.delete(source, f"replaced by instance {target.index}")
        elif target is not None and target.phase != DELETING and not planner.view.paused and \
                (target.target_revision or "") != planner.view.update_revision:
            # The target moved on (a rollback, a newer revision) before the replacement was Ready: it is not
            # finished for nothing; the source keeps serving, and the next update starts from it.
            planner.event("Normal", "GangSurgeAbandoned", (
                f"{planner.prefix(source)} abandoned the surge to instance={op.surge_index} (its revision "
                f"{target.target_revision} is no longer the target); it keeps serving revision "
                f"{source.running_revision}"))
            rows[index] = attrs.evolve(source, phase=READY, operation=None)
            rows[op.surge_index] = planner.delete(target, "surge superseded")
        elif target is None or target.phase in (FAILED, DELETING):
            reason = target.last_failure.reason if target is not None and target.last_failure else "gone"
            planner.event("Warning", "GangSurgeAbandoned", (
                f"{planner.prefix(source)} abandoned the surge to instance={op.surge_index} ({reason}); it keeps "
                f"serving revision {source.running_revision}"))
            failure = target.last_failure if target is not None and target.last_failure else \
                new_failure(None, None, "SurgeAbandoned", None, "the replacement Instance failed", now)
            rows[index] = attrs.evolve(source, phase=READY, operation=None, last_failure=failure)
            if target is not None and target.phase != DELETING:
                rows[op.surge_index] = planner.delete(target, "surge abandoned")


def surge_failed(planner: ReplicaPlanner, row: InstanceStatus) -> bool:
    """Whether the row's last failure is that of a surge it abandoned (a pod of its replacement, or no pod at
    all), not one of its own pods failing (a restart it has recovered from, which must not hold its update)."""
    failure = row.last_failure
    if failure is None:
        return False
    own_pods = f"{planner.view.revision_prefix}{row.index}-"  # pods are named {isvc}-{component}-{index}-...
    if not planner.view.multi_pod and failure.pod_name is not None:  # a single pod's surge ran in its other slot
        return failure.pod_name != planner.view.single_pod(row.index, slots.active(row))
    return failure.pod_name is None or not failure.pod_name.startswith(own_pods)


def surge_slots_held(planner: ReplicaPlanner, rows: dict[int, InstanceStatus]) -> tuple[int, str]:
    """Surge slots in use: surges in flight, and pods listed beyond their Instances' own (terminating ones until
    their deletion grace elapses, live ones of another incarnation), in whole Instances. Also names a pod."""
    view, now = planner.view, planner.view.now
    in_flight = sum(1 for r in rows.values() if r.phase == UPDATING and r.operation is not None
                    and r.operation.step == slots.SURGE)
    extra_slots, named = 0, ""
    for index, pods in view.pods.items():
        row = rows.get(index)
        if row is None:
            continue
        drained = row.phase == DELETING and row.operation is not None and \
            (row.operation.reason or "").startswith("replaced by")
        # A single pod's slots in use: its own, and the new pod's while a surge (counted above) brings it up.
        live = {slots.counted_ordinal(row), slots.target_ordinal(row)}
        extra: list[PodFacts] = []
        for pod in pods:
            if pod.terminating:
                if pod.deletion_at is not None and pod.deletion_at > now:
                    extra.append(pod)
                    planner.wake_at(pod.deletion_at)
            elif drained or pod.incarnation != row.incarnation or (not view.multi_pod and pod.ordinal not in live):
                extra.append(pod)
        if extra:
            extra_slots += math.ceil(len(extra) / max(view.pods_per_instance, 1))
            if not named:
                pod = extra[0]
                named = (f"Terminating pod {pod.name} still counts against the surge budget until its deletion "
                         "grace elapses" if pod.terminating else
                         f"extra pod {pod.name} holds a surge slot until its drain completes")
    return in_flight + extra_slots, named


def start_updates(planner: ReplicaPlanner, rows: dict[int, InstanceStatus], taken: set[int]) -> None:
    """Moves outdated Ready Instances to the update revision, paced by the strategy's budget and the revision's
    retry block; what holds it is remembered as the rollout hold."""
    view, now = planner.view, planner.view.now
    outdated = [r for r in sorted(rows.values(), key=lambda r: r.index or 0)
                if r.phase == READY and (r.target_revision or r.running_revision) != view.update_revision]
    if view.paused:
        return  # no update starts while the rollout is paused
    # The rollout group's partition keeps the lowest-indexed outdated Instances on their revision.
    outdated = outdated[max(view.partition, 0):]
    if not outdated:
        return
    desired = max(view.replicas, 1)
    group_budget = budget_of(view.pacing_budget, desired)
    in_place = view.update_strategy in IN_PLACE_STRATEGIES
    movable = {r.index for r in outdated if in_place and not view.multi_pod and
               (r.target_revision or r.running_revision) in view.in_place_from}
    if view.update_strategy == IN_PLACE_ONLY and not view.multi_pod:
        refused = [r for r in outdated if r.index not in movable]
        for row in refused:
            marker = f"InPlaceUpdateNotPossible@{view.update_revision}"
            if marker not in (row.announced or []):
                planner.event("Warning", "InPlaceUpdateNotPossible", (
                    f"{planner.prefix(row)} rejected update: InPlaceOnly strategy but diff exceeds container "
                    "images"))
                rows[row.index or 0] = attrs.evolve(row, announced=[*(row.announced or []), marker])
        outdated = [r for r in outdated if r.index in movable]
        if not outdated:
            planner.held("Budget", "InPlaceOnly refused the change (InPlaceUpdateNotPossible)")
            return
    name = view.revision_name(view.update_revision)
    wait = planner.blocks.wait_until(name)
    if wait is not None:
        state = planner.blocks.state(name)
        planner.held(HELD if state == HELD else "RetryBlock", f"revision {name} is {state}" + (
            f" until {format_time(wait)}" if wait != math.inf else ""))
        planner.wake_at(wait)
        return
    one_at_a_time = planner.blocks.state(name) is not None  # a block lets one attempt run at a time
    if view.update_strategy == SURGE_THEN_DRAIN:
        budget = budget_of(view.max_surge, desired)
        if group_budget is not None:
            budget = group_budget if budget is None else min(budget, group_budget)
        used, named = surge_slots_held(planner, rows)
        room = len(outdated) if budget is None else budget - used
        if room <= 0:
            planner.held("Budget", f"per-Component surge budget {budget} exhausted (would become {used + 1})"
                         + (f"; {named}" if named else ""))
            return
        for row in outdated[: 1 if one_at_a_time else room]:
            failed_at = parse_time(row.last_failure.time) if row.last_failure is not None and \
                surge_failed(planner, row) else None
            if failed_at is not None and row.last_failure is not None and \
                    row.last_failure.reason not in ("PodMissing", "PodFailed") and \
                    not counts(row.last_failure.reason) and now - failed_at < view.retry_policy.backoff:
                planner.wake_at(failed_at + view.retry_policy.backoff)  # a surge of it just failed: back off
                planner.held("RetryBlock", f"the last surge of instance {row.index} failed "
                                           f"({row.last_failure.reason}); retrying after the backoff")
                continue
            planner.blocks.start_attempt(name)
            planner.advanced = True
            if not view.multi_pod:
                # A single pod keeps its Instance: the new pod comes up in the other name slot (api.slots).
                slot = 1 - slots.active(row)
                rows[row.index or 0] = attrs.evolve(
                    row, phase=UPDATING, target_revision=view.update_revision, restart_baseline=None,
                    operation=new_operation("Update", slots.SURGE, now, view.ready_timeout, view.update_revision,
                                            f"surge to {view.single_pod(row.index, slot)}",
                                            strategy=SURGE_THEN_DRAIN))
                continue
            target = lowest_free(taken)
            taken.add(target)
            rows[target] = InstanceStatus(
                index=target, incarnation=1, phase=CREATING, target_revision=view.update_revision,
                operation=new_operation("Update", "GangSurgeTarget", now, view.ready_timeout, view.update_revision,
                                        f"replaces instance {row.index}", strategy=SURGE_THEN_DRAIN))
            rows[row.index or 0] = attrs.evolve(row, phase=UPDATING, operation=attrs.evolve(
                new_operation("Update", "Surge", now, view.ready_timeout, view.update_revision,
                              f"surge to instance {target}", strategy=SURGE_THEN_DRAIN), surge_index=target))
        return
    # RecreatePod, and the in-place strategies (a pod whose images alone change keeps its pod; any other is
    # recreated, and a leader with workers always is): paced by maxUnavailable.
    budget = budget_of(view.max_unavailable, desired)
    if group_budget is not None:
        budget = group_budget if budget is None else min(budget, group_budget)
    room = len(outdated) if budget is None else budget - planner.out_of_service
    if room <= 0:
        planner.held("Budget", f"per-Component unavailability budget {budget} exhausted "
                               f"(would become {planner.out_of_service + 1})")
        return
    for row in outdated[: 1 if one_at_a_time else room]:
        planner.blocks.start_attempt(name)
        planner.advanced = True
        planner.out_of_service += 1
        if row.index in movable:
            rows[row.index or 0] = attrs.evolve(
                row, phase=UPDATING, target_revision=view.update_revision, restart_baseline=None,
                operation=new_operation("Update", IN_PLACE_STEP, now, view.ready_timeout, view.update_revision,
                                        "container images updated in place", strategy=view.update_strategy))
            continue
        rows[row.index or 0] = attrs.evolve(
            row, phase=UPDATING, incarnation=(row.incarnation or 1) + 1, target_revision=view.update_revision,
            restart_baseline=None, operation=new_operation("Update", "Drain", now, view.ready_timeout,
                                                           view.update_revision, "new revision",
                                                           strategy=view.update_strategy))
