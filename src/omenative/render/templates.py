"""The pod templates of a component's runners, from the merged runtime + InferenceService component.

An Instance of a single-pod component has one runner, `default`; a multi-pod one has `leader` (one pod) and
`worker` (`worker.size` pods). Each template carries what every pod of the runner shares: the containers built from
the runner, the model's read-only hostPath volume and MODEL_PATH, PARALLELISM_SIZE, node affinity to nodes where the
model is Ready, the scheduler, and the component's labels and annotations. What differs per pod (names, ranks, the
leader's address, the readiness gate) is added when an Instance's pods are rendered (`omenative.render.pods`).
"""

from __future__ import annotations

import copy
from typing import Any

import attrs

from omenative.api import constants as c
from omenative.api import naming
from omenative.api.defaults import is_multi_pod, worker_size
from omenative.api.merge import apply_runner, strategic_merge
from omenative.api.types import BaseModelSpec
from omenative.api.units import InvalidValue, parse_quantity

JSONDict = dict[str, Any]

# Keys of a component that are not pod spec fields.
COMPONENT_KEYS = frozenset({
    "minReplicas", "maxReplicas", "timeoutSeconds", "labels", "annotations", "servicePortAppProtocols",
    "minAvailable", "maxUnavailable", "deploymentStrategy", "lifecycle", "autoscaler", "autoscalerPolicyRef",
    "scaleTarget", "scaleMetric", "containerConcurrency", "canaryTrafficPercent", "kedaConfig", "runner", "leader",
    "worker", "topologyKey", "topologySpread", "topologySpreadKey", "acceleratorOverride", "config", "size",
})
# Labels of the InferenceService that reach the pods: queue assignment must, any other label would roll the fleet
# every time someone relabels the InferenceService.
PROPAGATED_ISVC_LABELS = ("kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/priority-class")
RDMA_AUTO_INJECT = "rdma.ome.io/auto-inject"
RDMA_CONTAINER = "rdma.ome.io/container-name"


@attrs.frozen(kw_only=True)
class ModelInfo:
    name: str
    namespaced: bool
    namespace: str
    spec: BaseModelSpec

    @property
    def node_label(self) -> str:
        if self.namespaced:
            return naming.namespaced_model_label(self.namespace, self.name)
        return naming.cluster_model_label(self.name)


@attrs.frozen(kw_only=True)
class TemplateContext:
    isvc: str
    namespace: str
    component: str
    isvc_labels: dict[str, str] = attrs.field(factory=dict)
    runtime_name: str | None = None
    runtime_scheduler: str | None = None
    model: ModelInfo | None = None
    pairing_protocol: str | None = None  # spec.rollout.pairingProtocol, on the engine's and decoder's pods


def pod_fields(part: JSONDict) -> JSONDict:
    """The pod spec fields of a component, leader or worker (everything but the component settings)."""
    return {k: copy.deepcopy(v) for k, v in part.items() if k not in COMPONENT_KEYS}


def gpus(container: JSONDict) -> int:
    resources = container.get("resources") or {}
    for section in ("limits", "requests"):
        value = (resources.get(section) or {}).get(c.GPU_RESOURCE)
        if value is not None:
            try:
                return int(parse_quantity(value))
            except InvalidValue:
                return 0
    return 0


def set_env(container: JSONDict, name: str, value: str, *, overwrite: bool) -> None:
    env: list[JSONDict] = container.setdefault("env", [])
    for item in env:
        if item.get("name") == name:
            if overwrite:
                item.clear()
                item.update({"name": name, "value": value})
            return
    env.append({"name": name, "value": value})


def main_container(spec: JSONDict, runner: JSONDict | None) -> JSONDict | None:
    containers = spec.get("containers") or []
    name = (runner or {}).get("name") or c.MAIN_CONTAINER
    return next((x for x in containers if x.get("name") == name), containers[0] if containers else None)


def _add_node_affinity(spec: JSONDict, label: str) -> None:
    requirement = {"key": label, "operator": "In", "values": ["Ready"]}
    node_affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({})
    for term in terms:
        expressions = term.setdefault("matchExpressions", [])
        if requirement not in expressions:
            expressions.append(requirement)


def _add_model(spec: JSONDict, container: JSONDict, model: ModelInfo) -> None:
    path = model.spec.storage.path if model.spec.storage else None
    if path:
        set_env(container, c.ENV_MODEL_PATH, path, overwrite=False)
        volume = model.name if len(model.name) <= 63 else "model"
        volumes: list[JSONDict] = spec.setdefault("volumes", [])
        if not any(v.get("name") == volume for v in volumes):
            volumes.append({"name": volume, "hostPath": {"path": path}})
        mounts: list[JSONDict] = container.setdefault("volumeMounts", [])
        if not any(m.get("name") == volume for m in mounts):
            mounts.append({"name": volume, "mountPath": path, "readOnly": True})
    _add_node_affinity(spec, model.node_label)


def _add_rdma(spec: JSONDict, annotations: dict[str, str]) -> None:
    """What RDMA needs at the pod level, for runtimes that ask OME's pod webhook to inject it: privileged mode,
    IPC_LOCK and the node's /dev/infiniband."""
    if str(annotations.get(RDMA_AUTO_INJECT, "")).lower() != "true":
        return
    target = annotations.get(RDMA_CONTAINER) or c.MAIN_CONTAINER
    for container in spec.get("containers") or []:
        if container.get("name") != target:
            continue
        security = container.setdefault("securityContext", {})
        security["privileged"] = True
        caps = security.setdefault("capabilities", {}).setdefault("add", [])
        if "IPC_LOCK" not in caps:
            caps.append("IPC_LOCK")
        mounts = container.setdefault("volumeMounts", [])
        if not any(m.get("mountPath") == "/dev/infiniband" for m in mounts):
            mounts.append({"name": "rdma-devices", "mountPath": "/dev/infiniband"})
    volumes = spec.setdefault("volumes", [])
    if not any(v.get("name") == "rdma-devices" for v in volumes):
        volumes.append({"name": "rdma-devices", "hostPath": {"path": "/dev/infiniband"}})


QUOTA_ACCELERATOR_RESOURCES = ("nvidia.com/gpu", "google.com/tpu")


def _accelerated(spec: JSONDict) -> bool:
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        for part in ("limits", "requests"):
            if any(name in (resources.get(part) or {}) for name in QUOTA_ACCELERATOR_RESOURCES):
                return True
    return False


def _template(ctx: TemplateContext, component: JSONDict, part: JSONDict | None, pods_per_instance: int) -> JSONDict:
    spec = pod_fields(component)
    runner = component.get("runner")
    if part is not None:  # leader or worker: its pod fields over the component's, and its own runner only
        spec = strategic_merge(spec, pod_fields(part))
        runner = part.get("runner")
    spec = apply_runner(spec, runner, c.MAIN_CONTAINER)
    container = main_container(spec, runner)
    annotations = dict(component.get("annotations") or {})
    annotations.pop(c.ANN_DEPLOYMENT_MODE, None)
    if container is not None and ctx.component in (c.ENGINE, c.DECODER):
        if ctx.model is not None:
            _add_model(spec, container, ctx.model)
        gpu_count = gpus(container)
        if gpu_count:
            set_env(container, c.ENV_PARALLELISM_SIZE, str(gpu_count * pods_per_instance), overwrite=True)
    if container is not None and ctx.component == c.ROUTER:
        for key, value in sorted((component.get("config") or {}).items()):
            set_env(container, key, str(value), overwrite=True)
        spec["serviceAccountName"] = naming.router_rbac_name(ctx.isvc)
    _add_rdma(spec, annotations)
    if not spec.get("schedulerName") and ctx.runtime_scheduler:
        spec["schedulerName"] = ctx.runtime_scheduler

    # Kueue's queue only for pods that request an accelerator, as OME does (quotaAcceleratorResources): a router
    # must not wait in a GPU queue.
    labels = {k: v for k, v in ctx.isvc_labels.items() if k in PROPAGATED_ISVC_LABELS and _accelerated(spec)}
    labels.update(component.get("labels") or {})
    labels.update({c.LABEL_ISVC: ctx.isvc, c.LABEL_COMPONENT: ctx.component,
                   c.LABEL_APP: naming.replica_name(ctx.isvc, ctx.component)[:63].rstrip("-")})
    if ctx.runtime_name:
        labels[c.LABEL_SERVING_RUNTIME] = ctx.runtime_name[:63]
    if ctx.pairing_protocol and ctx.component in (c.ENGINE, c.DECODER):
        labels[c.LABEL_PAIRING_PROTOCOL] = ctx.pairing_protocol
    if ctx.model is not None:
        labels[c.LABEL_BASE_MODEL_NAME] = ctx.model.name[:63]
        labels[c.LABEL_BASE_MODEL_TYPE] = "Serving"
        if ctx.model.spec.vendor:
            labels[c.LABEL_BASE_MODEL_VENDOR] = ctx.model.spec.vendor[:63]
        annotations[c.ANN_BASE_MODEL_NAME] = ctx.model.name
        if ctx.model.spec.vendor:
            annotations[c.ANN_BASE_MODEL_VENDOR] = ctx.model.spec.vendor
        fmt = ctx.model.spec.model_format
        annotations[c.ANN_BASE_MODEL_FORMAT] = (fmt.name or "") if fmt else ""
        annotations[c.ANN_BASE_MODEL_FORMAT_VERSION] = (fmt.version or "") if fmt else ""
    if ctx.runtime_name:
        annotations[c.ANN_SERVING_RUNTIME] = ctx.runtime_name
    metadata: JSONDict = {"labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": spec}


def runners(ctx: TemplateContext, component: JSONDict) -> list[JSONDict]:
    """The runners (name, size, template) of a merged, defaulted component."""
    if not is_multi_pod(component):
        return [{"name": c.RUNNER_DEFAULT, "size": 1, "template": _template(ctx, component, None, 1)}]
    workers = worker_size(component)
    pods = 1 + workers
    worker = _template(ctx, component, component.get("worker") or {}, pods)
    if component.get("topologyKey") and ctx.component in (c.ENGINE, c.DECODER):
        worker["spec"] = with_leader_affinity(worker["spec"], ctx, str(component["topologyKey"]))
    return [
        {"name": c.RUNNER_LEADER, "size": 1,
         "template": _template(ctx, component, component.get("leader") or {}, pods)},
        {"name": c.RUNNER_WORKER, "size": workers, "template": worker},
    ]


def with_leader_affinity(spec: JSONDict, ctx: TemplateContext, topology_key: str) -> JSONDict:
    """`topologyKey` (OME's scheduler page): a required pod affinity that keeps each worker on a node in its own
    leader's domain. The leader is found by the Instance's index and incarnation, which `matchLabelKeys` takes from
    the worker's own labels, so the template stays the same for every Instance (and a change of the key is a new
    revision, as OME rolls it)."""
    out = copy.deepcopy(spec)
    # A null at any level (which the core types allow) reads as absent.
    affinity = out["affinity"] = out.get("affinity") or {}
    pod_affinity = affinity["podAffinity"] = affinity.get("podAffinity") or {}
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    terms = pod_affinity[key] = list(pod_affinity.get(key) or [])
    terms.append({
        "labelSelector": {"matchLabels": {c.LABEL_ISVC: ctx.isvc, c.LABEL_COMPONENT: ctx.component,
                                          c.LABEL_RUNNER: c.RUNNER_LEADER}},
        "matchLabelKeys": [c.LABEL_INSTANCE_INDEX, c.LABEL_INCARNATION],
        "topologyKey": topology_key,
    })
    return out


def metrics_port_name(runner_list: list[JSONDict]) -> str:
    """The container port a PodMonitor scrapes, as OME picks it: the serving pod's first container's port named
    `metrics`; else that container's first port, when it has a name; else `http`."""
    serving = next((r for r in runner_list if r["name"] in (c.RUNNER_DEFAULT, c.RUNNER_LEADER)), None)
    containers = ((serving or {}).get("template", {}).get("spec") or {}).get("containers") or []
    ports = (containers[0].get("ports") if containers else None) or []
    if any(port.get("name") == "metrics" for port in ports):
        return "metrics"
    return str(ports[0].get("name") or "http") if ports else "http"


def serving_ports(runner_list: list[JSONDict]) -> list[JSONDict]:
    """The ports the component's Service exposes: those of the serving pod's first container (the leader in a
    multi-pod Instance); 8080 when it declares none."""
    serving = next((r for r in runner_list if r["name"] in (c.RUNNER_DEFAULT, c.RUNNER_LEADER)), None)
    containers = ((serving or {}).get("template", {}).get("spec") or {}).get("containers") or []
    ports = (containers[0].get("ports") if containers else None) or []
    out = []
    for port in ports:
        number = port.get("containerPort")
        if number is None:
            continue
        out.append({"name": port.get("name") or f"port-{number}", "port": number, "targetPort": number,
                    "protocol": port.get("protocol") or "TCP"})
    return out or [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}]
