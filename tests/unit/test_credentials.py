"""When credentials are refreshed and when the process reports them refused, on a clock the test moves (the
behaviour against the real API server is tests/integration/test_credentials.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from omenative.kube.credentials import Credentials, denies_identity

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class ExecLoader:
    """kubernetes_asyncio's loader as far as an exec user goes: each run hands out a token for `lifetime` s."""

    def __init__(self, clock: Clock, lifetime: float | None = 600.0) -> None:
        self._user = {"exec": {"command": "plugin"}}
        self.clock = clock
        self.lifetime = lifetime
        self.runs = 0
        self.fail = False
        self.token = ""
        self._issue()

    def _issue(self) -> None:
        self.runs += 1
        self.token = f"Bearer t{self.runs}"
        if self.lifetime is not None:
            self.exec_plugin_expiry = dt.datetime.fromtimestamp(self.clock() + self.lifetime, dt.UTC)

    async def load_from_exec_plugin(self) -> bool:
        if self.fail:
            raise RuntimeError("exec: process returned 1")
        if hasattr(self, "exec_plugin_expiry") and self.exec_plugin_expiry.timestamp() > self.clock():
            return True  # the library keeps a token it believes current
        self._issue()
        return True


class Configuration:
    def __init__(self) -> None:
        self.api_key: dict[str, Any] = {"BearerToken": "Bearer t1"}
        self.refresh_api_key_hook: Any = None


async def test_an_exec_token_is_refreshed_a_fifth_of_its_life_before_it_expires() -> None:
    clock = Clock()
    loader, config = ExecLoader(clock, lifetime=100.0), Configuration()
    creds = Credentials(loader, config, clock=clock)
    creds.install()
    assert config.refresh_api_key_hook == creds.before_request
    clock.now += 79
    await creds.before_request(config)
    assert loader.runs == 1
    clock.now += 1  # 20 s before the expiry
    await creds.before_request(config)
    assert loader.runs == 2 and config.api_key["BearerToken"] == "Bearer t2"


async def test_a_401_reloads_at_once_even_a_token_the_library_believes_current() -> None:
    clock = Clock()
    loader, config = ExecLoader(clock), Configuration()
    creds = Credentials(loader, config, clock=clock)
    assert await creds.refused(401, "Unauthorized") is True
    assert loader.runs == 2 and config.api_key["BearerToken"] == "Bearer t2"
    # A second 401 within a second does not run the plugin again: the reloads are paced.
    assert await creds.refused(401, "Unauthorized") is False and loader.runs == 2


async def test_sustained_refusal_is_unhealthy_after_the_window_and_a_success_heals_it() -> None:
    clock = Clock()
    loader, config = ExecLoader(clock), Configuration()
    creds = Credentials(loader, config, clock=clock, window=30)
    loader.fail = True
    assert await creds.refused(401, "Unauthorized") is False
    clock.now += 29
    await creds.before_request(config)  # a failing plugin does not fail the request before it is sent
    assert creds.healthy()
    clock.now += 2
    assert not creds.healthy()
    creds.succeeded()
    assert creds.healthy()


def test_only_refusals_of_our_identity_count() -> None:
    assert denies_identity(401, "Unauthorized")
    assert denies_identity(403, 'pods is forbidden: User "system:serviceaccount:a:b" cannot list resource "pods"')
    assert not denies_identity(403, 'pods "p" is forbidden: exceeded quota: q, requested: pods=1')
    assert not denies_identity(403, 'pods "p" is forbidden: violates PodSecurity "restricted:latest"')
    assert not denies_identity(404, "not found")
