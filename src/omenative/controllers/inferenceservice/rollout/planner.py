"""One pass of the rollout planner: what it has decided so far (each component's directive, events, wake-ups,
answered requests, the components' canary status and the coordination entries) and the reads every group kind
shares (a component's pinned stable revision, the members a run moves, a group's previous status entry)."""

from __future__ import annotations

from typing import Any

import attrs

from omenative.api.events import WARNING, Event
from omenative.api.times import format_time, parse_time
from omenative.controllers.inferenceservice.rollout.model import Directive, Inputs, Member
from omenative.obj import Obj


@attrs.define
class RolloutPlanner:
    inputs: Inputs
    groups: list[Obj]
    run: Obj | None
    directives: dict[str, Directive] = attrs.field(factory=dict)
    events: list[Event] = attrs.field(factory=list)
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

    def previous_group(self, name: str) -> Obj:
        for entry in ((self.inputs.previous.get("rolloutCoordination") or {}).get("groups") or []):
            if entry.get("name") == name:
                return dict(entry)
        return {}

    def coordination_entry(self, index: int, group: Obj, policy: str, members: list[Member],
                           observed_ratio: Obj | None = None) -> Obj:
        """The status entry of a blue-green or rolling-update group (status.rolloutCoordination.groups)."""
        failed = [m for m in members if m.failed_on(m.target)]
        phases = {m.name: member_phase(m, self.directives.get(m.name, Directive()).hold is not None)
                  for m in members}
        moving = [m for m in members if phases[m.name] != IDLE]
        phase = FAILED if failed else group_phase(list(phases.values()))
        if failed:
            self.events.append(Event(WARNING, "CoordinationGroupFailed", (
                f"group {index} ({', '.join(group.get('components') or [])}): " + "; ".join(
                    f"{m.name} has {m.failed_on(m.target)} failed Instance(s) on revision {m.target}" for m in failed)
                + "; the other components go on")))
        held = [m.name for m in members if self.directives.get(m.name, Directive()).hold]
        composite = f"{moving[0].name}.{phase}" if len(moving) == 1 else phase
        out = entry(name=str(index), components=list(group.get("components") or []), policy=policy, phase=phase,
                    composite=composite, current=None, previous=None,
                    previous_status=self.previous_group(str(index)), now=self.now)
        if moving:
            budget = self.directives.get(moving[0].name, Directive()).max_unavailable
            if budget is not None:
                out["observedSurge"] = budget
        if observed_ratio is not None:
            out["observedRatio"] = observed_ratio
        if held:
            out["message"] = "; ".join(f"{n}: {self.directives[n].hold[1]}" for n in held)  # type: ignore[index]
        self.coordination.append(out)
        return out


# The phases of OME's CoordinationPhase that a group's components show, the most active first: a group takes the
# first that any of its components is in. Failed, RollingBack and Paused are decided for the group as a whole.
IDLE, FAILED = "Idle", "Failed"
PRECEDENCE = ("Surging", "Draining", "Shifting", "ScalingDown", "Waiting", "Staged", IDLE)


def member_phase(member: Member, held: bool) -> str:
    """Where one component of a group is: `Surging` while Instances come up on the target revision (or before the
    first moves), `Shifting` while both revisions serve between batches, `Draining` while replaced Instances drain,
    `ScalingDown` while surplus Instances on the target go, `Waiting` while a gate holds it (ratio, pairing, a
    sequence), `Staged` while only its own partition keeps Instances back, `Idle` once every Instance runs the
    target and none drains."""
    target = member.target
    old = sum(1 for rev, _, _ in member.revisions if rev != target)
    coming_up = member.moving_to(target) - member.surge_draining
    if coming_up > 0 or (old and not member.ready_on(target) and not member.surge_draining and
                         old > member.partition and not held):
        return "Surging"
    if member.draining or member.surge_draining:
        return "Draining"
    if old:
        if old <= member.partition:
            return "Staged"
        return "Waiting" if held else "Shifting"
    if member.ready_on(target) < member.desired:
        return "Surging"  # Instances still to create on the target revision
    if len(member.revisions) > member.desired:
        return "ScalingDown"
    return IDLE


def group_phase(phases: list[str]) -> str:
    return next((p for p in PRECEDENCE if p in phases), IDLE)


def entry(*, name: str, components: list[str], policy: str, phase: str, composite: str, current: str | None,
          previous: str | None, previous_status: Obj, now: float) -> Obj:
    """A coordination group's status entry; its lastTransitionTime moves only when its phase does."""
    out: Obj = {"name": name, "components": components, "policy": policy, "phase": phase,
                "compositePhase": composite}
    if current:
        out["currentComponent"] = current
    if previous:
        out["previousComponent"] = previous
    out["lastTransitionTime"] = transition_time(previous_status, phase, now)
    return out


def transition_time(previous_status: Obj, phase: str, now: float) -> str:
    """A group's lastTransitionTime: kept while its phase stays, now when it moves."""
    same = previous_status.get("phase") == phase and previous_status.get("lastTransitionTime")
    return str(previous_status["lastTransitionTime"]) if same else format_time(now)
