"""Admission checks of InferenceServices."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from omenative.api.types import BaseModelSpec, ServingRuntimeSpec
from omenative.api.validation import Admission, validate_inference_service
from tests.support.catalog import MULTI_NODE_SEED, PD_SEED, load, seed_yaml_blocks


def multi_node() -> tuple[dict[str, Any], dict[str, Any]]:
    runtime, isvc, _ = seed_yaml_blocks(MULTI_NODE_SEED)
    return runtime, isvc


def test_the_multi_node_seed_is_admitted_without_warnings() -> None:
    runtime, isvc = multi_node()
    findings = validate_inference_service(isvc, Admission(runtime_raw=runtime["spec"]))
    assert findings.errors == ()
    assert findings.warnings == ()


def test_the_lifecycle_version_of_the_seed_is_admitted() -> None:
    runtime, _, isvc = seed_yaml_blocks(MULTI_NODE_SEED)
    assert validate_inference_service(isvc, Admission(runtime_raw=runtime["spec"])).allowed


@pytest.mark.parametrize("only", ["leader", "worker"])
def test_an_engine_with_only_a_leader_or_only_a_worker_is_rejected(only: str) -> None:
    runtime, isvc = multi_node()
    other = "worker" if only == "leader" else "leader"
    del isvc["spec"]["engine"][other]
    findings = validate_inference_service(isvc, Admission(runtime_raw=runtime["spec"]))
    assert findings.errors == (
        f"engine declares {only} without {other}: a multi-node engine needs both leader and worker "
        "(leader: {} and worker: {} keep the runtime's settings)",)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda s: s["engine"].update(minReplicas=3, maxReplicas=2),
         "engine.minReplicas (3) is greater than engine.maxReplicas (2)"),
        (lambda s: s["engine"].update(lifecycle={"readyPolicy": "None"}),
         "engine.lifecycle.readyPolicy 'None' is not allowed for a engine with a leader and workers: use "
         "AllPodReady"),
        (lambda s: s["engine"].update(lifecycle={"instanceReadyTimeout": "45 minutes"}),
         "engine.lifecycle.instanceReadyTimeout: invalid duration '45 minutes': use a number and a unit, such as "
         "30m or 1h30m"),
        (lambda s: s["engine"].update(lifecycle={"updateStrategy": {"rollingUpdate": {"maxSurge": "a lot"}}}),
         "engine.lifecycle.updateStrategy.rollingUpdate.maxSurge: invalid value 'a lot': use a whole number or a "
         "percentage such as 25%"),
        (lambda s: s["engine"].update(lifecycle={"updateStrategy": {"rollingUpdate": {"maxSurge": 0,
                                                                                      "maxUnavailable": "0%"}}}),
         "ZeroBudgetPacingUnstartable: engine.lifecycle.updateStrategy.rollingUpdate sets both maxSurge and "
         "maxUnavailable to 0, so no update could ever start"),
        (lambda s: s["engine"]["worker"].update(size=0), "engine.worker.size must be at least 1, got 0"),
        (lambda s: s.update(decoder={}, engine=None), "decoder cannot be specified without engine"),
    ],
)
def test_bad_input_is_rejected_with_a_reason(mutate: Any, expected: str) -> None:
    runtime, isvc = multi_node()
    mutate(isvc["spec"])
    if isvc["spec"].get("engine") is None:
        isvc["spec"].pop("engine")
    assert expected in validate_inference_service(isvc, Admission(runtime_raw=runtime["spec"])).errors


def test_a_runtime_worker_size_of_zero_is_rejected_unless_the_inferenceservice_sets_one() -> None:
    runtime, isvc = multi_node()
    runtime["spec"]["engineConfig"]["worker"]["size"] = 0
    isvc["spec"]["engine"]["worker"].pop("size", None)
    assert validate_inference_service(isvc, Admission(runtime_raw=runtime["spec"])).errors == (
        "engine.worker.size from the runtime's engineConfig.worker.size must be at least 1, got 0: set "
        "engine.worker.size in the InferenceService",)
    isvc["spec"]["engine"]["worker"]["size"] = 2
    assert validate_inference_service(isvc, Admission(runtime_raw=runtime["spec"])).errors == ()


def test_a_name_too_long_for_pod_hostnames_is_rejected_with_the_limit() -> None:
    runtime, isvc = multi_node()
    isvc = copy.deepcopy(isvc)
    isvc["metadata"]["name"] = "q" * 46
    errors = validate_inference_service(isvc, Admission(runtime_raw=runtime["spec"])).errors
    assert len(errors) == 1
    assert "over the 63 a pod hostname or Service name allows; use at most 45 characters" in errors[0]
    isvc["metadata"]["name"] = "q" * 45
    assert validate_inference_service(isvc, Admission(runtime_raw=runtime["spec"])).allowed


def test_engine_and_decoder_modes_must_agree_when_one_is_omenative() -> None:
    isvc = {"metadata": {"name": "x"}, "spec": {
        "engine": {"annotations": {"ome.io/deploymentMode": "OMENative"}}, "decoder": {}}}
    assert validate_inference_service(isvc).errors == (
        'InvalidDeploymentModeCombination: engine deploymentMode="OMENative" does not match decoder '
        'deploymentMode=""; when either is OMENative, both must use the same value',)


def test_warnings_for_lws_variables_host_network_dns_and_deployment_strategy() -> None:
    runtime = load("runtimes/srt/deepseek-rdma-rt.yaml")
    isvc = {"metadata": {"name": "ds"}, "spec": {"engine": {"leader": {}, "worker": {}, "deploymentStrategy": {}},
                                                 "router": {}}}
    warnings = validate_inference_service(isvc, Admission(runtime_raw=runtime["spec"])).warnings
    assert any("LWS_LEADER_ADDRESS" in w and "OME_LEADER_ADDRESS" in w for w in warnings)
    assert any(w.startswith("engine.deploymentStrategy is set but deploymentMode is \"OMENative\"") for w in warnings)
    broken = copy.deepcopy(runtime)
    broken["spec"]["engineConfig"]["leader"].pop("dnsPolicy")
    warnings = validate_inference_service(isvc, Admission(runtime_raw=broken["spec"])).warnings
    assert any("engine.leader runs with hostNetwork: true but dnsPolicy is not ClusterFirstWithHostNet" in w
               for w in warnings)


def test_the_prefill_decode_seed_is_admitted_with_the_seed_warning() -> None:
    (isvc,) = seed_yaml_blocks(PD_SEED)
    runtime = load("runtimes/srt/meta/llama-3-2-1b-instruct-pd-rt.yaml")
    model = BaseModelSpec.from_dict(load("models/meta/Llama-3.2-1B-Instruct.yaml")["spec"] | {
        "modelFormat": {"name": "safetensors", "version": "1.0.0"},
        "modelFramework": {"name": "transformers", "version": "4.45.0.dev0"},
        "modelArchitecture": "LlamaForCausalLM", "modelParameterSize": "1.24B"})
    findings = validate_inference_service(isvc, Admission(
        runtime_name="srt-llama-3-2-1b-instruct-pd", runtime=ServingRuntimeSpec.from_dict(runtime["spec"]),
        runtime_raw=runtime["spec"], model_name="llama-3-2-1b-instruct", model=model))
    assert findings.errors == ()
    assert findings.warnings[-1].startswith(
        'runtime "srt-llama-3-2-1b-instruct-pd" does not declare support for model "llama-3-2-1b-instruct"')
