"""Removing an answered request annotation: a JSON patch that tests the value answered first, so a newer request
written meanwhile (kubectl annotate --overwrite) is kept for the next pass."""

from __future__ import annotations

from typing import Any

from omenative.kube.client import JSON_PATCH, ApiError, KubeClient
from omenative.kube.resources import Resource


async def remove_answered(client: KubeClient, resource: Resource, obj: dict[str, Any], annotation: str) -> None:
    meta = obj["metadata"]
    value = (meta.get("annotations") or {}).get(annotation)
    if value is None:
        return
    path = "/metadata/annotations/" + annotation.replace("~", "~0").replace("/", "~1")
    patch = [{"op": "test", "path": path, "value": value}, {"op": "remove", "path": path}]
    try:
        await client.patch(resource, meta["name"], patch, meta.get("namespace"), content_type=JSON_PATCH)
    except ApiError as exc:
        if not (exc.not_found or exc.status == 422):  # gone, or a newer request: the next pass answers it
            raise
