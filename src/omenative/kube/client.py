"""A thin async REST client over kubernetes_asyncio's connection and auth.

Objects travel as plain dicts decoded with `json`: the generated model classes cost about nine times the memory and
most of the CPU of a watch (perf-reliability notes), and the controllers never need them. Every request has a
timeout; watches have an inactivity timeout so a silently dead stream is noticed; an optional client-side QPS/burst
limiter sits in front (off by default, as in controller-runtime, leaving throttling to API Priority and Fairness).
"""

from __future__ import annotations

import asyncio
import builtins
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, cast
from urllib.parse import urlparse
from urllib.request import getproxies, proxy_bypass

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from omenative import __version__
from omenative.kube import metrics
from omenative.kube.clock import TokenBucket
from omenative.kube.credentials import Credentials, denies_identity
from omenative.kube.resources import Resource
from omenative.obj import Obj

USER_AGENT = f"omenative/{__version__}"

APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


class ApiError(Exception):
    """A request the API server refused (or that never reached it: status 0)."""

    def __init__(self, status: int, reason: str, message: str, body: Obj | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        """410: the resourceVersion is too old (compacted); the caller must relist."""
        return self.status == 410

    @property
    def replaced(self) -> bool:
        """A write that named the object's UID found another object of that name (the UID cannot change: 422)."""
        causes = (self.body.get("details") or {}).get("causes") or []
        return self.status == 422 and any(c.get("field") == "metadata.uid" for c in causes)

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @classmethod
    def from_status(cls, status: int, body: bytes | str | Obj) -> ApiError:
        if isinstance(body, (bytes, str)):
            text = body.decode(errors="replace") if isinstance(body, bytes) else body
            try:
                body = json.loads(text) if text else {}
            except ValueError:
                return cls(status, "", text)
        if not isinstance(body, dict):
            return cls(status, "", str(body))
        return cls(int(body.get("code") or status), str(body.get("reason", "")), str(body.get("message", "")), body)


class RateLimit:
    """A token bucket in front of requests (client-go's QPS/burst); None disables it."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = burst
        self._bucket = TokenBucket(qps, burst)

    async def acquire(self) -> None:
        wait = self._bucket.reserve()  # no await between the refill and the take: the event loop serializes them
        if wait > 0:
            await asyncio.sleep(wait)


def _settle_environment(api_client: k8s.ApiClient) -> None:
    """Reads the proxy environment once, as client-go does, instead of on every request.

    kubernetes_asyncio's session trusts the environment, so aiohttp looks up the proxy variables and reads ~/.netrc
    in a worker thread for every request: a fifth of the controller's CPU under load, measured with py-spy. The API
    server's address does not change, so its proxy (if any) is resolved here and the session stops looking.
    """
    rest = api_client.rest_client
    old = rest.pool_manager
    server = urlparse(str(api_client.configuration.host))
    host = str(server.hostname or "")
    if not rest.proxy:
        proxy = getproxies().get(str(server.scheme or "https"))
        if proxy and not proxy_bypass(host):
            rest.proxy = proxy
    rest.pool_manager = aiohttp.ClientSession(connector=old.connector, trust_env=False,
                                              read_bufsize=2**21)  # watch events of large objects
    old.detach()  # the connection pool now belongs to the new session


class KubeClient:
    def __init__(
        self,
        api_client: k8s.ApiClient,
        *,
        timeout: float = 30.0,
        rate_limit: RateLimit | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        self.api_client = api_client
        self.timeout = timeout
        self.rate_limit = rate_limit
        self.credentials = credentials
        self.host = urlparse(api_client.configuration.host).netloc

    @classmethod
    async def connect(
        cls,
        kubeconfig: str | None = None,
        *,
        context: str | None = None,
        timeout: float = 30.0,
        qps: float | None = None,
        burst: int | None = None,
        credentials_window: float = 30.0,
    ) -> KubeClient:
        """From a kubeconfig (the path given, else $KUBECONFIG or ~/.kube/config), else the in-cluster config."""
        configuration = k8s.Configuration()
        loader = None
        try:
            loader = await k8s_config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=configuration)
        except k8s_config.ConfigException:
            if kubeconfig:
                raise
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        credentials = Credentials(loader, configuration, window=credentials_window)
        credentials.install()
        rate_limit = RateLimit(qps, burst or max(1, int(qps * 2))) if qps and qps > 0 else None
        api_client = k8s.ApiClient(configuration=configuration)
        _settle_environment(api_client)
        # Named in the API server's audit log and metrics, as client-go names its programs.
        api_client.user_agent = USER_AGENT
        return cls(api_client, timeout=timeout, rate_limit=rate_limit, credentials=credentials)

    async def close(self) -> None:
        await self.api_client.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- raw requests
    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | aiohttp.ClientTimeout | None = None,
        retried: bool = False,
    ) -> Any:
        """Sends a request and returns the raw aiohttp response (the caller reads and releases it). A 401 reloads
        the credentials and sends the request once more with the new ones."""
        if self.rate_limit is not None:
            await self.rate_limit.acquire()
        params = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        started = time.monotonic()
        try:
            response = await self.api_client.call_api(
                path, method,
                query_params=params,
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout if timeout is not None else self.timeout,
            )
        except (TimeoutError, OSError) as exc:
            metrics.rest_client_requests_total.labels(code="<error>", method=method, host=self.host).inc()
            raise ApiError(0, type(exc).__name__, str(exc) or "request failed") from exc
        finally:
            metrics.rest_client_request_duration_seconds.labels(verb=method).observe(time.monotonic() - started)
        metrics.rest_client_requests_total.labels(code=str(response.status), method=method, host=self.host).inc()
        if self.credentials is not None:
            message = ""
            if response.status in (401, 403):
                try:
                    message = str(ApiError.from_status(response.status, await response.read()).message)
                except (TimeoutError, OSError, aiohttp.ClientError):
                    message = ""
            if denies_identity(response.status, message):
                if await self.credentials.refused(response.status, message) and not retried:
                    response.release()
                    return await self._send(method, path, query=query, body=body, content_type=content_type,
                                            timeout=timeout, retried=True)
            else:
                self.credentials.succeeded()
        return response

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Obj:
        response = await self._send(method, path, query=query, body=body, content_type=content_type, timeout=timeout)
        try:
            data = await response.read()
        except (TimeoutError, OSError) as exc:
            raise ApiError(0, type(exc).__name__, str(exc) or "reading the response failed") from exc
        finally:
            response.release()
        if not 200 <= response.status <= 299:
            raise ApiError.from_status(response.status, data)
        return cast(Obj, json.loads(data)) if data else {}

    # -- verbs
    async def get(self, resource: Resource, name: str, namespace: str | None = None, *,
                  subresource: str | None = None) -> Obj:
        return await self.request("GET", resource.path(namespace, name, subresource))

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_: str | None = None,
        resource_version: str | None = None,
        timeout: float | None = None,
    ) -> Obj:
        return await self.request("GET", resource.path(namespace), query={
            "labelSelector": label_selector, "fieldSelector": field_selector, "limit": limit,
            "continue": continue_, "resourceVersion": resource_version,
        }, timeout=timeout)

    async def list_all(self, resource: Resource, namespace: str | None = None, *,
                       label_selector: str | None = None, field_selector: str | None = None,
                       page_size: int = 500) -> tuple[builtins.list[Obj], str]:
        """Every object, read in pages; returns them and the list's resourceVersion."""
        items: builtins.list[Obj] = []
        token: str | None = None
        while True:
            page = await self.list(resource, namespace, label_selector=label_selector,
                                   field_selector=field_selector, limit=page_size, continue_=token)
            items.extend(page.get("items") or [])
            token = page.get("metadata", {}).get("continue")
            if not token:
                return items, str(page.get("metadata", {}).get("resourceVersion", ""))

    async def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        timeout_seconds: int,
        label_selector: str | None = None,
        field_selector: str | None = None,
        inactivity_timeout: float = 70.0,
        on_open: Callable[[], None] | None = None,
    ) -> AsyncIterator[Obj]:
        """Watch events ({type, object}) from a resourceVersion, with bookmarks.

        The server ends the watch after `timeout_seconds`; a stream silent for `inactivity_timeout` raises
        ApiError(0, "WatchInactive"), since bookmarks arrive about once a minute on a healthy stream. `on_open` is
        called once the server has accepted the watch (a refused one, such as a 429 while a new CRD's storage
        starts, raises instead).
        """
        response = await self._send("GET", resource.path(namespace), query={
            "watch": "true", "allowWatchBookmarks": "true", "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds, "labelSelector": label_selector, "fieldSelector": field_selector,
        }, timeout=aiohttp.ClientTimeout(connect=10.0, sock_connect=10.0, sock_read=inactivity_timeout))
        try:
            if not 200 <= response.status <= 299:
                raise ApiError.from_status(response.status, await response.read())
            if on_open is not None:
                on_open()
            while True:
                try:
                    line = await response.content.readline()
                except TimeoutError as exc:
                    raise ApiError(0, "WatchInactive", f"no watch event for {inactivity_timeout:.0f}s") from exc
                except OSError as exc:
                    raise ApiError(0, type(exc).__name__, str(exc) or "watch stream broken") from exc
                if not line:
                    return
                line = line.strip()
                if not line:
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    raise ApiError.from_status(int(event.get("object", {}).get("code") or 500), event["object"])
                yield event
        finally:
            response.release()

    async def create(self, resource: Resource, obj: Obj, namespace: str | None = None, *,
                     field_manager: str | None = None) -> Obj:
        return await self.request("POST", resource.path(namespace), body=obj,
                                  query={"fieldManager": field_manager})

    async def apply(
        self,
        resource: Resource,
        obj: Obj,
        *,
        field_manager: str,
        force: bool = True,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        """Server-side apply of the whole intent; creates the object if it is missing."""
        meta = obj["metadata"]
        return await self.request(
            "PATCH", resource.path(meta.get("namespace"), meta["name"], subresource), body=obj,
            content_type=APPLY_PATCH,
            query={"fieldManager": field_manager, "force": "true" if force else None,
                   "dryRun": "All" if dry_run else None},
        )

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        content_type: str = MERGE_PATCH,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> Obj:
        return await self.request("PATCH", resource.path(namespace, name, subresource), body=patch,
                                  content_type=content_type, query={"fieldManager": field_manager})

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> Obj | None:
        """Deletes; with `uid` (and `resource_version`) as preconditions, never a newer object of the same name.

        Returns None when the object was already gone.
        """
        body: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        if preconditions:
            body["preconditions"] = preconditions
        if propagation_policy:
            body["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        try:
            return await self.request("DELETE", resource.path(namespace, name), body=body)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
