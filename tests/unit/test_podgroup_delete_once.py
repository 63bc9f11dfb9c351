"""A PodGroup is deleted once: the cache shows it until its delete event arrives, and a pass before that (the removal
of the Instance's row wakes one) does not delete it again, which the API server would answer with 404: a wasted
request. A delete that failed is retried; one that found it gone counts as observed at once."""

from __future__ import annotations

from typing import Any

import pytest

from omenative.controllers.instance.controller import InstanceController
from omenative.controllers.instance.plan import InstanceActions
from omenative.controllers.watches import PodsOf
from omenative.ome_resources import PODGROUPS
from tests.support.fakes import FakeContext

pytestmark = pytest.mark.unit
Obj = dict[str, Any]

KEY = "ns/svc-engine/0"
IR: Obj = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
           "metadata": {"name": "svc-engine", "namespace": "ns", "uid": "ir-1"},
           "spec": {"component": "engine", "parentRef": {"name": "svc"}}}


def podgroup(uid: str) -> Obj:
    return {"metadata": {"name": "svc-engine-0", "namespace": "ns", "uid": uid,
                         "ownerReferences": [{"uid": "ir-1"}]}}


def context(cached: Obj) -> FakeContext:
    """A PodGroup cache that lags behind the writes (it holds `cached` until told); no pods left."""
    ctx = FakeContext()
    ctx.cached[PODGROUPS]["svc-engine-0"] = cached
    return ctx


async def test_a_leftover_podgroup_is_deleted_once_while_the_cache_still_shows_it() -> None:
    ctx = context(podgroup("g1"))
    controller = InstanceController(ctx, ctx)  # type: ignore[arg-type]
    await controller.delete_leftover_podgroup(KEY, IR)
    await controller.delete_leftover_podgroup(KEY, IR)  # its delete event has not arrived
    assert ctx.applier.deleted == ["g1"]
    assert not ctx.expectations.satisfied(PodsOf(KEY))

    ctx.expectations.deletion_observed(PodsOf(KEY), "g1")  # the event arrives (the manager's PodGroup handler)
    # A new Instance's PodGroup under the same name, later left over too.
    ctx.cached[PODGROUPS]["svc-engine-0"] = podgroup("g2")
    await controller.delete_leftover_podgroup(KEY, IR)
    assert ctx.applier.deleted == ["g1", "g2"]


async def test_the_deleting_instances_podgroup_is_deleted_once_and_a_failed_delete_is_retried() -> None:
    ctx = context(podgroup("g1"))
    controller = InstanceController(ctx, ctx)  # type: ignore[arg-type]
    actions = InstanceActions(delete_podgroup=podgroup("g1"))
    ctx.applier.fail = True
    with pytest.raises(TimeoutError):
        await controller.execute(KEY, IR, actions, 1)
    assert ctx.expectations.satisfied(PodsOf(KEY))  # no event will come for a refused request: nothing to wait for
    await controller.execute(KEY, IR, actions, 1)
    await controller.execute(KEY, IR, actions, 1)
    await controller.delete_leftover_podgroup(KEY, IR)  # the row went before the event came
    assert ctx.applier.deleted == ["g1"]


async def test_a_podgroup_already_gone_counts_as_observed_at_once() -> None:
    ctx = context(podgroup("g1"))
    ctx.applier.gone = True
    controller = InstanceController(ctx, ctx)  # type: ignore[arg-type]
    await controller.delete_leftover_podgroup(KEY, IR)
    assert ctx.applier.deleted == ["g1"] and ctx.expectations.satisfied(PodsOf(KEY))
