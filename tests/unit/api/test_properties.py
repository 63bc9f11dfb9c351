"""Properties over generated InferenceServices: defaults, merge and validation never fail with anything but a
validation finding, and defaulting twice equals defaulting once."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omenative.api.config import ControllerConfig
from omenative.api.defaults import default_component
from omenative.api.merge import merge_component
from omenative.api.validation import Admission, validate_inference_service

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 40), st.text(max_size=12),
                    st.sampled_from(["25%", "0%", "1", "30m", "1h30m", "bad", "AllPodReady", "None"]))
durations = st.one_of(st.none(), st.sampled_from(["30m", "45m", "1h30m", "90s", "0s", "soon", "", "10"]))
budgets = st.one_of(st.none(), st.integers(-1, 5), st.sampled_from(["25%", "100%", "0%", "x%", "3"]))

lifecycle = st.fixed_dictionaries({}, optional={
    "restartPolicy": st.sampled_from(["None", "RecreateInstanceOnPodRestart", "Sometimes"]),
    "readyPolicy": st.sampled_from(["AllPodReady", "None", "Whatever"]),
    "instanceReadyTimeout": durations,
    "minReadySeconds": st.integers(-1, 100),
    "updateStrategy": st.fixed_dictionaries({}, optional={
        "type": st.sampled_from(["SurgeThenDrain", "RecreatePod", "InPlaceOnly"]),
        "rollingUpdate": st.fixed_dictionaries({}, optional={"maxSurge": budgets, "maxUnavailable": budgets}),
    }),
})
runner = st.fixed_dictionaries({}, optional={
    "name": st.sampled_from(["ome-container", "", "other"]),
    "image": st.text(max_size=20),
    "args": st.lists(st.text(max_size=8), max_size=3),
    "resources": st.fixed_dictionaries({}, optional={
        "limits": st.fixed_dictionaries({}, optional={"nvidia.com/gpu": st.sampled_from([1, 2, "8", "x"])})}),
})
worker = st.fixed_dictionaries({}, optional={"size": st.one_of(st.none(), st.integers(-1, 16), st.text(max_size=2)),
                                             "runner": runner})
component = st.fixed_dictionaries({}, optional={
    "minReplicas": st.one_of(st.none(), st.integers(0, 10)),
    "maxReplicas": st.one_of(st.none(), st.integers(0, 10)),
    "lifecycle": lifecycle,
    "runner": runner,
    "leader": st.fixed_dictionaries({}, optional={"runner": runner}),
    "worker": worker,
    "annotations": st.dictionaries(st.sampled_from(["ome.io/deploymentMode", "a"]),
                                   st.sampled_from(["OMENative", "RawDeployment", "MultiNode", "junk"]), max_size=2),
    "hostNetwork": st.booleans(),
    "dnsPolicy": st.sampled_from(["ClusterFirst", "ClusterFirstWithHostNet"]),
    "deploymentStrategy": st.just({}),
    "autoscaler": st.fixed_dictionaries({"class": st.sampled_from(["HPA", "None", "External", "KEDA", ""])}),
})
specs = st.fixed_dictionaries({}, optional={
    "deploymentMode": st.sampled_from(["OMENative", "RawDeployment", "Other"]),
    "engine": component, "decoder": component, "router": component,
})
names = st.one_of(st.text(alphabet="abcdefghij-0123456789", min_size=1, max_size=70), st.just("Bad_Name"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=names, spec=specs, runtime=st.fixed_dictionaries({}, optional={
    "engineConfig": component, "decoderConfig": component, "routerConfig": component}))
def test_validation_only_ever_reports_findings(name: str, spec: dict[str, Any], runtime: dict[str, Any]) -> None:
    findings = validate_inference_service({"metadata": {"name": name}, "spec": spec}, Admission(runtime_raw=runtime))
    assert all(isinstance(e, str) and e for e in findings.errors)
    assert all(isinstance(w, str) and w for w in findings.warnings)


@settings(max_examples=200, deadline=None)
@given(runtime_part=component, isvc_part=component, which=st.sampled_from(["engine", "decoder", "router"]))
def test_merge_and_defaults_are_total_and_idempotent(runtime_part: dict[str, Any], isvc_part: dict[str, Any],
                                                     which: str) -> None:
    merged = merge_component(runtime_part, isvc_part)
    assert merged is not None
    config = ControllerConfig()
    once = default_component(merged, which, config)
    assert default_component(once, which, config) == once
    assert once["minReplicas"] >= 1
    if not merged.get("maxReplicas"):  # a default maximum is never below the minimum
        assert once["maxReplicas"] >= once["minReplicas"]
