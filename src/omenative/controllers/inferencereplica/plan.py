"""The InferenceReplica planner: from the replica, its Instances' rows and their pods, the next rows and what to say.

Pure: everything it needs comes in `ReplicaView` (the caller reads the caches and the clock), and it returns a
`ReplicaPlan` (the status to write, events to record, requests answered, when to look again). It owns the
Instances' lifecycle, as OME's concepts/omenative/instances.md and instance-restart-policy.md describe it:
- scale: new Instances at the lowest free index; scale-down removes Instances that are not Ready first, then the
  highest index;
- readiness: an Instance is Ready once every pod serves and has been Ready for minReadySeconds;
- repair: under `None` a lost or Failed pod is replaced alone (same incarnation); under
  `RecreateInstanceOnPodRestart` a pod that fails, goes missing or restarts its main container rebuilds the whole
  Instance one incarnation higher; a pod wedged past the stuck-pod grace rebuilds it under either policy, paced by
  `maxUnavailable` (`RepairHeld` while the budget is used up);
- failure: a deadline, a wedged or unschedulable pod fails an operation; retries follow the retry blocks (a
  revision that keeps failing for a reason of its own is held) or, for other causes, a backoff;
- updates: SurgeThenDrain brings a whole new Instance up before the old one drains, RecreatePod recreates in place,
  both paced by their budget; a zero budget stalls with the `Budget` gate, as OME documents;
- operators' requests (`ome.io/reset-instances`, `ome.io/release-held-revision`), answered once;
- counts, revisions, the rollout hold and the conditions of the status.
The Instance controller then makes each Instance's pods match its row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs

from omenative.api import constants as c
from omenative.api import migration_request
from omenative.api.config import ControllerConfig
from omenative.api.defaults import IN_PLACE_ONLY, RECREATE, SURGE_THEN_DRAIN
from omenative.api.events import Event
from omenative.api.naming import MAX_DNS_LABEL
from omenative.api.phases import CREATING, DELETING, FAILED, MIGRATING, PENDING, READY, RESTARTING, UPDATING
from omenative.api.readiness import Serving, replica_ready
from omenative.api.times import format_time, parse_time
from omenative.api.types import (
    Condition,
    InstanceOperation,
    InstanceStatus,
    LastFailure,
    MigrationStatus,
    RetryBlock,
    RolloutHold,
)
from omenative.api.units import format_duration, optional_duration, resolve_int_or_percent
from omenative.controllers.inferencereplica import migration, requests
from omenative.controllers.inferencereplica.retry import HELD, RetryBlocks, RetryPolicy, counts
from omenative.observe.pods import PodFacts
from omenative.observe.refusals import FORBIDDEN, QUOTA_EXCEEDED, Refusal

RETRY_MAX_SECONDS = 600.0
UNSCHEDULABLE = "Unschedulable"  # an operation's `waiting`: the scheduler cannot place a pod (the clock stops)
PAUSED = "Paused"  # an operation's `waiting`: the InferenceService's rollout is paused (the clock stops)
PODGROUP_TERMINATING = "PodGroupTerminating"  # `waiting`: the PodGroup of an earlier attempt is still going
REFUSED_WAITS = (QUOTA_EXCEEDED, FORBIDDEN)  # `waiting`: the API server refuses the pods, until it no longer does
NODE_UNKNOWN = "NodeUnknown"  # `waiting`: a pod the Instance must replace is on a node that stopped reporting
SOURCE_UNROUTED = "SourceUnrouted"  # `waiting` of a surge source out of rotation before its drain (clock runs)
ALL_POD_READY = "AllPodReady"


@attrs.frozen(kw_only=True)
class ReplicaView:
    component: str
    replicas: int  # desired Instances
    pods_per_instance: int
    update_revision: str  # the hash of the runners being rolled out
    restart_policy: str
    ready_timeout: float | None
    min_ready_seconds: int
    max_unavailable: int | str | None  # the budget in effect: None sets no limit
    multi_pod: bool
    podgroup_crd: bool
    rows: list[InstanceStatus]
    pods: dict[int, list[PodFacts]]  # by Instance index, every pod (any incarnation, terminating too)
    now: float
    deleting: bool = False  # the InferenceReplica is being deleted: every Instance drains
    update_strategy: str = SURGE_THEN_DRAIN
    max_surge: int | str | None = "25%"  # None sets no limit
    ready_policy: str = ALL_POD_READY  # None is allowed for single-pod Instances only, where it is the same
    config: ControllerConfig = attrs.field(factory=ControllerConfig)
    revision_prefix: str = ""  # "{isvc}-{component}-": a revision's name is the prefix and its hash
    was_ready: bool = True  # the written status says Ready=True
    retry_blocks: list[RetryBlock] = attrs.field(factory=list)
    retry_policy: RetryPolicy = attrs.field(factory=RetryPolicy)
    rollout_hold: RolloutHold | None = None  # as last written
    reset_request: str | None = None
    release_request: str | None = None
    who: str = ""  # "InferenceReplica {namespace}/{name} component={component}", for the requests' events
    # Set by the InferenceService's rollout group (spec.pacing) and its pause (spec.paused, spec.pauseMode).
    partition: int = 0  # outdated Instances kept on their revision, the lowest indexes
    pacing_budget: int | str | None = None  # Instances moving at once, on top of the strategy's own budget
    paused: bool = False  # no update, create or rebuild starts; a surge does not drain its source; clocks stop
    freeze: bool = False  # paused, and no repair starts either
    # Migration: requests forwarded onto the replica (annotation key, value), its records, the component's
    # lifecycle.migrationPolicy.mode and the controller's caps.
    migration_requests: tuple[tuple[str, str], ...] = ()
    migrations: list[MigrationStatus] = attrs.field(factory=list)
    migration_mode: str = "Auto"
    migration_caps: migration.Caps = attrs.field(factory=migration.Caps)
    # Creates the API server refused, by Instance index (as the Instance controller last saw them), and the
    # Instances whose PodGroup from an earlier attempt is still being deleted.
    refusals: Mapping[int, Refusal] = attrs.field(factory=dict)
    podgroups_terminating: frozenset[int] = frozenset()
    unknown_nodes: frozenset[str] = frozenset()  # nodes of the replica's pods whose Ready is not True
    # (Instances asked for, a pod name the count would give) when the count was capped to what the names allow
    # (`replicas` is the cap): a write to /scale that the webhook did not judge.
    capped: tuple[int, str] | None = None

    def revision_name(self, revision: str | None) -> str:
        return f"{self.revision_prefix}{revision or ''}"


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
    wake_in: float | None  # seconds until a deadline, backoff or grace period may change the plan
    retry_blocks: list[RetryBlock] = attrs.field(factory=list)
    rollout_hold: RolloutHold | None = None
    answered: tuple[str, ...] = ()  # request annotations answered by this plan, to remove once it is written
    migrations: list[MigrationStatus] = attrs.field(factory=list)
    audit: list[dict[str, object]] = attrs.field(factory=list)  # audit history rows to upsert before the status


@attrs.frozen
class InstanceFacts:
    """What an Instance's pods of its current incarnation show."""

    pods: list[PodFacts]  # current incarnation, not terminating, not ended
    ended: list[PodFacts]  # current incarnation, not terminating, phase Failed or Succeeded
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

    def any_serving(self) -> bool:
        return any(p.serving for p in self.pods)


def instance_facts(row: InstanceStatus, pods: list[PodFacts], desired: int) -> InstanceFacts:
    current = [p for p in pods if p.incarnation == row.incarnation and not p.terminating and not p.orphan]
    stale = [p for p in pods if p.incarnation != row.incarnation or p.terminating or p.orphan]
    return InstanceFacts([p for p in current if not p.terminal], [p for p in current if p.terminal], stale, desired)


def _operation(kind: str, step: str, now: float, timeout: float | None, revision: str, reason: str,
               retries: int = 0, strategy: str | None = None) -> InstanceOperation:
    return InstanceOperation(
        type=kind, step=step, started_at=format_time(now), target_revision=revision, reason=reason,
        deadline=format_time(now + timeout) if timeout else None, retry_count=retries or None, strategy=strategy)


def _failure(pod: PodFacts | None, container: str | None, reason: str, exit_code: int | None, message: str,
             now: float) -> LastFailure:
    return LastFailure(pod_name=pod.name if pod else None, container_name=container, reason=reason,
                       exit_code=exit_code, message=message[:512], time=format_time(now))


def _budget(value: int | str | None, desired: int) -> int | None:
    """A budget as a number of Instances; None sets no limit (a zero stays zero: the rollout stalls)."""
    if value is None:
        return None
    return resolve_int_or_percent(value, desired) or 0


@attrs.define
class _Planner:
    view: ReplicaView
    blocks: RetryBlocks
    events: list[Event] = attrs.field(factory=list)
    wakes: list[float] = attrs.field(factory=list)
    out_of_service: int = 0  # Instances restarting or recreated for an update: what maxUnavailable caps
    hold: tuple[str, str] | None = None  # (gate, reason) of the rollout, when it could not move
    advanced: bool = False  # an update or retry started in this pass
    surges: set[int] = attrs.field(factory=set)  # Instances that are the surge of a migration still running

    def wake_at(self, when: float | None) -> None:
        if when is not None and when > self.view.now and when != math.inf:
            self.wakes.append(when - self.view.now)

    def event(self, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(type=type_, reason=reason, message=message))

    def prefix(self, row: InstanceStatus) -> str:
        return f"OMENative component={self.view.component} instance={row.index}"

    def held(self, gate: str, reason: str) -> None:
        if self.hold is None:
            self.hold = (gate, reason)

    # -- what the pods say
    def settled(self, facts: InstanceFacts) -> bool:
        """Every pod serves and has been Ready for minReadySeconds (the Instance may turn Ready)."""
        view = self.view
        if not facts.serving():
            return False
        if view.min_ready_seconds <= 0 or facts.available(view.now, view.min_ready_seconds):
            return True
        since = max((p.ready_since for p in facts.pods if p.ready_since is not None), default=view.now)
        self.wake_at(since + view.min_ready_seconds)
        return False

    def restart_cause(self, row: InstanceStatus, facts: InstanceFacts) -> tuple[str, LastFailure] | None:
        """Why a Ready Instance must be recreated under RecreateInstanceOnPodRestart, if it must."""
        now = self.view.now
        for pod in facts.ended:
            reason = pod.reason or ("PodFailed" if pod.phase == "Failed" else pod.phase)
            message = f"pod {pod.name} failed: {reason}"
            return message, _failure(pod, None, "PodFailed", None, pod.message or message, now)
        for pod in facts.pods:
            restart = pod.main_restarts()
            baseline = (row.restart_baseline or {}).get(pod.name, 0)
            if restart is not None and restart.restarts > baseline:
                exit_code = f" (exit {restart.exit_code})" if restart.exit_code is not None else ""
                message = (f"pod {pod.name} container {restart.container} restarted after Ready: "
                           f"{restart.reason}{exit_code}")
                return message, _failure(pod, restart.container, restart.reason, restart.exit_code, message, now)
        if facts.present < facts.desired:
            message = (f"gang member lost: {facts.present} of {facts.desired} pods present" if self.view.multi_pod
                       else f"pod count {facts.present} below desired {facts.desired}")
            return message, _failure(None, None, "PodMissing", None, message, now)
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
        if counts(failure.reason) and row.target_revision:
            self.blocks.record_failure(self.view.revision_name(row.target_revision), failure.reason or "")
        retries = (row.operation.retry_count or 0) + 1 if row.operation else 1
        operation = attrs.evolve(row.operation, retry_count=retries) if row.operation else None
        return attrs.evolve(row, phase=FAILED, last_failure=failure, operation=operation,
                            conditions=[Condition(type="Failed", status="True", reason=failure.reason,
                                                  message=message[:512],
                                                  last_transition_time=format_time(self.view.now))])

    def stop_clock(self, row: InstanceStatus, op: InstanceOperation, waiting: str) -> InstanceStatus | None:
        """The operation waits on `waiting` with no deadline (None when it already does)."""
        if op.waiting == waiting and op.deadline is None:
            return None
        return attrs.evolve(row, operation=attrs.evolve(op, waiting=waiting, deadline=None))

    def wait_refused(self, row: InstanceStatus, op: InstanceOperation, waiting: str,
                     refused_at: str) -> InstanceStatus | None:
        """The API server refuses the operation's pods for a cause that clears by itself: the clock stops, and the
        row records when the last refusal came (None when it already says so)."""
        capacity = refused_at if waiting == QUOTA_EXCEEDED else op.capacity_refused_at
        if op.waiting == waiting and op.deadline is None and op.capacity_refused_at == capacity:
            return None
        return attrs.evolve(row, operation=attrs.evolve(op, waiting=waiting, deadline=None,
                                                        capacity_refused_at=capacity))

    def restart_clock(self, row: InstanceStatus, op: InstanceOperation) -> InstanceStatus:
        """The wait is over: the operation gets a full readiness window again."""
        timeout = self.view.ready_timeout
        return attrs.evolve(row, operation=attrs.evolve(
            op, waiting=None, capacity_refused_at=None,
            deadline=format_time(self.view.now + timeout) if timeout else None))

    def check_failure(self, row: InstanceStatus, facts: InstanceFacts) -> InstanceStatus | None:
        """Fails an Instance that is being created, restarted or updated when it cannot finish. While the scheduler
        cannot place a pod, the operation waits with its clock stopped (`waiting: Unschedulable`, no deadline);
        when the hold ends it gets a full window again. Returns the changed row, or None."""
        now = self.view.now
        if facts.serving():
            return None  # an Instance serving at full count is never failed
        op = row.operation
        if self.view.paused and op is not None:
            return self.stop_clock(row, op, PAUSED)  # a pause stops the readiness deadline too
        if op is not None and op.waiting == PAUSED:
            return self.restart_clock(row, op)
        if op is not None and any(p.gates for p in facts.pods):
            # A scheduling gate holds a pod (Kueue, until it admits the Instance's workload): the clock stops, as
            # OME documents, and the row says the Instance is not admitted.
            if op.deadline is None and row.admitted is False:
                return None
            return attrs.evolve(row, admitted=False, operation=attrs.evolve(op, deadline=None))
        if op is not None and row.admitted is False:
            return attrs.evolve(self.restart_clock(row, op), admitted=None)  # admitted: a full window from now
        refusal = self.view.refusals.get(row.index or 0)
        if refusal is not None and refusal.incarnation == (row.incarnation or 1):
            if refusal.lasting:  # only a new revision (or the namespace's return) helps: fail now, not at the deadline
                message = refusal.summary()
                return self.fail(row, _failure(None, None, refusal.cause, None, message, now), message)
            if op is not None:
                # When the refusals began, not the latest one: a quota that stays full must not rewrite the status
                # at every retry.
                return self.wait_refused(row, op, refusal.cause, format_time(refusal.since))
        elif op is not None and op.waiting in REFUSED_WAITS:
            return self.restart_clock(row, op)  # the pods are accepted again: a full window from now
        if op is not None and (row.index or 0) in self.view.podgroups_terminating:
            return self.stop_clock(row, op, PODGROUP_TERMINATING)
        if op is not None and op.waiting == PODGROUP_TERMINATING:
            return self.restart_clock(row, op)
        if op is not None and any(p.node in self.view.unknown_nodes for p in facts.stale if p.node):
            # The pod it must replace cannot go until its node reports again (or the node is removed): its name,
            # and so the new pod, wait. Not the Instance's fault: the clock stops.
            return self.stop_clock(row, op, NODE_UNKNOWN)
        if op is not None and op.waiting == NODE_UNKNOWN:
            return self.restart_clock(row, op)
        stuck = self.wedged(facts)
        if stuck is not None:
            message, failure = stuck
            return self.fail(row, failure, message)
        refused = self.unschedulable(facts)
        if refused is not None:
            message = f"pod {refused.name} unschedulable: {refused.unschedulable_message or 'no node fits'}"
            return self.fail(row, _failure(refused, None, "Unschedulable", None, message, now), message)
        if op is not None and any(p.unschedulable_since is not None for p in facts.pods):
            return self.stop_clock(row, op, UNSCHEDULABLE)
        if op is not None and op.waiting == UNSCHEDULABLE:
            return self.restart_clock(row, op)
        deadline = parse_time(op.deadline) if op else None
        if deadline is not None:
            if now >= deadline:
                reason = "ContainersNotReady" if facts.present >= facts.desired and not facts.ready() else \
                    "ReadinessGateNotSatisfied" if facts.present >= facts.desired else "DeadlineExceeded"
                message = f"not ready within the instanceReadyTimeout ({facts.present}/{facts.desired} pods present)"
                return self.fail(row, _failure(None, None, reason, None, message, now), message)
            self.wake_at(deadline)
        return None

    def ready(self, row: InstanceStatus, facts: InstanceFacts, *, restarted: bool) -> InstanceStatus:
        baseline = {p.name: r.restarts for p in facts.pods if (r := p.main_restarts()) is not None}
        if restarted:
            self.event("Normal", "RestartCompleted",
                       f"{self.prefix(row)} restart completed (incarnation={row.incarnation})")
        if row.target_revision:
            self.blocks.succeeded(self.view.revision_name(row.target_revision))
        announced = [a for a in row.announced or [] if not a.startswith(requests.RESET_MARKER)] or None
        return attrs.evolve(row, phase=READY, operation=None, conditions=None, restart_baseline=baseline or None,
                            running_revision=row.target_revision, announced=announced, admitted=None)

    def announce_once(self, row: InstanceStatus, marker: str, type_: str, reason: str,
                      message: str) -> InstanceStatus:
        """An event raised once per episode, remembered in the row so a restarted controller does not repeat it."""
        if marker in (row.announced or []):
            return row
        self.event(type_, reason, message)
        return attrs.evolve(row, announced=[*(row.announced or []), marker])

    def restart(self, row: InstanceStatus, message: str, failure: LastFailure) -> InstanceStatus:
        incarnation = (row.incarnation or 1) + 1
        self.event("Warning", "RestartTriggered",
                   f"{self.prefix(row)} restart triggered: {message} (incarnation={incarnation})")
        self.out_of_service += 1
        return attrs.evolve(row, phase=RESTARTING, incarnation=incarnation, last_failure=failure, restart_baseline=None,
                            announced=None, operation=_operation("Restart", "Drain", self.view.now,
                                                                 self.view.ready_timeout, row.target_revision or "",
                                                                 message))

    def repair_budget_left(self) -> tuple[bool, str]:
        budget = _budget(self.view.max_unavailable, max(self.view.replicas, 1))
        if budget is None or self.out_of_service < budget:
            return True, ""
        return False, (f"per-Component unavailability budget {budget} exhausted "
                       f"(would become {self.out_of_service + 1})")

    def step_ready(self, row: InstanceStatus, facts: InstanceFacts) -> InstanceStatus:
        view, now = self.view, self.view.now
        stuck = self.wedged(facts)  # asked even when another cause wins: it also schedules the next look
        if view.freeze:
            stuck = None  # a frozen rollout starts no repair (the kubelet still restarts containers)
        if view.restart_policy == RECREATE and not view.freeze:
            cause = self.restart_cause(row, facts)
            if cause is not None:
                return self.restart(row, *cause)  # restarts the policy starts wait for no budget
        if stuck is not None:
            allowed, why = self.repair_budget_left()
            if allowed:
                return self.restart(row, *stuck)
            message, _ = stuck
            return self.announce_once(row, f"RepairHeld@{row.incarnation or 1}", "Warning", "RepairHeld",
                                      f"{self.prefix(row)} repair held: {message}; gate Budget: {why}")
        if view.restart_policy != RECREATE and facts.present < facts.desired:
            if facts.present == 0:
                return attrs.evolve(row, phase=PENDING)
            if view.paused:
                return row  # a lost pod is replaced once the pause ends
            lost = [p.name for p in facts.ended] or [f"{facts.desired - facts.present} missing"]
            return attrs.evolve(row, phase=CREATING, operation=_operation(
                "Create", "CreatePods", now, view.ready_timeout, row.target_revision or view.update_revision,
                f"replace lost pod(s): {', '.join(lost)}"))
        return row

    def rebuild(self, row: InstanceStatus, reason: str) -> InstanceStatus | None:
        """Starts a Failed Instance over on the update revision when its retry block allows; None while it waits."""
        view = self.view
        revision = view.update_revision
        name = view.revision_name(revision)
        wait = self.blocks.wait_until(name)
        if wait is not None:
            self.held(HELD if self.blocks.state(name) == HELD else "RetryBlock",
                      f"revision {name} is {self.blocks.state(name)}")
            self.wake_at(wait)
            return None
        self.blocks.start_attempt(name)
        self.advanced = True
        retries = (row.operation.retry_count or 1) if row.operation else 0
        return attrs.evolve(row, phase=CREATING, incarnation=(row.incarnation or 1) + 1, conditions=None,
                            target_revision=revision, restart_baseline=None,
                            announced=[a for a in row.announced or [] if not a.startswith(requests.RESET_MARKER)]
                            or None,
                            operation=_operation("Create", "CreatePods", view.now, view.ready_timeout, revision,
                                                 reason, retries))

    def step_failed(self, row: InstanceStatus, facts: InstanceFacts) -> InstanceStatus:
        view, now = self.view, self.view.now
        if self.settled(facts):
            return self.ready(row, facts, restarted=False)
        if view.paused:
            return row  # a rebuild is a create: it waits for the resume
        if requests.waiting_for_rebuild(row):
            return self.rebuild(row, "reset at operator request") or row
        op = row.operation
        if row.target_revision != view.update_revision:
            return self.rebuild(row, "new revision") or row  # a new revision reaches it
        if op is not None and op.type == "Restart":
            return row  # kept for inspection until a reset or a new revision
        if row.last_failure is not None and counts(row.last_failure.reason):
            return self.rebuild(row, "retry after failure") or row  # the retry block paces it
        retries = (op.retry_count or 1) if op else 1
        failed_at = parse_time(row.last_failure.time) if row.last_failure else now
        backoff = min(view.retry_policy.backoff * 2 ** max(retries - 1, 0), RETRY_MAX_SECONDS)
        retry_at = (failed_at or now) + backoff
        if now < retry_at:
            self.wake_at(retry_at)
            return row
        return self.rebuild(row, "retry after failure") or row

    def step(self, row: InstanceStatus, facts: InstanceFacts) -> InstanceStatus:
        view, now = self.view, self.view.now
        phase = row.phase
        if phase == DELETING:
            return self.check_drain(row, facts)
        if phase == UPDATING and row.operation is not None and row.operation.step == "Surge":
            return row  # a surge source: settled with its replacement in `settle_surges`
        if phase == MIGRATING or (phase == FAILED and row.index in self.surges):
            return row  # a migration's source, or its failed surge: the migration settles them
        if phase == CREATING and row.target_revision != view.update_revision and not view.paused and \
                (row.operation is None or row.operation.type == "Create") and not facts.any_serving():
            # Not up yet and already outdated: start it over on the new revision.
            return attrs.evolve(row, incarnation=(row.incarnation or 1) + 1, target_revision=view.update_revision,
                                operation=_operation("Create", "CreatePods", now, view.ready_timeout,
                                                     view.update_revision, "new revision"))
        if phase in (CREATING, RESTARTING, UPDATING):
            if self.settled(facts):
                if phase != CREATING:
                    self.out_of_service -= 1  # back in service: its place in the budget frees up
                return self.ready(row, facts, restarted=phase == RESTARTING)
            return self.check_failure(row, facts) or row
        if phase == READY:
            return self.step_ready(row, facts)
        if phase == PENDING and not view.paused:
            return attrs.evolve(row, phase=CREATING, operation=_operation(
                "Create", "CreatePods", now, view.ready_timeout, row.target_revision or view.update_revision,
                "pods lost"))
        if phase == FAILED:
            return self.step_failed(row, facts)
        return row

    def check_drain(self, row: InstanceStatus, facts: InstanceFacts) -> InstanceStatus:
        """A Deleting Instance past its drain deadline raises DrainOverdue once; the drain goes on."""
        deadline = parse_time(row.operation.deadline) if row.operation else None
        if deadline is None:
            return row
        if self.view.now < deadline:
            self.wake_at(deadline)
            return row
        left = [*facts.pods, *facts.ended, *facts.stale]
        terminating = [p.name for p in left if p.terminating]
        draining = [p.name for p in left if not p.terminating]
        parts = []
        if terminating:
            parts.append(f"{len(terminating)} pod(s) still Terminating ({', '.join(terminating)})")
        if draining:
            parts.append(f"{len(draining)} pod(s) still draining ({', '.join(draining)})")
        message = (f"OMENative component={self.view.component} instance={row.index}: drain overdue by "
                   f"{format_duration(self.view.now - deadline)} (deadline {format_time(deadline)}); "
                   + "; ".join(parts or ["no pod left"]))
        return self.announce_once(row, f"DrainOverdue@{row.incarnation or 1}", "Warning", "DrainOverdue", message)

    def delete(self, row: InstanceStatus, reason: str) -> InstanceStatus:
        """The Instance drains and goes (its pods leave rotation first)."""
        return attrs.evolve(row, phase=DELETING, operation=_operation(
            "Delete", "Drain", self.view.now, self.view.ready_timeout, row.target_revision or "", reason))

    # -- updates
    def settle_surges(self, rows: dict[int, InstanceStatus]) -> None:
        """A surge source is drained once its replacement is Ready (which waits out minReadySeconds); if the
        replacement fails, the surge is abandoned: the replacement goes and the source keeps serving its revision."""
        now = self.view.now
        for index, source in list(rows.items()):
            op = source.operation
            if source.phase != UPDATING or op is None or op.step != "Surge" or op.surge_index is None:
                continue
            target = rows.get(op.surge_index)
            # The source left rotation before its drain (its pods stopped serving): named, while the clock runs.
            facts = instance_facts(source, self.view.pods.get(index, []), self.view.pods_per_instance)
            unrouted = SOURCE_UNROUTED if not facts.serving() else None
            if op.waiting in (None, SOURCE_UNROUTED) and op.waiting != unrouted:
                source = rows[index] = attrs.evolve(source, operation=attrs.evolve(op, waiting=unrouted))
            if target is not None and target.phase == READY and self.view.paused:
                continue  # paused: old and new pods run side by side until the resume
            if target is not None and target.phase == READY:
                self.event("Normal", "InstanceReplaced", f"{self.prefix(source)} replaced by instance="
                                                         f"{target.index} (revision={target.target_revision})")
                rows[index] = self.delete(source, f"replaced by instance {target.index}")
            elif target is not None and target.phase != DELETING and not self.view.paused and \
                    (target.target_revision or "") != self.view.update_revision:
                # The target moved on (a rollback, a newer revision) before the replacement was Ready: it is not
                # finished for nothing; the source keeps serving, and the next update starts from it.
                self.event("Normal", "GangSurgeAbandoned", (
                    f"{self.prefix(source)} abandoned the surge to instance={op.surge_index} (its revision "
                    f"{target.target_revision} is no longer the target); it keeps serving revision "
                    f"{source.running_revision}"))
                rows[index] = attrs.evolve(source, phase=READY, operation=None)
                rows[op.surge_index] = self.delete(target, "surge superseded")
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

    def surge_failed(self, row: InstanceStatus) -> bool:
        """Whether the row's last failure is that of a surge it abandoned (a pod of its replacement, or no pod at
        all), not one of its own pods failing (a restart it has recovered from, which must not hold its update)."""
        failure = row.last_failure
        if failure is None:
            return False
        own_pods = f"{self.view.revision_prefix}{row.index}-"  # pods are named {isvc}-{component}-{index}-...
        return failure.pod_name is None or not failure.pod_name.startswith(own_pods)

    def surge_slots_held(self, rows: dict[int, InstanceStatus]) -> tuple[int, str]:
        """Surge slots in use: surges in flight, and pods listed beyond their Instances' own (terminating ones until
        their deletion grace elapses, live ones of another incarnation), in whole Instances. Also names a pod."""
        view, now = self.view, self.view.now
        in_flight = sum(1 for r in rows.values() if r.phase == UPDATING and r.operation is not None
                        and r.operation.step == "Surge")
        extra_slots, named = 0, ""
        for index, pods in view.pods.items():
            row = rows.get(index)
            if row is None:
                continue
            drained = row.phase == DELETING and row.operation is not None and \
                (row.operation.reason or "").startswith("replaced by")
            extra: list[PodFacts] = []
            for pod in pods:
                if pod.terminating:
                    if pod.deletion_at is not None and pod.deletion_at > now:
                        extra.append(pod)
                        self.wake_at(pod.deletion_at)
                elif drained or pod.incarnation != row.incarnation:
                    extra.append(pod)
            if extra:
                extra_slots += math.ceil(len(extra) / max(view.pods_per_instance, 1))
                if not named:
                    pod = extra[0]
                    named = (f"Terminating pod {pod.name} still counts against the surge budget until its deletion "
                             "grace elapses" if pod.terminating else
                             f"extra pod {pod.name} holds a surge slot until its drain completes")
        return in_flight + extra_slots, named

    def start_updates(self, rows: dict[int, InstanceStatus], taken: set[int]) -> None:
        """Moves outdated Ready Instances to the update revision, paced by the strategy's budget and the revision's
        retry block; what holds it is remembered as the rollout hold."""
        view, now = self.view, self.view.now
        outdated = [r for r in sorted(rows.values(), key=lambda r: r.index or 0)
                    if r.phase == READY and (r.target_revision or r.running_revision) != view.update_revision]
        if view.paused:
            return  # no update starts while the rollout is paused
        # The rollout group's partition keeps the lowest-indexed outdated Instances on their revision.
        outdated = outdated[max(view.partition, 0):]
        if not outdated:
            return
        desired = max(view.replicas, 1)
        group_budget = _budget(view.pacing_budget, desired)
        if view.update_strategy == IN_PLACE_ONLY:
            for row in outdated:
                marker = f"InPlaceUpdateNotPossible@{view.update_revision}"
                if marker not in (row.announced or []):
                    self.event("Warning", "InPlaceUpdateNotPossible", (
                        f"{self.prefix(row)} rejected update: InPlaceOnly strategy but omenative updates by "
                        "replacing pods; the Instance keeps its revision"))
                    rows[row.index or 0] = attrs.evolve(row, announced=[*(row.announced or []), marker])
            self.held("Budget", "InPlaceOnly refused the change (InPlaceUpdateNotPossible)")
            return
        name = view.revision_name(view.update_revision)
        wait = self.blocks.wait_until(name)
        if wait is not None:
            state = self.blocks.state(name)
            self.held(HELD if state == HELD else "RetryBlock", f"revision {name} is {state}" + (
                f" until {format_time(wait)}" if wait != math.inf else ""))
            self.wake_at(wait)
            return
        one_at_a_time = self.blocks.state(name) is not None  # a block lets one attempt run at a time
        if view.update_strategy == SURGE_THEN_DRAIN:
            budget = _budget(view.max_surge, desired)
            if group_budget is not None:
                budget = group_budget if budget is None else min(budget, group_budget)
            used, named = self.surge_slots_held(rows)
            room = len(outdated) if budget is None else budget - used
            if room <= 0:
                self.held("Budget", f"per-Component surge budget {budget} exhausted (would become {used + 1})"
                          + (f"; {named}" if named else ""))
                return
            for row in outdated[: 1 if one_at_a_time else room]:
                failed_at = parse_time(row.last_failure.time) if row.last_failure is not None and \
                    self.surge_failed(row) else None
                if failed_at is not None and row.last_failure is not None and \
                        row.last_failure.reason not in ("PodMissing", "PodFailed") and \
                        not counts(row.last_failure.reason) and now - failed_at < view.retry_policy.backoff:
                    self.wake_at(failed_at + view.retry_policy.backoff)  # a surge of it just failed: back off
                    self.held("RetryBlock", f"the last surge of instance {row.index} failed "
                                            f"({row.last_failure.reason}); retrying after the backoff")
                    continue
                target = _lowest_free(taken)
                taken.add(target)
                self.blocks.start_attempt(name)
                self.advanced = True
                rows[target] = InstanceStatus(
                    index=target, incarnation=1, phase=CREATING, target_revision=view.update_revision,
                    operation=_operation("Update", "GangSurgeTarget", now, view.ready_timeout, view.update_revision,
                                         f"replaces instance {row.index}", strategy=SURGE_THEN_DRAIN))
                rows[row.index or 0] = attrs.evolve(row, phase=UPDATING, operation=attrs.evolve(
                    _operation("Update", "Surge", now, view.ready_timeout, view.update_revision,
                               f"surge to instance {target}", strategy=SURGE_THEN_DRAIN), surge_index=target))
            return
        # RecreatePod (and InPlaceIfPossible, which omenative carries out by recreating): paced by maxUnavailable.
        budget = _budget(view.max_unavailable, desired)
        if group_budget is not None:
            budget = group_budget if budget is None else min(budget, group_budget)
        room = len(outdated) if budget is None else budget - self.out_of_service
        if room <= 0:
            self.held("Budget", f"per-Component unavailability budget {budget} exhausted "
                                f"(would become {self.out_of_service + 1})")
            return
        for row in outdated[: 1 if one_at_a_time else room]:
            self.blocks.start_attempt(name)
            self.advanced = True
            self.out_of_service += 1
            rows[row.index or 0] = attrs.evolve(
                row, phase=UPDATING, incarnation=(row.incarnation or 1) + 1, target_revision=view.update_revision,
                restart_baseline=None, operation=_operation("Update", "Drain", now, view.ready_timeout,
                                                            view.update_revision, "new revision",
                                                            strategy=view.update_strategy))

    # -- operators' requests
    def answer_requests(self, rows: dict[int, InstanceStatus]) -> tuple[str, ...]:
        view = self.view
        answered: list[str] = []
        if view.release_request is not None:
            names = [view.revision_name(view.update_revision)]
            answer = requests.release(self.blocks, view.release_request, names, view.who)
            self.event(answer.type, answer.reason, answer.message)
            answered.append(requests.RELEASE_ANNOTATION)
        if view.reset_request is not None:
            serving = {i: instance_facts(r, view.pods.get(i, []), view.pods_per_instance).any_serving()
                       for i, r in rows.items()}
            for answer in requests.reset(rows, view.reset_request, serving, view.who):
                self.event(answer.type, answer.reason, answer.message)
            answered.append(requests.RESET_ANNOTATION)
        return tuple(answered)


SLOW_START_INITIAL = 16


def _lowest_free(taken: set[int]) -> int:
    i = 0
    while i in taken:
        i += 1
    return i


def _ready_condition(view: ReplicaView, rows: list[InstanceStatus], counts_: Counts) -> Condition:
    now = format_time(view.now)
    if any(r.phase == FAILED for r in rows):
        return Condition(type="Ready", status="False", reason="InstanceFailed",
                         message="At least one Instance has Phase=Failed", last_transition_time=now)
    live = [r for r in rows if r.phase != DELETING]
    held = [r for r in live if r.running_revision and r.running_revision != view.update_revision]
    if view.partition > 0 and held and len(held) <= view.partition and len(live) >= view.replicas and \
            not any(r.phase != READY for r in live):
        # The rollout group holds these on the prior revision (a canary step), and every other one has moved.
        return Condition(type="Ready", status="True", reason="Staged",
                         message=f"Staged at partition {view.partition}: {counts_.updated}/{len(live)} Instances on "
                                 f"{view.revision_name(view.update_revision)}, {len(held)} held on the prior "
                                 "revision", last_transition_time=now)
    if any(r.phase == UPDATING or (r.running_revision and r.running_revision != view.update_revision) for r in live):
        return Condition(type="Ready", status="Unknown", reason="RolloutInProgress",
                         message=f"Rolling out {view.revision_name(view.update_revision)} ({counts_.updated}/"
                                 f"{len(live)} Instances on target)", last_transition_time=now)
    status, reason, message = replica_ready(Serving(
        desired=view.replicas, total=len(live), ready=counts_.ready, serving=counts_.serving,
        max_unavailable=view.max_unavailable, established=view.was_ready))
    return Condition(type="Ready", status=status, reason=reason, message=message, last_transition_time=now)


def _conditions(view: ReplicaView, rows: list[InstanceStatus], counts_: Counts,
                blocks: RetryBlocks) -> list[Condition]:
    now = format_time(view.now)
    out = [_ready_condition(view, rows, counts_)]
    live = [r for r in rows if r.phase != DELETING]
    rolling = any((r.running_revision or r.target_revision) != view.update_revision or r.phase == UPDATING
                  for r in live)
    failing = [r.index for r in rows if r.phase == FAILED]
    block = blocks.blocks.get(view.revision_name(view.update_revision))
    if rolling and (failing or block is not None):
        detail = f"Instance(s) {', '.join(map(str, failing))} Failed" if failing else \
            f"revision {block.target_revision if block else ''} is {block.state if block else ''} after " \
            f"{block.attempts_started if block else 0} failed attempt(s) ({block.reason if block else ''})"
        out.append(Condition(type="RolloutStalled", status="True", reason="InstancesFailing",
                             message=f"rolling out {view.revision_name(view.update_revision)}: {detail}",
                             last_transition_time=now))
    else:
        out.append(Condition(type="RolloutStalled", status="False", reason="Progressing",
                             message="no Instance is failing on the update revision", last_transition_time=now))
    overdue = [r for r in rows if r.phase == DELETING and r.operation is not None and
               (d := parse_time(r.operation.deadline)) is not None and view.now >= d]
    if overdue:
        out.append(Condition(type="DrainOverdue", status="True", reason="DrainsOverdue",
                             message=f"Instance(s) {', '.join(str(r.index) for r in overdue)} still draining past "
                                     "their deadline", last_transition_time=now))
    else:
        out.append(Condition(type="DrainOverdue", status="False", reason="DrainsWithinDeadline",
                             message="every drain is within its deadline", last_transition_time=now))
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
    if view.migration_caps.configured:
        out.append(Condition(type="MigrationPolicyUnconfigured", status="False", reason="MigrationCapacityConfigured",
                             message="the migration caps are set", last_transition_time=now))
    else:
        out.append(Condition(type="MigrationPolicyUnconfigured", status="True", reason="MigrationCapacityUnconfigured",
                             message="migration requests wait in Accepted until the controller's migration caps "
                                     "(audit.maxMigrationsPerWindow, audit.window, audit.maxInFlightMigrations) are "
                                     "set", last_transition_time=now))
    by_index = {row.index: row for row in rows} if view.refusals else {}
    refused = sorted((index, r) for index, r in view.refusals.items()
                     if (row := by_index.get(index)) is not None and (row.incarnation or 1) == r.incarnation
                     and row.phase != DELETING)
    if refused:
        # As the ReplicaSet controller's ReplicaFailure: present while the API server refuses creates, with its words.
        index, first = refused[0]
        more = f" (and Instance(s) {', '.join(str(i) for i, _ in refused[1:])})" if len(refused) > 1 else ""
        out.append(Condition(type="ReplicaFailure", status="True", reason=first.cause,
                             message=f"Instance {index}: {first.summary()}{more}"[:1024], last_transition_time=now))
    elif view.capped is not None:
        asked, longest = view.capped
        out.append(Condition(type="ReplicaFailure", status="True", reason="NameTooLong", message=(
            f"spec.replicas {asked} capped at {view.replicas}: more Instances would give pods names longer than "
            f"{MAX_DNS_LABEL} characters (such as {longest!r})"), last_transition_time=now))
    if view.ready_timeout is None:
        out.append(Condition(type="InstanceReadyTimeoutUnconfigured", status="True",
                             reason="InstanceReadyTimeoutUnconfigured",
                             message="no instanceReadyTimeout is set: an Instance that never becomes ready waits "
                                     "instead of failing", last_transition_time=now))
    else:
        out.append(Condition(type="InstanceReadyTimeoutUnconfigured", status="False",
                             reason="InstanceReadyTimeoutConfigured",
                             message=f"Instance readiness deadline is {format_duration(view.ready_timeout)}",
                             last_transition_time=now))
    return out


def _rollout_hold(view: ReplicaView, planner: _Planner) -> RolloutHold | None:
    if planner.hold is None or planner.advanced:
        return None
    gate, reason = planner.hold
    target = view.revision_name(view.update_revision)
    old = view.rollout_hold
    since = old.since if old is not None and old.gate == gate and old.target == target and old.since else \
        format_time(view.now)
    return RolloutHold(gate=gate, reason=reason, target=target, since=since)


def plan(view: ReplicaView) -> ReplicaPlan:
    # A block is kept only while its revision is the one being rolled out: a new revision replaces a held one.
    blocks = RetryBlocks.of(view.retry_blocks, view.retry_policy, view.now,
                            {view.revision_name(view.update_revision)})
    planner = _Planner(view, blocks)
    planner.surges = {r.surge_instance for r in migration_request.active(view.migrations)
                      if r.surge_instance is not None}
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

    # Operators' requests come first: a reset Instance is rebuilt in the same pass when nothing holds it.
    answered = planner.answer_requests(rows)

    # Lifecycle of every Instance. Instances already out of service count against the repair budget.
    planner.out_of_service = sum(1 for r in rows.values() if r.phase == RESTARTING or (
        r.phase == UPDATING and r.operation is not None and r.operation.step != "Surge"))
    next_rows: dict[int, InstanceStatus] = {}
    for index, row in sorted(rows.items()):
        facts = instance_facts(row, view.pods.get(index, []), view.pods_per_instance)
        if row.phase == DELETING and not view.pods.get(index):
            continue  # drained and gone
        next_rows[index] = planner.step(row, facts)

    # Migrations: requests become records; the running one moves on (one per component at a time).
    moves = migration.Migrations(planner, list(view.migrations), list(view.migration_requests),
                                 view.migration_mode, view.migration_caps)
    moves.take_requests(next_rows)
    moves.step(next_rows, set(next_rows) | set(view.pods))
    records = moves.prune()
    moving = {r.surge_instance for r in migration_request.active(records)
              if r.surge_instance is not None
              and r.phase in (migration_request.SURGE_PENDING, migration_request.SURGE_READY)}

    # Updates: replacements that came up drain their sources; outdated Instances start moving.
    planner.settle_surges(next_rows)
    taken = set(next_rows) | set(view.pods)
    if not view.deleting:
        planner.start_updates(next_rows, taken)
    for block in blocks.held:
        planner.event("Warning", "RetryHeld", (
            f"{view.who} update to revision {block.target_revision} held after {block.attempts_started} failed "
            f"attempt(s) (last failure: {block.reason}); publish a corrected revision or raise "
            "lifecycle.updateRetry limits"))

    # Scale to the desired number of Instances (none while the replica itself is being deleted). A surge's
    # replacement stands in for its source, so the pair counts once.
    targets = {r.operation.surge_index for r in next_rows.values()
               if r.phase == UPDATING and r.operation is not None and r.operation.surge_index is not None}
    active = [r for r in next_rows.values() if r.phase != DELETING and r.index not in targets
              and r.index not in moving]
    missing = (0 if view.deleting else view.replicas) - len(active)
    if view.paused and missing > 0:
        missing = 0  # no new Instance starts while the rollout is paused (scale-down goes ahead)
    # Slow start (the ReplicaSet controller's): Instances still waiting for their pods to be created hold back the
    # next ones, and the batch doubles as pods appear, so a refused create (quota, an admission webhook) stalls a
    # handful of Instances instead of thousands. Fleets up to SLOW_START_INITIAL Instances start at once.
    waiting = sum(1 for r in active if r.phase == CREATING
                  and len(view.pods.get(r.index or 0, [])) < view.pods_per_instance)
    allowed = max(SLOW_START_INITIAL, len(active) - waiting) - waiting
    for _ in range(max(min(missing, allowed), 0)):
        index = _lowest_free(taken)
        taken.add(index)
        row = InstanceStatus(index=index, incarnation=1, phase=CREATING, target_revision=view.update_revision,
                             operation=_operation("Create", "CreatePods", view.now, view.ready_timeout,
                                                  view.update_revision, "scale up"))
        next_rows[index] = row
    if missing < 0:
        # Remove what serves least first: Instances not Ready, then the highest index; a handover pair last.
        # A migrating Instance and its surge are kept.
        keep = [r for r in active if r.phase != MIGRATING and r.index not in planner.surges | moving]
        victims = sorted(keep, key=lambda r: (r.phase == UPDATING, r.phase == READY, -(r.index or 0)))[: -missing]
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
    counts_ = Counts(replicas=len(final), ready=ready, serving=serving, available=available, updated=updated,
                     updated_ready=updated_ready)
    running = [r.running_revision for r in final if r.running_revision]
    current = view.update_revision if not running or all(r == view.update_revision for r in running) else \
        max(set(running), key=running.count)
    return ReplicaPlan(rows=final, counts=counts_, current_revision=current,
                       conditions=_conditions(view, final, counts_, blocks), events=planner.events,
                       wake_in=min(planner.wakes) if planner.wakes else None, retry_blocks=blocks.to_list(),
                       rollout_hold=_rollout_hold(view, planner), answered=answered + tuple(moves.answered),
                       migrations=records, audit=moves.audit)
