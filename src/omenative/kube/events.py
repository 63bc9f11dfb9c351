"""Kubernetes Events, aggregated instead of spammed.

An event repeated for the same object (same type, reason and message) bumps the `count` and `lastTimestamp` of the
Event already written, so `kubectl get events` shows one line with a count. Like client-go's events library (its
event series), repeats are counted in memory and written at most once per `SERIES_INTERVAL` per Event: a burst of
repeats (every Instance of a component saying the same thing) costs the API server one write, not one per repeat, and
the count catches up within the interval or when the recorder stops. A token bucket per object (burst 25, one more
every 5 minutes, client-go's spam filter) drops a flood from one object. Recording never blocks a reconcile: events
are queued and written by `WRITERS` background tasks (one write at a time made twenty restarts' events wait for each
other behind a loaded API server), stamped with the time they were recorded; a failed write is logged and dropped,
since events are best effort.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import heapq
import socket
import uuid

import attrs
import structlog

from omenative.kube.client import ApiError, KubeClient
from omenative.kube.clock import Clock, RealClock, TokenBucket
from omenative.kube.resources import EVENTS
from omenative.obj import Obj

log = structlog.get_logger(__name__)

MAX_MESSAGE = 1024
SPAM_BURST = 25
SPAM_REFILL_SECONDS = 300.0
MAX_BUCKETS = 10_000  # objects tracked by the spam filter before full buckets are forgotten
SERIES_INTERVAL = 1800.0  # seconds between count updates of one Event (client-go's event series heartbeat)
MAX_SERIES = 50_000  # Events remembered for counting before the oldest half is forgotten
WRITERS = 4  # events written at once

SeriesKey = tuple[str, str, str, str]  # involved uid, type, reason, message


@attrs.frozen
class EventRecord:
    involved: Obj  # {apiVersion, kind, name, namespace, uid}
    type: str
    reason: str
    message: str
    at: str = attrs.field(factory=lambda: _now())  # when it was recorded


@attrs.define
class Series:
    """One written Event and the repeats not yet written to it."""
    namespace: str
    name: str
    written: int  # the count the API shows
    pending: int  # repeats counted since
    last_write: float  # clock time of the last write (of its create, while that is under way)


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
        self._written: dict[SeriesKey, Series] = {}
        self._due: list[tuple[float, SeriesKey]] = []  # (when a series' pending count may be written, series)
        self._wake = asyncio.Event()
        self._buckets: dict[str, TokenBucket] = {}  # object uid -> its events' bucket
        self._tasks: list[asyncio.Task[None]] = []
        self._flusher: asyncio.Task[None] | None = None
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
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(1 / SPAM_REFILL_SECONDS, SPAM_BURST, self.clock)
        if not bucket.take():
            return False
        if len(self._buckets) > MAX_BUCKETS:
            self._forget_full_buckets()
        return True

    def _forget_full_buckets(self) -> None:
        """Drops the buckets that have refilled: a missing bucket starts full, so nothing changes but memory."""
        for key, bucket in list(self._buckets.items()):
            if bucket.full():
                del self._buckets[key]

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._run(), name=f"event recorder {i}") for i in range(WRITERS)]
            self._flusher = asyncio.create_task(self._flush_loop(), name="event series")

    async def stop(self) -> None:
        """Writes what is queued and the counts not yet written, then stops."""
        if not self._tasks:
            return
        await self._queue.join()
        for task in (*self._tasks, self._flusher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._tasks, self._flusher = [], None
        for key in [key for key, series in self._written.items() if series.pending]:
            await self._write_count(key)

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
        key = (involved.get("uid", ""), record.type, record.reason, record.message)
        series = self._written.get(key)
        if series is not None:
            series.pending += 1
            due = series.last_write + SERIES_INTERVAL
            if self.clock.now() >= due:
                await self._write_count(key)
            elif series.pending == 1:  # the first repeat since the last write: write the count when it is due
                heapq.heappush(self._due, (due, key))
                self._wake.set()
            return
        await self._create(key, record)

    async def _write_count(self, key: SeriesKey) -> None:
        series = self._written.get(key)
        if series is None or not series.pending:
            return
        count = series.written + series.pending
        try:
            await self.client.patch(EVENTS, series.name, {"count": count, "lastTimestamp": _now()}, series.namespace)
        except ApiError as exc:
            if not exc.not_found:
                raise
            del self._written[key]  # the Event expired (TTL): the next repeat writes a new one
            return
        series.written, series.pending, series.last_write = count, 0, self.clock.now()

    async def _create(self, key: SeriesKey, record: EventRecord) -> None:
        involved = record.involved
        namespace = involved.get("namespace") or "default"
        name = f"{involved['name']}.{uuid.uuid4().hex[:16]}"
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": involved,
            "type": record.type, "reason": record.reason, "message": record.message,
            "count": 1, "firstTimestamp": record.at, "lastTimestamp": record.at,
            "source": {"component": self.component, "host": self.instance},
            "reportingComponent": self.component, "reportingInstance": self.instance,
        }
        # Known before the create returns: a repeat that another writer takes meanwhile is counted, not created.
        series = self._written[key] = Series(namespace, name, written=0, pending=0, last_write=self.clock.now())
        try:
            await self.client.create(EVENTS, body, namespace)
        except BaseException:
            if self._written.get(key) is series:
                del self._written[key]
            raise
        series.written += 1
        if len(self._written) > MAX_SERIES:  # keep memory bounded: forget the oldest half
            for stale in list(self._written)[: MAX_SERIES // 2]:
                del self._written[stale]

    async def _flush_loop(self) -> None:
        """Writes each series' count when it is due."""
        while True:
            self._wake.clear()
            if not self._due:
                await self._wake.wait()
                continue
            when = self._due[0][0]
            if self.clock.now() < when:
                sleeper = asyncio.ensure_future(self.clock.sleep_until(when))
                waker = asyncio.ensure_future(self._wake.wait())
                try:
                    await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    sleeper.cancel()
                    waker.cancel()
                continue  # an earlier due may have arrived: look again
            _, key = heapq.heappop(self._due)
            try:
                await self._write_count(key)
            except ApiError as exc:
                log.warning("event count not recorded", reason=key[2], error=str(exc))
            except Exception:  # best effort, as above
                log.exception("event count not recorded", reason=key[2])
