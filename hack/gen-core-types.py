#!/usr/bin/env python3
"""Writes src/omenative/api/core_types.json: the field types of the core PodSpec and everything it contains, from
the OpenAPI v3 document that k8s.io/kubernetes publishes in its Go module (api/openapi-spec/v3/api__v1_openapi.json)
at the version the local control plane runs.

omenative's CRDs keep pod-template fields free-form (the core types would make them megabytes), so the webhook and
the controllers check those fields against this table instead: a `command: "python"` is refused with its path, as
the API server would refuse it in a pod, instead of breaking something later.

    python3 hack/gen-core-types.py [OPENAPI_JSON]     (default: found through `go mod download`)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "src" / "omenative" / "api" / "core_types.json"
ROOT = "io.k8s.api.core.v1.PodSpec"
SCALARS = {  # named schemas that are scalars in JSON
    "io.k8s.apimachinery.pkg.api.resource.Quantity": "quantity",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "int-or-string",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": "string",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": "string",
    "io.k8s.apimachinery.pkg.runtime.RawExtension": "object",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1": "object",
}


def openapi_path() -> Path:
    versions = (REPO / "hack" / "lib" / "versions.sh").read_text()
    version = next(line.split("=", 1)[1] for line in versions.splitlines() if line.startswith("K8S_VERSION="))
    out = subprocess.run(["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"], check=True,
                         capture_output=True, text=True, cwd=REPO / "hack" / "gomod" / "kubernetes")
    return Path(json.loads(out.stdout)["Dir"]) / "api" / "openapi-spec" / "v3" / "api__v1_openapi.json"


def short(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def main() -> None:
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else openapi_path()
    schemas: dict[str, Any] = json.loads(source.read_text())["components"]["schemas"]
    table: dict[str, dict[str, Any]] = {}
    todo = [ROOT]

    def field_type(prop: dict[str, Any]) -> Any:
        if "allOf" in prop:
            name = short(prop["allOf"][0]["$ref"])
            if name in SCALARS:
                return SCALARS[name]
            if name not in table and name not in todo:
                todo.append(name)
            return {"ref": name.rsplit(".", 1)[-1]}
        if "$ref" in prop:
            return field_type({"allOf": [prop]})
        kind = prop.get("type")
        if kind == "array":
            return ["list", field_type(prop["items"])]
        if kind == "object" and "additionalProperties" in prop:
            return ["map", field_type(prop["additionalProperties"])]
        if kind in ("string", "integer", "number", "boolean", "object"):
            return kind
        raise SystemExit(f"unknown schema shape {prop}")

    while todo:
        name = todo.pop()
        props = schemas[name].get("properties") or {}
        table[name] = {field: field_type(prop) for field, prop in sorted(props.items())}
    short_names = {n.rsplit(".", 1)[-1] for n in table}
    assert len(short_names) == len(table), "two core types share a short name"
    out = {"source": f"k8s.io/kubernetes {source.parent.parent.parent.parent.name.split('@')[-1]}",
           "types": {n.rsplit(".", 1)[-1]: table[n] for n in sorted(table, key=lambda n: n.rsplit(".", 1)[-1])}}
    OUT.write_text(json.dumps(out, indent=0, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"{OUT.relative_to(REPO)}: {len(table)} types from {source}")


if __name__ == "__main__":
    main()
