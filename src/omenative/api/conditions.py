"""Conditions that move only when they change: a condition keeps its lastTransitionTime while its status stays,
so rewriting the same conditions is a no-op and never a new write."""

from __future__ import annotations

from typing import Any

JSONDict = dict[str, Any]


def settle(new: list[JSONDict], old: list[JSONDict] | None) -> list[JSONDict]:
    """`new` with lastTransitionTime taken from `old` wherever a condition's status did not change."""
    previous = {cond.get("type"): cond for cond in old or []}
    out = []
    for cond in new:
        before = previous.get(cond.get("type"))
        if before is not None and before.get("status") == cond.get("status") and before.get("lastTransitionTime"):
            cond = {**cond, "lastTransitionTime": before["lastTransitionTime"]}
        out.append(cond)
    return out


def find(conditions: list[JSONDict] | None, kind: str) -> JSONDict | None:
    return next((cond for cond in conditions or [] if cond.get("type") == kind), None)


def condition(kind: str, status: bool | str, reason: str, message: str, now: str) -> JSONDict:
    value = status if isinstance(status, str) else ("True" if status else "False")
    return {"type": kind, "status": value, "reason": reason, "message": message, "lastTransitionTime": now}
