"""Every version of an object, as a watch delivers them: a test asserts what a status *never* showed over a window,
without sampling (a watch sends each change the API server stores, in order)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from kubernetes_asyncio import client, watch

Obj = dict[str, Any]


class History:
    def __init__(self) -> None:
        self.versions: list[Obj] = []

    def values(self, read: Callable[[Obj], Any]) -> list[Any]:
        """`read` of each version, consecutive repeats folded."""
        out: list[Any] = []
        for obj in self.versions:
            value = read(obj)
            if not out or out[-1] != value:
                out.append(value)
        return out


@contextlib.asynccontextmanager
async def recorded(api: client.ApiClient, plural: str, namespace: str, name: str) -> AsyncIterator[History]:
    """Records each version of an ome.io object (plural, namespace, name) while the block runs."""
    custom = client.CustomObjectsApi(api)
    history = History()
    listed = await custom.list_namespaced_custom_object("ome.io", "v1beta1", namespace, plural,
                                                        field_selector=f"metadata.name={name}")
    history.versions.extend(listed.get("items") or [])
    version = listed["metadata"]["resourceVersion"]

    async def follow() -> None:
        nonlocal version
        while True:
            stream = watch.Watch().stream(
                custom.list_namespaced_custom_object, "ome.io", "v1beta1", namespace, plural,
                field_selector=f"metadata.name={name}", resource_version=version, timeout_seconds=300)
            async for event in stream:
                obj = event["object"]
                if event["type"] in ("ADDED", "MODIFIED"):
                    history.versions.append(obj)
                version = obj["metadata"]["resourceVersion"]

    task = asyncio.create_task(follow())
    try:
        yield history
        await asyncio.sleep(0.5)  # the last changes are on their way
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
