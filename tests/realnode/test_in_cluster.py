"""omenative installed from deploy/overlays/dev and running as pods on the real nodes, under its ServiceAccount,
with its admission webhook served from the pods through its Service: a bad InferenceService is refused, and the e2e
suites of both guides pass against it."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import cast

import pytest
import yaml
from kubernetes_asyncio import client

from tests.conftest import api_client_for, node_factory

# The modules, not their test functions: a test function imported here would be collected here too.
from tests.e2e import test_serve_multi_node_model as multi_node_guide
from tests.e2e import test_serve_prefill_decode_model as prefill_decode_guide
from tests.e2e.conftest import write_yaml
from tests.realnode.conftest import REAL_NODES
from tests.support import rbac
from tests.support.cluster import REPO, ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.model_agent import ModelAgent
from tests.support.nodes import model_label
from tests.support.omenative import FAST, install_crds
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
        # deploy/overlays/dev with the e2e suites' grace periods added to the controller's flags (the pods start
        # with them: no second rollout).
        rendered = await kubectl("kustomize", str(REPO / "deploy" / "overlays" / "dev"))
        docs = [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]
        deployment = next(doc for doc in docs if doc["kind"] == "Deployment")
        deployment["spec"]["template"]["spec"]["containers"][0]["args"] += [
            f"{FAST[i]}={FAST[i + 1]}" for i in range(0, len(FAST), 2)]
        await kubectl("apply", "--server-side", "-f", write_yaml(tmp_path, "deploy.yaml",
                                                                 {"apiVersion": "v1", "kind": "List", "items": docs}))
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
            transport = ("connection refused", "no route to host", "i/o timeout")
            return None if any(text in out.stderr for text in transport) else out.stderr

        refusal = await wait_for(refused_by_the_webhook, timeout=60, interval=1, what="the webhook answering")
        assert 'admission webhook "inferenceservice.ome-webhook-server.validator" denied the request: ' \
               "engine declares leader without worker" in refusal

        # The e2e suites of both guides, against omenative in the cluster: its ServiceAccount, its webhook behind its
        # Service, and the e2e suites' grace periods (set above). They run on simulated GPU nodes of their own.
        api = await api_client_for(real_cluster.kubeconfig)
        async with api:
            core = client.CoreV1Api(api)
            made: list[str] = []
            sim_nodes = node_factory(core, made)

            # The suites' faults act on simulated pods: none of their pods may land on a real node (where the
            # kubelet, not KWOK, owns pod status). The controller's pods stay where they run.
            real = [f"real-node-{i}" for i in range(1, REAL_NODES + 1)]
            await kubectl("cordon", *real)
            try:
                for guide in (multi_node_guide.test_serve_a_multi_node_model,
                              prefill_decode_guide.test_serve_a_prefill_decode_model):
                    folder = tmp_path / guide.__name__
                    folder.mkdir()
                    await guide(control_plane=real_cluster, api=api, omenative=cast(ControllerProcess, None),
                                sim_nodes=sim_nodes, model_agent=ModelAgent(api), tmp_path=folder)
            finally:
                for name in made:
                    await core.delete_node(name)
                await kubectl("uncordon", *real)
                # The guides' model agent marked the models Ready on their nodes only: the real nodes have them
                # again for the next tests, as hack/cluster.sh --model left them.
                for model in ("qwen3-0-6b", "llama-3-2-1b-instruct"):
                    await kubectl("label", "nodes", *real, f"{model_label(model)}=Ready", "--overwrite")

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
