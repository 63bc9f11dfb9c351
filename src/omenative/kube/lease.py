"""Leader election on a coordination.k8s.io Lease, as client-go does it (lease 15 s, renew deadline 10 s, retry 2 s).

A candidate takes the Lease when it is free or its holder has not renewed within the lease duration, measured on
this process's own clock from when it last saw the record change (so clock skew between machines does not matter).
Writes carry the resourceVersion read, so two candidates never both win. The leader renews every retry period; if
it cannot renew within the renew deadline it stops leading, and the manager stops every reconcile. On a clean
shutdown the leader releases the Lease, so a successor takes over at its next retry instead of waiting it out.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
from collections.abc import Awaitable, Callable

import structlog

from omenative.kube import metrics
from omenative.kube.client import ApiError, KubeClient
from omenative.kube.clock import Clock, RealClock
from omenative.kube.resources import LEASES
from omenative.obj import Obj

log = structlog.get_logger(__name__)

JITTER = 1.2


def _micro_time() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        *,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Clock | None = None,
    ) -> None:
        if not lease_duration > renew_deadline > JITTER * retry_period:
            raise ValueError("need lease_duration > renew_deadline > 1.2 * retry_period")
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock or RealClock()
        self.leading = asyncio.Event()
        self.lost = asyncio.Event()
        self._observed: Obj | None = None  # the lease spec last seen
        self._observed_at = 0.0  # our clock when it last changed
        self._gauge = metrics.leader_election_master_status.labels(name=name)
        self._gauge.set(0)

    @property
    def is_leader(self) -> bool:
        return self.leading.is_set() and not self.lost.is_set()

    async def run(self, on_started_leading: Callable[[], Awaitable[None]] | None = None) -> None:
        """Campaigns until elected, then renews until the lease is lost (sets `lost` and returns) or cancelled."""
        await self._acquire()
        self.leading.set()
        self._gauge.set(1)
        log.info("became leader", lease=f"{self.namespace}/{self.name}", identity=self.identity)
        if on_started_leading is not None:
            await on_started_leading()
        await self._renew_until_lost()
        self._gauge.set(0)
        self.lost.set()
        log.error("leader lease lost", lease=f"{self.namespace}/{self.name}", identity=self.identity)

    async def _acquire(self) -> None:
        while True:
            if await self._try_acquire_or_renew():
                return
            # A standby checks twice per retry period: it judges the holder from when it *saw* the last renewal,
            # so a shorter check bounds a dead leader's handover by lease + ~1.2 s instead of lease + 2.4 s.
            delay = self.retry_period / 2 * (1 + random.random() * (JITTER - 1))
            # Try again as soon as the holder's lease runs out, not up to a check later.
            expires_in = self._observed_at + self._observed_duration() - self.clock.now()
            if 0 < expires_in < delay:
                delay = expires_in + 0.05
            await self.clock.sleep(delay)

    def _observed_duration(self) -> float:
        return float((self._observed or {}).get("leaseDurationSeconds") or self.lease_duration)

    async def _renew_until_lost(self) -> None:
        while True:
            deadline = self.clock.now() + self.renew_deadline
            renewed = False
            while self.clock.now() < deadline:
                try:
                    renewed = await asyncio.wait_for(self._try_acquire_or_renew(),
                                                     timeout=max(0.1, deadline - self.clock.now()))
                except TimeoutError:
                    renewed = False
                if renewed:
                    break
                metrics.leader_election_slowpath_total.labels(name=self.name).inc()
                await self.clock.sleep(self.retry_period)
            if not renewed:
                return
            await self.clock.sleep(self.retry_period)

    def _record(self, now: str, transitions: int, acquire_time: str) -> Obj:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": acquire_time,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    async def _try_acquire_or_renew(self) -> bool:
        now = _micro_time()
        try:
            lease = await self.client.get(LEASES, self.name, self.namespace)
        except ApiError as exc:
            if not exc.not_found:
                log.warning("reading the leader lease failed", error=str(exc))
                return False
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": self._record(now, 0, now)}
            try:
                created = await self.client.create(LEASES, body, self.namespace)
            except ApiError as create_exc:
                log.info("lease taken by another candidate", error=str(create_exc))
                return False
            self._observe(created)
            return True

        spec = lease.get("spec") or {}
        if spec != self._observed:
            self._observe(lease)
        holder = spec.get("holderIdentity") or ""
        held_by_other = holder not in ("", self.identity)
        if held_by_other and self.clock.now() < self._observed_at + self._observed_duration():
            return False  # another candidate holds a lease that has not expired yet

        transitions = int(spec.get("leaseTransitions") or 0)
        if holder == self.identity:
            acquire_time = spec.get("acquireTime") or now
        else:
            acquire_time = now
            transitions += 1
        lease["spec"] = self._record(now, transitions, acquire_time)
        try:
            updated = await self.client.request(
                "PUT", LEASES.path(self.namespace, self.name), body=lease)  # carries the resourceVersion read
        except ApiError as exc:
            if exc.conflict:
                return False
            log.warning("updating the leader lease failed", error=str(exc))
            return False
        self._observe(updated)
        return True

    def _observe(self, lease: Obj) -> None:
        self._observed = lease.get("spec") or {}
        self._observed_at = self.clock.now()

    async def release(self) -> None:
        """Gives the lease up so a successor need not wait it out; only ever called after reconciles stopped."""
        if not self.is_leader:
            return
        try:
            lease = await self.client.get(LEASES, self.name, self.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"] = {"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": _micro_time(),
                             "acquireTime": _micro_time(),
                             "leaseTransitions": (lease.get("spec") or {}).get("leaseTransitions", 0)}
            await self.client.request("PUT", LEASES.path(self.namespace, self.name), body=lease)
            log.info("released the leader lease", lease=f"{self.namespace}/{self.name}")
        except ApiError as exc:
            log.warning("releasing the leader lease failed", error=str(exc))
        finally:
            self._gauge.set(0)
            self.leading.clear()
