"""What omenative admits but does not do. OME's API has fields that omenative has not built yet, and a component is
free-form (pod spec fields sit inline), so the API server keeps any key written there. Each is named at admission
by a warning that starts with `not supported by omenative:`, with what happens instead, so that nothing a user
writes is ignored in silence. docs/api.md's field table lists the same fields; a unit test keeps the two equal.
Pure."""

from __future__ import annotations

from functools import cache
from typing import Any

from omenative.api import constants as c
from omenative.api.pod_fields import core_types
from omenative.api.schema import model_fields
from omenative.api.types import EngineSpec, LeaderSpec, RouterSpec, WorkerSpec

JSONDict = dict[str, Any]
NOT_SUPPORTED = "not supported by omenative"
COMPONENT = "<component>"  # engine, decoder or router, in the paths below

# Fields of omenative's CRDs that do nothing yet, and what happens instead.
FIELDS: dict[str, str] = {
    "spec.model.fineTunedWeights": "no fine-tuned weights are loaded; the base model is served alone",
    f"spec.{COMPONENT}.timeoutSeconds": "no request timeout is enforced for the component; set the serving "
                                        "runtime's own timeout",
}
# Keys of OME's components that omenative's schema does not have, which the API server keeps all the same.
COMPONENT_KEYS: dict[str, str] = {
    "kedaConfig": "a v1.2.2 scaling setting; move it to autoscaler (OME's \"Upgrade from v1.2.2\")",
    "scaleTarget": "a v1.2.2 scaling setting; move it to autoscaler.hpa.metrics (OME's \"Upgrade from v1.2.2\")",
    "scaleMetric": "a v1.2.2 scaling setting; move it to autoscaler.hpa.metrics (OME's \"Upgrade from v1.2.2\")",
    "autoscalerPolicyRef": "AutoscalerPolicy is not implemented; set the component's autoscaler inline",
    "acceleratorOverride": "accelerator classes are not implemented; set nodeSelector, tolerations and the "
                           "runner's resources",
    "containerConcurrency": "a Knative setting; OMENative runs no Knative revision",
    "canaryTrafficPercent": "a Knative setting; use spec.rollout canary steps",
}
# Pod spec fields that omenative sets itself, over the user's.
SET_BY_OMENATIVE: dict[str, str] = {
    "hostname": "every pod's hostname is its own name, so that the leader's DNS name resolves",
    "subdomain": "every pod's subdomain is the component's headless Service",
}


def _json_names(cls: type) -> frozenset[str]:
    return frozenset(meta.name for _, meta, _ in model_fields(cls))


@cache
def _known(part: str) -> frozenset[str]:
    """The keys a component (or its leader or worker) may hold: its schema's fields and a pod spec's."""
    pod = frozenset(core_types()["PodSpec"])
    own = {"engine": _json_names(EngineSpec), "router": _json_names(RouterSpec),
           "leader": _json_names(LeaderSpec), "worker": _json_names(WorkerSpec)}[part]
    return own | pod


def _get(obj: Any, path: list[str]) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _part_warnings(part: Any, where: str, kind: str) -> list[str]:
    if not isinstance(part, dict):
        return []
    out = []
    for key in sorted(k for k in part if isinstance(k, str)):
        if key in SET_BY_OMENATIVE:
            out.append(f"{NOT_SUPPORTED}: {where}.{key} ({SET_BY_OMENATIVE[key]})")
        elif key in COMPONENT_KEYS and kind in ("engine", "router"):
            out.append(f"{NOT_SUPPORTED}: {where}.{key} ({COMPONENT_KEYS[key]})")
        elif key not in _known(kind):
            out.append(f"{NOT_SUPPORTED}: {where}.{key} (neither a field of OME's {kind} nor of a pod spec; it is "
                       "ignored)")
    return out


def component_warnings(component: str, own: Any, where: str) -> list[str]:
    """The warnings of one component as written at `where` (`spec.engine`, or a runtime's `spec.engineConfig`)."""
    if not isinstance(own, dict):
        return []
    out = []
    for path, what in FIELDS.items():
        if path.startswith(f"spec.{COMPONENT}.") and _get(own, path.split(".")[2:]) is not None:
            out.append(f"{NOT_SUPPORTED}: {where}.{'.'.join(path.split('.')[2:])} ({what})")
    out += _part_warnings(own, where, c.ROUTER if component == c.ROUTER else "engine")
    if component != c.ROUTER:
        for runner in ("leader", "worker"):
            out += _part_warnings(own.get(runner), f"{where}.{runner}", runner)
    return out


def spec_warnings(spec: JSONDict) -> list[str]:
    """The warnings of the InferenceService's own fields outside its components."""
    out = []
    for path, what in FIELDS.items():
        if not path.startswith(f"spec.{COMPONENT}.") and _get(spec, path.split(".")[1:]) is not None:
            out.append(f"{NOT_SUPPORTED}: {path} ({what})")
    return out
