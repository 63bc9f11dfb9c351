"""A rollout run (status.rollout.activeRun): it opens when a change gives a grouped component a new revision, pins
the plan it started with (a repin moves it to the current plan), tracks progress against the progress deadline,
and ends Completed, RolledBack or Superseded. Also the revisions held back after a run: rejected by a canary's
rollback, or stalled past the deadline. Pure."""

from __future__ import annotations

from omenative.api.events import NORMAL, WARNING, Event
from omenative.api.rollout import digest, plan_digest, primary_of, topology
from omenative.api.rollout_validation import progression
from omenative.api.times import format_time, parse_time
from omenative.api.units import format_duration
from omenative.controllers.inferenceservice.rollout.model import REPIN_ANNOTATION, Inputs
from omenative.controllers.inferenceservice.rollout.planner import RolloutPlanner
from omenative.controllers.inferenceservice.rollout.state import CanaryState
from omenative.obj import Obj


def rejected(inputs: Inputs) -> set[str]:
    """Components held on their stable revision because their canary's target was rolled back."""
    out: set[str] = set()
    for group in inputs.groups:
        names = [n for n in (group.get("components") or []) if n in inputs.members]
        if progression(group) != "Canary" or not names:
            continue
        primary = primary_of(names)
        state = CanaryState.from_status(((inputs.previous.get("components") or {}).get(primary) or {}).get("canary"))
        if state.rolled_back and state.rolled_back == inputs.members[primary].target:
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


def open_run(inputs: Inputs, grouped: list[str], kept_stables: dict[str, str]) -> Obj | None:
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
    return {"runID": "run-" + digest(targets), "openedAt": now, "pinnedAt": now, "targetRevisions": targets,
            "plan": {"groups": [{"source": "Inline", "group": g} for g in inputs.groups]}}


def repin(inputs: Inputs, run: Obj, events: list[Event], consume: list[str]) -> Obj:
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
    plan = plan_digest(live)
    if request not in ("now", plan) or topology(live) != topology(pinned):
        why = "another edit changed the plan's digest" if request not in ("now", plan) else \
            "the live plan does not keep the pinned topology"
        events.append(Event(WARNING, "RolloutRepinRejected", f"run {run.get('runID')}: repin to {request} "
                            f"rejected: {why}; run kubectl ome rollout repin again"))
        return run
    events.append(Event(NORMAL, "RolloutPlanRepinned", f"run {run.get('runID')} follows the current plan {plan}"))
    return {**run, "pinnedAt": format_time(inputs.now),
            "plan": {"groups": [{"source": "Inline", "group": g} for g in live]}}


def progress(planner: RolloutPlanner, run: Obj, groups: list[Obj], paused: bool) -> tuple[Obj, list[Obj]]:
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
    planner.events.append(Event(WARNING, "RolloutProgressDeadlineExceeded", (
        f"run {run.get('runID')}: no progress for {format_duration(deadline)}; rolling "
        f"{', '.join(t['component'] for t in moving)} back to the stable revision")))
    return run, rejected_now
