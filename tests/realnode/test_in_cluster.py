"""omenative installed from deploy/ and running as pods on the real node, under its ServiceAccount, with its
admission webhook served from the pods: both guides' examples become Ready, and a bad InferenceService is refused."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import api_client_for
from tests.e2e.conftest import write_yaml
from tests.e2e.test_serve_prefill_decode_model import LLAMA_LEARNED
from tests.realnode.conftest import REAL_NODES
from tests.support import rbac
from tests.support.catalog import CATALOG, MULTI_NODE_SEED, PD_SEED, seed_yaml_blocks
from tests.support.cluster import REPO, ControlPlane
from tests.support.model_agent import QWEN3_LEARNED, ModelAgent
from tests.support.nodes import node_manifest
from tests.support.omenative import install_crds
from tests.support.wait import wait_for

pytestmark = pytest.mark.e2e

BAD = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "metadata": {"name": "bad", "namespace": "bad"},
       "spec": {"model": {"name": "qwen3-0-6b"}, "engine": {"minReplicas": 1, "leader": {}}}}


async def test_omenative_runs_in_the_cluster_from_deploy(real_cluster: ControlPlane, tmp_path: Path) -> None:
    kubectl = real_cluster.kubectl
    image = tmp_path / "omenative.tar"
    # The image, built without a daemon, loaded into the node (no registry anywhere).
    await asyncio.to_thread(subprocess.run, ["bash", str(REPO / "hack" / "realnode" / "controller-image.sh"),
                                             str(image)], check=True)
    await asyncio.to_thread(subprocess.run, ["bash", str(REPO / "hack" / "realnode" / "node.sh"), "load",
                                             str(real_cluster.workdir), str(image)], check=True)
    await install_crds(real_cluster)
    try:
        await kubectl("apply", "--server-side", "-k", str(REPO / "deploy" / "overlays" / "dev"))
        out = await kubectl("rollout", "status", "deployment/omenative", "-n", "omenative-system", "--timeout=180s",
                            check=False)
        assert out.returncode == 0, out.output + (await kubectl("describe", "pods", "-n", "omenative-system")).output
        pods = json.loads((await kubectl("get", "pods", "-n", "omenative-system", "-o", "json")).stdout)["items"]
        assert len(pods) == 2
        for pod in pods:
            assert pod["spec"]["nodeName"].startswith("real-node-") and \
                pod["spec"]["serviceAccountName"] == "omenative"
            logs = await kubectl("logs", pod["metadata"]["name"], "-n", "omenative-system")
            assert "Traceback" not in logs.stdout and "403 Forbidden" not in logs.stdout, logs.stdout[-3000:]

        # The webhook, served from the pods behind their Service, refuses a bad InferenceService.
        # The API server calls it at its Service's ClusterIP, which works once the kube-proxy on the host has the
        # Ready pods' endpoints: under load that lags the rollout by a moment ("connection refused" until then), as
        # with any webhook right after its install. The bad object is refused either way, so the apply is retried.
        await kubectl("create", "namespace", "bad")
        bad = write_yaml(tmp_path, "bad.yaml", BAD)

        async def refused_by_the_webhook() -> str | None:
            out = await kubectl("apply", "-f", bad, check=False)
            assert out.returncode != 0
            return None if "connection refused" in out.stderr else out.stderr

        refusal = await wait_for(refused_by_the_webhook, timeout=60, interval=1, what="the webhook answering")
        assert 'admission webhook "inferenceservice.validating.omenative.io" denied the request: engine declares ' \
               "leader without worker" in refusal

        # Both guides' examples become Ready: the multi-node one as real processes on the real nodes, the
        # prefill-decode one on real or simulated GPU nodes (its model is Ready on both).
        gpu = [f"real-it-gpu-{i}" for i in range(4)]
        nodes = {"apiVersion": "v1", "kind": "List", "items": [node_manifest(n) for n in gpu]}
        await kubectl("apply", "--server-side", "-f", write_yaml(tmp_path, "nodes.yaml", nodes))
        api = await api_client_for(real_cluster.kubeconfig)
        async with api:
            agent = ModelAgent(api)
            await kubectl("apply", "-f", str(CATALOG / "models" / "Qwen" / "Qwen3-0.6B.yaml"))
            real = [f"real-node-{i}" for i in range(1, REAL_NODES + 1)]
            await agent.downloaded("qwen3-0-6b", real, QWEN3_LEARNED)
            await kubectl("apply", "-f", str(CATALOG / "models" / "meta" / "Llama-3.2-1B-Instruct.yaml"))
            await kubectl("apply", "-f", str(CATALOG / "runtimes" / "srt" / "meta" /
                                             "llama-3-2-1b-instruct-pd-rt.yaml"))
            await agent.downloaded("llama-3-2-1b-instruct", gpu + real, LLAMA_LEARNED)
        runtime, isvc, _ = seed_yaml_blocks(MULTI_NODE_SEED)
        (pd,) = seed_yaml_blocks(PD_SEED)
        await kubectl("apply", "-f", write_yaml(tmp_path, "runtime.yaml", runtime))
        for ns, obj in (("qwen3-multi-node", isvc), ("llama-demo", pd)):
            await kubectl("create", "namespace", ns)
            await kubectl("apply", "-f", write_yaml(tmp_path, f"{ns}.yaml", obj))
        for ns, name in (("qwen3-multi-node", "qwen3-multi-node"), ("llama-demo", "llama-pd")):
            out = await kubectl("wait", "--for=condition=Ready", f"inferenceservice/{name}", "-n", ns,
                                "--timeout=300s", check=False)
            assert out.returncode == 0, out.output + (await kubectl("get", "pods", "-n", ns, "-o", "wide")).output
        placed = await kubectl("get", "pods", "-n", "qwen3-multi-node", "-o", "jsonpath={.items[*].spec.nodeName}")
        assert [node.startswith("real-node-") for node in placed.stdout.split()] == [True, True]

        # Under deploy/base/rbac.yaml: nothing refused, and the namespace Role used, the leader Lease and the
        # webhook's certificate Secret (its renewal aside).
        requests = rbac.requests_since(real_cluster, 0)
        assert rbac.denied(requests) == [] and requests
        assert rbac.not_granted(requests, rbac.grants("ClusterRole") + rbac.grants("Role")) == []
        assert rbac.unused(requests, rbac.grants("Role"), skip=[("", "secrets", "patch")]) == []
    finally:
        await kubectl("delete", "namespace", "bad", "qwen3-multi-node", "llama-demo", "--ignore-not-found",
                      "--wait=true", "--timeout=180s", check=False)
        await kubectl("delete", "nodes", "-l", "type=kwok", "--ignore-not-found")
        await kubectl("delete", "-k", str(REPO / "deploy" / "overlays" / "dev"), "--ignore-not-found", "--wait=true",
                      "--timeout=120s", check=False)
        await kubectl("delete", "validatingwebhookconfiguration,mutatingwebhookconfiguration", "omenative",
                      "--ignore-not-found")
