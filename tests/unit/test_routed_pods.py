"""A drained pod is deleted once no Service routes to it: the EndpointSlice index answers which pods are still
routed, per pod, whatever the number of slices."""

from __future__ import annotations

from typing import Any

import pytest

from omenative.api import constants as c
from omenative.api import naming
from omenative.controllers.watches import BY_ROUTED_POD, HEADLESS_LABEL, SERVICE_NAME_LABEL, routed_pod_index
from omenative.kube.cache import Store
from omenative.kube.resources import ENDPOINT_SLICES

pytestmark = pytest.mark.unit


def endpoint_slice(name: str, service: str, endpoints: dict[str, dict[str, bool]], **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns",
                         "labels": {c.LABEL_ISVC: "svc", SERVICE_NAME_LABEL: service, **labels}},
            "endpoints": [{"targetRef": {"kind": "Pod", "name": pod}, "conditions": conditions}
                          for pod, conditions in endpoints.items()]}


def test_only_ready_or_serving_endpoints_of_routing_services_count() -> None:
    store = Store(ENDPOINT_SLICES, indexers={BY_ROUTED_POD: routed_pod_index})
    store.upsert(endpoint_slice("a", "svc-engine", {"p-ready": {"ready": True}, "p-serving": {"serving": True},
                                                    "p-terminating": {"ready": False, "serving": False}}))
    store.upsert(endpoint_slice("b", naming.headless_service_name("svc", c.ENGINE), {"p-headless": {"ready": True}}))
    store.upsert(endpoint_slice("c", "other", {"p-labelled": {"ready": True}}, **{HEADLESS_LABEL: ""}))
    routed = {pod for pod in ("p-ready", "p-serving", "p-terminating", "p-headless", "p-labelled")
              if store.by_index(BY_ROUTED_POD, f"ns/{pod}")}
    assert routed == {"p-ready", "p-serving"}
    store.upsert(endpoint_slice("a", "svc-engine", {"p-serving": {"serving": True}}))  # p-ready left the slice
    assert not store.by_index(BY_ROUTED_POD, "ns/p-ready") and store.by_index(BY_ROUTED_POD, "ns/p-serving")
