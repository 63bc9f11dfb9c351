"""The event recorder's spam filter keeps one token bucket per object, and forgets buckets that have refilled."""

from __future__ import annotations

from typing import Any, cast

import pytest

from omenative.kube import events
from omenative.kube.clock import FakeClock
from omenative.kube.events import SPAM_BURST, SPAM_REFILL_SECONDS, EventRecorder

pytestmark = pytest.mark.unit


def subject(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i}", "namespace": "ns", "uid": f"uid-{i}"}}


def test_full_buckets_are_forgotten_and_a_drained_one_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "MAX_BUCKETS", 10)
    clock = FakeClock()
    recorder = EventRecorder(cast(Any, None), clock=clock)  # recording only queues: no client needed
    for _ in range(SPAM_BURST):
        recorder.normal(subject(0), "Flood", "again")  # pod-0 drains its bucket
    for i in range(1, 10):
        recorder.normal(subject(i), "Once", "hello")
    assert len(recorder._buckets) == 10
    clock.advance(2 * SPAM_REFILL_SECONDS)  # pods 1-9 refill to the burst; pod-0 has only 2 tokens back
    recorder.normal(subject(10), "Once", "hello")  # the 11th object passes the limit
    assert set(recorder._buckets) == {"uid-0", "uid-10"}
    # pod-0 is still limited: two events pass, the third is dropped.
    dropped = recorder.dropped
    for _ in range(3):
        recorder.normal(subject(0), "Flood", "again")
    assert recorder.dropped == dropped + 1
