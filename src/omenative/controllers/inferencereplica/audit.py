"""The migration audit history: the ConfigMap `<isvc>-ome-migration-audit`, key history.json, which keeps the last
200 ended migrations after their records leave the InferenceReplica's status. ConfigMaps are not cached (there are
many, and this one changes only when a migration starts or ends), so it is read when a row changes."""

from __future__ import annotations

from typing import Any

from omenative.kube.client import ApiError
from omenative.kube.resources import CONFIG_MAPS
from omenative.obj import Obj
from omenative.render import objects


async def record(ctx: Any, parent: Obj | None, namespace: str, isvc: str, rows: list[Obj]) -> None:
    """Upserts `rows` (by request ID). Owned by the InferenceService, so it goes when the service does."""
    name = objects.migration_audit_name(isvc)
    try:
        current = await ctx.client.get(CONFIG_MAPS, name, namespace)
    except ApiError as exc:
        if not exc.not_found:
            raise
        current = {}
    history = objects.merge_migration_history((current.get("data") or {}).get(objects.MIGRATION_AUDIT_KEY), rows)
    owner = objects.owner_reference(parent, kind="InferenceService") if parent is not None else None
    body = objects.migration_audit(isvc=isvc, namespace=namespace, owner=owner, history=history)
    await ctx.client.apply(CONFIG_MAPS, body, field_manager=ctx.applier.field_manager)
