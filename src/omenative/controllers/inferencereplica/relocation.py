"""Automatic relocation (OME's migration page, "Automatic relocation"): an Instance whose attempt failed with every
pod on one node, for a cause not in the workload (a crash loop, a deadline; not an image that cannot be pulled), is
rebuilt off that node, while the component's migrationPolicy.mode allows moves and the Instance has relocations left
(autoMigrate.maxAttempts, counted until it is next Ready). Each one is a `Relocated` record in status.migrations,
born terminal, which the Instance's rebuilds avoid; `succeeded` is stamped once the Instance is Ready again. Pure."""

from __future__ import annotations

import uuid

import attrs

from omenative.api.migration_request import AUTO, RELOCATED
from omenative.api.phases import READY
from omenative.api.times import format_time
from omenative.api.types import InstanceStatus, MigrationStatus
from omenative.controllers.inferencereplica.facts import InstanceFacts
from omenative.controllers.inferencereplica.planner import ReplicaPlanner
from omenative.controllers.inferencereplica.retry import counts

_IDS = uuid.UUID("6f6d656e-6174-6976-652d-72656c6f6361")  # the namespace of relocation record IDs


def unsettled(planner: ReplicaPlanner, index: int) -> list[MigrationStatus]:
    return [r for r in [*planner.view.migrations, *planner.relocations] if r.trigger == AUTO and
            r.source_instance == index and r.phase == RELOCATED and r.succeeded is None]


def relocate(planner: ReplicaPlanner, row: InstanceStatus, facts: InstanceFacts) -> None:
    """Records a relocation of a Failed Instance about to be rebuilt, when OME's rules allow one."""
    view = planner.view
    limit = view.config.auto_migrate_max_attempts
    failure = row.last_failure
    if not limit or view.migration_mode == "Never" or failure is None or counts(failure.reason):
        return
    pods = [*facts.pods, *facts.ended]
    nodes = {p.node for p in pods}
    if not pods or len(nodes) != 1 or None in nodes:
        return  # not every pod ran, or not on one node: no node to blame
    node = str(next(iter(nodes)))
    used = unsettled(planner, row.index or 0)
    if len(used) >= limit:
        return
    attempt = len(used) + 1
    now = format_time(view.now)
    # The ID is derived from the attempt it ends, so a pass repeated after a crash writes the same record.
    record_id = str(uuid.uuid5(_IDS, f"{view.who}/{row.index}/{row.incarnation}"))
    planner.relocations.append(MigrationStatus(
        request_uuid=record_id, trigger=AUTO, source_instance=row.index, from_node=node, phase=RELOCATED,
        attempt=attempt, reason=failure.reason,
        message=f"rebuilt off node {node} after {failure.reason} (relocation {attempt} of {limit})",
        started_at=now, completed_at=now))
    prefix = planner.prefix(row)
    planner.event("Normal", "AutoMigrationTriggered", (
        f"{prefix} relocated off node {node}: its attempt failed there ({failure.reason}); relocation {attempt} of "
        f"{limit}"))
    if attempt == limit:
        planner.event("Warning", "AutoMigrationCapReached", (
            f"{prefix} used its last relocation ({limit} of {limit}); until it is next Ready it is rebuilt without "
            "leaving another node"))


def settle(records: list[MigrationStatus], rows: dict[int, InstanceStatus]) -> list[MigrationStatus]:
    """Relocations of an Instance that is Ready again succeeded: they no longer count, nor steer its pods."""
    return [attrs.evolve(r, succeeded=True) if r.trigger == AUTO and r.succeeded is None and
            (row := rows.get(r.source_instance or 0)) is not None and row.phase == READY else r for r in records]
