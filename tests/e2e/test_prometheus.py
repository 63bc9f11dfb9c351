"""A real Prometheus scrapes the e2e run's controller: PromQL over its series gives what the controller and the
cluster say."""

from __future__ import annotations

import asyncio
import json

from kubernetes_asyncio import client

from omenative.api.instance_status import decode_rows
from tests.conftest import NodeFactory, describe_namespace
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.omenative import inline_component, inline_service
from tests.support.prometheus import running_prometheus
from tests.support.wait import wait_for


async def test_prometheus_scrapes_reconciles_and_instances_by_phase(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    namespace: str,
) -> None:
    kubectl = control_plane.kubectl
    await sim_nodes("gpu")
    isvc = inline_service("scraped", namespace, engine=inline_component(2))
    async with running_prometheus([f"127.0.0.1:{omenative.metrics_port}"]) as prometheus:
        await kubectl("apply", "-f", "-", stdin=json.dumps(isvc))
        out = await kubectl("wait", "--for=jsonpath={.status.readyReplicas}=2", "inferencereplica/scraped-engine",
                            "-n", namespace, "--timeout=120s", check=False)
        assert out.returncode == 0, out.output + await describe_namespace(api, namespace)

        async def reconciles_agree() -> tuple[float, float] | None:
            promql = 'sum(controller_runtime_reconcile_total{job="omenative-metrics",controller="inferencereplica"})'
            scraped = await asyncio.to_thread(prometheus.value, promql)
            text = await omenative.metrics()
            direct = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                         if line.startswith('controller_runtime_reconcile_total{controller="inferencereplica"'))
            return (scraped, direct) if scraped is not None and scraped == direct and scraped > 0 else None

        await wait_for(reconciles_agree, timeout=60, what="Prometheus's reconcile count to match the controller's")

        async def ready_instances_agree() -> float | None:
            """Ready engine Instances, by PromQL and by the InferenceReplicas' status in the whole cluster."""
            promql = 'max(omenative_instances{job="omenative-metrics",component="engine",phase="Ready"})'
            scraped = await asyncio.to_thread(prometheus.value, promql)
            replicas = json.loads((await kubectl("get", "inferencereplicas", "-A", "-o", "json")).stdout)["items"]
            counted = sum(1 for ir in replicas if (ir.get("spec") or {}).get("component") == "engine"
                          for row in decode_rows(ir.get("status")) if row.phase == "Ready")
            return scraped if scraped is not None and scraped == counted and scraped >= 2 else None

        await wait_for(ready_instances_agree, timeout=60, what="Ready engine Instances by PromQL and by status")
        # The phases the alerts read exist at 0 too.
        assert await asyncio.to_thread(
            prometheus.value, 'max(omenative_instances{job="omenative-metrics",component="router",phase="Failed"})'
        ) == 0
