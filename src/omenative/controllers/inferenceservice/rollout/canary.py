"""The canary group kind (OME's rollout-groups.md, Canary): a few Instances of every member move to the new
revision per step, each step opens at its gate (Immediate, Timed, Manual, Analysis), and a rollback moves every
member back at once and holds the rejected revision. What it remembers is a `CanaryState` in the primary
component's status. Pure."""

from __future__ import annotations

from typing import Any

import attrs

from omenative.api import naming
from omenative.api.events import NORMAL, WARNING, Event
from omenative.api.rollout import (
    CANARYING,
    FAILED,
    IN_FLIGHT,
    PAUSED,
    PENDING,
    PROMOTING,
    ROLLED_BACK,
    ROLLING_BACK,
    STABLE,
    gate_of,
    primary_of,
)
from omenative.api.times import format_time, parse_time
from omenative.api.units import InvalidValue, format_duration, resolve_int_or_percent
from omenative.controllers.inferenceservice.rollout import analysis
from omenative.controllers.inferenceservice.rollout.model import (
    PROMOTE_ANNOTATION,
    ROLLBACK_ANNOTATION,
    Member,
    duration,
    ready_timeout,
)
from omenative.controllers.inferenceservice.rollout.planner import RolloutPlanner
from omenative.controllers.inferenceservice.rollout.state import CanaryState
from omenative.obj import Obj


def canary_count(capacity: Any, desired: int) -> int:
    """Instances on the new revision at a step: a percentage of the desired Instances rounded up, or a count, at
    most the desired Instances."""
    try:
        count = resolve_int_or_percent(capacity, desired) or 0
    except InvalidValue:
        count = 0
    return max(0, min(count, desired))


def plan_canary(planner: RolloutPlanner, index: int, group: Obj, isvc: str) -> None:
    """Plans one canary group for this pass."""
    inputs = planner.inputs
    names = [n for n in (group.get("components") or []) if n in inputs.members]
    if not names:
        return
    primary = primary_of(names)
    previous = (inputs.previous.get("components") or {}).get(primary) or {}
    state = CanaryState.from_status(previous.get("canary"))
    members = [inputs.members[n] for n in names]
    canary = Canary(
        planner=planner, index=index, isvc=isvc, names=names, primary=primary, members=members,
        spec=group.get("canary") or {}, state=state, phase=previous.get("rolloutPhase"),
        target=(inputs.members.get(primary) or members[0]).target,
        rollback_asked=inputs.annotations.get(ROLLBACK_ANNOTATION) == "true", paused=inputs.paused,
        stables={m.name: (state.stables or {}).get(m.name) or planner.stable_of(m.name) for m in members})
    canary.plan()


@attrs.define(kw_only=True)
class Canary:
    planner: RolloutPlanner
    index: int
    isvc: str
    names: list[str]
    primary: str  # the component whose status carries the canary
    members: list[Member]
    spec: Obj  # the group's `canary`
    state: CanaryState
    phase: str | None  # as last written
    target: str  # the revision the canary moves to
    rollback_asked: bool
    paused: bool
    stables: dict[str, str | None]  # each member's stable revision

    @property
    def steps(self) -> list[Obj]:
        return list(self.spec.get("steps") or [])

    @property
    def now(self) -> float:
        return self.planner.now

    # -- the recipe
    def plan(self) -> None:
        if self.holding_rejected():
            return
        changing = self.planner.changing(self.names)
        in_flight = self.state.canary is not None and self.phase in IN_FLIGHT
        if not changing and not in_flight:
            self.settle()
            return
        if self.state.canary != self.target and not self.begin(in_flight):
            return
        if not self.steps:
            return
        self.at_step(changing)

    def holding_rejected(self) -> bool:
        """A rejected revision stays rejected: every member is held on its stable revision until another appears.
        A rollback request made for an earlier target is answered, so it cannot roll a fresh one back."""
        state = self.state
        if state.rolled_back and state.rolled_back == self.target:
            back = all(m.done(self.stables[m.name]) for m in self.members if self.stables[m.name])
            self.move_back()
            state.traffic = 0
            self.write(ROLLED_BACK if back else ROLLING_BACK, stable=self.stables.get(self.primary), weight=0)
            return True
        if state.rolled_back and ROLLBACK_ANNOTATION in self.planner.inputs.annotations:
            self.planner.consume.append(ROLLBACK_ANNOTATION)
            self.rollback_asked = False
        return False

    def settle(self) -> None:
        """Nothing moves and no canary is in flight: a rollback request has nothing to do; the status says Stable."""
        if self.rollback_asked and not self.state.rolled_back:
            self.planner.consume.append(ROLLBACK_ANNOTATION)
            self.planner.events.append(Event(WARNING, "CanaryRollbackIgnored",
                                             "ome.io/rollout-rollback ignored: no canary is in flight"))
        if self.phase is not None:
            self.state = self.state.completed()
            self.write(STABLE, stable=None, weight=100)

    def begin(self, in_flight: bool) -> bool:
        """A new target: a failed canary stays failed until it is rolled back; a spec back on the stable revision
        abandons the canary (False: nothing more this pass); otherwise the canary starts at step 1."""
        if self.phase == FAILED and self.state.canary:
            self.target = self.state.canary
            return True
        kept = self.state.stables if in_flight else None
        self.stables = {m.name: (kept or {}).get(m.name) or self.planner.stable_of(m.name) for m in self.members}
        if in_flight and all(self.stables.get(m.name) in (None, m.target) for m in self.members):
            # The spec went back to the revision the canary started from: no canary toward what already serves;
            # the canary's Instances move back as any update does.
            self.planner.events.append(Event(NORMAL, "CanaryAbandoned", (
                f"canary {self.state.canary} abandoned: the spec is back on the stable revision {self.target}")))
            self.state = CanaryState(canary=self.target, step=0).completed()
            self.write(STABLE, stable=None, weight=100)
            return False
        lead = self.planner.inputs.members.get(self.primary) or self.members[0]
        self.state = CanaryState(canary=self.target, stable=self.stables.get(self.primary) or lead.stable,
                                 stables={k: v for k, v in self.stables.items() if v}, step=0,
                                 step_entered=format_time(self.now))
        self.phase = PENDING
        return True

    def at_step(self, changing: list[Member]) -> None:
        """The step in force: its Instances come up, then its gate opens it (or a rollback ends the canary)."""
        state, steps = self.state, self.steps
        step_index = min(state.step or 0, len(steps) - 1)
        step = steps[step_index]
        if self.planner.repinned and state.canary == self.target and self.phase in IN_FLIGHT and \
                int(step.get("traffic") or 0) > (state.traffic or 0):
            state.step, state.pre_step_hold = step_index, True  # a repin may only hold or tighten exposure
        counts = {m.name: canary_count(step.get("capacity"), m.desired) for m in self.members}
        if self.rollback_asked and not self.paused:
            self.roll_back("manual")
            return
        moving = {m.name for m in changing}
        for member in self.members:
            if member.name in moving or member.target == self.target:
                self.planner.set(member.name, partition=max(0, member.desired - counts[member.name]))
        if self.phase == FAILED:
            self.report(FAILED)
            return
        if not all(m.ready_on(m.target) >= counts[m.name] for m in self.members):
            self.wait_for_instances(step_index, counts)
            return
        self.at_gate(step_index, step)

    def wait_for_instances(self, step_index: int, counts: dict[str, int]) -> None:
        """Not every new Instance of the step is ready: the step waits, up to the ready timeout."""
        state, steps = self.state, self.steps
        if state.step_ready:
            state.step_ready = None
            state.step_entered = format_time(self.now)  # fell below its count: the step starts again
        timeout = ready_timeout(self.planner.inputs, self.spec)
        entered = parse_time(state.step_entered) or self.now
        if timeout is not None and self.now - entered >= timeout:
            self.fail(f"canary step {step_index + 1} waited {format_duration(timeout)} for its new Instances; the "
                      "stable Instances keep serving")
            return
        if timeout is not None:
            self.planner.wake_at(entered + timeout)
        for member in self.members:
            if member.ready_on(member.target) < counts[member.name]:
                self.planner.hold(member.name, "Canary", (
                    f"canary step {step_index + 1}/{len(steps)} waits for {counts[member.name]} {member.name} "
                    f"Instance(s) ready on {self.target}"))
        self.report(PENDING)

    def at_gate(self, step_index: int, step: Obj) -> None:
        """Every new Instance of the step is ready: its gate decides whether the next step (or the end) comes."""
        state, steps, planner = self.state, self.steps, self.planner
        last = step_index == len(steps) - 1
        if state.step_ready is None:
            state.step_ready = format_time(self.now)
        promote = planner.inputs.annotations.get(PROMOTE_ANNOTATION)
        if state.promoted_through and promote != state.promoted_through:
            state.promoted_through = None  # the answered request is gone: manual promotion is armed again
        promoted = promote == self.target and state.promoted_through != promote
        if state.pre_step_hold:
            # After a repin to a step with more traffic: capacity converges, the recorded traffic and the step wait
            # for an explicit promote.
            if not promoted or self.paused:
                for member in self.members:
                    planner.hold(member.name, "Canary", f"canary step {step_index + 1}/{len(steps)} holds before "
                                 "its higher traffic weight until ome.io/rollout-promote")
                state.gate = gate_of(step)
                self.report(PAUSED)
                return
            state.pre_step_hold = None
            state.promoted_through = promote
            planner.consume.append(PROMOTE_ANNOTATION)
            promoted = False  # the promote released the hold; the step's own gate comes next
        state.traffic = int(step.get("traffic") or 0)
        ready_at = parse_time(state.step_ready) or self.now
        gate = gate_of(step)
        opens = False
        if gate == "Immediate":
            opens = True
        elif gate == "Timed":
            wait = duration((step.get("pause") or {}).get("duration")) or 0.0
            opens = self.now >= ready_at + wait
            if not opens:
                planner.wake_at(ready_at + wait)
        elif gate == "Analysis":
            judged = analysis.judge_step(planner, self.index, step, state, ready_at, self.spec)
            if judged == "rollback":
                self.roll_back("analysis")
                return
            if judged == "failed":
                self.fail(f"canary step {step_index + 1}: its analysis stayed inconclusive past the ready timeout; "
                          "the stable Instances keep serving")
                return
            opens = judged == "pass" or (promoted and not self.paused)  # a promote overrides this step's analysis
        else:  # Manual
            opens = promoted and not self.paused
        if last and opens:
            delay = float(self.spec.get("scaleDownDelaySeconds") or 0)
            if self.now < ready_at + delay:
                planner.wake_at(ready_at + delay)
                opens = False
                gate = "ScaleDownDelay" if gate == "Immediate" else gate
        if opens and not self.paused:
            if promoted:
                state.promoted_through = promote
                planner.consume.append(PROMOTE_ANNOTATION)
            if last:
                state.step = step_index
                self.state = state.completed()
                planner.events.append(Event(NORMAL, "CanaryCompleted",
                                            f"canary {self.target} completed all {len(steps)} steps"))
                self.write(STABLE, stable=None, weight=100)
                return
            self.next_step(step_index)
            return
        for member in self.members:
            if member.on(member.target) < member.desired:
                planner.hold(member.name, "Canary",
                             f"canary step {step_index + 1}/{len(steps)} waits at its {gate} gate")
        state.gate = gate
        self.report(PROMOTING if last else (PAUSED if gate in ("Manual", "Analysis") else CANARYING))

    def next_step(self, step_index: int) -> None:
        state = self.state
        nxt = self.steps[step_index + 1]
        state.step, state.step_entered = step_index + 1, format_time(self.now)
        # Each step's analysis starts afresh (the last sample stays on record).
        state.step_ready = state.failed_checks = state.last_conclusive = None
        for member in self.members:
            self.planner.set(member.name,
                             partition=max(0, member.desired - canary_count(nxt.get("capacity"), member.desired)))
        self.report(PENDING)

    # -- endings and status
    def move_back(self) -> None:
        for member in self.members:
            stable = self.stables[member.name]
            if stable and stable != member.target:
                self.planner.set(member.name, rollback_to=stable)

    def roll_back(self, cause: str) -> None:
        """Moves every member back to its stable revision at once, and holds the rejected one."""
        self.state.rolled_back = self.target
        self.state.traffic = 0
        self.move_back()
        self.planner.events.append(Event(NORMAL, "CanaryRollingBack", (
            f"rolling the canary {self.target} back to the stable revision {self.state.stable} ({cause})")))
        self.planner.rollbacks.append((self.primary, cause))
        self.write(ROLLING_BACK, stable=self.state.stable, weight=0)

    def fail(self, message: str) -> None:
        self.planner.events.append(Event(WARNING, "CanaryFailed", message))
        self.report(FAILED)

    def report(self, phase: str) -> None:
        """The canary's status at `phase`, with the traffic weight it last recorded."""
        self.write(phase, stable=self.state.stable, weight=self.state.traffic or 0)

    def write(self, phase: str, *, stable: str | None, weight: int) -> None:
        """The primary component's canary, rolloutPhase and traffic split."""
        traffic = []
        canary, isvc, primary = self.target, self.isvc, self.primary
        if weight > 0:
            traffic.append({"revisionName": naming.revision_service_name(isvc, primary, canary), "percent": weight,
                            "tag": "canary" if stable else None, "latestRevision": True})
        if stable and weight < 100:
            traffic.append({"revisionName": naming.revision_service_name(isvc, primary, stable),
                            "percent": 100 - weight, "tag": "stable", "latestRevision": False})
        self.planner.components[primary] = {
            "canary": self.state.to_status(), "rolloutPhase": phase,
            "traffic": [{k: v for k, v in t.items() if v is not None} for t in traffic]}
