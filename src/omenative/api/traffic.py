"""Which revisions of a component take its traffic, named by their revision Services (OME's
ComponentTrafficTarget), and the component's rolled-out revision fields. The InferenceReplica reports the share of
its serving Instances each revision has; the InferenceService mirrors it, or, during a canary, the weights the canary
recorded. Pure: the controllers and `kubectl ome` share it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from omenative.api import naming
from omenative.api.phases import DELETING
from omenative.api.types import InstanceStatus
from omenative.obj import Obj


def percents(counts: Mapping[str, int]) -> dict[str, int]:
    """Whole percents proportional to `counts` that add up to exactly 100 (largest remainder; a tie goes to the
    name that sorts first, so two passes agree). Empty when nothing counts."""
    total = sum(n for n in counts.values() if n > 0)
    if total <= 0:
        return {}
    exact = {k: n * 100 / total for k, n in counts.items() if n > 0}
    out = {k: int(v) for k, v in exact.items()}
    short = 100 - sum(out.values())
    for k in sorted(exact, key=lambda k: (-(exact[k] - out[k]), k))[:short]:
        out[k] += 1
    return out


def replica_traffic(isvc: str, component: str, rows: Iterable[InstanceStatus], target: str,
                    pairings: Mapping[str, str | None]) -> list[Obj]:
    """The replica's `status.traffic`: each revision that has serving Instances (every pod in rotation, as
    servingReplicas counts them, so the list moves only when that count does), with its share of them (requests
    spread evenly over the serving pods, so this is the share a revision gets), newest (the target) first.
    `pairings`: each revision's pairing protocol, where it has one."""
    serving: dict[str, int] = {}
    for row in rows:
        pods = row.pod_count or 0
        if pods > 0 and (row.serving_pod_count or 0) >= pods and row.phase != DELETING and row.running_revision:
            serving[row.running_revision] = serving.get(row.running_revision, 0) + 1
    out = []
    for revision, percent in sorted(percents(serving).items(), key=lambda kv: (kv[0] != target, kv[0])):
        entry: Obj = {"revisionName": naming.revision_service_name(isvc, component, revision), "percent": percent,
                      "tag": "latest" if revision == target else "previous", "latestRevision": revision == target}
        if pairings.get(revision):
            entry["pairingProtocol"] = pairings[revision]
        out.append(entry)
    return out


def rolled_out_fields(old: Obj, replica_status: Obj, isvc: str, component: str, canary_open: bool) -> Obj:
    """The component's latestReadyRevision, latestRolledoutRevision and previousRolledoutRevision (OME's
    ComponentStatusSpec), from the replica's status and what the InferenceService's status said before:
    - latest ready: the update revision once one of its Instances is ready, else what it was (or the current
      revision, when it has ready Instances);
    - latest rolled out: the update revision once every Instance runs it and is ready, and no canary of the component
      is open; it moves only forward, and the one it replaces becomes the previous."""
    out: Obj = {k: old[k] for k in ("latestReadyRevision", "latestRolledoutRevision", "previousRolledoutRevision")
                if old.get(k)}
    update = naming.revision_hash_of(isvc, component, replica_status.get("updateRevision"))
    current = naming.revision_hash_of(isvc, component, replica_status.get("currentRevision"))
    replicas = int(replica_status.get("replicas") or 0)
    if update and int(replica_status.get("updatedReadyReplicas") or 0) > 0:
        out["latestReadyRevision"] = naming.revision_service_name(isvc, component, update)
    elif current and "latestReadyRevision" not in out and int(replica_status.get("readyReplicas") or 0) > 0:
        out["latestReadyRevision"] = naming.revision_service_name(isvc, component, current)
    done = update and update == current and replicas > 0 and not canary_open and \
        int(replica_status.get("updatedReplicas") or 0) == replicas == int(
            replica_status.get("updatedReadyReplicas") or 0)
    if done:
        name = naming.revision_service_name(isvc, component, update)
        before = out.get("latestRolledoutRevision")
        if before != name:
            if before:
                out["previousRolledoutRevision"] = before
            out["latestRolledoutRevision"] = name
    return out
