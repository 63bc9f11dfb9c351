"""The InferenceReplica's status besides its rows: the counts, the current revision, the conditions (Ready,
RolloutStalled, DrainOverdue, GangSchedulingUnavailable, MigrationPolicyUnconfigured, ReplicaFailure,
InstanceReadyTimeoutUnconfigured) and the rollout's hold. Pure."""

from __future__ import annotations

import attrs

from omenative.api import constants as c
from omenative.api import slots
from omenative.api.naming import MAX_DNS_LABEL
from omenative.api.phases import DELETING, FAILED, READY, UPDATING
from omenative.api.readiness import Serving, replica_ready
from omenative.api.times import format_time, parse_time
from omenative.api.types import Condition, InstanceStatus, RolloutHold
from omenative.api.units import format_duration
from omenative.controllers.inferencereplica.facts import instance_facts
from omenative.controllers.inferencereplica.model import Counts, ReplicaView
from omenative.controllers.inferencereplica.planner import ReplicaPlanner
from omenative.controllers.inferencereplica.retry import RetryBlocks


def with_counts(view: ReplicaView, rows: dict[int, InstanceStatus]) -> tuple[list[InstanceStatus], Counts, str]:
    """The rows in index order with their pod counts, the replica's counts, and its current revision (the one most
    Instances run; the update revision once all do)."""
    ready = serving = available = updated = updated_ready = 0
    final: list[InstanceStatus] = []
    for row in (rows[i] for i in sorted(rows)):
        facts = instance_facts(row, view.pods.get(row.index or 0, []), view.pods_per_instance)
        is_ready = facts.ready()
        is_serving = facts.serving()
        is_available = facts.available(view.now, view.min_ready_seconds)
        counted = row.phase != DELETING
        ready += int(is_ready and counted)
        serving += int(is_serving and counted)
        available += int(is_available and counted)
        on_update = (row.running_revision or row.target_revision) == view.update_revision
        new_ready = is_ready
        if slots.single_surge(row) and row.target_revision == view.update_revision:
            # A single pod's surge moves the Instance from its start, as a gang's surge does with its replacement
            # Instance: the rollout's gates (ratio, budgets) see it at once, Ready once its new pod is.
            on_update = True
            new_ready = instance_facts(row, view.pods.get(row.index or 0, []), view.pods_per_instance,
                                       slots.target_ordinal(row)).ready()
        updated += int(on_update and counted)
        updated_ready += int(on_update and new_ready and counted)
        final.append(attrs.evolve(
            row, pod_count=facts.present, serving_pod_count=sum(p.serving for p in facts.pods),
            available_pod_count=sum(p.available(view.now, view.min_ready_seconds) for p in facts.pods)))
    counts = Counts(replicas=len(final), ready=ready, serving=serving, available=available, updated=updated,
                    updated_ready=updated_ready)
    running = [r.running_revision for r in final if r.running_revision]
    # On a tie the revision being replaced stays current until the update has more Instances, and between older
    # revisions the lowest name wins: never the order of a set, which changes with the process (a restarted
    # controller would flip the status).
    current = view.update_revision if not running or all(r == view.update_revision for r in running) else \
        max(sorted(set(running)), key=lambda r: (running.count(r), r != view.update_revision))
    return final, counts, current


def ready_condition(view: ReplicaView, rows: list[InstanceStatus], counts_: Counts) -> Condition:
    now = format_time(view.now)
    if any(r.phase == FAILED for r in rows):
        return Condition(type="Ready", status="False", reason="InstanceFailed",
                         message="At least one Instance has Phase=Failed", last_transition_time=now)
    live = [r for r in rows if r.phase != DELETING]
    held = [r for r in live if r.running_revision and r.running_revision != view.update_revision]
    if view.partition > 0 and held and len(held) <= view.partition and len(live) >= view.replicas and \
            not any(r.phase != READY for r in live):
        # The rollout group holds these on the prior revision (a canary step), and every other one has moved.
        return Condition(type="Ready", status="True", reason="Staged",
                         message=f"Staged at partition {view.partition}: {counts_.updated}/{len(live)} Instances on "
                                 f"{view.revision_name(view.update_revision)}, {len(held)} held on the prior "
                                 "revision", last_transition_time=now)
    if any(r.phase == UPDATING or (r.running_revision and r.running_revision != view.update_revision) for r in live):
        return Condition(type="Ready", status="Unknown", reason="RolloutInProgress",
                         message=f"Rolling out {view.revision_name(view.update_revision)} ({counts_.updated}/"
                                 f"{len(live)} Instances on target)", last_transition_time=now)
    status, reason, message = replica_ready(Serving(
        desired=view.replicas, total=len(live), ready=counts_.ready, serving=counts_.serving,
        max_unavailable=view.max_unavailable, established=view.was_ready))
    return Condition(type="Ready", status=status, reason=reason, message=message, last_transition_time=now)


def conditions(view: ReplicaView, rows: list[InstanceStatus], counts_: Counts,
               blocks: RetryBlocks) -> list[Condition]:
    now = format_time(view.now)
    out = [ready_condition(view, rows, counts_)]
    live = [r for r in rows if r.phase != DELETING]
    rolling = any((r.running_revision or r.target_revision) != view.update_revision or r.phase == UPDATING
                  for r in live)
    failing = [r.index for r in rows if r.phase == FAILED]
    block = blocks.blocks.get(view.revision_name(view.update_revision))
    if rolling and (failing or block is not None):
        detail = f"Instance(s) {', '.join(map(str, failing))} Failed" if failing else \
            f"revision {block.target_revision if block else ''} is {block.state if block else ''} after " \
            f"{block.attempts_started if block else 0} failed attempt(s) ({block.reason if block else ''})"
        out.append(Condition(type="RolloutStalled", status="True", reason="InstancesFailing",
                             message=f"rolling out {view.revision_name(view.update_revision)}: {detail}",
                             last_transition_time=now))
    else:
        out.append(Condition(type="RolloutStalled", status="False", reason="Progressing",
                             message="no Instance is failing on the update revision", last_transition_time=now))
    overdue = [r for r in rows if r.phase == DELETING and r.operation is not None and
               (d := parse_time(r.operation.deadline)) is not None and view.now >= d]
    if overdue:
        out.append(Condition(type="DrainOverdue", status="True", reason="DrainsOverdue",
                             message=f"Instance(s) {', '.join(str(r.index) for r in overdue)} still draining past "
                                     "their deadline", last_transition_time=now))
    else:
        out.append(Condition(type="DrainOverdue", status="False", reason="DrainsWithinDeadline",
                             message="every drain is within its deadline", last_transition_time=now))
    if view.multi_pod:
        if view.podgroup_crd:
            out.append(Condition(type="GangSchedulingUnavailable", status="False", reason="GangSchedulingAvailable",
                                 message="each multi-pod Instance gets a PodGroup", last_transition_time=now))
        else:
            out.append(Condition(
                type="GangSchedulingUnavailable", status="True", reason="PodGroupCRDNotInstalled",
                message=f"the scheduler-plugins PodGroup CRD ({c.PODGROUP_CRD}) is not installed, so an Instance's "
                        "pods may be scheduled partially; install it to gang-schedule them",
                last_transition_time=now))
    if view.migration_caps.configured:
        out.append(Condition(type="MigrationPolicyUnconfigured", status="False", reason="MigrationCapacityConfigured",
                             message="the migration caps are set", last_transition_time=now))
    else:
        out.append(Condition(type="MigrationPolicyUnconfigured", status="True", reason="MigrationCapacityUnconfigured",
                             message="migration requests wait in Accepted until the controller's migration caps "
                                     "(audit.maxMigrationsPerWindow, audit.window, audit.maxInFlightMigrations) are "
                                     "set", last_transition_time=now))
    by_index = {row.index: row for row in rows} if view.refusals else {}
    refused = sorted((index, r) for index, r in view.refusals.items()
                     if (row := by_index.get(index)) is not None and (row.incarnation or 1) == r.incarnation
                     and row.phase != DELETING)
    if refused:
        # As the ReplicaSet controller's ReplicaFailure: present while the API server refuses creates, with its words.
        index, first = refused[0]
        more = f" (and Instance(s) {', '.join(str(i) for i, _ in refused[1:])})" if len(refused) > 1 else ""
        out.append(Condition(type="ReplicaFailure", status="True", reason=first.cause,
                             message=f"Instance {index}: {first.summary()}{more}"[:1024], last_transition_time=now))
    elif view.capped is not None:
        asked, longest = view.capped
        out.append(Condition(type="ReplicaFailure", status="True", reason="NameTooLong", message=(
            f"spec.replicas {asked} capped at {view.replicas}: more Instances would give pods names longer than "
            f"{MAX_DNS_LABEL} characters (such as {longest!r})"), last_transition_time=now))
    if view.ready_timeout is None:
        out.append(Condition(type="InstanceReadyTimeoutUnconfigured", status="True",
                             reason="InstanceReadyTimeoutUnconfigured",
                             message="no instanceReadyTimeout is set: an Instance that never becomes ready waits "
                                     "instead of failing", last_transition_time=now))
    else:
        out.append(Condition(type="InstanceReadyTimeoutUnconfigured", status="False",
                             reason="InstanceReadyTimeoutConfigured",
                             message=f"Instance readiness deadline is {format_duration(view.ready_timeout)}",
                             last_transition_time=now))
    return out


def rollout_hold(view: ReplicaView, planner: ReplicaPlanner) -> RolloutHold | None:
    if planner.hold is None or planner.advanced:
        return None
    gate, reason = planner.hold
    target = view.revision_name(view.update_revision)
    old = view.rollout_hold
    since = old.since if old is not None and old.gate == gate and old.target == target and old.since else \
        format_time(view.now)
    return RolloutHold(gate=gate, reason=reason, target=target, since=since)
