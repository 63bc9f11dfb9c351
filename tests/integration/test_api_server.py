"""omenative's API on the real API server: the CRDs accept OME's whole catalog and the seeds' objects,
`kubectl explain` and `kubectl get irep` work, and the webhook refuses and warns through kubectl as users see it."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml
from kubernetes_asyncio import client

from omenative.kube.client import ApiError, KubeClient
from omenative.kube.resources import Resource
from omenative.ome_resources import (
    CLUSTER_BASE_MODELS,
    CLUSTER_SERVING_RUNTIMES,
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
)
from tests.support.catalog import MULTI_NODE_SEED, PD_SEED, load, models, runtimes, seed_yaml_blocks
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess
from tests.support.omenative import install_crds, start_controller, stop_controller

KINDS: dict[str, Resource] = {"ClusterServingRuntime": CLUSTER_SERVING_RUNTIMES,
                              "ClusterBaseModel": CLUSTER_BASE_MODELS, "InferenceService": INFERENCE_SERVICES}


@pytest_asyncio.fixture(scope="module")
async def webhook(control_plane: ControlPlane) -> AsyncIterator[ControllerProcess]:
    await install_crds(control_plane)
    process = await start_controller(control_plane, "--namespace", "omenative-none")  # webhook only, no reconciles
    yield process
    await stop_controller(control_plane, process)


async def test_the_crds_accept_the_whole_catalog_and_the_seeds(
    kube: KubeClient, control_plane: ControlPlane, namespace: str, webhook: ControllerProcess
) -> None:
    objects: list[tuple[str, dict[str, Any]]] = [*runtimes(), *models()]
    objects += [(f"seed {MULTI_NODE_SEED}", o) for o in seed_yaml_blocks(MULTI_NODE_SEED)]
    objects += [(f"seed {PD_SEED}", o) for o in seed_yaml_blocks(PD_SEED)]
    refused = []
    for where, obj in objects:
        body = copy.deepcopy(obj)
        resource = KINDS[body["kind"]]
        if resource.namespaced:
            body["metadata"]["namespace"] = namespace
        try:  # a dry-run apply: accepted or not, nothing is stored, and an existing object is no obstacle
            created = await kube.apply(resource, body, field_manager="omenative-test", dry_run=True)
        except ApiError as exc:
            refused.append(f"{where}: {exc}")
            continue
        # Nothing the object says is pruned by the schema.
        kept = {k: v for k, v in created["spec"].items() if k in body["spec"]}
        assert _contains(kept, body["spec"]), where
    assert refused == []
    print(f"server-side dry run accepted {len(objects)} objects: 207 runtimes, 207 models, "
          f"{len(objects) - 414} from the seeds")


def _contains(actual: Any, expected: Any) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and _contains(actual[k], v) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(
            _contains(a, e) for a, e in zip(actual, expected, strict=True))
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return float(actual) == float(expected)
    return bool(actual == expected)


async def test_kubectl_explain_and_get_irep(control_plane: ControlPlane, namespace: str, kube: KubeClient,
                                           webhook: ControllerProcess) -> None:
    out = await control_plane.kubectl("explain", "inferencereplica.spec.runners")
    assert "KIND:       InferenceReplica" in out.stdout
    assert "FIELD: runners <[]Object>" in out.stdout
    assert "template\t<Object>" in out.stdout and "enum: default, leader, worker" in out.stdout
    replica = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
               "metadata": {"name": "demo-engine", "namespace": namespace,
                            "annotations": {"ome.io/controller-write": "true"}},
               "spec": {"parentRef": {"name": "demo"}, "component": "engine", "replicas": 2,
                        "runners": [{"name": "default", "size": 1, "template": {"spec": {}}}]}}
    await kube.create(INFERENCE_REPLICAS, replica, namespace)
    await kube.request("PATCH", INFERENCE_REPLICAS.path(namespace, "demo-engine", "status"),
                       body={"status": {"replicas": 2, "readyReplicas": 1, "availableReplicas": 1}},
                       content_type="application/merge-patch+json")
    out = await control_plane.kubectl("get", "irep", "-n", namespace)
    header, row = out.stdout.splitlines()[:2]
    assert header.split() == ["NAME", "COMPONENT", "DESIRED", "CURRENT", "READY", "AVAILABLE", "AGE"]
    assert row.split()[:6] == ["demo-engine", "engine", "2", "2", "1", "1"]
    out = await control_plane.kubectl("get", "ome", "-n", namespace, "-o", "name")  # the category
    assert "inferencereplica.ome.io/demo-engine" in out.stdout


async def test_the_webhook_refuses_and_warns_through_kubectl(
    control_plane: ControlPlane, namespace: str, webhook: ControllerProcess, tmp_path: Path, api: client.ApiClient,
) -> None:
    runtime, isvc, _ = seed_yaml_blocks(MULTI_NODE_SEED)
    await control_plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(runtime))
    try:
        leader_only = copy.deepcopy(isvc)
        leader_only["metadata"]["namespace"] = namespace
        del leader_only["spec"]["engine"]["worker"]
        out = await control_plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(leader_only), check=False)
        assert out.returncode != 0
        assert ('admission webhook "inferenceservice.ome-webhook-server.validator" denied the request: engine declares '
                "leader without worker") in out.stderr

        too_long = copy.deepcopy(isvc)
        too_long["metadata"] = {"name": "q" * 46, "namespace": namespace}
        out = await control_plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(too_long), check=False)
        assert out.returncode != 0
        assert "is too long" in out.stderr and "use at most 45 characters" in out.stderr

        # A runtime whose workers number 0 passes its own CRD, but no Instance can run on it.
        no_workers = copy.deepcopy(runtime)
        no_workers["metadata"]["name"] = "srt-zero-workers"
        no_workers["spec"]["engineConfig"]["worker"]["size"] = 0
        await control_plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(no_workers))
        on_it = copy.deepcopy(isvc)
        on_it["metadata"] = {"name": "zero-workers", "namespace": namespace}
        on_it["spec"]["runtime"] = {"name": "srt-zero-workers"}
        on_it["spec"]["engine"]["worker"].pop("size", None)
        out = await control_plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(on_it), check=False)
        assert out.returncode != 0
        assert ("engine.worker.size from the runtime's engineConfig.worker.size must be at least 1, got 0"
                in out.stderr)

        fine = copy.deepcopy(isvc)
        fine["metadata"]["namespace"] = namespace
        out = await control_plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(fine))
        assert out.stdout.strip() == "inferenceservice.ome.io/qwen3-multi-node created"

        # A projected InferenceReplica (it names its InferenceService) is omenative's to write: a hand-made one is
        # refused. A standalone one (no parent) is the user's, judged by OME's rules: a runner with no container is
        # refused.
        hand_made = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
                     "metadata": {"name": "mine", "namespace": namespace},
                     "spec": {"component": "engine", "parentRef": {"name": "qwen3-multi-node"},
                              "runners": [{"name": "default", "template": {}}]}}
        out = await control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(hand_made), check=False)
        assert out.returncode != 0 and "edit the InferenceService instead" in out.stderr
        del hand_made["spec"]["parentRef"]
        out = await control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(hand_made), check=False)
        assert out.returncode != 0 and "spec.runners[default].template.spec.containers is required" in out.stderr

        # The PD seed, with its catalog runtime and model: admitted with the seed's warning.
        pd_runtime = load("runtimes/srt/meta/llama-3-2-1b-instruct-pd-rt.yaml")
        model = load("models/meta/Llama-3.2-1B-Instruct.yaml")
        model["spec"].update({"modelFormat": {"name": "safetensors", "version": "1.0.0"},
                              "modelFramework": {"name": "transformers", "version": "4.45.0.dev0"},
                              "modelArchitecture": "LlamaForCausalLM", "modelParameterSize": "1.24B"})
        await control_plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all([pd_runtime, model]))
        (pd,) = seed_yaml_blocks(PD_SEED)
        pd["metadata"]["namespace"] = namespace
        out = await control_plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(pd))
        assert out.stdout.strip() == "inferenceservice.ome.io/llama-pd created"
        assert out.stderr.strip().startswith(
            'Warning: runtime "srt-llama-3-2-1b-instruct-pd" does not declare support for model '
            '"llama-3-2-1b-instruct" (runtime srt-llama-3-2-1b-instruct-pd does not support model safetensors: '
            "model format 'mt:safetensors:1.0.0:LlamaForCausalLM:transformers:4.45.0.dev0' not in supported "
            "formats: framework version mismatch (model=4.45.0.dev0, runtime=4.43.0)); proceeding because the "
            "runtime was named explicitly")
    finally:
        await control_plane.kubectl("delete", "inferenceservice", "--all", "-n", namespace, "--wait=false")
        await control_plane.kubectl("delete", "clusterservingruntime", "srt-zero-workers", "--ignore-not-found")
        await control_plane.kubectl("delete", "clusterservingruntime", "srt-qwen3-0-6b-multi-node",
                                    "srt-llama-3-2-1b-instruct-pd", "--ignore-not-found")
        await control_plane.kubectl("delete", "clusterbasemodel", "llama-3-2-1b-instruct", "--ignore-not-found")


async def test_both_overlays_of_deploy_pass_the_api_servers_validation(control_plane: ControlPlane) -> None:
    """deploy/overlays/dev and production, applied with --dry-run=server; production's ServiceMonitor and
    PrometheusRule are checked against the prometheus-operator's published CRDs."""
    deploy = Path(__file__).resolve().parents[2] / "deploy"
    crds = ControlPlane.prometheus_operator_crd_paths()
    namespace = yaml.safe_load((deploy / "base" / "namespace.yaml").read_text())
    for crd in crds:
        await control_plane.kubectl("apply", "--server-side", "-f", str(crd))
    await control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                                *(f"crd/{yaml.safe_load(c.read_text())['metadata']['name']}" for c in crds))
    await control_plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(namespace))
    try:
        applied = {}
        for overlay in ("dev", "production"):
            out = await control_plane.kubectl("apply", "--server-side", "--dry-run=server", "-k",
                                              str(deploy / "overlays" / overlay))
            applied[overlay] = {line.split()[0] for line in out.stdout.splitlines()
                                if line.endswith("serverside-applied (server dry run)")}
        common = {"serviceaccount/omenative", "clusterrole.rbac.authorization.k8s.io/omenative",
                  "clusterrole.rbac.authorization.k8s.io/kubectl-ome-reader",
                  "clusterrole.rbac.authorization.k8s.io/kubectl-ome-actor",
                  "role.rbac.authorization.k8s.io/omenative",
                  "service/omenative-webhook", "service/omenative-metrics", "deployment.apps/omenative"}
        production = {"poddisruptionbudget.policy/omenative", "servicemonitor.monitoring.coreos.com/omenative",
                      "prometheusrule.monitoring.coreos.com/omenative", "configmap/omenative-dashboard"}
        assert common <= applied["dev"] and not production & applied["dev"], applied["dev"]
        assert common | production <= applied["production"], applied["production"]
        rendered = await control_plane.kubectl("kustomize", str(deploy / "overlays" / "production"))
        docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(rendered.stdout)}
        pod = docs[("Deployment", "omenative")]["spec"]["template"]["spec"]
        assert pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0][
            "topologyKey"] == "kubernetes.io/hostname"
        dashboard = docs[("ConfigMap", "omenative-dashboard")]
        assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert json.loads(dashboard["data"]["omenative.json"])["panels"]
    finally:
        await control_plane.kubectl("delete", "namespace", namespace["metadata"]["name"], "--wait=false")
        await control_plane.kubectl("delete", "--ignore-not-found", *(f"-f={c}" for c in crds))
