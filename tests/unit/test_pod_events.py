"""Which pod changes wake the InferenceReplica at once (failures) and which wait for the status batch (progress)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from omenative.observe.pods import pod_got_worse

pytestmark = pytest.mark.unit
Obj = dict[str, Any]


def running() -> Obj:
    return {"metadata": {"name": "p", "uid": "u"},
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "main", "restartCount": 0, "ready": True}]}}


def changed(edit: Callable[[Obj], None]) -> Obj:
    pod = running()
    edit(pod)
    return pod


def not_ready(pod: Obj) -> None:
    pod["status"]["conditions"] = [{"type": "Ready", "status": "False"}]


@pytest.mark.parametrize(("name", "old", "new", "urgent"), [
    ("deletion starts", running(), changed(lambda p: p["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z")),
     True),
    ("container restarted", running(),
     changed(lambda p: p["status"]["containerStatuses"][0].update(restartCount=1)), True),
    ("pod failed", running(), changed(lambda p: p["status"].update(phase="Failed")), True),
    ("node lost (Unknown)", running(), changed(lambda p: p["status"].update(phase="Unknown")), True),
    ("stopped being ready", running(), changed(not_ready), True),
    ("became ready", changed(not_ready), running(), False),
    ("scheduled and started", changed(lambda p: p.update(status={"phase": "Pending"})), changed(not_ready), False),
    ("an unrelated label", running(), changed(lambda p: p["metadata"].update(labels={"a": "b"})), False),
    ("no status yet", {"metadata": {"name": "p"}}, {"metadata": {"name": "p"}, "status": {"phase": "Pending"}},
     False),
])
def test_failures_are_urgent_progress_is_batched(name: str, old: Obj, new: Obj, urgent: bool) -> None:
    assert pod_got_worse(copy.deepcopy(old), copy.deepcopy(new)) is urgent, name
