"""The Instance controller: make one Instance's PodGroup and pods match its row, and hold its gang's serving gate.

Key: `{namespace}/{replica}/{index}`. Writes only pods, pod status (the `ome.io/serving` condition) and PodGroups;
the InferenceReplica's status belongs to the InferenceReplica controller. Expectations keep a lagging cache from
causing a second create or delete of the same pod.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import structlog

from omenative.api import constants as c
from omenative.api import migration_request, naming, slots, standalone
from omenative.api.defaults import gang_schedule_timeout, ready_timeout
from omenative.api.phases import CREATING_PHASES, FAILED
from omenative.api.rollout import paired_revision, pairing_of, peers_of
from omenative.api.times import format_time, parse_time
from omenative.api.types import MigrationStatus
from omenative.controllers.context import Reads, Writes, revision_pairing, revision_runners
from omenative.controllers.instance import plan as planner
from omenative.controllers.refusals import Refusals
from omenative.controllers.watches import BY_INSTANCE, PodsOf
from omenative.kube.client import ApiError
from omenative.kube.controller import Result
from omenative.kube.expectations import expected
from omenative.kube.gather import gather_all
from omenative.kube.resources import PODS, Resource
from omenative.obj import Obj
from omenative.observe.refusals import LASTING, PODGROUP_OWNERSHIP_CONFLICT, Refusal, classify
from omenative.ome_resources import INFERENCE_REPLICAS, INFERENCE_SERVICES, PODGROUPS
from omenative.render import objects
from omenative.render.in_place import IN_PLACE_STEP, mark_not_ready
from omenative.render.pods import InstanceRef, pod_count, spread_of

log = structlog.get_logger(__name__)
# A create refused for a cause that clears by itself (quota) is tried again after this long at first, then after
# half the time the refusal has stood, up to the maximum: a quota freed a minute later is noticed within seconds,
# one that stays full costs one refused request per Instance every half minute.
REFUSED_RETRY_MIN, REFUSED_RETRY_MAX = 2.0, 30.0


def scheduler_name(runners: list[Obj]) -> str:
    """The scheduler the Instance's pods use ("" for the default one)."""
    return str(next((((r.get("template") or {}).get("spec") or {}).get("schedulerName") or "" for r in runners), ""))


def split_instance_key(key: str) -> tuple[str, str, int]:
    namespace, replica, index = key.split("/")
    return namespace, replica, int(index)


class InstanceController:
    name = "instance"

    def __init__(self, reads: Reads, writes: Writes) -> None:
        self.reads = reads
        self.writes = writes

    async def reconcile(self, key: str) -> Result | None:
        reads, writes = self.reads, self.writes
        namespace, replica, index = split_instance_key(key)
        ir = reads.get(INFERENCE_REPLICAS, namespace, replica)
        if ir is None:
            writes.expectations.forget(PodsOf(key))
            return None
        row = reads.rows.of(ir).get(index)
        if row is None:
            # Pods without a row are adopted by the InferenceReplica controller, never deleted here; a PodGroup left
            # by an Instance that is gone (no row, no pod) is deleted.
            writes.refusals.clear(key)
            await self.delete_leftover_podgroup(key, ir)
            return None
        if not writes.expectations.satisfied(PodsOf(key)):
            return None  # our last creates or deletes have not shown up yet; their events bring us back
        spec: Obj = ir.get("spec") or {}
        isvc = (spec.get("parentRef") or {}).get("name") or replica
        component = spec.get("component") or c.ENGINE
        runners = revision_runners(reads, ir, isvc, component, row.target_revision)
        if runners is None and row.phase in CREATING_PHASES:
            # The revision's ControllerRevision is being written (a standalone replica rendered from its runtime
            # keeps its runners only there): look again shortly rather than wait for an unrelated event.
            return Result(requeue_after=1.0)
        multi = runners is not None and any(r.get("name") == c.RUNNER_LEADER for r in runners)
        gang = multi and reads.podgroup_crd_installed()
        podgroup_name = naming.podgroup_name(isvc, component, index) if gang else None
        owner = objects.owner_reference(ir)
        avoid, prefer = migration_request.placement(
            [MigrationStatus.from_dict(m) for m in (ir.get("status") or {}).get("migrations") or []
             if isinstance(m, dict)], index)
        ref = InstanceRef(isvc=isvc, namespace=namespace, component=component, index=index,
                          incarnation=row.incarnation or 1, revision=row.target_revision or "",
                          replicas=int(spec.get("replicas") or 1), podgroup=podgroup_name, owner=owner,
                          avoid_nodes=avoid, prefer_nodes=prefer,
                          spread=spread_of(spec, multi), ordinal=slots.target_ordinal(row),
                          **self.peer_endpoints(ir, isvc, component, runners))
        if gang and not reads.podgroups_cached():
            return Result(requeue_after=1.0)  # the PodGroup cache is starting: pods wait for their PodGroup
        intent = None
        gang_timeout = gang_schedule_timeout(ready_timeout(spec.get("lifecycle") or {}, reads.config), reads.config)
        if gang and runners is not None:
            intent = objects.pod_group(
                isvc=isvc, namespace=namespace, component=component, index=index, owner=owner,
                min_member=pod_count(runners), schedule_timeout=gang_timeout,
                topology_key=spec.get("topologyKey"))
        refusal = writes.refusals.of(key)
        if refusal is not None and (row.phase not in CREATING_PHASES or refusal.incarnation != ref.incarnation):
            # The attempt it refused is over (failed, replaced, removed): it says nothing about this one.
            await self.refusal_cleared(key, ir)
            refusal = None
        pods = reads.by_index(PODS, BY_INSTANCE, key)
        view = planner.InstanceView(
            ref=ref, phase=row.phase or "", runners=runners, pods=pods,
            podgroup=reads.get(PODGROUPS, namespace, podgroup_name) if podgroup_name else None,
            podgroup_intent=intent, owner_uid=ir["metadata"]["uid"],
            scheduler_name=scheduler_name(runners) if runners is not None else None,
            routed=reads.routed_pods(namespace, isvc, {p["metadata"]["name"] for p in pods}),
            drain_deadline=parse_time(row.operation.deadline) if row.operation else None,
            now=reads.wall_clock(), force_delete=reads.force_delete(),
            nodes=reads.node_health({n for p in pods if (n := (p.get("spec") or {}).get("nodeName"))}),
            refused_since=refusal.since if refusal is not None and not refusal.lasting else None,
            gang_timeout=float(gang_timeout) if multi and gang_timeout else None,
            in_place=row.operation is not None and row.operation.step == IN_PLACE_STEP,
            mark_not_ready=mark_not_ready(spec),
            replace_lost=row.phase == FAILED and row.operation is not None and row.operation.type == "Restart",
            keep_ordinal=slots.source_ordinal(row))
        actions = planner.plan(view)
        if actions.release_gang:
            await self.refusal_cleared(key, ir)  # the next attempt starts the gang's wait over
        refused = await self.execute(key, ir, actions, ref.incarnation)
        wakes = [actions.wake_in + 0.5] if actions.wake_in is not None else []
        if refused is not None and not refused.lasting:
            wakes.append(min(max(REFUSED_RETRY_MIN, (refused.at - refused.since) / 2), REFUSED_RETRY_MAX))
        return Result(requeue_after=min(wakes)) if wakes else None

    async def delete_leftover_podgroup(self, key: str, ir: Obj) -> None:
        reads = self.reads
        if reads.by_index(PODS, BY_INSTANCE, key) or not reads.has(PODGROUPS):
            return
        namespace, _, index = split_instance_key(key)
        spec: Obj = ir.get("spec") or {}
        isvc = (spec.get("parentRef") or {}).get("name") or ir["metadata"]["name"]
        podgroup = reads.get(PODGROUPS, namespace, naming.podgroup_name(isvc, spec.get("component") or c.ENGINE, index))
        if podgroup is not None and not podgroup["metadata"].get("deletionTimestamp") and \
                planner.owned_by(podgroup, ir["metadata"]["uid"]):
            await self.delete_expected(key, PODGROUPS, [podgroup])

    async def delete_expected(self, key: str, resource: Resource, objs: list[Obj]) -> None:
        """Deletes each once: the cache shows an object until its delete event arrives, and a pass before that (a
        PodGroup's leftover pass runs whatever the expectations) would delete it again, a 404 and a wasted request."""
        writes = self.writes
        pending = writes.expectations.pending(PodsOf(key))[1]
        wanted = {uid: obj for obj in objs if (uid := obj["metadata"].get("uid", "")) not in pending}
        writes.expectations.expect_deletions(PodsOf(key), list(wanted))
        await gather_all([expected(writes.applier.delete(resource, obj), partial(
            writes.expectations.deletion_observed, PodsOf(key), uid)) for uid, obj in wanted.items()])

    async def refusal_cleared(self, key: str, ir: Obj) -> None:
        """The Instance's writes go through again: its replica is told, so its row stops waiting."""
        if self.writes.refusals.clear(key):
            self.writes.wake("inferencereplica", Refusals.replica_of(key))

    def peer_endpoints(self, ir: Obj, isvc: str, component: str, runners: list[Obj] | None) -> dict[str, Any]:
        """What a new pod of a rollout group learns about its peers (OME's deployment-modes page): each other
        component's Service, and the revision of it that this pod's revision pairs with (the peer's newest, else
        its current one). A standalone replica has no peers."""
        if not standalone.projected(ir):
            return {}
        namespace = ir["metadata"]["namespace"]
        peers = peers_of((self.reads.get(INFERENCE_SERVICES, namespace, isvc) or {}).get("spec"), component)
        own = pairing_of(runners)
        paired = []
        for peer in peers:
            peer_ir = self.reads.get(INFERENCE_REPLICAS, namespace, naming.replica_name(isvc, peer)) or {}
            candidates: list[tuple[str, str | None]] = []
            # The peer's newest revision, from its spec (as its own controller derives it, so a first pod pairs
            # before the peer has written any status), then the revision most of its Instances run.
            peer_runners = (peer_ir.get("spec") or {}).get("runners")
            if peer_runners:
                candidates.append((self.reads.revisions.of(peer_ir), pairing_of(peer_runners)))
            current = naming.revision_hash_of(isvc, peer, (peer_ir.get("status") or {}).get("currentRevision"))
            if current:
                candidates.append((current, revision_pairing(self.reads, namespace, isvc, peer, current)))
            revision = paired_revision(own, [(r, p) for r, p in candidates if len(
                naming.revision_headless_service_name(isvc, peer, r)) <= naming.MAX_DNS_LABEL])  # else no Services
            if revision:
                paired.append((peer, revision))
        return {"peers": peers, "peer_revisions": tuple(paired)}

    def refused(self, key: str, ir: Obj, obj: Obj, exc: ApiError, cause: str, incarnation: int) -> Refusal:
        """Records a refused create: the replica's row names it within one pass (the replica is woken), and each
        distinct cause is announced once as a FailedCreate event on the replica, in the API server's own words, as
        the ReplicaSet controller does."""
        reads, writes = self.reads, self.writes
        now = reads.wall_clock()
        refusal = writes.refusals.record(key, Refusal(
            cause=cause, verb="create", kind=str(obj.get("kind") or "Pod"), name=obj["metadata"]["name"],
            message=exc.message, at=now, since=now, incarnation=incarnation))
        if writes.refusals.announce(key, refusal):
            writes.events.event(ir, "Warning", "FailedCreate", f"Error creating: {exc.message}")
        log.info("create refused", instance=key, cause=cause, kind=refusal.kind, name=refusal.name,
                 message=exc.message)
        writes.wake("inferencereplica", Refusals.replica_of(key))
        return refusal

    async def execute(self, key: str, ir: Obj, actions: planner.InstanceActions,
                      incarnation: int) -> Refusal | None:
        """Carries the actions out; returns the refusal of a create the API server would not make, if any."""
        reads, writes = self.reads, self.writes
        refusals: list[tuple[Obj, ApiError, str]] = []

        async def create(resource: Resource, obj: Obj) -> bool:
            try:
                if resource is PODGROUPS:
                    await writes.applier.apply(PODGROUPS, obj)
                    return True
                return await writes.applier.create(resource, obj)
            except ApiError as exc:
                cause = classify(exc.status, exc.reason, exc.message)
                if cause is None:
                    raise  # not a refusal (throttled, unavailable): the queue's backoff retries it
                refusals.append(({"kind": resource.kind, **obj}, exc, cause))
                return False  # nothing was made: no event will come for it

        namespace = ir["metadata"]["namespace"]
        parent = reads.get(INFERENCE_SERVICES, namespace, (ir.get("spec") or {}).get("parentRef", {}).get("name", "")) \
            or ir
        for event in actions.events:
            writes.events.event(parent, event.type, event.reason, event.message)
        for pod in actions.force_delete_pods:
            await writes.applier.delete(PODS, pod, grace_period_seconds=0)
        if actions.delete_podgroup is not None:
            await self.delete_expected(key, PODGROUPS, [actions.delete_podgroup])
        if actions.apply_podgroup is not None:
            await create(PODGROUPS, actions.apply_podgroup)
        await gather_all([self.set_gate(pod, value, reason) for pod, value, reason in actions.gates])
        await gather_all([self.patch_in_place(ir, pod, patch) for pod, patch in actions.patch_pods])
        # A gang's pods are created (or deleted) together: they are scheduled together anyway.
        if actions.delete_pods:
            await self.delete_expected(key, PODS, list(actions.delete_pods))
        if actions.create_pods:
            pods_of = PodsOf(key)
            writes.expectations.expect_creations(pods_of, [p["metadata"]["name"] for p in actions.create_pods])
            observed = writes.expectations.creation_observed
            await gather_all([expected(create(PODS, pod), partial(observed, pods_of, pod["metadata"]["name"]))
                              for pod in actions.create_pods])
        if actions.conflict is not None:
            # Not a write the API refused, but as lasting: the replica fails the Instance with the cause named.
            now = reads.wall_clock()
            refusal = writes.refusals.record(key, Refusal(
                cause=PODGROUP_OWNERSHIP_CONFLICT, verb="create", kind="PodGroup", name=actions.conflict,
                message=f"PodGroup {actions.conflict} belongs to another owner", at=now, since=now,
                incarnation=incarnation))
            writes.wake("inferencereplica", Refusals.replica_of(key))
            return refusal
        if refusals:
            # A lasting cause wins: it fails the Instance, where a quota only holds it.
            obj, exc, cause = min(refusals, key=lambda r: r[2] not in LASTING)
            return self.refused(key, ir, obj, exc, cause, incarnation)
        if actions.create_pods or actions.apply_podgroup is not None:
            await self.refusal_cleared(key, ir)
        return None

    async def patch_in_place(self, ir: Obj, pod: Obj, patch: Obj) -> None:
        """Sets new images on a pod. A refusal (an admission webhook, Pod Security, RBAC) is told as a FailedUpdate
        event on the replica; the Instance's readiness deadline then fails it, and its rebuild recreates the pod."""
        try:
            await self.writes.applier.strategic_patch(PODS, pod, patch)
        except ApiError as exc:
            if classify(exc.status, exc.reason, exc.message) is None:
                raise  # not a refusal (throttled, unavailable): the queue's backoff retries it
            self.writes.events.event(ir, "Warning", "FailedUpdate",
                                     f"Error updating pod {pod['metadata']['name']} in place: {exc.message}")
            log.info("in-place update refused", pod=pod["metadata"]["name"], message=exc.message)

    async def set_gate(self, pod: Obj, value: bool, reason: str) -> None:
        meta = pod["metadata"]
        status = "True" if value else "False"
        message = "in rotation: every pod of the Instance is ready" if value else \
            "out of rotation: its containers take new images in place" if reason == "InPlaceUpdate" else \
            "out of rotation: draining"
        # The UID pins the write to this pod: a gate meant for an old incarnation never lands on its successor of
        # the same name.
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
                "status": {"conditions": [{"type": c.SERVING_GATE, "status": status, "reason": reason,
                                           "message": message,
                                           "lastTransitionTime": format_time(self.reads.wall_clock())}]}}
        await self.writes.applier.apply_partial_status(PODS, body, f"{meta['uid']}:{c.SERVING_GATE}={status}:{reason}")
