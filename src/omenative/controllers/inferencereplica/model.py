"""The InferenceReplica planner's input (`ReplicaView`: the replica, its Instances' rows and their pods, as the
controller read them) and output (`ReplicaPlan`: the rows and status to write, the events, when to look again), and
the `waiting` tokens an operation's clock stops on. Pure."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from omenative.api import constants as c
from omenative.api.config import ControllerConfig
from omenative.api.defaults import SURGE_THEN_DRAIN
from omenative.api.events import Event
from omenative.api.types import Condition, InstanceStatus, MigrationStatus, RetryBlock, RolloutHold
from omenative.controllers.inferencereplica import migration
from omenative.controllers.inferencereplica.retry import RetryPolicy
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
    # Revisions whose Instances reach the update revision by new container images alone (single-pod ones): under
    # InPlaceIfPossible and InPlaceOnly they keep their pod.
    in_place_from: frozenset[str] = frozenset()
    # The nodes the templates of a revision allow, by revision, where they name nodes (a migration off the only one
    # is refused with MigrationNodeAffinityConflict).
    allowed_nodes: Mapping[str, frozenset[str]] = attrs.field(factory=dict)

    def revision_name(self, revision: str | None) -> str:
        return f"{self.revision_prefix}{revision or ''}"

    def single_pod(self, index: int | None, ordinal: int) -> str:
        """The pod of a single-pod Instance in one name slot (`{isvc}-{component}-{index}-default-{ordinal}`: the
        revision prefix is `{isvc}-{component}-`)."""
        return f"{self.revision_prefix}{index}-{c.RUNNER_DEFAULT}-{ordinal}"


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
