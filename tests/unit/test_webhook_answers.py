"""The webhook answers every review with a decision: a judgement that fails is a 4xx refusal with a message, never a
500, a body that is no review is a 400, and reviews up to the API server's 3 MiB objects (twice, for an update) are
read."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from omenative.api.config import ControllerConfig
from omenative.webhook.server import MAX_REVIEW_BYTES, WebhookOptions, WebhookServer, _instrumented, _never_500

pytestmark = pytest.mark.unit
Obj = dict[str, Any]


class _Context:
    """The webhook's reads: no runtime or model in the cache."""

    config = ControllerConfig()

    def runtime_named(self, namespace: str, name: str, kind: str | None = None) -> None:
        return None

    def model_named(self, namespace: str, name: str, kind: str | None = None) -> None:
        return None


async def _broken(request: web.Request) -> web.Response:
    raise AttributeError("'str' object has no attribute 'get'")


@pytest_asyncio.fixture
async def webhook() -> AsyncIterator[TestClient[Any, Any]]:
    server = WebhookServer(WebhookOptions(), _Context())  # type: ignore[arg-type]
    app = web.Application(middlewares=[_instrumented, _never_500], client_max_size=MAX_REVIEW_BYTES)
    app.router.add_post("/validate-inferenceservice", server.validate_inference_service)
    app.router.add_post("/broken", _broken)
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


def review(obj: Obj, old: Obj | None = None) -> Obj:
    request: Obj = {"uid": "u-1", "operation": "UPDATE" if old else "CREATE", "object": obj}
    if old:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def isvc(**engine: Any) -> Obj:
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "s", "namespace": "ns"},
            "spec": {"deploymentMode": "OMENative", "engine": {"minReplicas": 1, **engine}}}


async def test_a_field_of_the_wrong_type_is_refused_with_its_path(webhook: TestClient[Any, Any]) -> None:
    answer = await webhook.post("/validate-inferenceservice", json=review(isvc(
        leader={"containers": [{"name": "ome-container", "command": "python"}]}, worker={"size": 1})))
    assert answer.status == 200
    response = (await answer.json())["response"]
    assert response["allowed"] is False and response["uid"] == "u-1"
    assert response["status"]["message"] == \
        'spec.engine.leader.containers[0].command: must be a list, got string "python"'


async def test_a_failed_judgement_is_a_refusal_with_a_message_not_a_500(webhook: TestClient[Any, Any]) -> None:
    answer = await webhook.post("/broken", json=review(isvc()))
    assert answer.status == 200
    response = (await answer.json())["response"]
    assert response["allowed"] is False and response["uid"] == "u-1" and response["status"]["code"] == 400
    assert "AttributeError: 'str' object has no attribute 'get'" in response["status"]["message"]


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b'{"request": "x"}'])
async def test_a_body_that_is_no_review_is_a_400(webhook: TestClient[Any, Any], body: bytes) -> None:
    answer = await webhook.post("/validate-inferenceservice", data=body,
                                headers={"Content-Type": "application/json"})
    assert answer.status == 400


async def test_an_update_of_two_large_objects_is_read_and_judged(webhook: TestClient[Any, Any]) -> None:
    big = isvc(runner={"env": [{"name": "BLOB", "value": "x" * (2_500_000)}]})
    body = json.dumps(review(big, old=big)).encode()
    assert len(body) > 5_000_000  # past aiohttp's default 1 MiB, and past 3 MiB
    answer = await webhook.post("/validate-inferenceservice", data=body,
                                headers={"Content-Type": "application/json"})
    assert answer.status == 200
    response = (await answer.json())["response"]
    assert response["allowed"] is False
    assert "the largest field is spec.engine.runner.env[0].value" in response["status"]["message"]
