"""The number of Instances (OME's instances.md): Instances whose pods exist without a row are adopted (never orphan a
pod); missing ones are created at the lowest free index, in slow-start batches; extra ones drain, what serves least
first. Pure."""

from __future__ import annotations

from omenative.api.phases import CREATING, DELETING, MIGRATING, READY, UPDATING
from omenative.api.types import InstanceStatus
from omenative.controllers.inferencereplica.planner import ReplicaPlanner, lowest_free, new_operation

SLOW_START_INITIAL = 16


def adopt(planner: ReplicaPlanner, rows: dict[int, InstanceStatus]) -> None:
    """Instances whose pods exist without a row (a status write that was lost) get their row back, on the revision
    and incarnation their pods show."""
    view = planner.view
    for index, pods in view.pods.items():
        if index not in rows and any(not p.terminating for p in pods):
            live = [p for p in pods if not p.terminating]
            incarnation = max(p.incarnation for p in live)
            revision = next((p.revision for p in live if p.incarnation == incarnation), view.update_revision)
            rows[index] = InstanceStatus(index=index, incarnation=incarnation, phase=CREATING,
                                         target_revision=revision, running_revision=revision,
                                         operation=new_operation("Create", "CreatePods", view.now,
                                                                 view.ready_timeout, revision,
                                                                 "adopted existing pods"))


def scale(planner: ReplicaPlanner, rows: dict[int, InstanceStatus], taken: set[int], moving: set[int]) -> None:
    """Scales to the desired number of Instances (none while the replica itself is being deleted), changing `rows`
    in place. A surge's replacement stands in for its source, so the pair counts once; a migration's surge is not
    counted either."""
    view = planner.view
    targets = {r.operation.surge_index for r in rows.values()
               if r.phase == UPDATING and r.operation is not None and r.operation.surge_index is not None}
    active = [r for r in rows.values() if r.phase != DELETING and r.index not in targets and r.index not in moving]
    missing = (0 if view.deleting else view.replicas) - len(active)
    if view.paused and missing > 0:
        missing = 0  # no new Instance starts while the rollout is paused (scale-down goes ahead)
    # Slow start (the ReplicaSet controller's): Instances still waiting for their pods to be created hold back the
    # next ones, and the batch doubles as pods appear, so a refused create (quota, an admission webhook) stalls a
    # handful of Instances instead of thousands. Fleets up to SLOW_START_INITIAL Instances start at once.
    waiting = sum(1 for r in active if r.phase == CREATING
                  and len(view.pods.get(r.index or 0, [])) < view.pods_per_instance)
    allowed = max(SLOW_START_INITIAL, len(active) - waiting) - waiting
    for _ in range(max(min(missing, allowed), 0)):
        index = lowest_free(taken)
        taken.add(index)
        rows[index] = InstanceStatus(index=index, incarnation=1, phase=CREATING, target_revision=view.update_revision,
                                     operation=new_operation("Create", "CreatePods", view.now, view.ready_timeout,
                                                             view.update_revision, "scale up"))
    if missing < 0:
        # Remove what serves least first: Instances not Ready, then the highest index; a handover pair last.
        # A migrating Instance and its surge are kept.
        keep = [r for r in active if r.phase != MIGRATING and r.index not in planner.surges | moving]
        victims = sorted(keep, key=lambda r: (r.phase == UPDATING, r.phase == READY, -(r.index or 0)))[: -missing]
        reason = "teardown" if view.deleting else "scale down"
        for row in victims:
            rows[row.index or 0] = planner.delete(row, reason)
