"""Standalone InferenceReplicas (OME's "Run a standalone InferenceReplica" and "Run a standalone replica"): a replica
created directly, with no parent InferenceService, whose spec the user owns. Which replica is which, and the
admission rules OME gives them, in its words. Pure.

A replica with `spec.parentRef` or an InferenceService controller owner reference is projected: only omenative
writes its spec. One with neither is standalone: omenative runs its Instances from its own `spec.runners`, makes its
headless Service, and leaves its count and its rollouts to the user.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from omenative.api import constants as c
from omenative.api import migration_request, unsupported
from omenative.api.readiness import desired_instances

JSONDict = dict[str, Any]
NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
REFERENCES = ("modelRef", "runtimeRef")
# Only omenative's InferenceService controller writes these, on the replicas it projects.
CONTROLLER_ANNOTATIONS = (c.ANN_CONTROLLER_WRITE, "ome.io/composed-fields")
CONTROLLER_FIELDS = ("placementExecution", "placementReplicaLimit")


def projected(replica: JSONDict) -> bool:
    """Written from an InferenceService: it names its parent, or the InferenceService controls it."""
    if ((replica.get("spec") or {}).get("parentRef") or {}).get("name"):
        return True
    owners = (replica.get("metadata") or {}).get("ownerReferences") or []
    return any(isinstance(o, dict) and o.get("kind") == "InferenceService" and o.get("controller") for o in owners)


def references(spec: JSONDict) -> bool:
    """The replica renders from a model or a runtime (not from runners of its own)."""
    return any(isinstance(spec.get(r), dict) for r in REFERENCES)


def _runner_errors(runners: Any) -> list[str]:
    if not isinstance(runners, list) or not all(isinstance(r, dict) for r in runners):
        return ["spec.runners must be a list of runners"]
    by_name = {r.get("name"): r for r in runners}
    if len(by_name) != len(runners):
        return ["spec.runners names a runner twice"]
    shapes: list[tuple[str, JSONDict, int | None]]
    if set(by_name) == {c.RUNNER_DEFAULT}:
        shapes = [(c.RUNNER_DEFAULT, by_name[c.RUNNER_DEFAULT], 1)]
    elif set(by_name) == {c.RUNNER_LEADER, c.RUNNER_WORKER}:
        shapes = [(c.RUNNER_LEADER, by_name[c.RUNNER_LEADER], 1), (c.RUNNER_WORKER, by_name[c.RUNNER_WORKER], None)]
    else:
        return [f"spec.runners must be one `default` runner (size 1), or a `leader` (size 1) and a `worker` (size at "
                f"least 1), not {sorted(str(n) for n in by_name)}"]
    errors = []
    for name, runner, size in shapes:
        got = runner.get("size", 1)
        if (size is not None and got != size) or (size is None and (not isinstance(got, int) or got < 1)):
            errors.append(f"spec.runners[{name}].size must be {size if size else 'at least 1'}, got {got!r}")
        spec = (runner.get("template") or {}).get("spec") if isinstance(runner.get("template"), dict) else None
        if not isinstance(spec, dict) or not spec.get("containers"):
            errors.append(f"spec.runners[{name}].template.spec.containers is required")
    return errors


# What a standalone replica's model reference may hold that omenative does not do, as an InferenceService's
# spec.model.fineTunedWeights is warned about (api/unsupported.py).
MODEL_REF_UNSUPPORTED = {
    "fineTunedWeights": unsupported.FIELDS["spec.model.fineTunedWeights"],
    "overlays": "no overlay models are mounted; the base model is served alone",
}


def standalone_warnings(replica: JSONDict) -> list[str]:
    """Fields of a standalone replica that are admitted but not honored, each named."""
    ref = (replica.get("spec") or {}).get("modelRef")
    if not isinstance(ref, dict):
        return []
    return [f"not supported by omenative: spec.modelRef.{key} ({why})" for key, why in MODEL_REF_UNSUPPORTED.items()
            if ref.get(key)]


def standalone_errors(replica: JSONDict, old: JSONDict | None, isvc_exists: Callable[[str], bool],
                      runtime: JSONDict | None = None) -> list[str]:
    """What OME's webhook refuses on a standalone replica. `isvc_exists`: whether an InferenceService of that name
    is in the replica's namespace; `runtime`: the spec of the runtime `spec.runtimeRef` names, when it exists (one
    that does not exist yet is admitted: the replica reports RuntimeNotFound until it does)."""
    meta = replica.get("metadata") or {}
    spec = replica.get("spec") or {}
    name = str(meta.get("name") or "")
    annotations = meta.get("annotations") or {}
    errors: list[str] = []
    if name and not NAME.match(name):
        errors.append(f"name {name!r} must match [a-z]([-a-z0-9]*[a-z0-9])?: it is the prefix of the replica's pod "
                      "and Service names")
    owners = [name] + [name[: -len(f"-{x}")] for x in c.COMPONENTS if name.endswith(f"-{x}")]
    clash = next((s for s in owners if s and isvc_exists(s)), None)
    if clash is not None:
        errors.append(f"name {name!r} collides with InferenceService {clash!r}, whose replicas would share pod and "
                      "Service names with this one; choose another name")
    copied = [a for a in CONTROLLER_ANNOTATIONS if a in annotations]
    if copied:
        errors.append(f"annotation {copied[0]} is written only by the InferenceService controller on the replicas it "
                      "projects: drop the copied annotation")
    for field in CONTROLLER_FIELDS:
        if spec.get(field) is not None:
            errors.append(f"spec.{field} is written only by the InferenceService controller: omit it")
    if any(str(k).startswith(migration_request.PREFIX) for k in annotations):
        errors.append("manual migration needs the per-revision Service that only an InferenceService creates: a "
                      "migration request is not accepted on a standalone replica")
    refs = [r for r in REFERENCES if spec.get(r) is not None]
    ref: JSONDict = spec["runtimeRef"] if isinstance(spec.get("runtimeRef"), dict) else {}
    if spec.get("runners") and refs:
        errors.append(f"spec.runners and spec.{refs[0]} are two template sources: a replica renders from exactly one")
    elif spec.get("modelRef") is not None and not (isinstance(spec["modelRef"], dict) and spec["modelRef"].get("name")):
        errors.append("spec.modelRef.name is required")
    elif refs:
        if spec.get("runtimeRef") is not None and not ref.get("name"):
            errors.append("spec.runtimeRef.name is required")
        if ref.get("autoSync") is False or ref.get("revision"):
            errors.append("spec.runtimeRef.autoSync: false and spec.runtimeRef.revision pin a runtime, which a replica "
                          "does not honor: it renders the live runtime and keeps no snapshot of it")
        piece = f"{spec.get('component') or c.ENGINE}Config"
        if runtime is not None and not isinstance(runtime.get(piece), dict):
            errors.append(f"runtime {ref.get('name')} has no {piece}: this replica could not render, and no retry "
                          "would change that")
    elif not spec.get("runners"):
        errors.append("TemplateSourceMissing: set spec.runners (one `default` runner, or a `leader` and a `worker`)")
    else:
        errors += _runner_errors(spec.get("runners"))
    klass = (spec.get("autoscaler") or {}).get("class") if isinstance(spec.get("autoscaler"), dict) else None
    if klass in ("HPA", "KEDA"):
        errors.append(f"spec.autoscaler.class {klass}: only the InferenceService controller creates a scaler from the "
                      "block; target the replica's scale subresource with your own HorizontalPodAutoscaler or "
                      "ScaledObject, or use External")
    if ((spec.get("lifecycle") or {}) if isinstance(spec.get("lifecycle"), dict) else {}).get(
            "minReadySeconds") is not None:
        errors.append("spec.lifecycle.minReadySeconds is not read on a replica: set spec.minReadySeconds")
    partition = ((spec.get("pacing") or {}) if isinstance(spec.get("pacing"), dict) else {}).get("partition")
    if isinstance(partition, int) and partition > desired_instances(replica):
        errors.append(f"spec.pacing.partition ({partition}) must not exceed spec.replicas "
                      f"({desired_instances(replica)})")
    if old is not None and (old.get("spec") or {}).get("component") != spec.get("component"):
        errors.append("spec.component is immutable: recreate the replica to change its role")
    return errors
