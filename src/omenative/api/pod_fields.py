"""The pod-template fields of a component, checked against the core types before anything reads them. Pure.

OME's components and runtimes carry PodSpec fields inline (containers, volumes, affinity, ...) and a `runner`
container; omenative's CRDs keep them free-form, since the core schemas would make each CRD megabytes. So the API
server admits `command: "python"` or `nvidia.com/gpu: "1.2.3"` in an InferenceService, and only refuses them later,
in a pod. Here they are checked against the field types of the Kubernetes version omenative is built against
(`core_types.json`, written by `hack/gen-core-types.py` from k8s.io/kubernetes's published OpenAPI document), so
that admission refuses them with their path, and a controller that meets one in a stored object (a runtime, which
no webhook judges) reports it instead of failing on it.

`InvalidSpec` is the project's refusal of an object it cannot build from: every part of rendering and planning
raises it, or nothing, for whatever a user can store.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

MAX_PROBLEMS = 10  # a refusal names the first few, not every element of a broken list
QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
JSONDict = dict[str, Any]


class InvalidSpec(ValueError):
    """An object omenative cannot build from, with the paths and what is wrong there."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems[:MAX_PROBLEMS]
        more = len(problems) - len(self.problems)
        super().__init__("; ".join(self.problems) + (f" (and {more} more)" if more > 0 else ""))


@cache
def core_types() -> dict[str, dict[str, Any]]:
    text = resources.files("omenative.api").joinpath("core_types.json").read_text()
    types: dict[str, dict[str, Any]] = json.loads(text)["types"]
    return types


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"number {value}"
    if isinstance(value, str):
        return f"string {json.dumps(value[:40])}"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _scalar_ok(kind: str, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "int-or-string":
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    if kind == "quantity":
        if isinstance(value, bool):
            return False
        if isinstance(value, (int, float)):
            return value == value and value not in (float("inf"), float("-inf"))
        return isinstance(value, str) and bool(QUANTITY.match(value))
    return isinstance(value, dict)  # "object": free-form, but an object


_EXPECTED = {"string": "a string", "boolean": "true or false", "integer": "an integer", "number": "a number",
             "int-or-string": "an integer or a string", "object": "an object",
             "quantity": "a quantity such as 1, 500m or 16Gi"}


def check(value: Any, spec: Any, path: str, out: list[str]) -> None:
    """Appends to `out` what in `value` does not have the type `spec` gives (a core_types.json field type)."""
    if len(out) >= MAX_PROBLEMS + 1 or value is None:
        return  # null is how YAML writes an empty field; the API server drops it
    if isinstance(spec, str):
        if not _scalar_ok(spec, value):
            out.append(f"{path}: must be {_EXPECTED[spec]}, got {_describe(value)}")
        return
    if isinstance(spec, list):
        kind, inner = spec
        if kind == "list":
            if not isinstance(value, list):
                out.append(f"{path}: must be a list, got {_describe(value)}")
                return
            for i, item in enumerate(value):
                check(item, inner, f"{path}[{i}]", out)
        else:
            if not isinstance(value, dict):
                out.append(f"{path}: must be a map, got {_describe(value)}")
                return
            for key, item in value.items():
                check(item, inner, f"{path}[{key}]", out)
        return
    fields = core_types()[spec["ref"]]
    if not isinstance(value, dict):
        out.append(f"{path}: must be an object ({spec['ref']}), got {_describe(value)}")
        return
    for key, item in value.items():
        if key in fields:
            check(item, fields[key], f"{path}.{key}", out)


def pod_part_problems(part: Any, path: str) -> list[str]:
    """What is wrong with the pod-template fields of a component, a leader or worker, or a runtime's engineConfig,
    decoderConfig or routerConfig (their other fields have types in the CRD)."""
    if part is None:
        return []
    if not isinstance(part, dict):
        return [f"{path}: must be an object, got {_describe(part)}"]
    pod_spec = core_types()["PodSpec"]
    out: list[str] = []
    for key, value in part.items():
        if key == "runner":
            check(value, {"ref": "Container"}, f"{path}.runner", out)
        elif key in ("leader", "worker"):
            out += pod_part_problems(value, f"{path}.{key}")
        elif key in pod_spec:
            check(value, pod_spec[key], f"{path}.{key}", out)
    return out


def component_problems(spec: Any, prefix: str, keys: tuple[str, ...]) -> list[str]:
    """The problems of each named part of a spec (`spec.engine`, ... or a runtime's `spec.engineConfig`, ...)."""
    if not isinstance(spec, dict):
        return []
    out: list[str] = []
    for key in keys:
        out += pod_part_problems(spec.get(key), f"{prefix}.{key}")
    return out


# omenative copies a component's pod templates into its InferenceReplica and ControllerRevisions, each stored whole
# in etcd (1.5 MiB a request by default), next to every other component's: a spec past this cannot be served.
MAX_SPEC_BYTES = 512 * 1024


def _largest(value: Any, path: str) -> tuple[int, str]:
    """(serialized size, path) of the largest leaf under `value`."""
    if isinstance(value, dict) and value:
        return max(_largest(v, f"{path}.{k}") for k, v in value.items())
    if isinstance(value, list) and value:
        return max(_largest(v, f"{path}[{i}]") for i, v in enumerate(value))
    return len(json.dumps(value, separators=(",", ":"))), path


def size_problems(spec: Any, path: str = "spec") -> list[str]:
    """A spec too large to be copied where omenative must copy it, with the field that weighs most."""
    size = len(json.dumps(spec, separators=(",", ":")))
    if size <= MAX_SPEC_BYTES:
        return []
    leaf, where = _largest(spec, path)
    return [f"{path}: {size} bytes, over the {MAX_SPEC_BYTES} omenative can copy into an InferenceReplica and its "
            f"ControllerRevisions; the largest field is {where} ({leaf} bytes)"]
