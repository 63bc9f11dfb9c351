"""`kubectl ome status`'s Rollout, Autoscaling, Placement, Traffic and Runtime sections, and `kubectl ome traffic
status`, built from objects: a prefill-decode service mid-canary, then the reference's edge cases."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from omenative.kubectl_ome import sections, status, traffic

NOW = dt.datetime(2026, 12, 7, 12, 0, tzinfo=dt.UTC)
Obj = dict[str, Any]


def scaler(klass: str = "HPA", managed: str = "ome", **counts: int) -> Obj:
    return {"class": klass, "managedBy": managed, "specSource": "runtime", **counts}


def mid_canary() -> Obj:
    """llama-pd at step 1 of 2 of a canary of its engine and decoder: 10% recorded, 1 of 4 Instances each."""
    target = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica"}
    return {
        "metadata": {"name": "llama-pd", "namespace": "llama-demo", "generation": 4, "uid": "u"},
        "spec": {"engine": {}, "decoder": {}, "router": {}, "model": {"name": "llama"}, "runtime": {"name": "srt-pd"},
                 "rollout": {"groups": [{"components": ["engine", "decoder"], "canary": {"steps": [
                     {"capacity": "25%", "traffic": 10, "pause": {}}, {"capacity": "100%", "traffic": 100}]}}]}},
        "status": {
            "observedGeneration": 4, "url": "http://llama-pd.llama-demo.svc.cluster.local",
            "address": {"url": "http://llama-pd.llama-demo.svc.cluster.local"},
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-07T11:00:00Z"}],
            "canary": {"currentStep": 0, "observedTrafficWeight": 10, "canaryRevisionHash": "bbbb2222"},
            "components": {
                "engine": {"rolloutPhase": "Paused", "autoscaler": scaler(currentReplicas=4, desiredReplicas=4),
                           "scaleTargetRef": {**target, "name": "llama-pd-engine"},
                           "canary": {"currentStep": 0, "observedTrafficWeight": 10, "canaryRevisionHash": "bbbb2222"},
                           "latestRolledoutRevision": "llama-pd-engine-rev-aaaa1111",
                           "traffic": [{"revisionName": "llama-pd-engine-rev-bbbb2222", "percent": 10,
                                        "tag": "canary", "latestRevision": True},
                                       {"revisionName": "llama-pd-engine-rev-aaaa1111", "percent": 90,
                                        "tag": "stable", "latestRevision": False}]},
                "decoder": {"autoscaler": scaler(currentReplicas=4, desiredReplicas=4),
                            "scaleTargetRef": {**target, "name": "llama-pd-decoder"},
                            "latestRolledoutRevision": "llama-pd-decoder-rev-cccc3333",
                            "traffic": [{"revisionName": "llama-pd-decoder-rev-dddd4444", "percent": 25,
                                         "tag": "latest", "latestRevision": True},
                                        {"revisionName": "llama-pd-decoder-rev-cccc3333", "percent": 75,
                                         "tag": "previous", "latestRevision": False}]},
                "router": {"autoscaler": scaler("None", "none"),
                           "scaleTargetRef": {**target, "name": "llama-pd-router"},
                           "traffic": [{"revisionName": "llama-pd-router-rev-eeee5555", "percent": 100,
                                        "tag": "latest", "latestRevision": True}]}}}}


def test_the_traffic_status_of_a_canary_shows_its_step_and_every_revisions_weight() -> None:
    content = traffic.traffic_report(mid_canary())
    rows = traffic.traffic_rows(content, wide=False)
    assert rows[1] == ["STATE", "-", "Unavailable", "Computed/Unverifiable"]  # no traffic policy is written
    assert ["CANARY", "engine", "1/2 @ 10%", "Reported/Unverifiable"] in rows
    weights = [r[1:3] for r in rows if r[0] == "WEIGHT"]
    assert weights == [["engine", "stable:aaaa1111=90%"], ["engine", "canary:bbbb2222=10%"],
                       ["decoder", "stable:cccc3333=75%"], ["decoder", "other:dddd4444=25%"],
                       ["router", "stable:eeee5555=100%"]]
    assert [r[1:3] for r in rows if r[0] == "ISSUE"] == [["-", "TrafficStatusMissing"]]
    assert ["ENDPOINTS", "-", "1", "Reported/Unverifiable"] in rows
    wide = traffic.traffic_rows(content, wide=True)
    assert ["TARGET", "engine", "canary:llama-pd-engine-rev-bbbb2222=10%", "Reported/Unverifiable"] in wide
    assert ["ENDPOINT", "-", "http://llama-pd.llama-demo.svc.cluster.local", "Reported/Unverifiable"] in wide


@pytest.mark.parametrize(("traffic_list", "issue"), [
    ([{"revisionName": "other-engine-rev-1", "percent": 100}], "AllocationInvalid"),  # another service's
    ([{"revisionName": "llama-pd-engine-rev-1", "percent": 60}], "AllocationInvalid"),  # does not add up
    ([{"revisionName": "llama-pd-engine-rev-1", "percent": 50}] * 2, "AllocationConflict"),
    ([{"revisionName": "llama-pd-engine-rev-1", "percent": 101}], "AllocationInvalid"),
])
def test_weights_that_do_not_add_up_make_the_state_invalid(traffic_list: list[Obj], issue: str) -> None:
    isvc = mid_canary()
    isvc["status"]["components"]["engine"]["traffic"] = traffic_list
    content = traffic.traffic_report(isvc)
    assert content["state"] == "Invalid"
    assert {"component": "engine", "code": issue} in content["issues"]


def test_a_canary_record_without_a_canary_group_is_invalid() -> None:
    isvc = mid_canary()
    del isvc["spec"]["rollout"]
    assert {"component": "-", "code": "CanaryInvalid"} in traffic.traffic_report(isvc)["issues"]


def test_status_shows_the_four_sections_of_a_service_mid_canary() -> None:
    isvc = mid_canary()
    later = sections.sections(isvc, runtime={"metadata": {"name": "srt-pd"}}, runtime_kind="ClusterServingRuntime",
                              model_found=True)
    content = status.status_report(isvc, [], [], now=NOW, later=later)
    table = dict(status.status_rows(content, wide=False))
    assert table["Rollout"] == "Unknown reported=Paused"
    assert table["Rollout evidence"] == "Reported / Unverifiable"
    assert table["Autoscaling"] == "Reported / Reported parent status"
    assert table["Scale engine"] == "Reported HPA/ome 4->4 (Reported)"
    assert table["Scale router"] == "Reported None/none -->- (Unavailable)"
    assert table["Placement"] == "NotConfigured / NotApplicable / NotRecorded"
    assert table["Traffic"] == "Unavailable / Unavailable parent status"
    assert table["Traffic engine"] == "stable:aaaa1111=90% canary:bbbb2222=10%"
    assert table["Canary engine"] == "1/2 @ 10%"
    assert table["Runtime active"] == "Reported / Available"
    assert table["Accelerator"] == "NotConfigured / Unavailable"
    assert table["Traffic detail"] == "kubectl ome traffic status NAME"
    wide = dict(status.status_rows(content, wide=True))
    assert (wide["Active runtime name"], wide["Active runtime kind"], wide["Active origin"]) == (
        "srt-pd", "ClusterServingRuntime", "LiveRuntime")
    assert wide["Coordination Ready"] == "NotApplicable"
    assert wide["Traffic engine"] == ("stable:llama-pd-engine-rev-aaaa1111=90% "
                                      "canary:llama-pd-engine-rev-bbbb2222=10%")


@pytest.mark.parametrize(("spec", "runtime", "model_found", "error", "row"), [
    ({}, None, None, "", "NotConfigured / Unavailable"),
    ({"model": {"name": "m"}}, None, True, "", "Unavailable / Unavailable AutoSelectionNotProbed"),
    ({"runtime": {"name": "r"}}, None, None, "", "Partial / Unavailable RuntimeNotFound"),
    ({"runtime": {"name": "r"}, "model": {"name": "m"}}, {"metadata": {}}, False, "",
     "Partial / Available ModelNotFound"),
    ({"runtime": {"name": "r"}}, None, None, "ReadFailed", "Unavailable / Unavailable ReadFailed"),
])
def test_the_runtime_row(spec: Obj, runtime: Obj | None, model_found: bool | None, error: str, row: str) -> None:
    isvc = {"metadata": {"name": "s", "namespace": "n"}, "spec": spec}
    content = sections.sections(isvc, runtime, "ServingRuntime", model_found, error)
    assert dict(sections.section_rows(content, wide=False))["Runtime active"] == row


@pytest.mark.parametrize(("components", "row", "issues"), [
    (None, "Unavailable / Unavailable parent status", []),
    ({"engine": {"scaleTargetRef": {"name": "x"}}}, "Unavailable; parent read, no usable scaler status",
     ["engine / AutoscalerNotReported"]),
    ({"engine": {"autoscaler": scaler(currentReplicas=2), "scaleTargetRef": {"name": "x"}}},
     "Partial / Reported parent status", ["engine / ReplicaEvidenceAmbiguous"]),  # a count of 0 is left out
    ({"engine": {"autoscaler": scaler("HPA", "external"), "scaleTargetRef": {"name": "x"}}},
     "Invalid / Reported parent status", ["engine / OwnershipMismatch"]),
    ({"engine": {"autoscaler": scaler(currentReplicas=1, desiredReplicas=1)}},
     "Partial / Reported parent status", ["engine / ScaleTargetNotReported"]),
    ({"engine": {"autoscaler": scaler(currentReplicas=1, desiredReplicas=1), "scaleTargetRef": {"name": "x"}},
      "sidecar": {}}, "Invalid / Reported parent status", [" / UnknownComponentStatus"]),
])
def test_the_autoscaling_rows(components: Obj | None, row: str, issues: list[str]) -> None:
    isvc = {"metadata": {"name": "s", "namespace": "n"}, "spec": {}, "status": {"components": components}}
    rows = sections.section_rows(sections.sections(isvc), wide=True)
    assert dict(rows)["Autoscaling"] == row
    assert [v for k, v in rows if k == "Autoscale issue"] == issues
