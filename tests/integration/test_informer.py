"""The reflector and informer cache against the real API server: resume, relist after 410, API server restart,
and zero writes when nothing changed. Each test works on a set of 200 objects."""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from omenative.kube import metrics
from omenative.kube.apply import Applier
from omenative.kube.cache import Store
from omenative.kube.client import ApiError, KubeClient
from omenative.kube.reflector import Informer
from omenative.kube.resources import CONFIG_MAPS, PODS, SERVICE_ACCOUNTS, Resource
from tests.support.cluster import ControlPlane
from tests.support.wait import wait_for

N = 200
Obj = dict[str, Any]


class Recorder:
    """Handler that records what it was told, per object name."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_add(self, obj: Obj, initial: bool) -> None:
        self.events.append(("add", obj["metadata"]["name"]))

    def on_update(self, old: Obj, new: Obj) -> None:
        self.events.append(("update", new["metadata"]["name"]))

    def on_delete(self, obj: Obj) -> None:
        self.events.append(("delete", obj["metadata"]["name"]))

    def of(self, kind: str) -> set[str]:
        return {name for k, name in self.events if k == kind}


def config_map(namespace: str, name: str, value: str = "0") -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": {"test": "informer"}},
            "data": {"value": value}}


SELECTOR = "test=informer"  # leaves out the kube-root-ca.crt ConfigMap every namespace gets


async def gather_limited(coros: list[Any], limit: int = 20) -> list[Any]:
    sem = asyncio.Semaphore(limit)

    async def run(coro: Any) -> Any:
        async with sem:
            return await coro

    return await asyncio.gather(*(run(c) for c in coros))


@pytest_asyncio.fixture
async def config_maps(kube: KubeClient, namespace: str) -> AsyncIterator[list[str]]:
    names = [f"cm-{i:03d}" for i in range(N)]
    await gather_limited([kube.create(CONFIG_MAPS, config_map(namespace, n), namespace) for n in names])
    yield names


async def fresh_view(kube: KubeClient, resource: Resource, namespace: str) -> dict[str, str]:
    items, _ = await kube.list_all(resource, namespace, label_selector=SELECTOR)
    return {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in items}


def cached_view(store: Store) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in store.objects()}


async def test_a_watch_that_times_out_resumes_without_a_relist(
    kube: KubeClient, namespace: str, config_maps: list[str]
) -> None:
    store = Store(CONFIG_MAPS)
    recorder = Recorder()
    store.add_handler(recorder)
    # The server ends each watch after 1 s; every end must be followed by a new watch, never by a new list.
    informer = Informer(kube, store, namespaces=[namespace], label_selector=SELECTOR,
                        min_watch_timeout=1, max_watch_timeout=1)
    reflector = informer.reflectors[0]
    informer.start()
    try:
        await informer.wait_synced(timeout=30)
        assert len(store) == N
        restarts = metrics.informer_watch_restarts_total.labels(resource=str(CONFIG_MAPS), reason="timeout")
        before = restarts._value.get()
        await wait_for(lambda: _ready(restarts._value.get() >= before + 3), timeout=30,
                       what="three watches to time out and reopen")
        await kube.patch(CONFIG_MAPS, "cm-007", {"data": {"value": "changed"}}, namespace)
        await wait_for(lambda: _ready(store.get_by_name(namespace, "cm-007")["data"]["value"] == "changed"),
                       timeout=30, what="the change made after the watches reopened")
        assert reflector.lists == 1
        assert cached_view(store) == await fresh_view(kube, CONFIG_MAPS, namespace)
    finally:
        await informer.stop()


async def _ready(value: bool) -> bool:
    return value


def etcd_request(port: int, path: str, body: Obj) -> Obj:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return dict(json.load(response))


async def compact_etcd(control_plane: ControlPlane) -> int:
    """Compacts etcd at its current revision through its JSON gateway; returns the revision."""
    port = int(control_plane.options()["etcdPort"])
    key = base64.b64encode(b"/registry").decode()
    header = (await asyncio.to_thread(etcd_request, port, "/v3/kv/range", {"key": key}))["header"]
    revision = int(header["revision"])
    await asyncio.to_thread(etcd_request, port, "/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision


async def test_410_gone_relists_and_delivers_every_change_made_in_the_gap(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, config_maps: list[str]
) -> None:
    store = Store(CONFIG_MAPS)
    recorder = Recorder()
    store.add_handler(recorder)
    informer = Informer(kube, store, namespaces=[namespace], label_selector=SELECTOR)
    reflector = informer.reflectors[0]
    informer.start()
    await informer.wait_synced(timeout=30)
    assert len(store) == N
    # The connection drops: the cache keeps its objects and the resourceVersion it had reached.
    await informer.stop()
    stale_version = reflector.last_resource_version
    recorder.events.clear()

    created = [f"new-{i}" for i in range(10)]
    updated = config_maps[:10]
    deleted = config_maps[10:20]
    await gather_limited([kube.create(CONFIG_MAPS, config_map(namespace, n), namespace) for n in created])
    await gather_limited([kube.patch(CONFIG_MAPS, n, {"data": {"value": "1"}}, namespace) for n in updated])
    await gather_limited([kube.delete(CONFIG_MAPS, n, namespace) for n in deleted])
    # ConfigMap watches bypass the API server's watch cache (hack/cluster.sh), so compaction makes the old
    # resourceVersion unservable: the watch must get 410 Gone.
    revision = await compact_etcd(control_plane)
    assert revision > int(stale_version)

    informer.start()
    try:
        await wait_for(lambda: _ready(reflector.lists == 2), timeout=60, what="a relist after 410 Gone")
        assert cached_view(store) == await fresh_view(kube, CONFIG_MAPS, namespace)
        assert recorder.of("add") == set(created)
        assert recorder.of("update") == set(updated)
        assert recorder.of("delete") == set(deleted)
        gone = metrics.informer_watch_restarts_total.labels(resource=str(CONFIG_MAPS), reason="gone")
        assert gone._value.get() >= 1
    finally:
        await informer.stop()


async def test_the_informer_recovers_by_itself_after_the_api_server_is_down_for_30s(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, config_maps: list[str]
) -> None:
    store = Store(CONFIG_MAPS)
    informer = Informer(kube, store, namespaces=[namespace], label_selector=SELECTOR)
    informer.start()
    try:
        await informer.wait_synced(timeout=30)
        control_plane.stop_component("kube-apiserver")
        await asyncio.sleep(30)  # the outage itself is what this test is about
        await asyncio.to_thread(control_plane.start_stopped_components)
        await wait_for(lambda: _api_up(kube), timeout=120, what="the API server to serve again")
        await kube.patch(CONFIG_MAPS, "cm-100", {"data": {"value": "after-outage"}}, namespace)
        await kube.create(CONFIG_MAPS, config_map(namespace, "after-outage"), namespace)

        async def caught_up() -> bool:
            obj = store.get_by_name(namespace, "cm-100")
            return obj is not None and obj["data"]["value"] == "after-outage" and \
                store.get_by_name(namespace, "after-outage") is not None

        await wait_for(caught_up, timeout=120, what="the informer to see changes made after the restart")
        assert cached_view(store) == await fresh_view(kube, CONFIG_MAPS, namespace)
        assert all(not t.done() for t in informer._tasks)
    finally:
        await informer.stop()


async def _api_up(kube: KubeClient) -> bool:
    try:
        await kube.request("GET", "/version")
    except Exception:
        return False
    return True


async def test_applying_the_same_objects_twice_writes_nothing_the_second_time(
    kube: KubeClient, namespace: str
) -> None:
    store = Store(CONFIG_MAPS)
    informer = Informer(kube, store, namespaces=[namespace], label_selector=SELECTOR)
    informer.start()
    await informer.wait_synced(timeout=30)
    applier = Applier(kube, lambda res, ns, name: store.get_by_name(ns, name))
    desired = [config_map(namespace, f"applied-{i:03d}", str(i)) for i in range(N)]
    try:
        await gather_limited([applier.apply(CONFIG_MAPS, d) for d in desired])
        assert applier.writes == N
        await wait_for(lambda: _ready(len(store) == N), timeout=30, what="the cache to hold every applied object")

        patches = metrics.rest_client_requests_total.labels(code="200", method="PATCH", host=kube.host)
        before = patches._value.get()
        writes_before = applier.writes
        await gather_limited([applier.apply(CONFIG_MAPS, d) for d in desired])
        assert applier.writes == writes_before
        assert patches._value.get() == before

        # A real change is still written, and only that one.
        desired[5]["data"]["value"] = "changed"
        await applier.apply(CONFIG_MAPS, desired[5])
        assert applier.writes == writes_before + 1
        assert patches._value.get() == before + 1
    finally:
        await informer.stop()


@pytest.mark.parametrize("removed", ["label"])
async def test_a_field_no_longer_desired_is_removed(kube: KubeClient, namespace: str, removed: str) -> None:
    store = Store(CONFIG_MAPS)
    informer = Informer(kube, store, namespaces=[namespace], label_selector=SELECTOR)
    informer.start()
    await informer.wait_synced(timeout=30)
    applier = Applier(kube, lambda res, ns, name: store.get_by_name(ns, name))
    try:
        with_label = config_map(namespace, "shrinks")
        with_label["metadata"]["labels"] |= {"a": "1", "b": "2"}
        await applier.apply(CONFIG_MAPS, with_label)
        await wait_for(lambda: _ready(store.get_by_name(namespace, "shrinks") is not None), timeout=30,
                       what="the object in the cache")
        without = config_map(namespace, "shrinks")
        without["metadata"]["labels"] |= {"a": "1"}
        result = await applier.apply(CONFIG_MAPS, without)
        assert result["metadata"]["labels"] == {"test": "informer", "a": "1"}
    finally:
        await informer.stop()


async def test_a_status_write_for_a_pod_that_was_replaced_leaves_its_successor_alone(
    kube: KubeClient, namespace: str
) -> None:
    """Pods of one Instance keep their names across incarnations: a gate meant for the old pod names its UID, so the
    API server refuses it for the new pod of that name and the applier drops it."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "same-name", "namespace": namespace},
           "spec": {"containers": [{"name": "c", "image": "example.invalid/x:1"}]}}
    applier = Applier(kube, lambda res, ns, name: None)
    # Pods of a new namespace are refused until the controller-manager has made its default ServiceAccount.
    await wait_for(lambda: _exists(kube, SERVICE_ACCOUNTS, namespace, "default"), timeout=120,
                   what="the namespace's default ServiceAccount")
    await kube.create(PODS, pod, namespace)
    old = await kube.get(PODS, "same-name", namespace)
    await kube.delete(PODS, "same-name", namespace, grace_period_seconds=0)
    await wait_for(lambda: _gone(kube, namespace, "same-name"), timeout=30, what="the old pod to be gone")
    await kube.create(PODS, pod, namespace)

    def gate(uid: str) -> Obj:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "same-name", "namespace": namespace,
                                                                "uid": uid},
                "status": {"conditions": [{"type": "ome.io/serving", "status": "False", "reason": "Draining"}]}}

    await applier.apply_partial_status(PODS, gate(old["metadata"]["uid"]), "old")
    new = await kube.get(PODS, "same-name", namespace)
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert "ome.io/serving" not in {c["type"] for c in (new.get("status") or {}).get("conditions") or []}

    await applier.apply_partial_status(PODS, gate(new["metadata"]["uid"]), "new")
    new = await kube.get(PODS, "same-name", namespace)
    assert {c["type"]: c["status"] for c in new["status"]["conditions"]}["ome.io/serving"] == "False"


async def _exists(kube: KubeClient, resource: Resource, namespace: str, name: str) -> bool:
    try:
        await kube.get(resource, name, namespace)
    except ApiError as exc:
        if exc.not_found:
            return False
        raise
    return True


async def _gone(kube: KubeClient, namespace: str, name: str) -> bool:
    return not await _exists(kube, PODS, namespace, name)
