"""Ingress (issue 29 item 6): the settings and their ome.io/ingress-* overrides, the host template, the HTTPRoute
to the entry component (split across revision Services during a canary), and IngressReady from the Gateway's
answer, table by table."""

from __future__ import annotations

import copy
from typing import Any

import attrs
import pytest

from omenative.api import constants as c
from omenative.api import ingress
from omenative.api.config import ControllerConfig
from omenative.api.validation import Admission, validate_inference_service
from omenative.controllers.inferenceservice import desired
from omenative.controllers.inferenceservice.status import build_status

Obj = dict[str, Any]
ON = ControllerConfig(ingress_creation=True, ingress_gateway="gateways/public")
NOW = "2026-12-07T12:00:00Z"


@pytest.mark.parametrize(("config", "annotations", "expected"), [
    (ControllerConfig(), {}, (False, None, "example.com", "http")),  # off by default, as OME ships it
    (ON, {}, (True, ("gateways", "public"), "example.com", "http")),
    (ON, {c.ANN_INGRESS_DISABLE_CREATION: "true"}, (False, ("gateways", "public"), "example.com", "http")),
    (ControllerConfig(), {c.ANN_INGRESS_DISABLE_CREATION: "false"}, (True, None, "example.com", "http")),
    (ControllerConfig(), {c.ANN_INGRESS_DISABLE_CREATION: "no"}, (True, None, "example.com", "http")),  # any other
    (ON, {c.ANN_INGRESS_DOMAIN: "llm.corp", c.ANN_INGRESS_URL_SCHEME: "https",
          c.ANN_INGRESS_GATEWAY: "edge/internal"}, (True, ("edge", "internal"), "llm.corp", "https")),
    (ON, {c.ANN_INGRESS_DOMAIN: "", c.ANN_INGRESS_GATEWAY: ""}, (True, ("gateways", "public"), "example.com",
                                                                 "http")),  # empty: ignored
])
def test_settings_and_their_overrides(config: ControllerConfig, annotations: Obj,
                                      expected: tuple[Any, ...]) -> None:
    found = ingress.settings(config, annotations)
    assert (found.enabled, found.gateway, found.domain, found.scheme) == expected
    assert found.ignored == ()


def test_values_that_cannot_be_used_are_ignored_and_said() -> None:
    found = ingress.settings(ON, {c.ANN_INGRESS_URL_SCHEME: "ftp", c.ANN_INGRESS_GATEWAY: "no-slash"})
    assert (found.scheme, found.gateway) == ("http", None)
    assert found.ignored == ("ome.io/ingress-url-scheme: 'ftp' is neither http nor https; http is used",
                             "ome.io/ingress-gateway: 'no-slash' is not <namespace>/<name>")


@pytest.mark.parametrize(("template", "made"), [
    ("{{ .Name }}.{{ .Namespace }}.{{ .IngressDomain }}", "llama-pd.llama-demo.example.com"),
    ("{{.Name}}-{{.Namespace}}.{{.IngressDomain}}", "llama-pd-llama-demo.example.com"),
    ("{{ .Name }}.{{ .Annotations }}", ValueError("uses .Annotations")),
    ("{{ .Name }}_x.{{ .IngressDomain }}", ValueError("is not a DNS name")),
])
def test_the_host_template(template: str, made: Any) -> None:
    if isinstance(made, ValueError):
        with pytest.raises(ValueError, match=str(made)):
            ingress.host(template, "llama-pd", "llama-demo", "example.com")
    else:
        assert ingress.host(template, "llama-pd", "llama-demo", "example.com") == made


def pd_service(**annotations: str) -> Obj:
    container = {"name": "ome-container", "image": "i", "ports": [{"name": "http", "containerPort": 8080}]}
    return {"apiVersion": c.API_VERSION, "kind": "InferenceService",
            "metadata": {"name": "llama-pd", "namespace": "llama-demo", "uid": "u", "generation": 1,
                         "annotations": annotations},
            "spec": {"deploymentMode": "OMENative", "engine": {"containers": [container]},
                     "decoder": {"containers": [container]}, "router": {"containers": [container]}}}


def plan_of(isvc: Obj, config: ControllerConfig = ON, routes: bool = True) -> desired.Plan:
    return desired.build(desired.Inputs(isvc=isvc, runtime=None, model=None, config=config, http_routes=routes))


def test_with_ingress_on_the_route_goes_to_the_router_and_the_entry_service_is_not_made() -> None:
    plan = plan_of(pd_service())
    assert plan.entry is None  # OME makes the Service {isvc} only with ingress off
    route = plan.ingress.route
    assert route is not None and route["metadata"]["name"] == "llama-pd"
    assert route["spec"]["parentRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                            "namespace": "gateways", "name": "public"}]
    assert route["spec"]["hostnames"] == ["llama-pd.llama-demo.example.com"]
    assert route["spec"]["rules"][0]["backendRefs"] == [{"name": "llama-pd-router", "port": 8080}]
    assert route["metadata"]["ownerReferences"][0]["uid"] == "u"
    assert plan.ingress.url == "http://llama-pd.llama-demo.example.com"
    # Without a router: the engine's Service, which selects only leaders when Instances have workers.
    isvc = pd_service()
    del isvc["spec"]["router"], isvc["spec"]["decoder"]
    isvc["spec"]["engine"] |= {"leader": {}, "worker": {"size": 1}}
    engine_route = plan_of(isvc).ingress.route
    assert engine_route is not None
    assert engine_route["spec"]["rules"][0]["backendRefs"] == [{"name": "llama-pd-engine", "port": 8080}]
    engine_service = next(s for p in plan_of(isvc).components for s in p.services
                          if s["metadata"]["name"] == "llama-pd-engine")
    assert engine_service["spec"]["selector"][c.LABEL_RUNNER] == c.RUNNER_LEADER


def test_during_a_canary_of_the_entry_component_the_route_follows_the_recorded_weights() -> None:
    isvc = pd_service()
    isvc["status"] = {"components": {"router": {"rolloutPhase": "Paused", "traffic": [
        {"revisionName": "llama-pd-router-rev-bbbb2222", "percent": 20, "tag": "canary"},
        {"revisionName": "llama-pd-router-rev-aaaa1111", "percent": 80, "tag": "stable"}]}}}
    route = plan_of(isvc).ingress.route
    assert route is not None
    assert route["spec"]["rules"][0]["backendRefs"] == [
        {"name": "llama-pd-router-rev-bbbb2222", "port": 8080, "weight": 20},
        {"name": "llama-pd-router-rev-aaaa1111", "port": 8080, "weight": 80}]
    isvc["status"]["components"]["router"]["rolloutPhase"] = "Stable"  # completed: back to the component
    stable = plan_of(isvc).ingress.route
    assert stable is not None and stable["spec"]["rules"][0]["backendRefs"] == [{"name": "llama-pd-router",
                                                                                  "port": 8080}]


@pytest.mark.parametrize(("config", "routes", "annotations", "reason"), [
    (ON, False, {}, ingress.NO_GATEWAY_API),
    (ControllerConfig(ingress_creation=True), True, {}, ingress.NO_GATEWAY),
    (ON, True, {c.ANN_INGRESS_DOMAIN_TEMPLATE: "{{ .Labels }}"}, ingress.BAD_HOST),
])
def test_ingress_that_cannot_be_made_keeps_the_entry_service_and_says_why(
        config: ControllerConfig, routes: bool, annotations: dict[str, str], reason: str) -> None:
    isvc = pd_service(**annotations)
    plan = plan_of(isvc, config, routes)
    assert plan.ingress.route is None and plan.entry is not None
    status = build_status(isvc, plan, {}, [], NOW)
    (cond,) = [x for x in status["conditions"] if x["type"] == "IngressReady"]
    assert (cond["status"], cond["reason"]) == ("False", reason)
    assert "fronts the InferenceService" in cond["message"]


def route_with(conditions: list[Obj], generation: int = 2) -> Obj:
    return {"metadata": {"name": "llama-pd", "namespace": "llama-demo", "generation": generation},
            "status": {"parents": [{"parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                                  "namespace": "gateways", "name": "public"},
                                    "controllerName": "traefik.io/gateway-controller",
                                    "conditions": conditions}]}}


def cond(kind: str, status: str, reason: str, generation: int = 2, message: str = "") -> Obj:
    return {"type": kind, "status": status, "reason": reason, "message": message, "observedGeneration": generation}


@pytest.mark.parametrize(("route", "expected"), [
    (None, (False, ingress.PENDING)),
    (route_with([]), (False, ingress.PENDING)),
    (route_with([cond("Accepted", "True", "Accepted", generation=1)]), (False, ingress.PENDING)),  # stale
    (route_with([cond("Accepted", "True", "Accepted"), cond("ResolvedRefs", "True", "ResolvedRefs")]),
     (True, ingress.ACCEPTED)),
    (route_with([cond("Accepted", "False", "NotAllowedByListeners", message="namespace not allowed")]),
     (False, ingress.NOT_ACCEPTED)),
    (route_with([cond("Accepted", "True", "Accepted"), cond("ResolvedRefs", "False", "BackendNotFound")]),
     (False, ingress.REFS_NOT_RESOLVED)),
])
def test_ingress_ready_follows_the_gateways_answer(route: Obj | None, expected: tuple[bool, str]) -> None:
    ok, reason, message = ingress.route_readiness(route, ("gateways", "public"))
    assert (ok, reason) == expected
    assert "Gateway gateways/public" in message
    if reason == ingress.NOT_ACCEPTED:
        assert message.endswith("NotAllowedByListeners: namespace not allowed")


def test_ready_needs_the_route_accepted_and_the_url_is_the_gateways() -> None:
    isvc = pd_service()
    plan = plan_of(isvc)
    ready = {"metadata": {"annotations": {c.ANN_PARENT_GENERATION: "1"}, "generation": 1},
             "status": {"observedGeneration": 1, "replicas": 1, "readyReplicas": 1, "servingReplicas": 1,
                        "availableReplicas": 1, "updatedReplicas": 1, "updatedReadyReplicas": 1,
                        "conditions": [{"type": "Ready", "status": "True", "reason": "AllInstancesReady"}]}}
    replicas = {name: copy.deepcopy(ready) for name in ("engine", "decoder", "router")}
    pending = build_status(isvc, plan, replicas, [], NOW)
    by_type = {x["type"]: x for x in pending["conditions"]}
    assert by_type["EngineReady"]["status"] == "True"
    assert (by_type["Ready"]["status"], by_type["Ready"]["reason"]) == ("False", ingress.PENDING)
    assert pending["url"] == "http://llama-pd.llama-demo.example.com"
    assert pending["address"]["url"].startswith("http://llama-pd-router.llama-demo.svc.cluster.local")
    accepted = route_with([cond("Accepted", "True", "Accepted", generation=1)], generation=1)
    done = {x["type"]: x for x in build_status(isvc, plan, replicas, [], NOW, route=accepted)["conditions"]}
    assert (done["IngressReady"]["reason"], done["Ready"]["status"]) == (ingress.ACCEPTED, "True")
    off = attrs.evolve(plan, ingress=desired.Ingress(enabled=False))
    plain = {x["type"]: x for x in build_status(isvc, off, replicas, [], NOW)["conditions"]}
    assert plain["IngressReady"]["reason"] == "IngressDisabled"


def test_admission_warns_of_ingress_values_it_cannot_use() -> None:
    isvc = pd_service(**{c.ANN_INGRESS_URL_SCHEME: "ftp", c.ANN_INGRESS_DOMAIN_TEMPLATE: "{{ .Labels }}.x",
                         c.ANN_INGRESS_DISABLE_CREATION: "false"})
    findings = validate_inference_service(isvc, Admission(config=ControllerConfig()))
    assert findings.allowed
    ingress_warnings = [w for w in findings.warnings if w.startswith("ingress:")]
    assert len(ingress_warnings) == 2, findings.warnings
    assert "uses .Labels" in ingress_warnings[1] and ingress.BAD_HOST in ingress_warnings[1]
