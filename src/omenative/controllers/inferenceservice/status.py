"""The InferenceService's status, from its components' InferenceReplicas. Pure.

`<Component>Ready` follows each OMENative component's Instances (reasons Ready, MinimumAvailable,
InsufficientAvailable, NoReplicas); `Ready` follows the engine alone with ingress off, as in OME; a runtime or
model that cannot be resolved makes `Ready` False with its reason and message.
"""

from __future__ import annotations

from typing import Any

from omenative.api import constants as c
from omenative.api.conditions import condition, settle
from omenative.api.units import resolve_int_or_percent
from omenative.controllers.inferenceservice.desired import Plan

Obj = dict[str, Any]
COMPONENT_CONDITION = {c.ENGINE: "EngineReady", c.DECODER: "DecoderReady", c.ROUTER: "RouterReady"}
LIFECYCLE_FIELDS = ("observedGeneration", "currentRevision", "updateRevision", "labelSelector", "replicas",
                    "readyReplicas", "servingReplicas", "availableReplicas", "updatedReplicas",
                    "updatedReadyReplicas")


def service_url(service: str, namespace: str, port: int, cluster_domain: str) -> str:
    return f"http://{service}.{namespace}.svc.{cluster_domain}" + (f":{port}" if port != 80 else "")


def component_condition(name: str, replica: Obj | None, max_unavailable: Any, now: str) -> Obj:
    kind = COMPONENT_CONDITION[name]
    spec, status = (replica or {}).get("spec") or {}, (replica or {}).get("status") or {}
    desired = int(spec.get("replicas") or 1) if replica is not None else 0
    total = int(status.get("replicas") or 0)
    serving = int(status.get("servingReplicas") or 0)
    ready = int(status.get("readyReplicas") or 0)
    if replica is None:
        return condition(kind, False, "InsufficientAvailable", "0/0 Instances serving, need 1", now)
    if desired == 0:
        return condition(kind, False, "NoReplicas", "Component has no desired Instances", now)
    if serving >= desired and ready >= desired:
        return condition(kind, True, "Ready", "All Instances are Ready", now)
    budget = resolve_int_or_percent(max_unavailable, desired) if max_unavailable is not None else 0
    minimum = max(desired - (budget or 0), 1)
    if serving >= minimum:
        return condition(kind, True, "MinimumAvailable", f"{serving}/{total} Instances serving (min {minimum})", now)
    return condition(kind, False, "InsufficientAvailable", f"{serving}/{total} Instances serving, need {minimum}",
                     now)


def build_status(isvc: Obj, plan: Plan | None, replicas: dict[str, Obj | None], problems: list[tuple[str, str]],
                 now: str, cluster_domain: str = "cluster.local") -> Obj:
    meta = isvc["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    old: Obj = isvc.get("status") or {}
    conditions: list[Obj] = []
    components: Obj = {}
    for part in plan.components if plan else []:
        replica = replicas.get(part.name)
        rolling = ((part.component.get("lifecycle") or {}).get("updateStrategy") or {}).get("rollingUpdate") or {}
        conditions.append(component_condition(part.name, replica, rolling.get("maxUnavailable"), now))
        status = (replica or {}).get("status") or {}
        lifecycle = {k: status[k] for k in LIFECYCLE_FIELDS if k in status}
        lifecycle["conditions"] = list(status.get("conditions") or [])
        replica_name = part.replica["metadata"]["name"]
        components[part.name] = {
            "lifecycle": lifecycle,
            "url": service_url(replica_name, namespace, part.ports[0]["port"], cluster_domain),
            "scaleTargetRef": {"apiVersion": c.API_VERSION, "kind": "InferenceReplica", "name": replica_name},
        }
    conditions.append(condition("IngressReady", True, "IngressDisabled",
                                "ingress creation is disabled; the Service " + name + " fronts the InferenceService",
                                now))
    if problems:
        reason, message = problems[0]
        conditions.append(condition("Ready", False, reason, message, now))
    else:
        engine = next((cond for cond in conditions if cond["type"] == "EngineReady"), None)
        if engine is None:
            conditions.append(condition("Ready", False, "EngineNotOMENative",
                                        "the engine is not run by omenative", now))
        else:
            conditions.append({**engine, "type": "Ready"})
    out: Obj = {"observedGeneration": meta.get("generation"),
                "conditions": settle(conditions, old.get("conditions"))}
    if components:
        out["components"] = components
    if plan is not None and plan.entry is not None:
        url = service_url(name, namespace, plan.entry["spec"]["ports"][0]["port"], cluster_domain)
        out["url"] = url
        out["address"] = {"url": url}
    return out
