"""Sharing the repeated parts of cached objects across every cache of the process (hash-consing), and interning
their keys and short strings: what keeps thousands of pods and InferenceServices that differ in a few fields from
holding thousands of copies of the rest."""

from __future__ import annotations

import sys
from typing import Any

INTERN_MAX_CHARS = 128


def _identity(value: Any) -> Any:
    """What a container's key says of one of its (already shared) values: a container by identity, a string or
    None as itself, a number or bool with its type (1, 1.0 and True are equal and hash alike, but are not the same
    JSON)."""
    kind = type(value)
    if kind is str or value is None:
        return value
    if kind is dict or kind is list:
        return id(value)
    return (kind, value)


class SharedSubtrees:
    """One copy of each repeated part of the cached objects (hash-consing), across every cache of the process.

    JSON decoding makes a new string for every key and value and a new dict for every part, so 500 copies of one
    InferenceService hold 500 copies of its runners, and again in each ControllerRevision, and a thousand pods hold
    a thousand copies of "lastTransitionTime" and of their owner's UID. Keys and short strings are interned; a dict
    or list whose values are all shared already is looked up by a hash of their identities and, when an equal one
    is held, that one is used instead. An object's own top level and its `metadata` (which carries its UID) are
    never repeated and not looked up.

    The cached objects are read-only (every consumer copies before it changes anything); with sharing, a change in
    place would show in every object that shares the part, which `Store`'s in-place check (on in the tests) catches.
    Parts no cached object holds any more are dropped from the table whenever it has grown by half since the last
    pass (the table's reference is then the only one left)."""

    def __init__(self) -> None:
        self._table: dict[int, Any] = {}
        self._pruned_at = 1024

    def __len__(self) -> int:
        return len(self._table)

    def share(self, value: Any, depth: int = 0) -> Any:
        kind = type(value)
        if kind is dict:
            out = {sys.intern(k): self.share(v, depth + 1) for k, v in value.items()}
            if depth == 0 or (depth == 1 and "uid" in out):
                return out
            return self._one(out, ("d", *[part for k, v in out.items() for part in (k, _identity(v))]))
        if kind is list:
            items = [self.share(v, depth + 1) for v in value]
            return self._one(items, ("l", *[_identity(v) for v in items]))
        if kind is str and len(value) <= INTERN_MAX_CHARS:
            return sys.intern(value)
        return value

    def _one(self, value: Any, key: tuple[Any, ...]) -> Any:
        digest = hash(key)
        held = self._table.get(digest)
        # Equal values of the same type: ids in the key are of shared parts the table keeps alive, so equal hashes
        # of different parts are a true collision, which the comparison rules out.
        if held is not None and type(held) is type(value) and held == value:
            return held
        self._table[digest] = value
        if len(self._table) > self._pruned_at * 3 // 2:
            self.prune()
        return value

    def prune(self) -> int:
        """Drops the parts only the table still holds; returns how many."""
        gone = [digest for digest in self._table if sys.getrefcount(self._table[digest]) <= 2]
        for digest in gone:
            del self._table[digest]
        self._pruned_at = max(1024, len(self._table))
        return len(gone)


SHARED = SharedSubtrees()


def compact(value: Any) -> Any:
    """A decoded object with its keys and short strings interned and its repeated parts shared (`SharedSubtrees`).
    Long strings (a message, a serialized blob) are rarely repeated and are kept as they are."""
    return SHARED.share(value)
