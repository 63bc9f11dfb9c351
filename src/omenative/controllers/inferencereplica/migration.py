"""Instance migration by surge (OME's concepts/omenative/migration-and-transient-scale.md). Pure.

A request (forwarded onto the InferenceReplica as its `ome.io/migration-request-v1-<uuid>` annotation) becomes a
record in `status.migrations`, born `Accepted`. One record of a component runs at a time, oldest first:
- SurgePending: the replacement (the surge) gets the lowest free index and the source's revision, and the source turns
  `Migrating`. The Instance controller keeps the surge's pods off `fromNode` and prefers the hints.
- SurgeReady: the surge is Ready (serving, for minReadySeconds).
- Draining: the source drains and goes.
- Completed (`migrated to instance=N`) once the source's pods are gone; Failed at the deadline (accept time plus the
  instanceReadyTimeout), when the surge wedges or fails, or when the request cannot be met. A failed move removes the
  surge and the source goes back to serving as it was.
Every step is in the status, so a restarted controller carries on from the record: the surge's index is allocated
once, in the same write that marks the source Migrating.
"""

from __future__ import annotations

from typing import Any, Protocol

import attrs

from omenative.api import migration_request
from omenative.api.migration_request import (
    ACCEPTED,
    COMPLETED,
    DRAINING,
    SURGE_PENDING,
    SURGE_READY,
    TERMINAL_PHASES,
)
from omenative.api.migration_request import FAILED as FAILED_PHASE
from omenative.api.phases import CREATING, DELETING, FAILED, MIGRATING, READY, UPDATING
from omenative.api.times import format_time, parse_time
from omenative.api.types import InstanceOperation, InstanceStatus, LastFailure, MigrationStatus
from omenative.api.units import format_duration
from omenative.controllers.inferencereplica.facts import instance_facts

TERMINAL = TERMINAL_PHASES
MIGRATE = "Migrate"
# A surge pod stuck in one of these fails the migration as wedged (MigrationSurgeWedged), not as rejected.
WEDGED = ("CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError",
          "CreateContainerError", "InvalidImageName", "RunContainerError")
KEEP_TERMINAL = 20  # ended records kept when no window is configured


@attrs.frozen(kw_only=True)
class Caps:
    """OME's lifecycle.audit settings; a cap of None means unconfigured (requests wait)."""

    max_per_window: int | None = None
    window: float | None = None
    max_in_flight: int | None = None

    @property
    def configured(self) -> bool:
        return self.max_per_window is not None and self.window is not None and self.max_in_flight is not None


class PlannerOps(Protocol):
    """What the InferenceReplica planner lends: its view, events, wake-ups and drains."""

    view: Any

    def event(self, type_: str, reason: str, message: str) -> None: ...

    def wake_at(self, when: float | None) -> None: ...

    def delete(self, row: InstanceStatus, reason: str) -> InstanceStatus: ...


def is_target(row: InstanceStatus) -> bool:
    return row.operation is not None and row.operation.type == MIGRATE and row.operation.step == "GangSurgeTarget"


def is_source(row: InstanceStatus) -> bool:
    return row.phase == MIGRATING


def audit_entry(record: MigrationStatus, component: str, now: float, revision: str | None = None) -> dict[str, Any]:
    """A row of the audit ConfigMap's history.json: Started while it runs, then Completed or Failed."""
    phase = "Completed" if record.phase == COMPLETED else "Failed" if record.phase == FAILED_PHASE else "Started"
    entry: dict[str, Any] = {
        "id": record.request_uuid, "component": component, "instance": record.source_instance,
        "fromNode": record.from_node, "phase": phase, "requestedBy": record.requested_by,
        "acceptedAt": record.started_at, "at": format_time(now),
        "outcome": "migrated" if record.phase == COMPLETED else record.message if phase == "Failed" else None,
    }
    if record.surge_instance is not None:
        entry["replacementInstance"] = record.surge_instance
    if record.hint_target_nodes:
        entry["hintTargetNodes"] = list(record.hint_target_nodes)
    if record.reason:
        entry["reason"] = record.reason
    if revision:
        entry["revision"] = revision
    return {k: v for k, v in entry.items() if v is not None}


@attrs.define
class Migrations:
    """One pass over a replica's migration records, changing `rows` in place."""

    planner: PlannerOps
    records: list[MigrationStatus]
    requests: list[tuple[str, str]]  # (annotation key, value) forwarded onto the InferenceReplica
    mode: str
    caps: Caps
    answered: list[str] = attrs.field(factory=list)
    audit: list[dict[str, Any]] = attrs.field(factory=list)

    @property
    def view(self) -> Any:
        return self.planner.view

    def who(self, record: MigrationStatus) -> str:
        return f"OMENative migration uuid={record.request_uuid}"

    def end(self, record: MigrationStatus, phase: str, message: str, reason: str | None,
            rows: dict[int, InstanceStatus] | None = None) -> MigrationStatus:
        """Ends a record; a failure removes the surge and gives the source back its place."""
        view = self.view
        if phase == FAILED_PHASE and rows is not None:
            surge = rows.get(record.surge_instance) if record.surge_instance is not None else None
            if surge is not None and surge.phase != DELETING and surge.index != record.source_instance:
                rows[surge.index or 0] = self.planner.delete(surge, "migration failed")
            source = rows.get(record.source_instance) if record.source_instance is not None else None
            if source is not None and is_source(source):
                # Back to Ready, or to Failed when its pods are not ready (OME's migration page): a source that lost
                # a pod meanwhile is repaired as a Failed Instance, not counted as serving.
                facts = instance_facts(source, self.view.pods.get(source.index or 0, []), self.view.pods_per_instance)
                rows[source.index or 0] = attrs.evolve(source, phase=READY, operation=None) if facts.ready() else \
                    attrs.evolve(source, phase=FAILED, operation=None, last_failure=LastFailure(
                        reason="MigrationFailed", time=format_time(view.now),
                        message=(f"migration {record.request_uuid} failed: {message}; the source's pods are not "
                                 "ready")[:512]))
        if reason is not None:
            self.planner.event("Warning" if phase == FAILED_PHASE else "Normal", reason,
                               f"{self.who(record)} {'failed' if phase == FAILED_PHASE else 'ended'}: {message}"
                               if reason != "MigrationCompleted" else message)
        ended = attrs.evolve(record, phase=phase, message=message, completed_at=format_time(view.now),
                             succeeded=phase == COMPLETED)
        self.audit.append(audit_entry(ended, view.component, view.now))
        return ended

    # -- intake
    def take_requests(self, rows: dict[int, InstanceStatus]) -> None:
        view = self.view
        known = {r.request_uuid for r in self.records}
        for key, value in sorted(self.requests):
            self.answered.append(key)
            parsed = migration_request.parse(key, value)
            uuid = migration_request.uuid_of(key)
            if uuid in known:
                continue  # recorded by an earlier pass whose annotation removal did not happen
            known.add(uuid)
            if isinstance(parsed, str) or parsed.component != view.component:
                message = parsed if isinstance(parsed, str) else \
                    f"migration request {uuid}: component {parsed.component} is not this replica's"
                record = MigrationStatus(request_uuid=uuid, trigger="Manual", phase=FAILED_PHASE,
                                         started_at=format_time(view.now))
                self.records.append(self.end(record, FAILED_PHASE, message, "MigrationRequestRejected"))
                continue
            timeout = view.ready_timeout
            record = MigrationStatus(
                request_uuid=uuid, trigger="Manual", source_instance=parsed.instance, from_node=parsed.from_node,
                hint_target_nodes=list(parsed.hints) or None, phase=ACCEPTED, reason=parsed.reason,
                requested_by=parsed.requested_by, started_at=format_time(view.now),
                deadline=format_time(view.now + timeout) if timeout else None, message="accepted; waiting to start")
            if self.mode == "Never":
                record = self.end(record, FAILED_PHASE, "migrations disabled by MigrationPolicy Mode=Never",
                                  "MigrationRequestRejected")
            else:
                self.audit.append(audit_entry(record, view.component, view.now))
            self.records.append(record)

    # -- progress
    def step(self, rows: dict[int, InstanceStatus], taken: set[int]) -> None:
        order = sorted(range(len(self.records)), key=lambda i: (self.records[i].started_at or "",
                                                                self.records[i].request_uuid or ""))
        running = any(r.phase in (SURGE_PENDING, SURGE_READY, DRAINING) for r in self.records)
        for i in order:
            record = self.records[i]
            if record.phase in TERMINAL:
                continue
            if record.phase == ACCEPTED:
                if self.expire_check(i, rows):
                    continue
                if running:
                    self.records[i] = self.wait(record, "waiting: another migration of the component is running")
                    continue
                self.records[i] = self.start(record, rows, taken)
                running = self.records[i].phase == SURGE_PENDING
                continue
            self.records[i] = self.advance(i, rows)

    def wait(self, record: MigrationStatus, message: str) -> MigrationStatus:
        return record if record.message == message else attrs.evolve(record, message=message)

    def expire_check(self, i: int, rows: dict[int, InstanceStatus]) -> bool:
        record = self.records[i]
        deadline = parse_time(record.deadline)
        if deadline is None or record.phase == DRAINING or self.view.paused:
            return False  # a deadline that passes during a pause fails the request at the resume
        if self.view.now < deadline:
            self.planner.wake_at(deadline)
            return False
        if record.phase == ACCEPTED:
            detail = "surge never allocated"
        else:
            surge = rows.get(record.surge_instance) if record.surge_instance is not None else None
            pods = self.view.pods.get(record.surge_instance, []) if record.surge_instance is not None else []
            ready = sum(1 for p in pods if p.containers_ready and not p.terminating)
            detail = f"surge instance={record.surge_instance} not ready ({ready}/{self.view.pods_per_instance} pods " \
                     f"ready{', phase ' + surge.phase if surge is not None and surge.phase else ''})"
        self.records[i] = self.end(record, FAILED_PHASE, f"deadline exceeded in phase {record.phase}: {detail}",
                                   "MigrationExpired", rows)
        return True

    def start(self, record: MigrationStatus, rows: dict[int, InstanceStatus], taken: set[int]) -> MigrationStatus:
        view = self.view
        source = rows.get(record.source_instance) if record.source_instance is not None else None
        if view.paused or view.deleting:
            return self.wait(record, "waiting: the rollout is paused" if view.paused else
                             "waiting: the InferenceReplica is being deleted")
        if not self.caps.configured:
            if record.message != UNCONFIGURED:
                self.planner.event("Warning", "MigrationPolicyUnconfigured", (
                    f"{self.who(record)} waits in Accepted: the migration caps (lifecycle "
                    "audit.maxMigrationsPerWindow, audit.window, audit.maxInFlightMigrations) are not all set"))
            return self.wait(record, UNCONFIGURED)
        if any(r.phase == UPDATING and r.operation is not None and r.operation.step == "Surge" for r in rows.values()):
            return self.wait(record, "waiting: an update's surge Instance is in flight on the component")
        if source is None or source.phase == DELETING:
            return self.end(record, FAILED_PHASE, f"instance {record.source_instance} does not exist",
                            "MigrationRequestRejected", rows)
        pods = [p for p in view.pods.get(source.index or 0, []) if not p.terminating]
        nodes = sorted({p.node for p in pods if p.node})
        if source.phase != READY or source.operation is not None:
            return self.wait(record, f"waiting: instance {source.index} is {source.phase}"
                             + (f" ({source.operation.type})" if source.operation is not None else ""))
        if len(pods) < view.pods_per_instance or any(not p.node for p in pods):
            return self.wait(record, f"waiting: instance {source.index} has a missing or unscheduled pod")
        if record.from_node not in nodes:
            message = f"from_node={record.from_node} does not host instance {source.index} (its pods run on " \
                      f"{', '.join(nodes) or 'no node'})"
            return self.end(record, FAILED_PHASE, message, "MigrationFromNodeMismatch", rows)
        allowed = view.allowed_nodes.get(source.running_revision or source.target_revision or "")
        if allowed is not None and allowed <= {record.from_node}:
            message = f"instance {source.index}'s node affinity requires node {record.from_node}, which a surge " \
                      "must leave"
            return self.end(record, FAILED_PHASE, message, "MigrationNodeAffinityConflict", rows)
        if self.caps.max_per_window is not None and self.caps.window is not None:
            since = view.now - self.caps.window
            started = sum(1 for r in self.records if (t := parse_time(r.allocated_at)) is not None and t >= since)
            if started >= self.caps.max_per_window:
                message = f"migration rate cap reached ({started}/{self.caps.max_per_window} in the last " \
                          f"{format_duration(self.caps.window)})"
                return self.end(record, FAILED_PHASE, message, "RateLimited", rows)
        index = 0
        while index in taken:
            index += 1
        taken.add(index)
        revision = source.running_revision or source.target_revision or ""
        deadline = record.deadline
        rows[index] = InstanceStatus(
            index=index, incarnation=1, phase=CREATING, target_revision=revision,
            operation=InstanceOperation(type=MIGRATE, step="GangSurgeTarget", started_at=format_time(view.now),
                                        target_revision=revision, deadline=deadline,
                                        reason=f"migration {record.request_uuid} of instance {source.index}"))
        rows[source.index or 0] = attrs.evolve(source, phase=MIGRATING, operation=InstanceOperation(
            type=MIGRATE, step="Surge", started_at=format_time(view.now), target_revision=revision,
            deadline=deadline, surge_index=index, reason=f"migration {record.request_uuid} off {record.from_node}"))
        self.planner.event("Normal", "MigrationRequestAccepted", (
            f"{self.who(record)} started: component={view.component} instance={source.index} "
            f"from_node={record.from_node} -> surge instance={index} (revision={view.revision_name(revision)})"
            + (f"; preferring {', '.join(record.hint_target_nodes)}" if record.hint_target_nodes else "")))
        return attrs.evolve(record, phase=SURGE_PENDING, surge_instance=index, allocated_at=format_time(view.now),
                            message="surge allocated; waiting for surge pods")

    def advance(self, i: int, rows: dict[int, InstanceStatus]) -> MigrationStatus:
        view = self.view
        if self.expire_check(i, rows):
            return self.records[i]
        record = self.records[i]
        surge = rows.get(record.surge_instance) if record.surge_instance is not None else None
        source = rows.get(record.source_instance) if record.source_instance is not None else None
        if record.phase == DRAINING:
            if source is None:
                revision = surge.running_revision if surge is not None else None
                message = f"migrated to instance={record.surge_instance}"
                self.planner.event("Normal", "MigrationCompleted", (
                    f"{self.who(record)} complete: component={view.component} instance={record.source_instance} -> "
                    f"instance={record.surge_instance} (revision={view.revision_name(revision)})"))
                return self.end(record, COMPLETED, message, None)
            return record
        if surge is None or surge.phase == DELETING:
            return self.end(record, FAILED_PHASE, f"surge instance={record.surge_instance} is gone",
                            "MigrationRequestRejected", rows)
        if surge.phase == FAILED:
            failure = surge.last_failure
            reason = failure.reason if failure is not None else None
            event = "MigrationSurgeWedged" if reason in WEDGED else "MigrationRequestRejected"
            detail = failure.message if failure is not None and failure.message else reason or "failed"
            return self.end(record, FAILED_PHASE, f"surge instance={surge.index} failed: {detail}", event, rows)
        refusal = view.refusals.get(surge.index or 0)
        if record.phase == SURGE_PENDING and refusal is not None and not refusal.lasting and \
                refusal.incarnation == (surge.incarnation or 1):
            # The API server refuses the surge's pods (a full quota): said once per request, retried until the
            # deadline (OME's MigrationSurgeCreateBlocked).
            if not (record.message or "").startswith(SURGE_BLOCKED):
                self.planner.event("Warning", "MigrationSurgeCreateBlocked", (
                    f"{self.who(record)} surge instance={surge.index} create blocked: {refusal.summary()}; retrying "
                    "until the deadline"))
            return attrs.evolve(record, message=f"{SURGE_BLOCKED}: {refusal.summary()}")
        if record.phase == SURGE_PENDING:
            if surge.phase == READY:
                self.planner.wake_at(view.now + 0.05)  # SurgeReady is written; the drain starts in the next pass
                return attrs.evolve(record, phase=SURGE_READY,
                                    message=f"surge instance={surge.index} ready and serving")
            return record
        if record.phase == SURGE_READY:
            if view.paused:
                return self.wait(record, f"surge instance={surge.index} ready and serving; draining waits for the "
                                 "rollout's resume")
            if source is not None and source.phase != DELETING:
                rows[source.index or 0] = self.planner.delete(source, f"migrated to instance {surge.index}")
            return attrs.evolve(record, phase=DRAINING, message=f"draining instance {record.source_instance}")
        return record

    def prune(self) -> list[MigrationStatus]:
        """Ended records stay for the audit window (or the last KEEP_TERMINAL of them without one)."""
        now = self.view.now
        ended = [r for r in self.records if r.phase in TERMINAL]
        keep: set[str | None]
        if self.caps.window is not None:
            keep = {r.request_uuid for r in ended if (t := parse_time(r.completed_at)) is None or
                    now - t < self.caps.window}
            for r in ended:
                if (t := parse_time(r.completed_at)) is not None and now - t < self.caps.window:
                    self.planner.wake_at(t + self.caps.window)
        else:
            keep = {r.request_uuid for r in sorted(ended, key=lambda r: r.completed_at or "")[-KEEP_TERMINAL:]}
        return [r for r in self.records if r.phase not in TERMINAL or r.request_uuid in keep]


SURGE_BLOCKED = "waiting: surge create refused"
UNCONFIGURED = "waiting: migration caps are not configured (audit.maxMigrationsPerWindow, audit.window, " \
               "audit.maxInFlightMigrations)"

