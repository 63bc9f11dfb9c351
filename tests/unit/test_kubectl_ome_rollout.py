"""`kubectl ome rollout`'s status view and the refusals of its guarded actions, from an InferenceService's spec
and status (reference/kubectl-ome/rollout.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from omenative.kubectl_ome import rollout as ro
from omenative.kubectl_ome.common import Refused

CANARY_GROUP = {"components": ["engine"], "canary": {"steps": [
    {"capacity": "25%", "traffic": 10, "pause": {}}, {"capacity": "100%", "traffic": 100}]}}


def service(annotations: dict[str, str] | None = None, phase: str = "Paused") -> dict[str, Any]:
    return {
        "metadata": {"name": "chat", "namespace": "prod", "uid": "u1", "resourceVersion": "7", "generation": 2,
                     "annotations": annotations or {}},
        "spec": {"engine": {}, "rollout": {"groups": [copy.deepcopy(CANARY_GROUP)]}},
        "status": {"rollout": {"activeRun": {"runID": "run-1"}},
                   "components": {"engine": {
                       "rolloutPhase": phase, "lifecycle": {"replicas": 4, "updatedReplicas": 1},
                       "canary": {"canaryRevisionHash": "bbbb2222", "stableRevisionHash": "aaaa1111",
                                  "currentStep": 0, "stepReadyTime": "2026-12-04T10:00:00Z",
                                  "observedTrafficWeight": 10, "gate": "Manual"}}}},
    }


class Cluster:
    def __init__(self, isvc: dict[str, Any]) -> None:
        self.isvc = isvc

    def inference_service(self, namespace: str, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.isvc)


def test_status_shows_the_canary_step_gate_and_traffic() -> None:
    report = ro.status_report(service())
    engine = report["components"]["engine"]
    assert (engine["STRATEGY"], engine["PHASE"], engine["STEP"], engine["GATE"], engine["TRAFFIC"]) == (
        "Canary", "Paused", "1/2", "Manual", "10% -> 10%")
    assert report["service"]["REPORTED"] == "Paused" and report["service"]["STATE"] == "Unknown"
    assert report["service"]["COORDINATION"] == "NotApplicable"
    assert report["issues"]["service"] == ["EpochUnverifiable"]


def test_status_without_rollouts_is_not_configured() -> None:
    isvc = service()
    isvc["spec"].pop("rollout")
    isvc["status"]["components"]["engine"] = {"lifecycle": {}}
    assert ro.status_report(isvc)["service"]["REPORTED"] == "NotConfigured"


@pytest.mark.parametrize(("action", "annotations", "phase", "message"), [
    ("pause", {"ome.io/rollout-paused": "freeze"}, "Paused",
     "action refused: service is already paused; freeze is preserved"),
    ("resume", {}, "Paused", "action refused: service has no recognized pause"),
    ("promote", {"ome.io/rollout-promote": "bbbb2222"}, "Paused", ro.MAILBOX),
    ("promote", {"ome.io/rollout-paused": "true"}, "Paused",
     "action refused: globally paused canary cannot consume a request"),
    ("promote", {}, "Pending",
     "action refused: promote requires an active indefinite manual gate; analysis requires explicit override"),
    ("rollback", {"ome.io/rollout-rollback": "false"}, "Paused", ro.MAILBOX),
])
def test_actions_refuse_what_is_not_safe_now(action: str, annotations: dict[str, str], phase: str,
                                              message: str) -> None:
    with pytest.raises(Refused) as refused:
        ro._check(Cluster(service(annotations, phase)), "prod", "chat", action)
    assert str(refused.value) == message and refused.value.code == 1


def test_promote_sets_the_canary_hash_and_rollback_true() -> None:
    _, key, value, _ = ro._check(Cluster(service()), "prod", "chat", "promote")
    assert (key, value) == ("ome.io/rollout-promote", "bbbb2222")
    _, key, value, _ = ro._check(Cluster(service()), "prod", "chat", "rollback")
    assert (key, value) == ("ome.io/rollout-rollback", "true")
    _, key, value, _ = ro._check(Cluster(service({"ome.io/rollout-paused": "true"})), "prod", "chat", "resume")
    assert (key, value) == ("ome.io/rollout-paused", None)


def test_promote_passes_an_analysis_gate_only_with_the_override() -> None:
    isvc = service()
    isvc["spec"]["rollout"]["groups"][0]["canary"]["steps"][0] = {
        "capacity": "25%", "traffic": 10, "analysis": {"interval": "1m", "failureLimit": 1, "metrics": []}}
    with pytest.raises(Refused):
        ro._check(Cluster(isvc), "prod", "chat", "promote")
    _, key, value, _ = ro._check(Cluster(isvc), "prod", "chat", "promote", override_analysis=True)
    assert (key, value) == ("ome.io/rollout-promote", "bbbb2222")
    with pytest.raises(Refused):
        ro._check(Cluster(service()), "prod", "chat", "promote", override_analysis=True)  # a manual gate
