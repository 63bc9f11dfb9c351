"""Workers that take keys from a work queue and reconcile them, with controller-runtime's contract and metrics.

A reconcile gets only a key and reads what it needs from the caches (level-based). It returns a Result:
`requeue_after` forgets the key's backoff and looks again after that delay; an exception requeues with backoff
(rate-limited); a TerminalError is counted and not retried; otherwise the key is forgotten. Every log line from a
reconcile is bound to the controller, the namespace, the name and a reconcile id.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable

import attrs
import structlog

from omenative.kube import metrics
from omenative.kube.client import ApiError
from omenative.kube.queue import ShutDown, WorkQueue

log = structlog.get_logger(__name__)


@attrs.frozen
class Result:
    requeue_after: float | None = None


class TerminalError(Exception):
    """An error retrying cannot fix (the object is invalid); reported, not requeued."""


Reconcile = Callable[[str], Awaitable[Result | None]]


def split_key(key: str) -> tuple[str, str]:
    """namespace and name of a queue key (`ns/name`, or `ns/name/index` for an Instance)."""
    parts = key.split("/", 2)
    if len(parts) == 1:
        return "", parts[0]
    return parts[0], "/".join(parts[1:])


class Controller:
    def __init__(self, name: str, queue: WorkQueue[str], reconcile: Reconcile, *, workers: int = 1) -> None:
        self.name = name
        self.queue = queue
        self.reconcile = reconcile
        self.workers = workers
        self._tasks: list[asyncio.Task[None]] = []
        # Its series at 0 are created by the manager, before the election (a standby shows them too).
        self._active = metrics.active_workers.labels(controller=name)
        self._time = metrics.reconcile_time_seconds.labels(controller=name)

    def start(self) -> None:
        metrics.max_concurrent_reconciles.labels(controller=self.name).set(self.workers)
        self._active.set(0)
        self._tasks = [asyncio.create_task(self._worker(i), name=f"{self.name} worker {i}")
                       for i in range(self.workers)]

    async def stop(self) -> None:
        """Stops taking keys and waits for the reconciles in flight."""
        await self.queue.shut_down_with_drain()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _worker(self, index: int) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            try:
                await self.process(key)
            finally:
                self.queue.done(key)

    async def process(self, key: str) -> None:
        namespace, name = split_key(key)
        structlog.contextvars.bind_contextvars(
            controller=self.name, namespace=namespace, name=name, reconcile_id=uuid.uuid4().hex[:12])
        self._active.inc()
        started = time.monotonic()
        try:
            result = await self.reconcile(key) or Result()
        except TerminalError as exc:
            metrics.reconcile_total.labels(controller=self.name, result="error").inc()
            metrics.reconcile_errors_total.labels(controller=self.name).inc()
            metrics.terminal_reconcile_errors_total.labels(controller=self.name).inc()
            log.error("reconcile failed permanently", error=str(exc))
            self.queue.forget(key)
        except Exception as exc:
            metrics.reconcile_total.labels(controller=self.name, result="error").inc()
            metrics.reconcile_errors_total.labels(controller=self.name).inc()
            if isinstance(exc, ApiError):
                log.warning("reconcile failed, retrying", error=str(exc), status=exc.status,
                            retries=self.queue.num_requeues(key))
            else:
                metrics.reconcile_panics_total.labels(controller=self.name).inc()
                log.exception("reconcile raised, retrying", retries=self.queue.num_requeues(key))
            self.queue.add_rate_limited(key)
        else:
            if result.requeue_after is not None and result.requeue_after > 0:
                metrics.reconcile_total.labels(controller=self.name, result="requeue_after").inc()
                self.queue.forget(key)
                self.queue.add_after(key, result.requeue_after)
            else:
                metrics.reconcile_total.labels(controller=self.name, result="success").inc()
                self.queue.forget(key)
        finally:
            self._time.observe(time.monotonic() - started)
            self._active.dec()
            structlog.contextvars.clear_contextvars()
