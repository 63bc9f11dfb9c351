"""A kubeconfig's credentials, kept current for a process that runs for weeks.

kubernetes_asyncio loads a kubeconfig's bearer token once. An exec plugin's or an OIDC provider's token expires
(an hour is common), and from then on every request answers 401: the watches retry forever and nothing says why.
Here the token is:
- refreshed before it expires: an exec plugin's `expirationTimestamp` or an OIDC id-token's `exp` is known, and the
  first request past `expiry - lead` (a fifth of the token's life, at most a minute) runs the plugin again;
- reloaded at once when the API server answers 401 (revoked, rotated, or with no expiry given): one reload at a
  time, at most one every `MIN_RELOAD_SECONDS`, and the refused request is sent once more with the new token;
- reported: after `window` seconds of 401s (or of 403s that deny the controller's identity) with no request going
  through, `healthy()` is False, so /readyz fails, and the log says why.

A ServiceAccount token file (in-cluster) is re-read by kubernetes_asyncio's own hook; only the health tracking
applies to it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import structlog

log = structlog.get_logger(__name__)

MAX_LEAD_SECONDS = 60.0
MIN_RELOAD_SECONDS = 1.0
UNHEALTHY_AFTER_SECONDS = 30.0


def denies_identity(status: int, message: str) -> bool:
    """A 401, or a 403 that refuses who we are (RBAC) rather than what we asked (a quota, Pod Security, a webhook)."""
    return status == 401 or (status == 403 and " cannot " in message and 'User "' in message)


def _expiry_of(loader: Any) -> float | None:
    expiry = getattr(loader, "exec_plugin_expiry", None)
    if isinstance(expiry, dt.datetime):
        return expiry.timestamp() if expiry.tzinfo else expiry.replace(tzinfo=dt.UTC).timestamp()
    return None


class Credentials:
    def __init__(self, loader: Any | None, configuration: Any, *, clock: Callable[[], float] = time.time,
                 window: float = UNHEALTHY_AFTER_SECONDS) -> None:
        self.loader = loader  # kubernetes_asyncio's KubeConfigLoader, None in-cluster
        self.configuration = configuration
        self.clock = clock
        self.window = window
        self.kind = self._kind()
        self.expires_at: float | None = None
        self.issued_at = clock()
        self.reloads = 0
        self._lock = asyncio.Lock()
        self._stale = False
        self._last_reload = 0.0
        self._failing_since: float | None = None  # first identity refusal with no success since
        self._why = ""
        if self.kind == "exec":
            self.expires_at = _expiry_of(loader)

    def _kind(self) -> str:
        user = getattr(self.loader, "_user", None) if self.loader is not None else None
        if not user:
            return "static"
        if "exec" in user:
            return "exec"
        if getattr(self.loader, "provider", None) == "oidc":
            return "oidc"
        return "static"

    @property
    def refreshable(self) -> bool:
        return self.kind in ("exec", "oidc")

    def install(self) -> None:
        """Runs `before_request` before every request (kubernetes_asyncio's refresh hook) when the token can be
        refreshed; an in-cluster token file keeps the library's own hook."""
        if self.refreshable:
            self.configuration.refresh_api_key_hook = self.before_request

    def due(self) -> bool:
        if self._stale:
            return True
        if self.expires_at is None:
            return False
        lead = min(MAX_LEAD_SECONDS, max(self.expires_at - self.issued_at, 0.0) / 5)
        return self.clock() >= self.expires_at - lead

    async def before_request(self, configuration: Any) -> None:
        if self.due():
            try:
                await self.reload()
            except Exception as exc:  # the request goes with the token it has; its answer says what follows
                self._why = f"the {self.kind} credentials could not be refreshed: {exc}"
                log.warning("credentials could not be refreshed", kind=self.kind, error=str(exc))

    async def reload(self) -> None:
        """Fetches a new token: one reload at a time, the others wait for it and use it."""
        async with self._lock:
            if not self.due() or self.clock() - self._last_reload < MIN_RELOAD_SECONDS:
                return
            self._last_reload = self.clock()
            loader: Any = self.loader
            if self.kind == "exec":
                if hasattr(loader, "exec_plugin_expiry"):
                    del loader.exec_plugin_expiry  # the library would keep a token it believes current
                await loader.load_from_exec_plugin()
                self.expires_at = _expiry_of(loader)
            elif self.kind == "oidc":
                provider = loader._user["auth-provider"]
                await loader._refresh_oidc(provider)
                await loader._load_oid_token()
            self.configuration.api_key["BearerToken"] = loader.token
            self.issued_at = self.clock()
            self._stale = False
            self.reloads += 1
            log.info("credentials refreshed", kind=self.kind,
                     expires_in=round(self.expires_at - self.clock(), 1) if self.expires_at else None)

    async def refused(self, status: int, message: str) -> bool:
        """Notes a refusal of our identity; True when a new token was loaded and the request may be sent again."""
        now = self.clock()
        if self._failing_since is None:
            self._failing_since = now
        self._why = f"{status}: {message[:200]}"
        if status != 401 or not self.refreshable:
            return False
        self._stale = True
        before = self.reloads
        try:
            await self.reload()
        except Exception as exc:  # the plugin failed: the request's 401 stands, and health says so in time
            log.warning("credentials could not be refreshed", kind=self.kind, error=str(exc))
            self._why = f"401 and the {self.kind} credentials could not be refreshed: {exc}"
            return False
        return self.reloads > before

    def succeeded(self) -> None:
        if self._failing_since is not None:
            log.info("the API server accepts our credentials again")
        self._failing_since = None

    def healthy(self) -> bool:
        if self._failing_since is None or self.clock() - self._failing_since < self.window:
            return True
        log.warning("not ready: the API server has refused our credentials", since_seconds=round(
            self.clock() - self._failing_since), last=self._why)
        return False
