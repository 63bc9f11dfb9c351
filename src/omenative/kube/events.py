"""Kubernetes Events, aggregated instead of spammed.

An event repeated for the same object (same type, reason and message) bumps the `count` and `lastTimestamp` of the
Event already written, as the kubelet and client-go do, so `kubectl get events` shows one line with a count. A token
bucket per object (burst 25, one more every 5 minutes, client-go's spam filter) drops a flood from one object.
Recording never blocks a reconcile: events are queued and written by a background task; a failed write is logged
and dropped, since events are best effort.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import socket
import uuid
from typing import Any

import attrs
import structlog

from omenative.kube.client import ApiError, KubeClient
from omenative.kube.clock import Clock, RealClock
from omenative.kube.resources import EVENTS

log = structlog.get_logger(__name__)

Obj = dict[str, Any]
MAX_MESSAGE = 1024
SPAM_BURST = 25
SPAM_REFILL_SECONDS = 300.0
MAX_BUCKETS = 10_000  # objects tracked by the spam filter before full buckets are forgotten


@attrs.frozen
class EventRecord:
    involved: Obj  # {apiVersion, kind, name, namespace, uid}
    type: str
    reason: str
    message: str


def involved_reference(obj: Obj) -> Obj:
    meta = obj.get("metadata", {})
    ref = {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""), "name": meta.get("name", ""),
           "uid": meta.get("uid", "")}
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    return ref


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    def __init__(self, client: KubeClient, *, component: str = "omenative", clock: Clock | None = None) -> None:
        self.client = client
        self.component = component
        self.instance = socket.gethostname()
        self.clock = clock or RealClock()
        self._queue: asyncio.Queue[EventRecord] = asyncio.Queue(maxsize=10_000)
        self._written: dict[tuple[str, str, str, str], tuple[str, str, int]] = {}  # key -> (ns, name, count)
        self._buckets: dict[str, tuple[float, float]] = {}  # object uid -> (tokens, last refill)
        self._task: asyncio.Task[None] | None = None
        self.recorded = 0
        self.dropped = 0

    def event(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        """Queues an event about `obj` (Normal or Warning)."""
        if len(message) > MAX_MESSAGE:
            message = message[: MAX_MESSAGE - 3] + "..."
        record = EventRecord(involved_reference(obj), type_, reason, message)
        if not self._allow(record.involved.get("uid") or record.involved["name"]):
            self.dropped += 1
            return
        try:
            self._queue.put_nowait(record)
        except asyncio.QueueFull:
            self.dropped += 1

    def warning(self, obj: Obj, reason: str, message: str) -> None:
        self.event(obj, "Warning", reason, message)

    def normal(self, obj: Obj, reason: str, message: str) -> None:
        self.event(obj, "Normal", reason, message)

    def _allow(self, key: str) -> bool:
        now = self.clock.now()
        tokens, last = self._buckets.get(key, (float(SPAM_BURST), now))
        tokens = min(float(SPAM_BURST), tokens + (now - last) / SPAM_REFILL_SECONDS)
        if tokens < 1:
            self._buckets[key] = (tokens, now)
            return False
        self._buckets[key] = (tokens - 1, now)
        if len(self._buckets) > MAX_BUCKETS:
            self._forget_full_buckets(now)
        return True

    def _forget_full_buckets(self, now: float) -> None:
        """Drops the buckets that have refilled: a missing bucket starts full, so nothing changes but memory."""
        for key, (tokens, last) in list(self._buckets.items()):
            if tokens + (now - last) / SPAM_REFILL_SECONDS >= SPAM_BURST:
                del self._buckets[key]

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="event recorder")

    async def stop(self) -> None:
        """Writes what is queued, then stops."""
        if self._task is None:
            return
        await self._queue.join()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def _run(self) -> None:
        while True:
            record = await self._queue.get()
            try:
                await self._write(record)
                self.recorded += 1
            except ApiError as exc:
                log.warning("event not recorded", reason=record.reason, error=str(exc))
            except Exception:  # events are best effort; never let one kill the recorder
                log.exception("event not recorded", reason=record.reason)
            finally:
                self._queue.task_done()

    async def _write(self, record: EventRecord) -> None:
        involved = record.involved
        namespace = involved.get("namespace") or "default"
        key = (involved.get("uid", ""), record.type, record.reason, record.message)
        now = _now()
        seen = self._written.get(key)
        if seen is not None:
            ns, name, count = seen
            try:
                await self.client.patch(EVENTS, name, {"count": count + 1, "lastTimestamp": now}, ns)
                self._written[key] = (ns, name, count + 1)
                return
            except ApiError as exc:
                if not exc.not_found:  # the Event expired (TTL): write a new one
                    raise
        name = f"{involved['name']}.{uuid.uuid4().hex[:16]}"
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": involved,
            "type": record.type, "reason": record.reason, "message": record.message,
            "count": 1, "firstTimestamp": now, "lastTimestamp": now,
            "source": {"component": self.component, "host": self.instance},
            "reportingComponent": self.component, "reportingInstance": self.instance,
        }
        await self.client.create(EVENTS, body, namespace)
        self._written[key] = (namespace, name, 1)
        if len(self._written) > 50_000:  # keep memory bounded: forget the oldest half
            for stale in list(self._written)[:25_000]:
                del self._written[stale]
