"""The work queue keeps client-go's guarantees; time is a hand-driven clock, never a sleep."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from omenative.kube.clock import FakeClock, TokenBucket
from omenative.kube.queue import (
    ItemExponentialLimiter,
    MaxOfLimiter,
    ShutDown,
    TokenBucketLimiter,
    WorkQueue,
)


def drain(queue: WorkQueue[str]) -> list[str]:
    """Takes every key ready now, marking each done."""
    out = []
    while (key := queue.get_nowait()) is not None:
        out.append(key)
        queue.done(key)
    return out


@pytest.mark.parametrize(
    ("adds", "expected"),
    [
        (["a"], ["a"]),
        (["a", "a", "a"], ["a"]),
        (["a", "b", "a", "c", "b"], ["a", "b", "c"]),
        ([], []),
    ],
)
def test_a_waiting_key_is_stored_once(adds: list[str], expected: list[str]) -> None:
    queue: WorkQueue[str] = WorkQueue("dedup", clock=FakeClock())
    for key in adds:
        queue.add(key)
    assert len(queue) == len(expected)
    assert drain(queue) == expected


@pytest.mark.parametrize(
    ("re_adds", "expected_after_done"),
    [
        (0, []),  # nothing happened while processing
        (1, ["a"]),  # re-added while processing: runs once more afterwards
        (5, ["a"]),  # several re-adds collapse into one
    ],
)
def test_re_add_during_processing_runs_once_afterwards(re_adds: int, expected_after_done: list[str]) -> None:
    queue: WorkQueue[str] = WorkQueue("readd", clock=FakeClock())
    queue.add("a")
    assert queue.get_nowait() == "a"
    for _ in range(re_adds):
        queue.add("a")
    # While a worker holds "a", nobody else gets it.
    assert queue.get_nowait() is None
    queue.done("a")
    assert drain(queue) == expected_after_done


async def test_a_key_is_never_processed_by_two_workers_at_once() -> None:
    queue: WorkQueue[str] = WorkQueue("exclusive", clock=FakeClock())
    holders: dict[str, int] = {}
    peak: dict[str, int] = {}
    processed: list[str] = []
    gates = {key: asyncio.Event() for key in ("a", "b")}
    progress = asyncio.Condition()

    async def worker() -> None:
        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            holders[key] = holders.get(key, 0) + 1
            peak[key] = max(peak.get(key, 0), holders[key])
            processed.append(key)
            async with progress:
                progress.notify_all()
            await gates[key].wait()
            holders[key] -= 1
            queue.done(key)
            async with progress:
                progress.notify_all()

    async def until(predicate: Callable[[], bool]) -> None:
        async with progress:
            await asyncio.wait_for(progress.wait_for(predicate), timeout=5)

    workers = [asyncio.create_task(worker()) for _ in range(4)]
    queue.add("a")
    queue.add("b")
    await until(lambda: queue.processing() == 2)
    # Re-adds while both keys are held: two workers sit idle, yet nobody gets "a" or "b" a second time.
    for key in ("a", "b", "a"):
        queue.add(key)
    for _ in range(20):
        await asyncio.sleep(0)
    assert sorted(processed) == ["a", "b"]
    assert len(queue) == 0
    for gate in gates.values():
        gate.set()
    await until(lambda: len(processed) == 4 and queue.processing() == 0)
    await queue.shut_down_with_drain()
    await asyncio.gather(*workers)
    assert peak == {"a": 1, "b": 1}
    assert sorted(processed) == ["a", "a", "b", "b"]


@pytest.mark.parametrize(
    ("failures", "expected"),
    [
        (1, [0.005]),
        (4, [0.005, 0.01, 0.02, 0.04]),
        (19, [0.005 * 2**n for n in range(18)] + [1000.0]),
        (100, [0.005 * 2**n for n in range(18)] + [1000.0] * 82),
    ],
)
def test_per_key_backoff_doubles_from_5ms_to_1000s(failures: int, expected: list[float]) -> None:
    limiter: ItemExponentialLimiter[str] = ItemExponentialLimiter()
    assert [limiter.when("k") for _ in range(failures)] == pytest.approx(expected)
    assert limiter.failures("k") == failures
    assert limiter.when("other") == pytest.approx(0.005)  # keys back off independently
    limiter.forget("k")
    assert limiter.when("k") == pytest.approx(0.005)


@pytest.mark.parametrize(
    ("burst_used", "advance", "expected_delay"),
    [
        (0, 0.0, 0.0),
        (99, 0.0, 0.0),  # the 100th request still fits the burst
        (100, 0.0, 0.1),  # the 101st waits one token at 10 qps
        (110, 0.0, 1.1),
        (100, 0.1, 0.0),  # a tenth of a second refills one token
        (100, 100.0, 0.0),  # refill is capped at the burst
    ],
)
def test_token_bucket_allows_10_qps_with_burst_100(burst_used: int, advance: float, expected_delay: float) -> None:
    clock = FakeClock()
    bucket: TokenBucketLimiter[str] = TokenBucketLimiter(qps=10, burst=100, clock=clock)
    for i in range(burst_used):
        bucket.when(f"k{i}")
    clock.advance(advance)
    assert bucket.when("next") == pytest.approx(expected_delay)


def test_default_limiter_is_the_larger_of_backoff_and_bucket() -> None:
    clock = FakeClock()
    limiter: MaxOfLimiter[str] = MaxOfLimiter(ItemExponentialLimiter(), TokenBucketLimiter(10, 100, clock))
    for i in range(100):
        limiter.when(f"burst{i}")
    # The bucket is empty: a fresh key waits for a token (0.1 s), longer than its first backoff (5 ms).
    assert limiter.when("fresh") == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("adds", "steps", "expected"),
    [
        # (key, delay) adds; at each step the clock advances and the ready keys are taken in order.
        ([("a", 3.0), ("b", 1.0), ("c", 2.0)], [1.0, 1.0, 1.0], [["b"], ["c"], ["a"]]),
        ([("a", 5.0), ("a", 1.0)], [1.0, 10.0], [["a"], []]),  # an earlier time replaces a later one
        ([("a", 1.0), ("a", 5.0)], [1.0, 10.0], [["a"], []]),  # a later time does not delay an earlier one
        ([("a", 0.0), ("b", -1.0)], [0.0], [["a", "b"]]),  # no delay means now
        ([("a", 2.0), ("b", 2.0)], [1.99, 0.01], [[], ["a", "b"]]),  # ties keep insertion order
    ],
)
def test_add_after_orders_by_ready_time(
    adds: list[tuple[str, float]], steps: list[float], expected: list[list[str]]
) -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue("after", clock=clock)
    for key, delay in adds:
        queue.add_after(key, delay)
    got = []
    for step in steps:
        clock.advance(step)
        got.append(drain(queue))
    assert got == expected


async def test_get_wakes_when_a_parked_key_becomes_ready() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue("wake", clock=clock)
    queue.add_after("later", 30.0)
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    assert not getter.done()
    clock.advance(29.0)
    await asyncio.sleep(0)
    assert not getter.done()
    clock.advance(1.0)
    assert await asyncio.wait_for(getter, timeout=1) == "later"


def test_rate_limited_adds_back_off_and_forget_resets() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue("retry", clock=clock, rate_limiter=ItemExponentialLimiter(1.0, 60.0))
    queue.add_rate_limited("k")
    queue.add_rate_limited("k")  # already parked at +1 s: the earlier time wins
    assert queue.num_requeues("k") == 2
    clock.advance(1.0)
    assert drain(queue) == ["k"]
    queue.add_rate_limited("k")  # third failure: 4 s
    clock.advance(3.9)
    assert drain(queue) == []
    clock.advance(0.1)
    assert drain(queue) == ["k"]
    queue.forget("k")
    assert queue.num_requeues("k") == 0


async def test_shutdown_with_drain_waits_for_held_keys_and_stops_workers() -> None:
    queue: WorkQueue[str] = WorkQueue("drain", clock=FakeClock())
    queue.add("held")
    key = await queue.get()
    drained = asyncio.create_task(queue.shut_down_with_drain())
    await asyncio.sleep(0)
    assert not drained.done()
    queue.add("ignored")  # adds after shutdown are dropped
    queue.done(key)
    await asyncio.wait_for(drained, timeout=1)
    with pytest.raises(ShutDown):
        await queue.get()


def test_the_token_bucket_reserves_into_debt_takes_only_what_it_holds_and_refills_on_its_clock() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=2.0, burst=2, clock=clock)
    assert [bucket.reserve(), bucket.reserve()] == [0.0, 0.0]
    assert bucket.reserve() == 0.5  # a third token is owed: half a second at two a second
    assert not bucket.take() and not bucket.full()
    clock.advance(1.0)  # two tokens: one pays the debt, one is held
    assert bucket.take() and not bucket.take()
    clock.advance(10)
    assert bucket.full() and bucket.tokens == 0.0  # `full` reads the clock; the count refills on the next use
