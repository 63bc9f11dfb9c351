"""CustomResourceDefinitions generated from the models (`python -m omenative.api.crds manifests/crds`).

The committed files in manifests/crds are this module's output; a test fails when they differ.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import attrs
import yaml

from omenative.api import constants as c
from omenative.api.schema import Model, openapi_schema
from omenative.api.types import (
    BaseModel,
    InferenceReplica,
    InferenceService,
    ServingRuntime,
)

CATEGORY = "ome"


@attrs.frozen
class Crd:
    kind: str
    plural: str
    model: type[Model]
    scope: str = "Namespaced"
    short_names: tuple[str, ...] = ()
    columns: tuple[tuple[str, str, str], ...] = ()  # (name, type, jsonPath)
    scale: bool = False
    description: str = ""

    @property
    def name(self) -> str:
        return f"{self.plural}.{c.GROUP}"


AGE = ("Age", "date", ".metadata.creationTimestamp")
RUNTIME_COLUMNS = (
    ("Disabled", "boolean", ".spec.disabled"),
    ("ModelFormat", "string", ".spec.supportedModelFormats[*].modelFormat.name"),
    ("ModelFramework", "string", ".spec.supportedModelFormats[*].modelFramework.name"),
    ("ModelArchitecture", "string", ".spec.supportedModelFormats[*].modelArchitecture"),
    ("ModelSizeMin", "string", ".spec.modelSizeRange.min"),
    ("ModelSizeMax", "string", ".spec.modelSizeRange.max"),
    AGE,
)
MODEL_COLUMNS = (
    ("Disabled", "boolean", ".spec.disabled"),
    ("Vendor", "string", ".spec.vendor"),
    ("Framework", "string", ".spec.modelFramework.name"),
    ("FrameworkVersion", "string", ".spec.modelFramework.version"),
    ("ModelFormat", "string", ".spec.modelFormat.name"),
    ("Architecture", "string", ".spec.modelArchitecture"),
    ("Size", "string", ".spec.modelParameterSize"),
    ("Ready", "string", ".status.state"),
    AGE,
)

CRDS = (
    Crd("InferenceService", "inferenceservices", InferenceService, short_names=("isvc",), columns=(
        ("URL", "string", ".status.url"),
        ("Ready", "string", ".status.conditions[?(@.type=='Ready')].status"),
        ("BaseModel", "string", ".spec.model.name"),
        ("Runtime", "string", ".spec.runtime.name"),
        AGE,
    ), description="A model served by a runtime, as an engine, an optional decoder and an optional router."),
    Crd("InferenceReplica", "inferencereplicas", InferenceReplica, short_names=("irep",), columns=(
        ("Component", "string", ".spec.component"),
        ("Desired", "integer", ".spec.replicas"),
        ("Current", "integer", ".status.replicas"),
        ("Ready", "integer", ".status.readyReplicas"),
        ("Available", "integer", ".status.availableReplicas"),
        AGE,
    ), scale=True, description="One component's Instances, written by omenative from its InferenceService."),
    Crd("ServingRuntime", "servingruntimes", ServingRuntime, columns=RUNTIME_COLUMNS,
        description="How to run models in one namespace."),
    Crd("ClusterServingRuntime", "clusterservingruntimes", ServingRuntime, scope="Cluster", columns=RUNTIME_COLUMNS,
        description="How to run models, for every namespace."),
    Crd("BaseModel", "basemodels", BaseModel, columns=MODEL_COLUMNS, description="A model in one namespace."),
    Crd("ClusterBaseModel", "clusterbasemodels", BaseModel, scope="Cluster", columns=MODEL_COLUMNS,
        description="A model for every namespace."),
)


def _kind_schema(crd: Crd) -> dict[str, Any]:
    schema = openapi_schema(crd.model)
    props = schema["properties"]
    props["apiVersion"] = {"type": "string", "description": "APIVersion of the object: ome.io/v1beta1."}
    props["kind"] = {"type": "string", "description": f"Kind of the object: {crd.kind}."}
    props["metadata"] = {"type": "object"}
    schema["description"] = crd.description
    return schema


def manifest(crd: Crd) -> dict[str, Any]:
    subresources: dict[str, Any] = {"status": {}}
    if crd.scale:
        subresources["scale"] = {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.labelSelector",
        }
    names: dict[str, Any] = {
        "kind": crd.kind, "listKind": f"{crd.kind}List", "plural": crd.plural, "singular": crd.kind.lower(),
        "categories": [CATEGORY],
    }
    if crd.short_names:
        names["shortNames"] = list(crd.short_names)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd.name, "labels": {"app.kubernetes.io/part-of": "omenative"}},
        "spec": {
            "group": c.GROUP,
            "scope": crd.scope,
            "names": names,
            "versions": [{
                "name": c.VERSION,
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": _kind_schema(crd)},
                "subresources": subresources,
                "additionalPrinterColumns": [{"name": n, "type": t, "jsonPath": p} for n, t, p in crd.columns],
            }],
        },
    }


def render(crd: Crd) -> str:
    header = "# Generated by `python -m omenative.api.crds manifests/crds` from omenative.api.types. Do not edit.\n"
    return header + yaml.safe_dump(manifest(crd), sort_keys=False, width=120, allow_unicode=True)


def write(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for crd in CRDS:
        path = folder / f"{c.GROUP}_{crd.plural}.yaml"
        path.write_text(render(crd))
        paths.append(path)
    return paths


if __name__ == "__main__":
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1].startswith("-")):
        sys.exit("usage: python -m omenative.api.crds [FOLDER]  (writes the CRDs there; default manifests/crds)")
    for written in write(Path(sys.argv[1] if len(sys.argv) > 1 else "manifests/crds")):
        print(written)
