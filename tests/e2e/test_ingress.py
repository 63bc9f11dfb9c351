"""Ingress creation (issue 29 item 6) against the local control plane, with the Gateway API's own CRDs
(sigs.k8s.io/gateway-api, hack/lib/versions.sh): turned on for one InferenceService by OME's annotations, the
prefill-decode shape gets an HTTPRoute `{isvc}` to its router on the named Gateway and no Service `{isvc}`;
IngressReady and Ready wait for the Gateway to accept the route; during a canary of the router the route splits
requests across the router's revision Services by the recorded weights; turned off again, the route goes and the
Service `{isvc}` comes back.

No gateway runs on the local control plane: the Gateway's answer (the HTTPRoute's status.parents, which a gateway
controller writes) is written here, as a gateway would. A real gateway routing requests is the real node's part."""

from __future__ import annotations

import json
from typing import Any

from kubernetes_asyncio import client

from tests.conftest import NodeFactory, describe_namespace
from tests.e2e.test_rollouts import canary_phase, get_json, serve, set_images
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.omenative import inline_component, inline_service
from tests.support.wait import wait_for

Obj = dict[str, Any]
GATEWAY = ("gateways", "public")
V1, V2 = "example.invalid/router:1", "example.invalid/router:2"


async def install_gateway_api(control_plane: ControlPlane) -> None:
    kubectl = control_plane.kubectl
    for path in ControlPlane.gateway_api_crd_paths():
        await kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    await kubectl("wait", "--for=condition=Established", "--timeout=60s",
                  *(f"crd/{kind}.gateway.networking.k8s.io" for kind in ("gatewayclasses", "gateways", "httproutes")))
    await kubectl("create", "namespace", GATEWAY[0], check=False)
    for obj in ({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass", "metadata": {"name": "test"},
                 "spec": {"controllerName": "example.invalid/gateway-controller"}},
                {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                 "metadata": {"name": GATEWAY[1], "namespace": GATEWAY[0]},
                 "spec": {"gatewayClassName": "test", "listeners": [{
                     "name": "http", "protocol": "HTTP", "port": 80,
                     "allowedRoutes": {"namespaces": {"from": "All"}}}]}}):
        await kubectl("apply", "-f", "-", stdin=json.dumps(obj))


async def answer_as_the_gateway(control_plane: ControlPlane, namespace: str, name: str) -> None:
    """What a gateway controller writes once it takes the route: Accepted and ResolvedRefs for this generation."""
    route = await get_json(control_plane, "httproute", name, "-n", namespace)
    generation = route["metadata"]["generation"]
    conditions = [{"type": kind, "status": "True", "reason": kind, "message": "", "observedGeneration": generation,
                   "lastTransitionTime": "2026-12-07T00:00:00Z"} for kind in ("Accepted", "ResolvedRefs")]
    status = {"parents": [{"parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                         "namespace": GATEWAY[0], "name": GATEWAY[1]},
                           "controllerName": "example.invalid/gateway-controller", "conditions": conditions}]}
    await control_plane.kubectl("patch", "httproute", name, "-n", namespace, "--subresource=status", "--type=merge",
                                "-p", json.dumps({"status": status}))


async def condition(control_plane: ControlPlane, namespace: str, name: str, kind: str) -> Obj:
    isvc = await get_json(control_plane, "inferenceservice", name, "-n", namespace)
    return next((x for x in (isvc.get("status") or {}).get("conditions") or [] if x["type"] == kind), {})


async def test_ingress_creation_routes_the_router_through_the_gateway_and_follows_a_canary(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    namespace: str,
) -> None:
    kubectl = control_plane.kubectl
    describe = lambda: describe_namespace(api, namespace)  # noqa: E731
    await sim_nodes("gpu")
    await install_gateway_api(control_plane)
    isvc = inline_service("llama-pd", namespace,
                          engine=inline_component(1, image="example.invalid/engine:1", ports=(8080,)),
                          decoder=inline_component(1, image="example.invalid/decoder:1", ports=(8080,)),
                          router=inline_component(4, image=V1, ports=(8080,)))
    isvc["metadata"]["annotations"] = {"ome.io/ingress-disable-creation": "false",
                                       "ome.io/ingress-gateway": "/".join(GATEWAY)}
    isvc["spec"]["rollout"] = {"groups": [{"components": ["router"], "canary": {"steps": [
        {"capacity": "50%", "traffic": 20, "pause": {}}, {"capacity": "100%", "traffic": 100}]}}]}
    await serve(control_plane, api, isvc, {"engine": 1, "decoder": 1, "router": 4})

    async def route() -> Obj | None:
        out = await kubectl("get", "httproute", "llama-pd", "-n", namespace, "-o", "json", check=False)
        return json.loads(out.stdout) if out.returncode == 0 else None

    made = await wait_for(route, timeout=30, what="the HTTPRoute llama-pd", describe=describe)
    assert made["spec"]["parentRefs"] == [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                           "namespace": GATEWAY[0], "name": GATEWAY[1]}]
    assert made["spec"]["hostnames"] == [f"llama-pd.{namespace}.example.com"]
    assert made["spec"]["rules"][0]["backendRefs"] == [{"group": "", "kind": "Service", "name": "llama-pd-router",
                                                        "port": 8080, "weight": 1}]  # the API server's defaults
    entry = await kubectl("get", "service", "llama-pd", "-n", namespace, check=False)
    assert entry.returncode != 0, entry.output  # no Service {isvc} with ingress on, as OME
    # Until the Gateway answers, the service is not Ready, and says why.
    pending = await wait_for(lambda: condition(control_plane, namespace, "llama-pd", "IngressReady"), timeout=30,
                             what="IngressReady", describe=describe)
    assert (pending["status"], pending["reason"]) == ("False", "HTTPRoutePending"), pending
    assert (await condition(control_plane, namespace, "llama-pd", "Ready"))["reason"] == "HTTPRoutePending"

    await answer_as_the_gateway(control_plane, namespace, "llama-pd")
    waited = await kubectl("wait", "--for=condition=Ready", "inferenceservice/llama-pd", "-n", namespace,
                           "--timeout=60s", check=False)
    assert waited.returncode == 0, waited.output + await describe()
    accepted = await condition(control_plane, namespace, "llama-pd", "IngressReady")
    assert accepted["reason"] == "HTTPRouteAccepted", accepted
    status = (await get_json(control_plane, "inferenceservice", "llama-pd", "-n", namespace))["status"]
    assert status["url"] == f"http://llama-pd.{namespace}.example.com", status
    assert status["address"]["url"].startswith(f"http://llama-pd-router.{namespace}.svc."), status

    # A canary of the router: at its first step the route sends 20% to the new revision's Service, 80% to the old.
    await set_images(control_plane, namespace, "llama-pd", V2, "router")

    async def paused() -> Obj | None:
        phase, router = await canary_phase(control_plane, namespace, "llama-pd", "router")
        return router if phase == "Paused" else None

    router = await wait_for(paused, timeout=120, what="the router's canary at its gate", describe=describe)
    canary, stable = router["canary"]["canaryRevisionHash"], router["canary"]["stableRevisionHash"]

    async def split() -> list[tuple[str, int]] | None:
        got = await route()
        refs = ((got or {}).get("spec") or {}).get("rules", [{}])[0].get("backendRefs") or []
        pairs = sorted((r["name"], r.get("weight", 1)) for r in refs)
        return pairs if len(pairs) == 2 else None

    assert await wait_for(split, timeout=30, what="the route split across revisions", describe=describe) == sorted([
        (f"llama-pd-router-rev-{canary}", 20), (f"llama-pd-router-rev-{stable}", 80)])
    # The route changed: the Gateway has not answered for its new generation, so the service waits for it again.
    await wait_for(lambda: _reason(control_plane, namespace, "HTTPRoutePending"), timeout=30,
                   what="IngressReady pending the new generation", describe=describe)
    await answer_as_the_gateway(control_plane, namespace, "llama-pd")
    await wait_for(lambda: _reason(control_plane, namespace, "HTTPRouteAccepted"), timeout=30,
                   what="IngressReady accepted again", describe=describe)

    # Ingress turned off for this service: the route goes, the Service {isvc} comes back.
    await kubectl("annotate", "inferenceservice", "llama-pd", "-n", namespace,
                  "ome.io/ingress-disable-creation=true", "--overwrite")

    async def back() -> bool:
        gone = await kubectl("get", "httproute", "llama-pd", "-n", namespace, check=False)
        entry = await kubectl("get", "service", "llama-pd", "-n", namespace, check=False)
        return gone.returncode != 0 and entry.returncode == 0

    await wait_for(back, timeout=30, what="the route gone and the Service llama-pd back", describe=describe)
    await wait_for(lambda: _reason(control_plane, namespace, "IngressDisabled"), timeout=30,
                   what="IngressReady IngressDisabled", describe=describe)


async def _reason(control_plane: ControlPlane, namespace: str, reason: str) -> bool:
    return (await condition(control_plane, namespace, "llama-pd", "IngressReady")).get("reason") == reason
