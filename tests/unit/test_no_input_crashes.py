"""No input crashes anything: InferenceServices (and runtimes) drawn from what omenative's CRD schemas admit, with
wrong types and odd values in every free-form field, go through the webhook's judging, the rendering and the three
planners (rollout, InferenceReplica, Instance). The only exception allowed is the project's refusal, InvalidSpec.

The schemas drive the drawing: typed fields get values of their type (enums, bounds, patterns), free-form fields
(containers, runner, volumes, affinity, ...) get objects whose keys are the core types' field names with values of
any type, nested."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omenative.api import constants as c
from omenative.api.config import ControllerConfig
from omenative.api.pod_fields import InvalidSpec, core_types
from omenative.api.validation import Admission, validate_inference_service
from omenative.controllers.inferencereplica import plan as replica_plan
from omenative.controllers.inferenceservice import desired, rollout
from omenative.controllers.instance import plan as instance_plan
from omenative.observe.pods import pod_facts
from omenative.render.pods import InstanceRef, pod_count
from omenative.webhook.server import defaulting_patch, migration_errors
from tests.support.cluster import REPO

pytestmark = pytest.mark.unit
Obj = dict[str, Any]
NOW = 1_800_000_000.0
EXAMPLES = 2000
COUNTS = {"examples": 0, "refused": 0, "built": 0, "pods": 0}

ODD_STRINGS = ["", " ", "x", "1.2.3", "-1", "25%", "x%", "1e309", "NaN", "ome-container", "leader", "worker",
               "$(LWS_LEADER_ADDRESS)", "\u2603", "a" * 300, "10Gi", "500m", "30m", "OMENative", "RawDeployment"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(allow_nan=True),
                    st.sampled_from(ODD_STRINGS), st.text(max_size=6))


@cache
def field_names() -> list[str]:
    """Every field name of the core pod types: free-form objects get these keys, so wrong types land where they
    are read."""
    return sorted({name for fields in core_types().values() for name in fields} | {"runner", "leader", "worker",
                                                                                   "size", "name", "image"})


def junk(depth: int = 0) -> st.SearchStrategy[Any]:
    if depth >= 3:
        return SCALARS
    inner = st.deferred(lambda: junk(depth + 1))
    return st.one_of(SCALARS, st.lists(inner, max_size=3),
                     st.dictionaries(st.sampled_from(field_names()), inner, max_size=4))


def from_schema(schema: Obj, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values the API server would admit for this structural schema; junk where the schema is free-form."""
    if schema.get("x-kubernetes-int-or-string"):
        return st.one_of(st.integers(-3, 200), st.sampled_from(["25%", "0%", "100%", "x%", "3", "", "abc"]))
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties") or {}
        if not props and "additionalProperties" not in schema:
            return st.dictionaries(st.sampled_from(field_names()), junk(depth), max_size=5)  # free-form
        if depth > 6:
            return st.just({})
        optional = {k: st.deferred(lambda v=v: from_schema(v, depth + 1)) for k, v in props.items()}
        fixed = st.fixed_dictionaries({}, optional=optional)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return st.builds(lambda a, b: {**b, **a}, fixed,
                             st.dictionaries(st.sampled_from(["a", "ome.io/x", c.ANN_DEPLOYMENT_MODE]),
                                             from_schema(extra, depth + 1), max_size=2))
        return fixed
    if kind == "array":
        high = min(int(schema.get("maxItems", 3)), 3)
        return st.lists(from_schema(schema.get("items") or {}, depth + 1), max_size=high)
    if kind == "string":
        if schema.get("enum"):
            return st.sampled_from(schema["enum"])
        if schema.get("pattern"):
            return st.from_regex(schema["pattern"], fullmatch=True).filter(lambda s: len(s) < 40)
        return st.one_of(st.sampled_from(ODD_STRINGS), st.text(max_size=8))
    if kind in ("integer", "number"):
        low, high = schema.get("minimum", -3), schema.get("maximum", 50)
        return st.integers(int(low), int(high))
    if kind == "boolean":
        return st.booleans()
    return junk(depth)  # preserved, untyped


@cache
def crd_spec_schema(filename: str) -> Obj:
    crd = yaml.safe_load((REPO / "manifests" / "crds" / filename).read_text())
    schema: Obj = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def isvc_spec() -> st.SearchStrategy[Obj]:
    schema = crd_spec_schema("ome.io_inferenceservices.yaml")
    props = schema["properties"]
    component = st.deferred(lambda: from_schema(props["engine"], 1))
    rest = {k: from_schema(v, 1) for k, v in props.items() if k not in c.COMPONENTS and k in ("rollout",
                                                                                              "deploymentMode")}
    return st.fixed_dictionaries({"engine": component}, optional={
        "decoder": component, "router": st.deferred(lambda: from_schema(props["router"], 1)), **rest})


def runtime_spec() -> st.SearchStrategy[Obj]:
    props = crd_spec_schema("ome.io_clusterservingruntimes.yaml")["properties"]
    return st.fixed_dictionaries({}, optional={k: from_schema(props[k], 1) for k in
                                               ("engineConfig", "decoderConfig", "routerConfig") if k in props})


def plan_everything(isvc: Obj, runtime: Obj | None) -> None:
    """Judging, rendering and planning, as the webhook and the three controllers run them."""
    config = ControllerConfig()
    validate_inference_service(isvc, Admission(runtime_name="rt" if runtime is not None else None,
                                               runtime_raw=runtime, config=config))
    migration_errors(isvc, {})
    defaulting_patch(isvc)
    try:
        plan = desired.build(desired.Inputs(
            isvc=isvc, runtime=desired.RuntimeInfo(name="rt", namespaced=False, spec=runtime) if runtime else None,
            model=None, config=config))
    except InvalidSpec:
        COUNTS["refused"] += 1
        return
    COUNTS["built"] += 1
    members = {part.name: rollout.Member(name=part.name, desired=part.min_replicas, target="rev1", stable=None)
               for part in plan.components}
    groups = [g for g in ((isvc["spec"].get("rollout") or {}).get("groups") or []) if isinstance(g, dict)]
    rollout.plan(rollout.Inputs(groups=groups, members=members, annotations={}, previous={}, now=NOW), "s")
    for part in plan.components:
        runners = part.replica["spec"]["runners"]
        view = replica_plan.ReplicaView(
            component=part.name, replicas=min(part.min_replicas, 3), pods_per_instance=pod_count(runners),
            update_revision="rev1", restart_policy=replica_plan.RECREATE if part.multi_pod else "None",
            ready_timeout=60.0, min_ready_seconds=0, max_unavailable=None, multi_pod=part.multi_pod,
            podgroup_crd=True, rows=[], pods={}, now=NOW, config=config)
        rows = replica_plan.plan(view).rows
        for row in rows[:1]:
            ref = InstanceRef(isvc="s", namespace="ns", component=part.name, index=row.index or 0,
                              incarnation=row.incarnation or 1, revision="rev1", replicas=len(rows))
            actions = instance_plan.plan(instance_plan.InstanceView(
                ref=ref, phase=row.phase or "", runners=runners, pods=[], podgroup=None, podgroup_intent=None,
                owner_uid="uid", now=NOW))
            for pod in actions.create_pods:
                pod_facts(pod)
                COUNTS["pods"] += 1


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(spec=isvc_spec(), runtime=st.one_of(st.none(), runtime_spec()), mode=st.sampled_from(["OMENative", None]))
def _every_drawn_service_is_judged_rendered_and_planned(spec: Obj, runtime: Obj | None, mode: str | None) -> None:
    if mode:
        spec = {**spec, "deploymentMode": mode}
    COUNTS["examples"] += 1
    plan_everything({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
                     "metadata": {"name": "s", "namespace": "ns", "uid": "u", "generation": 1}, "spec": spec},
                    runtime)


def test_no_drawn_inferenceservice_raises_anything_but_invalid_spec() -> None:
    _every_drawn_service_is_judged_rendered_and_planned()
    print(f"\n{COUNTS['examples']} examples: {COUNTS['built']} rendered and planned ({COUNTS['pods']} pods rendered), "
          f"{COUNTS['refused']} refused as InvalidSpec")
    assert COUNTS["examples"] >= EXAMPLES
    # Both paths were taken, and planning reached the pods.
    assert COUNTS["built"] > EXAMPLES // 10 and COUNTS["refused"] > EXAMPLES // 10 and COUNTS["pods"] > EXAMPLES // 10
