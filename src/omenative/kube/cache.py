"""The informer cache: plain dicts keyed `namespace/name`, named indexes, and enqueue-only event handlers.

A transform runs before an object is stored (dropping `managedFields` and what the controllers never read), so the
cache holds only what is needed. Handlers are called in order, after the store and its indexes are updated, and must
only enqueue keys. A relist (`replace`) delivers adds, updates and deletes for whatever changed while the watch was
down, deletes carrying the last known state.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import structlog

from omenative.kube import metrics, sharing
from omenative.kube.resources import Resource
from omenative.obj import Obj, strip_server_fields

Transform = Callable[[Obj], Obj]
IndexFunc = Callable[[Obj], Iterable[str]]

log = structlog.get_logger(__name__)

NAMESPACE_INDEX = "namespace"
OWNER_UID_INDEX = "owner-uid"


class Handler(Protocol):
    def on_add(self, obj: Obj, initial: bool) -> None: ...

    def on_update(self, old: Obj, new: Obj) -> None: ...

    def on_delete(self, obj: Obj) -> None: ...


class FuncHandler:
    """A handler from one function that maps any event to the objects' keys (most handlers just enqueue)."""

    def __init__(self, func: Callable[[Obj], None]) -> None:
        self.func = func

    def on_add(self, obj: Obj, initial: bool) -> None:
        self.func(obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        self.func(new)
        # A delete and re-create under one name can arrive as a single update: the old object counts too.
        if old.get("metadata", {}).get("uid") != new.get("metadata", {}).get("uid"):
            self.func(old)

    def on_delete(self, obj: Obj) -> None:
        self.func(obj)


def same_content(old: Obj, new: Obj) -> bool:
    """Whether an update changed nothing a cache keeps but the resourceVersion: what a transform drops (the status of
    a Service, an autoscaler, a budget) changed, and nothing the controllers read. Shared parts compare by identity
    first, so this costs about as much as the objects have top-level keys."""
    if old.keys() != new.keys():
        return False
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    return all(old[k] == new[k] for k in old if k != "metadata") and old_meta.keys() == new_meta.keys() and all(
        old_meta[k] == new_meta[k] for k in old_meta if k != "resourceVersion")


class ChangedOnly:
    """Wraps a handler that only enqueues: an update that changed nothing the cache keeps is not passed on. Never for
    a handler that observes resourceVersions (write expectations wait for those)."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    def on_add(self, obj: Obj, initial: bool) -> None:
        self.handler.on_add(obj, initial)

    def on_update(self, old: Obj, new: Obj) -> None:
        if not same_content(old, new):
            self.handler.on_update(old, new)

    def on_delete(self, obj: Obj) -> None:
        self.handler.on_delete(obj)


def by_namespace(obj: Obj) -> Iterable[str]:
    ns = obj.get("metadata", {}).get("namespace")
    return [ns] if ns else []


def by_owner_uid(obj: Obj) -> Iterable[str]:
    return [ref["uid"] for ref in obj.get("metadata", {}).get("ownerReferences") or [] if "uid" in ref]


def by_label(label: str) -> IndexFunc:
    def index(obj: Obj) -> Iterable[str]:
        value = (obj.get("metadata", {}).get("labels") or {}).get(label)
        return [value] if value is not None else []

    return index


def without_status(obj: Obj) -> Obj:
    """The transform of what omenative writes whole but never reads the status of (Services, autoscalers, disruption
    budgets): their controllers update it often (a budget on every pod change), and nothing here reads it."""
    strip_server_fields(obj)
    obj.pop("status", None)
    return obj


def slim_crd(obj: Obj) -> Obj:
    """The CRDs' transform: only whether one is established (every CRD of the cluster is watched, and their schemas
    can be hundreds of kilobytes each)."""
    meta = obj.get("metadata") or {}
    conditions = (obj.get("status") or {}).get("conditions") or []
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "metadata": {k: meta[k] for k in ("name", "uid", "resourceVersion", "deletionTimestamp") if k in meta},
            "status": {"conditions": [{k: x.get(k) for k in ("type", "status")} for x in conditions
                                      if isinstance(x, dict)]}}


# The tests turn this on: every cached object is fingerprinted when stored and checked when replaced or removed,
# so a consumer that changed one in place (and with it every object sharing the part) is named in the log.
CHECK_IN_PLACE_CHANGES = os.environ.get("OMENATIVE_CACHE_CHECK") == "1"
IN_PLACE_CHANGE = "cached object was changed in place"


def _fingerprint(obj: Obj) -> int:
    return hash(json.dumps(obj, sort_keys=True, default=str))


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata", {})
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


def resource_version_of(obj: Obj) -> str:
    return str(obj.get("metadata", {}).get("resourceVersion", ""))


class Store:
    def __init__(
        self,
        resource: Resource,
        *,
        transform: Transform | None = strip_server_fields,
        indexers: dict[str, IndexFunc] | None = None,
    ) -> None:
        self.resource = resource
        self.transform = transform
        self.indexers: dict[str, IndexFunc] = {NAMESPACE_INDEX: by_namespace, OWNER_UID_INDEX: by_owner_uid}
        self.indexers.update(indexers or {})
        self._items: dict[str, Obj] = {}
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self.indexers}
        self._handlers: list[Handler] = []
        self.synced = False
        self._fingerprints: dict[str, int] = {}
        self._gauge = metrics.informer_objects.labels(resource=str(resource))

    # -- reading
    def get(self, key: str) -> Obj | None:
        return self._items.get(key)

    def get_by_name(self, namespace: str | None, name: str) -> Obj | None:
        return self._items.get(self.resource.key(namespace, name))

    def objects(self) -> list[Obj]:
        return list(self._items.values())

    def keys(self) -> list[str]:
        return list(self._items)

    def by_index(self, index: str, value: str) -> list[Obj]:
        return [self._items[k] for k in sorted(self._indices[index].get(value, ()))]

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    # -- handlers
    def add_handler(self, handler: Handler) -> None:
        """Registers a handler; objects already cached are delivered to it as initial adds."""
        self._handlers.append(handler)
        for obj in list(self._items.values()):
            handler.on_add(obj, True)

    # -- writing (the reflector)
    def _index(self, key: str, obj: Obj | None, old: Obj | None) -> None:
        for name, func in self.indexers.items():
            index = self._indices[name]
            if old is not None:
                for value in func(old):
                    keys = index.get(value)
                    if keys is not None:
                        keys.discard(key)
                        if not keys:
                            del index[value]
            if obj is not None:
                for value in func(obj):
                    index.setdefault(value, set()).add(key)

    def upsert(self, obj: Obj, *, initial: bool = False) -> None:
        obj = sharing.compact(self.transform(obj) if self.transform is not None else obj)
        key = object_key(obj)
        old = self._items.get(key)
        if CHECK_IN_PLACE_CHANGES:
            self._check(key, old)
            self._fingerprints[key] = _fingerprint(obj)
        self._items[key] = obj
        self._index(key, obj, old)
        self._gauge.set(len(self._items))
        for handler in self._handlers:
            if old is None:
                handler.on_add(obj, initial)
            else:
                handler.on_update(old, obj)

    def remove(self, obj: Obj) -> None:
        key = object_key(obj)
        old = self._items.pop(key, None)
        if CHECK_IN_PLACE_CHANGES:
            self._check(key, old)
            self._fingerprints.pop(key, None)
        last = old if old is not None else (self.transform(obj) if self.transform else obj)
        self._index(key, None, old)
        self._gauge.set(len(self._items))
        for handler in self._handlers:
            handler.on_delete(last)

    def _check(self, key: str, old: Obj | None) -> None:
        if old is not None and self._fingerprints.get(key) not in (None, _fingerprint(old)):
            log.error(IN_PLACE_CHANGE, resource=str(self.resource), key=key)

    def replace(self, objs: list[Obj], namespace: str | None = None) -> None:
        """Makes the store equal a fresh list: adds and updates what changed, deletes what vanished.

        With `namespace`, the list covered only that namespace (one reflector per watched namespace), and only its
        objects can vanish.
        """
        initial = not self.synced
        seen: set[str] = set()
        for obj in objs:
            key = object_key(obj)
            seen.add(key)
            current = self._items.get(key)
            if current is not None and resource_version_of(current) == resource_version_of(obj):
                continue  # unchanged while we were away
            self.upsert(obj, initial=initial)
        scope = self._items if namespace is None else dict.fromkeys(self._indices[NAMESPACE_INDEX].get(namespace, ()))
        for key in [k for k in scope if k not in seen]:
            self.remove(self._items[key])
        self.synced = True
