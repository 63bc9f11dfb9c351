"""Which of a component's ControllerRevisions to delete: OME keeps every revision in use and the `limit` most
recent of the others (by revision number); without a limit it keeps them all. Pure: the controller deletes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from omenative.api import constants as c
from omenative.obj import Obj


def history_limit(spec_limit: Any, configured: int | None) -> int | None:
    """The InferenceReplica's `revisionHistoryLimit` (copied from the InferenceService's annotation), else the
    controller's; None keeps every revision. A value that is not a positive whole number falls through."""
    for value in (spec_limit, configured):
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
    return None


def _number(revision: Obj) -> int:
    try:
        return int(revision.get("revision") or 0)
    except (TypeError, ValueError):
        return 0


def to_prune(revisions: Iterable[Obj], live: set[str], limit: int | None) -> list[Obj]:
    """The revisions past the limit, oldest first. `live` holds revision hashes: the update and current revisions,
    every Instance's running and target revision, a rollback target and what a rollout has pinned."""
    if limit is None:
        return []
    idle = [r for r in revisions
            if (r["metadata"].get("labels") or {}).get(c.LABEL_REVISION_HASH) not in live
            and not r["metadata"].get("deletionTimestamp")]
    # Newest first; the name breaks a tie so two passes always agree.
    idle.sort(key=lambda r: (_number(r), r["metadata"]["name"]), reverse=True)
    return sorted(idle[limit:], key=lambda r: (_number(r), r["metadata"]["name"]))
