"""Runtime support and selection, with OME's reason texts."""

from __future__ import annotations

import pytest

from omenative.api.selection import (
    Candidate,
    Version,
    incompatibility,
    model_label,
    named_runtime_warning,
    no_runtime_message,
    select_runtime,
    size_reason,
    version_accepts,
)
from omenative.api.types import BaseModelSpec, ServingRuntimeSpec
from tests.support.catalog import load


@pytest.mark.parametrize(
    ("runtime", "operator", "model", "matches"),
    [
        ("1.0.0", "Equal", "1.0.0", True),
        ("1.0.0", None, "1.0", True),  # a missing part counts as 0
        ("1.8.0", "GreaterThan", "1.7.0", True),
        ("1.8.0", "GreaterThan", "1.8.0", False),
        ("1.8.0", "GreaterThanOrEqual", "1.8.0", True),
        ("4.50.0", "GreaterThanOrEqual", "4.36.2", True),
        ("4.50.0", "GreaterThanOrEqual", "4.51.0", False),
        ("1.8.0-dev", "GreaterThan", "1.8.0-dev", True),
        ("4.45.0.dev0", "GreaterThanOrEqual", "4.44.0", False),
        ("4.50.0", "GreaterThanOrEqual", "4.45.0.dev0", False),
        ("1.8", "GreaterThan", "1.7.0", False),  # different numbers of parts
        ("v1.0.0", "Equal", "1.0.0", True),  # Equal ignores the v
        ("v1.0.0", "GreaterThanOrEqual", "1.0.0", False),  # ordering needs the same v
        ("4.43.0", "Equal", "4.45.0.dev0", False),
        ("4.45.0.dev0", "Equal", "4.45.0.dev0", True),
        ("1.0.0", "LessThan", "1.0", False),  # unknown operators are a strict Equal
        ("1.08.0", "Equal", "1.8.0", False),  # malformed versions never match
    ],
)
def test_version_operators(runtime: str, operator: str | None, model: str, matches: bool) -> None:
    assert version_accepts(runtime, model, operator) is matches


@pytest.mark.parametrize(
    ("text", "parses"),
    [("1", True), ("v1.12", True), ("0.6.0", True), ("4.51.3-SAM-HQ-preview", True), ("4.43.0+build", True),
     ("4.45.0.dev0", True), ("1.2.3.4", True), ("1.08.0", False), ("V1.0.0", False), ("1.2-beta", False),
     ("1.0.0-", False), ("", False)],
)
def test_version_syntax(text: str, parses: bool) -> None:
    assert (Version.parse(text) is not None) is parses


def llama_model(framework: str = "4.45.0.dev0", size: str | None = "1.24B") -> BaseModelSpec:
    """The catalog model after the model agent read its config.json."""
    return BaseModelSpec.from_dict({
        "modelFormat": {"name": "safetensors", "version": "1.0.0"},
        "modelFramework": {"name": "transformers", "version": framework},
        "modelArchitecture": "LlamaForCausalLM",
        "modelParameterSize": size,
        "storage": {"storageUri": "hf://meta-llama/Llama-3.2-1B-Instruct"},
    })


def pd_runtime() -> ServingRuntimeSpec:
    return ServingRuntimeSpec.from_dict(load("runtimes/srt/meta/llama-3-2-1b-instruct-pd-rt.yaml")["spec"])


def test_the_seed_warning_text_exactly() -> None:
    warning = named_runtime_warning("srt-llama-3-2-1b-instruct-pd", "llama-3-2-1b-instruct", llama_model(),
                                    pd_runtime())
    assert warning == (
        'runtime "srt-llama-3-2-1b-instruct-pd" does not declare support for model "llama-3-2-1b-instruct" '
        "(runtime srt-llama-3-2-1b-instruct-pd does not support model safetensors: model format "
        "'mt:safetensors:1.0.0:LlamaForCausalLM:transformers:4.45.0.dev0' not in supported formats: framework "
        "version mismatch (model=4.45.0.dev0, runtime=4.43.0)); proceeding because the runtime was named "
        "explicitly")


def test_a_supported_model_gets_no_warning() -> None:
    assert named_runtime_warning("rt", "m", llama_model(framework="4.43.0"), pd_runtime()) is None


def entry(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "modelFormat": {"name": "safetensors", "version": "1.0.0"},
        "modelFramework": {"name": "transformers", "version": "4.45.0.dev0"},
        "modelArchitecture": "LlamaForCausalLM",
    }
    base.update(overrides)
    return base


@pytest.mark.parametrize(
    ("entry_fields", "reason"),
    [
        ({"modelFormat": {"name": "gguf"}}, "format name mismatch (model=safetensors, runtime=gguf)"),
        ({"modelFormat": {"name": "safetensors", "version": "2.0.0"}},
         "format version mismatch (model=1.0.0, runtime=2.0.0)"),
        ({"modelFormat": {"name": "safetensors"}}, "model has format version but runtime has no version requirement"),
        ({"modelArchitecture": "MistralForCausalLM"},
         "architecture mismatch (model=LlamaForCausalLM, runtime=MistralForCausalLM)"),
        ({"quantization": "fp8"}, "quantization mismatch (model=, runtime=fp8)"),
        ({"modelFramework": {"name": "diffusers", "version": "0.30.0"}},
         "framework name mismatch (model=transformers, runtime=diffusers)"),
        ({"modelFramework": {"name": "transformers", "version": "4.46.0"}},
         "framework version mismatch (model=4.45.0.dev0, runtime=4.46.0)"),
    ],
)
def test_each_kind_of_mismatch_has_its_own_reason(entry_fields: dict[str, object], reason: str) -> None:
    runtime = ServingRuntimeSpec.from_dict({"supportedModelFormats": [entry(**entry_fields)]})
    assert incompatibility(llama_model(), runtime) == (
        f"model format '{model_label(llama_model())}' not in supported formats: {reason}")


def test_differences_of_one_entry_join_with_commas_and_entries_with_semicolons() -> None:
    runtime = ServingRuntimeSpec.from_dict({"supportedModelFormats": [
        entry(modelArchitecture="Qwen2ForCausalLM", modelFramework={"name": "transformers", "version": "4.36.0"}),
        entry(modelFormat={"name": "gguf"}),
    ]})
    assert incompatibility(llama_model(), runtime) == (
        "model format 'mt:safetensors:1.0.0:LlamaForCausalLM:transformers:4.45.0.dev0' not in supported formats: "
        "architecture mismatch (model=LlamaForCausalLM, runtime=Qwen2ForCausalLM), framework version mismatch "
        "(model=4.45.0.dev0, runtime=4.36.0); format name mismatch (model=safetensors, runtime=gguf)")


@pytest.mark.parametrize(
    ("low", "high", "size", "reason"),
    [
        ("2B", "4B", "3.21B", None),
        ("2B", "4B", "4B", None),
        ("500M", "2B", "3.21B", "model size 3.21B is outside supported range [500M, 2B]"),
        ("1B", "4B", "1500M", None),
        ("70B", None, "405B", None),
        (None, "13B", "3.21B", None),
        ("70B", None, "8B", "model size 8B is outside supported range [70B, inf)"),
        ("2B", "4B", None, None),
    ],
)
def test_size_range(low: str | None, high: str | None, size: str | None, reason: str | None) -> None:
    model = BaseModelSpec.from_dict({"modelParameterSize": size, "storage": {"storageUri": "hf://x"}})
    runtime = ServingRuntimeSpec.from_dict({"modelSizeRange": {"min": low, "max": high}})
    assert size_reason(model, runtime) == reason


def test_automatic_selection_ranks_and_explains_exclusions() -> None:
    def rt(name: str, namespaced: bool = False, **fields: object) -> Candidate:
        spec = {"supportedModelFormats": [entry(autoSelect=True, priority=1)]}
        spec.update(fields)  # type: ignore[arg-type]
        return Candidate(name, namespaced, ServingRuntimeSpec.from_dict(spec))

    model = llama_model()
    chosen = select_runtime(model, [
        rt("cluster-b"), rt("cluster-a"), rt("off", disabled=True),
        rt("other", supportedModelFormats=[entry(autoSelect=True, modelArchitecture="X")]),
        rt("manual", supportedModelFormats=[entry(autoSelect=False)]),
    ])
    assert chosen.runtime is not None and chosen.runtime.name == "cluster-a"  # equal scores: by name
    reasons = dict(chosen.excluded)
    assert reasons["off"] == "cluster-scoped runtime off is disabled"
    assert reasons["other"].startswith("model format 'mt:safetensors")
    assert "autoSelect=true" in reasons["manual"]
    assert select_runtime(model, [rt("cluster-a"), rt("mine", namespaced=True)]).runtime.name == "mine"  # type: ignore[union-attr]
    nothing = select_runtime(model, [rt("off", disabled=True)])
    assert nothing.runtime is None
    assert no_runtime_message("llama", model, "demo", nothing) == (
        "no runtime found to support model safetensors with format safetensors in namespace demo. Checked 1 "
        "runtimes (0 namespace-scoped, 1 cluster-scoped). Excluded runtimes: off (cluster-scoped runtime off is "
        "disabled)")
