"""Whether a node is dead, from the Node object (or its absence), for the force-delete escalation of OME's "Recover
stuck deletions" guide. Pure.

A node counts as dead by one of three pieces of evidence: its Node object is gone (`node-gone`); it has had the
`node.kubernetes.io/unreachable` taint for the threshold (`node-unreachable-taint`); or its `Ready` condition has been
False or Unknown for the threshold (`node-not-ready`). A node whose `Ready` is True is never dead, whatever its taints.
"""

from __future__ import annotations

from typing import Any

import attrs

from omenative.api.times import parse_time

UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"


@attrs.frozen
class NodeHealth:
    exists: bool
    ready: bool = False
    unreachable_since: float | None = None
    not_ready_since: float | None = None


GONE = NodeHealth(exists=False)


def node_health(node: dict[str, Any] | None) -> NodeHealth:
    if node is None:
        return GONE
    ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    taint = next((t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") == UNREACHABLE_TAINT), None)
    is_ready = ready is not None and ready.get("status") == "True"
    return NodeHealth(
        exists=True, ready=is_ready,
        unreachable_since=parse_time(taint.get("timeAdded")) if taint else None,
        not_ready_since=parse_time(ready.get("lastTransitionTime")) if ready is not None and not is_ready else None)


def dead_evidence(health: NodeHealth, now: float, threshold: float) -> tuple[str | None, float | None]:
    """(the evidence that the node is dead, or None; when the evidence would be complete, if it may become so)."""
    if not health.exists:
        return "node-gone", None
    if health.ready:
        return None, None
    pending: list[float] = []
    for evidence, since in (("node-unreachable-taint", health.unreachable_since),
                            ("node-not-ready", health.not_ready_since)):
        if since is None:
            continue
        if now - since >= threshold:
            return evidence, None
        pending.append(since + threshold)
    return None, min(pending) if pending else None
