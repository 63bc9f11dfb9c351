"""Teardown and stuck drains (OME's guide "Recover stuck deletions"): a deleted InferenceService's InferenceReplica
holds the finalizer ome.io/ir-teardown while its pods drain; a drain past its deadline raises DrainOverdue; at the
teardown deadline the finalizer is released with TeardownDeadlineExceeded; without a deadline, TeardownBlocked says
what holds it; the guide's manual recovery works as written."""

from __future__ import annotations

import json

from tests.conftest import NodeFactory
from tests.support.cluster import ControlPlane
from tests.support.omenative import inline_service, install_crds, start_controller, stop_controller
from tests.support.wait import wait_for

ESCAPE = """manual escape: kubectl patch inferencereplica stuck-engine -n {ns} --type=merge -p '{{"metadata":{{"finalizers":null}}}}'"""  # noqa: E501


async def served_then_pinned(control_plane: ControlPlane, namespace: str) -> str:
    """The InferenceService serves; its pod then gets a finalizer of another controller, so it cannot go."""
    kubectl = control_plane.kubectl
    await kubectl("apply", "-f", "-", stdin=json.dumps(inline_service("stuck", namespace)))
    out = await kubectl("wait", "--for=condition=Ready", "inferenceservice/stuck", "-n", namespace, "--timeout=60s",
                        check=False)
    assert out.returncode == 0, out.output
    replica = json.loads((await kubectl("get", "inferencereplica", "stuck-engine", "-n", namespace, "-o",
                                        "json")).stdout)
    assert replica["metadata"]["finalizers"] == ["ome.io/ir-teardown"]
    pod = "stuck-engine-0-default-0"
    await kubectl("patch", "pod", pod, "-n", namespace, "--type=merge", "-p",
                  '{"metadata":{"finalizers":["example.com/cleanup"]}}')
    await kubectl("delete", "inferenceservice", "stuck", "-n", namespace, "--wait=false")
    return pod


async def test_a_stuck_teardown_is_overdue_then_released_at_its_deadline(control_plane: ControlPlane,
                                                                         namespace: str) -> None:
    kubectl = control_plane.kubectl
    await install_crds(control_plane)
    process = await start_controller(control_plane, "--namespace", namespace, "--instance-ready-timeout", "10s",
                                     "--teardown-deadline", "30s", webhook=False)
    try:
        pod = await served_then_pinned(control_plane, namespace)

        async def overdue() -> list[str]:
            return await control_plane.event_messages(namespace, "DrainOverdue")

        messages = await wait_for(overdue, timeout=60, what="a DrainOverdue event")
        assert len(messages) == 1
        assert messages[0].startswith("OMENative component=engine instance=0: drain overdue by ")
        assert messages[0].endswith(f"; 1 pod(s) still Terminating ({pod})")
        out = await kubectl("get", "inferencereplica", "stuck-engine", "-n", namespace, "-o",
                            'jsonpath={.status.conditions[?(@.type=="DrainOverdue")].reason}')
        assert out.stdout == "DrainsOverdue"

        async def released() -> list[str]:
            return await control_plane.event_messages(namespace, "TeardownDeadlineExceeded")

        messages = await wait_for(released, timeout=60, what="the teardown deadline")
        assert messages == [
            'teardown deadline 30s exceeded (1 owned pod(s) observed; selector: parent="stuck", component="engine"); '
            "releasing finalizer ome.io/ir-teardown to background GC; " + ESCAPE.format(ns=namespace)]

        async def replica_gone() -> bool:
            out = await kubectl("get", "inferencereplica", "stuck-engine", "-n", namespace, "--ignore-not-found",
                                "-o", "name")
            return out.stdout.strip() == ""

        await wait_for(replica_gone, timeout=30, what="the InferenceReplica gone")
        # The pod stays Terminating until its own finalizer goes: the guide's manual recovery.
        out = await kubectl("get", "pod", pod, "-n", namespace, "-o", "jsonpath={.metadata.deletionTimestamp}")
        assert out.stdout
        await kubectl("patch", "pod", pod, "-n", namespace, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
        out = await kubectl("wait", "--for=delete", f"pod/{pod}", "-n", namespace, "--timeout=30s", check=False)
        assert out.returncode == 0, out.output
    finally:
        await stop_controller(control_plane, process)


async def test_without_a_deadline_the_teardown_says_what_blocks_it(control_plane: ControlPlane,
                                                                  namespace: str) -> None:
    kubectl = control_plane.kubectl
    await install_crds(control_plane)
    process = await start_controller(control_plane, "--namespace", namespace, "--teardown-deadline", "",
                                     webhook=False)
    try:
        pod = await served_then_pinned(control_plane, namespace)

        async def blocked() -> list[str]:
            return await control_plane.event_messages(namespace, "TeardownBlocked")

        messages = await wait_for(blocked, timeout=60, what="a TeardownBlocked event")
        assert messages[0] == (
            'teardown blocked: 1 owned pod(s) and 0 owned PodGroup(s) remain (selector: parent="stuck", '
            'component="engine"); finalizer ome.io/ir-teardown holds until cleanup completes (no '
            "lifecycle.teardown.deadline configured); " + ESCAPE.format(ns=namespace))
        # The guide's escape: release the finalizer by hand; Kubernetes deletes what is left.
        out = await kubectl("patch", "inferencereplica", "stuck-engine", "-n", namespace, "--type=merge", "-p",
                            '{"metadata":{"finalizers":null}}')
        assert out.stdout.strip() == "inferencereplica.ome.io/stuck-engine patched"
        out = await kubectl("wait", "--for=delete", "inferencereplica/stuck-engine", "-n", namespace,
                            "--timeout=30s", check=False)
        assert out.returncode == 0, out.output
        await kubectl("patch", "pod", pod, "-n", namespace, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    finally:
        await stop_controller(control_plane, process)


async def test_a_pod_stuck_on_a_node_that_is_gone_is_force_deleted(control_plane: ControlPlane, namespace: str,
                                                                  sim_nodes: NodeFactory) -> None:
    """The escalation (both durations set): the pod's node goes away, so nothing will ever finish its deletion;
    omenative force-deletes it once it is past its deletion deadline plus the slack, and the teardown completes.
    (The pod garbage collector would also remove such a pod, but only 40 s after the node went.)"""
    kubectl = control_plane.kubectl
    await install_crds(control_plane)
    node = await sim_nodes("gpu")
    process = await start_controller(control_plane, "--namespace", namespace, "--instance-ready-timeout", "3s",
                                     "--force-delete-overdue-slack", "1s",
                                     "--force-delete-node-unreachable-threshold", "1s", webhook=False)
    try:
        isvc = inline_service("stranded", namespace)
        isvc["spec"]["engine"].update(nodeSelector={"kubernetes.io/hostname": node}, terminationGracePeriodSeconds=1)
        await kubectl("apply", "-f", "-", stdin=json.dumps(isvc))
        out = await kubectl("wait", "--for=condition=Ready", "inferenceservice/stranded", "-n", namespace,
                            "--timeout=60s", check=False)
        assert out.returncode == 0, out.output
        await kubectl("delete", "node", node)
        await kubectl("delete", "inferenceservice", "stranded", "-n", namespace, "--wait=false")

        async def forced() -> list[str]:
            return await control_plane.event_messages(namespace, "PodForceDeleted")

        messages = await wait_for(forced, timeout=30, what="a PodForceDeleted event")
        assert messages[0].startswith(
            f"OMENative component=engine instance=0: force-deleted stuck-Terminating pod stranded-engine-0-default-0 "
            f"on node {node} (evidence=node-gone, ")
        assert messages[0].endswith(" past the pod's own deletion deadline)")
        out = await kubectl("wait", "--for=delete", "inferencereplica/stranded-engine", "-n", namespace,
                            "--timeout=30s", check=False)
        assert out.returncode == 0, out.output
        assert await control_plane.event_messages(namespace, "TeardownDeadlineExceeded") == []
    finally:
        await stop_controller(control_plane, process)
