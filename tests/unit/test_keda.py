"""Autoscaler class KEDA: the ScaledObject OME names, on the InferenceReplica, while KEDA's CRD is installed; without
it the InferenceService says nothing scales the component; status.components.<c>.autoscaler in OME's fields."""

from __future__ import annotations

from typing import Any

from omenative.api.config import ControllerConfig
from omenative.controllers.inferenceservice import desired
from omenative.controllers.inferenceservice.status import build_status

Obj = dict[str, Any]
TRIGGER = {"type": "prometheus", "metricType": "AverageValue",
           "metadata": {"serverAddress": "http://prom:9090", "query": "sum(q)", "threshold": "5"}}


def isvc(autoscaler: Obj | None, low: int = 1, high: int = 4) -> Obj:
    engine: Obj = {"minReplicas": low, "maxReplicas": high, "runner": {"name": "ome-container", "image": "i:1"}}
    if autoscaler is not None:
        engine["autoscaler"] = autoscaler
    return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "llama", "namespace": "ns", "uid": "u-1", "generation": 3},
            "spec": {"deploymentMode": "OMENative", "engine": engine}}


def engine(obj: Obj, installed: bool = True) -> desired.ComponentPlan:
    plan = desired.build(desired.Inputs(isvc=obj, runtime=None, model=None, config=ControllerConfig(),
                                        scaled_objects=installed))
    return next(p for p in plan.components if p.name == "engine")


def test_the_scaled_object_targets_the_inference_replica_with_the_block_as_written() -> None:
    part = engine(isvc({"class": "KEDA", "keda": {"pollingInterval": 15, "cooldownPeriod": 300,
                                                  "triggers": [TRIGGER], "fallback": {"failureThreshold": 3,
                                                                                      "replicas": 2}}}))
    so = part.scaled_object
    assert so is not None and part.hpa is None and so in part.children
    assert (so["apiVersion"], so["kind"], so["metadata"]["name"]) == (
        "keda.sh/v1alpha1", "ScaledObject", "scaledobject-llama-engine")
    assert so["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert so["spec"] == {
        "scaleTargetRef": {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "llama-engine"},
        "minReplicaCount": 1, "maxReplicaCount": 4, "pollingInterval": 15, "cooldownPeriod": 300,
        "triggers": [TRIGGER], "fallback": {"failureThreshold": 3, "replicas": 2}}
    assert "replicas" not in part.replica["spec"]  # KEDA owns the count
    assert not part.keda_missing


def test_an_omenative_component_keeps_at_least_one_instance() -> None:
    zero = engine(isvc({"class": "KEDA", "keda": {"triggers": [TRIGGER], "idleReplicaCount": 0}}, low=0))
    assert zero.scaled_object is not None
    assert zero.scaled_object["spec"]["minReplicaCount"] == 1
    assert "idleReplicaCount" not in zero.scaled_object["spec"]  # 1 is not below the minimum of 1
    idle = engine(isvc({"class": "KEDA", "keda": {"triggers": [TRIGGER], "idleReplicaCount": 0}}, low=3))
    assert idle.scaled_object is not None and idle.scaled_object["spec"]["idleReplicaCount"] == 1


def test_without_keda_nothing_is_written_and_the_status_says_so() -> None:
    obj = isvc({"class": "KEDA", "keda": {"triggers": [TRIGGER]}})
    part = engine(obj, installed=False)
    assert part.scaled_object is None and part.hpa is None and part.keda_missing
    plan = desired.build(desired.Inputs(isvc=obj, runtime=None, model=None, config=ControllerConfig()))
    status = build_status(obj, plan, {"engine": None}, [], "2026-12-07T00:00:00Z")
    condition = next(x for x in status["conditions"] if x["type"] == "AutoscalerReady")
    assert (condition["status"], condition["reason"]) == ("False", "KEDANotInstalled")
    assert "scaledobjects.keda.sh" in condition["message"] and condition["message"].startswith("engine: ")
    autoscaler = status["components"]["engine"]["autoscaler"]
    assert (autoscaler["class"], autoscaler["managedBy"], autoscaler["specSource"]) == ("KEDA", "ome", "isvc")
    assert autoscaler["conditions"][0]["reason"] == "KEDANotInstalled"
    installed = desired.build(desired.Inputs(isvc=obj, runtime=None, model=None, config=ControllerConfig(),
                                             scaled_objects=True))
    after = build_status(obj, installed, {"engine": None}, [], "2026-12-07T00:00:00Z")
    assert not any(x["type"] == "AutoscalerReady" for x in after["conditions"])


def test_the_autoscaler_status_names_class_owner_source_and_counts() -> None:
    replica = {"metadata": {"name": "llama-engine"}, "spec": {"replicas": 3}, "status": {"replicas": 2}}
    for autoscaler, expected in (
        (None, {"class": "HPA", "managedBy": "ome", "specSource": "default", "currentReplicas": 2,
                "desiredReplicas": 3}),
        ({"class": "External"}, {"class": "External", "managedBy": "external", "specSource": "isvc"}),
        ({"class": "None"}, {"class": "None", "managedBy": "none", "specSource": "isvc"}),
    ):
        obj = isvc(autoscaler)
        plan = desired.build(desired.Inputs(isvc=obj, runtime=None, model=None, config=ControllerConfig()))
        status = build_status(obj, plan, {"engine": replica}, [], "2026-12-07T00:00:00Z")
        assert status["components"]["engine"]["autoscaler"] == expected, autoscaler
