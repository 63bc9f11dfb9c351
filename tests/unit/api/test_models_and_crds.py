"""The models keep every field of OME's catalog and the seeds, and the committed CRDs are the generator's output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from omenative.api import crds
from omenative.api.schema import Model
from omenative.api.types import BaseModel, InferenceService, ServingRuntime
from tests.support.catalog import MULTI_NODE_SEED, PD_SEED, models, runtimes, seed_yaml_blocks

REPO = Path(__file__).resolve().parents[3]
KINDS: dict[str, type[Model]] = {
    "ClusterServingRuntime": ServingRuntime, "ServingRuntime": ServingRuntime,
    "ClusterBaseModel": BaseModel, "BaseModel": BaseModel, "InferenceService": InferenceService,
}


def all_objects() -> list[tuple[str, dict[str, Any]]]:
    seeds = [(f"seed {MULTI_NODE_SEED}", o) for o in seed_yaml_blocks(MULTI_NODE_SEED)]
    seeds += [(f"seed {PD_SEED}", o) for o in seed_yaml_blocks(PD_SEED)]
    return [*runtimes(), *models(), *seeds]


def test_every_catalog_and_seed_object_round_trips_through_the_models() -> None:
    objects = all_objects()
    for where, obj in objects:
        model = KINDS[obj["kind"]].from_dict(obj)
        assert model.to_dict() == obj, where
    counts = {"runtimes": len(runtimes()), "models": len(models())}
    assert counts == {"runtimes": 207, "models": 207}
    print(f"round-tripped {len(objects)} objects: 207 runtimes, 207 models, {len(objects) - 414} from the seeds")


def test_models_read_the_fields_they_declare() -> None:
    runtime, isvc, _ = seed_yaml_blocks(MULTI_NODE_SEED)
    parsed = InferenceService.from_dict(isvc)
    assert parsed.spec is not None and parsed.spec.engine is not None and parsed.spec.engine.worker is not None
    assert parsed.spec.engine.worker.size == 1
    assert parsed.spec.engine.leader is not None and parsed.spec.engine.leader.to_dict() == {}
    rt = ServingRuntime.from_dict(runtime)
    assert rt.spec is not None and rt.spec.engine_config is not None
    assert rt.spec.engine_config.tolerations == [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                  "effect": "NoSchedule"}]


@pytest.mark.parametrize("crd", crds.CRDS, ids=lambda c: c.plural)
def test_committed_crds_equal_the_generator_output(crd: crds.Crd) -> None:
    path = REPO / "manifests" / "crds" / f"ome.io_{crd.plural}.yaml"
    assert path.read_text() == crds.render(crd), (
        f"{path} is stale: run `python -m omenative.api.crds manifests/crds` and commit the result")


def test_inference_replica_crd_has_scale_printer_columns_and_short_name() -> None:
    manifest = crds.manifest(next(c for c in crds.CRDS if c.kind == "InferenceReplica"))
    version = manifest["spec"]["versions"][0]
    assert version["subresources"]["scale"] == {"specReplicasPath": ".spec.replicas",
                                                "statusReplicasPath": ".status.replicas",
                                                "labelSelectorPath": ".status.labelSelector"}
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Component", "Desired", "Current", "Ready", "Available", "Age"]
    assert manifest["spec"]["names"]["shortNames"] == ["irep"]
    assert manifest["spec"]["names"]["categories"] == ["ome"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["runners"]["x-kubernetes-list-map-keys"] == ["name"]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert status["properties"]["instanceStatuses"]["x-kubernetes-list-map-keys"] == ["index"]


def _undescribed(node: dict[str, Any], path: str) -> list[str]:
    missing = []
    for name, child in (node.get("properties") or {}).items():
        if name not in ("apiVersion", "kind", "metadata") and not child.get("description"):
            missing.append(f"{path}.{name}")
        missing += _undescribed(child, f"{path}.{name}")
    if "items" in node:
        missing += _undescribed(node["items"], path + "[]")
    return missing


@pytest.mark.parametrize("crd", crds.CRDS, ids=lambda c: c.plural)
def test_every_crd_has_the_status_subresource_and_descriptions(crd: crds.Crd) -> None:
    version = crds.manifest(crd)["spec"]["versions"][0]
    assert "status" in version["subresources"]
    assert _undescribed(version["schema"]["openAPIV3Schema"], crd.kind) == []
