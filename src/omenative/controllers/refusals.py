"""Refused writes, handed from the controller that made them to the one that reports them.

The Instance controller creates pods and PodGroups; the InferenceReplica controller owns the Instance rows that
must say why an Instance cannot progress. A refusal exists only in the reply to a create, so the writer records it
here, keyed by the Instance, and wakes the replica; the replica's planner turns it into the row's `waiting` token
(with `capacityRefusedAt`) or a failure, which live in the API. After a restart the table is empty: the rows keep
what was recorded, and the next create attempt refuses again if the cause still stands.

Each distinct cause is announced once per replica (a Warning event), until the replica has no refusal left.
"""

from __future__ import annotations

import attrs

from omenative.observe.refusals import Refusal, cause_key

CHILDREN = "children:"  # the scope prefix of refused children, apart from a replica's own Instances


@attrs.define
class Refusals:
    _by_instance: dict[str, Refusal] = attrs.field(factory=dict)  # "{namespace}/{replica}/{index}" -> refusal
    # What was announced, by scope: a replica ("{namespace}/{replica}", its Instances' refusals) or the writer of
    # other objects (`CHILDREN` + "{namespace}/{name}"), each a set of cause keys.
    _announced: dict[str, set[str]] = attrs.field(factory=dict)

    @staticmethod
    def replica_of(instance_key: str) -> str:
        return instance_key.rsplit("/", 1)[0]

    def record(self, instance_key: str, refusal: Refusal) -> Refusal:
        """Records a refusal; `since` carries over while the same cause keeps refusing the same attempt."""
        last = self._by_instance.get(instance_key)
        if last is not None and last.cause == refusal.cause and last.incarnation == refusal.incarnation:
            refusal = attrs.evolve(refusal, since=last.since)
        self._by_instance[instance_key] = refusal
        return refusal

    def _first(self, scope: str, key: str) -> bool:
        seen = self._announced.setdefault(scope, set())
        if key in seen:
            return False
        seen.add(key)
        return True

    def announce(self, instance_key: str, refusal: Refusal) -> bool:
        """True the first time the replica meets this cause (its event is due)."""
        return self._first(self.replica_of(instance_key), cause_key(refusal.cause, refusal.kind, refusal.message))

    def announce_child(self, owner_key: str, kind: str, message: str) -> bool:
        """True the first time a write of this object's children (an InferenceService's, or a replica's audit
        history) is refused for this cause (its event is due)."""
        return self._first(CHILDREN + owner_key, cause_key("", kind, message))

    def children_written(self, owner_key: str) -> None:
        """Every child was written: a cause that comes back is news again."""
        self._announced.pop(CHILDREN + owner_key, None)

    def clear(self, instance_key: str) -> bool:
        """The Instance's writes went through (or it needs none): True when a refusal was standing."""
        gone = self._by_instance.pop(instance_key, None)
        replica = self.replica_of(instance_key)
        if gone is not None and not any(self.replica_of(k) == replica for k in self._by_instance):
            self._announced.pop(replica, None)
        return gone is not None

    def of(self, instance_key: str) -> Refusal | None:
        return self._by_instance.get(instance_key)

    def of_replica(self, replica_key: str) -> dict[int, Refusal]:
        """The standing refusals of a replica's Instances, by index."""
        prefix = replica_key + "/"
        return {int(k[len(prefix):]): r for k, r in self._by_instance.items()
                if k.startswith(prefix) and k[len(prefix):].isdigit()}

    def forget_replica(self, replica_key: str) -> None:
        prefix = replica_key + "/"
        for key in [k for k in self._by_instance if k.startswith(prefix)]:
            del self._by_instance[key]
        self._announced.pop(replica_key, None)
