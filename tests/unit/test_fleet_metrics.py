"""The fleet's figures for Prometheus: Instances by component and phase, held revisions, rollout progress, and
restarts by cause."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from omenative.api.instance_status import encode_rows
from omenative.api.types import InstanceStatus, LastFailure
from omenative.controllers import fleet_metrics
from omenative.controllers.context import rows_by_index
from omenative.controllers.fleet_metrics import PHASES, FleetCollector, restarts


def replica(component: str, rows: list[InstanceStatus], **status: Any) -> dict[str, Any]:
    return {"spec": {"component": component}, "status": {**encode_rows(rows), **status}}


def row(index: int, phase: str, incarnation: int = 0, reason: str | None = None) -> InstanceStatus:
    failure = LastFailure(reason=reason) if reason else None
    return InstanceStatus(index=index, phase=phase, incarnation=incarnation, last_failure=failure)


def scrape(replicas: list[dict[str, Any]]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(FleetCollector(lambda: replicas, rows_by_index))
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_an_empty_cluster_reports_every_component_and_phase_at_zero() -> None:
    samples = scrape([])
    instances = {key: value for key, value in samples.items() if key[0] == "omenative_instances"}
    assert len(instances) == 3 * len(PHASES) and set(instances.values()) == {0}
    for name in ("omenative_revisions_held", "omenative_rollout_instances", "omenative_rollout_updated_instances"):
        assert {samples[(name, (("component", comp),))] for comp in ("engine", "decoder", "router")} == {0}


def test_instances_are_counted_by_component_and_phase_across_replicas() -> None:
    samples = scrape([
        replica("engine", [row(0, "Ready"), row(1, "Ready"), row(2, "Failed")], replicas=3, updatedReplicas=1,
                retryBlocks=[{"targetRevision": "r2", "state": "Held"}, {"targetRevision": "r3", "state": "Backoff"}]),
        replica("engine", [row(0, "Updating")], replicas=1, updatedReplicas=0),
        replica("decoder", [row(0, "Ready")], replicas=1, updatedReplicas=1),
    ])
    def gauge(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]
    assert gauge("omenative_instances", component="engine", phase="Ready") == 2
    assert gauge("omenative_instances", component="engine", phase="Failed") == 1
    assert gauge("omenative_instances", component="engine", phase="Updating") == 1
    assert gauge("omenative_instances", component="decoder", phase="Ready") == 1
    assert gauge("omenative_instances", component="router", phase="Ready") == 0
    assert gauge("omenative_revisions_held", component="engine") == 1
    assert (gauge("omenative_rollout_instances", component="engine"),
            gauge("omenative_rollout_updated_instances", component="engine")) == (4, 1)


@pytest.mark.parametrize(("old", "new", "causes"), [
    ([row(0, "Ready", 1)], [row(0, "Ready", 1)], []),
    ([row(0, "Ready", 1)], [row(0, "Restarting", 2, "OOMKilled")], ["OOMKilled"]),
    ([row(0, "Ready", 0), row(1, "Ready", 3)], [row(0, "Restarting", 1, "PodMissing"), row(1, "Restarting", 4)],
     ["PodMissing", "Unknown"]),
    ([], [row(0, "Creating", 1)], []),  # a new Instance is not a restart
])
def test_restarts_are_the_instances_whose_incarnation_went_up(
    old: list[InstanceStatus], new: list[InstanceStatus], causes: list[str],
) -> None:
    assert restarts({r.index: r for r in old if r.index is not None}, new) == causes


def test_a_rollout_groups_phase_changes_are_its_transitions() -> None:
    def groups(*phases: tuple[str, str]) -> dict[str, object]:
        return {"rolloutCoordination": {"groups": [{"name": n, "phase": p} for n, p in phases]}}

    assert fleet_metrics.group_transitions({}, groups(("0", "Surging"))) == [("0", "None", "Surging")]
    assert fleet_metrics.group_transitions(groups(("0", "Surging"), ("1", "Idle")),
                                           groups(("0", "Draining"), ("1", "Idle"))) == [("0", "Surging", "Draining")]
    assert fleet_metrics.group_transitions(groups(("0", "Idle")), groups(("0", "Idle"))) == []
    assert fleet_metrics.group_transitions(groups(("0", "Idle")), {}) == []  # groups gone: no transition to count


def test_the_canary_metrics_follow_the_written_canary_status() -> None:
    def block(phase: str, step: int, weight: int, revision: str = "new", **extra: Any) -> dict[str, Any]:
        return {"rolloutPhase": phase, "canary": {"canaryRevisionHash": revision, "currentStep": step,
                                                  "observedTrafficWeight": weight, **extra}}

    (first,) = fleet_metrics.canary_figures({}, {"engine": block("Canarying", 0, 10)})
    assert (first.step, first.weight, first.steps_advanced, first.completed) == (0, 10, 0, False)
    (second,) = fleet_metrics.canary_figures({"engine": block("Canarying", 0, 10)}, {"engine": block(
        "Canarying", 1, 50, analysisFailedChecks=1, metricResults=[{"name": "error-rate", "value": "0.2"},
                                                                    {"name": "latency"}])})
    assert (second.step, second.weight, second.steps_advanced, second.failed_checks) == (1, 50, 1, 1)
    assert second.values == {"error-rate": 0.2}  # a metric with no value in this sample keeps its last one
    (done,) = fleet_metrics.canary_figures({"engine": block("Promoting", 1, 50)}, {"engine": block("Stable", 2, 100)})
    assert (done.step, done.weight, done.completed, done.steps_advanced) == (0, 0, True, 1)
    (again,) = fleet_metrics.canary_figures({"engine": block("Stable", 2, 100)}, {"engine": block("Stable", 2, 100)})
    assert not again.completed and again.steps_advanced == 0  # an unchanged status counts nothing
    (other,) = fleet_metrics.canary_figures({"engine": block("Stable", 2, 100, "old")},
                                            {"engine": block("Canarying", 0, 10)})
    assert other.steps_advanced == 0  # a new canary starts at step 0
    assert fleet_metrics.canary_figures({}, {"decoder": {"rolloutPhase": "Stable"}}) == []
