"""kubectl ome says in one line why the API refused it, instead of printing the HTTP exchange."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException

from omenative.kubectl_ome.cli import describe_error

pytestmark = pytest.mark.unit


def refused(status: int, reason: str, body: str) -> ApiException:
    exc = ApiException(status=status, reason=reason)
    exc.body = body
    return exc


@pytest.mark.parametrize(("exc", "expected"), [
    (refused(404, "Not Found", "404 page not found\n"),
     "the ome.io/v1beta1 API is not served by this cluster: are omenative's CRDs installed? "
     "(kubectl get crd inferenceservices.ome.io)"),
    (refused(403, "Forbidden", json.dumps({"message": 'inferencereplicas.ome.io "x" is forbidden: no'})),
     '403 Forbidden: inferencereplicas.ome.io "x" is forbidden: no'),
    (refused(500, "Internal Server Error", ""), "500 Internal Server Error"),
    (ValueError("bad --index"), "bad --index"),
])
def test_a_refusal_is_one_line(exc: Exception, expected: str) -> None:
    assert describe_error(exc) == expected
