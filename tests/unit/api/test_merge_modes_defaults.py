"""The runtime + InferenceService merge, mode resolution and defaults."""

from __future__ import annotations

from typing import Any

import pytest

from omenative.api.config import ControllerConfig
from omenative.api.defaults import default_component, gang_schedule_timeout, replica_bounds, worker_size
from omenative.api.merge import apply_runner, merge_component, strategic_merge
from omenative.api.modes import resolve_mode
from tests.support.catalog import MULTI_NODE_SEED, seed_yaml_blocks


@pytest.mark.parametrize(
    ("base", "patch", "expected"),
    [
        ({"a": 1}, {"a": 2}, {"a": 2}),
        ({"labels": {"x": "1"}}, {"labels": {"y": "2"}}, {"labels": {"x": "1", "y": "2"}}),
        ({"tolerations": [{"key": "a"}]}, {"tolerations": [{"key": "b"}]}, {"tolerations": [{"key": "b"}]}),
        ({"volumes": [{"name": "a", "emptyDir": {}}]}, {"volumes": [{"name": "b"}]},
         {"volumes": [{"name": "a", "emptyDir": {}}, {"name": "b"}]}),
        ({"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}, {"env": [{"name": "B", "value": "3"}]},
         {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]}),
        ({"ports": [{"containerPort": 8080, "name": "http"}]}, {"ports": [{"containerPort": 8080, "protocol": "TCP"}]},
         {"ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}]}),
        ({"command": ["a", "b"]}, {"command": ["c"]}, {"command": ["c"]}),
        ({"autoscaler": {"class": "HPA", "hpa": {"metrics": []}}}, {"autoscaler": {"class": "None"}},
         {"autoscaler": {"class": "None"}}),
        ({"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}, {"resources": {"limits": {"cpu": "2"}}},
         {"resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}),
    ],
)
def test_strategic_merge(base: dict[str, Any], patch: dict[str, Any], expected: dict[str, Any]) -> None:
    assert strategic_merge(base, patch) == expected


def test_an_undeclared_component_is_not_deployed_whatever_the_runtime_has() -> None:
    assert merge_component({"runner": {"name": "router"}}, None) is None


def test_an_unnamed_runner_keeps_the_runtimes_name() -> None:
    merged = merge_component({"runner": {"name": "ome-container", "image": "a"}},
                             {"runner": {"name": "", "image": "b"}})
    assert merged == {"runner": {"name": "ome-container", "image": "b"}}


def test_runner_is_merged_over_its_container_and_its_args_come_after() -> None:
    spec = {"containers": [{"name": "ome-container", "image": "old", "args": ["--a"], "env": [{"name": "X"}]},
                           {"name": "sidecar"}]}
    out = apply_runner(spec, {"name": "ome-container", "image": "new", "args": ["--b"]}, "ome-container")
    assert out["containers"][0] == {"name": "ome-container", "image": "new", "args": ["--a", "--b"],
                                    "env": [{"name": "X"}]}
    assert out["containers"][1] == {"name": "sidecar"}
    appended = apply_runner({}, {"image": "x"}, "ome-container")
    assert appended["containers"] == [{"name": "ome-container", "image": "x"}]


def seed_objects() -> tuple[dict[str, Any], dict[str, Any]]:
    runtime, isvc, _ = seed_yaml_blocks(MULTI_NODE_SEED)
    return runtime["spec"], isvc["spec"]


def test_seed_leader_and_worker_merge_with_the_runtime() -> None:
    runtime, isvc = seed_objects()
    merged = merge_component(runtime["engineConfig"], isvc["engine"])
    assert merged is not None
    assert merged["leader"]["runner"]["name"] == "ome-container"
    assert merged["worker"]["size"] == 1
    assert merged["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert merged["minReplicas"] == 1 and merged["maxReplicas"] == 1


@pytest.mark.parametrize(
    ("isvc", "runtime", "component", "mode", "source"),
    [
        ({"engine": {}}, {}, "engine", "RawDeployment", "Default"),
        ({"engine": {"leader": {}, "worker": {}}}, {}, "engine", "OMENative", "LeaderWorker"),
        ({"engine": {}}, {"engineConfig": {"worker": {"size": 1}}}, "engine", "OMENative", "LeaderWorker"),
        ({"deploymentMode": "OMENative", "router": {}}, {}, "router", "OMENative", "DeploymentMode"),
        ({"deploymentMode": "OMENative", "router": {"annotations": {"ome.io/deploymentMode": "RawDeployment"}}}, {},
         "router", "RawDeployment", "IsvcAnnotation"),
        ({"deploymentMode": "OMENative", "engine": {}},
         {"engineConfig": {"annotations": {"ome.io/deploymentMode": "RawDeployment"}}},
         "engine", "RawDeployment", "RuntimeAnnotation"),
        ({"engine": {"annotations": {"ome.io/deploymentMode": "MultiNodeRayVLLM"}, "leader": {}, "worker": {}}}, {},
         "engine", "OMENative", "LeaderWorker"),  # unknown annotation values are skipped
        ({"router": {"leader": {}}}, {}, "router", "RawDeployment", "Default"),  # the router has no leader
    ],
)
def test_mode_resolution(isvc: dict[str, Any], runtime: dict[str, Any], component: str, mode: str,
                         source: str) -> None:
    got = resolve_mode(isvc, runtime, component)
    assert (got.mode, got.source) == (mode, source)


@pytest.mark.parametrize(
    ("component", "name", "expected"),
    [
        ({}, "engine", (1, 3)),
        ({}, "router", (1, 2)),
        ({"minReplicas": 5}, "engine", (5, 5)),  # a default maximum below the minimum is raised
        ({"minReplicas": 0}, "engine", (1, 3)),  # OMENative runs at least one Instance
        ({"minReplicas": 2, "maxReplicas": 0}, "engine", (2, 3)),  # maxReplicas 0 counts as unset
        ({"minReplicas": 1, "maxReplicas": 1}, "engine", (1, 1)),
    ],
)
def test_replica_bounds(component: dict[str, Any], name: str, expected: tuple[int, int]) -> None:
    assert replica_bounds(component, name, ControllerConfig()) == expected


@pytest.mark.parametrize(
    ("component", "restart", "ready", "size"),
    [
        ({}, "None", "None", 0),
        ({"leader": {}, "worker": {}}, "RecreateInstanceOnPodRestart", "AllPodReady", 1),
        ({"leader": {}, "worker": {"size": 3}}, "RecreateInstanceOnPodRestart", "AllPodReady", 3),
        ({"leader": {}, "worker": {}, "lifecycle": {"restartPolicy": "None"}}, "None", "AllPodReady", 1),
    ],
)
def test_shape_dependent_defaults(component: dict[str, Any], restart: str, ready: str, size: int) -> None:
    out = default_component(component, "engine", ControllerConfig())
    assert out["lifecycle"]["restartPolicy"] == restart
    assert out["lifecycle"]["readyPolicy"] == ready
    assert worker_size(out) == size
    assert out["lifecycle"]["updateStrategy"] == {"type": "SurgeThenDrain", "rollingUpdate": {"maxSurge": "25%"}}
    assert out["lifecycle"]["instanceReadyTimeout"] == "30m"
    assert out["autoscaler"] == {"class": "HPA"}
    assert default_component(out, "engine", ControllerConfig()) == out


@pytest.mark.parametrize(
    ("ready_timeout", "low", "high", "expected"),
    [
        (1800, "60s", "600s", 600),  # above max
        (300, "60s", "600s", 300),  # between
        (30, "60s", "600s", 60),  # below min
        (None, "60s", "600s", 60),  # unset: min
        (1800, None, None, 1800),  # no clamp configured
        (None, None, None, None),
        (1800, "600s", "60s", 1800),  # an invalid range counts as unset
    ],
)
def test_gang_schedule_timeout(ready_timeout: float | None, low: str | None, high: str | None,
                               expected: int | None) -> None:
    config = ControllerConfig(gang_schedule_timeout_min=low, gang_schedule_timeout_max=high)
    assert gang_schedule_timeout(ready_timeout, config) == expected
