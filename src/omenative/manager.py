"""The manager: caches, queues, the three controllers, leader election, endpoints and shutdown, wired together.

Caches start at once (a standby replica stays warm); controllers start only while this process holds the leader
lease. Event handlers only enqueue keys: InferenceService events feed the InferenceService queue; an
InferenceReplica's events feed its own queue, its parent's, and the queues of the Instances whose rows changed;
pod events feed the pod's InferenceReplica and Instance; PodGroup events feed their Instance.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import uuid
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import attrs
import structlog
from prometheus_client import REGISTRY

from omenative import ome_resources as ome
from omenative.api import constants as c
from omenative.api.config import ControllerConfig
from omenative.api.units import parse_duration
from omenative.controllers.context import (
    BY_INSTANCE,
    BY_ISVC,
    BY_MODEL,
    BY_NODE,
    BY_REPLICA,
    BY_ROUTED_POD,
    BY_RUNTIME,
    HEADLESS_LABEL,
    Context,
    DecodedRows,
    instance_key_of,
    replica_key_of,
    routed_pod_index,
)
from omenative.controllers.fleet_metrics import FleetCollector
from omenative.controllers.inferencereplica.controller import InferenceReplicaController
from omenative.controllers.inferenceservice.controller import InferenceServiceController, creations_key
from omenative.controllers.instance.controller import InstanceController
from omenative.kube import metrics
from omenative.kube import resources as r
from omenative.kube.apply import Applier
from omenative.kube.cache import (
    ChangedOnly,
    FuncHandler,
    IndexFunc,
    object_key,
    slim_crd,
    slim_endpoint_slice,
    slim_pod,
    slim_podgroup,
    without_status,
)
from omenative.kube.client import KubeClient
from omenative.kube.controller import Controller
from omenative.kube.events import EventRecorder
from omenative.kube.expectations import Expectations
from omenative.kube.informers import Caches
from omenative.kube.lease import LeaderElector
from omenative.kube.queue import WorkQueue
from omenative.kube.serve import Endpoints
from omenative.obj import Obj
from omenative.observe.pods import pod_got_worse

log = structlog.get_logger(__name__)


@attrs.frozen(kw_only=True)
class Options:
    kubeconfig: str | None = None
    namespaces: tuple[str, ...] = ()
    leader_elect: bool = False
    leader_election_id: str = "omenative-leader"
    leader_election_namespace: str = "default"
    metrics_bind_address: str = ":8080"
    health_probe_bind_address: str = ":8081"
    workers: int = 2
    qps: float | None = None
    burst: int | None = None
    shutdown_grace_period: float = 30.0
    config: ControllerConfig = attrs.field(factory=ControllerConfig)
    webhook: Any = None  # omenative.webhook.server.WebhookOptions, when the webhook is served
    credentials_window: float = 30.0  # refused credentials for this long: not ready


def _isvc_label_index(obj: Obj) -> list[str]:
    meta = obj.get("metadata") or {}
    isvc = (meta.get("labels") or {}).get(c.LABEL_ISVC)
    return [f"{meta.get('namespace')}/{isvc}"] if isvc else []


def _add(queue: WorkQueue[str], key: str | None) -> None:
    if key:
        queue.add(key)


def _key_index(func: Callable[[Obj], str | None]) -> IndexFunc:
    def index(obj: Obj) -> list[str]:
        key = func(obj)
        return [key] if key else []

    return index


def _runtime_index(obj: Obj) -> list[str]:
    return [((obj.get("spec") or {}).get("runtime") or {}).get("name") or ""]


def _model_index(obj: Obj) -> list[str]:
    name = ((obj.get("spec") or {}).get("model") or {}).get("name")
    return [name] if name else []


class _ReplicaEvents:
    """InferenceReplica events: its own key, its parent's, and the Instances whose rows changed."""

    def __init__(self, manager: Manager) -> None:
        self.m = manager

    def _common(self, obj: Obj) -> None:
        meta = obj["metadata"]
        if self.m.ctx is not None:
            self.m.ctx.written.observed(object_key(obj), meta.get("resourceVersion"))
        self.m.q_ir.add(object_key(obj))
        parent = ((obj.get("spec") or {}).get("parentRef") or {}).get("name")
        if parent:
            self.m.q_isvc.add(f"{meta['namespace']}/{parent}")

    def _instances(self, obj: Obj, indexes: set[int]) -> None:
        key = object_key(obj)
        for index in indexes:
            self.m.q_instance.add(f"{key}/{index}")

    def on_add(self, obj: Obj, initial: bool) -> None:
        parent = ((obj.get("spec") or {}).get("parentRef") or {}).get("name")
        if parent:
            self.m.expectations.creation_observed(creations_key(obj["metadata"]["namespace"], parent),
                                                  obj["metadata"]["name"])
        self._common(obj)
        self._instances(obj, set(self.m.rows.of(obj)))

    def on_update(self, old: Obj, new: Obj) -> None:
        self._common(new)
        old_rows, new_rows = self.m.rows.of(old), self.m.rows.of(new)
        indexes = old_rows.keys() | new_rows.keys()
        if old.get("metadata", {}).get("generation") != new.get("metadata", {}).get("generation"):
            changed = set(indexes)
        else:
            changed = {i for i in indexes if old_rows.get(i) != new_rows.get(i)}
        self._instances(new, changed)

    def on_delete(self, obj: Obj) -> None:
        self._common(obj)


class _PodEvents:
    """Pod events wake their Instance at once (it holds the serving gate) and their InferenceReplica: at once for a
    failure, batched for routine progress (one status write per burst)."""

    def __init__(self, manager: Manager, batch_period: float) -> None:
        self.m = manager
        self.batch_period = batch_period

    def _enqueue(self, pod: Obj, urgent: bool) -> None:
        replica = replica_key_of(pod)
        if replica:
            if urgent or self.batch_period <= 0:
                self.m.q_ir.add(replica)
            else:
                self.m.q_ir.add_after(replica, self.batch_period)
        _add(self.m.q_instance, instance_key_of(pod))

    def on_add(self, obj: Obj, initial: bool) -> None:
        instance = instance_key_of(obj)
        if instance:
            self.m.expectations.creation_observed(instance, obj["metadata"]["name"])
        self._enqueue(obj, urgent=False)

    def on_update(self, old: Obj, new: Obj) -> None:
        instance = instance_key_of(new)
        if instance and new["metadata"].get("deletionTimestamp"):
            self.m.expectations.deletion_observed(instance, new["metadata"].get("uid", ""))
        if old["metadata"].get("uid") != new["metadata"].get("uid") and instance:
            self.m.expectations.deletion_observed(instance, old["metadata"].get("uid", ""))
            self.m.expectations.creation_observed(instance, new["metadata"]["name"])
        self._enqueue(new, urgent=pod_got_worse(old, new))

    def on_delete(self, obj: Obj) -> None:
        instance = instance_key_of(obj)
        if instance:
            self.m.expectations.deletion_observed(instance, obj["metadata"].get("uid", ""))
        self._enqueue(obj, urgent=True)


@attrs.frozen
class _OnDelete:
    func: Callable[[Obj], None]

    def on_add(self, obj: Obj, initial: bool) -> None:
        pass

    def on_update(self, old: Obj, new: Obj) -> None:
        if old.get("metadata", {}).get("uid") != new.get("metadata", {}).get("uid"):
            self.func(old)  # deleted and created again under one name

    def on_delete(self, obj: Obj) -> None:
        self.func(obj)


def _podgroup_gone(manager: Manager, obj: Obj) -> None:
    """The Instance's delete of it is observed, and only this wakes the InferenceReplica: a teardown waits for its
    PodGroups to be gone."""
    instance = instance_key_of(obj)
    if instance:
        manager.expectations.deletion_observed(instance, obj["metadata"].get("uid", ""))
    _add(manager.q_ir, replica_key_of(obj))


class _SliceEvents:
    """EndpointSlice events wake the Instances of the pods a slice lists, before and after the change."""

    def __init__(self, manager: Manager, caches: Caches) -> None:
        self.m = manager
        self.caches = caches

    @staticmethod
    def _routes(obj: Obj) -> dict[str, Any]:
        """Pod name -> its endpoint (whether it is ready, serving, terminating) in one slice."""
        return {ref["name"]: e.get("conditions") for e in obj.get("endpoints") or []
                if (ref := e.get("targetRef") or {}).get("kind") == "Pod" and ref.get("name")}

    def _enqueue(self, namespace: str | None, names: Iterable[str]) -> None:
        for name in names:
            pod = self.caches.get(r.PODS, namespace, name)
            if pod is not None:
                _add(self.m.q_instance, instance_key_of(pod))

    def on_add(self, obj: Obj, initial: bool) -> None:
        if not initial:
            self._enqueue(obj["metadata"].get("namespace"), self._routes(obj))

    def on_update(self, old: Obj, new: Obj) -> None:
        # Only the pods whose routing changed: a slice lists every leader of a component, and each one's change
        # would otherwise wake them all.
        before, after = self._routes(old), self._routes(new)
        self._enqueue(new["metadata"].get("namespace"),
                      {n for n in before.keys() | after.keys() if before.get(n, ()) != after.get(n, ())})

    def on_delete(self, obj: Obj) -> None:
        self._enqueue(obj["metadata"].get("namespace"), self._routes(obj))


class Manager:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.q_isvc: WorkQueue[str] = WorkQueue("inferenceservice")
        self.q_ir: WorkQueue[str] = WorkQueue("inferencereplica")
        self.q_instance: WorkQueue[str] = WorkQueue("instance")
        for queue in (self.q_isvc, self.q_ir, self.q_instance):
            # Before the election: a standby's first scrape already shows every controller's series at 0.
            metrics.init_controller_series(queue.name)
        self.expectations = Expectations()
        self.rows = DecodedRows()  # shared by the event handlers and the controllers
        self.stopping = asyncio.Event()
        self.controllers: list[Controller] = []
        self.elector: LeaderElector | None = None
        self.exit_code = 0
        self.ctx: Context | None = None  # set when the manager runs

    # -- wiring
    def _register_caches(self, caches: Caches) -> None:
        managed = f"{c.LABEL_MANAGED_BY}={c.MANAGED_BY_OMENATIVE}"
        caches.add(ome.INFERENCE_SERVICES, indexers={BY_RUNTIME: _runtime_index, BY_MODEL: _model_index})
        caches.add(ome.INFERENCE_REPLICAS, indexers={BY_ISVC: _isvc_label_index})
        caches.add(r.PODS, label_selector=managed, transform=slim_pod,
                   indexers={BY_REPLICA: _key_index(replica_key_of), BY_INSTANCE: _key_index(instance_key_of),
                             BY_NODE: _key_index(lambda pod: (pod.get("spec") or {}).get("nodeName"))})
        if self.options.config.force_delete_overdue_slack and \
                self.options.config.force_delete_node_unreachable_threshold:
            caches.add(r.NODES)  # the force-delete escalation judges whether a stuck pod's node is dead
        for resource in (r.SERVICES, r.HPAS, r.PDBS):
            caches.add(resource, label_selector=c.LABEL_ISVC, transform=without_status,
                       indexers={BY_ISVC: _isvc_label_index})
        for resource in (r.SERVICE_ACCOUNTS, r.ROLES, r.ROLE_BINDINGS, r.CONTROLLER_REVISIONS):
            caches.add(resource, label_selector=c.LABEL_ISVC, indexers={BY_ISVC: _isvc_label_index})
        for resource in (ome.SERVING_RUNTIMES, ome.CLUSTER_SERVING_RUNTIMES, ome.BASE_MODELS, ome.CLUSTER_BASE_MODELS):
            caches.add(resource)
        # Every CRD, slimmed to whether it is established: PodGroups and PodMonitors are made while theirs is.
        caches.add(r.CRDS, transform=slim_crd)
        # The Services' slices (they carry the Service's labels): a drained pod is deleted once none routes to it.
        # Not the headless Services' slices: they list every pod with an address, nothing reads them, and they were a
        # third of the slices held and of the slice events that woke Instances.
        caches.add(r.ENDPOINT_SLICES, label_selector=f"{c.LABEL_ISVC},!{HEADLESS_LABEL}", transform=slim_endpoint_slice,
                   indexers={BY_ISVC: _isvc_label_index, BY_ROUTED_POD: routed_pod_index})
        caches.add(ome.PODGROUPS, label_selector=managed, start=False, transform=slim_podgroup,
                   indexers={BY_REPLICA: _key_index(replica_key_of)})
        caches.add(ome.PODMONITORS, label_selector=c.LABEL_ISVC, start=False, indexers={BY_ISVC: _isvc_label_index})

    def _register_handlers(self, caches: Caches) -> None:
        caches.add_handler(ome.INFERENCE_SERVICES, FuncHandler(lambda o: self.q_isvc.add(object_key(o))))
        caches.add_handler(ome.INFERENCE_REPLICAS, _ReplicaEvents(self))
        caches.add_handler(r.PODS, _PodEvents(self, parse_duration(self.options.config.status_batch_period or "0")))
        caches.add_handler(r.ENDPOINT_SLICES, _SliceEvents(self, caches))
        if caches.has(r.NODES):
            def node_changed(obj: Obj) -> None:
                for pod in caches.store(r.PODS).by_index(BY_NODE, obj["metadata"]["name"]):
                    _add(self.q_instance, instance_key_of(pod))

            caches.add_handler(r.NODES, FuncHandler(node_changed))

        def by_isvc_label(obj: Obj) -> None:
            for key in _isvc_label_index(obj):
                self.q_isvc.add(key)

        # Their status is not cached, so a status update arrives as an update that changed nothing: not passed on.
        for resource in (r.SERVICES, r.HPAS, r.PDBS, r.SERVICE_ACCOUNTS, r.ROLES, r.ROLE_BINDINGS, ome.PODMONITORS):
            caches.add_handler(resource, ChangedOnly(FuncHandler(by_isvc_label)))

        caches.add_handler(r.CONTROLLER_REVISIONS, FuncHandler(lambda o: _add(self.q_ir, replica_key_of(o))))
        caches.add_handler(ome.PODGROUPS, ChangedOnly(FuncHandler(lambda o: _add(self.q_instance, instance_key_of(o)))))
        caches.add_handler(ome.PODGROUPS, _OnDelete(partial(_podgroup_gone, self)))

        def runtime_changed(obj: Obj) -> None:
            isvcs = caches.store(ome.INFERENCE_SERVICES)
            for isvc in isvcs.by_index(BY_RUNTIME, obj["metadata"]["name"]) + isvcs.by_index(BY_RUNTIME, ""):
                self.q_isvc.add(object_key(isvc))

        def model_changed(obj: Obj) -> None:
            for isvc in caches.store(ome.INFERENCE_SERVICES).by_index(BY_MODEL, obj["metadata"]["name"]):
                self.q_isvc.add(object_key(isvc))

        for resource in (ome.SERVING_RUNTIMES, ome.CLUSTER_SERVING_RUNTIMES):
            caches.add_handler(resource, FuncHandler(runtime_changed))
        for resource in (ome.BASE_MODELS, ome.CLUSTER_BASE_MODELS):
            caches.add_handler(resource, FuncHandler(model_changed))
        caches.add_handler(r.CRDS, FuncHandler(lambda _: self._crd_changed.set()))

    async def _follow_crds(self, ctx: Context) -> None:
        """Starts the PodGroup and PodMonitor caches when their CRDs appear (and stops them when they go), then has
        what depends on them look again: gang scheduling and scraping are noticed without a restart."""
        while True:
            await self._crd_changed.wait()
            self._crd_changed.clear()
            if await self._follow_crd(ctx, ome.PODGROUPS, c.PODGROUP_CRD):
                for replica in ctx.caches.store(ome.INFERENCE_REPLICAS).objects():
                    key = object_key(replica)
                    self.q_ir.add(key)
                    for index in ctx.rows.of(replica):
                        self.q_instance.add(f"{key}/{index}")
            if await self._follow_crd(ctx, ome.PODMONITORS, c.PODMONITOR_CRD):
                for isvc in ctx.caches.store(ome.INFERENCE_SERVICES).objects():
                    self.q_isvc.add(object_key(isvc))

    @staticmethod
    async def _follow_crd(ctx: Context, resource: r.Resource, crd: str) -> bool:
        """True when the CRD came or went (and the cache of its objects started or stopped)."""
        installed = ctx.crd_installed(crd)
        if installed and ctx.caches.start_informer(resource):
            log.info("CRD found: its objects are made from now on", crd=crd)
            await ctx.caches.wait_synced()
            return True
        if not installed and ctx.caches.has(resource):
            log.warning("CRD removed: its objects are no longer made", crd=crd)
            await ctx.caches.stop_informer(resource)
            return True
        return False

    # -- running
    async def run(self) -> int:
        opts = self.options
        client = await KubeClient.connect(opts.kubeconfig, qps=opts.qps, burst=opts.burst,
                                          credentials_window=opts.credentials_window)
        caches = Caches(client, namespaces=list(opts.namespaces) or None)
        self._crd_changed = asyncio.Event()
        self._register_caches(caches)
        self._register_handlers(caches)
        recorder = EventRecorder(client)
        applier = Applier(client, lambda res, ns, name: caches.get(res, ns, name))
        ctx = Context(client=client, caches=caches, applier=applier, events=recorder,
                      expectations=self.expectations, config=opts.config, rows=self.rows,
                      queues={"inferenceservice": self.q_isvc, "inferencereplica": self.q_ir,
                              "instance": self.q_instance})
        self.ctx = ctx
        synced = asyncio.Event()
        ready_checks = {"informers": synced.is_set}
        if client.credentials is not None:
            ready_checks["credentials"] = client.credentials.healthy  # not ready while the API refuses who we are
        webhook_serving = asyncio.Event()
        if opts.webhook is not None:
            # The webhook's Service routes to Ready pods only: a pod is Ready once its webhook answers, or the
            # API server's admission calls to it are refused while it starts.
            ready_checks["webhook"] = webhook_serving.is_set
        endpoints = Endpoints(opts.metrics_bind_address, opts.health_probe_bind_address, ready_checks=ready_checks)
        self._fleet = FleetCollector(caches.store(ome.INFERENCE_REPLICAS).objects, self.rows.of)
        REGISTRY.register(self._fleet)
        webhook_server = None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)
        tasks: list[asyncio.Task[Any]] = []
        try:
            await endpoints.start()
            if endpoints.bound:
                log.info("endpoints serving", **{k: f"{h}:{p}" for k, (h, p) in endpoints.bound.items()})
            caches.start()
            recorder.start()
            await caches.wait_synced()
            for resource, crd in ((ome.PODGROUPS, c.PODGROUP_CRD), (ome.PODMONITORS, c.PODMONITOR_CRD)):
                if ctx.crd_installed(crd):
                    caches.start_informer(resource)
            await caches.wait_synced()
            synced.set()
            tasks.append(asyncio.create_task(self._follow_crds(ctx), name="crds"))
            if opts.webhook is not None:
                from omenative.webhook.server import WebhookServer

                webhook_server = WebhookServer(opts.webhook, ctx)
                await webhook_server.start()
                webhook_serving.set()
            log.info("caches synced", identity=self.identity)
            if opts.leader_elect:
                self.elector = LeaderElector(client, name=opts.leader_election_id,
                                             namespace=opts.leader_election_namespace, identity=self.identity)
                election = asyncio.create_task(self.elector.run(self._start_controllers), name="leader election")
                tasks.append(election)
                lost = asyncio.create_task(self.elector.lost.wait())
                stop = asyncio.create_task(self.stopping.wait())
                await asyncio.wait([lost, stop], return_when=asyncio.FIRST_COMPLETED)
                if self.elector.lost.is_set() and not self.stopping.is_set():
                    log.error("lost the leader lease; exiting so a successor takes over")
                    self.exit_code = 1
                for waiter in (lost, stop):
                    waiter.cancel()
            else:
                await self._start_controllers()
                await self.stopping.wait()
        finally:
            await self._shutdown(caches, recorder, endpoints, client, tasks, webhook_server)
        return self.exit_code

    async def _start_controllers(self) -> None:
        ctx = self.ctx
        assert ctx is not None, "the manager's context is made before its controllers start"
        isvc, ir, inst = InferenceServiceController(ctx), InferenceReplicaController(ctx), InstanceController(ctx)
        self.controllers = [
            Controller(isvc.name, self.q_isvc, isvc.reconcile, workers=self.options.workers),
            Controller(ir.name, self.q_ir, ir.reconcile, workers=self.options.workers),
            Controller(inst.name, self.q_instance, inst.reconcile, workers=self.options.workers),
        ]
        for controller in self.controllers:
            controller.start()
        log.info("controllers started", workers=self.options.workers)

    async def _shutdown(self, caches: Caches, recorder: EventRecorder, endpoints: Endpoints, client: KubeClient,
                        tasks: list[asyncio.Task[Any]], webhook_server: Any) -> None:
        grace = self.options.shutdown_grace_period
        try:
            async with asyncio.timeout(grace):
                await asyncio.gather(*(ctl.stop() for ctl in self.controllers))
                if self.elector is not None and self.exit_code == 0:
                    await self.elector.release()  # only after every reconcile stopped
                await recorder.stop()
        except TimeoutError:
            log.warning("shutdown grace period ran out", grace=grace)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if webhook_server is not None:
            await webhook_server.stop()
        await caches.stop()
        await endpoints.stop()
        REGISTRY.unregister(self._fleet)
        await client.close()
        log.info("stopped")


def default_leader_election_namespace() -> str:
    return os.environ.get("POD_NAMESPACE") or "default"
