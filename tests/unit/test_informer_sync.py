"""An informer is synced only once its watch is open: a watch refused at start (429 while a new CRD's storage
initializes, a fault injected here) keeps it unsynced, so controllers do not start on a cache that hears nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from omenative.kube.cache import Store
from omenative.kube.client import ApiError
from omenative.kube.reflector import Informer
from omenative.kube.resources import PODS

pytestmark = pytest.mark.unit


class RefusingFirstWatches:
    """Lists fine; refuses the first `refusals` watches with 429, then accepts and stays open."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.watches = 0
        self.release = asyncio.Event()
        self.refused = asyncio.Event()

    async def list_all(self, *args: Any, **kwargs: Any) -> tuple[list[dict[str, Any]], str]:
        return [], "1"

    async def watch(self, *args: Any, on_open: Callable[[], None] | None = None,
                    **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        self.watches += 1
        if self.watches <= self.refusals:
            self.refused.set()
            raise ApiError(429, "TooManyRequests", "storage is (re)initializing")
        if on_open is not None:
            on_open()
        await self.release.wait()
        return
        yield {}  # an async generator


async def test_a_refused_watch_keeps_the_informer_unsynced_until_one_is_accepted() -> None:
    fake = RefusingFirstWatches(refusals=1)
    informer = Informer(fake, Store(PODS))  # type: ignore[arg-type]
    informer.start()
    try:
        await asyncio.wait_for(fake.refused.wait(), timeout=5)
        assert informer.reflectors[0].lists == 1
        assert not informer.synced  # listed, but its watch was refused (the retry backs off at least 0.8 s)
        await informer.wait_synced(timeout=5)
        assert fake.watches == 2
    finally:
        fake.release.set()
        await informer.stop()
