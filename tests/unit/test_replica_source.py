"""A standalone replica's pod templates from its references: the runtime's piece alone (no model), or with the model
mounted as an InferenceService's component mounts it; a router mounts no model."""

from __future__ import annotations

from typing import Any

import pytest

from omenative.api.config import ControllerConfig
from omenative.api.types import BaseModelSpec
from omenative.render.replica_source import PieceMissing, runtime_runners
from omenative.render.templates import ModelInfo

Obj = dict[str, Any]
RUNTIME: Obj = {
    "engineConfig": {"runner": {"name": "ome-container", "image": "vllm:1", "resources": {"limits": {
        "nvidia.com/gpu": "1"}}}},
    "routerConfig": {"runner": {"name": "router", "image": "router:1"}},
}
MODEL = ModelInfo(name="llama-3-2-1b-instruct", namespaced=False, namespace="llama-demo",
                  spec=BaseModelSpec.from_dict({"storage": {"path": "/raid/models/llama"}}))


def render(component: str, model: ModelInfo | None, runtime: Obj = RUNTIME) -> list[Obj]:
    return runtime_runners(replica="llama-pool", namespace="llama-demo", component=component, runtime_name="vllm",
                           runtime_spec=runtime, config=ControllerConfig(), model=model)


def container(runners: list[Obj]) -> Obj:
    (runner,) = runners
    spec = runner["template"]["spec"]
    return next(ctr for ctr in spec["containers"] if ctr["name"] in ("ome-container", "router"))


def env(ctr: Obj) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in ctr.get("env") or []}


def test_a_runtime_alone_renders_its_piece_with_no_model() -> None:
    runners = render("engine", None)
    spec = runners[0]["template"]["spec"]
    assert container(runners)["image"] == "vllm:1"
    assert "MODEL_PATH" not in env(container(runners))
    assert "affinity" not in spec and not spec.get("volumes")


def test_a_model_is_mounted_with_its_path_and_its_nodes() -> None:
    runners = render("engine", MODEL)
    spec, ctr = runners[0]["template"]["spec"], container(runners)
    assert env(ctr)["MODEL_PATH"] == "/raid/models/llama"
    assert {"name": "llama-3-2-1b-instruct", "hostPath": {"path": "/raid/models/llama"}} in spec["volumes"]
    assert {"name": "llama-3-2-1b-instruct", "mountPath": "/raid/models/llama", "readOnly": True} in \
        ctr["volumeMounts"]
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "models.ome.io/clusterbasemodel.llama-3-2-1b-instruct", "operator": "In", "values": ["Ready"]} \
        in term["matchExpressions"]


def test_a_router_mounts_no_model() -> None:
    runners = render("router", MODEL)
    assert "MODEL_PATH" not in env(container(runners))
    assert "affinity" not in runners[0]["template"]["spec"]


def test_a_runtime_without_the_piece_cannot_render() -> None:
    with pytest.raises(PieceMissing, match="runtime vllm declares no decoderConfig for this decoder replica"):
        render("decoder", MODEL)
