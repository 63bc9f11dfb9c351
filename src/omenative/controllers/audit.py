"""The migration audit history: the ConfigMap `<isvc>-ome-migration-audit`, key history.json, which keeps the last
200 ended migrations after their records leave the InferenceReplica's status. Written by the InferenceReplica
controller (moves that start and end) and the InferenceService controller (requests it rejects).

ConfigMaps are not cached (there are many, and this one changes only when a migration starts or ends), so it is
read when a row changes, merged, and applied through the applier."""

from __future__ import annotations

from omenative.kube.apply import Applier
from omenative.kube.resources import CONFIG_MAPS
from omenative.obj import Obj
from omenative.render import objects


async def record(applier: Applier, parent: Obj | None, namespace: str, isvc: str, rows: list[Obj]) -> None:
    """Upserts `rows` (by request ID). Owned by the InferenceService, so it goes when the service does."""
    name = objects.migration_audit_name(isvc)
    current = await applier.read(CONFIG_MAPS, name, namespace) or {}
    history = objects.merge_migration_history((current.get("data") or {}).get(objects.MIGRATION_AUDIT_KEY), rows)
    owner = objects.owner_reference(parent, kind="InferenceService") if parent is not None else None
    await applier.apply(CONFIG_MAPS, objects.migration_audit(isvc=isvc, namespace=namespace, owner=owner,
                                                             history=history))
