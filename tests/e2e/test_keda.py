"""KEDA for real (hack/cluster.sh up --keda: KEDA's operator and metrics adapter built from its Go module), on a
control plane of its own, with a real Prometheus scraping a metric the test sets.

The engine starts under omenative's default HorizontalPodAutoscaler, switches to KEDA in one step (the ScaledObject
`scaledobject-<isvc>-engine` replaces the HPA), scales out to maxReplicas when the queue metric rises and back to
minReplicas when it falls, and switches to External, which removes the ScaledObject and keeps the count.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from omenative.api import constants as c
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess, free_port
from tests.support.omenative import installed_and_running
from tests.support.prometheus import running_prometheus
from tests.support.wait import wait_for

NAME = "omenative-keda"
NS = "keda-demo"
Obj = dict[str, Any]


class QueueMetric:
    """A /metrics endpoint whose one gauge the test sets: the requests waiting in a made-up model server's queue."""

    def __init__(self) -> None:
        self.value = 0.0
        metric = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = f"# TYPE queue_waiting gauge\nqueue_waiting{{component=\"engine\"}} {metric.value}\n".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.port = free_port()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def keda_cluster() -> Iterator[ControlPlane]:
    ControlPlane.discard(NAME)
    control_plane = ControlPlane.up(NAME, "--keda", "--gpu-nodes", "3", "--cpu-nodes", "0")
    yield control_plane
    control_plane.down()


@pytest_asyncio.fixture(scope="module")
async def omenative_on_keda(keda_cluster: ControlPlane) -> AsyncIterator[ControllerProcess]:
    async with installed_and_running(keda_cluster) as process:
        yield process


def isvc(autoscaler: Obj | None) -> Obj:
    engine: Obj = {"minReplicas": 1, "maxReplicas": 3,
                   "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                   "runner": {"name": "ome-container", "image": "example.invalid/server:1",
                              "resources": {"requests": {"cpu": "1"}}}}
    if autoscaler is not None:
        engine["autoscaler"] = autoscaler
    return {"apiVersion": c.API_VERSION, "kind": "InferenceService", "metadata": {"name": "queue", "namespace": NS},
            "spec": {"deploymentMode": "OMENative", "engine": engine}}


async def test_keda_scales_the_inference_replica_on_a_prometheus_trigger(
    keda_cluster: ControlPlane, omenative_on_keda: ControllerProcess, tmp_path: Path,
) -> None:
    kubectl = keda_cluster.kubectl
    metric = QueueMetric()
    try:
        async with running_prometheus([f"127.0.0.1:{metric.port}"]) as prometheus:
            await kubectl("create", "namespace", NS)

            async def apply(obj: Obj) -> None:
                (tmp_path / "isvc.yaml").write_text(yaml.safe_dump(obj))
                await kubectl("apply", "-f", str(tmp_path / "isvc.yaml"))

            async def describe() -> str:
                out = await kubectl("get", "inferencereplicas,hpa,scaledobjects,pods", "-n", NS, "-o", "wide",
                                    check=False)
                logs = (keda_cluster.log_dir / "keda-operator.log").read_text()[-3000:]
                return out.output + logs

            async def ready_instances(n: int) -> bool:
                status = json.loads((await kubectl("get", "inferencereplica", "queue-engine", "-n", NS, "-o",
                                                   "json", check=False)).stdout or "{}").get("status") or {}
                return status.get("readyReplicas") == n and status.get("replicas") == n

            # 1. The default: omenative's HorizontalPodAutoscaler.
            await apply(isvc(None))
            await wait_for(lambda: ready_instances(1), timeout=60, what="one Ready Instance", describe=describe)
            out = await kubectl("get", "hpa", "queue-engine", "-n", NS, "-o", "jsonpath={.spec.scaleTargetRef.kind}")
            assert out.stdout == "InferenceReplica"

            # 2. KEDA in one step: the ScaledObject OME names, on the InferenceReplica; omenative's HPA goes.
            trigger = {"type": "prometheus", "metricType": "AverageValue", "metadata": {
                "serverAddress": f"http://127.0.0.1:{prometheus.port}",
                "query": 'sum(queue_waiting{component="engine"})', "threshold": "5"}}
            await apply(isvc({"class": "KEDA", "keda": {"pollingInterval": 2, "cooldownPeriod": 5,
                                                         "triggers": [trigger]}}))

            async def switched() -> bool:
                hpa = await kubectl("get", "hpa", "queue-engine", "-n", NS, check=False)
                so = await kubectl("get", "scaledobject", "scaledobject-queue-engine", "-n", NS, "-o",
                                   "jsonpath={.spec.scaleTargetRef.kind}/{.spec.scaleTargetRef.name} "
                                   "{.spec.minReplicaCount}-{.spec.maxReplicaCount}", check=False)
                return "NotFound" in hpa.output and so.stdout == "InferenceReplica/queue-engine 1-3"

            await wait_for(switched, timeout=60, what="the ScaledObject in place of the HPA", describe=describe)

            async def keda_ready() -> bool:
                out = await kubectl("get", "scaledobject", "scaledobject-queue-engine", "-n", NS, "-o",
                                    "jsonpath={.status.conditions[?(@.type==\"Ready\")].status} {.status.hpaName}",
                                    check=False)
                return out.stdout == "True keda-hpa-scaledobject-queue-engine"

            await wait_for(keda_ready, timeout=60, what="KEDA's ScaledObject Ready", describe=describe)

            # 3. The queue grows: 12 waiting at 5 per Instance asks for 3, the maximum.
            metric.value = 12
            await wait_for(lambda: ready_instances(3), timeout=120, what="three Ready Instances",
                           describe=describe)
            out = await kubectl("get", "inferenceservice", "queue", "-n", NS, "-o",
                                "jsonpath={.status.components.engine.autoscaler}")
            assert json.loads(out.stdout) == {"class": "KEDA", "managedBy": "ome", "specSource": "isvc",
                                              "currentReplicas": 3, "desiredReplicas": 3}, out.stdout

            # 4. The queue drains: back to minReplicas.
            metric.value = 0
            await wait_for(lambda: ready_instances(1), timeout=120, what="back to one Instance", describe=describe)

            # 5. External: the ScaledObject goes (and KEDA's HPA with it); the count stays.
            await apply(isvc({"class": "External"}))

            async def released() -> bool:
                so = await kubectl("get", "scaledobject", "scaledobject-queue-engine", "-n", NS, check=False)
                hpa = await kubectl("get", "hpa", "-n", NS, "-o", "name", check=False)
                return "NotFound" in so.output and hpa.stdout.strip() == ""

            await wait_for(released, timeout=60, what="the ScaledObject and KEDA's HPA gone", describe=describe)
            assert await ready_instances(1)
    finally:
        metric.close()
