"""Automatic relocation (OME's migration page): a Failed Instance whose pods all ran on one node, for a cause not in
the workload, is rebuilt off that node, up to autoMigrate.maxAttempts times until it is next Ready; each move is a
born-terminal Relocated record in status.migrations that its pods avoid, with AutoMigrationTriggered and, at the
last, AutoMigrationCapReached."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from omenative.api.config import ControllerConfig
from omenative.api.migration_request import placement
from omenative.api.times import format_time
from omenative.api.types import InstanceOperation, LastFailure, MigrationStatus
from omenative.controllers.inferencereplica import plan as replica
from omenative.observe.pods import pod_facts
from tests.unit.test_planners import NOW, phases, pod, row, view

CONFIG = ControllerConfig(stuck_pod_grace_period="60s", unschedulable_grace_period="15m")


def failed(reason: str = "CrashLoopBackOff", incarnation: int = 1) -> Any:
    return row(0, "Failed", incarnation=incarnation,
               last_failure=LastFailure(reason=reason, time=format_time(NOW - 600)),
               operation=InstanceOperation(type="Create", retry_count=1))


def on(node: str | None, incarnation: int = 1) -> list[Any]:
    p = pod("s-engine-0-default-0", incarnation=incarnation, gate=False, containers_ready=False)
    p["spec"]["nodeName"] = node
    return [pod_facts(p)]


def relocate(records: list[MigrationStatus], incarnation: int = 1, node: str | None = "bad", reason: str =
             "CrashLoopBackOff", **fields: Any) -> replica.ReplicaPlan:
    return replica.plan(view([failed(reason, incarnation)], {0: on(node, incarnation)}, multi=False,
                             migrations=records, **{"config": CONFIG, **fields}))


def test_a_failure_on_one_node_is_rebuilt_off_it_until_the_cap() -> None:
    records: list[MigrationStatus] = []
    for attempt in (1, 2, 3):
        plan = relocate(records, incarnation=attempt)
        assert phases(plan) == {0: ("Creating", attempt + 1)}
        new = [r for r in plan.migrations if r not in records]
        assert [(r.trigger, r.phase, r.source_instance, r.from_node, r.attempt, r.reason) for r in new] == [
            ("Auto", "Relocated", 0, "bad", attempt, "CrashLoopBackOff")]
        reasons = [e.reason for e in plan.events]
        assert reasons == (["AutoMigrationTriggered", "AutoMigrationCapReached"] if attempt == 3 else
                           ["AutoMigrationTriggered"])
        assert plan.events[0].message == (
            "OMENative component=engine instance=0 relocated off node bad: its attempt failed there "
            f"(CrashLoopBackOff); relocation {attempt} of 3")
        records = plan.migrations
        # Rebuilt, the Instance avoids the node (and every node earlier relocations left).
        assert placement(records, 0) == (("bad",), ())
    plan = relocate(records, incarnation=4)
    assert phases(plan) == {0: ("Creating", 5)} and plan.events == [] and plan.migrations == records


def test_the_same_pass_after_a_crash_writes_the_same_record() -> None:
    assert relocate([]).migrations == relocate([]).migrations


@pytest.mark.parametrize(("fields", "why"), [
    ({"reason": "ImagePullBackOff"}, "a cause in the workload: the revision's retry block handles it"),
    ({"node": None}, "the pod never ran on a node"),
    ({"migration_mode": "Never"}, "moves are off for the component"),
    ({"config": attrs.evolve(CONFIG, auto_migrate_max_attempts=None)}, "relocation is off"),
])
def test_no_relocation_when_omes_rules_do_not_allow_one(fields: dict[str, Any], why: str) -> None:
    plan = relocate([], **fields)
    assert [r for r in plan.migrations if r.trigger == "Auto"] == [], why
    assert "AutoMigrationTriggered" not in [e.reason for e in plan.events], why


def test_once_ready_again_the_relocations_succeeded_and_no_longer_count() -> None:
    records = relocate([]).migrations
    ready = pod("s-engine-0-default-0", incarnation=2)
    ready["spec"]["nodeName"] = "good"
    creating = row(0, "Creating", incarnation=2, operation=InstanceOperation(type="Create"))
    plan = replica.plan(view([creating], {0: [pod_facts(ready)]}, multi=False, migrations=records, config=CONFIG))
    assert phases(plan) == {0: ("Ready", 2)}
    assert [(r.phase, r.succeeded) for r in plan.migrations] == [("Relocated", True)]
    assert placement(plan.migrations, 0) == ((), ())
