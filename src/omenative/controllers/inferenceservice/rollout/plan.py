"""The rollout planner's recipe: for every OMENative component of an InferenceService at once, which Instances may
move to the new revision next and why the others wait.

One pass: find the run (open one, close a superseded one, answer a repin) -> plan each group by its kind (canary,
sequence, rolling update, blue-green) -> roll a stalled run back -> record what finished and close a finished run
-> apply the pause -> the status, conditions and new events. Pure."""

from __future__ import annotations

from omenative.api.events import Event
from omenative.api.rollout import CANARYING, FAILED, PAUSED, PENDING, PROMOTING, ROLLED_BACK, ROLLING_BACK
from omenative.api.rollout_validation import is_sequence, progression
from omenative.api.times import format_time
from omenative.api.units import format_duration
from omenative.controllers.inferenceservice.rollout import groups as kinds
from omenative.controllers.inferenceservice.rollout import runs
from omenative.controllers.inferenceservice.rollout.canary import plan_canary
from omenative.controllers.inferenceservice.rollout.model import PAUSED_ANNOTATION, Directive, Inputs, Outcome
from omenative.controllers.inferenceservice.rollout.planner import RolloutPlanner, transition_time
from omenative.obj import Obj

Condition = tuple[str, bool, str, str]  # (type, status, reason, message)


def plan(inputs: Inputs, isvc: str) -> Outcome:
    previous_rollout: Obj = dict(inputs.previous.get("rollout") or {})
    run, last_run = current_run(inputs, previous_rollout.get("activeRun"), previous_rollout.get("lastRun"))
    repin_events: list[Event] = []
    repin_consumed: list[str] = []
    if run is not None:
        run = runs.repin(inputs, run, repin_events, repin_consumed)
    groups = [entry.get("group") or {} for entry in ((run or {}).get("plan") or {}).get("groups") or []] \
        if run is not None else list(inputs.groups)
    planner = RolloutPlanner(inputs=inputs, groups=groups, run=run)
    planner.events.extend(repin_events)
    planner.consume.extend(repin_consumed)
    planner.repinned = any(e.reason == "RolloutPlanRepinned" for e in repin_events)

    plan_groups(planner, groups, isvc)
    held_back = runs.stalled(inputs)
    if run is not None:
        run, rejected_now = runs.progress(planner, run, groups, inputs.paused)
        if rejected_now:
            held_back.update({e["component"]: e for e in rejected_now})
            last_run = {"runID": run.get("runID"), "outcome": "RolledBack", "closedAt": format_time(inputs.now)}
            run = None
    hold_back(planner, held_back)
    mark_rollbacks(planner, held_back)
    if run is not None:
        run, last_run = record_completion(planner, run, last_run)
    apply_pause(planner)

    status = rollout_status(planner, run, last_run, held_back)
    wake = min(planner.wakes) - inputs.now if planner.wakes else None
    return Outcome(directives=planner.directives, status=status, components=planner.components,
                   conditions=conditions(inputs, run, planner) + progressing(inputs, run, held_back),
                   events=new_events(planner), consume=sorted(set(planner.consume)),
                   wake_in=max(wake, 0.0) if wake is not None else None, rollbacks=planner.rollbacks)


def current_run(inputs: Inputs, run: Obj | None, last_run: Obj | None) -> tuple[Obj | None, Obj | None]:
    """(the active run, the last run): a component's target changing mid-run closes the run (Superseded) and a
    fresh one opens with the current plan, keeping the stable revisions it pinned."""
    grouped = [n for g in inputs.groups for n in (g.get("components") or [])]
    if run is not None:
        pinned = {t.get("component"): t for t in run.get("targetRevisions") or []}
        moved = [n for n, t in pinned.items() if n in inputs.members and inputs.members[n].target != t.get("revision")]
        if moved:
            last_run = {"runID": run.get("runID"), "outcome": "Superseded", "closedAt": format_time(inputs.now)}
            kept = {n: t.get("stableRevision") for n, t in pinned.items() if t.get("stableRevision")}
            run = runs.open_run(inputs, grouped, kept)
    elif grouped:
        run = runs.open_run(inputs, grouped, {})
    return run, last_run


def plan_groups(planner: RolloutPlanner, groups: list[Obj], isvc: str) -> None:
    """Each group by its kind; when the groups form a sequence, the non-canary ones go one after another."""
    sequence = is_sequence(groups)
    sequenced: list[tuple[int, Obj]] = []
    for index, group in enumerate(groups):
        names = [n for n in (group.get("components") or []) if n in planner.inputs.members]
        kind = progression(group)
        if kind == "Canary":
            plan_canary(planner, index, group, isvc)
        elif sequence:
            sequenced.append((index, group))
        elif kind == "RollingUpdate":
            kinds.rolling_update(planner, index, group, planner.changing(names))
        else:
            kinds.blue_green(planner, index, group, planner.changing(names))
    if sequenced:
        kinds.sequence(planner, sequenced)


def hold_back(planner: RolloutPlanner, held_back: dict[str, Obj]) -> None:
    """A component whose target was rejected for want of progress stays on its stable revision until another target
    appears."""
    for name, entry in held_back.items():
        planner.directives[name] = Directive(
            rollback_to=entry["stableRevision"], hold=("Held", (
                f"revision {entry['revision']} was rolled back: its rollout made no progress within the progress "
                "deadline; a different revision starts a new rollout")))


def mark_rollbacks(planner: RolloutPlanner, held_back: dict[str, Obj]) -> None:
    """A group with a component held back after its rollout made no progress: `RollingBack` while that component's
    Instances return to the stable revision, then `Failed` (the rollout did not happen), with the reason."""
    for group in planner.coordination:
        held = [n for n in group["components"] if n in held_back and n in planner.inputs.members]
        if not held:
            continue
        back = False
        for name in held:
            member, stable = planner.inputs.members[name], held_back[name]["stableRevision"]
            back |= any(rev != stable for rev, _, _ in member.revisions) or bool(member.moving_to(stable)) or \
                member.draining > 0
        phase = "RollingBack" if back else "Failed"
        if group["phase"] != phase:
            group["phase"], group["compositePhase"] = phase, f"{held[0]}.{phase}" if len(held) == 1 else phase
            group["lastTransitionTime"] = transition_time(planner.previous_group(group["name"]), phase, planner.now)
        group["message"] = "; ".join(f"{n}: revision {held_back[n]['revision']} rolled back to "
                                     f"{held_back[n]['stableRevision']}: its rollout made no progress within the "
                                     "progress deadline" for n in held)


def record_completion(planner: RolloutPlanner, run: Obj, last_run: Obj | None) -> tuple[Obj | None, Obj | None]:
    """Records when each component of the run finished (a sequence's soak counts from it), and closes a finished
    run (Completed) or a rolled-back canary's (RolledBack)."""
    inputs = planner.inputs
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
        return None, {"runID": run.get("runID"), "outcome": outcome, "closedAt": format_time(inputs.now)}
    return run, last_run


def apply_pause(planner: RolloutPlanner) -> None:
    """The pause holds every OMENative component; `freeze` holds its repairs too."""
    inputs = planner.inputs
    if not inputs.paused:
        return
    freeze = inputs.annotations.get(PAUSED_ANNOTATION) == "freeze"
    for name in inputs.members:
        planner.set(name, paused=True, freeze=freeze)
    for entry in planner.coordination:
        if entry["phase"] not in ("Idle", "Failed"):
            entry["phase"] = "Paused"
            entry["compositePhase"] = "Paused"


def rollout_status(planner: RolloutPlanner, run: Obj | None, last_run: Obj | None, held_back: dict[str, Obj]) -> Obj:
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
    return status


def new_events(planner: RolloutPlanner) -> list[Event]:
    """The pass's events, each told once per transition: a group failing again on the next pass is not news."""
    inputs = planner.inputs
    previous_groups = {g.get("name"): g.get("phase") for g in
                       (inputs.previous.get("rolloutCoordination") or {}).get("groups") or []}
    out = []
    for event in planner.events:
        if event.reason == "CoordinationGroupFailed" and any(
                g["phase"] == "Failed" and previous_groups.get(g["name"]) == "Failed" for g in planner.coordination):
            continue
        if event.reason in ("CanaryRollingBack", "CanaryCompleted", "CanaryFailed") and any(
                (inputs.previous.get("components") or {}).get(n, {}).get("rolloutPhase") == p.get("rolloutPhase")
                for n, p in planner.components.items()):
            continue
        out.append(event)
    return out


def progressing(inputs: Inputs, run: Obj | None, held_back: dict[str, Obj]) -> list[Condition]:
    """RolloutProgressing, while a progress deadline is configured."""
    if inputs.progress_deadline is None or not inputs.groups:
        return []
    if held_back:
        return [("RolloutProgressing", False, "ProgressDeadlineExceeded", "; ".join(
            f"{n}: revision {e['revision']} rolled back to {e['stableRevision']} at {e['since']}"
            for n, e in sorted(held_back.items())))]
    if run is not None:
        return [("RolloutProgressing", True, "Progressing", f"run {run.get('runID')} is progressing "
                 f"(deadline {format_duration(inputs.progress_deadline)})")]
    return [("RolloutProgressing", True, "NoActiveRun", "no rollout is in progress")]


def conditions(inputs: Inputs, run: Obj | None, planner: RolloutPlanner) -> list[Condition]:
    """RolloutPlanReady, RolloutPlanDrift and RolloutCoordinationReady."""
    if not inputs.groups:
        return []
    out: list[Condition] = []
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
                        f"group {failed['name']} ({', '.join(failed['components'])}) "
                        + (failed.get("message") or "has failed Instances")))
        elif "RollingBack" in phases:
            back = next(g for g in planner.coordination if g["phase"] == "RollingBack")
            out.append(("RolloutCoordinationReady", False, "RollingBack",
                        f"group {back['name']} ({', '.join(back['components'])}) {back['message']}"))
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
