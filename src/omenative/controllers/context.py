"""What the controllers share: the client, the caches, the applier, events, expectations and configuration."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import attrs

from omenative.api import constants as c
from omenative.api.config import ControllerConfig
from omenative.kube.apply import Applier
from omenative.kube.client import KubeClient
from omenative.kube.events import EventRecorder
from omenative.kube.expectations import Expectations
from omenative.kube.informers import Caches
from omenative.kube.queue import WorkQueue
from omenative.kube.resources import (
    BASE_MODELS,
    CLUSTER_BASE_MODELS,
    CLUSTER_SERVING_RUNTIMES,
    CRDS,
    PODGROUPS,
    SERVING_RUNTIMES,
    Resource,
)

Obj = dict[str, Any]

# Cache index names.
BY_REPLICA = "replica"  # pods: "{namespace}/{isvc}-{component}"
BY_INSTANCE = "instance"  # pods: "{namespace}/{isvc}-{component}/{index}"
BY_ISVC = "isvc"  # namespaced children: "{namespace}/{isvc}"
BY_RUNTIME = "runtime"  # InferenceServices: the runtime name they name, or "" to auto-select
BY_MODEL = "model"  # InferenceServices: the model name they name


def replica_key_of_pod(pod: Obj) -> str | None:
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    isvc, component = labels.get(c.LABEL_ISVC), labels.get(c.LABEL_COMPONENT)
    if not isvc or not component:
        return None
    return f"{meta.get('namespace')}/{isvc}-{component}"


def instance_key_of_pod(pod: Obj) -> str | None:
    replica = replica_key_of_pod(pod)
    index = ((pod.get("metadata") or {}).get("labels") or {}).get(c.LABEL_INSTANCE_INDEX)
    return f"{replica}/{index}" if replica and index is not None else None


@attrs.define
class Context:
    client: KubeClient
    caches: Caches
    applier: Applier
    events: EventRecorder
    expectations: Expectations
    config: ControllerConfig
    queues: dict[str, WorkQueue[str]] = attrs.field(factory=dict)
    wall_clock: Callable[[], float] = time.time

    def get(self, resource: Resource, namespace: str | None, name: str) -> Obj | None:
        return self.caches.get(resource, namespace, name)

    def by_index(self, resource: Resource, index: str, value: str) -> list[Obj]:
        return self.caches.store(resource).by_index(index, value)

    def named(self, namespaced: Resource, cluster: Resource, namespace: str, name: str) -> tuple[Obj, bool] | None:
        """A namespaced object of that name if there is one, else the cluster-scoped one (OME's lookup order for
        runtimes and models, whatever `kind` the reference says): (object, namespaced) or None."""
        obj = self.get(namespaced, namespace, name)
        if obj is not None:
            return obj, True
        obj = self.get(cluster, None, name)
        return (obj, False) if obj is not None else None

    def runtime_named(self, namespace: str, name: str) -> tuple[Obj, bool] | None:
        return self.named(SERVING_RUNTIMES, CLUSTER_SERVING_RUNTIMES, namespace, name)

    def model_named(self, namespace: str, name: str) -> tuple[Obj, bool] | None:
        return self.named(BASE_MODELS, CLUSTER_BASE_MODELS, namespace, name)

    def podgroup_crd_installed(self) -> bool:
        crd = self.get(CRDS, None, c.PODGROUP_CRD)
        if crd is None:
            return False
        conditions = (crd.get("status") or {}).get("conditions") or []
        return any(x.get("type") == "Established" and x.get("status") == "True" for x in conditions) and \
            not crd["metadata"].get("deletionTimestamp")

    def podgroups_cached(self) -> bool:
        return self.caches.synced(PODGROUPS)
