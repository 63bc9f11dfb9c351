"""InferenceReplica rows are decoded once per resourceVersion and shared by every reader."""

from __future__ import annotations

from typing import Any

import pytest

from omenative.api.instance_status import encode_rows
from omenative.api.types import InstanceStatus
from omenative.controllers import context
from omenative.controllers.context import DecodedRows

pytestmark = pytest.mark.unit


def replica(rv: str, phases: list[str], uid: str = "uid-1") -> dict[str, Any]:
    rows = [InstanceStatus(index=i, incarnation=1, phase=p) for i, p in enumerate(phases)]
    return {"metadata": {"name": "r", "namespace": "ns", "uid": uid, "resourceVersion": rv},
            "status": encode_rows(rows)}


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = context.decode_rows

    def counting(status: Any) -> list[InstanceStatus]:
        calls.append(1)
        return real(status)

    monkeypatch.setattr(context, "decode_rows", counting)
    return calls


def test_one_version_is_decoded_once_and_a_new_version_again(decodes: list[int]) -> None:
    rows = DecodedRows()
    first = rows.of(replica("10", ["Ready", "Creating"]))
    again = rows.of(replica("10", ["Ready", "Creating"]))
    assert again is first and len(decodes) == 1
    assert {i: r.phase for i, r in first.items()} == {0: "Ready", 1: "Creating"}
    newer = rows.of(replica("11", ["Ready", "Ready"]))
    assert len(decodes) == 2 and newer[1].phase == "Ready"
    assert rows.of(replica("10", ["Ready", "Creating"])) is first  # the old version is still remembered
    with pytest.raises(TypeError):
        first[5] = InstanceStatus(index=5)  # type: ignore[index]


def test_only_the_two_newest_versions_of_an_object_are_kept(decodes: list[int]) -> None:
    """A busy replica's status changes hundreds of times; its old decodings must not pile up."""
    rows = DecodedRows()
    for rv in range(1, 101):
        rows.of(replica(str(rv), ["Ready"] * 50))
    assert len(decodes) == 100 and len(rows) == 2
    rows.of(replica("99", ["Ready"] * 50))
    rows.of(replica("100", ["Ready"] * 50))
    assert len(decodes) == 100  # the previous and the newest: an update handler's old and new
    rows.of(replica("1", ["Ready"] * 50))  # forgotten: decoded again
    assert len(decodes) == 101


def test_the_least_recently_used_objects_are_forgotten_past_the_capacity(decodes: list[int]) -> None:
    rows = DecodedRows(capacity=2)
    for uid in ("a", "b", "c"):
        rows.of(replica("1", ["Ready"], uid=uid))
    assert len(decodes) == 3
    rows.of(replica("1", ["Ready"], uid="c"))
    assert len(decodes) == 3
    rows.of(replica("1", ["Ready"], uid="a"))  # evicted: decoded again
    assert len(decodes) == 4


def test_an_object_without_a_resource_version_is_decoded_every_time(decodes: list[int]) -> None:
    rows = DecodedRows()
    unversioned = replica("", ["Ready"])
    rows.of(unversioned)
    rows.of(unversioned)
    assert len(decodes) == 2
