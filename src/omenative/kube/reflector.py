"""List, then watch, forever: client-go's reflector in asyncio.

- The list is paged (500) and read from etcd, so the store starts from a consistent snapshot; its resourceVersion is
  where the watch starts.
- A watch asks for bookmarks and a random server timeout of 5-10 minutes (spreading reconnects); when it ends
  normally it is opened again from the last resourceVersion, without a relist.
- `410 Gone` (the resourceVersion was compacted away) relists; the store's `replace` then delivers every change made
  meanwhile, deletes included. Any other error (a refused connection while the API server restarts, a dead stream)
  backs off and watches again from the last resourceVersion.
- The informer counts as synced once it has listed and the server has accepted its watch: a watch refused at start
  (429 while a new CRD's storage initializes) would otherwise leave a store that never hears of changes.
- Errors back off 0.8 s, doubling with jitter, capped at 30 s, reset after 2 minutes without failures; a watch
  silent for 70 s counts as failed (bookmarks arrive about once a minute), and so does one that ends within a second
  having delivered nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from typing import Any

import structlog
import tenacity

from omenative.kube import metrics
from omenative.kube.cache import Store
from omenative.kube.client import ApiError, KubeClient
from omenative.kube.clock import Clock, RealClock

log = structlog.get_logger(__name__)

INITIAL_BACKOFF = 0.8
MAX_BACKOFF = 30.0
BACKOFF_RESET_AFTER = 120.0


class _Relist(Exception):
    """The watch cannot continue from its resourceVersion."""


class Backoff:
    """client-go's reflector backoff as a tenacity wait strategy: 0.8 s x 2^n, jitter 1.0, cap 30 s, reset after
    two healthy minutes."""

    def __init__(self, clock: Clock, rng: random.Random | None = None) -> None:
        self.clock = clock
        self.rng = rng or random.Random()
        self.failures = 0
        self.attempt_started = clock.now()

    def started(self, _: tenacity.RetryCallState | None = None) -> None:
        self.attempt_started = self.clock.now()

    def __call__(self, _: tenacity.RetryCallState | None = None) -> float:
        if self.clock.now() - self.attempt_started >= BACKOFF_RESET_AFTER:
            self.failures = 0
        base = min(math.ldexp(INITIAL_BACKOFF, min(self.failures, 16)), MAX_BACKOFF)
        self.failures += 1
        return min(base * (1 + self.rng.random()), MAX_BACKOFF)


class Reflector:
    def __init__(
        self,
        client: KubeClient,
        store: Store,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        min_watch_timeout: int = 300,
        max_watch_timeout: int = 600,
        inactivity_timeout: float = 70.0,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.store = store
        self.resource = store.resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self.min_watch_timeout = min_watch_timeout
        self.max_watch_timeout = max_watch_timeout
        self.inactivity_timeout = inactivity_timeout
        self.clock = clock or RealClock()
        self.backoff = Backoff(self.clock)
        self.last_resource_version = ""
        self.lists = 0  # full lists made, for tests and metrics
        self.watching = False  # the server accepted a watch from the listed version (it sends what changes next)
        self._log = log.bind(resource=str(self.resource), namespace=namespace or "*")

    async def run(self) -> None:
        """Keeps the store in line with the server until cancelled."""
        retrying = tenacity.AsyncRetrying(
            wait=self.backoff,
            sleep=self.clock.sleep,
            retry=tenacity.retry_if_exception_type(Exception),
            before=self.backoff.started,
            before_sleep=self._before_sleep,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                await self._list_and_watch_forever()

    def _before_sleep(self, state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        delay = state.next_action.sleep if state.next_action else 0.0
        self._log.warning("reflector error, backing off", error=str(exc), delay=round(delay, 2))

    async def _list_and_watch_forever(self) -> None:
        while True:
            # After an error the watch resumes from the last resourceVersion: the store is still right up to it.
            # Only a version the server no longer has (410) costs a relist.
            if not self.last_resource_version:
                await self.list()
            try:
                await self.watch_until_gone()
            except _Relist:
                metrics.informer_watch_restarts_total.labels(resource=str(self.resource), reason="gone").inc()
                self._log.info("watch resourceVersion expired, relisting")
                self.last_resource_version = ""

    async def list(self) -> None:
        items, rv = await self.client.list_all(self.resource, self.namespace, label_selector=self.label_selector,
                                               field_selector=self.field_selector, page_size=self.page_size)
        self.lists += 1
        metrics.informer_relists_total.labels(resource=str(self.resource)).inc()
        self.store.replace(items, self.namespace)
        self.last_resource_version = rv

    async def watch_until_gone(self) -> None:
        """Watches from the last resourceVersion, reopening normal ends, until the version is gone (raises
        _Relist) or an error ends it (raises)."""
        while True:
            timeout = random.randint(self.min_watch_timeout, self.max_watch_timeout)
            started = time.monotonic()
            events = 0
            try:
                async for event in self.client.watch(
                    self.resource, self.namespace, resource_version=self.last_resource_version,
                    timeout_seconds=timeout, label_selector=self.label_selector,
                    field_selector=self.field_selector, inactivity_timeout=self.inactivity_timeout,
                    on_open=self._opened,
                ):
                    events += 1
                    self._handle(event)
            except ApiError as exc:
                if exc.gone:
                    raise _Relist from exc
                raise
            if events == 0 and time.monotonic() - started < 1.0:
                raise ApiError(0, "WatchEndedEarly", "watch closed within a second without any event")
            metrics.informer_watch_restarts_total.labels(resource=str(self.resource), reason="timeout").inc()

    def _opened(self) -> None:
        if not self.watching:
            self._log.debug("watch open")
        self.watching = True

    def _handle(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        rv = str(obj.get("metadata", {}).get("resourceVersion", ""))
        if kind in ("ADDED", "MODIFIED"):
            self.store.upsert(obj)
        elif kind == "DELETED":
            self.store.remove(obj)
        elif kind != "BOOKMARK":
            self._log.warning("unexpected watch event", type=kind)
            return
        if rv:
            self.last_resource_version = rv


class Informer:
    """A store kept current by one reflector per watched namespace (or one for the whole cluster)."""

    def __init__(
        self,
        client: KubeClient,
        store: Store,
        *,
        namespaces: list[str] | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        **reflector_options: Any,
    ) -> None:
        self.store = store
        scopes: list[str | None] = list(namespaces) if namespaces and store.resource.namespaced else [None]
        self.reflectors = [Reflector(client, store, namespace=ns, label_selector=label_selector,
                                     field_selector=field_selector, **reflector_options) for ns in scopes]
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def synced(self) -> bool:
        """Listed, and a watch from the list is open: before that, a change (say, our own create) may never show
        in the store, and a controller acting on it would repeat what it did."""
        return all(r.lists > 0 and r.watching for r in self.reflectors)

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [asyncio.create_task(r.run(), name=f"informer {self.store.resource} {r.namespace or '*'}")
                           for r in self.reflectors]

    async def wait_synced(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.synced:
            for task in self._tasks:
                if task.done():
                    task.result()  # surfaces the error that ended it
            if time.monotonic() > deadline:
                raise TimeoutError(f"cache of {self.store.resource} did not sync in {timeout:.0f}s")
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
