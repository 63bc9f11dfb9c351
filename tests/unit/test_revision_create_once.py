"""A ControllerRevision is created once: a pass that runs before the cache shows the one it created does not create
it again (the API server would refuse the second with 409, a wasted write), and one whose create failed is retried."""

from __future__ import annotations

import pytest

from omenative.controllers.inferencereplica.controller import InferenceReplicaController
from omenative.controllers.watches import RevisionNamed
from omenative.kube.resources import CONTROLLER_REVISIONS
from tests.support.fakes import FakeContext

pytestmark = pytest.mark.unit

IR = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
      "metadata": {"name": "svc-engine", "namespace": "ns", "uid": "u-1"}}


def context() -> FakeContext:
    """A ControllerRevision cache that lags behind the writes (it holds only what the test puts in it)."""
    ctx = FakeContext()
    ctx.indexed.add(CONTROLLER_REVISIONS)  # the siblings a revision number counts
    return ctx


async def ensure(controller: InferenceReplicaController, revision: str = "abc") -> None:
    await controller._ensure_revision(IR, "svc", "engine", revision, [{"name": "engine"}])


async def test_a_lagging_cache_does_not_create_it_twice_and_a_failed_create_is_retried() -> None:
    ctx = context()
    controller = InferenceReplicaController(ctx, ctx)  # type: ignore[arg-type]
    await ensure(controller)
    await ensure(controller)  # the cache has not shown it yet
    assert ctx.applier.created == ["svc-engine-abc"]
    ctx.cached[CONTROLLER_REVISIONS]["svc-engine-abc"] = {"metadata": {"name": "svc-engine-abc", "labels": {}},
                                                          "revision": 1}
    await ensure(controller)
    assert ctx.applier.created == ["svc-engine-abc"]
    assert ctx.expectations.pending(RevisionNamed("ns", "svc-engine-abc")) == (frozenset(), frozenset())

    ctx.applier.fail = True  # a new revision whose first create fails: the next pass creates it
    with pytest.raises(TimeoutError):
        await ensure(controller, "def")
    await ensure(controller, "def")
    assert ctx.applier.created == ["svc-engine-abc", "svc-engine-def"]
