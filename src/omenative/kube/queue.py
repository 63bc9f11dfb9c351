"""Rate-limited work queues with client-go's semantics.

- A key waiting in the queue is stored once, however often it is added.
- A key a worker holds is never handed to a second worker; adds meanwhile mark it dirty, and it is queued again
  once when the worker calls `done`.
- `add_after` parks a key until its time; if it is already parked, the earlier time wins.
- `add_rate_limited` waits max(per-key exponential backoff 5 ms .. 1000 s, a 10 qps / burst 100 token bucket);
  `forget` resets the key's backoff.
- Shutting down with drain waits for the keys workers hold.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections import deque
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from omenative.kube import metrics
from omenative.kube.clock import Clock, RealClock, TokenBucket

K = TypeVar("K", bound=Hashable)


class RateLimiter(Protocol[K]):  # type: ignore[misc]
    def when(self, key: K) -> float:
        """How long to wait before the key is processed again; counts a failure."""
        ...

    def forget(self, key: K) -> None: ...

    def failures(self, key: K) -> int: ...


class ItemExponentialLimiter(Generic[K]):
    """base * 2^failures per key, capped (client-go: 5 ms to 1000 s)."""

    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        self.base = base
        self.cap = cap
        self._failures: dict[K, int] = {}

    def when(self, key: K) -> float:
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        # Past 2^64 the cap has long been reached; ldexp would overflow a float.
        return self.cap if n > 64 else min(math.ldexp(self.base, n), self.cap)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)


class TokenBucketLimiter(Generic[K]):
    """An overall token bucket (client-go: 10 qps, burst 100): a reservation is made even when it must wait."""

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        self.qps = qps
        self.burst = burst
        self._bucket = TokenBucket(qps, burst, clock)

    def when(self, key: K) -> float:
        return self._bucket.reserve()

    def forget(self, key: K) -> None:
        return None

    def failures(self, key: K) -> int:
        return 0


class MaxOfLimiter(Generic[K]):
    def __init__(self, *limiters: RateLimiter[K]) -> None:
        self.limiters = limiters

    def when(self, key: K) -> float:
        return max(limiter.when(key) for limiter in self.limiters)

    def forget(self, key: K) -> None:
        for limiter in self.limiters:
            limiter.forget(key)

    def failures(self, key: K) -> int:
        return max(limiter.failures(key) for limiter in self.limiters)


def default_rate_limiter(clock: Clock | None = None) -> MaxOfLimiter[K]:
    """client-go's DefaultControllerRateLimiter."""
    return MaxOfLimiter(ItemExponentialLimiter(0.005, 1000.0), TokenBucketLimiter(10.0, 100, clock))


class ShutDown(Exception):
    """The queue was shut down; the worker should exit."""


class WorkQueue(Generic[K]):
    def __init__(
        self,
        name: str,
        *,
        clock: Clock | None = None,
        rate_limiter: RateLimiter[K] | None = None,
    ) -> None:
        self.name = name
        self.controller = name
        self.clock = clock or RealClock()
        self.rate_limiter: RateLimiter[K] = rate_limiter or default_rate_limiter(self.clock)
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: dict[K, float] = {}  # key -> when a worker took it
        self._added_at: dict[K, float] = {}
        self._waiting: list[tuple[float, int, K]] = []  # heap of (ready time, seq, key)
        self._waiting_ready: dict[K, float] = {}
        self._seq = itertools.count()
        self._changed = asyncio.Event()
        self._drained = asyncio.Event()
        self._shutting_down = False
        self._labels = {"name": name, "controller": name}
        metrics.init_queue_series(name, name)
        metrics.in_flight.track(self)

    # -- adding
    def add(self, key: K) -> None:
        if self._shutting_down or key in self._dirty:
            return
        metrics.workqueue_adds_total.labels(**self._labels).inc()
        self._dirty.add(key)
        self._added_at.setdefault(key, self.clock.now())
        if key not in self._processing:
            self._queue.append(key)
            self._update_depth()
        self._changed.set()

    def add_after(self, key: K, delay: float) -> None:
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        ready = self.clock.now() + delay
        current = self._waiting_ready.get(key)
        if current is not None and current <= ready:
            return  # the earlier time wins
        self._waiting_ready[key] = ready
        heapq.heappush(self._waiting, (ready, next(self._seq), key))
        self._changed.set()

    def add_rate_limited(self, key: K) -> None:
        metrics.workqueue_retries_total.labels(**self._labels).inc()
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: K) -> None:
        self.rate_limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return self.rate_limiter.failures(key)

    # -- taking
    def _promote_ready(self) -> float | None:
        """Moves parked keys whose time has come into the queue; returns the delay until the next one."""
        now = self.clock.now()
        while self._waiting:
            ready, _, key = self._waiting[0]
            if self._waiting_ready.get(key) != ready:
                heapq.heappop(self._waiting)  # superseded by an earlier time
                continue
            if ready > now:
                return ready - now
            heapq.heappop(self._waiting)
            del self._waiting_ready[key]
            self.add(key)
        return None

    def get_nowait(self) -> K | None:
        """The next key ready now, or None."""
        self._promote_ready()
        if not self._queue:
            return None
        key = self._queue.popleft()
        now = self.clock.now()
        self._processing[key] = now
        self._dirty.discard(key)
        added = self._added_at.pop(key, now)
        metrics.workqueue_queue_duration_seconds.labels(**self._labels).observe(max(0.0, now - added))
        self._update_depth()
        return key

    async def get(self) -> K:
        """Waits for the next key; raises ShutDown once the queue is shut down."""
        while True:
            if self._shutting_down:
                raise ShutDown(self.name)
            key = self.get_nowait()
            if key is not None:
                return key
            delay = self._promote_ready()
            self._changed.clear()
            waiter = asyncio.ensure_future(self._changed.wait())
            wake_at = self.clock.now() + delay if delay is not None else None
            timers = [asyncio.ensure_future(self.clock.sleep_until(wake_at))] if wake_at is not None else []
            try:
                await asyncio.wait([waiter, *timers], return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (waiter, *timers):
                    task.cancel()

    def done(self, key: K) -> None:
        started = self._processing.pop(key, None)
        if started is not None:
            metrics.workqueue_work_duration_seconds.labels(**self._labels).observe(
                max(0.0, self.clock.now() - started))
        if key in self._dirty:
            self._queue.append(key)
            self._update_depth()
            self._changed.set()
        if not self._processing:
            self._drained.set()

    # -- state
    def __len__(self) -> int:
        return len(self._queue)

    def waiting(self) -> int:
        """Keys parked by add_after / add_rate_limited."""
        return len(self._waiting_ready)

    def processing(self) -> int:
        return len(self._processing)

    def unfinished_work_seconds(self) -> float:
        now = self.clock.now()
        return sum(now - t for t in self._processing.values())

    def longest_running_processor_seconds(self) -> float:
        now = self.clock.now()
        return max((now - t for t in self._processing.values()), default=0.0)

    def _update_depth(self) -> None:
        metrics.workqueue_depth.labels(**self._labels).set(len(self._queue))

    # -- stopping
    def shut_down(self) -> None:
        self._shutting_down = True
        self._changed.set()

    async def shut_down_with_drain(self) -> None:
        """Stops handing out keys and waits for the keys workers hold."""
        self.shut_down()
        if self._processing:
            self._drained.clear()
            await self._drained.wait()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down
