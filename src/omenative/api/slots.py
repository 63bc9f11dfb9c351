"""A single-pod Instance's two pod-name slots (OME's `activeOrdinal`), shared by both planners and `kubectl ome`.

A single pod is named `{isvc}-{component}-{index}-default-{ordinal}`, ordinal 0 or 1. A SurgeThenDrain update of it
keeps the Instance's index: step `Surge` creates the new pod in the other slot while the old one serves, step
`SurgeDrain` drains the old one, and then the row's `activeOrdinal` moves to the new slot. A restart, a RecreatePod
or an in-place update keeps the pod's name, so its slot. Both steps and the slot live in the row, so a restarted
controller carries on from the step it reached. (A leader and its workers surge to a whole new Instance instead.)
"""

from __future__ import annotations

from omenative.api.phases import UPDATING
from omenative.api.types import InstanceStatus

SURGE, SURGE_DRAIN = "Surge", "SurgeDrain"


def active(row: InstanceStatus) -> int:
    return 1 if row.active_ordinal == 1 else 0


def single_surge(row: InstanceStatus) -> bool:
    """A SurgeThenDrain update of a single pod in flight (a gang's surge names the replacement's index instead)."""
    op = row.operation
    return row.phase == UPDATING and op is not None and op.step in (SURGE, SURGE_DRAIN) and op.surge_index is None


def target_ordinal(row: InstanceStatus) -> int:
    """The slot of the pod on the row's target revision: the other one while a single-pod surge is in flight."""
    return 1 - active(row) if single_surge(row) else active(row)


def source_ordinal(row: InstanceStatus) -> int | None:
    """The slot whose pod keeps serving while the new one comes up (step Surge), else None."""
    return active(row) if single_surge(row) and row.operation is not None and row.operation.step == SURGE else None


def counted_ordinal(row: InstanceStatus) -> int:
    """The slot whose pod is the Instance as the replica counts it: the old pod until the new one is up, the new one
    from the drain on."""
    source = source_ordinal(row)
    return source if source is not None else target_ordinal(row)
