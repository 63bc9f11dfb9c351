"""The InferenceService's rollout groups: for every OMENative component at once, which Instances may move to the new
revision next and why the others wait. Pure: the components' facts, the InferenceService's annotations and its last
status in; each InferenceReplica's `spec.pacing` and pause, the holds, and the rollout's status out.

The InferenceReplica does the moving (surge, drain, readiness deadlines); this planner only narrows it:
`partition` keeps Instances on their revision, `maxUnavailable` caps how many move at once, `rollbackToRevision`
moves every Instance back. What a rollout must remember across reconciles (the pinned plan, a canary's step, when a
sequence's component finished) lives in the InferenceService's status, which the controller writes before it
applies the InferenceReplicas that depend on it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

import attrs

from omenative.api import constants as c
from omenative.api.rollout_validation import is_sequence, progression
from omenative.api.units import InvalidValue, format_duration, optional_duration, resolve_int_or_percent
from omenative.obj import Obj
from omenative.observe.pods import format_time, parse_time

PAUSED_ANNOTATION = "ome.io/rollout-paused"
PROMOTE_ANNOTATION = "ome.io/rollout-promote"
ROLLBACK_ANNOTATION = "ome.io/rollout-rollback"
READY_TIMEOUT_ANNOTATION = "ome.io/rollout-ready-timeout"
REPIN_ANNOTATION = "ome.io/rollout-repin"

SURGE_THEN_DRAIN = "SurgeThenDrain"
IN_PLACE = ("InPlaceIfPossible", "InPlaceOnly")
BLUE_GREEN_BUDGET = "25%"  # each component of a blue-green group moves at most a quarter at a time, rounded up
DEFAULT_BUDGET = "25%"

# Canary phases (status.components.<primary>.rolloutPhase).
PENDING, CANARYING, PAUSED, PROMOTING, STABLE = "Pending", "Canarying", "Paused", "Promoting", "Stable"
FAILED, ROLLING_BACK, ROLLED_BACK = "Failed", "RollingBack", "RolledBack"
IN_FLIGHT = (PENDING, CANARYING, PAUSED, PROMOTING, FAILED)


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

    def on(self, revision: str | None) -> int:
        return sum(1 for rev, _, _ in self.revisions if rev == revision)

    def ready_on(self, revision: str | None) -> int:
        return sum(1 for rev, ready, _ in self.revisions if rev == revision and ready)

    def failed_on(self, revision: str | None) -> int:
        return sum(1 for rev, _, failed in self.revisions if rev == revision and failed)

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


@attrs.frozen(kw_only=True)
class Directive:
    """What the InferenceService writes into one InferenceReplica's spec, and the hold it reports for it."""

    partition: int = 0
    max_unavailable: int | str | None = None
    rollback_to: str | None = None
    paused: bool = False
    freeze: bool = False
    hold: tuple[str, str] | None = None  # (gate, reason)

    def pacing(self) -> Obj | None:
        out: Obj = {}
        if self.partition:
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
    events: list[tuple[str, str, str]]  # (type, reason, message), each emitted once per transition
    consume: list[str]  # annotations answered by this status (removed once it is written)
    wake_in: float | None
    rollbacks: list[tuple[str, str]] = attrs.field(factory=list)  # canaries rolled back now: (primary, cause)


# ----------------------------------------------------------------------------------------------- the groups


def _duration(text: Any) -> float | None:
    try:
        return optional_duration(text) if isinstance(text, str) else None
    except InvalidValue:
        return None


# --------------------------------------------------------------------------------------------------- the plan


@attrs.define
class _Planner:
    inputs: Inputs
    groups: list[Obj]
    run: Obj | None
    directives: dict[str, Directive] = attrs.field(factory=dict)
    events: list[tuple[str, str, str]] = attrs.field(factory=list)
    wakes: list[float] = attrs.field(factory=list)
    consume: list[str] = attrs.field(factory=list)
    components: dict[str, Obj] = attrs.field(factory=dict)
    coordination: list[Obj] = attrs.field(factory=list)
    repinned: bool = False  # this pass moved the run to the current plan
    rollbacks: list[tuple[str, str]] = attrs.field(factory=list)  # canaries rolled back now: (primary, cause)

    @property
    def now(self) -> float:
        return self.inputs.now

    def set(self, name: str, **changes: Any) -> None:
        self.directives[name] = attrs.evolve(self.directives.get(name, Directive()), **changes)

    def hold(self, name: str, gate: str, reason: str) -> None:
        if self.directives.get(name, Directive()).hold is None:
            self.set(name, hold=(gate, reason))

    def wake_at(self, when: float) -> None:
        self.wakes.append(when)

    def stable_of(self, name: str) -> str | None:
        """The revision a member rolls back to: the one pinned when the run opened."""
        for entry in (self.run or {}).get("targetRevisions") or []:
            if entry.get("component") == name:
                return str(entry["stableRevision"]) if entry.get("stableRevision") else None
        member = self.inputs.members.get(name)
        return member.stable if member else None

    def changing(self, names: list[str]) -> list[Member]:
        """The members the run moves: those whose pinned stable revision is not their target."""
        out = []
        for name in names:
            member = self.inputs.members.get(name)
            if member is None:
                continue
            stable = self.stable_of(name)
            if stable is not None and stable != member.target:
                out.append(member)
        return out

    def completed_at(self, name: str) -> float | None:
        for entry in (self.run or {}).get("targetRevisions") or []:
            if entry.get("component") == name:
                return parse_time(entry.get("completedAt"))
        return None

    # -- blue-green
    def blue_green(self, index: int, group: Obj, members: list[Member]) -> Obj:
        for member in members:
            if not member.done(member.target):
                self.set(member.name, max_unavailable=BLUE_GREEN_BUDGET)
        self.pairing(members)
        return self.coordination_entry(index, group, "BlueGreen", members)

    def pairing(self, members: list[Member]) -> None:
        """While the engine-decoder token changes, the last Instance of a side on the old token waits until the
        other side has one on the new token ready, so one pair of the same token always serves. A side of one
        Instance cannot keep one back (it would never move): it is exempt."""
        by_name = {m.name: m for m in members}
        engine, decoder = by_name.get(c.ENGINE), by_name.get(c.DECODER)
        if engine is None or decoder is None:
            return
        # The token the run moves away from: the one of the revision pinned as stable when it opened.
        old = engine.pairings.get(self.stable_of(engine.name) or "", engine.pairing)
        if old == engine.pairing:
            return
        for side, peer in ((engine, decoder), (decoder, engine)):
            if side.desired <= 1 or peer.ready_on(peer.target) > 0:
                continue
            self.set(side.name, partition=1)
            if side.on(side.target) >= side.desired - 1:
                self.hold(side.name, "Pairing", (
                    f"keeping one {side.name} Instance on pairing protocol {old or '(none)'} "
                    f"until a {peer.name} Instance on {peer.pairing or '(none)'} is ready"))

    # -- rolling update
    def rolling_update(self, index: int, group: Obj, members: list[Member]) -> Obj:
        spec = group.get("rollingUpdate") or {}
        for member in members:
            budget = spec.get("maxSurge") if member.strategy == SURGE_THEN_DRAIN else spec.get("maxUnavailable")
            if not member.done(member.target):
                self.set(member.name, max_unavailable=budget if budget is not None else DEFAULT_BUDGET)
        ratio = group.get("maintainRatio")
        checked = [m for m in members if m.strategy not in IN_PLACE and m.desired > 0]
        observed: Obj | None = None
        if ratio is not None and len(checked) >= 2:
            tolerance = ratio.get("tolerance")
            tolerance = self.inputs.default_tolerance if tolerance is None else int(tolerance)
            observed = self.maintain_ratio(checked, tolerance)
        return self.coordination_entry(index, group, "RollingUpdate", members, observed_ratio=observed)

    def maintain_ratio(self, members: list[Member], tolerance: int) -> Obj:
        """Holds a component once it would run more than `tolerance` percent further through its rollout than the
        slowest other: its Instances on the new revision stay within floor((slowest + tolerance) x desired). When
        every component is held so (a tolerance too tight for the counts), the one furthest behind moves one."""
        progress = {m.name: m.on(m.target) / m.desired for m in members}
        allowed: dict[str, int] = {}
        for member in members:
            slowest = min(progress[o.name] for o in members if o.name != member.name)
            allowed[member.name] = min(member.desired, math.floor((slowest + tolerance / 100) * member.desired
                                                                  + 1e-9))
        unfinished = [m for m in members if m.on(m.target) < m.desired]
        if unfinished and all(allowed[m.name] <= m.on(m.target) for m in unfinished):
            laggard = min(unfinished, key=lambda m: (progress[m.name], m.name))
            allowed[laggard.name] = laggard.on(laggard.target) + 1
        for member in members:
            keep = member.desired - allowed[member.name]
            if keep > 0 and member.on(member.target) < member.desired:
                self.set(member.name, partition=keep)
                if allowed[member.name] <= member.on(member.target):
                    others = ", ".join(f"{o.name} {progress[o.name]:.0%}" for o in members if o is not member)
                    self.hold(member.name, "Ratio", (
                        f"{member.name} at {progress[member.name]:.0%} of its rollout waits for {others} "
                        f"(tolerance {tolerance}%)"))
        return {"tolerance": tolerance,
                "progress": [{"component": m.name, "updated": m.on(m.target), "desired": m.desired}
                             for m in members]}

    # -- sequence
    def sequence(self, groups: list[tuple[int, Obj]]) -> None:
        """Rolls the groups out one at a time, in list order, skipping a component the change leaves alone; each
        waits out the longest soak of any group but the last after the one before it finished."""
        soak = max((_duration(g.get("soak")) or 0.0 for _, g in groups[:-1]), default=0.0)
        names = [g["components"][0] for _, g in groups]
        previous: str | None = None
        current: str | None = None
        phase = "Idle"
        failed = False
        for name in names:
            member = next(iter(self.changing([name])), None)
            if member is None:
                continue
            if current is not None:
                self.set(name, partition=member.desired)
                self.hold(name, "Sequential", f"Sequential waiting on {current}")
                continue
            if member.done(member.target):
                previous = name
                continue
            # The soak counts from when the component before finished (this pass, if not recorded yet).
            finished = (self.completed_at(previous) or self.now) if previous else None
            if previous is not None and finished is not None and soak > 0 and self.now < finished + soak:
                self.set(name, partition=member.desired)
                self.hold(name, "Sequential", f"Sequential.Soak: {name} waiting out the {format_duration(soak)} "
                                              f"soak after {previous}")
                self.wake_at(finished + soak)
                phase, current = "Waiting", name
                continue
            self.set(name, max_unavailable=BLUE_GREEN_BUDGET)
            current, phase = name, "Surging"
            if member.failed_on(member.target):
                failed = True
                phase = "Failed"
                self.events.append(("Warning", "CoordinationGroupFailed", (
                    f"sequence: {name} has {member.failed_on(member.target)} failed Instance(s) on revision "
                    f"{member.target}; the components after it wait")))
        composite = {"Idle": "Idle", "Surging": f"{current}.Surging", "Waiting": "Sequential.AwaitingNextComponent",
                     "Failed": f"{current}.Failed"}[phase]
        self.coordination.append(_entry(
            name="sequence", components=names, policy="Sequential", phase=phase, composite=composite,
            current=current, previous=previous, failed=failed, previous_status=self.previous_group("sequence"),
            now=self.now))

    # -- status of the non-canary groups
    def previous_group(self, name: str) -> Obj:
        for entry in ((self.inputs.previous.get("rolloutCoordination") or {}).get("groups") or []):
            if entry.get("name") == name:
                return dict(entry)
        return {}

    def coordination_entry(self, index: int, group: Obj, policy: str, members: list[Member],
                           observed_ratio: Obj | None = None) -> Obj:
        failed = [m for m in members if m.failed_on(m.target)]
        moving = [m for m in members if not m.done(m.target)]
        phase = "Failed" if failed else "Surging" if moving else "Idle"
        if failed:
            self.events.append(("Warning", "CoordinationGroupFailed", (
                f"group {index} ({', '.join(group.get('components') or [])}): " + "; ".join(
                    f"{m.name} has {m.failed_on(m.target)} failed Instance(s) on revision {m.target}" for m in failed)
                + "; the other components go on")))
        held = [m.name for m in members if self.directives.get(m.name, Directive()).hold]
        composite = phase if not moving else (f"{moving[0].name}.{phase}" if len(moving) == 1 else phase)
        entry = _entry(name=str(index), components=list(group.get("components") or []), policy=policy, phase=phase,
                       composite=composite, current=None, previous=None, failed=bool(failed),
                       previous_status=self.previous_group(str(index)), now=self.now)
        if moving:
            budget = self.directives.get(moving[0].name, Directive()).max_unavailable
            if budget is not None:
                entry["observedSurge"] = budget
        if observed_ratio is not None:
            entry["observedRatio"] = observed_ratio
        if held:
            entry["message"] = "; ".join(f"{n}: {self.directives[n].hold[1]}" for n in held)  # type: ignore[index]
        self.coordination.append(entry)
        return entry


def _entry(*, name: str, components: list[str], policy: str, phase: str, composite: str, current: str | None,
           previous: str | None, failed: bool, previous_status: Obj, now: float) -> Obj:
    entry: Obj = {"name": name, "components": components, "policy": policy, "phase": phase,
                  "compositePhase": composite}
    if current:
        entry["currentComponent"] = current
    if previous:
        entry["previousComponent"] = previous
    same = previous_status.get("phase") == phase and previous_status.get("lastTransitionTime")
    entry["lastTransitionTime"] = previous_status["lastTransitionTime"] if same else format_time(now)
    return entry


# --------------------------------------------------------------------------------------------------- canary


def canary_count(capacity: Any, desired: int) -> int:
    """Instances on the new revision at a step: a percentage of the desired Instances rounded up, or a count, at
    most the desired Instances."""
    try:
        count = resolve_int_or_percent(capacity, desired) or 0
    except InvalidValue:
        count = 0
    return max(0, min(count, desired))


def primary_of(names: list[str]) -> str:
    """The component whose status carries the canary: the router when the group has it, else the engine."""
    for name in (c.ROUTER, c.ENGINE, c.DECODER):
        if name in names:
            return name
    return names[0]


def gate_of(step: Obj) -> str:
    if step.get("analysis"):
        return "Analysis"
    pause = step.get("pause")
    if pause is None:
        return "Immediate"
    return "Timed" if pause.get("duration") else "Manual"


def _canary(planner: _Planner, index: int, group: Obj, isvc: str) -> None:
    inputs = planner.inputs
    names = [n for n in (group.get("components") or []) if n in inputs.members]
    if not names:
        return
    primary = primary_of(names)
    canary_spec = group.get("canary") or {}
    steps: list[Obj] = list(canary_spec.get("steps") or [])
    previous_component = (inputs.previous.get("components") or {}).get(primary) or {}
    state: Obj = dict(previous_component.get("canary") or {})
    phase = previous_component.get("rolloutPhase")
    members = [inputs.members[n] for n in names]
    lead = inputs.members.get(primary) or members[0]
    target = lead.target
    rollback_asked = inputs.annotations.get(ROLLBACK_ANNOTATION) == "true"
    paused = inputs.annotations.get(PAUSED_ANNOTATION) in ("true", "freeze")
    stables = {m.name: (state.get("stableRevisions") or {}).get(m.name) or planner.stable_of(m.name)
               for m in members}

    # A rejected revision stays rejected: every member is held on its stable revision until another appears.
    if state.get("rolledBackRevisionHash") and state["rolledBackRevisionHash"] == target:
        back = all(m.done(stables[m.name]) for m in members if stables[m.name])
        for member in members:
            if stables[member.name] and stables[member.name] != member.target:
                planner.set(member.name, rollback_to=stables[member.name])
        phase = ROLLED_BACK if back else ROLLING_BACK
        state["observedTrafficWeight"] = 0
        _canary_status(planner, primary, state, phase, isvc, target, stables.get(primary), 0)
        return
    if state.get("rolledBackRevisionHash") and ROLLBACK_ANNOTATION in inputs.annotations:
        planner.consume.append(ROLLBACK_ANNOTATION)  # a fresh target: the old request must not roll it back
        rollback_asked = False

    changing = planner.changing(names)
    in_flight = state.get("canaryRevisionHash") is not None and phase in IN_FLIGHT
    if not changing and not in_flight:
        if rollback_asked and not state.get("rolledBackRevisionHash"):
            planner.consume.append(ROLLBACK_ANNOTATION)
            planner.events.append(("Warning", "CanaryRollbackIgnored",
                                   "ome.io/rollout-rollback ignored: no canary is in flight"))
        if phase is not None:
            _canary_status(planner, primary, _completed(state), STABLE, isvc, target, None, 100)
        return
    if state.get("canaryRevisionHash") != target:
        if phase == FAILED and state.get("canaryRevisionHash"):
            target = state["canaryRevisionHash"]  # a failed canary stays failed until it is rolled back
        else:
            kept = state.get("stableRevisions") if in_flight else None
            stables = {m.name: (kept or {}).get(m.name) or planner.stable_of(m.name) for m in members}
            if in_flight and all(stables.get(m.name) in (None, m.target) for m in members):
                # The spec went back to the revision the canary started from: no canary toward what already
                # serves; the canary's Instances move back as any update does.
                planner.events.append(("Normal", "CanaryAbandoned", (
                    f"canary {state.get('canaryRevisionHash')} abandoned: the spec is back on the stable revision "
                    f"{target}")))
                _canary_status(planner, primary, _completed({"canaryRevisionHash": target, "currentStep": 0}),
                               STABLE, isvc, target, None, 100)
                return
            state = {"canaryRevisionHash": target, "stableRevisionHash": stables.get(primary) or lead.stable,
                     "stableRevisions": {k: v for k, v in stables.items() if v},
                     "currentStep": 0, "stepEnteredTime": format_time(inputs.now)}
            phase = PENDING
    if not steps:
        return
    step_index = min(int(state.get("currentStep") or 0), len(steps) - 1)
    step = steps[step_index]
    if planner.repinned and state.get("canaryRevisionHash") == target and phase in IN_FLIGHT and \
            int(step.get("traffic") or 0) > int(state.get("observedTrafficWeight") or 0):
        state.update(currentStep=step_index, preStepHold=True)  # a repin may only hold or tighten exposure
    last = step_index == len(steps) - 1
    counts = {m.name: canary_count(step.get("capacity"), m.desired) for m in members}

    def report(phase: str) -> None:
        """The canary's status at `phase`, with the traffic weight it last recorded."""
        _canary_status(planner, primary, state, phase, isvc, target, state.get("stableRevisionHash"),
                       int(state.get("observedTrafficWeight") or 0))

    def fail(message: str) -> None:
        planner.events.append(("Warning", "CanaryFailed", message))
        report(FAILED)

    def roll_back(cause: str) -> None:
        """Moves every member back to its stable revision at once, and holds the rejected one."""
        state["rolledBackRevisionHash"] = target
        state["observedTrafficWeight"] = 0
        for member in members:
            if stables[member.name] and stables[member.name] != member.target:
                planner.set(member.name, rollback_to=stables[member.name])
        planner.events.append(("Normal", "CanaryRollingBack", f"rolling the canary {target} back to the stable "
                                                              f"revision {state.get('stableRevisionHash')} ({cause})"))
        planner.rollbacks.append((primary, cause))
        _canary_status(planner, primary, state, ROLLING_BACK, isvc, target, state.get("stableRevisionHash"), 0)

    if rollback_asked and not paused:
        roll_back("manual")
        return

    for member in members:
        if member.name in {m.name for m in changing} or member.target == target:
            planner.set(member.name, partition=max(0, member.desired - counts[member.name]))
    ready = all(m.ready_on(m.target) >= counts[m.name] for m in members)
    if phase == FAILED:
        report(FAILED)
        return
    if not ready:
        if state.get("stepReadyTime"):
            state.pop("stepReadyTime")
            state["stepEnteredTime"] = format_time(inputs.now)  # fell below its count: the step starts again
        timeout = _ready_timeout(inputs, canary_spec)
        entered = parse_time(state.get("stepEnteredTime")) or inputs.now
        if timeout is not None and inputs.now - entered >= timeout:
            fail(f"canary step {step_index + 1} waited {format_duration(timeout)} for its new Instances; the "
                 "stable Instances keep serving")
            return
        if timeout is not None:
            planner.wake_at(entered + timeout)
        for member in members:
            if member.ready_on(member.target) < counts[member.name]:
                planner.hold(member.name, "Canary", (
                    f"canary step {step_index + 1}/{len(steps)} waits for {counts[member.name]} {member.name} "
                    f"Instance(s) ready on {target}"))
        report(PENDING)
        return

    state.setdefault("stepReadyTime", format_time(inputs.now))
    promote = inputs.annotations.get(PROMOTE_ANNOTATION)
    if state.get("promotedThrough") and promote != state["promotedThrough"]:
        state.pop("promotedThrough")  # the answered request is gone: manual promotion is armed again
    promoted = promote == target and state.get("promotedThrough") != promote
    if state.get("preStepHold"):
        # After a repin to a step with more traffic: capacity converges, the recorded traffic and the step wait
        # for an explicit promote.
        if not promoted or paused:
            for member in members:
                planner.hold(member.name, "Canary", f"canary step {step_index + 1}/{len(steps)} holds before its "
                                                    "higher traffic weight until ome.io/rollout-promote")
            state["gate"] = gate_of(step)
            report(PAUSED)
            return
        state.pop("preStepHold")
        state["promotedThrough"] = promote
        planner.consume.append(PROMOTE_ANNOTATION)
        promoted = False  # the promote released the hold; the step's own gate comes next
    state["observedTrafficWeight"] = int(step.get("traffic") or 0)
    ready_at = parse_time(state["stepReadyTime"]) or inputs.now
    gate = gate_of(step)
    opens = False
    if gate == "Immediate":
        opens = True
    elif gate == "Timed":
        wait = _duration((step.get("pause") or {}).get("duration")) or 0.0
        opens = inputs.now >= ready_at + wait
        if not opens:
            planner.wake_at(ready_at + wait)
    elif gate == "Analysis":
        judged = _analysis(planner, index, step, state, ready_at, canary_spec)
        if judged == "rollback":
            roll_back("analysis")
            return
        if judged == "failed":
            fail(f"canary step {step_index + 1}: its analysis stayed inconclusive past the ready timeout; the "
                 "stable Instances keep serving")
            return
        opens = judged == "pass" or (promoted and not paused)  # a promote overrides the analysis of this step
    else:  # Manual
        opens = promoted and not paused
    if last and opens:
        delay = float(canary_spec.get("scaleDownDelaySeconds") or 0)
        if inputs.now < ready_at + delay:
            planner.wake_at(ready_at + delay)
            opens = False
            gate = "ScaleDownDelay" if gate == "Immediate" else gate
    if opens and not paused:
        if promoted:
            state["promotedThrough"] = promote
            planner.consume.append(PROMOTE_ANNOTATION)
        if last:
            done = _completed({**state, "currentStep": step_index})
            planner.events.append(("Normal", "CanaryCompleted", f"canary {target} completed all {len(steps)} steps"))
            _canary_status(planner, primary, done, STABLE, isvc, target, None, 100)
            return
        nxt = steps[step_index + 1]
        state.update(currentStep=step_index + 1, stepEnteredTime=format_time(inputs.now))
        for key in ("stepReadyTime", "analysisFailedChecks", "lastConclusiveEvaluationTime"):
            state.pop(key, None)  # each step's analysis starts afresh (the last sample stays on record)
        for member in members:
            planner.set(member.name, partition=max(0, member.desired - canary_count(nxt.get("capacity"),
                                                                                     member.desired)))
        report(PENDING)
        return
    for member in members:
        if member.on(member.target) < member.desired:
            planner.hold(member.name, "Canary", f"canary step {step_index + 1}/{len(steps)} waits at its {gate} gate")
    phase = PROMOTING if last else (PAUSED if gate in ("Manual", "Analysis") else CANARYING)
    state["gate"] = gate
    report(phase)


# ------------------------------------------------------------------------------------------ canary analysis

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


def _analysis_due(step: Obj, state: Obj, now: float) -> float | None:
    """When the step's next sample is due (None: the step is not waiting on its analysis)."""
    analysis = step.get("analysis") or {}
    ready_at = parse_time(state.get("stepReadyTime"))
    if not analysis or ready_at is None:
        return None
    first = ready_at + (_duration(analysis.get("initialDelay")) or 0.0)
    last = parse_time(state.get("lastEvaluationTime"))
    interval = _duration(analysis.get("interval")) or 60.0
    return max(first, last + interval) if last is not None else first


def analysis_requests(inputs: Inputs, isvc: str, namespace: str) -> list[AnalysisRequest]:
    """The samples due now: canaries at an analysis gate whose warm-up and interval have passed. The controller
    takes them and plans again with the results (Inputs.samples)."""
    out: list[AnalysisRequest] = []
    if inputs.annotations.get(PAUSED_ANNOTATION) in ("true", "freeze"):
        return out  # a paused canary holds its step: nothing to judge
    for index, group in enumerate(inputs.groups):
        names = [n for n in (group.get("components") or []) if n in inputs.members]
        if progression(group) != "Canary" or not names:
            continue
        primary = primary_of(names)
        block = (inputs.previous.get("components") or {}).get(primary) or {}
        state = block.get("canary") or {}
        steps = list((group.get("canary") or {}).get("steps") or [])
        step_index = int(state.get("currentStep") or 0)
        if block.get("rolloutPhase") not in (CANARYING, PAUSED, PROMOTING) or state.get("gate") != "Analysis" or \
                not 0 <= step_index < len(steps) or state.get("canaryRevisionHash") != inputs.members[primary].target:
            continue
        step = steps[step_index]
        due = _analysis_due(step, state, inputs.now)
        if due is None or inputs.now < due:
            continue
        canary, stable = str(state.get("canaryRevisionHash")), str(state.get("stableRevisionHash") or "")
        variables = {"Namespace": namespace, "ISVCName": isvc, "Component": primary, "CanaryRevision": canary,
                     "StableRevision": stable, "CanaryService": f"{isvc}-{primary}-rev-{canary}",
                     "StableService": f"{isvc}-{primary}-rev-{stable}"}
        metrics = []
        for metric in (step.get("analysis") or {}).get("metrics") or []:
            query, error = render_query(str(metric.get("query") or ""), variables)
            metrics.append({**metric, "query": query, "templateError": error})
        source = (group.get("canary") or {}).get("prometheus") or {}
        address = source.get("serverAddress") or (None if source.get("providerRef") else inputs.default_prometheus)
        out.append(AnalysisRequest(group=index, component=primary, address=address,
                                   headers=dict(source.get("headers") or {}), metrics=metrics))
    return out


def _analysis(planner: _Planner, index: int, step: Obj, state: Obj, ready_at: float, canary_spec: Obj) -> str:
    """Judges the sample just taken (if any): `pass` opens the gate (after the step's pause as a bake), `rollback`
    and `failed` end the canary, `wait` holds it until the next sample."""
    inputs = planner.inputs
    analysis = step.get("analysis") or {}
    sample = inputs.samples.get(index)
    now = inputs.now
    result = "wait"
    if sample is not None:
        state["lastEvaluationTime"] = format_time(now)
        state["metricResults"] = sample
        judged = verdict(sample)
        if judged != "inconclusive":
            state["lastConclusiveEvaluationTime"] = format_time(now)
        if judged == "fail":
            state["analysisFailedChecks"] = int(state.get("analysisFailedChecks") or 0) + 1
            if state["analysisFailedChecks"] >= int(analysis.get("failureLimit") or 1):
                return "rollback"
        elif judged == "inconclusive" and analysis.get("onInconclusive") == "Rollback":
            return "rollback"
        elif judged == "pass":
            bake = _duration((step.get("pause") or {}).get("duration")) or 0.0
            result = "pass" if now >= ready_at + bake else "wait"
    # A stall: no conclusive sample for longer than the ready timeout.
    timeout = _ready_timeout(inputs, canary_spec)
    conclusive = parse_time(state.get("lastConclusiveEvaluationTime")) or ready_at
    if result == "wait" and timeout is not None and state.get("lastEvaluationTime") and now - conclusive >= timeout:
        return "rollback" if analysis.get("onInconclusive") == "RollbackOnStall" else "failed"
    due = _analysis_due(step, state, now)
    if due is not None:
        planner.wake_at(max(due, now + 0.5))
    return result


def _completed(state: Obj) -> Obj:
    """What a completed canary keeps: its revision and last step (the stable revision is the canary now)."""
    out: Obj = {k: state[k] for k in ("canaryRevisionHash", "currentStep") if k in state}
    out["observedTrafficWeight"] = 100
    return out


def rejected(inputs: Inputs) -> set[str]:
    """Components held on their stable revision because their canary's target was rolled back."""
    out: set[str] = set()
    for group in inputs.groups:
        names = [n for n in (group.get("components") or []) if n in inputs.members]
        if progression(group) != "Canary" or not names:
            continue
        primary = primary_of(names)
        state = ((inputs.previous.get("components") or {}).get(primary) or {}).get("canary") or {}
        if state.get("rolledBackRevisionHash") and state["rolledBackRevisionHash"] == inputs.members[primary].target:
            out.update(names)
    return out


def stalled(inputs: Inputs) -> dict[str, Obj]:
    """Components held on their stable revision because a rollout to their current target stalled past the
    progress deadline (status.rollout.rejectedRevisions), by component."""
    out: dict[str, Obj] = {}
    for entry in (inputs.previous.get("rollout") or {}).get("rejectedRevisions") or []:
        member = inputs.members.get(entry.get("component"))
        if member is not None and member.target == entry.get("revision") and entry.get("stableRevision"):
            out[member.name] = dict(entry)
    return out


def _progress(planner: _Planner, run: Obj, groups: list[Obj], paused: bool) -> tuple[Obj, list[Obj]]:
    """Tracks the run's progress (each moving non-canary component's Instances on, and ready on, the target); past
    the progress deadline without any, the run's non-canary components are rolled back (returned as rejected)."""
    inputs = planner.inputs
    deadline = inputs.progress_deadline
    plain = {n for g in groups if progression(g) != "Canary" for n in (g.get("components") or [])}
    moving = [t for t in run.get("targetRevisions") or [] if t.get("component") in plain
              and t.get("revision") != t.get("stableRevision") and not t.get("completedAt")]
    if deadline is None or not moving:
        return run, []
    fingerprint = {t["component"]: [inputs.members[t["component"]].on(t["revision"]),
                                    inputs.members[t["component"]].ready_on(t["revision"])]
                   for t in moving if t["component"] in inputs.members}
    last = parse_time(run.get("lastProgressTime"))
    if paused or fingerprint != run.get("progress") or last is None:
        # A pause holds the clock: a paused rollout is not a stalled one.
        return {**run, "progress": fingerprint, "lastProgressTime": format_time(inputs.now)}, []
    if inputs.now - last < deadline:
        planner.wake_at(last + deadline)
        return run, []
    rejected_now = [{"component": t["component"], "revision": t["revision"], "stableRevision": t["stableRevision"],
                     "since": format_time(inputs.now)} for t in moving]
    planner.events.append(("Warning", "RolloutProgressDeadlineExceeded", (
        f"run {run.get('runID')}: no progress for {format_duration(deadline)}; rolling "
        f"{', '.join(t['component'] for t in moving)} back to the stable revision")))
    return run, rejected_now


def _ready_timeout(inputs: Inputs, canary_spec: Obj) -> float | None:
    for text in (inputs.annotations.get(READY_TIMEOUT_ANNOTATION), canary_spec.get("readyTimeout"),
                 inputs.default_ready_timeout):
        value = _duration(text)
        if value is not None and value > 0:
            return value
    return None


def _canary_status(planner: _Planner, primary: str, state: Obj, phase: str, isvc: str, canary: str,
                   stable: str | None, weight: int) -> None:
    traffic = []
    if weight > 0:
        traffic.append({"revisionName": f"{isvc}-{primary}-rev-{canary}", "percent": weight,
                        "tag": "canary" if stable else None, "latestRevision": True})
    if stable and weight < 100:
        traffic.append({"revisionName": f"{isvc}-{primary}-rev-{stable}", "percent": 100 - weight, "tag": "stable",
                        "latestRevision": False})
    planner.components[primary] = {"canary": {k: v for k, v in state.items() if v is not None},
                                   "rolloutPhase": phase,
                                   "traffic": [{k: v for k, v in t.items() if v is not None} for t in traffic]}


# --------------------------------------------------------------------------------------------------- the run


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def plan_digest(groups: list[Obj]) -> str:
    """The digest of a plan's groups that `kubectl ome rollout repin` sends and the controller checks."""
    return "rp1:" + _digest(groups)


def topology(groups: list[Obj]) -> list[tuple[Any, ...]]:
    """What a repin must keep: per group its progression, components, order, soak and ratio."""
    return [(progression(g), tuple(g.get("components") or []), tuple(g.get("order") or []), g.get("soak"),
             json.dumps(g.get("maintainRatio"), sort_keys=True)) for g in groups]


def _repin(inputs: Inputs, run: Obj, events: list[tuple[str, str, str]], consume: list[str]) -> Obj:
    """Answers ome.io/rollout-repin on an open run: the run follows the current plan, keeping its identity and
    progress, when the request carries that plan's digest (or `now`) and the plan keeps the pinned topology."""
    request = inputs.annotations.get(REPIN_ANNOTATION)
    if request is None:
        return run
    consume.append(REPIN_ANNOTATION)
    pinned = [g.get("group") or {} for g in (run.get("plan") or {}).get("groups") or []]
    live = list(inputs.groups)
    if pinned == live:
        return run  # nothing to repin: the request is removed without an event
    digest = plan_digest(live)
    if request not in ("now", digest) or topology(live) != topology(pinned):
        why = "another edit changed the plan's digest" if request not in ("now", digest) else \
            "the live plan does not keep the pinned topology"
        events.append(("Warning", "RolloutRepinRejected", f"run {run.get('runID')}: repin to {request} rejected: "
                                                          f"{why}; run kubectl ome rollout repin again"))
        return run
    events.append(("Normal", "RolloutPlanRepinned", f"run {run.get('runID')} follows the current plan {digest}"))
    return {**run, "pinnedAt": format_time(inputs.now),
            "plan": {"groups": [{"source": "Inline", "group": g} for g in live]}}


def _open_run(inputs: Inputs, grouped: list[str], kept_stables: dict[str, str]) -> Obj | None:
    """A run opens when a change gives a grouped component a new revision while an earlier one serves."""
    targets = []
    held = rejected(inputs) | set(stalled(inputs))
    for name in grouped:
        member = inputs.members.get(name)
        if member is None or member.stable is None or name in held:
            continue
        stable = kept_stables.get(name) or member.stable
        targets.append({"component": name, "revision": member.target, "stableRevision": stable})
    if not any(t["revision"] != t["stableRevision"] for t in targets):
        return None
    now = format_time(inputs.now)
    return {"runID": "run-" + _digest(targets), "openedAt": now, "pinnedAt": now, "targetRevisions": targets,
            "plan": {"groups": [{"source": "Inline", "group": g} for g in inputs.groups]}}


def plan(inputs: Inputs, isvc: str) -> Outcome:
    previous_rollout: Obj = dict(inputs.previous.get("rollout") or {})
    run: Obj | None = previous_rollout.get("activeRun")
    grouped = [n for g in inputs.groups for n in (g.get("components") or [])]
    last_run: Obj | None = previous_rollout.get("lastRun")
    events: list[tuple[str, str, str]] = []

    # A component's target changing mid-run closes the run (Superseded); a fresh one opens with the current plan.
    if run is not None:
        pinned = {t.get("component"): t for t in run.get("targetRevisions") or []}
        moved = [n for n, t in pinned.items() if n in inputs.members and inputs.members[n].target != t.get("revision")]
        if moved:
            last_run = {"runID": run.get("runID"), "outcome": "Superseded", "closedAt": format_time(inputs.now)}
            kept = {n: t.get("stableRevision") for n, t in pinned.items() if t.get("stableRevision")}
            run = _open_run(inputs, grouped, kept)
    elif grouped:
        run = _open_run(inputs, grouped, {})
    repin_events: list[tuple[str, str, str]] = []
    repin_consumed: list[str] = []
    if run is not None:
        run = _repin(inputs, run, repin_events, repin_consumed)
    groups = [entry.get("group") or {} for entry in ((run or {}).get("plan") or {}).get("groups") or []] \
        if run is not None else list(inputs.groups)
    planner = _Planner(inputs=inputs, groups=groups, run=run)
    planner.events.extend(repin_events)
    planner.consume.extend(repin_consumed)
    planner.repinned = any(e[1] == "RolloutPlanRepinned" for e in repin_events)
    held_back = stalled(inputs)
    paused_now = inputs.annotations.get(PAUSED_ANNOTATION) in ("true", "freeze")

    sequence = is_sequence(groups)
    sequenced: list[tuple[int, Obj]] = []
    for index, group in enumerate(groups):
        names = [n for n in (group.get("components") or []) if n in inputs.members]
        kind = progression(group)
        if kind == "Canary":
            _canary(planner, index, group, isvc)
        elif sequence:
            sequenced.append((index, group))
        elif kind == "RollingUpdate":
            planner.rolling_update(index, group, planner.changing(names))
        else:
            planner.blue_green(index, group, planner.changing(names))
    if sequenced:
        planner.sequence(sequenced)

    # A stalled run is rolled back; a component whose target was so rejected stays on its stable revision until
    # another target appears.
    if run is not None:
        run, rejected_now = _progress(planner, run, groups, paused_now)
        if rejected_now:
            held_back.update({e["component"]: e for e in rejected_now})
            last_run = {"runID": run.get("runID"), "outcome": "RolledBack", "closedAt": format_time(inputs.now)}
            run = None
    for name, entry in held_back.items():
        planner.directives[name] = Directive(
            rollback_to=entry["stableRevision"], hold=("Held", (
                f"revision {entry['revision']} was rolled back: its rollout made no progress within the progress "
                "deadline; a different revision starts a new rollout")))

    # Record when each component of the run finished (a sequence's soak counts from it), and close a finished run.
    if run is not None:
        targets = []
        for entry in run.get("targetRevisions") or []:
            member = inputs.members.get(entry.get("component"))
            entry = dict(entry)
            if member is not None and not entry.get("completedAt") and member.done(entry.get("revision")):
                entry["completedAt"] = format_time(inputs.now)
            targets.append(entry)
        run = {**run, "targetRevisions": targets}
        rolled_back = any(p.get("rolloutPhase") == ROLLED_BACK for p in planner.components.values())
        canary_open = any(p.get("rolloutPhase") in (PENDING, CANARYING, PAUSED, PROMOTING, FAILED, ROLLING_BACK)
                          for p in planner.components.values())
        finished = all(t.get("completedAt") or t.get("revision") == t.get("stableRevision") for t in targets)
        if rolled_back or (finished and not canary_open):
            outcome = "RolledBack" if rolled_back else "Completed"
            last_run = {"runID": run.get("runID"), "outcome": outcome, "closedAt": format_time(inputs.now)}
            run = None

    # The pause holds every OMENative component; `freeze` holds its repairs too.
    paused = inputs.annotations.get(PAUSED_ANNOTATION)
    if paused_now:
        for name in inputs.members:
            planner.set(name, paused=True, freeze=paused == "freeze")
        for entry in planner.coordination:
            if entry["phase"] not in ("Idle", "Failed"):
                entry["phase"] = "Paused"
                entry["compositePhase"] = "Paused"

    status: Obj = {}
    rollout: Obj = {}
    if run is not None:
        rollout["activeRun"] = run
    if last_run is not None:
        rollout["lastRun"] = last_run
    if held_back:
        rollout["rejectedRevisions"] = [held_back[n] for n in sorted(held_back)]
    if rollout:
        status["rollout"] = rollout
    if planner.coordination:
        status["rolloutCoordination"] = {"groups": planner.coordination}
    conditions = _conditions(inputs, run, planner)
    if inputs.progress_deadline is not None and inputs.groups:
        if held_back:
            conditions.append(("RolloutProgressing", False, "ProgressDeadlineExceeded", "; ".join(
                f"{n}: revision {e['revision']} rolled back to {e['stableRevision']} at {e['since']}"
                for n, e in sorted(held_back.items()))))
        elif run is not None:
            conditions.append(("RolloutProgressing", True, "Progressing", f"run {run.get('runID')} is progressing "
                               f"(deadline {format_duration(inputs.progress_deadline)})"))
        else:
            conditions.append(("RolloutProgressing", True, "NoActiveRun", "no rollout is in progress"))
    previous_groups = {g.get("name"): g.get("phase") for g in
                       (inputs.previous.get("rolloutCoordination") or {}).get("groups") or []}
    # An event is told once per transition: a group failing again on the next pass is not news.
    for event in planner.events:
        if event[1] == "CoordinationGroupFailed" and any(
                g["phase"] == "Failed" and previous_groups.get(g["name"]) == "Failed" for g in planner.coordination):
            continue
        if event[1] in ("CanaryRollingBack", "CanaryCompleted", "CanaryFailed") and any(
                (inputs.previous.get("components") or {}).get(n, {}).get("rolloutPhase") == p.get("rolloutPhase")
                for n, p in planner.components.items()):
            continue
        events.append(event)
    wake = min(planner.wakes) - inputs.now if planner.wakes else None
    return Outcome(directives=planner.directives, status=status, components=planner.components,
                   conditions=conditions, events=events, consume=sorted(set(planner.consume)),
                   wake_in=max(wake, 0.0) if wake is not None else None, rollbacks=planner.rollbacks)


def _conditions(inputs: Inputs, run: Obj | None, planner: _Planner) -> list[tuple[str, bool, str, str]]:
    if not inputs.groups:
        return []
    out: list[tuple[str, bool, str, str]] = []
    if run is not None:
        out.append(("RolloutPlanReady", True, "Pinned", f"run {run.get('runID')} is pinned to the plan of "
                                                          f"{run.get('openedAt')}"))
        pinned = [g.get("group") for g in (run.get("plan") or {}).get("groups") or []]
        if pinned != list(inputs.groups):
            out.append(("RolloutPlanDrift", True, "SpecNewerThanRun", "spec.rollout changed after the run was "
                        "pinned; the change applies to the next run"))
        else:
            out.append(("RolloutPlanDrift", False, "InSync", "the run's plan is the spec's"))
    else:
        out.append(("RolloutPlanReady", True, "NoActiveRun", "no rollout is in progress"))
        out.append(("RolloutPlanDrift", False, "InSync", "no rollout is in progress"))
    if planner.coordination:
        phases = [g["phase"] for g in planner.coordination]
        if "Failed" in phases:
            failed = next(g for g in planner.coordination if g["phase"] == "Failed")
            out.append(("RolloutCoordinationReady", False, "CoordinationGroupFailed",
                        f"group {failed['name']} ({', '.join(failed['components'])}) has failed Instances"))
        elif "Paused" in phases:
            out.append(("RolloutCoordinationReady", False, "Paused", "the rollout is paused "
                        f"({PAUSED_ANNOTATION})"))
        elif all(p == "Idle" for p in phases):
            out.append(("RolloutCoordinationReady", True, "Idle", "every group runs its target revision"))
        else:
            moving = [g for g in planner.coordination if g["phase"] != "Idle"]
            out.append(("RolloutCoordinationReady", False, "Progressing", "; ".join(
                f"group {g['name']} ({', '.join(g['components'])}) {g['compositePhase']}" for g in moving)))
    return out
