"""Writes desired objects with server-side apply under one field manager, and only when something would change.

- Objects are applied whole, with force: the controller owns the fields it sends (the server-side apply docs
  recommend force for controllers), and a field it stops sending is removed.
- No-op detection: an object's intent carries a hash of itself in an annotation; when the cached object carries
  that hash and every desired field with the desired value, no request is sent. A dropped field changes the hash,
  so its removal is still applied; a field someone else changed is noticed by the comparison and put back.
- Status (which omenative alone writes) is compared whole and applied through the status subresource.
- A value the server normalizes (a quantity, a timestamp) must not make every pass write again: the applier
  remembers, per object, the intent it last applied and the resourceVersion that came back; while the cache still
  shows that version and the intent is unchanged, nothing is sent.
- Deletes carry the UID as a precondition, so a newer object of the same name is never deleted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import structlog

from omenative.kube import metrics
from omenative.kube.client import JSON_PATCH, STRATEGIC_PATCH, ApiError, KubeClient
from omenative.kube.resources import Resource
from omenative.obj import Obj

log = structlog.get_logger(__name__)

FIELD_MANAGER = "omenative"  # the one field manager every write of omenative goes under
ANN_APPLIED_HASH = "omenative.io/applied-hash"  # the hash of the intent an object was last applied from

Lookup = Callable[[Resource, str | None, str], Obj | None]


def intent_hash(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations")
    if annotations and ANN_APPLIED_HASH in annotations:
        obj = {**obj, "metadata": {**meta, "annotations": {k: v for k, v in annotations.items()
                                                           if k != ANN_APPLIED_HASH}}}
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def with_intent_hash(obj: Obj) -> Obj:
    """The object with its intent hash in an annotation (what is applied). Only the top level, the metadata and the
    annotations are new: the rest is shared with `obj` (and may be shared with cached objects), never changed."""
    meta = dict(obj.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), ANN_APPLIED_HASH: intent_hash(obj)}
    return {**obj, "metadata": meta}


def contains(actual: Any, desired: Any) -> bool:
    """True when `actual` carries every field of `desired` with the same value (extra fields are fine).

    Lists compare item by item and must be as long: the server keeps the order of lists we send, and a list that
    grew or shrank is a change.
    """
    if isinstance(desired, dict):
        if not isinstance(actual, dict):
            return False
        return all(k in actual and contains(actual[k], v) for k, v in desired.items() if v is not None) and all(
            actual.get(k) is None for k, v in desired.items() if v is None)
    if isinstance(desired, list):
        if not isinstance(actual, list) or len(actual) != len(desired):
            return False
        return all(contains(a, d) for a, d in zip(actual, desired, strict=True))
    if isinstance(desired, bool) or isinstance(actual, bool):
        return actual is desired
    if isinstance(desired, (int, float)) and isinstance(actual, (int, float)):
        return float(actual) == float(desired)
    return bool(actual == desired)


def up_to_date(current: Obj | None, desired: Obj) -> bool:
    """Whether applying `desired` (already carrying its intent hash) would change nothing."""
    if current is None:
        return False
    want = (desired.get("metadata", {}).get("annotations") or {}).get(ANN_APPLIED_HASH)
    have = (current.get("metadata", {}).get("annotations") or {}).get(ANN_APPLIED_HASH)
    if want is None or want != have:
        return False
    body = {k: v for k, v in desired.items() if k not in ("apiVersion", "kind", "status")}
    return contains(current, body)


class Applier:
    def __init__(self, client: KubeClient, lookup: Lookup, *, field_manager: str = FIELD_MANAGER) -> None:
        self.client = client
        self.lookup = lookup
        self.field_manager = field_manager
        self.writes = 0  # requests that changed or could have changed something
        # object -> (intent hash, the resourceVersions it was applied over and produced)
        self._applied: dict[str, tuple[str, frozenset[str]]] = {}

    def _memo_key(self, resource: Resource, namespace: str | None, name: str, part: str = "") -> str:
        return f"{resource}/{resource.key(namespace, name)}{part}"

    def _unchanged_since_last_apply(self, memo_key: str, digest: str, current: Obj | None) -> bool:
        """The same intent was applied over this very version, or produced it: the cache either has not caught up
        with our write yet or shows its result. Either way writing it again changes nothing; a change by anyone
        else gives the object another version, and the intent is compared again."""
        if current is None:
            self._applied.pop(memo_key, None)
            return False
        memo = self._applied.get(memo_key)
        return memo is not None and memo[0] == digest and _version(current) in memo[1]

    def _remember(self, memo_key: str, digest: str, current: Obj | None, result: Obj) -> None:
        versions = {_version(result)} | ({_version(current)} if current is not None else set())
        self._applied[memo_key] = (digest, frozenset(versions))

    async def apply(self, resource: Resource, desired: Obj, *, force: bool = True) -> Obj:
        """Applies the intent unless the cached object already matches it; returns the (possibly cached) object."""
        body = with_intent_hash(desired)
        body.setdefault("apiVersion", resource.api_version)
        body.setdefault("kind", resource.kind)
        meta = body["metadata"]
        current = self.lookup(resource, meta.get("namespace"), meta["name"])
        memo_key = self._memo_key(resource, meta.get("namespace"), meta["name"])
        digest = meta["annotations"][ANN_APPLIED_HASH]
        if current is not None and (up_to_date(current, body)
                                    or self._unchanged_since_last_apply(memo_key, digest, current)):
            metrics.apply_skipped_total.labels(kind=resource.kind).inc()
            return current
        self.writes += 1
        log.debug("apply", kind=resource.kind, namespace=meta.get("namespace"), name=meta["name"],
                  create=current is None)
        result = await self.client.apply(resource, body, field_manager=self.field_manager, force=force)
        self._remember(memo_key, digest, current, result)
        return result

    async def apply_status(self, resource: Resource, name: str, namespace: str | None, status: Obj) -> Obj | None:
        """Applies `status` through the status subresource unless the cached status already equals it."""
        current = self.lookup(resource, namespace, name)
        if current is None:
            return None  # nothing to write status on (yet); the object's own event will bring us back
        memo_key = self._memo_key(resource, namespace, name, "/status")
        digest = hashlib.sha256(json.dumps(status, sort_keys=True, default=str).encode()).hexdigest()[:16]
        if _normalized(current.get("status") or {}) == _normalized(status) or self._unchanged_since_last_apply(
                memo_key, digest, current):
            metrics.apply_skipped_total.labels(kind=f"{resource.kind}/status").inc()
            return current
        self.writes += 1
        meta: Obj = {"name": name}
        if namespace:
            meta["namespace"] = namespace
        body = {"apiVersion": resource.api_version, "kind": resource.kind, "metadata": meta, "status": status}
        try:
            result = await self.client.apply(resource, body, field_manager=self.field_manager, subresource="status")
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        self._remember(memo_key, digest, current, result)
        return result

    async def create(self, resource: Resource, obj: Obj, *, field_manager: str | None = None) -> bool:
        """Creates an object that must not overwrite one of the same name (a pod, a first InferenceReplica); False
        when one already exists."""
        self.writes += 1
        log.debug("create", kind=resource.kind, namespace=obj["metadata"].get("namespace"),
                  name=obj["metadata"]["name"])
        try:
            await self.client.create(resource, obj, obj["metadata"].get("namespace"),
                                     field_manager=field_manager or self.field_manager)
        except ApiError as exc:
            if exc.already_exists:
                return False
            raise
        return True

    async def apply_partial_status(self, resource: Resource, body: Obj, intent: str) -> None:
        """Applies part of a status others write too (a pod condition): server-side apply merges it by key, so no
        whole-status comparison. `intent` names what the body sets (without timestamps): the same intent is not
        written again over the version it was written over or produced, while the cache catches up. An object
        already gone, or replaced by one of the same name when the body names its UID, is left alone: the write
        was meant for the one that is gone."""
        meta = body["metadata"]
        memo_key = self._memo_key(resource, meta.get("namespace"), meta["name"], "/partial-status")
        current = self.lookup(resource, meta.get("namespace"), meta["name"])
        if self._unchanged_since_last_apply(memo_key, intent, current):
            metrics.apply_skipped_total.labels(kind=f"{resource.kind}/status").inc()
            return
        self.writes += 1
        try:
            result = await self.client.apply(resource, body, field_manager=self.field_manager, subresource="status")
        except ApiError as exc:
            if not (exc.not_found or exc.replaced):
                raise
            return
        self._remember(memo_key, intent, current, result)

    async def delete(self, resource: Resource, obj: Obj, *, propagation_policy: str | None = None,
                     grace_period_seconds: int | None = None) -> bool:
        """Deletes this very object (UID precondition); False when it was already gone or replaced. An object already
        being deleted is left alone, unless a grace period is given (a force-delete shortens it)."""
        meta = obj["metadata"]
        if meta.get("deletionTimestamp") and grace_period_seconds is None:
            return True
        self.writes += 1
        log.debug("delete", kind=resource.kind, namespace=meta.get("namespace"), name=meta["name"],
                  uid=meta.get("uid"), grace_period_seconds=grace_period_seconds)
        try:
            result = await self.client.delete(resource, meta["name"], meta.get("namespace"), uid=meta.get("uid"),
                                              propagation_policy=propagation_policy,
                                              grace_period_seconds=grace_period_seconds)
        except ApiError as exc:
            if exc.conflict:  # the precondition failed: a newer object holds the name
                return False
            raise
        return result is not None

    async def read(self, resource: Resource, name: str, namespace: str | None) -> Obj | None:
        """An object no cache holds, read for a read-merge-apply (the migration audit ConfigMap); None when there is
        none."""
        try:
            return await self.client.get(resource, name, namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def merge_patch(self, resource: Resource, name: str, namespace: str | None, patch: Obj) -> None:
        """A merge patch under the field manager, for a field others own too (an annotation handed on)."""
        self.writes += 1
        await self.client.patch(resource, name, patch, namespace, field_manager=self.field_manager)

    async def strategic_patch(self, resource: Resource, obj: Obj, patch: Obj) -> bool:
        """A strategic-merge patch of this very object (lists merged by their keys, as kubectl patch does), which
        carries the object's UID, so the API server refuses it on a successor of the same name. False when the
        object is gone or was replaced."""
        meta = obj["metadata"]
        self.writes += 1
        log.debug("patch", kind=resource.kind, namespace=meta.get("namespace"), name=meta["name"])
        try:
            await self.client.patch(resource, meta["name"], patch, meta.get("namespace"),
                                    content_type=STRATEGIC_PATCH, field_manager=self.field_manager)
        except ApiError as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True

    async def test_then_remove(self, resource: Resource, obj: Obj, path: str, value: Any) -> bool:
        """Removes the field at JSON pointer `path` if it still holds `value`: one JSON patch that tests first, so a
        value written meanwhile (a newer request, a reordered list) is kept for the next pass. False when the object
        is gone or the value changed."""
        meta = obj["metadata"]
        self.writes += 1
        patch = [{"op": "test", "path": path, "value": value}, {"op": "remove", "path": path}]
        try:
            await self.client.patch(resource, meta["name"], patch, meta.get("namespace"), content_type=JSON_PATCH)
        except ApiError as exc:
            if exc.not_found or exc.status == 422:  # gone, or the test failed: the next pass sees what is there
                return False
            raise
        return True

    async def remove_annotation(self, resource: Resource, obj: Obj, annotation: str) -> bool:
        """Removes an answered request annotation unless it was replaced meanwhile (a newer one is answered next)."""
        value = (obj["metadata"].get("annotations") or {}).get(annotation)
        if value is None:
            return False
        return await self.test_then_remove(resource, obj, f"/metadata/annotations/{pointer_token(annotation)}", value)

    async def add_finalizer(self, resource: Resource, obj: Obj, finalizer: str) -> bool:
        """Adds a finalizer to this version of the object: one JSON patch that tests the resourceVersion first, so a
        list changed meanwhile is never overwritten. False when the object is gone or changed (the next pass sees
        what is there)."""
        meta = obj["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if finalizer in finalizers:
            return False
        self.writes += 1
        patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
                 {"op": "add", "path": "/metadata/finalizers", "value": [*finalizers, finalizer]}]
        try:
            await self.client.patch(resource, meta["name"], patch, meta.get("namespace"), content_type=JSON_PATCH)
        except ApiError as exc:
            if exc.not_found or exc.status in (409, 422):
                return False
            raise
        return True

    async def remove_finalizer(self, resource: Resource, obj: Obj, finalizer: str) -> bool:
        """Removes one finalizer by its place in the list, tested first (the list may have changed since)."""
        finalizers = obj["metadata"].get("finalizers") or []
        if finalizer not in finalizers:
            return False
        return await self.test_then_remove(resource, obj, f"/metadata/finalizers/{finalizers.index(finalizer)}",
                                           finalizer)


def pointer_token(key: str) -> str:
    """A key as one token of a JSON pointer (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def _version(obj: Obj) -> str:
    return str(obj.get("metadata", {}).get("resourceVersion", ""))


def _normalized(value: Any) -> Any:
    """JSON round-trip, so ints and floats, tuples and lists compare as the server stores them."""
    return json.loads(json.dumps(value, sort_keys=True))
