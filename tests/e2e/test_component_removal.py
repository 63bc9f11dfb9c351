"""A component taken out of an InferenceService's spec takes everything omenative made for it along: its
InferenceReplica (and so its pods), Services, autoscaler, disruption budget, PodMonitor, and the router's
ServiceAccount, Role and RoleBinding; the other components are untouched. The PodMonitor CRD is installed while
omenative runs: it notices, and makes a PodMonitor per component."""

from __future__ import annotations

import json

from kubernetes_asyncio import client

from tests.conftest import NodeFactory, describe_namespace
from tests.e2e.conftest import wait_gone
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.omenative import inline_component, inline_service
from tests.support.wait import wait_for

KINDS = "inferencereplicas,services,hpa,pdb,serviceaccounts,roles,rolebindings,pods,podmonitors"
async def test_removing_the_router_deletes_what_it_owned_and_leaves_the_engine(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    namespace: str,
) -> None:
    kubectl = control_plane.kubectl
    await sim_nodes("gpu")
    (crd,) = [path for path in ControlPlane.prometheus_operator_crd_paths() if "podmonitors" in path.name]
    await kubectl("apply", "--server-side", "-f", str(crd))
    await kubectl("wait", "--for=condition=Established", "crd/podmonitors.monitoring.coreos.com", "--timeout=60s")
    try:
        await removal(control_plane, api, namespace)
    finally:
        await kubectl("delete", "-f", str(crd), "--ignore-not-found")


async def removal(control_plane: ControlPlane, api: client.ApiClient, namespace: str) -> None:
    kubectl = control_plane.kubectl
    isvc = inline_service("svc", namespace,
                          engine=inline_component(1, 2, image="example.invalid/engine:1", ports=(8080,)),
                          router=inline_component(1, 2, image="example.invalid/router:1", ports=(8080,)))
    await kubectl("apply", "-f", "-", stdin=json.dumps(isvc))
    out = await kubectl("wait", "--for=condition=Ready", "inferenceservice/svc", "-n", namespace, "--timeout=120s",
                        check=False)
    assert out.returncode == 0, out.output + await describe_namespace(api, namespace)

    async def monitored() -> bool:
        got = await kubectl("get", "podmonitors", "-n", namespace, "-o", "name")
        return sorted(got.stdout.split()) == ["podmonitor.monitoring.coreos.com/svc-engine",
                                              "podmonitor.monitoring.coreos.com/svc-router"]

    await wait_for(monitored, timeout=60, what="a PodMonitor per component")
    # Accepted by the PodMonitor CRD's schema as written: the relabelings that give series OME's labels.
    targets = await kubectl("get", "podmonitor", "svc-engine", "-n", namespace, "-o",
                            "jsonpath={.spec.podMetricsEndpoints[0].relabelings[*].targetLabel}")
    assert targets.stdout == "inferenceservice component revision_hash", targets.stdout
    router = await kubectl("get", KINDS, "-n", namespace, "-l", "component=router", "-o", "name")
    made = set(router.stdout.split())
    assert {"inferencereplica.ome.io/svc-router", "serviceaccount/svc-router",
            "role.rbac.authorization.k8s.io/svc-router", "rolebinding.rbac.authorization.k8s.io/svc-router",
            "horizontalpodautoscaler.autoscaling/svc-router", "poddisruptionbudget.policy/svc-router",
            "podmonitor.monitoring.coreos.com/svc-router"} <= made, made
    engine = (await kubectl("get", KINDS, "-n", namespace, "-l", "component=engine", "-o", "name")).stdout.split()

    await kubectl("patch", "inferenceservice", "svc", "-n", namespace, "--type", "json", "-p",
                  '[{"op": "remove", "path": "/spec/router"}]')
    await wait_gone(control_plane, namespace, KINDS, "component=router", timeout=90)
    after = (await kubectl("get", KINDS, "-n", namespace, "-l", "component=engine", "-o", "name")).stdout.split()
    assert after == engine
