"""Pod-template fields of the wrong type are found with their path, as the API server would find them in a pod,
before anything reads them; and a spec too large to copy into an InferenceReplica is named by its largest field."""

from __future__ import annotations

from typing import Any

import pytest

from omenative.api.pod_fields import (
    InvalidSpec,
    component_problems,
    core_types,
    pod_part_problems,
    size_problems,
)
from tests.support.catalog import MULTI_NODE_SEED, PD_SEED, runtimes, seed_yaml_blocks

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("part", "problem"), [
    ({"containers": [{"name": "ome-container", "command": "python"}]},
     'spec.engine.containers[0].command: must be a list, got string "python"'),
    ({"runner": {"args": ["--port", 8080]}}, "spec.engine.runner.args[1]: must be a string, got number 8080"),
    ({"runner": {"resources": {"limits": {"nvidia.com/gpu": "1.2.3"}}}},
     'spec.engine.runner.resources.limits[nvidia.com/gpu]: must be a quantity such as 1, 500m or 16Gi, got string '
     '"1.2.3"'),
    ({"runner": {"ports": [{"containerPort": "8080"}]}},
     'spec.engine.runner.ports[0].containerPort: must be an integer, got string "8080"'),
    ({"runner": {"env": {"A": "b"}}}, "spec.engine.runner.env: must be a list, got an object"),
    ({"runner": {"livenessProbe": {"httpGet": {"port": True}}}},
     "spec.engine.runner.livenessProbe.httpGet.port: must be an integer or a string, got boolean true"),
    ({"leader": {"runner": {"image": 7}}}, "spec.engine.leader.runner.image: must be a string, got number 7"),
    ({"worker": {"size": 1, "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "lots"}}]}},
     'spec.engine.worker.volumes[0].emptyDir.sizeLimit: must be a quantity such as 1, 500m or 16Gi, got string '
     '"lots"'),
    ({"tolerations": "all"}, 'spec.engine.tolerations: must be a list, got string "all"'),
    ({"affinity": {"nodeAffinity": []}},
     "spec.engine.affinity.nodeAffinity: must be an object (NodeAffinity), got a list"),
    ({"hostNetwork": "yes"}, 'spec.engine.hostNetwork: must be true or false, got string "yes"'),
])
def test_a_field_of_the_wrong_type_is_named_with_its_path(part: dict[str, Any], problem: str) -> None:
    assert pod_part_problems(part, "spec.engine") == [problem]


@pytest.mark.parametrize("quantity", [1, 0.5, "1", "500m", "16Gi", "1e3", "+2", ".5", "100n", "2E"])
def test_quantities_the_api_server_takes_are_taken(quantity: Any) -> None:
    assert pod_part_problems({"runner": {"resources": {"requests": {"cpu": quantity}}}}, "x") == []


def test_fields_omenative_types_itself_and_nulls_are_left_alone() -> None:
    part = {"minReplicas": "not mine", "lifecycle": {"x": 1}, "worker": {"size": "two"}, "runner": {"command": None}}
    assert pod_part_problems(part, "spec.engine") == []


def test_a_refusal_names_the_first_ten_problems_and_counts_the_rest() -> None:
    problems = component_problems({"engine": {"runner": {"args": list(range(15))}}}, "spec", ("engine",))
    message = str(InvalidSpec(problems))
    assert message.count("must be a string") == 10 and message.endswith("(and 1 more)")


def test_the_table_is_the_core_podspec_closure() -> None:
    types = core_types()
    assert types["PodSpec"]["containers"] == ["list", {"ref": "Container"}]
    assert types["ResourceRequirements"]["limits"] == ["map", "quantity"]


def test_a_spec_too_large_to_copy_names_its_largest_field() -> None:
    spec = {"engine": {"runner": {"env": [{"name": "BLOB", "value": "x" * 600_000}]}}}
    (problem,) = size_problems(spec)
    assert "the largest field is spec.engine.runner.env[0].value (600002 bytes)" in problem
    assert size_problems({"engine": {"runner": {"image": "i"}}}) == []


def test_every_catalog_runtime_and_seed_passes_the_type_check() -> None:
    """No false refusal: OME's 207 catalog runtimes and the guides' objects have every pod field of its type."""
    configs = ("engineConfig", "decoderConfig", "routerConfig")
    checked = 0
    for where, runtime in runtimes():
        assert component_problems(runtime.get("spec") or {}, "spec", configs) == [], where
        checked += 1
    for obj in seed_yaml_blocks(MULTI_NODE_SEED) + seed_yaml_blocks(PD_SEED):
        keys = configs if obj["kind"] == "ClusterServingRuntime" else ("engine", "decoder", "router")
        assert component_problems(obj.get("spec") or {}, "spec", keys) == [], obj["metadata"]["name"]
        checked += 1
    assert checked == 207 + 4
