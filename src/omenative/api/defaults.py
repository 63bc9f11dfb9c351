"""Effective settings of a component, with OME's precedence: the InferenceService, then the runtime (both already
merged by `omenative.api.merge`), then the controller's configuration, then fixed defaults, some of which depend on
the Instance's shape (multi-pod or single-pod). Nothing here is written back to the InferenceService.

`default_component` is idempotent: defaulting its own output changes nothing.
"""

from __future__ import annotations

import copy
from typing import Any

from omenative.api import constants as c
from omenative.api.config import ControllerConfig
from omenative.api.units import optional_duration

JSONDict = dict[str, Any]

RECREATE = "RecreateInstanceOnPodRestart"
SURGE_THEN_DRAIN = "SurgeThenDrain"
IN_PLACE_ONLY = "InPlaceOnly"
IN_PLACE_IF_POSSIBLE = "InPlaceIfPossible"
IN_PLACE_STRATEGIES = (IN_PLACE_IF_POSSIBLE, IN_PLACE_ONLY)
ALL_POD_READY = "AllPodReady"


def is_multi_pod(component: JSONDict) -> bool:
    """A leader or a worker (from the InferenceService or the runtime) makes Instances multi-pod."""
    return component.get("leader") is not None or component.get("worker") is not None


def worker_size(component: JSONDict) -> int:
    """Workers per Instance: the merged worker.size, else 1 for a multi-pod component; 0 for single-pod."""
    if not is_multi_pod(component):
        return 0
    size = (component.get("worker") or {}).get("size")
    return int(size) if isinstance(size, int) else 1


def replica_bounds(component: JSONDict, name: str, config: ControllerConfig) -> tuple[int, int]:
    """(minReplicas, maxReplicas) in Instances. OMENative runs at least one Instance; a default maximum below the
    minimum is raised to it; maxReplicas 0 counts as unset."""
    low = component.get("minReplicas")
    low = config.default_min_replicas if low is None else int(low)
    low = max(low, 1)
    high = component.get("maxReplicas")
    if not high:
        high = max(config.default_max_replicas.get(name, low), low)
    return low, int(high)


def default_lifecycle(lifecycle: JSONDict | None, *, multi_pod: bool, config: ControllerConfig) -> JSONDict:
    """Every lifecycle field filled: given values, then the controller's, then the fixed shape-dependent ones."""
    out = copy.deepcopy(lifecycle or {})
    out.setdefault("restartPolicy", RECREATE if multi_pod else "None")
    out.setdefault("readyPolicy", ALL_POD_READY if multi_pod else "None")
    if out.get("instanceReadyTimeout") is None and config.instance_ready_timeout:
        out["instanceReadyTimeout"] = config.instance_ready_timeout
    out.setdefault("minReadySeconds", config.min_ready_seconds)
    strategy = out.setdefault("updateStrategy", {})
    strategy.setdefault("type", config.update_strategy_type or SURGE_THEN_DRAIN)
    rolling = strategy.setdefault("rollingUpdate", {})
    if strategy["type"] == SURGE_THEN_DRAIN:
        if rolling.get("maxSurge") is None and config.max_surge is not None:
            rolling["maxSurge"] = config.max_surge
    elif rolling.get("maxUnavailable") is None and config.max_unavailable is not None:
        rolling["maxUnavailable"] = config.max_unavailable
    out.setdefault("migrationPolicy", {}).setdefault("mode", "Auto")
    return out


def default_autoscaler(component: JSONDict) -> JSONDict:
    """The autoscaler block, whole from one layer; none anywhere means a HorizontalPodAutoscaler."""
    block = component.get("autoscaler")
    if isinstance(block, dict) and block.get("class"):
        return copy.deepcopy(block)
    legacy = (component.get("annotations") or {}).get(c.ANN_AUTOSCALER_CLASS)
    legacy_class = {"hpa": "HPA", "keda": "KEDA", "external": "External"}.get(str(legacy).lower())
    return {"class": legacy_class or "HPA"}


def default_component(component: JSONDict, name: str, config: ControllerConfig) -> JSONDict:
    """The merged component with its replica bounds, worker size, lifecycle and autoscaler filled in."""
    out = copy.deepcopy(component)
    multi_pod = is_multi_pod(out)
    low, high = replica_bounds(out, name, config)
    out["minReplicas"], out["maxReplicas"] = low, high
    if multi_pod:
        out.setdefault("leader", {})
        worker = out.get("worker")
        out["worker"] = {**(worker or {}), "size": worker_size(out)}
    out["lifecycle"] = default_lifecycle(out.get("lifecycle"), multi_pod=multi_pod, config=config)
    out["autoscaler"] = default_autoscaler(out)
    return out


def ready_timeout(lifecycle: JSONDict, config: ControllerConfig) -> float | None:
    """Seconds an Instance has to become ready: the lifecycle's instanceReadyTimeout, else the controller's; None
    (no deadline) when neither is set or it is zero."""
    return optional_duration(lifecycle.get("instanceReadyTimeout") or config.instance_ready_timeout) or None


def gang_schedule_timeout(instance_ready_timeout: float | None, config: ControllerConfig) -> int | None:
    """A PodGroup's scheduleTimeoutSeconds: the ready timeout clamped to the controller's [min, max]
    (OME's gang-scheduling table); an invalid range counts as unset."""
    low = optional_duration(config.gang_schedule_timeout_min)
    high = optional_duration(config.gang_schedule_timeout_max)
    if low is None or high is None or low <= 0 or high <= 0 or low > high:
        return int(instance_ready_timeout) if instance_ready_timeout else None
    if instance_ready_timeout is None or instance_ready_timeout < low:
        return int(low)
    return int(min(instance_ready_timeout, high))


def effective_partition(pacing: JSONDict, rolling: JSONDict) -> int:
    """How many of the lowest-indexed Instances stay on their revision: the rollout group's `pacing.partition` when
    it sets one (a canary step, 0 included), else the component's own `rollingUpdate.partition`."""
    value = pacing.get("partition")
    if value is None:
        value = rolling.get("partition")
    try:
        return max(int(value or 0), 0)
    except (TypeError, ValueError):
        return 0  # admission refuses a non-integer; an older stored object must not crash the pass
