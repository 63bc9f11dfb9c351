"""The InferenceService's rollout groups: for every OMENative component at once, which Instances may move to the new
revision next and why the others wait. Pure: the components' facts, the InferenceService's annotations and its last
status in; each InferenceReplica's `spec.pacing` and pause, the holds, and the rollout's status out.

The InferenceReplica does the moving (surge, drain, readiness deadlines); this planner only narrows it:
`partition` keeps Instances on their revision, `maxUnavailable` caps how many move at once, `rollbackToRevision`
moves every Instance back. What a rollout must remember across reconciles (the pinned plan, a canary's step, when a
sequence's component finished) lives in the InferenceService's status, which the controller writes before it
applies the InferenceReplicas that depend on it.

- `model`: inputs and outputs; `planner`: one pass's decisions; `plan`: the recipe;
- `groups`: blue-green, rolling update, sequence; `canary` and its `state`; `analysis`: canary samples;
- `runs`: a run's opening, repin, progress deadline, and the revisions held back.
"""

from omenative.api.rollout import gate_of, plan_digest, primary_of, topology
from omenative.controllers.inferenceservice.rollout.analysis import (
    AnalysisRequest,
    analysis_requests,
    judge,
    render_query,
    verdict,
)
from omenative.controllers.inferenceservice.rollout.canary import canary_count
from omenative.controllers.inferenceservice.rollout.model import (
    PAUSED_ANNOTATION,
    PROMOTE_ANNOTATION,
    READY_TIMEOUT_ANNOTATION,
    REPIN_ANNOTATION,
    ROLLBACK_ANNOTATION,
    SURGE_THEN_DRAIN,
    Directive,
    Inputs,
    Member,
    Outcome,
)
from omenative.controllers.inferenceservice.rollout.plan import plan
from omenative.controllers.inferenceservice.rollout.runs import rejected, stalled

__all__ = [
    "PAUSED_ANNOTATION", "PROMOTE_ANNOTATION", "READY_TIMEOUT_ANNOTATION", "REPIN_ANNOTATION", "ROLLBACK_ANNOTATION",
    "SURGE_THEN_DRAIN", "AnalysisRequest", "Directive", "Inputs", "Member", "Outcome", "analysis_requests",
    "canary_count", "gate_of", "judge", "plan", "plan_digest", "primary_of", "rejected", "render_query", "stalled",
    "topology", "verdict",
]
