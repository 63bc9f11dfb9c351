"""Names hold at every count: admission keeps room for an Instance index up to max(2 * maxReplicas - 1, 9), and a
write to /scale (or a count that reached the replica without the webhook) past what the names allow is refused or
capped with a message. At the boundary lengths of each shape: a single-pod engine, a multi-node engine (a leader and
a worker), and the prefill-decode guide's decoder and router."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from omenative.api import naming
from omenative.api.validation import validate_inference_service
from omenative.controllers.inferencereplica import plan as replica
from omenative.render.pods import scale_limit
from omenative.webhook.server import WebhookOptions, WebhookServer
from tests.unit.test_planners import view
from tests.unit.test_webhook_answers import _Context

pytestmark = pytest.mark.unit
Obj = dict[str, Any]

SINGLE = [{"name": "default", "template": {"spec": {"containers": [{"name": "ome-container", "image": "i"}]}}}]
GANG = [{"name": "leader", "template": {"spec": {"containers": [{"name": "ome-container", "image": "i"}]}}},
        {"name": "worker", "size": 1, "template": {"spec": {"containers": [{"name": "ome-container",
                                                                             "image": "i"}]}}}]

# (shape, component, runners, the longest name admitted for maxReplicas <= 5, the pod name of index 9 then)
SHAPES = [
    ("single-pod engine", "engine", SINGLE, 44, "-engine-9-default-0"),
    ("multi-node engine", "engine", GANG, 45, "-engine-9-worker-0"),
    ("prefill-decode decoder", "decoder", SINGLE, 43, "-decoder-9-default-0"),
    ("prefill-decode router", "router", SINGLE, 44, "-router-9-default-0"),
]


def service(name: str, component: str, runners: list[Obj], max_replicas: int = 2) -> Obj:
    multi = len(runners) > 1
    part: Obj = {"minReplicas": 1, "maxReplicas": max_replicas,
                 "runner": {"name": "ome-container", "image": "i"}}
    if multi:
        part.update(leader={"runner": {"name": "ome-container", "image": "i"}},
                    worker={"size": 1, "runner": {"name": "ome-container", "image": "i"}})
    spec: Obj = {"deploymentMode": "OMENative", component: part}
    if component != "engine":
        spec["engine"] = {"minReplicas": 1, "runner": {"name": "ome-container", "image": "i"}}
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": spec}


def replica_of(name: str, component: str, runners: list[Obj], replicas: int) -> Obj:
    return {"metadata": {"name": f"{name}-{component}", "namespace": "ns"},
            "spec": {"parentRef": {"name": name}, "component": component, "runners": runners, "replicas": replicas}}


@pytest.mark.parametrize(("shape", "component", "runners", "longest", "suffix"), SHAPES,
                         ids=[s[0] for s in SHAPES])
def test_admission_keeps_room_for_index_nine_and_refuses_one_character_more(
        shape: str, component: str, runners: list[Obj], longest: int, suffix: str) -> None:
    name = "a" * longest
    assert len(name + suffix) == naming.MAX_DNS_LABEL  # the name of Instance 9's last pod fills the label exactly
    assert not [e for e in validate_inference_service(service(name, component, runners)).errors if "too long" in e]
    errors = validate_inference_service(service(name + "a", component, runners)).errors
    assert any("is too long" in e and f"use at most {longest} characters" in e for e in errors), errors


@pytest.mark.parametrize(("shape", "component", "runners", "longest", "suffix"), SHAPES,
                         ids=[s[0] for s in SHAPES])
def test_scale_is_bounded_by_the_names_at_the_boundary(shape: str, component: str, runners: list[Obj],
                                                       longest: int, suffix: str) -> None:
    name = "a" * longest
    limit = scale_limit(replica_of(name, component, runners, 1))
    assert limit is not None
    cap, next_name = limit
    assert cap == 5  # indexes 0-9 fit: 5 Instances and their surges
    assert len(next_name) == naming.MAX_DNS_LABEL + 1 and next_name.startswith(name)
    # One character shorter leaves room for two digits: fifty Instances.
    assert scale_limit(replica_of(name[1:], component, runners, 1)) is not None
    assert (scale_limit(replica_of(name[1:], component, runners, 1)) or (0, ""))[0] == 50


async def test_the_scale_webhook_refuses_a_count_past_the_names() -> None:
    name = "a" * 44
    stored = replica_of(name, "engine", SINGLE, 1)

    class Ctx(_Context):
        def get(self, resource: Any, namespace: str, got: str) -> Obj | None:
            return stored if got == f"{name}-engine" else None

    server = WebhookServer(WebhookOptions(), Ctx())  # type: ignore[arg-type]
    app = web.Application()
    app.router.add_post("/scale", server.validate_scale)
    async with TestClient(TestServer(app)) as http:
        async def judge(replicas: int) -> Obj:
            review = {"request": {"uid": "u", "operation": "UPDATE", "name": f"{name}-engine", "namespace": "ns",
                                  "object": {"kind": "Scale", "spec": {"replicas": replicas}}}}
            return dict((await (await http.post("/scale", json=review)).json())["response"])

        assert (await judge(5))["allowed"] is True
        refused = await judge(6)
    assert refused["allowed"] is False
    assert refused["status"]["message"] == (
        f"spec.replicas: 6 Instances of InferenceReplica {name}-engine would give pods names longer than 63 "
        f"characters (such as '{name}-engine-11-default-0'); at most 5 Instances fit this InferenceService's name")


def test_a_count_past_the_names_that_reached_the_replica_is_capped_with_a_condition() -> None:
    plan = replica.plan(view([], {}, replicas=5, multi=False, capped=(6, "x-engine-11-default-0")))
    assert len(plan.rows) == 5
    cond = next(c for c in plan.conditions if c.type == "ReplicaFailure")
    assert cond.reason == "NameTooLong" and cond.message is not None
    assert cond.message.startswith("spec.replicas 6 capped at 5: more Instances would give pods names longer than 63")
