"""Time, injectable: real monotonic time in the controller, a hand-driven clock in tests (no sleeps, no luck)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds."""
        ...

    async def sleep(self, seconds: float) -> None: ...

    async def sleep_until(self, when: float) -> None:
        """Sleeps until `now() >= when`; the deadline is fixed by the caller, not by when the sleep starts."""
        ...


class RealClock:
    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    async def sleep_until(self, when: float) -> None:
        await asyncio.sleep(max(0.0, when - time.monotonic()))


class FakeClock:
    """A clock that moves only when a test calls `advance`; sleepers wake when their time has come."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        await self.sleep_until(self._now + seconds)

    async def sleep_until(self, when: float) -> None:
        if when <= self._now:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (when, next(self._seq), future))
        await future

    def advance(self, seconds: float) -> None:
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)


class TokenBucket:
    """A token bucket on a clock (client-go's flowcontrol): `rate` tokens a second, at most `burst` held; it starts
    full. The one bucket behind the client's QPS, the work queues' overall limit and the event spam filter."""

    __slots__ = ("burst", "clock", "last", "rate", "tokens")

    def __init__(self, rate: float, burst: float, clock: Clock | None = None) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.clock = clock or RealClock()
        self.tokens = float(burst)
        self.last = self.clock.now()

    def _refill(self) -> None:
        now = self.clock.now()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now

    def reserve(self) -> float:
        """Takes a token even when none is left (going into debt, as client-go's Reserve): how long to wait
        before using it."""
        self._refill()
        self.tokens -= 1
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate

    def take(self) -> bool:
        """Takes a token if one is held; False (and nothing taken) otherwise."""
        self._refill()
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True

    def full(self) -> bool:
        """Refilled to its burst: forgetting it changes nothing (a new bucket starts full)."""
        return self.tokens + (self.clock.now() - self.last) * self.rate >= self.burst
