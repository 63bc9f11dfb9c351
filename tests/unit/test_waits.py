"""The holds OME's Instances page names beside QuotaExceeded: PodGroupTerminating and NodeUnknown stop the readiness
clock while they last and give a full window after; SourceUnrouted names a surge source that left rotation before
its drain, with the clock running."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from omenative.api.times import format_time
from omenative.api.types import InstanceOperation, InstanceStatus
from omenative.controllers.inferencereplica import plan as replica
from omenative.observe.pods import pod_facts
from tests.unit.test_planners import NOW, gang, outdated, pod, row, view

pytestmark = pytest.mark.unit


def restarting() -> InstanceStatus:
    return row(0, "Restarting", incarnation=2, operation=InstanceOperation(
        type="Restart", step="Drain", started_at=format_time(NOW - 60), deadline=format_time(NOW + 60)))


def test_a_terminating_podgroup_stops_the_clock_until_it_is_gone() -> None:
    held = replica.plan(view([restarting()], {0: []}, podgroups_terminating=frozenset({0}))).rows[0]
    assert held.operation is not None and held.operation.waiting == "PodGroupTerminating"
    assert held.operation.deadline is None
    later = replica.plan(view([held], {0: []}, now=NOW + 900)).rows[0]
    assert later.phase == "Restarting" and later.operation is not None and later.operation.waiting is None
    assert later.operation.deadline == format_time(NOW + 900 + 1800)


def test_an_old_pod_on_a_node_that_stopped_reporting_stops_the_clock() -> None:
    stuck: Any = pod("s-engine-0-leader-0", runner="leader", incarnation=1, deleting=True)
    stuck["spec"]["nodeName"] = "lost-node"
    pods = {0: [pod_facts(stuck)]}
    held = replica.plan(view([restarting()], pods, unknown_nodes=frozenset({"lost-node"}))).rows[0]
    assert held.operation is not None and held.operation.waiting == "NodeUnknown" and held.operation.deadline is None
    # Another node's trouble does not hold it.
    free = replica.plan(view([restarting()], pods, unknown_nodes=frozenset({"other"}))).rows[0]
    assert free.operation is not None and free.operation.waiting is None and free.operation.deadline is not None
    # The node reports again (or the pod goes): a full window.
    back = replica.plan(view([held], {0: []}, now=NOW + 600)).rows[0]
    assert back.operation is not None and back.operation.waiting is None
    assert back.operation.deadline == format_time(NOW + 600 + 1800)


def test_a_surge_source_out_of_rotation_is_named_source_unrouted_with_the_clock_running() -> None:
    source = attrs.evolve(outdated(0), phase="Updating", operation=InstanceOperation(
        type="Update", step="Surge", surge_index=1, deadline=format_time(NOW + 300)))
    target = InstanceStatus(index=1, phase="Creating", incarnation=1, target_revision="rev1",
                            operation=InstanceOperation(type="Update", step="GangSurgeTarget"))
    unrouted = gang(0, gate=False)
    plan = replica.plan(view([source, target], {0: unrouted, 1: []}, replicas=1, max_surge=1))
    op = {r.index: r for r in plan.rows}[0].operation
    assert op is not None and op.waiting == "SourceUnrouted" and op.deadline == format_time(NOW + 300)
    # Back in rotation: the token goes.
    source_now = {r.index: r for r in plan.rows}[0]
    again = replica.plan(view([source_now, target], {0: gang(0), 1: []}, replicas=1, max_surge=1))
    back = {r.index: r for r in again.rows}[0].operation
    assert back is not None and back.waiting is None
