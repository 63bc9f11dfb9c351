"""Kueue: pods held by a scheduling gate stop the readiness clock and mark the Instance not admitted; a gang's pods
form one Kueue pod group per attempt; only pods that ask for an accelerator join a queue."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from omenative.api.times import format_time
from omenative.api.types import InstanceOperation
from omenative.controllers.inferencereplica import plan as replica
from omenative.kubectl_ome.instance import flags
from omenative.observe.pods import pod_facts
from omenative.render.pods import kueue_group_name, render_instance
from omenative.render.templates import _accelerated
from tests.unit.test_planners import NOW, REF, RUNNERS, pod, row, view

pytestmark = pytest.mark.unit
Obj = dict[str, Any]


def gated(name: str, runner: str) -> Obj:
    out = pod(name, runner=runner, gate=None, containers_ready=False, phase="Pending")
    out["spec"] = {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}
    return out


def creating() -> Any:
    return row(0, "Creating", operation=InstanceOperation(
        type="Create", step="CreatePods", started_at=format_time(NOW - 60), deadline=format_time(NOW + 60)))


def test_a_gated_gang_stops_the_clock_and_is_not_admitted_until_the_gates_go() -> None:
    pods = {0: [pod_facts(gated("s-engine-0-leader-0", "leader")), pod_facts(gated("s-engine-0-worker-0", "worker"))]}
    held = replica.plan(view([creating()], pods)).rows[0]
    assert held.admitted is False and held.operation is not None and held.operation.deadline is None
    assert flags(attrs.evolve(held, pod_count=2)) == "-O-"  # has pods, but not admitted
    # An hour later it still waits: the deadline it had is gone.
    assert replica.plan(view([held], pods, now=NOW + 3600)).rows[0].phase == "Creating"
    # Kueue admits it (the gates go): a full window from then.
    admitted = {0: [pod_facts(pod(n, runner=r, gate=None, containers_ready=False))
                    for n, r in (("s-engine-0-leader-0", "leader"), ("s-engine-0-worker-0", "worker"))]}
    later = replica.plan(view([held], admitted, now=NOW + 3600)).rows[0]
    assert later.admitted is None and later.operation is not None
    assert later.operation.deadline == format_time(NOW + 3600 + 1800)


def test_a_gangs_pods_form_one_kueue_pod_group_per_attempt() -> None:
    queued = [{**r, "template": {**r["template"], "metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}}}}
              for r in RUNNERS]
    pods = render_instance(attrs.evolve(REF, incarnation=3), queued)
    assert {p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] for p in pods} == {"s-engine-0-3"}
    assert all(p["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "2" for p in pods)
    assert all(p["metadata"]["annotations"]["kueue.x-k8s.io/retriable-in-group"] == "false" for p in pods)
    # Without a queue, no Kueue labels at all.
    assert all("kueue.x-k8s.io/pod-group-name" not in p["metadata"]["labels"] for p in render_instance(REF, RUNNERS))
    long = kueue_group_name(attrs.evolve(REF, isvc="x" * 60))
    assert len(long) <= 63 and long.startswith("x" * 50)


def test_only_pods_that_ask_for_an_accelerator_join_a_queue() -> None:
    gpu = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    cpu = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}
    assert _accelerated(gpu) and not _accelerated(cpu)
