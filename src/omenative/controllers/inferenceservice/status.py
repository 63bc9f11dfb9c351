"""The InferenceService's status, from its components' InferenceReplicas. Pure.

`<Component>Ready` follows each OMENative component's Instances with the same computation as the InferenceReplica's
own `Ready` (`omenative.api.readiness`); `Ready` follows the engine alone with ingress off, as in OME; a runtime or
model that cannot be resolved makes `Ready` False with its reason and message; a child the API server refused to
write (a quota, an admission webhook, a full Service range) makes `Reconciled` False, naming it.

Generations: the status, and each of its conditions, carry the generation that the components' InferenceReplicas
reflect. Until every InferenceReplica holds the InferenceService's current generation (`ome.io/parent-generation`)
and its own status observed its spec, the conditions keep the generation they were computed for, so
`kubectl wait --for=condition=Ready` right after `kubectl apply` waits for the new generation.
"""

from __future__ import annotations

from typing import Any

from omenative.api import constants as c
from omenative.api.conditions import condition, settle
from omenative.api.ingress import route_readiness
from omenative.api.readiness import Serving, component_ready, desired_instances
from omenative.api.rollout import CANARY_OPEN
from omenative.api.traffic import rolled_out_fields
from omenative.controllers.inferenceservice.desired import ComponentPlan, Plan
from omenative.obj import Obj
from omenative.observe.pods import is_true

COMPONENT_CONDITION = {c.ENGINE: "EngineReady", c.DECODER: "DecoderReady", c.ROUTER: "RouterReady"}
LIFECYCLE_FIELDS = ("observedGeneration", "currentRevision", "updateRevision", "labelSelector", "replicas",
                    "readyReplicas", "servingReplicas", "availableReplicas", "updatedReplicas",
                    "updatedReadyReplicas", "rolloutHold")


def service_url(service: str, namespace: str, port: int, cluster_domain: str) -> str:
    return f"http://{service}.{namespace}.svc.{cluster_domain}" + (f":{port}" if port != 80 else "")


def reflects(replica: Obj | None, generation: int | None) -> bool:
    """The InferenceReplica carries the InferenceService's generation and its status observed its own spec."""
    if replica is None:
        return False
    meta = replica["metadata"]
    parent = (meta.get("annotations") or {}).get(c.ANN_PARENT_GENERATION)
    status = replica.get("status") or {}
    return parent == str(generation) and status.get("observedGeneration") == meta.get("generation")


def component_condition(name: str, replica: Obj | None, max_unavailable: Any, now: str,
                        bounds: tuple[int, int] | None = None) -> Obj:
    """`bounds`: the component's (minReplicas, maxReplicas). The autoscaler moves the InferenceReplica's count into
    them on its next sync; until it has, the condition already judges against them, so a raised minReplicas is not
    reported Ready on the old count."""
    kind = COMPONENT_CONDITION[name]
    if replica is None:
        return condition(kind, False, "InsufficientAvailable", "0/0 Instances serving, need 1", now)
    status = replica.get("status") or {}
    desired = desired_instances(replica)
    if bounds is not None:
        desired = min(max(desired, bounds[0]), max(bounds[1], bounds[0]))
    serving = Serving(desired=desired, total=int(status.get("replicas") or 0),
                      ready=int(status.get("readyReplicas") or 0), serving=int(status.get("servingReplicas") or 0),
                      max_unavailable=max_unavailable,
                      established=is_true(replica, "Ready"))
    ok, reason, message = component_ready(serving)
    return condition(kind, ok, reason, message, now)


MANAGED_BY = {"HPA": "ome", "KEDA": "ome", "External": "external", "None": "none"}
KEDA_NOT_INSTALLED = "KEDANotInstalled"


def keda_missing_message(component: str) -> str:
    return (f"{component}: autoscaler class KEDA needs KEDA's ScaledObject CRD ({c.SCALEDOBJECT_CRD}), which is not "
            "installed: no ScaledObject is created and nothing scales the component, which keeps its Instance count; "
            "install KEDA (omenative notices it without a restart), or use class HPA, External or None")


def autoscaler_status(part: ComponentPlan, replica: Obj | None) -> Obj:
    """OME's status.components.<component>.autoscaler: the class in effect, who scales, where the block came from,
    and the counts the autoscaler set (the InferenceReplica's desired and current Instances, which are its
    target's) while OME's own autoscaler scales it."""
    managed = MANAGED_BY.get(part.autoscaler_class, "none")
    out: Obj = {"class": part.autoscaler_class, "managedBy": managed, "specSource": part.autoscaler_source}
    if managed == "ome" and replica is not None and not part.keda_missing:
        current = int(((replica.get("status") or {}).get("replicas")) or 0)
        desired = int(((replica.get("spec") or {}).get("replicas")) or 0)
        out.update({k: v for k, v in (("currentReplicas", current), ("desiredReplicas", desired)) if v})
    if part.keda_missing:
        out["conditions"] = [{"type": "Ready", "status": "False", "reason": KEDA_NOT_INSTALLED,
                              "message": keda_missing_message(part.name)}]
    return out


def rollout_hold(old_lifecycle: Obj, gate: str, reason: str, target: str, now: str) -> Obj:
    """A rollout group's hold on a component; `since` is kept while the gate and target stay."""
    old = old_lifecycle.get("rolloutHold") or {}
    since = old.get("since") if old.get("gate") == gate and old.get("target") == target and old.get("since") \
        else now
    return {"gate": gate, "reason": reason, "target": target, "since": since}


def build_status(isvc: Obj, plan: Plan | None, replicas: dict[str, Obj | None], problems: list[tuple[str, str]],
                 now: str, cluster_domain: str = "cluster.local",
                 refused: list[tuple[str, str, str]] | None = None, rollout: Any = None,
                 route: Obj | None = None) -> Obj:
    """`refused`: the children the API server would not write, as (kind, name, the API's message); `rollout`: the
    rollout groups' outcome (`rollout.Outcome`), whose holds, canary state and conditions the status carries;
    `route`: the HTTPRoute as cached, while ingress creation is on."""
    meta = isvc["metadata"]
    name, namespace, generation = meta["name"], meta["namespace"], meta.get("generation")
    old: Obj = isvc.get("status") or {}
    conditions: list[Obj] = []
    components: Obj = {}
    # A canary moves the unit's Instances step by step: no component of it has rolled out until the canary ends.
    canary_open = rollout is not None and any(
        fields.get("rolloutPhase") in CANARY_OPEN for fields in rollout.components.values())
    for part in plan.components if plan else []:
        replica = replicas.get(part.name)
        rolling = ((part.component.get("lifecycle") or {}).get("updateStrategy") or {}).get("rollingUpdate") or {}
        conditions.append(component_condition(part.name, replica, rolling.get("maxUnavailable"), now,
                                              (part.min_replicas, part.max_replicas)))
        status = (replica or {}).get("status") or {}
        lifecycle = {k: status[k] for k in LIFECYCLE_FIELDS if k in status}
        lifecycle["conditions"] = list(status.get("conditions") or [])
        replica_name = part.replica["metadata"]["name"]
        directive = rollout.directives.get(part.name) if rollout is not None else None
        if directive is not None and directive.hold is not None:
            old_lifecycle = ((old.get("components") or {}).get(part.name) or {}).get("lifecycle") or {}
            target = str(status.get("updateRevision") or replica_name)
            gate, reason = directive.hold
            lifecycle["rolloutHold"] = rollout_hold(old_lifecycle, gate, reason, target, now)
        old_component = (old.get("components") or {}).get(part.name) or {}
        components[part.name] = {
            "lifecycle": lifecycle,
            "autoscaler": autoscaler_status(part, replica),
            "url": service_url(replica_name, namespace, part.ports[0]["port"], cluster_domain),
            "scaleTargetRef": {"apiVersion": c.API_VERSION, "kind": "InferenceReplica", "name": replica_name},
            **rolled_out_fields(old_component, status, name, part.name, canary_open),
            # The replica's share of serving Instances per revision; a canary's recorded weights replace it below.
            **({"traffic": status["traffic"]} if status.get("traffic") else {}),
            **(rollout.components.get(part.name) or {} if rollout is not None else {}),
        }
    missing = [part.name for part in plan.components if part.keda_missing] if plan else []
    if missing:
        conditions.append(condition("AutoscalerReady", False, KEDA_NOT_INSTALLED,
                                    "; ".join(keda_missing_message(name) for name in missing), now))
    ingress = plan.ingress if plan is not None else None
    if ingress is None or not ingress.enabled:
        conditions.append(condition("IngressReady", True, "IngressDisabled", "ingress creation is disabled; the "
                                    "Service " + name + " fronts the InferenceService", now))
    elif ingress.problem is not None:
        conditions.append(condition("IngressReady", False, *ingress.problem, now))
    else:
        assert ingress.gateway is not None
        conditions.append(condition("IngressReady", *route_readiness(route, ingress.gateway), now))
    if refused:
        kind, child, message = refused[0]
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        conditions.append(condition("Reconciled", False, "ComponentReconcileError",
                                    f"the API server refused {kind} {child}: {message}{more}", now))
    else:
        conditions.append(condition("Reconciled", True, "Reconciled", "every object of the InferenceService is "
                                    "written", now))
    for kind, ok, reason, message in (rollout.conditions if rollout is not None else []):
        conditions.append(condition(kind, ok, reason, message, now))
    if problems:
        reason, message = problems[0]
        conditions.append(condition("Ready", False, reason, message, now))
    else:
        # Ready = EngineReady and IngressReady, the first that is not True giving its reason, as OME's.
        engine = next((cond for cond in conditions if cond["type"] == "EngineReady"), None)
        routed = next(cond for cond in conditions if cond["type"] == "IngressReady")
        if engine is None:
            conditions.append(condition("Ready", False, "EngineNotOMENative",
                                        "the engine is not run by omenative", now))
        elif engine["status"] == "True" and routed["status"] != "True":
            conditions.append({**routed, "type": "Ready"})
        else:
            conditions.append({**engine, "type": "Ready"})
    # The generation these conditions are true for: the current one once every component reflects it (or when the
    # spec cannot be acted on at all), else the one the last status was computed for.
    current = bool(problems) or not plan or all(reflects(replicas.get(p.name), generation) for p in plan.components)
    observed = generation if current else old.get("observedGeneration")
    if observed is not None:
        conditions = [{**cond, "observedGeneration": observed} for cond in conditions]
    out: Obj = {"conditions": settle(conditions, old.get("conditions"))}
    if observed is not None:
        out["observedGeneration"] = observed
    if components:
        out["components"] = components
        # OME's alias of the entrypoint unit's canary (the router's, else the engine's), for older readers.
        entry = components.get(c.ROUTER) or components.get(c.ENGINE) or {}
        if entry.get("canary"):
            out["canary"] = entry["canary"]
    if rollout is not None:
        out.update(rollout.status)
    if plan is not None and plan.entry is not None:
        url = service_url(name, namespace, plan.entry["spec"]["ports"][0]["port"], cluster_domain)
        out["url"] = url
        out["address"] = {"url": url}
    elif ingress is not None and ingress.url is not None and ingress.backend is not None:
        # Through the Gateway; inside the cluster, the entry component's Service (the route's backend).
        out["url"] = ingress.url
        service, port = ingress.backend
        out["address"] = {"url": service_url(service, namespace, port, cluster_domain)}
    return out
