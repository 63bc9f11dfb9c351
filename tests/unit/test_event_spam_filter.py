"""The event recorder's spam filter keeps one token bucket per object, and forgets buckets that have refilled."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from omenative.kube import events
from omenative.kube.clock import FakeClock
from omenative.kube.events import SERIES_INTERVAL, SPAM_BURST, SPAM_REFILL_SECONDS, EventRecorder

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


class Recorded:
    """A stand-in API for the recorder: keeps what it was asked to write."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, Any]] = []

    async def create(self, resource: Any, body: dict[str, Any], namespace: str) -> dict[str, Any]:
        self.writes.append(("create", body["count"]))
        return body

    async def patch(self, resource: Any, name: str, body: dict[str, Any], namespace: str) -> dict[str, Any]:
        self.writes.append(("patch", body["count"]))
        return body


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_repeats_within_the_series_interval_cost_one_write_and_the_count_catches_up() -> None:
    clock = FakeClock()
    api = Recorded()
    recorder = EventRecorder(cast(Any, api), clock=clock)
    recorder.start()
    try:
        for _ in range(3):  # every Instance of a component says the same thing at once
            recorder.warning(subject(0), "MaybeNoGangScheduler", "same")
        await settle()
        assert api.writes == [("create", 1)]
        clock.advance(SERIES_INTERVAL - 1)
        await settle()
        assert api.writes == [("create", 1)]
        clock.advance(1)  # the interval has passed: the two repeats are written as one count
        await settle()
        assert api.writes == [("create", 1), ("patch", 3)]
        clock.advance(10 * SERIES_INTERVAL)  # nothing pending: nothing written
        await settle()
        recorder.warning(subject(0), "MaybeNoGangScheduler", "same")  # long after the last write: at once
        await settle()
        assert api.writes == [("create", 1), ("patch", 3), ("patch", 4)]
        recorder.warning(subject(0), "MaybeNoGangScheduler", "same")
        await settle()
    finally:
        await recorder.stop()
    assert api.writes[-1] == ("patch", 5)  # stopping writes what was still counted in memory


class Slow(Recorded):
    """An API whose creates take until released, counting how many are under way at once."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.in_flight = self.most_in_flight = 0

    async def create(self, resource: Any, body: dict[str, Any], namespace: str) -> dict[str, Any]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await self.release.wait()
        self.in_flight -= 1
        return await super().create(resource, body, namespace)


async def test_events_are_written_side_by_side_and_a_repeat_meanwhile_is_counted_not_created() -> None:
    api = Slow()
    recorder = EventRecorder(cast(Any, api), clock=FakeClock())
    recorder.start()
    try:
        for i in range(10):  # ten Instances restart at once
            recorder.normal(subject(i), "RestartTriggered", f"instance={i}")
        recorder.normal(subject(0), "RestartTriggered", "instance=0")  # a repeat while its create is under way
        await settle()
        assert api.most_in_flight == events.WRITERS
        api.release.set()
        await settle()
    finally:
        await recorder.stop()
    assert sorted(api.writes) == [("create", 1)] * 10 + [("patch", 2)]
