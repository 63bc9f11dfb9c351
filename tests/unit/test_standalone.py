"""Standalone InferenceReplicas: which replica is projected, and OME's admission rules for one the user owns."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from omenative.api.standalone import projected, standalone_errors, standalone_warnings
from omenative.controllers.inferencereplica.watches import reference_index

Obj = dict[str, Any]
CONTAINER = {"name": "ome-container", "image": "docker.io/hashicorp/http-echo:1.0.0"}
GOOD: Obj = {"metadata": {"name": "standalone-http"}, "spec": {
    "component": "engine", "replicas": 1, "runners": [{"name": "default", "size": 1,
                                                       "template": {"spec": {"containers": [CONTAINER]}}}]}}


def with_(path: str, value: Any) -> Obj:
    obj = copy.deepcopy(GOOD)
    *parents, last = path.split(".")
    node = obj
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return obj


def errors(obj: Obj, old: Obj | None = None, services: tuple[str, ...] = ("llm",)) -> list[str]:
    return standalone_errors(obj, old, lambda name: name in services)


def test_projected_or_standalone() -> None:
    assert not projected(GOOD)
    assert projected(with_("spec.parentRef", {"name": "llm"}))
    assert projected(with_("metadata.ownerReferences", [{"kind": "InferenceService", "controller": True}]))
    assert not projected(with_("metadata.ownerReferences", [{"kind": "Deployment", "controller": True}]))


def test_a_well_formed_replica_passes_and_a_leader_with_workers_too() -> None:
    assert errors(GOOD) == []
    gang = with_("spec.runners", [{"name": "leader", "size": 1, "template": {"spec": {"containers": [CONTAINER]}}},
                                  {"name": "worker", "size": 3, "template": {"spec": {"containers": [CONTAINER]}}}])
    assert errors(gang) == []


@pytest.mark.parametrize(("obj", "said"), [
    (with_("metadata.name", "Bad_Name"), "must match [a-z]([-a-z0-9]*[a-z0-9])?"),
    (with_("metadata.name", "llm"), "collides with InferenceService 'llm'"),
    (with_("metadata.name", "llm-decoder"), "collides with InferenceService 'llm'"),
    (with_("metadata.annotations", {"ome.io/controller-write": "true"}), "drop the copied annotation"),
    (with_("metadata.annotations", {"ome.io/migration-request-v1-x": "{}"}), "a migration request is not accepted"),
    (with_("spec.placementReplicaLimit", 2), "spec.placementReplicaLimit is written only by the InferenceService"),
    (with_("spec.runtimeRef", {"name": "http-echo"}), "are two template sources"),
    ({"metadata": {"name": "r"}, "spec": {"component": "engine", "runtimeRef": {"name": "x", "autoSync": False}}},
     "pin a runtime, which a replica does not honor"),
    ({"metadata": {"name": "r"}, "spec": {"component": "engine", "runtimeRef": {"name": "x", "revision": "x-1"}}},
     "pin a runtime, which a replica does not honor"),
    ({"metadata": {"name": "r"}, "spec": {"component": "engine", "modelRef": {"kind": "BaseModel"}}},
     "spec.modelRef.name is required"),
    ({"metadata": {"name": "r"}, "spec": {"component": "engine", "modelRef": {"name": "m"},
                                          "runtimeRef": {"name": "x", "autoSync": False}}},
     "pin a runtime, which a replica does not honor"),
    ({"metadata": {"name": "r"}, "spec": {"component": "engine"}}, "TemplateSourceMissing"),
    (with_("spec.runners", [{"name": "leader", "size": 1, "template": {"spec": {"containers": [CONTAINER]}}}]),
     "must be one `default` runner"),
    (with_("spec.runners", [{"name": "default", "size": 2, "template": {"spec": {"containers": [CONTAINER]}}}]),
     "spec.runners[default].size must be 1, got 2"),
    (with_("spec.autoscaler", {"class": "KEDA"}), "spec.autoscaler.class KEDA: only the InferenceService"),
    (with_("spec.lifecycle", {"minReadySeconds": 5}), "set spec.minReadySeconds"),
    (with_("spec.pacing", {"partition": 2}), "spec.pacing.partition (2) must not exceed spec.replicas (1)"),
])
def test_what_the_webhook_refuses(obj: Obj, said: str) -> None:
    found = errors(obj)
    assert any(said in e for e in found), found


def test_a_runtime_reference_alone_is_a_template_source() -> None:
    ref: Obj = {"metadata": {"name": "r"}, "spec": {"component": "engine", "runtimeRef": {"name": "http-echo"}}}
    assert errors(ref) == []  # a runtime that does not exist yet is admitted
    assert errors(ref) == standalone_errors(ref, None, lambda name: False, runtime={"engineConfig": {"runner": {}}})
    assert standalone_errors(ref, None, lambda name: False, runtime={"routerConfig": {}}) == [
        "runtime http-echo has no engineConfig: this replica could not render, and no retry would change that"]


def test_the_component_is_immutable_and_external_is_accepted() -> None:
    assert errors(with_("spec.component", "decoder"), old=GOOD) == [
        "spec.component is immutable: recreate the replica to change its role"]
    assert errors(with_("spec.autoscaler", {"class": "External"})) == []


def test_a_model_reference_is_a_template_source_alone_or_with_a_runtime() -> None:
    model: Obj = {"metadata": {"name": "llama-pool"}, "spec": {"component": "engine",
                                                             "modelRef": {"name": "llama-3-2-1b-instruct"}}}
    assert errors(model) == []  # a model that does not exist yet is admitted: the replica reports ModelNotFound
    assert standalone_warnings(model) == []
    named = copy.deepcopy(model)
    named["spec"]["runtimeRef"] = {"name": "vllm"}
    assert errors(named) == []
    assert standalone_errors(named, None, lambda name: False, runtime={"decoderConfig": {}}) == [
        "runtime vllm has no engineConfig: this replica could not render, and no retry would change that"]
    both = copy.deepcopy(GOOD)
    both["spec"]["modelRef"] = {"name": "m"}
    assert any("are two template sources" in e for e in errors(both))


def test_what_a_model_reference_holds_but_omenative_does_not_do_is_warned_by_name() -> None:
    model: Obj = {"metadata": {"name": "r"}, "spec": {"component": "engine", "modelRef": {
        "name": "m", "fineTunedWeights": ["lora"], "overlays": [{"name": "draft"}]}}}
    assert errors(model) == []
    assert standalone_warnings(model) == [
        "not supported by omenative: spec.modelRef.fineTunedWeights (no fine-tuned weights are loaded; the base model "
        "is served alone)",
        "not supported by omenative: spec.modelRef.overlays (no overlay models are mounted; the base model is served "
        "alone)"]


@pytest.mark.parametrize(("spec", "keys"), [
    ({"modelRef": {"name": "m"}}, ["model/m", "runtime/"]),  # a selected runtime: any runtime may change the choice
    ({"modelRef": {"name": "m"}, "runtimeRef": {"name": "vllm"}}, ["runtime/vllm", "model/m"]),
    ({"runtimeRef": {"name": "vllm"}}, ["runtime/vllm"]),
    ({"runners": GOOD["spec"]["runners"]}, []),
    ({"parentRef": {"name": "llm"}, "runtimeRef": {"name": "vllm"}}, []),  # projected: its InferenceService renders
])
def test_what_wakes_a_standalone_replica(spec: Obj, keys: list[str]) -> None:
    assert reference_index({"metadata": {"name": "r"}, "spec": {"component": "engine", **spec}}) == keys
