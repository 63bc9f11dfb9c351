"""The informer cache: plain dicts keyed `namespace/name`, named indexes, and enqueue-only event handlers.

A transform runs before an object is stored (dropping `managedFields` and what the controllers never read), so the
cache holds only what is needed. Handlers are called in order, after the store and its indexes are updated, and must
only enqueue keys. A relist (`replace`) delivers adds, updates and deletes for whatever changed while the watch was
down, deletes carrying the last known state.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import structlog

from omenative.kube import metrics
from omenative.kube.resources import Resource
from omenative.obj import Obj

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


def strip_server_fields(obj: Obj) -> Obj:
    """The default transform: drops fields no controller reads and that only cost memory."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if annotations:
            annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    return obj


def without_status(obj: Obj) -> Obj:
    """The transform of what omenative writes whole but never reads the status of (Services, autoscalers, disruption
    budgets): their controllers update it often (a budget on every pod change), and nothing here reads it."""
    strip_server_fields(obj)
    obj.pop("status", None)
    return obj


def slim_podgroup(obj: Obj) -> Obj:
    """The PodGroups' transform: of the status only whether the gang failed (the one thing an Instance acts on). The
    PodGroup controller rewrites the counts and phase as each pod is scheduled and runs."""
    strip_server_fields(obj)
    status = obj.get("status")
    obj["status"] = {"phase": "Failed"} if isinstance(status, dict) and status.get("phase") == "Failed" else {}
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


POD_SPEC_READ = ("nodeName", "schedulerName", "readinessGates", "schedulingGates")
POD_STATUS_READ = ("phase", "reason", "message", "conditions", "podIP")
# Of a container's status: its restarts, why its last run ended, and why it is waiting (a wedged pull or crash loop).
CONTAINER_STATUS_READ = {"state": ("waiting", ("reason", "message")),
                         "lastState": ("terminated", ("reason", "exitCode", "finishedAt"))}


def _slim_container_status(status: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: status[k] for k in ("name", "restartCount") if k in status}
    for field, (kind, keep) in CONTAINER_STATUS_READ.items():
        part = (status.get(field) or {}).get(kind) if isinstance(status.get(field), dict) else None
        if isinstance(part, dict):
            out[field] = {kind: {k: part[k] for k in keep if k in part}}
    return out


def slim_pod(obj: Obj) -> Obj:
    """The pods' transform: only the fields the controllers read. The containers, with their environment, commands
    and probes, are most of a model server pod's size and never read back (the pod's revision is in its labels);
    of the status, the host and pod addresses, start times, images and container IDs are unique to each pod and
    never read either (a pod's address only as whether it has one)."""
    strip_server_fields(obj)
    spec = obj.get("spec")
    if isinstance(spec, dict):
        obj["spec"] = {k: spec[k] for k in POD_SPEC_READ if k in spec}
    status = obj.get("status")
    if isinstance(status, dict):
        slim = {k: status[k] for k in POD_STATUS_READ if k in status}
        for field in ("initContainerStatuses", "containerStatuses"):
            if isinstance(statuses := status.get(field), list):
                slim[field] = [_slim_container_status(x) for x in statuses if isinstance(x, dict)]
        obj["status"] = slim
    return obj


ENDPOINT_READ = {"targetRef": ("kind", "name"), "conditions": ("ready", "serving", "terminating")}


def slim_endpoint_slice(obj: Obj) -> Obj:
    """The EndpointSlices' transform: of each endpoint the controllers read only which pod it routes to and whether
    it is ready or serving. Addresses, node names, zones, hints and ports were a fifth of the heap at 10,000 pods."""
    strip_server_fields(obj)
    obj.pop("ports", None)
    endpoints = obj.get("endpoints")
    if isinstance(endpoints, list):
        obj["endpoints"] = [
            {field: {k: part[k] for k in keep if k in part}
             for field, keep in ENDPOINT_READ.items() if isinstance(part := endpoint.get(field), dict)}
            for endpoint in endpoints if isinstance(endpoint, dict)]
    return obj


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
        obj = compact(self.transform(obj) if self.transform is not None else obj)
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
