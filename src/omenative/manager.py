"""The manager: caches, queues, the three controllers, leader election, endpoints and shutdown, wired together.

Caches start at once (a standby replica stays warm); controllers start only while this process holds the leader
lease. Which caches exist and which events wake which controller is what each controller declares in its
`watches.py` (DECLARATIONS, in this order); the manager merges and registers them, and follows the PodGroup and
PodMonitor CRDs to start or stop their caches.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import uuid
from typing import Any

import attrs
import structlog
from prometheus_client import REGISTRY

from omenative import ome_resources as ome
from omenative.api import constants as c
from omenative.api.config import ControllerConfig
from omenative.controllers.context import Context, DecodedRows
from omenative.controllers.fleet_metrics import FleetCollector
from omenative.controllers.inferencereplica import watches as replica_watches
from omenative.controllers.inferencereplica.controller import InferenceReplicaController
from omenative.controllers.inferenceservice import watches as isvc_watches
from omenative.controllers.inferenceservice.controller import InferenceServiceController
from omenative.controllers.instance import watches as instance_watches
from omenative.controllers.instance.controller import InstanceController
from omenative.controllers.watches import Queues, Wiring, merge_caches
from omenative.kube import metrics, tweaks
from omenative.kube import resources as r
from omenative.kube.apply import Applier
from omenative.kube.cache import FuncHandler, object_key, slim_crd
from omenative.kube.client import KubeClient
from omenative.kube.controller import Controller
from omenative.kube.events import EventRecorder
from omenative.kube.expectations import Expectations, WriteExpectations
from omenative.kube.informers import Caches
from omenative.kube.lease import LeaderElector
from omenative.kube.queue import WorkQueue
from omenative.kube.serve import Endpoints

log = structlog.get_logger(__name__)

DECLARATIONS = (isvc_watches.DECLARATION, replica_watches.DECLARATION, instance_watches.DECLARATION)


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
    lean_runtime: bool = False  # `omenative run` applied kube.tweaks (on by default there): check they took effect


class Manager:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.queues = Queues(isvc=WorkQueue("inferenceservice"), replica=WorkQueue("inferencereplica"),
                             instance=WorkQueue("instance"))
        self.q_isvc, self.q_ir, self.q_instance = self.queues.all()
        for queue in self.queues.all():
            # Before the election: a standby's first scrape already shows every controller's series at 0.
            metrics.init_controller_series(queue.name)
        self.expectations = Expectations()
        self.written = WriteExpectations()  # InferenceReplica status writes, observed by their watch events
        self.rows = DecodedRows()  # shared by the event handlers and the controllers
        self.stopping = asyncio.Event()
        self.controllers: list[Controller] = []
        self.elector: LeaderElector | None = None
        self.exit_code = 0
        self.ctx: Context | None = None  # set when the manager runs

    # -- wiring: only what the controllers declare (controllers/*/watches.py)
    def wiring(self, caches: Caches) -> Wiring:
        return Wiring(queues=self.queues, expectations=self.expectations, written=self.written, rows=self.rows,
                      caches=caches, config=self.options.config)

    def _register_caches(self, caches: Caches) -> None:
        for spec in merge_caches(DECLARATIONS, self.options.config):
            caches.add(spec.resource, label_selector=spec.label_selector, transform=spec.transform,
                       indexers=dict(spec.indexers), start=spec.start)
        # Every CRD, slimmed to whether it is established: PodGroups and PodMonitors are made while theirs is, and
        # their caches follow it (the manager's own watch).
        caches.add(r.CRDS, transform=slim_crd)

    def _register_handlers(self, caches: Caches) -> None:
        wiring = self.wiring(caches)
        for declaration in DECLARATIONS:
            for resource, handler in declaration.watches(wiring):
                caches.add_handler(resource, handler)
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
            podmonitors = await self._follow_crd(ctx, ome.PODMONITORS, c.PODMONITOR_CRD)
            routes = await self._follow_crd(ctx, ome.HTTPROUTES, c.HTTPROUTE_CRD)
            if await self._follow_crd(ctx, ome.SCALED_OBJECTS, c.SCALEDOBJECT_CRD) or podmonitors or routes:
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
        if opts.lean_runtime:
            self._check_tweaks()
        caches = Caches(client, namespaces=list(opts.namespaces) or None)
        self._crd_changed = asyncio.Event()
        self._register_caches(caches)
        self._register_handlers(caches)
        recorder = EventRecorder(client)
        applier = Applier(client, lambda res, ns, name: caches.get(res, ns, name))
        ctx = Context(client=client, caches=caches, applier=applier, events=recorder,
                      expectations=self.expectations, written=self.written, config=opts.config, rows=self.rows,
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
            for resource, crd in ((ome.PODGROUPS, c.PODGROUP_CRD), (ome.PODMONITORS, c.PODMONITOR_CRD),
                                  (ome.SCALED_OBJECTS, c.SCALEDOBJECT_CRD), (ome.HTTPROUTES, c.HTTPROUTE_CRD)):
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

    @staticmethod
    def _check_tweaks() -> None:
        """The runtime tweaks `omenative run` applied are in effect (something imported kubernetes_asyncio first, or
        another asyncio, would undo them: the controller still works, with more memory)."""
        effect = tweaks.in_effect()
        missing = sorted(name for name, on in effect.items() if not on)
        if missing:
            log.warning("runtime tweaks did not take effect: memory use will be higher", missing=missing)
        else:
            log.info("runtime tweaks in effect", tweaks=sorted(effect))

    async def _start_controllers(self) -> None:
        ctx = self.ctx
        assert ctx is not None, "the manager's context is made before its controllers start"
        # The manager's context is both what the controllers read and what they write with.
        isvc, ir = InferenceServiceController(ctx, ctx), InferenceReplicaController(ctx, ctx)
        inst = InstanceController(ctx, ctx)
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
