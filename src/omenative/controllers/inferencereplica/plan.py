"""The InferenceReplica planner: from the replica, its Instances' rows and their pods, the next rows and what to say.

Pure: everything it needs comes in `ReplicaView` (the caller reads the caches and the clock), and it returns a
`ReplicaPlan` (the status to write, events to record, requests answered, when to look again). It owns the
Instances' lifecycle, as OME's concepts/omenative/instances.md and instance-restart-policy.md describe it:
- scale: new Instances at the lowest free index; scale-down removes Instances that are not Ready first, then the
  highest index;
- readiness: an Instance is Ready once every pod serves and has been Ready for minReadySeconds;
- repair: under `None` a lost or Failed pod is replaced alone (same incarnation); under
  `RecreateInstanceOnPodRestart` a pod that fails, goes missing or restarts its main container rebuilds the whole
  Instance one incarnation higher; a pod wedged past the stuck-pod grace rebuilds it under either policy, paced by
  `maxUnavailable` (`RepairHeld` while the budget is used up);
- failure: a deadline, a wedged or unschedulable pod fails an operation; retries follow the retry blocks (a
  revision that keeps failing for a reason of its own is held) or, for other causes, a backoff;
- updates: SurgeThenDrain brings a whole new Instance up before the old one drains, RecreatePod recreates in place,
  both paced by their budget; a zero budget stalls with the `Budget` gate, as OME documents;
- operators' requests (`ome.io/reset-instances`, `ome.io/release-held-revision`), answered once;
- counts, revisions, the rollout hold and the conditions of the status.
The Instance controller then makes each Instance's pods match its row.

The recipe is here; each concern has its module: `scale` (adoption, scale up and down), `lifecycle` and `failures`
(an Instance's pass), `updates`, `requests` (operators' requests), `migration`, `status` (counts, conditions, hold);
`model` holds the view and the plan, `planner` the pass's shared state.
"""

from __future__ import annotations

from omenative.api import migration_request, slots
from omenative.api.defaults import RECREATE
from omenative.api.phases import DELETING, RESTARTING, UPDATING
from omenative.api.times import format_time
from omenative.api.types import InstanceStatus
from omenative.controllers.inferencereplica import (
    lifecycle,
    migration,
    relocation,
    requests,
    scale,
    status,
    updates,
)
from omenative.controllers.inferencereplica.facts import instance_facts
from omenative.controllers.inferencereplica.model import ALL_POD_READY, ReplicaPlan, ReplicaView
from omenative.controllers.inferencereplica.planner import ReplicaPlanner
from omenative.controllers.inferencereplica.retry import RetryBlocks

__all__ = ["ALL_POD_READY", "RECREATE", "ReplicaPlan", "ReplicaView", "format_time", "plan"]


def plan(view: ReplicaView) -> ReplicaPlan:
    # A block is kept only while its revision is the one being rolled out: a new revision replaces a held one.
    blocks = RetryBlocks.of(view.retry_blocks, view.retry_policy, view.now,
                            {view.revision_name(view.update_revision)})
    planner = ReplicaPlanner(view, blocks)
    planner.surges = {r.surge_instance for r in migration_request.active(view.migrations)
                      if r.surge_instance is not None}
    rows = {r.index: r for r in view.rows if r.index is not None}
    scale.adopt(planner, rows)  # never orphan a pod

    # Operators' requests come first: a reset Instance is rebuilt in the same pass when nothing holds it.
    answered = requests.answer(planner, rows)
    rows = step_instances(planner, rows)

    # Migrations: requests become records; the running one moves on (one per component at a time).
    moves = migration.Migrations(planner, list(view.migrations), list(view.migration_requests),
                                 view.migration_mode, view.migration_caps)
    moves.take_requests(rows)
    moves.step(rows, set(rows) | set(view.pods))
    records = relocation.settle([*moves.prune(), *planner.relocations], rows)
    moving = {r.surge_instance for r in migration_request.active(records)
              if r.surge_instance is not None
              and r.phase in (migration_request.SURGE_PENDING, migration_request.SURGE_READY)}

    # Updates: replacements that came up drain their sources; outdated Instances start moving.
    updates.settle_surges(planner, rows)
    taken = set(rows) | set(view.pods)
    if not view.deleting:
        updates.start_updates(planner, rows, taken)
    for block in blocks.held:
        planner.event("Warning", "RetryHeld", (
            f"{view.who} update to revision {block.target_revision} held after {block.attempts_started} failed "
            f"attempt(s) (last failure: {block.reason}); publish a corrected revision or raise "
            "lifecycle.updateRetry limits"))

    scale.scale(planner, rows, taken, moving)
    final, counts, current = status.with_counts(view, rows)
    return ReplicaPlan(rows=final, counts=counts, current_revision=current,
                       conditions=status.conditions(view, final, counts, blocks), events=planner.events,
                       wake_in=min(planner.wakes) if planner.wakes else None, retry_blocks=blocks.to_list(),
                       rollout_hold=status.rollout_hold(view, planner), answered=answered + tuple(moves.answered),
                       migrations=records, audit=moves.audit)


def step_instances(planner: ReplicaPlanner, rows: dict[int, InstanceStatus]) -> dict[int, InstanceStatus]:
    """Every Instance's lifecycle for this pass; a drained Instance whose pods are gone leaves. Instances already out
    of service count against the repair budget."""
    view = planner.view
    planner.out_of_service = sum(1 for r in rows.values() if r.phase == RESTARTING or (
        r.phase == UPDATING and r.operation is not None and r.operation.step not in (slots.SURGE, slots.SURGE_DRAIN)))
    out: dict[int, InstanceStatus] = {}
    for index, row in sorted(rows.items()):
        facts = instance_facts(row, view.pods.get(index, []), view.pods_per_instance)
        if row.phase == DELETING and not view.pods.get(index):
            continue  # drained and gone
        out[index] = lifecycle.step(planner, row, facts)
    return out
