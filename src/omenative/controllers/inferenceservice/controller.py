"""The InferenceService controller: resolve the runtime and model, write each OMENative component's
InferenceReplica and surrounding objects, remove those of components no longer declared, and report status."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable
from functools import partial
from typing import Any

import attrs
import structlog

from omenative.api import constants as c
from omenative.api import migration_request, naming, slots
from omenative.api.modes import declared_components
from omenative.api.phases import DELETING, FAILED, READY
from omenative.api.pod_fields import InvalidSpec
from omenative.api.readiness import desired_instances
from omenative.api.rollout import pairing_of
from omenative.api.times import format_time
from omenative.api.units import optional_duration
from omenative.api.validation import Admission, validate_inference_service
from omenative.controllers import audit as migration_audit
from omenative.controllers import fleet_metrics
from omenative.controllers.context import (
    Reads,
    Writes,
    current_revision,
    named_model,
    named_runtime,
    revision_pairing,
    selected_runtime,
)
from omenative.controllers.inferenceservice import desired, rollout
from omenative.controllers.inferenceservice.status import build_status, keda_missing_message
from omenative.controllers.inferenceservice.watches import creations_key
from omenative.controllers.watches import BY_ISVC, StatusOf
from omenative.kube.client import ApiError
from omenative.kube.controller import Result, split_key
from omenative.kube.expectations import expected
from omenative.kube.gather import gather_all
from omenative.kube.prometheus import instant_query
from omenative.kube.resources import (
    CONTROLLER_REVISIONS,
    HPAS,
    PDBS,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    SERVICES,
    Resource,
)
from omenative.obj import Obj
from omenative.ome_resources import (
    HTTPROUTES,
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    PODMONITORS,
    SCALED_OBJECTS,
)
from omenative.render import objects
from omenative.render.templates import ModelInfo

log = structlog.get_logger(__name__)

BOOTSTRAP_MANAGER = "omenative-bootstrap"
KIND_RESOURCES: dict[str, Resource] = {
    "InferenceReplica": INFERENCE_REPLICAS, "Service": SERVICES, "HorizontalPodAutoscaler": HPAS,
    "PodDisruptionBudget": PDBS, "ServiceAccount": SERVICE_ACCOUNTS, "Role": ROLES, "RoleBinding": ROLE_BINDINGS,
    "PodMonitor": PODMONITORS, "ScaledObject": SCALED_OBJECTS, "HTTPRoute": HTTPROUTES,
}
# Children an InferenceService may own, by resource, for clean-up of components it no longer declares.
REFUSED_RETRY_SECONDS = 30.0


def rollout_key(key: str) -> StatusOf:
    """The write-expectations key of an InferenceService's status, whose rollout state the next plan reads."""
    return StatusOf("InferenceService.rollout", key)


def rollout_changed(old: Obj, outcome: rollout.Outcome) -> bool:
    """The rollout's remembered state differs from what the status holds."""
    if any(old.get(k) != outcome.status.get(k) for k in ("rollout", "rolloutCoordination")):
        return True
    components: Obj = old.get("components") or {}
    return any((components.get(name) or {}).get(k) != fields.get(k)
               for name, fields in outcome.components.items() for k in fields)


OWNED = (INFERENCE_REPLICAS, SERVICES, HPAS, PDBS, SERVICE_ACCOUNTS, ROLES, ROLE_BINDINGS, PODMONITORS,
         SCALED_OBJECTS, HTTPROUTES)
AUTOSCALERS = (HPAS, SCALED_OBJECTS)  # one per component at most: the one its class no longer names goes


class InferenceServiceController:
    name = "inferenceservice"

    def __init__(self, reads: Reads, writes: Writes) -> None:
        self.reads = reads
        self.writes = writes
        # The canary gauge series each InferenceService has, removed with it (labels name the InferenceService).
        self._canary_series: dict[str, set[tuple[Any, tuple[str, ...]]]] = {}

    # -- observe
    def resolve_model(self, isvc: Obj) -> tuple[ModelInfo | None, tuple[str, str] | None]:
        ref = (isvc.get("spec") or {}).get("model") or {}
        if not ref.get("name"):
            return None, None
        return named_model(self.reads, isvc["metadata"]["namespace"], ref)

    def resolve_runtime(self, isvc: Obj, model: ModelInfo | None
                        ) -> tuple[desired.RuntimeInfo | None, tuple[str, str] | None]:
        ref = (isvc.get("spec") or {}).get("runtime") or {}
        namespace = isvc["metadata"]["namespace"]
        name = ref.get("name")
        if name:
            obj, namespaced, problem = named_runtime(self.reads, namespace, ref)
            if obj is None:
                return None, problem
            return desired.RuntimeInfo(name=name, namespaced=namespaced, spec=dict(obj.get("spec") or {})), None
        if model is None:
            return None, None  # no runtime and no model: the InferenceService must carry its own containers
        obj, namespaced, why = selected_runtime(self.reads, namespace, model)
        if obj is None:
            return None, ("RuntimeNotFound", why or "")
        return desired.RuntimeInfo(name=obj["metadata"]["name"], namespaced=namespaced,
                                   spec=dict(obj.get("spec") or {})), None

    # -- reconcile
    async def reconcile(self, key: str) -> Result | None:
        reads, writes = self.reads, self.writes
        namespace, name = split_key(key)
        isvc = reads.get(INFERENCE_SERVICES, namespace, name)
        if isvc is None or isvc["metadata"].get("deletionTimestamp"):
            writes.written.forget(rollout_key(key))
            self.forget_canary_series(key)
            return None  # everything it created goes with it (owner references)
        if not writes.written.caught_up(rollout_key(key), isvc["metadata"].get("resourceVersion")):
            # The rollout's state (a canary's step, a pinned run) is in the status we last wrote: planning from an
            # older one would repeat a step. Its watch event brings us back.
            return None
        model, model_problem = self.resolve_model(isvc)
        runtime, runtime_problem = self.resolve_runtime(isvc, model)
        problems = [p for p in (runtime_problem, model_problem) if p is not None]
        try:
            plan = desired.build(desired.Inputs(isvc=isvc, runtime=runtime, model=model, config=reads.config,
                                                pod_monitors=reads.podmonitors_cached(),
                                                scaled_objects=reads.scaledobjects_cached(),
                                                http_routes=reads.httproutes_cached(),
                                                revisions=tuple(reads.by_index(CONTROLLER_REVISIONS, BY_ISVC, key))),
                                 claim_unmoded=reads.config.claim_unmoded)
        except InvalidSpec as exc:
            await self.invalid(isvc, exc)
            return None  # nothing to retry: a change of the InferenceService or its runtime wakes it
        if not plan.components:
            return None  # no OMENative component: this InferenceService is not ours to touch
        findings = validate_inference_service(isvc, Admission(runtime_raw=runtime.spec if runtime else None,
                                                              config=reads.config))
        if findings.errors:
            problems.append(("InvalidSpec", "; ".join(findings.errors)))
        refused: list[tuple[str, str, str]] = []
        outcome = await self.plan_rollout(isvc, plan) if not problems else None
        if outcome is not None:
            plan = desired.with_rollout(plan, outcome)
            changed = rollout_changed(isvc.get("status") or {}, outcome)
            if changed:
                # What the rollout decided is stored before anything acts on it, so a crash in between repeats
                # the same decision instead of a second step.
                replicas = {part.name: reads.get(INFERENCE_REPLICAS, namespace, part.replica["metadata"]["name"])
                            for part in plan.components}
                first = build_status(isvc, plan, replicas, problems, format_time(reads.wall_clock()),
                                     rollout=outcome)
                written = await writes.applier.apply_status(INFERENCE_SERVICES, name, namespace, first)
                writes.written.wrote(rollout_key(key), (written or {}).get("metadata", {}).get("resourceVersion"))
                # Counted once the status that records the new phase is written (a crash before repeats the pass).
                for group, before, after in fleet_metrics.group_transitions(isvc.get("status") or {}, outcome.status):
                    fleet_metrics.rollout_group_transition_total.labels(
                        namespace=namespace, isvc=name, group=group, **{"from": before}, to=after).inc()
            self.canary_metrics(isvc, outcome, written=changed)
        if not problems:
            # Components and their children are independent writes: made together, they cost one round trip.
            applies = [self.apply_component(isvc, part, refused) for part in plan.components]
            if plan.entry is not None:
                applies.append(self.write(refused, writes.applier.apply(SERVICES, plan.entry), plan.entry))
            if plan.ingress.route is not None:
                route = plan.ingress.route
                applies.append(self.write(refused, writes.applier.apply(HTTPROUTES, route), route))
            await gather_all(applies)
            await self.clean_up(isvc, plan)
            await self.forward_migrations(isvc, plan)
        replicas = {part.name: reads.get(INFERENCE_REPLICAS, namespace, part.replica["metadata"]["name"])
                    for part in plan.components}
        status = build_status(isvc, plan, replicas, problems, format_time(reads.wall_clock()), refused=refused,
                              route=reads.get(HTTPROUTES, namespace, name) if plan.ingress.route is not None else None,
                              rollout=outcome)
        written = await writes.applier.apply_status(INFERENCE_SERVICES, name, namespace, status)
        if outcome is not None:
            version = (written or {}).get("metadata", {}).get("resourceVersion")
            if version and version != isvc["metadata"].get("resourceVersion"):
                writes.written.wrote(rollout_key(key), version)
            for kind, reason, message in outcome.events:
                writes.events.event(isvc, kind, reason, message)
            for annotation in outcome.consume:  # answered in the status just written
                await self.consume(isvc, annotation)
        if refused:
            self.announce_refused(isvc, plan, refused)
            # Nothing watched tells when a quota is raised or a webhook changes its mind: look again, bounded.
            return Result(requeue_after=REFUSED_RETRY_SECONDS)
        if not problems:
            writes.refusals.children_written(key)
        self.announce_keda_missing(isvc, plan)
        if outcome is not None and outcome.wake_in is not None:
            return Result(requeue_after=outcome.wake_in + 0.5)  # a soak or a timed canary gate ends
        return None

    def announce_keda_missing(self, isvc: Obj, plan: desired.Plan) -> None:
        """A component of autoscaler class KEDA while KEDA's CRD is not installed: said once per generation as a
        warning event (the status carries the AutoscalerReady condition), never left silent as OME leaves it."""
        meta = isvc["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        for part in plan.components:
            if part.keda_missing and self.writes.refusals.announce_child(
                    key, "KEDANotInstalled", f"{meta.get('generation')} {part.name}"):
                self.writes.events.event(isvc, "Warning", "KEDANotInstalled", keda_missing_message(part.name))

    async def invalid(self, isvc: Obj, exc: InvalidSpec) -> None:
        """A spec omenative cannot build from (a runtime's or a stored field of the wrong type): Ready False with
        reason InvalidSpec naming the field, and one event per generation; nothing is written but the status."""
        reads, writes = self.reads, self.writes
        meta = isvc["metadata"]
        status = build_status(isvc, None, {}, [("InvalidSpec", str(exc))], format_time(reads.wall_clock()))
        await writes.applier.apply_status(INFERENCE_SERVICES, meta["name"], meta["namespace"], status)
        key = f"{meta['namespace']}/{meta['name']}"
        if writes.refusals.announce_child(key, "InvalidSpec", f"{meta.get('generation')} {exc}"):
            writes.events.event(isvc, "Warning", "InvalidSpec", str(exc))

    def announce_refused(self, isvc: Obj, plan: desired.Plan, refused: list[tuple[str, str, str]]) -> None:
        """Each distinct refusal once, in the API server's words: a refused InferenceReplica as OME's
        ComponentReconcileError on the InferenceService; a refused child of a component (Service, autoscaler,
        disruption budget, RBAC, PodMonitor) as FailedCreate on that component's InferenceReplica, as the ReplicaSet
        controller reports a refused pod."""
        reads, writes = self.reads, self.writes
        key = f"{isvc['metadata']['namespace']}/{isvc['metadata']['name']}"
        for kind, child, message in refused:
            if not writes.refusals.announce_child(key, kind, message):
                continue
            part = next((p for p in plan.components if any(
                (x.get("metadata") or {}).get("name") == child and x.get("kind") == kind for x in p.children)), None)
            replica = reads.get(INFERENCE_REPLICAS, part.replica["metadata"]["namespace"],
                              part.replica["metadata"]["name"]) if part is not None else None
            if kind == "InferenceReplica" or replica is None:
                writes.events.event(isvc, "Warning", "ComponentReconcileError",
                                 f"the API server refused {kind} {child}: {message}")
            else:
                writes.events.event(replica, "Warning", "FailedCreate", f"Error writing {kind} {child}: {message}")

    # -- rollout
    async def plan_rollout(self, isvc: Obj, plan: desired.Plan) -> rollout.Outcome | None:
        """The rollout groups' and the pause's directives for every component; None when the InferenceService
        has neither (its components roll out on their own, unpaced)."""
        spec: Obj = isvc.get("spec") or {}
        annotations: dict[str, str] = isvc["metadata"].get("annotations") or {}
        groups = [g for g in ((spec.get("rollout") or {}).get("groups") or []) if isinstance(g, dict)]
        previous = isvc.get("status") or {}
        if not groups and rollout.PAUSED_ANNOTATION not in annotations and not previous.get("rollout") and \
                not previous.get("rolloutCoordination"):
            return None
        members = {part.name: self.member(isvc, part) for part in plan.components}
        config = self.reads.config
        inputs = rollout.Inputs(groups=groups, members=members, annotations=annotations, previous=previous,
                                now=self.reads.wall_clock(), default_tolerance=config.rollout_ratio_tolerance,
                                default_ready_timeout=config.rollout_ready_timeout,
                                default_prometheus=config.canary_analysis_prometheus_address,
                                progress_deadline=optional_duration(config.rollout_progress_deadline))
        meta = isvc["metadata"]
        requests = rollout.analysis_requests(inputs, meta["name"], meta["namespace"])
        if requests:
            inputs = attrs.evolve(inputs, samples={r.group: await self.sample(r, inputs.now) for r in requests})
            for request in requests:
                fleet_metrics.canary_analysis_evaluations_total.labels(
                    namespace=meta["namespace"], isvc=meta["name"], component=request.component,
                    result=rollout.verdict(inputs.samples[request.group])).inc()
        outcome = rollout.plan(inputs, meta["name"])
        for component, cause in outcome.rollbacks:
            fleet_metrics.canary_rollback_total.labels(namespace=meta["namespace"], isvc=meta["name"],
                                                       component=component, cause=cause).inc()
        return outcome

    def canary_metrics(self, isvc: Obj, outcome: rollout.Outcome, *, written: bool) -> None:
        """OME's canary metrics from the canary status of this pass: the gauges on every pass (a new leader reports
        them too), the counters only when this pass wrote the status that records a step or a completion."""
        meta = isvc["metadata"]
        old = (isvc.get("status") or {}).get("components") or {}
        series = self._canary_series.setdefault(f"{meta['namespace']}/{meta['name']}", set())
        for figures in fleet_metrics.canary_figures(old if isinstance(old, dict) else {}, outcome.components):
            labels = (meta["namespace"], meta["name"], figures.component)
            if written and figures.steps_advanced:
                fleet_metrics.canary_step_total.labels(*labels).inc(figures.steps_advanced)
            if written and figures.completed:
                fleet_metrics.canary_complete_total.labels(*labels[:2]).inc()
            for gauge, value in ((fleet_metrics.canary_current_step, figures.step),
                                 (fleet_metrics.canary_traffic_weight, figures.weight),
                                 (fleet_metrics.canary_analysis_failed_checks, figures.failed_checks)):
                gauge.labels(*labels).set(value)
                series.add((gauge, labels))
            for metric, last in figures.values.items():
                fleet_metrics.canary_analysis_metric_value.labels(*labels, metric).set(last)
                series.add((fleet_metrics.canary_analysis_metric_value, (*labels, metric)))

    def forget_canary_series(self, key: str) -> None:
        for gauge, labels in self._canary_series.pop(key, set()):
            with contextlib.suppress(KeyError):  # removed already
                gauge.remove(*labels)

    async def sample(self, request: rollout.AnalysisRequest, now: float) -> list[Obj]:
        """One analysis sample: every metric's query, judged."""
        with fleet_metrics.canary_sampler_inflight.track_inprogress():
            return await self._sample(request, now)

    async def _sample(self, request: rollout.AnalysisRequest, now: float) -> list[Obj]:
        results = []
        for metric in request.metrics:
            values: list[float] | None = None
            error: str | None
            if metric.get("templateError"):
                error = str(metric["templateError"])
            elif not request.address:
                error = ("no Prometheus to ask: the canary names no serverAddress and omenative runs "
                         "without --canary-analysis-prometheus-address (metric provider bindings are not "
                         "supported)")
            else:
                values, error = await instant_query(request.address, str(metric["query"]), request.headers)
            results.append(rollout.judge(metric, values, error, now))
        return results

    def member(self, isvc: Obj, part: desired.ComponentPlan) -> rollout.Member:
        reads = self.reads
        meta = isvc["metadata"]
        ir = reads.get(INFERENCE_REPLICAS, meta["namespace"], part.replica["metadata"]["name"])
        status: Obj = (ir or {}).get("status") or {}
        target = current_revision({"spec": part.replica["spec"], "status": status})
        current = naming.revision_hash_of(meta["name"], part.name, status.get("currentRevision"))
        every = list(reads.rows.of(ir).values()) if ir is not None else []
        rows = [r for r in every if r.phase != DELETING]
        stable = current if current and rows else None
        revisions = tuple(((r.target_revision or r.running_revision or ""),
                           r.phase == READY and r.running_revision == (r.target_revision or r.running_revision),
                           r.phase == FAILED) for r in rows)
        update = (part.component.get("lifecycle") or {}).get("updateStrategy") or {}
        strategy = update.get("type")
        partition = (update.get("rollingUpdate") or {}).get("partition") if isinstance(update, dict) else None
        draining = len(every) - len(rows)
        surge_draining = sum(1 for r in rows if r.operation is not None and r.operation.step == slots.SURGE_DRAIN)
        return rollout.Member(
            name=part.name, desired=desired_instances(ir) if ir is not None else part.min_replicas, target=target,
            stable=stable, revisions=revisions, strategy=strategy or rollout.SURGE_THEN_DRAIN,
            serving=int(status.get("servingReplicas") or 0) if ir is not None else None,
            draining=draining, surge_draining=surge_draining,
            partition=partition if isinstance(partition, int) and partition > 0 else 0,
            pairing=pairing_of(part.runners),
            pairings={rev: revision_pairing(reads, meta["namespace"], meta["name"], part.name, rev)
                      for rev in {rev for rev, _, _ in revisions} | ({stable} if stable else set()) if rev})

    # -- migration requests
    async def forward_migrations(self, isvc: Obj, plan: desired.Plan) -> None:
        """Hands each migration request to its component's InferenceReplica (as the same annotation there, which the
        replica's controller records in its status), then removes it from the InferenceService. A request for a
        component the service does not declare is rejected; one for a component not on OMENative stays, as OME
        documents (no InferenceReplica can act on it)."""
        reads, writes = self.reads, self.writes
        meta = isvc["metadata"]
        annotations: dict[str, str] = meta.get("annotations") or {}
        parts = {part.name: part for part in plan.components}
        declared = set(declared_components(isvc.get("spec") or {}))
        rejected: list[Obj] = []
        done: list[str] = []
        for key in migration_request.request_keys(annotations):
            parsed = migration_request.parse(key, annotations[key])
            uuid = migration_request.uuid_of(key)
            if isinstance(parsed, str) or parsed.component not in declared:
                why = parsed if isinstance(parsed, str) else \
                    f"migration request {uuid}: the InferenceService has no {parsed.component}"
                writes.events.event(isvc, "Warning", "MigrationRequestRejected",
                                 f"OMENative migration uuid={uuid} rejected: {why}")
                rejected.append({"id": uuid, "phase": "Failed", "outcome": why, "at": format_time(reads.wall_clock())})
                done.append(key)
                continue
            if parsed.component not in parts:
                continue  # RawDeployment or MultiNode: left for the user to remove
            ir = reads.get(INFERENCE_REPLICAS, meta["namespace"], parts[parsed.component].replica["metadata"]["name"])
            if ir is None or ir["metadata"].get("deletionTimestamp"):
                continue  # not created yet (or going): a later pass hands it over
            recorded = any(isinstance(m, dict) and m.get("requestUUID") == uuid
                           for m in (ir.get("status") or {}).get("migrations") or [])
            if not recorded and (ir["metadata"].get("annotations") or {}).get(key) != annotations[key]:
                await writes.applier.merge_patch(INFERENCE_REPLICAS, ir["metadata"]["name"], meta["namespace"],
                                              {"metadata": {"annotations": {key: annotations[key]}}})
            done.append(key)
        if rejected:
            await migration_audit.record(writes.applier, isvc, meta["namespace"], meta["name"], rejected)
        for key in done:  # only once the replica holds it (or the rejection is recorded)
            await self.consume(isvc, key)

    async def consume(self, isvc: Obj, annotation: str) -> None:
        """Removes an answered request unless it was replaced meanwhile (a newer request is answered next)."""
        await self.writes.applier.remove_annotation(INFERENCE_SERVICES, isvc, annotation)

    async def write(self, refused: list[tuple[str, str, str]], request: Awaitable[Any], obj: Obj) -> Any:
        """Makes one write and returns its result; a refusal that retrying as is cannot fix (a quota, a webhook,
        an invalid or full value) is collected for the status instead of stopping the others (None)."""
        try:
            return await request
        except ApiError as exc:
            if exc.status in (400, 403, 422) or (exc.status == 500 and "allocate" in exc.message):
                refused.append((obj.get("kind") or "object", obj["metadata"]["name"], exc.message))
                log.warning("write refused", kind=obj.get("kind"), name=obj["metadata"]["name"],
                            status=exc.status, message=exc.message)
                return None
            raise

    async def apply_component(self, isvc: Obj, part: desired.ComponentPlan,
                              refused: list[tuple[str, str, str]]) -> None:
        reads, writes = self.reads, self.writes
        meta = part.replica["metadata"]
        key = creations_key(meta["namespace"], part.replica["spec"]["parentRef"]["name"])
        if reads.get(INFERENCE_REPLICAS, meta["namespace"], meta["name"]) is None and (
                meta["name"] not in writes.expectations.pending(key)[0] or writes.expectations.satisfied(key)):
            # Created with the initial Instance count by a one-time write of its own, so that omenative's apply,
            # which never sends spec.replicas while an autoscaler owns it, never fights the autoscaler. Once created,
            # not again until the cache has shown it (a second create would only be refused).
            writes.expectations.expect_creations(key, [meta["name"]])
            await expected(self.write(refused, writes.applier.create(
                INFERENCE_REPLICAS, part.bootstrap, field_manager=BOOTSTRAP_MANAGER), part.replica),
                partial(writes.expectations.creation_observed, key, meta["name"]))
        await self.write(refused, writes.applier.apply(INFERENCE_REPLICAS, part.replica), part.replica)
        children = [child for child in part.children if await self.ours_to_write(isvc, child, refused)]
        await gather_all([self.write(refused, writes.applier.apply(KIND_RESOURCES[child["kind"]], child), child)
                          for child in children])

    async def ours_to_write(self, isvc: Obj, child: Obj, refused: list[tuple[str, str, str]]) -> bool:
        """An autoscaler is never taken over (OME's "is not controlled by expected owner"): a HorizontalPodAutoscaler
        or ScaledObject of the user's under the name omenative would use stays theirs, and the component says so
        until it is deleted or renamed, or the class is External. Ours is in the cache (labelled); only an
        autoscaler the cache does not hold is read, once per pass until ours exists."""
        resource = KIND_RESOURCES[child["kind"]]
        if resource not in AUTOSCALERS:
            return True
        meta = child["metadata"]
        found = self.reads.get(resource, meta["namespace"], meta["name"])
        if found is None:
            try:
                found = await self.writes.applier.read(resource, meta["name"], meta["namespace"])
            except ApiError as exc:
                if exc.status not in (401, 403):
                    raise
                # Not allowed to look (an RBAC narrower than the manifests'): not written blind over a user's.
                refused.append((child["kind"], meta["name"], f"cannot tell whether {child['kind']} {meta['name']} is "
                                f"the user's: {exc.message}"))
                return False
        if found is None:
            return True
        if objects.controlled_by(found, isvc["metadata"]["uid"]):
            return True
        refused.append((child["kind"], meta["name"], (
            f"{child['kind']} {meta['namespace']}/{meta['name']} is not controlled by expected owner InferenceService "
            f"{isvc['metadata']['name']}: omenative does not take over an autoscaler it did not create; delete or "
            "rename it, or set the component's autoscaler.class to External to keep it")))
        return False

    async def clean_up(self, isvc: Obj, plan: desired.Plan) -> None:
        """Deletes what this InferenceService created for a component it no longer declares, an autoscaler its
        component no longer uses, and the entry Service or HTTPRoute that ingress creation no longer calls for.
        Only objects it owns are touched."""
        reads, writes = self.reads, self.writes
        uid = isvc["metadata"]["uid"]
        key = f"{isvc['metadata']['namespace']}/{isvc['metadata']['name']}"
        declared = set(declared_components(isvc.get("spec") or {}))
        wanted = {(child["kind"], child["metadata"]["name"]) for part in plan.components
                  for child in [part.replica, *part.children]}
        if plan.entry is not None:
            wanted.add(("Service", plan.entry["metadata"]["name"]))
        if plan.ingress.route is not None:
            wanted.add(("HTTPRoute", plan.ingress.route["metadata"]["name"]))
        optional = {PODMONITORS: reads.podmonitors_cached, SCALED_OBJECTS: reads.scaledobjects_cached,
                    HTTPROUTES: reads.httproutes_cached}
        for resource in OWNED:
            if resource in optional and not optional[resource]():
                continue  # no CRD, no cache: nothing of the kind to clean up
            for obj in reads.by_index(resource, BY_ISVC, key):
                meta = obj["metadata"]
                if not objects.controlled_by(obj, uid):
                    continue
                component = (meta.get("labels") or {}).get(c.LABEL_COMPONENT)
                if (resource.kind, meta["name"]) in wanted:
                    continue
                stale_component = component in c.COMPONENTS and component not in declared
                stale_autoscaler = resource in AUTOSCALERS and component in declared
                # The entry Service while an HTTPRoute fronts the service, the HTTPRoute once ingress is off.
                stale_entry = component == c.COMPONENT_EXTERNAL_SERVICE
                if stale_component or stale_autoscaler or stale_entry:
                    log.info("deleting what a removed component left", kind=resource.kind, name=meta["name"])
                    await writes.applier.delete(resource, obj, propagation_policy="Background")
