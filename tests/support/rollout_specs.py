"""InferenceService specs that break one rule of the rollout pages' "What admission rejects" tables each, with
the reason the rejection must give; shared by the unit tests and the end-to-end test that applies them through
kubectl."""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]
COMPONENT = {"minReplicas": 1, "maxReplicas": 1, "runner": {"name": "ome-container",
                                                            "image": "example.invalid/server:1"}}
STEPS = [{"capacity": "25%", "traffic": 10, "pause": {}}, {"capacity": "100%", "traffic": 100}]
ANALYSIS = {"interval": "1m", "failureLimit": 2,
            "metrics": [{"name": "errors", "query": "sum(x)", "operator": "LT", "threshold": "0.01"}]}


def spec(groups: list[Obj], *, components: tuple[str, ...] = ("engine", "decoder"), mode: str | None = "OMENative",
         **rollout: Any) -> Obj:
    out: Obj = {name: copy.deepcopy(COMPONENT) for name in components}
    if mode:
        out["deploymentMode"] = mode
    out["rollout"] = {"groups": groups, **rollout}
    return out


def canary(steps: list[Obj] | None = None, **extra: Any) -> Obj:
    return {"steps": copy.deepcopy(steps if steps is not None else STEPS), **extra}


def step(capacity: Any, traffic: Any, **extra: Any) -> Obj:
    return {"capacity": capacity, "traffic": traffic, **extra}


def analysis(**changes: Any) -> Obj:
    out = copy.deepcopy(ANALYSIS)
    metric = changes.pop("metric", None)
    out.update(changes)
    if metric is not None:
        out["metrics"] = [{**out["metrics"][0], **metric}]
    return out


# (reason, spec, annotations): each a create the webhook refuses with that reason.
REJECTED: list[tuple[str, Obj, dict[str, str]]] = [
    ("CoordinationRequiresOMENative", spec([{"components": ["engine", "decoder"]}], mode=None), {}),
    ("CanaryRequiresOMENative", spec([{"components": ["engine"], "canary": canary()}], components=("engine",),
                                     mode=None), {}),
    ("InvalidComponentInCoordinationGroup", spec([{"components": ["prefill"]}]), {}),
    ("OrphanCoordinationGroup", spec([{"components": ["router"]}]), {}),
    ("DuplicateComponentInCoordinationGroups",
     spec([{"components": ["engine"]}, {"components": ["engine", "decoder"]}], groupOrdering="Concurrent"), {}),
    ("GroupOrderingNotHonored", spec([{"components": ["engine", "decoder"], "canary": canary()},
                                      {"components": ["router"]}], components=("engine", "decoder", "router")), {}),
    ("SoakNotHonored", spec([{"components": ["engine", "decoder"], "soak": "5m"}]), {}),
    ("OrderNotHonored", spec([{"components": ["engine", "decoder"], "order": ["decoder", "engine"]}]), {}),
    ("InvalidRollingUpdateInteger", spec([{"components": ["engine", "decoder"], "rollingUpdate": {"maxSurge": -1}}]),
     {}),
    ("InvalidRollingUpdatePercent",
     spec([{"components": ["engine", "decoder"], "rollingUpdate": {"maxUnavailable": "120%"}}]), {}),
    ("ZeroBudgetPacingUnstartable",
     spec([{"components": ["engine", "decoder"], "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}}]), {}),
    ("RolloutPolicyRefUnsupported", spec([{"components": ["engine", "decoder"], "policyRef": {"name": "p"}}]), {}),
    ("CanaryInvalid", spec([{"components": ["engine", "decoder"], "canary": canary([step("2", 10),
                                                                                     step("100%", 100)])}]), {}),
    ("CanaryInvalid", spec([{"components": ["engine", "decoder"], "canary": canary([step("25%", 50),
                                                                                     step("100%", 40)])}]), {}),
    ("CanaryInvalid", spec([{"components": ["engine", "decoder"], "canary": canary([step("50%", 100)])}]), {}),
    ("CanaryInvalid", spec([{"components": ["engine", "decoder"], "canary": canary([step(0, 10),
                                                                                     step("100%", 100)])}]), {}),
    ("CanaryInvalid", spec([{"components": ["engine", "decoder"], "canary": canary(readyTimeout="0s")}]), {}),
    ("CanaryInvalid", spec([{"components": ["engine"], "canary": canary()}]), {}),
    ("CanaryInvalid", spec([{"components": ["decoder"], "canary": canary()}]), {}),
    ("CanaryInvalid", spec([{"components": ["engine", "decoder"], "canary": canary(),
                             "maintainRatio": {"tolerance": 5}}]), {}),
    ("MultipleCanaryGroups", spec([{"components": ["engine", "decoder"], "canary": canary()},
                                   {"components": ["engine", "decoder"], "canary": canary()}],
                                  groupOrdering="Concurrent"), {}),
    ("InvalidDuration", spec([{"components": ["engine", "decoder"]}]), {"ome.io/rollout-ready-timeout": "soon"}),
    ("AnalysisInvalid", spec([{"components": ["engine", "decoder"], "canary": canary(
        [step("25%", 10, analysis=analysis(interval="0s")), step("100%", 100)])}]), {}),
    ("AnalysisInvalid", spec([{"components": ["engine", "decoder"], "canary": canary(
        [step("25%", 10, analysis=analysis(metric={"threshold": "low"})), step("100%", 100)])}]), {}),
    ("AnalysisInvalid", spec([{"components": ["engine", "decoder"], "canary": canary(
        [step("25%", 10, analysis=analysis(metric={"query": "  "})), step("100%", 100)])}]), {}),
]

# (reason, spec, annotations): admitted with a warning that gives the reason.
WARNED: list[tuple[str, Obj, dict[str, str]]] = [
    ("RatioToleranceTooHigh", spec([{"components": ["engine", "decoder"], "rollingUpdate": {"maxSurge": 1},
                                     "maintainRatio": {"tolerance": 60}}]), {}),
    ("RolloutTimeoutTooShort", spec([{"components": ["engine", "decoder"]}]), {"ome.io/rollout-ready-timeout": "30s"}),
]

# (reason, stored spec, edited spec): an edit the webhook refuses.
EDITS: list[tuple[str, Obj, Obj]] = []
_rolling = spec([{"components": ["engine", "decoder"], "rollingUpdate": {"maxSurge": 1}}])
_lockstep = copy.deepcopy(_rolling)
_lockstep["engine"]["runner"]["image"] = "example.invalid/server:2"
EDITS.append(("RollingUpdateLockstepViolation", _rolling, _lockstep))
_separate = spec([{"components": ["decoder"]}, {"components": ["engine"]}], pairingProtocol="kv-v1")
_separate_new = copy.deepcopy(_separate)
_separate_new["rollout"]["pairingProtocol"] = "kv-v2"
EDITS.append(("PairingProtocolChangeUncoordinated", _separate, _separate_new))
