"""Whether a component serves: the one computation behind the InferenceReplica's `Ready` condition and the
InferenceService's `EngineReady`, `DecoderReady` and `RouterReady` (OME's conditions table in
concepts/architecture/deployment-modes.md). Pure.

Both count Instances the same way and use the same minimum: the desired Instances less the component's
`maxUnavailable`, or all of them when it is not set, and never less than one.
"""

from __future__ import annotations

from typing import Any

import attrs

from omenative.api.units import resolve_int_or_percent

JSONDict = dict[str, Any]


def desired_instances(replica: JSONDict) -> int:
    """An InferenceReplica's desired Instances: spec.replicas, where nil or 0 runs one (as the scale subresource
    reads it)."""
    replicas = (replica.get("spec") or {}).get("replicas")
    return int(replicas) if replicas else 1


@attrs.frozen(kw_only=True)
class Serving:
    desired: int  # Instances the component should run
    total: int  # Instances with a row, in any phase but Deleting
    ready: int  # Instances whose pods are all ready
    serving: int  # Instances whose pods are all in rotation
    max_unavailable: int | str | None = None
    # Whether the replica was Ready before: the minimum-available rule tolerates Instances lost after that, but a
    # new replica (or one that fell short) is Ready only once every desired Instance is.
    established: bool = True

    @property
    def minimum(self) -> int:
        budget = resolve_int_or_percent(self.max_unavailable, self.desired) if self.max_unavailable is not None else 0
        return max(self.desired - (budget or 0), 1)

    @property
    def all_ready(self) -> bool:
        return self.desired > 0 and self.serving >= self.desired and self.ready >= self.desired

    @property
    def enough(self) -> bool:
        return self.established and self.serving >= self.minimum


def replica_ready(s: Serving) -> tuple[str, str, str]:
    """The InferenceReplica's `Ready` (status, reason, message) once failures and rollouts were ruled out."""
    if s.desired == 0:
        return "False", "NoReplicas", "InferenceReplica has no desired Instances"
    if s.all_ready:
        return "True", "AllInstancesReady", f"{s.ready}/{s.total} Instances Ready"
    if s.enough:
        return "True", "MinimumAvailable", f"{s.serving}/{s.total} Instances serving (min {s.minimum})"
    return "False", "ReplicaCountMismatch", (f"{s.serving}/{s.total} Instances serving, need {s.minimum} "
                                             "(no rollout in flight)")


def component_ready(s: Serving) -> tuple[bool, str, str]:
    """The InferenceService's `<Component>Ready` (status, reason, message)."""
    if s.desired == 0:
        return False, "NoReplicas", "Component has no desired Instances"
    if s.all_ready:
        return True, "Ready", "All Instances are Ready"
    if s.enough:
        return True, "MinimumAvailable", f"{s.serving}/{s.total} Instances serving (min {s.minimum})"
    return False, "InsufficientAvailable", f"{s.serving}/{s.total} Instances serving, need {s.minimum}"
