"""Revision history (OME's update-strategies page): every revision in use is kept, and of the others the `limit`
newest; the limit comes from the InferenceService's annotation, then the controller's setting."""

from __future__ import annotations

from typing import Any

import pytest

from omenative.api import constants as c
from omenative.api.defaults import effective_partition
from omenative.api.rollout import pinned_revisions
from omenative.api.rollout_validation import validate_rollout
from omenative.controllers.inferencereplica.revisions import history_limit, to_prune
from omenative.controllers.inferenceservice.desired import history_annotation


def revision(hash_: str, number: int, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"llama-engine-{hash_}", "labels": {c.LABEL_REVISION_HASH: hash_}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-07T00:00:00Z"
    return {"metadata": meta, "revision": number}


HISTORY = [revision(f"r{n}", n) for n in range(1, 8)]  # r7 is the newest


@pytest.mark.parametrize(("live", "limit", "pruned"), [
    ({"r7"}, None, []),  # no limit: OME keeps every revision
    ({"r7"}, 10, []),  # fewer idle revisions than the limit
    ({"r7"}, 2, ["r1", "r2", "r3", "r4"]),  # r5 and r6 are the two newest idle ones
    ({"r7", "r1"}, 2, ["r2", "r3", "r4"]),  # r1 is in use (an Instance still runs it): never pruned
    ({"r7", "r6", "r5"}, 1, ["r1", "r2", "r3"]),  # live ones do not count against the limit
    (set(), 7, []),
])
def test_prunes_the_oldest_idle_revisions_past_the_limit(live: set[str], limit: int | None,
                                                         pruned: list[str]) -> None:
    got = to_prune(HISTORY, live, limit)
    assert [r["metadata"]["labels"][c.LABEL_REVISION_HASH] for r in got] == pruned


def test_a_revision_already_being_deleted_is_left_alone_and_not_counted() -> None:
    history = [*HISTORY[:-1], revision("r7", 7, deleting=True)]
    assert [r["revision"] for r in to_prune(history, set(), 5)] == [1]


@pytest.mark.parametrize(("spec", "configured", "limit"), [
    (3, 10, 3), (None, 10, 10), (None, None, None), (None, 0, None), (0, 10, 10), (True, None, None),
    ("3", None, None),
])
def test_the_limit_comes_from_the_replica_then_the_controller(spec: Any, configured: int | None,
                                                              limit: int | None) -> None:
    assert history_limit(spec, configured) == limit


@pytest.mark.parametrize(("value", "limit"), [("3", 3), (" 12 ", 12), ("0", None), ("-1", None), ("x", None),
                                              (None, None)])
def test_the_annotation_reaches_the_replica_only_when_valid(value: str | None, limit: int | None) -> None:
    annotations = {} if value is None else {c.ANN_REVISION_HISTORY_LIMIT: value}
    assert history_annotation(annotations) == limit


@pytest.mark.parametrize(("value", "refused"), [("1", False), ("10", False), ("0", True), ("-2", True),
                                                ("ten", True), ("", True)])
def test_admission_refuses_a_limit_that_is_not_a_positive_whole_number(value: str, refused: bool) -> None:
    errors, _ = validate_rollout({}, {c.ANN_REVISION_HISTORY_LIMIT: value})
    assert bool(errors) is refused
    if refused:
        assert errors == [f"metadata.annotations[ome.io/revision-history-limit]: {value!r} must be a positive "
                          "whole number"]


def test_what_a_rollout_pinned_is_live() -> None:
    status = {
        "rollout": {"activeRun": {"targetRevisions": [
            {"component": "engine", "revision": "bbbb", "stableRevision": "aaaa"}]}},
        "components": {"engine": {"canary": {"canaryRevisionHash": "cccc", "stableRevisionHash": "dddd",
                                             "stableRevisions": {"engine": "eeee", "decoder": "ffff"}},
                                  "traffic": [{"tag": "stable", "latestRevision": False}]}},
    }
    assert pinned_revisions(status) == {"aaaa", "bbbb", "cccc", "dddd", "eeee", "ffff"}
    assert pinned_revisions(None) == set()


@pytest.mark.parametrize(("pacing", "rolling", "partition"), [
    ({}, {}, 0),
    ({}, {"partition": 1}, 1),  # the component's own hold, outside rollout groups
    ({"partition": 3}, {"partition": 1}, 3),  # a canary step replaces it
    ({"partition": 0}, {"partition": 1}, 0),  # even with 0: the step lets every Instance move
    ({}, {"partition": -2}, 0),
    ({}, {"partition": "x"}, 0),  # an object stored before admission knew better does not crash the pass
])
def test_the_partition_in_force(pacing: dict[str, Any], rolling: dict[str, Any], partition: int) -> None:
    assert effective_partition(pacing, rolling) == partition
