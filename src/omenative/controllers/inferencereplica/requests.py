"""Operators' requests on an InferenceReplica, answered once each: `ome.io/reset-instances` (start Failed Instances
over) and `ome.io/release-held-revision` (let a Held revision be tried again). Pure.

The answer (rows, retry blocks, events) is written to the status first and the annotation removed after, so a
controller killed in between answers the same request again with the same outcome: a reset Instance that still
waits for its rebuild is skipped as `nothing to reset`, and a released block is gone.
"""

from __future__ import annotations

import attrs

from omenative.api import constants as c
from omenative.api.events import Event
from omenative.api.phases import FAILED
from omenative.api.types import InstanceStatus
from omenative.controllers.inferencereplica.facts import instance_facts
from omenative.controllers.inferencereplica.planner import ReplicaPlanner
from omenative.controllers.inferencereplica.retry import RetryBlocks

RESET_ANNOTATION = c.ANN_RESET_INSTANCES
RELEASE_ANNOTATION = c.ANN_RELEASE_HELD_REVISION
RESET_MARKER = "InstancesReset"
Answer = Event  # what a request is answered with

def reset_marker(incarnation: int) -> str:
    return f"{RESET_MARKER}@{incarnation}"


def waiting_for_rebuild(row: InstanceStatus) -> bool:
    """A reset Instance that has not been rebuilt yet."""
    return row.phase == FAILED and row.operation is None and \
        reset_marker(row.incarnation or 1) in (row.announced or [])


def parse_indexes(value: str) -> list[int] | str:
    """The indexes a reset names, or the token that is not one."""
    out: list[int] = []
    for token in value.split(","):
        token = token.strip()
        if not token.isdigit():
            return token
        out.append(int(token))
    return out


def reset(rows: dict[int, InstanceStatus], value: str, serving: dict[int, bool], who: str) -> list[Answer]:
    """Answers a reset request, changing `rows` in place. `serving`: whether any pod of an Instance serves."""
    if value.strip() == "all":
        wanted = [i for i, r in sorted(rows.items()) if r.phase == FAILED]
        if not wanted:
            return [Answer("Normal", "InstancesResetSkipped",
                           f"{who}: reset requested for all instances, but none is Failed; nothing to reset")]
    else:
        parsed = parse_indexes(value)
        if isinstance(parsed, str):
            return [Answer("Warning", "InstancesResetRejected",
                           f'{who}: {RESET_ANNOTATION}="{value}" rejected: "{parsed}" is not a non-negative instance '
                           "index; nothing reset")]
        wanted = sorted(set(parsed))
    done: list[int] = []
    skipped: list[str] = []
    for index in wanted:
        row = rows.get(index)
        why = None
        if row is None:
            why = "no such instance"
        elif row.phase != FAILED:
            why = f"Phase={row.phase}"
        elif serving.get(index):
            why = "still serving"
        elif row.operation is not None and row.operation.type in ("Update", "Migrate", "Delete"):
            why = f"owned by {row.operation.type}"
        elif waiting_for_rebuild(row):
            why = "nothing to reset"
        if why is not None or row is None:
            skipped.append(f"{index} ({why})")
            continue
        incarnation = (row.incarnation or 1) + 1  # the old pods drain and go; the rebuild makes new ones
        rows[index] = attrs.evolve(row, incarnation=incarnation, operation=None, restart_baseline=None,
                                   announced=[*(a for a in row.announced or [] if not a.startswith(RESET_MARKER)),
                                              reset_marker(incarnation)])
        done.append(index)
    answers = []
    if done:
        answers.append(Answer("Normal", "InstancesReset", (
            f"{who}: reset instance(s) {','.join(map(str, done))} at operator request ({RESET_ANNOTATION} "
            "annotation): pods deleted and preserved operation cleared; the lifecycle passes rebuild them")))
    if skipped:
        answers.append(Answer("Normal", "InstancesResetSkipped",
                              f"{who}: reset skipped for instance(s) {', '.join(skipped)}"))
    return answers


def release(blocks: RetryBlocks, value: str, revision_names: list[str], who: str) -> Answer:
    """Answers a release request: `value` is a revision's full name or its hash."""
    value = value.strip()
    name = next((n for n in revision_names + list(blocks.blocks) if n == value or n.endswith(f"-{value}")), value)
    state = blocks.state(name)
    if state is None:
        return Answer("Normal", "RetryBlockReleaseSkipped", (
            f'{who}: release requested for revision "{value}" but no retryBlock exists for it; nothing to release'))
    if blocks.release(name) is None:
        return Answer("Normal", "RetryBlockReleaseSkipped",
                      f"{who}: retryBlock for revision {name} is {state}, not Held; nothing to release")
    return Answer("Normal", "RetryBlockReleased", (
        f"{who}: Held retryBlock for revision {name} removed at operator request ({RELEASE_ANNOTATION} annotation)"))


def answer(planner: ReplicaPlanner, rows: dict[int, InstanceStatus]) -> tuple[str, ...]:
    """Answers the operators' requests of this pass (each once); returns the annotations to remove."""
    view = planner.view
    answered: list[str] = []
    if view.release_request is not None:
        names = [view.revision_name(view.update_revision)]
        answer = release(planner.blocks, view.release_request, names, view.who)
        planner.event(answer.type, answer.reason, answer.message)
        answered.append(RELEASE_ANNOTATION)
    if view.reset_request is not None:
        serving = {i: instance_facts(r, view.pods.get(i, []), view.pods_per_instance).any_serving()
                   for i, r in rows.items()}
        for answer in reset(rows, view.reset_request, serving, view.who):
            planner.event(answer.type, answer.reason, answer.message)
        answered.append(RESET_ANNOTATION)
    return tuple(answered)
