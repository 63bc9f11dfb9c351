"""A ControllerRevision is created once: a pass that runs before the cache shows the one it created does not create
it again (the API server would refuse the second with 409, a wasted write), and one whose create failed is retried."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from omenative.controllers.inferencereplica.controller import InferenceReplicaController
from omenative.controllers.watches import RevisionNamed
from omenative.kube.expectations import Expectations

pytestmark = pytest.mark.unit

IR = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
      "metadata": {"name": "svc-engine", "namespace": "ns", "uid": "u-1"}}


@attrs.define
class _Applier:
    """Records creates; `fail` makes the next one raise, as a refused or timed-out request does."""
    created: list[str] = attrs.field(factory=list)
    fail: bool = False

    async def create(self, resource: Any, obj: dict[str, Any], **_: Any) -> bool:
        if self.fail:
            self.fail = False
            raise TimeoutError("request timed out")
        self.created.append(obj["metadata"]["name"])
        return True


@attrs.define
class _Context:
    """What `_ensure_revision` reads: a cache that lags behind the writes (holds only `cached`)."""
    applier: _Applier = attrs.field(factory=_Applier)
    expectations: Expectations = attrs.field(factory=Expectations)
    cached: dict[str, dict[str, Any]] = attrs.field(factory=dict)

    def get(self, resource: Any, namespace: str, name: str) -> dict[str, Any] | None:
        return self.cached.get(name)

    def by_index(self, resource: Any, index: str, value: str) -> list[dict[str, Any]]:
        return list(self.cached.values())


async def ensure(controller: InferenceReplicaController, revision: str = "abc") -> None:
    await controller._ensure_revision(IR, "svc", "engine", revision, [{"name": "engine"}])


async def test_a_lagging_cache_does_not_create_it_twice_and_a_failed_create_is_retried() -> None:
    ctx = _Context()
    controller = InferenceReplicaController(ctx)  # type: ignore[arg-type]
    await ensure(controller)
    await ensure(controller)  # the cache has not shown it yet
    assert ctx.applier.created == ["svc-engine-abc"]
    ctx.cached["svc-engine-abc"] = {"metadata": {"name": "svc-engine-abc", "labels": {}}, "revision": 1}
    await ensure(controller)
    assert ctx.applier.created == ["svc-engine-abc"]
    assert ctx.expectations.pending(RevisionNamed("ns", "svc-engine-abc")) == (frozenset(), frozenset())

    ctx.applier.fail = True  # a new revision whose first create fails: the next pass creates it
    with pytest.raises(TimeoutError):
        await ensure(controller, "def")
    await ensure(controller, "def")
    assert ctx.applier.created == ["svc-engine-abc", "svc-engine-def"]
