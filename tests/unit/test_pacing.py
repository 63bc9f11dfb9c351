"""Table tests of the rollout group's pacing of one InferenceReplica (spec.pacing, spec.paused, spec.pauseMode):
partition, the group's budget, a pause that holds updates, creates, drains and clocks, and a freeze that holds
repairs too."""

from __future__ import annotations

import attrs
import pytest

from omenative.api.types import InstanceOperation, InstanceStatus
from omenative.controllers.inferencereplica import plan as replica
from tests.unit.test_planners import NOW, gang, outdated, phases, view


def four_outdated() -> tuple[list[InstanceStatus], dict[int, list]]:
    return [outdated(i) for i in range(4)], {i: gang(i) for i in range(4)}


@pytest.mark.parametrize(("partition", "moving"), [(0, {0}), (3, {3}), (4, set())])
def test_partition_keeps_the_lowest_indexes_on_their_revision(partition: int, moving: set[int]) -> None:
    rows, pods = four_outdated()
    plan = replica.plan(view(rows, pods, replicas=4, max_surge=1, partition=partition))
    assert {i for i, (phase, _) in phases(plan).items() if phase == "Updating"} == moving


def test_the_group_budget_caps_the_strategy_budget() -> None:
    rows, pods = four_outdated()
    free = replica.plan(view(rows, pods, replicas=4, max_surge=4))
    paced = replica.plan(view(rows, pods, replicas=4, max_surge=4, pacing_budget="25%"))
    assert sum(p == "Updating" for p, _ in phases(free).values()) == 4
    assert sum(p == "Updating" for p, _ in phases(paced).values()) == 1


def test_a_staged_replica_is_ready_with_the_staged_reason() -> None:
    rows = [outdated(0), InstanceStatus(index=1, phase="Ready", incarnation=1, target_revision="rev1",
                                        running_revision="rev1")]
    plan = replica.plan(view(rows, {0: gang(0), 1: gang(1)}, replicas=2, partition=1))
    ready = next(c for c in plan.conditions if c.type == "Ready")
    assert (ready.status, ready.reason, ready.message) == (
        "True", "Staged", "Staged at partition 1: 1/2 Instances on s-engine-rev1, 1 held on the prior revision")


def test_a_pause_starts_no_update_and_no_new_instance_but_scale_down_goes_ahead() -> None:
    rows, pods = four_outdated()
    paused = replica.plan(view(rows, pods, replicas=6, max_surge=4, paused=True))
    assert phases(paused) == dict.fromkeys(range(4), ("Ready", 1))
    down = replica.plan(view(rows, pods, replicas=3, paused=True, max_surge=0))
    assert phases(down)[3] == ("Deleting", 1)


def test_a_paused_surge_keeps_its_source_serving_until_the_resume() -> None:
    source = attrs.evolve(outdated(0), phase="Updating", operation=InstanceOperation(
        type="Update", step="Surge", surge_index=1))
    target = InstanceStatus(index=1, phase="Ready", incarnation=1, target_revision="rev1", running_revision="rev1")
    paused = replica.plan(view([source, target], {0: gang(0), 1: gang(1)}, paused=True))
    assert phases(paused) == {0: ("Updating", 1), 1: ("Ready", 1)}
    resumed = replica.plan(view([source, target], {0: gang(0), 1: gang(1)}))
    assert phases(resumed) == {0: ("Deleting", 1), 1: ("Ready", 1)}


def test_a_pause_stops_the_readiness_deadline_and_the_resume_restarts_it_in_full() -> None:
    creating = InstanceStatus(index=0, phase="Creating", incarnation=1, target_revision="rev1", operation=
                              InstanceOperation(type="Create", step="CreatePods", deadline="2020-01-01T00:00:00Z"))
    paused = replica.plan(view([creating], {0: gang(0, containers_ready=False)}, paused=True))
    (row,) = paused.rows
    assert row.phase == "Creating" and row.operation is not None
    assert (row.operation.waiting, row.operation.deadline) == ("Paused", None)
    resumed = replica.plan(view(paused.rows, {0: gang(0, containers_ready=False)}, now=NOW + 5000))
    (after,) = resumed.rows
    assert after.phase == "Creating" and after.operation is not None and after.operation.waiting is None
    assert after.operation.deadline == replica.format_time(NOW + 5000 + 1800)


def test_a_freeze_starts_no_repair_but_true_lets_the_restart_policy_repair() -> None:
    ready = InstanceStatus(index=0, phase="Ready", incarnation=1, target_revision="rev1", running_revision="rev1")
    failed_worker = [gang(0)[0], attrs.evolve(gang(0)[1], phase="Failed")]
    repaired = replica.plan(view([ready], {0: failed_worker}, paused=True))
    assert phases(repaired) == {0: ("Restarting", 2)}
    frozen = replica.plan(view([ready], {0: failed_worker}, paused=True, freeze=True))
    assert phases(frozen) == {0: ("Ready", 1)}


def test_a_surge_whose_revision_is_no_longer_the_target_is_abandoned() -> None:
    """A rollback (or a newer revision) before the replacement is Ready: the replacement goes, the source serves on."""
    source = attrs.evolve(outdated(0), phase="Updating", operation=InstanceOperation(
        type="Update", step="Surge", surge_index=1))
    target = InstanceStatus(index=1, phase="Creating", incarnation=1, target_revision="rev1",
                            operation=InstanceOperation(type="Update", step="GangSurgeTarget"))
    back = replica.plan(view([source, target], {0: gang(0)}, update_revision="rev0"))
    assert phases(back) == {0: ("Ready", 1), 1: ("Deleting", 1)}
    assert [e.reason for e in back.events] == ["GangSurgeAbandoned"]
