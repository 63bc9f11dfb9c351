"""Faults a test can inject into the simulated cluster.

Container faults are carried out by the simulated kubelet (the KWOK stages in hack/sim/pod-stages.yaml), triggered
by annotations, so the controller under test sees them arrive exactly as a kubelet would report them. Node loss and
unschedulable pods are real API operations.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

OOM_KILLS = "sim.omenative.io/oom-kills"
CRASH_LOOP = "sim.omenative.io/crash-loop"
FAIL = "sim.omenative.io/fail"


async def _annotate(core: client.CoreV1Api, namespace: str, pod: str, annotations: dict[str, Any]) -> None:
    await core.patch_namespaced_pod(pod, namespace, {"metadata": {"annotations": annotations}})


async def oom_kill(core: client.CoreV1Api, namespace: str, pod: str) -> int:
    """The pod's first container is OOM-killed (exit code 137) and restarted once. Returns its new restartCount."""
    current = await core.read_namespaced_pod(pod, namespace)
    statuses = current.status.container_statuses or []
    restarts = (statuses[0].restart_count if statuses else 0) + 1
    await _annotate(core, namespace, pod, {OOM_KILLS: str(restarts)})
    return restarts


async def crash_loop(core: client.CoreV1Api, namespace: str, pod: str) -> None:
    """The pod's first container crashes and waits in CrashLoopBackOff until `end_crash_loop`."""
    await _annotate(core, namespace, pod, {CRASH_LOOP: "true"})


async def end_crash_loop(core: client.CoreV1Api, namespace: str, pod: str) -> None:
    await _annotate(core, namespace, pod, {CRASH_LOOP: None})


async def fail_pod(core: client.CoreV1Api, namespace: str, pod: str) -> None:
    """The pod ends in phase Failed, its containers terminated with exit code 1."""
    await _annotate(core, namespace, pod, {FAIL: "true"})


async def delete_node(core: client.CoreV1Api, node: str) -> None:
    """The node goes away, as when a machine is removed; the pod garbage collector then deletes its pods."""
    await core.delete_node(node)


async def make_unschedulable(core: client.CoreV1Api, nodes: list[str]) -> None:
    """Cordons the nodes, so pods that can only go there stay Pending with PodScheduled=False/Unschedulable."""
    for node in nodes:
        await core.patch_node(node, {"spec": {"unschedulable": True}})


async def make_schedulable(core: client.CoreV1Api, nodes: list[str]) -> None:
    for node in nodes:
        await core.patch_node(node, {"spec": {"unschedulable": None}})
