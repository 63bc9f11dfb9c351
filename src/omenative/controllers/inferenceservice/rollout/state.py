"""What a canary remembers across reconciles: `status.components.<primary>.canary`, typed.

Read from the InferenceService's last status and written back whole. A value of the wrong type (an object stored
by hand or by another writer) reads as absent; a key this version does not know is kept as it was."""

from __future__ import annotations

from typing import Any

import attrs

from omenative.obj import Obj

# status key -> attribute
_FIELDS = {
    "canaryRevisionHash": "canary",
    "stableRevisionHash": "stable",
    "stableRevisions": "stables",
    "currentStep": "step",
    "stepEnteredTime": "step_entered",
    "stepReadyTime": "step_ready",
    "observedTrafficWeight": "traffic",
    "rolledBackRevisionHash": "rolled_back",
    "promotedThrough": "promoted_through",
    "preStepHold": "pre_step_hold",
    "gate": "gate",
    "analysisFailedChecks": "failed_checks",
    "lastEvaluationTime": "last_evaluation",
    "lastConclusiveEvaluationTime": "last_conclusive",
    "metricResults": "metric_results",
}


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@attrs.define(kw_only=True)
class CanaryState:
    canary: str | None = None  # the revision the canary moves to
    stable: str | None = None  # the primary's stable revision (the traffic split's other side)
    stables: dict[str, str] | None = None  # every member's stable revision, pinned when the canary started
    step: int | None = None  # the step in force (0-based)
    step_entered: str | None = None  # when the step started waiting for its Instances
    step_ready: str | None = None  # when the step's Instances were all ready (its gate counts from here)
    traffic: int | None = None  # the weight the canary's Instances were last given
    rolled_back: str | None = None  # a revision rolled back: held until another appears
    promoted_through: str | None = None  # the promote request already answered
    pre_step_hold: bool | None = None  # after a repin to more traffic: wait for a promote
    gate: str | None = None  # what the step waits at
    failed_checks: int | None = None  # failed analysis samples of this step
    last_evaluation: str | None = None
    last_conclusive: str | None = None
    metric_results: list[Obj] | None = None  # the last sample
    unknown: Obj = attrs.field(factory=dict)  # keys this version does not know, kept

    @classmethod
    def from_status(cls, block: Any) -> CanaryState:
        block = block if isinstance(block, dict) else {}
        stables = block.get("stableRevisions")
        results = block.get("metricResults")
        pre_step_hold = block.get("preStepHold")
        return cls(
            canary=_str(block.get("canaryRevisionHash")), stable=_str(block.get("stableRevisionHash")),
            stables={k: v for k, v in stables.items() if isinstance(v, str)} if isinstance(stables, dict) else None,
            step=_int(block.get("currentStep")), step_entered=_str(block.get("stepEnteredTime")),
            step_ready=_str(block.get("stepReadyTime")), traffic=_int(block.get("observedTrafficWeight")),
            rolled_back=_str(block.get("rolledBackRevisionHash")),
            promoted_through=_str(block.get("promotedThrough")),
            pre_step_hold=pre_step_hold if isinstance(pre_step_hold, bool) else None,
            gate=_str(block.get("gate")), failed_checks=_int(block.get("analysisFailedChecks")),
            last_evaluation=_str(block.get("lastEvaluationTime")),
            last_conclusive=_str(block.get("lastConclusiveEvaluationTime")),
            metric_results=results if isinstance(results, list) else None,
            unknown={k: v for k, v in block.items() if k not in _FIELDS})

    def to_status(self) -> Obj:
        """The status block: every field that is set (falsy values too: step 0, weight 0), the unknown keys."""
        out: Obj = {k: v for k, v in self.unknown.items() if v is not None}
        for key, attribute in _FIELDS.items():
            value = getattr(self, attribute)
            if value is not None:
                out[key] = value
        return out

    def completed(self) -> CanaryState:
        """What a completed canary keeps: its revision and last step (the stable revision is the canary now)."""
        return CanaryState(canary=self.canary, step=self.step, traffic=100)
