"""WriteExpectations: a reconcile waits for the cache to hold its own last write, or a later version."""

from __future__ import annotations

import pytest

from omenative.kube.clock import FakeClock
from omenative.kube.expectations import WriteExpectations, expected

pytestmark = pytest.mark.unit


def test_a_key_waits_until_its_write_or_a_later_version_is_cached() -> None:
    written = WriteExpectations(FakeClock(), timeout=30)
    assert written.caught_up("ns/a", "5")  # nothing written
    written.wrote("ns/a", "10")
    assert not written.caught_up("ns/a", "9")
    assert written.caught_up("ns/a", "10")
    written.wrote("ns/a", "12")
    assert written.caught_up("ns/a", "15")  # a later write by someone else carries ours


def test_an_event_marks_it_observed() -> None:
    written = WriteExpectations(FakeClock(), timeout=30)
    written.wrote("ns/a", "10")
    written.observed("ns/a", "8")
    assert not written.caught_up("ns/a", "8")
    written.observed("ns/a", "11")
    assert written.caught_up("ns/a", "8")  # the expectation is gone


def test_a_lost_event_waits_at_most_the_timeout() -> None:
    clock = FakeClock()
    written = WriteExpectations(clock, timeout=30)
    written.wrote("ns/a", "10")
    clock.advance(29)
    assert not written.caught_up("ns/a", "9")
    clock.advance(1)
    assert written.caught_up("ns/a", "9")


def test_opaque_versions_compare_by_equality_only() -> None:
    written = WriteExpectations(FakeClock(), timeout=30)
    written.wrote("ns/a", "abc")
    assert not written.caught_up("ns/a", "abd")
    assert written.caught_up("ns/a", "abc")


async def test_a_write_that_changed_nothing_or_failed_counts_as_observed_at_once() -> None:
    seen: list[str] = []

    async def result(value: bool) -> bool:
        return value

    async def refused() -> bool:
        raise RuntimeError("refused")

    await expected(result(True), lambda: seen.append("created"))
    assert seen == []  # its watch event will mark it
    await expected(result(False), lambda: seen.append("already there"))
    with pytest.raises(RuntimeError):
        await expected(refused(), lambda: seen.append("failed"))
    assert seen == ["already there", "failed"]
