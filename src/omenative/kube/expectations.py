"""ReplicaSet-style expectations: a lagging cache never causes a duplicate create or delete.

Right after a controller creates pods, its next pass may still see the old cache and create them again. Before it
creates or deletes, it records what it expects to see; informer events mark them observed; until all are observed
(or 5 minutes pass, in case an event was lost), the controller must not create or delete for that key again.
Creates and deletes that failed are marked observed by hand, since no event will come for them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable

import attrs

from omenative.kube.clock import Clock, RealClock

EXPECTATIONS_TIMEOUT = 300.0


@attrs.define
class _Record:
    creates: set[str] = attrs.field(factory=set)  # names expected to appear
    deletes: set[str] = attrs.field(factory=set)  # UIDs expected to go
    since: float = 0.0


class Expectations:
    def __init__(self, clock: Clock | None = None, timeout: float = EXPECTATIONS_TIMEOUT) -> None:
        self.clock = clock or RealClock()
        self.timeout = timeout
        self._records: dict[Hashable, _Record] = {}  # keyed by the controllers' typed keys

    def expect_creations(self, key: Hashable, names: list[str]) -> None:
        record = self._records.setdefault(key, _Record())
        record.creates.update(names)
        record.since = self.clock.now()

    def expect_deletions(self, key: Hashable, uids: list[str]) -> None:
        record = self._records.setdefault(key, _Record())
        record.deletes.update(uids)
        record.since = self.clock.now()

    def creation_observed(self, key: Hashable, name: str) -> None:
        record = self._records.get(key)
        if record is not None:
            record.creates.discard(name)

    def deletion_observed(self, key: Hashable, uid: str) -> None:
        record = self._records.get(key)
        if record is not None:
            record.deletes.discard(uid)

    def satisfied(self, key: Hashable) -> bool:
        record = self._records.get(key)
        if record is None or (not record.creates and not record.deletes):
            return True
        return self.clock.now() - record.since >= self.timeout

    def pending(self, key: Hashable) -> tuple[frozenset[str], frozenset[str]]:
        record = self._records.get(key) or _Record()
        return frozenset(record.creates), frozenset(record.deletes)

    def forget(self, key: Hashable) -> None:
        self._records.pop(key, None)


def _newer_or_same(seen: str, written: str) -> bool:
    """Whether a cached resourceVersion is the written one or later. resourceVersions are opaque, but the API server
    gives etcd's revisions, which only grow; where either is not a number, only equality counts."""
    if seen == written:
        return True
    return seen.isdigit() and written.isdigit() and int(seen) > int(written)


class WriteExpectations:
    """A controller's own writes it has not seen in its cache yet.

    A reconcile that plans from an object older than its own last write of it undoes that write: it sees the
    children the write caused (pods of a new Instance) without the rows that explain them. After each write, the
    resourceVersion it produced is recorded; the key's next reconcile waits until the cache holds that version or a
    later one (the watch event brings it back), or until the timeout, in case an event was lost.
    """

    def __init__(self, clock: Clock | None = None, timeout: float = 30.0) -> None:
        self.clock = clock or RealClock()
        self.timeout = timeout
        self._written: dict[Hashable, tuple[str, float]] = {}

    def wrote(self, key: Hashable, resource_version: str | None) -> None:
        if resource_version:
            self._written[key] = (resource_version, self.clock.now())

    def observed(self, key: Hashable, resource_version: str | None) -> None:
        record = self._written.get(key)
        if record is not None and resource_version and _newer_or_same(resource_version, record[0]):
            del self._written[key]

    def caught_up(self, key: Hashable, cached_version: str | None) -> bool:
        record = self._written.get(key)
        if record is None:
            return True
        if (cached_version and _newer_or_same(cached_version, record[0])) or \
                self.clock.now() - record[1] >= self.timeout:
            del self._written[key]
            return True
        return False

    def forget(self, key: Hashable) -> None:
        self._written.pop(key, None)


async def expected(request: Awaitable[bool], observed: Callable[[], None]) -> None:
    """A create or delete the expectations wait to see. One that changed nothing (already there, already gone) or
    failed sends no event, so it counts as observed at once."""
    try:
        changed = await request
    except Exception:
        observed()
        raise
    if not changed:
        observed()
