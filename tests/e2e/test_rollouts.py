"""Rollout groups against the local control plane (OME's rollout pages): a rolling-update group that keeps its
components' ratio, a sequence with a soak, a canary stopped at a manual gate, promoted and, for the next revision,
rolled back with `kubectl ome rollout`, and a pause in the middle of an update."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import yaml
from aiohttp import web
from kubernetes_asyncio import client

from omenative.api.instance_status import decode_rows
from omenative.api.times import parse_time
from tests.conftest import NodeFactory, describe_namespace
from tests.e2e.conftest import ModelAgent
from tests.support.catalog import CATALOG
from tests.support.cluster import ControlPlane
from tests.support.controller import ControllerProcess, free_port
from tests.support.history import recorded
from tests.support.omenative import inline_component, inline_service
from tests.support.prometheus import running_prometheus
from tests.support.rollout_specs import EDITS, REJECTED, WARNED
from tests.support.wait import wait_for

Obj = dict[str, Any]
PD_MODEL = "llama-3-2-1b-instruct"
PD_LEARNED = {"modelFormat": {"name": "safetensors", "version": "1.0.0"},
              "modelFramework": {"name": "transformers", "version": "4.45.0.dev0"},
              "modelArchitecture": "LlamaForCausalLM", "modelParameterSize": "1.24B"}
PD_NEW_IMAGE = "docker.io/lmsysorg/sglang:v0.5.6-cu129-amd64"
V1, V2, V3 = "example.invalid/server:1", "example.invalid/server:2", "example.invalid/server:3"


async def get_json(control_plane: ControlPlane, *args: str) -> Obj:
    return json.loads((await control_plane.kubectl("get", *args, "-o", "json")).stdout)


async def replicas_of(control_plane: ControlPlane, namespace: str, isvc: str) -> dict[str, Obj]:
    """Every InferenceReplica of the service from one list: one consistent moment."""
    listed = await get_json(control_plane, "inferencereplicas", "-n", namespace, "-l",
                            f"ome.io/inferenceservice={isvc}")
    return {item["spec"]["component"]: item for item in listed["items"]}


def settled(replica: Obj, desired: int) -> bool:
    status = replica.get("status") or {}
    return status.get("observedGeneration") == replica["metadata"]["generation"] and \
        status.get("updatedReplicas") == desired and status.get("readyReplicas") == desired and \
        status.get("replicas") == desired and status.get("currentRevision") == status.get("updateRevision")


async def serve(control_plane: ControlPlane, api: client.ApiClient, isvc: Obj, sizes: dict[str, int]) -> None:
    kubectl = control_plane.kubectl
    meta = isvc["metadata"]
    await kubectl("apply", "-f", "-", stdin=json.dumps(isvc))

    async def ready() -> bool:
        got = await replicas_of(control_plane, meta["namespace"], meta["name"])
        return sorted(got) == sorted(sizes) and all(settled(got[n], d) for n, d in sizes.items())

    await wait_for(ready, timeout=120, what=f"{meta['name']} serving",
                   describe=lambda: describe_namespace(api, meta["namespace"]))


async def set_images(control_plane: ControlPlane, namespace: str, name: str, image: str, *components: str) -> None:
    patch = {"spec": {comp: {"runner": {"image": image}} for comp in components}}
    await control_plane.kubectl("patch", "inferenceservice", name, "-n", namespace, "--type", "merge", "-p",
                                json.dumps(patch))


async def test_a_rolling_update_group_keeps_engine_and_decoder_within_the_tolerance(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    namespace: str,
) -> None:
    """The rollout-groups page's example: four engines, two decoders, maxSurge 1, maintainRatio tolerance 25."""
    await sim_nodes("gpu")
    isvc = inline_service("ratio", namespace, engine=inline_component(4, image=V1),
                          decoder=inline_component(2, image=V1))
    isvc["spec"]["rollout"] = {"groups": [{"components": ["engine", "decoder"],
                                           "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
                                           "maintainRatio": {"tolerance": 25}}]}
    await serve(control_plane, api, isvc, {"engine": 4, "decoder": 2})
    # Every version of both InferenceReplicas and of the InferenceService, as the watch delivers them: no sampling.
    async with recorded(api, "inferencereplicas", namespace, "ratio-engine") as engine_history, \
            recorded(api, "inferencereplicas", namespace, "ratio-decoder") as decoder_history, \
            recorded(api, "inferenceservices", namespace, "ratio") as service_history:
        await set_images(control_plane, namespace, "ratio", V2, "engine", "decoder")

        async def finished() -> bool:
            got = await replicas_of(control_plane, namespace, "ratio")
            return settled(got["engine"], 4) and settled(got["decoder"], 2) and {
                c["image"] for r in got.values() for c in r["spec"]["runners"][0]["template"]["spec"]["containers"]
            } == {V2}

        await wait_for(finished, timeout=240, what="both components on the new image",
                       describe=lambda: describe_namespace(api, namespace))

        async def idle() -> bool:  # the InferenceService writes the group's phase after its replicas' status
            status = (await get_json(control_plane, "inferenceservice", "ratio", "-n", namespace)).get("status") or {}
            groups = (status.get("rolloutCoordination") or {}).get("groups") or []
            return bool(groups) and groups[0]["phase"] == "Idle"

        await wait_for(idle, timeout=30, what="the group's phase back to Idle",
                       describe=lambda: describe_namespace(api, namespace))
    # The two replicas' versions in the API server's order: at each, the progress both had then.
    merged = sorted([(int(v["metadata"]["resourceVersion"]), "engine", v) for v in engine_history.versions] +
                    [(int(v["metadata"]["resourceVersion"]), "decoder", v) for v in decoder_history.versions],
                    key=lambda item: item[0])
    before = {"engine": engine_history.versions[0]["status"]["updateRevision"],
              "decoder": decoder_history.versions[0]["status"]["updateRevision"]}
    latest: dict[str, int] = {}
    moments = []
    for _, comp, version in merged:
        status = version.get("status") or {}
        # Progress toward the new revision: none while the status still names the old one.
        latest[comp] = int(status.get("updatedReplicas") or 0) if status.get("updateRevision") != before[comp] else 0
        if len(latest) == 2:
            moments.append((latest["engine"], latest["decoder"]))
    drift = [m for m in moments if abs(m[0] / 4 - m[1] / 2) > 0.25 + 1e-9]
    assert drift == [], f"engine and decoder progress drifted apart by more than 25 points: {moments}"
    assert moments[-1] == (4, 2) and len(set(moments)) >= 4, moments
    gates = {f"{comp}:{hold['gate']}" for v in service_history.versions
             for comp, block in ((v.get("status") or {}).get("components") or {}).items()
             if (hold := (block.get("lifecycle") or {}).get("rolloutHold") or {}).get("gate")}
    assert "engine:Ratio" in gates or "decoder:Ratio" in gates, gates
    # The group's phase as the InferenceService reported it, version by version (OME's CoordinationPhase): the
    # rollout starts Surging and ends Idle, and every phase between is one a rolling-update group can be in.
    phases = service_history.values(lambda v: next(
        (g["phase"] for g in ((v.get("status") or {}).get("rolloutCoordination") or {}).get("groups") or []), None))
    moving = [p for p in phases if p not in (None, "Idle")]
    print(f"coordination phases: {phases}")
    assert moving and moving[0] == "Surging" and phases[-1] == "Idle", phases
    assert set(moving) <= {"Surging", "Shifting", "Draining", "Waiting", "ScalingDown"}, phases
    # OME's rollout group metric counted the phase changes the status recorded, into Surging and back to Idle.
    for entered in ("Surging", "Idle"):
        assert await omenative.metric("ome_omenative_rollout_group_transition_total", namespace=namespace,
                                      isvc="ratio", group="0", to=entered) >= 1, await omenative.metrics()
    status = (await get_json(control_plane, "inferenceservice", "ratio", "-n", namespace))["status"]
    assert status["rollout"]["lastRun"]["outcome"] == "Completed"
    assert "activeRun" not in status["rollout"]
    pods = await get_json(control_plane, "pods", "-n", namespace, "-l", "ome.io/inferenceservice=ratio")
    assert {c["image"] for p in pods["items"] for c in p["spec"]["containers"]} == {V2}


async def test_a_sequence_rolls_the_decoder_then_soaks_then_the_engine(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    namespace: str,
) -> None:
    await sim_nodes("gpu")
    isvc = inline_service("seq", namespace, engine=inline_component(1, image=V1),
                          decoder=inline_component(1, image=V1))
    isvc["spec"]["rollout"] = {"groups": [{"components": ["decoder"], "soak": "20s"}, {"components": ["engine"]}]}
    await serve(control_plane, api, isvc, {"engine": 1, "decoder": 1})
    async with recorded(api, "inferenceservices", namespace, "seq") as service_history, \
            recorded(api, "inferencereplicas", namespace, "seq-engine") as engine_history:
        await set_images(control_plane, namespace, "seq", V2, "engine", "decoder")

        async def finished() -> bool:
            got = await replicas_of(control_plane, namespace, "seq")
            return settled(got["engine"], 1) and settled(got["decoder"], 1) and \
                got["engine"]["spec"]["runners"][0]["template"]["spec"]["containers"][0]["image"] == V2

        await wait_for(finished, timeout=240, what="decoder, then engine on the new image",
                       describe=lambda: describe_namespace(api, namespace))
    def engine_hold(version: Obj) -> str | None:
        hold = (((version.get("status") or {}).get("components") or {}).get("engine") or {}).get(
            "lifecycle", {}).get("rolloutHold") or {}
        return f"{hold['gate']}|{hold.get('reason')}" if hold.get("gate") else None

    reasons = [r for r in service_history.values(engine_hold) if r]
    assert reasons[:2] == ["Sequential|Sequential waiting on decoder",
                           "Sequential|Sequential.Soak: engine waiting out the 20s soak after decoder"], reasons
    done_at = [t.get("completedAt") for v in service_history.versions
               for t in (((v.get("status") or {}).get("rollout") or {}).get("activeRun") or {}).get(
                   "targetRevisions") or [] if t["component"] == "decoder" and t.get("completedAt")]
    assert done_at, "the run never recorded the decoder's finish"
    decoder_done = done_at[0]
    # The engine moved only after that record: no version of it on the new revision came before.
    old_revision = engine_history.versions[0]["status"]["updateRevision"]
    first_moved = next(int(v["metadata"]["resourceVersion"]) for v in engine_history.versions
                       if int((v.get("status") or {}).get("updatedReplicas") or 0) > 0 and
                       v["status"].get("updateRevision") != old_revision)
    recorded_at = next(int(v["metadata"]["resourceVersion"]) for v in service_history.versions
                       if any(t["component"] == "decoder" and t.get("completedAt") for t in
                              (((v.get("status") or {}).get("rollout") or {}).get("activeRun") or {}).get(
                                  "targetRevisions") or []))
    assert recorded_at < first_moved
    # The engine's first new Instance comes at least the soak after the decoder finished (seconds in status).
    pods = await get_json(control_plane, "pods", "-n", namespace, "-l", "ome.io/inferenceservice=seq,component=engine")
    created = min(p["metadata"]["creationTimestamp"] for p in pods["items"])
    assert decoder_done is not None
    assert (parse_time(created) or 0) - (parse_time(decoder_done) or 0) >= 19, (created, decoder_done)


async def canary_phase(control_plane: ControlPlane, namespace: str, name: str,
                       primary: str = "engine") -> tuple[str | None, Obj]:
    status = (await get_json(control_plane, "inferenceservice", name, "-n", namespace)).get("status") or {}
    block = (status.get("components") or {}).get(primary) or {}
    return block.get("rolloutPhase"), block


async def test_a_canary_stops_at_its_gate_is_promoted_and_the_next_is_rolled_back(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    namespace: str,
) -> None:
    kubectl = control_plane.kubectl
    await sim_nodes("gpu")
    isvc = inline_service("chat", namespace, engine=inline_component(4, image=V1))
    isvc["spec"]["rollout"] = {"groups": [{"components": ["engine"], "canary": {"steps": [
        {"capacity": "25%", "traffic": 10, "pause": {}}, {"capacity": "100%", "traffic": 100}]}}]}
    await serve(control_plane, api, isvc, {"engine": 4})
    describe = lambda: describe_namespace(api, namespace)  # noqa: E731

    async def at(phase: str) -> Obj | None:
        got, engine = await canary_phase(control_plane, namespace, "chat")
        return engine if got == phase else None

    await set_images(control_plane, namespace, "chat", V2, "engine")
    engine = await wait_for(lambda: at("Paused"), timeout=120, what="the canary at its manual gate", describe=describe)
    assert engine["canary"]["currentStep"] == 0 and engine["canary"]["gate"] == "Manual"
    assert engine["canary"]["observedTrafficWeight"] == 10
    replica = (await replicas_of(control_plane, namespace, "chat"))["engine"]["status"]
    assert (replica["updatedReplicas"], replica["readyReplicas"], replica["replicas"]) == (1, 4, 4), replica
    canary = engine["canary"]["canaryRevisionHash"]
    stable = engine["canary"]["stableRevisionHash"]

    # Each revision has its pair of Services (OME's deployment-modes page), which route to its own pods only: what
    # a canary analysis queries as {{.CanaryService}} and {{.StableService}}.
    async def routed(service: str) -> set[str] | None:
        slices = await get_json(control_plane, "endpointslices", "-n", namespace, "-l",
                                f"kubernetes.io/service-name={service}")
        if not slices["items"]:
            return None
        return {e["targetRef"]["name"] for s in slices["items"] for e in s.get("endpoints") or []
                if (e.get("conditions") or {}).get("ready")}

    pods = await get_json(control_plane, "pods", "-n", namespace, "-l", "ome.io/inferenceservice=chat")
    by_revision: dict[str, set[str]] = {}
    for pod in pods["items"]:
        by_revision.setdefault(pod["metadata"]["labels"]["ome.io/revision-hash"], set()).add(pod["metadata"]["name"])
    assert sorted(len(v) for v in by_revision.values()) == [1, 3], by_revision
    for revision in (canary, stable):
        for service in (f"chat-engine-rev-{revision}", f"chat-engine-rev-{revision}-headless"):
            got = await wait_for(lambda s=service: routed(s), timeout=30, what=f"{service}'s endpoints",  # type: ignore[misc]
                                 describe=describe)
            assert got == by_revision[revision], (service, got, by_revision)
        revision_service = await get_json(control_plane, "service", f"chat-engine-rev-{revision}", "-n", namespace)
        assert revision_service["metadata"]["ownerReferences"][0]["kind"] == "ControllerRevision"
        assert revision_service["spec"]["selector"]["ome.io/revision-hash"] == revision
    # The InferenceService records the canary's weights by revision Service, and aliases the engine's canary; the
    # replica reports each revision's share of serving Instances.
    isvc_status = (await get_json(control_plane, "inferenceservice", "chat", "-n", namespace))["status"]
    assert [(t["revisionName"], t["percent"], t["tag"]) for t in isvc_status["components"]["engine"]["traffic"]] \
        == [(f"chat-engine-rev-{canary}", 10, "canary"), (f"chat-engine-rev-{stable}", 90, "stable")], isvc_status
    assert isvc_status["canary"] == isvc_status["components"]["engine"]["canary"]
    assert isvc_status["components"]["engine"]["latestReadyRevision"] == f"chat-engine-rev-{canary}"
    assert isvc_status["components"]["engine"]["latestRolledoutRevision"] == f"chat-engine-rev-{stable}"
    replica_traffic = (await replicas_of(control_plane, namespace, "chat"))["engine"]["status"]["traffic"]
    assert [(t["revisionName"], t["percent"]) for t in replica_traffic] == [
        (f"chat-engine-rev-{canary}", 25), (f"chat-engine-rev-{stable}", 75)], replica_traffic

    shown = await kubectl("ome", "rollout", "status", "chat", "-n", namespace)
    rows = {line.split()[0]: line.split()[1:] for line in shown.stdout.splitlines()}
    # The reference's example, row for row: FIELD, SERVICE, ENGINE, DECODER, ROUTER.
    assert rows["STEP"] == ["-", "1/2", "-", "-"] and rows["GATE"] == ["-", "Manual", "-", "-"], shown.stdout
    assert rows["PHASE"] == ["-", "Paused", "-", "-"] and rows["REPORTED"] == ["Paused", "-", "-", "-"], shown.stdout
    assert rows["TRAFFIC"] == ["-", "10%", "->", "10%", "-", "-"] and rows["CAPACITY"][1] == "25%", shown.stdout

    # kubectl ome status mid-canary: the rollout, autoscaling, traffic and runtime sections; traffic status: the
    # step and the weights by revision.
    lines = (await kubectl("ome", "status", "chat", "-n", namespace)).stdout.splitlines()
    at_value = lines[0].index("VALUE")  # FIELD names have spaces: the columns are cut where the header's are
    report = {line[:at_value].strip(): line[at_value:].strip() for line in lines[1:]}
    assert report["Rollout"] == "Unknown reported=Paused", report
    assert report["Autoscaling"].endswith("parent status") and report["Scale engine"].startswith("Reported"), report
    assert report["Traffic"] == "Unavailable / Unavailable parent status", report
    assert report["Traffic engine"] == f"stable:{stable}=90% canary:{canary}=10%", report
    assert report["Runtime active"] == "NotConfigured / Unavailable", report  # an inline service names no runtime
    routed_table = (await kubectl("ome", "traffic", "status", "chat", "-n", namespace)).stdout.splitlines()
    assert [line.split()[:3] for line in routed_table if line.startswith(("CANARY", "WEIGHT"))] == [
        ["CANARY", "engine", "1/2"], ["WEIGHT", "engine", f"stable:{stable}=90%"],
        ["WEIGHT", "engine", f"canary:{canary}=10%"]], routed_table

    promoted = await kubectl("ome", "rollout", "promote", "chat", "-n", namespace, "--yes")
    result = dict(line.split(None, 1) for line in promoted.stdout.splitlines()[1:])
    assert (result["applied"], result["revision-hash"]) == ("Yes", canary), promoted.output
    waited = await kubectl("ome", "wait", "chat", "-n", namespace, "--for=rollout=stable", "--timeout=120s",
                           check=False)
    assert waited.returncode == 0 and "RolloutMatched" in waited.stdout, waited.output + await describe()
    engine = await wait_for(lambda: at("Stable"), timeout=120, what="the canary completed", describe=describe)
    replicas = await replicas_of(control_plane, namespace, "chat")
    assert settled(replicas["engine"], 4)
    component = (await get_json(control_plane, "inferenceservice", "chat", "-n", namespace))["status"]["components"][
        "engine"]
    assert (component["latestRolledoutRevision"], component["previousRolledoutRevision"]) == (
        f"chat-engine-rev-{canary}", f"chat-engine-rev-{stable}"), component
    annotations = (await get_json(control_plane, "inferenceservice", "chat", "-n", namespace))["metadata"].get(
        "annotations") or {}
    assert "ome.io/rollout-promote" not in annotations  # consumed once the advance was recorded

    # The next revision: rolled back at its first step, every Instance returns to the stable one (V2's).
    await set_images(control_plane, namespace, "chat", V3, "engine")
    engine = await wait_for(lambda: at("Paused"), timeout=120, what="the second canary at its gate",
                            describe=describe)
    assert engine["canary"]["stableRevisionHash"] == canary and engine["canary"]["canaryRevisionHash"] != canary
    refused = await kubectl("ome", "rollout", "pause", "chat", "-n", namespace, "--yes", "--dry-run", "client",
                            check=False)
    assert refused.returncode == 0, refused.output  # a canary in flight is work a pause can hold
    back = await kubectl("ome", "rollout", "rollback", "chat", "-n", namespace, "--yes")
    assert "applied         Yes" in back.stdout, back.output
    waited = await kubectl("ome", "wait", "chat", "-n", namespace, "--for=rollout=rolled-back", "--timeout=120s",
                           check=False)
    assert waited.returncode == 0, waited.output + await describe()
    await wait_for(lambda: at("RolledBack"), timeout=120, what="the canary rolled back", describe=describe)
    replica = (await replicas_of(control_plane, namespace, "chat"))["engine"]
    assert replica["status"]["updateRevision"].endswith(engine["canary"]["stableRevisionHash"]), \
        replica["status"]
    assert settled(replica, 4)
    pods = await get_json(control_plane, "pods", "-n", namespace, "-l", "ome.io/inferenceservice=chat")
    assert {c["image"] for p in pods["items"] for c in p["spec"]["containers"]} == {V2}
    again = await kubectl("ome", "rollout", "rollback", "chat", "-n", namespace, "--yes", check=False)
    assert again.returncode == 1 and "mailbox is present" in again.stderr, again.output


async def test_a_pause_holds_a_rolling_update_and_resume_finishes_it(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    namespace: str,
) -> None:
    kubectl = control_plane.kubectl
    # A node that fits exactly the four Instances: the update's first surge waits, unschedulable, in the middle of
    # the update, where the pause comes.
    pool = {"omenative-test/pool": namespace[-12:].strip("-")}
    await sim_nodes("gpu", cpus=4, labels=pool)
    engine = inline_component(4, image=V1)
    engine["nodeSelector"] = pool
    isvc = inline_service("paused", namespace, engine=engine)
    isvc["spec"]["rollout"] = {"groups": [{"components": ["engine"], "rollingUpdate": {"maxSurge": 1}}]}
    await serve(control_plane, api, isvc, {"engine": 4})
    describe = lambda: describe_namespace(api, namespace)  # noqa: E731
    await set_images(control_plane, namespace, "paused", V2, "engine")

    async def surging() -> bool:
        # A single pod surges in its Instance's other name slot (OME's activeOrdinal): four Instances, one of
        # them moving, its new pod waiting for room.
        replica = (await replicas_of(control_plane, namespace, "paused"))["engine"]["status"]
        moving = [r for r in decode_rows(replica) if r.operation is not None and r.operation.step == "Surge"]
        return replica.get("replicas") == 4 and int(replica.get("updatedReplicas") or 0) == 1 and len(moving) == 1

    await wait_for(surging, timeout=60, what="the first surge waiting for room", describe=describe)
    # The guarded patch tests the resourceVersion the command read; the status moves during an update, so a
    # conflict (exit 3) is retried as the reference says: read again, run again.
    for _ in range(10):
        paused = await kubectl("ome", "rollout", "pause", "paused", "-n", namespace, "--yes", check=False)
        if paused.returncode != 3:
            break
    assert paused.returncode == 0 and "applied         Yes" in paused.stdout, paused.output

    async def held() -> Obj | None:
        replica = (await replicas_of(control_plane, namespace, "paused"))["engine"]
        return replica if replica["spec"].get("paused") and \
            replica["status"].get("observedGeneration") == replica["metadata"]["generation"] else None

    replica = await wait_for(held, timeout=60, what="the InferenceReplica paused", describe=describe)
    await sim_nodes("gpu", cpus=4, labels=pool)  # room: the surge under way may finish; nothing else may start

    def fingerprint(obj: Obj) -> list[tuple[Any, ...]]:
        return sorted((r.index, r.target_revision, r.running_revision) for r in decode_rows(obj["status"]))

    # A surge under way may finish creating its new Instance; after that nothing moves.
    async def quiet() -> Obj | None:
        now = (await replicas_of(control_plane, namespace, "paused"))["engine"]
        rows = decode_rows(now["status"])
        assert rows and all(r.phase in ("Ready", "Updating") for r in rows), [(r.index, r.phase) for r in rows]
        return now

    first = fingerprint(await wait_for(quiet, timeout=60, what="the paused replica quiet", describe=describe))
    for _ in range(25):  # about five seconds of samples, each read afresh from the API
        now = (await replicas_of(control_plane, namespace, "paused"))["engine"]
        assert fingerprint(now) == first, "an Instance changed while paused"
        assert int(now["status"].get("updatedReplicas") or 0) < 4
    assert replica["spec"].get("pauseMode") is None
    status = await kubectl("ome", "rollout", "status", "paused", "-n", namespace)
    assert "Paused" in status.stdout, status.stdout

    resumed = await kubectl("ome", "rollout", "resume", "paused", "-n", namespace, "--yes")
    assert "applied         Yes" in resumed.stdout, resumed.output

    async def done() -> bool:
        got = (await replicas_of(control_plane, namespace, "paused"))["engine"]
        return settled(got, 4) and not got["spec"].get("paused")

    await wait_for(done, timeout=180, what="the update finished after the resume", describe=describe)


async def test_a_prefill_decode_group_moves_together_and_always_keeps_a_pair(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    model_agent: ModelAgent, namespace: str,
) -> None:
    """The rollout-groups page's mistral-pd example with the catalog's prefill-decode runtime, two engines and two
    decoders: an image change to the runtime, then a pairing-protocol change (kv-v1 -> kv-v2), each rolled out
    blue-green by one group. The components' EndpointSlices, sampled every 200 ms, show at every sample a ready
    engine and a ready decoder of the same ome.io/pairing-protocol."""
    kubectl = control_plane.kubectl
    describe = lambda: describe_namespace(api, namespace)  # noqa: E731
    # hostNetwork pods take port 8080 of their node: one engine or decoder per node, surges included.
    gpu = [await sim_nodes("gpu") for _ in range(6)]
    await sim_nodes("cpu", gpus=0, cpus=32, memory="128Gi")
    await kubectl("apply", "-f", str(CATALOG / "models" / "meta" / "Llama-3.2-1B-Instruct.yaml"))
    await model_agent.downloaded(PD_MODEL, gpu, PD_LEARNED)
    runtime = yaml.safe_load((CATALOG / "runtimes" / "srt" / "meta" / "llama-3-2-1b-instruct-pd-rt.yaml")
                             .read_text())
    runtime["metadata"] = {"name": "srt-pd-groups"}
    await kubectl("apply", "-f", "-", stdin=json.dumps(runtime))
    isvc = {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "mistral-pd", "namespace": namespace},
            "spec": {"deploymentMode": "OMENative", "model": {"name": PD_MODEL}, "runtime": {"name": "srt-pd-groups"},
                     "engine": {"minReplicas": 2, "maxReplicas": 2}, "decoder": {"minReplicas": 2, "maxReplicas": 2},
                     "router": {"minReplicas": 1, "maxReplicas": 1},
                     "rollout": {"pairingProtocol": "kv-v1", "groups": [{"components": ["engine", "decoder"]}]}}}
    try:
        await serve(control_plane, api, isvc, {"engine": 2, "decoder": 2, "router": 1})
        # With rollout groups, each pod reaches the other components by their Services (OME_<PEER>_ENDPOINT).
        engine_pod = await get_json(control_plane, "pod", "mistral-pd-engine-0-default-0", "-n", namespace)
        env = {e["name"]: e.get("value") for e in engine_pod["spec"]["containers"][0]["env"]}
        assert env["OME_DECODER_ENDPOINT"] == f"mistral-pd-decoder.{namespace}.svc.cluster.local", env
        assert env["OME_ROUTER_ENDPOINT"] == f"mistral-pd-router.{namespace}.svc.cluster.local", env
        # ...and the revision of each it pairs with by its revision Service (OME_<PEER>_REVISION_ENDPOINT).
        decoder = (await replicas_of(control_plane, namespace, "mistral-pd"))["decoder"]["status"]
        decoder_revision = decoder["updateRevision"].rsplit("-", 1)[1]
        assert env["OME_DECODER_REVISION_ENDPOINT"] == \
            f"mistral-pd-decoder-rev-{decoder_revision}.{namespace}.svc.cluster.local", env
        await get_json(control_plane, "service", f"mistral-pd-decoder-rev-{decoder_revision}", "-n", namespace)
        discovery = client.DiscoveryV1Api(api)
        core = client.CoreV1Api(api)
        tokens: dict[str, str] = {}  # pod name -> its pairing token (a pod's labels never change)
        samples: list[dict[str, dict[str, int]]] = []
        sampling = True

        async def observe() -> dict[str, dict[str, int]]:
            """Ready endpoints per component and pairing token."""
            slices = (await discovery.list_namespaced_endpoint_slice(namespace)).items
            ready: dict[str, dict[str, int]] = {"engine": {}, "decoder": {}}
            unknown = [e.target_ref.name for s in slices for e in s.endpoints or []
                       if e.target_ref and e.target_ref.name not in tokens]
            if unknown:
                for pod in (await core.list_namespaced_pod(namespace)).items:
                    tokens[pod.metadata.name] = (pod.metadata.labels or {}).get("ome.io/pairing-protocol", "")
            for endpoint_slice in slices:
                service = (endpoint_slice.metadata.labels or {}).get("kubernetes.io/service-name")
                component = {"mistral-pd-engine": "engine", "mistral-pd-decoder": "decoder"}.get(service or "")
                if component is None:
                    continue
                for endpoint in endpoint_slice.endpoints or []:
                    if endpoint.conditions and endpoint.conditions.ready and endpoint.target_ref:
                        token = tokens.get(endpoint.target_ref.name, "?")
                        ready[component][token] = ready[component].get(token, 0) + 1
            return ready

        async def sample() -> None:
            while sampling:
                samples.append(await observe())
                await asyncio.sleep(0.2)

        async def rolled(image: str, token: str) -> bool:
            got = await replicas_of(control_plane, namespace, "mistral-pd")
            pods = await get_json(control_plane, "pods", "-n", namespace, "-l", "ome.io/inferenceservice=mistral-pd")
            ours = [p for p in pods["items"] if p["metadata"]["labels"].get("component") in ("engine", "decoder")]
            return settled(got["engine"], 2) and settled(got["decoder"], 2) and len(ours) == 4 and all(
                p["spec"]["containers"][0]["image"] == image and
                p["metadata"]["labels"].get("ome.io/pairing-protocol") == token for p in ours)

        # The Services' EndpointSlices follow the pods' readiness a moment later: sampling starts once they list
        # both pairs, so a first sample taken before the EndpointSlice controller caught up is not counted as a gap.
        async def listed() -> bool:
            ready = await observe()
            return ready["engine"].get("kv-v1") == 2 and ready["decoder"].get("kv-v1") == 2

        await wait_for(listed, timeout=60, what="the EndpointSlices listing both pairs", describe=describe)
        sampler = asyncio.create_task(sample())
        async with recorded(api, "inferencereplicas", namespace, "mistral-pd-engine") as engine_history, \
                recorded(api, "inferencereplicas", namespace, "mistral-pd-decoder") as decoder_history:
            for config in ("engineConfig", "decoderConfig"):
                runtime["spec"][config]["runner"]["image"] = PD_NEW_IMAGE
            await kubectl("apply", "-f", "-", stdin=json.dumps(runtime))
            await wait_for(lambda: rolled(PD_NEW_IMAGE, "kv-v1"), timeout=240, what="the image rolled out",
                           describe=describe)
            # The new token, with the new decoders kept off every node for now: the engine must keep one engine on
            # kv-v1 (the Pairing gate) until a kv-v2 decoder is ready, or no pair of one token would be left.
            late = {"omenative-test/late": namespace[-12:].strip("-")}
            await kubectl("patch", "inferenceservice", "mistral-pd", "-n", namespace, "--type", "merge", "-p",
                          json.dumps({"spec": {"rollout": {"pairingProtocol": "kv-v2"},
                                               "decoder": {"nodeSelector": late}}}))

            async def engine_held() -> Obj | None:
                status = (await get_json(control_plane, "inferenceservice", "mistral-pd", "-n", namespace))["status"]
                hold = status["components"]["engine"]["lifecycle"].get("rolloutHold") or {}
                engine = (await replicas_of(control_plane, namespace, "mistral-pd"))["engine"]["status"]
                return hold if hold.get("gate") == "Pairing" and engine.get("updatedReadyReplicas") == 1 and \
                    engine.get("replicas") == 2 else None

            hold = await wait_for(engine_held, timeout=120, what="the last kv-v1 engine held by the Pairing gate",
                                  describe=describe)
            assert hold["reason"] == ("keeping one engine Instance on pairing protocol kv-v1 until a decoder "
                                      "Instance on kv-v2 is ready"), hold
            late_nodes = [await sim_nodes("gpu", labels=late) for _ in range(2)]
            await model_agent.downloaded(PD_MODEL, gpu + late_nodes, PD_LEARNED)
            await wait_for(lambda: rolled(PD_NEW_IMAGE, "kv-v2"), timeout=240, what="the new pairing protocol",
                           describe=describe)
        sampling = False
        await sampler
        unpaired = [s for s in samples if not any(s["engine"].get(t) and s["decoder"].get(t) for t in s["engine"])]
        assert len(samples) > 20 and unpaired == [], (len(samples), unpaired[:5])
        # Both moved together: each started moving before the other had finished (updatedReplicas in between).
        def moving(history: Any) -> list[int]:
            return [int(v["metadata"]["resourceVersion"]) for v in history.versions
                    if 0 < int((v.get("status") or {}).get("updatedReplicas") or 0) < 2]

        engine_moving, decoder_moving = moving(engine_history), moving(decoder_history)
        assert engine_moving and decoder_moving
        assert min(engine_moving) < max(decoder_moving) and min(decoder_moving) < max(engine_moving)
        status = (await get_json(control_plane, "inferenceservice", "mistral-pd", "-n", namespace))["status"]
        assert status["rollout"]["lastRun"]["outcome"] == "Completed"
    finally:
        await kubectl("delete", "inferenceservice", "mistral-pd", "-n", namespace, "--wait=false")
        await kubectl("delete", "clusterservingruntime", "srt-pd-groups", "--ignore-not-found")


PREFIX = 'admission webhook "inferenceservice.ome-webhook-server.validator" denied the request:'


async def test_every_rollout_admission_reason_through_kubectl(
    control_plane: ControlPlane, omenative: ControllerProcess, namespace: str,
) -> None:
    """Each spec of tests/support/rollout_specs.py applied with kubectl: refused with the documented prefix and its
    reason, or admitted with a warning naming it; the edits are refused against the stored object."""
    kubectl = control_plane.kubectl

    def body(name: str, spec: Obj, annotations: dict[str, str] | None = None) -> str:
        meta: Obj = {"name": name, "namespace": namespace}
        if annotations:
            meta["annotations"] = annotations
        return json.dumps({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "metadata": meta,
                           "spec": spec})

    seen: set[str] = set()
    for i, (reason, spec, notes) in enumerate(REJECTED):
        out = await kubectl("apply", "--dry-run=server", "-f", "-", stdin=body(f"bad-{i}", spec, notes),
                            check=False)
        assert out.returncode != 0 and PREFIX in out.stderr and f"({reason})" in out.stderr, (reason, out.output)
        seen.add(reason)
    for i, (reason, spec, notes) in enumerate(WARNED):
        out = await kubectl("apply", "--dry-run=server", "-f", "-", stdin=body(f"warned-{i}", spec, notes),
                            check=False)
        assert out.returncode == 0 and f"({reason})" in out.stderr, (reason, out.output)
        seen.add(reason)
    for i, (reason, old, new) in enumerate(EDITS):
        name = f"edited-{i}"
        await kubectl("apply", "-f", "-", stdin=body(name, old))
        out = await kubectl("apply", "-f", "-", stdin=body(name, new), check=False)
        assert out.returncode != 0 and PREFIX in out.stderr and f"({reason})" in out.stderr, (reason, out.output)
        seen.add(reason)
        await kubectl("delete", "inferenceservice", name, "-n", namespace, "--wait=false")
    # Every reason of the pages' tables, rejections and warnings.
    assert seen == {
        "CoordinationRequiresOMENative", "CanaryRequiresOMENative", "InvalidComponentInCoordinationGroup",
        "OrphanCoordinationGroup", "DuplicateComponentInCoordinationGroups", "GroupOrderingNotHonored",
        "SoakNotHonored", "OrderNotHonored", "InvalidRollingUpdateInteger", "InvalidRollingUpdatePercent",
        "ZeroBudgetPacingUnstartable", "RollingUpdateLockstepViolation", "PairingProtocolChangeUncoordinated",
        "RolloutPolicyRefUnsupported", "CanaryInvalid", "MultipleCanaryGroups", "InvalidDuration", "AnalysisInvalid",
        "RatioToleranceTooHigh", "RolloutTimeoutTooShort"}


async def test_a_canary_gated_by_prometheus_analysis(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    namespace: str,
) -> None:
    """A real Prometheus scrapes a metric this test sets. Passing, the analysis advances the canary to completion;
    failing, it rolls the next canary back after failureLimit samples; with Prometheus stopped, the sample is
    inconclusive and onInconclusive: Rollback rolls the third back."""
    await sim_nodes("gpu")
    describe = lambda: describe_namespace(api, namespace)  # noqa: E731
    errors = {"value": 0.0}

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text=f'canary_errors{{inferenceservice="gated"}} {errors["value"]}\n')

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        async with running_prometheus([f"127.0.0.1:{port}"]) as prometheus:
            isvc = inline_service("gated", namespace, engine=inline_component(4, image=V1))
            isvc["spec"]["rollout"] = {"groups": [{"components": ["engine"], "canary": {
                "prometheus": {"serverAddress": f"http://127.0.0.1:{prometheus.port}"},
                "steps": [{"capacity": "25%", "traffic": 10, "analysis": {
                    "interval": "1s", "failureLimit": 2, "onInconclusive": "Rollback", "metrics": [
                        {"name": "errors", "operator": "LT", "threshold": "0.5",
                         "query": 'max(canary_errors{inferenceservice="{{.ISVCName}}"})'}]}},
                    {"capacity": "100%", "traffic": 100}]}}]}
            await serve(control_plane, api, isvc, {"engine": 4})

            async def phase(wanted: str) -> Obj | None:
                got, engine = await canary_phase(control_plane, namespace, "gated")
                return engine if got == wanted else None

            async with recorded(api, "inferenceservices", namespace, "gated") as history:
                await set_images(control_plane, namespace, "gated", V2, "engine")
                await wait_for(lambda: phase("Stable"), timeout=120, what="the analysed canary completed",
                               describe=describe)
            judged = [r for v in history.versions for r in ((((v.get("status") or {}).get("components") or {})
                      .get("engine") or {}).get("canary") or {}).get("metricResults") or []]
            assert judged and all(r["passed"] and r["value"] == "0" for r in judged), judged
            assert settled((await replicas_of(control_plane, namespace, "gated"))["engine"], 4)
            # OME's canary metrics: one step advanced, one completion, the gauges back at 0, the metric's last value.
            mine = {"namespace": namespace, "isvc": "gated"}
            assert await omenative.metric("ome_canary_step_total", **mine, component="engine") == 1
            assert await omenative.metric("ome_canary_complete_total", **mine) == 1
            assert await omenative.metric("ome_canary_current_step", **mine, component="engine") == 0
            assert await omenative.metric("ome_canary_traffic_weight", **mine, component="engine") == 0
            assert await omenative.metric("ome_canary_analysis_metric_value", **mine, component="engine",
                                          metric="errors") == 0
            assert await omenative.metric("ome_canary_analysis_evaluations_total", **mine, component="engine",
                                          result="pass") >= 1

            errors["value"] = 1.0
            await wait_for(lambda: asyncio.to_thread(
                prometheus.value, 'max(canary_errors{inferenceservice="gated"})'), timeout=30,
                what="Prometheus scraped the failing value")
            async with recorded(api, "inferenceservices", namespace, "gated") as history:
                await set_images(control_plane, namespace, "gated", V3, "engine")
                engine = await wait_for(lambda: phase("RolledBack"), timeout=120,
                                        what="the failing canary rolled back", describe=describe)
            failed = [((((v.get("status") or {}).get("components") or {}).get("engine") or {}).get("canary") or {})
                      .get("analysisFailedChecks") for v in history.versions]
            assert max(f or 0 for f in failed) == 2, failed  # rolled back at failureLimit, not before
            assert await omenative.metric("ome_canary_rollback_total", namespace=namespace, isvc="gated",
                                          component="engine", cause="analysis") == 1
            assert await omenative.metric("ome_canary_analysis_metric_value", namespace=namespace, isvc="gated",
                                          component="engine", metric="errors") == 1
            assert await omenative.metric("ome_canary_analysis_failed_checks", namespace=namespace, isvc="gated",
                                          component="engine") == 2
            assert engine["canary"]["rolledBackRevisionHash"] == engine["canary"]["canaryRevisionHash"]
        # Prometheus is gone: the next canary's first sample is inconclusive, and onInconclusive rolls it back.
        errors["value"] = 0.0
        await set_images(control_plane, namespace, "gated", V1, "engine")
        engine = await wait_for(lambda: phase("RolledBack"), timeout=120, what="the unjudgeable canary rolled back",
                                describe=describe)
        (result,) = engine["canary"]["metricResults"]
        assert result["passed"] is False and result["message"].startswith("query failed"), result
        pods = await get_json(control_plane, "pods", "-n", namespace, "-l", "ome.io/inferenceservice=gated")
        assert {c["image"] for p in pods["items"] for c in p["spec"]["containers"]} == {V2}
    finally:
        await runner.cleanup()


async def test_a_drifted_plan_is_repinned_and_explain_history_validate_show_the_run(
    control_plane: ControlPlane, api: client.ApiClient, omenative: ControllerProcess, sim_nodes: NodeFactory,
    namespace: str,
) -> None:
    kubectl = control_plane.kubectl
    await sim_nodes("gpu")
    isvc = inline_service("drift", namespace, engine=inline_component(4, image=V1))
    steps = [{"capacity": "25%", "traffic": 10, "pause": {}}, {"capacity": "100%", "traffic": 100}]
    isvc["spec"]["rollout"] = {"groups": [{"components": ["engine"], "canary": {"steps": steps}}]}
    await serve(control_plane, api, isvc, {"engine": 4})
    describe = lambda: describe_namespace(api, namespace)  # noqa: E731
    await set_images(control_plane, namespace, "drift", V2, "engine")

    async def at(phase: str) -> Obj | None:
        got, engine = await canary_phase(control_plane, namespace, "drift")
        return engine if got == phase else None

    await wait_for(lambda: at("Paused"), timeout=120, what="the canary at its gate", describe=describe)
    edited = json.loads(json.dumps(isvc["spec"]["rollout"]))
    edited["groups"][0]["canary"]["steps"][0]["traffic"] = 20
    await kubectl("patch", "inferenceservice", "drift", "-n", namespace, "--type", "merge", "-p",
                  json.dumps({"spec": {"rollout": edited}}))

    async def drift_is(value: str) -> bool:
        out = await kubectl("ome", "rollout", "explain", "drift", "-n", namespace)
        return any(line.split()[:2] == ["DRIFT", value] for line in out.stdout.splitlines())

    await wait_for(lambda: drift_is("True/SpecNewerThanRun;"), timeout=60, what="DRIFT shown", describe=describe)
    history = await kubectl("ome", "rollout", "history", "drift", "-n", namespace)
    kinds = [line.split()[0] for line in history.stdout.splitlines()[1:]]
    assert {"WINDOW", "CURR", "ACTIVE", "TARGET", "PROV-A", "PROV-C", "REV"} <= set(kinds), history.stdout
    validated = await kubectl("ome", "rollout", "validate", "drift", "-n", namespace, check=False)
    assert validated.returncode == 2 and "ROLLOUT-PLAN      -      Valid" in validated.stdout, validated.output
    assert validated.stderr.strip() == "error: rollout validation could not verify all prerequisites"

    for _ in range(10):  # exit 3: the status moved between the preview and the patch; read again, run again
        repinned = await kubectl("ome", "rollout", "repin", "drift", "-n", namespace, "--yes", check=False)
        if repinned.returncode != 3:
            break
    assert repinned.returncode == 0 and "applied                 Yes" in repinned.stdout, repinned.output
    await wait_for(lambda: drift_is("False/InSync;"), timeout=60, what="the run on the current plan",
                   describe=describe)
    messages = await control_plane.event_messages(namespace, "RolloutPlanRepinned")
    assert len(messages) == 1, messages
    again = await kubectl("ome", "rollout", "repin", "drift", "-n", namespace, "--yes", check=False)
    assert again.returncode == 1 and again.stderr.strip() == (
        "error: rollout repin refused: the current plan is already pinned"), again.output
    # The new step raises the traffic weight: the canary holds before it (CanaryPreStep) until a promote.
    explained = await kubectl("ome", "rollout", "explain", "drift", "-n", namespace)
    assert "CanaryPreStep" in explained.stdout, explained.stdout
    engine = await wait_for(lambda: at("Paused"), timeout=30, what="the canary held", describe=describe)
    assert engine["canary"]["observedTrafficWeight"] == 10 and engine["canary"]["preStepHold"] is True
    refused = await kubectl("ome", "rollout", "promote", "drift", "-n", namespace, "--yes", check=False)
    assert refused.returncode == 1 and "promote requires an active indefinite manual gate" in refused.stderr
    await kubectl("annotate", "inferenceservice", "drift", "-n", namespace,
                  f"ome.io/rollout-promote={engine['canary']['canaryRevisionHash']}")

    async def released() -> Obj | None:
        engine = await at("Paused")
        return engine if engine and not engine["canary"].get("preStepHold") else None

    engine = await wait_for(released, timeout=30, what="the hold released", describe=describe)
    assert engine["canary"]["observedTrafficWeight"] == 20 and engine["canary"]["currentStep"] == 0
