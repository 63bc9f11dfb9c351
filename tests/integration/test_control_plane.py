"""The real parts of the local control plane, one test each.

Every test here would fail if the part it names were missing or faked: the HPA controller and the scale
subresource, the garbage collector, kubelet-like readiness gates and the EndpointSlice controller, the coscheduling
scheduler and the PodGroup controller, KWOK's simulated GPU nodes, the fault helpers, and server-side apply.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio import client

from tests.conftest import NodeFactory, describe_namespace
from tests.support import faults
from tests.support.nodes import GPU_RESOURCE
from tests.support.wait import wait_for

GROUP = "sim.omenative.io"
WIDGETS = "widgets"
SERVING_GATE = "ome.io/serving"
GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}


def widget_crd() -> dict[str, Any]:
    """A small custom resource with status and scale subresources, like InferenceReplica's."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{WIDGETS}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": WIDGETS, "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {
                            "replicas": {"type": "integer"},
                            "color": {"type": "string"},
                            "size": {"type": "string"},
                        }},
                        "status": {"type": "object", "properties": {
                            "replicas": {"type": "integer"},
                            "labelSelector": {"type": "string"},
                        }},
                    },
                }},
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas",
                        "labelSelectorPath": ".status.labelSelector",
                    },
                },
            }],
        },
    }


@pytest_asyncio.fixture(scope="module")
async def widgets(api: client.ApiClient) -> AsyncIterator[None]:
    ext = client.ApiextensionsV1Api(api)
    crd = widget_crd()
    await ext.patch_custom_resource_definition(
        crd["metadata"]["name"], crd, field_manager="omenative-test", force=True,
        _content_type="application/apply-patch+yaml",
    )

    async def established() -> bool:
        got = await ext.read_custom_resource_definition(crd["metadata"]["name"])
        return any(c.type == "Established" and c.status == "True" for c in got.status.conditions or [])

    await wait_for(established, timeout=30, what="the Widget CRD to be established")
    yield


def pod_manifest(name: str, *, labels: dict[str, str] | None = None, gpus: int = 0,
                 node_selector: dict[str, str] | None = None, gates: bool = False,
                 scheduler: str | None = None, tolerate_gpu: bool = True) -> dict[str, Any]:
    resources = {"cpu": "1", "memory": "1Gi"} | ({GPU_RESOURCE: str(gpus)} if gpus else {})
    spec: dict[str, Any] = {
        "containers": [{
            "name": "ome-container", "image": "example.invalid/server:1",
            "ports": [{"containerPort": 8080, "name": "http"}],
            "resources": {"requests": resources, "limits": resources},
        }],
        "tolerations": [GPU_TOLERATION] if tolerate_gpu else [],
        "nodeSelector": node_selector or {},
    }
    if gates:
        spec["readinessGates"] = [{"conditionType": SERVING_GATE}]
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def condition(pod: client.V1Pod, kind: str) -> client.V1PodCondition | None:
    return next((c for c in pod.status.conditions or [] if c.type == kind), None)


def is_true(pod: client.V1Pod, kind: str) -> bool:
    cond = condition(pod, kind)
    return cond is not None and cond.status == "True"


async def test_hpa_scales_a_custom_resource_through_its_scale_subresource(
    api: client.ApiClient, custom: client.CustomObjectsApi, namespace: str, widgets: None
) -> None:
    await custom.create_namespaced_custom_object(GROUP, "v1", namespace, WIDGETS, {
        "apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"replicas": 1},
    })
    await custom.patch_namespaced_custom_object_status(
        GROUP, "v1", namespace, WIDGETS, "w", {"status": {"replicas": 1, "labelSelector": "app=w"}},
        _content_type="application/merge-patch+json",
    )
    hpa = client.AutoscalingV2Api(api)
    await hpa.create_namespaced_horizontal_pod_autoscaler(namespace, {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "w"},
        "spec": {
            "scaleTargetRef": {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "name": "w"},
            "minReplicas": 3, "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {
                "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}],
        },
    })

    async def scaled() -> bool:
        scale = await custom.get_namespaced_custom_object_scale(GROUP, "v1", namespace, WIDGETS, "w")
        return scale["spec"]["replicas"] == 3

    await wait_for(scaled, timeout=60, what="the HPA to raise the Widget to minReplicas",
                   describe=lambda: describe_namespace(api, namespace))
    events = (await client.CoreV1Api(api).list_namespaced_event(namespace)).items
    rescales = [e.message for e in events if e.involved_object.kind == "HorizontalPodAutoscaler"
                and e.reason == "SuccessfulRescale"]
    assert any("Current number of replicas below Spec.MinReplicas" in m for m in rescales), rescales


async def test_garbage_collector_deletes_dependents_in_background_and_foreground(
    core: client.CoreV1Api, namespace: str
) -> None:
    async def config_map(name: str, owner: client.V1ConfigMap | None = None, finalizers: list[str] | None = None
                         ) -> client.V1ConfigMap:
        meta: dict[str, Any] = {"name": name, "finalizers": finalizers or []}
        if owner is not None:
            meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name,
                                        "uid": owner.metadata.uid, "blockOwnerDeletion": True}]
        return await core.create_namespaced_config_map(namespace, {"metadata": meta})

    async def gone(name: str) -> bool:
        try:
            await core.read_namespaced_config_map(name, namespace)
        except client.ApiException as exc:
            return exc.status == 404
        return False

    # Background: the owner goes at once, the garbage collector removes the dependent afterwards.
    owner = await config_map("bg-owner")
    await config_map("bg-dependent", owner)
    await core.delete_namespaced_config_map("bg-owner", namespace, propagation_policy="Background")
    assert await gone("bg-owner")
    await wait_for(lambda: gone("bg-dependent"), timeout=60, what="the background dependent to be collected")

    # Foreground: the owner waits, with the foregroundDeletion finalizer, until its blocking dependent is gone.
    owner = await config_map("fg-owner")
    await config_map("fg-dependent", owner, finalizers=["sim.omenative.io/hold"])
    await core.delete_namespaced_config_map("fg-owner", namespace, propagation_policy="Foreground")

    async def dependent_deleting() -> bool:
        dep = await core.read_namespaced_config_map("fg-dependent", namespace)
        return dep.metadata.deletion_timestamp is not None

    await wait_for(dependent_deleting, timeout=60, what="the garbage collector to delete the foreground dependent")
    held = await core.read_namespaced_config_map("fg-owner", namespace)
    assert held.metadata.deletion_timestamp is not None
    assert "foregroundDeletion" in (held.metadata.finalizers or [])
    await core.patch_namespaced_config_map("fg-dependent", namespace, {"metadata": {"finalizers": None}})
    await wait_for(lambda: gone("fg-dependent"), timeout=60, what="the released dependent to go")
    await wait_for(lambda: gone("fg-owner"), timeout=60, what="the foreground owner to go after its dependent")


async def test_readiness_gate_controls_ready_and_endpointslice_like_a_kubelet(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, sim_nodes: NodeFactory
) -> None:
    node = await sim_nodes("cpu", gpus=0, cpus=8, memory="32Gi", labels={"sim.omenative.io/test": namespace})
    await core.create_namespaced_pod(namespace, pod_manifest(
        "gated", labels={"app": "gated"}, gates=True, node_selector={"kubernetes.io/hostname": node}))
    await core.create_namespaced_service(namespace, {
        "metadata": {"name": "gated"},
        "spec": {"selector": {"app": "gated"}, "ports": [{"port": 8080, "targetPort": 8080}]},
    })
    discovery = client.DiscoveryV1Api(api)

    async def endpoint_ready() -> bool | None:
        slices = await discovery.list_namespaced_endpoint_slice(
            namespace, label_selector="kubernetes.io/service-name=gated")
        endpoints = [e for s in slices.items for e in s.endpoints or []]
        if len(endpoints) != 1:
            return None
        return bool(endpoints[0].conditions.ready)

    async def pod() -> client.V1Pod:
        return await core.read_namespaced_pod("gated", namespace)

    async def containers_ready_but_not_ready() -> bool:
        p = await pod()
        return is_true(p, "ContainersReady") and not is_true(p, "Ready")

    describe = lambda: describe_namespace(api, namespace)  # noqa: E731
    await wait_for(containers_ready_but_not_ready, timeout=60, what="the gated pod to run but not be Ready",
                   describe=describe)
    assert (await endpoint_ready()) in (False, None)

    async def set_gate(status: str) -> None:
        await core.patch_namespaced_pod_status("gated", namespace, {"status": {"conditions": [
            {"type": SERVING_GATE, "status": status, "reason": "Test", "message": "set by the test"}]}})

    for gate, ready in (("True", True), ("False", False), ("True", True)):
        await set_gate(gate)

        async def settled(ready: bool = ready) -> bool:
            return is_true(await pod(), "Ready") is ready and (await endpoint_ready()) is ready

        await wait_for(settled, timeout=60, what=f"Ready={ready} and the endpoint ready={ready} after gate={gate}",
                       describe=describe)
        # The simulated kubelet never writes the gate itself.
        gate_condition = condition(await pod(), SERVING_GATE)
        assert gate_condition is not None and gate_condition.status == gate and gate_condition.reason == "Test"


async def test_coscheduling_binds_a_podgroup_all_or_nothing(
    api: client.ApiClient, core: client.CoreV1Api, custom: client.CustomObjectsApi, namespace: str,
    sim_nodes: NodeFactory,
) -> None:
    pool = {"sim.omenative.io/pool": namespace}
    await sim_nodes("gpu", gpus=1, labels=pool)
    await custom.create_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "gang"}, "spec": {"minMember": 2, "scheduleTimeoutSeconds": 30},
    })
    for i in range(2):
        await core.create_namespaced_pod(namespace, pod_manifest(
            f"gang-{i}", labels={"scheduling.x-k8s.io/pod-group": "gang"}, gpus=1, node_selector=pool,
            scheduler="scheduler-plugins-scheduler"))

    async def pods() -> list[client.V1Pod]:
        return (await core.list_namespaced_pod(namespace)).items

    async def both_refused() -> bool:
        current = await pods()
        return len(current) == 2 and all(
            (c := condition(p, "PodScheduled")) is not None and c.status == "False" for p in current)

    describe = lambda: describe_namespace(api, namespace)  # noqa: E731
    # With one free GPU the gang does not fit: the scheduler refuses both pods and binds neither.
    await wait_for(both_refused, timeout=90, what="the scheduler to refuse both pods of the gang", describe=describe)
    assert [p.spec.node_name for p in await pods()] == [None, None]

    await sim_nodes("gpu", gpus=1, labels=pool)

    async def both_bound() -> bool:
        return all(p.spec.node_name for p in await pods())

    await wait_for(both_bound, timeout=120, what="the gang to bind once two GPUs are free", describe=describe)
    assert len({p.spec.node_name for p in await pods()}) == 2

    async def group_running() -> bool:
        group = await custom.get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", namespace,
                                                          "podgroups", "gang")
        return group.get("status", {}).get("phase") == "Running"

    await wait_for(group_running, timeout=60, what="the PodGroup controller to report the gang Running",
                   describe=describe)


async def test_kwok_runs_a_gpu_pod_and_the_taint_keeps_others_pending(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, sim_nodes: NodeFactory
) -> None:
    pool = {"sim.omenative.io/pool": namespace}
    node = await sim_nodes("gpu", labels=pool)
    await core.create_namespaced_pod(namespace, pod_manifest("tolerant", gpus=1, node_selector=pool))
    await core.create_namespaced_pod(namespace, pod_manifest("intolerant", gpus=1, node_selector=pool,
                                                             tolerate_gpu=False))
    describe = lambda: describe_namespace(api, namespace)  # noqa: E731

    async def running_ready() -> bool:
        p = await core.read_namespaced_pod("tolerant", namespace)
        return p.status.phase == "Running" and is_true(p, "Ready") and bool(p.status.pod_ip)

    await wait_for(running_ready, timeout=60, what="KWOK to run the GPU pod", describe=describe)
    assert (await core.read_namespaced_pod("tolerant", namespace)).spec.node_name == node

    async def refused() -> client.V1PodCondition | None:
        cond = condition(await core.read_namespaced_pod("intolerant", namespace), "PodScheduled")
        return cond if cond is not None and cond.status == "False" else None

    cond = await wait_for(refused, timeout=60, what="the scheduler to refuse the intolerant pod", describe=describe)
    assert cond.reason == "Unschedulable"
    assert "untolerated taint" in cond.message
    intolerant = await core.read_namespaced_pod("intolerant", namespace)
    assert intolerant.status.phase == "Pending" and intolerant.spec.node_name is None


@pytest.fixture
async def running_pod(api: client.ApiClient, core: client.CoreV1Api, namespace: str,
                      sim_nodes: NodeFactory) -> str:
    """A Ready pod on a node of its own, for a fault helper to act on."""
    pool = {"sim.omenative.io/pool": namespace}
    await sim_nodes("gpu", labels=pool)
    name = f"victim-{uuid.uuid4().hex[:4]}"
    await core.create_namespaced_pod(namespace, pod_manifest(name, gpus=1, node_selector=pool))

    async def ready() -> bool:
        return is_true(await core.read_namespaced_pod(name, namespace), "Ready")

    await wait_for(ready, timeout=60, what="the pod to be Ready", describe=lambda: describe_namespace(api, namespace))
    return name


async def test_fault_oom_kill_restarts_the_container(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, running_pod: str
) -> None:
    restarts = await faults.oom_kill(core, namespace, running_pod)
    assert restarts == 1

    async def restarted() -> client.V1ContainerStatus | None:
        status = (await core.read_namespaced_pod(running_pod, namespace)).status.container_statuses[0]
        return status if status.restart_count == 1 else None

    status = await wait_for(restarted, timeout=60, what="the OOM kill",
                            describe=lambda: describe_namespace(api, namespace))
    assert status.last_state.terminated.reason == "OOMKilled"
    assert status.last_state.terminated.exit_code == 137
    assert status.state.running is not None and status.ready

    assert await faults.oom_kill(core, namespace, running_pod) == 2

    async def restarted_twice() -> bool:
        pod = await core.read_namespaced_pod(running_pod, namespace)
        return pod.status.container_statuses[0].restart_count == 2

    await wait_for(restarted_twice, timeout=60, what="the second OOM kill")


async def test_fault_crash_loop_holds_the_container_until_released(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, running_pod: str
) -> None:
    await faults.crash_loop(core, namespace, running_pod)

    async def crash_looping() -> client.V1Pod | None:
        pod = await core.read_namespaced_pod(running_pod, namespace)
        waiting = pod.status.container_statuses[0].state.waiting
        return pod if waiting is not None and waiting.reason == "CrashLoopBackOff" and not is_true(pod, "Ready") \
            else None

    pod = await wait_for(crash_looping, timeout=60, what="CrashLoopBackOff",
                         describe=lambda: describe_namespace(api, namespace))
    status = pod.status.container_statuses[0]
    assert status.restart_count >= 1 and status.last_state.terminated.exit_code == 1
    assert not is_true(pod, "ContainersReady")

    await faults.end_crash_loop(core, namespace, running_pod)

    async def recovered() -> bool:
        p = await core.read_namespaced_pod(running_pod, namespace)
        return is_true(p, "Ready") and p.status.container_statuses[0].state.running is not None

    await wait_for(recovered, timeout=60, what="the container to run again after the crash loop")


async def test_fault_fail_pod_ends_in_failed(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, running_pod: str
) -> None:
    await faults.fail_pod(core, namespace, running_pod)

    async def failed() -> client.V1Pod | None:
        pod = await core.read_namespaced_pod(running_pod, namespace)
        return pod if pod.status.phase == "Failed" else None

    pod = await wait_for(failed, timeout=60, what="phase Failed", describe=lambda: describe_namespace(api, namespace))
    assert not is_true(pod, "Ready")
    assert pod.status.container_statuses[0].state.terminated.exit_code == 1


async def test_fault_delete_node_loses_its_pods(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, running_pod: str
) -> None:
    node = (await core.read_namespaced_pod(running_pod, namespace)).spec.node_name
    await faults.delete_node(core, node)

    async def pod_gone() -> bool:
        try:
            pod = await core.read_namespaced_pod(running_pod, namespace)
        except client.ApiException as exc:
            return exc.status == 404
        return pod.metadata.deletion_timestamp is not None

    # The pod garbage collector removes pods bound to a node that no longer exists (after its 40 s quarantine).
    await wait_for(pod_gone, timeout=150, what="the pod garbage collector to delete the lost node's pod",
                   describe=lambda: describe_namespace(api, namespace))
    nodes = {n.metadata.name for n in (await core.list_node()).items}
    assert node not in nodes


async def test_fault_make_unschedulable_keeps_new_pods_pending(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, sim_nodes: NodeFactory
) -> None:
    pool = {"sim.omenative.io/pool": namespace}
    node = await sim_nodes("gpu", labels=pool)
    await faults.make_unschedulable(core, [node])
    await core.create_namespaced_pod(namespace, pod_manifest("stuck", gpus=1, node_selector=pool))

    async def refused() -> client.V1PodCondition | None:
        cond = condition(await core.read_namespaced_pod("stuck", namespace), "PodScheduled")
        return cond if cond is not None and cond.status == "False" else None

    cond = await wait_for(refused, timeout=60, what="PodScheduled=False",
                          describe=lambda: describe_namespace(api, namespace))
    assert cond.reason == "Unschedulable" and "unschedulable" in cond.message

    await faults.make_schedulable(core, [node])

    async def bound() -> bool:
        return (await core.read_namespaced_pod("stuck", namespace)).spec.node_name == node

    await wait_for(bound, timeout=60, what="the pod to schedule once the node is schedulable again")


async def test_server_side_apply_with_field_manager_and_force(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, namespace: str, widgets: None
) -> None:
    apply_yaml = "application/apply-patch+yaml"
    # A core object: created by apply, then a field owned by someone else is taken over with force.
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1"}}
    created = await core.patch_namespaced_config_map("cm", namespace, body, field_manager="omenative",
                                                     force=True, _content_type=apply_yaml)
    assert created.data == {"a": "1"}
    await core.patch_namespaced_config_map("cm", namespace, {"data": {"a": "2"}}, field_manager="someone-else")
    with pytest.raises(client.ApiException) as conflict:
        await core.patch_namespaced_config_map("cm", namespace, body, field_manager="omenative", force=False,
                                               _content_type=apply_yaml)
    assert conflict.value.status == 409
    taken = await core.patch_namespaced_config_map("cm", namespace, body, field_manager="omenative", force=True,
                                                   _content_type=apply_yaml)
    assert taken.data == {"a": "1"}
    owners = {(m.manager, m.operation) for m in taken.metadata.managed_fields}
    assert ("omenative", "Apply") in owners

    # A custom object: the generated method must be told the apply content type, and a create (HTTP 201) returns
    # nothing decoded, so the raw response is read.
    widget = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"color": "red"}}
    response = await custom.patch_namespaced_custom_object(
        GROUP, "v1", namespace, WIDGETS, "w", widget, field_manager="omenative", force=True,
        _content_type=apply_yaml, _preload_content=False)
    assert response.status == 201
    created_widget = json.loads(await response.read())
    assert created_widget["spec"] == {"color": "red"}
    await custom.patch_namespaced_custom_object(GROUP, "v1", namespace, WIDGETS, "w", {"spec": {"color": "blue"}},
                                                field_manager="someone-else",
                                                _content_type="application/merge-patch+json")
    updated = await custom.patch_namespaced_custom_object(
        GROUP, "v1", namespace, WIDGETS, "w", widget | {"spec": {"color": "red", "size": "L"}},
        field_manager="omenative", force=True, _content_type=apply_yaml)
    assert updated["spec"] == {"color": "red", "size": "L"}
    managers = {m["manager"]: m["operation"] for m in updated["metadata"]["managedFields"]}
    assert managers.get("omenative") == "Apply"
