"""topologyKey, topologySpread and topologySpreadKey as OME's scheduler page and "Spread Instances across fault
domains" describe them: a required affinity of each worker to its own leader's domain (in the worker template, so a
new key is a new revision), and a spread constraint on each Instance's anchor pod (from the InferenceReplica when
the pod is made, so a new spread rolls nothing)."""

from __future__ import annotations

from typing import Any

import pytest

from omenative.api import constants as c
from omenative.api.validation import validate_inference_service
from omenative.render.objects import revision_hash
from omenative.render.pods import InstanceRef, render_instance, spread_of
from omenative.render.templates import TemplateContext, runners

Obj = dict[str, Any]
CONTAINER = {"name": "ome-container", "image": "sglang:v1", "resources": {"limits": {"nvidia.com/gpu": 1}}}
CLIQUE, ZONE = "nvidia.com/gpu.clique", "topology.kubernetes.io/zone"


def component(**extra: Any) -> Obj:
    return {"leader": {"runner": dict(CONTAINER)}, "worker": {"size": 2, "runner": dict(CONTAINER)}, **extra}


def ctx(name: str = "engine") -> TemplateContext:
    return TemplateContext(isvc="llm", namespace="ns", component=name)


def ref(spread: tuple[str, str] | None = None, index: int = 3) -> InstanceRef:
    return InstanceRef(isvc="llm", namespace="ns", component="engine", index=index, incarnation=2, revision="abc",
                       replicas=4, spread=spread)


def test_a_topology_key_anchors_every_worker_to_its_own_leaders_domain() -> None:
    out = runners(ctx(), component(topologyKey=CLIQUE))
    by_name = {r["name"]: r for r in out}
    assert "affinity" not in by_name[c.RUNNER_LEADER]["template"]["spec"]
    terms = by_name[c.RUNNER_WORKER]["template"]["spec"]["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == [{
        "labelSelector": {"matchLabels": {c.LABEL_ISVC: "llm", c.LABEL_COMPONENT: "engine",
                                          c.LABEL_RUNNER: c.RUNNER_LEADER}},
        # The scheduler adds the worker's own index and incarnation: its leader, not any Instance's.
        "matchLabelKeys": [c.LABEL_INSTANCE_INDEX, c.LABEL_INCARNATION],
        "topologyKey": CLIQUE,
    }]
    pods = render_instance(ref(), out)
    workers = [p for p in pods if p["metadata"]["labels"][c.LABEL_RUNNER] == c.RUNNER_WORKER]
    assert len(workers) == 2
    for worker in workers:
        assert worker["metadata"]["labels"][c.LABEL_INSTANCE_INDEX] == "3"
        assert worker["metadata"]["labels"][c.LABEL_INCARNATION] == "2"
        assert worker["spec"]["affinity"]["podAffinity"] == \
            by_name[c.RUNNER_WORKER]["template"]["spec"]["affinity"]["podAffinity"]


def test_the_users_own_pod_affinity_is_kept_beside_it() -> None:
    own = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    out = runners(ctx(), component(topologyKey=CLIQUE, worker={"size": 1, "runner": dict(CONTAINER),
                                                               "affinity": own}))
    terms = out[1]["template"]["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [t["topologyKey"] for t in terms] == ["kubernetes.io/hostname", CLIQUE]


def test_a_new_topology_key_is_a_new_revision_and_a_spread_is_not() -> None:
    plain = revision_hash(runners(ctx(), component()))
    assert revision_hash(runners(ctx(), component(topologyKey=CLIQUE))) != plain
    assert revision_hash(runners(ctx(), component(topologySpread="Required", topologySpreadKey=ZONE))) == plain


def test_no_affinity_without_workers_or_on_the_router() -> None:
    single = runners(ctx(), {"runner": dict(CONTAINER), "topologyKey": CLIQUE})
    assert "affinity" not in single[0]["template"]["spec"]
    router = runners(ctx("router"), component(topologyKey=CLIQUE))
    assert "affinity" not in router[1]["template"]["spec"]


@pytest.mark.parametrize(("spec", "multi", "spread"), [
    ({"topologySpread": "Required", "topologySpreadKey": ZONE}, False, (ZONE, "DoNotSchedule")),
    ({"topologySpread": "Preferred", "topologySpreadKey": ZONE}, False, (ZONE, "ScheduleAnyway")),
    ({"topologySpread": "Required", "topologyKey": CLIQUE}, True, (CLIQUE, "DoNotSchedule")),  # the key's default
    ({"topologySpread": "Required", "topologyKey": CLIQUE, "topologySpreadKey": ZONE}, True, (ZONE, "DoNotSchedule")),
    ({"topologySpread": "Required", "topologyKey": CLIQUE}, False, None),  # one pod has no co-location key
    ({"topologySpreadKey": ZONE}, False, None),  # the key alone spreads nothing
    ({"topologySpread": "Sometimes", "topologySpreadKey": ZONE}, False, None),
])
def test_the_spread_in_force(spec: Obj, multi: bool, spread: tuple[str, str] | None) -> None:
    assert spread_of(spec, multi) == spread


def test_only_the_anchor_pod_carries_the_spread() -> None:
    pods = render_instance(ref(spread=(ZONE, "DoNotSchedule")), runners(ctx(), component()))
    by_runner = {p["metadata"]["labels"][c.LABEL_RUNNER]: p for p in pods}
    assert by_runner[c.RUNNER_LEADER]["spec"]["topologySpreadConstraints"] == [{
        "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {c.LABEL_ISVC: "llm", c.LABEL_COMPONENT: "engine",
                                          c.LABEL_RUNNER: c.RUNNER_LEADER}}}]
    assert "topologySpreadConstraints" not in by_runner[c.RUNNER_WORKER]["spec"]
    single = render_instance(ref(spread=(ZONE, "ScheduleAnyway")), runners(ctx(), {"runner": dict(CONTAINER)}))
    assert single[0]["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"][c.LABEL_RUNNER] == \
        c.RUNNER_DEFAULT


def test_a_constraint_of_the_users_on_the_same_key_wins() -> None:
    own = [{"maxSkew": 2, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "x"}}}]
    pods = render_instance(ref(spread=(ZONE, "DoNotSchedule")),
                           runners(ctx(), {"runner": dict(CONTAINER), "topologySpreadConstraints": own}))
    assert pods[0]["spec"]["topologySpreadConstraints"] == own


@pytest.mark.parametrize(("engine", "warned"), [
    ({"runner": dict(CONTAINER), "topologyKey": CLIQUE}, "engine.topologyKey has no effect on a single-pod engine"),
    ({"runner": dict(CONTAINER), "topologySpread": "Required"}, "engine.topologySpread is set but no key names"),
    ({**component(), "topologySpread": "Required"}, "engine.topologySpread is set but no key names"),
    ({**component(), "topologySpread": "Required", "topologyKey": CLIQUE}, None),
    ({"runner": dict(CONTAINER), "topologySpread": "Preferred", "topologySpreadKey": ZONE}, None),
])
def test_admission_warns_of_topology_fields_that_would_do_nothing(engine: Obj, warned: str | None) -> None:
    isvc = {"metadata": {"name": "llm"}, "spec": {"deploymentMode": "OMENative", "engine": engine}}
    findings = validate_inference_service(isvc)
    assert findings.errors == ()
    topology = [w for w in findings.warnings if "topology" in w]
    if warned is None:
        assert topology == []
    else:
        assert len(topology) == 1 and topology[0].startswith(warned), topology
