"""Canary analysis (OME's rollout-groups.md, `analysis`): which samples are due (`analysis_requests`, which the
controller takes against Prometheus), how one metric is judged, and what a step's sample decides (`judge_step`).
Pure: the samples come in `Inputs.samples`."""

from __future__ import annotations

import math
import re

import attrs

from omenative.api import naming
from omenative.api.rollout import CANARYING, PAUSED, PROMOTING, primary_of
from omenative.api.rollout_validation import progression
from omenative.api.times import format_time, parse_time
from omenative.controllers.inferenceservice.rollout.model import Inputs, duration, ready_timeout
from omenative.controllers.inferenceservice.rollout.planner import RolloutPlanner
from omenative.controllers.inferenceservice.rollout.state import CanaryState
from omenative.obj import Obj

TEMPLATE = re.compile(r"\{\{\s*\.(\w+)\s*\}\}")


@attrs.frozen(kw_only=True)
class AnalysisRequest:
    """One sample the controller should take now: every metric's query, rendered, against one source."""

    group: int
    component: str  # the canary's primary component
    address: str | None
    headers: dict[str, str]
    metrics: list[Obj]  # each: name, operator, threshold, query (rendered) or templateError


def render_query(query: str, variables: dict[str, str]) -> tuple[str | None, str | None]:
    """The query with its template variables filled in, or (None, the template error)."""
    missing = [name for name in TEMPLATE.findall(query) if name not in variables]
    if missing:
        return None, f"template error: unknown variable .{missing[0]}"
    rendered = TEMPLATE.sub(lambda m: variables[m.group(1)], query)
    if "{{" in rendered or "}}" in rendered:
        return None, "template error: malformed action"
    return rendered, None


def judge(metric: Obj, values: list[float] | None, error: str | None, now: float) -> Obj:
    """One metric of a sample: its worst value (the highest for LT/LTE, the lowest for GT/GTE) against the
    threshold. No numbers, a NaN (a ratio over zero requests) or an error makes it inconclusive."""
    out: Obj = {"name": metric.get("name"), "threshold": str(metric.get("threshold")),
                "operator": metric.get("operator"), "passed": False, "time": format_time(now)}
    finite = [v for v in values or [] if math.isfinite(v)]
    if error is not None:
        out["message"] = error
        return out
    if not finite:
        out["message"] = "no data"
        return out
    operator = str(metric.get("operator"))
    worst = max(finite) if operator in ("LT", "LTE") else min(finite)
    threshold = float(str(metric.get("threshold")))
    out["value"] = f"{worst:g}"
    out["passed"] = {"LT": worst < threshold, "LTE": worst <= threshold, "GT": worst > threshold,
                     "GTE": worst >= threshold}.get(operator, False)
    return out


def verdict(results: list[Obj]) -> str:
    if any("value" in r and not r["passed"] for r in results):
        return "fail"
    if results and all(r["passed"] for r in results):
        return "pass"
    return "inconclusive"


def analysis_due(step: Obj, state: CanaryState, now: float) -> float | None:
    """When the step's next sample is due (None: the step is not waiting on its analysis)."""
    analysis = step.get("analysis") or {}
    ready_at = parse_time(state.step_ready)
    if not analysis or ready_at is None:
        return None
    first = ready_at + (duration(analysis.get("initialDelay")) or 0.0)
    last = parse_time(state.last_evaluation)
    interval = duration(analysis.get("interval")) or 60.0
    return max(first, last + interval) if last is not None else first


def analysis_requests(inputs: Inputs, isvc: str, namespace: str) -> list[AnalysisRequest]:
    """The samples due now: canaries at an analysis gate whose warm-up and interval have passed. The controller
    takes them and plans again with the results (Inputs.samples)."""
    out: list[AnalysisRequest] = []
    if inputs.paused:
        return out  # a paused canary holds its step: nothing to judge
    for index, group in enumerate(inputs.groups):
        names = [n for n in (group.get("components") or []) if n in inputs.members]
        if progression(group) != "Canary" or not names:
            continue
        primary = primary_of(names)
        block = (inputs.previous.get("components") or {}).get(primary) or {}
        state = CanaryState.from_status(block.get("canary"))
        steps = list((group.get("canary") or {}).get("steps") or [])
        step_index = state.step or 0
        if block.get("rolloutPhase") not in (CANARYING, PAUSED, PROMOTING) or state.gate != "Analysis" or \
                not 0 <= step_index < len(steps) or state.canary != inputs.members[primary].target:
            continue
        step = steps[step_index]
        due = analysis_due(step, state, inputs.now)
        if due is None or inputs.now < due:
            continue
        canary, stable = str(state.canary), str(state.stable or "")
        variables = {"Namespace": namespace, "ISVCName": isvc, "Component": primary, "CanaryRevision": canary,
                     "StableRevision": stable, "CanaryService": naming.revision_service_name(isvc, primary, canary),
                     "StableService": naming.revision_service_name(isvc, primary, stable)}
        metrics = []
        for metric in (step.get("analysis") or {}).get("metrics") or []:
            query, error = render_query(str(metric.get("query") or ""), variables)
            metrics.append({**metric, "query": query, "templateError": error})
        source = (group.get("canary") or {}).get("prometheus") or {}
        address = source.get("serverAddress") or (None if source.get("providerRef") else inputs.default_prometheus)
        out.append(AnalysisRequest(group=index, component=primary, address=address,
                                   headers=dict(source.get("headers") or {}), metrics=metrics))
    return out


def judge_step(planner: RolloutPlanner, index: int, step: Obj, state: CanaryState, ready_at: float,
               canary_spec: Obj) -> str:
    """Judges the sample just taken (if any): `pass` opens the gate (after the step's pause as a bake), `rollback`
    and `failed` end the canary, `wait` holds it until the next sample."""
    inputs = planner.inputs
    analysis = step.get("analysis") or {}
    sample = inputs.samples.get(index)
    now = inputs.now
    result = "wait"
    if sample is not None:
        state.last_evaluation = format_time(now)
        state.metric_results = sample
        judged = verdict(sample)
        if judged != "inconclusive":
            state.last_conclusive = format_time(now)
        if judged == "fail":
            state.failed_checks = (state.failed_checks or 0) + 1
            if state.failed_checks >= int(analysis.get("failureLimit") or 1):
                return "rollback"
        elif judged == "inconclusive" and analysis.get("onInconclusive") == "Rollback":
            return "rollback"
        elif judged == "pass":
            bake = duration((step.get("pause") or {}).get("duration")) or 0.0
            result = "pass" if now >= ready_at + bake else "wait"
    # A stall: no conclusive sample for longer than the ready timeout.
    timeout = ready_timeout(inputs, canary_spec)
    conclusive = parse_time(state.last_conclusive) or ready_at
    if result == "wait" and timeout is not None and state.last_evaluation and now - conclusive >= timeout:
        return "rollback" if analysis.get("onInconclusive") == "RollbackOnStall" else "failed"
    due = analysis_due(step, state, now)
    if due is not None:
        planner.wake_at(max(due, now + 0.5))
    return result
