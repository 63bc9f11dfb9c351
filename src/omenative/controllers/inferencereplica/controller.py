"""The InferenceReplica controller: observe the replica and its pods, plan the Instances' rows, write the status
once per pass, and keep the revision's ControllerRevision."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import structlog

from omenative.api import constants as c
from omenative.api import migration_request, naming, standalone
from omenative.api.conditions import settle
from omenative.api.defaults import (
    IN_PLACE_STRATEGIES,
    RECREATE,
    SURGE_THEN_DRAIN,
    effective_partition,
    ready_timeout,
)
from omenative.api.instance_status import encode_rows, progress_only
from omenative.api.readiness import desired_instances
from omenative.api.rollout import pairing_of, pinned_revisions
from omenative.api.selection import incompatibility
from omenative.api.times import parse_time
from omenative.api.traffic import replica_traffic
from omenative.api.types import MigrationStatus, RetryBlock, RolloutHold
from omenative.api.units import InvalidValue, format_duration, optional_duration
from omenative.controllers import audit, fleet_metrics
from omenative.controllers.context import (
    Reads,
    Writes,
    named_model,
    named_runtime,
    revision_pairing,
    revision_runners,
    selected_runtime,
)
from omenative.controllers.inferencereplica import plan as planner
from omenative.controllers.inferencereplica import requests, revisions
from omenative.controllers.inferencereplica.migration import Caps
from omenative.controllers.inferencereplica.retry import RetryPolicy
from omenative.controllers.watches import BY_ISVC, BY_REPLICA, RevisionNamed, replica_status
from omenative.kube.client import ApiError
from omenative.kube.controller import Result, split_key
from omenative.kube.expectations import expected
from omenative.kube.resources import CONTROLLER_REVISIONS, NODES, PODS, SERVICES
from omenative.obj import Obj
from omenative.observe.pods import PodFacts, is_true, pod_facts
from omenative.observe.refusals import classify
from omenative.ome_resources import INFERENCE_REPLICAS, INFERENCE_SERVICES, PODGROUPS
from omenative.render import objects, placement, replica_source
from omenative.render.in_place import images_only
from omenative.render.pods import pod_count, scale_limit
from omenative.render.templates import ModelInfo, serving_ports

log = structlog.get_logger(__name__)
# Pod counts alone (routine progress) wait this long for a change that matters before they are written on their own.
PROGRESS_PERIOD = 5.0


def migration_caps(config: Any) -> Caps:
    try:
        window = optional_duration(config.migration_window)
    except InvalidValue:
        window = None
    return Caps(max_per_window=config.migration_max_per_window, window=window,
                max_in_flight=config.migration_max_in_flight)


def render_condition(reason: str, message: str) -> Obj:
    """A standalone replica with no pod templates it can run: Ready False with OME's reason; its pods stay as
    they are."""
    return {"type": "Ready", "status": "False", "reason": reason, "message": message}


def label_selector(isvc: str, component: str) -> str:
    return objects.label_selector_string(objects.pod_selector(isvc, component))


class InferenceReplicaController:
    name = "inferencereplica"

    def __init__(self, reads: Reads, writes: Writes) -> None:
        self.reads = reads
        self.writes = writes
        self._progress: dict[str, float] = {}  # replica -> when its status first had only pod counts to write

    async def reconcile(self, key: str) -> Result | None:
        reads, writes = self.reads, self.writes
        namespace, name = split_key(key)
        ir = reads.get(INFERENCE_REPLICAS, namespace, name)
        if ir is None:
            writes.written.forget(replica_status(key))
            writes.refusals.forget_replica(key)
            return None  # its pods go with it (owner references)
        meta = ir["metadata"]
        if not writes.written.caught_up(replica_status(key), meta.get("resourceVersion")):
            return None  # our last status write is not in the cache yet; its watch event brings us back
        finalizers = meta.get("finalizers") or []
        deleting = bool(meta.get("deletionTimestamp"))
        if deleting and c.FINALIZER_TEARDOWN not in finalizers and c.FINALIZER_LEGACY_DRAIN not in finalizers:
            return None
        if not deleting and c.FINALIZER_LEGACY_DRAIN in finalizers:
            # An earlier name of the finalizer; the apply holds the current one.
            await self.writes.applier.remove_finalizer(INFERENCE_REPLICAS, ir, c.FINALIZER_LEGACY_DRAIN)
        if not deleting and c.FINALIZER_TEARDOWN not in finalizers and not standalone.projected(ir):
            # A standalone replica: no InferenceService's apply writes its teardown finalizer, so it is added here,
            # before its first pod, and a delete drains its Instances before their pods go, as OME does.
            try:
                await self.writes.applier.add_finalizer(INFERENCE_REPLICAS, ir, c.FINALIZER_TEARDOWN)
            except ApiError as exc:
                if classify(exc.status, exc.reason, exc.message) is None:
                    raise
                # Refused (an admission webhook of the cluster's): said once; the replica runs, and a delete then
                # leaves its pods to the garbage collector.
                if self.writes.refusals.announce_child(key, "Finalizer", exc.message):
                    self.writes.events.event(ir, "Warning", "FailedUpdate", f"Error adding finalizer "
                                             f"{c.FINALIZER_TEARDOWN}: {exc.message}")
            else:
                return None  # its update event brings it back, with the finalizer
        spec: Obj = ir.get("spec") or {}
        runners: list[Obj] = spec.get("runners") or []
        isvc = (spec.get("parentRef") or {}).get("name") or name
        component = spec.get("component") or c.ENGINE
        revision = reads.revisions.of(ir)
        problem: tuple[str, str] | None = None
        if not runners and standalone.references(spec) and not standalone.projected(ir):
            # Rendered from the live model and runtime on every pass; while it cannot be, the Instances stay on the
            # revision they have (its ControllerRevision) and the replica says why.
            rendered, problem = self.render_from_references(ir, component)
            if rendered:
                runners = rendered
                revision = objects.revision_hash(runners, spec.get("pairingProtocol"),
                                                 int((ir.get("status") or {}).get("collisionCount") or 0))
            else:
                revision = naming.revision_hash_of(isvc, component, (ir.get("status") or {}).get("updateRevision"))
                runners = revision_runners(reads, ir, isvc, component, revision) or [] if revision else []
            if problem is not None:
                self.announce_once(ir, *problem)
            if not runners and problem is not None and not deleting:
                await writes.applier.apply_status(INFERENCE_REPLICAS, name, namespace, {
                    "observedGeneration": meta.get("generation"),
                    "conditions": settle([render_condition(*problem)], (ir.get("status") or {}).get("conditions"))})
                return None  # fixing the runtime wakes it (watches.py)
        if not runners:
            if deleting:
                await self._release_all(ir)
            return None  # only the bootstrap so far: the InferenceService controller's apply follows
        # A canary rollback moves every Instance back to the stable revision, rendered from its ControllerRevision.
        target = self.rollback_target(ir, isvc, component, revision)
        # Everything the plan reads is taken from the caches here, before any await, so it is one moment's view.
        pods: dict[int, list[PodFacts]] = {}
        for pod in reads.by_index(PODS, BY_REPLICA, key):
            facts = pod_facts(pod)
            index = (pod["metadata"].get("labels") or {}).get(c.LABEL_INSTANCE_INDEX)
            if index is not None and index.isdigit():
                pods.setdefault(int(index), []).append(facts)
        old_status: Obj = ir.get("status") or {}
        view = self.view(ir, isvc, component, target, runners, pods, deleting)
        result = planner.plan(view)
        if not deleting:
            await self._ensure_revision(ir, isvc, component, revision, runners)
            if not standalone.projected(ir):
                await self._ensure_headless_service(ir, component, runners)

        parent = reads.get(INFERENCE_SERVICES, namespace, isvc) or ir
        for event in result.events:
            writes.events.event(parent, event.type, event.reason, event.message)
        status: Obj = {
            "observedGeneration": meta.get("generation"),
            "replicas": result.counts.replicas,
            "readyReplicas": result.counts.ready,
            "servingReplicas": result.counts.serving,
            "availableReplicas": result.counts.available,
            "updatedReplicas": result.counts.updated,
            "updatedReadyReplicas": result.counts.updated_ready,
            "currentRevision": naming.revision_name(isvc, component, result.current_revision),
            "updateRevision": naming.revision_name(isvc, component, target),
            "labelSelector": label_selector(isvc, component),
            "conditions": settle([render_condition(*problem) if problem is not None and cond.type == "Ready"
                                  else cond.to_dict() for cond in result.conditions], old_status.get("conditions")),
            **encode_rows(result.rows),
        }
        if standalone.projected(ir):  # a standalone replica has no revision Services to name
            traffic = replica_traffic(isvc, component, result.rows, target, self.pairings(
                ir, isvc, component, {row.running_revision for row in result.rows if row.running_revision},
                target, runners))
            if traffic:
                status["traffic"] = traffic
        if result.retry_blocks:
            status["retryBlocks"] = [block.to_dict() for block in result.retry_blocks]
        if result.rollout_hold is not None:
            status["rolloutHold"] = result.rollout_hold.to_dict()
        if result.migrations:
            status["migrations"] = [record.to_dict() for record in result.migrations]
        if old_status.get("collisionCount"):
            status["collisionCount"] = old_status["collisionCount"]
        if not deleting and progress_only(old_status, status):
            # Only pod counts moved (pods created, scheduled, in rotation): they ride along with the next change
            # that matters, or are written once they have waited PROGRESS_PERIOD.
            waited = reads.wall_clock() - self._progress.setdefault(key, reads.wall_clock())
            if waited < PROGRESS_PERIOD:
                later = PROGRESS_PERIOD - waited
                return Result(requeue_after=min(later, result.wake_in + 0.5) if result.wake_in is not None
                              else later)
        self._progress.pop(key, None)
        if result.audit:
            # The audit history first: a crash before the status write repeats the same rows (upserted by ID).
            try:
                await audit.record(writes.applier, parent if parent is not ir else None, namespace, isvc, result.audit)
            except ApiError as exc:
                # Refused (a ConfigMap quota, a webhook): the migration waits for its history, said once, and the
                # queue's backoff tries again.
                if classify(exc.status, exc.reason, exc.message) is not None and \
                        writes.refusals.announce_child(key, "ConfigMap", exc.message):
                    writes.events.event(ir, "Warning", "FailedCreate", f"Error writing the migration audit history "
                                     f"ConfigMap {objects.migration_audit_name(isvc)}: {exc.message}")
                raise
            writes.refusals.children_written(key)  # written: a refusal that comes back is news again
        written = await writes.applier.apply_status(INFERENCE_REPLICAS, name, namespace, status)
        version = (written or {}).get("metadata", {}).get("resourceVersion")
        if version and version != meta.get("resourceVersion"):  # a write was made (not skipped as a no-op)
            writes.written.wrote(replica_status(key), version)
            for cause in fleet_metrics.restarts(reads.rows.of(ir), result.rows):
                fleet_metrics.instance_restarts_total.labels(component=component, cause=cause).inc()
            held = sum(1 for event in result.events if event.reason == "RepairHeld")
            if held:
                fleet_metrics.repairs_held_total.labels(component=component).inc(held)
        # The answer is in the status now; only then is the request removed (a crash in between answers it again,
        # with the same outcome).
        for annotation in result.answered:
            await self._consume(ir, annotation)
        if not deleting:
            await self._prune_revisions(ir, isvc, component, parent if parent is not ir else None,
                                        {revision, target, result.current_revision}, result.rows)
        wake = Result(requeue_after=result.wake_in + 0.5) if result.wake_in is not None else None
        if deleting:
            teardown = await self._finish_teardown(ir, isvc, component, pods)
            if teardown is None or wake is None:
                return teardown or wake
            return Result(requeue_after=min(teardown.requeue_after or math.inf, wake.requeue_after or math.inf))
        return wake

    def render_from_references(self, ir: Obj, component: str) -> tuple[list[Obj], tuple[str, str] | None]:
        """A standalone replica's runners from `spec.modelRef` and `spec.runtimeRef` (OME's "One template source"),
        or why there are none: ModelNotFound, ModelDisabled, RuntimeNotFound, RuntimeDisabled,
        RuntimeSelectionFailed, RuntimePieceMissing, RenderFailed."""
        meta, spec = ir["metadata"], ir.get("spec") or {}
        namespace = meta["namespace"]
        model_ref: Obj = spec["modelRef"] if isinstance(spec.get("modelRef"), dict) else {}
        runtime_ref: Obj = spec["runtimeRef"] if isinstance(spec.get("runtimeRef"), dict) else {}
        model = None
        if model_ref:
            model, problem = named_model(self.reads, namespace, model_ref, field="spec.modelRef", ready=True)
            if model is None:
                return [], problem
        if runtime_ref:
            runtime, _, problem = named_runtime(self.reads, namespace, runtime_ref)
            if runtime is None:
                return [], problem
            name = str(runtime_ref.get("name"))
            if model is not None:
                self.announce_named_runtime(ir, name, model, runtime)
        else:
            assert model is not None  # standalone.references: one of the two is set
            runtime, _, why = selected_runtime(self.reads, namespace, model)
            if runtime is None:
                return [], ("RuntimeSelectionFailed", why or "")
            name = runtime["metadata"]["name"]
        try:
            return replica_source.runtime_runners(
                replica=meta["name"], namespace=namespace, component=component, runtime_name=name,
                runtime_spec=runtime.get("spec") or {}, config=self.reads.config, model=model), None
        except replica_source.PieceMissing as exc:
            return [], ("RuntimePieceMissing", str(exc))
        except (TypeError, ValueError, KeyError, AttributeError) as exc:  # a runtime field of the wrong type
            return [], ("RenderFailed", f"runtime {name} cannot be rendered: {exc}")

    def announce_named_runtime(self, ir: Obj, runtime_name: str, model: ModelInfo, runtime: Obj) -> None:
        """OME's RuntimeCompatibilityAdvisory: the named runtime does not declare support for the model; the replica
        renders all the same (the user chose the runtime), said once per generation."""
        reason = incompatibility(model.spec, self.reads.runtime_specs.of(runtime))
        if reason is None:
            return
        self.announce_once(ir, "RuntimeCompatibilityAdvisory", (
            f"Runtime {runtime_name} does not declare support for model {model.name} ({reason}); proceeding because "
            "the runtime was named explicitly"))

    def announce_once(self, ir: Obj, reason: str, message: str) -> None:
        """Once per generation of the replica and cause, as a Warning event with the reason (the Ready condition's, or
        the advisory's)."""
        meta = ir["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        if self.writes.refusals.announce_child(key, reason, f"{meta.get('generation')} {message}"):
            self.writes.events.event(ir, "Warning", reason, message)

    async def _ensure_headless_service(self, ir: Obj, component: str, runners: list[Obj]) -> None:
        """A standalone replica's headless Service `{replica}-{component}-headless`, owned by the replica: its pods'
        subdomain, so that a leader's DNS name resolves (an InferenceService makes it for the replicas it projects;
        a standalone replica gets no other Service, as in OME)."""
        meta = ir["metadata"]
        owner = objects.owner_reference(ir, kind="InferenceReplica")
        _, headless = objects.services(isvc=meta["name"], namespace=meta["namespace"], component=component,
                                       owner=owner, ports=serving_ports(runners),
                                       multi_pod=any(r.get("name") == c.RUNNER_LEADER for r in runners))
        try:
            await self.writes.applier.apply(SERVICES, headless)
        except ApiError as exc:
            if classify(exc.status, exc.reason, exc.message) is None:
                raise
            key = f"{meta['namespace']}/{meta['name']}"
            if self.writes.refusals.announce_child(key, "Service", exc.message):
                self.writes.events.event(ir, "Warning", "FailedCreate",
                                         f"Error creating Service {headless['metadata']['name']}: {exc.message}")

    def pairings(self, ir: Obj, isvc: str, component: str, revisions: set[str], target: str,
                 runners: list[Obj]) -> dict[str, str | None]:
        """Each revision's pairing protocol: the target's from its runners, the others' from their
        ControllerRevisions."""
        namespace = ir["metadata"]["namespace"]
        return {target: pairing_of(runners)} | {
            revision: revision_pairing(self.reads, namespace, isvc, component, revision)
            for revision in revisions - {target}}

    def rollback_target(self, ir: Obj, isvc: str, component: str, revision: str) -> str:
        """The revision to roll out: the spec's, or the one `spec.pacing.rollbackToRevision` names while its
        ControllerRevision exists (without it the Instances could not be rendered)."""
        back = ((ir.get("spec") or {}).get("pacing") or {}).get("rollbackToRevision")
        if not back or back == revision:
            return revision
        name = naming.revision_name(isvc, component, back)
        if self.reads.get(CONTROLLER_REVISIONS, ir["metadata"]["namespace"], name) is None:
            log.warning("rollback revision has no ControllerRevision; rolling out the spec's", revision=name)
            return revision
        return str(back)

    def view(self, ir: Obj, isvc: str, component: str, revision: str, runners: list[Obj],
             pods: dict[int, list[PodFacts]], deleting: bool) -> planner.ReplicaView:
        reads, writes = self.reads, self.writes
        meta, spec = ir["metadata"], ir.get("spec") or {}
        status: Obj = ir.get("status") or {}
        annotations = meta.get("annotations") or {}
        lifecycle: Obj = spec.get("lifecycle") or {}
        strategy = lifecycle.get("updateStrategy") or {}
        rolling = strategy.get("rollingUpdate") or {}
        multi = any(r.get("name") == c.RUNNER_LEADER for r in runners)
        hold = status.get("rolloutHold")
        pacing: Obj = spec.get("pacing") or {}
        paused = bool(spec.get("paused"))
        desired = desired_instances(ir)
        limit = scale_limit(ir)
        capped = (desired, limit[1]) if limit is not None and desired > limit[0] else None
        migrations = [MigrationStatus.from_dict(m) for m in status.get("migrations") or [] if isinstance(m, dict)]
        return planner.ReplicaView(
            component=component,
            replicas=min(desired, limit[0]) if capped and limit else desired,
            capped=capped,
            pods_per_instance=pod_count(runners),
            update_revision=revision,
            restart_policy=lifecycle.get("restartPolicy") or (RECREATE if multi else "None"),
            ready_policy=lifecycle.get("readyPolicy") or planner.ALL_POD_READY,
            ready_timeout=ready_timeout(lifecycle, reads.config),
            min_ready_seconds=int(spec.get("minReadySeconds") or lifecycle.get("minReadySeconds") or 0),
            max_unavailable=rolling.get("maxUnavailable"),
            multi_pod=multi,
            podgroup_crd=reads.podgroup_crd_installed(),
            rows=list(reads.rows.of(ir).values()),
            pods=pods,
            now=reads.wall_clock(),
            config=reads.config,
            deleting=deleting,
            update_strategy=strategy.get("type") or SURGE_THEN_DRAIN,
            max_surge=rolling.get("maxSurge", reads.config.max_surge),
            revision_prefix=naming.revision_name(isvc, component, ""),
            was_ready=is_true(ir, "Ready"),
            retry_blocks=[RetryBlock.from_dict(b) for b in status.get("retryBlocks") or [] if isinstance(b, dict)],
            retry_policy=RetryPolicy(attempts=reads.config.update_retry_attempts,
                                     backoff=optional_duration(reads.config.update_retry_backoff) or 0.0),
            rollout_hold=RolloutHold.from_dict(hold) if isinstance(hold, dict) else None,
            reset_request=annotations.get(requests.RESET_ANNOTATION),
            release_request=annotations.get(requests.RELEASE_ANNOTATION),
            migration_requests=tuple((k, annotations[k]) for k in migration_request.request_keys(annotations)),
            migrations=migrations,
            migration_mode=(lifecycle.get("migrationPolicy") or {}).get("mode") or "Auto",
            migration_caps=migration_caps(reads.config),
            who=f"InferenceReplica {meta['namespace']}/{meta['name']} component={component}",
            partition=effective_partition(pacing, rolling),
            pacing_budget=pacing.get("maxUnavailable"),
            paused=paused,
            freeze=paused and spec.get("pauseMode") == "Freeze",
            refusals=writes.refusals.of_replica(f"{meta['namespace']}/{meta['name']}"),
            podgroups_terminating=self.podgroups_terminating(f"{meta['namespace']}/{meta['name']}"),
            unknown_nodes=self.unknown_nodes(pods),
            in_place_from=self.in_place_from(ir, isvc, component, revision, runners)
            if strategy.get("type") in IN_PLACE_STRATEGIES and not multi else frozenset(),
            allowed_nodes=self.allowed_nodes(ir, isvc, component)
            if migration_request.request_keys(annotations) or migration_request.active(migrations) else {},
        )

    def allowed_nodes(self, ir: Obj, isvc: str, component: str) -> dict[str, frozenset[str]]:
        """By revision the Instances run, the nodes its templates allow, where they name nodes."""
        out = {}
        for rev in {r.running_revision for r in self.reads.rows.of(ir).values() if r.running_revision}:
            allowed = placement.allowed_nodes(revision_runners(self.reads, ir, isvc, component, rev))
            if allowed is not None:
                out[rev] = allowed
        return out

    def in_place_from(self, ir: Obj, isvc: str, component: str, target: str, runners: list[Obj]) -> frozenset[str]:
        """The revisions the Instances run that reach `target` by new container images alone."""
        wanted = revision_runners(self.reads, ir, isvc, component, target) or runners
        running = {r.running_revision for r in self.reads.rows.of(ir).values()
                   if r.running_revision and r.running_revision != target}
        return frozenset(rev for rev in running
                         if images_only(revision_runners(self.reads, ir, isvc, component, rev), wanted))

    def unknown_nodes(self, pods: dict[int, list[PodFacts]]) -> frozenset[str]:
        """The nodes of the replica's pods that do not report Ready (known only where nodes are watched)."""
        if not self.reads.has(NODES):
            return frozenset()
        names = {p.node for facts in pods.values() for p in facts if p.node and p.terminating}
        return frozenset(name for name, health in self.reads.node_health(names).items() if not health.ready)

    def podgroups_terminating(self, key: str) -> frozenset[int]:
        """Instances whose PodGroup is being deleted (an earlier attempt's): their pods wait for it to go."""
        if not self.reads.has(PODGROUPS):
            return frozenset()
        out = set()
        for podgroup in self.reads.by_index(PODGROUPS, BY_REPLICA, key):
            index = (podgroup["metadata"].get("labels") or {}).get(c.LABEL_INSTANCE_INDEX)
            if podgroup["metadata"].get("deletionTimestamp") and index is not None and index.isdigit():
                out.add(int(index))
        return frozenset(out)

    async def _consume(self, ir: Obj, annotation: str) -> None:
        """Removes an answered request, unless it was replaced meanwhile (kubectl annotate --overwrite)."""
        await self.writes.applier.remove_annotation(INFERENCE_REPLICAS, ir, annotation)

    async def _finish_teardown(self, ir: Obj, isvc: str, component: str,
                               pods: dict[int, list[PodFacts]]) -> Result | None:
        """Lets a deleted replica go once its pods and PodGroups are gone, or at the teardown deadline."""
        reads, writes = self.reads, self.writes
        meta = ir["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        podgroups = list(reads.by_index(PODGROUPS, BY_REPLICA, key)) if reads.has(PODGROUPS) else []
        left = sum(len(p) for p in pods.values())
        if not left and not podgroups:
            await self._release_all(ir)
            return None
        selector = f'selector: parent="{isvc}", component="{component}"'
        escape = (f"manual escape: kubectl patch inferencereplica {meta['name']} -n {meta['namespace']} --type=merge "
                  """-p '{"metadata":{"finalizers":null}}'""")
        since = parse_time(meta.get("deletionTimestamp"))
        try:
            deadline = optional_duration(reads.config.teardown_deadline)
            invalid = False
        except InvalidValue:
            deadline, invalid = None, True
        if since is not None and deadline is not None:
            remaining = since + deadline - reads.wall_clock()
            if remaining <= 0:
                writes.events.event(ir, "Warning", "TeardownDeadlineExceeded", (
                    f"teardown deadline {format_duration(deadline)} exceeded ({left} owned pod(s) observed; "
                    f"{selector}); releasing finalizer {c.FINALIZER_TEARDOWN} to background GC; {escape}"))
                await self._release_all(ir)
                return None
            return Result(requeue_after=min(remaining + 0.5, 60.0))
        why = "lifecycle.teardown.deadline configured but invalid" if invalid else \
            "no lifecycle.teardown.deadline configured"
        writes.events.event(ir, "Warning", "TeardownBlocked", (
            f"teardown blocked: {left} owned pod(s) and {len(podgroups)} owned PodGroup(s) remain ({selector}); "
            f"finalizer {c.FINALIZER_TEARDOWN} holds until cleanup completes ({why}); {escape}"))
        return None

    async def _release_all(self, ir: Obj) -> None:
        for finalizer in (c.FINALIZER_TEARDOWN, c.FINALIZER_LEGACY_DRAIN):
            await self.writes.applier.remove_finalizer(INFERENCE_REPLICAS, ir, finalizer)

    async def _prune_revisions(self, ir: Obj, isvc: str, component: str, parent: Obj | None, live: set[str],
                               rows: list[Any]) -> None:
        """Deletes the revisions past the history limit, never one that an Instance, a rollback or the rollout still
        names. Runs after the status write, so the rows it keeps are the ones on record."""
        reads, writes = self.reads, self.writes
        limit = revisions.history_limit((ir.get("spec") or {}).get("revisionHistoryLimit"),
                                        reads.config.revision_history_limit)
        if limit is None:
            return
        namespace = ir["metadata"]["namespace"]
        live = set(live)
        for row in rows:
            live.update(r for r in (row.running_revision, row.target_revision,
                                    row.operation.target_revision if row.operation else None) if r)
        rollback = ((ir.get("spec") or {}).get("pacing") or {}).get("rollbackToRevision")
        if rollback:
            live.add(str(rollback))
        if parent is not None:
            live |= pinned_revisions(parent.get("status"))
        siblings = [r for r in reads.by_index(CONTROLLER_REVISIONS, BY_ISVC, f"{namespace}/{isvc}")
                    if (r["metadata"].get("labels") or {}).get(c.LABEL_COMPONENT) == component]
        for old in revisions.to_prune(siblings, live, limit):
            log.info("pruning revision", revision=old["metadata"]["name"], limit=limit)
            await writes.applier.delete(CONTROLLER_REVISIONS, old)

    async def _ensure_revision(self, ir: Obj, isvc: str, component: str, revision: str, runners: list[Obj]) -> None:
        """A ControllerRevision per version of the runners, so Instances on an older revision can be rendered."""
        reads, writes = self.reads, self.writes
        namespace = ir["metadata"]["namespace"]
        name = naming.revision_name(isvc, component, revision)
        key = RevisionNamed(namespace, name)
        if reads.get(CONTROLLER_REVISIONS, namespace, name) is not None:
            writes.expectations.forget(key)
            return
        if name in writes.expectations.pending(key)[0] and not writes.expectations.satisfied(key):
            return  # created by an earlier pass and not in the cache yet: a second create would only be refused
        siblings = [r for r in reads.by_index(CONTROLLER_REVISIONS, BY_ISVC, f"{namespace}/{isvc}")
                    if (r["metadata"].get("labels") or {}).get(c.LABEL_COMPONENT) == component]
        number = max((int(r.get("revision") or 0) for r in siblings), default=0) + 1
        body = objects.controller_revision(isvc=isvc, namespace=namespace, component=component,
                                           owner=objects.owner_reference(ir), revision=revision, number=number,
                                           runners=runners)
        writes.expectations.expect_creations(key, [name])
        # Observed when a later pass finds it cached (above); a create that failed or found it there is observed now.
        await expected(writes.applier.create(CONTROLLER_REVISIONS, body), partial(writes.expectations.forget, key))
