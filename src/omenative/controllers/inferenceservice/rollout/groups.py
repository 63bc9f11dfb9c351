"""The non-canary group kinds (OME's rollout-groups.md): blue-green (every component surges at once, a quarter at a
time), rolling update (each component by its own budget, optionally kept in ratio), and sequence (one group after
another, with a soak between). Each narrows the members' directives on the pass's `RolloutPlanner`. Pure."""

from __future__ import annotations

import math

from omenative.api import constants as c
from omenative.api.events import WARNING, Event
from omenative.api.units import format_duration
from omenative.controllers.inferenceservice.rollout.model import (
    BLUE_GREEN_BUDGET,
    DEFAULT_BUDGET,
    IN_PLACE,
    SURGE_THEN_DRAIN,
    Member,
    duration,
)
from omenative.controllers.inferenceservice.rollout.planner import RolloutPlanner, entry, member_phase
from omenative.obj import Obj


def blue_green(planner: RolloutPlanner, index: int, group: Obj, members: list[Member]) -> Obj:
    for member in members:
        if not member.done(member.target):
            planner.set(member.name, max_unavailable=BLUE_GREEN_BUDGET)
    pairing(planner, members)
    return planner.coordination_entry(index, group, "BlueGreen", members)


def pairing(planner: RolloutPlanner, members: list[Member]) -> None:
    """While the engine-decoder token changes, the last Instance of a side on the old token waits until the other
    side has one on the new token ready, so one pair of the same token always serves. A side of one Instance cannot
    keep one back (it would never move): it is exempt."""
    by_name = {m.name: m for m in members}
    engine, decoder = by_name.get(c.ENGINE), by_name.get(c.DECODER)
    if engine is None or decoder is None:
        return
    # The token the run moves away from: the one of the revision pinned as stable when it opened.
    old = engine.pairings.get(planner.stable_of(engine.name) or "", engine.pairing)
    if old == engine.pairing:
        return
    for side, peer in ((engine, decoder), (decoder, engine)):
        if side.desired <= 1 or peer.ready_on(peer.target) > 0:
            continue
        planner.set(side.name, partition=1)
        if side.on(side.target) >= side.desired - 1:
            planner.hold(side.name, "Pairing", (
                f"keeping one {side.name} Instance on pairing protocol {old or '(none)'} "
                f"until a {peer.name} Instance on {peer.pairing or '(none)'} is ready"))


def rolling_update(planner: RolloutPlanner, index: int, group: Obj, members: list[Member]) -> Obj:
    spec = group.get("rollingUpdate") or {}
    for member in members:
        budget = spec.get("maxSurge") if member.strategy == SURGE_THEN_DRAIN else spec.get("maxUnavailable")
        if not member.done(member.target):
            planner.set(member.name, max_unavailable=budget if budget is not None else DEFAULT_BUDGET)
    ratio = group.get("maintainRatio")
    checked = [m for m in members if m.strategy not in IN_PLACE and m.desired > 0]
    observed: Obj | None = None
    if ratio is not None and len(checked) >= 2:
        tolerance = ratio.get("tolerance")
        tolerance = planner.inputs.default_tolerance if tolerance is None else int(tolerance)
        observed = maintain_ratio(planner, checked, tolerance)
    return planner.coordination_entry(index, group, "RollingUpdate", members, observed_ratio=observed)


def maintain_ratio(planner: RolloutPlanner, members: list[Member], tolerance: int) -> Obj:
    """Holds a component once it would run more than `tolerance` percent further through its rollout than the
    slowest other: its Instances on the new revision stay within floor((slowest + tolerance) x desired). When every
    component is held so (a tolerance too tight for the counts), the one furthest behind moves one."""
    progress = {m.name: m.on(m.target) / m.desired for m in members}
    allowed: dict[str, int] = {}
    for member in members:
        slowest = min(progress[o.name] for o in members if o.name != member.name)
        allowed[member.name] = min(member.desired, math.floor((slowest + tolerance / 100) * member.desired + 1e-9))
    unfinished = [m for m in members if m.on(m.target) < m.desired]
    if unfinished and all(allowed[m.name] <= m.on(m.target) for m in unfinished):
        laggard = min(unfinished, key=lambda m: (progress[m.name], m.name))
        allowed[laggard.name] = laggard.on(laggard.target) + 1
    for member in members:
        keep = member.desired - allowed[member.name]
        if keep > 0 and member.on(member.target) < member.desired:
            planner.set(member.name, partition=keep)
            if allowed[member.name] <= member.on(member.target):
                others = ", ".join(f"{o.name} {progress[o.name]:.0%}" for o in members if o is not member)
                planner.hold(member.name, "Ratio", (
                    f"{member.name} at {progress[member.name]:.0%} of its rollout waits for {others} "
                    f"(tolerance {tolerance}%)"))
    serving_ratio(planner, members, tolerance)
    return {"tolerance": tolerance,
            "progress": [{"component": m.name, "updated": m.on(m.target), "desired": m.desired} for m in members]}


def serving_ratio(planner: RolloutPlanner, members: list[Member], tolerance: int) -> None:
    """OME's second ratio check: an update that takes another Instance out of rotation (every strategy but
    SurgeThenDrain, whose old Instance serves until its replacement does) is held while it would move the serving
    ratio of two components more than `tolerance` percent from their desired ratio. One Instance out of rotation is
    always allowed when every component serves in full, or a tight tolerance would stop the rollout for good."""
    if any(m.serving is None for m in members):
        return
    full = all((m.serving or 0) >= m.desired for m in members)
    for member in members:
        if member.strategy == SURGE_THEN_DRAIN or member.on(member.target) >= member.desired or full:
            continue
        for other in members:
            if other is member or not other.serving or not other.desired or not member.desired:
                continue
            want = member.desired / other.desired
            would = ((member.serving or 0) - 1) / other.serving
            if abs(would / want - 1) > tolerance / 100 + 1e-9:
                planner.set(member.name, partition=member.desired - member.on(member.target))
                planner.hold(member.name, "Ratio", (
                    f"{member.name}: another Instance out of rotation would move the serving ratio to "
                    f"{(member.serving or 0) - 1}:{other.serving} {other.name}, more than {tolerance}% from "
                    f"{member.desired}:{other.desired}"))
                break


def sequence(planner: RolloutPlanner, groups: list[tuple[int, Obj]]) -> None:
    """Rolls the groups out one at a time, in list order, skipping a component the change leaves alone; each waits
    out the longest soak of any group but the last after the one before it finished."""
    soak = max((duration(g.get("soak")) or 0.0 for _, g in groups[:-1]), default=0.0)
    names = [g["components"][0] for _, g in groups]
    previous: str | None = None
    current: str | None = None
    phase = "Idle"
    now = planner.now
    for name in names:
        member = next(iter(planner.changing([name])), None)
        if member is None:
            continue
        if current is not None:
            planner.set(name, partition=member.desired)
            planner.hold(name, "Sequential", f"Sequential waiting on {current}")
            continue
        if member.done(member.target):
            previous = name
            continue
        # The soak counts from when the component before finished (this pass, if not recorded yet).
        finished = (planner.completed_at(previous) or now) if previous else None
        if previous is not None and finished is not None and soak > 0 and now < finished + soak:
            planner.set(name, partition=member.desired)
            planner.hold(name, "Sequential", f"Sequential.Soak: {name} waiting out the {format_duration(soak)} "
                         f"soak after {previous}")
            planner.wake_at(finished + soak)
            phase, current = "Waiting", name
            continue
        planner.set(name, max_unavailable=BLUE_GREEN_BUDGET)
        current, phase = name, member_phase(member, held=False)
        if member.failed_on(member.target):
            phase = "Failed"
            planner.events.append(Event(WARNING, "CoordinationGroupFailed", (
                f"sequence: {name} has {member.failed_on(member.target)} failed Instance(s) on revision "
                f"{member.target}; the components after it wait")))
    composite = "Idle" if current is None else "Sequential.AwaitingNextComponent" if phase == "Waiting" else \
        f"{current}.{phase}"
    planner.coordination.append(entry(
        name="sequence", components=names, policy="Sequential", phase=phase, composite=composite, current=current,
        previous=previous, previous_status=planner.previous_group("sequence"), now=now))
