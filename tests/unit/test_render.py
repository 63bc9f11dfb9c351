"""The render functions, one table row per runtime shape of OME's catalog, and every catalog runtime rendered."""

from __future__ import annotations

import copy
from typing import Any

import attrs
import pytest

from omenative.api import constants as c
from omenative.api.config import ControllerConfig
from omenative.api.rollout import peers_of
from omenative.api.types import BaseModelSpec
from omenative.controllers.inferenceservice import desired
from omenative.render.pods import InstanceRef, referenced_vars, render_instance
from omenative.render.templates import ModelInfo
from tests.support.catalog import load, runtimes

Obj = dict[str, Any]
MODEL = ModelInfo(name="the-model", namespaced=False, namespace="ns", spec=BaseModelSpec.from_dict(
    {"storage": {"storageUri": "hf://org/the-model", "path": "/raid/models/org/the-model"}, "vendor": "org"}))
OWNER = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "name": "svc", "uid": "u-1",
         "controller": True, "blockOwnerDeletion": True}


def isvc_for(runtime: Obj, name: str = "svc") -> Obj:
    """An InferenceService that declares every component the runtime has, on OMENative."""
    spec: Obj = {"deploymentMode": "OMENative", "model": {"name": "the-model"},
                 "runtime": {"name": runtime["metadata"]["name"]}}
    for comp in c.COMPONENTS:
        config = runtime["spec"].get(f"{comp}Config")
        if config is None:
            continue
        spec[comp] = {"leader": {}, "worker": {}} if config.get("leader") is not None else {}
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name, "namespace": "ns", "uid": "u-1"}, "spec": spec}


def plan_for(runtime: Obj) -> desired.Plan:
    return desired.build(desired.Inputs(
        isvc=isvc_for(runtime), model=MODEL, config=ControllerConfig(),
        runtime=desired.RuntimeInfo(name=runtime["metadata"]["name"], namespaced=False,
                                    spec=copy.deepcopy(runtime["spec"]))))


def pods_of(part: desired.ComponentPlan, index: int = 0) -> list[Obj]:
    ref = InstanceRef(isvc="svc", namespace="ns", component=part.name, index=index, incarnation=1, revision="r1",
                      replicas=part.min_replicas, podgroup="svc-engine-0" if part.multi_pod else None, owner=OWNER)
    return render_instance(ref, part.runners)


def env_of(container: Obj) -> dict[str, str]:
    return {e["name"]: e.get("value", "<from>") for e in container.get("env") or []}


SHAPES = [
    # (runtime file, {component: (pod names of Instance 0, PARALLELISM_SIZE, multi-pod)})
    ("runtimes/vllm/llama-3-1-8b-instruct-rt.yaml",
     {"engine": (["svc-engine-0-default-0"], "1", False)}),
    ("runtimes/srt/meta/llama-3-1-8b-instruct-rt.yaml",
     {"engine": (["svc-engine-0-default-0"], "1", False), "router": (["svc-router-0-default-0"], None, False)}),
    ("runtimes/srt/deepseek-rdma-rt.yaml",
     {"engine": (["svc-engine-0-leader-0", "svc-engine-0-worker-0"], "16", True),
      "router": (["svc-router-0-default-0"], None, False)}),
    ("runtimes/srt/meta/llama-3-2-1b-instruct-pd-rt.yaml",
     {"engine": (["svc-engine-0-default-0"], "1", False), "decoder": (["svc-decoder-0-default-0"], "1", False),
      "router": (["svc-router-0-default-0"], None, False)}),
    ("runtimes/srt/deepseek-rdma-pd-rt.yaml",
     {"engine": (["svc-engine-0-leader-0", "svc-engine-0-worker-0"], "16", True),
      "decoder": (["svc-decoder-0-leader-0", "svc-decoder-0-worker-0"], "16", True),
      "router": (["svc-router-0-default-0"], None, False)}),
]


@pytest.mark.parametrize(("path", "expected"), SHAPES, ids=[p.split("/")[-1] for p, _ in SHAPES])
def test_each_catalog_shape_renders_as_expected(path: str, expected: dict[str, tuple[list[str], str | None, bool]]
                                                ) -> None:
    plan = plan_for(load(path))
    assert {p.name for p in plan.components} == set(expected)
    for part in plan.components:
        names, parallelism, multi = expected[part.name]
        pods = pods_of(part)
        assert [p["metadata"]["name"] for p in pods] == names
        assert part.multi_pod is multi
        for rank, pod in enumerate(pods):
            labels = pod["metadata"]["labels"]
            assert labels[c.LABEL_ISVC] == "svc" and labels[c.LABEL_COMPONENT] == part.name
            assert labels[c.LABEL_MANAGED_BY] == "OMENative" and labels[c.LABEL_INSTANCE_INDEX] == "0"
            assert pod["spec"]["readinessGates"][-1] == {"conditionType": c.SERVING_GATE}
            assert pod["spec"]["hostname"] == pod["metadata"]["name"]
            assert pod["spec"]["subdomain"] == f"svc-{part.name}-headless"
            main = next(x for x in pod["spec"]["containers"] if x["name"] in (c.MAIN_CONTAINER, "router"))
            env = env_of(main)
            assert env["OME_COMPONENT"] == part.name and env["OME_INSTANCE_INDEX"] == "0"
            if part.name == c.ROUTER:
                assert pod["spec"]["serviceAccountName"] == "svc-router"
                assert c.ENV_MODEL_PATH not in env and "affinity" not in pod["spec"]
                continue
            assert env.get(c.ENV_PARALLELISM_SIZE) == parallelism
            assert env[c.ENV_MODEL_PATH] == "/raid/models/org/the-model"
            terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            assert {"key": "models.ome.io/clusterbasemodel.the-model", "operator": "In", "values": ["Ready"]} in \
                terms["nodeSelectorTerms"][0]["matchExpressions"]
            if multi:
                assert env["OME_INSTANCE_POD_RANK"] == str(rank)
                assert env["OME_INSTANCE_POD_COUNT"] == "2"
                assert env["OME_LEADER_ADDRESS"] == f"svc-{part.name}-0-leader-0.svc-{part.name}-headless"
                assert pod["metadata"]["labels"][c.LABEL_POD_GROUP] == "svc-engine-0"
        main_service, headless = part.services
        assert main_service["spec"]["selector"].get(c.LABEL_RUNNER) == ("leader" if multi else None)
        assert headless["spec"]["publishNotReadyAddresses"] is True
    entry_target = "router" if "router" in expected else "engine"
    assert plan.entry is not None and plan.entry["spec"]["selector"][c.LABEL_COMPONENT] == entry_target


def test_the_prefill_decode_runtime_keeps_host_network_and_gets_privileged_rdma() -> None:
    plan = plan_for(load("runtimes/srt/meta/llama-3-2-1b-instruct-pd-rt.yaml"))
    for part in plan.components:
        pod = pods_of(part)[0]
        if part.name == c.ROUTER:
            assert "hostNetwork" not in pod["spec"]
            continue
        assert pod["spec"]["hostNetwork"] is True and pod["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
        main = pod["spec"]["containers"][0]
        assert main["securityContext"]["privileged"] is True
        assert main["ports"][0]["containerPort"] == 8080


def test_lws_variables_are_translated_for_leader_worker_set_era_runtimes() -> None:
    plan = plan_for(load("runtimes/srt/deepseek-rdma-rt.yaml"))
    engine = next(p for p in plan.components if p.name == c.ENGINE)
    leader, worker = pods_of(engine)
    for rank, pod in enumerate((leader, worker)):
        env = env_of(pod["spec"]["containers"][0])
        if "LWS_WORKER_INDEX" in referenced_vars(pod["spec"]["containers"][0]):
            assert env["LWS_WORKER_INDEX"] == str(rank)
        if "LWS_LEADER_ADDRESS" in referenced_vars(pod["spec"]["containers"][0]):
            assert env["LWS_LEADER_ADDRESS"] == "svc-engine-0-leader-0.svc-engine-headless"


def test_every_catalog_runtime_renders_with_every_variable_defined() -> None:
    checked = 0
    pods = 0
    undefined: list[str] = []
    for path, runtime in runtimes():
        for part in plan_for(runtime).components:
            for pod in pods_of(part):
                pods += 1
                for container in pod["spec"]["containers"]:
                    defined = set(env_of(container))
                    texts = [*(container.get("command") or []), *(container.get("args") or [])]
                    used = referenced_vars({"command": texts})
                    checked += len(used)
                    undefined += [f"{path} {pod['metadata']['name']}/{container['name']}: $({v})"
                                  for v in sorted(used - defined)]
    assert undefined == []
    assert len(runtimes()) == 207
    print(f"rendered {pods} pods of 207 catalog runtimes; {checked} $(VAR) references, all defined")


def test_a_pod_monitor_per_component_while_its_crd_is_installed() -> None:
    runtime = load("runtimes/srt/meta/llama-3-2-1b-instruct-pd-rt.yaml")
    info = desired.RuntimeInfo(name=runtime["metadata"]["name"], namespaced=False,
                               spec=copy.deepcopy(runtime["spec"]))
    without = desired.build(desired.Inputs(isvc=isvc_for(runtime), model=MODEL, config=ControllerConfig(),
                                           runtime=info))
    assert all(part.pod_monitor is None for part in without.components)
    plan = desired.build(desired.Inputs(isvc=isvc_for(runtime), model=MODEL, config=ControllerConfig(),
                                        runtime=info, pod_monitors=True))
    monitors = {part.name: part.pod_monitor for part in plan.components}
    assert set(monitors) == {"engine", "decoder", "router"}
    engine = monitors["engine"]
    assert engine is not None and engine["kind"] == "PodMonitor" and engine["metadata"]["name"] == "svc-engine"
    assert engine["spec"]["selector"]["matchLabels"] == {"ome.io/inferenceservice": "svc", "component": "engine",
                                                         "ome.io/managed-by": "OMENative"}
    # OME's metrics page: every series carries inferenceservice, component and revision_hash, from the pod's labels.
    assert engine["spec"]["podMetricsEndpoints"][0]["relabelings"] == [
        {"sourceLabels": ["__meta_kubernetes_pod_label_ome_io_inferenceservice"], "targetLabel": "inferenceservice"},
        {"sourceLabels": ["__meta_kubernetes_pod_label_component"], "targetLabel": "component"},
        {"sourceLabels": ["__meta_kubernetes_pod_label_ome_io_revision_hash"], "targetLabel": "revision_hash"}]
    assert engine in next(p for p in plan.components if p.name == "engine").children
    assert engine["metadata"]["ownerReferences"][0]["uid"] == "u-1"


@pytest.mark.parametrize(("ports", "scraped"), [
    ([{"name": "http", "containerPort": 8080}, {"name": "metrics", "containerPort": 9090}], "metrics"),
    ([{"name": "serve", "containerPort": 8080}], "serve"),
    ([{"containerPort": 8080}], "http"),
    ([], "http"),
])
def test_the_pod_monitor_scrapes_the_port_ome_would(ports: list[Obj], scraped: str) -> None:
    from omenative.render.templates import metrics_port_name

    runner = {"name": "default", "template": {"spec": {"containers": [{"name": "ome-container", "ports": ports}]}}}
    assert metrics_port_name([runner]) == scraped


@pytest.mark.parametrize(("spec", "component", "peers"), [
    ({"engine": {}, "decoder": {}, "router": {}, "rollout": {"groups": [{"components": ["engine", "decoder"]}]}},
     "engine", ("decoder", "router")),
    ({"engine": {}, "decoder": {}, "router": {}, "rollout": {"groups": [{"components": ["engine", "decoder"]}]}},
     "router", ("engine", "decoder")),
    ({"engine": {}, "decoder": {}}, "engine", ()),  # no rollout groups: no peer variables, as OME
    ({"engine": {}, "decoder": {}, "rollout": {"groups": []}}, "engine", ()),
    (None, "engine", ()),
])
def test_the_peers_of_a_component_in_a_rollout_group(spec: Any, component: str, peers: tuple[str, ...]) -> None:
    assert peers_of(spec, component) == peers


def test_a_pod_of_a_rollout_group_gets_each_peers_endpoint() -> None:
    runner = {"name": "default", "size": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
    ref = InstanceRef(isvc="llama-pd", namespace="llama-demo", component="engine", index=0, incarnation=1,
                      revision="r", replicas=1, peers=("decoder", "router"))
    (pod,) = render_instance(ref, [runner])
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["OME_DECODER_ENDPOINT"] == "llama-pd-decoder.llama-demo.svc.cluster.local"
    assert env["OME_ROUTER_ENDPOINT"] == "llama-pd-router.llama-demo.svc.cluster.local"
    (alone,) = render_instance(attrs.evolve(ref, peers=()), [runner])
    assert not [e for e in alone["spec"]["containers"][0]["env"] if e["name"].endswith("_ENDPOINT")]
