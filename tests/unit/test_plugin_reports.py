"""`kubectl ome status`, `wait` and `version` reports, built from objects (the reference's rules, case by case)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from omenative.api.types import InstanceOperation, InstanceStatus, LastFailure
from omenative.kubectl_ome import get, status, version, wait
from omenative.kubectl_ome.instance import refusal, row_evidence

NOW = dt.datetime(2026, 12, 3, 12, 0, tzinfo=dt.UTC)


def cond(kind: str, status: str, when: str = "2026-12-03T11:00:00Z", **extra: str) -> dict[str, Any]:
    return {"type": kind, "status": status, "lastTransitionTime": when, **extra}


@pytest.mark.parametrize(("conditions", "expected"), [
    (None, ("NotRecorded", "Unavailable", ())),
    ([], ("NotRecorded", "Unavailable", ())),
    ([cond("Ready", "False", reason="ComponentNotReady")], ("False", "Valid", ())),
    ([cond("Ready", "True"), cond("Ready", "True")], ("True", "Valid", ("DuplicateReadyConditions",))),
    ([cond("Ready", "True"), cond("Ready", "False")], ("True", "Invalid", ("ConflictingReadyConditions",))),
    ([cond("Ready", "True", when="2026-12-03T13:00:00Z")], ("True", "Invalid", ("FutureConditionTimestamp",))),
    ([cond("Ready", "Maybe")], ("NotRecorded", "Invalid", ("InvalidConditionRecord",))),
    (["not a record", cond("Ready", "True")], ("True", "Valid", ("InvalidConditionRecord",))),
])
def test_the_ready_condition_is_inspected_as_the_reference_says(conditions: Any, expected: tuple[Any, ...]) -> None:
    view = status.inspect_condition(conditions, "Ready", NOW)
    assert (view.status, view.validity, view.warnings) == expected


@pytest.mark.parametrize(("text", "shown"), [
    ("pods are not ready", "pods are not ready"),
    ("pulling https://example.invalid/model", "[OMITTED]"),
    ("login failed: password=hunter2", "[REDACTED]"),
    (None, ""),
])
def test_reasons_and_messages_are_masked(text: str | None, shown: str) -> None:
    assert status.mask(text) == shown


def pod(name: str, component: str | None, *, ready: bool, phase: str = "Running", restarts: int = 0,
        deleting: bool = False) -> dict[str, Any]:
    labels = {"ome.io/inferenceservice": "svc"} | ({"component": component} if component else {})
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-03T11:59:00Z"
    return {"metadata": meta, "status": {"phase": phase, "containerStatuses": [{"restartCount": restarts}],
                                         "conditions": [{"type": "Ready", "status": str(ready)}]}}


def event(kind: str, name: str, reason: str, when: str, type_: str = "Warning") -> dict[str, Any]:
    return {"type": type_, "reason": reason, "message": f"{reason} on {name}", "count": 2, "lastTimestamp": when,
            "involvedObject": {"kind": kind, "name": name}}


ISVC = {"metadata": {"name": "svc", "namespace": "ns", "generation": 3},
        "spec": {"engine": {}, "router": {}, "model": {"name": "m"}},
        "status": {"observedGeneration": 3, "conditions": [
            cond("Ready", "False", reason="EngineNotReady", message="1 of 2 pods ready"),
            cond("EngineReady", "False"), cond("RouterReady", "True")]}}


def test_the_status_report_counts_pods_per_component_and_keeps_the_warning_events_newest_first() -> None:
    pods = [pod("svc-engine-0-leader-0", "engine", ready=True, restarts=1),
            pod("svc-engine-0-worker-0", "engine", ready=False, phase="Pending"),
            pod("svc-router-0-default-0", "router", ready=True, deleting=True),
            pod("stray", None, ready=True)]
    events = [event("Pod", "svc-engine-0-worker-0", "FailedScheduling", "2026-12-03T11:58:00Z"),
              event("InferenceService", "svc", "InstanceUnschedulable", "2026-12-03T11:59:00Z"),
              event("Pod", "other-service-pod", "BackOff", "2026-12-03T11:59:30Z"),
              event("Pod", "svc-engine-0-leader-0", "Started", "2026-12-03T11:59:40Z", type_="Normal")]
    content = status.status_report(ISVC, pods, events, now=NOW)
    rows = status.status_rows(content, wide=False)
    table = dict(rows)
    assert table["Ready"] == "False / Valid" and table["Ready reason"] == "EngineNotReady"
    assert table["engine"] == "False / Valid; Ready pods=1/2 restarts=1"
    assert table["router"] == "True / Valid; Ready pods=1/1 restarts=0"
    assert table["Pod observation"] == "Partial count=3 truncated=false MalformedPayload"
    assert [r for r in rows if r[0].startswith("Warning")] == [
        ("Warning Inference...", "svc InstanceUnschedulable"),
        ("Warning Pod", "svc-engine-0-worker-0 FailedScheduling")]
    assert ("Issue", "UnsupportedComponent") in rows
    wide = dict(status.status_rows(content, wide=True))
    assert wide["router phases"] == "R=1 P=0 F=0 S=0 U=0 deleting=1"
    assert wide["Ready message"] == "1 of 2 pods ready"


def test_a_failed_pod_read_leaves_a_report_that_says_so() -> None:
    content = status.status_report(ISVC, None, [], now=NOW, pod_error="Forbidden")
    table = dict(status.status_rows(content, wide=True))
    assert table["Pod observation"] == "Unavailable count=0 truncated=true Forbidden"
    assert table["engine evidence"] == "Unavailable"


def test_events_are_read_for_at_most_fifteen_pods_unready_ones_first() -> None:
    pods = [pod(f"svc-engine-{i}-default-0", "engine", ready=i != 16) for i in range(20)]
    targets, skipped = status.event_targets(pods)
    assert len(targets) == 15 and skipped == 5 and targets[0]["metadata"]["name"] == "svc-engine-16-default-0"


@pytest.mark.parametrize(("status", "matched", "reason"), [
    ("True", False, "ConditionNotMatched"), ("False", True, "ConditionMatched"),
])
def test_a_condition_wait_matches_only_the_requested_status(status: str, matched: bool, reason: str) -> None:
    check = wait.check_condition(wait.Predicate("condition", status=status), ISVC, NOW)
    assert (check.matched, check.reason) == (matched, reason)


def replica(spec_replicas: int, current: int, ready: int, *, generation: int = 2, observed: int = 2) -> dict[str, Any]:
    return {"metadata": {"name": "svc-engine", "uid": "u1", "generation": generation},
            "spec": {"component": "engine", "replicas": spec_replicas},
            "status": {"observedGeneration": observed, "replicas": current, "readyReplicas": ready}}


@pytest.mark.parametrize(("predicate", "ir", "matched", "reason"), [
    (wait.Predicate("replicas-ready", component="engine", replicas=2), replica(2, 2, 2), True,
     "ReplicaReadyMatched"),
    (wait.Predicate("replicas-ready", component="engine", replicas=2), replica(2, 2, 1), False,
     "ReplicaReadyNotMatched"),
    (wait.Predicate("replicas-ready", component="engine", replicas=2), replica(2, 2, 2, observed=1), False,
     "ReplicaReadyNotRecorded"),
    (wait.Predicate("replicas-current", component="engine", replicas=3), replica(3, 2, 2), False,
     "ReplicaScaleNotMatched"),
    (wait.Predicate("replicas-current", component="engine", replicas=3), replica(3, 3, 1), True,
     "ReplicaScaleMatched"),
    (wait.Predicate("replicas-current", component="engine", replicas=3), None, False, "ReplicaScaleNotRecorded"),
])
def test_replica_waits_read_a_fresh_inferencereplica(predicate: wait.Predicate, ir: Any, matched: bool,
                                                     reason: str) -> None:
    check = wait.check_replicas(predicate, ir)
    assert (check.matched, check.reason) == (matched, reason)


@pytest.mark.parametrize(("text", "component", "replicas", "error"), [
    (None, None, None, "InvalidWaitPredicate"),
    ("condition=Ready", "engine", None, "InvalidReadyReplicaFlags"),
    ("replicas=ready", None, 1, "InvalidReadyReplicaFlags"),
    ("replicas=current", "engine", 0, "InvalidCurrentReplicaFlags"),
    ("migration=terminal", None, None, "InvalidMigrationWaitFlags"),
    ("held-revision=unheld", "engine", None, "InvalidHeldRevisionFlags"),
    ("runtime-sync=acknowledged", None, None, "UnsupportedWaitPredicate"),
    ("rollout=stable", "engine", None, "InvalidWaitFlags"),
])
def test_bad_wait_flags_are_refused_with_the_documented_message(text: str | None, component: str | None,
                                                                replicas: int | None, error: str) -> None:
    with pytest.raises(wait.InvalidWait, match=f"^{error}"):
        wait.parse_predicate(text, component, replicas)


HELD = wait.Predicate("held-revision", component="engine", revision="svc-engine-abcd1234", ir_name="svc-engine",
                      ir_uid="ir-1")


def held_replica(state: str | None = "Held", mailbox: str | None = None, **meta: Any) -> dict[str, Any]:
    annotations = {"ome.io/release-held-revision": mailbox} if mailbox else {}
    blocks = [{"targetRevision": "svc-engine-abcd1234", "state": state, "attemptsStarted": 3}] if state else []
    return {"metadata": {"name": "svc-engine", "uid": "ir-1", "generation": 2, "annotations": annotations,
                         "ownerReferences": [{"uid": "isvc-1"}], **meta},
            "spec": {"component": "engine"}, "status": {"observedGeneration": 2, "retryBlocks": blocks}}


@pytest.mark.parametrize(("replica", "matched", "reason", "target", "mailbox"), [
    (held_replica("Held"), False, "Held", "Held", "Absent"),
    (held_replica("Held", mailbox="svc-engine-abcd1234"), False, "Held", "Held", "Pending"),
    (held_replica("Backoff", mailbox="svc-engine-abcd1234"), False, "MailboxPending", "Backoff", "Pending"),
    (held_replica(None, mailbox="svc-engine-other"), False, "MailboxSuperseded", "Absent", "Superseded"),
    (held_replica(None), True, "Unheld", "Absent", "Absent"),
    (held_replica("RetryInProgress"), True, "Unheld", "RetryInProgress", "Absent"),
    (held_replica(None, uid="ir-2"), False, "ReplicaReplaced", "Unknown", "Unknown"),
    (held_replica(None, deletionTimestamp="2026-12-07T00:00:00Z"), False, "Deleting", "Unknown", "Unknown"),
    (held_replica(None, generation=3), False, "SourceStale", "Unknown", "Unknown"),
    (None, False, "ReplicaMissing", "Unknown", "Unknown"),
])
def test_held_revision_unheld_matches_once_the_block_is_not_held_and_no_release_is_pending(
        replica: Any, matched: bool, reason: str, target: str, mailbox: str) -> None:
    check = wait.check_held(HELD, replica, {"metadata": {"uid": "isvc-1"}})
    assert (check.matched, check.reason, check.observed["targetState"], check.observed["mailbox"]) == (
        matched, reason, target, mailbox)
    report = wait.wait_report("ns", "svc", HELD, "Matched" if matched else "TimedOut", check, elapsed_ms=1, reads=2,
                              polls=0, source="InitialGET")
    rows = dict(wait.wait_rows(report))
    assert (rows["Requested"], rows["Revision"], rows["Target state"], rows["Mailbox"], rows["Reason"]) == (
        "HeldRevision=Unheld", "svc-engine-abcd1234", target, mailbox, reason)


def test_held_revision_unheld_needs_its_four_flags() -> None:
    assert wait.parse_predicate("held-revision=unheld", "engine", None, None, "svc-engine-abcd1234", "svc-engine",
                                "ir-1") == HELD
    for missing in range(3):
        flags: list[str | None] = ["svc-engine-abcd1234", "svc-engine", "ir-1"]
        flags[missing] = None
        with pytest.raises(wait.InvalidWait, match=r"^InvalidHeldRevisionFlags"):
            wait.parse_predicate("held-revision=unheld", "engine", None, None, *flags)


def test_a_timed_out_wait_report_has_the_last_check() -> None:
    predicate = wait.parse_predicate("condition=Ready", None, None)
    check = wait.check_condition(predicate, ISVC, NOW)
    report = wait.wait_report("ns", "svc", predicate, "TimedOut", check, elapsed_ms=3000, reads=2, polls=1,
                                 source="Poll")
    table = dict(wait.wait_rows(report))
    assert (table["Service"], table["Requested"], table["Outcome"], table["Reason"], table["Observed Ready"]) == (
        "ns/svc", "Ready=True", "TimedOut", "ConditionNotMatched", "False")
    assert report["kind"] == "WaitReport" and report["apiVersion"] == "cli.ome.io/v1alpha1"


def deployment(*images: tuple[str, str]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"containers": [{"name": n, "image": i} for n, i in images]}}}}


@pytest.mark.parametrize(("found", "shown"), [
    (deployment(("omenative", "registry.example/omenative:0.1.0")), "0.1.0"),
    (deployment(("omenative", "omenative:0.1.0@sha256:abc")), "0.1.0@sha256:abc"),
    (deployment(("omenative", "registry.example:5000/omenative@sha256:abc")), "sha256:abc"),
    (deployment(("omenative", "registry.example:5000/omenative")), "unknown (image has no tag or digest)"),
    (deployment(("sidecar", "a:1"), ("proxy", "b:2")), "unknown (omenative container unavailable)"),
    (None, "unknown (get deployments.apps omenative-system/omenative: NotFound)"),
])
def test_the_operator_version_is_the_controllers_image_tag(found: Any, shown: str) -> None:
    assert version.operator_version(found, "get deployments.apps omenative-system/omenative: NotFound") == shown


def test_get_lists_inferenceservices_with_their_model_runtime_and_readiness() -> None:
    isvc = {"metadata": {"name": "svc", "namespace": "ns", "creationTimestamp": "2026-12-03T09:00:00Z"},
            "spec": {"model": {"name": "m"}}, "status": {"conditions": [cond("Ready", "True")]}}
    bare = {"metadata": {"name": "new", "namespace": "ns"}, "spec": {"runtime": {"name": "rt"}}}
    rows = get.get_table("inferenceservices", [("Namespaced", isvc), ("Namespaced", bare)], wide=False,
                             all_namespaces=True, now=NOW)
    assert rows == [["NAMESPACE", "NAME", "MODEL", "RUNTIME", "READY", "URL", "AGE"],
                    ["ns", "svc", "m", "-", "True", "-", "3h"], ["ns", "new", "-", "rt", "Unknown", "-", "-"]]


def test_get_merges_models_of_both_scopes_and_shows_a_stalled_rollout_first() -> None:
    model = {"metadata": {"name": "m"}, "spec": {"modelArchitecture": "LlamaForCausalLM"}}
    rows = get.get_table("models", [("Namespaced", model), ("Cluster", model)], wide=False, all_namespaces=False,
                             now=NOW)
    assert [r[:3] for r in rows] == [["NAME", "SCOPE", "ARCH"], ["m", "Namespaced", "LlamaForCausalLM"],
                                     ["m", "Cluster", "LlamaForCausalLM"]]
    stalled = replica(2, 2, 1) | {"status": {"replicas": 2, "readyReplicas": 1, "conditions": [
        cond("Ready", "False"), cond("RolloutStalled", "True", reason="Held")]}}
    (head, row) = get.get_table("inferencereplicas", [("Namespaced", stalled)], wide=True, all_namespaces=False,
                                    now=NOW)
    table = dict(zip(head, row, strict=True))
    assert (table["LIFECYCLE"], table["REASON"], table["DESIRED"], table["READY"]) == (
        "RolloutStalled=True", "Held", "2", "1")


@pytest.mark.parametrize(("created", "shown"), [
    ("2026-12-03T11:59:30Z", "30s"), ("2026-12-03T11:55:00Z", "5m"), ("2026-12-01T12:00:00Z", "2d"), (None, "-"),
])
def test_ages_read_like_kubectls(created: str | None, shown: str) -> None:
    assert get.age(created, NOW) == shown


def test_a_refusal_is_shown_whole_on_its_components_row() -> None:
    cause = ("Instance 0: pod create refused: exceeded quota: q, requested: pods=1, used: pods=1, "
             "limited: pods=1")
    content = status.status_report(ISVC, [pod("svc-engine-0-leader-0", "engine", ready=False)], [], now=NOW,
                                    refused={"engine": cause})
    table = dict(status.status_rows(content, wide=False))
    assert table["engine refused"] == cause and "router refused" not in table


def test_an_instance_that_cannot_progress_is_never_ok() -> None:
    held = InstanceStatus(index=0, phase="Creating", operation=InstanceOperation(type="Create",
                                                                                 waiting="QuotaExceeded"))
    failed = InstanceStatus(index=1, phase="Failed", last_failure=LastFailure(reason="InvalidPodSpec"))
    ready = InstanceStatus(index=2, phase="Ready")
    assert [row_evidence("OK", r) for r in (held, failed, ready)] == [
        "HOLD:QuotaExceeded", "FAILED:InvalidPodSpec", "OK"]
    assert row_evidence("STALE:1/2", held) == "STALE:1/2"  # stale rows say so first
    replica = {"status": {"conditions": [cond("ReplicaFailure", "True", reason="QuotaExceeded",
                                              message="Instance 0: pod create refused: exceeded quota: q")]}}
    assert refusal(replica) == "Instance 0: pod create refused: exceeded quota: q"
    assert refusal({"status": {"conditions": [cond("Ready", "True")]}}) is None
