"""Revision Services, the peer revision endpoint, and each component's traffic and rolled-out revisions (OME's
deployment-modes page and ComponentStatusSpec): the pure builders, table by table."""

from __future__ import annotations

from typing import Any

import pytest

from omenative.api import constants as c
from omenative.api.config import ControllerConfig
from omenative.api.rollout import paired_revision, pairing_of
from omenative.api.traffic import percents, replica_traffic, rolled_out_fields
from omenative.api.types import InstanceStatus
from omenative.api.validation import Admission, validate_inference_service
from omenative.controllers.inferenceservice import desired
from omenative.controllers.inferenceservice.status import build_status
from omenative.render import objects
from omenative.render.pods import InstanceRef, render_instance

Obj = dict[str, Any]
PORT = {"name": "http", "containerPort": 8080}


def runner(name: str, size: int = 1, pairing: str | None = None) -> Obj:
    labels = {c.LABEL_PAIRING_PROTOCOL: pairing} if pairing else {}
    return {"name": name, "size": size, "template": {"metadata": {"labels": labels},
                                                    "spec": {"containers": [{"name": "c", "ports": [PORT]}]}}}


def controller_revision(isvc: str, component: str, hash_: str, runners: Any, *, owner: str | None = None,
                        deleting: bool = False) -> Obj:
    meta: Obj = {"name": f"{isvc}-{component}-{hash_}", "namespace": "ns", "uid": f"uid-{hash_}",
                 "labels": {c.LABEL_ISVC: isvc, c.LABEL_COMPONENT: component, c.LABEL_REVISION_HASH: hash_},
                 "ownerReferences": [{"kind": "InferenceReplica", "name": owner or f"{isvc}-{component}",
                                      "uid": "ir", "controller": True}]}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-07T00:00:00Z"
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": meta, "data": {"runners": runners},
            "revision": 1}


def test_a_revisions_pair_is_the_components_pair_narrowed_to_the_revision_and_owned_by_it() -> None:
    owner = objects.owner_reference(controller_revision("llama", "engine", "abcd1234", []), kind="ControllerRevision")
    main, headless = objects.revision_services(
        isvc="llama", namespace="ns", component="engine", revision="abcd1234", owner=owner,
        ports=[{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}], multi_pod=True,
        app_protocols={"http": "kubernetes.io/h2c"})
    assert main["metadata"]["name"] == "llama-engine-rev-abcd1234"
    assert headless["metadata"]["name"] == "llama-engine-rev-abcd1234-headless"
    # Leaders only (a multi-pod Instance serves through its leader), this revision's only.
    assert main["spec"]["selector"] == {c.LABEL_ISVC: "llama", c.LABEL_COMPONENT: "engine",
                                        c.LABEL_MANAGED_BY: c.MANAGED_BY_OMENATIVE, c.LABEL_RUNNER: c.RUNNER_LEADER,
                                        c.LABEL_REVISION_HASH: "abcd1234"}
    assert headless["spec"]["selector"] == {c.LABEL_ISVC: "llama", c.LABEL_COMPONENT: "engine",
                                            c.LABEL_MANAGED_BY: c.MANAGED_BY_OMENATIVE,
                                            c.LABEL_REVISION_HASH: "abcd1234"}
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"] is True
    assert main["spec"]["ports"][0]["appProtocol"] == "kubernetes.io/h2c"
    for service in (main, headless):
        (ref,) = service["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
            "ControllerRevision", "llama-engine-abcd1234", "uid-abcd1234", True)
        assert service["metadata"]["labels"][c.LABEL_REVISION_HASH] == "abcd1234"


LONG = "a" * 40  # 40 + "-decoder-rev-01234567-headless" = 70 characters


@pytest.mark.parametrize(("revision", "made"), [
    (controller_revision("svc", "engine", "11111111", [runner("default")]), ["svc-engine-rev-11111111",
                                                                            "svc-engine-rev-11111111-headless"]),
    (controller_revision("svc", "decoder", "22222222", [runner("default")]), []),  # another component's
    (controller_revision("svc", "engine", "33333333", [runner("default")], owner="svc"), []),  # a standalone's
    (controller_revision("svc", "engine", "44444444", [runner("default")], deleting=True), []),
    (controller_revision("svc", "engine", "55555555", "not a list"), []),  # edited by hand: skipped, no crash
    (controller_revision("svc", "engine", "66666666", [{"no": "name"}]), []),
])
def test_the_revisions_that_get_a_pair(revision: Obj, made: list[str]) -> None:
    out = desired.revision_services((revision,), isvc="svc", namespace="ns", component="engine", app_protocols=None)
    assert [s["metadata"]["name"] for s in out] == made


def test_a_revision_whose_names_would_pass_63_characters_gets_none_and_admission_says_so() -> None:
    revision = controller_revision(LONG, "decoder", "01234567", [runner("default")])
    assert desired.revision_services((revision,), isvc=LONG, namespace="ns", component="decoder",
                                     app_protocols=None) == []
    isvc = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": LONG, "namespace": "ns"},
            "spec": {"deploymentMode": "OMENative", "engine": {"runner": {"image": "i"}},
                     "decoder": {"runner": {"image": "i"}}}}
    findings = validate_inference_service(isvc, Admission(config=ControllerConfig()))
    assert findings.allowed  # an existing InferenceService stays editable
    (warning,) = [w for w in findings.warnings if "the decoder's revision Services" in w]
    assert f"'{LONG}-decoder-rev-00000000-headless' (70 characters, over 63)" in warning
    assert "use at most 33 characters" in warning


def test_a_revisions_pair_follows_that_revisions_ports_and_leader_not_todays_spec() -> None:
    old = controller_revision("svc", "engine", "0ld0ld00", [
        {**runner("leader"), "template": {"spec": {"containers": [{"name": "c", "ports": [
            {"name": "grpc", "containerPort": 9000}]}]}}}, runner("worker", 2)])
    main, _ = desired.revision_services((old,), isvc="svc", namespace="ns", component="engine", app_protocols=None)
    assert main["spec"]["ports"] == [{"name": "grpc", "port": 9000, "targetPort": 9000, "protocol": "TCP"}]
    assert main["spec"]["selector"][c.LABEL_RUNNER] == c.RUNNER_LEADER


@pytest.mark.parametrize(("counts", "expected"), [
    ({"a": 1, "b": 1, "c": 1}, {"a": 34, "b": 33, "c": 33}),
    ({"a": 3, "b": 1}, {"a": 75, "b": 25}),
    ({"a": 2}, {"a": 100}),
    ({"a": 0, "b": 5}, {"b": 100}),
    ({}, {}),
])
def test_percents_add_up_to_100(counts: dict[str, int], expected: dict[str, int]) -> None:
    assert percents(counts) == expected
    assert sum(expected.values()) in (0, 100)


def row(index: int, revision: str, pods: int = 4, serving: int = 4, phase: str = "Ready") -> InstanceStatus:
    return InstanceStatus(index=index, phase=phase, running_revision=revision, target_revision=revision,
                          pod_count=pods, serving_pod_count=serving)


def test_a_replicas_traffic_is_each_revisions_share_of_serving_instances() -> None:
    rows = [row(0, "new11111"), row(1, "old22222"), row(2, "old22222"), row(3, "old22222"),
            row(4, "new11111", serving=3),  # not every pod in rotation yet: not serving
            row(5, "old22222", phase="Deleting")]
    assert replica_traffic("svc", "engine", rows, "new11111", {"new11111": "v2", "old22222": None}) == [
        {"revisionName": "svc-engine-rev-new11111", "percent": 25, "tag": "latest", "latestRevision": True,
         "pairingProtocol": "v2"},
        {"revisionName": "svc-engine-rev-old22222", "percent": 75, "tag": "previous", "latestRevision": False}]
    assert replica_traffic("svc", "engine", [row(0, "x", serving=0)], "x", {}) == []


def replica(update: str, current: str, replicas: int, updated: int, updated_ready: int, ready: int) -> Obj:
    return {"updateRevision": f"svc-engine-{update}", "currentRevision": f"svc-engine-{current}",
            "replicas": replicas, "updatedReplicas": updated, "updatedReadyReplicas": updated_ready,
            "readyReplicas": ready}


@pytest.mark.parametrize(("old", "status", "canary_open", "expected"), [
    # First rollout done: every field names the one revision.
    ({}, replica("aaaa", "aaaa", 2, 2, 2, 2), False,
     {"latestReadyRevision": "svc-engine-rev-aaaa", "latestRolledoutRevision": "svc-engine-rev-aaaa"}),
    # Starting: nothing ready yet, nothing said.
    ({}, replica("aaaa", "aaaa", 2, 2, 0, 0), False, {}),
    # An update half way: the new revision is ready ahead of being rolled out.
    ({"latestReadyRevision": "svc-engine-rev-aaaa", "latestRolledoutRevision": "svc-engine-rev-aaaa"},
     replica("bbbb", "aaaa", 2, 1, 1, 2), False,
     {"latestReadyRevision": "svc-engine-rev-bbbb", "latestRolledoutRevision": "svc-engine-rev-aaaa"}),
    # Done: rolled out moves on, and the previous is kept.
    ({"latestReadyRevision": "svc-engine-rev-bbbb", "latestRolledoutRevision": "svc-engine-rev-aaaa"},
     replica("bbbb", "bbbb", 2, 2, 2, 2), False,
     {"latestReadyRevision": "svc-engine-rev-bbbb", "latestRolledoutRevision": "svc-engine-rev-bbbb",
      "previousRolledoutRevision": "svc-engine-rev-aaaa"}),
    # A canary at its last step has every Instance on the new revision but has not ended: not rolled out.
    ({"latestRolledoutRevision": "svc-engine-rev-aaaa"}, replica("bbbb", "bbbb", 2, 2, 2, 2), True,
     {"latestReadyRevision": "svc-engine-rev-bbbb", "latestRolledoutRevision": "svc-engine-rev-aaaa"}),
])
def test_the_rolled_out_revision_fields(old: Obj, status: Obj, canary_open: bool, expected: Obj) -> None:
    assert rolled_out_fields(old, status, "svc", "engine", canary_open) == expected


@pytest.mark.parametrize(("own", "candidates", "paired"), [
    ("v2", [("new", "v2"), ("old", "v1")], "new"),
    ("v1", [("new", "v2"), ("old", "v1")], "old"),  # the decoder's new revision speaks another protocol
    ("v3", [("new", "v2"), ("old", "v1")], None),  # nothing speaks it: no variable
    (None, [("new", "v2"), ("old", "v1")], "new"),  # no protocol pairs with anything
    ("v1", [("new", None)], "new"),
    ("v1", [], None),
])
def test_the_peer_revision_a_pod_pairs_with(own: str | None, candidates: list[tuple[str, str | None]],
                                           paired: str | None) -> None:
    assert paired_revision(own, candidates) == paired


def test_pairing_of_reads_the_templates_label_and_survives_junk() -> None:
    assert pairing_of([runner("leader", pairing="nixl-v2"), runner("worker")]) == "nixl-v2"
    assert pairing_of([runner("default")]) is None
    assert pairing_of("junk") is None and pairing_of([None, {"template": "x"}]) is None


def test_a_pod_that_pairs_with_a_peer_revision_gets_its_revision_endpoint() -> None:
    ref = InstanceRef(isvc="llama-pd", namespace="llama-demo", component="engine", index=0, incarnation=1,
                      revision="r", replicas=1, peers=("decoder",), peer_revisions=(("decoder", "0a1b2c3d"),))
    (pod,) = render_instance(ref, [runner("default")])
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["OME_DECODER_REVISION_ENDPOINT"] == "llama-pd-decoder-rev-0a1b2c3d.llama-demo.svc.cluster.local"
    assert env["OME_DECODER_ENDPOINT"] == "llama-pd-decoder.llama-demo.svc.cluster.local"


def test_the_inferenceservice_mirrors_traffic_and_aliases_the_entrypoints_canary() -> None:
    isvc = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "svc", "namespace": "ns", "uid": "u", "generation": 1},
            "spec": {"deploymentMode": "OMENative", "engine": {"runner": {"image": "i"}}}}
    plan = desired.build(desired.Inputs(isvc=isvc, runtime=None, model=None, config=ControllerConfig()))
    traffic = [{"revisionName": "svc-engine-rev-aaaa", "percent": 100, "tag": "latest", "latestRevision": True}]
    replica_obj = {"metadata": {"annotations": {c.ANN_PARENT_GENERATION: "1"}, "generation": 1},
                   "status": {**replica("aaaa", "aaaa", 1, 1, 1, 1), "observedGeneration": 1, "traffic": traffic}}
    status = build_status(isvc, plan, {"engine": replica_obj}, [], "2026-12-07T00:00:00Z")
    engine = status["components"]["engine"]
    assert engine["traffic"] == traffic
    assert engine["latestRolledoutRevision"] == "svc-engine-rev-aaaa"
    assert "canary" not in status

    class Outcome:  # what the rollout planner hands over, with a canary on the engine
        directives: dict[str, Any] = {}
        status: Obj = {}
        conditions: list[Any] = []
        components = {"engine": {"canary": {"canaryRevisionHash": "bbbb", "currentStep": 1},
                                 "rolloutPhase": "Canarying", "traffic": [
                                     {"revisionName": "svc-engine-rev-bbbb", "percent": 10, "tag": "canary"},
                                     {"revisionName": "svc-engine-rev-aaaa", "percent": 90, "tag": "stable"}]}}

    status = build_status(isvc, plan, {"engine": replica_obj}, [], "2026-12-07T00:00:00Z", rollout=Outcome())
    assert status["canary"] == {"canaryRevisionHash": "bbbb", "currentStep": 1}
    assert [t["percent"] for t in status["components"]["engine"]["traffic"]] == [10, 90]


def test_the_owner_is_named_by_its_own_group_even_when_the_cache_listed_it_without_one() -> None:
    """A listed object carries no apiVersion or kind; an owner reference from it must still say apps/v1, else a
    restarted controller writes every pair again, naming an owner the garbage collector cannot find."""
    listed = controller_revision("svc", "engine", "11111111", [runner("default")])
    del listed["apiVersion"], listed["kind"]
    watched = controller_revision("svc", "engine", "11111111", [runner("default")])
    from_list = desired.revision_services((listed,), isvc="svc", namespace="ns", component="engine",
                                          app_protocols=None)
    assert from_list == desired.revision_services((watched,), isvc="svc", namespace="ns", component="engine",
                                                  app_protocols=None)
    (ref,) = from_list[0]["metadata"]["ownerReferences"]
    assert (ref["apiVersion"], ref["kind"], ref["blockOwnerDeletion"]) == ("apps/v1", "ControllerRevision", False)
