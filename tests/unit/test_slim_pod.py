"""The pods' cache keeps only what the controllers read: every fact a planner takes from a pod is the same on the
slimmed copy, and of the containers (most of a model server pod's size) only their names and images stay (an
in-place update compares them). Every cache keeps one copy of each repeated string."""

from __future__ import annotations

import copy
import json

import pytest

from omenative.kube.cache import Store
from omenative.kube.resources import PODS
from omenative.kube.sharing import INTERN_MAX_CHARS, compact
from omenative.observe.pods import pod_facts, pod_got_worse, slim_pod
from omenative.render.pods import InstanceRef, render_instance

pytestmark = pytest.mark.unit

RUNNERS = [
    {"name": "leader", "size": 1, "template": {"spec": {"containers": [{
        "name": "ome-container", "image": "example.invalid/sglang:1",
        "command": ["python3", "-m", "sglang.launch_server", "--model-path", "$(MODEL_PATH)"],
        "env": [{"name": f"VAR_{i}", "value": "x" * 40} for i in range(40)],
        "resources": {"requests": {"nvidia.com/gpu": 1}}}]}}},
    {"name": "worker", "size": 1, "template": {"spec": {"containers": [{
        "name": "ome-container", "image": "example.invalid/sglang:1"}]}}},
]


def running(pod: dict) -> dict:
    pod = copy.deepcopy(pod)
    pod["metadata"] |= {"uid": "u-1", "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z",
                        "managedFields": [{"manager": "omenative"}]}
    pod["spec"]["nodeName"] = "gpu-1"
    pod["status"] = {"phase": "Running", "podIP": "10.0.0.1",
                     "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:01:00Z"},
                                    {"type": "ContainersReady", "status": "True"},
                                    {"type": "ome.io/serving", "status": "True"}],
                     "containerStatuses": [{"name": "ome-container", "restartCount": 2, "lastState": {
                         "terminated": {"reason": "OOMKilled", "exitCode": 137}}, "state": {"running": {}}}]}
    return pod


def test_every_fact_survives_and_the_containers_go_but_their_images() -> None:
    ref = InstanceRef(isvc="svc", namespace="ns", component="engine", index=0, incarnation=3, revision="abc",
                      replicas=1, podgroup="svc-engine-0")
    full = slimmed = 0
    for pod in (running(p) for p in render_instance(ref, RUNNERS)):
        slim = slim_pod(copy.deepcopy(pod))
        full, slimmed = full + len(json.dumps(pod)), slimmed + len(json.dumps(slim))
        assert pod_facts(slim) == pod_facts(pod)
        assert pod_got_worse(slim, slim) is pod_got_worse(pod, pod)
        assert slim["spec"]["containers"] == [{"name": "ome-container", "image": "example.invalid/sglang:1"}]
        assert slim["spec"]["nodeName"] == "gpu-1"
        assert "managedFields" not in slim["metadata"]
        assert slim["spec"].get("readinessGates") == pod["spec"].get("readinessGates")
    assert slimmed < full / 2


@pytest.mark.parametrize("container", [
    {"state": {"running": {"startedAt": "2026-01-01T00:00:05Z"}}, "lastState": {}},
    {"state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container"}},
     "lastState": {"terminated": {"reason": "Error", "exitCode": 1, "finishedAt": "2026-01-01T00:00:09Z",
                                  "startedAt": "2026-01-01T00:00:05Z", "containerID": "containerd://abc"}}},
    {"state": {"waiting": {"reason": "ImagePullBackOff", "message": "pull failed"}}, "restartCount": 0},
])
def test_the_status_keeps_what_is_read_and_drops_what_is_unique_to_each_pod(container: dict) -> None:
    """A kubelet's status carries addresses, start times, image IDs and container IDs that no controller reads: they
    go, and every fact (restarts, why the last run ended, why a container waits, the image it runs) is the same on
    the slimmed pod."""
    ref = InstanceRef(isvc="svc", namespace="ns", component="engine", index=0, incarnation=1, revision="abc",
                      replicas=1, podgroup="svc-engine-0")
    pod = running(render_instance(ref, RUNNERS)[0])
    status = {"name": "ome-container", "restartCount": 3, "ready": False, "started": False,
              "image": "example.invalid/sglang:1", "imageID": "example.invalid/sglang@sha256:1",
              "containerID": "containerd://def"} | container
    pod["status"] |= {"hostIP": "10.1.0.1", "hostIPs": [{"ip": "10.1.0.1"}], "podIPs": [{"ip": "10.0.0.1"}],
                      "startTime": "2026-01-01T00:00:01Z", "qosClass": "Guaranteed", "containerStatuses": [status],
                      "initContainerStatuses": [{"name": "model-init", "restartCount": 1, "image": "x",
                                                 "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}]}
    slim = slim_pod(copy.deepcopy(pod))
    assert pod_facts(slim) == pod_facts(pod)
    worse = copy.deepcopy(pod)
    worse["status"]["initContainerStatuses"][0]["restartCount"] = 2
    assert pod_got_worse(slim, slim_pod(copy.deepcopy(worse))) is pod_got_worse(pod, worse) is True
    assert set(slim["status"]) == {"phase", "podIP", "conditions", "containerStatuses", "initContainerStatuses"}
    kept = slim["status"]["containerStatuses"][0]
    assert set(kept) <= {"name", "restartCount", "state", "lastState", "image"}
    assert kept["image"] == "example.invalid/sglang:1"
    assert "imageID" not in json.dumps(slim["status"]) and "containerID" not in json.dumps(slim["status"])


def test_a_status_of_unexpected_shape_is_slimmed_without_error() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": [], "status": {
        "phase": "Running", "containerStatuses": ["odd", {"name": "c", "state": "odd", "lastState": ["odd"]}]}}
    slim = slim_pod(pod)
    assert slim["status"]["containerStatuses"] == [{"name": "c"}]  # what cannot be read is not kept
    assert pod_facts(slim).restarts == () and pod_facts(slim).wedged is None


def test_the_cache_holds_one_copy_of_each_repeated_string() -> None:
    """Stored objects equal what was decoded, but two pods share their keys and short values (interned), while a
    long string in parts that differ is kept as it came."""
    ref = InstanceRef(isvc="svc", namespace="ns", component="engine", index=0, incarnation=1, revision="abc",
                      replicas=1, podgroup="svc-engine-0")
    store = Store(PODS, transform=slim_pod)
    decoded = []
    for n, pod in enumerate(running(p) for p in render_instance(ref, RUNNERS)):
        pod["status"]["message"] = "m" * (INTERN_MAX_CHARS + 1)
        pod["status"]["podIP"] = f"10.0.0.{n}"  # statuses that differ, so the message is not shared with its part
        decoded.append(json.loads(json.dumps(pod)))  # fresh strings, as a watch event brings them
        store.upsert(json.loads(json.dumps(pod)))
    a, b = (store.get(f"ns/{p['metadata']['name']}") for p in decoded)
    assert a is not None and b is not None
    assert a == slim_pod(copy.deepcopy(decoded[0])) and b == slim_pod(copy.deepcopy(decoded[1]))
    key_a = next(k for k in a["status"] if k == "containerStatuses")
    key_b = next(k for k in b["status"] if k == "containerStatuses")
    assert key_a is key_b
    assert a["metadata"]["labels"]["ome.io/inferenceservice"] is b["metadata"]["labels"]["ome.io/inferenceservice"]
    assert a["status"]["message"] == b["status"]["message"]
    assert a["status"]["message"] is not b["status"]["message"]
    assert compact({"n": [1, None, True, 2.5]}) == {"n": [1, None, True, 2.5]}


def test_an_endpoint_slice_keeps_the_routed_pods_and_their_conditions() -> None:
    from omenative.controllers.watches import routed_pod_index, slim_endpoint_slice

    def endpoint(name: str, ready: bool) -> dict[str, object]:
        return {"addresses": ["10.0.0.7"], "nodeName": "gpu-node-1", "zone": "a", "hints": {"forZones": []},
                "conditions": {"ready": ready, "serving": ready, "terminating": False},
                "targetRef": {"kind": "Pod", "name": name, "namespace": "ns", "uid": "u-" + name}}

    slice_ = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
              "metadata": {"name": "svc-abc", "namespace": "ns", "resourceVersion": "7", "managedFields": [{}],
                           "labels": {"ome.io/inferenceservice": "svc", "kubernetes.io/service-name": "svc-engine"}},
              "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
              "endpoints": [endpoint("svc-engine-0-leader-0", True), endpoint("svc-engine-1-leader-0", False)]}
    slim = slim_endpoint_slice(copy.deepcopy(slice_))
    assert slim["endpoints"] == [
        {"conditions": {"ready": True, "serving": True, "terminating": False},
         "targetRef": {"kind": "Pod", "name": "svc-engine-0-leader-0"}},
        {"conditions": {"ready": False, "serving": False, "terminating": False},
         "targetRef": {"kind": "Pod", "name": "svc-engine-1-leader-0"}}]
    assert "ports" not in slim and "managedFields" not in slim["metadata"]
    assert slim["metadata"]["labels"] == slice_["metadata"]["labels"]  # type: ignore[index]
    # What the controllers read of it is unchanged.
    assert routed_pod_index(slim) == routed_pod_index(slice_) == ["ns/svc-engine-0-leader-0"]
    assert slim_endpoint_slice({"metadata": {"name": "empty"}}) == {"metadata": {"name": "empty"}}


def test_repeated_parts_are_held_once_and_dropped_with_the_last_object_holding_them() -> None:
    from omenative.kube.sharing import SHARED
    from omenative.ome_resources import INFERENCE_REPLICAS

    def replica(name: str, uid: str, flag: object) -> dict[str, object]:
        return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
                "metadata": {"name": name, "namespace": "ns", "uid": uid, "labels": {"app": "x"}},
                "spec": {"runners": copy.deepcopy(RUNNERS), "flag": flag}}

    while SHARED.prune():
        pass  # what earlier tests left
    store = Store(INFERENCE_REPLICAS)
    for name, uid, flag in (("a", "u-a", True), ("b", "u-b", True), ("c", "u-c", 1), ("d", "u-d", 1.0)):
        store.upsert(json.loads(json.dumps(replica(name, uid, flag))))
    a, b, one, real = (store.get(f"ns/{n}") for n in "abcd")
    assert a is not None and b is not None and one is not None and real is not None
    assert a["spec"] is b["spec"] and a["spec"]["runners"] is one["spec"]["runners"]
    assert a["metadata"] is not b["metadata"] and a["metadata"]["labels"] is b["metadata"]["labels"]
    # 1, 1.0 and True are equal in Python but not the same JSON: each keeps its own.
    assert a["spec"] is not one["spec"] and one["spec"] is not real["spec"]
    assert json.dumps(one["spec"]["flag"]) == "1" and json.dumps(real["spec"]["flag"]) == "1.0"
    assert a == replica("a", "u-a", True)
    held = len(SHARED)
    SHARED.prune()
    assert len(SHARED) == held  # still in use
    for n in "abcd":
        store.remove({"metadata": {"name": n, "namespace": "ns"}})
    del a, b, one, real
    while SHARED.prune():
        pass
    assert len(SHARED) < held


def test_a_cached_object_changed_in_place_is_named_in_the_log(monkeypatch: pytest.MonkeyPatch) -> None:
    from structlog.testing import capture_logs

    from omenative.kube import cache

    monkeypatch.setattr(cache, "CHECK_IN_PLACE_CHANGES", True)
    store = Store(PODS, transform=slim_pod)
    ref = InstanceRef(isvc="svc", namespace="ns", component="engine", index=0, incarnation=1, revision="abc",
                      replicas=1, podgroup="svc-engine-0")
    pod = running(render_instance(ref, RUNNERS)[0])
    name = pod["metadata"]["name"]
    with capture_logs() as logs:
        store.upsert(json.loads(json.dumps(pod)))
        store.upsert(json.loads(json.dumps(pod)))  # a new version of it, nothing changed in place
        assert [e for e in logs if e["event"] == cache.IN_PLACE_CHANGE] == []
        cached = store.get(f"ns/{name}")
        assert cached is not None
        cached["status"]["phase"] = "Failed"  # what no consumer may do
        store.upsert(json.loads(json.dumps(pod)))
    reported = [(e["resource"], e["key"]) for e in logs if e["event"] == cache.IN_PLACE_CHANGE]
    assert reported == [(str(PODS), f"ns/{name}")]
