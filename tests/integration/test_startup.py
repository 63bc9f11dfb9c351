"""A controller started together with its CRDs (a fresh install, a disaster recovery): it reports ready only once every
cache has listed and its watch is open, and it never repeats a create because a cache had not caught up."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from kubernetes_asyncio import client

from tests.conftest import api_client_for
from tests.support.chaos import inference_service
from tests.support.cluster import REPO, ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.omenative import FAST
from tests.support.wait import wait_for

NAMESPACE = "fresh"
SERVICES = 5


@pytest_asyncio.fixture(scope="module")
async def fresh_plane() -> AsyncIterator[ControlPlane]:
    """A control plane of its own, without omenative's CRDs."""
    ControlPlane.discard("omenative-fresh")
    plane = ControlPlane.up("omenative-fresh", "--profile", "stock", "--gpu-nodes", "2", "--cpu-nodes", "0")
    yield plane
    plane.down()


def watch_openings(log: str) -> dict[str, float]:
    """When each informer's first watch was accepted, from the controller's debug log."""
    opened: dict[str, float] = {}
    for line in log.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") == "watch open":
            when = dt.datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00")).timestamp()
            opened.setdefault(f"{entry['resource']} {entry['namespace']}", when)
    return opened


@pytest.mark.integration
async def test_started_with_its_crds_it_is_ready_only_with_every_watch_open_and_creates_nothing_twice(
    fresh_plane: ControlPlane,
) -> None:
    process = ControllerProcess(fresh_plane, *FAST, "--log-level", "debug", "--log-format", "json", name="fresh")
    await process.start(wait_ready=False)
    first_ready: list[float] = []

    async def probe() -> None:
        while not first_ready:
            try:
                if (await asyncio.to_thread(process._get, process.health_port, "/readyz")).strip() == "ok":
                    first_ready.append(time.time())
            except OSError:
                pass
            await asyncio.sleep(0.05)

    prober = asyncio.create_task(probe())
    api = await api_client_for(fresh_plane.kubeconfig)
    custom = client.CustomObjectsApi(api)
    try:
        # The CRDs go in while the controller starts; the InferenceServices as soon as the API serves them.
        await fresh_plane.kubectl("apply", "--server-side", "-f", str(REPO / "manifests" / "crds"))
        await fresh_plane.kubectl("create", "namespace", NAMESPACE)

        async def created(i: int) -> bool:
            try:
                await custom.create_namespaced_custom_object(
                    "ome.io", "v1beta1", NAMESPACE, "inferenceservices",
                    inference_service(f"fresh-{i}", NAMESPACE, 2))
            except client.ApiException as exc:
                if exc.status == 404:
                    return False
                raise
            return True

        for i in range(SERVICES):
            await wait_for(lambda i=i: created(i), timeout=60, what=f"the API to take InferenceService fresh-{i}")

        async def all_ready() -> bool:
            replicas = await custom.list_namespaced_custom_object("ome.io", "v1beta1", NAMESPACE,
                                                                  "inferencereplicas")
            return len(replicas["items"]) == SERVICES and all(
                (r.get("status") or {}).get("readyReplicas") == 2 for r in replicas["items"])

        async def log_tail() -> str:
            return process.log_tail()

        await wait_for(all_ready, timeout=120, what="every InferenceReplica to run 2 Ready Instances",
                       describe=log_tail)
        await wait_for(lambda: _done(prober), timeout=30, what="/readyz to answer ok")

        opened = watch_openings(process.log_path.read_text())
        kinds = {key.split(" ")[0] for key in opened}
        assert {"inferenceservices.ome.io", "inferencereplicas.ome.io", "pods"} <= kinds, kinds
        assert first_ready[0] >= max(opened.values()), (
            f"ready at {first_ready[0]:.3f}, before the last watch opened at {max(opened.values()):.3f}")
        # Nothing created twice: no create refused as already there, one InferenceReplica per InferenceService,
        # and exactly the pods of 2 Instances of a leader and a worker each.
        assert await process.metric("rest_client_requests_total", code="409", method="POST") == 0
        pods = await fresh_plane.kubectl("get", "pods", "-n", NAMESPACE, "-o", "name")
        assert len(pods.stdout.split()) == SERVICES * 4
    finally:
        prober.cancel()
        await process.stop()
        await api.close()


async def _done(task: asyncio.Task[None]) -> bool:
    return task.done()
