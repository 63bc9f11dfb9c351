"""The InferenceReplica planner: from the replica, its Instances' rows and their pods, the next rows and what to say.

Pure: everything it needs comes in `ReplicaView` (the caller reads the caches and the clock), and it returns a
`ReplicaPlan` (the status to write, events to record, when to look again). It owns the Instances' lifecycle:
- scale: new Instances at the lowest free index; scale-down removes Instances that are not Ready first, then the
  highest index;
- phases: Creating -> Ready; Ready -> Restarting when the restart policy says so; Ready -> Pending under the None
  policy when every pod is gone; anything -> Failed on a deadline, a pod stuck past the grace period, or a pod
  unschedulable past its grace period; Failed -> Creating again after a backoff; Deleting -> gone with its pods;
- the incarnation goes up by one each time an Instance's pods are recreated, so a new attempt's pods are never
  mistaken for the last one's;
- counts, revisions and conditions of the status.
The Instance controller then makes each Instance's pods match its row.
"""

from __future__ import annotations

import attrs

from omenative.api import constants as c
from omenative.api.config import ControllerConfig
from omenative.api.defaults import IN_PLACE_ONLY, RECREATE, SURGE_THEN_DRAIN
from omenative.api.types import Condition, InstanceOperation, InstanceStatus, LastFailure
from omenative.api.units import optional_duration, resolve_int_or_percent
from omenative.observe.pods import PodFacts, format_time, parse_time

CREATING, READY, RESTARTING, PENDING, FAILED, DELETING, UPDATING = (
    "Creating", "Ready", "Restarting", "Pending", "Failed", "Deleting", "Updating")
RETRY_BASE_SECONDS = 60.0
RETRY_MAX_SECONDS = 600.0


@attrs.frozen(kw_only=True)
class Event:
    type: str
    reason: str
    message: str


@attrs.frozen(kw_only=True)
class ReplicaView:
    component: str
    replicas: int  # desired Instances
    pods_per_instance: int
    update_revision: str
    restart_policy: str
    ready_timeout: float | None
    min_ready_seconds: int
    max_unavailable: int | str | None
    multi_pod: bool
    podgroup_crd: bool
    rows: list[InstanceStatus]
    pods: dict[int, list[PodFacts]]  # by Instance index, every pod (any incarnation, terminating too)
    now: float
    deleting: bool = False  # the InferenceReplica is being deleted: every Instance drains
    update_strategy: str = SURGE_THEN_DRAIN
    max_surge: int | str | None = "25%"
    config: ControllerConfig = attrs.field(factory=ControllerConfig)


@attrs.frozen(kw_only=True)
class Counts:
    replicas: int = 0
    ready: int = 0
    serving: int = 0
    available: int = 0
    updated: int = 0
    updated_ready: int = 0


@attrs.frozen(kw_only=True)
class ReplicaPlan:
    rows: list[InstanceStatus]
    counts: Counts
    current_revision: str
    conditions: list[Condition]
    events: list[Event]
    wake_in: float | None  # seconds until a deadline or grace period may change the plan


@attrs.frozen
class InstanceFacts:
    """What an Instance's pods of its current incarnation show."""

    pods: list[PodFacts]  # current incarnation, not terminating
    stale: list[PodFacts]  # other incarnations, or terminating
    desired: int

    @property
    def present(self) -> int:
        return len(self.pods)

    def ready(self) -> bool:
        return self.present >= self.desired and all(p.containers_ready for p in self.pods)

    def serving(self) -> bool:
        return self.present >= self.desired and all(p.serving for p in self.pods)

    def available(self, now: float, min_ready_seconds: int) -> bool:
        return self.present >= self.desired and all(p.available(now, min_ready_seconds) for p in self.pods)


def instance_facts(row: InstanceStatus, pods: list[PodFacts], desired: int) -> InstanceFacts:
    current = [p for p in pods if p.incarnation == row.incarnation and not p.terminating]
    stale = [p for p in pods if p.incarnation != row.incarnation or p.terminating]
    return InstanceFacts(current, stale, desired)


def _operation(kind: str, step: str, now: float, timeout: float | None, revision: str, reason: str,
               retries: int = 0) -> InstanceOperation:
    return InstanceOperation(
        type=kind, step=step, started_at=format_time(now), target_revision=revision, reason=reason,
        deadline=format_time(now + timeout) if timeout else None, retry_count=retries or None)


def _failure(pod: PodFacts | None, container: str | None, reason: str, exit_code: int | None, message: str,
             now: float) -> LastFailure:
    return LastFailure(pod_name=pod.name if pod else None, container_name=container, reason=reason,
                       exit_code=exit_code, message=message[:512], time=format_time(now))


@attrs.define
class _Planner:
    view: ReplicaView
    events: list[Event] = attrs.field(factory=list)
    wakes: list[float] = attrs.field(factory=list)

    def wake_at(self, when: float | None) -> None:
        if when is not None and when > self.view.now:
            self.wakes.append(when - self.view.now)

    def event(self, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(type=type_, reason=reason, message=message))

    def prefix(self, row: InstanceStatus) -> str:
        return f"OMENative component={self.view.component} instance={row.index}"

    # -- causes
    def restart_cause(self, row: InstanceStatus, facts: InstanceFacts) -> tuple[str, LastFailure] | None:
        """Why a Ready Instance must be recreated under RecreateInstanceOnPodRestart, if it must."""
        now = self.view.now
        if facts.present < facts.desired:
            message = (f"gang member lost: {facts.present} of {facts.desired} pods present" if self.view.multi_pod
                       else f"pod count {facts.present} below desired {facts.desired}")
            return message, _failure(None, None, "PodMissing", None, message, now)
        for pod in facts.pods:
            if pod.phase == "Failed":
                message = f"pod {pod.name} failed: {pod.reason or 'PodFailed'}"
                return message, _failure(pod, None, "PodFailed", None, pod.message or message, now)
            restart = pod.main_restarts()
            baseline = (row.restart_baseline or {}).get(pod.name, 0)
            if restart is not None and restart.restarts > baseline:
                exit_code = f" (exit {restart.exit_code})" if restart.exit_code is not None else ""
                message = (f"pod {pod.name} container {restart.container} restarted after Ready: "
                           f"{restart.reason}{exit_code}")
                return message, _failure(pod, restart.container, restart.reason, restart.exit_code, message, now)
        return None

    def wedged(self, facts: InstanceFacts) -> tuple[str, LastFailure] | None:
        """A pod stuck waiting (CrashLoopBackOff, ImagePullBackOff, ...) longer than the stuck-pod grace: the
        message and the failure to record."""
        grace = optional_duration(self.view.config.stuck_pod_grace_period)
        if grace is None:
            return None
        for pod in facts.pods:
            if pod.wedged is None:
                continue
            since = pod.created if pod.created is not None else self.view.now
            if self.view.now - since >= grace:
                container, reason, detail = pod.wedged
                message = f"pod {pod.name} container {container} wedged in {reason} past the stuck-pod grace"
                return message, _failure(pod, container, reason, None, detail or message, self.view.now)
            self.wake_at(since + grace)
        return None

    def unschedulable(self, facts: InstanceFacts) -> PodFacts | None:
        grace = optional_duration(self.view.config.unschedulable_grace_period)
        for pod in facts.pods:
            if pod.unschedulable_since is None:
                continue
            if grace is not None and self.view.now - pod.unschedulable_since >= grace:
                return pod
            if grace is not None:
                self.wake_at(pod.unschedulable_since + grace)
        return None

    # -- transitions
    def fail(self, row: InstanceStatus, failure: LastFailure, message: str) -> InstanceStatus:
        self.event("Warning", "InstanceFailed", f"{self.prefix(row)} failed: {message}")
        retries = (row.operation.retry_count or 0) + 1 if row.operation else 1
        operation = attrs.evolve(row.operation, retry_count=retries) if row.operation else None
        return attrs.evolve(row, phase=FAILED, last_failure=failure, operation=operation,
                            conditions=[Condition(type="Failed", status="True", reason=failure.reason,
                                                  message=message[:512],
                                                  last_transition_time=format_time(self.view.now))])

    def check_failure(self, row: InstanceStatus, facts: InstanceFacts) -> InstanceStatus | None:
        """Fails an Instance that is being created or restarted when it cannot finish."""
        now = self.view.now
        if facts.serving():
            return None  # an Instance serving at full count is never failed
        stuck = self.wedged(facts)
        if stuck is not None:
            message, failure = stuck
            return self.fail(row, failure, message)
        refused = self.unschedulable(facts)
        if refused is not None:
            message = f"pod {refused.name} unschedulable: {refused.unschedulable_message or 'no node fits'}"
            return self.fail(row, _failure(refused, None, "Unschedulable", None, message, now), message)
        deadline = parse_time(row.operation.deadline) if row.operation else None
        if deadline is not None:
            if now >= deadline:
                message = f"not ready within the instanceReadyTimeout ({facts.present}/{facts.desired} pods present)"
                return self.fail(row, _failure(None, None, "InstanceReadyTimeout", None, message, now), message)
            self.wake_at(deadline)
        return None

    def ready(self, row: InstanceStatus, facts: InstanceFacts, *, restarted: bool) -> InstanceStatus:
        baseline = {p.name: r.restarts for p in facts.pods if (r := p.main_restarts()) is not None}
        if restarted:
            self.event("Normal", "RestartCompleted",
                       f"{self.prefix(row)} restart completed (incarnation={row.incarnation})")
        return attrs.evolve(row, phase=READY, operation=None, conditions=None, restart_baseline=baseline or None,
                            running_revision=row.target_revision)

    def step(self, row: InstanceStatus, facts: InstanceFacts) -> InstanceStatus:
        view, now = self.view, self.view.now
        phase = row.phase
        if phase == DELETING:
            return row
        if phase == UPDATING and row.operation is not None and row.operation.step == "Surge":
            return row  # a surge source: settled with its replacement in `_settle_surges`
        if phase == CREATING and row.target_revision != view.update_revision and \
                (row.operation is None or row.operation.type == "Create"):
            # Not up yet and already outdated: start it over on the new revision.
            return attrs.evolve(row, incarnation=(row.incarnation or 1) + 1, target_revision=view.update_revision,
                                operation=_operation("Create", "CreatePods", now, view.ready_timeout,
                                                     view.update_revision, "new revision"))
        if phase in (CREATING, RESTARTING, UPDATING):
            if facts.serving():
                return self.ready(row, facts, restarted=phase == RESTARTING)
            return self.check_failure(row, facts) or row
        if phase == READY:
            stuck = self.wedged(facts)  # asked even when another cause wins: it also schedules the next look
            cause = (self.restart_cause(row, facts) if view.restart_policy == RECREATE else None) or stuck
            if cause is not None:
                message, failure = cause
                incarnation = (row.incarnation or 1) + 1
                self.event("Warning", "RestartTriggered",
                           f"{self.prefix(row)} restart triggered: {message} (incarnation={incarnation})")
                return attrs.evolve(
                    row, phase=RESTARTING, incarnation=incarnation, last_failure=failure, restart_baseline=None,
                    operation=_operation("Restart", "Drain", now, view.ready_timeout, row.target_revision or "",
                                         message))
            if view.restart_policy != RECREATE and facts.present == 0:
                return attrs.evolve(row, phase=PENDING)
            return row
        if phase == PENDING:
            return attrs.evolve(row, phase=CREATING, target_revision=view.update_revision, operation=_operation(
                "Create", "CreatePods", now, view.ready_timeout, view.update_revision, "pods lost"))
        if phase == FAILED:
            if facts.serving():
                return self.ready(row, facts, restarted=False)
            retries = (row.operation.retry_count or 1) if row.operation else 1
            failed_at = parse_time(row.last_failure.time) if row.last_failure else now
            backoff = min(RETRY_BASE_SECONDS * 2 ** max(retries - 1, 0), RETRY_MAX_SECONDS)
            retry_at = (failed_at or now) + backoff
            if now < retry_at:
                self.wake_at(retry_at)
                return row
            incarnation = (row.incarnation or 1) + 1
            return attrs.evolve(row, phase=CREATING, incarnation=incarnation, conditions=None,
                                target_revision=view.update_revision,
                                operation=_operation("Create", "CreatePods", now, view.ready_timeout,
                                                     view.update_revision, "retry after failure", retries))
        return row

    def delete(self, row: InstanceStatus, reason: str) -> InstanceStatus:
        """The Instance drains and goes (its pods leave rotation first)."""
        return attrs.evolve(row, phase=DELETING, operation=_operation(
            "Delete", "Drain", self.view.now, self.view.ready_timeout, row.target_revision or "", reason))

    # -- updates
    def settle_surges(self, rows: dict[int, InstanceStatus]) -> None:
        """A surge source is drained once its replacement is Ready; if the replacement fails, the surge is
        abandoned: the replacement goes and the source keeps serving its revision."""
        now = self.view.now
        for index, source in list(rows.items()):
            op = source.operation
            if source.phase != UPDATING or op is None or op.step != "Surge" or op.surge_index is None:
                continue
            target = rows.get(op.surge_index)
            if target is not None and target.phase == READY:
                self.event("Normal", "InstanceReplaced", f"{self.prefix(source)} replaced by instance="
                                                         f"{target.index} (revision={target.target_revision})")
                rows[index] = self.delete(source, f"replaced by instance {target.index}")
            elif target is None or target.phase in (FAILED, DELETING):
                reason = target.last_failure.reason if target is not None and target.last_failure else "gone"
                self.event("Warning", "GangSurgeAbandoned", (
                    f"{self.prefix(source)} abandoned the surge to instance={op.surge_index} ({reason}); it keeps "
                    f"serving revision {source.running_revision}"))
                failure = target.last_failure if target is not None and target.last_failure else \
                    _failure(None, None, "SurgeAbandoned", None, "the replacement Instance failed", now)
                rows[index] = attrs.evolve(source, phase=READY, operation=None, last_failure=failure)
                if target is not None and target.phase != DELETING:
                    rows[op.surge_index] = self.delete(target, "surge abandoned")

    def start_updates(self, rows: dict[int, InstanceStatus], taken: set[int]) -> None:
        """Moves outdated Ready Instances to the update revision, paced by the update strategy's budget."""
        view, now = self.view, self.view.now
        outdated = [r for r in sorted(rows.values(), key=lambda r: r.index or 0)
                    if r.phase == READY and (r.target_revision or r.running_revision) != view.update_revision]
        if not outdated:
            return
        desired = max(view.replicas, 1)
        if view.update_strategy == IN_PLACE_ONLY:
            for row in outdated:
                marker = f"InPlaceUpdateNotPossible@{view.update_revision}"
                if marker not in (row.announced or []):
                    self.event("Warning", "InPlaceUpdateNotPossible", (
                        f"{self.prefix(row)} rejected update: InPlaceOnly strategy but omenative updates by "
                        "replacing pods; the Instance keeps its revision"))
                    rows[row.index or 0] = attrs.evolve(row, announced=[*(row.announced or []), marker])
            return
        if view.update_strategy == SURGE_THEN_DRAIN:
            budget = max(resolve_int_or_percent(view.max_surge, desired) or 0, 1)
            in_flight = sum(1 for r in rows.values() if r.phase == UPDATING)
            for row in outdated[: max(budget - in_flight, 0)]:
                failed_at = parse_time(row.last_failure.time) if row.last_failure else None
                if failed_at is not None and row.last_failure is not None and \
                        row.last_failure.reason != "PodMissing" and now - failed_at < RETRY_BASE_SECONDS:
                    self.wake_at(failed_at + RETRY_BASE_SECONDS)
                    continue  # a surge of this Instance just failed: back off before trying again
                target = _lowest_free(taken)
                taken.add(target)
                rows[target] = InstanceStatus(
                    index=target, incarnation=1, phase=CREATING, target_revision=view.update_revision,
                    operation=_operation("Update", "GangSurgeTarget", now, view.ready_timeout, view.update_revision,
                                         f"replaces instance {row.index}"))
                rows[row.index or 0] = attrs.evolve(row, phase=UPDATING, operation=attrs.evolve(
                    _operation("Update", "Surge", now, view.ready_timeout, view.update_revision,
                               f"surge to instance {target}"), surge_index=target))
            return
        # RecreatePod (and InPlaceIfPossible, which omenative carries out by recreating): paced by maxUnavailable.
        budget = max(resolve_int_or_percent(view.max_unavailable, desired) or 0, 1) \
            if view.max_unavailable is not None else 1
        in_flight = sum(1 for r in rows.values() if r.phase == UPDATING)
        for row in outdated[: max(budget - in_flight, 0)]:
            rows[row.index or 0] = attrs.evolve(
                row, phase=UPDATING, incarnation=(row.incarnation or 1) + 1, target_revision=view.update_revision,
                restart_baseline=None, operation=_operation("Update", "Drain", now, view.ready_timeout,
                                                            view.update_revision, "new revision"))


def _lowest_free(taken: set[int]) -> int:
    i = 0
    while i in taken:
        i += 1
    return i


def _ready_condition(view: ReplicaView, rows: list[InstanceStatus], counts: Counts) -> Condition:
    now = format_time(view.now)
    desired = view.replicas
    if any(r.phase == FAILED for r in rows):
        return Condition(type="Ready", status="False", reason="InstanceFailed",
                         message="At least one Instance has Phase=Failed", last_transition_time=now)
    live = [r for r in rows if r.phase != DELETING]
    if any(r.phase == UPDATING or (r.running_revision and r.running_revision != view.update_revision) for r in live):
        return Condition(type="Ready", status="Unknown", reason="RolloutInProgress",
                         message=f"Rolling out {view.update_revision} ({counts.updated}/{len(live)} Instances on "
                                 "target)", last_transition_time=now)
    if desired == 0:
        return Condition(type="Ready", status="False", reason="NoReplicas",
                         message="InferenceReplica has no desired Instances", last_transition_time=now)
    total = len(live)
    if counts.serving >= desired and counts.ready >= desired:
        return Condition(type="Ready", status="True", reason="AllInstancesReady",
                         message=f"{counts.ready}/{total} Instances Ready", last_transition_time=now)
    budget = resolve_int_or_percent(view.max_unavailable, desired) if view.max_unavailable is not None else 0
    minimum = max(desired - (budget or 0), 0)
    if minimum and counts.serving >= minimum:
        return Condition(type="Ready", status="True", reason="MinimumAvailable",
                         message=f"{counts.serving}/{total} Instances serving (min {minimum})",
                         last_transition_time=now)
    return Condition(type="Ready", status="False", reason="ReplicaCountMismatch",
                     message=f"{counts.serving}/{total} Instances serving, need {minimum or desired} "
                             "(no rollout in flight)", last_transition_time=now)


def _conditions(view: ReplicaView, rows: list[InstanceStatus], counts: Counts) -> list[Condition]:
    now = format_time(view.now)
    out = [_ready_condition(view, rows, counts)]
    if view.multi_pod:
        if view.podgroup_crd:
            out.append(Condition(type="GangSchedulingUnavailable", status="False", reason="GangSchedulingAvailable",
                                 message="each multi-pod Instance gets a PodGroup", last_transition_time=now))
        else:
            out.append(Condition(
                type="GangSchedulingUnavailable", status="True", reason="PodGroupCRDNotInstalled",
                message=f"the scheduler-plugins PodGroup CRD ({c.PODGROUP_CRD}) is not installed, so an Instance's "
                        "pods may be scheduled partially; install it to gang-schedule them",
                last_transition_time=now))
    if view.ready_timeout is None:
        out.append(Condition(type="InstanceReadyTimeoutUnconfigured", status="True",
                             reason="InstanceReadyTimeoutUnconfigured",
                             message="no instanceReadyTimeout is set: an Instance that never becomes ready waits "
                                     "instead of failing", last_transition_time=now))
    else:
        out.append(Condition(type="InstanceReadyTimeoutUnconfigured", status="False",
                             reason="InstanceReadyTimeoutConfigured", message="instanceReadyTimeout is set",
                             last_transition_time=now))
    return out


def plan(view: ReplicaView) -> ReplicaPlan:
    planner = _Planner(view)
    rows = {r.index: r for r in view.rows if r.index is not None}

    # Adopt Instances whose pods exist without a row (a status write that was lost): never orphan a pod.
    for index, pods in view.pods.items():
        if index not in rows and any(not p.terminating for p in pods):
            live = [p for p in pods if not p.terminating]
            incarnation = max(p.incarnation for p in live)
            revision = next((p.revision for p in live if p.incarnation == incarnation), view.update_revision)
            rows[index] = InstanceStatus(index=index, incarnation=incarnation, phase=CREATING,
                                         target_revision=revision, running_revision=revision,
                                         operation=_operation("Create", "CreatePods", view.now, view.ready_timeout,
                                                              revision, "adopted existing pods"))

    # Lifecycle of every Instance.
    next_rows: dict[int, InstanceStatus] = {}
    for index, row in sorted(rows.items()):
        facts = instance_facts(row, view.pods.get(index, []), view.pods_per_instance)
        if row.phase == DELETING and not view.pods.get(index):
            continue  # drained and gone
        next_rows[index] = planner.step(row, facts)

    # Updates: replacements that came up drain their sources; outdated Instances start moving.
    planner.settle_surges(next_rows)
    taken = set(next_rows) | set(view.pods)
    if not view.deleting:
        planner.start_updates(next_rows, taken)

    # Scale to the desired number of Instances (none while the replica itself is being deleted). A surge's
    # replacement stands in for its source, so the pair counts once.
    targets = {r.operation.surge_index for r in next_rows.values()
               if r.phase == UPDATING and r.operation is not None and r.operation.surge_index is not None}
    active = [r for r in next_rows.values() if r.phase != DELETING and r.index not in targets]
    missing = (0 if view.deleting else view.replicas) - len(active)
    for _ in range(max(missing, 0)):
        index = _lowest_free(taken)
        taken.add(index)
        row = InstanceStatus(index=index, incarnation=1, phase=CREATING, target_revision=view.update_revision,
                             operation=_operation("Create", "CreatePods", view.now, view.ready_timeout,
                                                  view.update_revision, "scale up"))
        next_rows[index] = row
    if missing < 0:
        # Remove what serves least first: Instances not Ready, then the highest index; a handover pair last.
        victims = sorted(active, key=lambda r: (r.phase == UPDATING, r.phase == READY, -(r.index or 0)))[: -missing]
        reason = "teardown" if view.deleting else "scale down"
        for row in victims:
            next_rows[row.index or 0] = planner.delete(row, reason)

    # Counts.
    ordered = [next_rows[i] for i in sorted(next_rows)]
    ready = serving = available = updated = updated_ready = 0
    final: list[InstanceStatus] = []
    for row in ordered:
        facts = instance_facts(row, view.pods.get(row.index or 0, []), view.pods_per_instance)
        is_ready = facts.ready()
        is_serving = facts.serving()
        is_available = facts.available(view.now, view.min_ready_seconds)
        counted = row.phase != DELETING
        ready += int(is_ready and counted)
        serving += int(is_serving and counted)
        available += int(is_available and counted)
        on_update = (row.running_revision or row.target_revision) == view.update_revision
        updated += int(on_update and counted)
        updated_ready += int(on_update and is_ready and counted)
        final.append(attrs.evolve(
            row, pod_count=facts.present, serving_pod_count=sum(p.serving for p in facts.pods),
            available_pod_count=sum(p.available(view.now, view.min_ready_seconds) for p in facts.pods)))
    counts = Counts(replicas=len(final), ready=ready, serving=serving, available=available, updated=updated,
                    updated_ready=updated_ready)
    running = [r.running_revision for r in final if r.running_revision]
    current = view.update_revision if not running or all(r == view.update_revision for r in running) else \
        max(set(running), key=running.count)
    return ReplicaPlan(rows=final, counts=counts, current_revision=current,
                       conditions=_conditions(view, final, counts), events=planner.events,
                       wake_in=min(planner.wakes) if planner.wakes else None)
