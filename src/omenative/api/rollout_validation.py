"""Admission checks of `spec.rollout` and the rollout annotations, with the reasons OME's rollout pages give
(rollout-groups.md and canary-progression.md "What admission rejects", canary-analysis.md "What admission checks").
Each error names the field and ends in its reason in parentheses. Pure."""

from __future__ import annotations

import copy
import re
from typing import Any

from omenative.api import constants as c
from omenative.api.units import InvalidValue, parse_duration

JSONDict = dict[str, Any]
COMPONENTS = (c.ROUTER, c.ENGINE, c.DECODER)
PERCENT = re.compile(r"^(\d{1,3})%$")
PROMOTE_VALUE = re.compile(r"^[a-z0-9]{6,}$")
TOLERANCE_WARNING_ABOVE = 50
# Component fields that scale or place Instances rather than change their pods.
NOT_POD_SETTINGS = ("minReplicas", "maxReplicas", "autoscaler", "scaleTarget", "scaleMetric", "minAvailable",
                    "maxUnavailable", "lifecycle")
GROUP = "spec.rollout.groups"


def progression(group: JSONDict) -> str:
    if group.get("canary") is not None:
        return "Canary"
    if group.get("rollingUpdate") is not None:
        return "RollingUpdate"
    return "BlueGreen"


def _declares_omenative(spec: JSONDict, component: str) -> bool:
    own = spec.get(component) or {}
    annotation = (own.get("annotations") or {}).get(c.ANN_DEPLOYMENT_MODE) if isinstance(own, dict) else None
    return (annotation or spec.get("deploymentMode")) == c.MODE_OMENATIVE


def _budget_errors(where: str, value: Any) -> tuple[list[str], int | None]:
    """A rolling-update budget: a count of 0 or more, or a percentage from 0% to 100%. Returns (errors, whether it
    resolves to zero: 1 yes, 0 no, None unset)."""
    if value is None:
        return [], None
    if isinstance(value, bool) or (isinstance(value, int) and value < 0):
        return [f"{where}: {value!r} must be a count of 0 or more (InvalidRollingUpdateInteger)"], None
    if isinstance(value, int):
        return [], int(value == 0)
    match = PERCENT.match(str(value))
    if not match or int(match.group(1)) > 100:
        return [f'{where}: {value!r} must be a percentage from "0%" to "100%" (InvalidRollingUpdatePercent)'], None
    return [], int(int(match.group(1)) == 0)


def _duration_ok(text: Any) -> bool:
    try:
        parse_duration(str(text))
    except InvalidValue:
        return False
    return True


def _capacity(value: Any) -> tuple[int | None, bool]:
    """(a count or a percentage, whether it is a percentage); None when the form is not allowed."""
    if isinstance(value, bool):
        return None, False
    if isinstance(value, int):
        return (value, False) if value >= 0 else (None, False)
    match = PERCENT.match(str(value))
    if match and int(match.group(1)) <= 100:
        return int(match.group(1)), True
    return None, False


def _canary_errors(where: str, canary: JSONDict) -> list[str]:
    errors: list[str] = []
    steps = canary.get("steps") or []
    if not steps:
        errors.append(f"{where}.steps: at least one step is required (CanaryInvalid)")
    previous_traffic = 0
    for i, step in enumerate(steps):
        at = f"{where}.steps[{i}]"
        if not isinstance(step, dict):
            errors.append(f"{at}: must be an object (CanaryInvalid)")
            continue
        capacity, percent = _capacity(step.get("capacity"))
        if capacity is None:
            errors.append(f'{at}.capacity: {step.get("capacity")!r} must be a percentage from "0%" to "100%" or a '
                          "count of 0 or more (CanaryInvalid)")
        traffic = step.get("traffic")
        if not isinstance(traffic, int) or isinstance(traffic, bool) or not 0 <= traffic <= 100:
            errors.append(f"{at}.traffic: {traffic!r} must be from 0 to 100 (CanaryInvalid)")
            traffic = previous_traffic
        if traffic < previous_traffic:
            errors.append(f"{at}.traffic: {traffic} is below the previous step's {previous_traffic}; traffic can't "
                          "fall from one step to the next (CanaryInvalid)")
        if traffic > 0 and capacity == 0:
            errors.append(f"{at}: traffic {traffic} needs a capacity above zero (CanaryInvalid)")
        if i == len(steps) - 1:
            if traffic != 100:
                errors.append(f"{at}.traffic: the last step's traffic must be 100, got {traffic} (CanaryInvalid)")
            if capacity is not None and (not percent or capacity != 100):
                errors.append(f'{at}.capacity: the last step\'s capacity must be "100%", got '
                              f'{step.get("capacity")!r} (CanaryInvalid)')
        previous_traffic = max(previous_traffic, traffic)
        pause = step.get("pause")
        if isinstance(pause, dict) and pause.get("duration") is not None and not _duration_ok(pause["duration"]):
            errors.append(f"{at}.pause.duration: {pause['duration']!r} is not a duration (CanaryInvalid)")
        analysis = step.get("analysis")
        if isinstance(analysis, dict):
            errors += _analysis_errors(f"{at}.analysis", analysis)
    timeout = canary.get("readyTimeout")
    if timeout is not None and (not _duration_ok(timeout) or parse_duration(str(timeout)) <= 0):
        errors.append(f"{where}.readyTimeout: {timeout!r} must be a duration above zero (CanaryInvalid)")
    prometheus = canary.get("prometheus") or {}
    if isinstance(prometheus, dict) and prometheus.get("providerRef") and prometheus.get("serverAddress"):
        errors.append(f"{where}.prometheus: at most one of providerRef and serverAddress may be set (CanaryInvalid)")
    return errors


def _analysis_errors(at: str, analysis: JSONDict) -> list[str]:
    errors: list[str] = []
    interval = analysis.get("interval")
    if interval is None or not _duration_ok(interval) or parse_duration(str(interval)) <= 0:
        errors.append(f"{at}: interval must be > 0 (AnalysisInvalid)")
    for key in ("initialDelay",):
        if analysis.get(key) is not None and not _duration_ok(analysis[key]):
            errors.append(f"{at}.{key}: {analysis[key]!r} is not a duration (AnalysisInvalid)")
    limit = analysis.get("failureLimit")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        errors.append(f"{at}.failureLimit: {limit!r} must be at least 1 (AnalysisInvalid)")
    if analysis.get("onInconclusive") not in (None, "Hold", "Rollback", "RollbackOnStall"):
        errors.append(f"{at}.onInconclusive: {analysis.get('onInconclusive')!r} must be Hold, Rollback or "
                      "RollbackOnStall (AnalysisInvalid)")
    metrics = analysis.get("metrics") or []
    if not 1 <= len(metrics) <= 10:
        errors.append(f"{at}.metrics: 1 to 10 metrics are required, got {len(metrics)} (AnalysisInvalid)")
    names: set[str] = set()
    for j, metric in enumerate(metrics):
        metric = metric if isinstance(metric, dict) else {}
        name = str(metric.get("name") or "")
        if not name.strip():
            errors.append(f"{at}.metrics[{j}].name must not be empty (AnalysisInvalid)")
        elif name in names:
            errors.append(f"{at}.metrics[{j}].name {name!r} is used twice (AnalysisInvalid)")
        names.add(name)
        if not str(metric.get("query") or "").strip():
            errors.append(f'{at}.metrics[{j}] ("{name}"): query must not be empty (AnalysisInvalid)')
        threshold = metric.get("threshold")
        try:
            float(str(threshold))
        except ValueError:
            errors.append(f'{at}.metrics[{j}] ("{name}"): threshold "{threshold}" must be numeric (AnalysisInvalid)')
        if metric.get("operator") not in ("LT", "LTE", "GT", "GTE"):
            errors.append(f'{at}.metrics[{j}] ("{name}"): operator {metric.get("operator")!r} must be LT, LTE, GT or '
                          "GTE (AnalysisInvalid)")
    return errors


def _pod_settings(spec: JSONDict, component: str) -> JSONDict:
    own = copy.deepcopy(spec.get(component) or {})
    return {k: v for k, v in own.items() if k not in NOT_POD_SETTINGS} if isinstance(own, dict) else {}


def is_sequence(groups: list[JSONDict]) -> bool:
    others = [g for g in groups if progression(g) != "Canary"]
    return len(others) >= 2 and all(progression(g) == "BlueGreen" and len(g.get("components") or []) == 1
                                    for g in others)


def validate_rollout(spec: JSONDict, annotations: dict[str, str], old_spec: JSONDict | None = None,
                     rollout_policy_enabled: bool = False) -> tuple[list[str], list[str]]:
    """(errors, warnings) of an InferenceService's rollout groups and rollout annotations; `old_spec` is the stored
    spec on an update (the checks of an edit: lockstep and pairing-protocol changes)."""
    errors: list[str] = []
    warnings: list[str] = []
    errors_, warnings_ = _annotation_findings(annotations)
    errors += errors_
    warnings += warnings_
    rollout = spec.get("rollout") or {}
    if not isinstance(rollout, dict):
        return errors, warnings
    groups = [g if isinstance(g, dict) else {} for g in rollout.get("groups") or []]
    declared = [n for n in COMPONENTS if spec.get(n) is not None]
    seen: dict[str, int] = {}
    for i, group in enumerate(groups):
        where = f"{GROUP}[{i}]"
        kind = progression(group)
        names = list(group.get("components") or [])
        for j, name in enumerate(names):
            if name not in COMPONENTS:
                reason = "CanaryInvalid" if kind == "Canary" else "InvalidComponentInCoordinationGroup"
                errors.append(f"{where}.components[{j}]: {name!r} is not router, engine or decoder ({reason})")
            elif name not in declared:
                reason = "CanaryInvalid" if kind == "Canary" else "OrphanCoordinationGroup"
                errors.append(f"{where}.components[{j}]: the InferenceService declares no {name} ({reason})")
            elif not _declares_omenative(spec, name):
                reason = "CanaryRequiresOMENative" if kind == "Canary" else "CoordinationRequiresOMENative"
                mode = ((spec.get(name) or {}).get("annotations") or {}).get(c.ANN_DEPLOYMENT_MODE) or \
                    spec.get("deploymentMode") or ""
                errors.append(f'{where}.components[{j}]: {name} has deploymentMode="{mode}"; a rollout group needs '
                              "spec.deploymentMode: OMENative or the component's ome.io/deploymentMode annotation "
                              f"({reason})")
            if name in seen:
                errors.append(f"{where}.components[{j}]: {name} is already in {GROUP}[{seen[name]}] "
                              "(DuplicateComponentInCoordinationGroups)")
            else:
                seen[name] = i
        if group.get("order") is not None:
            errors.append(f"{where}.order: no progression applies an order (OrderNotHonored)")
        if group.get("policyRef") is not None and not rollout_policy_enabled:
            errors.append(f"{where}.policyRef: RolloutPolicy is alpha and off in this controller "
                          "(RolloutPolicyRefUnsupported)")
        if sum(group.get(k) is not None for k in ("canary", "blueGreen", "rollingUpdate")) > 1:
            errors.append(f"{where}: set at most one of canary, blueGreen and rollingUpdate (InvalidRolloutGroup)")
        if kind == "Canary":
            errors += _canary_errors(f"{where}.canary", group.get("canary") or {})
            if group.get("maintainRatio") is not None:
                errors.append(f"{where}.maintainRatio: a canary group can't keep a ratio (CanaryInvalid)")
            if group.get("soak") is not None:
                errors.append(f"{where}.soak: a canary group has no sequence to soak in (SoakNotHonored)")
            if c.ENGINE in declared and c.DECODER in declared:
                if c.ENGINE in names and c.DECODER not in names:
                    errors.append(f"{where}.components: a canary group naming either must name both (CanaryInvalid)")
                elif c.DECODER in names and c.ENGINE not in names:
                    errors.append(f'{where}.components: decoder must include its entrypoint Component "engine" '
                                  "(CanaryInvalid)")
        if kind == "RollingUpdate":
            rolling = group.get("rollingUpdate") or {}
            surge_errors, surge_zero = _budget_errors(f"{where}.rollingUpdate.maxSurge", rolling.get("maxSurge"))
            down_errors, down_zero = _budget_errors(f"{where}.rollingUpdate.maxUnavailable",
                                                    rolling.get("maxUnavailable"))
            errors += surge_errors + down_errors
            if surge_zero == 1 and down_zero == 1:
                errors.append(f"{where}.rollingUpdate: maxSurge and maxUnavailable both resolve to zero, so no "
                              "Instance could ever move (ZeroBudgetPacingUnstartable)")
        ratio = group.get("maintainRatio")
        if isinstance(ratio, dict) and isinstance(ratio.get("tolerance"), int) and \
                ratio["tolerance"] > TOLERANCE_WARNING_ABOVE:
            warnings.append(f"{where}.maintainRatio.tolerance {ratio['tolerance']} is above "
                            f"{TOLERANCE_WARNING_ABOVE}: the ratio check is effectively off (RatioToleranceTooHigh)")
        if group.get("soak") is not None and not _duration_ok(group["soak"]):
            errors.append(f"{where}.soak: {group['soak']!r} is not a duration (InvalidDuration)")

    canaries = [(i, g) for i, g in enumerate(groups) if progression(g) == "Canary"]
    units: dict[str, int] = {}
    for i, group in canaries:
        for unit in {"router" if n == c.ROUTER else "engine-decoder" for n in group.get("components") or []
                     if n in COMPONENTS}:
            if unit in units:
                errors.append(f"{GROUP}[{i}]: the {unit.replace('-', ' and ')} already roll out by the canary of "
                              f"{GROUP}[{units[unit]}] (MultipleCanaryGroups)")
            units[unit] = i
    sequence = is_sequence(groups)
    if not sequence:
        for i, group in enumerate(groups):
            if group.get("soak") is not None and progression(group) != "Canary":
                errors.append(f"{GROUP}[{i}].soak: soak applies only to a sequence of single-component blue-green "
                              "groups (SoakNotHonored)")
    ordering = rollout.get("groupOrdering") or "Sequential"
    if ordering == "Sequential" and len(groups) >= 2 and not (sequence and not canaries):
        errors.append(f"spec.rollout.groupOrdering: Sequential accepts one group or a sequence alone; these "
                      f"{len(groups)} groups need groupOrdering: Concurrent (GroupOrderingNotHonored)")
    if old_spec is not None:
        errors += _edit_errors(spec, old_spec, groups)
    return errors, warnings


def _edit_errors(spec: JSONDict, old_spec: JSONDict, groups: list[JSONDict]) -> list[str]:
    errors: list[str] = []
    for i, group in enumerate(groups):
        if progression(group) != "RollingUpdate":
            continue
        names = [n for n in group.get("components") or [] if n in COMPONENTS and spec.get(n) is not None]
        changed = [n for n in names if _pod_settings(spec, n) != _pod_settings(old_spec, n)]
        if changed and len(changed) < len(names):
            left = [n for n in names if n not in changed]
            errors.append(f"{GROUP}[{i}]: the edit changes the pod settings of {', '.join(changed)} but not of "
                          f"{', '.join(left)}; a rolling-update group's components change together "
                          "(RollingUpdateLockstepViolation)")
    old_token = (old_spec.get("rollout") or {}).get("pairingProtocol")
    new_token = (spec.get("rollout") or {}).get("pairingProtocol")
    if old_token and new_token and old_token != new_token and spec.get(c.ENGINE) is not None and \
            spec.get(c.DECODER) is not None:
        together = next((g for g in groups if c.ENGINE in (g.get("components") or []) and
                         c.DECODER in (g.get("components") or [])), None)
        if together is None or progression(together) == "RollingUpdate":
            how = "separately" if together is None else "by rolling update"
            errors.append(f"spec.rollout.pairingProtocol: {old_token!r} -> {new_token!r} while the engine and the "
                          f"decoder roll out {how}; put both in one blue-green group "
                          "(PairingProtocolChangeUncoordinated)")
    return errors


def _annotation_findings(annotations: dict[str, str]) -> tuple[list[str], list[str]]:
    errors: list[str] = []
    warnings: list[str] = []
    timeout = annotations.get(c.ANN_ROLLOUT_READY_TIMEOUT)
    if timeout is not None:
        if not _duration_ok(timeout):
            errors.append(f"metadata.annotations[ome.io/rollout-ready-timeout]: {timeout!r} is not a duration "
                          "(InvalidDuration)")
        elif 0 < parse_duration(timeout) < 60:
            warnings.append(f"metadata.annotations[ome.io/rollout-ready-timeout]: {timeout} is under a minute; a "
                            "canary step may fail before its Instances can start (RolloutTimeoutTooShort)")
    history = annotations.get(c.ANN_REVISION_HISTORY_LIMIT)
    if history is not None and not (history.isdigit() and int(history) >= 1):
        errors.append(f"metadata.annotations[{c.ANN_REVISION_HISTORY_LIMIT}]: {history!r} must be a positive whole "
                      "number")
    rollback = annotations.get(c.ANN_ROLLOUT_ROLLBACK)
    if rollback is not None and rollback not in ("true", "false"):
        errors.append(f'metadata.annotations[ome.io/rollout-rollback]: {rollback!r} must be "true" or "false"')
    promote = annotations.get(c.ANN_ROLLOUT_PROMOTE)
    if promote is not None and not PROMOTE_VALUE.match(promote):
        errors.append(f"metadata.annotations[ome.io/rollout-promote]: {promote!r} must be the canary's revision "
                      "hash: lowercase letters and digits, at least 6")
    return errors, warnings
