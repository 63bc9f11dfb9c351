"""The rollout planner's inputs and outputs: the components' facts (`Member`), everything a pass reads (`Inputs`),
what it writes into each InferenceReplica (`Directive`) and what it returns (`Outcome`). Pure."""

from __future__ import annotations

from typing import Any

import attrs

from omenative.api import constants as c
from omenative.api.events import Event
from omenative.api.units import InvalidValue, optional_duration
from omenative.obj import Obj

# The operators' requests on the InferenceService.
PAUSED_ANNOTATION = c.ANN_ROLLOUT_PAUSED
PROMOTE_ANNOTATION = c.ANN_ROLLOUT_PROMOTE
ROLLBACK_ANNOTATION = c.ANN_ROLLOUT_ROLLBACK
READY_TIMEOUT_ANNOTATION = c.ANN_ROLLOUT_READY_TIMEOUT
REPIN_ANNOTATION = c.ANN_ROLLOUT_REPIN

SURGE_THEN_DRAIN = "SurgeThenDrain"
IN_PLACE = ("InPlaceIfPossible", "InPlaceOnly")
BLUE_GREEN_BUDGET = "25%"  # each component of a blue-green group moves at most a quarter at a time, rounded up
DEFAULT_BUDGET = "25%"


@attrs.frozen(kw_only=True)
class Member:
    """One OMENative component as the caches show it."""

    name: str
    desired: int
    target: str  # the revision its spec renders now
    stable: str | None  # the revision most of its Instances run (the InferenceReplica's currentRevision); None: new
    revisions: tuple[tuple[str, bool, bool], ...] = ()  # per live Instance: (revision, ready, failed)
    strategy: str = SURGE_THEN_DRAIN
    pairing: str | None = None  # the target revision's ome.io/pairing-protocol
    pairings: dict[str, str | None] = attrs.field(factory=dict)  # the token of each revision its Instances run
    serving: int | None = None  # Instances in rotation (the InferenceReplica's servingReplicas); None: unknown
    draining: int = 0  # Instances draining before their pods go (phase Deleting; not in `revisions`)
    # Instances of `revisions` whose new pod serves while their old pod drains (a single pod's SurgeDrain step):
    # not ready yet, but no longer coming up.
    surge_draining: int = 0
    partition: int = 0  # the component's own rollingUpdate.partition: its lowest Instances stay where they are

    def on(self, revision: str | None) -> int:
        return sum(1 for rev, _, _ in self.revisions if rev == revision)

    def ready_on(self, revision: str | None) -> int:
        return sum(1 for rev, ready, _ in self.revisions if rev == revision and ready)

    def failed_on(self, revision: str | None) -> int:
        return sum(1 for rev, _, failed in self.revisions if rev == revision and failed)

    def moving_to(self, revision: str | None) -> int:
        """Instances on their way to `revision`: targeted, not yet ready on it (a surge's new pods, a recreate)."""
        return sum(1 for rev, ready, _ in self.revisions if rev == revision and not ready)

    def done(self, revision: str | None) -> bool:
        """Every Instance runs `revision` and enough of them are ready."""
        return all(rev == revision for rev, _, _ in self.revisions) and \
            self.ready_on(revision) >= max(self.desired, 0)


@attrs.frozen(kw_only=True)
class Inputs:
    groups: list[Obj]  # spec.rollout.groups as written
    members: dict[str, Member]  # every OMENative component
    annotations: dict[str, str]
    previous: Obj  # the InferenceService's last status
    now: float
    default_tolerance: int = 5
    default_ready_timeout: str | None = None
    # Analysis samples the controller just took, by group index: one metricResults entry per metric.
    samples: dict[int, list[Obj]] = attrs.field(factory=dict)
    default_prometheus: str | None = None  # where analysis queries go when the canary names no serverAddress
    # Roll a blue-green, rolling-update or sequence run back when no component of it made progress for this long
    # (Deployment's progressDeadlineSeconds); None: off.
    progress_deadline: float | None = None

    @property
    def paused(self) -> bool:
        """ome.io/rollout-paused holds every component (`freeze` holds their repairs too)."""
        return self.annotations.get(PAUSED_ANNOTATION) in ("true", "freeze")


@attrs.frozen(kw_only=True)
class Directive:
    """What the InferenceService writes into one InferenceReplica's spec, and the hold it reports for it."""

    # None defers to the component's own rollingUpdate.partition; a canary step's 0 replaces it (OME: "a canary's
    # current step replaces your partition"), so a finished step never falls back to the user's hold.
    partition: int | None = None
    max_unavailable: int | str | None = None
    rollback_to: str | None = None
    paused: bool = False
    freeze: bool = False
    hold: tuple[str, str] | None = None  # (gate, reason)

    def pacing(self) -> Obj | None:
        out: Obj = {}
        if self.partition is not None:
            out["partition"] = self.partition
        if self.max_unavailable is not None:
            out["maxUnavailable"] = self.max_unavailable
        if self.rollback_to:
            out["rollbackToRevision"] = self.rollback_to
        return out or None


@attrs.frozen(kw_only=True)
class Outcome:
    directives: dict[str, Directive]
    status: Obj  # top-level InferenceService status fields: rollout, rolloutCoordination
    components: dict[str, Obj]  # per component: canary, rolloutPhase, traffic
    conditions: list[tuple[str, bool, str, str]]  # (type, status, reason, message)
    events: list[Event]  # each emitted once per transition
    consume: list[str]  # annotations answered by this status (removed once it is written)
    wake_in: float | None
    rollbacks: list[tuple[str, str]] = attrs.field(factory=list)  # canaries rolled back now: (primary, cause)


def duration(text: Any) -> float | None:
    """A duration as written in the spec, or None when it is absent or malformed (the webhook refuses malformed
    ones; an object stored before the webhook ran is read as if it had none)."""
    try:
        return optional_duration(text) if isinstance(text, str) else None
    except InvalidValue:
        return None


def ready_timeout(inputs: Inputs, canary_spec: Obj) -> float | None:
    """How long a canary step waits for its Instances (and its analysis for a conclusive sample): the
    ome.io/rollout-ready-timeout annotation, else the canary's readyTimeout, else the controller's default."""
    for text in (inputs.annotations.get(READY_TIMEOUT_ANNOTATION), canary_spec.get("readyTimeout"),
                 inputs.default_ready_timeout):
        value = duration(text)
        if value is not None and value > 0:
            return value
    return None
