"""The applier does not repeat a write while its cache has not caught up with it (a lagging cache is a timing that
a real API server cannot be made to show on demand, so the client here is a recorder)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from omenative.kube.apply import Applier
from omenative.kube.resources import PODS, SERVICES

pytestmark = pytest.mark.unit
Obj = dict[str, Any]


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.version = 10

    async def apply(self, resource: Any, body: Obj, **kwargs: Any) -> Obj:
        sub = kwargs.get("subresource")
        self.calls.append(f"apply {body['metadata']['name']}" + (f"/{sub}" if sub else ""))
        self.version += 1
        out = copy.deepcopy(body)
        out["metadata"]["resourceVersion"] = str(self.version)
        return out


def service(version: str, port: int = 80) -> Obj:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "s", "namespace": "ns", "resourceVersion": version},
            "spec": {"ports": [{"port": port}]}}


async def test_an_apply_is_not_repeated_over_the_version_it_was_made_over_or_produced() -> None:
    client = Recorder()
    cached: dict[str, Obj] = {"s": service("5", port=81)}  # the cache holds an older intent
    applier = Applier(client, lambda res, ns, name: cached.get(name))  # type: ignore[arg-type]
    desired = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ns"},
               "spec": {"ports": [{"port": 80}]}}
    await applier.apply(SERVICES, desired)
    assert client.calls == ["apply s"]
    await applier.apply(SERVICES, desired)  # the cache still shows version 5: our write is on its way
    assert client.calls == ["apply s"]
    cached["s"] = service("11", port=81)  # the version our write produced (compared by version, not content)
    await applier.apply(SERVICES, desired)
    assert client.calls == ["apply s"]
    cached["s"] = service("12", port=81)  # someone else changed it since: compared again, and written
    await applier.apply(SERVICES, desired)
    assert client.calls == ["apply s", "apply s"]


async def test_a_partial_status_is_not_repeated_while_the_cache_catches_up() -> None:
    client = Recorder()
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "3"}}
    cached = {"p": pod}
    applier = Applier(client, lambda res, ns, name: cached.get(name))  # type: ignore[arg-type]
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "status": {"conditions": [{"type": "ome.io/serving", "status": "True"}]}}
    await applier.apply_partial_status(PODS, body, "u:serving=True")
    await applier.apply_partial_status(PODS, body, "u:serving=True")
    assert client.calls == ["apply p/status"]
    await applier.apply_partial_status(PODS, body, "u:serving=False")  # another intent is written
    assert client.calls == ["apply p/status", "apply p/status"]
