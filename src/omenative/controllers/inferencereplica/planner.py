"""One pass of the InferenceReplica planner: what it has decided so far (events, wake-ups, the rollout's hold, the
repair budget used) and the small vocabulary every concern shares (an event, a wake-up, an Instance's drain, an
event told once per episode, a new operation or failure). Pure."""

from __future__ import annotations

import math

import attrs

from omenative.api.events import Event
from omenative.api.phases import DELETING
from omenative.api.times import format_time
from omenative.api.types import InstanceOperation, InstanceStatus, LastFailure, MigrationStatus
from omenative.api.units import resolve_int_or_percent
from omenative.controllers.inferencereplica.model import ReplicaView
from omenative.controllers.inferencereplica.retry import RetryBlocks
from omenative.observe.pods import PodFacts


@attrs.define
class ReplicaPlanner:
    view: ReplicaView
    blocks: RetryBlocks
    events: list[Event] = attrs.field(factory=list)
    wakes: list[float] = attrs.field(factory=list)
    out_of_service: int = 0  # Instances restarting or recreated for an update: what maxUnavailable caps
    hold: tuple[str, str] | None = None  # (gate, reason) of the rollout, when it could not move
    advanced: bool = False  # an update or retry started in this pass
    surges: set[int] = attrs.field(factory=set)  # Instances that are the surge of a migration still running
    relocations: list[MigrationStatus] = attrs.field(factory=list)  # Relocated records made in this pass

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

    def announce_once(self, row: InstanceStatus, marker: str, type_: str, reason: str,
                      message: str) -> InstanceStatus:
        """An event raised once per episode, remembered in the row so a restarted controller does not repeat it."""
        if marker in (row.announced or []):
            return row
        self.event(type_, reason, message)
        return attrs.evolve(row, announced=[*(row.announced or []), marker])

    def delete(self, row: InstanceStatus, reason: str) -> InstanceStatus:
        """The Instance drains and goes (its pods leave rotation first)."""
        return attrs.evolve(row, phase=DELETING, operation=new_operation(
            "Delete", "Drain", self.view.now, self.view.ready_timeout, row.target_revision or "", reason))


def new_operation(kind: str, step: str, now: float, timeout: float | None, revision: str, reason: str,
                  retries: int = 0, strategy: str | None = None) -> InstanceOperation:
    return InstanceOperation(
        type=kind, step=step, started_at=format_time(now), target_revision=revision, reason=reason,
        deadline=format_time(now + timeout) if timeout else None, retry_count=retries or None, strategy=strategy)


def new_failure(pod: PodFacts | None, container: str | None, reason: str, exit_code: int | None, message: str,
                now: float) -> LastFailure:
    return LastFailure(pod_name=pod.name if pod else None, container_name=container, reason=reason,
                       exit_code=exit_code, message=message[:512], time=format_time(now))


def budget_of(value: int | str | None, desired: int) -> int | None:
    """A budget as a number of Instances; None sets no limit (a zero stays zero: the rollout stalls)."""
    if value is None:
        return None
    return resolve_int_or_percent(value, desired) or 0


def lowest_free(taken: set[int]) -> int:
    i = 0
    while i in taken:
        i += 1
    return i
