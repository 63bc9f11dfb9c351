"""Independent writes of one reconcile, made together."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any


async def gather_all(requests: Iterable[Awaitable[Any]]) -> list[Any]:
    """Awaits every request, also when one fails, then raises the first failure. Unlike a plain gather, no request
    is left running unobserved behind an error, so a reconcile ends only when all its writes have."""
    results = await asyncio.gather(*requests, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results
