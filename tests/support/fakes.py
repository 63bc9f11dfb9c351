"""Fakes of what the controllers read and write through (controllers/context.py's Reads and Writes), shared by the
controller unit tests: a cache that holds only what a test puts in it (so it can lag behind the writes, as a real
one does), an applier that records and can refuse, an event recorder and queues that record."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import attrs

from omenative.api.config import ControllerConfig
from omenative.controllers.refusals import Refusals
from omenative.kube.expectations import Expectations, WriteExpectations
from omenative.kube.resources import Resource

Obj = dict[str, Any]
NOW = 1_000_000.0


@attrs.define
class FakeApplier:
    """Records creates (names) and deletes (UIDs). `refuse` answers a create of that name with the error; `fail`
    makes the next create or delete raise as a timed-out request does; `gone` answers deletes as a 404 does."""

    created: list[str] = attrs.field(factory=list)
    deleted: list[str] = attrs.field(factory=list)
    applied: list[Obj] = attrs.field(factory=list)
    refuse: dict[str, Exception] = attrs.field(factory=dict)
    fail: bool = False
    gone: bool = False

    def _maybe_fail(self) -> None:
        if self.fail:
            self.fail = False
            raise TimeoutError("request timed out")

    async def create(self, resource: Resource, obj: Obj, **_: Any) -> bool:
        self._maybe_fail()
        name = obj["metadata"]["name"]
        if name in self.refuse:
            raise self.refuse[name]
        self.created.append(name)
        return True

    async def delete(self, resource: Resource, obj: Obj, **_: Any) -> bool:
        self._maybe_fail()
        self.deleted.append(obj["metadata"]["uid"])
        return not self.gone

    async def apply(self, resource: Resource, obj: Obj, **_: Any) -> Obj:
        self.applied.append(obj)
        return obj


@attrs.define
class FakeEvents:
    recorded: list[tuple[str, str, str]] = attrs.field(factory=list)  # (involved kind, reason, message)

    def event(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        self.recorded.append((obj["kind"], reason, message))


@attrs.define
class FakeContext:
    """Both Reads and Writes. The cache holds `cached[resource][name]`; an index lookup lists every object of the
    resource that `indexed` names (none unless a test says so)."""

    applier: FakeApplier = attrs.field(factory=FakeApplier)
    events: FakeEvents = attrs.field(factory=FakeEvents)
    expectations: Expectations = attrs.field(factory=Expectations)
    written: WriteExpectations = attrs.field(factory=WriteExpectations)
    refusals: Refusals = attrs.field(factory=Refusals)
    config: ControllerConfig = attrs.field(factory=ControllerConfig)
    cached: dict[Resource, dict[str, Obj]] = attrs.field(factory=lambda: defaultdict(dict))
    indexed: set[Resource] = attrs.field(factory=set)
    woken: dict[str, list[str]] = attrs.field(factory=lambda: defaultdict(list))
    now: float = NOW

    # -- Writes
    def wake(self, controller: str, key: str) -> None:
        self.woken[controller].append(key)

    # -- Reads
    def wall_clock(self) -> float:
        return self.now

    def get(self, resource: Resource, namespace: str | None, name: str) -> Obj | None:
        return self.cached[resource].get(name)

    def by_index(self, resource: Resource, index: str, value: str) -> list[Obj]:
        return list(self.cached[resource].values()) if resource in self.indexed else []

    def objects(self, resource: Resource) -> list[Obj]:
        return list(self.cached[resource].values())

    def has(self, resource: Resource) -> bool:
        return True
