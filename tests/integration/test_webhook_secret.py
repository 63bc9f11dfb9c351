"""Replicas that start together agree on one webhook certificate: the Secret that shares it is created by one of
them (the others' creates are refused and they serve the winner's), so the caBundle each registers names the
certificate every replica serves. Found in the suite: two in-cluster replicas each served their own certificate,
and the API server refused the other's (x509: ECDSA verification failure)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from omenative.kube.client import KubeClient
from omenative.kube.resources import SECRETS
from omenative.webhook.server import WebhookOptions, WebhookServer


class BarrierOnFirstRead:
    """The API client, except that each replica's first read waits for the other's: both see no Secret yet, as
    when two pods start at the same moment (the injected fault)."""

    def __init__(self, kube: KubeClient, barrier: asyncio.Barrier) -> None:
        self._kube = kube
        self._barrier = barrier
        self._first = True

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await self._kube.get(*args, **kwargs)
        finally:
            if self._first:
                self._first = False
                await self._barrier.wait()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kube, name)


class Ctx:
    def __init__(self, client: Any) -> None:
        self.client = client


async def test_replicas_starting_together_serve_the_same_certificate(kube: KubeClient, namespace: str) -> None:
    barrier = asyncio.Barrier(2)
    options = WebhookOptions(service=f"{namespace}/omenative-webhook")
    replicas = [WebhookServer(options, cast(Any, Ctx(BarrierOnFirstRead(kube, barrier)))) for _ in range(2)]
    changed = await asyncio.gather(*(r.ensure_certificates() for r in replicas))
    assert changed == [True, True]
    first, second = (r.bundle for r in replicas)
    assert first is not None and second is not None
    secret = await kube.get(SECRETS, "omenative-webhook-certs", namespace)
    assert first.cert == second.cert and first.ca_cert == second.ca_cert
    assert secret["data"]["tls.crt"] and secret["metadata"]["resourceVersion"]
    # A later check by either replica keeps what is stored: no new certificate, no change.
    assert await replicas[0].ensure_certificates() is False
