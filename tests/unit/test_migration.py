"""Instance migration, pure parts: the request annotation, the InferenceReplica planner's state machine (walked
pass by pass, with the pods each pass would see), the surge's placement, the audit history and the webhook's check."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from omenative.api import migration_request
from omenative.api.times import format_time
from omenative.api.types import InstanceStatus, MigrationStatus
from omenative.controllers.inferencereplica import migration
from omenative.controllers.inferencereplica import plan as replica
from omenative.observe.pods import PodFacts
from omenative.observe.refusals import QUOTA_EXCEEDED, Refusal
from omenative.render import objects
from omenative.render.placement import allowed_nodes
from omenative.render.pods import InstanceRef, render_pod, slots
from omenative.webhook.server import migration_errors
from tests.unit.test_planners import NOW, gang, row, view

UUID = "3f9c2a1e-7b4d-4c8e-9a6f-2d1b5e8c4a70"
OTHER = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
KEY = migration_request.PREFIX + UUID
CAPS = migration.Caps(max_per_window=10, window=3600.0, max_in_flight=3)


def on(node: str, pods: list[PodFacts]) -> list[PodFacts]:
    return [attrs.evolve(p, node=node) for p in pods]


def request(instance: int = 0, from_node: str = "n1", uuid: str = UUID, **extra: Any) -> tuple[str, str]:
    body = {"schemaVersion": "v1", "component": "engine", "instance": instance, "from_node": from_node, **extra}
    return migration_request.PREFIX + uuid, json.dumps(body)


def two_ready() -> tuple[list[InstanceStatus], dict[int, list[PodFacts]]]:
    return [row(0, "Ready"), row(1, "Ready")], {0: on("n1", gang(0)), 1: on("n2", gang(1))}


def migrate(rows: list[InstanceStatus], pods: dict[int, list[PodFacts]], **fields: Any) -> replica.ReplicaPlan:
    fields.setdefault("migration_caps", CAPS)
    fields.setdefault("replicas", 2)
    return replica.plan(view(rows, pods, **fields))


def record_of(plan: replica.ReplicaPlan, uuid: str = UUID) -> MigrationStatus:
    return next(r for r in plan.migrations if r.request_uuid == uuid)


def reasons(plan: replica.ReplicaPlan) -> list[str]:
    return [e.reason for e in plan.events]


def test_a_migration_walks_surge_pending_ready_draining_to_completed() -> None:
    rows, pods = two_ready()
    first = migrate(rows, pods, migration_requests=(request(hint_target_nodes=["n3"]),))
    record = record_of(first)
    assert (record.phase, record.surge_instance, record.from_node, record.hint_target_nodes) == (
        "SurgePending", 2, "n1", ["n3"])
    assert record.deadline == format_time(NOW + 1800)
    by_index = {r.index: r for r in first.rows}
    assert by_index[0].phase == "Migrating" and by_index[2].phase == "Creating"
    assert by_index[2].target_revision == "rev1" and by_index[2].operation is not None
    assert by_index[2].operation.type == "Migrate"
    assert first.counts.replicas == 3, "CURRENT counts the surge"
    assert KEY in first.answered
    assert "MigrationRequestAccepted" in reasons(first)
    assert [a["phase"] for a in first.audit] == ["Started"]

    pods[2] = on("n3", gang(2))  # the surge's pods come up, off n1
    second = migrate(first.rows, pods, migrations=first.migrations)
    assert record_of(second).phase == "SurgeReady"
    assert {r.index: r.phase for r in second.rows} == {0: "Migrating", 1: "Ready", 2: "Ready"}, \
        "no scale-down takes the surge or its source"

    third = migrate(second.rows, pods, migrations=second.migrations)
    assert record_of(third).phase == "Draining"
    assert {r.index: r.phase for r in third.rows}[0] == "Deleting"

    del pods[0]  # the source drained and its pods are gone
    last = migrate(third.rows, pods, migrations=third.migrations)
    done = record_of(last)
    assert (done.phase, done.message, done.succeeded) == ("Completed", "migrated to instance=2", True)
    assert {r.index for r in last.rows} == {1, 2}
    completed = next(e for e in last.events if e.reason == "MigrationCompleted")
    assert completed.message == (f"OMENative migration uuid={UUID} complete: component=engine instance=0 -> "
                                 "instance=2 (revision=s-engine-rev1)")
    assert last.audit[-1]["phase"] == "Completed" and last.audit[-1]["replacementInstance"] == 2


def test_a_restarted_pass_answers_a_recorded_request_without_a_second_surge() -> None:
    rows, pods = two_ready()
    first = migrate(rows, pods, migration_requests=(request(),))
    again = migrate(first.rows, pods, migrations=first.migrations, migration_requests=(request(),))
    assert KEY in again.answered
    assert [r.index for r in again.rows] == [0, 1, 2]
    assert len(again.migrations) == 1 and "MigrationRequestAccepted" not in reasons(again)


@pytest.mark.parametrize(("req", "fields", "reason", "message"), [
    (request(from_node="n9"), {}, "MigrationFromNodeMismatch",
     "from_node=n9 does not host instance 0 (its pods run on n1)"),
    (request(), {"migration_mode": "Never"}, "MigrationRequestRejected",
     "migrations disabled by MigrationPolicy Mode=Never"),
    (request(instance=7), {}, "MigrationRequestRejected", "instance 7 does not exist"),
    (request(), {"migrations": [MigrationStatus(request_uuid=OTHER, phase="Completed",
                                                allocated_at=format_time(NOW - 60), completed_at=format_time(NOW))],
                 "migration_caps": migration.Caps(max_per_window=1, window=3600.0, max_in_flight=3)},
     "RateLimited", "migration rate cap reached (1/1 in the last 1h0m0s)"),
])
def test_a_request_that_cannot_be_met_fails_with_its_event(req: tuple[str, str], fields: dict[str, Any],
                                                           reason: str, message: str) -> None:
    rows, pods = two_ready()
    plan = migrate(rows, pods, migration_requests=(req,), **fields)
    record = record_of(plan)
    assert (record.phase, record.message) == ("Failed", message)
    assert reason in reasons(plan)
    assert {r.index: r.phase for r in plan.rows} == {0: "Ready", 1: "Ready"}


def test_without_caps_a_request_waits_with_the_event_and_condition() -> None:
    rows, pods = two_ready()
    plan = migrate(rows, pods, migration_requests=(request(),), migration_caps=migration.Caps())
    assert record_of(plan).phase == "Accepted"
    assert reasons(plan) == ["MigrationPolicyUnconfigured"]
    condition = next(c for c in plan.conditions if c.type == "MigrationPolicyUnconfigured")
    assert (condition.status, condition.reason) == ("True", "MigrationCapacityUnconfigured")
    again = migrate(plan.rows, pods, migrations=plan.migrations, migration_caps=migration.Caps())
    assert reasons(again) == [], "the wait is announced once"


def test_one_migration_of_a_component_at_a_time_oldest_first() -> None:
    rows, pods = two_ready()
    plan = migrate(rows, pods, migration_requests=(request(0, "n1", UUID), request(1, "n2", OTHER)))
    assert {r.request_uuid: r.phase for r in plan.migrations} == {UUID: "SurgePending", OTHER: "Accepted"}
    assert record_of(plan, OTHER).message == "waiting: another migration of the component is running"


@pytest.mark.parametrize("phase", ["Accepted", "SurgePending"])
def test_the_deadline_fails_the_migration_removes_the_surge_and_the_source_serves_on(phase: str) -> None:
    rows, pods = two_ready()
    started = migrate(rows, pods, migration_requests=(request(),),
                      migration_caps=CAPS if phase == "SurgePending" else migration.Caps())
    pods[2] = on("n3", gang(2, unschedulable_since=NOW, containers_ready=False))
    later = migrate(started.rows, pods, migrations=started.migrations, now=NOW + 1801,
                    migration_caps=CAPS if phase == "SurgePending" else migration.Caps())
    record = record_of(later)
    assert record.phase == "Failed" and record.message is not None
    assert record.message.startswith(f"deadline exceeded in phase {phase}: ")
    if phase == "Accepted":
        assert record.message.endswith("surge never allocated")
    assert "MigrationExpired" in reasons(later)
    states = {r.index: r.phase for r in later.rows}
    assert states[0] == "Ready" and states.get(2) in (None, "Deleting")


def test_a_failed_migration_leaves_a_source_whose_pods_are_not_ready_failed() -> None:
    """OME's migration page: the source goes back to Ready, or to Failed if its pods aren't ready."""
    rows, pods = two_ready()
    started = migrate(rows, pods, migration_requests=(request(),))
    pods[0] = on("n1", gang(0, containers_ready=False, gate=False))  # the source's worker broke meanwhile
    pods[2] = on("n3", gang(2, unschedulable_since=NOW, containers_ready=False))
    later = migrate(started.rows, pods, migrations=started.migrations, now=NOW + 1801)
    assert record_of(later).phase == "Failed"
    source = next(r for r in later.rows if r.index == 0)
    assert source.phase == "Failed" and source.operation is None
    assert source.last_failure is not None and source.last_failure.reason == "MigrationFailed"


def test_a_refused_surge_is_said_once_and_waits_for_the_deadline() -> None:
    """OME's MigrationSurgeCreateBlocked: the API server refuses a surge pod (a full quota); OME retries until the
    deadline."""
    rows, pods = two_ready()
    first = migrate(rows, pods, migration_requests=(request(),))
    quota = Refusal(cause=QUOTA_EXCEEDED, verb="create", kind="Pod", name="s-engine-2-leader-0",
                    message='pods "s-engine-2-leader-0" is forbidden: exceeded quota: q', at=NOW, since=NOW,
                    incarnation=1)
    blocked = migrate(first.rows, pods, migrations=first.migrations, refusals={2: quota})
    record = record_of(blocked)
    assert record.phase == "SurgePending"
    assert record.message == "waiting: surge create refused: pod create refused: exceeded quota: q"
    assert [e.message for e in blocked.events if e.reason == "MigrationSurgeCreateBlocked"] == [
        f"OMENative migration uuid={UUID} surge instance=2 create blocked: pod create refused: exceeded quota: q; "
        "retrying until the deadline"]
    again = migrate(blocked.rows, pods, migrations=blocked.migrations, refusals={2: quota}, now=NOW + 30)
    assert "MigrationSurgeCreateBlocked" not in reasons(again) and record_of(again).phase == "SurgePending"


def test_a_wedged_surge_fails_the_migration_as_wedged() -> None:
    rows, pods = two_ready()
    started = migrate(rows, pods, migration_requests=(request(),))
    pods[2] = on("n3", gang(2, wedged="CrashLoopBackOff", containers_ready=False, created=NOW - 120))
    failed = migrate(started.rows, pods, migrations=started.migrations)
    assert "MigrationSurgeWedged" in reasons(failed)
    assert record_of(failed).phase == "Failed"
    assert {r.index: r.phase for r in failed.rows} == {0: "Ready", 1: "Ready", 2: "Deleting"}


def test_a_paused_rollout_holds_the_start_and_the_drain() -> None:
    rows, pods = two_ready()
    held = migrate(rows, pods, migration_requests=(request(),), paused=True)
    assert (record_of(held).phase, record_of(held).message) == ("Accepted", "waiting: the rollout is paused")
    started = migrate(rows, pods, migration_requests=(request(),))
    pods[2] = on("n3", gang(2))
    ready = migrate(started.rows, pods, migrations=started.migrations)
    paused = migrate(ready.rows, pods, migrations=ready.migrations, paused=True)
    assert record_of(paused).phase == "SurgeReady" and {r.index: r.phase for r in paused.rows}[0] == "Migrating"


def test_ended_records_leave_the_status_after_the_window() -> None:
    old = MigrationStatus(request_uuid=OTHER, phase="Completed", completed_at=format_time(NOW - 7200))
    rows, pods = two_ready()
    plan = migrate(rows, pods, migrations=[old])
    assert plan.migrations == []


def test_the_surge_avoids_the_node_it_leaves_and_prefers_the_hints() -> None:
    runners = [{"name": "default", "template": {"spec": {"containers": [{"name": "c"}], "affinity": {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}}}}}]
    ref = InstanceRef(isvc="s", namespace="ns", component="engine", index=2, incarnation=1, revision="r", replicas=2,
                      avoid_nodes=("n1",), prefer_nodes=("n3",))
    affinity = render_pod(ref, slots(runners)[0], runners)["spec"]["affinity"]["nodeAffinity"]
    (term,) = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "gpu", "operator": "Exists"}]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]
    (preferred,) = affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["preference"]["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]
    records = [MigrationStatus(request_uuid=UUID, phase="SurgePending", surge_instance=2, from_node="n1",
                               hint_target_nodes=["n3"])]
    assert migration_request.placement(records, 2) == (("n1",), ("n3",))
    assert migration_request.placement([attrs.evolve(records[0], phase="Completed")], 2) == ((), ())


@pytest.mark.parametrize(("value", "error"), [
    ("{", "the value is not JSON"),
    ('{"schemaVersion":"v2","component":"engine","instance":0,"from_node":"a"}', 'schemaVersion must be "v1"'),
    ('{"schemaVersion":"v1","component":"worker","instance":0,"from_node":"a"}', "component must be"),
    ('{"schemaVersion":"v1","component":"engine","instance":-1,"from_node":"a"}', "instance must be an integer"),
    ('{"schemaVersion":"v1","component":"engine","instance":0}', "from_node must be a node name"),
    ('{"schemaVersion":"v1","component":"engine","instance":0,"from_node":"a","hint_target_nodes":["a"]}',
     "must not repeat a node or name from_node"),
    ('{"schemaVersion":"v1","component":"engine","instance":0,"from_node":"a","extra":1}', "unknown field(s) extra"),
])
def test_a_malformed_request_gets_a_message_starting_migration_request(value: str, error: str) -> None:
    parsed = migration_request.parse(KEY, value)
    assert isinstance(parsed, str) and parsed.startswith(f"migration request {UUID}: ") and error in parsed


def test_a_request_round_trips_through_its_value() -> None:
    req = migration_request.Request(uuid=UUID, component="decoder", instance=3, from_node="n1", hints=("n2", "n3"),
                                    reason="maintenance", requested_by="kubectl-ome")
    assert migration_request.parse(KEY, req.value()) == req
    assert isinstance(migration_request.parse(migration_request.PREFIX + "NOT-A-UUID", req.value()), str)


def test_the_webhook_judges_only_requests_this_write_adds_or_changes() -> None:
    spec = {"engine": {}, "decoder": {}}
    bad = {"metadata": {"annotations": {KEY: "{"}}, "spec": spec}
    assert migration_errors(bad, {})[0].startswith("migration request")
    assert migration_errors(bad, bad) == [], "one already stored is not judged again"
    router = {"metadata": {"annotations": {KEY: migration_request.Request(
        uuid=UUID, component="router", instance=0, from_node="n1").value()}}, "spec": spec}
    assert migration_errors(router, {}) == [f"migration request {UUID}: the InferenceService has no router"]


def test_the_audit_history_upserts_by_id_and_keeps_the_last_ended() -> None:
    history = objects.merge_migration_history(None, [{"id": "a", "phase": "Started", "acceptedAt": "t0"}])
    history = objects.merge_migration_history(history, [
        {"id": "a", "phase": "Completed", "at": "t1"}, {"id": "b", "phase": "Failed"}, {"id": "c", "phase": "Started"}])
    entries = json.loads(history)
    assert [(e["id"], e["phase"]) for e in entries] == [("a", "Completed"), ("b", "Failed"), ("c", "Started")]
    assert entries[0]["acceptedAt"] == "t0"
    trimmed = json.loads(objects.merge_migration_history(history, [], limit=1))
    assert [e["id"] for e in trimmed] == ["b", "c"], "the oldest ended entry goes; a running one stays"
    assert objects.merge_migration_history("not json", [{"id": "x", "phase": "Started"}]) == \
        '[{"id":"x","phase":"Started"}]'


def test_a_deadline_passing_during_a_pause_fails_the_request_at_the_resume() -> None:
    rows, pods = two_ready()
    held = migrate(rows, pods, migration_requests=(request(),), paused=True)
    still = migrate(held.rows, pods, migrations=held.migrations, paused=True, now=NOW + 4000)
    assert record_of(still).phase == "Accepted"
    resumed = migrate(still.rows, pods, migrations=still.migrations, now=NOW + 4001)
    assert record_of(resumed).phase == "Failed" and "MigrationExpired" in reasons(resumed)


@pytest.mark.parametrize(("args", "message"), [
    (("007", "engine", None, [], None, "kubectl-ome", None),
     "instance must be a canonical integer from 0 through 2147483647"),
    (("-1", "engine", None, [], None, "kubectl-ome", None),
     "instance must be a canonical integer from 0 through 2147483647"),
    (("0", "worker", None, [], None, "kubectl-ome", None), "invalid migration request values; use --help"),
    (("0", "engine", None, [], "see https://x", "kubectl-ome", None), "invalid migration request values; use --help"),
    (("0", "engine", None, [], None, "me and you", None), "invalid migration request values; use --help"),
    (("0", "engine", "n1", ["n2,n1"], None, "kubectl-ome", None), "invalid migration node hints"),
    (("0", "engine", None, ["a,a"], None, "kubectl-ome", None), "invalid migration node hints"),
    (("0", "engine", None, [], None, "kubectl-ome", "not-a-uuid"), "invalid migration request values; use --help"),
])
def test_migration_start_refuses_bad_flags_before_any_read(args: tuple[Any, ...], message: str) -> None:
    from omenative.kubectl_ome.common import Refused
    from omenative.kubectl_ome.migration import check_flags

    with pytest.raises(Refused, match=f"^{message}$") as refused:
        check_flags(*args)
    assert refused.value.code == 1


def test_migration_start_takes_hints_comma_separated_or_repeated() -> None:
    from omenative.kubectl_ome.migration import check_flags

    assert check_flags("12", "decoder", "n1", ["n2,n3", "n4"], "node-a maintenance", "alfred", UUID) == (
        12, ["n2", "n3", "n4"])


@pytest.mark.parametrize(("spec", "runtime", "expected"), [
    ({"minReplicas": 2, "maxReplicas": 4, "autoscaler": {"class": "External"}}, {}, ("External", "isvc", (2, 4))),
    ({"minReplicas": 2}, {}, ("HPA", "default", (2, 2))),  # no maxReplicas: only the minimum
    ({}, {"engineConfig": {"minReplicas": 1, "maxReplicas": 3, "autoscaler": {"class": "None"}}},
     ("None", "runtime", (1, 3))),
    ({"minReplicas": 0}, {}, ("HPA", "default", (1, 1))),
])
def test_scale_bounds_and_ownership_come_from_the_service_then_the_runtime(
        spec: dict[str, Any], runtime: dict[str, Any], expected: tuple[str, str, tuple[int, int]]) -> None:
    from omenative.kubectl_ome.scale import ownership

    assert ownership({"spec": {"engine": spec}}, runtime, "engine") == expected


@pytest.mark.parametrize(("spec", "allowed"), [
    ({}, None),
    ({"nodeName": "n1"}, frozenset({"n1"})),
    ({"nodeSelector": {"kubernetes.io/hostname": "n1", "gpu": "a100"}}, frozenset({"n1"})),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1", "n2"]}]}]}}}},
     frozenset({"n1", "n2"})),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}}, None),  # a term allows any
])
def test_the_nodes_a_template_allows(spec: dict[str, Any], allowed: frozenset[str] | None) -> None:
    assert allowed_nodes([{"name": "default", "size": 1, "template": {"spec": spec}}]) == allowed


def test_a_source_pinned_to_its_node_is_refused_with_node_affinity_conflict() -> None:
    rows, pods = two_ready()
    plan = migrate(rows, pods, migration_requests=(request(),), allowed_nodes={"rev1": frozenset({"n1"})})
    record = record_of(plan)
    assert (record.phase, record.message) == (
        "Failed", "instance 0's node affinity requires node n1, which a surge must leave")
    assert "MigrationNodeAffinityConflict" in reasons(plan)
    assert {r.index: r.phase for r in plan.rows} == {0: "Ready", 1: "Ready"}
