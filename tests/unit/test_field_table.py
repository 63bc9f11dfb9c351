"""docs/api.md's table of every spec field against the CRD schemas and the webhook: every field of the
InferenceService and the InferenceReplica has a row, no row names a field that does not exist, and the rows marked
"warned" are exactly the fields (and values) for which the webhook warns `not supported by omenative: ...`, which it
does for each when it is set."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from omenative.api import standalone, unsupported
from omenative.api.pod_fields import core_types
from omenative.api.validation import validate_inference_service
from tests.support.cluster import REPO

Obj = dict[str, Any]
COMPONENT = unsupported.COMPONENT
POD_FIELDS = frozenset(core_types()["PodSpec"])
ROW = re.compile(r"^\| `([^`]+)` \| ([^|]+) \|")


def table(section: str) -> dict[str, str]:
    """Field -> status cell of one table of docs/api.md's "Every spec field"."""
    text = (REPO / "docs" / "api.md").read_text()
    body = text.split("## Every spec field", 1)[1].split(f"### {section}\n", 1)[1].split("\n### ", 1)[0]
    body = body.split("\n## ", 1)[0]
    rows = {}
    for line in body.splitlines():
        match = ROW.match(line)
        if match:
            assert match.group(1) not in rows, f"two rows for {match.group(1)}"
            rows[match.group(1)] = match.group(2).strip()
    return rows


def schema_paths(crd: str) -> set[str]:
    doc = yaml.safe_load((REPO / "manifests" / "crds" / crd).read_text())
    spec = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    out: set[str] = set()

    def walk(node: Obj, path: str) -> None:
        for key, value in (node.get("properties") or {}).items():
            here = f"{path}.{key}"
            out.add(normalize(here))
            if value.get("type") == "array" and "items" in value:
                value, here = value["items"], here + "[]"
            walk(value, here)

    walk(spec, "spec")
    return out


def normalize(path: str) -> str:
    """A component's name becomes <component>; its pod spec fields one row, and its leader's and worker's too."""
    path = re.sub(r"^spec\.(engine|decoder|router)(?=\.|$)", f"spec.{COMPONENT}", path)
    parts = path.split(".")
    if parts[:2] == ["spec", COMPONENT] and len(parts) == 4 and parts[2] in ("leader", "worker") and \
            (parts[3] in POD_FIELDS or parts[3] == "runner"):
        return f"spec.{COMPONENT}.{{leader,worker}}.{'<pod spec field>' if parts[3] != 'runner' else 'runner'}"
    if parts[:2] == ["spec", COMPONENT] and len(parts) == 3 and parts[2] in POD_FIELDS:
        return f"spec.{COMPONENT}.<pod spec field>"
    return path


@pytest.mark.parametrize(("crd", "section"), [("ome.io_inferenceservices.yaml", "InferenceService"),
                                               ("ome.io_inferencereplicas.yaml", "InferenceReplica")])
def test_every_field_has_a_row_and_every_row_a_field(crd: str, section: str) -> None:
    rows, fields = table(section), schema_paths(crd)
    assert sorted(fields - rows.keys()) == [], "fields without a row in docs/api.md"
    assert sorted(rows.keys() - fields) == [], "rows of docs/api.md for fields the CRD does not have"
    assert {cell.split(";")[0].split()[0] for cell in rows.values()} <= {"honored", "warned", "refused"}


def warned_in_docs(rows: dict[str, str]) -> set[tuple[str, str | None]]:
    out: set[tuple[str, str | None]] = set()
    for path, cell in rows.items():
        for part in (p.strip() for p in cell.split(";")):
            if part == "warned":
                out.add((path, None))
            elif part.endswith(" warned"):
                out.add((path, part.removesuffix(" warned").strip("`")))
    return out


def warned_in_code(prefix: str) -> set[tuple[str, str | None]]:
    """The webhook's list, as paths of the table that starts with `prefix` (under a warned field, its subfields)."""
    fields = schema_paths("ome.io_inferenceservices.yaml")
    out: set[tuple[str, str | None]] = set()
    for path in unsupported.FIELDS:
        out |= {(f, None) for f in fields if f == path or f.startswith(path + ".")}
    return {(p.replace(f"spec.{COMPONENT}.", prefix), v) for p, v in out}


def test_the_warned_rows_are_the_webhooks_list() -> None:
    assert warned_in_docs(table("InferenceService")) == warned_in_code(f"spec.{COMPONENT}.")
    # An InferenceReplica carries its component's fields: the same ones are warned, where it has them.
    # A standalone replica's modelRef fields are warned by its own list (api/standalone.py).
    replica = schema_paths("ome.io_inferencereplicas.yaml")
    standalone_warned = {(f, None) for f in replica for key in standalone.MODEL_REF_UNSUPPORTED
                         if f == f"spec.modelRef.{key}" or f.startswith(f"spec.modelRef.{key}")}
    assert ("spec.modelRef.overlays[].name", None) in standalone_warned
    assert warned_in_docs(table("InferenceReplica")) == {(p, v) for p, v in warned_in_code("spec.") if p in replica} \
        | standalone_warned


def _set(obj: Obj, path: list[str], value: Any) -> None:
    for key in path[:-1]:
        obj = obj.setdefault(key, {})
    obj[path[-1]] = value


def _warnings(spec: Obj) -> tuple[str, ...]:
    findings = validate_inference_service({"metadata": {"name": "llm"}, "spec": spec})
    assert findings.errors == ()
    return findings.warnings


CONTAINER = {"name": "ome-container", "image": "sglang:v1"}


@pytest.mark.parametrize("path", sorted(unsupported.FIELDS))
def test_the_webhook_warns_of_each_field_it_does_not_support(path: str) -> None:
    spec: Obj = {"deploymentMode": "OMENative", "engine": {"runner": dict(CONTAINER)}}
    concrete = path.replace(COMPONENT, "engine").split(".")[1:]
    _set(spec, concrete, ["x"] if concrete[-1] == "fineTunedWeights" else {"a": 1} if concrete[-1] in (
        "keda", "inPlaceUpdateStrategy") else 30)
    assert any(w.startswith(f"not supported by omenative: spec.{'.'.join(concrete)} (") for w in _warnings(spec))


def test_keda_is_honored_and_judged_as_ome_judges_it() -> None:
    """No warning for class KEDA and its block (a ScaledObject is written); OME's admission rules refuse a block
    without triggers and an idle count not below minReplicas."""
    trigger = {"type": "prometheus", "metadata": {"serverAddress": "http://p:9090", "query": "q", "threshold": "5"}}
    spec: Obj = {"deploymentMode": "OMENative", "engine": {"runner": dict(CONTAINER), "minReplicas": 2, "autoscaler": {
        "class": "KEDA", "keda": {"triggers": [trigger], "idleReplicaCount": 1}}}}
    assert not any(w.startswith("not supported by omenative") for w in _warnings(spec))

    def errors(keda: Obj) -> tuple[str, ...]:
        bad = {**spec, "engine": {**spec["engine"], "autoscaler": {"class": "KEDA", "keda": keda}}}
        return validate_inference_service({"metadata": {"name": "llm"}, "spec": bad}).errors

    assert errors({}) == ("engine: KedaTriggersRequired: class=keda requires at least 1 trigger",)
    assert errors({"triggers": [trigger], "idleReplicaCount": 2}) == (
        "engine: KedaIdleBelowMin: keda.idleReplicaCount (2) must be lower than minReplicas (2)",)


@pytest.mark.parametrize(("where", "key", "said"), [
    ("engine", "kedaConfig", "v1.2.2 scaling setting"),
    ("engine", "autoscalerPolicyRef", "AutoscalerPolicy is not implemented"),
    ("router", "acceleratorOverride", "accelerator classes are not implemented"),
    ("engine", "hostname", "its own name"),
    ("engine", "replicaz", "neither a field of OME's engine nor of a pod spec"),
    ("engine.worker", "sise", "neither a field of OME's worker nor of a pod spec"),
])
def test_a_key_a_component_keeps_but_omenative_ignores_is_named(where: str, key: str, said: str) -> None:
    spec: Obj = {"deploymentMode": "OMENative",
                 "engine": {"leader": {"runner": dict(CONTAINER)}, "worker": {"runner": dict(CONTAINER)}},
                 "router": {"runner": dict(CONTAINER)}}
    _set(spec, [*where.split("."), key], "x")
    named = [w for w in _warnings(spec) if w.startswith(f"not supported by omenative: spec.{where}.{key} (")]
    assert len(named) == 1 and said in named[0], named


def test_pod_spec_fields_and_the_components_own_fields_are_not_warned() -> None:
    spec: Obj = {"deploymentMode": "OMENative", "engine": {
        "runner": dict(CONTAINER), "priorityClassName": "high", "terminationGracePeriodSeconds": 30,
        "minReplicas": 1, "maxReplicas": 2, "labels": {"a": "b"}, "lifecycle": {"readyPolicy": "None"}}}
    assert not any(w.startswith("not supported by omenative") for w in _warnings(spec))
