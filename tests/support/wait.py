"""Waiting for the cluster to reach a state, and saying clearly what it looked like when it did not."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

Probe = Callable[[], Awaitable[T]]
Describe = Callable[[], Awaitable[str]]


class WaitTimeout(AssertionError):
    pass


async def wait_for(
    probe: Probe[T],
    *,
    timeout: float,
    what: str,
    describe: Describe | None = None,
    interval: float = 0.2,
) -> T:
    """Polls `probe` until it returns something truthy, and returns that.

    On timeout, fails with `what`, the last value or error of the probe, and `describe()` (the objects that matter),
    so a failing test shows the cluster's state instead of just "timed out".
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = await probe()
            if value:
                return value
            last = value
        except AssertionError as exc:  # a probe may assert to explain why it is not there yet
            last = exc
        if time.monotonic() >= deadline:
            details = await describe() if describe else ""
            raise WaitTimeout(f"timed out after {timeout:.0f}s waiting for {what}; last probe: {last!r}\n{details}")
        await asyncio.sleep(interval)
