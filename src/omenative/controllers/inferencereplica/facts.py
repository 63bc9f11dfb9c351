"""What an Instance's pods of its current incarnation show (present, ready, serving, available), as the planner
judges it. Pure."""

from __future__ import annotations

import attrs

from omenative.api import slots
from omenative.api.types import InstanceStatus
from omenative.observe.pods import PodFacts


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


def instance_facts(row: InstanceStatus, pods: list[PodFacts], desired: int,
                   ordinal: int | None = None) -> InstanceFacts:
    """A single pod counts only in its slot (`ordinal`, by default the one the replica counts: see api.slots); a pod
    in the other slot is a surge's new pod, or a leftover being drained."""
    slot = (slots.counted_ordinal(row) if ordinal is None else ordinal) if desired == 1 else None

    def own(p: PodFacts) -> bool:
        return p.incarnation == row.incarnation and not p.terminating and not p.orphan and \
            (slot is None or p.ordinal == slot)

    current = [p for p in pods if own(p)]
    stale = [p for p in pods if not own(p)]
    return InstanceFacts([p for p in current if not p.terminal], [p for p in current if p.terminal], stale, desired)
