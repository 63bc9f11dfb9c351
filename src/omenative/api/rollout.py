"""The rollout vocabulary that the controller and `kubectl ome` share (OME's concepts/omenative/rollout-groups.md):
canary phases, a group's primary component and step gate, and what a repin compares (the plan's digest and
topology). Pure."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from omenative.api import constants as c
from omenative.api.rollout_validation import progression
from omenative.obj import Obj

# Canary phases (status.components.<primary>.rolloutPhase).
PENDING, CANARYING, PAUSED, PROMOTING, STABLE = "Pending", "Canarying", "Paused", "Promoting", "Stable"
FAILED, ROLLING_BACK, ROLLED_BACK = "Failed", "RollingBack", "RolledBack"
IN_FLIGHT = (PENDING, CANARYING, PAUSED, PROMOTING, FAILED)  # a canary that has not ended
CANARY_OPEN = (*IN_FLIGHT, ROLLING_BACK)  # ...or is moving back: the unit has not rolled out, its split stands


def primary_of(names: list[str]) -> str:
    """The component whose status carries the canary: the router when the group has it, else the engine."""
    for name in (c.ROUTER, c.ENGINE, c.DECODER):
        if name in names:
            return name
    return names[0]


def gate_of(step: Obj) -> str:
    """What opens a canary step: Analysis, Immediate, Timed (a pause with a duration) or Manual (`pause: {}`)."""
    if step.get("analysis"):
        return "Analysis"
    pause = step.get("pause")
    if pause is None:
        return "Immediate"
    return "Timed" if pause.get("duration") else "Manual"


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def plan_digest(groups: list[Obj]) -> str:
    """The digest of a plan's groups that `kubectl ome rollout repin` sends and the controller checks."""
    return "rp1:" + digest(groups)


def topology(groups: list[Obj]) -> list[tuple[Any, ...]]:
    """What a repin must keep: per group its progression, components, order, soak and ratio."""
    return [(progression(g), tuple(g.get("components") or []), tuple(g.get("order") or []), g.get("soak"),
             json.dumps(g.get("maintainRatio"), sort_keys=True)) for g in groups]


# Where a rollout's status names a revision it may still move Instances to (a canary's sides, a run's targets and
# the stable revisions a rollback returns to).
_PINNED_KEYS = frozenset({"revision", "stableRevision", "canaryRevisionHash", "stableRevisionHash"})


def pinned_revisions(status: Any) -> set[str]:
    """Every revision hash the InferenceService's rollout status still refers to: none of these may be pruned."""
    found: set[str] = set()
    stack = [status]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in _PINNED_KEYS and isinstance(value, str) and value:
                    found.add(value)
                elif key == "stableRevisions" and isinstance(value, dict):
                    found.update(v for v in value.values() if isinstance(v, str) and v)
                else:
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return found


def pairing_of(runners: Any) -> str | None:
    """A revision's prefill-decode pairing protocol: the `ome.io/pairing-protocol` its pod templates carry."""
    for runner in runners if isinstance(runners, list) else []:
        labels: Any = runner
        for key in ("template", "metadata", "labels"):  # a hand-edited ControllerRevision may hold anything
            labels = labels.get(key) if isinstance(labels, dict) else None
        if isinstance(labels, dict) and c.LABEL_PAIRING_PROTOCOL in labels:
            return str(labels[c.LABEL_PAIRING_PROTOCOL])
    return None


def paired_revision(own: str | None, candidates: list[tuple[str, str | None]]) -> str | None:
    """The revision of a peer a pod pairs with (OME_<PEER>_REVISION_ENDPOINT): the first of the peer's revisions,
    its update revision before its current one, whose pairing protocol equals the pod's; an empty protocol on
    either side pairs with anything (OME's ComponentTrafficTarget.pairingProtocol)."""
    for revision, pairing in candidates:
        if revision and (not own or not pairing or own == pairing):
            return revision
    return None


def peers_of(isvc_spec: Any, component: str) -> tuple[str, ...]:
    """The components whose Service endpoint a pod of `component` gets as `OME_<PEER>_ENDPOINT` (OME's deployment
    modes page): with `spec.rollout.groups` only, every other component the InferenceService declares."""
    if not isinstance(isvc_spec, dict):
        return ()
    rollout = isvc_spec.get("rollout")
    groups = rollout.get("groups") if isinstance(rollout, dict) else None
    if not isinstance(groups, list) or not groups:
        return ()
    return tuple(name for name in c.COMPONENTS if name != component and isvc_spec.get(name) is not None)
