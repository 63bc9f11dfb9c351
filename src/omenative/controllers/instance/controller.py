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
from omenative.api import naming
from omenative.api.defaults import gang_schedule_timeout, ready_timeout
from omenative.api.types import MigrationStatus
from omenative.controllers.context import BY_INSTANCE, Context
from omenative.controllers.inferencereplica import migration
from omenative.controllers.instance import plan as planner
from omenative.kube.controller import Result
from omenative.kube.expectations import expected
from omenative.kube.gather import gather_all
from omenative.kube.resources import (
    CONTROLLER_REVISIONS,
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    PODGROUPS,
    PODS,
    Resource,
)
from omenative.observe.pods import format_time, parse_time
from omenative.render import objects
from omenative.render.pods import InstanceRef, pod_count

log = structlog.get_logger(__name__)
Obj = dict[str, Any]


def scheduler_name(runners: list[Obj]) -> str:
    """The scheduler the Instance's pods use ("" for the default one)."""
    return str(next((((r.get("template") or {}).get("spec") or {}).get("schedulerName") or "" for r in runners), ""))


def split_instance_key(key: str) -> tuple[str, str, int]:
    namespace, replica, index = key.split("/")
    return namespace, replica, int(index)


class InstanceController:
    name = "instance"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def runners_for(self, ir: Obj, isvc: str, component: str, revision: str | None) -> list[Obj] | None:
        spec = ir.get("spec") or {}
        runners: list[Obj] = spec.get("runners") or []
        if not revision or revision == self.ctx.revisions.of(ir):
            return runners or None
        stored = self.ctx.get(CONTROLLER_REVISIONS, ir["metadata"]["namespace"],
                              naming.revision_name(isvc, component, revision))
        return ((stored or {}).get("data") or {}).get("runners")

    async def reconcile(self, key: str) -> Result | None:
        ctx = self.ctx
        namespace, replica, index = split_instance_key(key)
        ir = ctx.get(INFERENCE_REPLICAS, namespace, replica)
        if ir is None:
            ctx.expectations.forget(key)
            return None
        row = ctx.rows.of(ir).get(index)
        if row is None:
            # Pods without a row are adopted by the InferenceReplica controller, never deleted here; a PodGroup left
            # by an Instance that is gone (no row, no pod) is deleted.
            await self.delete_leftover_podgroup(key, ir)
            return None
        if not ctx.expectations.satisfied(key):
            return None  # our last creates or deletes have not shown up yet; their events bring us back
        spec: Obj = ir.get("spec") or {}
        isvc = (spec.get("parentRef") or {}).get("name") or replica
        component = spec.get("component") or c.ENGINE
        runners = self.runners_for(ir, isvc, component, row.target_revision)
        multi = runners is not None and any(r.get("name") == c.RUNNER_LEADER for r in runners)
        gang = multi and ctx.podgroup_crd_installed()
        podgroup_name = naming.podgroup_name(isvc, component, index) if gang else None
        owner = objects.owner_reference(ir)
        avoid, prefer = migration.placement(
            [MigrationStatus.from_dict(m) for m in (ir.get("status") or {}).get("migrations") or []
             if isinstance(m, dict)], index)
        ref = InstanceRef(isvc=isvc, namespace=namespace, component=component, index=index,
                          incarnation=row.incarnation or 1, revision=row.target_revision or "",
                          replicas=int(spec.get("replicas") or 1), podgroup=podgroup_name, owner=owner,
                          avoid_nodes=avoid, prefer_nodes=prefer)
        if gang and not ctx.podgroups_cached():
            return Result(requeue_after=1.0)  # the PodGroup cache is starting: pods wait for their PodGroup
        intent = None
        if gang and runners is not None:
            timeout = ready_timeout(spec.get("lifecycle") or {}, ctx.config)
            intent = objects.pod_group(
                isvc=isvc, namespace=namespace, component=component, index=index, owner=owner,
                min_member=pod_count(runners), schedule_timeout=gang_schedule_timeout(timeout, ctx.config),
                topology_key=spec.get("topologyKey"))
        pods = ctx.by_index(PODS, BY_INSTANCE, key)
        view = planner.InstanceView(
            ref=ref, phase=row.phase or "", runners=runners, pods=pods,
            podgroup=ctx.get(PODGROUPS, namespace, podgroup_name) if podgroup_name else None,
            podgroup_intent=intent, owner_uid=ir["metadata"]["uid"],
            scheduler_name=scheduler_name(runners) if runners is not None else None,
            routed=ctx.routed_pods(namespace, isvc, {p["metadata"]["name"] for p in pods}),
            drain_deadline=parse_time(row.operation.deadline) if row.operation else None,
            now=ctx.wall_clock(), force_delete=ctx.force_delete(),
            nodes=ctx.node_health({n for p in pods if (n := (p.get("spec") or {}).get("nodeName"))}))
        actions = planner.plan(view)
        await self.execute(key, ir, actions)
        return Result(requeue_after=actions.wake_in + 0.5) if actions.wake_in is not None else None

    async def delete_leftover_podgroup(self, key: str, ir: Obj) -> None:
        ctx = self.ctx
        if ctx.by_index(PODS, BY_INSTANCE, key) or not ctx.caches.has(PODGROUPS):
            return
        namespace, _, index = split_instance_key(key)
        spec: Obj = ir.get("spec") or {}
        isvc = (spec.get("parentRef") or {}).get("name") or ir["metadata"]["name"]
        podgroup = ctx.get(PODGROUPS, namespace, naming.podgroup_name(isvc, spec.get("component") or c.ENGINE, index))
        if podgroup is not None and not podgroup["metadata"].get("deletionTimestamp") and \
                planner.owned_by(podgroup, ir["metadata"]["uid"]):
            await self.delete_expected(key, PODGROUPS, [podgroup])

    async def delete_expected(self, key: str, resource: Resource, objs: list[Obj]) -> None:
        """Deletes each once: the cache shows an object until its delete event arrives, and a pass before that (a
        PodGroup's leftover pass runs whatever the expectations) would delete it again, a 404 and a wasted request."""
        ctx = self.ctx
        pending = ctx.expectations.pending(key)[1]
        wanted = {uid: obj for obj in objs if (uid := obj["metadata"].get("uid", "")) not in pending}
        ctx.expectations.expect_deletions(key, list(wanted))
        await gather_all([expected(ctx.applier.delete(resource, obj), partial(
            ctx.expectations.deletion_observed, key, uid)) for uid, obj in wanted.items()])

    async def execute(self, key: str, ir: Obj, actions: planner.InstanceActions) -> None:
        ctx = self.ctx
        namespace = ir["metadata"]["namespace"]
        parent = ctx.get(INFERENCE_SERVICES, namespace, (ir.get("spec") or {}).get("parentRef", {}).get("name", "")) \
            or ir
        for event in actions.events:
            ctx.events.event(parent, event.type, event.reason, event.message)
        for pod in actions.force_delete_pods:
            await ctx.applier.delete(PODS, pod, grace_period_seconds=0)
        if actions.delete_podgroup is not None:
            await self.delete_expected(key, PODGROUPS, [actions.delete_podgroup])
        if actions.apply_podgroup is not None:
            await ctx.applier.apply(PODGROUPS, actions.apply_podgroup)
        await gather_all([self.set_gate(pod, value, reason) for pod, value, reason in actions.gates])
        # A gang's pods are created (or deleted) together: they are scheduled together anyway.
        if actions.delete_pods:
            await self.delete_expected(key, PODS, list(actions.delete_pods))
        if actions.create_pods:
            ctx.expectations.expect_creations(key, [p["metadata"]["name"] for p in actions.create_pods])
            await gather_all([expected(ctx.applier.create(PODS, pod), partial(
                ctx.expectations.creation_observed, key, pod["metadata"]["name"])) for pod in actions.create_pods])

    async def set_gate(self, pod: Obj, value: bool, reason: str) -> None:
        meta = pod["metadata"]
        status = "True" if value else "False"
        message = "in rotation: every pod of the Instance is ready" if value else "out of rotation: draining"
        # The UID pins the write to this pod: a gate meant for an old incarnation never lands on its successor of
        # the same name.
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
                "status": {"conditions": [{"type": c.SERVING_GATE, "status": status, "reason": reason,
                                           "message": message,
                                           "lastTransitionTime": format_time(self.ctx.wall_clock())}]}}
        await self.ctx.applier.apply_partial_status(PODS, body, f"{meta['uid']}:{c.SERVING_GATE}={status}:{reason}")
