"""The InferenceReplica controller: observe the replica and its pods, plan the Instances' rows, write the status
once per pass, and keep the revision's ControllerRevision."""

from __future__ import annotations

from typing import Any

import structlog

from omenative.api import constants as c
from omenative.api import naming
from omenative.api.conditions import settle
from omenative.api.defaults import RECREATE, SURGE_THEN_DRAIN, ready_timeout
from omenative.api.instance_status import encode_rows
from omenative.api.units import optional_duration
from omenative.controllers.context import BY_ISVC, BY_REPLICA, Context
from omenative.controllers.inferencereplica import plan as planner
from omenative.kube.client import JSON_PATCH, ApiError
from omenative.kube.controller import Result, split_key
from omenative.kube.resources import CONTROLLER_REVISIONS, INFERENCE_REPLICAS, INFERENCE_SERVICES, PODS
from omenative.observe.pods import PodFacts, parse_time, pod_facts
from omenative.render import objects
from omenative.render.pods import pod_count

log = structlog.get_logger(__name__)
Obj = dict[str, Any]


def desired_replicas(ir: Obj) -> int:
    replicas = (ir.get("spec") or {}).get("replicas")
    return int(replicas) if replicas else 1  # nil or 0 runs one Instance


def label_selector(isvc: str, component: str) -> str:
    return objects.label_selector_string(objects.pod_selector(isvc, component))


class InferenceReplicaController:
    name = "inferencereplica"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def reconcile(self, key: str) -> Result | None:
        ctx = self.ctx
        namespace, name = split_key(key)
        ir = ctx.get(INFERENCE_REPLICAS, namespace, name)
        if ir is None:
            return None  # its pods go with it (owner references)
        deleting = bool(ir["metadata"].get("deletionTimestamp"))
        if deleting and c.FINALIZER_DRAIN not in (ir["metadata"].get("finalizers") or []):
            return None
        spec: Obj = ir.get("spec") or {}
        runners: list[Obj] = spec.get("runners") or []
        if not runners:
            if deleting:
                await self._release(ir)
            return None  # only the bootstrap so far: the InferenceService controller's apply follows
        isvc = (spec.get("parentRef") or {}).get("name") or name
        component = spec.get("component") or c.ENGINE
        revision = objects.revision_hash(runners, spec.get("pairingProtocol"),
                                         int((ir.get("status") or {}).get("collisionCount") or 0))
        if not deleting:
            await self._ensure_revision(ir, isvc, component, revision, runners)

        pods: dict[int, list[PodFacts]] = {}
        for pod in ctx.by_index(PODS, BY_REPLICA, key):
            facts = pod_facts(pod)
            index = (pod["metadata"].get("labels") or {}).get(c.LABEL_INSTANCE_INDEX)
            if index is not None and index.isdigit():
                pods.setdefault(int(index), []).append(facts)
        lifecycle: Obj = spec.get("lifecycle") or {}
        rolling = ((lifecycle.get("updateStrategy") or {}).get("rollingUpdate")) or {}
        multi = any(r.get("name") == c.RUNNER_LEADER for r in runners)
        crd = ctx.podgroup_crd_installed()
        view = planner.ReplicaView(
            component=component,
            replicas=desired_replicas(ir),
            pods_per_instance=pod_count(runners),
            update_revision=revision,
            restart_policy=lifecycle.get("restartPolicy") or (RECREATE if multi else "None"),
            ready_timeout=ready_timeout(lifecycle, ctx.config),
            min_ready_seconds=int(spec.get("minReadySeconds") or 0),
            max_unavailable=rolling.get("maxUnavailable"),
            multi_pod=multi,
            podgroup_crd=crd,
            rows=list(ctx.rows.of(ir).values()),
            pods=pods,
            now=ctx.wall_clock(),
            config=ctx.config,
            deleting=deleting,
            update_strategy=((lifecycle.get("updateStrategy") or {}).get("type")) or SURGE_THEN_DRAIN,
            max_surge=rolling.get("maxSurge", ctx.config.max_surge),
        )
        result = planner.plan(view)

        parent = ctx.get(INFERENCE_SERVICES, namespace, isvc) or ir
        for event in result.events:
            ctx.events.event(parent, event.type, event.reason, event.message)
        old_status: Obj = ir.get("status") or {}
        status: Obj = {
            "observedGeneration": ir["metadata"].get("generation"),
            "replicas": result.counts.replicas,
            "readyReplicas": result.counts.ready,
            "servingReplicas": result.counts.serving,
            "availableReplicas": result.counts.available,
            "updatedReplicas": result.counts.updated,
            "updatedReadyReplicas": result.counts.updated_ready,
            "currentRevision": naming.revision_name(isvc, component, result.current_revision),
            "updateRevision": naming.revision_name(isvc, component, revision),
            "labelSelector": label_selector(isvc, component),
            "conditions": settle([cond.to_dict() for cond in result.conditions], old_status.get("conditions")),
            **encode_rows(result.rows),
        }
        if old_status.get("collisionCount"):
            status["collisionCount"] = old_status["collisionCount"]
        await ctx.applier.apply_status(INFERENCE_REPLICAS, name, namespace, status)
        if deleting:
            return await self._finish_teardown(ir, pods)
        return Result(requeue_after=result.wake_in + 0.5) if result.wake_in is not None else None

    async def _finish_teardown(self, ir: Obj, pods: dict[int, list[PodFacts]]) -> Result | None:
        """Lets a deleted replica go once its pods drained and are gone (or when the teardown deadline passed)."""
        if not pods:
            await self._release(ir)
            return None
        since = parse_time(ir["metadata"].get("deletionTimestamp"))
        deadline = optional_duration(self.ctx.config.teardown_deadline)
        if since is not None and deadline is not None:
            remaining = since + deadline - self.ctx.wall_clock()
            if remaining <= 0:
                log.warning("teardown deadline passed; letting the pods go with the InferenceReplica",
                            pods=sum(len(p) for p in pods.values()))
                await self._release(ir)
                return None
            return Result(requeue_after=min(remaining, 60.0))
        return None

    async def _release(self, ir: Obj) -> None:
        finalizers = ir["metadata"].get("finalizers") or []
        if c.FINALIZER_DRAIN not in finalizers:
            return
        at = finalizers.index(c.FINALIZER_DRAIN)
        patch = [{"op": "test", "path": f"/metadata/finalizers/{at}", "value": c.FINALIZER_DRAIN},
                 {"op": "remove", "path": f"/metadata/finalizers/{at}"}]
        try:
            await self.ctx.client.patch(INFERENCE_REPLICAS, ir["metadata"]["name"], patch, ir["metadata"]["namespace"],
                                        content_type=JSON_PATCH)
        except ApiError as exc:
            if not (exc.not_found or exc.status == 422):  # gone, or the list changed: the next pass sees it
                raise

    async def _ensure_revision(self, ir: Obj, isvc: str, component: str, revision: str, runners: list[Obj]) -> None:
        """A ControllerRevision per version of the runners, so Instances on an older revision can be rendered."""
        ctx = self.ctx
        namespace = ir["metadata"]["namespace"]
        if ctx.get(CONTROLLER_REVISIONS, namespace, naming.revision_name(isvc, component, revision)) is not None:
            return
        siblings = [r for r in ctx.by_index(CONTROLLER_REVISIONS, BY_ISVC, f"{namespace}/{isvc}")
                    if (r["metadata"].get("labels") or {}).get(c.LABEL_COMPONENT) == component]
        number = max((int(r.get("revision") or 0) for r in siblings), default=0) + 1
        body = objects.controller_revision(isvc=isvc, namespace=namespace, component=component,
                                           owner=objects.owner_reference(ir), revision=revision, number=number,
                                           runners=runners)
        await ctx.applier.create(CONTROLLER_REVISIONS, body)
