"""Figures of the fleet for Prometheus, read at scrape time from the InferenceReplicas in the cache (as
kube-state-metrics reads objects): Instances by component and phase, held revisions, rollout progress. Restarts and
held repairs are counted by the InferenceReplica controller when the status that records one is written.

Every component x phase series is reported, at 0 when empty, so alerts and dashboards have a series from the first
scrape. Labels stay bounded (component, phase, cause): per-service detail is in the objects' status and events.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping

import attrs
from prometheus_client import Counter as CounterMetric
from prometheus_client import Gauge as GaugeMetric
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from omenative.api import constants as c
from omenative.api.phases import INSTANCE_PHASES
from omenative.api.rollout import IN_FLIGHT, STABLE
from omenative.api.types import InstanceStatus
from omenative.obj import Obj

PHASES = INSTANCE_PHASES

instance_restarts_total = CounterMetric(
    "omenative_instance_restarts", "Instances whose pods were recreated, by component and cause (the failure's reason)",
    ["component", "cause"],
)
repairs_held_total = CounterMetric(
    "omenative_repairs_held", "Repairs held back because the component's unavailability budget was used up (one per "
    "episode, as the RepairHeld event)", ["component"],
)
# OME's canary metrics (canary-analysis.md "Controller metrics"), per InferenceService as OME labels them.
canary_analysis_evaluations_total = CounterMetric(
    "ome_canary_analysis_evaluations", "Judged canary analysis samples, by result (pass, fail or inconclusive)",
    ["namespace", "isvc", "component", "result"],
)
canary_rollback_total = CounterMetric(
    "ome_canary_rollback", "Canary rollbacks, by cause (analysis or manual)",
    ["namespace", "isvc", "component", "cause"],
)

canary_current_step = GaugeMetric(
    "ome_canary_current_step", "The canary's current step, from 0; 0 once it completes",
    ["namespace", "isvc", "component"],
)
canary_traffic_weight = GaugeMetric(
    "ome_canary_traffic_weight", "The last traffic weight the canary recorded; 0 once it completes or rolls back",
    ["namespace", "isvc", "component"],
)
canary_step_total = CounterMetric("ome_canary_step", "Canary step advances", ["namespace", "isvc", "component"])
canary_complete_total = CounterMetric("ome_canary_complete", "Canaries completed on the new revision",
                                      ["namespace", "isvc"])
canary_analysis_metric_value = GaugeMetric(
    "ome_canary_analysis_metric_value", "The last value of each analysis metric, kept when a sample has none",
    ["namespace", "isvc", "component", "metric"],
)
canary_analysis_failed_checks = GaugeMetric(
    "ome_canary_analysis_failed_checks", "Failing analysis samples at the step, as of the last sample",
    ["namespace", "isvc", "component"],
)
# omenative takes a canary's samples inside the InferenceService's reconcile, bounded by its workers: there is no
# sampler queue, so the queue depth and the starved count stay 0 (kept for OME's dashboards and alerts).
canary_sampler_inflight = GaugeMetric("ome_canary_sampler_inflight", "Canary analysis samples running now")
canary_sampler_queue_depth = GaugeMetric("ome_canary_sampler_queue_depth",
                                         "Canary analysis samples waiting for a slot (omenative has no queue: 0)")
canary_sampler_starved_total = CounterMetric("ome_canary_sampler_starved",
                                             "Canary analysis samples that had to wait for a slot (none in omenative)")


@attrs.frozen
class CanaryFigures:
    """What one written status says of a component's canary, for OME's canary metrics."""

    component: str
    step: int  # ome_canary_current_step
    weight: int  # ome_canary_traffic_weight
    failed_checks: int
    values: dict[str, float]  # metric name -> its last value
    steps_advanced: int
    completed: bool


def canary_figures(old_components: Obj, new_components: Obj) -> list[CanaryFigures]:
    """The canary metrics' figures of each component whose status the new one writes with a canary block."""
    out = []
    for component, block in new_components.items():
        state = block.get("canary") if isinstance(block, dict) else None
        if not isinstance(state, dict):
            continue
        found = old_components.get(component)
        old: Obj = found if isinstance(found, dict) else {}
        old_state: Obj = old["canary"] if isinstance(old.get("canary"), dict) else {}
        phase, old_phase = block.get("rolloutPhase"), old.get("rolloutPhase")
        live = phase in IN_FLIGHT
        step, old_step = _count(state.get("currentStep")), _count(old_state.get("currentStep"))
        same = state.get("canaryRevisionHash") == old_state.get("canaryRevisionHash")
        values = {}
        for result in state.get("metricResults") or []:
            try:
                values[str(result["name"])] = float(result["value"])
            except (KeyError, TypeError, ValueError):
                continue  # no value in this sample: the last one stays
        out.append(CanaryFigures(
            component=component, step=step if live else 0, weight=_count(state.get("observedTrafficWeight")) if live
            else 0, failed_checks=_count(state.get("analysisFailedChecks")), values=values,
            steps_advanced=max(step - old_step, 0) if same else step,
            completed=phase == STABLE and old_phase in IN_FLIGHT))
    return out


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# OME's rollout group metric (alerting.md "OMEMassRolloutFailure"): each change of a blue-green, rolling-update or
# sequence group's coordination phase, as the status records it.
rollout_group_transition_total = CounterMetric(
    "ome_omenative_rollout_group_transition", "Rollout group phase changes, by group and the phase left and entered",
    ["namespace", "isvc", "group", "from", "to"],
)


def group_transitions(old: Obj, new: Obj) -> list[tuple[str, str, str]]:
    """(group, from, to) for each coordination group whose phase the new status changes; a group seen for the first
    time enters from `None`."""
    before = {g.get("name"): g.get("phase") for g in (old.get("rolloutCoordination") or {}).get("groups") or []}
    out = []
    for group in (new.get("rolloutCoordination") or {}).get("groups") or []:
        previous = before.get(group.get("name"))
        if previous != group.get("phase"):
            out.append((str(group.get("name")), str(previous or "None"), str(group.get("phase"))))
    return out


# Created at 0 (for restarts, the commonest causes), so alerts have their series before the first one. The sampler
# series have no labels: prometheus_client reports them at 0 from the start.
for _component in c.COMPONENTS:
    for _cause in ("PodFailed", "PodMissing", "Error", "OOMKilled"):
        instance_restarts_total.labels(component=_component, cause=_cause)
    repairs_held_total.labels(component=_component)


def restarts(old: Mapping[int, InstanceStatus], new: Iterable[InstanceStatus]) -> list[str]:
    """The causes of the restarts a new set of rows records: each Instance whose incarnation went up."""
    causes = []
    for row in new:
        before = old.get(row.index) if row.index is not None else None
        if before is not None and (row.incarnation or 0) > (before.incarnation or 0):
            causes.append(row.last_failure.reason if row.last_failure and row.last_failure.reason else "Unknown")
    return causes


class FleetFigures:
    def __init__(self) -> None:
        self.instances: Counter[tuple[str, str]] = Counter()
        self.held: Counter[str] = Counter()
        self.desired: Counter[str] = Counter()
        self.updated: Counter[str] = Counter()


def fleet_figures(replicas: Iterable[Obj], rows_of: Callable[[Obj], Mapping[int, InstanceStatus]]) -> FleetFigures:
    figures = FleetFigures()
    for replica in replicas:
        component = (replica.get("spec") or {}).get("component") or c.ENGINE
        status = replica.get("status") or {}
        for row in rows_of(replica).values():
            figures.instances[(component, row.phase or "Pending")] += 1
        figures.held[component] += sum(1 for block in status.get("retryBlocks") or [] if block.get("state") == "Held")
        figures.desired[component] += int(status.get("replicas") or 0)
        figures.updated[component] += int(status.get("updatedReplicas") or 0)
    return figures


class FleetCollector(Collector):
    def __init__(self, replicas: Callable[[], Iterable[Obj]],
                 rows_of: Callable[[Obj], Mapping[int, InstanceStatus]]) -> None:
        self._replicas = replicas
        self._rows_of = rows_of

    def collect(self) -> Iterator[GaugeMetricFamily]:
        figures = fleet_figures(self._replicas(), self._rows_of)
        instances = GaugeMetricFamily("omenative_instances", "Instances by component and phase",
                                      labels=["component", "phase"])
        phases = PHASES + tuple(sorted({p for _, p in figures.instances} - set(PHASES)))
        for component in c.COMPONENTS:
            for phase in phases:
                instances.add_metric([component, phase], figures.instances[(component, phase)])
        yield instances
        for name, doc, counts in (
            ("omenative_revisions_held", "Revisions held after failed updates (kubectl ome instance retry-blocks)",
             figures.held),
            ("omenative_rollout_instances", "Instances a component has (rollout progress: of these)", figures.desired),
            ("omenative_rollout_updated_instances", "Instances on their component's update revision", figures.updated),
        ):
            family = GaugeMetricFamily(name, doc, labels=["component"])
            for component in c.COMPONENTS:
                family.add_metric([component], counts[component])
            yield family

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return []
