"""The objects around a component's Instances: its InferenceReplica, Services, autoscaler, disruption budget,
the router's RBAC, PodGroups and ControllerRevisions. Each builder returns the whole intent for server-side apply."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from omenative.api import constants as c
from omenative.api import naming

JSONDict = dict[str, Any]


def owner_reference(obj: JSONDict, *, kind: str | None = None, controller: bool = True,
                    block_owner_deletion: bool = True) -> JSONDict:
    """`block_owner_deletion` needs the right to set finalizers on the owner (the API server's
    OwnerReferencesPermissionEnforcement); off for an owner whose foreground deletion need not wait for the child."""
    meta = obj["metadata"]
    return {"apiVersion": obj.get("apiVersion", c.API_VERSION), "kind": obj.get("kind") or kind, "name": meta["name"],
            "uid": meta["uid"], "controller": controller, "blockOwnerDeletion": block_owner_deletion}


def controlled_by(obj: JSONDict, uid: str) -> bool:
    """Whether the object's controller owner reference names `uid`."""
    return any(ref.get("uid") == uid and ref.get("controller")
               for ref in (obj.get("metadata") or {}).get("ownerReferences") or [])


def component_labels(isvc: str, component: str) -> dict[str, str]:
    return {c.LABEL_ISVC: isvc, c.LABEL_COMPONENT: component}


def pod_selector(isvc: str, component: str) -> dict[str, str]:
    """Every pod of a component's Instances."""
    return {**component_labels(isvc, component), c.LABEL_MANAGED_BY: c.MANAGED_BY_OMENATIVE}


def serving_selector(isvc: str, component: str, multi_pod: bool) -> dict[str, str]:
    """The pods that serve requests: every pod, or only leaders when Instances have workers."""
    selector = pod_selector(isvc, component)
    if multi_pod:
        selector[c.LABEL_RUNNER] = c.RUNNER_LEADER
    return selector


def label_selector_string(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _meta(name: str, namespace: str, labels: dict[str, str], owner: JSONDict) -> JSONDict:
    return {"name": name, "namespace": namespace, "labels": dict(labels), "ownerReferences": [owner]}


def inference_replica(*, isvc: str, namespace: str, component: str, owner: JSONDict, runners: list[JSONDict],
                      lifecycle: JSONDict, autoscaler: JSONDict, min_ready_seconds: int,
                      topology: JSONDict, replicas: int | None, parent_generation: int | None = None,
                      revision_history_limit: int | None = None) -> JSONDict:
    """The InferenceReplica intent. `replicas` is included only when omenative owns the count (no autoscaler);
    `parent_generation` is the InferenceService generation it was written from."""
    spec: JSONDict = {
        "parentRef": {"name": isvc},
        "component": component,
        "runners": runners,
        "lifecycle": lifecycle,
        "autoscaler": autoscaler,
        "minReadySeconds": min_ready_seconds,
    }
    spec.update({k: v for k, v in topology.items() if v is not None})
    if revision_history_limit is not None:
        spec["revisionHistoryLimit"] = revision_history_limit
    if replicas is not None:
        spec["replicas"] = replicas
    labels = component_labels(isvc, component)
    meta = _meta(naming.replica_name(isvc, component), namespace, labels, owner)
    meta["annotations"] = {c.ANN_CONTROLLER_WRITE: "true"}
    if parent_generation is not None:
        meta["annotations"][c.ANN_PARENT_GENERATION] = str(parent_generation)
    meta["finalizers"] = [c.FINALIZER_TEARDOWN]
    return {"apiVersion": c.API_VERSION, "kind": "InferenceReplica", "metadata": meta, "spec": spec}


def inference_replica_bootstrap(*, isvc: str, namespace: str, component: str, owner: JSONDict,
                                replicas: int) -> JSONDict:
    """What creates a new InferenceReplica: just enough to hold the initial Instance count, so that only this
    one-time write (not omenative's apply, which never sends replicas) owns it until the autoscaler takes over."""
    labels = component_labels(isvc, component)
    meta = _meta(naming.replica_name(isvc, component), namespace, labels, owner)
    meta["annotations"] = {c.ANN_CONTROLLER_WRITE: "true"}
    return {"apiVersion": c.API_VERSION, "kind": "InferenceReplica", "metadata": meta,
            "spec": {"parentRef": {"name": isvc}, "component": component, "replicas": replicas}}


def _service_pair(*, name: str, headless_name: str, namespace: str, labels: dict[str, str], owner: JSONDict,
                  ports: list[JSONDict], serving: dict[str, str], every: dict[str, str],
                  app_protocols: dict[str, str] | None) -> list[JSONDict]:
    with_protocols = [dict(p) | ({"appProtocol": app_protocols[p["name"]]} if app_protocols and
                                  p["name"] in app_protocols else {}) for p in ports]
    main = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": _meta(name, namespace, labels, owner),
        "spec": {"selector": serving, "ports": with_protocols, "type": "ClusterIP"},
    }
    headless = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": _meta(headless_name, namespace, labels, owner),
        "spec": {"selector": every, "clusterIP": "None", "publishNotReadyAddresses": True, "ports": with_protocols},
    }
    return [main, headless]


def services(*, isvc: str, namespace: str, component: str, owner: JSONDict, ports: list[JSONDict],
             multi_pod: bool, app_protocols: dict[str, str] | None = None) -> list[JSONDict]:
    """The component's Service (serving pods) and headless Service (every pod, ready or not, so the leader's
    DNS name resolves as soon as it has an IP)."""
    return _service_pair(name=naming.replica_name(isvc, component),
                         headless_name=naming.headless_service_name(isvc, component), namespace=namespace,
                         labels=component_labels(isvc, component), owner=owner, ports=ports,
                         serving=serving_selector(isvc, component, multi_pod), every=pod_selector(isvc, component),
                         app_protocols=app_protocols)


def revision_services(*, isvc: str, namespace: str, component: str, revision: str, owner: JSONDict,
                      ports: list[JSONDict], multi_pod: bool,
                      app_protocols: dict[str, str] | None = None) -> list[JSONDict]:
    """One revision's pair, `{isvc}-{component}-rev-{hash}` and its `-headless` twin: the component's two Services
    narrowed to the pods labelled with the revision. They are what a canary's analysis queries, what status.traffic
    names, and how a peer reaches the revision it pairs with. `owner` is the revision's ControllerRevision, so the
    pair goes when the revision is pruned."""
    narrowed = {c.LABEL_REVISION_HASH: revision}
    return _service_pair(name=naming.revision_service_name(isvc, component, revision),
                         headless_name=naming.revision_headless_service_name(isvc, component, revision),
                         namespace=namespace, labels={**component_labels(isvc, component), **narrowed}, owner=owner,
                         ports=ports, serving=serving_selector(isvc, component, multi_pod) | narrowed,
                         every=pod_selector(isvc, component) | narrowed, app_protocols=app_protocols)


def entry_service(*, isvc: str, namespace: str, owner: JSONDict, target: str, ports: list[JSONDict],
                  multi_pod: bool) -> JSONDict:
    """The InferenceService's own Service `{isvc}`: the router if there is one, else the engine, leaders only."""
    first = ports[0]
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": _meta(isvc, namespace, {c.LABEL_ISVC: isvc, c.LABEL_COMPONENT: c.COMPONENT_EXTERNAL_SERVICE},
                          owner),
        "spec": {"selector": serving_selector(isvc, target, multi_pod), "type": "ClusterIP",
                 "ports": [{"name": "http", "port": first["port"], "targetPort": first["targetPort"],
                            "protocol": first.get("protocol", "TCP")}]},
    }


def horizontal_pod_autoscaler(*, isvc: str, namespace: str, component: str, owner: JSONDict, min_replicas: int,
                              max_replicas: int, hpa: JSONDict | None) -> JSONDict:
    metrics = (hpa or {}).get("metrics") or [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    spec: JSONDict = {
        "scaleTargetRef": {"apiVersion": c.API_VERSION, "kind": "InferenceReplica",
                           "name": naming.replica_name(isvc, component)},
        "minReplicas": min_replicas, "maxReplicas": max(max_replicas, min_replicas), "metrics": metrics,
    }
    if (hpa or {}).get("behavior"):
        spec["behavior"] = hpa["behavior"]  # type: ignore[index]
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": _meta(naming.replica_name(isvc, component), namespace, component_labels(isvc, component),
                              owner),
            "spec": spec}


# The ScaledObject settings OME copies from a component's `keda` block as they are.
KEDA_SETTINGS = ("triggers", "pollingInterval", "cooldownPeriod", "fallback", "advanced")


def scaled_object(*, isvc: str, namespace: str, component: str, owner: JSONDict, min_replicas: int,
                  max_replicas: int, keda: JSONDict) -> JSONDict:
    """KEDA's ScaledObject of a component, `scaledobject-{isvc}-{component}` as OME names it, scaling the
    InferenceReplica through its scale subresource. An OMENative component keeps at least one Instance: its minimum
    is at least 1, and so is an idle count (dropped when that leaves it no lower than the minimum, which KEDA
    requires)."""
    low = max(min_replicas, 1)
    spec: JSONDict = {
        "scaleTargetRef": {"apiVersion": c.API_VERSION, "kind": "InferenceReplica",
                           "name": naming.replica_name(isvc, component)},
        "minReplicaCount": low, "maxReplicaCount": max(max_replicas, low),
    }
    spec.update({k: keda[k] for k in KEDA_SETTINGS if keda.get(k) is not None})
    idle = keda.get("idleReplicaCount")
    if isinstance(idle, int) and max(idle, 1) < low:
        spec["idleReplicaCount"] = max(idle, 1)
    return {"apiVersion": f"{c.KEDA_GROUP}/v1alpha1", "kind": "ScaledObject",
            "metadata": _meta(scaled_object_name(isvc, component), namespace, component_labels(isvc, component),
                              owner),
            "spec": spec}


def scaled_object_name(isvc: str, component: str) -> str:
    return f"scaledobject-{naming.replica_name(isvc, component)}"


def pod_disruption_budget(*, isvc: str, namespace: str, component: str, owner: JSONDict,
                          min_available: int | str | None, max_unavailable: int | str | None,
                          default_max_unavailable: int | str) -> JSONDict:
    spec: JSONDict = {"selector": {"matchLabels": pod_selector(isvc, component)}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    else:
        spec["maxUnavailable"] = max_unavailable if max_unavailable is not None else default_max_unavailable
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": _meta(naming.replica_name(isvc, component), namespace, component_labels(isvc, component),
                              owner),
            "spec": spec}


# The labels OME's metrics page gives every InferenceService pod's series, from the pod's own labels: canary analysis
# queries and KEDA triggers select by them (`revision_hash` tells a canary's pods from the stable revision's).
SERIES_LABELS = ((c.LABEL_ISVC, "inferenceservice"), (c.LABEL_COMPONENT, "component"),
                 (c.LABEL_REVISION_HASH, "revision_hash"))


def _meta_label(label: str) -> str:
    """Prometheus's Kubernetes service-discovery name of a pod label."""
    return "__meta_kubernetes_pod_label_" + "".join(ch if ch.isalnum() else "_" for ch in label)


def pod_monitor(*, isvc: str, namespace: str, component: str, owner: JSONDict, port: str) -> JSONDict:
    """The prometheus-operator PodMonitor of a component: every pod of it, workers included, at /metrics, its series
    labelled `inferenceservice`, `component` and `revision_hash` as OME's metrics page shows."""
    relabelings = [{"sourceLabels": [_meta_label(label)], "targetLabel": target} for label, target in SERIES_LABELS]
    return {"apiVersion": f"{c.PODMONITOR_GROUP}/v1", "kind": "PodMonitor",
            "metadata": _meta(naming.replica_name(isvc, component), namespace, component_labels(isvc, component),
                              owner),
            "spec": {"selector": {"matchLabels": pod_selector(isvc, component)},
                     "podMetricsEndpoints": [{"port": port, "path": "/metrics", "relabelings": relabelings}]}}


def http_route(*, isvc: str, namespace: str, owner: JSONDict, host: str, gateway: tuple[str, str],
               backends: list[tuple[str, int, int | None]]) -> JSONDict:
    """The InferenceService's HTTPRoute `{isvc}` (ingress on): every path of `host`, through the Gateway `gateway`
    (namespace, name), to `backends`, each (Service, port, weight or None for the Gateway API's default of 1)."""
    refs = [{"name": name, "port": port} | ({"weight": weight} if weight is not None else {})
            for name, port, weight in backends]
    return {"apiVersion": f"{c.GATEWAY_GROUP}/v1", "kind": "HTTPRoute",
            "metadata": _meta(isvc, namespace, {c.LABEL_ISVC: isvc, c.LABEL_COMPONENT: c.COMPONENT_EXTERNAL_SERVICE},
                              owner),
            "spec": {"parentRefs": [{"group": c.GATEWAY_GROUP, "kind": "Gateway", "namespace": gateway[0],
                                     "name": gateway[1]}],
                     "hostnames": [host],
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}], "backendRefs": refs}]}}


def router_rbac(*, isvc: str, namespace: str, owner: JSONDict) -> list[JSONDict]:
    """ServiceAccount, Role and RoleBinding for the router's service discovery (it watches pods by label)."""
    name = naming.router_rbac_name(isvc)
    labels = component_labels(isvc, c.ROUTER)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, namespace, labels, owner)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": _meta(name, namespace, labels, owner),
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": _meta(name, namespace, labels, owner),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
    ]


def revision_hash(runners: list[JSONDict], pairing_protocol: str | None = None, collision_count: int = 0) -> str:
    """A short, stable hash of the runners' templates: equal templates, equal revision."""
    body = json.dumps({"runners": runners, "pairingProtocol": pairing_protocol, "collision": collision_count or None},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()[:8]  # OME's revision hash: eight lowercase hex digits


def controller_revision(*, isvc: str, namespace: str, component: str, owner: JSONDict, revision: str,
                        number: int, runners: list[JSONDict]) -> JSONDict:
    labels = {**component_labels(isvc, component), c.LABEL_REVISION_HASH: revision}
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": _meta(naming.revision_name(isvc, component, revision), namespace, labels, owner),
            "data": {"runners": runners}, "revision": number}


def pod_group(*, isvc: str, namespace: str, component: str, index: int, owner: JSONDict, min_member: int,
              schedule_timeout: int | None, topology_key: str | None) -> JSONDict:
    labels = {**component_labels(isvc, component), c.LABEL_INSTANCE_INDEX: str(index),
              c.LABEL_MANAGED_BY: c.MANAGED_BY_OMENATIVE}
    meta = _meta(naming.podgroup_name(isvc, component, index), namespace, labels, owner)
    if topology_key:
        meta["annotations"] = {c.ANN_TOPOLOGY_KEY: topology_key}
    spec: JSONDict = {"minMember": min_member}
    if schedule_timeout is not None:
        spec["scheduleTimeoutSeconds"] = schedule_timeout
    return {"apiVersion": f"{c.PODGROUP_GROUP}/{c.PODGROUP_VERSION}", "kind": "PodGroup", "metadata": meta,
            "spec": spec}


def migration_audit_name(isvc: str) -> str:
    return f"{isvc}-ome-migration-audit"


MIGRATION_AUDIT_KEY = "history.json"
MIGRATION_AUDIT_LIMIT = 200


def merge_migration_history(text: str | None, rows: list[JSONDict], limit: int = MIGRATION_AUDIT_LIMIT) -> str:
    """The audit ConfigMap's history.json with `rows` upserted by request ID: entries in the order first seen, the
    last `limit` ended ones kept (those still Started are never dropped). A history that does not parse is started
    over rather than blocking every migration."""
    try:
        loaded = json.loads(text) if text else []
    except ValueError:
        loaded = []
    entries: list[JSONDict] = [e for e in loaded if isinstance(e, dict) and isinstance(e.get("id"), str)] \
        if isinstance(loaded, list) else []
    at = {e["id"]: i for i, e in enumerate(entries)}
    for row in rows:
        if row["id"] in at:
            old = entries[at[row["id"]]]
            entries[at[row["id"]]] = {**old, **row, "acceptedAt": old.get("acceptedAt") or row.get("acceptedAt")}
        else:
            at[row["id"]] = len(entries)
            entries.append(dict(row))
    ended = [i for i, e in enumerate(entries) if e.get("phase") != "Started"]
    drop = set(ended[: max(len(ended) - limit, 0)])
    return json.dumps([e for i, e in enumerate(entries) if i not in drop], separators=(",", ":"))


def migration_audit(*, isvc: str, namespace: str, owner: JSONDict | None, history: str) -> JSONDict:
    meta: JSONDict = {"name": migration_audit_name(isvc), "namespace": namespace,
                      "labels": {c.LABEL_ISVC: isvc, c.LABEL_MANAGED_BY: c.MANAGED_BY_OMENATIVE}}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {MIGRATION_AUDIT_KEY: history}}
