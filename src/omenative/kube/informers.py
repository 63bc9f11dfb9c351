"""The caches a manager keeps: one informer per resource (per watched namespace), started together, with lookups.

An informer can also be started later, as the PodGroup informer is once its CRD appears, and stopped when the
resource goes away.
"""

from __future__ import annotations

from typing import Any

from omenative.kube.cache import Handler, IndexFunc, Store, Transform
from omenative.kube.client import KubeClient
from omenative.kube.reflector import Informer
from omenative.kube.resources import Resource
from omenative.obj import Obj, strip_server_fields


class Caches:
    def __init__(self, client: KubeClient, *, namespaces: list[str] | None = None, **reflector_options: Any) -> None:
        self.client = client
        self.namespaces = namespaces
        self.reflector_options = reflector_options
        self._informers: dict[Resource, Informer] = {}
        self._pending: dict[Resource, Informer] = {}  # prepared, not started (their resource is not served yet)
        self._stores: dict[Resource, Store] = {}
        self._started = False

    def add(
        self,
        resource: Resource,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: dict[str, IndexFunc] | None = None,
        transform: Transform | None = strip_server_fields,
        start: bool = True,
    ) -> Store:
        """Registers a cache; with `start=False` it is only prepared (see `start_informer`)."""
        store = self._stores.get(resource)
        if store is None:
            store = Store(resource, transform=transform, indexers=indexers)
            self._stores[resource] = store
        informer = Informer(self.client, store, namespaces=self.namespaces, label_selector=label_selector,
                            field_selector=field_selector, **self.reflector_options)
        if start:
            self._informers[resource] = informer
            if self._started:
                informer.start()
        else:
            self._pending[resource] = informer
        return store

    def store(self, resource: Resource) -> Store:
        return self._stores[resource]

    def has(self, resource: Resource) -> bool:
        return resource in self._informers

    def synced(self, resource: Resource) -> bool:
        informer = self._informers.get(resource)
        return informer is not None and informer.synced

    def get(self, resource: Resource, namespace: str | None, name: str) -> Obj | None:
        store = self._stores.get(resource)
        return store.get_by_name(namespace, name) if store is not None else None

    def add_handler(self, resource: Resource, handler: Handler) -> None:
        self._stores[resource].add_handler(handler)

    def start(self) -> None:
        self._started = True
        for informer in self._informers.values():
            informer.start()

    async def wait_synced(self, timeout: float = 120.0) -> None:
        for informer in list(self._informers.values()):
            await informer.wait_synced(timeout)

    def start_informer(self, resource: Resource) -> bool:
        """Starts a prepared informer (a resource that appeared); False when it already runs."""
        if resource in self._informers:
            return False
        informer = self._pending.pop(resource, None)
        if informer is None:
            return False
        self._informers[resource] = informer
        if self._started:
            informer.start()
        return True

    async def stop_informer(self, resource: Resource) -> None:
        """Stops an informer whose resource went away and empties its cache; it can be started again."""
        informer = self._informers.pop(resource, None)
        if informer is None:
            return
        await informer.stop()
        store = self._stores[resource]
        store.replace([])
        store.synced = False
        fresh = Informer(self.client, store, namespaces=self.namespaces,
                         label_selector=informer.reflectors[0].label_selector,
                         field_selector=informer.reflectors[0].field_selector, **self.reflector_options)
        self._pending[resource] = fresh

    async def stop(self) -> None:
        for informer in self._informers.values():
            await informer.stop()
