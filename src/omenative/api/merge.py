"""The runtime + InferenceService merge (OME's strategic merge, ome-compat notes §2.4).

The runtime's component config is the base and the InferenceService's component the patch:
- scalars: the InferenceService wins;
- maps (labels, annotations, nodeSelector, resources, config) merge key by key;
- lists merge by their key where Kubernetes has one (containers, volumes and env by name, ports by containerPort,
  volumeMounts by mountPath); other lists (command, args, tolerations) are replaced whole;
- the autoscaler block comes whole from one layer;
- a runner without a name (or an empty one) keeps the runtime's name.

Then each pod's main container is built from the runner: the runner is merged over the pod's container of the same
name (appended when missing), and its args come after the container's.
"""

from __future__ import annotations

import copy
from typing import Any

JSONDict = dict[str, Any]

# List fields merged by key, as Kubernetes' strategic merge does for these types.
LIST_MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "imagePullSecrets": "name",
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "schedulingGates": "name",
    "resourceClaims": "name",
    "hostAliases": "ip",
}
# Blocks that come whole from one layer, never merged field by field.
REPLACED_WHOLE = frozenset({"autoscaler", "command", "args", "tolerations"})


def strategic_merge(base: Any, patch: Any, key: str | None = None) -> Any:
    """`patch` merged over `base` (neither is modified)."""
    if patch is None:
        return copy.deepcopy(base)
    if base is None or key in REPLACED_WHOLE:
        return copy.deepcopy(patch)
    if isinstance(base, dict) and isinstance(patch, dict):
        out = copy.deepcopy(base)
        for k, v in patch.items():
            out[k] = strategic_merge(base.get(k), v, k)
        return out
    if isinstance(base, list) and isinstance(patch, list) and key in LIST_MERGE_KEYS:
        return merge_list_by_key(base, patch, LIST_MERGE_KEYS[key])
    return copy.deepcopy(patch)


def merge_list_by_key(base: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    out = [copy.deepcopy(item) for item in base]
    positions = {item.get(merge_key): i for i, item in enumerate(out) if isinstance(item, dict)}
    for item in patch:
        if not isinstance(item, dict) or item.get(merge_key) is None:
            out.append(copy.deepcopy(item))
            continue
        at = positions.get(item[merge_key])
        if at is None:
            positions[item[merge_key]] = len(out)
            out.append(copy.deepcopy(item))
        else:
            out[at] = strategic_merge(out[at], item)
    return out


def _clean_runner(runner: Any) -> Any:
    if isinstance(runner, dict) and not runner.get("name"):
        runner = {k: v for k, v in runner.items() if k != "name"}
    return runner


def merge_component(runtime_config: JSONDict | None, isvc_component: JSONDict | None) -> JSONDict | None:
    """The effective component: the InferenceService's component merged over the runtime's config.

    A component the InferenceService does not declare is not deployed, whatever the runtime has.
    """
    if isvc_component is None:
        return None
    patch = copy.deepcopy(isvc_component)
    for part in (patch, patch.get("leader"), patch.get("worker")):
        if isinstance(part, dict) and "runner" in part:
            part["runner"] = _clean_runner(part["runner"])
    return strategic_merge(runtime_config or {}, patch)  # type: ignore[no-any-return]


def apply_runner(pod_spec: JSONDict, runner: JSONDict | None, default_name: str) -> JSONDict:
    """The pod spec with its main container built from the runner (OME's runner -> container rule)."""
    spec = copy.deepcopy(pod_spec)
    containers: list[JSONDict] = spec.setdefault("containers", [])
    if not runner:
        return spec
    name = runner.get("name") or (containers[0]["name"] if containers and containers[0].get("name")
                                  else default_name)
    at = next((i for i, c in enumerate(containers) if c.get("name") == name), None)
    if at is None:
        containers.append({"name": name})
        at = len(containers) - 1
    container = containers[at]
    runner_args = runner.get("args")
    merged = strategic_merge(container, {k: v for k, v in runner.items() if k != "args"})
    merged["name"] = name
    if runner_args is not None:
        merged["args"] = list(container.get("args") or []) + list(runner_args)
    containers[at] = merged
    return spec
