"""What an InferenceService should have, from what the caches hold. Pure.

For each declared component whose mode resolves to OMENative: its InferenceReplica (runners built from the merged
runtime + InferenceService component), Services, HorizontalPodAutoscaler, PodDisruptionBudget, and for the router
the ServiceAccount, Role and RoleBinding its service discovery needs; then the entry Service `{isvc}`.
"""

from __future__ import annotations

from typing import Any

import attrs

from omenative.api import constants as c
from omenative.api import naming
from omenative.api.config import ControllerConfig
from omenative.api.defaults import default_component, is_multi_pod
from omenative.api.ingress import BAD_HOST, NO_GATEWAY, NO_GATEWAY_API
from omenative.api.ingress import host as ingress_host
from omenative.api.ingress import settings as ingress_settings
from omenative.api.merge import merge_component
from omenative.api.modes import ModeResolution, resolve_mode
from omenative.api.pod_fields import InvalidSpec, pod_part_problems
from omenative.api.rollout import CANARY_OPEN
from omenative.obj import Obj
from omenative.render import objects
from omenative.render.templates import ModelInfo, TemplateContext, metrics_port_name, runners, serving_ports


@attrs.frozen(kw_only=True)
class RuntimeInfo:
    name: str
    namespaced: bool
    spec: Obj  # the runtime's spec, as written


@attrs.frozen(kw_only=True)
class Inputs:
    isvc: Obj
    runtime: RuntimeInfo | None
    model: ModelInfo | None
    config: ControllerConfig
    pod_monitors: bool = False  # the prometheus-operator's PodMonitor CRD is installed
    scaled_objects: bool = False  # KEDA's ScaledObject CRD is installed
    http_routes: bool = False  # the Gateway API's HTTPRoute CRD is installed
    # The InferenceService's ControllerRevisions (every component's), each of which gets its pair of revision Services
    revisions: tuple[Obj, ...] = ()


@attrs.frozen(kw_only=True)
class ComponentPlan:
    name: str
    mode: ModeResolution
    component: Obj  # merged and defaulted
    multi_pod: bool
    runners: list[Obj]
    ports: list[Obj]
    min_replicas: int
    max_replicas: int
    autoscaler_class: str
    replica: Obj
    bootstrap: Obj
    hpa: Obj | None
    services: list[Obj]
    pdb: Obj
    rbac: list[Obj]
    pod_monitor: Obj | None = None
    scaled_object: Obj | None = None
    # Where the autoscaler block came from, as OME's specSource says: isvc, runtime or default.
    autoscaler_source: str = "default"
    revision_services: list[Obj] = attrs.field(factory=list)  # a pair per revision of the component

    @property
    def keda_missing(self) -> bool:
        """Class KEDA, but KEDA's CRD is not installed: nothing scales the component."""
        return self.autoscaler_class == "KEDA" and self.scaled_object is None

    @property
    def children(self) -> list[Obj]:
        return [*self.services, *self.revision_services, *([self.hpa] if self.hpa else []),
                *([self.scaled_object] if self.scaled_object else []),
                self.pdb, *self.rbac, *([self.pod_monitor] if self.pod_monitor else [])]


@attrs.frozen(kw_only=True)
class Ingress:
    """What ingress creation comes to for one InferenceService: off; on with its HTTPRoute (and the URL its host
    makes); or on but impossible, with IngressReady's reason and message."""

    enabled: bool
    route: Obj | None = None
    gateway: tuple[str, str] | None = None
    url: str | None = None
    backend: tuple[str, int] | None = None  # the entry component's Service and port: the address inside the cluster
    problem: tuple[str, str] | None = None


@attrs.frozen(kw_only=True)
class Plan:
    components: list[ComponentPlan]
    entry: Obj | None
    skipped: dict[str, ModeResolution]  # declared components that are not OMENative
    ingress: Ingress = attrs.field(factory=lambda: Ingress(enabled=False))


def _topology(component: Obj) -> Obj:
    return {"topologyKey": component.get("topologyKey"), "topologySpread": component.get("topologySpread"),
            "topologySpreadKey": component.get("topologySpreadKey")}


def history_annotation(annotations: dict[str, str]) -> int | None:
    """The InferenceService's ome.io/revision-history-limit, which each InferenceReplica carries as its
    revisionHistoryLimit; a value admission would refuse (a stored object from before the webhook) is ignored."""
    value = str(annotations.get(c.ANN_REVISION_HISTORY_LIMIT) or "").strip()
    return int(value) if value.isdigit() and int(value) >= 1 else None


def revision_services(revisions: tuple[Obj, ...], *, isvc: str, namespace: str, component: str,
                      app_protocols: dict[str, str] | None) -> list[Obj]:
    """The revision Services of each of the component's ControllerRevisions, with that revision's own ports and
    leader rule (read from the revision, not from today's spec). A revision being deleted gets none, and neither does
    one whose names would pass 63 characters (admission warns about that name), and neither does one another
    replica owns (a standalone replica's revisions carry its name as `ome.io/inferenceservice`)."""
    out: list[Obj] = []
    for revision in revisions:
        meta = revision.get("metadata") or {}
        labels = meta.get("labels") or {}
        hash_ = labels.get(c.LABEL_REVISION_HASH)
        owners = {(o.get("kind"), o.get("name")) for o in meta.get("ownerReferences") or [] if isinstance(o, dict)}
        if labels.get(c.LABEL_COMPONENT) != component or not hash_ or meta.get("deletionTimestamp") or \
                ("InferenceReplica", naming.replica_name(isvc, component)) not in owners or \
                len(naming.revision_headless_service_name(isvc, component, hash_)) > naming.MAX_DNS_LABEL:
            continue
        runner_list = (revision.get("data") or {}).get("runners")
        try:  # written by omenative, but a ControllerRevision is the user's to edit: one that makes no sense is skipped
            ports = serving_ports(runner_list)  # type: ignore[arg-type]
        except (TypeError, KeyError, AttributeError):
            continue
        out += objects.revision_services(
            isvc=isvc, namespace=namespace, component=component, revision=hash_,
            # No blockOwnerDeletion: it would need the finalizers right on ControllerRevisions, and nothing deletes a
            # revision in the foreground waiting for its Services.
            # The apiVersion is set here: a listed object carries none, and the default is OME's group.
            owner=objects.owner_reference({**revision, "apiVersion": "apps/v1"}, kind="ControllerRevision",
                                          block_owner_deletion=False),
            ports=ports,
            multi_pod=any(r.get("name") == c.RUNNER_LEADER for r in runner_list),  # type: ignore[union-attr]
            app_protocols=app_protocols)
    return out


def build(inputs: Inputs, *, claim_unmoded: bool = False) -> Plan:
    isvc = inputs.isvc
    meta = isvc["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    spec: Obj = isvc.get("spec") or {}
    runtime_spec: Obj = inputs.runtime.spec if inputs.runtime else {}
    owner = objects.owner_reference(isvc)
    plans: list[ComponentPlan] = []
    skipped: dict[str, ModeResolution] = {}
    for comp in c.COMPONENTS:
        own = spec.get(comp)
        if own is None:
            continue
        mode = resolve_mode(spec, runtime_spec, comp)
        if not (mode.omenative or (claim_unmoded and mode.source == "Default")):
            skipped[comp] = mode
            continue
        # Pod-template fields are free-form in the CRDs: one of the wrong type (in the InferenceService, or in a
        # runtime, which no webhook judges) is refused here with its path, before anything reads it.
        wrong = pod_part_problems(own, f"spec.{comp}") + pod_part_problems(
            runtime_spec.get(f"{comp}Config"), f"runtime {inputs.runtime.name if inputs.runtime else ''} "
                                              f"spec.{comp}Config")
        if wrong:
            raise InvalidSpec(wrong)
        merged = merge_component(runtime_spec.get(f"{comp}Config"), own) or {}
        component = default_component(merged, comp, inputs.config)
        multi = is_multi_pod(component)
        ctx = TemplateContext(isvc=name, namespace=namespace, component=comp,
                              isvc_labels=dict(meta.get("labels") or {}),
                              runtime_name=inputs.runtime.name if inputs.runtime else None,
                              runtime_scheduler=runtime_spec.get("schedulerName"),
                              model=inputs.model if comp != c.ROUTER else None,
                              pairing_protocol=(spec.get("rollout") or {}).get("pairingProtocol"))
        runner_list = runners(ctx, component)
        ports = serving_ports(runner_list)
        low, high = component["minReplicas"], component["maxReplicas"]
        autoscaler = component["autoscaler"]
        klass = autoscaler.get("class", "HPA")
        lifecycle = component["lifecycle"]
        replica = objects.inference_replica(
            isvc=name, namespace=namespace, component=comp, owner=owner, runners=runner_list, lifecycle=lifecycle,
            autoscaler=autoscaler, min_ready_seconds=int(lifecycle.get("minReadySeconds") or 0),
            topology=_topology(component) if comp != c.ROUTER else {},
            replicas=low if klass == "None" else None, parent_generation=inputs.isvc["metadata"].get("generation"),
            revision_history_limit=history_annotation(meta.get("annotations") or {}))
        hpa = objects.horizontal_pod_autoscaler(
            isvc=name, namespace=namespace, component=comp, owner=owner, min_replicas=low, max_replicas=high,
            hpa=autoscaler.get("hpa")) if klass == "HPA" else None
        keda = objects.scaled_object(
            isvc=name, namespace=namespace, component=comp, owner=owner, min_replicas=low, max_replicas=high,
            keda=autoscaler.get("keda") or {}) if klass == "KEDA" and inputs.scaled_objects else None
        source = "isvc" if isinstance(own, dict) and own.get("autoscaler") else "runtime" if isinstance(
            runtime_spec.get(f"{comp}Config"), dict) and runtime_spec[f"{comp}Config"].get("autoscaler") else "default"
        plans.append(ComponentPlan(
            name=comp, mode=mode, component=component, multi_pod=multi, runners=runner_list, ports=ports,
            min_replicas=low, max_replicas=high, autoscaler_class=klass, replica=replica,
            bootstrap=objects.inference_replica_bootstrap(isvc=name, namespace=namespace, component=comp,
                                                          owner=owner, replicas=low),
            hpa=hpa, scaled_object=keda, autoscaler_source=source,
            revision_services=revision_services(inputs.revisions, isvc=name, namespace=namespace, component=comp,
                                                app_protocols=component.get("servicePortAppProtocols")),
            services=objects.services(isvc=name, namespace=namespace, component=comp, owner=owner, ports=ports,
                                      multi_pod=multi, app_protocols=component.get("servicePortAppProtocols")),
            pdb=objects.pod_disruption_budget(isvc=name, namespace=namespace, component=comp, owner=owner,
                                              min_available=component.get("minAvailable"),
                                              max_unavailable=component.get("maxUnavailable"),
                                              default_max_unavailable=inputs.config.pdb_max_unavailable),
            rbac=objects.router_rbac(isvc=name, namespace=namespace, owner=owner) if comp == c.ROUTER else [],
            pod_monitor=objects.pod_monitor(isvc=name, namespace=namespace, component=comp, owner=owner,
                                            port=metrics_port_name(runner_list)) if inputs.pod_monitors else None,
        ))
    by_name = {p.name: p for p in plans}
    target = by_name.get(c.ROUTER) or by_name.get(c.ENGINE)
    route = ingress(inputs, target, owner)
    # OME makes the Service {isvc} only while ingress creation is off; here also while the route cannot be made, so
    # that the InferenceService stays reachable.
    entry = objects.entry_service(isvc=name, namespace=namespace, owner=owner, target=target.name,
                                  ports=target.ports, multi_pod=target.multi_pod) \
        if target and route.route is None else None
    return Plan(components=plans, entry=entry, skipped=skipped, ingress=route)


def ingress(inputs: Inputs, target: ComponentPlan | None, owner: Obj) -> Ingress:
    """The HTTPRoute `{isvc}` to the entry component (the router, else the engine, leaders only), or why there is
    none. While a canary of the entry component is open, the route splits requests across its revision Services by
    the weights the canary recorded; otherwise it sends them to the component's Service."""
    meta = inputs.isvc["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    found = ingress_settings(inputs.config, meta.get("annotations"))
    if not found.enabled or target is None:
        return Ingress(enabled=found.enabled and target is not None)
    if not inputs.http_routes:
        return Ingress(enabled=True, problem=(NO_GATEWAY_API, (
            f"ingress creation is on, but the Gateway API's HTTPRoute CRD ({c.HTTPROUTE_CRD}) is not installed; the "
            f"Service {name} fronts the InferenceService")))
    if found.gateway is None:
        return Ingress(enabled=True, problem=(NO_GATEWAY, (
            f"ingress creation is on, but no Gateway is set: set the controller's --ingress-gateway or the "
            f"{c.ANN_INGRESS_GATEWAY} annotation to <namespace>/<name>; the Service {name} fronts the "
            "InferenceService")))
    try:
        hostname = ingress_host(found.template, name, namespace, found.domain)
    except ValueError as exc:
        return Ingress(enabled=True, problem=(BAD_HOST, f"{exc}; the Service {name} fronts the InferenceService"))
    port = int(target.ports[0]["port"])
    backends: list[tuple[str, int, int | None]] = [(naming.replica_name(name, target.name), port, None)]
    recorded = ((inputs.isvc.get("status") or {}).get("components") or {}).get(target.name) or {}
    split: list[tuple[str, int, int | None]] = [
        (str(t.get("revisionName")), port, int(t["percent"])) for t in recorded.get("traffic") or []
             if isinstance(t, dict) and isinstance(t.get("percent"), int) and
             str(t.get("revisionName") or "").startswith(naming.revision_service_name(name, target.name, ""))]
    if recorded.get("rolloutPhase") in CANARY_OPEN and split and all(
            len(f"{rev}-headless") <= naming.MAX_DNS_LABEL for rev, _, _ in split):  # else it has no Services
        backends = split
    route = objects.http_route(isvc=name, namespace=namespace, owner=owner, host=hostname, gateway=found.gateway,
                               backends=backends)
    return Ingress(enabled=True, route=route, gateway=found.gateway, url=f"{found.scheme}://{hostname}",
                   backend=(naming.replica_name(name, target.name), port))


def with_rollout(plan: Plan, outcome: Any) -> Plan:
    """The plan with the rollout's directives (a `rollout.Outcome`) in each InferenceReplica's spec: its pacing and
    the pause. A component without a directive gets neither, so a finished rollout leaves nothing behind."""
    parts = []
    for part in plan.components:
        directive = outcome.directives.get(part.name)
        spec = {k: v for k, v in part.replica["spec"].items() if k not in ("pacing", "paused", "pauseMode")}
        if directive is not None:
            pacing = directive.pacing()
            if pacing:
                spec["pacing"] = pacing
            if directive.paused:
                spec["paused"] = True
                if directive.freeze:
                    spec["pauseMode"] = "Freeze"
        parts.append(attrs.evolve(part, replica={**part.replica, "spec": spec}))
    return attrs.evolve(plan, components=parts)
